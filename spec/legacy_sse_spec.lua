-- The 2024-11-05 HTTP+SSE transport (issue 31), served beside Streamable
-- HTTP on the same port: GET /sse opens a session's stream, whose
-- `endpoint` event names /messages?session_id=ID; POSTs there are answered
-- 202 and everything the session says goes down the stream. Real clients
-- (the TypeScript SDK v1 SSEClientTransport, mcp-remote --transport
-- sse-only, Claude Code) and raw hostile requests, which get the answers
-- Streamable HTTP gives. Statuses, bodies, order and counts are asserted,
-- never durations; every wait is bounded.

local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local services = require "services"
local uv = require "luv"
local cjson = http.json

local EMPTY = cjson.decode("{}")
local HARDENING = "spec/fixtures/hardening"
local SCALEOUT = "spec/fixtures/scaleout"
local MCP_REMOTE = "spec/node_modules/.bin/mcp-remote"
local CLAUDE = "spec/node_modules/.bin/claude"
-- AddressSanitizer keeps freed memory in quarantine: RSS says nothing then.
local SANITIZED = (os.getenv("LUAMCP") or ""):find("asan") ~= nil
local HAVE_NODE = uv.fs_access(node.NODE, "X")

local function abs(path) return io.popen("readlink -f " .. path):read("l") end

local function init_message(id)
  return { jsonrpc = "2.0", id = id or 1, method = "initialize", params = {
    protocolVersion = "2024-11-05", capabilities = EMPTY, clientInfo = { name = "busted-sse", version = "1" } } }
end

-- The endpoint event, the stream's first (read raw: its data is not JSON,
-- which Conn:read_event would decode).
local function read_endpoint(conn)
  local stop
  http.wait_until(function()
    conn:pump()
    stop = conn.body:find("\n\n", 1, true)
    return stop or conn.body_done or conn.eof
  end, 10000)
  assert(stop, "no endpoint event")
  local block = conn.body:sub(1, stop - 1)
  conn.body = conn.body:sub(stop + 2)
  assert(block:match("^event: endpoint\n"), block)
  return block:match("\ndata: ([^\n]*)")
end

-- Open GET /sse on a new connection: the connection, the response head
-- and the endpoint event's URL (nil when the GET was refused).
local function open_stream(server, headers)
  local conn = server:connect()
  local h = { Accept = "text/event-stream" }
  for k, v in pairs(headers or {}) do h[k] = v end
  conn:send_request { method = "GET", path = "/sse", headers = h }
  local head = conn:read_head(10000)
  if not head or head.status ~= 200 then return conn, head end
  return conn, head, read_endpoint(conn)
end

