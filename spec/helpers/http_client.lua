-- http_client: drive a real `luamcp run --http` process from a busted spec,
-- the way an HTTP client would: raw HTTP/1.1 over luv TCP sockets to
-- 127.0.0.1, so every byte on the wire (status lines, headers, chunking,
-- SSE framing) is what the test sees.
--
--   local http = require "http_client"
--   local server = http.start { "spec/fixtures/kitchen" }
--   local session = server:initialize()
--   local r = server:post({ jsonrpc = "2.0", id = 1, method = "ping" }, { ["Mcp-Session-Id"] = session })
--   assert.are.equal(200, r.status)
--   server:stop()

local uv = require "luv"
local cjson = require "cjson"
local mcp_client = require "mcp_client"

local M = {}

local wait_until = mcp_client.wait_until
M.wait_until = wait_until
M.poll_until = mcp_client.poll_until
M.sleep = mcp_client.sleep
M.json = cjson
M.DEFAULT_TIMEOUT_MS = mcp_client.DEFAULT_TIMEOUT_MS -- see there

-- The Accept header a Streamable HTTP client sends with every POST.
M.ACCEPT_BOTH = "application/json, text/event-stream"

---------------------------------------------------------------------------
-- 2026-07-28 requests: each carries its version, capabilities and client in
-- _meta, and its method and name in headers.
---------------------------------------------------------------------------

M.MODERN = "2026-07-28"
local EMPTY = cjson.decode("{}")

--- A request's _meta (caps: the client's capabilities; extra: more keys).
function M.modern_meta(caps, extra)
  local m = {
    ["io.modelcontextprotocol/protocolVersion"] = M.MODERN,
    ["io.modelcontextprotocol/clientCapabilities"] = caps or EMPTY,
    ["io.modelcontextprotocol/clientInfo"] = { name = "busted", version = "1" },
  }
  for k, v in pairs(extra or {}) do m[k] = v end
  return m
end

--- The headers a 2026-07-28 client sends with a request (plus extra ones).
function M.modern_headers(method, name, extra)
  local h = { ["MCP-Protocol-Version"] = M.MODERN, ["Mcp-Method"] = method, ["Mcp-Name"] = name }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

--- The JSON-RPC response in an HTTP response: its JSON body, or the last
--- SSE event that carries an id. nil when there is none.
function M.rpc(r)
  if not r then return nil end
  if r.json then return r.json end
  for i = #(r.events or {}), 1, -1 do
    local m = r.events[i].json
    if m and m.id ~= nil then return m end
  end
end

---------------------------------------------------------------------------
-- Connections
---------------------------------------------------------------------------

local Conn = {}
Conn.__index = Conn

--- Open a TCP connection to 127.0.0.1:port and wait until it is connected.
--- Returns the connection, or nil and an error.
function M.connect(port, timeout_ms)
  local self = setmetatable({ raw = "", eof = false, port = port }, Conn)
  self.tcp = uv.new_tcp()
  local connected, err
  self.tcp:connect("127.0.0.1", port, function(e)
    if e then err = e else connected = true end
  end)
  if not wait_until(function() return connected or err end, timeout_ms) or err then
    self:close()
    return nil, err or "connect timed out"
  end
  local name = self.tcp:getsockname()
  self.local_port = name and name.port
  self.tcp:read_start(function(e, data)
    if e or not data then
      self.eof = true
      self.read_error = e
      return
    end
    self.raw = self.raw .. data
  end)
  return self
end

--- Write raw bytes; returns true once they are handed to the kernel (a
--- write to a connection the server closed may fail: that is returned, not
--- raised).
function Conn:write(bytes)
  if self.closed then return false, "closed" end
  local done, status
  local ok, err = pcall(self.tcp.write, self.tcp, bytes, function(e)
    done, status = true, e
  end)
  if not ok then return false, err end
  wait_until(function() return done end, 2000)
  return status == nil, status
end

--- Close the socket (the client vanishes).
function Conn:close()
  if self.closed then return end
  self.closed = true
  if not self.tcp:is_closing() then self.tcp:close() end
  uv.run("nowait")
