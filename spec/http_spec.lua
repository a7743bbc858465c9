-- The Streamable HTTP transport, driven through a real `luamcp run --http`
-- process over raw TCP on 127.0.0.1 (spec/helpers/http_client.lua): status
-- codes and their JSON-RPC error bodies, SSE framing, sessions, resumption
-- with Last-Event-ID, keep-alive, chunked bodies, clients that vanish, and
-- the flags that bound all of it.

local http = require "http_client"
local mcp_client = require "mcp_client"
local uv = require "luv"
local cjson = http.json

local KITCHEN = "spec/fixtures/kitchen"
local ASKING = "spec/fixtures/asking"
local SUITE = os.getenv("JSON_TEST_SUITE") or "../shared/JSONTestSuite/test_parsing"
local V = "2025-11-25"
local EMPTY = cjson.decode("{}")

local function call(id, name, arguments, meta)
  return { jsonrpc = "2.0", id = id, method = "tools/call",
           params = { name = name, arguments = arguments or EMPTY, _meta = meta } }
end

-- The headers of a request on a session (plus extra ones).
local function on(session, extra)
  local h = { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local POST_HEADERS = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }
local function post_headers(extra)
  local h = {}
  for k, v in pairs(POST_HEADERS) do h[k] = v end
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local assert_error = http.assert_error

-- The text of a tools/call result in a JSON response.
local function result_text(r)
  assert.is_table(r, "no response")
  assert.is_table(r.json, r.body)
  assert.is_table(r.json.result, r.body)
  return r.json.result.content[1].text
end

local function event_id(e)
  local stream, seq = (e.id or ""):match("^(%d+)%-(%d+)$")
  assert(stream, "not a <stream>-<seq> event id: " .. tostring(e.id))
  return tonumber(stream), tonumber(seq)
end

-- Read one request's response on an open connection after sending it.
local function exchange(conn, opts)
  assert.is_true(conn:send_request(opts))
  return conn:read_response(opts.timeout_ms)
end

