-- Loading the scripts has a deadline too (--load-timeout): a script whose
-- top level never ends must not freeze the server, at start or at a reload.

local client = require "mcp_client"

local GOOD = [[
local mcp = require "mcp"
mcp.tool { name = "version", handler = function() return "v1" end }
]]
local LOOPING = [[
local mcp = require "mcp"
mcp.tool { name = "version", handler = function() return "v2" end }
while true do pcall(function() while true do end end) end
]]

local function save(path, text)
  client.write_file(path .. ".tmp", text)
  assert(os.rename(path .. ".tmp", path))
end

describe("loading the scripts", function()
  local dir
  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  it("is stopped at its deadline at start: luamcp exits with the error", function()
    save(dir .. "/tools.lua", LOOPING)
    local server = client.spawn { "run", "--load-timeout", "300", dir }
    local code = server:wait_exit(30000)
    if not server.exited then server:kill("sigkill") end
    server:close()
    assert.is_true(server.exited, "luamcp still loading after 30 s")
    assert.are_not.equal(0, code)
    assert.truthy(server.stderr:find("exceeded their time limit of 300 ms", 1, true), server.stderr)
    assert.truthy(server.stderr:find("tools.lua:3", 1, true), server.stderr) -- names the script and line
  end)

  it("is stopped at its deadline at a reload; the old generation keeps serving and SIGTERM works", function()
    save(dir .. "/tools.lua", GOOD)
    local server = client.spawn { "run", "--load-timeout", "300", dir }
    server:initialize()
    assert.are.equal("v1", server:call_tool("version", {}).content[1].text)
    save(dir .. "/tools.lua", LOOPING)
    server:kill("sighup")
    -- The failed reload is reported to the client, and v1 still answers.
    assert.is_true(client.wait_until(function()
      server:request("ping", nil, 1000)
      for _, n in ipairs(server:notifications_named("notifications/message")) do
        if tostring(n.params.data):find("reload failed", 1, true) then return true end
      end
      return false
    end, 30000), "no reload failure reported:\n" .. server.stderr)
    assert.truthy(server.stderr:find("exceeded their time limit of 300 ms", 1, true), server.stderr)
    assert.are.equal("v1", server:call_tool("version", {}).content[1].text)
    server:kill("sigterm")
    server:wait_exit(30000)
    assert.is_true(server.exited, "SIGTERM did not stop luamcp")
    server:close()
  end)
end)
