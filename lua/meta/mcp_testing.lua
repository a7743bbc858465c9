---@meta mcp.testing
-- LuaLS definitions of mcp.testing, the in-process client that specs run
-- by `luamcp test` use (lua/mcp/testing.lua, on lua/mcp/client.lua).

---@class mcp.testing
local testing = {}

---@class mcp.testing.Options
---@field elicit? fun(params: table): table answers elicitation/create, e.g. {action = "accept", content = {...}}
---@field sample? fun(params: table): table answers sampling/createMessage: {role, content, model}
---@field roots? (string|{uri: string, name?: string})[]|fun(): (string|{uri: string, name?: string})[] answers roots/list
---@field timeout_ms? integer how long a request waits for its answer (default 60000)
---@field server? {timeout_ms?: integer, client_timeout_ms?: integer, page_size?: integer, memory_limit_mb?: integer} run's options
---@field on_notification? fun(message: table) called for each notification as it arrives

---@class mcp.testing.Error
---@field method string the request that failed
---@field code integer the JSON-RPC error code (-32000: the transport failed)
---@field message string
---@field data any

---@class mcp.testing.Server
---@field notifications table[] every notification received, in order: {method, params}
---@field server_info {name: string, version: string, title?: string} what initialize said
---@field capabilities table the server's capabilities
---@field instructions string|nil
---@field protocol_version string the negotiated version
local Server = {}

--- Load the scripts at path (a file or a folder) as `luamcp run` does, in
--- this process, and initialize a session with them. A loading error
--- raises, with the script's file and line.
---@param path string
---@param options? mcp.testing.Options
---@return mcp.testing.Server
function testing.server(path, options) end

--- The text of a result's text content (a tool result, a resource's
--- contents, or a prompt's messages), joined with newlines.
---@param result table
---@return string
function testing.text(result) end

--- JSON as the server encodes it: encode, decode, array, object.
testing.json = {}

--- JSON null.
---@type lightuserdata
testing.null = nil

--- tools/call: the result (a tool error is a result with isError); a
--- JSON-RPC error raises an mcp.testing.Error.
---@param name string
---@param arguments? table
---@return {content: table[], structuredContent?: table, isError?: boolean}
function Server:call(name, arguments) end

--- resources/read: {contents = {...}}; an unknown resource raises (-32002).
---@param uri string
---@return {contents: table[]}
function Server:read(uri) end

--- prompts/get with string arguments: {messages = {...}, description?}.
---@param name string
---@param arguments? table<string, string>
---@return {messages: table[], description?: string}
function Server:prompt(name, arguments) end

--- completion/complete.
---@param ref {type: "ref/prompt", name: string}|{type: "ref/resource", uri: string}
---@param argument {name: string, value: string}
---@param context? {arguments?: table<string, string>}
---@return {completion: {values: string[], total?: integer, hasMore?: boolean}}
function Server:complete(ref, argument, context) end

--- Every item of a list, across pages.
---@param kind "tools"|"resources"|"resources/templates"|"prompts"
---@return table[]
function Server:list(kind) end

--- resources/subscribe: resources/updated notifications for uri land in
--- notifications.
---@param uri string
---@return table
function Server:subscribe(uri) end

--- logging/setLevel: the level of the log notifications the server sends.
---@param level "debug"|"info"|"notice"|"warning"|"error"|"critical"|"alert"|"emergency"
---@return table
function Server:set_log_level(level) end

--- The tools the server lists, as a map by name, not a list:
--- `t:tools().add.inputSchema`, `t:tools()["add"] ~= nil`. In order, as a
--- list: t:list("tools").
---@return table<string, table>
function Server:tools() end

--- The resources the server lists, by URI.
---@return table<string, table>
function Server:resources() end

--- The resource templates the server lists, by URI template.
---@return table<string, table>
function Server:templates() end

--- The prompts the server lists, by name.
---@return table<string, table>
function Server:prompts() end

--- Reload the scripts in place, as `luamcp dev` does on a save; a failed
--- reload raises and the previous version keeps serving.
---@return true
function Server:reload() end

--- The notifications received so far with this method (all without one).
---@param method? string
---@return table[]
function Server:received(method) end

--- Forget the notifications received so far.
function Server:clear() end

--- Any request: the result, or nil and the error (never raises).
---@param method string
---@param params? table
---@return table|nil result
---@return mcp.testing.Error|nil error
function Server:request(method, params) end

--- Send a notification to the server.
---@param method string
---@param params? table
function Server:notify(method, params) end

--- Handle what has already arrived (notifications, the server's
--- requests) without waiting.
function Server:drain() end

--- End the session and free the server (calls in flight are cancelled).
function Server:close() end

return testing