-- POST a message to the endpoint (a path with its query).
local function post(server, endpoint, message, headers)
  local h = { ["Content-Type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  return server:request { method = "POST", path = endpoint, headers = h, body = message }
end

-- The next `message` event on the stream with this id (skipping others).
local function answer(conn, id)
  for _ = 1, 50 do
    local e = conn:read_event(10000)
    if not e then return nil end
    if e.event == "message" and e.json and e.json.id == id then return e.json end
  end
end

-- An initialized session on a raw connection: stream, endpoint.
local function session(server)
  local conn, head, endpoint = open_stream(server)
  assert(endpoint, "GET /sse was refused: " .. tostring(head and head.status))
  assert.are.equal(202, post(server, endpoint, init_message(1)).status)
  assert.is_table(answer(conn, 1).result)
  assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
  return conn, endpoint
end

describe("HTTP+SSE on the wire", function()
  local server
  setup(function() server = http.start { HARDENING } end)
  teardown(function() server:stop_cleanly() end)

  it("announces the endpoint, answers POSTs with 202 and the messages on the stream, in order", function()
    local conn, head, endpoint = open_stream(server)
    assert.are.equal(200, head.status)
    assert.are.equal("text/event-stream", head.headers["content-type"])
    assert.truthy(endpoint:match("^/messages%?session_id=%x+$"), endpoint)
    local r = post(server, endpoint, init_message(1))
    assert.are.equal(202, r.status)
    local init = answer(conn, 1)
    assert.are.equal("2024-11-05", init.result.protocolVersion)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
    for i = 2, 21 do
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = i, method = "tools/call",
        params = { name = "add", arguments = { a = i, b = 1 } } }).status)
    end
    local ids = {}
    for _ = 2, 21 do
      local e = conn:read_event(10000)
      assert.are.equal("message", e.event)
      ids[#ids + 1] = e.json.id
      assert.are.equal(("%d"):format(e.json.id + 1), e.json.result.content[1].text)
    end
    assert.are.same({ 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21 }, ids)
    -- Streamable HTTP on the same port goes on as before.
    local sid = server:initialize()
    assert.truthy(sid)
    -- ... and the ids of each transport are its own.
    http.assert_error(server:post({ jsonrpc = "2.0", id = 5, method = "ping" },
      { ["Mcp-Session-Id"] = endpoint:match("session_id=(%x+)"), ["MCP-Protocol-Version"] = "2025-11-25" }),
      404, -32001, "Session not found", 5)
    http.assert_error(post(server, "/messages?session_id=" .. sid, { jsonrpc = "2.0", id = 6, method = "ping" }),
      404, -32001, "Session not found", 6)
    conn:close()
  end)

  it("answers an unknown session 404 and a POST without one 400, with JSON-RPC bodies echoing the id", function()
    http.assert_error(post(server, "/messages?session_id=0123456789abcdef0123456789abcdef",
      { jsonrpc = "2.0", id = 7, method = "tools/list" }), 404, -32001, "Session not found", 7)
    http.assert_error(post(server, "/messages", { jsonrpc = "2.0", id = 8, method = "tools/list" }),
      400, -32600, "session_id", 8)
    local _, endpoint = session(server)
    http.assert_error(post(server, endpoint, "{not json"), 400, -32700, "Parse error")
    http.assert_error(post(server, endpoint, { jsonrpc = "2.0", id = 9, method = "ping" }, { ["Content-Type"] = "text/plain" }),
      415, -32000, "Content-Type", 9)
    local r = server:request { method = "DELETE", path = "/sse" }
    assert.are.equal(405, r.status)
  end)

  it("answers a batch (2025-03-26) down the stream as one array, and cancels a batch's calls when the stream closes", function()
    local conn, head, endpoint = open_stream(server)
    assert.are.equal(200, head.status)
    local init = init_message(1)
    init.params.protocolVersion = "2025-03-26"
    assert.are.equal(202, post(server, endpoint, init).status)
    assert.are.equal("2025-03-26", answer(conn, 1).result.protocolVersion)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
    assert.are.equal(202, post(server, endpoint, { { jsonrpc = "2.0", id = 14, method = "tools/call",
      params = { name = "add", arguments = { a = 1, b = 2 } } }, { jsonrpc = "2.0", id = 15, method = "ping" } }).status)
    local e = conn:read_event(10000)
    assert.is_table(e and e.json, "no answer")
    assert.are.equal(2, #e.json, cjson.encode(e))
    assert.are.equal(202, post(server, endpoint, { { jsonrpc = "2.0", id = 16, method = "tools/call",
      params = { name = "sleep", arguments = { ms = 60000 } } }, { jsonrpc = "2.0", id = 17, method = "ping" } }).status)
    conn:close()
    assert.is_true(client.poll_until(function()
      local r = post(server, endpoint, { jsonrpc = "2.0", id = 18, method = "ping" })
      return r and r.status == 404
    end, 30000, 100))
    assert.is_true(server:alive())
  end)

  it("refuses an oversized body with 413", function()
    local _, endpoint = session(server)
    local big = string.rep("x", 5 * 1024 * 1024)
    local r = post(server, endpoint, { jsonrpc = "2.0", id = 10, method = "ping", params = { pad = big } })
    assert.are.equal(413, r.status)
    assert.are.equal(-32600, r.json.error.code)
  end)

  it("refuses a foreign Origin or Host with 403, on the stream and on POSTs", function()
    local _, head = open_stream(server, { Origin = "https://evil.example" })
    assert.are.equal(403, head.status)
    local _, endpoint = session(server)
    http.assert_error(post(server, endpoint, { jsonrpc = "2.0", id = 11, method = "ping" }, { Origin = "https://evil.example" }),
      403, -32000, "Origin")
    local conn = server:connect()
    conn:send_request { method = "GET", path = "/sse", host = "evil.example", headers = { Accept = "text/event-stream" } }
    local r = conn:read_response(10000)
    assert.are.equal(403, r.status)
    -- A local Origin is allowed, and gets CORS headers.
    local ok, ok_head = open_stream(server, { Origin = "http://localhost:3000" })
    assert.are.equal(200, ok_head.status)
    assert.are.equal("http://localhost:3000", ok_head.headers["access-control-allow-origin"])
    ok:close()
  end)

  it("ends the session when its stream closes: its calls are cancelled, later POSTs get 404", function()
    local conn, endpoint = session(server)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 12, method = "tools/call",
      params = { name = "sleep", arguments = { ms = 60000 } } }).status)
    conn:close()
    local gone = client.poll_until(function()
      local r = post(server, endpoint, { jsonrpc = "2.0", id = 13, method = "ping" })
      return r and r.status == 404
    end, 30000, 100)
    assert.is_true(gone)
    assert.is_true(server:alive())
  end)

  it("sends keep-alive comments on an idle stream", function()
    local conn = session(server)
    local e
    repeat e = conn:read_event(60000) until not e or (#e.comments > 0 and not e.data)
    assert.is_table(e, "no keep-alive comment")
    conn:close()
  end)
end)