describe("POST", function()
  local server, session
  setup(function()
    server = http.start { KITCHEN }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  it("answers initialize with a 32-hex-digit Mcp-Session-Id, new for each session", function()
    local r = server:post({ jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "t", version = "1" } } })
    assert.are.equal(200, r.status)
    assert.are.equal("application/json", r.headers["content-type"])
    local id = r.headers["mcp-session-id"]
    assert.are.equal(32, #id)
    assert.truthy(id:match("^[0-9a-f]+$"), id)
    assert.are_not.equal(session, id)
    assert.are.equal(1, r.json.id)
    assert.are.equal(V, r.json.result.protocolVersion)
    assert.are.equal("kitchen", r.json.result.serverInfo.name)
  end)

  it("accepts a notification with 202 and an empty body", function()
    local r = server:post({ jsonrpc = "2.0", method = "notifications/initialized" }, on(session))
    assert.are.equal(202, r.status)
    assert.are.equal("", r.body)
    assert.are.equal("0", r.headers["content-length"])
    assert.is_nil(r.headers["content-type"])
    assert.are.equal(session, r.headers["mcp-session-id"])
  end)

  it("accepts a response with 202 and an empty body", function()
    local r = server:post({ jsonrpc = "2.0", id = 4242, result = EMPTY }, on(session))
    assert.are.equal(202, r.status)
    assert.are.equal("", r.body)
    assert.are.equal("0", r.headers["content-length"])
  end)

  it("answers a request that sends nothing first with one application/json body", function()
    local r = server:post(call(7, "add", { a = 2, b = 3 }), on(session))
    assert.are.equal(200, r.status)
    assert.are.equal("application/json", r.headers["content-type"])
    assert.are.equal(session, r.headers["mcp-session-id"])
    assert.are.equal('{"jsonrpc":"2.0","id":7,"result":{"content":[{"text":"5","type":"text"}]}}', r.body)
  end)

  it("answers 406 unless Accept allows both application/json and text/event-stream", function()
    for _, accept in ipairs { false, "application/json", "text/event-stream", "text/html",
                              "application/json, text/event-stream;q=0", "application/json;q=0, text/event-stream" } do
      local r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { Accept = accept }))
      assert_error(r, 406, -32000, "Not Acceptable", 1)
    end
    for _, accept in ipairs { "*/*", "application/*, text/*", "text/event-stream;q=0.5, application/json;q=0.9" } do
      local r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { Accept = accept }))
      assert.are.equal(200, r.status, accept)
      assert.are.equal("2", result_text(r))
    end
  end)

  it("answers 415 unless Content-Type is application/json", function()
    for _, ct in ipairs { false, "text/plain", "application/jsonp", "application/x-www-form-urlencoded" } do
      local r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { ["Content-Type"] = ct }))
      assert_error(r, 415, -32000, "Unsupported Media Type", 1)
    end
    for _, ct in ipairs { "application/json; charset=utf-8", "Application/JSON" } do
      local r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { ["Content-Type"] = ct }))
      assert.are.equal(200, r.status, ct)
    end
  end)

  it("answers 400 to an unknown MCP-Protocol-Version", function()
    for _, version in ipairs { "2099-01-01", "2025-11-25 ", "" } do
      local r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { ["MCP-Protocol-Version"] = version }))
      assert_error(r, 400, -32600, "unsupported MCP-Protocol-Version", 1)
    end
    local r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { ["MCP-Protocol-Version"] = "2025-06-18" }))
    assert.are.equal(200, r.status)
  end)

  it("answers 400 to a request other than initialize without Mcp-Session-Id", function()
    local r = server:post(call(1, "add", { a = 1, b = 1 }), { ["MCP-Protocol-Version"] = V })
    assert_error(r, 400, -32600, "Mcp-Session-Id header is required", 1)
    r = server:post({ jsonrpc = "2.0", id = 1, method = "ping" })
    assert_error(r, 400, -32600, "Mcp-Session-Id header is required", 1)
  end)

  it("answers 404 with -32001 to a session id it does not know", function()
    local r = server:post(call(1, "add", { a = 1, b = 1 }), on(("0"):rep(32)))
    assert_error(r, 404, -32001, "Session not found", 1)
    r = server:post(call(1, "add", { a = 1, b = 1 }), on(session:upper()))
    assert_error(r, 404, -32001, "Session not found", 1)
  end)

  it("answers 400 with -32700 to a body that is not JSON, with or without a session", function()
    assert_error(server:post('{"jsonrpc":"2.0","id":1,', on(session)), 400, -32700)
    assert_error(server:post('{"jsonrpc":"2.0","id":1,'), 400, -32700)
    assert_error(server:post("", on(session)), 400, -32700)
  end)

  it("answers 400 with the JSON-RPC error to an invalid request", function()
    assert_error(server:post('{"jsonrpc":"2.0","id":1.5,"method":"ping"}', on(session)), 400, -32600)
    assert_error(server:post('[{"jsonrpc":"2.0","id":1,"method":"ping"}]', on(session)), 400, -32600,
      "batches are only allowed on a 2025-03-26 session")
  end)

  it("answers a batch on a 2025-03-26 session with one JSON array", function()
    local old = server:initialize("2025-03-26")
    local r = server:post('[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress",'
      .. '"params":{"progressToken":"x","progress":1}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":'
      .. '{"name":"add","arguments":{"a":20,"b":22}}}]', { ["Mcp-Session-Id"] = old })
    assert.are.equal(200, r.status)
    assert.are.equal("application/json", r.headers["content-type"])
    assert.are.equal(2, #r.json)
    table.sort(r.json, function(a, b) return a.id < b.id end)
    assert.are.same({}, r.json[1].result)
    assert.are.equal("42", r.json[2].result.content[1].text)
  end)

  it("accepts a 2025-03-26 batch of only notifications and responses with 202", function()
    local old = server:initialize("2025-03-26")
    local r = server:post('[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":1}},'
      .. '{"jsonrpc":"2.0","id":4243,"result":{}}]', { ["Mcp-Session-Id"] = old }, { timeout_ms = 2000 })
    assert.is_table(r, "no response to the batch")
    assert.are.equal(202, r.status)
    assert.are.equal("", r.body)
    r = server:post('[{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"x","progress":2}}]',
      { ["Mcp-Session-Id"] = old }, { timeout_ms = 2000 })
    assert.is_table(r, "no response to the batch")
    assert.are.equal(202, r.status)
  end)

  it("ends the exchange of a request the client cancels, without a response", function()
    -- Before anything was sent: an event stream with nothing in it.
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(session)), body = call("c1", "sleep", { ms = 60000, tag = "c1" }) }
    assert.is_true(server:wait_stderr("sleep c1 started"), server:stderr())
    local r = server:post({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = "c1" } }, on(session))
    assert.are.equal(202, r.status)
    r = conn:read_response()
    assert.is_table(r, "the cancelled request got no answer")
    assert.are.equal(200, r.status)
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.is_true(r.complete)
    assert.are.same({}, r.events)
    -- Mid stream: the stream ends, with no response in it.
    conn:send_request { method = "POST", headers = post_headers(on(session)),
                        body = call("c2", "progress", { steps = 1000 }, { progressToken = "c2" }) }
    assert.are.equal(200, conn:read_head().status)
    conn:read_event()
    assert.are.equal("notifications/progress", conn:read_event().json.method)
    server:post({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = "c2" } }, on(session))
    local events, ended = conn:read_events()
    assert.is_true(ended, "the cancelled request's stream did not end")
    for _, e in ipairs(events) do assert.is_nil(e.json.id) end
    -- The connection is still good.
    r = exchange(conn, { method = "POST", headers = post_headers(on(session)), body = call("c3", "add", { a = 1, b = 1 }) })
    assert.are.equal("2", result_text(r))
  end)

  it("switches to text/event-stream when the handler sends something before its result", function()
    local r = server:post(call("p", "progress", { steps = 3 }, { progressToken = "tok" }), on(session))
    assert.are.equal(200, r.status)
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.are.equal("no-cache", r.headers["cache-control"])
    assert.are.equal("chunked", r.headers["transfer-encoding"])
    assert.are.equal(session, r.headers["mcp-session-id"])
    assert.is_true(r.complete) -- the stream ends after the response
    local ev = r.events
    assert.are.equal(5, #ev)
    -- A priming event: an id to resume from, retry, and empty data.
    local prime_stream, prime_seq = event_id(ev[1])
    assert.truthy(ev[1].raw:match("^id: %d+%-%d+\nretry: 2000\ndata: $"), ev[1].raw)
    assert.are.equal("", ev[1].data)
    assert.is_nil(ev[1].event)
    -- Then each message as one "message" event with an increasing id.
    local last = prime_seq
    for i = 2, 5 do
      assert.are.equal("message", ev[i].event)
      local stream, seq = event_id(ev[i])
      assert.are.equal(prime_stream, stream)
      assert.is_true(seq > last)
      last = seq
    end
    for i = 2, 4 do
      assert.are.equal("notifications/progress", ev[i].json.method)
      assert.are.same({ progressToken = "tok", progress = i - 1, total = 3, message = "step " .. (i - 1) },
        ev[i].json.params)
    end
    assert.are.equal("p", ev[5].json.id)
    assert.are.equal("done", ev[5].json.result.content[1].text)
  end)

  it("sends no priming event to a request without MCP-Protocol-Version (2025-03-26)", function()
    local r = server:post(call(9, "progress", { steps = 2 }, { progressToken = 1 }), { ["Mcp-Session-Id"] = session })
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.are.equal(3, #r.events)
    for _, e in ipairs(r.events) do
      assert.are.equal("message", e.event)
      event_id(e)
    end
    assert.are.equal(9, r.events[3].json.id)
  end)
end)

describe("a tool asking the client over HTTP", function()
  local server, session
  setup(function()
    server = http.start { ASKING }
    session = server:initialize(V, { sampling = EMPTY })
  end)
  teardown(function() server:stop_cleanly() end)

  it("sends its request on the call's SSE stream; the reply is a POST answered 202", function()
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(session)), body = call(3, "sample", { prompt = "hi" }) }
    local head = conn:read_head()
    assert.are.equal(200, head.status)
    assert.are.equal("text/event-stream", head.headers["content-type"])
    local prime = conn:read_event()
    assert.are.equal("", prime.data)
    local ask = conn:read_event()
    assert.are.equal("message", ask.event)
    assert.are.equal("sampling/createMessage", ask.json.method)
    assert.are.same({ messages = { { role = "user", content = { type = "text", text = "hi" } } }, maxTokens = 50,
                      systemPrompt = "Be brief." }, ask.json.params)
    local reply = server:post({ jsonrpc = "2.0", id = ask.json.id, result = { role = "assistant", model = "m",
      content = { type = "text", text = "hello" } } }, on(session))
    assert.are.equal(202, reply.status)
    assert.are.equal("", reply.body)
    local events, ended = conn:read_events()
    assert.is_true(ended)
    assert.are.equal(1, #events)
    assert.are.equal(3, events[1].json.id)
    assert.are.same({ sampled = { role = "assistant", model = "m", content = { type = "text", text = "hello" } } },
      events[1].json.result.structuredContent)
  end)
end)

