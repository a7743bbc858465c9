-- Agents (A2A) served from a Lua script (mcp.agent, lua/mcp/a2a.lua) by
-- `luamcp run --http` at /.well-known/agent-card.json and /a2a
-- (runtime/transport/http_a2a.c), driven by the official A2A SDK's client
-- (@a2a-js/sdk 1.3.0, spec/clients/a2a_sdk_client.mjs) in both protocol
-- versions, and by hand for what a hostile client sends.

local http = require "http_client"
local run_node = require("node_runner").run
local client = require "mcp_client"
local cjson = client.json

local AGENT = "spec/fixtures/a2a/agent.lua"

local function rpc(server, method, params, headers)
  local h = { ["Content-Type"] = "application/json", Accept = "application/json" }
  for k, v in pairs(headers or {}) do h[k] = v end
  return server:request { method = "POST", path = "/a2a", headers = h,
    body = type(method) == "string" and cjson.encode { jsonrpc = "2.0", id = 7, method = method, params = params } or method[1] }
end

-- A subscription opened on conn: its first event (the task as it is), and
-- the connection, whose further events read_events gives.
local function subscribe_on(conn, method, id)
  conn:send_request { method = "POST", path = "/a2a", body = cjson.encode { jsonrpc = "2.0", id = 3, method = method,
    params = { id = id } }, headers = { ["Content-Type"] = "application/json", Accept = "text/event-stream" } }
  local head = conn:read_head(30000)
  assert(head, "no answer to " .. method)
  assert.truthy((head.headers["content-type"] or ""):find("text/event-stream", 1, true), conn.raw .. conn.body)
  local first = conn:read_event(30000)
  while first and not first.data do first = conn:read_event(30000) end
  return cjson.decode(first.data)
end

-- The events of a stream until it ends, decoded, and whether it ended.
local function rest_of(conn)
  local events, ended = conn:read_events(60000)
  local out = {}
  for i, e in ipairs(events) do out[i] = cjson.decode(e.data) end
  return out, ended
end

