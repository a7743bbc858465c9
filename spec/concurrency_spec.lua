-- Every handler is a coroutine on one loop: waiting never blocks others.

local client = require "mcp_client"
local uv = require "luv"
local cjson = client.json

describe("concurrency", function()
  local server
  before_each(function()
    server = client.spawn { "run", "spec/fixtures/kitchen" }
    server:initialize()
  end)
  after_each(function() server:close() end)

  it("answers a ping sent after a 1 s sleep tool first", function()
    server:send('{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"sleep","arguments":{"ms":1000}}}')
    server:send('{"jsonrpc":"2.0","id":"fast","method":"ping"}')
    local first = cjson.decode(server:read_line(30000))
    assert.are.equal("fast", first.id) -- answered before the sleep ends: order, not a stopwatch
    local second = cjson.decode(server:read_line(30000))
    assert.are.equal("slow", second.id)
    assert.are.equal("slept 1000", second.result.content[1].text)
  end)

  it("answers out of order, matched by id", function()
    server:send('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":300}}}')
    server:send('{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":100}}}')
    server:send('{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":200}}}')
    local order = {}
    for i = 1, 3 do order[i] = cjson.decode(server:read_line(30000)).id end
    assert.are.same({ 2, 3, 1 }, order)
  end)

  it("runs many sleeping calls at once", function()
    -- One long sleep first: run one after another, it would answer first;
    -- at once, the 200 short ones all end before it (it is cancelled then:
    -- long enough for a loaded machine, and no one waits for its end).
    server:send('{"jsonrpc":"2.0","id":"long","method":"tools/call","params":{"name":"sleep","arguments":{"ms":120000}}}')
    for i = 1, 200 do
      server:send(('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":500}}}'):format(i))
    end
    local seen = {}
    for _ = 1, 200 do
      local msg = cjson.decode(server:read_line(30000))
      seen[msg.id] = true
    end
    for i = 1, 200 do assert.is_true(seen[i]) end
    assert.is_nil(seen.long)
    server:notify("notifications/cancelled", { requestId = "long" })
  end)

  it("stops a cancelled call and sends no response for it", function()
    -- Each is cancelled once it has started (the tool says so on stderr).
    server:send('{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"sleep","arguments":{"ms":3000,"tag":"c"}}}')
    assert.is_true(server:wait_stderr("sleep c started"), server.stderr)
    server:notify("notifications/cancelled", { requestId = "c", reason = "changed my mind" })
    -- A cancellation may name the id with different escapes: still the same id.
    server:send('{"jsonrpc":"2.0","id":"\\u0064","method":"tools/call","params":{"name":"sleep","arguments":{"ms":3000,"tag":"d"}}}')
    assert.is_true(server:wait_stderr("sleep d started"), server.stderr)
    server:send('{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"d"}}')
    -- No response for either: the next line is that of a longer sleep
    -- started after them (their 3 s would have ended before its 3.1 s: an
    -- order, not a window; the 3 s only need to outlast the cancellation).
    server:send('{"jsonrpc":"2.0","id":"after","method":"tools/call","params":{"name":"sleep","arguments":{"ms":3100}}}')
    assert.are.equal("after", cjson.decode(server:read_line()).id)
    -- The ids are free again and the server is fine.
    server:send('{"jsonrpc":"2.0","id":"c","method":"ping"}')
    assert.are.equal('{"jsonrpc":"2.0","id":"c","result":{}}', server:read_line())
  end)

  it("ignores a cancellation for an unknown or finished request", function()
    server:notify("notifications/cancelled", { requestId = 12345 })
    assert.are.same({}, server:request("ping", {}).result)
  end)

  it("refuses a second request with an id still in flight", function()
    server:send('{"jsonrpc":"2.0","id":"dup","method":"tools/call","params":{"name":"sleep","arguments":{"ms":300}}}')
    server:send('{"jsonrpc":"2.0","id":"dup","method":"ping"}')
    local first = cjson.decode(server:read_line())
    assert.are.equal(-32600, first.error.code)
    local second = cjson.decode(server:read_line())
    assert.are.equal("slept 300", second.result.content[1].text)
  end)

  it("sends log messages from mcp.log to the client", function()
    server:call_tool("broadcast_log", { level = "warning", data = "to everyone" })
    local logs = server:notifications_named("notifications/message")
    assert.are.same({ level = "warning", data = "to everyone" }, logs[1].params)
  end)
end)
