-- Arguments in one line: mcp.tool{args = ..., returns = ...} expands to
-- JSON Schema 2020-12 (lua/mcp/args.lua). What each form expands to, as
-- tools/list serves it over stdio; calls validated against it (in C) with
-- defaults filled in; outputs checked against `returns`; and mistakes in
-- the shorthand as load errors naming the script's file and line.

local client = require "mcp_client"
local cjson = client.json

local FIXTURE = "spec/fixtures/args"

local function text_of(result) return result.content[1].text end

local function listed_tools(server)
  local tools = {}
  for _, tool in ipairs(server:request("tools/list", {}).result.tools) do tools[tool.name] = tool end
  return tools
end

describe("the args shorthand", function()
  local server, tools
  setup(function()
    server = client.spawn { "run", FIXTURE }
    server:initialize("2025-11-25")
    tools = listed_tools(server)
  end)
  teardown(function() server:close() end)

  -- Each form, and the schema it must expand to.
  for _, case in ipairs {
    { "s", '"string"', { type = "string" }, true },
    { "o", '"integer?"', { type = "integer" }, false },
    { "d", '"string -- who to greet"', { type = "string", description = "who to greet" }, true },
    { "od", '"boolean? -- loud or not"', { type = "boolean", description = "loud or not" }, false },
    { "r", '"number 0..1"', { type = "number", minimum = 0, maximum = 1 }, true },
    { "lo", '"integer 1.."', { type = "integer", minimum = 1 }, true },
    { "hi", '"string ..8"', { type = "string", maxLength = 8 }, true },
    { "ro", '"integer? -5..5 -- a small number"',
      { type = "integer", minimum = -5, maximum = 5, description = "a small number" }, false },
    { "l", '"string[]"', { type = "array", items = { type = "string" } }, true },
    { "lo_list", '"integer[]?"', { type = "array", items = { type = "integer" } }, false },
    { "t", '{ "string" }', { type = "array", items = { type = "string" } }, true },
    { "objs", '{ { x = "number" } }', { type = "array", items = { type = "object", properties = { x = { type = "number" } },
      required = { "x" }, additionalProperties = false } }, true },
    { "p", '{ x = "number", y = "number?" }', { type = "object", properties = { x = { type = "number" },
      y = { type = "number" } }, required = { "x" }, additionalProperties = false }, true },
    { "e", 'mcp.enum { "fast", "slow" }', { type = "string", enum = { "fast", "slow" } }, true },
    { "ei", "mcp.enum { 1, 2, 3 }", { type = "integer", enum = { 1, 2, 3 } }, true },
    { "ed", 'mcp.enum({ "a", "b" }, "a letter", { default = "a" })',
      { type = "string", enum = { "a", "b" }, description = "a letter", default = "a" }, false },
    { "a", 'mcp.arg("integer", "how many", { default = 1, min = 1, max = 10 })',
      { type = "integer", description = "how many", default = 1, minimum = 1, maximum = 10 }, false },
    { "f", 'mcp.arg("string", { format = "email", optional = true })', { type = "string", format = "email" }, false },
    { "ol", 'mcp.arg({ "string" }, "labels", { optional = true, max = 3 })',
      { type = "array", items = { type = "string" }, description = "labels", maxItems = 3 }, false },
    { "any", '"any?"', {}, false },
    { "obj", '"object?"', { type = "object" }, false },
    { "arr", '"array?"', { type = "array" }, false },
  } do
    local name, written, schema, required = case[1], case[2], case[3], case[4]
    it(("expands %s = %s to %s, %s"):format(name, written, cjson.encode(schema), required and "required" or "optional"),
      function()
        local input = tools.forms.inputSchema
        assert.are.same(schema, input.properties[name])
        local listed = false
        for _, r in ipairs(input.required) do listed = listed or r == name end
        assert.are.equal(required, listed)
      end)
  end

  it("makes an object that names every property and takes no other", function()
    local input = tools.forms.inputSchema
    assert.are.equal("object", input.type)
    assert.is_false(input.additionalProperties)
    local names = 0
    for _ in pairs(input.properties) do names = names + 1 end
    assert.are.equal(22, names)
    -- required is sorted, so the schema is the same from run to run
    local sorted = { table.unpack(input.required) }
    table.sort(sorted)
    assert.are.same(sorted, input.required)
  end)

  it("passes x- extension keywords of mcp.arg through (x-mcp-header)", function()
    assert.are.same({ type = "string", ["x-mcp-header"] = "Region" }, tools.greet.inputSchema.properties.name and
      tools.headers.inputSchema.properties.region)
  end)

  it("takes required = false in mcp.arg's options as optional", function()
    assert.are.same({ "region" }, tools.headers.inputSchema.required)
    assert.are.same({ type = "string" }, tools.headers.inputSchema.properties.zone)
  end)

  it("turns returns into the outputSchema", function()
    assert.are.same({ type = "object", properties = { text = { type = "string" }, times = { type = "integer" } },
      required = { "text", "times" }, additionalProperties = false }, tools.greet.outputSchema)
    assert.is_nil(tools.forms.outputSchema)
  end)

  it("validates calls against the expanded schema", function()
    local r = server:call_tool("greet", { name = 5, times = 0, style = { loud = "yes" }, extra = 1 })
    assert.is_true(r.isError)
    local text = text_of(r)
    assert.truthy(text:find("^Invalid arguments for tool greet:"), text)
    assert.truthy(text:find('/name: expected string, got number 5', 1, true), text)
    assert.truthy(text:find('/times: expected a number >= 1, got 0', 1, true), text)
    assert.truthy(text:find('/style/loud: expected boolean', 1, true), text)
    assert.truthy(text:find('/extra: unexpected property (additionalProperties is false)', 1, true), text)
    r = server:call_tool("greet", { style = {} })
    assert.truthy(text_of(r):find('/: missing required property "name"', 1, true), text_of(r))
    r = server:call_tool("forms", { s = "x", d = "x", r = 2, lo = 0, hi = "123456789", l = {}, t = {}, objs = {},
      p = { x = 1 }, e = "medium", ei = 4 })
    text = text_of(r)
    assert.truthy(text:find('/r: expected a number <= 1, got 2', 1, true), text)
    assert.truthy(text:find('/lo: expected a number >= 1, got 0', 1, true), text)
    assert.truthy(text:find('/hi: ', 1, true), text)
    assert.truthy(text:find('/e: ', 1, true), text)
    assert.truthy(text:find('/ei: ', 1, true), text)
  end)

  it("hands the handler the defaults of what the call leaves out, nested ones too", function()
    local r = server:call_tool("greet", { name = "Ada", style = {} })
    assert.is_nil(r.isError, cjson.encode(r))
    assert.are.same({ text = "hello Ada", times = 2 }, r.structuredContent)
    r = server:call_tool("greet", { name = "Ada", times = 5, style = { loud = true } })
    assert.are.same({ text = "hello Ada!", times = 5 }, r.structuredContent)
    r = server:call_tool("forms", { s = "x", d = "x", r = 0.5, lo = 1, hi = "h", l = { "a" }, t = { "b" }, objs = { { x = 1 } },
      p = { x = 1 }, e = "fast", ei = 2 })
    assert.is_nil(r.isError, cjson.encode(r))
    assert.are.equal(1, r.structuredContent.got.a)
    assert.are.equal("a", r.structuredContent.got.ed)
    assert.is_nil(r.structuredContent.got.o)
  end)

  it("checks what the tool returns against returns", function()
    local r = server:call_tool("liar", { n = 3 })
    assert.is_true(r.isError)
    assert.truthy(text_of(r):find("/n: expected integer, got string \"3\"", 1, true), text_of(r))
  end)
end)