-- MCP tasks belong to the 2026-07-28 era (declared in each request's
-- _meta), which this transport does not serve: a session here, even one
-- that declares the extension at initialize, gets the tool's result in
-- the call, as every initialize-era client does.
describe("HTTP+SSE and MCP tasks", function()
  it("answers the demo's report (a task for 2026-07-28 clients) in the call itself", function()
    local server = http.start { "scripts/demo" }
    local conn, head, endpoint = open_stream(server)
    assert.are.equal(200, head.status)
    local caps = { extensions = { ["io.modelcontextprotocol/tasks"] = EMPTY } }
    local init = init_message(1)
    init.params.protocolVersion = "2025-11-25"
    init.params.capabilities = caps
    assert.are.equal(202, post(server, endpoint, init).status)
    assert.is_table(answer(conn, 1).result)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 2, method = "tools/call",
      params = { name = "report", arguments = { sections = 2 } } }).status)
    local created = answer(conn, 2)
    assert.is_table(created and created.result, cjson.encode(created or "no answer"))
    assert.is_nil(created.result.resultType)
    assert.truthy(created.result.content[1].text:find("Section 2 of 2", 1, true), cjson.encode(created))
    server:stop_cleanly()
  end)
end)

describe("HTTP+SSE while the server drains", function()
  it("answers the calls in flight down the stream, then ends the stream and exits 0", function()
    local server = http.start({ HARDENING }, { drain_time = 60 })
    local conn, endpoint = session(server)
    local idle, idle_endpoint = session(server)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 30, method = "tools/call",
      params = { name = "sleep", arguments = { ms = 1500 } } }).status)
    server.proc:kill("sigterm")
    local m = answer(conn, 30)
    assert.is_table(m, "the call in flight was not answered:\n" .. server:stderr())
    assert.are.equal("slept 1500", m.result.content[1].text)
    -- Both streams end (the chunked body's end, then the connection).
    assert.is_true(conn:wait_eof(30000))
    assert.is_true(idle:wait_eof(30000))
    assert.is_truthy(idle_endpoint)
    local code, signal = server.proc:wait_exit(30000)
    assert.are.equal(0, code, server:stderr())
    assert.are.equal(0, signal)
    server:stop()
  end)
end)

