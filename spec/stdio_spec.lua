-- The stdio transport and strict JSON, driven through a real luamcp process.

local client = require "mcp_client"
local uv = require "luv"
local cjson = client.json

local KITCHEN = "spec/fixtures/kitchen"
local SUITE = os.getenv("JSON_TEST_SUITE") or "../shared/JSONTestSuite/test_parsing"

-- The i_ (implementation-defined) files luamcp accepts; every other i_ file
-- is rejected. The rule (docs/protocol.md, "Strict JSON"): numbers that overflow a
-- double are rejected, integers beyond int64 become doubles, underflow
-- rounds to zero; invalid UTF-8, lone surrogates, a BOM and nesting deeper
-- than 128 are rejected.
local ACCEPTED_I = {
  ["i_number_double_huge_neg_exp.json"] = true,
  ["i_number_real_underflow.json"] = true,
  ["i_number_too_big_neg_int.json"] = true,
  ["i_number_too_big_pos_int.json"] = true,
  ["i_number_very_big_negative_int.json"] = true,
}

local function suite_files()
  local files = {}
  local req = uv.fs_scandir(SUITE)
  assert(req, "JSONTestSuite not found at " .. SUITE)
  while true do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    files[#files + 1] = name
  end
  table.sort(files)
  return files
end

describe("JSONTestSuite files as tools/call arguments over stdio", function()
  if not uv.fs_stat(SUITE) then -- a fresh clone has no ../shared
    pending("skipped: JSONTestSuite not found at " .. SUITE)
    return
  end
  local server
  setup(function()
    server = client.spawn { "run", KITCHEN }
    server:initialize()
  end)
  teardown(function() server:close() end)

  for _, name in ipairs(suite_files()) do
    local content = client.read_file(SUITE .. "/" .. name)
    -- Ten files hold a raw newline, which cannot travel inside one stdio
    -- line; they are covered by runtime/core/tests/test_json.c (the same parser,
    -- fed the file) and over HTTP in http_spec.lua.
    if not content:find("\n", 1, true) then
      local kind = name:sub(1, 1)
      local expect_accept = kind == "y" or (kind == "i" and ACCEPTED_I[name])
      it(name .. (expect_accept and " is accepted" or " is rejected with -32700"), function()
        local id = server.next_id
        server.next_id = id + 1
        server:send('{"jsonrpc":"2.0","id":' .. id .. ',"method":"tools/call","params":{"name":"echo","arguments":{"value":'
          .. content .. '}}}')
        local line = server:read_line(5000)
        assert(line, "no answer")
        local msg = cjson.decode(line)
        if expect_accept then
          assert.are.equal(id, msg.id)
          assert.is_nil(msg.error, line)
          assert.is_table(msg.result)
        else
          assert.are.same(cjson.null, msg.id)
          assert.are.equal(-32700, msg.error.code, line)
        end
      end)
    end
  end
end)

describe("values arrive in Lua exactly", function()
  local server
  setup(function()
    server = client.spawn { "run", KITCHEN }
    server:initialize()
  end)
  teardown(function() server:close() end)

  it("keeps integers and floats apart", function()
    local _, line = server:request("tools/call", { name = "typeof", arguments = cjson.decode("{}") })
    server:send('{"jsonrpc":"2.0","id":100,"method":"tools/call","params":{"name":"typeof","arguments":'
      .. '{"i":5,"neg":-9223372036854775808,"f":5.0,"e":1e2,"frac":0.5,"big":18446744073709551616,"s":"5","n":null,"t":true}}}')
    local msg, raw = server:await_response(100)
    local types = msg.result.structuredContent
    assert.are.same({ i = "integer", neg = "integer", f = "float", e = "float", frac = "float", big = "float",
                      s = "string", n = "userdata", t = "boolean" }, types)
  end)

  it("returns integer sums as integer text", function()
    local _, raw = server:request("tools/call", { name = "add", arguments = { a = 2, b = 3 } })
    assert.truthy(raw:find('"text":"5"', 1, true), raw)
  end)

  it("writes floats so they read back identical", function()
    local _, raw = server:request("tools/call", { name = "float" })
    assert.truthy(raw:find('"text":"0.30000000000000004"', 1, true), raw)
    _, raw = server:request("tools/call", { name = "float_whole" })
    assert.truthy(raw:find('"text":"5.0"', 1, true), raw)
  end)

  it("round-trips echoed values byte for byte", function()
    server:send('{"jsonrpc":"2.0","id":"rt","method":"tools/call","params":{"name":"echo","arguments":'
      .. '{"value":[1,-0.0,1.5e300,2.2250738585072014e-308,"\\u00e9\\ud83d\\ude00",[],{},null]}}}')
    local _, raw = server:await_response("rt")
    assert.truthy(raw:find('"structuredContent":{"value":[1,-0.0,1.5e+300,2.2250738585072014e-308,"é😀",[],{},null]}', 1, true), raw)
  end)

  it("keeps empty arrays as [] in results and schemas", function()
    local _, raw = server:request("tools/call", { name = "structured" })
    assert.truthy(raw:find('"items":[]', 1, true), raw)
    local _, list = server:request("tools/list", {})
    assert.truthy(list:find('"required":[]', 1, true), list)
    assert.truthy(list:find('"properties":{}', 1, true), list)
    _, raw = server:request("tools/call", { name = "nothing" })
    assert.truthy(raw:find('"content":[]', 1, true), raw)
  end)

  it("keeps a JSON string schema verbatim", function()
    local _, list = server:request("tools/list", {})
    assert.truthy(list:find([["inputSchema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"z":{"type":"string"},"a":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"number"}},"additionalProperties":false}]], 1, true), list)
  end)

  it("never writes invalid UTF-8 or a raw newline", function()
    local _, raw = server:request("tools/call", { name = "bad_utf8" })
    assert.truthy(raw:find('"text":"caf\xEF\xBF\xBD"', 1, true), raw)
    _, raw = server:request("tools/call", { name = "newline" })
    assert.truthy(raw:find([["text":"line1\nline2\r\n\u0000end"]], 1, true), raw)
  end)

  it("is not affected by a script's cjson settings", function()
    local _, raw = server:request("tools/call", { name = "cjson_settings" })
    assert.truthy(raw:find('"pi":3.14159265358979', 1, true), raw)
    assert.truthy(raw:find('"path":"a/b"', 1, true), raw)
  end)

  it("offers a strict JSON codec to scripts", function()
    local msg = server:call_tool("json", { text = '{"a":[1,2.5,"x"]}' })
    assert.are.equal('{"a":[1,2.5,"x"]}', msg.content[1].text)
    msg = server:call_tool("json", { text = "[1,]" })
    assert.truthy(msg.content[1].text:find("^error: "))
  end)
end)

describe("stdio framing", function()
  it("answers a request and exits 0 on EOF", function()
    local server = client.spawn { "run", KITCHEN }
    server:initialize()
    assert.are.equal(0, server:close())
  end)

  -- Concurrent calls may be answered in any order (JSON-RPC ties an answer
  -- to its request by id only): a spec awaiting one answer reads past the
  -- others, and awaiting those next must still find them (the mcp.client
  -- spec's five concurrent relays are answered c1, c5, c2, ... at times).
  it("gives each awaited answer, also one read while another was awaited", function()
    local server = client.spawn { "run", KITCHEN }
    server:initialize()
    server:send { jsonrpc = "2.0", id = "first", method = "ping" }
    server:send { jsonrpc = "2.0", id = "second", method = "ping" }
    local second, raw = server:await_response("second")
    assert.are.same({}, second and second.result, server.stderr)
    assert.are.equal("second", cjson.decode(raw).id)
    local first, first_raw = server:await_response("first")
    assert.are.same({}, first and first.result, server.stderr)
    assert.are.equal("first", cjson.decode(first_raw).id)
    assert.is_nil(server.other) -- nothing left over once both are taken
    assert.are.equal(0, server:close())
  end)

  it("exits 0 with /dev/null as stdin", function()
    local server = client.spawn({ "run", KITCHEN }, { stdin_file = "/dev/null" })
    assert.are.equal(0, server:wait_exit(2000))
    assert.are.equal(0, #server.lines)
  end)

  it("answers a file of requests line by line", function()
    local dir = client.temp_dir()
    local path = dir .. "/requests.jsonl"
    client.write_file(path, table.concat({
      '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add","arguments":{"a":40,"b":2}}}',
      '{"jsonrpc":"2.0","id":3,"method":"ping"}',
    }, "\n")) -- no newline at the end: the last line still counts
    local server = client.spawn({ "run", KITCHEN }, { stdin_file = path })
    assert.are.equal(0, server:wait_exit(3000))
    client.wait_until(function() return server.stdout_closed end)
    assert.are.equal(3, #server.lines)
    assert.are.equal(1, cjson.decode(server.lines[1]).id)
    assert.are.equal('{"jsonrpc":"2.0","id":2,"result":{"content":[{"text":"42","type":"text"}]}}', server.lines[2])
    assert.are.equal('{"jsonrpc":"2.0","id":3,"result":{}}', server.lines[3])
    client.remove_tree(dir)
  end)

  -- A JSON object may repeat a key; luamcp reads the last one, everywhere
  -- (core/json.c's lookups), so the envelope's fields follow the same rule.
  it("reads the last of a repeated envelope member", function()
    local dir = client.temp_dir()
    local path = dir .. "/requests.jsonl"
    client.write_file(path, table.concat({
      '{"jsonrpc":"1.0","jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"f","version":"1"}}}',
      '{"jsonrpc":"2.0","method":"notifications/initialized"}',
      '{"jsonrpc":"2.0","id":2,"id":3,"method":"nope","method":"ping"}',
      '{"jsonrpc":"2.0","id":4,"method":"ping","params":5,"params":{}}',
      '{"jsonrpc":"2.0","id":5,"method":"ping","jsonrpc":"1.0"}',
      '{"jsonrpc":"2.0","id":6,"result":{},"method":"ping","result":{}}',
    }, "\n"))
    local server = client.spawn({ "run", KITCHEN }, { stdin_file = path })
    assert.are.equal(0, server:wait_exit(3000))
    client.wait_until(function() return server.stdout_closed end)
    assert.are.equal(5, #server.lines, server.stderr)
    assert.are.equal(1, cjson.decode(server.lines[1]).id)
    assert.are.equal('{"jsonrpc":"2.0","id":3,"result":{}}', server.lines[2])
    assert.are.equal('{"jsonrpc":"2.0","id":4,"result":{}}', server.lines[3])
    assert.are.equal('{"jsonrpc":"2.0","id":5,"error":{"code":-32600,"message":"Invalid Request: \\"jsonrpc\\" must be \\"2.0\\""}}', server.lines[4])
    assert.are.equal('{"jsonrpc":"2.0","id":6,"error":{"code":-32600,"message":"Invalid Request: a request cannot carry \\"result\\" or \\"error\\""}}', server.lines[5])
    client.remove_tree(dir)
  end)

  it("refuses an over-limit line with -32600 and reads the next one", function()
    local server = client.spawn { "run", KITCHEN, "--max-message-bytes", "1000" }
    server:initialize()
    -- Sent in pieces, so the reader sees the line cross the limit before its end.
    server:write('{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"echo","arguments":{"value":"')
    for _ = 1, 20 do server:write(string.rep("x", 500)) end
    server:write('"}}}\n')
    server:send('{"jsonrpc":"2.0","id":51,"method":"ping"}')
    local first = server:read_line()
    assert.are.equal('{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Invalid Request: message larger than the limit of 1000 bytes"}}', first)
    assert.are.equal('{"jsonrpc":"2.0","id":51,"result":{}}', server:read_line())
    assert.is_true(server:silent_for(200))
    server:close()
  end)

  it("keeps stdout for protocol messages only", function()
    local server = client.spawn { "run", KITCHEN }
    server:initialize()
    local result = server:call_tool("print", {})
    assert.are.equal("printed", result.content[1].text)
    assert.truthy(server.stderr:find("print goes to stderr", 1, true))
    assert.truthy(server.stderr:find("io.write goes to stderr", 1, true))
    assert.truthy(server.stderr:find("io.stdout goes to stderr", 1, true))
    server:close()
  end)

  it("writes a trace of every message with direction and time", function()
    local dir = client.temp_dir()
    local server = client.spawn { "run", KITCHEN, "--trace", dir .. "/trace.log" }
    server:initialize()
    server:request("ping", {})
    server:close()
    local trace = client.read_file(dir .. "/trace.log")
    assert.truthy(trace:find('%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d%.%d%d%dZ stdio <%- {[^\n]*"method":"ping"'), trace)
    assert.truthy(trace:find('stdio %-> {"jsonrpc":"2.0","id":2,"result":{}}'))
    client.remove_tree(dir)
  end)

  it("cancels in-flight calls on EOF and exits without waiting for them", function()
    local server = client.spawn { "run", KITCHEN }
    server:initialize()
    -- A call that would sleep for a minute: the exit comes long before.
    server:send('{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep","arguments":{"ms":60000,"tag":"slow"}}}')
    assert.is_true(server:wait_stderr("sleep slow started"), server.stderr) -- in flight
    server:close_stdin()
    assert.are.equal(0, server:wait_exit(30000))
    assert.are.equal(0, #server.lines)
    server:close()
  end)
end)

-- A stop asked for while input pours in (issue 41.20): stopping wins over
-- reading, whatever arrives. The exit is the event waited for.
describe("SIGTERM while stdin pours bytes without a newline", function()
  local function assert_stops(server)
    assert.is_true(server:wait_stderr("serving MCP on stdio", 1, 30000), server.stderr)
    assert.is_true(server:wait_stderr("dropped a message over", 1, 30000), server.stderr) -- reading, discarding
    server:kill("sigterm")
    local code, signal = server:wait_exit(30000)
    assert.is_true(server.exited, "SIGTERM did not stop the server:\n" .. server.stderr)
    assert.are.equal(0, code, server.stderr)
    assert.are.equal(0, signal)
    assert.truthy(server.stderr:find("received signal 15; stopping", 1, true), server.stderr)
  end

  it("stops, stdin being /dev/zero", function()
    local server = client.spawn({ "run", KITCHEN, "--max-message-bytes", "1000" }, { stdin_file = "/dev/zero" })
    assert_stops(server)
    server:close()
  end)

  it("stops, stdin being a pipe the client floods", function()
    local server = client.spawn { "run", KITCHEN, "--max-message-bytes", "1000" }
    local chunk = string.rep("x", 64 * 1024)
    -- Writing on once the server has gone fails with EPIPE, not SIGPIPE.
    local sigpipe = uv.new_signal()
    sigpipe:start("sigpipe", function() end)
    local flood = uv.new_idle()
    flood:start(function()
      -- Keep a little queued: the pipe is always full, never a backlog here.
      if not server.stdin:is_closing() and server.stdin:get_write_queue_size() < 4 * #chunk then
        server.stdin:write(chunk, function() end)
      end
    end)
    local ok, err = pcall(assert_stops, server)
    flood:stop()
    flood:close()
    server:close()
    sigpipe:close()
    assert(ok, err)
  end)
end)

describe("command line", function()
  it("prints its version", function()
    local out = io.popen(client.LUAMCP .. " --version"):read("a")
    assert.truthy(out:find("^luamcp %d+%.%d+%.%d+"))
  end)

  it("shows a Claude Desktop snippet in --help", function()
    local out = io.popen(client.LUAMCP .. " --help"):read("a")
    assert.truthy(out:find('"mcpServers"', 1, true))
    assert.truthy(out:find('"args": ["run", "', 1, true))
  end)

  it("fails clearly on a broken script", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/bad.lua", "local x = \n")
    local server = client.spawn { "run", dir }
    local code = server:wait_exit(3000)
    assert.are.equal(1, code)
    assert.truthy(server.stderr:find("bad.lua:2:", 1, true), server.stderr)
    server:close()
    client.remove_tree(dir)
  end)

  it("serves a single .lua file and finds modules beside it", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/helper.lua", "return { greeting = 'hi from helper' }")
    client.write_file(dir .. "/server.lua", [[
      local mcp = require "mcp"
      local helper = require "helper"
      mcp.tool { name = "hi", handler = function() return helper.greeting end }
    ]])
    local server = client.spawn { "run", dir .. "/server.lua" }
    local info = server:initialize()
    assert.are.equal("server", info.serverInfo.name)
    assert.are.equal("hi from helper", server:call_tool("hi", {}).content[1].text)
    server:close()
    client.remove_tree(dir)
  end)
end)