-- A folder whose s.lua registers one tool with `fields` on line 3; luamcp
-- run must refuse it: the exit code and stderr.
local function load_tool(fields)
  local dir = client.temp_dir()
  client.write_file(dir .. "/s.lua", 'local mcp = require "mcp"\n\nmcp.tool { name = "t", ' .. fields
    .. ",\n  handler = function() end }\n")
  local server = client.spawn { "run", dir }
  server:wait_exit(5000)
  server:close()
  client.remove_tree(dir)
  return server.exit_code, server.stderr
end

describe("mistakes in the args shorthand", function()
  for _, case in ipairs {
    { 'args = { n = "interger" }', "s.lua:3: mcp.tool t: args.n: unknown type interger (did you mean integer?)" },
    { 'args = { p = { q = { r = "strin" } } }', "s.lua:3: mcp.tool t: args.p.q.r: unknown type strin (did you mean string?)" },
    { 'args = { mode = { "fast", "slow" } }',
      's.lua:3: mcp.tool t: args.mode: a list of 2: {TYPE} is an array of TYPE, and mcp.enum{...} one of some values '
        .. '(did you mean mcp.enum{ "fast", "slow" }?)' },
    { 'args = { n = "int" }', "s.lua:3: mcp.tool t: args.n: unknown type int (did you mean integer?)" },
    { 'args = { n = "integer = 1" }', 's.lua:3: mcp.tool t: args.n: "integer = 1": after the type come bounds '
      .. '(1..10, 0.., ..100) and "-- description"; a default is mcp.arg("integer", { default = ... })' },
    { 'args = { n = "string? 1..x" }', 's.lua:3: mcp.tool t: args.n: "string? 1..x": after the type come bounds' },
    { 'args = { n = "boolean 1..2" }',
      "s.lua:3: mcp.tool t: args.n: bounds apply to numbers, strings, arrays and objects, not to boolean" },
    { 'args = { n = "integer 5..1" }', "s.lua:3: mcp.tool t: args.n: min 5 is above max 1" },
    { 'args = { t = { "string?" } }', "s.lua:3: mcp.tool t: args.t: an array's items cannot be optional" },
    { 'args = { n = 5 }', "s.lua:3: mcp.tool t: args.n: expected a type" },
    { 'args = { [1] = "string", x = "string" }', "s.lua:3: mcp.tool t: args: mixes list items and named fields" },
    { 'args = "string"', "s.lua:3: mcp.tool t: args must describe an object" },
    { 'returns = { "string" }', "s.lua:3: mcp.tool t: returns must describe an object (structuredContent is always a JSON object)" },
    { 'args = { n = "string" }, inputSchema = { type = "object" }', "s.lua:3: mcp.tool t: give args or inputSchema, not both" },
    { 'returns = { n = "string" }, outputSchema = { type = "object" }',
      "s.lua:3: mcp.tool t: give returns or outputSchema, not both" },
    { 'arg = { n = "string" }', "s.lua:3: mcp.tool t: unknown field arg (did you mean args?)" },
    { 'args = { n = mcp.arg("integer", { defualt = 1 }) }', "s.lua:3: mcp.arg: unknown option defualt (did you mean default?)" },
    { 'args = { n = mcp.arg("integer", { default = 0, min = 1 }) }',
      "s.lua:3: mcp.arg: the default 0 does not fit: expected a number >= 1, got 0" },
    { 'args = { n = mcp.arg("intger") }', "s.lua:3: mcp.arg: unknown type intger (did you mean integer?)" },
    { 'args = { n = mcp.enum {} }', "s.lua:3: mcp.enum needs a list of values" },
    { 'args = { n = mcp.enum { "a", {} } }', "s.lua:3: mcp.enum: value 2 is a table" },
  } do
    it("refuses " .. case[1], function()
      local code, stderr = load_tool(case[1])
      assert.are.equal(1, code, stderr)
      assert.truthy(stderr:find(case[2], 1, true), stderr)
    end)
  end
end)

