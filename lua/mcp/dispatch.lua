-- mcp.dispatch: the MCP methods the runtime hands to Lua.
--
-- The C core answers initialize, ping, logging/setLevel and resource
-- subscriptions itself; everything else arrives here as
-- dispatch(method, params, ctx, check) inside the request's own coroutine,
-- where check is C's verdict on a tools/call's arguments against the tool's
-- inputSchema (nil when they passed). A method returns its result table; a
-- JSON-RPC error is raised with core.rpc_error.

local core = require "mcp.core"
local permissions = require "mcp.permissions"
local input = require "mcp.input"
local registry = require "mcp.registry"
local schema = require "mcp.schema"
local shorthand = require "mcp.args"
local uri_template = require "mcp.uri_template"

local array, object = core.array, core.object
local rpc_error = core.rpc_error

local INVALID_PARAMS = core.INVALID_PARAMS
local RESOURCE_NOT_FOUND = core.RESOURCE_NOT_FOUND
local MAX_COMPLETION_VALUES = core.MAX_COMPLETION_VALUES

local M = {}
local methods = {}
local check_param_headers

-- A primitive's scopes (mcp.tool/resource/template/prompt{scopes = ...},
-- space-separated): a caller without them is refused before anything of
-- the primitive runs, with -32003, which C answers with call_fail_scope
-- (over HTTP a 403 whose challenge names them). Nobody authenticated
-- (stdio, auth off) holds every scope.
local function require_scopes(owner, ctx, what)
  local scopes = owner.scopes
  if scopes == nil or ctx:_has_scopes(scopes) then return end
  local list = array()
  for s in scopes:gmatch("%S+") do list[#list + 1] = s end
  rpc_error(core.INSUFFICIENT_SCOPE, ("Forbidden: %s needs the scope%s %s, which the token does not grant")
    :format(what, #list > 1 and "s" or "", scopes), { requiredScopes = list })
end

local function text_block(s)
  return { type = "text", text = s }
end

-- ---- Pagination ---------------------------------------------------------

local function encode_cursor(offset)
  return core.base64_encode("luamcp:" .. offset)
end

local function decode_cursor(cursor)
  if cursor == nil then return 0 end
  if type(cursor) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: cursor must be a string") end
  local text = core.base64_decode(cursor)
  local offset = text and text:match("^luamcp:(%d+)$")
  if not offset then rpc_error(INVALID_PARAMS, "Invalid params: unknown cursor") end
  return tonumber(offset)
end

-- One page of a registry list, as wire entries, under `field`.
local function list_page(list, params, field)
  registry.refresh(list)
  local entries = list:enabled_entries()
  local offset = decode_cursor(params.cursor)
  if offset > #entries then rpc_error(INVALID_PARAMS, "Invalid params: cursor is past the end of the list") end
  local size = core.page_size()
  if size <= 0 then size = #entries end
  local page = array()
  for i = offset + 1, math.min(offset + size, #entries) do page[#page + 1] = entries[i].wire end
  local result = { [field] = page }
  if offset + size < #entries then result.nextCursor = encode_cursor(offset + size) end
  return result
end

-- ---- Tools --------------------------------------------------------------

methods["tools/list"] = function(params)
  return list_page(registry.tools, params, "tools")
end

local CONTENT_TYPES = { text = true, image = true, audio = true, resource_link = true, resource = true }

local function is_content_block(v)
  return type(v) == "table" and type(v.type) == "string" and CONTENT_TYPES[v.type] ~= nil
end

local function is_content_list(t)
  if #t == 0 then return false end
  for k, v in pairs(t) do
    if math.type(k) ~= "integer" or not is_content_block(v) then return false end
  end
  return true
end

-- What is wrong with a result's content, or nil: a tool that returns
-- { content = "text" } or a block of a type MCP does not have would send
-- the client something it cannot show. Raised as {content_problem = ...}.
local function content_problem(content)
  if type(content) ~= "table" then
    return ("returned content as a %s: content is a list of blocks, e.g. { content = { mcp.text(\"...\") } } "
      .. "(or return the text itself)"):format(type(content))
  end
  if CONTENT_TYPES[content.type] then return nil end -- one block
  local blocks = content.type ~= nil and { content } or content
  for i, block in ipairs(blocks) do
    if type(block) ~= "table" then
      return ("returned content[%d] as a %s: each block is a table such as mcp.text(\"...\")"):format(i, type(block))
    end
    local kind = block.type
    if not CONTENT_TYPES[kind] then
      local hint = require("mcp.check").suggest(kind, CONTENT_TYPES)
      return ("returned content[%d] of type %s%s: the types are text, image, audio, resource_link and resource"):format(
        i, type(kind) == "string" and ("%q"):format(kind) or "nil", hint and (" (did you mean " .. hint .. "?)") or "")
    end
  end
  return nil
end

local function is_array_like(t)
  local n = #t
  if n == 0 then return false end
  local count = 0
  for _ in pairs(t) do count = count + 1 end
  return count == n
end

-- The text a scalar result becomes: integers without ".0", floats exact.
local function scalar_text(v)
  if type(v) == "number" then return core.json_encode(v) end
  return tostring(v)
end

--- Turn what a tool handler returned into a CallToolResult. With an
--- outputSchema, empty tables the schema calls arrays become [] first.
local function tool_result(r, output_table)
  local kind = type(r)
  if r == nil then return { content = array() } end
  if kind == "string" then return { content = array { text_block(r) } } end
  if kind == "number" or kind == "boolean" then return { content = array { text_block(scalar_text(r)) } } end
  if kind ~= "table" then error("a tool handler returned a " .. kind .. ", which has no JSON form", 0) end
  if is_content_block(r) then return { content = array { r } } end
  if is_content_list(r) then return { content = array(r) } end
  if r.content ~= nil or r.structuredContent ~= nil or r.isError ~= nil then
    local problem = r.content ~= nil and content_problem(r.content)
    if problem then error({ content_problem = problem }, 0) end
    local result = {}
    for k, v in pairs(r) do result[k] = v end
    if output_table and result.structuredContent ~= nil then
      result.structuredContent = schema.shape(result.structuredContent, output_table)
    end
    if result.content == nil then
      result.content = array()
      if result.structuredContent ~= nil then
        result.content[1] = text_block(core.json_encode(result.structuredContent))
      end
    elseif is_content_block(result.content) then
      result.content = array { result.content }
    else
      result.content = array(result.content)
    end
    return result
  end
  if output_table then r = schema.shape(r, output_table) end
  local text = core.json_encode(r)
  if is_array_like(r) then return { content = array { text_block(text) } } end
  return { content = array { text_block(text) }, structuredContent = object(r) }
end

local function error_result(message)
  return { content = array { text_block(message) }, isError = true }
end

-- A tool that declares an outputSchema must return structuredContent that
-- matches it; the answer is a tool error, never silently sent.
local function check_output(tool, result)
  local structured = result.structuredContent
  if structured == nil then return "declares an outputSchema but returned no structuredContent" end
  local ok, report = core.schema_validate(tool.output_schema, structured)
  if ok then return nil end
  return "the result does not match the tool's outputSchema:\n" .. report.text
end

-- mcp.tool_error(message): an error the tool means for the client, sent as
-- an isError result as it is, whatever mcp.server{mask_errors} says.
local TOOL_ERROR = { __tostring = function(e) return e.message end }

--- Raise an error the tool means for the client (an isError result with
--- message as its text; never masked).
function M.tool_error(message)
  if type(message) ~= "string" then
    error(("mcp.tool_error needs a message (a string), got %s"):format(type(message)), 2)
  end
  error(setmetatable({ message = message }, TOOL_ERROR), 0)
end

-- An error value that is not a string, as a person can read it: a table
-- raised with error({code = 42}) is shown as its JSON, not "table: 0x...".
local function error_value_text(err)
  local mt = getmetatable(err)
  if type(err) ~= "table" or (type(mt) == "table" and mt.__tostring) then return tostring(err) end
  local ok, json = pcall(core.json_encode, err)
  return ("the handler raised a table, %s: give error() a string, or use mcp.rpc_error(code, message) "
    .. "for a JSON-RPC error"):format(ok and json or tostring(err))
end

local function traceback(err)
  if core.is_rpc_error(err) or getmetatable(err) == TOOL_ERROR then return err end
  local message = type(err) == "string" and err or error_value_text(err)
  return { message = message, traceback = debug.traceback(message, 2) }
end

-- What a failed handler's xpcall returned, as the text a model reads. Lua
-- does not call the message handler for memory errors, so those arrive as
-- the bare string.
local function failure_text(failure)
  if type(failure) == "table" then return failure.message, failure.traceback end
  local message = tostring(failure)
  if message == "not enough memory" then
    message = "not enough memory: the tool exceeded the server's memory limit"
  end
  return message, message
end

-- mcp.server{mask_errors = true}: a tool's internal error (a Lua error, a
-- result with no JSON form, one its outputSchema refuses) reaches the
-- client as a reference id; the details go to the log under that id, so
-- paths, queries and tracebacks stay on the server (FastMCP's
-- mask_error_details). A call that was cancelled or stopped at its time
-- limit is answered by the runtime, so it is not masked here.
local function masking(ctx)
  return registry.server.mask_errors == true and not ctx.cancelled
end

local function reference()
  return ("%08x"):format(math.random(0, 0x7fffffff))
end

local function masked(name, details)
  local id = reference()
  core.stderr("error", ("tool %s failed (reference %s): %s"):format(name, id, details))
  return error_result(("tool %s failed with an internal error (reference %s)"):format(name, id))
end

-- Arguments that do not match the inputSchema (check comes from the C
-- validator): a tool error the model can act on from 2025-11-25 (SEP-1303),
-- -32602 with the same list before.
local function invalid_arguments(name, check, ctx)
  local text = ("Invalid arguments for tool %s:\n%s"):format(name, check.text)
  if ctx.features.tool_errors_as_results then return error_result(text) end
  rpc_error(INVALID_PARAMS, text, { errors = check.errors })
end

-- An Mcp-Param-* header value: "=?base64?...?=" is Base64 (strictly: the
-- right alphabet and padding), anything else is literal. nil when invalid.
local function header_value(text)
  local inner = text:match("^=%?base64%?(.*)%?=$")
  if not inner then return text end
  if #inner % 4 ~= 0 or not inner:match("^[A-Za-z0-9+/]*=?=?$") then return nil end
  local ok, decoded = pcall(core.base64_decode, inner)
  if not ok then return nil end
  return decoded
end

-- Over HTTP, a 2026-07-28 tools/call repeats the arguments its tool marks
-- with x-mcp-header in Mcp-Param-<name> headers, for gateways that route on
-- them (SEP-2243); the two must agree (-32020, HTTP 400). On stdio there
-- are no headers to check.
check_param_headers = function(tool, args, ctx)
  local mirrored = tool.header_params
  if not mirrored or not ctx:_header("mcp-protocol-version") then return end
  for header, property in pairs(mirrored) do
    local given = ctx:_header("mcp-param-" .. header)
    local value = args[property]
    local problem
    if given == nil then
      if value ~= nil then problem = "the Mcp-Param-" .. header .. " header is missing" end
    else
      local decoded = header_value(given)
      if decoded == nil then
        problem = "the Mcp-Param-" .. header .. " header is not valid Base64"
      elseif value == nil or decoded ~= (type(value) == "string" and value or core.json_encode(value)) then
        problem = "the Mcp-Param-" .. header .. " header does not match arguments." .. property
      end
    end
    if problem then rpc_error(core.HEADER_MISMATCH, "Header mismatch: " .. problem) end
  end
end

-- Where a function was written: "scripts/x.lua:12".
local function where_defined(fn)
  local info = debug.getinfo(fn, "S")
  return ("%s:%d"):format(info.short_src, info.linedefined)
end

methods["tools/call"] = function(params, ctx, check)
  local name = params.name
  if type(name) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: name must be a string") end
  registry.refresh()
  local tool = registry.tools:get(name)
  if not tool then rpc_error(INVALID_PARAMS, "Unknown tool: " .. name) end
  local args = params.arguments
  if args == nil then
    args = object()
  elseif type(args) ~= "table" or getmetatable(args) ~= nil then
    rpc_error(INVALID_PARAMS, "Invalid params: arguments must be an object")
  end
  if ctx.features.modern then check_param_headers(tool, args, ctx) end
  if check then return invalid_arguments(name, check, ctx) end
  if tool.defaults_schema then shorthand.fill_defaults(args, tool.defaults_schema) end
  permissions.before_call(ctx, name)
  local ok, result, err = xpcall(tool.handler, traceback, args, ctx)
  if not ok then
    if core.is_rpc_error(result) then error(result, 0) end
    if getmetatable(result) == TOOL_ERROR then return error_result(result.message) end
    local message, trace = failure_text(result)
    if masking(ctx) then return masked(name, trace) end
    core.stderr("error", ("tool %s failed: %s"):format(name, trace))
    return error_result(message)
  end
  if result == nil and err ~= nil then
    -- Lua's own way to fail (and what mcp.exec, mcp.fs and mcp.http return).
    core.stderr("warning", ("tool %s (%s) returned nil, %s"):format(name, where_defined(tool.handler), tostring(err)))
    return error_result(tostring(err))
  end
  local converted
  ok, converted = pcall(tool_result, result, tool.output_table)
  if not ok then
    local problem = ("tool %s (%s) returned a value that cannot be sent as JSON: %s"):format(name,
      where_defined(tool.handler), tostring(converted):gsub("^%[luamcp%][^:]*:%d+: ", ""))
    if type(converted) == "table" and converted.content_problem then
      problem = ("tool %s (%s) %s"):format(name, where_defined(tool.handler), converted.content_problem)
    end
    if masking(ctx) then return masked(name, problem) end
    core.stderr("error", problem)
    return error_result(problem)
  end
  if tool.output_schema and not converted.isError then
    local problem = check_output(tool, converted)
    if problem then
      if masking(ctx) then return masked(name, problem) end
      core.stderr("error", ("tool %s: %s"):format(name, problem))
      return error_result(("tool %s: %s"):format(name, problem))
    end
  end
  -- If converted cannot be encoded as JSON (a function inside, NaN, ...),
  -- the runtime answers with an isError result saying so.
  return converted
end

-- ---- Skills (the skills extension) ----------------------------------------

local skills = require "mcp.skills"

local function skills_method(fn)
  return function(params, ctx)
    if not skills.offered() then rpc_error(core.METHOD_NOT_FOUND, "Method not found: " .. ctx.method .. " (no skills)") end
    return fn(params, ctx)
  end
end

methods["skills/list"] = skills_method(skills.list_result)
methods["skills/get"] = skills_method(skills.get_result)
methods["resources/directory/read"] = skills_method(skills.directory_result)

-- ---- Resources ----------------------------------------------------------

methods["resources/list"] = function(params)
  return list_page(registry.resources, params, "resources")
end

methods["resources/templates/list"] = function(params)
  return list_page(registry.templates, params, "resourceTemplates")
end

-- 2026-07-28 (SEP-2164) makes an unknown resource invalid params; the
-- initialize era keeps -32002. Both carry the URI.
local function not_found(uri, ctx)
  local code = ctx.features.not_found_invalid_params and INVALID_PARAMS or RESOURCE_NOT_FOUND
  rpc_error(code, "Resource not found: " .. uri, { uri = uri })
end

-- A read's cache hints (2026-07-28): what the read function returned, else
-- what the resource or template declared; the server's defaults fill the
-- rest (M.dispatch).
local function read_hints(result, r, owner, ctx)
  if not ctx.features.modern then return result end
  if type(r) == "table" then result.ttlMs, result.cacheScope = r.ttlMs, r.cacheScope end
  if result.ttlMs == nil then result.ttlMs = owner.ttlMs end
  if result.cacheScope == nil then result.cacheScope = owner.cacheScope end
  return result
end

--- Turn what a read function returned into a ReadResourceResult.
local function read_result(r, uri, owner, ctx)
  local mime = owner.mimeType
  if type(r) == "string" then
    return read_hints({ contents = array { { uri = uri, mimeType = mime, text = r } } }, r, owner, ctx)
  end
  if type(r) ~= "table" then error("a resource read function returned a " .. type(r), 0) end
  if r.contents ~= nil then
    local contents = array()
    for i, c in ipairs(r.contents) do
      local item = {}
      for k, v in pairs(c) do item[k] = v end
      item.uri = item.uri or uri
      contents[i] = item
    end
    return read_hints({ contents = contents, _meta = r._meta }, r, owner, ctx)
  end
  local item = { uri = uri, mimeType = r.mimeType or mime, _meta = r._meta }
  if r.blob ~= nil then item.blob = core.base64_encode(r.blob) else item.text = r.text or "" end
  return read_hints({ contents = array { item } }, r, owner, ctx)
end

-- Who serves uri, in the order they are tried: {resource} for the resource
-- of that URI, then {template, vars} for each template matching it. A URI
-- this server's own scripts claim (registry.local_claim) is not served by
-- a mount's entries.
local function servers_of(uri)
  local claimed = registry.local_claim(uri) ~= nil
  local out = {}
  local resource = registry.resources:get(uri)
  if resource and not (claimed and resource.owner) then out[1] = { resource } end
  for _, t in ipairs(registry.templates:enabled_entries()) do
    local vars = not (claimed and t.owner) and uri_template.match(t.matcher, uri)
    if vars then out[#out + 1] = { t, vars } end
  end
  return out
end

methods["resources/read"] = function(params, ctx)
  local uri = params.uri
  if type(uri) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: uri must be a string") end
  registry.refresh()
  for _, server in ipairs(servers_of(uri)) do
    local owner, vars = server[1], server[2]
    require_scopes(owner, ctx, "reading " .. uri)
    if not vars then
      -- A resource answers for its URI: nil is "not found", not "ask the templates".
      local r = owner.read(uri, ctx)
      if r == nil then not_found(uri, ctx) end
      return read_result(r, uri, owner, ctx)
    end
    local r = owner.read(vars, ctx, uri)
    if r ~= nil then return read_result(r, uri, owner, ctx) end
  end
  not_found(uri, ctx)
end

--- Can the server serve uri: a resource, or a template that matches it?
--- The core asks before a legacy resources/subscribe (it refuses others).
function M.resource_known(uri)
  return servers_of(uri)[1] ~= nil
end

--- The scopes reading uri needs ("" for none), or nil when no resource or
--- template serves it: resources/subscribe and subscriptions/listen follow
--- a URI only for a caller that holds them.
function M.resource_scopes(uri)
  local first = servers_of(uri)[1]
  return first and (first[1].scopes or "") or nil
end

-- ---- Prompts ------------------------------------------------------------

methods["prompts/list"] = function(params)
  return list_page(registry.prompts, params, "prompts")
end

--- Turn what a prompt's get returned into a GetPromptResult.
local function prompt_result(r, prompt)
  local function message(m)
    if type(m) == "string" then return { role = "user", content = text_block(m) } end
    return m
  end
  if type(r) == "string" then
    return { description = prompt.description, messages = array { message(r) } }
  end
  if type(r) ~= "table" then error("a prompt's get returned a " .. type(r), 0) end
  local messages = array()
  for i, m in ipairs(r.messages or r) do messages[i] = message(m) end
  return { description = r.description or prompt.description, messages = messages, _meta = r._meta }
end

methods["prompts/get"] = function(params, ctx)
  local name = params.name
  if type(name) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: name must be a string") end
  registry.refresh()
  local prompt = registry.prompts:get(name)
  if not prompt then rpc_error(INVALID_PARAMS, "Unknown prompt: " .. name) end
  require_scopes(prompt, ctx, "prompt " .. name)
  local args = params.arguments or {}
  if type(args) ~= "table" then rpc_error(INVALID_PARAMS, "Invalid params: arguments must be an object") end
  local declared = {}
  for _, a in ipairs(prompt.arguments) do declared[a.name] = true end
  for k, v in pairs(args) do
    if not declared[k] then
      rpc_error(INVALID_PARAMS, ("Invalid params: prompt %s has no argument %s"):format(name, tostring(k)))
    end
    if type(v) ~= "string" then
      rpc_error(INVALID_PARAMS, ("Invalid params: argument %s must be a string"):format(tostring(k)))
    end
    local allowed = prompt.enums and prompt.enums[k]
    if allowed then
      local found = false
      for _, a in ipairs(allowed) do found = found or a == v end
      if not found then
        rpc_error(INVALID_PARAMS, ("Invalid params: argument %s must be one of %s"):format(k, table.concat(allowed, ", ")))
      end
    end
  end
  for name, value in pairs(prompt.defaults or {}) do
    if args[name] == nil then args[name] = value end
  end
  for _, a in ipairs(prompt.arguments) do
    if a.required and args[a.name] == nil then
      rpc_error(INVALID_PARAMS, ("Invalid params: missing required argument %s"):format(a.name))
    end
  end
  return prompt_result(prompt.get(args, ctx), prompt)
end

-- ---- Completion ---------------------------------------------------------

local function completion_result(r)
  if r == nil then r = {} end
  if type(r) ~= "table" then error("a completion function returned a " .. type(r), 0) end
  local values = r.values or r
  local out = array()
  for i = 1, math.min(#values, MAX_COMPLETION_VALUES) do out[i] = tostring(values[i]) end
  local total = r.total or #values
  local has_more = r.hasMore
  if has_more == nil then has_more = #values > MAX_COMPLETION_VALUES or total > #out end
  return { completion = { values = out, total = total, hasMore = has_more } }
end

methods["completion/complete"] = function(params, ctx)
  local ref, argument = params.ref, params.argument
  if type(ref) ~= "table" or type(argument) ~= "table" or type(argument.name) ~= "string" then
    rpc_error(INVALID_PARAMS, "Invalid params: completion/complete needs ref and argument.name")
  end
  local owner
  if ref.type == "ref/prompt" then
    owner = type(ref.name) == "string" and registry.prompts:get(ref.name)
    if not owner then rpc_error(INVALID_PARAMS, "Unknown prompt: " .. tostring(ref.name)) end
  elseif ref.type == "ref/resource" then
    owner = type(ref.uri) == "string" and registry.templates:get(ref.uri)
    if not owner then rpc_error(INVALID_PARAMS, "Unknown resource template: " .. tostring(ref.uri)) end
  else
    rpc_error(INVALID_PARAMS, "Invalid params: ref.type must be ref/prompt or ref/resource")
  end
  require_scopes(owner, ctx, ref.type == "ref/prompt" and ("prompt " .. ref.name) or ("template " .. ref.uri))
  local fn = owner.complete and owner.complete[argument.name]
  if not fn then return completion_result({}) end
  local context = type(params.context) == "table" and params.context.arguments or {}
  local value = argument.value
  if type(value) ~= "string" then value = "" end
  return completion_result(fn(value, ctx, context))
end

local ARRAY_MT = getmetatable(array())

-- mask_errors for the methods other than tools/call (a resource's read, a
-- prompt's get, a completion, an mcp.method): -32603 with a reference id.
local function run_masked(handler, method, params, ctx, check)
  local results = table.pack(xpcall(handler, traceback, params, ctx, check))
  if results[1] then return table.unpack(results, 2, results.n) end
  local failure = results[2]
  if core.is_rpc_error(failure) or not masking(ctx) then error(failure, 0) end
  local id = reference()
  local _, trace = failure_text(failure)
  core.stderr("error", ("%s failed (reference %s): %s"):format(method, id, trace))
  rpc_error(core.INTERNAL_ERROR, ("Internal error (reference %s)"):format(id))
end

local function run(method, params, ctx, check)
  local handler = methods[method]
  if handler then
    if getmetatable(params) == ARRAY_MT then
      rpc_error(INVALID_PARAMS, "Invalid params: MCP methods take named params (an object)")
    end
    if method ~= "tools/call" and registry.server.mask_errors == true then
      return run_masked(handler, method, params, ctx, check)
    end
    return handler(params, ctx, check)
  end
  handler = registry.methods[method]
  if not handler then rpc_error(core.METHOD_NOT_FOUND, "Method not found: " .. method) end
  if registry.server.mask_errors == true then return run_masked(handler, method, params, ctx) end
  return handler(params, ctx)
end

-- A 2026-07-28 result says what kind it is (resultType) and which server
-- answered (_meta["io.modelcontextprotocol/serverInfo"]).
local function modern_result(result)
  if type(result) ~= "table" or getmetatable(result) == ARRAY_MT then return result end
  if result.resultType == nil then result.resultType = "complete" end
  local meta = {}
  if type(result._meta) == "table" then
    for k, v in pairs(result._meta) do meta[k] = v end
  end
  meta["io.modelcontextprotocol/serverInfo"] = M.server_info_json()
  result._meta = object(meta)
  return result
end

input.modern_result = modern_result

-- Cache hints (SEP-2549) on the results a 2026-07-28 client may cache:
-- the lists and resources/read. Defaults: mcp.server{ttlMs, cacheScope},
-- else 0 ms and "private"; a resource's read result may set its own.
local CACHEABLE = { ["tools/list"] = true, ["prompts/list"] = true, ["resources/list"] = true,
                    ["resources/templates/list"] = true, ["resources/read"] = true,
                    ["skills/list"] = true, ["skills/get"] = true }

function M.cache_hints()
  local s = registry.server
  return math.tointeger(s.ttlMs) or 0, s.cacheScope == "public" and "public" or "private"
end

--- Run one method (check: the failed argument validation of a tools/call, or nil).
function M.dispatch(method, params, ctx, check)
  if not ctx.features.modern then return run(method, params, ctx, check) end
  local result = input.run(run, method, params, ctx, check)
  if CACHEABLE[method] and type(result) == "table" then
    local ttl, scope = M.cache_hints()
    if result.ttlMs == nil then result.ttlMs = ttl end
    if result.cacheScope == nil then result.cacheScope = scope end
  end
  return modern_result(result)
end

M.methods = methods
return M
