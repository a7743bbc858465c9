-- luamcp install CLIENT PATH: an entry in each client's own configuration
-- file, under a scratch HOME (never the real one), run from another
-- directory with a relative PATH, as a person would.

local client = require "mcp_client"
local cjson = client.json

local sh = client.sh

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Each client, where it keeps its user-wide servers, under which key, and
-- whether its entries say "type": "stdio".
local CLIENTS = {
  { id = "claude-desktop", file = ".config/Claude/claude_desktop_config.json", key = "mcpServers" },
  { id = "claude-code", file = ".claude.json", key = "mcpServers", typed = true },
  { id = "cursor", file = ".cursor/mcp.json", key = "mcpServers" },
  { id = "vscode", file = ".config/Code/User/mcp.json", key = "servers", typed = true },
  { id = "gemini", file = ".gemini/settings.json", key = "mcpServers" },
}

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

describe("luamcp install", function()
  local home, elsewhere

  -- Run luamcp from elsewhere/ with HOME=home; XDG_CONFIG_HOME unset
  -- unless given.
  local function luamcp(args, env)
    return sh(("cd %s && env -u XDG_CONFIG_HOME HOME=%s %s %s %s"):format(quote(elsewhere), quote(home), env or "",
      quote(LUAMCP), args))
  end

  before_each(function()
    home = client.temp_dir()
    elsewhere = home .. "/work"
    assert(os.execute("mkdir -p " .. quote(elsewhere) .. " && cp -r " .. quote(DEMO) .. " " .. quote(home .. "/demo")))
  end)

  after_each(function() client.remove_tree(home) end)

  for _, c in ipairs(CLIENTS) do
    it("writes a " .. c.id .. " entry that runs `luamcp run` with the absolute path, and again changes nothing", function()
      local code, out, err = luamcp("install " .. c.id .. " ../demo")
      assert.are.equal(0, code, err)
      local path = home .. "/" .. c.file
      assert.truthy(out:find(path, 1, true), out)
      local first = client.read_file(path)
      local config = cjson.decode(first)
      local entry = {
        command = LUAMCP, args = { "run", home .. "/demo" }, type = c.typed and "stdio" or nil,
      }
      assert.are.same({ [c.key] = { demo = entry } }, config)
      assert.truthy(first:find('^{\n  "' .. c.key .. '": {\n    "demo": {\n      "'), first) -- 2-space indent
      assert.is_false(exists(path .. ".bak"), "no backup of a file that did not exist")

      code, out, err = luamcp("install " .. c.id .. " " .. quote(home .. "/demo"))
      assert.are.equal(0, code, err)
      assert.truthy(out:find("unchanged", 1, true), out)
      assert.are.equal(first, client.read_file(path))
      assert.is_false(exists(path .. ".bak"))
    end)
  end

  it("keeps the other keys and servers in their order, replaces its own entry, and keeps a backup", function()
    local path = home .. "/.cursor/mcp.json"
    assert(os.execute("mkdir -p " .. quote(home .. "/.cursor")))
    local before = '{"theme": "dark", "mcpServers": {"first": {"command": "a"}, "demo": {"command": "old"},'
      .. ' "last": {"command": "b", "args": []}}, "ratio": 1.50, "name": "caf\\u00e9", "z": [true, null, {}]}'
    client.write_file(path, before)
    local code, out, err = luamcp("install cursor ../demo")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("Replaced", 1, true), out)
    assert.are.equal(before, client.read_file(path .. ".bak"))
    local after = client.read_file(path)
    local config = cjson.decode(after)
    assert.are.same({ command = LUAMCP, args = { "run", home .. "/demo" } }, config.mcpServers.demo)
    assert.are.same({ command = "b", args = {} }, config.mcpServers.last)
    assert.are.equal("dark", config.theme)
    -- Order and spelling are as they were: only whitespace and the entry changed.
    local at = {}
    for _, key in ipairs { '"theme"', '"mcpServers"', '"first"', '"demo"', '"last"', '"ratio": 1.50', '"name": "caf\\u00e9"',
                           '"z"' } do
      at[#at + 1] = assert(after:find(key, 1, true), key .. " missing\n" .. after)
    end
    for i = 2, #at do assert.is_true(at[i] > at[i - 1], after) end
    local _, count = after:gsub('"demo"', "")
    assert.are.equal(1, count, after)

    -- A second server beside it, then the first again: nothing duplicated.
    code = luamcp("install cursor ../demo --name other --env TOKEN=x --env MODE=a --env TOKEN=y")
    assert.are.equal(0, code)
    code = luamcp("install cursor ../demo")
    assert.are.equal(0, code)
    config = cjson.decode(client.read_file(path))
    assert.are.same({ TOKEN = "y", MODE = "a" }, config.mcpServers.other.env)
    local names = {}
    for name in client.read_file(path):gmatch('\n    "([^"]+)": {') do names[#names + 1] = name end
    assert.are.same({ "first", "demo", "last", "other" }, names)
  end)

  it("refuses a file that is not valid JSON and leaves it untouched", function()
    local path = home .. "/.gemini/settings.json"
    assert(os.execute("mkdir -p " .. quote(home .. "/.gemini")))
    local broken = '{\n  "theme": "x", // a comment\n}\n'
    client.write_file(path, broken)
    local code, _, err = luamcp("install gemini ../demo")
    assert.are.equal(1, code)
    assert.truthy(err:find(path .. " is not valid JSON (line 2, column 17", 1, true), err)
    assert.truthy(err:find("--print", 1, true), err)
    assert.are.equal(broken, client.read_file(path))
    assert.is_false(exists(path .. ".bak"))
    -- and a file whose servers are not an object
    client.write_file(path, '{"mcpServers": []}')
    code, _, err = luamcp("install gemini ../demo")
    assert.are.equal(1, code)
    assert.truthy(err:find('"mcpServers" is a JSON array, not an object', 1, true), err)
    assert.are.equal('{"mcpServers": []}', client.read_file(path))
  end)

  it("prints the entry with --print and writes nothing", function()
    local code, out, err = luamcp("install vscode ../demo --print --env KEY=value")
    assert.are.equal(0, code, err)
    assert.are.same({ servers = { demo = { type = "stdio", command = LUAMCP, args = { "run", home .. "/demo" },
                                           env = { KEY = "value" } } } }, cjson.decode(out))
    assert.truthy(err:find(home .. "/.config/Code/User/mcp.json", 1, true), err)
    assert.is_false(exists(home .. "/.config"))
  end)

  it("names the entry after mcp.server{name}, else the folder", function()
    assert(os.execute("mkdir -p " .. quote(home .. "/weather")))
    client.write_file(home .. "/weather/main.lua", 'local mcp = require "mcp"\n')
    local _, out = luamcp("install cursor ../weather --print")
    assert.is_truthy(cjson.decode(out).mcpServers.weather, out)
    client.write_file(home .. "/weather/main.lua", 'local mcp = require "mcp"\nmcp.server { name = "forecast" }\n')
    _, out = luamcp("install cursor ../weather --print")
    assert.is_truthy(cjson.decode(out).mcpServers.forecast, out)
  end)

  it("installs a program made by luamcp build as it is, without run", function()
    local code, _, err = luamcp("build ../demo -o ../demo-server")
    assert.are.equal(0, code, err)
    code, _, err = luamcp("install claude-code ../demo-server")
    assert.are.equal(0, code, err)
    local config = cjson.decode(client.read_file(home .. "/.claude.json"))
    assert.are.same({ demo = { type = "stdio", command = home .. "/demo-server" } }, config.mcpServers)
  end)

  it("finds Claude Desktop's and VS Code's folders under XDG_CONFIG_HOME", function()
    local code, _, err = luamcp("install claude-desktop ../demo", "XDG_CONFIG_HOME=" .. quote(home .. "/xdg"))
    assert.are.equal(0, code, err)
    assert.is_true(exists(home .. "/xdg/Claude/claude_desktop_config.json"))
  end)

  it("installs nothing for scripts that do not load, and explains its usage", function()
    local code, _, err = luamcp("install cursor " .. quote(io.popen("readlink -f spec/fixtures/build_broken"):read("l")))
    assert.are.equal(1, code)
    assert.truthy(err:find("broken.lua:4:", 1, true), err)
    assert.is_false(exists(home .. "/.cursor"))
    code, _, err = luamcp("install nobody ../demo")
    assert.are.equal(2, code)
    assert.truthy(err:find("unknown client nobody (one of claude-desktop, claude-code, cursor, vscode, gemini)", 1, true),
      err)
    code, _, err = luamcp("install cursor ../demo --env NOEQUALS")
    assert.are.equal(2, code)
    assert.truthy(err:find("luamcp install --help", 1, true), err)
    local out
    code, out = luamcp("install --help")
    assert.are.equal(0, code)
    assert.truthy(out:find("Usage: luamcp install CLIENT PATH", 1, true), out)
  end)
end)