describe("JSONTestSuite files with a raw newline, as POST bodies", function()
  if not uv.fs_stat(SUITE) then -- a fresh clone has no ../shared
    pending("skipped: JSONTestSuite not found at " .. SUITE)
    return
  end
  local server, session
  setup(function()
    server = http.start { KITCHEN }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  local files = {}
  local req = assert(uv.fs_scandir(SUITE), "JSONTestSuite not found at " .. SUITE)
  while true do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    local content = mcp_client.read_file(SUITE .. "/" .. name)
    -- The i_ files are covered over stdio; none of them has a newline.
    if content:find("\n", 1, true) then files[#files + 1] = { name = name, content = content } end
  end
  table.sort(files, function(a, b) return a.name < b.name end)

  it("are the ten files stdio cannot carry", function()
    assert.are.equal(10, #files)
    for _, f in ipairs(files) do assert.truthy(f.name:match("^[yn]_"), f.name) end
  end)

  for _, f in ipairs(files) do
    local accept = f.name:sub(1, 1) == "y"
    it(f.name .. (accept and " is accepted" or " is rejected with -32700, HTTP 400"), function()
      local body = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"value":'
        .. f.content .. '}}}'
      local r = server:post(body, on(session))
      if accept then
        assert.are.equal(200, r.status, r.body)
        assert.are.equal(1, r.json.id)
        assert.is_nil(r.json.error)
        assert.is_table(r.json.result.structuredContent, r.body)
        assert.are.same(cjson.decode(f.content), r.json.result.structuredContent.value)
      else
        assert_error(r, 400, -32700, "Parse error")
      end
    end)
  end
end)

describe("sessions", function()
  local server
  setup(function() server = http.start { KITCHEN } end)
  teardown(function() server:stop_cleanly() end)

  local function get(session, extra)
    local h = { Accept = "text/event-stream", ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }
    for k, v in pairs(extra or {}) do h[k] = v end
    return { method = "GET", headers = h }
  end

  it("end with DELETE (200), after which every method gets 404", function()
    local session = server:initialize()
    local r = server:request { method = "DELETE", headers = { ["Mcp-Session-Id"] = session } }
    assert.are.equal(200, r.status)
    assert.are.equal("", r.body)
    assert_error(server:post(call(1, "add", { a = 1, b = 2 }), on(session)), 404, -32001, nil, 1)
    assert_error(server:request(get(session)), 404, -32001)
    assert_error(server:request { method = "DELETE", headers = { ["Mcp-Session-Id"] = session } }, 404, -32001)
  end)

  it("end their open streams when deleted, and keep the connections for the next request", function()
    local session = server:initialize()
    local g = server:connect()
    g:send_request(get(session))
    assert.are.equal(200, g:read_head().status)
    g:read_event()
    local p = server:connect()
    p:send_request { method = "POST", headers = post_headers(on(session)), body = call(1, "progress", { steps = 1000 }, { progressToken = 1 }) }
    assert.are.equal(200, p:read_head().status)
    local j = server:connect()
    j:send_request { method = "POST", headers = post_headers(on(session)), body = call(2, "sleep", { ms = 60000, tag = "j" }) }
    assert.is_true(server:wait_stderr("sleep j started"), server:stderr())
    assert.are.equal(200, server:request({ method = "DELETE", headers = { ["Mcp-Session-Id"] = session } }).status)
    local _, ended = g:read_events()
    assert.is_true(ended)
    _, ended = p:read_events()
    assert.is_true(ended)
    -- The call that had not answered yet gets what the session now gets.
    assert_error(j:read_response(), 404, -32001, nil, 2)
    -- A client may be sending its next request on any of these connections
    -- already (Node's fetch does): each one is still served.
    local ping = { method = "POST", headers = post_headers(), body = '{"jsonrpc":"2.0","id":1,"method":"ping"}' }
    for _, conn in ipairs { g, p, j } do
      assert.is_false(conn.eof)
      assert_error(exchange(conn, ping), 400, -32600, "Mcp-Session-Id", 1)
    end
    assert.is_true(server:alive())
    assert.are.equal(32, #server:initialize())
  end)

  it("need Mcp-Session-Id on GET and DELETE", function()
    assert_error(server:request { method = "DELETE" }, 400, -32600, "Mcp-Session-Id")
    assert_error(server:request(get(false)), 400, -32600, "Mcp-Session-Id")
  end)

  it("answer 406 to a GET that does not accept text/event-stream", function()
    local session = server:initialize()
    assert_error(server:request(get(session, { Accept = "application/json" })), 406, -32000)
    assert_error(server:request(get(session, { Accept = false })), 406, -32000)
  end)

  it("have one standalone GET stream for messages outside requests; a second one gets 409", function()
    local session = server:initialize()
    local g = server:connect()
    g:send_request(get(session))
    local head = g:read_head()
    assert.are.equal(200, head.status)
    assert.are.equal("text/event-stream", head.headers["content-type"])
    assert.are.equal(session, head.headers["mcp-session-id"])
    local prime = g:read_event()
    assert.are.equal(0, (event_id(prime)))
    assert.are.equal("", prime.data)

    assert_error(server:request(get(session)), 409, -32000, "Conflict")

    assert.are.equal("registered", result_text(server:post(call(1, "register", { name = "dyn1" }), on(session))))
    local e = g:read_event()
    assert.are.equal("message", e.event)
    assert.are.equal(0, (event_id(e)))
    assert.are.equal("notifications/tools/list_changed", e.json.method)

    -- Once the client goes, the stream may be opened again.
    g:close()
    local r
    assert.is_true(http.wait_until(function()
      r = server:request(get(session))
      return r.status ~= 409
    end, 2000))
    assert.are.equal(200, r.status)
  end)

  it("resume the standalone stream with Last-Event-ID, replaying what was missed, then live", function()
    local session = server:initialize()
    local g = server:connect()
    g:send_request(get(session))
    assert.are.equal(200, g:read_head().status)
    g:read_event() -- priming
    server:post(call(1, "broadcast_log", { data = "one" }), on(session))
    local one = g:read_event()
    assert.are.equal("one", one.json.params.data)
    g:close()
    server:post(call(2, "broadcast_log", { data = "two" }), on(session))
    server:post(call(3, "broadcast_log", { data = "three" }), on(session))

    local g2 = server:connect()
    g2:send_request(get(session, { ["Last-Event-ID"] = one.id }))
    local head = g2:read_head()
    assert.are.equal(200, head.status)
    local two, three = g2:read_event(), g2:read_event()
    assert.are.equal("two", two.json.params.data)
    assert.are.equal("three", three.json.params.data)
    assert.is_true(select(2, event_id(two)) > select(2, event_id(one)))
    server:post(call(4, "broadcast_log", { data = "four" }), on(session))
    local four = g2:read_event()
    assert.are.equal("four", four.json.params.data)
    -- The resumed stream is the session's GET stream: no second one.
    assert_error(server:request(get(session)), 409, -32000)
  end)

  it("answer 400 to a Last-Event-ID that names no stream of the session", function()
    local session = server:initialize()
    for _, id in ipairs { "garbage", "999-1", "1", "-1", "1-x" } do
      assert_error(server:request(get(session, { ["Last-Event-ID"] = id })), 400, -32600, "Last-Event-ID")
    end
  end)
end)

describe("Last-Event-ID on POST streams", function()
  local server, session
  setup(function()
    server = http.start { ASKING }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  local function get(last_event_id)
    return { method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = session,
                                         ["MCP-Protocol-Version"] = V, ["Last-Event-ID"] = last_event_id } }
  end

  -- POST close_stream: the response is a priming event and the end.
  local function start_closing_call(id, ms)
    local conn = server:connect()
    local r = exchange(conn, { method = "POST", headers = post_headers(on(session)),
                               body = call(id, "close_stream", { ms = ms, tag = tostring(id) }) })
    assert.are.equal(200, r.status)
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.is_true(r.complete)
    assert.are.equal(1, #r.events)
    assert.are.equal("", r.events[1].data)
    return r.events[1], conn
  end

  it("replays what was sent meanwhile, then continues live to the response", function()
    local prime, conn = start_closing_call(1, 400)
    -- The connection carried a complete response: it is still usable.
    local r = exchange(conn, { method = "POST", headers = post_headers(on(session)), body = call(2, "add", { a = 1, b = 2 }) })
    assert.are.equal("3", result_text(r))
    local g = server:connect()
    g:send_request(get(prime.id))
    local head = g:read_head()
    assert.are.equal(200, head.status)
    assert.are.equal("text/event-stream", head.headers["content-type"])
    local events, ended = g:read_events(3000)
    assert.is_true(ended)
    assert.are.equal(3, #events)
    assert.are.equal("while away", events[1].json.params.data)
    assert.are.equal("after 400 ms", events[2].json.params.data)
    assert.are.equal(1, events[3].json.id)
    assert.are.equal("finished, closed=true", events[3].json.result.content[1].text)
    local stream, seq = event_id(prime)
    for _, e in ipairs(events) do
      local s, n = event_id(e)
      assert.are.equal(stream, s)
      assert.is_true(n > seq)
      seq = n
    end
  end)

  it("replays everything after the given id once the call is over", function()
    local prime = start_closing_call(3, 50)
    assert.is_true(server:wait_stderr("close_stream 3 answers"), server:stderr()) -- the call is over
    local r = server:request(get(prime.id))
    assert.are.equal(200, r.status)
    assert.is_true(r.complete)
    assert.are.equal(3, #r.events)
    assert.are.equal(3, r.events[3].json.id)
    -- From the middle: only what came after.
    r = server:request(get(r.events[1].id))
    assert.are.equal(2, #r.events)
    assert.are.equal("after 50 ms", r.events[1].json.params.data)
    assert.are.equal(3, r.events[2].json.id)
  end)

  it("moves a stream still open on its POST to the resuming connection", function()
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(session)), body = call(5, "ticks", { n = 4, ms = 100 }) }
    assert.are.equal(200, conn:read_head().status)
    local prime = conn:read_event()
    assert.are.equal("tick 1", conn:read_event().json.params.data)
    local g = server:connect()
    g:send_request(get(prime.id))
    assert.are.equal(200, g:read_head().status)
    -- The POST's response ends properly (the connection stays usable) ...
    local rest, ended = conn:read_events(1000)
    assert.is_true(ended)
    assert.are.equal(0, #rest)
    assert.is_false(conn.eof)
    -- ... and the GET carries everything after the priming event.
    local events
    events, ended = g:read_events(3000)
    assert.is_true(ended)
    assert.are.equal(5, #events)
    assert.are.equal("tick 1", events[1].json.params.data)
    assert.are.equal("ticked 4", events[5].json.result.content[1].text)
  end)

  it("ends a resumed stream after the replay when its call was cancelled meanwhile", function()
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(session)), body = call(6, "ticks", { n = 100, ms = 20 }) }
    assert.are.equal(200, conn:read_head().status)
    local prime = conn:read_event()
    conn:read_event()
    conn:close()
    assert.is_true(conn:server_closed()) -- the client is away ...
    -- ... while the call ticks on (its log lines reach stderr too).
    local ticks = mcp_client.count(server:stderr(), "tool ticks: tick ")
    assert.is_true(server:wait_stderr("tool ticks: tick ", ticks + 1), server:stderr())
    assert.are.equal(202, server:post({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = 6 } }, on(session)).status)
    local r = server:request(get(prime.id))
    assert.are.equal(200, r.status)
    assert.is_true(r.complete)
    assert.is_true(#r.events >= 2)
    for _, e in ipairs(r.events) do assert.are.equal("notifications/message", e.json.method) end
  end)

  it("cannot end a stream early without a priming event (before 2025-11-25)", function()
    local r = server:post(call(4, "close_stream", { ms = 10 }), on(session, { ["MCP-Protocol-Version"] = "2025-06-18" }))
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.is_true(r.complete)
    assert.are.equal(3, #r.events)
    assert.are.equal("while away", r.events[1].json.params.data)
    assert.are.equal("finished, closed=false", r.events[3].json.result.content[1].text)
  end)
end)

describe("clients that vanish", function()
  local server, session
  setup(function()
    server = http.start { ASKING }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  local function still_serving()
    assert.is_true(server:alive(), server:stderr())
    assert.are.equal("5", result_text(server:post(call(99, "add", { a = 2, b = 3 }), on(session))))
    local fresh = server:initialize()
    assert.are.equal(32, #fresh)
  end

  it("mid SSE stream: the server keeps serving, the call goes on and can be resumed", function()
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(session)), body = call(1, "ticks", { n = 4, ms = 100 }) }
    assert.are.equal(200, conn:read_head().status)
    conn:read_event() -- priming
    local tick1 = conn:read_event()
    assert.are.equal("tick 1", tick1.json.params.data)
    conn:close()
    still_serving()
    local r = server:request { method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = session,
                                                            ["Last-Event-ID"] = tick1.id } }
    assert.are.equal(200, r.status)
    assert.is_true(r.complete)
    assert.are.equal(4, #r.events)
    assert.are.equal("tick 4", r.events[3].json.params.data)
    assert.are.equal("ticked 4", r.events[4].json.result.content[1].text)
  end)

  it("many times over, mid stream", function()
    for i = 1, 10 do
      local conn = server:connect()
      conn:send_request { method = "POST", headers = post_headers(on(session)), body = call("many" .. i, "ticks", { n = 3, ms = 20 }) }
      conn:read_head()
      conn:read_event()
      conn:close()
    end
    still_serving()
  end)

  it("before a JSON answer: the call is cancelled", function()
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(session)), body = call("w1", "wait", { ms = 60000, tag = "gone" }) }
    assert.is_true(server:wait_stderr("wait gone started"), server:stderr())
    conn:close()
    -- The same call with a client that stays finishes.
    assert.are.equal("waited", result_text(server:post(call("w2", "wait", { ms = 10, tag = "stayed" }), on(session))))
    -- The first call ended (the tool says so), cancelled before its end.
    assert.is_true(server:wait_stderr("wait gone ended"), server:stderr())
    assert.are.equal("false", result_text(server:post(call("w3", "finished", { tag = "gone" }), on(session))))
    assert.are.equal("true", result_text(server:post(call("w4", "finished", { tag = "stayed" }), on(session))))
    still_serving()
  end)

  it("in the middle of the headers or the body", function()
    local conn = server:connect()
    conn:write("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty")
    conn:close()
    conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers(on(session, { ["Content-Length"] = "500" })),
                                                  body = '{"jsonrpc":"2.0",' }))
    assert.is_true(conn:server_read_all()) -- the server has read part of the body
    conn:close()
    conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers(on(session, { ["Transfer-Encoding"] = "chunked" })),
                                                  body = "10\r\n{\"jsonrpc\":\"2.0\"," }))
    conn:close()
    still_serving()
  end)

  it("while the server waits for its answer to a request", function()
    local asked = server:initialize(V, { roots = EMPTY })
    local conn = server:connect()
    conn:send_request { method = "POST", headers = post_headers(on(asked)), body = call(1, "roots") }
    conn:read_head()
    conn:read_event()
    local ask = conn:read_event()
    assert.are.equal("roots/list", ask.json.method)
    conn:close()
    -- The answer still reaches the waiting call, whose result is kept for resumption.
    local reply = server:post({ jsonrpc = "2.0", id = ask.json.id, result = { roots = { { uri = "file:///x" } } } }, on(asked))
    assert.are.equal(202, reply.status)
    local r = server:request { method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = asked,
                                                            ["Last-Event-ID"] = ask.id } }
    assert.are.equal(200, r.status)
    assert.are.equal(1, #r.events)
    assert.are.same({ roots = { { uri = "file:///x" } } }, r.events[1].json.result.structuredContent)
    still_serving()
  end)
end)

