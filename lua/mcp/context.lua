-- mcp.context: the ctx methods that ask the client something.
--
-- ctx:sample, ctx:elicit and ctx:roots (and ctx:ask, for several at once)
-- return the client's answer, the same way in both protocol eras:
--  * in a session (2025-11-25 and before) each sends a request to the
--    client (on HTTP, on the call's own SSE stream) and waits without
--    blocking anything else. A JSON-RPC error or a timeout
--    (--client-timeout) raises a Lua error the handler can catch.
--  * in a 2026-07-28 request the call ends with an input_required result
--    and the handler runs again when the client retries with the answers
--    (mcp.input): code before the first question runs once per round.
-- Asking for something the client did not declare raises at once, sending
-- nothing (in 2026-07-28, uncaught, it answers -32021).

local core = require "mcp.core"
local input = require "mcp.input"
local schema = require "mcp.schema"
local usage = require "mcp.usage"

--- The context every handler receives; C creates it per request (lua_task.c).
---@class mcp.Context
---@field id integer|string           the request's JSON-RPC id
---@field method string               the request's method
---@field protocol_version string     the protocol version this request speaks
---@field client table|nil            clientInfo from initialize
---@field capabilities table|nil      the client's capabilities
---@field meta table|nil              the request's _meta
---@field cancelled boolean           true once the request was cancelled or answered
---@field trace_id string|nil         the request's W3C trace id (docs/operating.md "Tracing")
---@field log fun(self: mcp.Context, level: string, data: any, logger?: string)
---@field progress fun(self: mcp.Context, progress: number, total?: number, message?: string)
---@field close_sse_stream fun(self: mcp.Context)

local methods = core.ctx_methods
local array, object = core.array, core.object

local function declared(ctx, name)
  local caps = ctx.capabilities
  local cap = type(caps) == "table" and caps[name]
  if cap == nil or cap == core.null or cap == false then return nil end
  return cap
end

-- The client did not declare a capability this question needs.
local function missing_capability(ctx, name, message, level)
  if ctx.features.modern then
    core.rpc_error(core.MISSING_CAPABILITY, message, { requiredCapabilities = object { [name] = object() } })
  end
  error(message, level + 1)
end

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

--- Ask the client's model for a completion (sampling/createMessage).
--- params: {messages, maxTokens, systemPrompt?, temperature?, ...}; a message
--- may be a plain string (a user text message).
-- Each question is prepared (checked, and put in its wire form) by one of
-- these: they return the method, its params and what turns the client's
-- answer into the handler's. level is the stack level of the user's call.
local prepare = {}

function prepare.sample(ctx, params, level)
  if type(params) ~= "table" then error("ctx:sample needs {messages = ..., maxTokens = ...}", level) end
  usage.question("sample", params)
  if not declared(ctx, "sampling") then
    missing_capability(ctx, "sampling", "ctx:sample: the client did not declare the sampling capability", level)
  end
  if math.type(params.maxTokens) ~= "integer" then error("ctx:sample: maxTokens (an integer) is required", level) end
  if type(params.messages) ~= "table" then error("ctx:sample: messages (a list) is required", level) end
  local p = copy(params)
  p.messages = array()
  for i, m in ipairs(params.messages) do
    if type(m) == "string" then m = { role = "user", content = { type = "text", text = m } } end
    p.messages[i] = m
  end
  return "sampling/createMessage", p
end

-- Elicitation forms are flat: an object of primitive fields (string,
-- number, integer, boolean, and enums or multi-select arrays of strings).
-- The first problem found, as "pointer: what is wrong", or nil.
local PRIMITIVE_KEYS = {
  string = { type = 1, title = 1, description = 1, minLength = 1, maxLength = 1, format = 1, default = 1,
             enum = 1, enumNames = 1, oneOf = 1 },
  number = { type = 1, title = 1, description = 1, minimum = 1, maximum = 1, default = 1 },
  boolean = { type = 1, title = 1, description = 1, default = 1 },
  array = { type = 1, title = 1, description = 1, minItems = 1, maxItems = 1, items = 1, default = 1 },
}
PRIMITIVE_KEYS.integer = PRIMITIVE_KEYS.number
local FORMATS = { email = true, uri = true, date = true, ["date-time"] = true }

local function flat_schema_problem(s)
  if s.type ~= "object" then return "/type: must be \"object\"" end
  if type(s.properties) ~= "table" then return "/properties: must be an object of fields" end
  for name, field in pairs(s.properties) do
    local where = "/properties/" .. tostring(name)
    if type(field) ~= "table" then return where .. ": must be a schema object" end
    local allowed = PRIMITIVE_KEYS[field.type]
    if not allowed then
      return where .. "/type: must be string, number, integer, boolean or array (elicitation forms are flat)"
    end
    for key in pairs(field) do
      if not allowed[key] then return ("%s/%s: not allowed in an elicitation form field"):format(where, key) end
    end
    if field.format ~= nil and not FORMATS[field.format] then
      return where .. "/format: must be email, uri, date or date-time"
    end
    if field.type == "array" then
      local items = field.items
      if type(items) ~= "table" or not (type(items.enum) == "table" or type(items.anyOf) == "table") then
        return where .. "/items: a multi-select field needs items with enum or anyOf of {const, title}"
      end
    end
  end
  return nil
end

local ELICIT_ACTIONS = { accept = true, decline = true, cancel = true }

local function random_id()
  local bytes = {}
  for i = 1, 16 do bytes[i] = ("%02x"):format(math.random(0, 255)) end
  return table.concat(bytes)
end

--- Ask the user (elicitation/create).
--- Form mode: {message, requestedSchema}. URL mode (2025-11-25):
--- {mode = "url", message, url [, elicitationId]}.
function prepare.elicit(ctx, params, level)
  if type(params) ~= "table" then error("ctx:elicit needs {message = ..., requestedSchema = ...}", level) end
  usage.question("elicit", params)
  local features = ctx.features
  local cap = declared(ctx, "elicitation")
  local url_mode = params.mode == "url"
  if not features.elicitation then
    error("ctx:elicit: protocol " .. ctx.protocol_version .. " has no elicitation", level)
  end
  if not cap then
    missing_capability(ctx, "elicitation", "ctx:elicit: the client did not declare the elicitation capability", level)
  end
  if type(params.message) ~= "string" then error("ctx:elicit: message (a string) is required", level) end
  local p = copy(params)
  if url_mode then
    if not features.url_elicitation then
      error("ctx:elicit: URL mode needs protocol 2025-11-25 or later", level)
    end
    if type(cap) ~= "table" or cap.url == nil then
      error("ctx:elicit: the client did not declare URL-mode elicitation", level)
    end
    if type(params.url) ~= "string" then error("ctx:elicit: url (a string) is required in URL mode", level) end
    p.elicitationId = params.elicitationId or random_id()
  else
    if type(cap) == "table" and next(cap) ~= nil and cap.form == nil then
      error("ctx:elicit: the client did not declare form-mode elicitation", level)
    end
    if type(params.requestedSchema) ~= "table" then
      error("ctx:elicit: requestedSchema (a table) is required in form mode", level)
    end
    local problem = flat_schema_problem(params.requestedSchema)
    if problem then error("ctx:elicit: requestedSchema " .. problem, level) end
    p.requestedSchema = schema.mark(params.requestedSchema)
  end
  -- The client's answer is its input, checked before the handler sees it:
  -- in a 2026-07-28 request (an inputResponses entry of a retry, or a
  -- tasks/update) one the protocol does not allow is refused with -32602;
  -- in a session (a reply to our elicitation/create) ctx:elicit raises, as
  -- for any failed question. Either is an error the handler may catch.
  local function finish(result)
    local function refuse(why)
      if ctx.features.modern then
        core.rpc_error(core.INVALID_PARAMS, "Invalid params: the client's answer to elicitation/create " .. why)
      end
      error("ctx:elicit: the client's answer " .. why, 0)
    end
    if type(result) ~= "table" then refuse("must be an object {action, content?}") end
    local action = result.action
    if not ELICIT_ACTIONS[action] then
      refuse(("has action %s: it must be \"accept\", \"decline\" or \"cancel\""):format(
        type(action) == "string" and ("%q"):format(action) or type(action)))
    end
    if not url_mode and action == "accept" then
      local content = result.content
      if content ~= nil and type(content) ~= "table" then refuse("has content that is not an object") end
      -- What the user typed must fit the form before the handler trusts it.
      local ok, _, text = schema.validate(params.requestedSchema, content or object())
      if not ok then refuse("does not match requestedSchema:\n" .. text) end
    end
    return result
  end
  return "elicitation/create", p, finish
end

function prepare.roots(ctx, _, level)
  if not declared(ctx, "roots") then
    missing_capability(ctx, "roots", "ctx:roots: the client did not declare the roots capability", level)
  end
  return "roots/list", object(), function(result) return result.roots or array() end
end

-- One question, asked the way the request's era asks. ctx:sample and the
-- others tail-call it, so the user's code is its caller (level 2, and
-- level 3 seen from prepare).
local function ask_one(ctx, kind, params, key)
  local method, p, finish = prepare[kind](ctx, params, 3)
  local result
  if ctx.features.input_required then
    if key ~= nil and type(key) ~= "string" then error("ctx:" .. kind .. ": the key must be a string", 2) end
    key = key or input.next_key(ctx)
    result = input.ask(ctx, { { key = key, method = method, params = p } })[key]
  else
    result = ctx:_request(method, p)
  end
  if finish then return finish(result) end
  return result
