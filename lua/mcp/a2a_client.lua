-- mcp.a2a: calling A2A agents from a script (docs/lua-api.md, "Agents
-- (A2A)"). An agent by URL (its card read once per generation) or a
-- program started as a child process that serves one on a loopback port;
-- then JSON-RPC over mcp.http, in A2A 1.0 or 0.3 as the card offers (or
-- opts.version forces). Scripts see one shape whatever the version, 1.0's
-- (lua/mcp/a2a_shapes.lua converts 0.3's at the edge). The script's net
-- permission judges the agent's URL as it judges any request, its exec
-- permission the child's program (mcp.client's rules).

local core = require "mcp.core"
local http = require "mcp.http"
local permissions = require "mcp.permissions"
local shapes = require "mcp.a2a_shapes"

local M = {}
local cards = {} -- base URL and the version asked -> card: read once per generation

-- What a stream that ended before its task did is raised with (an rpc
-- error, so err.data names the task to subscribe to again).
local STREAM_DROPPED = -32603
M.STREAM_DROPPED = STREAM_DROPPED

-- Each call's JSON-RPC method, per version (0.3 has no ListTasks).
local METHODS = {
  send = { ["1.0"] = "SendMessage", ["0.3"] = "message/send" },
  stream = { ["1.0"] = "SendStreamingMessage", ["0.3"] = "message/stream" },
  get = { ["1.0"] = "GetTask", ["0.3"] = "tasks/get" },
  cancel = { ["1.0"] = "CancelTask", ["0.3"] = "tasks/cancel" },
  subscribe = { ["1.0"] = "SubscribeToTask", ["0.3"] = "tasks/resubscribe" },
  list = { ["1.0"] = "ListTasks" },
  set_push = { ["1.0"] = "CreateTaskPushNotificationConfig", ["0.3"] = "tasks/pushNotificationConfig/set" },
  get_push = { ["1.0"] = "GetTaskPushNotificationConfig", ["0.3"] = "tasks/pushNotificationConfig/get" },
  list_push = { ["1.0"] = "ListTaskPushNotificationConfigs", ["0.3"] = "tasks/pushNotificationConfig/list" },
  delete_push = { ["1.0"] = "DeleteTaskPushNotificationConfig", ["0.3"] = "tasks/pushNotificationConfig/delete" },
}

local CHILD_CARD_WAIT_MS = 30000 -- how long a child has to serve its card
local STDERR_TAIL = 2000         -- bytes of a child's stderr an error quotes

local Agent = {}
Agent.__index = Agent

local function fail(what, err, level) error(("mcp.a2a: %s: %s"):format(what, tostring(err)), level or 3) end

-- The interface to speak: version and URL, from the card (1.0's
-- supportedInterfaces, else 0.3's url), or nil and why.
local function pick(card, forced, base)
  local by_version = {}
  for _, i in ipairs(type(card.supportedInterfaces) == "table" and card.supportedInterfaces or {}) do
    if type(i) == "table" and i.protocolBinding == "JSONRPC" and type(i.url) == "string" then
      local v = tostring(i.protocolVersion or ""):match("^(%d+%.%d+)")
      if v and not by_version[v] then by_version[v] = i.url end
    end
  end
  if forced ~= "0.3" and by_version["1.0"] then return "1.0", by_version["1.0"] end
  if forced == "1.0" then return nil, "the card offers no JSON-RPC interface of A2A 1.0" end
  if by_version["0.3"] then return "0.3", by_version["0.3"] end
  local transport = card.preferredTransport
  if type(card.url) == "string" and (transport == nil or transport == "JSONRPC") then return "0.3", card.url end
  for _, i in ipairs(type(card.additionalInterfaces) == "table" and card.additionalInterfaces or {}) do
    if type(i) == "table" and i.transport == "JSONRPC" and type(i.url) == "string" then return "0.3", i.url end
  end
  return nil, ("the card at %s offers no JSON-RPC interface (1.0 or 0.3)"):format(base)
end

local function read_card(base, version, headers, timeout_ms)
  local key = base .. " " .. (version or "")
  if cards[key] then return cards[key] end
  local h = { ["a2a-version"] = version or "1.0" } -- an agent serving both gives that version's card
  for k, v in pairs(headers) do h[k] = v end
  local r, err = http.get(base .. "/.well-known/agent-card.json", { headers = h, timeout_ms = timeout_ms })
  if not r then return nil, err end
  if r.status ~= 200 then return nil, "HTTP " .. r.status end
  local card = core.json_decode(r.body)
  if type(card) ~= "table" then return nil, "not JSON" end
  cards[key] = card
  return card
end

local function check_options(opts, level)
  if opts.version ~= nil and opts.version ~= "1.0" and opts.version ~= "0.3" then
    error("mcp.a2a.connect: version is \"1.0\" or \"0.3\"", level + 1)
  end
  if opts.headers ~= nil and type(opts.headers) ~= "table" then
    error("mcp.a2a.connect: headers is a table of names to values", level + 1)
  end
end

local function connect_url(url, opts, level)
  local base = url:gsub("/$", "")
  local headers = opts.headers or {}
  local card, err = read_card(base, opts.version, headers)
  if not card then fail("reading the card", err, level + 1) end
  local version, endpoint = pick(card, opts.version, base)
  if not version then fail("connect", endpoint, level + 1) end
  return setmetatable({ card = card, url = endpoint, version = version, headers = headers, next_id = 0 }, Agent)
end

-- ---- An agent as a child process -------------------------------------------

local function child_argv(opts, level)
  local argv
  if type(opts.command) == "string" then
    argv = { opts.command }
    if opts.args ~= nil and type(opts.args) ~= "table" then error("mcp.a2a.connect: args is a list of strings", level + 1) end
    for _, a in ipairs(opts.args or {}) do argv[#argv + 1] = a end
  elseif type(opts.command) == "table" and #opts.command > 0 then
    argv = table.move(opts.command, 1, #opts.command, 1, {})
  else
    error("mcp.a2a.connect: command is a program (with args) or a list {program, args...}", level + 1)
  end
  for i, a in ipairs(argv) do
    if type(a) ~= "string" then error(("mcp.a2a.connect: command[%d] must be a string"):format(i), level + 1) end
  end
  return argv
end

-- Start the program with a loopback port to listen on ({port} in its
-- arguments and its env values; PORT in env when env is given), as a
-- background task of this generation: closing the agent cancels it, and
-- mcp.exec stops the child with it (or with the generation).
local function start_child(opts, level)
  local argv = child_argv(opts, level + 1)
  if opts.env ~= nil and type(opts.env) ~= "table" then error("mcp.a2a.connect: env is a table of names to values", level + 1) end
  -- judged before anything runs, with mcp.exec's check and message
  local program, message = permissions.check_exec(argv[1])
  if not program then error(message, level + 1) end
  local port, err = core.free_port()
  if not port then fail("starting " .. argv[1], err, level + 1) end
  local function fill(s) return (s:gsub("{port}", tostring(math.tointeger(port)))) end
  for i, a in ipairs(argv) do argv[i] = fill(a) end
  local env
  if opts.env then
    env = { PORT = tostring(math.tointeger(port)) }
    for k, v in pairs(opts.env) do env[k] = fill(tostring(v)) end
  end
  local child = { argv = argv, stderr = "", port = port }
  child.handle = core.background(function()
    local r, exec_err = core.exec { argv = argv, file = program ~= argv[1] and program or nil, env = env, cwd = opts.cwd,
      stream = function(chunk, which)
        if which == "stderr" then child.stderr = (child.stderr .. chunk):sub(-STDERR_TAIL) end
      end }
    child.exited = r and ("exit code %s%s"):format(tostring(r.code), r.signal and r.signal ~= 0 and (", signal " .. r.signal) or "")
      or tostring(exec_err)
  end)
  return child
end

-- The card the child serves, once it does: bounded by opts.timeout_ms;
-- a child that exits first, or never answers, is an error quoting the end
-- of its stderr.
local function wait_for_card(child, opts, level)
  local base = "http://127.0.0.1:" .. math.tointeger(child.port)
  local wait_ms = opts.timeout_ms or CHILD_CARD_WAIT_MS
  local deadline = os.time() + math.max(1, math.ceil(wait_ms / 1000))
  local function give_up(why)
    child.handle:cancel()
    local tail = child.stderr ~= "" and ("; its stderr ends:\n" .. child.stderr) or "; it wrote nothing on stderr"
    fail(("starting %s"):format(child.argv[1]), why .. tail, level + 1)
  end
  while true do
    if child.exited then give_up("it ended (" .. child.exited .. ") before serving an agent card at " .. base) end
    local card = read_card(base, opts.version, opts.headers or {}, 2000)
    if card then return base end
    if os.time() > deadline then
      give_up(("no agent card at %s after %d ms"):format(base, wait_ms))
    end
    core.sleep(100)
  end
end

--- mcp.a2a.connect(url [, {headers, version}]) -> agent (its card read and
--- cached); mcp.a2a.connect{command, args, env, cwd, version, headers,
--- timeout_ms} -> an agent run as a child process.
function M.connect(target, opts)
  if type(target) == "table" then
    opts = target
    check_options(opts, 2)
    if opts.command == nil then error("mcp.a2a.connect{command = ...}: a program to run (or give a URL)", 2) end
    local child = start_child(opts, 2)
    local base = wait_for_card(child, opts, 2)
    local agent = connect_url(base, opts, 2)
    agent.child = child
    return agent
  end
  if type(target) ~= "string" or not target:match("^https?://") then
    error("mcp.a2a.connect(url): an http(s) URL, or {command = ...}", 2)
  end
  opts = opts or {}
  check_options(opts, 2)
  return connect_url(target, opts, 2)
end

--- agent:close(): a child agent is stopped; any agent is no longer used.
function Agent:close()
  if self.child then self.child.handle:cancel() end
  self.closed = true
end

-- ---- Requests ---------------------------------------------------------------

local function method_of(self, call)
  if self.closed then error("mcp.a2a: the agent was closed (agent:close())", 3) end
  local m = METHODS[call][self.version]
  if not m then
    error(("mcp.a2a: agent:%s needs A2A 1.0, and this agent speaks %s"):format(call, self.version), 3)
  end
  return m
end

local function headers(self)
  local h = { ["a2a-version"] = self.version, accept = "application/json, text/event-stream" }
  for k, v in pairs(self.headers) do h[k] = v end
  return h
end

local function request_body(self, method, params)
  self.next_id = self.next_id + 1
  return { jsonrpc = "2.0", id = self.next_id, method = method, params = params }
end

-- The JSON-RPC answer's result, or the agent's error raised as an rpc
-- error with its A2A code.
local function answer(method, r, text)
  local body = core.json_decode(text)
  if type(body) ~= "table" then fail(method, "HTTP " .. r.status .. ", not JSON", 4) end
  if type(body.error) == "table" then
    core.rpc_error(math.tointeger(body.error.code) or -32603, tostring(body.error.message), body.error.data)
  end
  return body.result
end

function Agent:_call(call, params)
  local method = method_of(self, call)
  local r, err = http.request { method = "POST", url = self.url, headers = headers(self),
                                json = request_body(self, method, params) }
  if not r then fail(method, err) end
  return answer(method, r, r.body)
end

-- A message as the caller gives it: a string, or {text | data | parts,
-- taskId, contextId, metadata, referenceTaskIds} (parts in 1.0's shape).
local function message(m, v)
  if type(m) == "string" then m = { text = m } end
  if type(m) ~= "table" then error("mcp.a2a: a message is a string or {text | data | parts, taskId, ...}", 4) end
  local parts = m.parts or core.array { m.data ~= nil and { data = m.data } or { text = tostring(m.text or "") } }
  local out = { messageId = m.messageId or core.random_hex(16), role = "ROLE_USER", taskId = m.taskId,
                contextId = m.contextId, metadata = m.metadata, referenceTaskIds = m.referenceTaskIds,
                parts = core.array(table.move(parts, 1, #parts, 1, {})) }
  return shapes.message_out(out, v)
end

-- A push config as the caller gives it ({url, token, authentication =
-- {scheme, credentials}, id}), for the task.
local function push_config(task_id, c)
  if type(c) ~= "table" or type(c.url) ~= "string" then error("mcp.a2a: a push config is {url = ..., token = ...}", 4) end
  return { taskId = task_id, id = c.id, url = c.url, token = c.token, authentication = c.authentication }
end

-- A result or stream event as the model's {task}|{message}|... .
local function event_in(self, e)
  if self.version == "0.3" then return shapes.event_from_v03(e) end
  return e
end

local function task_in(self, t)
  if self.version == "0.3" then return shapes.task_from_v03(t) end
  return t
end

--- agent:send(text | {text|data|parts, taskId, contextId}, {wait = false,
--- push = {url, token, authentication}}) -> {message} | {task}
function Agent:send(m, opts)
  opts = opts or {}
  local params
  if self.version == "0.3" then
    params = { message = message(m, "0.3"), configuration = { blocking = opts.wait ~= false,
      pushNotificationConfig = opts.push and shapes.push_config_v03(push_config(nil, opts.push)) } }
  else
    params = { message = message(m, "1.0"), configuration = { returnImmediately = opts.wait == false,
      taskPushNotificationConfig = opts.push and push_config(nil, opts.push) } }
  end
  return event_in(self, self:_call("send", params))
end

--- agent:get(task_id [, {historyLength}]) -> task
function Agent:get(id, opts)
  return task_in(self, self:_call("get", { id = id, historyLength = opts and opts.historyLength }))
end

--- agent:cancel(task_id) -> task
function Agent:cancel(id) return task_in(self, self:_call("cancel", { id = id })) end

--- agent:list{contextId, status, pageSize, pageToken, historyLength,
--- includeArtifacts} -> {tasks, nextPageToken, ...} (A2A 1.0 only)
function Agent:list(filter)
  filter = filter or {}
  local params = {}
  for k, v in pairs(filter) do params[k] = v end
  if params.status then params.status = shapes.state_name(params.status) or params.status end
  return self:_call("list", params)
end

--- agent:set_push(task_id, {url, token, authentication = {scheme,
--- credentials}, id}) -> the config as the agent keeps it
function Agent:set_push(task_id, c)
  if self.version == "0.3" then
    return shapes.push_config_from_v03(self:_call("set_push",
      { taskId = task_id, pushNotificationConfig = shapes.push_config_v03(push_config(task_id, c)) }))
  end
  return self:_call("set_push", push_config(task_id, c))
end

function Agent:get_push(task_id, config_id)
  if self.version == "0.3" then
    return shapes.push_config_from_v03(self:_call("get_push", { id = task_id, pushNotificationConfigId = config_id }))
  end
  return self:_call("get_push", { taskId = task_id, id = config_id })
end

--- agent:list_push(task_id) -> a list of configs
function Agent:list_push(task_id)
  if self.version == "0.3" then
    local out = {}
    for i, r in ipairs(self:_call("list_push", { id = task_id }) or {}) do out[i] = shapes.push_config_from_v03(r) end
    return out
  end
  local r = self:_call("list_push", { taskId = task_id })
  return r and r.configs or {}
end

function Agent:delete_push(task_id, config_id)
  if self.version == "0.3" then
    self:_call("delete_push", { id = task_id, pushNotificationConfigId = config_id })
  else
    self:_call("delete_push", { taskId = task_id, id = config_id })
  end
  return true
end

-- ---- Streams ------------------------------------------------------------------

local function task_of(e)
  return e.task and e.task.id or e.statusUpdate and e.statusUpdate.taskId
    or e.artifactUpdate and e.artifactUpdate.taskId or nil
end

local function state_of(e)
  return e.task and e.task.status and e.task.status.state or e.statusUpdate and e.statusUpdate.status.state or nil
end

-- The last event a stream has: a message, or a task ended or waiting.
local function is_final(e)
  if e.message then return true end
  local s = state_of(e)
  return s ~= nil and (shapes.TERMINAL[s] or shapes.INTERRUPTED[s]) or false
end

-- POST a streaming call; fn(event) for each event (the model's shape), the
-- final one returned. A stream that ends before its final event (the
-- connection cut, the agent gone) raises STREAM_DROPPED with data =
-- {dropped = true, taskId}: agent:subscribe(taskId, fn) follows the task
-- again.
function Agent:_follow(call, params, fn)
  local method = method_of(self, call)
  local pending, last, task_id, agent_error = "", nil, nil, nil
  local function on_event(block)
    local data = {}
    for line in block:gmatch("[^\r\n]+") do
      local d = line:match("^data: ?(.*)$")
      if d then data[#data + 1] = d end
    end
    if #data == 0 then return end
    local body = core.json_decode(table.concat(data, "\n"))
    if type(body) ~= "table" then return end
    if type(body.error) == "table" then agent_error = body.error; return end
    if body.result == nil then return end
    local e = event_in(self, body.result)
    task_id = task_id or task_of(e)
    last = e
    if fn then fn(e) end
  end
  local r, err = http.request { method = "POST", url = self.url, headers = headers(self),
    json = request_body(self, method, params), timeout_ms = 0, -- as long as the task: the call's deadline bounds it
    stream = function(chunk)
      pending = pending .. chunk
      while true do
        local block, rest = pending:match("^(.-)\r?\n\r?\n(.*)$")
        if not block then break end
        pending = rest
        on_event(block)
      end
    end }
  -- An answer without a stream (the agent refused): JSON-RPC as any call's.
  if r and not tostring(r.headers["content-type"] or ""):find("text/event-stream", 1, true) then
    local result = answer(method, r, pending)
    return result and event_in(self, result)
  end
  if agent_error then
    core.rpc_error(math.tointeger(agent_error.code) or -32603, tostring(agent_error.message), agent_error.data)
  end
  if last and is_final(last) then return last end
  if not task_id then fail(method, err or "the stream ended before any event") end
  core.rpc_error(STREAM_DROPPED, ("mcp.a2a: the stream of task %s ended before the task did (%s%s); "
    .. "agent:subscribe(\"%s\", fn) follows it again"):format(task_id, tostring(state_of(last) or "working"),
    err and ", " .. err or "", task_id), { dropped = true, taskId = task_id })
end

--- agent:stream(message, fn [, {push}]): fn(event) for each event as it
--- arrives ({task}|{message}|{statusUpdate}|{artifactUpdate}); returns
--- the last.
function Agent:stream(m, fn, opts)
  opts = opts or {}
  local params
  if self.version == "0.3" then
    params = { message = message(m, "0.3"), configuration = opts.push
      and { pushNotificationConfig = shapes.push_config_v03(push_config(nil, opts.push)) } or nil }
  else
    params = { message = message(m, "1.0"), configuration = opts.push
      and { taskPushNotificationConfig = push_config(nil, opts.push) } or nil }
  end
  return self:_follow("stream", params, fn)
end

--- agent:subscribe(task_id, fn): follow a task again (after a dropped
--- stream): the task as it is first, then its events; returns the last.
function Agent:subscribe(task_id, fn)
  return self:_follow("subscribe", { id = task_id }, fn)
end

return M