describe("an agent driven by the @a2a-js/sdk client", function()
  local server
  setup(function() server = http.start { AGENT } end)
  teardown(function() if server then server:stop_cleanly() end end)

  for _, version in ipairs { "1.0", "0.3" } do
    it("goes through send, stream, input, cancel, resubscribe, list and push in " .. version, function()
      local r = run_node { "spec/clients/a2a_sdk_client.mjs", "http://127.0.0.1:" .. server.port, version }
      assert.is_nil(r.error)
      assert.are.same({ "echo", "ask" }, r.card.skills)
      assert.are.same({ "JSONRPC 1.0", "JSONRPC 0.3" }, r.card.interfaces)
      assert.are.equal("echo: hello", r.echo)
      assert.are.same({ "task", "status:TASK_STATE_WORKING", "artifact:1", "artifact:2", "artifact:3:last",
                        "status:TASK_STATE_COMPLETED" }, r.stream)
      assert.are.same({ state = "TASK_STATE_INPUT_REQUIRED", question = "what is your name?" }, r.asked)
      assert.are.same({ state = "TASK_STATE_COMPLETED", reply = "hello, Ada" }, r.answered)
      assert.are.equal("TASK_STATE_CANCELED", r.cancelled)
      assert.are.equal("TASK_STATE_CANCELED", r.got)
      assert.are.equal("JsonRpcTaskNotCancelableError", r.cancel_again)
      assert.are.equal("task", r.resubscribed[1])
      assert.are.equal("status:TASK_STATE_COMPLETED", r.resubscribed[#r.resubscribed])
      if version == "1.0" then
        assert.is_true(r.listed >= 4)
        assert.are.same({ "TASK_STATE_CANCELED", "TASK_STATE_COMPLETED" }, r.listed_states)
      end
      assert.is_true(r.push.completed)
      assert.are.equal("tok-1", r.push.token)
      assert.are.equal("Bearer cred-1", r.push.auth)
      assert.are.equal("JsonRpcTaskNotFoundError", r.unknown)
    end)
  end

  it("lets a tool call an agent with mcp.a2a (send, input, stream, cancel)", function()
    local session = server:initialize()
    local r = server:post({ jsonrpc = "2.0", id = 3, method = "tools/call",
      params = { name = "delegate", arguments = { url = "http://127.0.0.1:" .. server.port } } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    local result = http.rpc(r).result
    assert.is_not_true(result.isError, result.content[1].text)
    local out = cjson.decode(result.content[1].text)
    assert.are.same({ name = "Echo agent", echo = "echo: from lua", asked = "TASK_STATE_INPUT_REQUIRED",
      answered = "hello, Lua", events = "task,TASK_STATE_WORKING,artifact,artifact,TASK_STATE_COMPLETED",
      cancelled = "TASK_STATE_CANCELED" }, out)
  end)

  it("lets a tool call an agent written with @a2a-js/sdk (spec/clients/a2a_sdk_server.mjs)", function()
    local sdk = client.spawn({ "spec/clients/a2a_sdk_server.mjs" }, { bin = require("node_runner").NODE })
    local line = sdk:read_line(60000)
    assert(line, "the SDK server did not start:\n" .. sdk.stderr)
    local port = math.tointeger(cjson.decode(line).port)
    local session = server:initialize()
    local r = server:post({ jsonrpc = "2.0", id = 4, method = "tools/call",
      params = { name = "delegate", arguments = { url = "http://127.0.0.1:" .. port } } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    sdk:terminate(5000)
    local result = http.rpc(r).result
    assert.is_not_true(result.isError, result.content[1].text)
    assert.are.same({ name = "SDK agent", echo = "echo: from lua", asked = "TASK_STATE_INPUT_REQUIRED",
      answered = "hello, Lua", events = "task,TASK_STATE_WORKING,artifact,artifact,TASK_STATE_COMPLETED",
      cancelled = "TASK_STATE_CANCELED" }, cjson.decode(result.content[1].text))
  end)

  it("answers a stream with an event stream even when its first event is its last", function()
    -- "echo" answers at once with a message; "ask" is waiting for input
    -- before the stream has sent anything: one event each, as a stream.
    local cases = {
      { "SendStreamingMessage", { messageId = "s1", role = "ROLE_USER", parts = { { text = "echo now" } } },
        function(r) return r.message.parts[1].text end, "echo: now" },
      { "SendStreamingMessage", { messageId = "s2", role = "ROLE_USER", parts = { { text = "ask" } } },
        function(r) return r.task.status.state end, "TASK_STATE_INPUT_REQUIRED" },
      { "message/stream", { messageId = "s3", role = "user", kind = "message", parts = { { kind = "text", text = "echo now" } } },
        function(r) return r.parts[1].text end, "echo: now" },
      { "message/stream", { messageId = "s4", role = "user", kind = "message", parts = { { kind = "text", text = "ask" } } },
        function(r) return r.status.state end, "input-required" },
    }
    for _, case in ipairs(cases) do
      local conn = server:connect()
      conn:send_request { method = "POST", path = "/a2a", body = cjson.encode { jsonrpc = "2.0", id = 5, method = case[1],
        params = { message = case[2] } }, headers = { ["Content-Type"] = "application/json", Accept = "text/event-stream" } }
      local head = conn:read_head(30000)
      assert.is_table(head, "no answer to " .. case[1])
      assert.are.equal("text/event-stream", head.headers["content-type"], case[1] .. " " .. case[4])
      local events, ended = rest_of(conn)
      assert.is_true(ended)
      assert.are.equal(1, #events)
      assert.are.equal(case[4], case[3](events[1].result))
      conn:close()
    end
    -- A refusal before any event stays a JSON error.
    local r = rpc(server, "SendStreamingMessage", { message = { messageId = "s5", role = "ROLE_USER", parts = { { video = "x" } } } })
    assert.are.equal("application/json", r.headers["content-type"])
    assert.are.equal(-32602, r.json.error.code)
  end)

  it("serves the MCP tools of the same script beside the agent", function()
    local session = server:initialize()
    local r = server:post({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "ping", arguments = {} } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    assert.are.equal("pong", http.rpc(r).result.content[1].text)
  end)
end)

describe("an agent given hostile input", function()
  local server
  setup(function() server = http.start({ AGENT, "--max-message-bytes", "4096" }) end)
  teardown(function() if server then server:stop_cleanly() end end)

  local function message(parts, extra)
    local m = { messageId = "m1", role = "ROLE_USER", parts = parts }
    for k, v in pairs(extra or {}) do m[k] = v end
    return { message = m }
  end

  it("answers an unknown task with TaskNotFound", function()
    for _, call in ipairs { { "GetTask", { id = "nope" } }, { "CancelTask", { id = "nope" } },
                            { "tasks/get", { id = "nope" } }, { "SubscribeToTask", { id = "nope" } } } do
      local r = rpc(server, call[1], call[2])
      assert.are.equal(-32001, r.json.error.code, call[1])
      assert.are.equal(7, r.json.id)
    end
    local r = rpc(server, "SendMessage", message({ { text = "echo" } }, { taskId = "nope" }))
    assert.are.equal(-32001, r.json.error.code)
  end)

  it("keeps a message's optional members and its parts', for the handler and in the task's history", function()
    local extra = { metadata = { m = 1 }, referenceTaskIds = { "r1" }, extensions = { "https://example.com/ext" } }
    local file = { url = "https://example.com/a.png", mediaType = "image/png", filename = "a.png" }
    local r = rpc(server, "SendMessage", message({ { text = "view", metadata = { p = 1 } }, file, { data = { x = 1 } } }, extra))
    local seen = r.json.result.message.parts[1].data
    assert.are.same({ m = 1 }, seen.metadata)
    assert.are.same({ kind = "text", text = "view", metadata = { p = 1 } }, seen.parts[1])
    assert.are.same({ kind = "file", url = file.url, mediaType = "image/png", filename = "a.png" }, seen.parts[2])
    assert.are.same({ kind = "data", data = { x = 1 } }, seen.parts[3])
    assert.are.equal("view", seen.text)
    -- a plain message has none of them, in the handler's view too
    seen = rpc(server, "SendMessage", message({ { text = "view" } })).json.result.message.parts[1].data
    assert.are.same({ parts = { { kind = "text", text = "view" } }, text = "view" }, seen)
    -- kept as sent in the task the exchange becomes
    r = rpc(server, "SendMessage", message({ { text = "count 1", metadata = { p = 1 } }, file }, extra))
    local first = r.json.result.task.history[1]
    assert.are.same({ m = 1 }, first.metadata)
    assert.are.same({ "r1" }, first.referenceTaskIds)
    assert.are.same({ "https://example.com/ext" }, first.extensions)
    assert.are.same({ { text = "count 1", metadata = { p = 1 } }, file }, first.parts)
  end)

  it("refuses a message with an unknown part kind, in either version", function()
    local r = rpc(server, "SendMessage", message({ { video = "x" } }))
    assert.are.equal(-32602, r.json.error.code)
    r = rpc(server, "message/send", { message = { messageId = "m", role = "user", kind = "message",
      parts = { { kind = "hologram", text = "x" } } } })
    assert.are.equal(-32602, r.json.error.code)
    assert.truthy(r.json.error.message:find("hologram", 1, true))
  end)

  it("refuses an oversized message before reading it into the agent", function()
    local r = rpc(server, "SendMessage", message({ { text = ("x"):rep(10000) } }))
    assert.are.equal(413, r.status)
    -- and the agent still answers
    r = rpc(server, "SendMessage", message({ { text = "echo still here" } }))
    assert.are.equal("echo: still here", r.json.result.message.parts[1].text)
  end)

  it("answers JSON-RPC's and A2A's protocol errors", function()
    assert.are.equal(-32700, rpc(server, { "{not json" }).json.error.code)
    assert.are.equal(-32601, rpc(server, "tools/list", {}).json.error.code) -- MCP's methods are not the agent's
    local r = rpc(server, "GetTask", { id = "x" }, { ["A2A-Version"] = "9.9" })
    assert.are.equal(-32009, r.json.error.code)
    assert.are.equal(-32007, rpc(server, "GetExtendedAgentCard", {}).json.error.code)
  end)

  it("applies /mcp's Origin and CORS rules, and names A2A's headers in a preflight", function()
    local r = rpc(server, "GetTask", { id = "x" }, { Origin = "http://evil.example" })
    assert.are.equal(403, r.status)
    r = server:request { method = "OPTIONS", path = "/a2a", headers = { Origin = "http://localhost:3000",
      ["Access-Control-Request-Method"] = "POST", ["Access-Control-Request-Headers"] = "a2a-version" } }
    assert.are.equal(204, r.status)
    assert.are.equal("http://localhost:3000", r.headers["access-control-allow-origin"])
    assert.truthy(r.headers["access-control-allow-headers"]:find("A2A-Version", 1, true))
  end)

  it("counts A2A calls in /metrics by method", function()
    rpc(server, "SendMessage", message({ { text = "echo counted" } }))
    local r = server:request { method = "GET", path = "/metrics" }
    assert.truthy(r.body:find('luamcp_calls_total{method="SendMessage",outcome="ok"}', 1, true), r.body)
  end)

  it("answers a blocking SendMessage whose task is cancelled meanwhile", function()
    local conn = server:connect()
    local body = cjson.encode { jsonrpc = "2.0", id = 5, method = "SendMessage", params = message({ { text = "wait 60000" } }) }
    assert(conn:write(("POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s")
      :format(#body, body)))
    local id
    client.poll_until(function()
      for _, t in ipairs(rpc(server, "ListTasks", { status = "TASK_STATE_WORKING" }).json.result.tasks) do
        if t.history[1] and t.history[1].parts[1].text == "wait 60000" then id = t.id end
      end
      return id
    end, 20000)
    assert.is_string(id)
    assert.are.equal("TASK_STATE_CANCELED", rpc(server, "CancelTask", { id = id }).json.result.status.state)
    client.wait_until(function() return conn.raw:find("TASK_STATE_CANCELED", 1, true) end, 20000)
    local answer = cjson.decode(conn.raw:match("\r\n\r\n(.*)$"))
    assert.are.equal(5, answer.id)
    assert.are.equal("TASK_STATE_CANCELED", answer.result.task.status.state)
    assert.are.equal("TASK_STATE_CANCELED", rpc(server, "GetTask", { id = id }).json.result.status.state)
    conn:close()
  end)

  it("finishes a task whose blocking SendMessage's client went away", function()
    local conn = server:connect()
    local body = cjson.encode { jsonrpc = "2.0", id = 6, method = "SendMessage", params = message({ { text = "count 30" } }) }
    assert(conn:write(("POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s")
      :format(#body, body)))
    local id
    client.poll_until(function()
      for _, t in ipairs(rpc(server, "ListTasks", { status = "TASK_STATE_WORKING" }).json.result.tasks) do
        if t.history[1] and t.history[1].parts[1].text == "count 30" then id = t.id end
      end
      return id
    end, 20000)
    conn:close()
    assert.is_string(id)
    local state
    client.poll_until(function()
      state = rpc(server, "GetTask", { id = id }).json.result.status.state
      return state == "TASK_STATE_COMPLETED"
    end, 30000)
    assert.are.equal("TASK_STATE_COMPLETED", state)
  end)

  it("finishes a task whose stream is open but never read", function()
    local conn = server:connect()
    local body = cjson.encode { jsonrpc = "2.0", id = 1, method = "SendStreamingMessage", params = message({ { text = "count 40" } }) }
    conn.tcp:read_stop() -- the client reads nothing
    assert(conn:write(("POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s")
      :format(#body, body)))
    -- the task shows in the caller's list (the caller is nobody here), and ends
    local id
    client.poll_until(function()
      local list = rpc(server, "ListTasks", { status = "TASK_STATE_WORKING" }).json.result.tasks
      for _, t in ipairs(list) do if t.history[1] and t.history[1].parts[1].text == "count 40" then id = t.id end end
      return id
    end, 20000)
    assert.is_string(id)
    local state
    client.poll_until(function()
      state = rpc(server, "GetTask", { id = id }).json.result.status.state
      return state == "TASK_STATE_COMPLETED"
    end, 30000)
    assert.are.equal("TASK_STATE_COMPLETED", state)
    conn:close()
  end)

  it("keeps a task whose stream is never read, and ends the stream", function()
    local conn = server:connect()
    assert(conn:write(("POST /a2a HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s")
      :format(#cjson.encode { jsonrpc = "2.0", id = 1, method = "SendStreamingMessage", params = message({ { text = "count 5" } }) },
        cjson.encode { jsonrpc = "2.0", id = 1, method = "SendStreamingMessage", params = message({ { text = "count 5" } }) })))
    local id
    client.wait_until(function()
      id = conn.raw:match('"taskId":"(%x+)"') or conn.raw:match('"id":"(%x+)"')
      return id
    end, 20000)
    conn:close()
    assert.is_string(id)
    local state
    client.poll_until(function()
      local r = rpc(server, "GetTask", { id = id })
      state = r.json.result and r.json.result.status.state
      return state == "TASK_STATE_COMPLETED"
    end, 30000)
    assert.are.equal("TASK_STATE_COMPLETED", state)
  end)
end)

describe("push notifications", function()
  local server, receiver
  setup(function() server = http.start { AGENT } end)
  teardown(function()
    if server then server:stop_cleanly() end
    if receiver then receiver:terminate(5000) end
  end)

  it("are retried when the receiver fails, with the config's token and authentication", function()
    receiver = client.spawn({ "spec/clients/a2a_push_receiver.mjs", "1" }, { bin = require("node_runner").NODE })
    local port = math.tointeger(cjson.decode((assert(receiver:read_line(60000), receiver.stderr))).port)
    local r = rpc(server, "SendMessage", { message = { messageId = "m", role = "ROLE_USER", parts = { { text = "ask" } } },
      configuration = { taskPushNotificationConfig = { url = ("http://127.0.0.1:%d/hook"):format(port),
        token = "t-1", authentication = { scheme = "Bearer", credentials = "c-1" } } } })
    local task = r.json.result.task
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", task.status.state)
    -- the config is the task's, listed
    local configs = rpc(server, "ListTaskPushNotificationConfigs", { taskId = task.id }).json.result.configs
    assert.are.equal(1, #configs)
    assert.are.equal("t-1", configs[1].token)
    -- every change of the task arrives, in order, the first after a refusal
    local seen = {}
    while true do
      local line = receiver:read_line(30000)
      assert(line, "no more notifications; saw " .. cjson.encode(seen))
      local n = cjson.decode(line)
      assert.are.equal("t-1", n.token)
      assert.are.equal("Bearer c-1", n.auth)
      local state = n.body.task and n.body.task.status.state or n.body.statusUpdate and n.body.statusUpdate.status.state
      seen[#seen + 1] = math.tointeger(n.status) .. " " .. tostring(state)
      if state == "TASK_STATE_INPUT_REQUIRED" and math.tointeger(n.status) == 204 then break end
    end
    assert.are.equal("503 TASK_STATE_WORKING", seen[1])
    assert.are.equal("204 TASK_STATE_WORKING", seen[2])
    assert.are.equal("204 TASK_STATE_INPUT_REQUIRED", seen[#seen])
    -- the answer carries it to the end
    rpc(server, "SendMessage", { message = { messageId = "m2", role = "ROLE_USER", taskId = task.id, parts = { { text = "Bo" } } } })
    local last
    repeat
      local line = receiver:read_line(30000)
      assert(line, "no completion notified")
      local n = cjson.decode(line)
      last = n.body.statusUpdate and n.body.statusUpdate.status.state
    until last == "TASK_STATE_COMPLETED"
  end)
end)

describe("push notifications of a message answered at once", function()
  local server, receiver
  setup(function() server = http.start { AGENT } end)
  teardown(function()
    if server then server:stop_cleanly() end
    if receiver then receiver:terminate(5000) end
  end)

  it("bring the answer to the receiver", function()
    receiver = client.spawn({ "spec/clients/a2a_push_receiver.mjs", "0" }, { bin = require("node_runner").NODE })
    local port = math.tointeger(cjson.decode((assert(receiver:read_line(60000), receiver.stderr))).port)
    local r = rpc(server, "SendMessage", { message = { messageId = "m", role = "ROLE_USER", parts = { { text = "echo hi" } } },
      configuration = { taskPushNotificationConfig = { url = ("http://127.0.0.1:%d/hook"):format(port), token = "t-2" } } })
    assert.are.equal("echo: hi", r.json.result.message.parts[1].text)
    local line = receiver:read_line(30000)
    assert(line, "no notification")
    local n = cjson.decode(line)
    assert.are.equal("t-2", n.token)
    assert.are.equal("echo: hi", n.body.message.parts[1].text)
    assert.are.equal(r.json.result.message.messageId, n.body.message.messageId)
  end)
end)

describe("an agent's traces", function()
  it("has one server span per A2A call, and the handler's own spans beneath it", function()
    local receiver = client.spawn({ "spec/fixtures/tracing/otlp_receiver.mjs" }, { bin = require("node_runner").NODE })
    local hello = cjson.decode((assert(receiver:read_line(60000), receiver.stderr)))
    local server = http.start({ AGENT }, { env = { "PATH=" .. os.getenv("PATH"),
      "OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:" .. math.tointeger(hello.port), "OTEL_BSP_SCHEDULE_DELAY=50" } })
    -- a task whose handler makes an HTTP request: its client span is the call's child
    local r = rpc(server, "SendMessage", { message = { messageId = "m1", role = "ROLE_USER",
      parts = { { text = "fetch http://127.0.0.1:" .. server.port .. "/healthz" } } } })
    assert.are.equal("TASK_STATE_COMPLETED", r.json.result.task.status.state, r.body)
    local spans
    client.poll_until(function()
      receiver:send { cmd = "spans" }
      spans = cjson.decode((assert(receiver:read_line(10000), receiver.stderr))).spans
      local names = {}
      for _, sp in ipairs(spans) do names[sp.name] = sp end
      return names.SendMessage and names.GET
    end, 30000)
    local call, fetch
    for _, sp in ipairs(spans) do
      if sp.name == "SendMessage" then call = sp elseif sp.name == "GET" then fetch = sp end
    end
    assert.is_table(call, cjson.encode(spans))
    assert.is_table(fetch, cjson.encode(spans))
    assert.are.equal(call.traceId, fetch.traceId)
    assert.are.equal(call.spanId, fetch.parentSpanId)
    server:stop_cleanly()
    receiver:close()
  end)
end)

describe("calling an agent from a confined script", function()
  it("is judged by the net permission", function()
    local agent = http.start { AGENT }
    local server = http.start { "spec/fixtures/a2a/confined.lua" }
    local session = server:initialize()
    local r = server:post({ jsonrpc = "2.0", id = 2, method = "tools/call",
      params = { name = "reach", arguments = { url = "http://127.0.0.1:" .. agent.port } } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    local text = http.rpc(r).result.content[1].text
    assert.truthy(text:find("127.0.0.1", 1, true) and text:find("net", 1, true), text)
    assert.is_nil(text:find("reached", 1, true))
    server:stop_cleanly()
    agent:stop_cleanly()
  end)
end)

describe("a server without an agent", function()
  it("has no card and answers the A2A endpoint with method not found", function()
    local server = http.start { "spec/fixtures/a2a/no_agent.lua" }
    local r = server:request { method = "GET", path = "/.well-known/agent-card.json" }
    assert.are.equal(404, r.status)
    assert.are.equal(-32601, rpc(server, "GetTask", { id = "x" }).json.error.code)
    server:stop_cleanly()
  end)
end)

describe("an agent under --workers 2", function()
  local server
  setup(function() server = http.start { AGENT, "--workers", "2" } end)
  teardown(function() if server then server:stop_cleanly() end end)

  local function send_on(conn, method, params)
    local body = cjson.encode { jsonrpc = "2.0", id = 1, method = method, params = params }
    return conn:request { method = "POST", path = "/a2a", body = body,
      headers = { ["Content-Type"] = "application/json", Accept = "application/json" } }
  end
  local function say(conn, words, extra)
    local m = { messageId = "m" .. math.random(1e9), role = "ROLE_USER", parts = { { text = words } } }
    for k, v in pairs(extra or {}) do m[k] = v end
    return send_on(conn, "SendMessage", { message = m }).json.result
  end

  -- A keep-alive connection to each worker (which worker accepts is the
  -- kernel's choice: connect until both are seen).
  local function conns_to_both()
    local by_worker = {}
    for _ = 1, 200 do
      local conn = server:connect()
      local w = say(conn, "whoami").message.parts[1].text
      if by_worker[w] then conn:close() else by_worker[w] = conn end
      if by_worker["1"] and by_worker["2"] then return by_worker["1"], by_worker["2"] end
    end
    error("no connection reached both workers")
  end

  it("reads, answers and cancels a task created on one worker from the other", function()
    local one, two = conns_to_both()
    local task = say(one, "ask").task
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", task.status.state)
    local r = send_on(two, "GetTask", { id = task.id })
    assert.are.equal(task.id, r.json.result.id, r.body)
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", r.json.result.status.state)
    r = send_on(two, "tasks/get", { id = task.id })
    assert.are.equal("input-required", r.json.result.status.state, r.body)
    -- another task asks on worker one and gets its answer on worker two
    local asked = say(one, "ask").task
    local answered = say(two, "Wu", { taskId = asked.id, contextId = asked.contextId }).task
    assert.are.equal("TASK_STATE_COMPLETED", answered.status.state)
    assert.are.equal("hello, Wu", answered.status.message.parts[1].text)
    assert.are.equal("TASK_STATE_COMPLETED", send_on(one, "GetTask", { id = asked.id }).json.result.status.state)
    r = send_on(two, "CancelTask", { id = task.id })
    assert.are.equal("TASK_STATE_CANCELED", r.json.result.status.state, r.body)
    assert.are.equal("TASK_STATE_CANCELED", send_on(one, "GetTask", { id = task.id }).json.result.status.state)
    assert.are.equal(-32002, send_on(two, "CancelTask", { id = task.id }).json.error.code)
    assert.are.equal(-32001, send_on(two, "GetTask", { id = "not-a-task" }).json.error.code)
  end)

  it("streams a task's events to a subscriber on the other worker, and lists every worker's tasks", function()
    local one, two = conns_to_both()
    local asked = say(one, "gate").task
    local mine_on_two = say(two, "ask").task
    -- a second connection to worker two, for the stream
    local watch
    for _ = 1, 200 do
      local conn = server:connect()
      if say(conn, "whoami").message.parts[1].text == "2" then watch = conn; break end
      conn:close()
    end
    assert(watch, "no second connection reached worker two")
    local r = send_on(one, "SendMessage", { message = { messageId = "a1", role = "ROLE_USER", parts = { { text = "Ida" } },
      taskId = asked.id }, configuration = { returnImmediately = true } })
    assert.is_table(r.json.result, r.body)
    local first = subscribe_on(watch, "SubscribeToTask", asked.id)
    assert.are.equal(asked.id, first.result.task.id)
    assert.are.equal("TASK_STATE_WORKING", first.result.task.status.state)
    assert.are.equal("opened", say(one, "open " .. asked.id).message.parts[1].text)
    local events, ended = rest_of(watch)
    assert.is_true(ended)
    local last = events[#events].result.statusUpdate
    assert.are.equal("TASK_STATE_COMPLETED", last.status.state)
    assert.are.equal("hello, Ida", last.status.message.parts[1].text)
    -- answered over a stream on worker two, for a task of worker one
    local again = say(one, "gate").task
    local answer
    for _ = 1, 200 do
      local conn = server:connect()
      if say(conn, "whoami").message.parts[1].text == "2" then answer = conn; break end
      conn:close()
    end
    assert(answer, "no third connection reached worker two")
    answer:send_request { method = "POST", path = "/a2a", headers = { ["Content-Type"] = "application/json", Accept = "text/event-stream" },
      body = cjson.encode { jsonrpc = "2.0", id = 4, method = "SendStreamingMessage", params = { message = {
        messageId = "m-s", role = "ROLE_USER", parts = { { text = "Uma" } }, taskId = again.id } } } }
    local head = answer:read_head(30000)
    assert.truthy(head and (head.headers["content-type"] or ""):find("text/event-stream", 1, true), answer.body)
    assert.are.equal("opened", say(one, "open " .. again.id).message.parts[1].text)
    local streamed = rest_of(answer)
    assert.are.equal("hello, Uma", streamed[#streamed].result.statusUpdate.status.message.parts[1].text)
    -- the list, from either worker, has both workers' tasks, page by page
    for _, conn in ipairs { one, two } do
      local seen, token, pages = {}, "", 0
      repeat
        local r = send_on(conn, "ListTasks", { pageSize = 1, pageToken = token })
        assert.is_table(r.json.result, r.body)
        for _, t in ipairs(r.json.result.tasks) do
          assert.is_nil(seen[t.id], "listed twice: " .. t.id)
          seen[t.id] = t.status.state
        end
        token, pages = r.json.result.nextPageToken, pages + 1
      until token == "" or pages > 50
      assert.are.equal("TASK_STATE_COMPLETED", seen[asked.id])
      assert.are.equal("TASK_STATE_INPUT_REQUIRED", seen[mine_on_two.id])
      assert.are.equal("TASK_STATE_COMPLETED", seen[again.id])
    end
    assert.are.equal(-32001, send_on(two, "SubscribeToTask", { id = "not-a-task" }).json.error.code)
  end)

  it("ends a stream from the other worker when the worker holding its task stops answering", function()
    local one = conns_to_both()
    local asked = say(one, "gate").task
    local r = send_on(one, "SendMessage", { message = { messageId = "a1", role = "ROLE_USER", parts = { { text = "Ida" } },
      taskId = asked.id }, configuration = { returnImmediately = true } })
    assert.is_table(r.json.result, r.body)
    local watch
    for _ = 1, 200 do
      local conn = server:connect()
      if say(conn, "whoami").message.parts[1].text == "2" then watch = conn; break end
      conn:close()
    end
    assert(watch, "no second connection reached worker two")
    assert.are.equal("TASK_STATE_WORKING", subscribe_on(watch, "SubscribeToTask", asked.id).result.task.status.state)
    local pid = say(one, "pid").message.parts[1].text
    assert(os.execute("kill -STOP " .. pid))
    local events, ended = rest_of(watch) -- within the bus's silence bound, not forever
    os.execute("kill -CONT " .. pid)
    assert.is_true(ended)
    assert.are.equal(-32603, events[#events].error and events[#events].error.code)
    assert.are.equal("opened", say(one, "open " .. asked.id).message.parts[1].text)
  end)
end)

describe("an agent's tasks across a reload", function()
  local server
  setup(function() server = http.start { AGENT, "--log-level", "debug" } end) -- debug: when a generation closes
  teardown(function() if server then server:stop_cleanly() end end)

  local function say(words, extra)
    local m = { messageId = "m" .. math.random(1e9), role = "ROLE_USER", parts = { { text = words } } }
    for k, v in pairs(extra or {}) do m[k] = v end
    local r = rpc(server, "SendMessage", { message = m })
    assert.is_table(r.json.result, r.body)
    return r.json.result
  end

  it("are read, followed, answered and cancelled in the generation they run in", function()
    local asked, other, asked03 = say("gate").task, say("ask").task, say("gate").task
    local counted = say("count 2").task -- ended before the reload, with an artifact
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", asked.status.state)
    server.proc:kill("sighup")
    assert.is_true(client.wait_until(function() return server:stderr():find("reloaded (SIGHUP)", 1, true) ~= nil end,
      30000), server:stderr())
    -- the new generation's own tasks work beside
    assert.are.equal("echo: new", say("echo new").message.parts[1].text)
    local r = rpc(server, "GetTask", { id = asked.id })
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", r.json.result and r.json.result.status.state, r.body)
    -- answered, followed from the new generation, and done
    r = rpc(server, "SendMessage", { message = { messageId = "a1", role = "ROLE_USER", parts = { { text = "Ada" } },
      taskId = asked.id }, configuration = { returnImmediately = true } })
    assert.is_table(r.json.result, r.body)
    local watch = server:connect()
    local first = subscribe_on(watch, "SubscribeToTask", asked.id)
    assert.are.equal(asked.id, first.result.task.id)
    assert.are.equal("TASK_STATE_WORKING", first.result.task.status.state)
    -- 0.3: answered over a stream (message/stream), and followed again (tasks/resubscribe)
    local answer = server:connect()
    answer:send_request { method = "POST", path = "/a2a", headers = { ["Content-Type"] = "application/json", Accept = "text/event-stream" },
      body = cjson.encode { jsonrpc = "2.0", id = 4, method = "message/stream", params = { message = {
        kind = "message", messageId = "m03", role = "user", parts = { { kind = "text", text = "Bo" } }, taskId = asked03.id } } } }
    assert(answer:read_head(30000))
    local e = answer:read_event(30000)
    while e and not e.data do e = answer:read_event(30000) end
    assert.are.equal(asked03.id, cjson.decode(e.data).result.taskId or cjson.decode(e.data).result.id)
    local watch03 = server:connect()
    first = subscribe_on(watch03, "tasks/resubscribe", asked03.id)
    assert.are.equal("working", first.result.status.state)
    assert.are.equal("opened", say("open " .. asked.id).message.parts[1].text)
    assert.are.equal("opened", say("open " .. asked03.id).message.parts[1].text)
    local events, ended = rest_of(watch)
    assert.is_true(ended)
    local last = events[#events].result.statusUpdate
    assert.are.equal("TASK_STATE_COMPLETED", last.status.state)
    assert.are.equal("hello, Ada", last.status.message.parts[1].text)
    for _, conn in ipairs { answer, watch03 } do
      events = rest_of(conn)
      assert.are.equal("completed", events[#events].result.status.state)
      assert.are.equal("hello, Bo", events[#events].result.status.message.parts[1].text)
    end
    -- cancelled, and the list shows the tasks of both generations
    r = rpc(server, "CancelTask", { id = other.id })
    assert.are.equal("TASK_STATE_CANCELED", r.json.result and r.json.result.status.state, r.body)
    local ids = {}
    for _, t in ipairs(rpc(server, "ListTasks", {}).json.result.tasks) do ids[t.id] = t.status.state end
    assert.are.equal("TASK_STATE_COMPLETED", ids[asked.id])
    assert.are.equal("TASK_STATE_CANCELED", ids[other.id])
    assert.are.equal(-32001, rpc(server, "SubscribeToTask", { id = "not-a-task" }).json.error.code)
    -- its tasks ended, the retired generation closes, and hands them over
    assert.is_true(client.wait_until(function() return server:stderr():find("generation 1 closed", 1, true) ~= nil end,
      30000), server:stderr())
    r = rpc(server, "GetTask", { id = asked.id })
    assert.are.equal("hello, Ada", r.json.result and r.json.result.status.message.parts[1].text, r.body)
    r = rpc(server, "tasks/get", { id = other.id })
    assert.are.equal("canceled", r.json.result and r.json.result.status.state, r.body)
    r = rpc(server, "GetTask", { id = counted.id })
    assert.are.same({ "1", "2" }, { r.json.result.artifacts[1].parts[1].text, r.json.result.artifacts[1].parts[2].text }, r.body)
    ids = {}
    for _, t in ipairs(rpc(server, "ListTasks", {}).json.result.tasks) do ids[t.id] = t.status.state end
    assert.are.equal("TASK_STATE_COMPLETED", ids[asked03.id])
  end)
end)

describe("an agent on two processes sharing Redis", function()
  local services = require "services"
  if not services.which("redis-server") then
    print("a2a_spec: the --redis case skipped: redis-server is not installed")
    return
  end
  local redis, a, b
  setup(function()
    local port = services.free_port()
    redis = services.redis(port)
    local url = "redis://127.0.0.1:" .. port .. "/4"
    a = http.start { AGENT, "--redis", url, "--log-level", "debug" }
    b = http.start { AGENT, "--redis", url }
  end)
  teardown(function()
    if a then a:stop_cleanly() end
    if b then b:stop_cleanly() end
    if redis then redis:stop() end
  end)

  local function say(server, words, extra)
    local m = { messageId = "m" .. math.random(1e9), role = "ROLE_USER", parts = { { text = words } } }
    for k, v in pairs(extra or {}) do m[k] = v end
    local r = rpc(server, "SendMessage", { message = m })
    assert.is_table(r.json.result, r.body)
    return r.json.result
  end

  it("streams a task's events to a subscriber on the other process, and lists both processes' tasks", function()
    local asked, beside = say(a, "gate").task, say(b, "ask").task
    local r = rpc(a, "SendMessage", { message = { messageId = "a1", role = "ROLE_USER", parts = { { text = "Rae" } },
      taskId = asked.id }, configuration = { returnImmediately = true } })
    assert.is_table(r.json.result, r.body)
    local watch = b:connect()
    assert.are.equal("TASK_STATE_WORKING", subscribe_on(watch, "SubscribeToTask", asked.id).result.task.status.state)
    assert.are.equal("opened", say(b, "open " .. asked.id).message.parts[1].text) -- mcp.store is Redis's: any process
    local events, ended = rest_of(watch)
    assert.is_true(ended)
    assert.are.equal("hello, Rae", events[#events].result.statusUpdate.status.message.parts[1].text)
    for _, server in ipairs { a, b } do
      local ids = {}
      for _, t in ipairs(rpc(server, "ListTasks", {}).json.result.tasks) do ids[t.id] = t.status.state end
      assert.are.equal("TASK_STATE_COMPLETED", ids[asked.id])
      assert.are.equal("TASK_STATE_INPUT_REQUIRED", ids[beside.id])
    end
    assert.are.equal(-32001, rpc(b, "SubscribeToTask", { id = "not-a-task" }).json.error.code)
  end)

  it("answers ListTasks once every process that heard it has answered, and waits for one that stays silent", function()
    local asked = say(b, "ask").task
    local function listed(server)
      local ids = {}
      for _, t in ipairs(rpc(server, "ListTasks", {}).json.result.tasks) do ids[t.id] = true end
      return ids
    end
    assert.is_true(listed(a)[asked.id])
    -- PUBLISH counted a and b: a waited for b's answer alone, never for the time limit.
    assert.is_nil(a:stderr():find("ListTasks:", 1, true), a:stderr())
    -- A third subscriber to the bus that never answers: a waits for it, then answers with what it has.
    local silent = assert(http.connect(redis.port))
    silent:write("SUBSCRIBE luamcp:bus:4\r\n")
    assert.is_true(http.wait_until(function() return silent.raw:find("subscribe", 1, true) ~= nil end, 30000))
    assert.is_true(listed(a)[asked.id])
    assert.truthy(a:stderr():find("ListTasks: 1 of 2 other processes answered", 1, true), a:stderr())
    silent:close()
  end)

  it("stops following a task for another process once that process's stream closes", function()
    local function in_flight(server)
      local body = server:request { method = "GET", path = "/metrics" }.body
      return tonumber(body:match("\nluamcp_calls_in_flight (%d+)"))
    end
    local asked = say(a, "gate").task
    local r = rpc(a, "SendMessage", { message = { messageId = "a1", role = "ROLE_USER", parts = { { text = "Sol" } },
      taskId = asked.id }, configuration = { returnImmediately = true } })
    assert.is_table(r.json.result, r.body)
    local watch = b:connect()
    assert.are.equal("TASK_STATE_WORKING", subscribe_on(watch, "SubscribeToTask", asked.id).result.task.status.state)
    assert.are.equal(1, in_flight(a)) -- the stream runs where the task is, for b
    watch:close()
    assert.is_true(client.poll_until(function() return in_flight(a) == 0 end, 30000), "a still follows the task for b")
    assert.are.equal("opened", say(a, "open " .. asked.id).message.parts[1].text)
  end)

  it("pages ListTasks over both processes without repeating a task when a newer one is made between pages", function()
    local before = { say(a, "ask").task.id, say(b, "ask").task.id, say(a, "ask").task.id }
    local seen, token, pages = {}, "", 0
    repeat
      local r = rpc(pages % 2 == 0 and a or b, "ListTasks", { pageSize = 1, pageToken = token })
      assert.is_table(r.json.result, r.body)
      for _, t in ipairs(r.json.result.tasks) do
        assert.is_nil(seen[t.id], "listed twice: " .. t.id)
        seen[t.id] = true
      end
      if pages == 0 then say(a, "ask") end -- newer than every task listed: it belongs before the first page
      token, pages = r.json.result.nextPageToken, pages + 1
    until token == "" or pages > 200
    for _, id in ipairs(before) do assert.is_true(seen[id], "never listed: " .. id) end
    assert.are.equal(-32602, rpc(a, "ListTasks", { pageToken = "12" }).json.error.code)
  end)

  it("stops a stream it runs for a process that no longer follows it, and keeps one whose process does", function()
    local function in_flight(server)
      local body = server:request { method = "GET", path = "/metrics" }.body
      return tonumber(body:match("\nluamcp_calls_in_flight (%d+)"))
    end
    local asked = say(a, "gate").task
    local r = rpc(a, "SendMessage", { message = { messageId = "a1", role = "ROLE_USER", parts = { { text = "Ida" } },
      taskId = asked.id }, configuration = { returnImmediately = true } })
    assert.is_table(r.json.result, r.body)
    -- b follows the task for its client, and answers a's task_alive
    local watch = b:connect()
    assert.are.equal("TASK_STATE_WORKING", subscribe_on(watch, "SubscribeToTask", asked.id).result.task.status.state)
    -- a process that asks a to stream the task for it, then is gone (it never answers again)
    local bus = assert(http.connect(redis.port))
    bus:write("SUBSCRIBE luamcp:bus:4\r\n")
    assert.is_true(http.wait_until(function() return bus.raw:find("subscribe", 1, true) ~= nil end, 30000))
    local gone = ("fa"):rep(16)
    local ask = cjson.encode { node = gone, kind = "task_request", foreign = true, seq = 7, method = "SubscribeToTask",
      params = { id = asked.id }, principal = "" }
    local pub = assert(http.connect(redis.port))
    pub:write(("*3\r\n$7\r\nPUBLISH\r\n$12\r\nluamcp:bus:4\r\n$%d\r\n%s\r\n"):format(#ask, ask))
    local to_gone = '"to":"' .. gone .. '"'
    local function alive_count()
      local n = 0
      for _ in bus.raw:gmatch('"kind":"task_alive",' .. to_gone) do n = n + 1 end
      return n
    end
    local function stopped() return bus.raw:find('"kind":"task_reply",' .. to_gone .. ',"seq":7,"error"', 1, true) end
    assert.is_true(http.wait_until(function() return bus.raw:find('"held":true', 1, true) ~= nil end, 30000))
    assert.are.equal(2, in_flight(a)) -- b's stream and the gone one's
    -- a tells the gone process its stream still runs a few times, then stops it, instead of for ever
    http.wait_until(function() return stopped() or alive_count() > 8 end, 120000)
    assert.truthy(stopped(), "a still streams the task for a process gone: " .. alive_count() .. " task_alive sent")
    assert.is_true(client.poll_until(function() return in_flight(a) == 1 end, 30000))
    -- b, which answered, still follows the task, to its end
    assert.are.equal("opened", say(a, "open " .. asked.id).message.parts[1].text)
    local events, ended = rest_of(watch)
    assert.is_true(ended)
    assert.are.equal("hello, Ida", events[#events].result.statusUpdate.status.message.parts[1].text)
    bus:close()
    pub:close()
  end)
end)

---------------------------------------------------------------------------
-- Behind OAuth, with tokens from a real authorization server
-- (oidc-provider, spec/helpers/oidc_provider.mjs; as spec/auth_spec.lua)
---------------------------------------------------------------------------

local NODE = require("node_runner").NODE

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local function start_provider()
  local keys = client.temp_dir()
  local code, _, err = client.sh(NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(keys))
  assert(code == 0, err)
  local clients = {}
  for _, who in ipairs { "alice", "bob" } do
    clients[#clients + 1] = { client_id = who, client_secret = who .. "-secret", grant_types = { "client_credentials" },
      response_types = {}, redirect_uris = {}, token_endpoint_auth_method = "client_secret_basic" }
  end
  local proc = client.spawn({ "spec/helpers/oidc_provider.mjs",
    cjson.encode { keys = keys, any_resource = { scope = "notes:read" }, clients = clients } }, { bin = NODE })
  local line = proc:read_line(60000)
  assert(line, "oidc-provider did not start:\n" .. proc.stderr)
  local p = cjson.decode(line)
  p.proc, p.keys = proc, keys
  return p
end

local function token_for(p, who, resource)
  local body = ("grant_type=client_credentials&scope=notes%%3Aread&resource=%s")
    :format(resource:gsub("[^%w%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end))
  local conn = assert(http.connect(p.port))
  local _, b64 = client.sh(("printf %%s %s | base64 -w0"):format(quote(who .. ":" .. who .. "-secret")))
  local r = conn:request { method = "POST", path = "/token", body = body, headers = {
    Authorization = "Basic " .. b64, ["Content-Type"] = "application/x-www-form-urlencoded", Accept = "application/json" } }
  conn:close()
  assert(r and r.status == 200 and r.json, "no token: " .. cjson.encode(r or {}))
  return r.json.access_token
end

describe("an agent behind OAuth", function()
  local p, server, alice, bob
  setup(function()
    p = start_provider()
    server = http.start { "--auth-issuer", p.issuer, "--auth-scopes", "notes:read", AGENT }
    alice = token_for(p, "alice", server.url)
    bob = token_for(p, "bob", server.url)
  end)
  teardown(function()
    if server then server:stop_cleanly() end
    if p then p.proc:terminate(5000); client.remove_tree(p.keys) end
  end)

  it("publishes the card to anyone, with the server's OAuth as its security scheme", function()
    local r = server:request { method = "GET", path = "/.well-known/agent-card.json" }
    assert.are.equal(200, r.status)
    local card = cjson.decode(r.body)
    assert.are.equal(p.issuer:gsub("/$", "") .. "/.well-known/openid-configuration",
      card.securitySchemes.oauth2.openIdConnectSecurityScheme.openIdConnectUrl)
    assert.are.same({ "notes:read" }, card.securityRequirements[1].schemes.oauth2.list)
  end)

  it("refuses a request without a token with 401", function()
    local r = rpc(server, "GetTask", { id = "x" })
    assert.are.equal(401, r.status)
    assert.truthy(r.headers["www-authenticate"])
  end)

  it("keeps a task to its caller: another caller finds no such task", function()
    local r = rpc(server, "SendMessage", { message = { messageId = "m", role = "ROLE_USER", parts = { { text = "ask" } } } },
      { Authorization = "Bearer " .. alice })
    local task = r.json.result.task
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", task.status.state)
    local as_bob = { Authorization = "Bearer " .. bob }
    assert.are.equal(-32001, rpc(server, "GetTask", { id = task.id }, as_bob).json.error.code)
    assert.are.equal(-32001, rpc(server, "CancelTask", { id = task.id }, as_bob).json.error.code)
    assert.are.equal(-32001, rpc(server, "SubscribeToTask", { id = task.id }, as_bob).json.error.code)
    assert.are.equal(-32001, rpc(server, "SendMessage", { message = { messageId = "m2", role = "ROLE_USER",
      taskId = task.id, parts = { { text = "Mallory" } } } }, as_bob).json.error.code)
    assert.are.equal(0, #rpc(server, "ListTasks", {}, as_bob).json.result.tasks)
    -- still alice's, still waiting for her
    r = rpc(server, "SendMessage", { message = { messageId = "m3", role = "ROLE_USER", taskId = task.id,
      parts = { { text = "Alice" } } } }, { Authorization = "Bearer " .. alice })
    assert.are.equal("hello, Alice", r.json.result.task.status.message.parts[1].text)
  end)

  it("keeps a task to its caller under --workers 2: another caller's tasks are not listed or reached", function()
    local workers = http.start { "--auth-issuer", p.issuer, "--auth-scopes", "notes:read", AGENT, "--workers", "2" }
    local as = { alice = token_for(p, "alice", workers.url), bob = token_for(p, "bob", workers.url) }
    local function send_on(conn, who, method, params)
      return conn:request { method = "POST", path = "/a2a", body = cjson.encode { jsonrpc = "2.0", id = 1, method = method,
        params = params }, headers = { ["Content-Type"] = "application/json", Accept = "application/json",
        Authorization = "Bearer " .. as[who] } }
    end
    local function say(conn, who, words)
      local r = send_on(conn, who, "SendMessage", { message = { messageId = "m" .. math.random(1e9), role = "ROLE_USER",
        parts = { { text = words } } } })
      assert.is_table(r.json and r.json.result, r.body)
      return r.json.result
    end
    local by_worker = {}
    for _ = 1, 200 do
      local conn = workers:connect()
      local w = say(conn, "alice", "whoami").message.parts[1].text
      if by_worker[w] then conn:close() else by_worker[w] = conn end
      if by_worker["1"] and by_worker["2"] then break end
    end
    local one, two = by_worker["1"], by_worker["2"]
    assert(one and two, "no connection reached both workers")
    local alices = { say(one, "alice", "ask").task.id, say(two, "alice", "ask").task.id }
    local bobs = say(two, "bob", "ask").task.id
    for _, conn in ipairs { one, two } do
      local listed = {}
      for _, t in ipairs(send_on(conn, "alice", "ListTasks", {}).json.result.tasks) do listed[t.id] = true end
      assert.is_true(listed[alices[1]] and listed[alices[2]])
      assert.is_nil(listed[bobs])
      local r = send_on(conn, "bob", "ListTasks", {})
      assert.are.equal(1, #r.json.result.tasks, r.body)
      assert.are.equal(bobs, r.json.result.tasks[1].id)
    end
    assert.are.equal(-32001, send_on(two, "bob", "SubscribeToTask", { id = alices[1] }).json.error.code)
    assert.are.equal(-32001, send_on(two, "bob", "GetTask", { id = alices[1] }).json.error.code)
    assert.are.equal(-32001, send_on(one, "bob", "SendMessage", { message = { messageId = "mb", role = "ROLE_USER",
      taskId = bobs .. "x", parts = { { text = "Mallory" } } } }).json.error.code)
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", send_on(one, "alice", "GetTask", { id = alices[2] }).json.result.status.state)
    workers:stop_cleanly()
  end)

  for _, version in ipairs { "1.0", "0.3" } do
    it("is driven by the @a2a-js/sdk client with a token in " .. version, function()
      local r = run_node { "spec/clients/a2a_sdk_client.mjs", "http://127.0.0.1:" .. server.port, version, alice }
      assert.is_nil(r.error)
      assert.are.same({ "oauth2" }, r.security)
      assert.are.same({ state = "TASK_STATE_COMPLETED", reply = "hello, Ada" }, r.answered)
      assert.are.equal("TASK_STATE_CANCELED", r.cancelled)
      assert.are.equal("task", r.resubscribed[1])
      assert.is_true(r.push.completed)
    end)
  end
end)

---------------------------------------------------------------------------
-- The example (scripts/a2a): an orchestrator and two agents
---------------------------------------------------------------------------

describe("scripts/a2a", function()
  local counter, shouter, orchestrator, dir
  setup(function()
    counter = http.start { "scripts/a2a/counter.lua" }
    -- shouter.mjs resolves @a2a-js/sdk from where it lies: a copy beside
    -- spec/node_modules stands in for `npm install` in scripts/a2a.
    dir = "spec/.a2a-example-" .. math.random(1e9)
    assert(client.sh("mkdir -p " .. dir .. " && cp scripts/a2a/shouter.mjs " .. dir .. "/") == 0)
    local port = require("services").free_port()
    shouter = client.spawn({ dir .. "/shouter.mjs", tostring(port) }, { bin = NODE })
    assert(shouter:read_line(60000), "shouter did not start:\n" .. shouter.stderr)
    orchestrator = http.start({ "scripts/a2a/orchestrator.lua" }, { env = {
      "COUNTER_URL=http://127.0.0.1:" .. counter.port, "SHOUTER_URL=http://127.0.0.1:" .. port } })
  end)
  teardown(function()
    for _, s in ipairs { orchestrator, counter } do s:stop_cleanly() end
    if shouter then shouter:terminate(5000) end
    if dir then client.remove_tree(dir) end
  end)

  it("reviews a text with both agents and passes the counter's progress on", function()
    local session = orchestrator:initialize()
    local r = orchestrator:post({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "review",
      arguments = { text = "to be\nor not to be" }, _meta = { progressToken = "p" } } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    local result = http.rpc(r).result
    assert.are.equal("TO BE\nOR NOT TO BE\n(6 words in 2 lines)", result.content[1].text)
    local progress = {}
    for _, e in ipairs(r.events or {}) do
      if e.json and e.json.method == "notifications/progress" then progress[#progress + 1] = e.json.params.message end
    end
    assert.are.same({ "line 1: 2 words", "line 2: 4 words" }, progress)
  end)

  it("asks for the text when the message has none, and goes on with the answer", function()
    local r = rpc(counter, "SendMessage", { message = { messageId = "m1", role = "ROLE_USER", parts = { { text = "" } } } })
    local task = r.json.result.task
    assert.are.equal("TASK_STATE_INPUT_REQUIRED", task.status.state)
    assert.are.equal("Which text shall I count?", task.status.message.parts[1].text)
    r = rpc(counter, "SendMessage", { message = { messageId = "m2", role = "ROLE_USER", taskId = task.id,
      contextId = task.contextId, parts = { { text = "one two\nthree" } } } })
    assert.are.equal("3 words in 2 lines", r.json.result.task.status.message.parts[1].text)
    assert.are.same({ total = 3 }, r.json.result.task.artifacts[1].parts[3].data)
  end)
end)