end

--- Ask the client's model for a completion (sampling/createMessage).
--- params: {messages, maxTokens, systemPrompt?, temperature?, ...}; a message
--- may be a plain string (a user text message). key (optional) names the
--- question in a 2026-07-28 input_required result.
---@return table result {role, content, model, stopReason}
function methods.sample(ctx, params, key)
  return ask_one(ctx, "sample", params, key)
end

--- Ask the user (elicitation/create).
--- Form mode: {message, requestedSchema}. URL mode (2025-11-25):
--- {mode = "url", message, url [, elicitationId]}.
---@return table result {action = "accept"|"decline"|"cancel", content?}
function methods.elicit(ctx, params, key)
  return ask_one(ctx, "elicit", params, key)
end

--- The client's roots (roots/list): a list of {uri, name?}.
function methods.roots(ctx, key)
  return ask_one(ctx, "roots", nil, key)
end

--- Several questions at once: {key = {"elicit"|"sample"|"roots", params}, ...}.
--- Returns the answers under the same keys. In a 2026-07-28 request they go
--- to the client together in one input_required result; in a session they
--- are sent one after the other.
function methods.ask(ctx, questions)
  if type(questions) ~= "table" then error("ctx:ask needs {key = {kind, params}, ...}", 2) end
  local keys = {}
  for key in pairs(questions) do
    if type(key) ~= "string" then error("ctx:ask: every question needs a string key", 2) end
    keys[#keys + 1] = key
  end
  table.sort(keys) -- the same order on every round
  local asked, finishers = {}, {}
  for i, key in ipairs(keys) do
    local q = questions[key]
    local kind = type(q) == "table" and q[1]
    if not prepare[kind] then error(("ctx:ask: question %s must be {\"elicit\"|\"sample\"|\"roots\", params}"):format(key), 2) end
    local method, p, finish = prepare[kind](ctx, q[2], 3)
    asked[i] = { key = key, method = method, params = p }
    finishers[key] = finish
  end
  local answers
  if ctx.features.input_required then
    answers = input.ask(ctx, asked)
  else
    answers = {}
    for _, r in ipairs(asked) do answers[r.key] = ctx:_request(r.method, r.params) end
  end
  for key, finish in pairs(finishers) do answers[key] = finish(answers[key]) end
  return answers
end

--- fn's result, computed once per request: in a 2026-07-28 request the
--- handler runs again on every round of questions, and what fn returned on
--- the first round comes back (from requestState; it must be JSON) instead
--- of running fn again. requestState is integrity-protected, not
--- confidential: the client can read the value. In a session it simply
--- calls fn.
function methods.once(ctx, key, fn)
  if type(key) ~= "string" or type(fn) ~= "function" then error("ctx:once needs (key, function)", 2) end
  if not ctx.features.input_required then return fn() end
  return input.once(ctx, key, fn)
end

-- ctx:log and ctx:progress (C, lua_task.c) checked here, so that misuse
-- is raised at the script's line with what to write instead.
do
  local raw_log, raw_progress = methods.log, methods.progress
  function methods.log(ctx, level, ...)
    usage.log(level, select(2, ...))
    if select("#", ...) == 0 then usage.raise("ctx:log(level, data, logger?) needs the data to log") end
    local ok, err = pcall(raw_log, ctx, level, ...)
    if not ok then usage.reraise(err) end
  end
  function methods.progress(ctx, progress, total, message, ...)
    usage.progress(progress, total, message)
    local ok, err = pcall(raw_progress, ctx, progress, total, message, ...)
    if not ok then usage.reraise(err) end
  end
end

return methods