describe("keep-alive", function()
  local server, session
  setup(function()
    server = http.start { KITCHEN }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  it("serves request after request on one connection", function()
    local conn = server:connect()
    local r = exchange(conn, { method = "POST", headers = post_headers(), body = { jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "ka", version = "1" } } } })
    assert.are.equal(200, r.status)
    local own = r.headers["mcp-session-id"]
    r = exchange(conn, { method = "POST", headers = post_headers(on(own)), body = { jsonrpc = "2.0", method = "notifications/initialized" } })
    assert.are.equal(202, r.status)
    r = exchange(conn, { method = "POST", headers = post_headers(on(own)), body = call(2, "add", { a = 3, b = 4 }) })
    assert.are.equal("7", result_text(r))
    r = exchange(conn, { method = "POST", headers = post_headers(on(own)), body = call(3, "progress", { steps = 2 }, { progressToken = 1 }) })
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.is_true(r.complete)
    r = exchange(conn, { method = "POST", headers = post_headers(on(own)), body = call(4, "nope") })
    assert.are.equal(200, r.status)
    r = exchange(conn, { method = "GET", path = "/elsewhere" })
    assert_error(r, 404, -32000)
    r = exchange(conn, { method = "POST", headers = post_headers(on(("f"):rep(32))), body = call(5, "add", { a = 1, b = 1 }) })
    assert_error(r, 404, -32001, nil, 5)
    r = exchange(conn, { method = "DELETE", headers = { ["Mcp-Session-Id"] = own } })
    assert.are.equal(200, r.status)
    assert.is_nil(r.headers["connection"])
    assert.is_false(conn.eof)
    assert.are.equal("", conn:pending())
  end)

  it("answers pipelined requests in order", function()
    local conn = server:connect()
    local bytes = http.format_request(server.port, { method = "POST", headers = post_headers(on(session)), body = call(1, "sleep", { ms = 200 }) })
      .. http.format_request(server.port, { method = "POST", headers = post_headers(on(session)), body = call(2, "add", { a = 1, b = 1 }) })
      .. http.format_request(server.port, { method = "POST", headers = post_headers(on(session)), body = call(3, "progress", { steps = 1 }, { progressToken = 1 }) })
      .. http.format_request(server.port, { method = "POST", headers = post_headers(on(session)), body = call(4, "add", { a = 2, b = 2 }) })
    conn:write(bytes)
    local r1, r2, r3, r4 = conn:read_response(), conn:read_response(), conn:read_response(), conn:read_response()
    assert.are.equal("slept 200", result_text(r1))
    assert.are.equal("2", result_text(r2))
    assert.are.equal(3, r3.events[#r3.events].json.id)
    assert.are.equal(3, #r3.events)
    assert.are.equal("4", result_text(r4))
  end)

  it("closes after the response when the client says Connection: close", function()
    local conn = server:connect()
    local r = exchange(conn, { method = "POST", headers = post_headers(on(session, { Connection = "close" })), body = call(1, "add", { a = 1, b = 1 }) })
    assert.are.equal("2", result_text(r))
    assert.are.equal("close", r.headers["connection"])
    assert.is_true(conn:wait_eof(2000))
  end)

  it("closes after an HTTP/1.0 response unless asked to keep it alive", function()
    local conn = server:connect()
    local r = exchange(conn, { version = "1.0", method = "POST", headers = post_headers(on(session)), body = call(1, "add", { a = 1, b = 1 }) })
    assert.are.equal("1.1", r.version)
    assert.are.equal("close", r.headers["connection"])
    assert.is_true(conn:wait_eof(2000))

    conn = server:connect()
    for i = 1, 2 do
      r = exchange(conn, { version = "1.0", method = "POST", headers = post_headers(on(session, { Connection = "keep-alive" })),
                           body = call(i, "add", { a = i, b = 1 }) })
      assert.are.equal(tostring(i + 1), result_text(r))
      assert.are.equal("keep-alive", r.headers["connection"])
    end
    assert.is_false(conn.eof)
  end)

  it("ends an HTTP/1.0 SSE response by closing the connection (no chunking)", function()
    local conn = server:connect()
    local r = exchange(conn, { version = "1.0", method = "POST", headers = post_headers(on(session, { Connection = "keep-alive" })),
                               body = call(1, "progress", { steps = 2 }, { progressToken = 1 }) })
    assert.are.equal("text/event-stream", r.headers["content-type"])
    assert.is_nil(r.headers["transfer-encoding"])
    assert.is_nil(r.headers["content-length"])
    assert.is_true(r.complete)
    assert.is_true(conn.eof)
    assert.are.equal(4, #r.events) -- priming, two progress notifications, the response
    assert.are.equal(1, r.events[4].json.id)
  end)
end)

describe("chunked request bodies", function()
  local server, session
  setup(function()
    server = http.start { KITCHEN }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  local function chunk(s) return ("%x\r\n%s\r\n"):format(#s, s) end

  it("are read across writes and chunks", function()
    local conn = server:connect()
    local body = cjson.encode { jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "chunky", version = "1" } } }
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers { ["Transfer-Encoding"] = "chunked" } }))
    local pieces = { body:sub(1, 10), body:sub(11, 11), body:sub(12, 80), body:sub(81) }
    for _, p in ipairs(pieces) do
      conn:write(chunk(p))
      assert.is_true(conn:server_read_all()) -- one read per chunk
    end
    conn:write("0\r\n\r\n")
    local r = conn:read_response()
    assert.are.equal(200, r.status)
    assert.are.equal(32, #r.headers["mcp-session-id"])
    assert.are.equal("kitchen", r.json.result.serverInfo.name)
  end)

  it("keep every byte, even a character split between chunks, and allow chunk extensions", function()
    local conn = server:connect()
    local body = '{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"echo","arguments":{"value":"h\u{e9}llo \u{1F600}"}}}'
    local split = body:find("\u{1F600}", 1, true) + 2 -- inside the 4-byte character
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers(on(session, { ["Transfer-Encoding"] = "chunked" })) })
      .. ("%x;name=value\r\n%s\r\n"):format(split - 1, body:sub(1, split - 1)))
    assert.is_true(conn:server_read_all()) -- read apart from the rest
    conn:write(chunk(body:sub(split)) .. "0\r\n\r\n")
    local r = conn:read_response()
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("h\u{e9}llo \u{1F600}", r.json.result.structuredContent.value)
    -- The connection goes on after a chunked body.
    r = exchange(conn, { method = "POST", headers = post_headers(on(session)), body = call(2, "add", { a = 5, b = 5 }) })
    assert.are.equal("10", result_text(r))
  end)