describe("HTTP+SSE switched off or moved", function()
  it("--no-sse answers /sse 404; --sse-path moves the stream and its POSTs", function()
    local off = http.start { "--no-sse", HARDENING }
    local _, head = open_stream(off)
    assert.are.equal(404, head.status)
    off:stop_cleanly()
    local moved = http.start { "--sse-path", "/legacy/events", HARDENING }
    local conn = moved:connect()
    conn:send_request { method = "GET", path = "/legacy/events", headers = { Accept = "text/event-stream" } }
    assert.are.equal(200, conn:read_head(10000).status)
    local endpoint = read_endpoint(conn)
    assert.truthy(endpoint:match("^/legacy/messages%?session_id=%x+$"), endpoint)
    assert.are.equal(202, post(moved, endpoint, init_message(1)).status)
    assert.is_table(answer(conn, 1).result)
    moved:stop_cleanly()
  end)
end)

describe("HTTP+SSE and the caps", function()
  it("counts its sessions in --max-sessions", function()
    local server = http.start { "--max-sessions", "2", HARDENING }
    local one = session(server)
    local two = session(server)
    local third, head = open_stream(server)
    assert.are.equal(503, head.status)
    assert.truthy(head.headers["retry-after"])
    third:close()
    assert.is_false(one.eof)
    assert.is_false(two.eof)
    server:stop_cleanly()
  end)

  it("counts its streams as busy connections in --max-connections: never closed to make room", function()
    local server = http.start { "--max-connections", "2", HARDENING }
    local one, head_one = open_stream(server)
    local two, head_two = open_stream(server)
    assert.are.equal(200, head_one.status)
    assert.are.equal(200, head_two.status)
    local extra = server:connect()
    extra:send_request { method = "GET", path = "/sse", headers = { Accept = "text/event-stream" } }
    local r = extra:read_response(10000)
    assert.are.equal(503, r and r.status)
    assert.is_false(one.eof)
    assert.is_false(two.eof)
    server:stop_cleanly()
  end)
end)

describe("HTTP+SSE and --trace", function()
  it("traces the session's messages both ways", function()
    local dir = client.temp_dir()
    local server = http.start { "--trace", dir .. "/trace.log", HARDENING }
    local conn, endpoint = session(server)
    assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 40, method = "tools/call",
      params = { name = "add", arguments = { a = 40, b = 2 } } }).status)
    assert.are.equal("42", answer(conn, 40).result.content[1].text)
    conn:close()
    server:stop_cleanly()
    local trace = client.read_file(dir .. "/trace.log")
    client.remove_tree(dir)
    assert.truthy(trace:find('<%- {[^\n]*"id":40[,}]'), trace)
    assert.truthy(trace:find('"text":"42"', 1, true), trace)
  end)
end)

describe("HTTP+SSE with a bearer token", function()
  it("answers 401 with WWW-Authenticate on GET /sse and on POSTs without it", function()
    local server = http.start({ "--bearer-token-env", "SSE_TOKEN", HARDENING },
      { env = { "SSE_TOKEN=s3cret", "PATH=" .. os.getenv("PATH") } })
    local _, head = open_stream(server)
    assert.are.equal(401, head.status)
    assert.truthy((head.headers["www-authenticate"] or ""):find("Bearer", 1, true))
    local auth = { Authorization = "Bearer s3cret" }
    local conn, ok_head, endpoint = open_stream(server, auth)
    assert.are.equal(200, ok_head.status)
    local r = post(server, endpoint, init_message(1))
    assert.are.equal(401, r.status)
    assert.truthy((r.headers["www-authenticate"] or ""):find("Bearer", 1, true))
    assert.are.equal(202, post(server, endpoint, init_message(1), auth).status)
    assert.is_table(answer(conn, 1).result)
    conn:close()
    server:stop_cleanly()
  end)
end)