end

--- Wait until the server closed the connection; true if it did. Waits at
--- least DEFAULT_TIMEOUT_MS whatever timeout_ms says (a loaded machine).
function Conn:wait_eof(timeout_ms)
  return wait_until(function() return self.eof end, math.max(timeout_ms or 0, M.DEFAULT_TIMEOUT_MS))
end

-- The TCP sockets between 127.0.0.1:from and 127.0.0.1:to, as the kernel
-- lists them: { state = hex state, tx = bytes unacknowledged, rx = bytes
-- not read by the process }, or nil when there is none.
local function socket_of(from, to)
  local f = io.open("/proc/net/tcp")
  if not f then return nil end
  local want = ("0100007F:%04X 0100007F:%04X"):format(from, to)
  for line in f:lines() do
    local addrs, st, tx, rx = line:match("^%s*%d+: (%x+:%x+ %x+:%x+) (%x+) (%x+):(%x+)")
    if addrs == want then
      f:close()
      return { state = st, tx = tonumber(tx, 16), rx = tonumber(rx, 16) }
    end
  end
  f:close()
  return nil
end

--- Wait until the server has read every byte written on this connection:
--- the kernel holds none of them, neither unacknowledged on this side nor
--- unread on the server's (/proc/net/tcp). The server announces nothing
--- when it reads part of a request: this is how a spec knows that it did.
--- Linux only. Returns true if that happened within timeout_ms.
function Conn:server_read_all(timeout_ms)
  return M.poll_until(function()
    local mine = socket_of(self.local_port, self.port)
    local theirs = socket_of(self.port, self.local_port)
    return (mine == nil or mine.tx == 0) and (theirs == nil or theirs.rx == 0)
  end, timeout_ms, 10)
end

--- After this side closed the connection: wait until the server noticed
--- and closed its end (its socket has left ESTABLISHED and CLOSE_WAIT, in
--- /proc/net/tcp). Linux only. Returns true if it did within timeout_ms.
function Conn:server_closed(timeout_ms)
  return M.poll_until(function()
    local theirs = socket_of(self.port, self.local_port)
    return theirs == nil or (theirs.state ~= "01" and theirs.state ~= "08")
  end, timeout_ms, 10)
end

--- Raw bytes received and not consumed yet.
function Conn:pending() return self.raw end

