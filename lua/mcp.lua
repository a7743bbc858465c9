-- mcp: the library every luamcp script uses.
--
--   local mcp = require "mcp"
--   mcp.server { name = "demo", version = "1.0.0" }
--   mcp.tool { name = "add", inputSchema = {...}, handler = function(args, ctx) ... end }
--
-- Handlers run as coroutines on one event loop: mcp.sleep and the ctx
-- methods wait without blocking other requests.

local core = require "mcp.core"
local registry = require "mcp.registry"
local schema = require "mcp.schema"
local uri_template = require "mcp.uri_template"
local check = require "mcp.check"
local shorthand = require "mcp.args"
local config = require "mcp.config"
-- Installs the permission checks on every door (io, os, mcp.fs, C
-- modules) before any script runs; they do nothing until permissions are
-- declared.
local permissions = require "mcp.permissions"
local auth = require "mcp.auth"
require "mcp.context" -- adds ctx:sample, ctx:elicit and ctx:roots

local M = {}

--- JSON null (the same value as cjson.null).
M.null = core.null
--- Mark a table as a JSON array (so an empty one is sent as []).
---@generic T: table
---@param t? T
---@return T
M.array = core.array
--- Mark a table as a JSON object (so an empty one is sent as {}).
M.object = core.object
--- Strict JSON: decode(text) -> value | nil, err; encode(value) -> text.
M.json = { encode = core.json_encode, decode = core.json_decode }
--- Wait ms milliseconds without blocking other requests.
---@param ms number
M.sleep = core.sleep

--- Run fn(...) concurrently, as part of the current request. It starts at
--- once and runs until it first waits. Returns a handle:
--- handle:wait() -> what fn returned (raises what fn raised),
--- handle:cancel(), handle:done().
---@param fn function
---@return table handle
M.spawn = core.spawn

--- Run every function concurrently and wait for all of them. Returns the
--- first value each returned, in order; if one raises, the others are
--- cancelled and the error is raised.
---@param fns function[]
---@return any[]
function M.all(fns)
  local handles = {}
  for i, fn in ipairs(fns) do handles[i] = core.spawn(fn) end
  local results = {}
  for i, h in ipairs(handles) do
    local ok, value = pcall(h.wait, h)
    if not ok then
      for j = i + 1, #handles do handles[j]:cancel() end
      error(value, 0)
    end
    results[i] = value
  end
  return results
end

--- Run a program (never through a shell) and wait for it without blocking:
--- mcp.exec{argv = {...}, cwd?, env? (replaces the environment), stdin?,
--- timeout_ms?, max_output_bytes?, stream? = function(chunk, which)}
--- -> {code, signal, stdout, stderr, timed_out, truncated},
--- or nil, message, code when the program cannot be started.
M.exec = core.exec -- checked against mcp.server{permissions} (lua/mcp/permissions.lua)

--- Files, on the thread pool: read(path), write(path, data), list(dir),
--- stat(path). Failures return nil, message, code ("ENOENT", ...).
M.fs = core.fs

--- The user's folders: mcp.paths.home, config, data, cache, temp (XDG on
--- Linux, the known folders on Windows); strings, each judged by the
--- permissions like any path when mcp.fs or io uses it.
---@type table
M.paths = nil -- read on first use (the LAZY table below)

--- A key-value store of JSON values: get(key), set(key, value, {ttl}?),
--- incr(key, by?), delete(key), cas(key, expected, new, {ttl}?). In the
--- process (kept across reloads), or in Redis with --redis; from a handler
--- or mcp.spawn only, on both backends.
M.store = core.store

--- HTTP(S) requests without blocking: mcp.http.request{url, method?,
--- headers?, body? | json?, timeout_ms?, max_bytes?, max_redirects?,
--- ca_file?, insecure?, proxy?, stream?}, mcp.http.get(url, opts?),
--- mcp.http.post(url, opts?) -> {status, headers, body, url, :json()}, or
--- nil, message, code (lua/mcp/http.lua).
---@type table
M.http = nil -- loaded on first use (the LAZY table below)

--- SQLite databases: mcp.sqlite.open(path | ":memory:", {readonly?, wal?,
--- busy_timeout_ms?}) -> db with :exec(sql, ...), :query(sql, ...),
--- :first(sql, ...), :transaction(fn), :close(); statements run off the
--- loop (lua/mcp/sqlite.lua).
---@type table
M.sqlite = nil -- loaded on first use

--- Other MCP servers, from a tool: mcp.client.connect{command = {...}} or
--- {url = ..., headers = ...} -> a client with :call(name, args),
--- :read(uri), :prompt(name, args), :list(kind), :close() (lua/mcp/remote.lua).
---@type table
M.client = nil -- loaded on first use

