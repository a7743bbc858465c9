---@meta mcp

-- LuaLS (lua-language-server) definitions of the luamcp Lua API: what
-- `require "mcp"` returns, the ctx every handler receives, and the objects
-- both hand out. Editors complete and check scripts with it; nothing here
-- runs. Point LuaLS at this folder (.luarc.json):
--
--   { "workspace.library": ["/usr/local/share/luamcp/meta"] }
--
-- It describes what the runtime implements (lua/mcp.lua, lua/mcp/*.lua and
-- the bindings in runtime/app/lua_*.c); spec/meta_spec.lua fails when a
-- public function has no annotated declaration here, or when one declared
-- here does not exist. Functions marked @async wait without blocking: they
-- yield to the event loop, so they work only inside a handler (or a
-- function it runs, such as one started with mcp.spawn).
--
-- Expected failures return nil, a message and often a code; misuse (a
-- wrong argument type, an unknown option) raises.

---@class mcp
local mcp = {}

-- ---- Shared types -----------------------------------------------------------

---@alias mcp.LogLevel "debug"|"info"|"notice"|"warning"|"error"|"critical"|"alert"|"emergency"

---@alias mcp.CacheScope "public"|"private"

---A JSON Schema (2020-12, or draft-07 when its $schema says so) as a Lua
---table, or as JSON text that is kept byte for byte.
---@alias mcp.Schema table|string

---One argument (or result field) in the shorthand of mcp.tool's `args` and
---`returns`, expanded to JSON Schema 2020-12:
---
---* a string: `"string"`, `"integer"`, `"number"`, `"boolean"`, `"object"`
---  (any object), `"array"` (any array), `"any"`; then `[]` for an array of
---  it, `?` for optional, `MIN..MAX` bounds (a number's value, a string's or
---  array's length: `"integer 1..10"`, `"string ..80"`) and `-- text`, its
---  description: `"integer? 1..10 -- how many"`;
---* `{TYPE}`: an array of TYPE (`{"string"}`, `{{x = "number"}}`);
---* `{name = TYPE, ...}`: an object with those properties (required unless
---  optional or given a default) and no others;
---* `mcp.enum{...}`: one of some values; `mcp.arg(TYPE, description, options)`:
---  TYPE with a description, a default, bounds or any JSON Schema keyword.
---@alias mcp.ArgType string|mcp.Arg|table

---What mcp.arg and mcp.enum return: an argument's schema and whether it may
---be left out. Used as an mcp.ArgType.
---@class mcp.Arg
---@field schema table the JSON Schema it stands for
---@field optional boolean

---The options of mcp.arg and mcp.enum. JSON Schema keywords (`pattern`,
---`format`, `multipleOf`, `examples`, ...) may be given too, as they are.
---@class mcp.ArgOptions
---@field optional? boolean it may be left out
---@field required? boolean|string[] false: optional, true: required; a list is JSON Schema's own (an object's required properties)
---@field default? any what the handler gets when it is left out (makes it optional; checked against the type at load)
---@field min? number the least value of a number, or length of a string or array
---@field max? number the most

---An MCP Icon: `{src = "https://…/icon.png", mimeType = "image/png", sizes = {"48x48"}}`.
---@alias mcp.Icon table

---A content block of a tool result or prompt message (mcp.text, mcp.image,
---mcp.audio, mcp.resource_link, mcp.embedded make them).
---@class mcp.ContentBlock
---@field type "text"|"image"|"audio"|"resource_link"|"resource"
---@field text? string text blocks
---@field data? string image and audio blocks: base64
---@field mimeType? string
---@field uri? string resource links
---@field name? string resource links
---@field resource? {uri: string, mimeType?: string, text?: string, blob?: string, _meta?: table} embedded resources (blob in base64)
---@field annotations? table

---What a tool handler may return. A string is one text block; a number or
---boolean its text; nil empty content; `nil, message` an isError result; a
---content block or a list of them that content; a table with `content`,
---`structuredContent` or `isError` a result as given; any other table
---`structuredContent` plus its JSON as a text block (a list, such as
---`{1, 2}`, has no structuredContent: it is a JSON array, and
---structuredContent is always an object). `error(...)` is an isError result
---too (masked with mcp.server{mask_errors = true}), `mcp.tool_error(message)`
---one that is never masked, and `mcp.rpc_error` a JSON-RPC error.
---@alias mcp.ToolResult string|number|boolean|nil|mcp.ContentBlock|mcp.ContentBlock[]|table

---What a resource's (or template's) read returns: a string (text with the
---resource's mimeType), `{text = ...}` or `{blob = bytes}` (sent as
---base64), or a full `{contents = {...}}`; any of the tables may carry
---`mimeType`, `_meta`, and the 2026-07-28 cache hints `ttlMs` and
---`cacheScope`. nil: the resource is not found (-32002; -32602 in
---2026-07-28).
---@alias mcp.ReadResult string|{text?: string, blob?: string, mimeType?: string, contents?: table[], _meta?: table, ttlMs?: integer, cacheScope?: mcp.CacheScope}|nil

---What a prompt's get returns: a string (one user message), a list of
---messages (strings become user text messages), or
---`{messages = ..., description = ..., _meta = ...}`.
---@alias mcp.PromptResult string|(string|table)[]|{messages: (string|table)[], description?: string, _meta?: table}

---A completion function for one argument of a prompt or template: the
---value typed so far, ctx, and the other arguments already chosen
---(`context.arguments`). Returns a list of strings or
---`{values = ..., total = ..., hasMore = ...}`; at most 100 values are sent.
---@alias mcp.Completer async fun(value: string, ctx: mcp.Context, arguments: table<string, string>): (string[]|{values: string[], total?: integer, hasMore?: boolean}|nil)

-- ---- Definitions ------------------------------------------------------------

---@class mcp.Permissions what the tools may touch; what is not listed is denied (docs/lua-api.md "Permissions")
---@field read? string[] files and folders ("./data" beside the scripts, "$ROOTS" the client's roots, "$TMP")
---@field write? string[] files and folders that may be written (and read)
---@field exec? string[] programs mcp.exec may run ("git" as PATH finds it, or a path)
---@field net? string[] what mcp.http may reach: "host", "host:port", "*.example.com"
---@field env? string[] environment variables os.getenv may read (mcp.server{config}'s are added)
---@field c_modules? string[]|true Lua C modules require may load (true: any)

---@class mcp.AuthSettings
---@field issuer string the authorization server's issuer identifier (turns OAuth on; --auth-issuer)
---@field audience? string this server's canonical URI, which tokens must name (default on loopback: http://HOST/PATH of each request; required elsewhere)
---@field scopes? string[] scopes_supported, and the scope= of a 401 challenge
---@field jwks_uri? string the JWK Set (default: found by discovery from the issuer)
---@field jwks_file? string ... or read from a file, never fetched
---@field introspection_endpoint? string check opaque tokens there (RFC 7662)
---@field client_id? string this server's client id at the introspection endpoint
---@field client_secret_env? string the environment variable holding its secret
---@field algorithms? string[] the JWT algs allowed (default RS256 PS256 ES256 EdDSA)
---@field leeway_s? integer clock skew forgiven on exp and nbf (default 60)

---@class mcp.ServerInfo
---@field name? string serverInfo.name (default: the script folder's name)
---@field version? string serverInfo.version (default "0.0.0")
---@field title? string
---@field description? string
---@field websiteUrl? string
---@field icons? mcp.Icon[]
---@field _meta? table
---@field instructions? string sent in initialize
---@field coerce? boolean the default of every tool's `coerce`
---@field ttlMs? integer 2026-07-28 cache hint of the lists, reads and server/discover (default 0)
---@field cacheScope? mcp.CacheScope (default "private")
---@field requestStateTtlMs? integer how long a client has to answer an input_required result (default 15 minutes)
---@field extensions? table<string, table> announced as capabilities.extensions, by extension id
---@field permissions? mcp.Permissions what the tools may touch (nothing declared: unconfined); declared once, while loading
---@field auth? mcp.AuthSettings OAuth 2.1 resource server over HTTP (docs/authorization.md); each --auth-* flag wins over its field
---@field author? string|{name?: string, email?: string, url?: string} the manifest author of `luamcp build --mcpb`
---@field license? string the manifest's license (an SPDX identifier such as "MIT")
---@field icon? string the manifest's icon: a PNG file in the script folder, or an https:// URL
---@field config? table<string, mcp.ConfigSetting> what the user is asked for; each reaches the program as the environment variable KEY upper-cased
---@field mask_errors? boolean a tool's internal error (a Lua error, a result with no JSON form or that its outputSchema refuses) reaches the client as "tool X failed with an internal error (reference ID)", a resource's or prompt's as -32603 with the id; the details go to the log under the id. mcp.tool_error, mcp.rpc_error and `nil, message` are sent as they are.

---An MCPB user_config entry (mcp.server{config}).
---@class mcp.ConfigSetting
---@field type "string"|"number"|"boolean"|"directory"|"file"
---@field title string
---@field description string
---@field required? boolean
---@field default? string|number|boolean
---@field sensitive? boolean type "string": masked, kept in the keychain
---@field min? number type "number"
---@field max? number type "number"

---MCP tool annotations (hints for clients), sent as given.
---@class mcp.ToolAnnotations
---@field title? string
---@field readOnlyHint? boolean
---@field destructiveHint? boolean
---@field idempotentHint? boolean
---@field openWorldHint? boolean

---`task = {...}` of mcp.tool.
---@class mcp.TaskOptions
---@field after_ms? integer start as an ordinary call; become a task if still running after this long (0: at once)
---@field required? boolean a client that did not declare the tasks extension gets -32021 before the handler runs
---@field poll_ms? integer the pollIntervalMs the task suggests (default 500)

---@class mcp.ToolDefinition
---@field name string 1 to 128 of A-Z a-z 0-9 _ - .
---@field title? string
---@field description? string
---@field inputSchema? mcp.Schema with "type": "object" at its root (default {type = "object"})
---@field outputSchema? mcp.Schema the structuredContent the handler must return
---@field args? table<string, mcp.ArgType>|mcp.Arg the inputSchema in shorthand, one line per argument: `{name = "string -- who", count = "integer? 1..10", tags = {"string"}}` (not with inputSchema); omitted arguments arrive with their defaults
---@field returns? table<string, mcp.ArgType>|mcp.Arg the outputSchema in the same shorthand (not with outputSchema)
---@field annotations? mcp.ToolAnnotations
---@field icons? mcp.Icon[]
---@field _meta? table
---@field coerce? boolean forgive "5" for 5, "true" for true and JSON text for objects and arrays, when that makes the arguments valid
---@field timeout_ms? integer this tool's deadline (default: --timeout, 60 s); 0: none. A task keeps only this one.
---@field task? boolean|"required"|mcp.TaskOptions run calls as MCP tasks for clients that declare the tasks extension
---@field scopes? string[] OAuth scopes a caller must hold (e.g. {"notes:write"}): listed to every caller; a call without them is refused before the handler runs (-32003; over HTTP 403 insufficient_scope naming them)
---@field handler async fun(args: table, ctx: mcp.Context): mcp.ToolResult, string?

---@class mcp.ResourceDefinition
---@field uri string
---@field name string
---@field title? string
---@field description? string
---@field mimeType? string
---@field size? integer
---@field annotations? table
---@field icons? mcp.Icon[]
---@field _meta? table
---@field read async fun(uri: string, ctx: mcp.Context): mcp.ReadResult
---@field scopes? string[] OAuth scopes a caller must hold to read it, subscribe to it or complete it (listed to every caller; -32003, over HTTP 403, without them)
---@field ttlMs? integer 2026-07-28 cache hint of its reads (a read's result may set its own)
---@field cacheScope? mcp.CacheScope

---@class mcp.TemplateDefinition
---@field uriTemplate string RFC 6570: `{var}` matches one path segment (percent-decoded), `{+var}` any characters
---@field name string
---@field title? string
---@field description? string
---@field mimeType? string
---@field annotations? table
---@field icons? mcp.Icon[]
---@field _meta? table
---@field read async fun(vars: table<string, string>, ctx: mcp.Context, uri: string): mcp.ReadResult
---@field complete? table<string, mcp.Completer> completion of each variable
---@field scopes? string[] OAuth scopes a caller must hold to read it, subscribe to it or complete it (listed to every caller; -32003, over HTTP 403, without them)
---@field ttlMs? integer 2026-07-28 cache hint of its reads (a read's result may set its own)
---@field cacheScope? mcp.CacheScope

---@class mcp.PromptArgument
---@field name string
---@field title? string
---@field description? string
---@field required? boolean prompts/get refuses a call without it (-32602)

---@class mcp.PromptDefinition
---@field name string
---@field title? string
---@field description? string
---@field icons? mcp.Icon[]
---@field _meta? table
---@field arguments? mcp.PromptArgument[] prompts/get refuses arguments not listed here (-32602)
---@field args? table<string, mcp.ArgType> the arguments in the shorthand of mcp.tool's args, strings only, listed by name: `{topic = "string -- what about", tone = mcp.enum{"formal", "casual"}}` (an enum's values are completed and checked)
---@field get async fun(args: table<string, string>, ctx: mcp.Context): mcp.PromptResult
---@field complete? table<string, mcp.Completer> completion of each argument
---@field scopes? string[] OAuth scopes a caller must hold to get or complete it (listed to every caller; -32003, over HTTP 403, without them)

---@class mcp.SkillDefinition
---@field name string lowercase letters, digits and single hyphens inside, at most 64 characters
---@field description string
---@field frontmatter? table more SKILL.md front matter (license, metadata, ...)
---@field read async fun(path: string, ctx: mcp.Context): mcp.ReadResult the file at path: "SKILL.md", or a file it mentions

---What mcp.skill returns: the skill's entry in skills/list.
---@class mcp.SkillEntry
---@field uri string skill://NAME/SKILL.md
---@field frontmatter table
---@field resources "dynamic"
---@field read fun(path: string, ctx: mcp.Context): mcp.ReadResult

-- ---- The server and what it serves -----------------------------------------

---Describe the server: serverInfo and instructions in initialize, and the
---2026-07-28 cache hints. Raises on a field it does not take.
---@param info mcp.ServerInfo
function mcp.server(info) end

---Register a tool. Raises, with the script's line, on an unknown field, a
---bad name, a missing handler or an invalid schema; a keyword JSON Schema
---does not define is a warning on stderr.
---@param def mcp.ToolDefinition
---@return mcp.Handle handle
function mcp.tool(def) end

---Register a resource with a fixed URI.
---@param def mcp.ResourceDefinition
---@return mcp.Handle handle
function mcp.resource(def) end

---Register a resource template (resources whose URIs match uriTemplate).
---@param def mcp.TemplateDefinition
---@return mcp.Handle handle
function mcp.template(def) end

---Register a prompt.
---@param def mcp.PromptDefinition
---@return mcp.Handle handle
function mcp.prompt(def) end

---A generated skill (the skills extension): its files come from
---read(path), so skills/list shows its resources as "dynamic". Skills in a
---skills/ folder beside the scripts need no code.
---@param def mcp.SkillDefinition
---@return mcp.SkillEntry entry
function mcp.skill(def) end

---Answer a JSON-RPC method outside MCP (an extension, or a private
---protocol between your client and server). The handler's return value is
---the result; params may be an object or an array. Raises for an MCP
---method luamcp answers itself, and for a name already registered.
---@param name string
---@param handler async fun(params: table, ctx: mcp.Context): any
function mcp.method(name, handler) end

---What mcp.tool, mcp.resource, mcp.template and mcp.prompt return. Each
---change sends the list's notifications/.../list_changed once the scripts
---have loaded.
---@class mcp.Handle
local Handle = {}

---Unregister it.
---@return boolean removed false when it was removed already
function Handle:remove() end

---Leave it out of its list and answer it as unknown, until enable().
function Handle:disable() end

---Serve it again after disable().
function Handle:enable() end

---A function that changes the lists at run time on every process of the
---server: calling what it returns runs fn here and, with the same
---arguments (JSON values), on every other worker of --workers and every
---process of --redis that declared the same name, so all serve the same
---lists. Declare it at load; fn must not wait.
---@param name string unique to the server
---@param fn fun(...): any registers, removes, disables or enables
---@return fun(...): any
function mcp.everywhere(name, fn) end

-- ---- Notifications and errors ----------------------------------------------

---Tell the clients subscribed to uri (resources/subscribe) that it
---changed (notifications/resources/updated).
---@param uri string
function mcp.notify_resource_updated(uri) end

---Log to stderr and to the client of every session (notifications/message,
---filtered by each session's logging/setLevel; 2026-07-28 requests have no
---session: use ctx:log). data is sent as JSON. Raises on an unknown level.
---@param level mcp.LogLevel
---@param data any
---@param logger? string
function mcp.log(level, data, logger) end

---An argument in the args/returns shorthand with a description and options:
---`mcp.arg("integer", "how many", {default = 1, min = 1, max = 10})`. The
---description may be left out: `mcp.arg("string", {format = "email"})`.
---Raises, at the caller's line, on an unknown type or option, or a default
---that does not fit.
---@param spec mcp.ArgType
---@param description? string|mcp.ArgOptions
---@param options? mcp.ArgOptions
---@return mcp.Arg
function mcp.arg(spec, description, options) end

---One of some values, in the args/returns shorthand: `mcp.enum{"fast", "slow"}`
---(strings, numbers or booleans; the type follows from them), with a
---description and mcp.arg's options if wanted:
---`mcp.enum({"fast", "slow"}, "how hard to try", {default = "fast"})`.
---@param values (string|number|boolean)[]
---@param description? string|mcp.ArgOptions
---@param options? mcp.ArgOptions
---@return mcp.Arg
function mcp.enum(values, description, options) end

---Fail the current tool call with an error meant for the client: an isError
---result with message as its text, sent as it is even with
---mcp.server{mask_errors = true}. Never returns (`return mcp.tool_error(...)` reads well too).
---@param message string
function mcp.tool_error(message) end

---End the current request with a JSON-RPC error: raises an error value
---that answers it (a task with it fails). Never returns.
---@param code integer e.g. -32602
---@param message string
---@param data? any the error's data, sent as JSON
function mcp.rpc_error(code, message, data) end

-- ---- Content helpers -------------------------------------------------------

---A text content block.
---@param text string
---@param annotations? table
---@return mcp.ContentBlock
function mcp.text(text, annotations) end

---An image content block from raw bytes (base64-encoded for you).
---@param bytes string
---@param mimeType? string default "image/png"
---@param annotations? table
---@return mcp.ContentBlock
function mcp.image(bytes, mimeType, annotations) end

---An audio content block from raw bytes (base64-encoded for you).
---@param bytes string
---@param mimeType? string default "audio/wav"
---@param annotations? table
---@return mcp.ContentBlock
function mcp.audio(bytes, mimeType, annotations) end

---A resource_link content block: the fields of def, as given.
---@param def {uri: string, name: string, title?: string, description?: string, mimeType?: string, size?: integer, annotations?: table, _meta?: table}
---@return mcp.ContentBlock
function mcp.resource_link(def) end

---An embedded resource content block: text, or blob (raw bytes,
---base64-encoded for you).
---@param def {uri: string, text?: string, blob?: string, mimeType?: string, annotations?: table, _meta?: table}
---@return mcp.ContentBlock
function mcp.embedded(def) end

-- ---- JSON values -----------------------------------------------------------

---JSON null: what `null` from a client arrives as, and what to put in a
---table to send null (a nil would leave the key out). The same value as
---cjson.null.
---@type lightuserdata
mcp.null = nil

---Mark a table as a JSON array, so an empty one is sent as `[]`. Without
---an argument, a new empty array. Returns the table itself.
---@generic T: table
---@param t T
---@return T
---@overload fun(): table
function mcp.array(t) end

---Mark a table as a JSON object, so an empty one is sent as `{}`. Without
---an argument, a new empty object. Returns the table itself.
---@generic T: table
---@param t T
---@return T
---@overload fun(): table
function mcp.object(t) end

---The runtime's strict JSON codec. Objects are written with sorted keys.
mcp.json = {}

---JSON text of value. Raises, naming where it is, on a value that has no
---JSON form (a function, a coroutine, NaN, a table with both 1 and "1").
---@param value any
---@return string json
function mcp.json.encode(value) end

---The value of JSON text: integers as Lua integers, null as mcp.null,
---arrays marked with mcp.array.
---@param text string
---@return any value nil when text is not JSON
---@return string? message why not
function mcp.json.decode(text) end

---JSON Schema validation (the same validator as tool arguments).
mcp.schema = {}

---Validate value against a JSON Schema (2020-12, or draft-07 when its
---$schema says so). Raises when the schema itself is invalid.
---@param schema mcp.Schema
---@param value any
---@return boolean valid
---@return {path: string, message: string}[]? errors when not valid
---@return string? text the errors as text, one per line
function mcp.schema.validate(schema, value) end

---Base64, the standard alphabet, padded.
mcp.base64 = {}

---@param bytes string
---@return string base64
function mcp.base64.encode(bytes) end

---@param text string base64
---@return string? bytes nil when text has a character outside the alphabet
---@return string? message which byte
function mcp.base64.decode(text) end

-- ---- Waiting, concurrency and state ----------------------------------------

---Wait ms milliseconds without blocking other requests.
---@async
---@param ms number
function mcp.sleep(ms) end

---Run fn(...) concurrently, as part of the current request: it starts at
---once and runs until it first waits. It ends with the request (cancelled,
---timed out, answered). Raises outside a handler.
---@param fn async fun(...: any): any
---@param ... any fn's arguments
---@return mcp.Task task
function mcp.spawn(fn, ...) end

---Run every function concurrently (as mcp.spawn does) and wait for all of
---them. Returns the first value each returned, in order; if one raises,
---the ones not yet waited for are cancelled and the error is raised.
---@async
---@param fns (async fun(): any)[]
---@return any[] results
function mcp.all(fns) end

---What mcp.spawn returns.
---@class mcp.Task
local Task = {}

---Wait for the task and return what its function returned; raises what it
---raised, or an error when it was cancelled or its results were already
---taken by an earlier wait(). Only one task may wait for a task at a time.
---@async
---@return any ...
function Task:wait() end

---Stop the task (its timers, processes and transfers with it); nothing
---when it has finished.
function Task:cancel() end

---Has the task finished (or been cancelled)?
---@return boolean
function Task:done() end

---Data that survives a reload (luamcp dev, SIGHUP): the value kept under
---key in the previous generation, copied into this one, or else init (or
---what init() returns, when it is a function). Only plain data survives:
---tables (changes to a kept table are kept), strings, numbers, booleans
---and mcp.null; raises when the previous value holds anything else.
---@generic T
---@param key string
---@param init? T|fun(): T
---@return T value
function mcp.state(key, init) end

---@class mcp.Info
---@field generation integer which load of the scripts this is (1, then one more at each reload)
---@field generations_open integer generations still running calls (older ones finish theirs after a reload)
---@field reloads integer
---@field memory integer bytes the scripts' Lua state uses
---@field tasks integer coroutines running (requests and what they spawned)
---@field worker integer which worker process of `--workers N` runs this (1 to N; 1 for a process alone)
---@field workers integer N of `--workers N` (1 for a process alone)
---@field pid integer this process's id

---About the running server.
---@return mcp.Info
function mcp.info() end

-- ---- Programs, files, the web, the bundle ----------------------------------

---@class mcp.ExecOptions
---@field argv string[] the program and its arguments; never run through a shell
---@field cwd? string
---@field env? table<string, string|number> the child's whole environment (default: the server's)
---@field stdin? string written to the child's standard input (default: /dev/null)
---@field timeout_ms? integer then SIGTERM to its process group, SIGKILL 0.5 s later (default: none; the call's own deadline still applies)
---@field max_output_bytes? integer kept of stdout and of stderr each (default 16 MiB); beyond it `truncated`
---@field stream? async fun(chunk: string, which: "stdout"|"stderr") output as it arrives, in the handler's coroutine

---@class mcp.ExecResult
---@field pid integer
---@field code integer the exit status
---@field signal integer the signal that ended it, or 0
---@field stdout string
---@field stderr string
---@field timed_out boolean it was stopped at timeout_ms
---@field truncated boolean output beyond max_output_bytes was dropped

---Run a program and wait for it without blocking. The child is its own
---process group, killed when the call ends first (cancelled, past its
---deadline) or the server exits. Raises on misuse (no argv).
---@async
---@param opts mcp.ExecOptions
---@return mcp.ExecResult? result nil when the program cannot be started
---@return string? message "argv[1]: what went wrong"
---@return string? code libuv's error name, e.g. "ENOENT", "EACCES"
function mcp.exec(opts) end

---Files, on libuv's thread pool, so a slow disk never stops the loop.
---Expected failures return nil, a message naming the path, and an error
---code ("ENOENT", "EACCES", "EISDIR", "EFBIG" for a file larger than the
---memory limit leaves room for, ...).
mcp.fs = {}

---The whole file.
---@async
---@param path string
---@return string? data
---@return string? message
---@return string? code
function mcp.fs.read(path) end

---Create or replace a file (mode 0644 when created).
---@async
---@param path string
---@param data string
---@return true? ok
---@return string? message
---@return string? code
function mcp.fs.write(path, data) end

---@class mcp.DirEntry
---@field name string
---@field type "file"|"directory"|"link"|"other" a link is not followed

---A folder's entries (not "." and ".."), sorted by name.
---@async
---@param dir string
---@return mcp.DirEntry[]? entries
---@return string? message
---@return string? code
function mcp.fs.list(dir) end

---@class mcp.FileInfo
---@field type "file"|"directory"|"other" links are followed
---@field size integer bytes
---@field mtime number seconds since 1970, with fractions
---@field mode integer permission bits (0755 is 493)

---@async
---@param path string
---@return mcp.FileInfo? info
---@return string? message
---@return string? code
function mcp.fs.stat(path) end

---Create a folder; with {parents = true} the missing folders above it too,
---and a folder already there is no failure (as `mkdir -p`). Needs the
---write permission for path. Fails with "EEXIST" when something is there
---(without parents), "ENOENT" when its parent is missing.
---@async
---@param path string
---@param opts? {parents?: boolean}
---@return true? ok
---@return string? message
---@return string? code
function mcp.fs.mkdir(path, opts) end

---Remove a file, a link (never what it points to) or an empty folder; with
---{recursive = true} a folder with all in it. A recursive remove never
---follows a link (or, on Windows, a junction) out of the tree: a link is
---removed as itself. Needs the write permission for path. Fails with
---"ENOTEMPTY" for a folder that is not empty (without recursive); the
---message names the entry where a recursive remove stopped.
---@async
---@param path string
---@param opts? {recursive?: boolean}
---@return true? ok
---@return string? message
---@return string? code
function mcp.fs.remove(path, opts) end

---Move or rename a file or folder, replacing a file at `to`. Needs the
---write permission for both paths.
---@async
---@param from string
---@param to string
---@return true? ok
---@return string? message
---@return string? code
function mcp.fs.rename(from, to) end

---The user's folders, as this platform names them; a field is nil when the
---environment does not tell it (no HOME). Reading them is not judged (a
---folder's name is no secret); using one (mcp.fs, io.open) is judged by
---the permissions like any path: declare `write = {"~/.config/myapp"}`
---(or the folder) to write there.
mcp.paths = {}

---The user's home folder: $HOME; on Windows %USERPROFILE%.
---@type string?
mcp.paths.home = nil

---Settings: $XDG_CONFIG_HOME or ~/.config; on Windows %APPDATA% (Roaming).
---@type string?
mcp.paths.config = nil

---Data: $XDG_DATA_HOME or ~/.local/share; on Windows %LOCALAPPDATA%.
---@type string?
mcp.paths.data = nil

---Caches: $XDG_CACHE_HOME or ~/.cache; on Windows %LOCALAPPDATA%.
---@type string?
mcp.paths.cache = nil

---Temporary files: $TMPDIR or /tmp; on Windows %TMP% or %TEMP%.
---@type string
mcp.paths.temp = ""
---SQLite databases (docs/lua-api.md "Databases: mcp.sqlite"). Statements
---run on libuv's thread pool: the handler waits without blocking other
---calls, one statement at a time per connection, and a cancelled or timed
---out call interrupts its query. A connection belongs to the server, not to
---a generation: after a reload, open with the same path and options
---returns the same connection (an in-memory database keeps its rows).
mcp.sqlite = {}

---The SQLite library's version ("3.40.1").
---@type string
mcp.sqlite.version = nil

---@class mcp.SqliteOptions
---@field readonly? boolean open for reading only (checked against the read permission, not write)
---@field wal? boolean switch the file to write-ahead logging (readers never wait for the writer)
---@field busy_timeout_ms? integer how long a statement waits for another process's lock (5000)
---@field create? boolean create the file when missing (true)

---Open a database file, or ":memory:". The same path with the same options
---returns the connection already open (how = "reused"), from this or an
---earlier generation. Failures (no permission, a file that is not a
---database) return nil, message, code.
---@param path string
---@param options? mcp.SqliteOptions
---@return mcp.sqlite.Database? db
---@return string how_or_message "new", "reused", or why it failed
---@return string? code
function mcp.sqlite.open(path, options) end

---A value to bind as a BLOB (a plain string binds as TEXT).
---@param bytes string
---@return table
function mcp.sqlite.blob(bytes) end

---An open database. Parameters follow the SQL: one table (positional values
---at 1..n for `?`, names for `:name`/`@name`/`$name`), or the values
---themselves. Rows are tables of column name -> value: INTEGER as a Lua
---integer, REAL as a float, TEXT and BLOB as strings, NULL absent. Bad SQL
---raises SQLite's message at the calling line. Outside a handler (at load)
---a statement runs at once, blocking.
---@class mcp.sqlite.Database
local Database = {}

---Run every statement of sql; the rows changed by the last one, and the
---last inserted rowid.
---@async
---@param sql string
---@param ... any parameters
---@return integer changes
---@return integer last_insert_rowid
function Database:exec(sql, ...) end

---The rows of sql (of its last statement that returns rows).
---@async
---@param sql string
---@param ... any parameters
---@return table[] rows
function Database:query(sql, ...) end

---The first row of sql, or nil.
---@async
---@param sql string
---@param ... any parameters
---@return table? row
function Database:first(sql, ...) end

---Run fn(...) in a transaction: COMMIT when it returns (its results are
---returned), ROLLBACK when it raises (the error is raised again) or the
---call is cancelled. Meanwhile other calls' statements on this connection
---wait. mode: "deferred" (the default), "immediate" or "exclusive".
---@async
---@param mode_or_fn "deferred"|"immediate"|"exclusive"|function
---@param fn? function
---@param ... any fn's arguments
---@return any ...
function Database:transaction(mode_or_fn, fn, ...) end

---Close the connection, for every generation holding it (after the
---statements already asked for); a later open makes a new one.
function Database:close() end

---Where this connection's statements ran and its checkpoints: on_loop and
---on_pool (statements tried on the loop within the step budget, and those
---run on libuv's thread pool), checkpoints (those luamcp ran for a WAL
---file), checkpoint_pending (one is queued).
---@return {on_loop: integer, on_pool: integer, checkpoints: integer, checkpoint_pending: boolean}
function Database:stats() end

---A key-value store of JSON values (strings, numbers, booleans, tables,
---mcp.null), the same API on two backends: in the process (kept across
---reloads, like mcp.state), or in Redis with `--redis URL`, shared by every
---process on it (keys live at luamcp:store:KEY). Callable from a handler or
---mcp.spawn only, on both backends: with Redis each call waits for its
---reply without blocking. While Redis is unavailable the calls raise
---"redis unavailable: ...".
mcp.store = {}

---@class mcp.StoreOptions
---@field ttl? number seconds until the key expires (fractions allowed); without it, it never does

---The value under key, or nil.
---@async
---@param key string
---@return any value
function mcp.store.get(key) end

---Keep value under key (replacing the value and its TTL).
---@async
---@param key string
---@param value any a JSON value (nil: use delete)
---@param opts? mcp.StoreOptions
---@return true
function mcp.store.set(key, value, opts) end

---Add by (default 1) to the integer under key (0 when absent) and return
---the result; the key keeps its TTL. Raises when the value is not an
---integer.
---@async
---@param key string
---@param by? integer
---@return integer value
function mcp.store.incr(key, by) end

---Remove key; whether it was there.
---@async
---@param key string
---@return boolean removed
function mcp.store.delete(key) end

---Compare and set, in one step: when the value under key is expected
---(compared by JSON text; nil: the key is absent), replace it with new (nil:
---remove it) and return true; otherwise change nothing and return false.
---@async
---@param key string
---@param expected any
---@param new any
---@param opts? mcp.StoreOptions
---@return boolean swapped
function mcp.store.cas(key, expected, new, opts) end

---@alias mcp.HttpFailure "dns"|"connect"|"tls"|"timeout"|"too_large"|"redirects"|"protocol"|"invalid"

---@class mcp.HttpOptions
---@field url? string http:// or https:// (required by request; get and post take it as their first argument)
---@field method? string default GET, or POST when there is a body
---@field headers? table<string, string>
---@field body? string
---@field json? any encoded as the body, with content-type: application/json (not with body)
---@field timeout_ms? integer the whole request (default 30 s; connecting gets at most 10 s of it)
---@field max_bytes? integer a larger response fails with "too_large" (default 16 MiB)
---@field max_redirects? integer followed, http and https only (default 5; 0 returns the 3xx itself)
---@field ca_file? string PEM file of the CAs to trust instead of the system's
---@field insecure? boolean skip certificate checks (tests only)
---@field proxy? string a proxy URL (default: HTTPS_PROXY, HTTP_PROXY, ALL_PROXY and NO_PROXY)
---@field stream? async fun(chunk: string) the body as it arrives, in the handler's coroutine (`body` is then "")

---HTTP/1.1 and HTTP/2 over TLS (libcurl, loaded on first use) without
---blocking the loop. Expected failures return nil, a message naming the
---URL, and an mcp.HttpFailure code; an HTTP error status is not a failure.
---A control byte (a NUL, a line break) in the url, a header or the proxy is
---an expected failure, "invalid", and nothing is sent. Misuse (no url,
---another scheme, an unknown option, a header name with ":" or a space)
---raises, as does a runtime without libcurl.
mcp.http = {}

---@class mcp.http.Response
---@field status integer
---@field headers table<string, string> lower-case names; repeated ones joined with ", "
---@field body string decoded from gzip/deflate (and brotli, zstd when libcurl has them)
---@field url string after redirects
local Response = {}

---The body decoded as JSON; raises when it is not JSON.
---@return any
function Response:json() end

---Send a request and wait for its response.
---@async
---@param opts mcp.HttpOptions
---@return mcp.http.Response? response
---@return string? message
---@return mcp.HttpFailure? code
function mcp.http.request(opts) end

---GET url.
---@async
---@param url string
---@param opts? mcp.HttpOptions
---@return mcp.http.Response? response
---@return string? message
---@return mcp.HttpFailure? code
function mcp.http.get(url, opts) end

---POST url, with opts.body (a string) or opts.json (a value to encode).
---@async
---@param url string
---@param opts? mcp.HttpOptions
---@return mcp.http.Response? response
---@return string? message
---@return mcp.HttpFailure? code
function mcp.http.post(url, opts) end

---@class mcp.ClientOptions
---@field command? string[] a program and its arguments, run as a child speaking MCP on stdin/stdout (never through a shell)
---@field url? string a Streamable HTTP endpoint, http:// or https:// (give command or url)
---@field headers? table<string, string> sent with every HTTP request (url only), e.g. authorization
---@field env? table<string, string> the child's whole environment (command only; default: the server's)
---@field cwd? string the child's working folder (command only)
---@field name? string how messages name this server (default: the program or the URL)
---@field timeout_ms? integer each request's own limit, 0 or nil for none (the outer call's deadline applies anyway)
---@field protocol_version? string pin "2026-07-28" (server/discover) or a session version such as "2025-11-25" (initialize); default: 2026-07-28 if the server offers it, else initialize
---@field oauth? {client_id: string, client_secret_env: string, scope?: string, issuer?: string} url only: a token by client credentials (the secret from that environment variable; discovery as luamcp call's). Without it (and without an authorization header) the login `luamcp login URL` kept is used

---Other MCP servers, from a tool (docs/lua-api.md "Calling other servers").
mcp.client = {}

---Connect to another MCP server. Nothing waits here (it may run at load
---time): the handshake comes with the first request, inside a handler or
---mcp.spawn. The same target gives the same connection, and after a
---reload the new generation gets the live connection and its session.
---The program must be one the permissions' exec lists, the host one net
---lists: else it raises "permission denied: ...". Misuse raises.
---@param opts mcp.ClientOptions
---@return mcp.client.Client
function mcp.client.connect(opts) end

---A connection to another MCP server. Each request waits without blocking
---the loop, passes the inner server's progress and logs on to the running
---call (ctx:progress, ctx:log), forwards its questions (elicitation,
---sampling, roots) to the outer client, and is cancelled when the call is.
---Failures return nil, a message and a code ("connect", "ended",
---"timeout", "http", "protocol", "input", or the inner server's JSON-RPC
---error code).
---@class mcp.client.Client
local Client = {}

---Call a tool: its CallToolResult ({content, structuredContent?, isError?}).
---@async
---@param name string
---@param args? table
---@return table? result
---@return string? message
---@return string|integer? code
function Client:call(name, args) end

---Read a resource: its ReadResourceResult ({contents}).
---@async
---@param uri string
---@return table? result
---@return string? message
---@return string|integer? code
function Client:read(uri) end

---Get a prompt: its GetPromptResult ({messages, description?}).
---@async
---@param name string
---@param args? table<string, string>
---@return table? result
---@return string? message
---@return string|integer? code
function Client:prompt(name, args) end

---A whole list, every page followed.
---@async
---@param kind "tools"|"resources"|"resources/templates"|"prompts"
---@return table[]? entries
---@return string? message
---@return string|integer? code
function Client:list(kind) end

---Any other request (completion/complete, ping, an extension's method).
---@async
---@param method string
---@param params? table
---@return table? result
---@return string? message
---@return string|integer? code
function Client:request(method, params) end

---What the handshake learned, or nil before the first request:
---{protocol_version, server = the server/discover or initialize result}.
---@return {protocol_version: string, server: table}?
function Client:server() end

---fn(message) for each notification the server sends outside a request
---(list_changed, resources/updated, ...). It runs outside any call: it must not wait.
---@param fn fun(message: table)
function Client:on_notification(fn) end

---End the connection: a child's stdin is closed (then SIGTERM), an HTTP session is deleted.
function Client:close() end

---@class mcp.MountOptions
---@field prefix? string tools and prompts are served as PREFIX_name ("" or nil: as they are); resource URIs stay
---@field client mcp.client.Client

---Serve another server's tools, resources, templates and prompts as this
---server's own, forwarding each call through client; its list changes
---reach this server's clients as their own list_changed.
---@param opts mcp.MountOptions
function mcp.mount(opts) end

---A tool's own Prometheus metrics, exported at /metrics with luamcp's
---(docs/operating.md). They live in the process: a reload that defines
---the same name again keeps counting. A metric keeps at most 100 label
---sets; past them inc and observe return nil and a message.
mcp.metrics = {}

---@class mcp.metrics.Counter
---@field name string
local Counter = {}

---Add n (default 1, never negative) to the series of these labels.
---@param n? number
---@param labels? table<string, string|number|boolean>
---@return true? ok
---@return string? message when the metric has its 100 label sets already
function Counter:inc(n, labels) end

---@class mcp.metrics.Histogram
---@field name string
local Histogram = {}

---Count v in its bucket of the series of these labels.
---@param v number
---@param labels? table<string, string|number|boolean>
---@return true? ok
---@return string? message when the metric has its 100 label sets already
function Histogram:observe(v, labels) end

---A counter (a total that only goes up). name: [a-zA-Z_:][a-zA-Z0-9_:]*,
---not beginning with luamcp_.
---@param name string
---@param help? string
---@return mcp.metrics.Counter
function mcp.metrics.counter(name, help) end

---A histogram; buckets: increasing upper bounds (default 0.005 ... 10).
---@param name string
---@param help? string
---@param buckets? number[]
---@return mcp.metrics.Histogram
function mcp.metrics.histogram(name, help, buckets) end

---The files that ship with the scripts: from the script folder under
---`luamcp run`, from the program itself once built with `luamcp build`.
---Names are relative to the folder, with "/" between parts; a name with an
---empty, ".." or hidden part raises.
mcp.bundle = {}

---A file's bytes.
---@param name string e.g. "data/words.txt"
---@return string? bytes
---@return string? message when there is no such file (or a link leads out of the folder)
function mcp.bundle.read(name) end

---The files under a folder, at every level, sorted, as read() takes them;
---an empty list when there is no such folder.
---@param dir string e.g. "skills"
---@return string[] names
function mcp.bundle.list(dir) end

-- ---- ctx ------------------------------------------------------------------

---What the request's protocol version offers.
---@class mcp.Features
---@field elicitation boolean
---@field url_elicitation boolean
---@field structured_output boolean
---@field tool_errors_as_results boolean invalid tool arguments are a tool error, not -32602
---@field batches boolean
---@field modern boolean a 2026-07-28 request (no session)
---@field input_required boolean questions to the client end the call with input_required, and the retry runs the handler again
---@field not_found_invalid_params boolean an unknown resource is -32602, not -32002

---@class mcp.SampleParams
---@field messages (string|table)[] a string is a user text message
---@field maxTokens integer
---@field systemPrompt? string
---@field temperature? number
---@field [string] any the other sampling/createMessage params, as given

---@class mcp.SampleResult
---@field role string
---@field content table
---@field model string
---@field stopReason? string

---Form mode: a flat form (an object of string, number, integer, boolean
---and multi-select fields).
---@class mcp.ElicitParams
---@field message string
---@field requestedSchema table

---URL mode (2025-11-25 and later, if the client declared it).
---@class mcp.ElicitUrlParams
---@field mode "url"
---@field message string
---@field url string
---@field elicitationId? string default: a random one

---@class mcp.ElicitResult
---@field action "accept"|"decline"|"cancel"
---@field content? table the answers (accept only), validated against requestedSchema

---@class mcp.Root
---@field uri string
---@field name? string

---The context every handler receives, valid during its request. Once the
---request has ended its fields are nil (cancelled is true) and its methods
---raise. The questions to the client (sample, elicit, roots, ask) work in
---both protocol eras: in a session they send a request to the client and
---wait, raising on the client's error or no answer (--client-timeout); in a
---2026-07-28 request the call ends with input_required and the handler
---runs again with the answers (code before the first question runs again:
---see once); in a call that became a task, they are the task's
---inputRequests. Asking for a capability the client did not declare raises
---at once.
---The caller of a request, from its verified access token (ctx.auth).
---Read-only (writing raises); it encodes as JSON as what it shows, so a
---tool may return it, and mcp.object(ctx.auth) is a copy of it.
---@class mcp.Auth
---@field subject string? the token's sub
---@field client_id string? the OAuth client it was issued to (client_id, azp or cid)
---@field scopes string[] the granted scopes
---@field expires_at integer? exp, seconds since the epoch
---@field claims table the verified claims (the JWT's payload, or the introspection answer)

---@class mcp.Context
---@field id integer|string the request's JSON-RPC id
---@field method string e.g. "tools/call"
---@field protocol_version string
---@field client table? clientInfo (2026-07-28: from the request's _meta)
---@field capabilities table? the client's capabilities (2026-07-28: from the request's _meta)
---@field meta table? the request's _meta, without the 2026-07-28 envelope the fields above give
---@field progress_token string|integer|nil the request's progressToken
---@field task_id string? the MCP task id, when the call runs as a task
---@field features mcp.Features
---@field cancelled boolean true once the request was cancelled or answered
---@field trace_id string? the request's W3C trace id (32 hex digits): its span's when traces are exported (OTEL_EXPORTER_OTLP_ENDPOINT), else the one its traceparent named (params._meta or the HTTP header); nil when neither
---@field auth mcp.Auth? who is calling (a verified OAuth token), read-only; nil when nobody is authenticated (stdio, no --auth-issuer). Never the token itself
local Context = {}

---notifications/message for this request, filtered by the client's level
---(2026-07-28: only when the request's _meta asked for a level). In a task,
---info and above becomes the task's statusMessage. Raises on an unknown
---level.
---@param level mcp.LogLevel
---@param data any sent as JSON
---@param logger? string
function Context:log(level, data, logger) end

---notifications/progress for the request's progressToken (nothing without
---one). Raises unless progress is finite and larger than the last. In a
---task it becomes the statusMessage ("3/10: copying").
---@param progress number
---@param total? number
---@param message? string
function Context:progress(progress, total, message) end

---HTTP: end this request's SSE stream now; the client resumes it with
---Last-Event-ID.
---@return boolean closed false when there is no stream to close (stdio, or a call that became a task)
function Context:close_sse_stream() end

---Ask the client's model (sampling/createMessage).
---@async
---@param params mcp.SampleParams
---@param key? string names the question in a 2026-07-28 input_required result (default "input-N", in asking order)
---@return mcp.SampleResult
function Context:sample(params, key) end

---Ask the user (elicitation/create). An accepted answer is validated
---against requestedSchema (raises if it does not match).
---@async
---@param params mcp.ElicitParams
---@param key? string names the question in a 2026-07-28 input_required result
---@return mcp.ElicitResult
---@overload fun(self: mcp.Context, params: mcp.ElicitUrlParams, key?: string): mcp.ElicitResult
function Context:elicit(params, key) end

---The client's roots (roots/list).
---@async
---@param key? string names the question in a 2026-07-28 input_required result
---@return mcp.Root[]
function Context:roots(key) end

---Several questions at once: `{key = {"elicit"|"sample"|"roots", params}, ...}`.
---In a 2026-07-28 request they go to the client together; in a session
---one after the other.
---@async
---@param questions table<string, table> each `{kind, params}`, kind "elicit", "sample" or "roots"
---@return table<string, table> answers under the same keys
function Context:ask(questions) end

---fn(), run once per request: in a 2026-07-28 request, where the handler
---runs again on every round of questions, later rounds get the first
---round's value back (it must be JSON). The value travels in requestState,
---which the client cannot change (nor reuse for other arguments) but can
---read: keep secrets out of it. In a session it simply calls fn.
---@generic T
---@param key string
---@param fn fun(): T
---@return T
function Context:once(key, fn) end


---@class mcp.AgentSkill
---@field id string
---@field name string
---@field description string
---@field tags? string[]
---@field examples? string[]
---@field inputModes? string[]
---@field outputModes? string[]

---@class mcp.AgentDefinition
---@field name string
---@field description string
---@field version string
---@field provider? {organization: string, url: string}
---@field skills? mcp.AgentSkill[]
---@field streaming? boolean SendStreamingMessage and SubscribeToTask (default true)
---@field push_notifications? boolean the push-notification config methods (default true)
---@field extended_card? table what GetExtendedAgentCard adds to the card
---@field handler fun(message: table, ctx: table): any a message, or a task once ctx:status/artifact/ask is used

---Serve an A2A agent (versions 1.0 and 0.3) beside the MCP tools: its card
---at /.well-known/agent-card.json and A2A's JSON-RPC at /a2a, under
---`luamcp run --http` (docs/lua-api.md "Agents (A2A)").
---@param def mcp.AgentDefinition
function mcp.agent(def) end

---Other A2A agents, from a handler (docs/lua-api.md "Agents (A2A)").
mcp.a2a = {}

---The code a stream that ended before its task did is raised with (an
---rpc error whose data is {dropped = true, taskId = ...}): agent:subscribe
---follows the task again.
mcp.a2a.STREAM_DROPPED = -32603

---@class mcp.a2a.PushConfig
---@field url string where the agent posts the task's events
---@field token? string sent back as X-A2A-Notification-Token
---@field authentication? {scheme: string, credentials: string} sent back as Authorization: <scheme> <credentials>
---@field id? string the config's id (the agent picks one when absent)

---@class mcp.a2a.Agent
---@field card table the agent card, read once and cached
---@field version "1.0"|"0.3" the version spoken (the card's, or opts.version); results are 1.0's shape either way
---@field url string the JSON-RPC endpoint
---@field send fun(self: mcp.a2a.Agent, message: string|table, opts?: {wait: boolean, push: mcp.a2a.PushConfig}): table a message ({text | data | parts, taskId, contextId, ...}; taskId answers a task waiting for input); {message = ...} or {task = ...}; wait = false answers with the task at once
---@field stream fun(self: mcp.a2a.Agent, message: string|table, fn: fun(event: table), opts?: {push: mcp.a2a.PushConfig}): table each event ({task}|{message}|{statusUpdate}|{artifactUpdate}) as it arrives; returns the last; a stream cut before its task ends raises the code STREAM_DROPPED of mcp.a2a
---@field subscribe fun(self: mcp.a2a.Agent, task_id: string, fn: fun(event: table)): table follow a task again (the task first, then its events); returns the last
---@field get fun(self: mcp.a2a.Agent, task_id: string, opts?: {historyLength: integer}): table the task
---@field cancel fun(self: mcp.a2a.Agent, task_id: string): table the task
---@field list fun(self: mcp.a2a.Agent, filter?: {contextId: string, status: string, pageSize: integer, pageToken: string, historyLength: integer, includeArtifacts: boolean}): table {tasks, nextPageToken, ...} (A2A 1.0 only: raises on a 0.3 agent)
---@field set_push fun(self: mcp.a2a.Agent, task_id: string, config: mcp.a2a.PushConfig): table the config as the agent keeps it ({taskId, id, url, token, authentication})
---@field get_push fun(self: mcp.a2a.Agent, task_id: string, config_id: string): table the config
---@field list_push fun(self: mcp.a2a.Agent, task_id: string): table[] the task's configs
---@field delete_push fun(self: mcp.a2a.Agent, task_id: string, config_id: string): boolean
---@field close fun(self: mcp.a2a.Agent) a child agent is stopped; the agent is no longer used

---@class mcp.a2a.ChildAgent
---@field command string|string[] the program, or {program, args...}; "{port}" in an argument becomes the port it listens on
---@field args? string[] the arguments, with command a string
---@field env? table<string, string> its whole environment ("{port}" filled in), with PORT added; without it the server's
---@field cwd? string
---@field version? "1.0"|"0.3"
---@field headers? table<string, string>
---@field timeout_ms? integer how long it has to serve its card (default 30000)

---Connect to an agent by its URL (its card read and cached; the host must
---be one the permissions' net lists), or run one as a child process
---(`{command = ...}`: the program must be one the permissions' exec lists;
---it is told a loopback port, and stopped by agent:close() or with the
---generation). opts: version ("1.0" or "0.3", else the card's choice),
---headers.
---@param url string|mcp.a2a.ChildAgent
---@param opts? {version: "1.0"|"0.3", headers: table<string, string>}
---@return mcp.a2a.Agent
function mcp.a2a.connect(url, opts) end

return mcp
