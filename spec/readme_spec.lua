-- The README's quick start is true: every command in its shell blocks
-- (marked <!-- runnable: quick-start -->, spec/helpers/guides.lua) runs, in a scratch folder with a scratch HOME (so `luamcp install`
-- touches nothing real), and what a comment says a command prints, it
-- prints. `make` is left out: make test has just run it.

local client = require "mcp_client"
local guides = require "guides"

local sh = client.sh
local ROOT = io.popen("pwd"):read("l")

local function quick_start_commands()
  local commands = {}
  for _, block in ipairs(guides.blocks("README.md", "quick-start")) do
    for line in block:gmatch("[^\n]+") do
      local command, comment = line:match("^(.-)%s*#%s*(.*)$")
      command = command or line
      if command ~= "" and command ~= "make" and not command:match("^make%s") then
        commands[#commands + 1] = { command = command, prints = comment and comment:match('prints "([^"]+)"') }
      end
    end
  end
  return commands
end

-- This PATH without the folders that hold a luamcp: the quick start is
-- for a machine where luamcp is not installed yet.
local function path_without_luamcp()
  local kept = {}
  for folder in (os.getenv("PATH") or "/usr/bin:/bin"):gmatch("[^:]+") do
    local f = io.open(folder .. "/luamcp")
    if f then f:close() else kept[#kept + 1] = folder end
  end
  return table.concat(kept, ":")
end

describe("the README's quick start", function()
  it("runs as written, with no luamcp on PATH", function()
    local commands = quick_start_commands()
    assert.is_true(#commands >= 3)
    local path = path_without_luamcp()
    assert.are_not.equal(0, (sh(("PATH=%q command -v luamcp"):format(path))))
    local dir = client.temp_dir()
    -- The commands name build/luamcp and scripts/ from the top of the tree.
    assert(os.execute(("ln -s %q %q && ln -s %q %q"):format(ROOT .. "/build", dir .. "/build", ROOT .. "/scripts",
      dir .. "/scripts")))
    for _, c in ipairs(commands) do
      local code, out, err = sh(("cd %q && export HOME=%q PATH=%q && %s </dev/null"):format(dir, dir, path, c.command))
      assert.are.equal(0, code, c.command .. "\n" .. out .. err)
      if c.prints then assert.truthy(out:find(c.prints, 1, true), c.command .. " printed:\n" .. out) end
    end
    client.remove_tree(dir)
  end)
end)

-- What the README and the guides say about the command line and the test
-- client is what the program does (issue #30, item 9).
describe("the README's reference", function()
  local readme = client.read_file("README.md")
  local command_line = client.read_file("docs/command-line.md")
  local writing = client.read_file("docs/writing-tools.md")
  local lua_api = client.read_file("docs/lua-api.md")
  local LUAMCP = client.LUAMCP

  -- The options of `luamcp --help` under a heading ("Options:", ...), by heading.
  local function help_options()
    local _, help = sh(LUAMCP .. " --help")
    local sections, current = {}, nil
    for line in help:gmatch("[^\n]*") do
      if line:match("^%S.*:") then
        current = line
        sections[current] = sections[current] or {}
      elseif current then
        local option = line:match("^  (%-%-%l[%l%-]*)")
        if option then table.insert(sections[current], option) end
      end
    end
    return sections
  end

  it("has every option luamcp --help lists in the command line guide, and the general ones in its table", function()
    local command_table = command_line:match("^# Command line\n+```\n(.-)```")
    assert.truthy(command_table, "docs/command-line.md does not open with its command table")
    local sections = help_options()
    assert.truthy(sections["Options:"] and #sections["Options:"] >= 8, "luamcp --help has no Options: section")
    local guides_text = {}
    for _, file in ipairs(guides.files()) do guides_text[#guides_text + 1] = client.read_file(file) end
    guides_text = table.concat(guides_text, "\n")
    for heading, options in pairs(sections) do
      for _, option in ipairs(options) do
        assert.truthy(guides_text:find(option, 1, true), option .. " (" .. heading .. ") is in no guide")
      end
    end
    for _, option in ipairs(sections["Options:"]) do
      assert.truthy(command_table:find(option, 1, true), option .. " is not in docs/command-line.md's table")
    end
    assert.truthy(command_table:find("--max-tasks N", 1, true))
  end)

  it("lists every command luamcp --help lists, on the landing page and in the command line guide", function()
    local readme_list = readme:match("\n## Command line\n+```\n(.-)```")
    assert.truthy(readme_list, "README.md has no command list under ## Command line")
    local command_table = command_line:match("```\n(.-)```")
    local _, help = sh(LUAMCP .. " --help")
    local listed = 0
    for command in help:gmatch("\n  luamcp (%l+) ") do
      listed = listed + 1
      assert.truthy(readme_list:find("luamcp " .. command .. " ", 1, true),
        "luamcp " .. command .. " is not in the README's command list")
      assert.truthy(command_table:find("luamcp " .. command .. " ", 1, true),
        "luamcp " .. command .. " is not in docs/command-line.md's table")
    end
    assert.is_true(listed >= 6, help)
  end)

  it("names the option that lists busted's options, and it works", function()
    assert.truthy(writing:find("luamcp test --help-busted", 1, true))
    local code, out, err = sh(LUAMCP .. " test --help-busted")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("^Usage: luamcp test "), out)
    assert.truthy(out:find("--pattern", 1, true), out)
    assert.are.equal("", err)
  end)

  it("documents testing.null, testing.json, mcp.rpc_error, mcp.tool_error, mask_errors and args", function()
    for _, name in ipairs { "testing.null", "testing.json", "t:list(\"tools\")" } do
      assert.truthy(writing:find(name, 1, true), name .. " is not in docs/writing-tools.md")
    end
    for _, name in ipairs { "mcp.rpc_error(", "mcp.tool_error(", "mask_errors", "mcp.arg(", "mcp.enum" } do
      assert.truthy(lua_api:find(name, 1, true), name .. " is not in docs/lua-api.md")
    end
    -- structuredContent is an object: a list returned has none, and the reference says so
    assert.truthy(lua_api:find("| a list (keys exactly `1..n`", 1, true))
  end)

  it("is right that t:tools() is a map by name and t:list(\"tools\") the list", function()
    assert.truthy(writing:find("as a map by name", 1, true))
    local dir = client.temp_dir()
    assert(os.execute("mkdir " .. dir .. "/spec"))
    client.write_file(dir .. "/server.lua", 'local mcp = require "mcp"\n'
      .. 'mcp.tool { name = "add", args = { a = "integer", b = "integer" }, handler = function(x) return x.a + x.b end }\n'
      .. 'mcp.tool { name = "nothing", handler = function() return { none = mcp.null, list = {1, 2} } end }\n')
    client.write_file(dir .. "/spec/readme_spec.lua", [[
local testing = require "mcp.testing"
describe("the README", function()
  it("is right", function()
    local t = testing.server(".")
    local tools = t:tools()
    assert.equal(0, #tools)
    assert.equal("integer", tools.add.inputSchema.properties.a.type)
    assert.equal("add", t:list("tools")[1].name)
    local r = t:call("nothing")
    assert.equal(testing.null, r.structuredContent.none)
    assert.same({ 1, 2 }, testing.json.decode(testing.json.encode(r.structuredContent.list)))
    assert.equal("3", testing.text(t:call("add", { a = 1, b = 2 })))
    t:close()
  end)
end)
]])
    local program = LUAMCP:sub(1, 1) == "/" and LUAMCP or (ROOT .. "/" .. LUAMCP)
    local code, out, err = sh(("cd %q && %s test"):format(dir, program))
    client.remove_tree(dir)
    assert.are.equal(0, code, out .. err)
    assert.truthy(out:find("1 success / 0 failures", 1, true), out)
  end)
end)

-- The OAuth recipe (docs/authorization.md, "A working setup with a real
-- authorization server", marked <!-- runnable: oauth-recipe -->) runs as written in one shell, the
-- authorization server in the background (issue #41, item 9). Its fixed
-- ports and key folder become ones of this run; `make test-tools` is
-- left out (make test has just installed the tools) but must exist.
describe("the README's OAuth recipe", function()
  local services = require "services"

  local function recipe()
    local blocks = guides.blocks("docs/authorization.md", "oauth-recipe")
    assert.are.equal(2, #blocks)
    return table.concat(blocks)
  end

  it("works from a fresh clone's tools, the authorization server in the background", function()
    local text = recipe()
    assert.truthy(text:find("^make test%-tools "), text)
    -- -B: the commands whether or not the tools are already installed
    local code, out = sh("make -nB test-tools")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("npm ci", 1, true), out)
    assert.truthy(text:find("spec/node_modules/", 1, true))
    local dir = client.temp_dir()
    local as_port, mcp_port = services.free_port(), services.free_port()
    text = text:gsub("/tmp/as%-keys", dir .. "/as-keys"):gsub("9400", tostring(as_port)):gsub("8080", tostring(mcp_port))
    -- What a person does by reading the output before the next command:
    -- wait for a server started in the background to listen.
    local lines = {
      "trap 'kill $(jobs -p) 2>/dev/null; wait' EXIT",
      "wait_port() { for _ in $(seq 1200); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return 0; sleep 0.1; done; "
        .. "echo \"nothing listens on $1\"; exit 1; }",
    }
    for line in text:gmatch("[^\n]+") do
      if not line:match("^make ") then
        lines[#lines + 1] = line
        if line:match("&%s*$") then
          local port = line:match('"port":(%d+)') or line:match("%-%-http [%d.:]-(%d+)%s")
          assert.truthy(port, "no port in " .. line)
          lines[#lines + 1] = "wait_port " .. port
        end
      end
    end
    client.write_file(dir .. "/recipe.sh", table.concat(lines, "\n") .. "\n")
    local out, err
    code, out, err = sh(("bash %q"):format(dir .. "/recipe.sh"))
    client.remove_tree(dir)
    assert.are.equal(0, code, out .. err)
    -- the 401 that starts a client's discovery, the metadata naming the
    -- authorization server, and the call with the token it issued
    assert.truthy(out:find("HTTP/1.1 401", 1, true), out .. err)
    assert.truthy(out:lower():find("www-authenticate: bearer resource_metadata=", 1, true), out .. err)
    assert.truthy(out:find(('"authorization_servers":["http://127.0.0.1:%d"]'):format(as_port), 1, true), out .. err)
    assert.truthy(out:find('"text":"5"', 1, true), out .. err)
  end)
end)

-- The figures the README and the guides quote: spec/guides_spec.lua.