--- Serve another server's tools, resources and prompts as this server's
--- own: mcp.mount{prefix = "gh", client = c} (lua/mcp/mount.lua).
---@type function
M.mount = nil -- loaded on first use

--- A tool's own Prometheus metrics, exported at /metrics with luamcp's:
--- mcp.metrics.counter(name, help) -> :inc(n?, labels?), and
--- mcp.metrics.histogram(name, help, buckets?) -> :observe(v, labels?)
--- (lua/mcp/metrics.lua).
---@type table
M.metrics = nil -- loaded on first use

-- The parts most servers never use are loaded the first time a script
-- reads them, not at every start (a stdio server is started for each
-- session): the HTTP client, the client of other servers (and with it
-- mcp.client_protocol) and mounting, the metrics.
local LAZY = {
  http = function() return require "mcp.http" end,
  client = function() return { connect = require("mcp.remote").connect } end,
  mount = function() return require("mcp.mount").mount end,
  metrics = function() return require "mcp.metrics" end,
  paths = function() return permissions.user_folders() end,
  sqlite = function() return require "mcp.sqlite" end,
  a2a = function() return require "mcp.a2a_client" end,
}
setmetatable(M, {
  __index = function(t, k)
    local load = LAZY[k]
    if not load then return nil end
    local value = load()
    rawset(t, k, value)
    return value
  end,
  -- Whoever walks the whole API (pairs(mcp)) sees all of it.
  __pairs = function(t)
    for k in pairs(LAZY) do local _ = t[k] end
    return next, t, nil
  end,
})

local function check_type(def, field, expected, optional, level)
  local v = def[field]
  if v == nil and optional then return end
  if type(v) ~= expected then
    error(("%s must be a %s, got %s"):format(field, expected, type(v)), level or 4)
  end
end

local function check_definition(kind, def)
  if type(def) ~= "table" then error(("mcp.%s needs a table"):format(kind), 3) end
  check.fields(kind, def, 3)
end

-- ttlMs and cacheScope (2026-07-28 cache hints) on mcp.server, mcp.resource
-- and mcp.template.
local function check_cache_hints(def)
  if def.ttlMs ~= nil and not (math.type(def.ttlMs) == "integer" and def.ttlMs >= 0) then
    error(("ttlMs must be a whole number of milliseconds >= 0, got %s"):format(tostring(def.ttlMs)), 3)
  end
  if def.cacheScope ~= nil and def.cacheScope ~= "public" and def.cacheScope ~= "private" then
    error(("cacheScope must be \"public\" or \"private\", got %s"):format(tostring(def.cacheScope)), 3)
  end
end

-- Copy the optional descriptive fields of a definition into a wire entry.
local function describe(entry, def, fields)
  for _, f in ipairs(fields) do
    if def[f] ~= nil then entry[f] = def[f] end
  end
  if def.icons ~= nil then entry.icons = core.array(def.icons) end
  return entry
end

--- A handle on something registered: remove, disable or enable it later.
local Handle = {}
Handle.__index = Handle
function Handle:remove() return self.list:remove(self.entry) end
function Handle:disable() self.list:set_enabled(self.entry, false) end
function Handle:enable() self.list:set_enabled(self.entry, true) end

local function handle(list, entry)
  return setmetatable({ list = list, entry = entry }, Handle)
end

-- serverInfo encoded once, for the _meta of every 2026-07-28 result
-- (mcp.server{} forgets it; dispatch.server_info_json makes it).
local server_info_json

---@class mcp.ServerInfo
---@field name? string defaults to the script folder's name
---@field version? string
---@field title? string
---@field instructions? string
---@field coerce? boolean the default of every tool's coerce
---@field ttlMs? integer 2026-07-28 cache hint for lists, reads and server/discover (default 0)
---@field cacheScope? "public"|"private" (default "private")
---@field requestStateTtlMs? integer how long a client has to answer an input_required result
---@field extensions? table<string, table> capabilities.extensions, by extension id
---@field author? string|{name: string, email?: string, url?: string} for `luamcp build --mcpb`'s manifest
---@field license? string for the manifest (an SPDX identifier such as "MIT")
---@field icon? string for the manifest: a PNG file in the script folder, or an https:// URL
---@field config? table<string, mcp.ConfigSetting> what the user is asked for; each reaches the program as the environment variable KEY upper-cased
---@field auth? mcp.AuthSettings OAuth 2.1 resource server over HTTP (docs/authorization.md); each --auth-* flag wins over its field
---@field permissions? mcp.Permissions what the tools may touch (docs/lua-api.md "Permissions"); nothing declared: unconfined
---@field mask_errors? boolean a tool's internal error reaches the client as a reference id; the details go to the log