describe("HTTP+SSE with OAuth", function()
  if not HAVE_NODE then
    it("is skipped: Node 22 is not installed in spec/node_modules", function() pending("no node") end)
    return
  end

  it("challenges GET /sse and POSTs without a token (401), and binds the session to its opener", function()
    local keys = client.temp_dir()
    local function quote(v) return "'" .. v:gsub("'", "'\\''") .. "'" end
    local code, _, err = client.sh(node.NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(keys))
    assert(code == 0, err)
    local server = http.start { "spec/fixtures/auth_http", "--auth-issuer", "https://issuer.example",
      "--auth-jwks-file", keys .. "/jwks.json" }
    local function token(sub)
      local now = os.time()
      local claims = { iss = "https://issuer.example", aud = server.url, sub = sub, iat = now, exp = now + 600,
                       scope = "notes:read" }
      local c, out, e = client.sh(node.NODE .. " spec/helpers/jwt_mint.mjs token " .. quote(keys) .. " "
        .. quote(cjson.encode { claims = claims }))
      assert(c == 0, e)
      return { Authorization = "Bearer " .. out:gsub("%s+$", "") }
    end
    local ok, failure = pcall(function()
      local challenge = ('Bearer resource_metadata="http://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp"')
        :format(server.port)
      local _, head = open_stream(server)
      assert.are.equal(401, head.status)
      assert.are.equal(challenge, head.headers["www-authenticate"])
      local alice, bob = token("alice"), token("bob")
      local conn, ok_head, endpoint = open_stream(server, alice)
      assert.are.equal(200, ok_head.status)
      local r = post(server, endpoint, init_message(1))
      http.assert_error(r, 401, -32000, "Unauthorized", 1)
      assert.are.equal(challenge, r.headers["www-authenticate"])
      -- Another principal's POST: the session does not exist for it.
      http.assert_error(post(server, endpoint, init_message(2), bob), 404, -32001, "Session not found", 2)
      assert.are.equal(202, post(server, endpoint, init_message(3), alice).status)
      assert.is_table(answer(conn, 3).result)
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/initialized" }, alice).status)
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 4, method = "tools/call",
        params = { name = "whoami", arguments = EMPTY } }, alice).status)
      local whoami = answer(conn, 4)
      assert.truthy(cjson.encode(whoami.result):find("alice", 1, true), cjson.encode(whoami))
      http.assert_error(post(server, endpoint, { jsonrpc = "2.0", id = 5, method = "ping" }, bob), 404, -32001,
        "Session not found", 5)
      conn:close()
    end)
    server:stop_cleanly()
    client.remove_tree(keys)
    assert(ok, failure)
  end)
  it("runs each POST's calls as that POST's token says, not the stream's: a narrower one gets 403 and the step-up challenge", function()
    local keys = client.temp_dir()
    local function quote(v) return "'" .. v:gsub("'", "'\\''") .. "'" end
    local code, _, err = client.sh(node.NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(keys))
    assert(code == 0, err)
    local server = http.start { "spec/fixtures/auth_http", "--auth-issuer", "https://issuer.example",
      "--auth-jwks-file", keys .. "/jwks.json", "--auth-scopes", "notes:read notes:write" }
    local function token(scope)
      local now = os.time()
      local claims = { iss = "https://issuer.example", aud = server.url, sub = "alice", iat = now, exp = now + 600,
                       scope = scope }
      local c, out, e = client.sh(node.NODE .. " spec/helpers/jwt_mint.mjs token " .. quote(keys) .. " "
        .. quote(cjson.encode { claims = claims }))
      assert(c == 0, e)
      return { Authorization = "Bearer " .. out:gsub("%s+$", "") }
    end
    local ok, failure = pcall(function()
      local wide, narrow = token("notes:read notes:write"), token("notes:read")
      local conn, head, endpoint = open_stream(server, wide)
      assert.are.equal(200, head.status)
      assert.are.equal(202, post(server, endpoint, init_message(1), narrow).status)
      assert.is_table(answer(conn, 1).result)
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/initialized" }, narrow).status)
      local write = { jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "write_note", arguments = EMPTY } }
      local r = post(server, endpoint, write, narrow)
      http.assert_error(r, 403, -32003, nil, 2)
      local prm = ("http://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp"):format(server.port)
      assert.truthy(r.headers["www-authenticate"]:find(('^Bearer error="insufficient_scope", scope="notes:write", resource_metadata="%s"')
        :format(prm:gsub("%p", "%%%0"))), r.headers["www-authenticate"])
      -- Stepped up, the same call works (the stream's own token no longer matters).
      write.id = 3
      assert.are.equal(202, post(server, endpoint, write, wide).status)
      assert.are.equal("written", answer(conn, 3).result.content[1].text)
      -- The refused call said nothing down the stream: the next message there is a later call's.
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 4, method = "ping" }, narrow).status)
      local e = conn:read_event(10000)
      assert.are.equal(4, e and e.json and e.json.id)
      conn:close()
    end)
    server:stop_cleanly()
    client.remove_tree(keys)
    assert(ok, failure)
  end)
