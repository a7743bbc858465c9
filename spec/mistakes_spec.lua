-- Mistakes a tool author makes, caught with the file, the line and what to
-- fix: at load (unknown fields with a suggestion, tool names, a missing
-- handler, misspelt schema keywords) and at call time (a handler that
-- returns nil, err; a result that cannot be JSON).

local client = require "mcp_client"
local cjson = client.json

-- A folder with one script, s.lua, whose second line is `line`.
local function folder_with(line)
  local dir = client.temp_dir()
  client.write_file(dir .. "/s.lua", 'local mcp = require "mcp"\n' .. line .. "\n")
  return dir
end

-- luamcp run on it, which must exit: the exit code and stderr.
local function load(line)
  local dir = folder_with(line)
  local server = client.spawn { "run", dir }
  server:wait_exit(5000)
  server:close()
  client.remove_tree(dir)
  return server.exit_code, server.stderr
end

describe("a script's mistakes at load", function()
  for _, case in ipairs {
    { 'mcp.tool { name = "a", descripton = "adds", handler = function() end }',
      "s.lua:2: mcp.tool a: unknown field descripton (did you mean description?)" },
    { 'mcp.tool { name = "a", input_schema = { type = "object" }, handler = function() end }',
      "s.lua:2: mcp.tool a: unknown field input_schema (did you mean inputSchema?)" },
    { 'mcp.tool { name = "my tool", handler = function() end }',
      's.lua:2: tool name "my tool": use 1 to 128 of A-Z a-z 0-9 _ - . (no spaces)' },
    { 'mcp.tool { name = "a" }', "s.lua:2: mcp.tool a: handler must be a function(args, ctx), got nil" },
    { 'mcp.server { name = "x", instructons = "use me" }',
      "s.lua:2: mcp.server x: unknown field instructons (did you mean instructions?)" },
    { 'mcp.resource { uri = "a://b", name = "b", mimetype = "text/plain", read = function() end }',
      "s.lua:2: mcp.resource b: unknown field mimetype (did you mean mimeType?)" },
    { 'mcp.template { uriTemplate = "a://{x}", name = "t", reed = function() end }',
      "s.lua:2: mcp.template t: unknown field reed (did you mean read?)" },
    { 'mcp.prompt { name = "p", get = function() end, argumnets = {} }',
      "s.lua:2: mcp.prompt p: unknown field argumnets (did you mean arguments?)" },
    { 'mcp.tool { name = "a", handler = function() end, colour = "red" }', "s.lua:2: mcp.tool a: unknown field colour" },
  } do
    it("refuses " .. case[1], function()
      local code, stderr = load(case[1])
      assert.are.equal(1, code)
      assert.truthy(stderr:find(case[2], 1, true), stderr)
    end)
  end

  it("warns about schema keywords JSON Schema does not define, with the JSON pointer, and serves the tool", function()
    local dir = folder_with('mcp.tool { name = "a", handler = function() return "ok" end, inputSchema = { type = "object", '
      .. 'requried = { "x" }, ["x-ui"] = true, properties = { x = { type = "string", minLenght = 2, '
      .. 'prefixItems = { { tpye = "string" } } } } } }')
    local server = client.spawn { "run", dir }
    server:initialize()
    local result = server:call_tool("a", { x = "y" })
    server:close()
    client.remove_tree(dir)
    assert.are.equal("ok", result.content[1].text)
    local stderr = server.stderr
    for _, expected in ipairs {
      's.lua:2: tool a: inputSchema /: unknown keyword "requried" (did you mean required?)',
      's.lua:2: tool a: inputSchema /properties/x: unknown keyword "minLenght" (did you mean minLength?)',
      's.lua:2: tool a: inputSchema /properties/x/prefixItems/0: unknown keyword "tpye" (did you mean type?)',
    } do
      assert.truthy(stderr:find(expected, 1, true), stderr)
    end
    assert.falsy(stderr:find("x-ui", 1, true), stderr) -- x- keywords are extensions
  end)
end)

