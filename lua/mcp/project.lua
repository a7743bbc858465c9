-- mcp.project: `luamcp init DIR`, a new server project: a tool, a resource
-- and a prompt, a spec for them with mcp.testing, editor settings, and a
-- README that says how to run, call, test and install it.

local core = require "luamcp.client"

local M = {}

local SERVER = [[
-- %s: an MCP server written in Lua, served by luamcp.
--   luamcp dev .                  serve it, reloading on every save
--   luamcp call . greet name=Ada  call a tool from the shell
--   luamcp test                   run spec/
local mcp = require "mcp"

mcp.server { name = %q, version = "0.1.0" }

mcp.tool {
  name = "greet", description = "Say hello to someone",
  -- One line per argument: "string" is required, "string?" optional,
  -- "integer 1..10" bounded, {"string"} a list, mcp.enum{"a", "b"} a choice,
  -- "-- text" describes it. inputSchema = {...} takes full JSON Schema instead.
  args = {
    name = "string -- Who to greet",
    excited = mcp.arg("boolean", "End with an exclamation mark", { default = true }),
  },
  handler = function(args, ctx)
    ctx:log("info", "greeting " .. args.name)
    return "Hello, " .. args.name .. (args.excited and "!" or ".")
  end,
}

mcp.resource {
  uri = "info://about", name = "about", mimeType = "text/plain",
  description = "What this server is",
  read = function() return %q end,
}

mcp.prompt {
  name = "introduce", description = "Ask the model to introduce someone",
  arguments = { { name = "name", description = "Who", required = true } },
  get = function(args)
    return "Write a two-sentence introduction of " .. args.name .. "."
  end,
}
]]

local SPEC = [[
-- Run with: luamcp test
-- mcp.testing serves the project in this process, over the real protocol.
local testing = require "mcp.testing"

describe("%s", function()
  local t
  before_each(function() t = testing.server(".") end)
  after_each(function() t:close() end)

  it("greets", function()
    local result = t:call("greet", { name = "Ada" })
    assert.is_falsy(result.isError)
    assert.equal("Hello, Ada!", testing.text(result))
    assert.equal("Hello, Ada.", testing.text(t:call("greet", { name = "Ada", excited = false })))
  end)

  it("refuses a call without a name", function()
    local result = t:call("greet", {})
    assert.is_true(result.isError)
  end)

  it("serves its resource and prompt", function()
    assert.truthy(testing.text(t:read("info://about")):find("luamcp", 1, true))
    local prompt = t:prompt("introduce", { name = "Ada" })
    assert.truthy(testing.text(prompt):find("Ada", 1, true))
  end)
end)
]]

local README = [[
# %s

An MCP server written in Lua, served by luamcp.

```sh
luamcp dev .                    # serve on stdio, reloading on every save
luamcp inspect .                # what it serves
luamcp call . greet name=Ada    # call a tool from the shell
luamcp test                     # run the specs in spec/ (mcp.testing)
luamcp install claude-desktop . # add it to Claude Desktop (also claude-code, cursor, vscode, gemini)
```

Or add it to any MCP client by hand:

```json
{ "mcpServers": { "%s": { "command": "luamcp", "args": ["run", "%s"] } } }
```

Editors: `.luarc.json` points lua-language-server at luamcp's type definitions.
]]

-- Where luamcp's LuaLS definitions are: installed beside the program
-- (PREFIX/share/luamcp/meta) or in the source tree it was built in.
local function meta_dir()
  local exe = core.executable()
  if not exe then return nil end
  local bin = exe:match("^(.*)/[^/]*$") or "."
  for _, dir in ipairs { bin .. "/../share/luamcp/meta", bin .. "/../lua/meta" } do
    if core.exists(dir .. "/mcp.lua") == "file" then return core.realpath(dir) end
  end
  return nil
end

local function shell_word(s)
  if s:find("^[%w/._+-]+$") then return s end
  return "'" .. s:gsub("'", "'\\''") .. "'"
end