end)

describe("HTTP+SSE while a handler computes", function()
  it("acts on a request held meanwhile only as its transport allows: no DELETE on /messages, no legacy id on /mcp", function()
    local server = http.start { HARDENING }
    local ok, failure = pcall(function()
      local conn, endpoint = session(server)
      local legacy_id = endpoint:match("session_id=(%x+)")
      local sid = server:initialize()
      local on_sid = { ["Mcp-Session-Id"] = sid, ["MCP-Protocol-Version"] = "2025-11-25" }
      local spin = server:connect()
      spin:send_request { method = "POST", path = endpoint, headers = { ["Content-Type"] = "application/json" },
        body = { jsonrpc = "2.0", id = 50, method = "tools/call", params = { name = "spin", arguments = EMPTY } } }
      -- Its log message: the handler has begun, and computes until cancelled.
      local e
      repeat e = conn:read_event(10000) until not e or (e.json and e.json.method == "notifications/message")
      assert.is_table(e, "the spin did not begin")
      local wrong_path = server:connect()
      wrong_path:send_request { method = "DELETE", path = "/messages", headers = { ["Mcp-Session-Id"] = sid } }
      local wrong_transport = server:connect()
      wrong_transport:send_request { method = "DELETE", path = "/mcp", headers = { ["Mcp-Session-Id"] = legacy_id } }
      -- The server reads them while it computes (were it later, nothing would be tested).
      assert.is_true(wrong_path:server_read_all())
      assert.is_true(wrong_transport:server_read_all())
      -- A cancellation on the session's own path is acted on at once.
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", method = "notifications/cancelled",
        params = { requestId = 50 } }).status)
      assert.are.equal(202, spin:read_response(30000).status)
      assert.are.equal(405, wrong_path:read_response(30000).status)
      assert.are.equal(404, wrong_transport:read_response(30000).status)
      -- Both sessions go on.
      local r = server:post({ jsonrpc = "2.0", id = 51, method = "ping" }, on_sid)
      assert.are.equal(200, r.status, r.body)
      assert.are.equal(202, post(server, endpoint, { jsonrpc = "2.0", id = 52, method = "ping" }).status)
      assert.is_table(answer(conn, 52))
      conn:close()
    end)
    server:stop_cleanly()
    assert(ok, failure)
  end)
end)

describe("HTTP+SSE and a client that never reads its stream", function()
  it("drops it at its share of the buffer budget, ends its session and keeps RSS bounded", function()
    local server = http.start { "--http-memory", "64", HARDENING }
    local conn, endpoint = session(server)
    conn.tcp:read_stop()
    local before = http.rss_kb(server.proc.pid)
    local peak = 0
    local posted = 0
    local dropped = client.poll_until(function()
      if posted < 400 then
        posted = posted + 1
        post(server, endpoint, { jsonrpc = "2.0", id = 100 + posted, method = "tools/call",
          params = { name = "big", arguments = { n = 1000000 } } })
      end
      peak = math.max(peak, (http.rss_kb(server.proc.pid) or before) - before)
      return server:stderr():find("not reading", 1, true) ~= nil or server:stderr():find("buffer budget", 1, true) ~= nil
    end, 120000, 10)
    assert.is_true(dropped, "the client was not dropped:\n" .. server:stderr():sub(-2000))
    -- Unbounded, 400 answers of 1 MB would be kept: +400 MB.
    assert.is_true(SANITIZED or peak < 200 * 1024, ("RSS grew by %d kB"):format(peak))
    local gone = client.poll_until(function()
      local r = post(server, endpoint, { jsonrpc = "2.0", id = 1, method = "ping" })
      return r and r.status == 404
    end, 30000, 100)
    assert.is_true(gone, "the session outlived its dropped stream")
    conn:close()
    -- The server serves others as before.
    local other = session(server)
    other:close()
    server:stop_cleanly()
  end)
end)

