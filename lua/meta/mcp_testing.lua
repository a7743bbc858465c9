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
---@field auth? mcp.testing.Auth who every request of this client comes from (it owns the session), as if it carried a verified OAuth token

---Any caller, as a verified OAuth token would make it: ctx.auth, the
---primitives' scopes and everything bound to the caller (MCP tasks,
---requestState, subscriptions) see it. The principal it is bound to is
---"ISSUER sub:SUBJECT", or "ISSUER client:CLIENT_ID" without a subject.
---@class mcp.testing.Auth
---@field subject? string sub (a subject or a client_id is needed)
---@field client_id? string
---@field scopes? string[]|string the granted scopes (a list, or space-separated)
---@field expires_at? integer exp, seconds since the epoch
---@field claims? table more claims (iss, sub, client_id, scope and exp are made from the fields above)
---@field issuer? string iss (default "https://mcp.testing")

---What every request method takes last.
---@class mcp.testing.RequestOptions
---@field auth? mcp.testing.Auth who this one request comes from; on a 2025 session only its own caller (over HTTP another gets 404), any with modern = true
---@field modern? boolean send it as a 2026-07-28 request (the protocol envelope in _meta, no session)
---@field capabilities? table the client capabilities a modern request declares, e.g. {extensions = {["io.modelcontextprotocol/tasks"] = {}}}

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
---@param options? mcp.testing.RequestOptions
---@return {content: table[], structuredContent?: table, isError?: boolean}
function Server:call(name, arguments, options) end

--- resources/read: {contents = {...}}; an unknown resource raises (-32002).
---@param uri string
---@param options? mcp.testing.RequestOptions
---@return {contents: table[]}
function Server:read(uri, options) end

--- prompts/get with string arguments: {messages = {...}, description?}.
---@param name string
---@param arguments? table<string, string>
---@param options? mcp.testing.RequestOptions
---@return {messages: table[], description?: string}
function Server:prompt(name, arguments, options) end

--- completion/complete.
---@param ref {type: "ref/prompt", name: string}|{type: "ref/resource", uri: string}
---@param argument {name: string, value: string}
---@param context? {arguments?: table<string, string>}
---@param options? mcp.testing.RequestOptions
---@return {completion: {values: string[], total?: integer, hasMore?: boolean}}
function Server:complete(ref, argument, context, options) end

--- Every item of a list, across pages.
---@param kind "tools"|"resources"|"resources/templates"|"prompts"
---@return table[]
function Server:list(kind) end

--- resources/subscribe: resources/updated notifications for uri land in
--- notifications.
---@param uri string
---@param options? mcp.testing.RequestOptions
---@return table
function Server:subscribe(uri, options) end

--- subscriptions/listen (2026-07-28): open a subscription and wait for its
--- acknowledgment. Returns the notifications object the server agreed to
--- (the task ids and resource URIs it will follow for this caller) and the
--- subscription's id; its notifications land in notifications.
---@param filter {taskIds?: string[], resourceSubscriptions?: string[], toolsListChanged?: boolean, promptsListChanged?: boolean, resourcesListChanged?: boolean}
---@param options? mcp.testing.RequestOptions
---@return table agreed
---@return integer id
function Server:listen(filter, options) end

--- notifications/cancelled for a request in flight (a listen's id).
---@param id integer
function Server:cancel(id) end

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
---@param options? mcp.testing.RequestOptions
---@return table|nil result
---@return mcp.testing.Error|nil error
function Server:request(method, params, options) end

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