--- How the user runs this luamcp from inside dir, as a shell word:
--- "luamcp" when that is what PATH finds, else its path from dir
--- ("../build/luamcp" after `build/luamcp init hello`), or its absolute
--- path when that reads better than a climb of more than two folders.
local function luamcp_command(dir)
  local exe = core.executable()
  if not exe then return "luamcp" end
  for folder in (os.getenv("PATH") or ""):gmatch("[^:]+") do
    local candidate = folder .. "/luamcp"
    if core.exists(candidate) == "file" and core.realpath(candidate) == exe then return "luamcp" end
  end
  local from = core.realpath(dir)
  if not from then return shell_word(exe) end
  local a, b = {}, {}
  for part in from:gmatch("[^/]+") do a[#a + 1] = part end
  for part in exe:gmatch("[^/]+") do b[#b + 1] = part end
  local same = 1
  while a[same] and b[same] and a[same] == b[same] and same < #b do same = same + 1 end
  local ups = #a - same + 1
  if ups > 2 then return shell_word(exe) end
  return shell_word(("../"):rep(ups) .. table.concat(b, "/", same))
end

local function luarc(meta)
  local library = meta and ('\n  "workspace.library": [%s],'):format(require("mcp.client").json.encode(meta)) or ""
  return ([[
{
  "runtime.version": "Lua 5.4",%s
  "diagnostics.globals": ["describe", "it", "before_each", "after_each", "setup", "teardown", "pending", "spy", "stub", "mock"]
}
]]):format(library)
end

local function write(path, text, fail)
  local f, err = io.open(path, "wb")
  if not f then fail("luamcp init: cannot write " .. err) end
  f:write(text)
  f:close()
  print("  " .. path)
end

--- Make the project in dir. fail(message) raises the command's failure.
function M.project(dir, name, fail)
  local kind = core.exists(dir)
  if kind and kind ~= "directory" then fail("luamcp init: " .. dir .. " exists and is not a folder") end
  if kind then
    for _, file in ipairs { "server.lua", "spec", "README.md", ".luarc.json" } do
      if core.exists(dir .. "/" .. file) then
        fail("luamcp init: " .. dir .. " already has " .. file .. "; pick a new folder")
      end
    end
  end
  local ok, err = core.mkdir(dir)
  if not ok then fail("luamcp init: " .. err) end
  ok, err = core.mkdir(dir .. "/spec")
  if not ok then fail("luamcp init: " .. err) end
  local absolute = core.realpath(dir)
  name = name or absolute:match("([^/]+)$") or "server"
  if not name:match("^[%w_.-]+$") then
    fail("luamcp init: " .. name .. " cannot name a server (letters, digits, _ . -); give --name", 2)
  end
  print("Made a new MCP server in " .. dir .. ":")
  write(dir .. "/server.lua", SERVER:format(name, name, name .. ": a server made by luamcp init"), fail)
  write(dir .. "/spec/server_spec.lua", SPEC:format(name), fail)
  local meta = meta_dir()
  write(dir .. "/.luarc.json", luarc(meta), fail)
  -- The project's README and the lines below name luamcp as the user can
  -- run it (not on PATH before `make install`: build/luamcp, say).
  local luamcp = luamcp_command(dir)
  local readme = README:format(name, name, absolute)
  if luamcp ~= "luamcp" then
    local command = ('"command": %q'):format(core.executable())
    readme = readme:gsub("\nluamcp ", function() return "\n" .. luamcp .. " " end)
      :gsub('"command": "luamcp"', function() return command end)
  end
  write(dir .. "/README.md", readme, fail)
  write(dir .. "/.luamcpignore", "# left out of `luamcp build` (patterns as in .gitignore)\nspec/\nREADME.md\ndist/\n", fail)
  if not meta then
    print("(luamcp's type definitions were not found beside this luamcp; `make install` puts them in "
      .. "PREFIX/share/luamcp/meta)")
  end
  print(("\nNext:\n  cd %s\n  %s test\n  %s call . greet name=Ada\n  %s dev ."):format(shell_word(dir), luamcp, luamcp,
    luamcp))
  if luamcp ~= "luamcp" then
    print("(luamcp is not on your PATH: `make install PREFIX=~/.local` in luamcp's source puts it in ~/.local/bin)")
  end
  return 0
end

return M
