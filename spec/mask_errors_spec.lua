-- mcp.server{mask_errors = true}: a tool's internal error (a Lua error, a
-- result with no JSON form, one its outputSchema refuses) reaches the
-- client as a generic message with a reference id, and the details go to
-- the log under that id. Errors meant for the client (mcp.tool_error,
-- mcp.rpc_error, `nil, message`, invalid arguments) pass as they are. Off,
-- the details reach the client as before.

local client = require "mcp_client"
local cjson = client.json

local SCRIPT = [[
local mcp = require "mcp"
mcp.server { name = "masked", mask_errors = %s }
mcp.tool { name = "boom", handler = function() error("cannot open /srv/secret/db.sqlite") end }
mcp.tool { name = "told", handler = function() mcp.tool_error("no note named " .. "x") end }
mcp.tool { name = "told_return", handler = function() return mcp.tool_error("try again later") end }
mcp.tool { name = "rpc", handler = function() mcp.rpc_error(-32602, "bad cursor", { why = "old" }) end }
mcp.tool { name = "nil_err", handler = function() return nil, "notes.txt: no such file" end }
mcp.tool { name = "unsendable", handler = function() return { f = function() end } end }
mcp.tool { name = "typed", args = { n = "integer" }, returns = { n = "integer" },
           handler = function(args) return { n = "secret " .. args.n } end }
mcp.resource { uri = "x://r", name = "r", read = function() error("resource secret") end }
mcp.prompt { name = "p", get = function() error("prompt secret") end }
]]

local function serve(mask)
  local dir = client.temp_dir()
  client.write_file(dir .. "/s.lua", SCRIPT:format(tostring(mask)))
  local server = client.spawn { "run", dir }
  server:initialize("2025-11-25")
  return server, dir
end

local function text_of(result) return result.content[1].text end

local REFERENCE = "%(reference (%x+)%)"

describe("mcp.server{mask_errors = true}", function()
  local server, dir
  before_each(function() server, dir = serve(true) end)
  after_each(function()
    server:close()
    client.remove_tree(dir)
  end)

  it("answers a Lua error with a reference id, and logs the message and traceback under it", function()
    local r = server:call_tool("boom", {})
    assert.is_true(r.isError)
    local text = text_of(r)
    local id = text:match(REFERENCE)
    assert.truthy(id, text)
    assert.are.equal("tool boom failed with an internal error (reference " .. id .. ")", text)
    assert.falsy(text:find("secret", 1, true))
    assert.truthy(client.wait_until(function() return server.stderr:find("stack traceback", 1, true) end, 5000))
    local line = server.stderr:match("[^\n]*reference " .. id .. "[^\n]*")
    assert.truthy(line and line:find("cannot open /srv/secret/db.sqlite", 1, true), server.stderr)
    -- each failure has its own reference
    local again = text_of(server:call_tool("boom", {})):match(REFERENCE)
    assert.are_not.equal(id, again)
  end)

  it("masks a result with no JSON form and one the outputSchema refuses", function()
    for _, case in ipairs { { "unsendable", {} }, { "typed", { n = 1 } } } do
      local r = server:call_tool(case[1], case[2])
      assert.is_true(r.isError)
      local id = text_of(r):match(REFERENCE)
      assert.truthy(id, text_of(r))
      assert.falsy(text_of(r):find("secret", 1, true))
      assert.truthy(client.wait_until(function() return server.stderr:find("reference " .. id, 1, true) end, 5000))
    end
  end)

  it("sends mcp.tool_error, mcp.rpc_error, nil, message and invalid arguments as they are", function()
    assert.are.same({ content = { { type = "text", text = "no note named x" } }, isError = true },
      server:call_tool("told", {}))
    assert.are.equal("try again later", text_of(server:call_tool("told_return", {})))
    local r = server:request("tools/call", { name = "rpc", arguments = {} })
    assert.are.same({ code = -32602, message = "bad cursor", data = { why = "old" } }, r.error)
    assert.are.equal("notes.txt: no such file", text_of(server:call_tool("nil_err", {})))
    local invalid = text_of(server:call_tool("typed", { n = "x" }))
    assert.truthy(invalid:find("/n: expected integer", 1, true), invalid)
  end)

  it("answers a resource's or prompt's error with -32603 and a reference id", function()
    for _, call in ipairs { { "resources/read", { uri = "x://r" }, "resource secret" },
                            { "prompts/get", { name = "p" }, "prompt secret" } } do
      local r = server:request(call[1], call[2])
      assert.are.equal(-32603, r.error.code, cjson.encode(r))
      local id = r.error.message:match(REFERENCE)
      assert.truthy(id, r.error.message)
      assert.falsy(r.error.message:find("secret", 1, true))
      assert.truthy(client.wait_until(function()
        local line = server.stderr:match("[^\n]*reference " .. id .. "[^\n]*")
        return line and line:find(call[3], 1, true)
      end, 5000), server.stderr)
    end
  end)
end)

describe("without mask_errors", function()
  it("tells the client what failed", function()
    local server, dir = serve(false)
    local r = server:call_tool("boom", {})
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("cannot open /srv/secret/db.sqlite", 1, true), text_of(r))
    assert.falsy(text_of(r):find("reference", 1, true))
    assert.are.equal("no note named x", text_of(server:call_tool("told", {})))
    local read = server:request("resources/read", { uri = "x://r" })
    assert.are.equal(-32603, read.error.code)
    assert.truthy(read.error.message:find("resource secret", 1, true), read.error.message)
    server:close()
    client.remove_tree(dir)
  end)

  it("refuses a mask_errors that is not a boolean, at the script's line", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/s.lua", 'local mcp = require "mcp"\nmcp.server { mask_errors = "yes" }\n')
    local server = client.spawn { "run", dir }
    server:wait_exit(5000)
    server:close()
    client.remove_tree(dir)
    assert.are.equal(1, server.exit_code)
    assert.truthy(server.stderr:find("s.lua:2: mask_errors must be a boolean, got string", 1, true), server.stderr)
  end)
end)