describe("a handler's mistakes at call time", function()
  local dir, server
  setup(function()
    dir = folder_with(table.concat({
      'mcp.tool { name = "missing", handler = function() return nil, "notes.txt: no such file" end }',
      'mcp.tool { name = "thread", handler = function() return { items = { 1, { co = coroutine.create(print) } } } end }',
      'mcp.tool { name = "nan", handler = function() return { content = {}, structuredContent = { ratio = { 0/0 } } } end }',
    }, "\n"))
    server = client.spawn { "run", dir }
    server:initialize()
  end)
  teardown(function()
    server:close()
    client.remove_tree(dir)
  end)

  it("turns return nil, err into an isError result with err", function()
    local result = server:call_tool("missing", {})
    assert.is_true(result.isError)
    assert.are.equal("notes.txt: no such file", result.content[1].text)
    assert.truthy(server.stderr:find("tool missing (" .. dir .. "/s.lua:2) returned nil, notes.txt: no such file", 1,
      true), server.stderr)
  end)

  it("names the key path and the handler's line of a value that cannot be JSON, also on stderr", function()
    local result = server:call_tool("thread", {})
    assert.is_true(result.isError)
    local expected = "tool thread (" .. dir .. "/s.lua:3) returned a value that cannot be sent as JSON: "
      .. "cannot encode a thread (at .items[2].co)"
    assert.are.equal(expected, result.content[1].text)
    assert.truthy(server.stderr:find(expected, 1, true), server.stderr)
    result = server:call_tool("nan", {})
    assert.is_true(result.isError)
    assert.truthy(result.content[1].text:find("JSON has no NaN or infinity (at .structuredContent.ratio[1])", 1, true),
      cjson.encode(result))
  end)
end)

describe("mcp.json.decode", function()
  it("returns nil and a message for bad input, as the Lua API reference says", function()
    local dir = folder_with('mcp.tool { name = "d", handler = function(args) local v, err = mcp.json.decode(args.text) '
      .. 'return { ok = v ~= nil, err = err } end }')
    local server = client.spawn { "run", dir }
    server:initialize()
    local bad = server:call_tool("d", { text = "{\"a\":" })
    local good = server:call_tool("d", { text = "[1]" })
    server:close()
    client.remove_tree(dir)
    assert.is_false(bad.structuredContent.ok)
    assert.is_string(bad.structuredContent.err)
    assert.is_true(good.structuredContent.ok)
  end)
end)

describe("a module next to the scripts", function()
  it("runs once, whether a script requires it before or after its turn, under run and in a built program", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/helper.lua", 'local mcp = require "mcp"\nHELPER_RUNS = (HELPER_RUNS or 0) + 1\n'
      .. 'mcp.tool { name = "helper_tool", handler = function() return HELPER_RUNS end }\n'
      .. 'return { greet = function(n) return "hi " .. n end }\n')
    client.write_file(dir .. "/main.lua", 'local mcp = require "mcp"\nlocal helper = require "helper"\n'
      .. 'local late = require "zz_lib"\n'
      .. 'mcp.tool { name = "main_tool", handler = function() return helper.greet(late.name) .. " " .. ZZ_RUNS end }\n')
    client.write_file(dir .. "/zz_lib.lua", 'ZZ_RUNS = (ZZ_RUNS or 0) + 1\nreturn { name = "ann" }\n')
    local program = dir .. "/out/program"
    assert(os.execute("mkdir -p " .. dir .. "/out && " .. client.LUAMCP .. " build " .. dir .. " -o " .. program
      .. " >/dev/null 2>&1"))
    for _, spawn in ipairs { function() return client.spawn { "run", dir } end,
                             function() return client.spawn({}, { bin = program }) end } do
      local server = spawn()
      server:initialize()
      local main = server:call_tool("main_tool", {})
      local helper = server:call_tool("helper_tool", {})
      server:close()
      assert.are.equal("hi ann 1", main.content[1].text, server.stderr)
      assert.are.equal("1", helper.content[1].text)
    end
    client.remove_tree(dir)
  end)
end)
