-- MCP over WebSockets (issue 48): GET /mcp with Upgrade: websocket and the
-- mcp subprotocol becomes a session of its own, one JSON-RPC message per
-- text frame. The official TypeScript SDK v1's WebSocketClientTransport
-- drives the demo (every primitive, a question to the client, a
-- cancellation, a reload's list change); hostile frames from a raw socket
-- get the close codes RFC 6455 gives them and leave the server serving
-- with bounded memory; the shared HTTP rules (Host, Origin, the bearer
-- token, --max-connections, the drain) hold at the upgrade; pings find a
-- dead peer; both eras speak on one connection; and luamcp's own clients
-- (luamcp call --ws, mcp.client{url = "ws://..."}) reach it.
local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local uv = require "luv"
local cjson = client.json

local DEMO = "scripts/demo"
-- Under the sanitizers (LUAMCP=build/luamcp-asan) ASan's quarantine keeps
-- freed memory, so RSS says nothing; LeakSanitizer checks the frees at exit.
local SANITIZED = (os.getenv("LUAMCP") or ""):find("asan") ~= nil
local KEY = "dGhlIHNhbXBsZSBub25jZQ==" -- RFC 6455's own example
local ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

-- ---- A raw WebSocket client, for frames no real client would send --------

-- One frame: fin (bool), opcode, payload; masked unless mask == false.
local function frame(opcode, payload, opts)
  opts = opts or {}
  local fin = opts.fin == false and 0 or 0x80
  local len, head = #payload, string.char(fin | opcode)
  local m = opts.mask == false and 0 or 0x80
  if len < 126 then
    head = head .. string.char(m | len)
  elseif len < 65536 then
    head = head .. string.char(m | 126) .. string.pack(">I2", len)
  else
    head = head .. string.char(m | 127) .. string.pack(">I8", len)
  end
  if opts.mask == false then return head .. payload end
  local key = { 0x12, 0x34, 0x56, 0x78 }
  local out = {}
  for i = 1, len do out[i] = string.char(payload:byte(i) ~ key[(i - 1) % 4 + 1]) end
  return head .. string.char(table.unpack(key)) .. table.concat(out)
end

-- The frames the server sent after the 101 (unmasked, as a server's are):
-- a list of { opcode, payload }, and what is left over.
local function parse_frames(raw)
  local frames, at = {}, 1
  while true do
    if #raw < at + 1 then break end
    local b1, b2 = raw:byte(at, at + 1)
    local len, off = b2 & 0x7f, at + 2
    if len == 126 then
      if #raw < off + 1 then break end
      len, off = string.unpack(">I2", raw, off), off + 2
    elseif len == 127 then
      if #raw < off + 7 then break end
      len, off = string.unpack(">I8", raw, off), off + 8
    end
    if #raw < off + len - 1 then break end
    frames[#frames + 1] = { opcode = b1 & 0x0f, payload = raw:sub(off, off + len - 1) }
    at = off + len
  end
  return frames
end

local Ws = {}
Ws.__index = Ws

-- Open a WebSocket to the server's /mcp: the 101's head, or fails.
local function upgrade(server, headers, path)
  local conn = server:connect()
  local lines = { "GET " .. (path or "/mcp") .. " HTTP/1.1", "Host: 127.0.0.1:" .. server.port,
    "Upgrade: websocket", "Connection: Upgrade", "Sec-WebSocket-Key: " .. KEY, "Sec-WebSocket-Version: 13",
    "Sec-WebSocket-Protocol: mcp" }
  for _, h in ipairs(headers or {}) do lines[#lines + 1] = h end
  conn:write(table.concat(lines, "\r\n") .. "\r\n\r\n")
  client.wait_until(function() return conn.raw:find("\r\n\r\n", 1, true) or conn.eof end, 30000)
  local head_end = conn.raw:find("\r\n\r\n", 1, true)
  local head = head_end and conn.raw:sub(1, head_end + 3) or conn.raw
  local ws = setmetatable({ conn = conn, head = head, at = head_end and head_end + 4 or #conn.raw + 1 }, Ws)
  ws.status = tonumber(head:match("^HTTP/1%.1 (%d+)"))
  return ws
end

function Ws:send(opcode, payload, opts) return self.conn:write(frame(opcode, payload, opts)) end
function Ws:send_json(t) return self:send(1, cjson.encode(t)) end
function Ws:frames() return parse_frames(self.conn.raw:sub(self.at)) end

-- Wait for a frame that pred accepts; returns it, or nil.
function Ws:wait_frame(pred, timeout_ms)
  local found
  client.wait_until(function()
    for _, f in ipairs(self:frames()) do
      if pred(f) then found = f return true end
    end
    return self.conn.eof
  end, timeout_ms or 30000)
  if not found then
    for _, f in ipairs(self:frames()) do if pred(f) then return f end end
  end
  return found
end

-- The close frame's code, or nil when none came.
function Ws:close_code(timeout_ms)
  local f = self:wait_frame(function(f) return f.opcode == 8 end, timeout_ms)
  if not f then return nil end
  return #f.payload >= 2 and string.unpack(">I2", f.payload) or 1005 -- RFC 6455 7.1.5: no status code
end

-- The JSON-RPC message with this id (a text frame).
function Ws:answer(id, timeout_ms)
  local f = self:wait_frame(function(f)
    if f.opcode ~= 1 then return false end
    local ok, m = pcall(cjson.decode, f.payload)
    return ok and type(m) == "table" and m.id == id
  end, timeout_ms)
  return f and cjson.decode(f.payload)
end

local function initialize(ws, version)
  ws:send_json { jsonrpc = "2.0", id = 0, method = "initialize", params = {
    protocolVersion = version or "2025-11-25", capabilities = cjson.decode("{}"),
    clientInfo = { name = "raw-ws", version = "1" } } }
  local r = ws:answer(0)
  assert(r and r.result, "initialize failed: " .. cjson.encode(r or {}))
  ws:send_json { jsonrpc = "2.0", method = "notifications/initialized" }
  return r
end

-- A new WebSocket that is initialized and answers a tools/call: the
-- server is serving.
local function still_serving(server)
  local ws = upgrade(server)
  assert.are.equal(101, ws.status, ws.head)
  initialize(ws)
  ws:send_json { jsonrpc = "2.0", id = 1, method = "tools/call", params = { name = "add", arguments = { a = 20, b = 22 } } }
  local r = ws:answer(1)
  assert.are.equal("42", r and r.result and r.result.content[1].text, cjson.encode(r or {}))
  ws.conn:close()
end

describe("MCP over WebSockets", function()
  local server
  -- Every server exits cleanly (under the sanitizers: no leak, no report).
  after_each(function()
    local s = server
    server = nil
    if s then s:stop_cleanly() end
  end)

  it("answers the upgrade with 101, the accept key and the mcp subprotocol, and speaks MCP in text frames", function()
    server = http.start { DEMO }
    local ws = upgrade(server)
    assert.are.equal(101, ws.status, ws.head)
    assert.truthy(ws.head:find("Sec-WebSocket-Accept: " .. ACCEPT, 1, true), ws.head)
    assert.truthy(ws.head:lower():find("sec%-websocket%-protocol: mcp"), ws.head)
    local init = initialize(ws)
    assert.are.equal("2025-11-25", init.result.protocolVersion)
    -- A batch is not of this era: one error, as on stdio.
    ws:send_json { jsonrpc = "2.0", id = 5, method = "tools/list" }
    local tools = ws:answer(5)
    assert.is_table(tools.result.tools)
    -- initialize once per connection: a second one is refused.
    ws:send_json { jsonrpc = "2.0", id = 6, method = "initialize", params = {
      protocolVersion = "2025-11-25", capabilities = {}, clientInfo = { name = "again", version = "1" } } }
    assert.is_table(ws:answer(6).error)
    ws.conn:close()
    still_serving(server)
  end)

  it("lets a 2026-07-28 client send its self-describing requests on the same connection", function()
    server = http.start { DEMO }
    local ws = upgrade(server)
    assert.are.equal(101, ws.status, ws.head)
    ws:send_json { jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "add", arguments = { a = 1, b = 2 }, _meta = http.modern_meta() } }
    local r = ws:answer(1)
    assert.are.equal("3", r and r.result and r.result.content[1].text, cjson.encode(r or {}))
    ws.conn:close()
  end)

  it("refuses an upgrade without the mcp subprotocol, from a foreign Origin or without the bearer token", function()
    server = http.start({ DEMO, "--bearer-token-env", "WS_TOKEN" }, { env = { "WS_TOKEN=sesame-sesame-sesame" } })
    local conn = server:connect()
    conn:write(("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" ..
      "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer sesame-sesame-sesame\r\n\r\n")
      :format(server.port, KEY))
    client.wait_until(function() return conn.raw:find("\r\n\r\n", 1, true) end, 30000)
    assert.truthy(conn.raw:match("^HTTP/1%.1 400"), conn.raw)
    assert.truthy(conn.raw:find("subprotocol", 1, true), conn.raw)
    assert.are.equal(401, upgrade(server).status)
    local auth = "Authorization: Bearer sesame-sesame-sesame"
    assert.are.equal(403, upgrade(server, { auth, "Origin: https://evil.example" }).status)
    local ok = upgrade(server, { auth, "Origin: http://localhost:3000" })
    assert.are.equal(101, ok.status, ok.head)
    initialize(ok)
  end)

  it("serves WebSockets at --ws-path", function()
    server = http.start { DEMO, "--ws-path", "/socket" }
    assert.are.equal(101, upgrade(server, nil, "/socket").status)
  end)

  it("closes a bad frame with 1002, an oversized message with 1009, bad UTF-8 with 1007, binary with 1003, and keeps serving", function()
    server = http.start { DEMO, "--max-message-bytes", "4096" }
    local cases = {
      { "an unmasked client frame", 1002, function(ws) ws:send(1, '{"jsonrpc":"2.0","method":"ping","id":1}', { mask = false }) end },
      { "a fragmented control frame", 1002, function(ws) ws:send(9, "hi", { fin = false }) end },
      { "a message over --max-message-bytes", 1009, function(ws) ws:send(1, ('"' .. ("x"):rep(8000) .. '"')) end },
      { "a message over the limit in fragments", 1009, function(ws)
        ws:send(1, ("x"):rep(3000), { fin = false })
        ws:send(0, ("x"):rep(3000))
      end },
      { "bad UTF-8 in a text frame", 1007, function(ws) ws:send(1, '{"jsonrpc":"2.0","method":"\xff\xfe"}') end },
      { "a binary frame", 1003, function(ws) ws:send(2, "\0\1\2") end },
    }
    for _, case in ipairs(cases) do
      local ws = upgrade(server)
      assert.are.equal(101, ws.status, ws.head)
      case[3](ws)
      local code = ws:close_code()
      assert.are.equal(case[2], code, case[1] .. "\n" .. server:stderr())
      assert.is_true(ws.conn:wait_eof(30000), case[1] .. ": the connection stays open")
      ws.conn:close()
    end
    still_serving(server)
  end)

  it("answers a close frame with one and ends the connection", function()
    server = http.start { DEMO }
    local ws = upgrade(server)
    initialize(ws)
    ws:send(8, string.pack(">I2", 1000) .. "bye")
    assert.are.equal(1000, ws:close_code())
    assert.is_true(ws.conn:wait_eof(30000))
  end)

  it("survives a close storm with bounded memory", function()
    server = http.start { DEMO }
    local function storm(n)
      for i = 1, n do
        local ws = upgrade(server)
        assert.are.equal(101, ws.status, ws.head)
        if i % 3 == 0 then initialize(ws) end
        if i % 2 == 0 then ws:send(8, string.pack(">I2", 1000)) end
        ws.conn:close()
      end
      server.conns = {}
    end
    storm(60) -- warm up: the allocator's pools, the VM's first calls
    client.sleep(500)
    local before = http.rss_kb(server.proc.pid)
    storm(300)
    client.sleep(1000)
    local after = http.rss_kb(server.proc.pid)
    if not SANITIZED then
      assert.is_true(after - before < 8 * 1024, ("RSS grew from %d to %d kB"):format(before, after))
    end
    still_serving(server)
  end)

  it("drops a client that does not read at its share of the buffer budget", function()
    server = http.start { DEMO, "--http-memory", "1" }
    local ws = upgrade(server)
    initialize(ws)
    ws:send_json { jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "write_note", arguments = { name = "big", text = ("y"):rep(256 * 1024) } } }
    assert.is_table(ws:answer(1))
    ws.conn.tcp:read_stop() -- reads nothing more: the server's writes pile up
    for i = 1, 120 do
      ws:send_json { jsonrpc = "2.0", id = 100 + i, method = "resources/read", params = { uri = "notes://big" } }
    end
    assert.truthy(server:wait_stderr("not reading", 1, 60000), server:stderr())
    still_serving(server)
  end)

  it("closes with 1001 when the server drains", function()
    server = http.start({ DEMO }, { drain_time = 10 })
    local ws = upgrade(server)
    initialize(ws)
    server.proc:kill("sigterm")
    assert.are.equal(1001, ws:close_code())
    -- It exits by itself, cleanly: after_each's own SIGTERM would otherwise
    -- reach a process already exiting (its handler gone) and kill it.
    local s = server
    server = nil
    local code, signal = s.proc:wait_exit(60000)
    assert.are.same({ 0, 0 }, { code, signal }, s.proc.stderr)
    s.proc:close()
  end)

  it("pings a quiet client and drops one that never answers", function()
    server = http.start { DEMO }
    local ws = upgrade(server)
    initialize(ws)
    local ping = ws:wait_frame(function(f) return f.opcode == 9 end, 60000)
    assert.is_table(ping, "no ping came")
    -- Never answered: the server gives up on us.
    assert.is_true(ws.conn:wait_eof(60000), "a peer that answers no ping is kept")
    still_serving(server)
  end)

  it("the TypeScript SDK's WebSocketClientTransport drives the demo: every primitive, a question, a cancellation", function()
    server = http.start { DEMO }
    local out = node.run { "spec/clients/sdk_websocket.mjs", "ws://127.0.0.1:" .. server.port .. "/mcp" }
    assert.is_nil(out.error, out.error)
    assert.are.equal("5", out.add.content[1].text)
    assert.are.equal("Liftoff!", out.countdown.content[1].text)
    assert.are.equal(3, #out.progress)
    assert.are.equal("notes://index", out.index.contents[1].uri)
    assert.are.equal("summarize_note", out.prompts.prompts[1].name)
    assert.are.same({ "welcome" }, out.complete.completion.values)
    assert.are.equal(-32002, out.missing.code)
    assert.are.same({ "Delete the note scratch?" }, out.elicitations)
    assert.are.equal("deleted scratch", out.del.content[1].text)
    assert.truthy(out.cancelled:find("enough", 1, true), out.cancelled)
    assert.are.equal("2", out.afterCancel.content[1].text)
  end)

  it("carries a reload's notifications/tools/list_changed to the SDK client (luamcp dev)", function()
    local dir = client.temp_dir()
    client.sh(("cp -r %s/. %s"):format(DEMO, dir))
    server = http.start({ dir }, { command = "dev" })
    local out = node.run { "spec/clients/sdk_websocket.mjs", "ws://127.0.0.1:" .. server.port .. "/mcp", dir }
    client.remove_tree(dir)
    assert.is_nil(out.error, out.error)
    assert.is_true(out.listChanged >= 1)
    assert.truthy(table.concat(out.toolsAfter, " "):find("added_by_ws_spec", 1, true))
  end)

  it("luamcp call --ws reaches the server: a tool's answer, the list, a refusal said plainly", function()
    server = http.start({ DEMO, "--bearer-token-env", "WS_TOKEN" }, { env = { "WS_TOKEN=sesame-sesame-sesame" } })
    local url = "ws://127.0.0.1:" .. server.port .. "/mcp"
    local function call(args, env)
      local proc = client.spawn(args, { env = env })
      assert(proc:wait_exit(60000), "luamcp call did not end")
      local out = table.concat(proc.lines, "\n") .. proc.buffer
      proc:close()
      return proc.exit_code, out, proc.stderr
    end
    local env = { "T=sesame-sesame-sesame" }
    local code, out, err = call({ "call", "--ws", url, "--bearer-env", "T", "add", "a=40", "b=2" }, env)
    assert.are.equal(0, code, err)
    assert.are.equal("42", out)
    code, out = call({ "call", "--ws", url, "--bearer-env", "T" }, env)
    assert.are.equal(0, code)
    assert.truthy(out:find("roll_dice", 1, true), out)
    code, _, err = call { "call", "--ws", url, "add", "a=1", "b=1" }
    assert.are.equal(1, code)
    assert.truthy(err:find("refused the WebSocket: HTTP 401", 1, true), err)
    code, _, err = call { "call", "--ws", "http://127.0.0.1:1/mcp", "add" }
    assert.are.equal(2, code)
    assert.truthy(err:find("ws:// URL", 1, true), err)
  end)

  it("mcp.client{url = 'ws://...'} reaches it from a server's tool, judged by the net permission on the host", function()
    server = http.start { DEMO }
    local hostport = "127.0.0.1:" .. server.port
    local function call(allowed, path)
      local a = { "call", "client_calls", "url=ws://" .. hostport .. path, "--", client.LUAMCP, "run" }
      if allowed then a[#a + 1] = "--allow-net" a[#a + 1] = hostport end
      a[#a + 1] = "spec/fixtures/websocket/caller.lua"
      local proc = client.spawn(a)
      assert(proc:wait_exit(60000), "luamcp call did not end")
      local out = table.concat(proc.lines, "\n") .. proc.buffer .. proc.stderr
      proc:close()
      return out
    end
    local out = call(true, "/mcp")
    assert.truthy(out:find("sum: 42, countdown: Liftoff!", 1, true), out)
    assert.truthy(out:find("progress 2/2", 1, true), out) -- the inner call's progress, passed on
    out = call(false, "/mcp")
    assert.truthy(out:find("permission denied: net " .. hostport, 1, true), out)
    out = call(true, "/elsewhere")
    assert.truthy(out:find("refused the WebSocket: HTTP 404", 1, true), out)
  end)

  it("a page in Debian's Chromium does the same through the browser's own WebSocket", function()
    server = http.start { DEMO }
    local out = node.run { "spec/clients/chromium_ws.mjs", "ws://127.0.0.1:" .. server.port .. "/mcp" }
    assert.is_nil(out.error, out.error)
    assert.are.equal("mcp", out.subprotocol)
    assert.are.equal("demo", out.server)
    assert.truthy(table.concat(out.tools, " "):find("delete_note", 1, true))
    assert.are.equal("5", out.add)
    assert.are.equal("welcome", out.index)
    assert.are.same({ "notes://{name}" }, out.templates)
    assert.are.equal(2, out.prompt)
    assert.are.equal("Delete the note page?", out.elicited)
    assert.are.equal("deleted page", out.del)
    assert.are.equal("no answer", out.cancel) -- a cancelled call is not answered
    assert.are.equal("2", out.after)
  end)

  it("counts under --max-connections and is never closed to make room", function()
    server = http.start { DEMO, "--max-connections", "2" }
    local a, b = upgrade(server), upgrade(server)
    assert.are.equal(101, a.status, a.head)
    assert.are.equal(101, b.status, b.head)
    initialize(a)
    initialize(b)
    local c = upgrade(server)
    assert.are.equal(503, c.status, c.head)
    -- The two sessions are still there.
    a:send_json { jsonrpc = "2.0", id = 9, method = "tools/list" }
    assert.is_table(a:answer(9).result)
    b:send_json { jsonrpc = "2.0", id = 9, method = "tools/list" }
    assert.is_table(b:answer(9).result)
  end)

  it("checks the OAuth token at the upgrade and closes with 1008 when it expires", function()
    local dir = client.temp_dir()
    local issuer, audience = "https://ws-issuer.example", "https://ws.example/mcp"
    assert.are.equal(0, (client.sh(node.NODE .. " spec/helpers/jwt_mint.mjs keys " .. dir)))
    local function token(exp_in)
      local now = os.time()
      local claims = cjson.encode { alg = "RS256", claims = { iss = issuer, aud = audience, sub = "ws", scope = "mcp",
        iat = now, exp = now + exp_in } }
      local code, out = client.sh(node.NODE .. " spec/helpers/jwt_mint.mjs token " .. dir .. " '" .. claims .. "'")
      assert.are.equal(0, code)
      return (out:gsub("%s+$", ""))
    end
    -- spec/fixtures/auth_http: the demo is confined (read none), and luamcp reads
    -- the JWKS file after confining itself (a limit of --auth-jwks-file today).
    server = http.start { "spec/fixtures/auth_http", "--auth-issuer", issuer, "--auth-audience", audience, "--auth-jwks-file",
      dir .. "/jwks.json" }
    assert.are.equal(401, upgrade(server).status)
    assert.are.equal(401, upgrade(server, { "Authorization: Bearer " .. token(-3600) }).status)
    local long = upgrade(server, { "Authorization: Bearer " .. token(3600) })
    assert.are.equal(101, long.status, long.head)
    initialize(long)
    local short = upgrade(server, { "Authorization: Bearer " .. token(3) })
    assert.are.equal(101, short.status, short.head)
    initialize(short)
    assert.are.equal(1008, short:close_code(60000))
    -- The other one goes on.
    long:send_json { jsonrpc = "2.0", id = 7, method = "tools/list" }
    assert.is_table(long:answer(7).result)
    client.remove_tree(dir)
  end)

  it("luamcp call --ws wss://... and mcp.client{url = 'wss://...'} reach it through a TLS proxy (Debian's nginx)", function()
    local services = require "services"
    local dir = client.temp_dir()
    local code = client.sh(("openssl req -x509 -newkey rsa:2048 -nodes -keyout %s/key.pem -out %s/cert.pem -days 2 " ..
      "-subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1"):format(dir, dir))
    assert.are.equal(0, code)
    server = http.start { DEMO }
    local port = services.free_port()
    local proxy = assert(services.nginx(([[
  server {
    listen 127.0.0.1:%d ssl;
    ssl_certificate %s/cert.pem;
    ssl_certificate_key %s/key.pem;
    location /mcp {
      proxy_pass http://127.0.0.1:%d;
      proxy_http_version 1.1;
      proxy_set_header Upgrade $http_upgrade;
      proxy_set_header Connection "upgrade";
      proxy_set_header Host localhost;
    }
  }]]):format(port, dir, dir, server.port), port, dir))
    local function call(env)
      local proc = client.spawn({ "call", "--ws", "wss://127.0.0.1:" .. port .. "/mcp", "add", "a=40", "b=2" }, { env = env })
      assert(proc:wait_exit(60000), "luamcp call did not end")
      local out = table.concat(proc.lines, "\n") .. proc.buffer
      proc:close()
      return proc.exit_code, out, proc.stderr
    end
    local rc, out, err = call { "SSL_CERT_FILE=" .. dir .. "/cert.pem" }
    local rc2, _, err2 = call {} -- the system's CAs do not know this certificate
    -- mcp.client{url = "wss://..."} from a confined server's tool: the net
    -- permission names the proxy; the CA file must be readable to it.
    local caller = client.spawn({ "call", "client_calls", "url=wss://127.0.0.1:" .. port .. "/mcp", "--", client.LUAMCP,
      "run", "--allow-net", "127.0.0.1:" .. port, "--allow-read", dir, "spec/fixtures/websocket/caller.lua" },
      { env = { "SSL_CERT_FILE=" .. dir .. "/cert.pem" } })
    assert(caller:wait_exit(60000), "luamcp call did not end")
    local from_tool = table.concat(caller.lines, "\n") .. caller.buffer .. caller.stderr
    caller:close()
    proxy:stop()
    assert.truthy(from_tool:find("sum: 42, countdown: Liftoff!", 1, true), from_tool)
    assert.are.equal(0, rc, err)
    assert.are.equal("42", out)
    assert.are_not.equal(0, rc2)
    assert.truthy(err2:lower():find("certificate", 1, true), err2)
    client.remove_tree(dir)
  end)
end)