local function parse_head(text)
  local lines = {}
  for line in (text .. "\r\n"):gmatch("(.-)\r\n") do lines[#lines + 1] = line end
  local version, status, reason = lines[1]:match("^HTTP/(%d%.%d) (%d%d%d) ?(.*)$")
  assert(version, "not an HTTP status line: " .. lines[1])
  local head = { version = version, status = tonumber(status), reason = reason, headers = {}, header_list = {} }
  for i = 2, #lines do
    local name, value = lines[i]:match("^([^:]+):%s*(.-)%s*$")
    assert(name, "malformed header line: " .. lines[i])
    name = name:lower()
    head.header_list[#head.header_list + 1] = { name, value }
    if head.headers[name] then head.headers[name] = head.headers[name] .. ", " .. value
    else head.headers[name] = value end
  end
  return head
end

--- Wait for a response's status line and headers. Returns the head
--- {status, reason, version, headers (lower-case names)} or nil on timeout
--- or EOF. The body is read with read_body / read_event afterwards.
function Conn:read_head(timeout_ms)
  local stop
  wait_until(function()
    stop = self.raw:find("\r\n\r\n", 1, true)
    return stop or self.eof
  end, timeout_ms or M.DEFAULT_TIMEOUT_MS)
  if not stop then return nil end
  local head = parse_head(self.raw:sub(1, stop - 1))
  self.raw = self.raw:sub(stop + 4)
  local method = self.methods and table.remove(self.methods, 1)
  local te = head.headers["transfer-encoding"]
  if method == "HEAD" then
    head.framing = "length"
    head.remaining = 0
  elseif te and te:lower() == "chunked" then
    head.framing = "chunked"
  elseif head.headers["content-length"] then
    head.framing = "length"
    head.remaining = tonumber(head.headers["content-length"])
  else
    head.framing = "close"
  end
  self.head = head
  self.body = ""
  self.body_done = head.framing == "length" and head.remaining == 0
  self.bad_chunk = nil
  return head
end

-- Move whatever complete body bytes have arrived from raw into body.
function Conn:pump()
  local head = self.head
  if not head or self.body_done then return end
  if head.framing == "length" then
    local take = math.min(head.remaining, #self.raw)
    self.body = self.body .. self.raw:sub(1, take)
    self.raw = self.raw:sub(take + 1)
    head.remaining = head.remaining - take
    self.body_done = head.remaining == 0
  elseif head.framing == "close" then
    self.body = self.body .. self.raw
    self.raw = ""
    self.body_done = self.eof
  else
    while true do
      local line_end = self.raw:find("\r\n", 1, true)
      if not line_end then return end
      local size = tonumber(self.raw:sub(1, line_end - 1):match("^%x+"), 16)
      if not size then
        self.bad_chunk = self.raw:sub(1, 40)
        self.body_done = true
        return
      end
      if size == 0 then
        -- The last chunk: no trailers expected, just the final CRLF.
        if #self.raw < line_end + 3 then return end
        assert(self.raw:sub(line_end + 2, line_end + 3) == "\r\n", "trailers after the last chunk")
        self.raw = self.raw:sub(line_end + 4)
        self.body_done = true
        return
      end
      if #self.raw < line_end + 1 + size + 2 then return end
      self.body = self.body .. self.raw:sub(line_end + 2, line_end + 1 + size)
      assert(self.raw:sub(line_end + 2 + size, line_end + 3 + size) == "\r\n", "chunk not followed by CRLF")
      self.raw = self.raw:sub(line_end + 4 + size)
    end
  end
end

--- Read the rest of the current response's body. Returns the body and
--- whether it ended properly (false on timeout, or EOF before its end).
function Conn:read_body(timeout_ms)
  wait_until(function()
    self:pump()
    return self.body_done or self.eof
  end, timeout_ms or M.DEFAULT_TIMEOUT_MS)
  self:pump()
  local body = self.body
  self.body = ""
  return body, self.body_done
end

local function parse_event(block)
  local event = { data_lines = {}, comments = {}, raw = block }
  for line in (block .. "\n"):gmatch("(.-)\n") do
    if line:sub(1, 1) == ":" then
      event.comments[#event.comments + 1] = line
    else
      local field, value = line:match("^([^:]*):? ?(.*)$")
      if field == "data" then event.data_lines[#event.data_lines + 1] = value
      elseif field == "id" then event.id = value
      elseif field == "event" then event.event = value
      elseif field == "retry" then event.retry = tonumber(value) end
    end
  end
  if #event.data_lines > 0 then
    event.data = table.concat(event.data_lines, "\n")
    if event.data ~= "" then event.json = cjson.decode(event.data) end
  end
  return event
end

--- The next SSE event of the current text/event-stream response (comment-
--- only blocks such as keep-alives are returned too, with no data). Returns
--- nil on timeout or when the stream ended (see self.body_done).
function Conn:read_event(timeout_ms)
  local stop
  wait_until(function()
    self:pump()
    stop = self.body:find("\n\n", 1, true)
    return stop or self.body_done or self.eof
  end, timeout_ms or M.DEFAULT_TIMEOUT_MS)
  if not stop then return nil end
  local block = self.body:sub(1, stop - 1)
  self.body = self.body:sub(stop + 2)
  return parse_event(block)
end

--- Read SSE events until the stream ends (or timeout). Returns the list of
--- events that carry data, and whether the stream ended.
function Conn:read_events(timeout_ms)
  local events = {}
  uv.update_time()
  local deadline = uv.now() + (timeout_ms or M.DEFAULT_TIMEOUT_MS)
  while true do
    local remaining = deadline - uv.now()
    if remaining <= 0 then break end
    local e = self:read_event(remaining)
    if not e then break end
    if e.data then events[#events + 1] = e end
    uv.update_time()
  end
  self:pump()
  return events, self.body_done and self.body == ""
end

--- The bytes of one request. opts: method, path, headers (a table; a value
--- false leaves out a default header), body (a string or a table,
--- JSON-encoded), host, version ("1.1" or "1.0"). Content-Length is added
--- for a body unless a Transfer-Encoding or Content-Length header is given.
function M.format_request(port, opts)
  local body = opts.body
  if type(body) == "table" then body = cjson.encode(body) end
  local headers = { Host = opts.host or ("127.0.0.1:" .. port) }
  if body and not (opts.headers and (opts.headers["Transfer-Encoding"] or opts.headers["Content-Length"])) then
    headers["Content-Length"] = tostring(#body)
  end
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  local names = {}
  for k in pairs(headers) do names[#names + 1] = k end
  table.sort(names)
  local out = { (opts.method or "GET") .. " " .. (opts.path or "/mcp") .. " HTTP/" .. (opts.version or "1.1") .. "\r\n" }
  for _, k in ipairs(names) do
    if headers[k] then out[#out + 1] = k .. ": " .. headers[k] .. "\r\n" end
  end
  out[#out + 1] = "\r\n"
  if body then out[#out + 1] = body end
  return table.concat(out)
end

--- Format (see format_request) and send one request.
function Conn:send_request(opts)
  -- Remembered so that the response to a HEAD is read without a body.
  self.methods = self.methods or {}
  self.methods[#self.methods + 1] = opts.method or "GET"
  return self:write(M.format_request(self.port, opts))
end

local function finish(head, body, ended, events)
  local r = { status = head.status, reason = head.reason, headers = head.headers, version = head.version,
              body = body, complete = ended, events = events }
  local ct = head.headers["content-type"] or ""
  if ct:find("application/json", 1, true) and body ~= "" then
    local ok, decoded = pcall(cjson.decode, body)
    if ok then r.json = decoded end
  end
  return r
end

--- Read a whole response: for text/event-stream, every event until the
--- stream ends. Returns {status, headers, body, json, events, complete} or
--- nil if no response head arrived.
function Conn:read_response(timeout_ms)
  local head = self:read_head(timeout_ms)
  if not head then return nil end
  if (head.headers["content-type"] or ""):find("text/event-stream", 1, true) then
    local events, ended = self:read_events(timeout_ms)
    return finish(head, "", ended, events)
  end
  local body, ended = self:read_body(timeout_ms)
  return finish(head, body, ended)
end

--- send_request + read_response.
function Conn:request(opts)
  self:send_request(opts)
  return self:read_response(opts.timeout_ms)
end

M.Conn = Conn

---------------------------------------------------------------------------
-- Servers
---------------------------------------------------------------------------

local Server = {}
Server.__index = Server

--- Start `luamcp run --http 127.0.0.1:0 ARGS...` and wait for the line
--- that names its port. args: the scripts and any options, a list. opts:
--- env (a list of "K=V"), bin (another luamcp), listen (instead of 127.0.0.1:0), command ("dev"
--- instead of "run"), drain_time (--drain-time; false: luamcp's default).
--- Without drain_time the server gets --drain-time 0: stop() then cancels
--- the calls a spec left running at once, as the specs expect, instead of
--- waiting for them.
function M.start(args, opts)
  opts = opts or {}
  local full = { opts.command or "run", "--http", opts.listen or "127.0.0.1:0" }
  if opts.drain_time ~= false then
    full[#full + 1] = "--drain-time"
    full[#full + 1] = tostring(opts.drain_time or 0)
  end
  for _, a in ipairs(args) do full[#full + 1] = a end
  local proc = mcp_client.spawn(full, { env = opts.env, bin = opts.bin })
  local self = setmetatable({ proc = proc, conns = {} }, Server)
  local ok = wait_until(function()
    self.port = tonumber(proc.stderr:match("serving MCP over HTTP at http://[^:]+:(%d+)/"))
    return self.port or proc.exited
  end, 60000)
  assert(ok and self.port, "luamcp did not start:\n" .. proc.stderr)
  self.url = "http://127.0.0.1:" .. self.port .. (opts.path or "/mcp")
  return self
end

function Server:stderr() return self.proc.stderr end

--- See mcp_client's Process:wait_stderr.
function Server:wait_stderr(needle, n, timeout_ms) return self.proc:wait_stderr(needle, n, timeout_ms) end

--- Is the process still running?
function Server:alive()
  uv.run("nowait")
  return not self.proc.exited
end

--- A new connection (closed by stop() if the test does not).
function Server:connect()
  local conn = assert(M.connect(self.port))
  self.conns[#self.conns + 1] = conn
  return conn
end

--- One request on a fresh connection, which is closed afterwards.
function Server:request(opts)
  local conn = self:connect()
  local r = conn:request(opts)
  conn:close()
  return r
end

--- POST a JSON-RPC message (a table or raw string) with the usual headers;
--- headers are added to (or, when false, remove) the defaults.
function Server:post(message, headers, opts)
  local h = { Accept = M.ACCEPT_BOTH, ["Content-Type"] = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  local o = { method = "POST", headers = h, body = message }
  for k, v in pairs(opts or {}) do o[k] = v end
  return self:request(o)
end

--- initialize + notifications/initialized; returns the session id and the
--- initialize response.
function Server:initialize(version, capabilities)
  version = version or "2025-11-25"
  local r = self:post({ jsonrpc = "2.0", id = 0, method = "initialize", params = {
    protocolVersion = version, capabilities = capabilities or cjson.decode("{}"),
    clientInfo = { name = "busted-http", version = "1.0" } } })
  assert(r and r.status == 200 and r.json and r.json.result,
    "initialize failed: " .. cjson.encode(r or {}) .. "\n" .. self.proc.stderr)
  local session = r.headers["mcp-session-id"]
  local n = self:post({ jsonrpc = "2.0", method = "notifications/initialized" },
    { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = version })
  assert(n and n.status == 202, "notifications/initialized was not accepted")
  return session, r
end

--- SIGTERM, wait for the exit, free every handle. Returns the exit code
--- and the signal that ended the process (0 for none).
function Server:stop()
  for _, c in ipairs(self.conns) do c:close() end
  return self.proc:terminate(M.DEFAULT_TIMEOUT_MS)
end

--- stop(), asserting a clean exit: status 0 and no signal (a crash, or a
--- sanitizer's report, shows here).
function Server:stop_cleanly()
  local stderr = self.proc.stderr
  local code, signal = self:stop()
  assert(code == 0 and signal == 0,
    ("luamcp exited with status %s, signal %s:\n%s"):format(tostring(code), tostring(signal), stderr))
end

M.Server = Server
--- Assert an HTTP error: the status, and a JSON-RPC error body whose id is
--- the request's when its body was read (id), null otherwise. Uses busted's
--- assert.
function M.assert_error(r, status, code, message, id)
  local assert = require "luassert"
  assert.is_table(r, "no response")
  assert.are.equal(status, r.status, r.body)
  assert.are.equal("application/json", r.headers["content-type"])
  assert.is_true(r.complete)
  assert.are.equal(#r.body, tonumber(r.headers["content-length"]))
  if id == nil then assert.truthy(r.body:find('"id":null', 1, true), r.body) end
  assert.is_table(r.json, r.body)
  assert.are.equal("2.0", r.json.jsonrpc)
  assert.are.equal(id == nil and cjson.null or id, r.json.id)
  assert.are.equal(code, r.json.error.code, r.body)
  if message then assert.truthy(r.json.error.message:find(message, 1, true), r.json.error.message) end
end

--- The resident memory of a process, in kB (nil once it is gone).
function M.rss_kb(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return nil end
  local kb = tonumber(f:read("a"):match("VmRSS:%s*(%d+)"))
  f:close()
  return kb
end

return M
