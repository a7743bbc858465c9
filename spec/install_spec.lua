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

  it("writes the project's file in the current folder with --project, in each client's format", function()
    local project = home .. "/work"
    local files = {
      { id = "claude-code", file = ".mcp.json", key = "mcpServers", typed = true },
      { id = "cursor", file = ".cursor/mcp.json", key = "mcpServers" },
      { id = "vscode", file = ".vscode/mcp.json", key = "servers", typed = true },
      { id = "gemini", file = ".gemini/settings.json", key = "mcpServers" },
    }
    for _, c in ipairs(files) do
      local code, out, err = luamcp("install " .. c.id .. " ../demo --project")
      assert.are.equal(0, code, err)
      assert.truthy(out:find(project .. "/" .. c.file, 1, true), out)
      assert.are.same({ [c.key] = { demo = { command = LUAMCP, args = { "run", home .. "/demo" },
                                            type = c.typed and "stdio" or nil } } },
        cjson.decode(client.read_file(project .. "/" .. c.file)))
    end
    -- a project's file is for sharing: readable by all, unlike the user's
    local _, mode = sh("stat -c %a " .. quote(project .. "/.mcp.json"))
    assert.are.equal("644\n", mode)
    -- nothing under HOME but what the test put there
    assert.is_false(exists(home .. "/.claude.json"))
    assert.is_false(exists(home .. "/.cursor/mcp.json"))
    local code, _, err = luamcp("install claude-desktop ../demo --project")
    assert.are.equal(2, code)
    assert.truthy(err:find("Claude Desktop has no project configuration", 1, true), err)
  end)

  it("writes a remote entry with --url in each client's format, headers and all", function()
    local url = "http://127.0.0.1:8080/mcp"
    local expected = {
      ["claude-code"] = { key = "mcpServers", entry = { type = "http", url = url } },
      cursor = { key = "mcpServers", entry = { url = url } },
      vscode = { key = "servers", entry = { type = "http", url = url } },
      gemini = { key = "mcpServers", entry = { httpUrl = url } },
    }
    for id, e in pairs(expected) do
      local code, out, err = luamcp("install " .. id .. " --url " .. url .. " --name notes --print")
      assert.are.equal(0, code, err)
      assert.are.same({ [e.key] = { notes = e.entry } }, cjson.decode(out))
    end
    local code, _, err = luamcp("install claude-code --url " .. url
      .. " --name notes --header 'Authorization: Bearer ${NOTES_TOKEN}' --header 'X-Team: blue' --project")
    assert.are.equal(0, code, err)
    assert.are.same({ mcpServers = { notes = { type = "http", url = url,
      headers = { Authorization = "Bearer ${NOTES_TOKEN}", ["X-Team"] = "blue" } } } },
      cjson.decode(client.read_file(elsewhere .. "/.mcp.json")))
    -- the name comes from the scripts when PATH is given too
    local out
    code, out, err = luamcp("install cursor ../demo --url " .. url .. " --print")
    assert.are.equal(0, code, err)
    assert.are.same({ mcpServers = { demo = { url = url } } }, cjson.decode(out))
    code, _, err = luamcp("install claude-desktop --url " .. url .. " --name notes")
    assert.are.equal(2, code)
    assert.truthy(err:find("Settings > Connectors", 1, true), err)
    code, _, err = luamcp("install cursor --url " .. url)
    assert.are.equal(2, code)
    assert.truthy(err:find("--url needs --name NAME", 1, true), err)
    code, _, err = luamcp("install cursor --url ftp://x --name n")
    assert.are.equal(2, code)
    assert.truthy(err:find("--url needs an http:// or https:// URL", 1, true), err)
  end)

  it("writes an entry that runs luamcp dev with --dev", function()
    local code, out, err = luamcp("install cursor ../demo --dev --print")
    assert.are.equal(0, code, err)
    assert.are.same({ mcpServers = { demo = { command = LUAMCP, args = { "dev", home .. "/demo" } } } },
      cjson.decode(out))
    assert.are.equal(0, luamcp("build ../demo -o ../demo-server"))
    code, _, err = luamcp("install cursor ../demo-server --dev")
    assert.are.equal(1, code)
    assert.truthy(err:find("--dev reloads scripts", 1, true), err)
  end)

  it("takes an entry out with luamcp uninstall, keeping the rest and a backup", function()
    local path = home .. "/.cursor/mcp.json"
    assert(os.execute("mkdir -p " .. quote(home .. "/.cursor")))
    local before = '{"theme": "dark", "mcpServers": {"first": {"command": "a"}, "demo": {"command": "old"},'
      .. ' "last": {"command": "b"}}}'
    client.write_file(path, before)
    local code, out, err = luamcp("uninstall cursor demo")
    assert.are.equal(0, code, err)
    assert.truthy(out:find('Removed "demo" from Cursor: ' .. path, 1, true), out)
    assert.are.equal(before, client.read_file(path .. ".bak"))
    local after = client.read_file(path)
    assert.are.same({ theme = "dark", mcpServers = { first = { command = "a" }, last = { command = "b" } } },
      cjson.decode(after))
    assert.truthy(after:find('"first".*"last"'), after)
    code, _, err = luamcp("uninstall cursor demo")
    assert.are.equal(1, code)
    assert.truthy(err:find(path .. ' has no server "demo" in its "mcpServers": nothing to take out', 1, true), err)
    assert.are.equal(after, client.read_file(path))
    -- the project's file with --project
    assert.are.equal(0, luamcp("install vscode ../demo --project"))
    code, _, err = luamcp("uninstall vscode demo --project")
    assert.are.equal(0, code, err)
    assert.are.same({ servers = {} }, cjson.decode(client.read_file(elsewhere .. "/.vscode/mcp.json")))
    code, _, err = luamcp("uninstall cursor")
    assert.are.equal(2, code)
    assert.truthy(err:find("uninstall needs a CLIENT and the NAME of an entry", 1, true), err)
  end)

  it("warns when a required mcp.server{config} setting is given no value", function()
    assert(os.execute("mkdir -p " .. quote(home .. "/weather")))
    client.write_file(home .. "/weather/main.lua", [[
local mcp = require "mcp"
mcp.server { name = "weather", config = {
  api_key = { type = "string", title = "API key", description = "From example.com/keys", required = true },
  units = { type = "string", title = "Units", description = "metric or imperial", default = "metric" },
} }
]])
    local code, _, err = luamcp("install cursor ../weather")
    assert.are.equal(0, code, err)
    assert.truthy(err:find('warning: no value for the required setting API_KEY (config api_key "API key")', 1, true), err)
    assert.truthy(err:find("luamcp install cursor ../weather --env API_KEY=VALUE", 1, true), err)
    assert.falsy(err:find("UNITS", 1, true), err)
    code, _, err = luamcp("install cursor ../weather --env API_KEY=k-123")
    assert.are.equal(0, code, err)
    assert.falsy(err:find("warning", 1, true), err)
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