describe("HTTP+SSE with real clients", function()
  if not HAVE_NODE then
    it("is skipped: Node 22 is not installed in spec/node_modules", function() pending("no node") end)
    return
  end

  it("serves the TypeScript SDK v1 SSEClientTransport: every primitive, progress, a subscription, an elicitation, cancellation and a reload's list_changed", function()
    local dir = client.temp_dir()
    assert(os.execute("cp -r scripts/demo/. " .. dir .. "/"))
    local server = http.start({ dir }, { command = "dev" })
    local ok, err = pcall(function()
      local r = node.run { "spec/clients/sdk_legacy_sse.mjs", "demo", "http://127.0.0.1:" .. server.port .. "/sse", dir }
      assert.is_nil(r.error)
      assert.is_true(r.ok)
      assert.are.equal("demo", r.serverVersion.name)
      local names = {}
      for _, t in ipairs(r.tools.tools) do names[t.name] = true end
      assert.is_true(names.add and names.roll_dice and names.countdown and names.write_note)
      assert.are.same({ { type = "text", text = "5" } }, r.add.content)
      assert.are.equal(2, #r.dice.structuredContent.rolls)
      assert.are.equal("Liftoff!", r.countdown.content[1].text)
      assert.are.equal(3, #r.progress)
      assert.are.equal("welcome", r.index.contents[1].text)
      assert.are.equal("notes://{name}", r.templates.resourceTemplates[1].uriTemplate)
      assert.truthy(r.welcome.contents[1].text:find("Welcome", 1, true))
      assert.are.equal(-32002, r.missing.code)
      assert.are.equal("summarize_note", r.prompts.prompts[1].name)
      assert.are.same({ "welcome" }, r.complete.completion.values)
      assert.truthy(#r.updates >= 1)
      assert.are.same({ "Delete the note sse?", "Delete the note sse?" }, r.asked)
      assert.are.equal("kept sse", r.kept.content[1].text)
      assert.are.equal("deleted sse", r.deleted.content[1].text)
      assert.truthy(r.cancelled:find("^rejected"), r.cancelled)
      assert.are.equal("2", r.afterCancel.content[1].text)
      assert.truthy(r.listChanged >= 1)
      assert.truthy(r.logs >= 1)
      local after = {}
      for _, n in ipairs(r.toolsAfter) do after[n] = true end
      assert.is_true(after.sse_added)
      assert.are.equal("added", r.added.content[1].text)
    end)
    server:stop_cleanly()
    client.remove_tree(dir)
    assert(ok, err)
  end)

  it("carries sampling, elicitation and roots requests down the stream to the SDK v1 client", function()
    local server = http.start { "spec/fixtures/asking" }
    local r = node.run { "spec/clients/sdk_legacy_sse.mjs", "asking", "http://127.0.0.1:" .. server.port .. "/sse" }
    server:stop_cleanly()
    assert.is_nil(r.error)
    assert.is_true(r.ok)
    assert.are.same({ "Who are you?" }, r.received.elicitation)
    assert.truthy(cjson.encode(r.elicit):find("Ada", 1, true), cjson.encode(r.elicit))
    assert.are.equal(1, r.received.sampling)
    assert.truthy(cjson.encode(r.sample):find("echo: What is 2+2?", 1, true), cjson.encode(r.sample))
    assert.are.equal(1, r.received.roots)
    assert.are.equal("file:///tmp/project", r.roots.structuredContent.roots[1].uri)
  end)

  it("serves mcp-remote --transport sse-only as a stdio bridge", function()
    local server = http.start { "scripts/demo" }
    local home = client.temp_dir()
    local bridge = client.spawn({ abs(MCP_REMOTE), "http://127.0.0.1:" .. server.port .. "/sse", "--transport", "sse-only" },
      { bin = node.NODE, env = { "HOME=" .. home, "PATH=" .. os.getenv("PATH") } })
    local ok, err = pcall(function()
      local init = bridge:request("initialize", { protocolVersion = "2024-11-05", capabilities = EMPTY,
        clientInfo = { name = "busted-bridge", version = "1" } }, 60000)
      assert.is_table(init and init.result, cjson.encode(init or "no answer") .. "\n" .. bridge.stderr)
      assert.are.equal("demo", init.result.serverInfo.name)
      bridge:notify("notifications/initialized")
      local r = bridge:request("tools/call", { name = "add", arguments = { a = 20, b = 22 } }, 60000)
      assert.is_table(r and r.result, cjson.encode(r or "no answer") .. "\n" .. bridge.stderr)
      assert.are.equal("42", r.result.content[1].text)
    end)
    bridge:terminate(5000)
    server:stop_cleanly()
    client.remove_tree(home)
    assert(ok, err)
  end)

  it("is connected in Claude Code (claude mcp add --transport sse, claude mcp list)", function()
    if not uv.fs_access(CLAUDE, "X") then pending("Claude Code is not installed in spec/node_modules") return end
    local server = http.start { "scripts/demo" }
    local home = client.temp_dir()
    local url = "http://127.0.0.1:" .. server.port .. "/sse"
    local function claude(args)
      local _, out = client.sh(("cd %s && HOME=%s %s %s 2>&1"):format(home, home, abs(CLAUDE), args))
      return out
    end
    local added = claude("mcp add --transport sse demo " .. url)
    local list = claude("mcp list")
    server:stop_cleanly()
    client.remove_tree(home)
    assert.truthy(added:find("demo", 1, true), added)
    assert.truthy(list:find("demo: " .. url .. " (SSE) - ✔ Connected", 1, true), list)
  end)
end)

describe("HTTP+SSE scaled out", function()
  if not HAVE_NODE then
    it("is skipped: Node 22 is not installed in spec/node_modules", function() pending("no node") end)
    return
  end

  local function check_calls(r, clients, calls)
    assert.are.same({}, r.failures)
    assert.are.equal(clients, #r.clients)
    local total, by = 0, {}
    for _, c in ipairs(r.clients) do
      total = total + #c.answeredBy
      -- One session, one process: every call of a client answered by the
      -- worker that owns its stream.
      for _, who in ipairs(c.answeredBy) do assert.are.equal(c.answeredBy[1], who) end
      by[c.answeredBy[1]] = true
    end
    assert.are.equal(clients * calls, total)
    return by
  end

  it("with --workers 2, a POST that another worker reads reaches the session's owner", function()
    local server = http.start({ "--workers", "2", SCALEOUT },
      { env = { "NODE_NAME=w", "PATH=" .. os.getenv("PATH") } })
    local r = node.run { "spec/clients/sdk_legacy_sse.mjs", "calls", "http://127.0.0.1:" .. server.port .. "/sse", "8", "25" }
    server:stop_cleanly()
    check_calls(r, 8, 25)
  end)

  it("through nginx (scripts/deploy/nginx.conf) in front of two instances, no call lost", function()
    if not services.which("nginx") then pending("nginx is not installed") return end
    local dir = client.temp_dir()
    local function instance(name)
      return http.start({ "--workers", "2", "--node", name, SCALEOUT },
        { env = { "NODE_NAME=" .. name, "PATH=" .. os.getenv("PATH") } })
    end
    local a, b = instance("a"), instance("b")
    local conf = client.read_file("scripts/deploy/nginx.conf")
    local port = services.free_port()
    conf = conf:gsub("127%.0%.0%.1:8001", "127.0.0.1:" .. a.port)
               :gsub("127%.0%.0%.1:8002", "127.0.0.1:" .. b.port)
               :gsub("listen 8080;", "listen 127.0.0.1:" .. port .. ";")
    local proxy = assert(services.nginx(conf, port, dir))
    local ok, result = pcall(node.run, { "spec/clients/sdk_legacy_sse.mjs", "calls", "http://127.0.0.1:" .. port .. "/sse", "10", "30" })
    proxy:stop()
    a:stop_cleanly()
    b:stop_cleanly()
    client.remove_tree(dir)
    assert(ok, result)
    local by = check_calls(result, 10, 30)
    local nodes = {}
    for who in pairs(by) do nodes[who:match("^(%a+):")] = true end
    -- nginx sent the streams round-robin: sessions live on both instances.
    assert.is_true(nodes.a and nodes.b, cjson.encode(by))
  end)
end)
