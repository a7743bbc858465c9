-- mcp.client_protocol: the rules of an MCP client for both protocol eras,
-- as pure functions (no I/O, no C module): which request to send and with
-- which HTTP headers, what a server/discover or initialize answer means,
-- the x-mcp-header rules of a tool, and the input_required loop's answers.
--
-- The CLI client (lua/mcp/client.lua) and the server-side mcp.client both
-- use it; each passes its own JSON codec:
--
--   local P = require "mcp.client_protocol"
--   local proto = P.new { encode = ..., decode = ..., null = ..., array = ..., object = ... }
--
-- Eras: the session era (2025-11-25 and older: initialize, then a session)
-- and the modern era (2026-07-28: no session; every request carries
-- _meta with the protocol version, client info and capabilities, and the
-- standard headers MCP-Protocol-Version, Mcp-Method and Mcp-Name).

local M = {}

M.MODERN_VERSION = "2026-07-28"
M.SESSION_VERSION = "2025-11-25"
-- Every version this client speaks, newest first.
M.VERSIONS = { "2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }
M.MODERN = { ["2026-07-28"] = true }

M.META_PROTOCOL_VERSION = "io.modelcontextprotocol/protocolVersion"
M.META_CLIENT_INFO = "io.modelcontextprotocol/clientInfo"
M.META_CLIENT_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"

M.UNSUPPORTED_PROTOCOL_VERSION = -32022
M.METHOD_NOT_FOUND = -32601
M.MAX_INPUT_ROUNDS = 10

--- Is version one of the modern (2026-07-28 and later) era?
function M.is_modern(version)
  return M.MODERN[version] == true
end

--- Does this client speak version?
function M.supports(version)
  for _, v in ipairs(M.VERSIONS) do
    if v == version then return true end
  end
  return false
end

-- Which params field the Mcp-Name header mirrors, by method.
M.NAME_SOURCE = {
  ["tools/call"] = "name",
  ["prompts/get"] = "name",
  ["resources/read"] = "uri",
  ["tasks/get"] = "taskId",
  ["tasks/update"] = "taskId",
  ["tasks/cancel"] = "taskId",
}

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"

--- Standard base64 of a byte string.
function M.base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = s:byte(i, i + 2)
    local n = (a << 16) | ((b or 0) << 8) | (c or 0)
    local chunk = {}
    for k = 1, 4 do
      local idx = (n >> (6 * (4 - k))) & 63
      chunk[k] = B64:sub(idx + 1, idx + 1)
    end
    if not b then chunk[3] = "=" end
    if not c then chunk[4] = "=" end
    out[#out + 1] = table.concat(chunk)
  end
  return table.concat(out)
end

--- An Mcp-Param-* header value: the text as it is when it is a safe
--- plain-ASCII field value, else =?base64?...?= (the spec's encoding).
function M.encode_header_value(s)
  local plain = #s > 0 and not (s:sub(1, 9) == "=?base64?" and s:sub(-2) == "?=")
    and s:match("^%s") == nil and s:match("%s$") == nil and s:find("[^\t\32-\126]") == nil
  if plain then return s end
  return "=?base64?" .. M.base64(s) .. "?="
end

-- Subschema keywords that x-mcp-header may not be under (only a chain of
-- "properties" reaches a header parameter).
local UNREACHABLE = {
  "items", "prefixItems", "contains", "additionalProperties", "unevaluatedProperties", "unevaluatedItems",
  "propertyNames", "patternProperties", "dependentSchemas", "oneOf", "anyOf", "allOf", "not", "if", "then",
  "else", "$defs", "definitions",
}
local NAME_VALUED = { patternProperties = true, dependentSchemas = true, ["$defs"] = true, definitions = true }
local HEADER_TYPES = { string = true, integer = true, boolean = true }
local TOKEN = "^[!#$%%&'*+%-.^_`|~0-9A-Za-z]+$"

local function path_name(path)
  return #path == 0 and "<root>" or table.concat(path, ".")
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do
    if type(k) == "string" then keys[#keys + 1] = k end
  end
  table.sort(keys)
  return keys
end

--- The x-mcp-header declarations of a tool's inputSchema: a list of
--- {path = {"a", "b"}, header = "Name", type = "string"}, or nil and why
--- the tool's declarations are invalid (then the tool must not be called).
function M.header_declarations(schema)
  local found, seen = {}, {}
  local function visit(node, path, reachable)
    if type(node) ~= "table" then return nil end
    local raw = node["x-mcp-header"]
    if raw ~= nil then
      if not reachable or #path == 0 then
        return path_name(path) .. ": x-mcp-header is only allowed on a property reached through 'properties' alone"
      end
      if type(raw) ~= "string" or raw == "" then return path_name(path) .. ": x-mcp-header must be a non-empty string" end
      if not raw:match(TOKEN) then
        return ("%s: x-mcp-header '%s' is not an HTTP token (no spaces, controls or delimiters)"):format(path_name(path), raw)
      end
      local t = type(node.type) == "string" and node.type or nil
      if not HEADER_TYPES[t] then
        return ("%s: x-mcp-header is only allowed on a string, integer or boolean property, not %s"):format(
          path_name(path), t or "one without a type")
      end
      local lower = raw:lower()
      if seen[lower] then
        return ("x-mcp-header '%s' is declared twice (also as '%s'; names are case-insensitive)"):format(raw, seen[lower])
      end
      seen[lower] = raw
      found[#found + 1] = { path = path, header = raw, type = t }
    end
    if type(node.properties) == "table" then
      for _, key in ipairs(sorted_keys(node.properties)) do
        local p = table.move(path, 1, #path, 1, {})
        p[#p + 1] = key
        local why = visit(node.properties[key], p, reachable)
        if why then return why end
      end
    end
    for _, k in ipairs(UNREACHABLE) do
      local sub = node[k]
      if type(sub) == "table" then
        local branches = { sub }
        if NAME_VALUED[k] or (#sub > 0) then
          branches = {}
          if #sub > 0 then
            for _, b in ipairs(sub) do branches[#branches + 1] = b end
          else
            for _, key in ipairs(sorted_keys(sub)) do branches[#branches + 1] = sub[key] end
          end
        end
        for _, b in ipairs(branches) do
          local p = table.move(path, 1, #path, 1, {})
          p[#p + 1] = "<" .. k .. ">"
          local why = visit(b, p, false)
          if why then return why end
        end
      end
    end
    return nil
  end
  local why = visit(schema, {}, true)
  if why then return nil, why end
  return found
end

local function header_text(value, kind)
  if type(value) == "string" then return value end
  if type(value) == "boolean" then return value and "true" or "false" end
  if math.type(value) == "integer" then return tostring(value) end
  if type(value) == "number" and value == value and value ~= math.huge and value ~= -math.huge then
    if value == math.floor(value) and math.abs(value) < 2 ^ 53 then return tostring(math.tointeger(value)) end
    return tostring(value)
  end
  return nil
end

--- The Mcp-Param-* headers of one tools/call: {["Mcp-Param-Name"] = value}
--- from the declarations and the call's arguments (an absent or null
--- value sends no header).
function M.param_headers(declarations, arguments)
  local out = {}
  for _, d in ipairs(declarations or {}) do
    local v = arguments
    for _, key in ipairs(d.path) do
      if type(v) ~= "table" then v = nil break end
      v = v[key]
    end
    local text = v ~= nil and header_text(v, d.type) or nil
    if text then out["Mcp-Param-" .. d.header] = M.encode_header_value(text) end
  end
  return out
end

--- What a result says it is: "complete" (the default), "input_required", ...
function M.result_type(result)
  if type(result) == "table" and type(result.resultType) == "string" then return result.resultType end
  return "complete"
end

--- The params of a retry after input_required: the original params with
--- these answers (inputResponses, omitted when empty) and the server's
--- requestState echoed exactly (omitted when the server sent none). A
--- new table: the original params are not changed.
function M.retry_params(params, responses, request_state)
  local out = {}
  for k, v in pairs(params or {}) do
    if k ~= "inputResponses" and k ~= "requestState" then out[k] = v end
  end
  if responses and next(responses) ~= nil then out.inputResponses = responses end
  if request_state ~= nil then out.requestState = request_state end
  return out
end

--- A form's content with the defaults of its requested schema filled in
--- where the content has no value (the client side of applyDefaults).
function M.apply_defaults(schema, content)
  local out = {}
  for k, v in pairs(content or {}) do out[k] = v end
  local properties = type(schema) == "table" and type(schema.properties) == "table" and schema.properties or {}
  for name, property in pairs(properties) do
    if out[name] == nil and type(property) == "table" and property.default ~= nil then out[name] = property.default end
  end
  return out
end

--- The codec-bound half: messages, headers and answers.
--- codec: {encode, decode, null, array, object}.
function M.new(codec)
  assert(type(codec) == "table" and codec.object and codec.array, "client_protocol.new needs a codec")
  local P = setmetatable({}, { __index = M })
  local object, array = codec.object, codec.array

  --- The client's capabilities object, from its handlers:
  --- {elicit = fn?, sample = fn?, roots = list|fn?, apply_defaults = bool?}.
  function P.capabilities(handlers)
    local caps = {}
    if handlers.elicit then
      caps.elicitation = { form = handlers.apply_defaults and { applyDefaults = true } or object {} }
    end
    if handlers.sample then caps.sampling = object {} end
    if handlers.roots then caps.roots = { listChanged = true } end
    return object(caps)
  end

  -- The connection's state every message is built from:
  --   state.protocol_version  the negotiated (or tried) version
  --   state.client_info       {name, version}
  --   state.capabilities      the capabilities object (P.capabilities)
  local function meta_of(state, params)
    local p = {}
    for k, v in pairs(params or {}) do p[k] = v end
    local meta = {}
    if type(p._meta) == "table" then
      for k, v in pairs(p._meta) do meta[k] = v end
    end
    meta[M.META_PROTOCOL_VERSION] = state.protocol_version
    meta[M.META_CLIENT_INFO] = state.client_info
    meta[M.META_CLIENT_CAPABILITIES] = state.capabilities
    p._meta = meta
    return p
  end

  --- A request in the connection's era: the message (a table) and the
  --- HTTP headers it needs ({Name = value}; empty for a 2025 session
  --- before initialize answered). extra_headers (Mcp-Param-*) are added.
  function P.request(state, id, method, params, extra_headers)
    local headers = {}
    local v = state.protocol_version
    if v and (M.is_modern(v) or state.initialized) then headers["MCP-Protocol-Version"] = v end
    if v and M.is_modern(v) then
      params = meta_of(state, params)
      headers["Mcp-Method"] = method
      local field = M.NAME_SOURCE[method]
      local name = field and type(params) == "table" and params[field]
      if type(name) == "string" then headers["Mcp-Name"] = M.encode_header_value(name) end
    end
    for k, val in pairs(extra_headers or {}) do headers[k] = val end
    return { jsonrpc = "2.0", id = id, method = method, params = params }, headers
  end

  --- A notification in the connection's era: message and headers.
  function P.notification(state, method, params)
    local headers = {}
    local v = state.protocol_version
    if v and (M.is_modern(v) or state.initialized) then headers["MCP-Protocol-Version"] = v end
    if v and M.is_modern(v) then headers["Mcp-Method"] = method end
    return { jsonrpc = "2.0", method = method, params = params }, headers
  end

  --- server/discover at version (the modern era's first request).
  function P.discover(state, id)
    return P.request(state, id, "server/discover", object {})
  end

  --- initialize (the session era's first request) at version.
  function P.initialize(state, id)
    return P.request({ protocol_version = nil }, id, "initialize", {
      protocolVersion = state.protocol_version or M.SESSION_VERSION,
      capabilities = state.capabilities,
      clientInfo = state.client_info,
    })
  end

  --- What the answer to server/discover means:
  ---   "modern", version, result   the server speaks a modern version (use it)
  ---   "retry", version            try server/discover again at version (the
  ---                               caller bounds how often: the server may
  ---                               refuse the first try whatever it says)
  ---   "session", why              fall back to initialize (a 2025 server)
  ---   "fail", why                 neither (auth walls, network, 5xx)
  --- result: the result or nil; err: {code, message, data} or nil;
  --- status: the HTTP status of a failed POST (nil otherwise); tried: the
  --- version the request carried.
  function P.discover_outcome(result, err, status, tried)
    if result then
      local versions = type(result.supportedVersions) == "table" and result.supportedVersions or {}
      for _, want in ipairs(M.VERSIONS) do
        if M.is_modern(want) then
          for _, v in ipairs(versions) do
            if v == want then return "modern", v, result end
          end
        end
      end
      if #versions == 0 then return "session", "its server/discover answer names no supportedVersions" end
      return "session", "the server supports only " .. table.concat(versions, ", ")
    end
    if status == 401 or status == 403 then return "fail", err and err.message or ("HTTP " .. status) end
    if status and status >= 500 then return "fail", err and err.message or ("HTTP " .. status) end
    if err and err.code == M.UNSUPPORTED_PROTOCOL_VERSION then
      local data = type(err.data) == "table" and err.data or {}
      local supported = type(data.supported) == "table" and data.supported or {}
      for _, want in ipairs(M.VERSIONS) do
        for _, v in ipairs(supported) do
          if v == want and M.is_modern(v) then return "retry", v end
        end
      end
      return "session", "the server does not support " .. tostring(tried)
    end
    if err and (err.code == M.METHOD_NOT_FOUND or (status and status >= 400)) then
      return "session", tostring(err.message or ("HTTP " .. tostring(status)))
    end
    if status and status >= 400 then return "session", "HTTP " .. status end
    if err then return "session", tostring(err.message) end
    return "fail", "no answer to server/discover"
  end

  -- The roots/list result for a list of URIs or {uri, name}.
  local function roots_result(roots)
    local list = {}
    for i, r in ipairs(roots or {}) do
      list[i] = type(r) == "string" and { uri = r } or r
    end
    return { roots = array(list) }
  end

  --- Answer one server->client request (embedded in input_required, or
  --- sent on a stream) with the client's handlers:
  --- {elicit = fn(params), sample = fn(params), roots = list|fn(),
  ---  apply_defaults = bool}. Returns result, or nil and {code, message}.
  function P.answer(method, params, handlers)
    params = params or {}
    if method == "ping" then return object {} end
    if method == "roots/list" then
      local roots = handlers.roots
      if not roots then return nil, { code = M.METHOD_NOT_FOUND, message = "the client has no roots (give --root DIR)" } end
      if type(roots) == "function" then
        local ok, r = pcall(roots, params)
        if not ok then return nil, { code = -32603, message = tostring(r) } end
        roots = r
      end
      return roots_result(roots)
    end
    if method == "elicitation/create" then
      if not handlers.elicit then
        return nil, { code = M.METHOD_NOT_FOUND, message = "the client does not answer questions (elicitation)" }
      end
      local ok, r = pcall(handlers.elicit, params)
      if not ok then return nil, { code = -32603, message = tostring(r) } end
      r = r or { action = "cancel" }
      if r.action == "accept" and handlers.apply_defaults and params.requestedSchema then
        r.content = object(M.apply_defaults(params.requestedSchema, r.content))
      end
      return r
    end
    if method == "sampling/createMessage" then
      if not handlers.sample then
        return nil, { code = M.METHOD_NOT_FOUND, message = "the client does not sample (no model to ask)" }
      end
      local ok, r = pcall(handlers.sample, params)
      if not ok then return nil, { code = -32603, message = tostring(r) } end
      return r or object {}
    end
    return nil, { code = M.METHOD_NOT_FOUND, message = "the client does not handle " .. tostring(method) }
  end

  --- The answers to an input_required result's inputRequests
  --- ({key = {method, params}}): {key = result}, or nil and why (the
  --- first request the handlers could not answer).
  function P.input_responses(input_requests, handlers)
    local out = {}
    for _, key in ipairs(sorted_keys(input_requests or {})) do
      local req = input_requests[key]
      local method = type(req) == "table" and req.method or nil
      local result, err = P.answer(method, type(req) == "table" and req.params or nil, handlers)
      if not result then
        return nil, ("%s (%s): %s"):format(key, tostring(method), tostring(err.message))
      end
      out[key] = result
    end
    return object(out)
  end

  --- One step of the input_required loop: given the result of a request
  --- (with original params and round, 1-based), either
  ---   "done", result                 a complete result
  ---   "retry", params                send the request again (new id) with these params
  ---   "fail", why                    the handlers could not answer, or too many rounds
  function P.input_step(result, params, handlers, round)
    if M.result_type(result) ~= "input_required" then return "done", result end
    if round > M.MAX_INPUT_ROUNDS then
      return "fail", ("the server still wanted input after %d rounds"):format(M.MAX_INPUT_ROUNDS)
    end
    local responses, why = P.input_responses(result.inputRequests, handlers)
    if not responses then return "fail", why end
    return "retry", M.retry_params(params, responses, result.requestState)
  end

  return P
end

return M
