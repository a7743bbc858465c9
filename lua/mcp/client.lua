-- mcp.client: an MCP client, for luamcp's client commands (call, read,
-- prompt) and for mcp.testing. It runs in the client side's own Lua state
-- (runtime/cli/client.c), never in a server's.
--
--   local client = require "mcp.client"
--   local c = assert(client.connect { path = "scripts/demo" })       -- in process
--   local c = assert(client.connect { url = "http://127.0.0.1:8080/mcp" })
--   local c = assert(client.connect { command = { "node", "server.js" } })
--   local result, err = c:call("add", { a = 1, b = 2 })
--   c:close()
--
-- It speaks both protocol eras (the rules are in mcp.client_protocol):
-- over HTTP it asks server/discover first (2026-07-28: no session, _meta on
-- every request, the standard and Mcp-Param-* headers, input_required
-- answered and retried) and falls back to initialize (the session era,
-- 2025-11-25) for a server that does not know it; protocol_version pins
-- either. A child or an in-process server is spoken to in the session era
-- unless a modern version is pinned. Requests run one at a time: the
-- client waits for each answer, and meanwhile collects notifications and
-- answers the server's own requests (ping, elicitation, sampling, roots)
-- with the handlers it was given. An SSE answer stream that ends before
-- the answer is resumed with GET and Last-Event-ID after the server's
-- retry delay.

local core = require "luamcp.client"
local protocol = require "mcp.client_protocol"

local M = {}

M.PROTOCOL_VERSION = "2025-11-25"
M.MODERN_VERSION = protocol.MODERN_VERSION
M.now_ms = core.now_ms
M.null = core.null
M.json = { encode = core.json_encode, decode = core.json_decode, array = core.array, object = core.object }
local proto = protocol.new { encode = core.json_encode, decode = core.json_decode, null = core.null,
  array = core.array, object = core.object }
M.protocol = proto

-- How often an answer stream that ended early is resumed, and the delay
-- when the server gave no retry: (ms).
local MAX_RESUMES = 5
local DEFAULT_RETRY_MS = 1000

local ARRAY_MT = getmetatable(core.array {})

--- Is t a JSON array (decoded as one, or marked with json.array)?
function M.is_array(t)
  return type(t) == "table" and getmetatable(t) == ARRAY_MT
end

-- An error the server answered (or the transport reported) for a request:
-- { method, code, message, data }, readable with tostring.
local RequestError = {}
RequestError.__index = RequestError
RequestError.__tostring = function(e)
  return string.format("%s: %s (%s)", e.method, tostring(e.message), tostring(e.code))
end
M.RequestError = RequestError

local function request_error(method, err)
  return setmetatable({ method = method, code = err.code, message = err.message, data = err.data,
    status = err.status, interrupted = err.interrupted }, RequestError)
end

local Client = {}
Client.__index = Client
M.Client = Client

