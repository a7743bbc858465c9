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
-- It speaks the session era (initialize, 2025-11-25), which every server
-- from 2024-11-05 on understands. Requests run one at a time: the client
-- waits for each answer, and meanwhile collects notifications and answers
-- the server's own requests (ping, elicitation, sampling, roots) with the
-- handlers it was given.

local core = require "luamcp.client"

local M = {}

M.PROTOCOL_VERSION = "2025-11-25"
M.now_ms = core.now_ms
M.null = core.null
M.json = { encode = core.json_encode, decode = core.json_decode, array = core.array, object = core.object }

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
  return setmetatable({ method = method, code = err.code, message = err.message, data = err.data }, RequestError)
end

local Client = {}
Client.__index = Client
M.Client = Client

-- The server's requests a client answers, and the handler each needs.
local SERVER_REQUESTS = {
  ["elicitation/create"] = "elicit",
  ["sampling/createMessage"] = "sample",
  ["roots/list"] = "roots",
}

local function roots_result(roots)
  local list = {}
  for i, r in ipairs(roots) do
    list[i] = type(r) == "string" and { uri = r } or r
  end
  return { roots = core.array(list) }
end

--- Connect to a server and initialize a session.
--- target: exactly one of path (a script file or folder, served in this
--- process), url (Streamable HTTP) or command (an argv table: a stdio
--- server started as a child); and optionally:
---   headers           HTTP headers sent with every request
---   server            in process: { timeout_ms, client_timeout_ms, page_size, memory_limit_mb }
---   timeout_ms        how long a request waits for its answer (default 60000)
---   elicit(params)    answers elicitation/create (declares the capability)
---   sample(params)    answers sampling/createMessage (declares it)
---   roots             a list of URIs (or {uri, name}), or a function returning one (declares it)
---   on_notification(message)  called for each notification as it arrives
---   authorize(info)   HTTP: called on a 401 (or 403 insufficient_scope) with
---                     {status, challenge = WWW-Authenticate, url}; returns
---                     a Bearer token (the request is sent again once with
---                     it) or nil, why (mcp.client_auth makes one)
---   identity          in process: who every message comes from, as if it
---                     carried a verified token (JSON text; mcp.testing's auth)
--- Returns the client, or nil and a message.
function M.connect(target)
  local conn, err, carrier
  if target.path then
    conn, err = core.open_inprocess(target.path, target.server)
    carrier = "in its answers"
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
  local self = setmetatable({
    conn = conn,
    next_id = 0,
    answers = {},
    notifications = {},
    timeout_ms = target.timeout_ms,
    carrier = carrier,
    on_notification = target.on_notification,
    identity = target.identity,
    url = target.url,
    authorize = target.authorize,
    handlers = { elicit = target.elicit, sample = target.sample, roots = target.roots },
  }, Client)
  local capabilities = {}
  if target.elicit then capabilities.elicitation = core.object {} end
  if target.sample then capabilities.sampling = core.object {} end
  if target.roots then capabilities.roots = { listChanged = true } end
  local result, failure = self:request("initialize", {
    protocolVersion = M.PROTOCOL_VERSION,
    capabilities = core.object(capabilities),
    clientInfo = { name = target.client_name or "luamcp", version = core.version },
  })
  if not result then
    conn:close()
    return nil, "initialize failed: " .. tostring(failure.message)
  end
  self.server_info = result.serverInfo
  self.capabilities = result.capabilities
  self.instructions = result.instructions
  self.protocol_version = result.protocolVersion
  conn:set_header("MCP-Protocol-Version", result.protocolVersion)
  self:notify("notifications/initialized")
  return self
end

function Client:_send(message, identity)
  local ok, err = self.conn:send(core.json_encode(message), identity or self.identity)
  return ok, err
end

function Client:_answer_server(message)
  local reply = { jsonrpc = "2.0", id = message.id }
  local which = SERVER_REQUESTS[message.method]
  local handler = which and self.handlers[which]
  if message.method == "ping" then
    reply.result = core.object {}
  elseif not handler then
    reply.error = { code = -32601, message = "the client does not handle " .. tostring(message.method) }
  elseif which == "roots" and type(handler) == "table" then
    reply.result = roots_result(handler)
  else
    local ok, result = pcall(handler, message.params or {})
    if not ok then
      reply.error = { code = -32603, message = tostring(result) }
    elseif which == "roots" then
      reply.result = roots_result(result or {})
    else
      reply.result = result or core.object {}
    end
  end
  self:_send(reply)
end

-- A message taken in; a line that is not a JSON-RPC message is what the
-- request waiting for its answer fails with (a stdio server that prints
-- to stdout has broken the stream).
function Client:_handle(text)
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
    local text = self.conn:receive(0)
    if not text then return end
    self:_handle(text)
  end
end

--- Send a request and wait for its answer. Returns the result, or nil and
--- a RequestError ({method, code, message, data}; a transport failure has
--- code -32000 and says what failed). identity: who this one request
--- comes from (in process; JSON text), instead of the client's.
function Client:request(method, params, identity)
  self.next_id = self.next_id + 1
  local id = self.next_id
  local ok, err = self:_send({ jsonrpc = "2.0", id = id, method = method, params = params }, identity)
  if not ok then return nil, request_error(method, { code = -32000, message = err }) end
  -- One deadline for the whole request: notifications on the way do not
  -- extend it.
  local timeout = self.timeout_ms or core.default_timeout_ms
  local deadline = core.now_ms() + timeout
  local authorized = 0
  while not self.answers[id] do
    local left = math.max(0, deadline - core.now_ms())
    local text, why, kind, status, challenge = self.conn:receive(left)
    -- A token now: the same request again (at most twice: a first token,
    -- then one with more scope; authorize refuses a token that was refused).
    if not text and kind == "failed" and authorized < 2 and self:_authorize(status, challenge) then
      authorized = authorized + 1
      ok, err = self:_send({ jsonrpc = "2.0", id = id, method = method, params = params }, identity)
      if not ok then return nil, request_error(method, { code = -32000, message = err }) end
      text, why, kind = nil, nil, nil
    elseif not text then
      if kind == "timeout" then why = ("no answer within %d ms"):format(timeout) end
      if self.auth_failure then why, self.auth_failure = self.auth_failure, nil end
      return nil, request_error(method, { code = -32000, message = why })
    end
    if text then self:_handle(text) end
    if self.garbage then
      local why = self.garbage
      self.garbage = nil
      return nil, request_error(method, { code = -32000, message = why })
    end
  end
  local answer = self.answers[id]
  self.answers[id] = nil
  if answer.error then return nil, request_error(method, answer.error) end
  return answer.result
end

-- An HTTP 401 (or 403 insufficient_scope) with target.authorize given:
-- get a token and send it from now on. True when there is one; else the
-- reason is kept for the request's error (self.auth_failure).
function Client:_authorize(status, challenge)
  if not self.authorize then return false end
  local insufficient = status == 403 and tostring(challenge or ""):find("insufficient_scope", 1, true)
  if status ~= 401 and not insufficient then return false end
  local token, why = self.authorize { status = status, challenge = challenge, url = self.url }
  if not token then
    self.auth_failure = "authorization failed: " .. tostring(why)
    return false
  end
  self.conn:set_header("Authorization", "Bearer " .. token)
  return true
end

--- Send a notification.
function Client:notify(method, params)
  return self:_send { jsonrpc = "2.0", method = method, params = params }
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
  return all
end

--- tools/call: the result (an isError result included), or nil and an error.
function Client:call(name, arguments)
  return self:request("tools/call", with_progress(self, { name = name, arguments = core.object(arguments or {}) }))
end

function Client:read(uri)
  return self:request("resources/read", { uri = uri })
end

function Client:prompt(name, arguments)
  return self:request("prompts/get", { name = name, arguments = core.object(arguments or {}) })
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

function Client:close()
  if self.conn then
    self.conn:close()
    self.conn = nil
  end
end

return M