end)

describe("limits, methods and paths", function()
  local server, session
  setup(function()
    server = http.start { KITCHEN, "--max-message-bytes", "1024" }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  -- A tools/call echo body of exactly n bytes, and the value it echoes.
  local function body_of(n)
    local head, tail = '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"value":"', '"}}}'
    local value = ("x"):rep(n - #head - #tail)
    return head .. value .. tail, value
  end

  it("accepts a body of exactly --max-message-bytes", function()
    local body, value = body_of(1024)
    assert.are.equal(1024, #body)
    local r = server:post(body, on(session))
    assert.are.equal(200, r.status, r.body)
    assert.are.equal(value, r.json.result.structuredContent.value)
  end)

  it("answers 413 to a larger Content-Length before reading the body, and closes", function()
    local conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers(on(session, { ["Content-Length"] = "1025" })) }))
    local r = conn:read_response(1000) -- no body was sent: the answer cannot wait for it
    assert_error(r, 413, -32600, "Content Too Large")
    assert.are.equal("close", r.headers["connection"])
    assert.is_true(conn:wait_eof(1000))
    r = server:post((body_of(1025)), on(session))
    assert_error(r, 413, -32600)
  end)

  it("answers 413 to a chunked body as soon as it grows too large, and closes", function()
    local conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers(on(session, { ["Transfer-Encoding"] = "chunked" })) })
      .. ("%x\r\n%s\r\n"):format(600, ("x"):rep(600)))
    assert.is_true(conn:server_read_all()) -- read apart from the rest
    conn:write(("%x\r\n%s\r\n"):format(600, ("x"):rep(600))) -- 1200 bytes so far, and no end
    local r = conn:read_response() -- 413, not the 408 of a body that never ends
    assert_error(r, 413, -32600, "Content Too Large")
    assert.is_true(conn:wait_eof(1000))
  end)

  it("answers 431 to a header block over 16 KiB, and closes", function()
    local conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers(on(session, { ["X-Filler"] = ("f"):rep(17 * 1024) })),
                                                  body = call(1, "add", { a = 1, b = 1 }) }))
    local r = conn:read_response(1000)
    assert_error(r, 431, -32000, "Request Header Fields Too Large")
    assert.is_true(conn:wait_eof(1000))
    -- Just under the limit is fine.
    r = server:post(call(1, "add", { a = 1, b = 1 }), on(session, { ["X-Filler"] = ("f"):rep(15 * 1024) }))
    assert.are.equal("2", result_text(r))
  end)

  it("answers 405 with Allow to other methods", function()
    local conn = server:connect()
    for _, method in ipairs { "PUT", "PATCH" } do
      local r = exchange(conn, { method = method, headers = on(session) })
      assert_error(r, 405, -32000, "Method Not Allowed")
      assert.are.equal("GET, POST, DELETE, OPTIONS", r.headers["allow"])
    end
    -- HEAD too, with no body: the connection goes on with the next response.
    local r = exchange(conn, { method = "HEAD", headers = on(session) })
    assert.are.equal(405, r.status)
    assert.are.equal("GET, POST, DELETE, OPTIONS", r.headers["allow"])
    assert.are.equal("", r.body)
    assert.are.equal("", conn:pending())
    r = exchange(conn, { method = "POST", headers = post_headers(on(session)), body = call(1, "add", { a = 1, b = 1 }) })
    assert.are.equal("2", result_text(r))
  end)

  it("answers 404 to other paths", function()
    for _, path in ipairs { "/", "/mcp/", "/mcp/x", "/MCP", "/other" } do
      assert_error(server:post(call(1, "add", { a = 1, b = 1 }), on(session), { path = path }), 404, -32000, "Not Found", 1)
    end
    -- A query string does not change the path.
    assert.are.equal("2", result_text(server:post(call(1, "add", { a = 1, b = 1 }), on(session), { path = "/mcp?x=1" })))
  end)
