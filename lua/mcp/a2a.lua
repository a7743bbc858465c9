-- mcp.a2a: an agent (A2A, Agent2Agent) served from the script, beside its
-- MCP tools, by `luamcp run --http`: the card at
-- /.well-known/agent-card.json and the JSON-RPC binding at /a2a, in A2A
-- 1.0 and 0.3 (runtime/transport/http_a2a.c does the HTTP and hands every
-- request here, in a coroutine of its own, through mcp._foreign_dispatch).
--
-- One model inside, 1.0's (proto JSON: parts {text}|{data}|{url}|{raw},
-- "TASK_STATE_WORKING", "ROLE_AGENT"); 0.3's shapes (kind, "working",
-- "agent", final) are made at the edge, per request. An agent's task is a
-- background task (core.background) running the script's handler: it
-- outlives the request that created it, ctx:ask waits in it for the next
-- message (as a tool's ctx:elicit waits for its answer), and CancelTask
-- stops it as a cancelled call is stopped (its timers, transfers, child
-- processes with it). Requests that wait for a task (a blocking
-- SendMessage, a stream) wait on its signal (core.signal).

local core = require "mcp.core"

local array, object = core.array, core.object
local rpc_error = core.rpc_error
-- The ctx methods a request calls, read once: ctx:_header's lookup runs
-- ctx's __index (a C function) before the method, on every request.
local ctx_header, ctx_principal, ctx_handle = core.ctx_methods._header, core.ctx_methods._principal,
  core.ctx_methods._handle
-- core.array's marker, set here directly on the tables a request makes
-- fresh (a C call per table is a tenth of a small SendMessage's cost).
local ARRAY_MT = getmetatable(array())
-- What a request without params.configuration reads (never written).
local NO_CONFIGURATION = {}
-- A task's lists start as this one empty table, shared and never written
-- (most exchanges are one message answered by one, with no stream, push
-- receiver or artifact); the code that adds the first item makes the
-- task its own list (own_list). A write to it is a mistake, and fails.
local NONE = setmetatable({}, { __newindex = function() error("a2a: a task's shared empty list written to", 2) end })
-- What emit is given for an event nobody can read (t has no stream or
-- push receiver), instead of an event made for nobody.
local UNREAD_EVENT = {}
local function own_list(t, field)
  local list = t[field]
  if list == NONE then list = {}; t[field] = list end
  return list
end

local M = {}

-- A2A's error codes (both versions).
local TASK_NOT_FOUND, TASK_NOT_CANCELABLE, PUSH_NOT_SUPPORTED = -32001, -32002, -32003
local UNSUPPORTED_OPERATION, EXTENDED_CARD_NOT_CONFIGURED, VERSION_NOT_SUPPORTED = -32004, -32007, -32009
local METHOD_NOT_FOUND, INVALID_PARAMS = -32601, -32602
M.errors = {
  TASK_NOT_FOUND = TASK_NOT_FOUND, TASK_NOT_CANCELABLE = TASK_NOT_CANCELABLE,
  PUSH_NOTIFICATION_NOT_SUPPORTED = PUSH_NOT_SUPPORTED, UNSUPPORTED_OPERATION = UNSUPPORTED_OPERATION,
  EXTENDED_CARD_NOT_CONFIGURED = EXTENDED_CARD_NOT_CONFIGURED, VERSION_NOT_SUPPORTED = VERSION_NOT_SUPPORTED,
}

-- Bounds: what one caller's requests can make the server keep.
local MAX_TASKS = 1000          -- kept; the oldest finished go first, a new one is refused when all run
local MAX_KEPT_BYTES = 64 << 20 -- what all kept tasks hold (messages, artifacts, as JSON): the same rule
local MAX_PARTS = 64            -- parts in one message or artifact
local MAX_HISTORY = 100         -- messages kept per task
local MAX_STREAM_QUEUE = 256    -- events waiting for one stream's reader: past it the stream ends
local MAX_PUSH_QUEUE = 32       -- notifications waiting for one receiver: past it the oldest go
local MAX_PUSH_CONFIGS = 8      -- per task
local PUSH_TRIES, PUSH_TIMEOUT_MS = 3, 5000

local agent         -- mcp.agent{...}, checked
local tasks = {}    -- id -> task record
local order = {}    -- ids, oldest first (ListTasks, and which to forget)
local kept_bytes = 0 -- what the kept tasks hold (task.bytes summed)
local created_seq = 0 -- tasks made in this generation (their order within a second)

-- ---- States and shapes ----------------------------------------------------

local shapes = require "mcp.a2a_shapes"
local TERMINAL, INTERRUPTED = shapes.TERMINAL, shapes.INTERRUPTED
local state_name, state_v03 = shapes.state_name, shapes.state_v03
local part_in, part_out, message_out = shapes.part_in, shapes.part_out, shapes.message_out

local function now_iso()
  local ms = core.now_ms and core.now_ms() or 0
  return os.date("!%Y-%m-%dT%H:%M:%S", os.time()) .. (".%03dZ"):format(math.floor(ms % 1000))
end

local function parts_in(list, v, what)
  if type(list) ~= "table" or #list == 0 then rpc_error(INVALID_PARAMS, "Invalid params: " .. what .. ".parts must be a non-empty array") end
  if #list > MAX_PARTS then rpc_error(INVALID_PARAMS, ("Invalid params: at most %d parts"):format(MAX_PARTS)) end
  local out
  for i, p in ipairs(list) do
    local part, err = part_in(p, v)
    if not part then rpc_error(INVALID_PARAMS, ("Invalid params: %s.parts[%d]%s"):format(what, i, err)) end
    if i == 1 then out = { part } else out[i] = part end -- made with its first part: most messages have one
  end
  return setmetatable(out or {}, ARRAY_MT)
end

local function message_in(m, v)
  if type(m) ~= "table" then rpc_error(INVALID_PARAMS, "Invalid params: message is required") end
  if type(m.messageId) ~= "string" or m.messageId == "" then rpc_error(INVALID_PARAMS, "Invalid params: message.messageId is required") end
  if m.taskId ~= nil and type(m.taskId) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: message.taskId must be a string") end
  if m.contextId ~= nil and type(m.contextId) ~= "string" then rpc_error(INVALID_PARAMS, "Invalid params: message.contextId must be a string") end
  local parts = parts_in(m.parts, v, "message")
  local metadata, references, extensions = m.metadata, m.referenceTaskIds, m.extensions
  if metadata == nil and references == nil and extensions == nil then
    -- most messages: without the members they lack (a nil member costs a
    -- store); taskId and contextId stay named, for the room begin sets them in
    return { messageId = m.messageId, role = "ROLE_USER", parts = parts, taskId = m.taskId, contextId = m.contextId }
  end
  return { messageId = m.messageId, role = "ROLE_USER", parts = parts, taskId = m.taskId, contextId = m.contextId,
           metadata = metadata, referenceTaskIds = references, extensions = extensions }
end

local function artifact_out(a, v)
  local out = { artifactId = a.artifactId, name = a.name, description = a.description, metadata = a.metadata,
                parts = array() }
  for i, p in ipairs(a.parts) do out.parts[i] = part_out(p, v) end
  return out
end

local function status_out(t, v)
  return { state = v == "0.3" and state_v03(t.state) or t.state, message = message_out(t.status_message, v),
           timestamp = t.timestamp }
end

local function task_out(t, v, history_length)
  local out = { id = t.id, contextId = t.context_id, status = status_out(t, v), artifacts = array(),
                history = array(), metadata = t.metadata }
  if v == "0.3" then out.kind = "task" end
  for i, a in ipairs(t.artifacts) do out.artifacts[i] = artifact_out(a, v) end
  local from = 1
  if type(history_length) == "number" and history_length >= 0 then from = #t.history - history_length + 1 end
  for i = math.max(from, 1), #t.history do out.history[#out.history + 1] = message_out(t.history[i], v) end
  return out
end

-- An event of the model ({task}|{message}|{statusUpdate}|{artifactUpdate})
-- as version v sends it.
local function event_out(t, e, v)
  if e.task then return v == "0.3" and task_out(t, v) or { task = task_out(t, v) } end
  if e.message then return v == "0.3" and message_out(e.message, v) or { message = message_out(e.message, v) } end
  if e.statusUpdate then
    local s = e.statusUpdate
    local st = { state = v == "0.3" and state_v03(s.state) or s.state, message = message_out(s.message, v),
                 timestamp = s.timestamp }
    if v == "0.3" then
      return { kind = "status-update", taskId = t.id, contextId = t.context_id, status = st,
               final = TERMINAL[s.state] or INTERRUPTED[s.state] or false }
    end
    return { statusUpdate = { taskId = t.id, contextId = t.context_id, status = st } }
  end
  local a = e.artifactUpdate
  local out = { taskId = t.id, contextId = t.context_id, artifact = artifact_out(a.artifact, v),
                append = a.append or false, lastChunk = a.lastChunk or false }
  if v == "0.3" then out.kind = "artifact-update"; return out end
  return { artifactUpdate = out }
end

local function is_final(t, e)
  if e.message then return true end
  local s = e.statusUpdate and e.statusUpdate.state or (e.task and t.state)
  return s and (TERMINAL[s] or INTERRUPTED[s]) or false
end

-- ---- Tasks --------------------------------------------------------------

local function full() return #order >= MAX_TASKS or kept_bytes > MAX_KEPT_BYTES end

-- Forget the oldest finished tasks nobody follows, until there is room.
local function forget_some()
  local kept = {}
  for _, id in ipairs(order) do
    local t = tasks[id]
    if t and full() and TERMINAL[t.state] and not next(t.streams) then
      tasks[id] = nil
      kept_bytes = kept_bytes - t.bytes
    elseif t then
      kept[#kept + 1] = id
    end
  end
  order = kept
end

local function json_size(value)
  local ok, text = pcall(core.json_encode, value)
  return ok and #text or 0
end

-- What t keeps grew by value.
local function charge(t, value)
  local n = json_size(value)
  t.bytes = t.bytes + n
  if tasks[t.id] == t then
    kept_bytes = kept_bytes + n
    if kept_bytes > MAX_KEPT_BYTES then forget_some() end
  end
end

-- An exchange: a task once the handler reports (become_task, which
-- registers it), a plain message answer until then (nothing kept).
-- Its 11 fields make a table of 16 slots, room for the 4 a blocking
-- SendMessage answered by a message sets later (inline, inline_conf,
-- handle, reply; a field named nil here would cost a store and save no
-- growth); a task that reports grows it once more. Its history, read only
-- once it is a task, is made then (register), from the first message.
local function new_task(owner, context_id, version, first)
  return { id = core.random_hex(16), context_id = context_id or core.random_hex(16), owner = owner,
           state = "TASK_STATE_SUBMITTED", artifacts = NONE, first = first, streams = NONE, pushes = NONE,
           seq = 0, version = version, bytes = 0 }
end

-- t's signal, made by the first request or handler that waits on it (a
-- message answered at once has no one waiting: it never needs one).
local function signal_of(t)
  local signal = t.signal
  if not signal then signal = core.signal(); t.signal = signal end
  return signal
end

-- Wake whoever waits on t (without a signal, nobody waits).
local function notify(t)
  local signal = t.signal
  if signal then signal:notify() end
end

local function register(t)
  t.timestamp = t.timestamp or now_iso()
  -- ListTasks's order wherever the task runs (another generation, another
  -- process): newest first by the second it was made in, then by the
  -- order here; ties between processes go by id. Fixed once made, so that
  -- a page token's offset stays valid.
  created_seq = created_seq + 1
  t.created = os.time() * 1000000 + created_seq % 1000000
  t.history, t.first = { t.first }, nil
  t.bytes = json_size(t.history) -- what it held before: its first message
  kept_bytes = kept_bytes + t.bytes
  tasks[t.id] = t
  order[#order + 1] = t.id
end

local push_event

-- Tell everyone who follows t: its streams (each a bounded queue), its
-- push receivers, and the requests waiting on its signal.
local function emit(t, e)
  t.seq = t.seq + 1
  for s in pairs(t.streams) do
    if #s.queue >= MAX_STREAM_QUEUE then
      s.overflow = true -- its reader does not keep up: the stream ends (the task goes on)
    else
      s.queue[#s.queue + 1] = e
    end
  end
  push_event(t, e)
  notify(t)
end

-- A blocking SendMessage runs its handler in its own coroutine (no second
-- one for a plain answer, the common case); once it must answer while
-- the handler goes on (a question, auth-required, a cancel), it answers
-- with the task and lets the handler run on without it.
local function detach(t)
  if not t.inline or t.detached then return end
  t.detached = true
  local out = task_out(t, t.version, t.inline_conf.historyLength)
  t.inline:_detach(t.version == "0.3" and out or { task = out })
end

local function set_state(t, state, message)
  t.state = state
  t.timestamp = now_iso()
  if message then
    message.taskId, message.contextId = t.id, t.context_id
    t.history[#t.history + 1] = message
    charge(t, message)
    if #t.history > MAX_HISTORY then table.remove(t.history, 1) end
  end
  t.status_message = message
  emit(t, { statusUpdate = { state = state, message = message, timestamp = t.timestamp } })
  if INTERRUPTED[state] then detach(t) end
end

-- What a handler gives as a message: a string, {text=}, {data=}, {parts=}.
local function agent_message(value)
  if value == nil then return nil end
  if type(value) == "string" then -- the common answer: one text part
    return { messageId = core.random_hex(16), role = "ROLE_AGENT", parts = setmetatable({ { text = value } }, ARRAY_MT) }
  end
  local parts
  if type(value) == "table" and value.parts then
    parts = {}
    for i, p in ipairs(value.parts) do
      local part, err = part_in(p, p.kind and "0.3" or "1.0")
      if not part then error(("parts[%d]%s"):format(i, err), 3) end
      parts[i] = part
    end
  elseif type(value) == "table" and value.text then parts = { { text = tostring(value.text) } }
  elseif type(value) == "table" and value.data ~= nil then parts = { { data = value.data } }
  else parts = { { data = value } } end
  local out = { messageId = core.random_hex(16), role = "ROLE_AGENT", parts = setmetatable(parts, ARRAY_MT) }
  if type(value) == "table" then out.metadata = value.metadata end
  return out
end

-- The handler's view of a message: parts with kind, and its text joined.
local function part_view(p)
  if p.text then return { kind = "text", text = p.text, metadata = p.metadata } end
  if p.data ~= nil then return { kind = "data", data = p.data, metadata = p.metadata } end
  return { kind = "file", url = p.url, raw = p.raw, mediaType = p.mediaType, filename = p.filename, metadata = p.metadata }
end

local function handler_message(m)
  local parts = m.parts
  if #parts == 1 then -- most messages: made whole at once, with no texts to join
    return { messageId = m.messageId, taskId = m.taskId, contextId = m.contextId, metadata = m.metadata,
             role = "user", parts = { part_view(parts[1]) }, text = parts[1].text or "" }
  end
  local view = { messageId = m.messageId, taskId = m.taskId, contextId = m.contextId, metadata = m.metadata,
                 role = "user", parts = nil, text = nil }
  local texts = {}
  view.parts = {}
  for i, p in ipairs(parts) do
    view.parts[i] = part_view(p)
    if p.text then texts[#texts + 1] = p.text end
  end
  view.text = table.concat(texts, "\n")
  return view
end

-- ---- The handler's ctx ----------------------------------------------------

local Ctx = {}
Ctx.__index = Ctx
local ENDED = {} -- raised by ctx:fail and ctx:reject: {ENDED, state, message}

-- The first report makes the exchange a task (a handler that only
-- returns answers with a message).
local function become_task(ctx)
  local t = ctx._task
  if t.is_task then return t end
  register(t)
  t.is_task = true
  t.state = "TASK_STATE_WORKING"
  t.timestamp = now_iso()
  emit(t, { task = true })
  return t
end

local function check_live(ctx)
  local t = ctx._task
  if TERMINAL[t.state] then error("the task has ended (" .. state_v03(t.state) .. ")", 3) end
  return t
end

function Ctx:status(state, message)
  local s = state_name(state)
  if not s or TERMINAL[s] or s == "TASK_STATE_INPUT_REQUIRED" then
    error("ctx:status: a state of working, submitted or auth-required (end with return, ctx:fail or ctx:reject; ask with ctx:ask)", 2)
  end
  check_live(self)
  local t = become_task(self)
  set_state(t, s, agent_message(message))
end

function Ctx:artifact(a)
  if type(a) ~= "table" then error("ctx:artifact{parts = ..., name = ...}", 2) end
  local t = check_live(self)
  become_task(self)
  local msg = agent_message(a.parts and { parts = a.parts } or a.text and { text = a.text } or { data = a.data })
  local id = a.id or a.artifactId or core.random_hex(8)
  t.artifact_by_id = t.artifact_by_id or {} -- made by the first artifact
  local art = t.artifact_by_id[id]
  own_list(t, "artifacts")
  if art and a.append then
    for _, p in ipairs(msg.parts) do art.parts[#art.parts + 1] = p end
  else
    art = { artifactId = id, name = a.name, description = a.description, metadata = a.metadata, parts = msg.parts }
    if t.artifact_by_id[id] then
      for i, old in ipairs(t.artifacts) do if old.artifactId == id then t.artifacts[i] = art end end
    else
      t.artifacts[#t.artifacts + 1] = art
    end
    t.artifact_by_id[id] = art
  end
  charge(t, msg.parts)
  local chunk = { artifactId = id, name = a.name, description = a.description, metadata = a.metadata, parts = msg.parts }
  emit(t, { artifactUpdate = { artifact = chunk, append = a.append or false,
                               lastChunk = a.last_chunk or a.lastChunk or false } })
  return id
end

-- input-required with the question; the next message to the task is the
-- answer (its handler view).
function Ctx:ask(message)
  local t = check_live(self)
  become_task(self)
  t.input = nil
  t.waiting_input = true
  set_state(t, "TASK_STATE_INPUT_REQUIRED", agent_message(message or "input required"))
  while t.waiting_input do signal_of(t):wait() end
  return handler_message(t.input)
end

function Ctx:fail(message) error({ ENDED, "TASK_STATE_FAILED", message }, 2) end
function Ctx:reject(message) error({ ENDED, "TASK_STATE_REJECTED", message }, 2) end

-- ---- Running the handler ----------------------------------------------------

local function finish(t, state, message)
  if TERMINAL[t.state] then return end
  if not t.is_task then
    register(t)
    t.is_task = true
    emit(t, { task = true })
  end
  set_state(t, state, message)
end

local function run(t, msg)
  local ctx = setmetatable({ _task = t, task_id = t.id, context_id = t.context_id, principal = t.owner,
                             message = handler_message(msg) }, Ctx)
  local ok, result = pcall(agent.handler, ctx.message, ctx)
  if TERMINAL[t.state] then return end -- cancelled meanwhile
  if not ok then
    if type(result) == "table" and result[1] == ENDED then
      finish(t, result[2], agent_message(result[3] or state_v03(result[2])))
    else
      core.log("error", "agent handler: " .. tostring(result))
      finish(t, "TASK_STATE_FAILED", agent_message(type(result) == "string" and result or "the agent failed"))
    end
  elseif t.is_task then
    finish(t, "TASK_STATE_COMPLETED", agent_message(result))
  else
    local reply = agent_message(result == nil and "" or result)
    reply.contextId = t.context_id
    t.reply = reply -- not a task: nothing names it afterwards
    -- The event is read only by t's streams and push receivers (a waiting
    -- SendMessage reads t.reply); most exchanges have neither.
    emit(t, (t.streams ~= NONE or t.pushes ~= NONE) and { message = reply } or UNREAD_EVENT)
  end
end

-- ---- Push notifications ---------------------------------------------------

local function push_config_in(c, v, task_id)
  if type(c) ~= "table" or type(c.url) ~= "string" or not c.url:match("^https?://") then
    rpc_error(INVALID_PARAMS, "Invalid params: a push notification config needs an http(s) url")
  end
  local auth = c.authentication
  local scheme, credentials
  if type(auth) == "table" then
    scheme = auth.scheme or (type(auth.schemes) == "table" and auth.schemes[1]) or nil
    credentials = auth.credentials
  end
  return { id = type(c.id) == "string" and c.id ~= "" and c.id or core.random_hex(8), url = c.url,
           token = c.token, scheme = scheme, credentials = credentials, task_id = task_id, queue = {} }
end

local function push_config_out(c, v)
  local auth
  if c.scheme then
    auth = v == "0.3" and { schemes = array { c.scheme }, credentials = c.credentials }
        or { scheme = c.scheme, credentials = c.credentials }
  end
  if v == "0.3" then
    return { taskId = c.task_id, pushNotificationConfig = { id = c.id, url = c.url, token = c.token, authentication = auth } }
  end
  return { taskId = c.task_id, id = c.id, url = c.url, token = c.token, authentication = auth }
end

local function deliver(t, c)
  local http = require "mcp.http"
  while true do
    local item = table.remove(c.queue, 1)
    if not item then
      if TERMINAL[t.state] or c.removed then break end
      signal_of(t):wait()
    else
      local headers = { ["content-type"] = "application/json" }
      if c.token then headers["x-a2a-notification-token"] = c.token end
      if c.scheme and c.credentials then headers.authorization = c.scheme .. " " .. c.credentials end
      for try = 1, PUSH_TRIES do
        local r = http.request { method = "POST", url = c.url, headers = headers, body = item,
                                 timeout_ms = PUSH_TIMEOUT_MS, max_redirects = 0 }
        if r and r.status >= 200 and r.status < 300 then break end
        if try == PUSH_TRIES then
          core.log("warning", ("a2a: push notification for task %s to %s failed: %s"):format(t.id, c.url,
            r and ("HTTP " .. r.status) or "no answer"))
        else
          core.sleep(200 * try * try)
        end
      end
    end
  end
  c.sender = nil
end

function push_event(t, e)
  for _, c in ipairs(t.pushes) do
    -- 1.0 sends each event (a StreamResponse); 0.3 the whole task.
    local body = c.version == "0.3" and core.json_encode(task_out(t, "0.3"))
        or (e.task and core.json_encode({ task = task_out(t, "1.0") }) or core.json_encode(event_out(t, e, "1.0")))
    if #c.queue >= MAX_PUSH_QUEUE then table.remove(c.queue, 1) end
    c.queue[#c.queue + 1] = body
    if not c.sender then c.sender = core.background(deliver, t, c) end
  end
end

local function add_push(t, c, v)
  if agent.push_notifications == false then rpc_error(PUSH_NOT_SUPPORTED, "Push Notification is not supported") end
  c.version = v
  for i, old in ipairs(t.pushes) do
    if old.id == c.id then t.pushes[i] = c; return c end
  end
  if #t.pushes >= MAX_PUSH_CONFIGS then rpc_error(INVALID_PARAMS, ("Invalid params: at most %d push configs per task"):format(MAX_PUSH_CONFIGS)) end
  local pushes = own_list(t, "pushes")
  pushes[#pushes + 1] = c
  return c
end

-- ---- Requests ---------------------------------------------------------------

local function caller(ctx) return ctx_principal(ctx) end

-- The caller's task, or TaskNotFound (another caller's task does not
-- exist for it either: ids cannot be probed).
local function owned(id, ctx)
  local t = type(id) == "string" and tasks[id] or nil
  if not t or not t.is_task or t.owner ~= caller(ctx) then rpc_error(TASK_NOT_FOUND, "Task not found", { taskId = id }) end
  return t
end

-- Start (or continue) the exchange a message begins.
-- follow(t), when given, is called before anything happens to the task
-- (a stream starts following it there, so it misses no event).
local function begin(params, ctx, v, follow, inline)
  if type(params) ~= "table" then rpc_error(INVALID_PARAMS, "Invalid params") end
  local msg = message_in(params.message, v)
  local conf = type(params.configuration) == "table" and params.configuration or NO_CONFIGURATION
  local push = v == "0.3" and conf.pushNotificationConfig or conf.taskPushNotificationConfig
  if msg.taskId then
    local t = owned(msg.taskId, ctx)
    if TERMINAL[t.state] then
      rpc_error(UNSUPPORTED_OPERATION, ("Task %s is in a terminal state (%s)"):format(t.id, state_v03(t.state)))
    end
    if not t.waiting_input then rpc_error(UNSUPPORTED_OPERATION, "Task " .. t.id .. " is not waiting for input") end
    if push then add_push(t, push_config_in(push, v, t.id), v) end
    if follow then follow(t) end
    local seq = t.seq
    msg.contextId = t.context_id
    t.history[#t.history + 1] = msg
    charge(t, msg)
    t.input, t.waiting_input = msg, false
    set_state(t, "TASK_STATE_WORKING", nil) -- the handler may run on to its next question right here
    return t, conf, true, seq
  end
  -- Room for one more task (checked here, where a refusal can be
  -- answered; a message-only exchange then takes none).
  if full() then forget_some() end
  if full() then rpc_error(-32603, "Internal error: the agent's running tasks hold all the room it keeps; try again later") end
  local t = new_task(caller(ctx), msg.contextId, v, msg)
  msg.contextId, msg.taskId = t.context_id, t.id
  if push then add_push(t, push_config_in(push, v, t.id), v) end
  if follow then follow(t) end
  if inline then
    t.inline, t.inline_conf = ctx, conf -- answered in version t.version
    t.handle = ctx_handle(ctx)
    run(t, msg)
  else
    t.handle = core.background(run, t, msg)
  end
  return t, conf, false, 0
end

-- A stream of t's events to the caller, until a final one (or its reader
-- falls behind): follow(t, s) starts it (s.queue gets every event from
-- then on), pump sends them.
local function follow(t, s)
  s.task = t
  own_list(t, "streams")[s] = true
end

local function pump(s, ctx, v)
  local _ <close> = setmetatable({}, { __close = function() if s.task then s.task.streams[s] = nil end end })
  local t = s.task
  while true do
    while #s.queue == 0 and not s.overflow do signal_of(t):wait() end
    if s.overflow and #s.queue == 0 then
      rpc_error(-32603, "Internal error: the stream's reader fell behind; follow the task again with SubscribeToTask")
    end
    local e = table.remove(s.queue, 1)
    local out = event_out(t, e, v)
    if is_final(t, e) then return out end
    ctx:_partial(out)
  end
end

local methods = {}
local listed

local function send(params, ctx, v)
  local conf = type(params) == "table" and type(params.configuration) == "table" and params.configuration or NO_CONFIGURATION
  local blocking
  if v == "0.3" then blocking = conf.blocking ~= false else blocking = not conf.returnImmediately end
  local inline = blocking and type(params.message) == "table" and params.message.taskId == nil
  local t, _, resumed, seq = begin(params, ctx, v, nil, inline)
  if inline and t.detached then return nil end -- answered already; the handler ran on and is done
  if not blocking and not t.is_task and not t.reply then
    register(t)
    t.is_task = true -- the caller wants a task now: submitted, until the handler reports
    emit(t, { task = true })
  end
  while true do
    if t.reply then
      return v == "0.3" and message_out(t.reply, v) or { message = message_out(t.reply, v) }
    end
    if t.is_task and (not blocking or TERMINAL[t.state] or (INTERRUPTED[t.state] and (not resumed or t.seq > seq + 1))) then
      local out = task_out(t, v, conf.historyLength)
      return v == "0.3" and out or { task = out }
    end
    signal_of(t):wait()
  end
end

local function send_streaming(params, ctx, v)
  if agent.streaming == false then rpc_error(UNSUPPORTED_OPERATION, "Streaming is not supported") end
  local s = { queue = {} }
  local _, _, resumed = begin(params, ctx, v, function(t)
    follow(t, s)
    if t.is_task then s.queue[1] = { task = true } end -- a resumed task: where it is, first
  end)
  return pump(s, ctx, v)
end

local function subscribe(params, ctx, v)
  local t = owned(params.id, ctx)
  if TERMINAL[t.state] then
    rpc_error(UNSUPPORTED_OPERATION, ("Task %s is in a terminal state (%s): nothing more to follow"):format(t.id, state_v03(t.state)))
  end
  local s = { queue = { { task = true } } }
  follow(t, s)
  return pump(s, ctx, v)
end

local function get_task(params, ctx, v)
  local t = owned(params.id, ctx)
  return task_out(t, v, params.historyLength)
end

local function cancel_task(params, ctx, v)
  local t = owned(params.id, ctx)
  if TERMINAL[t.state] then
    rpc_error(TASK_NOT_CANCELABLE, ("Task cannot be canceled: it is %s"):format(state_v03(t.state)), { taskId = t.id })
  end
  local handle = t.handle
  t.handle = nil
  if t.inline and not t.detached then
    -- its blocking SendMessage still waits: it hears of the cancel first
    t.state = "TASK_STATE_CANCELED"
    detach(t)
  end
  if handle then handle:cancel() end
  t.waiting_input = false
  set_state(t, "TASK_STATE_CANCELED", nil)
  return task_out(t, v)
end

-- ListTasks's page token: where the last page ended ("<offset>:<created>:
-- <id>"), so that each source (this generation, a retired one, another
-- process) sends only the tasks past it, never all those before it, and
-- a task made between two pages does not push one seen into the next.
local function page_cursor(token)
  if token == nil or token == "" then return 0 end
  if type(token) ~= "string" then return nil end
  local offset, created, id = token:match("^(%d+):(%d+):(%x+)$")
  offset, created = math.tointeger(tonumber(offset)), math.tointeger(tonumber(created))
  if not offset or not created then return nil end
  return offset, created, id
end

-- The caller's tasks of this generation that ListTasks's params select:
-- {count = all of them, tasks = the newest `first` past params.pageToken
-- as 1.0 views, each with its `created` key (ListTasks sorts what every
-- generation and process sends by it, and drops it)}.
function listed(params, principal, first)
  local status = params.status and params.status ~= "TASK_STATE_UNSPECIFIED" and state_name(params.status)
  local _, after, after_id = page_cursor(params.pageToken)
  local out = { count = 0, tasks = array() }
  for i = #order, 1, -1 do -- newest first
    local t = tasks[order[i]]
    if t and t.is_task and t.owner == principal and (not params.contextId or params.contextId == t.context_id)
        and (not status or t.state == status) then
      out.count = out.count + 1
      if #out.tasks < first and (not after_id or t.created < after or (t.created == after and t.id < after_id)) then
        local view = task_out(t, "1.0", params.historyLength)
        if not params.includeArtifacts then view.artifacts = nil end
        view.created = t.created
        out.tasks[#out.tasks + 1] = view
      end
    end
  end
  return out
end

methods["1.0"] = {
  SendMessage = send,
  SendStreamingMessage = send_streaming,
  SubscribeToTask = subscribe,
  GetTask = get_task,
  CancelTask = cancel_task,
  ListTasks = function(params, ctx)
    local size = math.tointeger(params.pageSize) or 50
    if size < 1 or size > 100 then rpc_error(INVALID_PARAMS, "Invalid params: pageSize is 1 to 100") end
    local offset = page_cursor(params.pageToken)
    if not offset then rpc_error(INVALID_PARAMS, "Invalid params: unknown pageToken") end
    -- This generation's, then those of the generations a reload retired
    -- and of the other processes (each sends its newest `size` past the
    -- token, and how many it has in all).
    local mine = listed(params, caller(ctx), size)
    local total = mine.count
    local all = mine.tasks
    local ok, shares = pcall(core.json_decode, ctx:_gather_tasks(core.json_encode(params), size))
    for _, other in ipairs(ok and type(shares) == "table" and shares or {}) do
      if type(other) == "table" and type(other.tasks) == "table" then
        total = total + (math.tointeger(other.count) or #other.tasks)
        for _, view in ipairs(other.tasks) do
          if type(view) == "table" and type(view.id) == "string" and math.tointeger(view.created) then
            all[#all + 1] = view
          end
        end
      end
    end
    table.sort(all, function(a, b)
      if a.created ~= b.created then return a.created > b.created end
      return a.id > b.id
    end)
    local out, last = array(), nil
    for i = 1, math.min(size, #all) do
      last = all[i]
      out[#out + 1] = last
    end
    local next_token = ""
    if last and offset + #out < total then
      next_token = ("%d:%d:%s"):format(offset + #out, math.tointeger(last.created), last.id)
    end
    for _, view in ipairs(out) do view.created = nil end
    return { tasks = out, nextPageToken = next_token, pageSize = size, totalSize = total }
  end,
  CreateTaskPushNotificationConfig = function(params, ctx, v)
    local t = owned(params.taskId, ctx)
    return push_config_out(add_push(t, push_config_in(params, v, t.id), v), v)
  end,
  GetTaskPushNotificationConfig = function(params, ctx, v)
    local t = owned(params.taskId, ctx)
    for _, c in ipairs(t.pushes) do if c.id == params.id then return push_config_out(c, v) end end
    rpc_error(TASK_NOT_FOUND, "Push notification config not found")
  end,
  ListTaskPushNotificationConfigs = function(params, ctx, v)
    local t = owned(params.taskId, ctx)
    local out = array()
    for i, c in ipairs(t.pushes) do out[i] = push_config_out(c, v) end
    return { configs = out, nextPageToken = "" }
  end,
  DeleteTaskPushNotificationConfig = function(params, ctx)
    local t = owned(params.taskId, ctx)
    for i, c in ipairs(t.pushes) do
      if c.id == params.id then c.removed = true; table.remove(t.pushes, i); notify(t); return object() end
    end
    rpc_error(TASK_NOT_FOUND, "Push notification config not found")
  end,
  GetExtendedAgentCard = function(params, ctx, v)
    if not agent.extended_card then rpc_error(EXTENDED_CARD_NOT_CONFIGURED, "Extended agent card is not configured") end
    return M.card(ctx, v, true)
  end,
}

methods["0.3"] = {
  ["message/send"] = send,
  ["message/stream"] = send_streaming,
  ["tasks/resubscribe"] = subscribe,
  ["tasks/get"] = get_task,
  ["tasks/cancel"] = cancel_task,
  ["tasks/pushNotificationConfig/set"] = function(params, ctx, v)
    local t = owned(params.taskId, ctx)
    return push_config_out(add_push(t, push_config_in(params.pushNotificationConfig, v, t.id), v), v)
  end,
  ["tasks/pushNotificationConfig/get"] = function(params, ctx, v)
    local t = owned(params.id, ctx)
    local want = params.pushNotificationConfigId
    for _, c in ipairs(t.pushes) do if not want or c.id == want then return push_config_out(c, v) end end
    rpc_error(TASK_NOT_FOUND, "Push notification config not found")
  end,
  ["tasks/pushNotificationConfig/list"] = function(params, ctx, v)
    local t = owned(params.id, ctx)
    local out = array()
    for i, c in ipairs(t.pushes) do out[i] = push_config_out(c, v) end
    return out
  end,
  ["tasks/pushNotificationConfig/delete"] = function(params, ctx)
    local t = owned(params.id, ctx)
    for i, c in ipairs(t.pushes) do
      if c.id == params.pushNotificationConfigId then c.removed = true; table.remove(t.pushes, i); notify(t); return core.null end
    end
    rpc_error(TASK_NOT_FOUND, "Push notification config not found")
  end,
  ["agent/getAuthenticatedExtendedCard"] = function(params, ctx, v)
    if not agent.extended_card then rpc_error(EXTENDED_CARD_NOT_CONFIGURED, "Extended agent card is not configured") end
    return M.card(ctx, "0.3", true)
  end,
}

-- ---- The card ---------------------------------------------------------------

local function strings(list)
  local out = array()
  for i, s in ipairs(list or {}) do out[i] = s end
  return out
end

-- The card, for the request ctx (its Host names the URL). Both versions'
-- fields: 1.0's supportedInterfaces (one per version, the same URL) and
-- 0.3's url, protocolVersion and preferredTransport, so that a client of
-- either reads it.
function M.card(ctx, v, extended)
  local host = ctx:_header("host") or "localhost"
  local url = "http://" .. host .. "/a2a"
  local skills = array()
  for i, s in ipairs(agent.skills) do
    skills[i] = { id = s.id, name = s.name, description = s.description, tags = strings(s.tags),
                  examples = s.examples and strings(s.examples), inputModes = s.inputModes and strings(s.inputModes),
                  outputModes = s.outputModes and strings(s.outputModes) }
  end
  local card = {
    name = agent.name, description = agent.description, version = agent.version,
    provider = agent.provider, documentationUrl = agent.documentationUrl, iconUrl = agent.iconUrl,
    supportedInterfaces = array {
      { url = url, protocolBinding = "JSONRPC", protocolVersion = "1.0" },
      { url = url, protocolBinding = "JSONRPC", protocolVersion = "0.3" },
    },
    capabilities = { streaming = agent.streaming ~= false, pushNotifications = agent.push_notifications ~= false,
                     extendedAgentCard = agent.extended_card and true or false },
    defaultInputModes = strings(agent.defaultInputModes or { "text/plain", "application/json" }),
    defaultOutputModes = strings(agent.defaultOutputModes or { "text/plain", "application/json" }),
    skills = skills,
    -- 0.3
    url = url, protocolVersion = "0.3.0", preferredTransport = "JSONRPC",
  }
  card.capabilities.stateTransitionHistory = false
  -- The security schemes, from the server's own settings.
  local issuer, scopes = ctx:_header(":issuer"), ctx:_header(":scopes")
  if issuer then
    local scope_map = object()
    for s in (scopes or ""):gmatch("%S+") do scope_map[s] = s end
    local metadata = issuer:gsub("/$", "") .. "/.well-known/openid-configuration"
    card.securitySchemes = {
      oauth2 = v == "0.3" and { type = "openIdConnect", openIdConnectUrl = metadata }
          or { openIdConnectSecurityScheme = { openIdConnectUrl = metadata } },
    }
    local list = array()
    for s in (scopes or ""):gmatch("%S+") do list[#list + 1] = s end
    card.securityRequirements = array { { schemes = { oauth2 = { list = list } } } }
    card.security = array { { oauth2 = list } }
  elseif ctx:_header(":bearer") then
    card.securitySchemes = { bearer = { httpAuthSecurityScheme = { scheme = "Bearer" }, type = "http", scheme = "bearer" } }
    card.securityRequirements = array { { schemes = { bearer = { list = array() } } } }
    card.security = array { { bearer = array() } }
  end
  if extended and type(agent.extended_card) == "table" then
    for k, val in pairs(agent.extended_card) do card[k] = val end
  end
  return card
end

-- ---- Declaring, and the entry -----------------------------------------------

local function check_strings(list, what, level)
  if list == nil then return end
  if type(list) ~= "table" then error(what .. " must be a list of strings", level) end
  for _, s in ipairs(list) do if type(s) ~= "string" then error(what .. " must be a list of strings", level) end end
end

--- mcp.agent{name, description, version, provider = {organization, url},
--- skills = {{id, name, description, tags, examples, inputModes,
--- outputModes}}, handler = function(message, ctx) ... end}
function M.declare(def)
  if type(def) ~= "table" then error("mcp.agent{name = ..., handler = function(message, ctx) ... end}", 3) end
  for _, k in ipairs { "name", "description", "version" } do
    if type(def[k]) ~= "string" or def[k] == "" then error("mcp.agent: " .. k .. " (a string) is required", 3) end
  end
  if type(def.handler) ~= "function" then error("mcp.agent: handler (a function) is required", 3) end
  if def.provider ~= nil and (type(def.provider) ~= "table" or type(def.provider.organization) ~= "string") then
    error("mcp.agent: provider is {organization = ..., url = ...}", 3)
  end
  local skills = def.skills or {}
  if type(skills) ~= "table" then error("mcp.agent: skills must be a list", 3) end
  for i, s in ipairs(skills) do
    if type(s) ~= "table" or type(s.id) ~= "string" or type(s.name) ~= "string" then
      error(("mcp.agent: skills[%d] needs an id and a name"):format(i), 3)
    end
    s.description = s.description or s.name
    s.tags = s.tags or {}
    check_strings(s.tags, ("skills[%d].tags"):format(i), 4)
    check_strings(s.examples, ("skills[%d].examples"):format(i), 4)
    check_strings(s.inputModes, ("skills[%d].inputModes"):format(i), 4)
    check_strings(s.outputModes, ("skills[%d].outputModes"):format(i), 4)
  end
  def.skills = skills
  agent = def
end

local function version_of(method, ctx)
  local v = methods["1.0"][method] and "1.0" or methods["0.3"][method] and "0.3" or nil
  local header = ctx_header(ctx, "a2a-version")
  if header and header ~= "" and header ~= "1.0" and header ~= "0.3" and header ~= "0.3.0" then
    rpc_error(VERSION_NOT_SUPPORTED, "Unsupported A2A version " .. header .. " (this agent speaks 1.0 and 0.3)",
      { supportedVersions = array { "1.0", "0.3" } })
  end
  return v
end

-- The task a request is about, or nil (a new message, the card, a list).
local function task_id_of(method, params)
  if type(params) ~= "table" then return nil end
  local id
  if method == "SendMessage" or method == "message/send" or method == "SendStreamingMessage" or method == "message/stream" then
    id = type(params.message) == "table" and params.message.taskId or nil
  elseif method == "CreateTaskPushNotificationConfig" or method == "GetTaskPushNotificationConfig"
      or method == "ListTaskPushNotificationConfigs" or method == "DeleteTaskPushNotificationConfig"
      or method == "tasks/pushNotificationConfig/set" then
    id = params.taskId
  elseif methods["1.0"][method] or methods["0.3"][method] then
    id = params.id
  end
  return type(id) == "string" and id or nil
end

local function error_code(e)
  return core.is_rpc_error(e) and e.code or nil
end

--- Whether this generation holds the task a request names, for principal
--- (runtime/app/vm.c asks each generation, the retired ones a reload left
--- running included, for this process's requests and for those another
--- process sends over the bus): the request then runs here, whatever it
--- is, a stream too.
function M.holds(method, params_json, principal)
  if not agent then return false end
  local ok, params = pcall(core.json_decode, params_json)
  local id = ok and task_id_of(method, params)
  local t = id and tasks[id]
  return t ~= nil and t.is_task == true and t.owner == principal
end

--- ListTasks's share of this generation, for another generation or
--- process: the JSON text of listed(params, principal, first).
function M.list(params_json, principal, first)
  local ok, params = pcall(core.json_decode, params_json)
  if not agent or not ok or type(params) ~= "table" then return core.json_encode { count = 0, tasks = array() } end
  return core.json_encode(listed(params, principal, math.tointeger(first) or 0))
end

-- What a task record keeps that outlives its generation (JSON: no
-- signal, streams or handler).
local KEPT_FIELDS = { "id", "context_id", "owner", "state", "artifacts", "history", "status_message", "timestamp",
                      "created", "metadata", "version" }

--- A retired generation is freed once its tasks have all ended (app/
--- reload.c): its kept tasks, ended, as JSON text, for the current one
--- (M.adopt), so that they stay readable and listed.
function M.export()
  local out = array()
  for _, id in ipairs(order) do
    local t = tasks[id]
    if t and t.is_task and TERMINAL[t.state] then
      local r = {}
      for _, k in ipairs(KEPT_FIELDS) do r[k] = t[k] end
      out[#out + 1] = r
    end
  end
  return core.json_encode(out)
end

function M.adopt(text)
  local ok, records = pcall(core.json_decode, text)
  if not ok or type(records) ~= "table" then return end
  for _, r in ipairs(records) do
    if type(r) == "table" and type(r.id) == "string" and not tasks[r.id] and state_name(r.state) then
      local t = new_task(r.owner, r.context_id, r.version)
      for _, k in ipairs(KEPT_FIELDS) do t[k] = r[k] end
      t.artifacts, t.history, t.artifact_by_id = t.artifacts or {}, t.history or {}, {}
      for _, a in ipairs(t.artifacts) do t.artifact_by_id[a.artifactId] = a end
      t.is_task = true
      t.bytes = json_size(t.history) + json_size(t.artifacts)
      kept_bytes = kept_bytes + t.bytes
      tasks[t.id] = t
      order[#order + 1] = t.id
    end
  end
  -- oldest first, as registered
  table.sort(order, function(a, b) return (tasks[a].created or 0) < (tasks[b].created or 0) end)
  if full() then forget_some() end
end

--- The foreign session's requests (runtime/transport/http_a2a.c).
function M.dispatch(method, params, ctx)
  if method == "GET /.well-known/agent-card.json" then
    if not agent then rpc_error(METHOD_NOT_FOUND, "no agent") end
    return core.json_encode(M.card(ctx, "1.0"))
  end
  if not agent then rpc_error(METHOD_NOT_FOUND, "Method not found: this server declares no agent (mcp.agent)") end
  local v = version_of(method, ctx)
  if not v then rpc_error(METHOD_NOT_FOUND, "Method not found: " .. tostring(method)) end
  -- A task held elsewhere: the runtime sent this request to the retired
  -- generation holding it, if one does (vm.c); another process may hold
  -- it, which then answers, streams included (ctx:_forward, app/bus.h).
  if not task_id_of(method, params) or not core.shared() then return methods[v][method](params or {}, ctx, v) end
  local ok, result = pcall(methods[v][method], params or {}, ctx, v)
  if ok then return result end
  if error_code(result) == TASK_NOT_FOUND and ctx:_forward(params or object()) then return nil end
  error(result, 0)
end

return M
