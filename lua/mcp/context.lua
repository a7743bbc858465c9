-- mcp.context: the ctx methods that ask the client something.
--
-- ctx:sample, ctx:elicit and ctx:roots each send a request to the client
-- (on HTTP, on the call's own SSE stream), wait without blocking anything
-- else, and return the client's result table. A JSON-RPC error or a timeout
-- (--client-timeout) raises a Lua error the handler can catch. Asking for
-- something the client did not declare raises at once, sending nothing.

local core = require "mcp.core"
local schema = require "mcp.schema"

--- The context every handler receives; C creates it per request (lua_task.c).
---@class mcp.Context
---@field id integer|string           the request's JSON-RPC id
---@field method string               the request's method
---@field protocol_version string     the protocol version this request speaks
---@field client table|nil            clientInfo from initialize
---@field capabilities table|nil      the client's capabilities
---@field meta table|nil              the request's _meta
---@field cancelled boolean           true once the request was cancelled or answered
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

local function copy(t)
  local out = {}
  for k, v in pairs(t) do out[k] = v end
  return out
end

--- Ask the client's model for a completion (sampling/createMessage).
--- params: {messages, maxTokens, systemPrompt?, temperature?, ...}; a message
--- may be a plain string (a user text message).
---@return table result {role, content, model, stopReason}
function methods.sample(ctx, params)
  if type(params) ~= "table" then error("ctx:sample needs {messages = ..., maxTokens = ...}", 2) end
  if not declared(ctx, "sampling") then
    error("ctx:sample: the client did not declare the sampling capability", 2)
  end
  if math.type(params.maxTokens) ~= "integer" then error("ctx:sample: maxTokens (an integer) is required", 2) end
  if type(params.messages) ~= "table" then error("ctx:sample: messages (a list) is required", 2) end
  local p = copy(params)
  p.messages = array()
  for i, m in ipairs(params.messages) do
    if type(m) == "string" then m = { role = "user", content = { type = "text", text = m } } end
    p.messages[i] = m
  end
  return ctx:_request("sampling/createMessage", p)
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

local function random_id()
  local bytes = {}
  for i = 1, 16 do bytes[i] = ("%02x"):format(math.random(0, 255)) end
  return table.concat(bytes)
end

--- Ask the user (elicitation/create).
--- Form mode: {message, requestedSchema}. URL mode (2025-11-25):
--- {mode = "url", message, url [, elicitationId]}.
---@return table result {action = "accept"|"decline"|"cancel", content?}
function methods.elicit(ctx, params)
  if type(params) ~= "table" then error("ctx:elicit needs {message = ..., requestedSchema = ...}", 2) end
  local features = ctx.features
  local cap = declared(ctx, "elicitation")
  local url_mode = params.mode == "url"
  if not features.elicitation then
    error("ctx:elicit: protocol " .. ctx.protocol_version .. " has no elicitation", 2)
  end
  if not cap then error("ctx:elicit: the client did not declare the elicitation capability", 2) end
  if type(params.message) ~= "string" then error("ctx:elicit: message (a string) is required", 2) end
  local p = copy(params)
  if url_mode then
    if not features.url_elicitation then
      error("ctx:elicit: URL mode needs protocol 2025-11-25 or later", 2)
    end
    if type(cap) ~= "table" or cap.url == nil then
      error("ctx:elicit: the client did not declare URL-mode elicitation", 2)
    end
    if type(params.url) ~= "string" then error("ctx:elicit: url (a string) is required in URL mode", 2) end
    p.elicitationId = params.elicitationId or random_id()
  else
    if type(cap) == "table" and next(cap) ~= nil and cap.form == nil then
      error("ctx:elicit: the client did not declare form-mode elicitation", 2)
    end
    if type(params.requestedSchema) ~= "table" then
      error("ctx:elicit: requestedSchema (a table) is required in form mode", 2)
    end
    local problem = flat_schema_problem(params.requestedSchema)
    if problem then error("ctx:elicit: requestedSchema " .. problem, 2) end
    p.requestedSchema = schema.mark(params.requestedSchema)
  end
  local result = ctx:_request("elicitation/create", p)
  if not url_mode and result.action == "accept" then
    -- What the user typed must fit the form before the handler trusts it.
    local ok, _, text = schema.validate(params.requestedSchema, result.content or object())
    if not ok then error("ctx:elicit: the client's answer does not match requestedSchema:\n" .. text, 2) end
  end
  return result
end

--- The client's roots (roots/list): a list of {uri, name?}.
function methods.roots(ctx)
  if not declared(ctx, "roots") then error("ctx:roots: the client did not declare the roots capability", 2) end
  local result = ctx:_request("roots/list", object())
  return result.roots or array()
end

return methods