end)

describe("malformed requests", function()
  local server
  setup(function() server = http.start { KITCHEN } end)
  teardown(function() server:stop_cleanly() end)

  it("answers 400 to malformed HTTP and to a missing Host, closes, and keeps serving", function()
    local malformed = {
      "NOT HTTP AT ALL\r\n\r\n",
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n",
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}",
    }
    for _, bytes in ipairs(malformed) do
      local conn = server:connect()
      conn:write(bytes)
      assert_error(conn:read_response(1000), 400, -32600, "malformed HTTP")
      assert.is_true(conn:wait_eof(1000))
      assert.is_true(server:alive(), server:stderr())
    end
    local conn = server:connect()
    conn:write("POST /mcp HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    assert_error(conn:read_response(1000), 400, -32600, "Host header")
    assert.is_true(conn:wait_eof(1000))
  end)
end)

describe("Host and Origin", function()
  local server
  setup(function() server = http.start { KITCHEN } end)
  teardown(function() server:stop_cleanly() end)

  local function init(headers, host)
    return server:post({ jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "h", version = "1" } } }, headers, { host = host })
  end

  it("accepts loopback names on any port", function()
    for _, host in ipairs { "127.0.0.1", "127.0.0.1:1", "localhost", "LOCALHOST:8080", "[::1]", "[::1]:3000" } do
      assert.are.equal(200, init(nil, host).status, host)
    end
    for _, origin in ipairs { "http://localhost:3000", "https://127.0.0.1", "http://[::1]:5173" } do
      assert.are.equal(200, init({ Origin = origin }).status, origin)
    end
  end)

  it("answers 403 to any other Host or Origin", function()
    for _, host in ipairs { "evil.com", "127.evil.com", "localhost.evil.com", "127.0.0.2", "[::2]:80" } do
      assert_error(init(nil, host), 403, -32000, "Host not allowed")
    end
    for _, origin in ipairs { "https://evil.com", "http://127.evil.com", "http://localhost.evil.com:3000", "null",
                              "file://", "http://localhost/path" } do
      assert_error(init({ Origin = origin }), 403, -32000, "Origin not allowed")
    end
  end)

  it("answers 400 to more than one Host header, whatever their order", function()
    local body = cjson.encode { jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "h", version = "1" } } }
    for _, hosts in ipairs { { "evil.com", "localhost" }, { "localhost", "evil.com" }, { "localhost", "localhost" } } do
      local conn = server:connect()
      conn:write("POST /mcp HTTP/1.1\r\nHost: " .. hosts[1] .. "\r\nHost: " .. hosts[2] .. "\r\nAccept: " .. http.ACCEPT_BOTH
        .. "\r\nContent-Type: application/json\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body)
      assert_error(conn:read_response(1000), 400, -32600, "more than one Host header")
      assert.is_true(conn:wait_eof(1000))
    end
  end)

  it("answers 403 before reading the body, and closes", function()
    local conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", host = "127.evil.com",
                                                  headers = post_headers { ["Content-Length"] = "100000" } }))
    assert_error(conn:read_response(1000), 403, -32000)
    assert.is_true(conn:wait_eof(1000))
  end)
