-- JSON Schema validation of tool inputs and outputs, schema errors at load
-- time, coercion, and what a model reads when its arguments are wrong.

local client = require "mcp_client"
local cjson = client.json

local FIXTURE = "spec/fixtures/schema"

local function text_of(result) return result.content[1].text end

describe("tool input validation", function()
  local server
  before_each(function()
    server = client.spawn { "run", FIXTURE }
    server:initialize("2025-11-25")
  end)
  after_each(function() server:close() end)

  it("tells the model each failing pointer with expected and found (2025-11-25: a tool error)", function()
    local r = server:call_tool("strict", { n = "5", name = "Bob1", extra = true })
    assert.is_true(r.isError)
    local text = text_of(r)
    assert.truthy(text:find('^Invalid arguments for tool strict:'), text)
    assert.truthy(text:find('/n: expected integer, got string "5"', 1, true), text)
    assert.truthy(text:find('/name: does not match pattern ^[a-z]+$', 1, true), text)
    assert.truthy(text:find('/extra: unexpected property (additionalProperties is false)', 1, true), text)
    assert.truthy(text:find('/: missing required property "flag"', 1, true), text)
  end)

  it("uses -32602 with the list in error.data before 2025-11-25", function()
    server:close()
    server = client.spawn { "run", FIXTURE }
    server:initialize("2025-06-18")
    local r = server:request("tools/call", { name = "strict", arguments = { n = -1, flag = true } })
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("/n: ", 1, true))
    assert.are.same({ { path = "/n", message = "expected a number >= 0, got -1" } }, r.error.data.errors)
  end)

  it("validates omitted arguments as {}", function()
    local r = server:request("tools/call", { name = "strict" })
    assert.is_true(r.result.isError)
    assert.truthy(text_of(r.result):find('missing required property "n"', 1, true))
  end)

  it("passes valid arguments through untouched", function()
    local r = server:call_tool("strict", { n = 3, flag = false, name = "abc" })
    assert.are.same({ n = 3, flag = false, ntype = "integer" }, r.structuredContent)
  end)

  it("refuses model mistakes without coerce", function()
    assert.is_true(server:call_tool("strict", { n = "5", flag = "true" }).isError)
  end)

  it("forgives numeric strings, boolean strings and JSON text with coerce = true", function()
    local r = server:call_tool("forgiving", { n = "42", flag = "false", point = '{"x": 1, "y": 2}', tags = '["a","b"]' })
    assert.is_nil(r.isError)
    assert.are.same({ n = 42, ntype = "integer", flag = false, x = 1, tags = 2 }, r.structuredContent)
  end)

  it("still refuses what coercion cannot fix", function()
    local r = server:call_tool("forgiving", { n = "4.5", flag = "yes", point = "{", tags = {} })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find('/n: expected integer', 1, true), text_of(r))
    assert.truthy(text_of(r):find('/flag: expected boolean', 1, true), text_of(r))
  end)

  it("follows recursive $refs", function()
    local deep = { name = "leaf" }
    for i = 1, 40 do deep = { name = "n" .. i, children = { deep, { name = "x" } } } end
    assert.are.equal("81", text_of(server:call_tool("tree", { root = deep })))
    local bad = { name = "a", children = { { name = "b", children = { { name = 7 } } } } }
    local r = server:call_tool("tree", { root = bad })
    assert.truthy(text_of(r):find('/root/children/0/children/0/name: expected string, got number 7', 1, true), text_of(r))
  end)

  it("applies draft-07 rules when $schema says so", function()
    assert.truthy(text_of(server:call_tool("draft7", { p = 0 })):find("/p: expected a number >= 1", 1, true))
    assert.are.equal("ok", text_of(server:call_tool("draft7", { p = 2 })))
  end)

  it("lets scripts validate with mcp.schema.validate", function()
    assert.are.equal("valid", text_of(server:call_tool("validate", { n = 3 })))
    assert.are.equal("/n expected a number <= 10, got 11", text_of(server:call_tool("validate", { n = 11 })))
  end)
end)

