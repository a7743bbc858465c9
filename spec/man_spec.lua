-- The manual page (runtime/cli/man/luamcp.1) and `make install`: the page
-- renders without warnings and covers every command and option the program
-- itself lists; make install puts the program, the page and the LuaLS
-- definitions under DESTDIR/PREFIX, and make uninstall takes them away.

local client = require "mcp_client"

local sh = client.sh

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local PAGE = "runtime/cli/man/luamcp.1"

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- The page as man shows it, wide enough that no option is hyphenated
-- across lines.
local function rendered(command)
  local code, out, err = sh("MANWIDTH=200 " .. command)
  assert.are.equal(0, code, err)
  return out
end

describe("the manual page", function()
  it("renders without a warning", function()
    local code, out, err = sh("groff -man -ww -z -Tutf8 " .. PAGE)
    assert.are.equal(0, code, err)
    assert.are.equal("", out .. err)
    local page = rendered("man -l " .. PAGE)
    assert.truthy(page:find("^LUAMCP%(1%)"), page)
  end)

  it("describes every command luamcp --help lists, and every option of each", function()
    local page = rendered("man -l " .. PAGE)
    local commands = page:match("\nCOMMANDS\n(.-)\n%u")
    assert.is_truthy(commands, page)
    local _, help = sh(LUAMCP .. " --help")
    local listed = 0
    for cmd in help:gmatch("\n  luamcp (%l+) ") do
      listed = listed + 1
      assert.truthy(commands:find("\n       " .. cmd .. " ", 1, true) or commands:find("^       " .. cmd .. " "),
        cmd .. " is not in the page's COMMANDS")
      local _, usage = sh(LUAMCP .. " " .. cmd .. " --help")
      for option in usage:gmatch("%s(%-%-%l[%l%-]*)") do
        assert.truthy(page:find(option, 1, true), "luamcp " .. cmd .. " " .. option .. " is not in the page")
      end
    end
    assert.is_true(listed >= 6, help)
  end)
end)

describe("make install", function()
  it("installs the program, its page and the LuaLS definitions under DESTDIR, and make uninstall removes them", function()
    local dest = client.temp_dir()
    local code, out, err = sh("make -s install DESTDIR=" .. quote(dest) .. " PREFIX=/usr/local")
    assert.are.equal(0, code, out .. err)
    local prefix = dest .. "/usr/local"
    local version
    code, version = sh(quote(prefix .. "/bin/luamcp") .. " --version")
    assert.are.equal(0, code)
    assert.truthy(version:find("^luamcp %d+%.%d+%.%d+"), version)
    -- man finds the page by name where it was installed
    local page = rendered("man -M " .. quote(prefix .. "/share/man") .. " luamcp")
    assert.truthy(page:find("^LUAMCP%(1%)"), page)
    for _, meta in ipairs { "mcp.lua", "mcp_testing.lua" } do
      assert.are.equal(client.read_file("lua/meta/" .. meta), client.read_file(prefix .. "/share/luamcp/meta/" .. meta))
    end

    code, out, err = sh("make -s uninstall DESTDIR=" .. quote(dest) .. " PREFIX=/usr/local")
    assert.are.equal(0, code, out .. err)
    for _, file in ipairs { "/bin/luamcp", "/share/man/man1/luamcp.1", "/share/luamcp/meta/mcp.lua",
      "/share/luamcp/meta/mcp_testing.lua" } do
      assert.is_nil(io.open(prefix .. file), file)
    end
    client.remove_tree(dest)
  end)
end)
