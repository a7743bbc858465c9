-- mcp.testing: test your tools in process, under `luamcp test` (busted).
--
--   local testing = require "mcp.testing"
--
--   describe("my server", function()
--     local t
--     before_each(function() t = testing.server(".") end)
--     after_each(function() t:close() end)
--
--     it("adds", function()
--       local r = t:call("add", { a = 1, b = 2 })
--       assert.equal("3", testing.text(r))
--     end)
--   end)
--
-- testing.server loads the scripts the way `luamcp run` does and speaks to
-- them through the real protocol core, on the real loop: no child process,
-- no pipes. Each call runs as a coroutine as it would in production, so
-- mcp.sleep, mcp.exec, ctx:progress and the rest behave as they do there.
--
-- The methods (call, read, prompt, complete, list, tools, ...) return the
-- result; a JSON-RPC error raises an error object with method, code,
-- message and data (catch it with pcall, or assert.has_error).
-- t:request(method, params) is the raw form: result, or nil and the error.
--
-- Any caller: testing.server(path, {auth = {subject = "alice", scopes =
-- {"notes:read"}}}) for every request, t:call(name, args, {auth = {...}})
-- for one; t:request(method, params, {modern = true}) speaks 2026-07-28.

local client = require "mcp.client"

local M = {}

-- ---- Identities ------------------------------------------------------------
--
-- A test can be any caller: { subject = "alice", scopes = {"notes:read"} }
-- reaches the server as a request whose bearer token was verified as that
-- caller would (the core's transport_ops.request_identity), so ctx.auth,
-- scopes = {...} on primitives and everything bound to the caller (MCP
-- tasks, requestState, subscriptions) behave as over HTTP with OAuth.

local TESTING_ISSUER = "https://mcp.testing"
local AUTH_FIELDS = { subject = true, client_id = true, scopes = true, expires_at = true, claims = true, issuer = true }

-- The identity an auth table describes: its JSON text (what the in-process
-- connection takes) and its principal.
local function identity(auth, level)
  level = level + 1
  if type(auth) ~= "table" then error("auth must be a table {subject = ..., scopes = {...}, ...}", level) end
  for k in pairs(auth) do
    if not AUTH_FIELDS[k] then
      error(("auth: unknown field %s (subject, client_id, scopes, expires_at, claims, issuer)"):format(tostring(k)), level)
    end
  end
  local subject, client_id, issuer = auth.subject, auth.client_id, auth.issuer or TESTING_ISSUER
  for _, f in ipairs { "subject", "client_id", "issuer" } do
    if auth[f] ~= nil and (type(auth[f]) ~= "string" or auth[f] == "") then
      error(("auth.%s must be a non-empty string"):format(f), level)
    end
  end
  if not subject and not client_id then error("auth needs a subject or a client_id", level) end
  local scopes = auth.scopes or {}
  if type(scopes) == "string" then
    local list = {}
    for word in scopes:gmatch("%S+") do list[#list + 1] = word end
    scopes = list
  end
  if type(scopes) ~= "table" then error("auth.scopes must be a list of scope names", level) end
  for i, scope in ipairs(scopes) do
    if type(scope) ~= "string" or scope == "" or scope:find("%s") then
      error(("auth.scopes[%d] must be a scope name without spaces"):format(i), level)
    end
  end
  if auth.expires_at ~= nil and math.type(auth.expires_at) ~= "integer" then
    error("auth.expires_at must be a whole number of seconds since the epoch", level)
  end
  if auth.claims ~= nil and type(auth.claims) ~= "table" then error("auth.claims must be a table", level) end
  local scope_text = table.concat(scopes, " ")
  -- The claims a token would carry, then the test's own.
  local claims = { iss = issuer, sub = subject, client_id = client_id, exp = auth.expires_at }
  if #scopes > 0 then claims.scope = scope_text end
  for k, v in pairs(auth.claims or {}) do claims[k] = v end
  local principal = subject and (issuer .. " sub:" .. subject) or (issuer .. " client:" .. client_id)
  local text = client.json.encode {
    principal = principal, subject = subject, client_id = client_id, scopes = scope_text,
    expires_at = auth.expires_at, claims = client.json.object(claims),
  }
  return text, principal
end

M.TESTING_ISSUER = TESTING_ISSUER

local Server = setmetatable({}, { __index = client.Client })
Server.__index = Server

local function strict(result, err)
  if result == nil then error(err, 3) end
  return result
end

--- Load the scripts at path (a file or a folder) into an in-process server.
--- options:
---   auth = {subject, client_id, scopes, expires_at, claims, issuer}
---                     who every request of this client comes from, as if it
---                     carried a verified OAuth token (it also owns the
---                     session); each request may name another (see call)
---   elicit(params) -> {action = "accept", content = {...}}   answers ctx:elicit
---   sample(params) -> {role, content, model}                 answers ctx:sample
---   roots = {"file:///..."} or function() return {...} end    answers ctx:roots
---   timeout_ms        how long a request may wait for its answer (default 60000)
---   server = { timeout_ms, client_timeout_ms, page_size, memory_limit_mb }   run's options
--- Loading errors (a syntax error, a bad tool definition) raise, with the
--- script's file and line.
function M.server(path, options)
  options = options or {}
  local target = {}
  for k, v in pairs(options) do
    target[k] = v
  end
  target.path = path
  target.client_name = "mcp.testing"
  target.auth = nil
  local principal
  if options.auth ~= nil then target.identity, principal = identity(options.auth, 2) end
  local c, err = client.connect(target)
  if not c then error(err, 2) end
  c.principal = principal
  return setmetatable(c, Server)
end

local MODERN_VERSION = "2026-07-28"
local client_now = client.now_ms

-- A request's params with options applied: modern = true puts the
-- 2026-07-28 envelope in _meta (the request then stands alone, as a
-- sessionless one over HTTP), with options.capabilities as the client's.
local function shaped(params, options)
  params = params or {}
  if not options.modern then return params end
  local copy = {}
  for k, v in pairs(params) do copy[k] = v end
  local meta = {}
  for k, v in pairs(type(copy._meta) == "table" and copy._meta or {}) do meta[k] = v end
  meta["io.modelcontextprotocol/protocolVersion"] = MODERN_VERSION
  meta["io.modelcontextprotocol/clientCapabilities"] = client.json.object(options.capabilities or {})
  meta["io.modelcontextprotocol/clientInfo"] = { name = "mcp.testing", version = "0" }
  copy._meta = meta
  return copy
end

--- The raw form of every method: result, or nil and the error.
--- options (every method below takes them last):
---   auth = {...}        who this request comes from (as testing.server's);
---                       on a 2025 session it must be the session's own
---                       caller (over HTTP another one is refused 404)
---   modern = true       send it as a 2026-07-28 request (no session: any
---                       auth may be given), with
---   capabilities = {}   the client capabilities it declares, e.g.
---                       {extensions = {["io.modelcontextprotocol/tasks"] = {}}}
function Server:request(method, params, options)
  options = options or {}
  local who
  if options.auth ~= nil then
    local principal
    who, principal = identity(options.auth, 2)
    if not options.modern and self.principal and principal ~= self.principal then
      error(("auth: this session belongs to %s; a 2025 session answers only its owner (over HTTP another "
        .. "caller gets 404): send the request with modern = true, or connect another testing.server")
        :format(self.principal), 2)
    end
  end
  return client.Client.request(self, method, shaped(params, options), who)
end

function Server:call(name, arguments, options)
  return strict(self:request("tools/call", { name = name, arguments = client.json.object(arguments or {}),
    _meta = { progressToken = self.next_id + 1 } }, options))
end

function Server:read(uri, options)
  return strict(self:request("resources/read", { uri = uri }, options))
end

function Server:prompt(name, arguments, options)
  return strict(self:request("prompts/get", { name = name, arguments = client.json.object(arguments or {}) }, options))
end

function Server:complete(ref, argument, context, options)
  return strict(self:request("completion/complete", { ref = ref, argument = argument, context = context }, options))
end

function Server:list(kind)
  return strict(client.Client.list(self, kind))
end

function Server:subscribe(uri, options)
  return strict(self:request("resources/subscribe", { uri = uri }, options))
end

--- subscriptions/listen (2026-07-28): open a subscription (filter: its
--- notifications object, e.g. {taskIds = {...}, resourceSubscriptions =
--- {...}}) and wait for the server's acknowledgment. Returns what the
--- server agreed to follow (the acknowledged notifications object) and the
--- subscription's id; what it sends lands in t.notifications, and
--- t:cancel(id) ends it. options as request's (always modern).
function Server:listen(filter, options)
  options = options or {}
  local modern = { modern = true, capabilities = options.capabilities, auth = options.auth }
  local who = options.auth ~= nil and identity(options.auth, 2) or nil
  self.next_id = self.next_id + 1
  local id = self.next_id
  local params = shaped({ notifications = client.json.object(filter or {}) }, modern)
  local ok, err = self:_send({ jsonrpc = "2.0", id = id, method = "subscriptions/listen", params = params }, who)
  if not ok then error(err, 2) end
  local deadline = client_now() + (self.timeout_ms or 60000)
  while true do
    for _, n in ipairs(self.notifications) do
      local meta = n.method == "notifications/subscriptions/acknowledged" and type(n.params) == "table"
        and n.params._meta
      if type(meta) == "table" and meta["io.modelcontextprotocol/subscriptionId"] == id then
        return n.params.notifications, id
      end
    end
    local answer = self.answers[id]
    if answer then
      self.answers[id] = nil
      error(setmetatable({ method = "subscriptions/listen", code = answer.error and answer.error.code,
        message = answer.error and answer.error.message, data = answer.error and answer.error.data },
        client.RequestError), 2)
    end
    local text, why = self.conn:receive(math.max(0, deadline - client_now()))
    if not text then error("subscriptions/listen: no acknowledgment (" .. tostring(why) .. ")", 2) end
    self:_handle(text)
  end
end

--- Cancel a request in flight (a subscriptions/listen's id, say).
function Server:cancel(id)
  self:notify("notifications/cancelled", { requestId = id })
  self:drain()
end

function Server:set_log_level(level)
  return strict(client.Client.set_log_level(self, level))
end

--- The tools (resources, templates, prompts) the server lists, by name
--- (templates by uriTemplate, resources by uri).
local function by(key, list)
  local map = {}
  for _, item in ipairs(list) do
    map[item[key]] = item
  end
  return map
end

function Server:tools() return by("name", self:list("tools")) end
function Server:resources() return by("uri", self:list("resources")) end
function Server:templates() return by("uriTemplate", self:list("resources/templates")) end
function Server:prompts() return by("name", self:list("prompts")) end

--- Reload the scripts in place, as `luamcp dev` does when a file changes:
--- calls in flight finish on the old version; list_changed notifications
--- land in t.notifications. A failed reload raises (the old version keeps
--- serving).
function Server:reload()
  strict(client.Client.reload(self))
  return true
end

--- The notifications received so far with this method (all without one).
function Server:received(method)
  local found = {}
  for _, n in ipairs(self.notifications) do
    if method == nil or n.method == method then found[#found + 1] = n end
  end
  return found
end

--- Forget the notifications received so far.
function Server:clear()
  self.notifications = {}
end

--- The text of a result's text content items (a tool result, a resource's
--- contents, or a prompt's messages), joined with newlines.
function M.text(result)
  local parts = {}
  local function add(item)
    if type(item) ~= "table" then return end
    if type(item.text) == "string" then parts[#parts + 1] = item.text end
    if type(item.content) == "table" then add(item.content) end
    if type(item.resource) == "table" then add(item.resource) end
  end
  for _, item in ipairs(result.content or result.contents or result.messages or {}) do
    add(item)
  end
  return table.concat(parts, "\n")
end

M.json = client.json
M.null = client.null

return M