describe("tool output validation", function()
  local server
  before_each(function()
    server = client.spawn { "run", FIXTURE }
    server:initialize()
  end)
  after_each(function() server:close() end)

  it("sends conforming structuredContent, empty arrays as []", function()
    local _, raw = server:request("tools/call", { name = "stats", arguments = {} })
    assert.truthy(raw:find('"structuredContent":{"count":0,"items":[]}', 1, true), raw)
    assert.truthy(raw:find('"text":"{\\"count\\":0,\\"items\\":[]}"', 1, true), raw)
  end)

  it("turns a mismatch into an isError result, and logs it", function()
    local r = server:call_tool("stats", { bad = true })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find('/count: expected integer, got string "three"', 1, true), text_of(r))
    assert.truthy(server.stderr:find("outputSchema", 1, true))
    r = server:call_tool("stats", { none = true })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("no structuredContent", 1, true))
  end)

  it("skips output validation for isError results", function()
    assert.are.same({ content = { { type = "text", text = "failed" } }, isError = true }, server:call_tool("stats_error", {}))
  end)
end)

describe("prompt arguments", function()
  it("are checked against the declared arguments", function()
    local server = client.spawn { "run", FIXTURE }
    server:initialize()
    local r = server:request("prompts/get", { name = "p", arguments = { topic = "x", other = "y" } })
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("has no argument other", 1, true))
    assert.are.equal("About x", server:request("prompts/get", { name = "p", arguments = { topic = "x" } }).result.messages[1].content.text)
    server:close()
  end)
end)

describe("elicitation schemas", function()
  local server
  before_each(function()
    server = client.spawn { "run", FIXTURE }
    server:initialize("2025-11-25", { elicitation = {} })
  end)
  after_each(function() server:close() end)

  -- Answer the next elicitation/create the server sends with content.
  local function answer_next(content)
    local msg = server:read()
    assert.are.equal("elicitation/create", msg.method)
    server:send({ jsonrpc = "2.0", id = msg.id, result = { action = "accept", content = content } })
    return msg
  end

  it("refuses a form that is not flat, sending nothing", function()
    server:send({ jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "ask", arguments = { nested = true } } })
    local msg = server:read()
    assert.are.equal(1, msg.id)
    assert.truthy(msg.result.content[1].text:find("requestedSchema /properties/address/type", 1, true), msg.result.content[1].text)
  end)

  it("returns an answer that fits the form", function()
    server:send({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "ask", arguments = {} } })
    local request = answer_next({ age = 30 })
    assert.are.same({ "age" }, request.params.requestedSchema.required)
    local msg = server:read()
    assert.are.equal("age 30", msg.result.content[1].text)
  end)

  it("raises when the answer does not fit the form", function()
    server:send({ jsonrpc = "2.0", id = 3, method = "tools/call", params = { name = "ask", arguments = {} } })
    answer_next({ age = "thirty" })
    local msg = server:read()
    assert.truthy(msg.result.content[1].text:find('does not match requestedSchema:\n/age: expected integer', 1, true),
      msg.result.content[1].text)
  end)
end)

describe("schemas at load time", function()
  local dir
  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  local function load_error(source)
    client.write_file(dir .. "/bad.lua", source)
    local server = client.spawn { "run", dir }
    local code = server:wait_exit(3000)
    server:close()
    return code, server.stderr
  end

  it("names the script, the tool and the JSON pointer of an invalid schema", function()
    local code, err = load_error([[
local mcp = require "mcp"
mcp.tool { name = "broken", inputSchema = { type = "object", properties = { a = { type = "string", minLength = -1 } } },
  handler = function() end }
]])
    assert.are.equal(1, code)
    assert.truthy(err:find("bad.lua:2: tool broken: inputSchema /properties/a/minLength:", 1, true), err)
  end)

  it("refuses a keyword that would change the meaning", function()
    local code, err = load_error([[
local mcp = require "mcp"
mcp.tool { name = "dyn", inputSchema = '{"type":"object","unevaluatedProperties":false}', handler = function() end }
]])
    assert.are.equal(1, code)
    assert.truthy(err:find("tool dyn: inputSchema /unevaluatedProperties", 1, true), err)
  end)

  it("refuses an inputSchema whose root is not an object schema", function()
    local code, err = load_error([[
local mcp = require "mcp"
mcp.tool { name = "arr", inputSchema = { type = "array" }, handler = function() end }
]])
    assert.are.equal(1, code)
    assert.truthy(err:find('tool arr: inputSchema must have "type": "object" at its root', 1, true), err)
  end)
end)