end)

describe("--allow-host and --allow-origin", function()
  local server
  setup(function()
    server = http.start { KITCHEN, "--allow-host", "mcp.example.test", "--allow-origin", "https://app.example.test" }
  end)
  teardown(function() server:stop_cleanly() end)

  local function init(headers, host)
    return server:post({ jsonrpc = "2.0", id = 1, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "h", version = "1" } } }, headers, { host = host })
  end

  it("extend the names accepted", function()
    assert.are.equal(200, init(nil, "mcp.example.test:8443").status)
    assert.are.equal(200, init(nil, "localhost").status)
    assert_error(init(nil, "other.example.test"), 403, -32000)
    assert.are.equal(200, init({ Origin = "https://app.example.test" }).status)
    assert.are.equal(200, init({ Origin = "http://localhost:3000" }).status)
    assert_error(init({ Origin = "https://other.example.test" }), 403, -32000)
    assert_error(init({ Origin = "https://app.example.test.evil.com" }), 403, -32000)
  end)
end)

describe("--bearer-token-env", function()
  local server
  setup(function()
    server = http.start({ KITCHEN, "--bearer-token-env", "LUAMCP_SPEC_TOKEN" }, { env = { "LUAMCP_SPEC_TOKEN=s3cret-token" } })
  end)
  teardown(function() server:stop_cleanly() end)

  local INIT = { jsonrpc = "2.0", id = 1, method = "initialize",
                 params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "b", version = "1" } } }

  it("answers 401 with WWW-Authenticate: Bearer without the right token", function()
    for _, auth in ipairs { false, "Bearer wrong", "Bearer s3cret-toke", "Bearer s3cret-token2", "Basic czNjcmV0LXRva2Vu",
                            "s3cret-token" } do
      local r = server:post(INIT, { Authorization = auth })
      assert_error(r, 401, -32000, "Unauthorized")
      assert.are.equal("Bearer", r.headers["www-authenticate"])
    end
    local r = server:request { method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = ("0"):rep(32) } }
    assert_error(r, 401, -32000)
    assert.are.equal("Bearer", r.headers["www-authenticate"])
  end)

  it("answers 401 before reading the body, and closes", function()
    local conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = post_headers { ["Content-Length"] = "100000" } }))
    assert_error(conn:read_response(1000), 401, -32000)
    assert.is_true(conn:wait_eof(1000))
  end)

  it("serves requests that carry the token", function()
    local auth = { Authorization = "Bearer s3cret-token" }
    local r = server:post(INIT, auth)
    assert.are.equal(200, r.status)
    local session = r.headers["mcp-session-id"]
    auth = { Authorization = "bearer s3cret-token", ["Mcp-Session-Id"] = session }
    assert.are.equal("3", result_text(server:post(call(2, "add", { a = 1, b = 2 }), auth)))
  end)