describe("mcp.arg in a script, line by line", function()
  it("raises at the line of the mcp.arg that is wrong", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/s.lua", table.concat({
      'local mcp = require "mcp"',
      'mcp.tool {',
      '  name = "t",',
      '  args = {',
      '    a = "string",',
      '    b = mcp.arg("integer", "how many", { maximum = 3, minimun = 1 }),',
      '  },',
      '  handler = function() end,',
      '}',
    }, "\n") .. "\n")
    local server = client.spawn { "run", dir }
    server:wait_exit(5000)
    server:close()
    client.remove_tree(dir)
    assert.truthy(server.stderr:find("s.lua:6: mcp.arg: unknown option minimun (did you mean minimum?)", 1, true),
      server.stderr)
  end)
end)

describe("a prompt's args in the shorthand", function()
  local server
  setup(function()
    server = client.spawn { "run", FIXTURE }
    server:initialize("2025-11-25")
  end)
  teardown(function() server:close() end)

  it("lists its arguments by name, with descriptions and what is required", function()
    local prompts = server:request("prompts/list", {}).result.prompts
    assert.are.same({
      { name = "ps", required = false },
      { name = "to", description = "who the letter is for", required = true },
      { name = "tone", description = "how it sounds", required = false },
    }, prompts[1].arguments)
  end)

  it("fills in defaults, refuses a value outside the enum and completes the enum's values", function()
    local r = server:request("prompts/get", { name = "letter", arguments = { to = "Ada" } })
    assert.are.equal("Write a friendly letter to Ada", r.result.messages[1].content.text)
    r = server:request("prompts/get", { name = "letter", arguments = { to = "Ada", tone = "rude" } })
    assert.are.equal(-32602, r.error.code)
    assert.are.equal("Invalid params: argument tone must be one of formal, friendly, funny", r.error.message)
    r = server:request("completion/complete", { ref = { type = "ref/prompt", name = "letter" },
      argument = { name = "tone", value = "f" } })
    assert.are.same({ "formal", "friendly", "funny" }, r.result.completion.values)
    r = server:request("completion/complete", { ref = { type = "ref/prompt", name = "letter" },
      argument = { name = "tone", value = "fu" } })
    assert.are.same({ "funny" }, r.result.completion.values)
  end)

  for _, case in ipairs {
    { 'args = { n = "integer" }', "s.lua:2: mcp.prompt p: args.n: prompt arguments are strings, not integer" },
    { 'args = { n = "string" }, arguments = {}', "s.lua:2: mcp.prompt p: give args or arguments, not both" },
    { 'args = { n = "strng" }', "s.lua:2: mcp.prompt p: args.n: unknown type strng (did you mean string?)" },
  } do
    it("refuses " .. case[1], function()
      local dir = client.temp_dir()
      client.write_file(dir .. "/s.lua", 'local mcp = require "mcp"\nmcp.prompt { name = "p", ' .. case[1]
        .. ', get = function() return "x" end }\n')
      local s = client.spawn { "run", dir }
      s:wait_exit(5000)
      s:close()
      client.remove_tree(dir)
      assert.are.equal(1, s.exit_code)
      assert.truthy(s.stderr:find(case[2], 1, true), s.stderr)
    end)
  end
end)

describe("luamcp inspect of shorthand arguments", function()
  it("shows each argument's type, bounds and description", function()
    local code, out, err = client.sh(client.LUAMCP .. " inspect " .. FIXTURE)
    assert.are.equal(0, code, err)
    for _, line in ipairs {
      "    d: string, required — who to greet",
      "    hi: string, required, length ..8",
      "    l: array of string, required",
      "    ol: array of string, ..3 items — labels",
      "    a: integer, default 1, 1..10 — how many",
      '    e: string, required, one of ["fast","slow"]',
    } do
      assert.truthy(out:find("\n" .. line .. "\n", 1, true), line .. "\n--\n" .. out)
    end
  end)
end)