---@class mcp.Permissions what the tools may touch; what is not listed is denied
---@field read? string[] files and folders ("./data" is beside the scripts; "$ROOTS": the client's roots; "$TMP")
---@field write? string[] ... that may be written too (and read)
---@field exec? string[] programs mcp.exec may run ("git": as PATH finds it, or a path)
---@field net? string[] what mcp.http may reach: "host", "host:port", "*.example.com"
---@field env? string[] environment variables os.getenv may read (config's are added)
---@field c_modules? string[]|true Lua C modules require may load (true: any)

---@class mcp.ConfigSetting an MCPB user_config entry
---@field type "string"|"number"|"boolean"|"directory"|"file"
---@field title string
---@field description string
---@field required? boolean
---@field default? string|number|boolean
---@field sensitive? boolean type "string": masked, kept in the keychain
---@field min? number type "number"
---@field max? number type "number"

--- Describe the server (serverInfo and instructions in initialize).
---@param info mcp.ServerInfo
function M.server(info)
  check_definition("server", info)
  check_cache_hints(info)
  check_type(info, "extensions", "table", true, 3)
  check_type(info, "license", "string", true, 3)
  check_type(info, "icon", "string", true, 3)
  check_type(info, "mask_errors", "boolean", true, 3)
  if info.config ~= nil then config.check(info.config, 2) end
  if info.permissions ~= nil then
    local env = {}
    for key in pairs(info.config or registry.server.config or {}) do env[#env + 1] = config.env_name(key) end
    permissions.declare(info.permissions, 3, env)
  end
  if info.auth ~= nil then auth.declare(info.auth, 2) end
  if info.extensions then
    local ok, err = pcall(core.json_encode, core.object(info.extensions))
    if not ok then error("extensions: " .. tostring(err), 2) end
  end
  for k, v in pairs(info) do registry.server[k] = v end
  server_info_json = nil
  if info.coerce ~= nil then
    for _, tool in ipairs(registry.tools.entries) do
      core.tool_input(tool.name, tool.input_schema, tool.coerce or info.coerce, tool.timeout_ms, tool.task[1],
        tool.task[2], tool.task[3], tool.scopes)
    end
  end
end

---@class mcp.ToolDefinition
---@field name string
---@field title? string
---@field description? string
---@field inputSchema? table|string JSON Schema (a table or JSON text kept verbatim)
---@field outputSchema? table|string
---@field args? table the inputSchema in shorthand: {name = "string", count = "integer? 1..10 -- how many"} (lua/mcp/args.lua)
---@field returns? table the outputSchema in the same shorthand
---@field annotations? table
---@field icons? table
---@field _meta? table
---@field coerce? boolean forgive "5" for 5, "true" for true and JSON text for objects/arrays in arguments
---@field timeout_ms? integer this tool's deadline (default: --timeout); 0 for none
---@field task? boolean|"required"|{after_ms?: integer, required?: boolean, poll_ms?: integer} run calls as MCP tasks (the tasks extension) for clients that declare it
---@field scopes? string[] OAuth scopes a caller needs (listed to everyone; a call without them is refused with 403 insufficient_scope)
---@field handler fun(args: table, ctx: mcp.Context): any

-- A tool's schema as JSON text, compiled: raises naming the tool, the
-- schema and the JSON pointer of the bad part.
local function tool_schema(def, field, level)
  check.properties_map(def[field], ("tool %s: %s"):format(def.name, field), level)
  local ok, json = pcall(schema.to_json, def[field])
  if not ok then error(("tool %s: %s: %s"):format(def.name, field, json), level) end
  local compiled
  ok, compiled = pcall(core.schema_compile, json, field)
  if not ok then error(("tool %s: %s"):format(def.name, compiled), level) end
  local as_table = type(def[field]) == "table" and def[field] or core.json_decode(json)
  if type(as_table) ~= "table" or as_table.type ~= "object" then
    error(("tool %s: %s must have \"type\": \"object\" at its root"):format(def.name, field), level)
  end
  local caller = debug.getinfo(level, "Sl")
  check.schema_keywords(as_table, ("tool %s: %s"):format(def.name, field),
    caller and ("%s:%d"):format(caller.short_src, caller.currentline))
  return json, compiled, as_table
end

-- The arguments a tool mirrors in HTTP headers (2026-07-28, SEP-2243): a
-- top-level property with "x-mcp-header": "Name" travels as Mcp-Param-Name.
-- Returns {lower-case name = property}, or nil.
local function header_params(tool, input_table)
  local found
  for property, sub in pairs(type(input_table.properties) == "table" and input_table.properties or {}) do
    local name = type(sub) == "table" and sub["x-mcp-header"]
    if name ~= nil and name ~= false then
      if type(name) ~= "string" or not name:match("^[%w%-]+$") then
        error(("tool %s: x-mcp-header of %s must be a header name (letters, digits and -)"):format(tool, property), 4)
      end
      found = found or {}
      found[name:lower()] = property
    end
  end
  return found
end

-- mcp.tool{task = ...} as C takes it: {mode, after_ms, poll_ms}, mode nil
-- (never), "optional" or "required".
local function task_plan(def)
  local t = def.task
  if t == nil or t == false then return {} end
  if t == true then return { "optional", 0, 0 } end
  if t == "required" then return { "required", 0, 0 } end
  if type(t) ~= "table" then
    error(("mcp.tool %s: task must be true, \"required\" or {after_ms = ..., required = ..., poll_ms = ...}, got %s")
      :format(def.name, type(t) == "string" and ("%q"):format(t) or type(t)), 3)
  end
  check.fields("tool task", t, 3)
  for _, k in ipairs { "after_ms", "poll_ms" } do
    local v = t[k]
    if v ~= nil and (math.type(v) ~= "integer" or v < 0) then
      error(("mcp.tool %s: task.%s must be a whole number of milliseconds (0 or more)"):format(def.name, k), 3)
    end
  end
  return { t.required and "required" or "optional", t.after_ms or 0, t.poll_ms or 0 }
end

-- args and returns (lua/mcp/args.lua) as the inputSchema and outputSchema
-- they stand for; each in place of the full schema, never beside it.
local function shorthand_schemas(def)
  local expanded = {}
  for short, full in pairs { args = "inputSchema", returns = "outputSchema" } do
    if def[short] ~= nil then
      if def[full] ~= nil then
        error(("mcp.tool %s: give %s or %s, not both"):format(def.name, short, full), 3)
      end
      local schema, err = shorthand.object_schema(def[short], short)
      if not schema then error(("mcp.tool %s: %s"):format(def.name, err), 3) end
      expanded[full] = schema
    end
  end
  return expanded
end

--- Register a tool.
---@param def mcp.ToolDefinition
function M.tool(def)
  check_definition("tool", def)
  check_type(def, "name", "string")
  check.tool_name(def.name, 2)
  if type(def.handler) ~= "function" then
    error(("mcp.tool %s: handler must be a function(args, ctx), got %s"):format(def.name, type(def.handler)), 2)
  end
  check_type(def, "timeout_ms", "number", true)
  check.annotations("tool", def, 2)
  local task = task_plan(def)
  local scopes = check.scopes(def, "mcp.tool " .. def.name, 2)
  local expanded = shorthand_schemas(def)
  if expanded.inputSchema == nil and def.inputSchema == nil then expanded.inputSchema = { type = "object" } end
  if next(expanded) then def = setmetatable(expanded, { __index = def }) end
  local input_json, input_schema, input_table = tool_schema(def, "inputSchema", 3)
  local output_json, output_schema, output_table
  if def.outputSchema ~= nil then output_json, output_schema, output_table = tool_schema(def, "outputSchema", 3) end
  local wire = describe(core.object { name = def.name }, def, { "title", "description", "annotations", "_meta" })
  wire.inputSchema = core.raw(input_json)
  if output_json then wire.outputSchema = core.raw(output_json) end
  local entry = {
    name = def.name,
    handler = def.handler,
    wire = core.raw(core.json_encode(wire)),
    input_schema = input_schema,
    coerce = def.coerce,
    timeout_ms = def.timeout_ms,
    output_schema = output_schema,
    output_table = output_table,
    header_params = header_params(def.name, input_table),
    task = task,
    defaults_schema = def.args ~= nil and input_table or nil, -- the shorthand fills in defaults
    scopes = scopes,
  }
  registry.tools:add(def.name, entry)
  core.tool_input(def.name, input_schema, def.coerce or registry.server.coerce, def.timeout_ms, task[1], task[2], task[3],
    scopes)
  entry.on_remove = function() core.tool_input(def.name, nil) end
  return handle(registry.tools, entry)
end

-- Run fn(...) with the lists' changes announced to this process's clients
-- only, whatever it raises.
local function here_only(fn, ...)
  local was = registry.here_only
  registry.here_only = true
  local result = table.pack(pcall(fn, ...))
  registry.here_only = was
  if not result[1] then error(result[2], 0) end
  return table.unpack(result, 2, result.n)
end

--- A function that changes the lists at run time (registers, removes,
--- disables a tool, a resource, a prompt) on every process of the server:
--- calling what this returns runs fn here and, with the same arguments
--- (JSON values), on every other worker of --workers and process of
--- --redis that loaded a function of that name, so all of them serve the
--- same lists. fn must not wait (no mcp.sleep, no ctx): the others run it
--- between requests. Declared at load, under a name unique to the server.
---@param name string
---@param fn fun(...): any
---@return fun(...): any
function M.everywhere(name, fn)
  if type(name) ~= "string" or name == "" then
    error(("mcp.everywhere: name must be a non-empty string, got %s"):format(type(name)), 2)
  end
  if type(fn) ~= "function" then error(("mcp.everywhere %s: fn must be a function, got %s"):format(name, type(fn)), 2) end
  if registry.everywhere[name] then error(("mcp.everywhere %s is already declared"):format(name), 2) end
  registry.everywhere[name] = fn
  return function(...)
    -- At load every process runs its own scripts: nothing to tell.
    if registry.started then
      local args = table.pack(...)
      local list = {}
      for i = 1, args.n do
        if args[i] == nil then error(("mcp.everywhere %s: argument %d is nil: give JSON values"):format(name, i), 2) end
        list[i] = args[i]
      end
      local ok, json = pcall(core.json_encode, core.array(list))
      if not ok then error(("mcp.everywhere %s: the arguments must be JSON values: %s"):format(name, json), 2) end
      core.everywhere(name, json)
      return here_only(fn, ...)
    end
    return fn(...)
  end
end

--- Another process ran the mcp.everywhere function name (mcp.core calls
--- this from the bus); args: its arguments, a JSON array.
function M._everywhere(name, args)
  local fn = registry.everywhere[name]
  if not fn then return false end -- a process with other scripts (--redis)
  local list = core.json_decode(args)
  here_only(fn, table.unpack(list, 1, #list))
  return true
end

---@class mcp.ResourceDefinition
---@field uri string
---@field name string
---@field title? string
---@field description? string
---@field mimeType? string
---@field read fun(uri: string, ctx: mcp.Context): string|table|nil
---@field ttlMs? integer 2026-07-28 cache hint for its reads (a read's result may set its own)
---@field cacheScope? "public"|"private"
---@field scopes? string[] OAuth scopes a caller needs to read/get it (listed to everyone; 403 insufficient_scope without them)

-- A resource's uri is one fixed URI: "notes://{id}" is a template.
local function check_fixed_uri(def)
  if def.uri:find("{[^}]*}") then
    error(("mcp.resource %s: uri %s has a {variable}: register it with mcp.template { uriTemplate = %q, ... }, "
      .. "whose read gets the variables"):format(def.name, def.uri, def.uri), 3)
  end
end

--- Register a resource with a fixed URI.
---@param def mcp.ResourceDefinition
function M.resource(def)
  check_definition("resource", def)
  check_type(def, "uri", "string")
  check_type(def, "name", "string")
  check_type(def, "read", "function")
  check_fixed_uri(def)
  check.annotations("resource", def, 2)
  local wire = describe(core.object { uri = def.uri, name = def.name }, def,
    { "title", "description", "mimeType", "size", "annotations", "_meta" })
  check_cache_hints(def)
  local entry = { uri = def.uri, mimeType = def.mimeType, read = def.read, wire = core.raw(core.json_encode(wire)),
                  ttlMs = def.ttlMs, cacheScope = def.cacheScope, scopes = check.scopes(def, "mcp.resource " .. def.name, 2) }
  return handle(registry.resources, registry.resources:add(def.uri, entry))
end

---@class mcp.TemplateDefinition
---@field uriTemplate string RFC 6570, e.g. "notes://{name}"
---@field name string
---@field read fun(vars: table, ctx: mcp.Context, uri: string): string|table|nil
---@field complete? table<string, fun(value: string, ctx: mcp.Context, arguments: table): table>
---@field ttlMs? integer 2026-07-28 cache hint for its reads (a read's result may set its own)
---@field cacheScope? "public"|"private"
---@field scopes? string[] OAuth scopes a caller needs to read/get it (listed to everyone; 403 insufficient_scope without them)

--- Register a resource template.
---@param def mcp.TemplateDefinition
function M.template(def)
  check_definition("template", def)
  check_type(def, "uriTemplate", "string")
  check_type(def, "name", "string")
  check_type(def, "read", "function")
  check_type(def, "complete", "table", true)
  local compiled, err = uri_template.compile(def.uriTemplate)
  if not compiled then error(("mcp.template %s: uriTemplate %q: %s"):format(def.name, def.uriTemplate, err), 2) end
  local wire = describe(core.object { uriTemplate = def.uriTemplate, name = def.name }, def,
    { "title", "description", "mimeType", "annotations", "_meta" })
  check_cache_hints(def)
  local entry = {
    uriTemplate = def.uriTemplate, mimeType = def.mimeType, read = def.read, matcher = compiled,
    complete = def.complete, wire = core.raw(core.json_encode(wire)), ttlMs = def.ttlMs, cacheScope = def.cacheScope,
    scopes = check.scopes(def, "mcp.template " .. def.name, 2),
  }
  return handle(registry.templates, registry.templates:add(def.uriTemplate, entry))
end

---@class mcp.PromptDefinition
---@field name string
---@field title? string
---@field description? string
---@field arguments? {name: string, description?: string, required?: boolean}[]
---@field args? table the arguments in the shorthand of mcp.tool's args: {topic = "string -- what about", tone = "string?"}
---@field get fun(args: table, ctx: mcp.Context): string|table
---@field complete? table<string, fun(value: string, ctx: mcp.Context, arguments: table): table>
---@field scopes? string[] OAuth scopes a caller needs to read/get it (listed to everyone; 403 insufficient_scope without them)

--- Register a prompt.
---@param def mcp.PromptDefinition
function M.prompt(def)
  check_definition("prompt", def)
  check_type(def, "name", "string")
  check_type(def, "get", "function")
  check_type(def, "arguments", "table", true)
  check_type(def, "complete", "table", true)
  local defaults, enums
  if def.args ~= nil then
    if def.arguments ~= nil then error(("mcp.prompt %s: give args or arguments, not both"):format(def.name), 2) end
    local list
    list, enums, defaults = shorthand.prompt_arguments(def.args)
    if not list then error(("mcp.prompt %s: %s"):format(def.name, enums), 2) end
    def = setmetatable({ arguments = list, complete = shorthand.enum_completions(enums, def.complete) },
      { __index = def })
  end
  local arguments = core.array()
  for i, a in ipairs(def.arguments or {}) do
    if type(a) ~= "table" or type(a.name) ~= "string" then
      error(("prompt %s: arguments[%d] needs a name"):format(def.name, i), 2)
    end
    arguments[i] = describe(core.object { name = a.name }, a, { "title", "description", "required" })
  end
  local wire = describe(core.object { name = def.name }, def, { "title", "description", "_meta" })
  if #arguments > 0 then wire.arguments = arguments end
  local entry = {
    name = def.name, description = def.description, arguments = def.arguments or {}, get = def.get,
    complete = def.complete, wire = core.raw(core.json_encode(wire)), defaults = defaults,
    enums = enums, scopes = check.scopes(def, "mcp.prompt " .. def.name, 2),
  }
  return handle(registry.prompts, registry.prompts:add(def.name, entry))
end

--- Answer a JSON-RPC method that is not part of MCP (an extension, or a
--- private protocol between your own client and server). params may be an
--- object or an array; the handler's return value is the result.
---@param name string
---@param handler fun(params: table, ctx: mcp.Context): any
function M.method(name, handler)
  if type(name) ~= "string" or name == "" then error("mcp.method needs a method name", 2) end
  if type(handler) ~= "function" then error("mcp.method needs a handler function", 2) end
  if require("mcp.dispatch").methods[name] or name == "initialize" or name == "ping"
      or name == "logging/setLevel" or name:match("^resources/u?n?subscribe$") then
    error(name .. " is an MCP method; luamcp answers it", 2)
  end
  if registry.methods[name] then error(name .. " is already registered", 2) end
  registry.methods[name] = handler
end

--- Tell subscribed clients that a resource changed.
---@param uri string
function M.notify_resource_updated(uri)
  core.resource_updated(uri)
end

--- Log to stderr and to every client (notifications/message).
---@param level "debug"|"info"|"notice"|"warning"|"error"|"critical"|"alert"|"emergency"
---@param data any
---@param logger? string
function M.log(level, data, logger)
  core.log(level, data, logger)
end

--- A tool argument in the args/returns shorthand with a description and
--- options: mcp.arg("integer", "how many", { default = 1, min = 1 }).
--- Options: optional, default, min, max, and any JSON Schema keyword.
M.arg = shorthand.arg

--- One of some values, in the args/returns shorthand: mcp.enum{"fast", "slow"}
--- (a description and options as mcp.arg's may follow).
M.enum = shorthand.enum

--- Raise a JSON-RPC error as the answer to the current request.
---@param code integer
---@param message string
---@param data? any
function M.rpc_error(code, message, data)
  core.rpc_error(code, message, data)
end

--- Fail the current tool call with an error meant for the client: an
--- isError result with message as its text, sent as it is even with
--- mcp.server{mask_errors = true} (an error(...) is masked there).
---@param message string
function M.tool_error(message)
  require("mcp.dispatch").tool_error(message)
end

-- ---- Content helpers ----------------------------------------------------

--- A text content block.
---@param text string
function M.text(text, annotations)
  return { type = "text", text = text, annotations = annotations }
end

--- An image content block from raw bytes (base64-encoded for you).
function M.image(bytes, mimeType, annotations)
  return { type = "image", data = core.base64_encode(bytes), mimeType = mimeType or "image/png",
           annotations = annotations }
end

--- An audio content block from raw bytes (base64-encoded for you).
function M.audio(bytes, mimeType, annotations)
  return { type = "audio", data = core.base64_encode(bytes), mimeType = mimeType or "audio/wav",
           annotations = annotations }
end

--- A link to a resource: {uri, name, title?, description?, mimeType?}.
function M.resource_link(def)
  local block = { type = "resource_link" }
  for k, v in pairs(def) do block[k] = v end
  return block
end

--- An embedded resource: {uri, text = ... | blob = raw bytes, mimeType?}.
function M.embedded(def)
  local resource = { uri = def.uri, mimeType = def.mimeType, _meta = def._meta }
  if def.blob ~= nil then resource.blob = core.base64_encode(def.blob) else resource.text = def.text or "" end
  return { type = "resource", resource = resource, annotations = def.annotations }
end

--- JSON Schema validation: mcp.schema.validate(schema, value) -> true | false, errors.
M.schema = { validate = schema.validate }

--- Data that survives a reload (luamcp dev, SIGHUP): the value kept under
--- key in the previous generation, copied into this one, or else init (or
--- what init() returns, when it is a function). Only plain data survives:
--- tables, strings, numbers, booleans: an init holding anything else (a
--- function) raises at once, and a function a handler stores in it later
--- is dropped at the next reload, with a warning.
---   local notes = mcp.state("notes", {})   -- a table: changes to it are kept
---@param key string
---@param init any
M.state = core.state

--- About the running server: {generation, generations_open, reloads, memory, tasks}.
M.info = core.info

--- Base64 (standard alphabet, padded).
M.base64 = { encode = core.base64_encode, decode = core.base64_decode }

-- ---- Runtime entry points (not for scripts) ----------------------------

local dispatch = require "mcp.dispatch"
local skills = require "mcp.skills"
M._dispatch = dispatch.dispatch
-- A foreign session's requests: A2A's (runtime/transport/http_a2a.c).
local a2a -- loaded on the first foreign request (a script without an agent never needs it)
function M._foreign_dispatch(method, params, ctx)
  a2a = a2a or require "mcp.a2a"
  return a2a.dispatch(method, params, ctx)
end
-- Whether this generation holds the agent task a request names (another
-- generation or process asks: runtime/app/vm.c), and its share of a
-- ListTasks.
function M._foreign_holds(method, params, principal) return require("mcp.a2a").holds(method, params, principal) end
function M._foreign_list(params, principal, first) return require("mcp.a2a").list(params, principal, first) end
-- A retired generation's ended agent tasks, handed to the current one when
-- it is freed (runtime/app/reload.c).
function M._foreign_export() return require("mcp.a2a").export() end
function M._foreign_adopt(text) return require("mcp.a2a").adopt(text) end

--- An agent (A2A) served by `luamcp run --http` beside the tools:
--- mcp.agent{name, description, version, provider, skills, handler =
--- function(message, ctx) ... end} (lua/mcp/a2a.lua, docs/lua-api.md).
function M.agent(def)
  require("mcp.a2a").declare(def)
  -- The runtime takes its entry points once the scripts have run: with an
  -- agent, its requests go straight to the module's dispatch.
  M._foreign_dispatch = require("mcp.a2a").dispatch
end
M._resource_known = dispatch.resource_known
M._resource_scopes = dispatch.resource_scopes

-- serverInfo (initialize) and _meta["io.modelcontextprotocol/serverInfo"]
-- (every 2026-07-28 result).
local function server_info()
  local s = registry.server
  local info = core.object {
    name = s.name or core.default_name(),
    version = s.version or "0.0.0",
  }
  for _, f in ipairs { "title", "description", "websiteUrl" } do info[f] = s[f] end
  if s.icons then info.icons = core.array(s.icons) end
  return info
end
dispatch.server_info = server_info

function dispatch.server_info_json()
  if not server_info_json then server_info_json = core.raw(core.json_encode(server_info())) end
  return server_info_json
end

-- capabilities.extensions: what mcp.server{extensions} declares, plus the
-- extensions the runtime serves for what the scripts registered.
local TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
local function extensions_json()
  local all, any = {}, false
  for k, v in pairs(registry.server.extensions or {}) do all[k], any = v, true end
  for _, tool in ipairs(registry.tools.entries) do
    if tool.task[1] then all[TASKS_EXTENSION], any = core.object(), true end
  end
  if skills.offered() then all[skills.EXTENSION], any = core.object { directoryRead = true }, true end
  return any and core.json_encode(core.object(all)) or nil
end

-- The Mcp-Param-* headers of every tool (enabled or not: a browser keeps a
-- preflight's answer for minutes), for a CORS preflight to allow; nil when
-- no tool declares one.
local function param_headers()
  local names, seen = {}, {}
  for _, tool in ipairs(registry.tools.entries) do
    for header in pairs(tool.header_params or {}) do
      if not seen[header] then names[#names + 1], seen[header] = "Mcp-Param-" .. header, true end
    end
  end
  table.sort(names)
  return #names > 0 and table.concat(names, ", ") or nil
end

function M._describe()
  local s = registry.server
  local info = server_info()
  local completions = false
  for _, list in ipairs { registry.prompts, registry.templates } do
    for _, e in ipairs(list.entries) do
      if e.complete and next(e.complete) then completions = true end
    end
  end
  -- A mount's lists are fetched at the first request: it may serve any.
  local mounted = registry.mounted == true
  return {
    server_info = info,
    instructions = s.instructions,
    tools = mounted or #registry.tools.entries > 0,
    resources = mounted or #registry.resources.entries + #registry.templates.entries > 0,
    prompts = mounted or #registry.prompts.entries > 0,
    completions = completions,
    extensions = extensions_json(),
    cache = ('"ttlMs":%d,"cacheScope":"%s"'):format(dispatch.cache_hints()),
    param_headers = param_headers(),
    auth = auth.json(core, s.auth),
  }
end

function M._start()
  -- skills/ beside the scripts (or in the bundle): served once the scripts
  -- have registered what they serve, before the first request.
  skills.load(M.bundle, M.resource)
  registry.started = true
  permissions.loaded()
end

---@class mcp.SkillDefinition
---@field name string the skill's name (lowercase letters, digits, hyphens)
---@field description string
---@field frontmatter? table more SKILL.md front matter fields (license, metadata, ...)
---@field read fun(path: string, ctx: mcp.Context): string|table the file at path ("SKILL.md" first)

--- A generated skill (the skills extension): its files come from read(path),
--- so its entry lists them as "dynamic". Skills in a skills/ folder need no code.
---@param def mcp.SkillDefinition
function M.skill(def)
  check_definition("skill", def)
  return skills.define(def, M.template)
end

-- What clients see of each list, to tell which lists a reload changed.
function M._fingerprints()
  local function wires(...)
    local parts = {}
    for _, list in ipairs { ... } do
      for _, e in ipairs(list:enabled_entries()) do parts[#parts + 1] = e.wire[1] end
    end
    return table.concat(parts, "\n")
  end
  return { tools = wires(registry.tools), resources = wires(registry.resources, registry.templates),
           prompts = wires(registry.prompts) }
end

-- `luamcp inspect`: what the scripts serve, as clients see it. Text for a
-- person (lua/mcp/inspect.lua), or JSON (the wire entries of every list).
function M._inspect(as_json)
  local function wires(list)
    local out = core.array()
    for _, e in ipairs(list:enabled_entries()) do out[#out + 1] = core.json_decode(e.wire[1]) end
    return out
  end
  local view = {
    server = server_info(), instructions = registry.server.instructions, tools = wires(registry.tools),
    resources = wires(registry.resources), resourceTemplates = wires(registry.templates),
    prompts = wires(registry.prompts),
    permissions = permissions.declared and core.object(permissions.declared) or nil,
  }
  if as_json then return core.json_encode(view) .. "\n" end
  view.loaded, view.permissions = true, permissions.summary()
  view.tasks = {}
  for _, e in ipairs(registry.tools.entries) do
    if e.task[1] then view.tasks[e.name] = e.task end
  end
  return require("mcp.inspect").text(view, core.json_encode)
end

-- `luamcp run`'s start line: who serves, and how much of each list.
function M._summary()
  local info = server_info()
  return {
    name = info.name, version = info.version, tools = #registry.tools:enabled_entries(),
    resources = #registry.resources:enabled_entries(), templates = #registry.templates:enabled_entries(),
    prompts = #registry.prompts:enabled_entries(),
  }
end

--- What `luamcp build --mcpb` writes into manifest.json: mcp.server{}'s
--- fields, its config as user_config entries (lua/mcp/config.lua), and the
--- tools and prompts registered while the scripts loaded.
function M._manifest()
  local tools, prompts = {}, {}
  for _, tool in ipairs(registry.tools:enabled_entries()) do
    local wire = core.json_decode(tool.wire[1])
    tools[#tools + 1] = { name = tool.name, description = wire.description }
  end
  for _, prompt in ipairs(registry.prompts:enabled_entries()) do
    local wire = core.json_decode(prompt.wire[1])
    local arguments = {}
    for i, a in ipairs(prompt.arguments) do arguments[i] = a.name end
    prompts[#prompts + 1] = { name = prompt.name, title = wire.title, description = wire.description,
                              arguments = arguments }
  end
  return { server = registry.server, tools = tools, prompts = prompts,
           user_config = config.manifest_entries(registry.server.config), permissions = permissions.summary() }
end

--- What runtime/app/confine.c gives the kernel (Landlock), or nil when
--- the scripts run unconfined.
function M._confinement()
  return permissions.confinement()
end

--- runtime/app/confine.c, after a reload changed the permissions of a
--- process the kernel confined at start: what denials add.
function M._kernel_rules_stale(note)
  permissions.kernel_rules_stale(note)
end

--- Once serving starts (luamcp run, dev, a built program; not build or
--- inspect): warn about required config whose variable is not set.
function M._check_environment()
  config.warn_unset(registry.server.config)
end

return M