end)

describe("--max-sessions", function()
  local server
  setup(function() server = http.start { KITCHEN, "--max-sessions", "2" } end)
  teardown(function() server:stop_cleanly() end)

  it("answers 503 to initialize beyond it, until a session ends", function()
    local a = server:initialize()
    server:initialize()
    local init = { jsonrpc = "2.0", id = 1, method = "initialize",
                   params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "m", version = "1" } } }
    local r = server:post(init)
    assert_error(r, 503, -32000, "too many sessions", 1)
    assert.are.equal("5", r.headers["retry-after"])
    -- Existing sessions still work.
    assert.are.equal("2", result_text(server:post(call(1, "add", { a = 1, b = 1 }), on(a))))
    assert.are.equal(200, server:request({ method = "DELETE", headers = { ["Mcp-Session-Id"] = a } }).status)
    assert.are.equal(200, server:post(init).status)
  end)
end)

describe("--max-connections", function()
  local server
  setup(function() server = http.start { KITCHEN, "--max-connections", "2" } end)
  teardown(function() server:stop_cleanly() end)

  it("answers 503 and closes beyond it while every connection is busy, and accepts again once one closes", function()
    local c1, c2 = server:connect(), server:connect()
    local ping = { method = "POST", headers = post_headers(), body = '{"jsonrpc":"2.0","id":1,"method":"ping"}' }
    -- Both are served (and so counted) before the third arrives, and both
    -- are busy then: each has begun its next request (an idle one would be
    -- closed to make room, see spec/http_hardening_spec.lua).
    assert.are.equal(400, exchange(c1, ping).status)
    assert.are.equal(400, exchange(c2, ping).status)
    local ping_bytes = http.format_request(server.port, ping)
    local half = ping_bytes:find("\r\n", 1, true) + 1
    assert.is_true(c1:write(ping_bytes:sub(1, half)))
    assert.is_true(c2:write(ping_bytes:sub(1, half)))
    -- (On loopback their bytes are readable before the next connection is
    -- even made, and the server handles readiness in the order it came.)
    local c3 = server:connect()
    local r = c3:read_response(5000) -- answered without a request
    assert_error(r, 503, -32000, "too many connections")
    assert.are.equal("1", r.headers["retry-after"])
    assert.are.equal("close", r.headers["connection"])
    assert.is_true(c3:wait_eof(5000))
    c1:close()
    local status
    assert.is_true(http.wait_until(function()
      local c = server:connect()
      local answer = exchange(c, ping)
      c:close()
      status = answer and answer.status
      return status ~= 503
    end, 10000))
    assert.are.equal(400, status)
    assert.is_true(c2:write(ping_bytes:sub(half + 1)))
    assert.are.equal(400, c2:read_response().status)
  end)
end)

describe("--session-timeout", function()
  -- Every check that a session is still there runs right after what kept
  -- it (no sleep a loaded machine could stretch past the timeout); every
  -- check that one ended waits for the server's debug line saying so.
  local server
  setup(function() server = http.start { KITCHEN, "--session-timeout", "5", "--log-level", "debug" } end)
  teardown(function() server:stop_cleanly() end)

  it("ends idle sessions, but not one with an open stream or a call in progress", function()
    local idle, streaming, busy = server:initialize(), server:initialize(), server:initialize()
    local g = server:connect()
    g:send_request { method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = streaming } }
    assert.are.equal(200, g:read_head().status)
    -- A call longer than the timeout; its session is idle only from its answer on.
    local r = server:post(call(1, "sleep", { ms = 7000 }), on(busy), { timeout_ms = 60000 })
    assert.are.equal("slept 7000", result_text(r))
    assert.are.equal("2", result_text(server:post(call(2, "add", { a = 1, b = 1 }), on(busy))))
    assert_error(server:post(call(1, "add", { a = 1, b = 1 }), on(idle)), 404, -32001, nil, 1)
    -- The stream is still open (an ended session would have ended it) ...
    g:pump()
    assert.is_false(g.eof)
    assert.is_false(g.body_done)
    -- ... and once it closes, the session is idle from then on (from its
    -- opening, 7 s ago, it would be gone).
    g:close()
    assert.are.equal("2", result_text(server:post(call(1, "add", { a = 1, b = 1 }), on(streaming))))
    -- Left alone, it ends too: the server says so of each of the three.
    assert.is_true(server:wait_stderr("expired after 5 s idle", 3), server:stderr())
    assert_error(server:post(call(2, "add", { a = 1, b = 1 }), on(streaming)), 404, -32001, nil, 2)
  end)
end)
