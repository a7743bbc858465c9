-- mcp.client: tools that call other MCP servers, a child process over
-- stdio or a Streamable HTTP URL, without blocking the loop.
--
--   local gh = mcp.client.connect { command = { "github-mcp" }, name = "github" }
--   mcp.tool { name = "issues", handler = function(args, ctx)
--     return gh:call("list_issues", { repo = args.repo })  -- progress, logs, questions and
--   end }                                                  -- cancellation pass through ctx
--
-- The connection itself is C's (runtime/app/lua_remote.c, `luamcp.remote`):
-- it belongs to the app, so it outlives a reload, and a task waits on it for
-- the answer to one request id. This file speaks MCP over it: the
-- handshake (lazily, at the first use inside a task, once per connection;
-- the era rules are lua/mcp/client_protocol.lua's), the requests, and what
-- the inner server sends while a request runs (progress and logs passed on
-- to the outer call, its questions forwarded to the outer client).

local core = require "mcp.core"
local permissions = require "mcp.permissions"
local protocol = require "mcp.client_protocol"
local usage = require "mcp.usage"

local LOG_LEVEL_META = "io.modelcontextprotocol/logLevel"
-- Timed-out requests on a connection before their late answers are collected (Client:_reap).
local REAP_AFTER = 32

local proto = protocol.new { encode = core.json_encode, decode = core.json_decode, null = core.null,
                             array = core.array, object = core.object }

local M = {}

-- The C side, loaded at first use: it exists only in a server's Lua state.
local function connections()
  local ok, remote = pcall(require, "luamcp.remote")
  if not ok then error("mcp.client works only in a running server (luamcp run/dev)", 0) end
  return remote
end

local OPTIONS = { command = true, url = true, headers = true, name = true, timeout_ms = true,
                  protocol_version = true, env = true, cwd = true, oauth = true }

local LIST_FIELDS = { tools = "tools", resources = "resources", ["resources/templates"] = "resourceTemplates",
                      prompts = "prompts" }

-- What a handshake learned, by connection key: kept in mcp.state so that
-- a reload that reuses the connection (luamcp dev, SIGHUP) does not
-- initialize a live session again (a second initialize is a protocol error).
local function session_store()
  return core.state("luamcp.remote.sessions", {})
end

local Client = {}
Client.__index = Client

-- The clients of this generation, by key: two connects to the same target
-- share one connection and one session.
local clients = {}

local function misuse(message) usage.raise("mcp.client.connect: " .. message) end

local function string_map(value, what)
  if value == nil then return end
  if type(value) ~= "table" then misuse(what .. " must be a table {NAME = \"value\"}") end
  for k, v in pairs(value) do
    if type(k) ~= "string" or type(v) ~= "string" then misuse(what .. " must map names to strings") end
  end
end

local function check_options(opts)
  if type(opts) ~= "table" then misuse("needs a table: { command = {...} } or { url = ... }") end
  for k in pairs(opts) do
    if not OPTIONS[k] then
      local hint = require("mcp.check").suggest(tostring(k), OPTIONS)
      misuse(("unknown option %s%s"):format(tostring(k), hint and (" (did you mean " .. hint .. "?)") or ""))
    end
  end
  if (opts.command == nil) == (opts.url == nil) then misuse("give command = {program, args...} or url, one of them") end
  if opts.command ~= nil then
    if type(opts.command) ~= "table" or #opts.command == 0 then misuse("command must be a list {program, args...}") end
    for i, a in ipairs(opts.command) do
      if type(a) ~= "string" then misuse(("command[%d] must be a string"):format(i)) end
    end
    if opts.headers ~= nil then misuse("headers go with url, not command") end
  else
    if type(opts.url) ~= "string" or not (opts.url:match("^[Hh][Tt][Tt][Pp][Ss]?://") or opts.url:match("^unix:")
        or opts.url:match("^wss?://")) then
      misuse("url must be an http:// or https:// URL, a ws:// or wss:// URL (a WebSocket), or unix:SOCKET[:/PATH] (a Unix socket)")
    end
    if opts.env ~= nil or opts.cwd ~= nil then misuse("env and cwd go with command, not url") end
  end
  string_map(opts.headers, "headers")
  string_map(opts.env, "env")
  if opts.oauth ~= nil then
    local o = opts.oauth
    if opts.url == nil then misuse("oauth goes with url, not command") end
    if type(o) ~= "table" or type(o.client_id) ~= "string" or type(o.client_secret_env) ~= "string" then
      misuse("oauth must be { client_id = \"ID\", client_secret_env = \"VAR\" [, scope =, issuer =] }")
    end
    for _, k in ipairs { "scope", "issuer" } do
      if o[k] ~= nil and type(o[k]) ~= "string" then misuse("oauth." .. k .. " must be a string") end
    end
    local secret = core.getenv(o.client_secret_env)
    if secret == nil or secret == "" then
      misuse(("oauth.client_secret_env: the variable %s is not set"):format(o.client_secret_env))
    end
  end
  if opts.cwd ~= nil and type(opts.cwd) ~= "string" then misuse("cwd must be a string") end
  if opts.name ~= nil and type(opts.name) ~= "string" then misuse("name must be a string") end
  if opts.timeout_ms ~= nil and not (math.type(opts.timeout_ms) == "integer" and opts.timeout_ms >= 0) then
    misuse("timeout_ms must be a whole number of milliseconds (0: none)")
  end
  local v = opts.protocol_version
  if v ~= nil and not protocol.supports(v) then
    misuse(("protocol_version %s: the versions are %s"):format(tostring(v), table.concat(protocol.VERSIONS, ", ")))
  end
end

-- The script's permissions (mcp.server{permissions}): the program must be
-- one exec lists, the host one net lists, with the checks and messages of
-- mcp.exec and mcp.http. Returns the argv to run (the program resolved as
-- the check resolved it) or the URL to open (as libcurl read it), or nil,
-- message, "EACCES".
local function permitted(opts)
  if opts.command then
    local program, message, code = permissions.check_exec(opts.command[1])
    if not program then return nil, message, code end
    local argv = table.move(opts.command, 1, #opts.command, 1, {})
    argv[1] = program
    return argv
  end
  -- libcurl's own parse is judged, and the URL it writes back is the one
  -- opened: what is judged is what is used, as for mcp.http.
  local scheme, host, port, url = connections().endpoint(opts.url)
  if not scheme then return nil, ("mcp.client: %s"):format(host) end
  local ok, message, code
  if scheme == "unix" then ok, message, code = permissions.check_socket(host) -- host: the socket's path
  else ok, message, code = permissions.check_net(host, port) end
  if not ok then return nil, message, code end
  return url
end

-- One text per connect target: the same target in the next generation
-- finds the same C connection.
local function target_key(opts)
  local function sorted(map)
    local keys, out = {}, {}
    for k in pairs(map or {}) do keys[#keys + 1] = k end
    table.sort(keys)
    for i, k in ipairs(keys) do out[i] = { k, map[k] } end
    return core.array(out)
  end
  if opts.command then
    return "command " .. core.json_encode(core.array { core.array(opts.command), opts.cwd or "", sorted(opts.env) })
  end
  return "url " .. core.json_encode(core.array { opts.url, sorted(opts.headers) })
end

-- The key the runtime knows a connection by (and names it by in its log
-- lines): the client's name, made unique among the targets this server
-- connects to; kept in mcp.state so the next generation finds the same.
local function connection_key(target, name)
  local keys = core.state("luamcp.remote.keys", {})
  if keys[target] then return keys[target] end
  local taken = {}
  for _, k in pairs(keys) do taken[k] = true end
  local key, n = name, 1
  while taken[key] do
    n = n + 1
    key = ("%s#%d"):format(name, n)
  end
  keys[target] = key
  return key
end

-- A login kept by `luamcp login` for this URL (mcp.token_store), read at
-- connect, while the scripts load (before the server is confined): its
-- token goes as the Authorization header unless the script gave one.
local function kept_login(opts)
  if not opts.url or opts.url:match("^unix:") then return nil end
  for k in pairs(opts.headers or {}) do
    if k:lower() == "authorization" then return nil end
  end
  local ok, store = pcall(require, "mcp.token_store")
  local doc = ok and store.load() or nil
  return doc and doc.servers[store.key(opts.url)] or nil
end

-- application/x-www-form-urlencoded
local function form(fields)
  local parts = {}
  for _, kv in ipairs(fields) do
    if kv[2] ~= nil then
      parts[#parts + 1] = kv[1] .. "=" .. tostring(kv[2]):gsub("[^%w%-%._~]", function(c)
        return ("%%%02X"):format(c:byte())
      end)
    end
  end
  return table.concat(parts, "&")
end

--- Connect to another MCP server (no I/O waits here: the handshake comes
--- at the first request, inside a task). Misuse raises; a program or host
--- the permissions do not list raises "permission denied: ...".
function M.connect(opts)
  check_options(opts)
  local target = target_key(opts)
  local existing = clients[target]
  if existing and not existing.closed then return existing end
  local argv, message = permitted(opts)
  if not argv then usage.raise(message) end
  local name = opts.name or (opts.command and opts.command[1]:match("([^/\\]+)$")) or opts.url
  local self = setmetatable({
    -- One session on one connection (a child's stdio, a WebSocket), not
    -- HTTP's requests that each carry their answer.
    stream = opts.command ~= nil or opts.url:match("^wss?://") ~= nil,
    key = connection_key(target, name), target = target, opts = opts, name = name,
    listeners = {}, tool_schemas = nil, argv = argv,
    running = {}, -- request id -> the ctx of the call it runs for
    abandoned = {}, -- ids of requests that timed out: their late answers are collected (_reap)
    login = not opts.oauth and kept_login(opts) or nil, -- luamcp login's token for opts.url, or nil
    -- client credentials (mcp.client_auth, its fetches over mcp.http)
    oauth = opts.oauth and require("mcp.client_auth").new { client_id = opts.oauth.client_id,
      client_secret = core.getenv(opts.oauth.client_secret_env), scope = opts.oauth.scope,
      issuer = opts.oauth.issuer } or nil,
  }, Client)
  clients[target] = self
  return self
end

-- Open (or find again, after a reload) the C connection: at the first use,
-- inside a task (while the scripts load, no server holds connections yet).
function Client:_open(argv)
  local opts = self.opts
  local spec = { key = self.key }
  if opts.command then
    spec.command, spec.cwd, spec.env = argv, opts.cwd, opts.env
  else
    spec.url, spec.headers = argv, opts.headers -- the URL as the permission check read it
  end
  local h, how = connections().open(spec)
  if not h then return nil, tostring(how) end
  self.h, self.reused, self.sent_token = h, how == "reused", nil
  local sessions = session_store()
  if how ~= "reused" or type(sessions[self.key]) ~= "table" then sessions[self.key] = {} end
  self.session = sessions[self.key]
  h:on_message(function(text, why) self:_unclaimed(text, why) end)
  return true
end

-- MCP-Protocol-Version rides on every HTTP request once negotiated
-- (set_header, so the runtime's own requests carry it too: a cancellation,
-- the DELETE); before that each request carries the version it tries.
function Client:_strip_version(headers)
  if headers["MCP-Protocol-Version"] == self.session.version_header then headers["MCP-Protocol-Version"] = nil end
end

function Client:_set_version(v)
  self.h:set_header("MCP-Protocol-Version", v)
  self.session.version_header = v
end

function Client:_fail(message, code)
  return nil, ("mcp.client %s: %s"):format(self.name, message), code
end

-- ---- Questions from the inner server, answered through the outer call ---

-- The outer call's answer to one server->client request, or nil and a
-- JSON-RPC error. An error object raised by the outer ctx (a 2026-07-28
-- outer call that must first ask its own client) is raised again after
-- the inner server has been told.
local FORWARD = {
  ["elicitation/create"] = function(ctx, params) return ctx:elicit(params) end,
  ["sampling/createMessage"] = function(ctx, params) return ctx:sample(params) end,
  ["roots/list"] = function(ctx) return { roots = core.array(ctx:roots()) } end,
}

local function answer_request(ctx, method, params)
  if method == "ping" then return core.object() end
  local forward = FORWARD[method]
  if not forward then return nil, { code = protocol.METHOD_NOT_FOUND, message = "Method not found: " .. tostring(method) } end
  if not ctx then return nil, { code = -32603, message = method .. ": no call to ask the client through" } end
  local ok, result = pcall(forward, ctx, params or {})
  if ok then return result end
  if type(result) == "table" and not core.is_rpc_error(result) then return nil, { code = -32603, message = "the question was not asked" }, result end
  local message = core.is_rpc_error(result) and tostring(result.message or result) or tostring(result)
  return nil, { code = -32603, message = message }
end

function Client:_reply(id, result, err)
  local msg = { jsonrpc = "2.0", id = id }
  if result ~= nil then msg.result = result else msg.error = err end
  self.h:send(core.json_encode(msg), nil)
end

-- A message that arrived while a request runs: progress and logs go to the
-- outer call, questions to the outer client.
function Client:_during(ctx, msg)
  local method, params = msg.method, type(msg.params) == "table" and msg.params or {}
  if msg.id ~= nil and method then
    -- A 2026-07-28 outer call that asks its own client ends here (its
    -- handler runs again with the answer): the inner server is told it
    -- gets no answer this time, so that its request does not hang.
    local answered = false
    local _ <close> = setmetatable({}, { __close = function()
      if not answered then
        self:_reply(msg.id, nil, { code = -32603, message = "the call that asked this ended first" })
      end
    end })
    local result, err, raised = answer_request(ctx, method, params)
    answered = true
    self:_reply(msg.id, result, err)
    if raised then error(raised, 0) end
    return
  end
  if method ~= "notifications/progress" and method ~= "notifications/message" then return self:_notify(msg) end
  if not ctx then return end
  if method == "notifications/progress" and type(params.progress) == "number" then
    pcall(ctx.progress, ctx, params.progress, params.total, params.message)
  elseif method == "notifications/message" and type(params.level) == "string" then
    pcall(ctx.log, ctx, params.level, params.data == nil and core.null or params.data, params.logger)
  end
end

-- What no waiting request takes: list changes (the mounts follow them),
-- questions with nobody to ask, and the end of the connection.
function Client:_unclaimed(text, why)
  if text == nil then
    self.ended = why or "the connection ended"
    return
  end
  local ok, msg = pcall(core.json_decode, text)
  if not ok or type(msg) ~= "table" then return end
  if msg.id ~= nil and msg.method then
    local result, err = answer_request(nil, msg.method, msg.params)
    self:_reply(msg.id, result, err)
    return
  end
  if msg.method == "notifications/message" then
    -- Over stdio a log names no request: it is the running call's when
    -- only one runs, else the server's log keeps it.
    local params = type(msg.params) == "table" and msg.params or {}
    local only, count = nil, 0
    for _, ctx in pairs(self.running) do only, count = ctx, count + 1 end
    if count == 1 and type(params.level) == "string" then
      pcall(only.log, only, params.level, params.data == nil and core.null or params.data, params.logger)
    else
      core.stderr("debug", ("mcp.client %s: %s"):format(self.name, text))
    end
    return
  end
  self:_notify(msg)
end

function Client:_notify(msg)
  if msg.method == "notifications/tools/list_changed" then self.tool_schemas = nil end
  for _, fn in ipairs(self.listeners) do
    local fine, problem = pcall(fn, msg)
    if not fine then core.stderr("warning", ("mcp.client %s: %s"):format(self.name, tostring(problem))) end
  end
end

--- fn(message) for every notification the inner server sends outside a
--- request (lua/mcp/mount.lua follows list_changed with it).
function Client:on_notification(fn)
  self.listeners[#self.listeners + 1] = fn
end

-- ---- Requests -------------------------------------------------------------

local CLIENT_INFO = { name = "luamcp-mcp.client", version = "1" }
-- Every question of the inner server is forwarded to the outer client.
local CAPABILITIES = proto.capabilities { elicit = true, sample = true, roots = true }

-- The state client_protocol builds messages from. What the handshake
-- learned is plain data in self.session (mcp.state); the rest is built here.
function Client:_state()
  local s = self.session
  return { protocol_version = s.protocol_version, initialized = s.initialized, client_info = CLIENT_INFO,
           capabilities = CAPABILITIES }
end

local function copy(t)
  local out = {}
  for k, v in pairs(t or {}) do out[k] = v end
  return out
end

local function decode_error(text)
  local ok, body = pcall(core.json_decode, text or "")
  if ok and type(body) == "table" and type(body.error) == "table" then return body.error end
  return nil
end

-- Send one request and wait for its answer, handling what arrives
-- meanwhile. Returns the decoded answer message, or nil, message, code,
-- {status=...} (a failed HTTP POST's details).
function Client:_exchange(method, params, extra_headers)
  local ctx = core.current_ctx()
  if #self.abandoned >= REAP_AFTER then self:_reap() end
  local h = self.h
  local id = h:next_id()
  params = copy(params)
  -- Progress for the outer call: asked of every request but the handshake's
  -- (whose _meta the spec fixes).
  if method ~= "initialize" and method ~= "server/discover" then
    local meta = copy(params._meta)
    meta.progressToken = id
    params._meta = core.object(meta)
  end
  local msg, headers = proto.request(self:_state(), id, method, core.object(params), extra_headers)
  if protocol.is_modern(self.session.protocol_version) and method ~= "server/discover" then
    -- A 2026-07-28 server logs to a request only when it asks: all of it,
    -- for the outer call's ctx:log to filter as its own client asked.
    msg.params._meta[LOG_LEVEL_META] = "debug"
  end
  self:_strip_version(headers)
  local sent, why = h:send(core.json_encode(msg), next(headers) and headers or nil)
  if not sent then return self:_fail(("%s: %s"):format(method, tostring(why)), "ended") end
  if ctx then
    self.running[id] = ctx
    local _ <close> = setmetatable({}, { __close = function() self.running[id] = nil end })
    return self:_await(id, method, ctx)
  end
  return self:_await(id, method, nil)
end

-- A request that timed out stays in flight in the runtime until its answer
-- is taken: take the late answers now and then, so that they do not fill
-- the connection's requests in flight.
function Client:_reap()
  if self.reaping then return end
  self.reaping = true
  local _ <close> = setmetatable({}, { __close = function() self.reaping = nil end })
  local left = {}
  for _, id in ipairs(self.abandoned) do
    local kind
    repeat kind = self.h:wait(id, 1) until kind ~= "message"
    if kind == "timeout" then left[#left + 1] = id end
  end
  self.abandoned = left
end

-- The answer to request id (see _exchange).
function Client:_await(id, method, ctx)
  local h = self.h
  local timeout = self.opts.timeout_ms
  while true do
    local kind, text, extra = h:wait(id, timeout ~= 0 and timeout or nil)
    if kind == "answer" then
      local ok, answer = pcall(core.json_decode, text)
      if not ok or type(answer) ~= "table" then return self:_fail(method .. ": the answer is not JSON", "protocol") end
      -- Over stdio a log that came just before the answer reaches
      -- on_message after this task resumes: one turn of the loop lets it
      -- find this call still running.
      if ctx and self.stream then core.sleep(0) end
      return answer
    elseif kind == "message" then
      local ok, inner = pcall(core.json_decode, text)
      if ok and type(inner) == "table" then self:_during(ctx, inner) end
    elseif kind == "failed" then
      extra = type(extra) == "table" and extra or {}
      local err = decode_error(extra.body)
      if err then return { error = err, status = extra.status } end
      return self:_fail(("%s: %s"):format(method, tostring(text)), "http", extra)
    elseif kind == "timeout" then
      local note = proto.notification(self:_state(), "notifications/cancelled",
        { requestId = id, reason = "timed out" })
      h:send(core.json_encode(note), nil)
      self.abandoned[#self.abandoned + 1] = id
      return self:_fail(("%s timed out after %d ms"):format(method, timeout), "timeout")
    else -- "ended"
      self.ended = tostring(text or "the connection ended")
      return self:_fail(("%s: %s"):format(method, self.ended), "ended")
    end
  end
end

-- ---- The handshake (the era rules are client_protocol's) ------------------

-- server/discover (or initialize for a 2025 server, or when pinned to a
-- session-era version); what it learns goes to self.session, which a
-- reload that reuses the connection keeps.
function Client:_handshake()
  local s = self.session
  local pinned = self.opts.protocol_version
  local reason
  if pinned == nil or protocol.is_modern(pinned) then
    local tried = pinned or protocol.MODERN_VERSION
    for _ = 1, 2 do
      s.protocol_version = tried
      local answer, message, code, extra = self:_exchange("server/discover", core.object())
      if not answer and code ~= "http" then return nil, message end
      local status = answer and answer.status or (type(extra) == "table" and extra.status)
      local outcome, v, result = proto.discover_outcome(answer and answer.result, answer and answer.error, status, tried)
      if outcome == "modern" then
        s.protocol_version, s.server = v, core.json_encode(result)
        self:_set_version(v)
        return true
      elseif outcome == "retry" then
        tried = v
      elseif outcome == "fail" then
        return nil, ("server/discover failed: %s"):format(tostring(v))
      else
        reason = v
        break
      end
    end
    if pinned then return nil, ("the server does not speak %s (%s)"):format(pinned, tostring(reason)) end
  end
  s.protocol_version = pinned or protocol.SESSION_VERSION
  local id = self.h:next_id()
  local msg, headers = proto.initialize(self:_state(), id)
  local answer, message = self:_send_and_wait(id, msg, headers)
  if not answer then return nil, message end
  if answer.error then return nil, ("initialize failed: %s"):format(tostring(answer.error.message)) end
  local result = answer.result or {}
  if not protocol.supports(result.protocolVersion) then
    return nil, ("initialize: the server answered protocol %s, which this client does not speak"):format(
      tostring(result.protocolVersion))
  end
  s.protocol_version, s.initialized, s.server = result.protocolVersion, true, core.json_encode(result)
  self:_set_version(s.protocol_version)
  local note, note_headers = proto.notification(self:_state(), "notifications/initialized", nil)
  note.params = nil
  self:_strip_version(note_headers)
  self.h:send(core.json_encode(note), next(note_headers) and note_headers or nil)
  -- Its logs, all of them, for the outer call's ctx:log to filter as its
  -- own client asked.
  if type(result.capabilities) == "table" and type(result.capabilities.logging) == "table" then
    local answer, why = self:_exchange("logging/setLevel", { level = "debug" })
    if not answer then return nil, why end
  end
  return true
end

-- initialize is built whole by client_protocol (its id included).
function Client:_send_and_wait(id, msg, headers)
  local sent, why = self.h:send(core.json_encode(msg), next(headers) and headers or nil)
  if not sent then return nil, tostring(why) end
  local timeout = self.opts.timeout_ms
  while true do
    local kind, text, extra = self.h:wait(id, timeout ~= 0 and timeout or nil)
    if kind == "answer" then
      local ok, answer = pcall(core.json_decode, text)
      if ok and type(answer) == "table" then return answer end
      return nil, "the answer to initialize is not JSON"
    elseif kind == "failed" then
      local err = decode_error(type(extra) == "table" and extra.body)
      if err then return { error = err } end
      return nil, tostring(text)
    elseif kind ~= "message" then
      return nil, kind == "timeout" and "initialize timed out" or tostring(text or kind)
    end
  end
end

-- The kept login's token on the connection (refreshed first, inside this
-- task, once it ran out, and kept again): true, or nil and why. Never a
-- browser: a server has no person at it; a login that cannot be renewed
-- says to log in again.
function Client:_authorize()
  local login, url = self.login, self.opts.url
  if self.oauth and self.h then
    -- Client credentials: a token before the first request (the Protected
    -- Resource Metadata at its well-known place), a new one once it ran out.
    local token = self.oauth.current()
    if not token or self.oauth.expired() then
      local why
      token, why = self.oauth { status = 401, url = url }
      if not token then return nil, "authorization failed: " .. tostring(why) end
    end
    if self.sent_token ~= token then
      self.h:set_header("Authorization", "Bearer " .. token)
      self.sent_token = token
    end
    return true
  end
  if not login or not self.h then return true end
  local again = ("run luamcp login %s"):format(url)
  if login.token_type == "DPoP" then
    return nil, ("the login kept for %s is DPoP-bound, and mcp.client sends Bearer tokens only"):format(url)
  end
  if type(login.expires_at) == "number" and os.time() >= login.expires_at then
    local client = type(login.client) == "table" and login.client or nil
    if not (login.refresh_token and login.token_endpoint and client and client.client_id) then
      return nil, ("the login kept for %s ran out: %s"):format(url, again)
    end
    local headers = { ["content-type"] = "application/x-www-form-urlencoded", accept = "application/json" }
    local fields = { { "grant_type", "refresh_token" }, { "refresh_token", login.refresh_token },
      { "resource", login.resource } }
    fields[#fields + 1] = { "client_id", client.client_id }
    fields[#fields + 1] = { "client_secret", client.client_secret } -- client_secret_post; none for a public client
    local r, err = require("mcp.http").request { method = "POST", url = login.token_endpoint, headers = headers,
      body = form(fields), timeout_ms = 30000 }
    if not r then return nil, ("refreshing the login kept for %s failed: %s"):format(url, tostring(err)) end
    local ok, doc = pcall(core.json_decode, r.body or "")
    if r.status ~= 200 or not ok or type(doc) ~= "table" or type(doc.access_token) ~= "string" then
      return nil, ("the authorization server did not refresh the login kept for %s (HTTP %s): %s"):format(url,
        tostring(r.status), again)
    end
    login.access_token = doc.access_token
    if type(doc.refresh_token) == "string" then login.refresh_token = doc.refresh_token end
    local lifetime = math.tointeger(doc.expires_in)
    login.expires_at = lifetime and lifetime > 0 and os.time() + lifetime or nil
    -- Kept again for the command line and the next run (a rotated refresh
    -- token is the only one left); a confined server may not write there.
    local store = require "mcp.token_store"
    local kept = store.load()
    if kept then
      kept.servers[store.key(url)] = login
      pcall(store.save, kept)
    end
  end
  if self.sent_token ~= login.access_token then
    self.h:set_header("Authorization", "Bearer " .. login.access_token)
    self.sent_token = login.access_token
  end
  return true
end

-- Ready to send requests: the handshake done, by this task or by another
-- one that started it first (each waits for it; it runs once).
function Client:_ready()
  if self.closed then return nil, "closed" end
  if not self.h then
    local ok, why = self:_open(self.argv)
    if not ok then return nil, why end
  end
  local authorized, problem = self:_authorize()
  if not authorized then return nil, problem end
  local s = self.session
  if s.protocol_version and s.server and not self.handshaking and not self.ended then return true end
  -- A connection that ended is opened again (a new session) at the next use.
  if self.ended and not self.handshaking then
    local argv, message = permitted(self.opts)
    if not argv then return nil, message end
    self.ended, self.abandoned = nil, {}
    local ok, why = self:_open(argv)
    if not ok then return nil, why end
    ok, why = self:_authorize()
    if not ok then return nil, why end
    session_store()[self.key] = {}
    self.session = session_store()[self.key]
    s = self.session
  end
  if self.handshaking then
    while self.handshaking do core.sleep(5) end
    if self.failed then return nil, self.failed end
    return self:_ready()
  end
  self.handshaking, self.failed = true, nil
  -- Closed however this task ends (a cancelled task's coroutine is closed
  -- too), so the others never wait for a handshake nobody runs.
  local _ <close> = setmetatable({}, { __close = function() self.handshaking = nil end })
  local ok, done, why = pcall(self._handshake, self)
  self.handshaking = nil
  if not ok or not done then
    self.failed = ok and why or tostring(done)
    s.protocol_version, s.initialized, s.server = nil, nil, nil
    if not ok then error(done, 0) end
    return nil, why
  end
  return true
end

-- One request after the handshake, through the input_required loop of a
-- 2026-07-28 server. Returns the result, or nil, message, code, error.
function Client:request(method, params, extra_headers)
  local ok, why = self:_ready()
  if not ok then return self:_fail(why, "connect") end
  local round = 1
  while true do
    local answer, message, code = self:_exchange(method, params, extra_headers)
    if not answer then return nil, message, code end
    if answer.error then
      local e = answer.error
      return nil, ("mcp.client %s: %s: %s"):format(self.name, method, tostring(e.message)), e.code, e
    end
    local result = answer.result
    if protocol.result_type(result) ~= "input_required" then return result end
    if round > protocol.MAX_INPUT_ROUNDS then
      return self:_fail(("%s: the server still wanted input after %d rounds"):format(method, round - 1), "input")
    end
    local responses = {}
    local ctx = core.current_ctx()
    local requests = type(result.inputRequests) == "table" and result.inputRequests or {}
    for key, req in pairs(requests) do
      local r, err, raised = answer_request(ctx, type(req) == "table" and req.method, type(req) == "table" and req.params)
      if raised then error(raised, 0) end
      if not r then return self:_fail(("%s: %s: %s"):format(method, key, err.message), "input") end
      responses[key] = r
    end
    params = protocol.retry_params(params, core.object(responses), result.requestState)
    round = round + 1
  end
end

-- ---- What a tool writes ----------------------------------------------------

local function arguments(args)
  if args == nil then return core.object() end
  if type(args) ~= "table" then usage.raise("mcp.client: arguments must be a table") end
  return next(args) == nil and core.object() or args
end

-- The Mcp-Param-* headers a 2026-07-28 HTTP call of tool carries (the
-- tool's x-mcp-header declarations, from tools/list); nil, why for a tool
-- whose declarations are invalid: it must not be called.
function Client:_param_headers(name, args)
  if not (not self.stream and protocol.is_modern(self.session.protocol_version)) then return {} end
  if not self.tool_schemas then
    local tools, message, code = self:list("tools")
    if not tools then return nil, message, code end
    local schemas = {}
    for _, t in ipairs(tools) do schemas[t.name] = t.inputSchema or false end
    self.tool_schemas = schemas
  end
  local declarations, why = protocol.header_declarations(self.tool_schemas[name] or {})
  if not declarations then
    return self:_fail(("tool %s declares invalid x-mcp-header: %s"):format(name, why), "invalid_tool")
  end
  return protocol.param_headers(declarations, args)
end

--- Call a tool: the CallToolResult ({content, structuredContent?,
--- isError?}), or nil, message, code.
function Client:call(name, args)
  if type(name) ~= "string" then usage.raise("c:call(name, args) needs a tool name") end
  args = arguments(args)
  local ok, why = self:_ready()
  if not ok then return self:_fail(why, "connect") end
  local headers, message, code = self:_param_headers(name, args)
  if not headers then return nil, message, code end
  return self:request("tools/call", { name = name, arguments = args }, headers)
end

--- Read a resource: the ReadResourceResult ({contents}), or nil, message, code.
function Client:read(uri)
  if type(uri) ~= "string" then usage.raise("c:read(uri) needs a URI") end
  return self:request("resources/read", { uri = uri })
end

--- Get a prompt: the GetPromptResult ({messages, description?}), or nil, message, code.
function Client:prompt(name, args)
  if type(name) ~= "string" then usage.raise("c:prompt(name, args) needs a prompt name") end
  return self:request("prompts/get", { name = name, arguments = arguments(args) })
end

--- A whole list, every page: "tools", "resources", "resources/templates"
--- or "prompts". Returns the entries, or nil, message, code.
function Client:list(kind)
  local field = LIST_FIELDS[kind]
  if not field then usage.raise("c:list(kind): kind is tools, resources, resources/templates or prompts") end
  local out, cursor = {}, nil
  for _ = 1, 1000 do
    local result, message, code = self:request(kind .. "/list", cursor and { cursor = cursor } or {})
    if not result then return nil, message, code end
    for _, e in ipairs(type(result[field]) == "table" and result[field] or {}) do out[#out + 1] = e end
    cursor = result.nextCursor
    if type(cursor) ~= "string" then
      if kind == "tools" then
        local schemas = {}
        for _, t in ipairs(out) do schemas[t.name] = t.inputSchema or false end
        self.tool_schemas = schemas
      end
      return out
    end
  end
  return self:_fail(kind .. "/list: more than 1000 pages", "protocol")
end

-- Ask a 2026-07-28 server for its list changes (subscriptions/listen; a
-- session-era server sends them unasked). The notifications arrive
-- outside any request: on_notification sees them. Once per session.
function Client:_listen()
  local ok, why = self:_ready()
  if not ok then return self:_fail(why, "connect") end
  local s = self.session
  -- Over HTTP the answer would be a stream no task reads (mount.lua fetches
  -- HTTP lists again instead).
  if not protocol.is_modern(s.protocol_version) or s.listening or not self.stream then return true end
  local id = self.h:next_id()
  local msg, headers = proto.request(self:_state(), id, "subscriptions/listen", {
    notifications = { toolsListChanged = true, promptsListChanged = true, resourcesListChanged = true } })
  self:_strip_version(headers)
  local sent, problem = self.h:send(core.json_encode(msg), next(headers) and headers or nil)
  if not sent then return self:_fail("subscriptions/listen: " .. tostring(problem), "ended") end
  s.listening = id
  return true
end

--- What the handshake learned: {protocol_version, server = the
--- server/discover or initialize result}, or nil before the first request.
function Client:server()
  local s = self.session
  if not s or not s.server or self.handshaking then return nil end
  return { protocol_version = s.protocol_version, server = core.json_decode(s.server) }
end

--- End the connection (a child is stopped; an HTTP session is deleted).
function Client:close()
  if self.closed then return end
  self.closed = true
  clients[self.target] = nil
  session_store()[self.key] = nil
  if self.h then self.h:close() end
end

M.Client = Client
return M