--- Connect to a server and begin (server/discover or initialize).
--- target: exactly one of path (a script file or folder, served in this
--- process), url (Streamable HTTP; ws://: a WebSocket) or command (an argv table: a stdio
--- server started as a child); and optionally:
---   headers           HTTP headers sent with every request
---   server            in process: { timeout_ms, client_timeout_ms, page_size, memory_limit_mb }
---   timeout_ms        how long a request waits for its answer (default 60000)
---   protocol_version  pin this version (no fallback): "2026-07-28" or a 2025 one
---   elicit(params)    answers elicitation/create (declares the capability)
---   apply_defaults    fill an accepted form's missing values from its schema's defaults (declared)
---   sample(params)    answers sampling/createMessage (declares it)
---   roots             a list of URIs (or {uri, name}), or a function returning one (declares it)
---   on_notification(message)  called for each notification as it arrives
---   authorize(info)   HTTP: called when a request is refused with 401 (or 403
---                     insufficient_scope): info = {status, challenge, url};
---                     returns a token and its scheme (sent as Authorization:
---                     Bearer, or DPoP) or nil, why;
---                     the request is then sent once more
---   identity          in process: who every message comes from, as if it
---                     carried a verified token (JSON text; mcp.testing's auth)
--- Returns the client, or nil, a message and "interrupted" when Ctrl-C
--- (once the program catches it) stopped it.
function M.connect(target)
  local conn, err, carrier, websocket
  if target.path then
    conn, err = core.open_inprocess(target.path, target.server)
    carrier = "in its answers"
  elseif target.url and target.url:lower():match("^wss?://") then
    -- A WebSocket: a session on one connection, as on stdio (no headers
    -- after the upgrade, no GET streams, initialize first).
    conn, err = core.open_ws(target.url, target.headers)
    carrier = "in its WebSocket frames"
    websocket = true
  elseif target.url then
    conn, err = core.open_http(target.url)
    carrier = "in its HTTP answer"
  elseif target.command then
    conn, err = core.open_child(target.command)
    carrier = "on stdout"
  else
    error("mcp.client.connect needs path, url or command", 2)
  end
  if not conn then return nil, err end
  for name, value in pairs(target.headers or {}) do
    conn:set_header(name, value)
  end
  local pinned = target.protocol_version
  if pinned and not protocol.supports(pinned) then
    conn:close()
    return nil, ("protocol version %s is not one this client speaks (%s)"):format(pinned,
      table.concat(protocol.VERSIONS, ", "))
  end
  local handlers = { elicit = target.elicit, sample = target.sample, roots = target.roots,
    apply_defaults = target.apply_defaults }
  local self = setmetatable({
    conn = conn,
    url = not websocket and target.url or nil,
    next_id = 0,
    answers = {},
    notifications = {},
    timeout_ms = target.timeout_ms,
    carrier = carrier,
    on_notification = target.on_notification,
    identity = target.identity,
    authorize = target.authorize,
    handlers = handlers,
    state = {
      client_info = { name = target.client_name or "luamcp", version = core.version },
      capabilities = proto.capabilities(handlers),
    },
  }, Client)
  local modern_first = (pinned and protocol.is_modern(pinned)) or (not pinned and target.url ~= nil and not websocket)
  local why
  if modern_first then
    local ok, fallback, failure = self:_discover(pinned or protocol.MODERN_VERSION)
    if not ok and (pinned or not fallback or self.interrupted) then
      conn:close()
      return nil, "server/discover failed: " .. tostring(fallback or failure), self.interrupted and "interrupted" or nil
    end
    if ok then return self end
    why = fallback
  end
  local ok, failure = self:_initialize(pinned or M.PROTOCOL_VERSION)
  if not ok then
    conn:close()
    return nil, "initialize failed: " .. tostring(failure) .. (why and (" (after server/discover: " .. why .. ")") or ""),
      self.interrupted and "interrupted" or nil
  end
  return self
end

-- server/discover at version: true (the modern era is on), or false and
-- nil, why (a failure) or false, why (fall back to initialize).
function Client:_discover(version)
  for _ = 1, 2 do
    self.state.protocol_version = version
    local result, err = self:_request_raw("server/discover", core.object {})
    local kind, value, discovered = proto.discover_outcome(result, err, err and err.status, version)
    if kind == "modern" then
      self.state.protocol_version = value
      self.protocol_version = value
      self.era = "modern"
      -- 2026-07-28 names the server in the result's _meta.
      local meta = type(discovered._meta) == "table" and discovered._meta or {}
      self.server_info = discovered.serverInfo or meta["io.modelcontextprotocol/serverInfo"]
      self.capabilities = discovered.capabilities
      self.instructions = discovered.instructions
      self.discovered = discovered
      return true
    elseif kind == "retry" then
      version = value
    elseif kind == "session" then
      self.state.protocol_version = nil
      return false, value
    else
      self.state.protocol_version = nil
      return false, nil, value
    end
  end
  self.state.protocol_version = nil
  return false, nil, "the server refused server/discover at every version it named"
end

function Client:_initialize(version)
  self.state.protocol_version = nil
  self.state.initialized = false
  self.next_id = self.next_id + 1
  local message, headers = proto.initialize({ protocol_version = version, client_info = self.state.client_info,
    capabilities = self.state.capabilities }, self.next_id)
  local result, failure = self:_exchange(message, headers)
  if not result then return false, failure.message end
  self.server_info = result.serverInfo
  self.capabilities = result.capabilities
  self.instructions = result.instructions
  self.protocol_version = result.protocolVersion
  self.era = "session"
  self.state.protocol_version = result.protocolVersion
  self.state.initialized = true
  self:notify("notifications/initialized")
  -- The session's standalone stream, where a server sends what belongs to
  -- no request (a question it asks outside a call's stream); a server
  -- may refuse it (405).
  if self.url then self.conn:get_stream(nil, 0) end
  return true
end

-- LUAMCP_CLIENT_TRACE=1: every message sent and received, on stderr.
local TRACE = os.getenv("LUAMCP_CLIENT_TRACE") == "1"

function Client:_send(message, identity, headers)
  local text = core.json_encode(message)
  if TRACE then io.stderr:write("--> ", text, "\n") end
  -- A DPoP-bound token goes with a fresh proof on every request.
  -- (authorize may be a plain function: a hook of the caller's own.)
  local proof = type(self.authorize) == "table" and self.authorize.proof and self.authorize.proof("POST", self.url)
  if proof then
    local with = { DPoP = proof }
    for k, v in pairs(headers or {}) do with[k] = v end
    headers = with
  end
  local ok, err = self.conn:send(text, identity or self.identity, headers)
  return ok, err
end

function Client:_answer_server(message)
  local reply = { jsonrpc = "2.0", id = message.id }
  local result, err = proto.answer(message.method, message.params, self.handlers)
  if result then reply.result = result else reply.error = err end
  local headers = {}
  local v = self.state.protocol_version
  if v and (protocol.is_modern(v) or self.state.initialized) then headers["MCP-Protocol-Version"] = v end
  self:_send(reply, nil, headers)
end

-- A message taken in; a line that is not a JSON-RPC message is what the
-- request waiting for its answer fails with (a stdio server that prints
-- to stdout has broken the stream).
function Client:_handle(text)
  if TRACE then io.stderr:write("<-- ", text, "\n") end
  local message = core.json_decode(text)
  local rpc = type(message) == "table" and (M.is_array(message) and #message > 0
    or message.method ~= nil or message.id ~= nil or message.result ~= nil or message.error ~= nil)
  if not rpc then
    local shown = #text > 200 and (text:sub(1, 200) .. "...") or text
    self.garbage = self.garbage or ("the server printed something that is not JSON-RPC %s: %s"):format(
      self.carrier or "on stdout", shown)
    return
  end
  if message.method ~= nil then
    if message.id ~= nil then
      self:_answer_server(message)
    else
      self.notifications[#self.notifications + 1] = message
      if self.on_notification then self.on_notification(message) end
    end
  elseif message.id ~= nil then
    self.answers[message.id] = message
  end
end

--- Handle what has already arrived (notifications, the server's requests)
--- without waiting.
function Client:drain()
  while true do
    local text, _, kind = self.conn:receive(0)
    if text then
      self:_handle(text)
    elseif kind ~= "stream_ended" then
      return
    end
  end
end

-- Send a message (a request) and wait for its answer: the result, or nil
-- and a RequestError. Handles, on the way: a 401/403 the authorize hook
-- answers (sent once more with the token), an SSE stream that ends before
-- the answer (resumed with Last-Event-ID), and Ctrl-C once the program
-- catches it (the server is told the request is cancelled; the error has
-- interrupted = true).
function Client:_exchange(message, headers, identity)
  local id, method = message.id, message.method
  local ok, err = self:_send(message, identity, headers)
  if not ok then return nil, request_error(method, { code = -32000, message = err }) end
  -- One deadline for the whole request: notifications on the way do not
  -- extend it.
  local timeout = self.timeout_ms or core.default_timeout_ms
  local deadline = core.now_ms() + timeout
  local authorized, resumes = 0, 0
  local _, _, ended_before = self.conn:stream_state()
  while not self.answers[id] do
    local left = math.max(0, deadline - core.now_ms())
    local text, why, kind, status, challenge, body, dpop_nonce = self.conn:receive(left)
    if not text then
      if kind == "interrupted" then
        self.interrupted = true
        self:notify("notifications/cancelled", { requestId = id, reason = "the user interrupted (Ctrl-C)" })
        return nil, request_error(method, { code = -32000, message = "interrupted", interrupted = true })
      end
      local insufficient = status == 403 and challenge and challenge:find("insufficient_scope", 1, true)
      -- At most twice: a token, then (a 403 insufficient_scope) one with
      -- more scope; authorize itself refuses when a fresh token was refused.
      if kind == "failed" and self.authorize and authorized < 2 and (status == 401 or insufficient) then
        authorized = authorized + 1
        local token, auth_err = self.authorize { status = status, challenge = challenge, url = self.url,
          dpop_nonce = dpop_nonce }
        local scheme = token and auth_err or "Bearer"
        if not token then
          return nil, request_error(method, { code = -32000, status = status,
            message = why .. (auth_err and ("; authorization failed: " .. tostring(auth_err)) or "") })
        end
        self.conn:set_header("Authorization", scheme .. " " .. token)
        ok, err = self:_send(message, identity, headers)
        if not ok then return nil, request_error(method, { code = -32000, message = err }) end
        goto continue
      end
      if kind == "stream_ended" or kind == "idle" then
        local last_id, retry_ms, ended = self.conn:stream_state()
        if last_id and ended > ended_before and resumes < MAX_RESUMES then
          -- The answer stream ended before the answer: resume it.
          resumes = resumes + 1
          ended_before = ended
          self.conn:get_stream(last_id, retry_ms or DEFAULT_RETRY_MS)
          goto continue
        end
        if kind == "stream_ended" then goto continue end
      end
      if kind == "timeout" then why = ("no answer within %d ms"):format(timeout) end
      -- (Not for 401/403: there the status and WWW-Authenticate are what the
      -- user needs, and why says them.)
      if kind == "failed" and body and status ~= 401 and status ~= 403 then
        -- A JSON-RPC error in an error status's body (400 with -32022,
        -- 404 with -32601): its code and data matter to the caller; the
        -- message stays the readable one (the status and what it said).
        local decoded = core.json_decode(body)
        local e = type(decoded) == "table" and decoded.error
        if type(e) == "table" and math.type(e.code) == "integer" then
          return nil, request_error(method, { code = e.code, message = why, data = e.data, status = status })
        end
      end
      return nil, request_error(method, { code = -32000, message = why, status = status })
    end
    if text then self:_handle(text) end
    if self.garbage then
      local garbage = self.garbage
      self.garbage = nil
      return nil, request_error(method, { code = -32000, message = garbage })
    end
    ::continue::
  end
  local answer = self.answers[id]
  self.answers[id] = nil
  if answer.error then return nil, request_error(method, answer.error) end
  return answer.result
end

-- One request, one answer, in the connection's era (no input_required loop).
function Client:_request_raw(method, params, identity, extra_headers)
  self.next_id = self.next_id + 1
  local message, headers = proto.request(self.state, self.next_id, method, params, extra_headers)
  return self:_exchange(message, headers, identity)
end

--- Send a request and wait for its answer. Returns the result, or nil and
--- a RequestError ({method, code, message, data}; a transport failure has
--- code -32000 and says what failed). identity: who this one request
--- comes from (in process; JSON text), instead of the client's. The result
--- is the server's as it is (an input_required one too: Client:complete
--- answers those).
function Client:request(method, params, identity, extra_headers)
  return self:_request_raw(method, params, identity, extra_headers)
end

--- Like request, but an input_required result is answered with the
--- client's handlers and the request sent again (new id, bounded rounds),
--- until the result is complete.
function Client:_complete_request(method, params, identity, extra_headers)
  local round = 0
  local current = params
  while true do
    local result, err = self:_request_raw(method, current, identity, extra_headers)
    if not result then return nil, err end
    round = round + 1
    local kind, value = proto.input_step(result, params, self.handlers, round)
    if kind == "done" then return value end
    if kind == "fail" then
      return nil, request_error(method, { code = -32000, message = "the server asked for input: " .. tostring(value) })
    end
    current = value
  end
end

--- Send a notification.
function Client:notify(method, params)
  local message, headers = proto.notification(self.state, method, params)
  return self:_send(message, nil, headers)
end

-- A request's params with a progress token, so the server reports progress.
local function with_progress(self, params)
  params._meta = { progressToken = self.next_id + 1 }
  return params
end

--- Every item of a list, following nextCursor: kind is "tools",
--- "resources", "resources/templates" or "prompts".
function Client:list(kind)
  local key = kind == "resources/templates" and "resourceTemplates" or kind
  local all, cursor, pages = {}, nil, 0
  repeat
    local result, err = self:request(kind .. "/list", cursor and { cursor = cursor } or nil)
    if not result then return nil, err end
    for _, item in ipairs(result[key] or {}) do
      all[#all + 1] = item
    end
    cursor = result.nextCursor
    pages = pages + 1
  until cursor == nil or cursor == core.null or pages > 10000
  if kind == "tools" then
    self.tool_index = {}
    for _, t in ipairs(all) do
      if type(t) == "table" and type(t.name) == "string" then self.tool_index[t.name] = t end
    end
  end
  return all
end

--- The tool named name, from the last tools/list (listed now if none was).
function Client:_tool(name)
  if not self.tool_index then
    local tools = self:list("tools")
    if not tools then return nil end
  end
  return self.tool_index[name]
end

--- tools/call: the result (an isError result included), or nil and an error.
--- In the modern era, the tool's x-mcp-header declarations give the
--- Mcp-Param-* headers; a tool whose declarations are invalid is not called.
function Client:call(name, arguments)
  arguments = core.object(arguments or {})
  local extra
  if self.era == "modern" then
    local tool = self:_tool(name)
    if tool then
      local declarations, why = proto.header_declarations(tool.inputSchema)
      if not declarations then
        return nil, request_error("tools/call", { code = -32602,
          message = ("tool %s declares invalid x-mcp-header parameters, so it is not called: %s"):format(name, why) })
      end
      extra = proto.param_headers(declarations, arguments)
    end
  end
  return self:_complete_request("tools/call", with_progress(self, { name = name, arguments = arguments }), nil, extra)
end

--- Watch the server's notifications (each goes to on_notification) until
--- Ctrl-C (once the program catches it) or the server ends the stream.
--- 2026-07-28: subscriptions/listen (lists and the given resource URIs);
--- the session era: the session's standalone GET stream (HTTP), stdout (a
--- child). Returns true
--- when interrupted, or nil and why the stream ended (and true when it is
--- the server that offers no stream, or refused it: nothing was heard).
function Client:listen(uris)
  if self.era == "modern" then
    local saved = self.timeout_ms
    self.timeout_ms = 2 ^ 31 - 1
    local _, err = self:_request_raw("subscriptions/listen", { notifications = {
      toolsListChanged = true, promptsListChanged = true, resourcesListChanged = true,
      resourceSubscriptions = uris and #uris > 0 and core.array(uris) or nil } })
    self.timeout_ms = saved
    if err and err.interrupted then return true end
    return nil, err and err.message or "the server ended the subscription"
  end
  -- The session's standalone GET stream (HTTP) is open since initialize;
  -- a child's notifications come on its stdout.
  for _, uri in ipairs(uris or {}) do
    local _, err = self:subscribe(uri)
    if err then return nil, tostring(err) end
  end
  while true do
    local text, reason, kind = self.conn:receive(-1)
    if not text then
      if kind == "interrupted" then return true end
      -- Over with nothing left running: the standalone stream's own end
      -- says why (a 405 is no stream offered), not the last answer's.
      local over = kind == "idle" and self.url and self.conn:standalone_end()
      if over then return nil, over, true end
      if kind ~= "stream_ended" then return nil, reason end
    else
      self:_handle(text)
    end
  end
end

function Client:read(uri)
  return self:_complete_request("resources/read", { uri = uri })
end

function Client:prompt(name, arguments)
  return self:_complete_request("prompts/get", { name = name, arguments = core.object(arguments or {}) })
end

--- completion/complete. ref: {type = "ref/prompt", name = ...} or
--- {type = "ref/resource", uri = ...}; argument: {name = ..., value = ...}.
function Client:complete(ref, argument, context)
  return self:request("completion/complete", { ref = ref, argument = argument, context = context })
end

function Client:subscribe(uri)
  return self:request("resources/subscribe", { uri = uri })
end

function Client:set_log_level(level)
  return self:request("logging/setLevel", { level = level })
end

--- The server scripts reloaded in place (in process only), as luamcp dev
--- does when a file changes; notifications it caused are collected.
function Client:reload()
  local ok, err = self.conn:reload()
  self:drain()
  return ok, err
end

--- What the server's own library says it serves (luamcp inspect), as text
--- or JSON, or nil and why; false for a server not loaded in process.
function Client:_inspect(as_json)
  return self.conn:inspect(as_json)
end

function Client:close()
  if self.conn then
    self.conn:close()
    self.conn = nil
  end
end

return M
