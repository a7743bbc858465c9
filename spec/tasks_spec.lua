-- MCP tasks (the tasks extension, io.modelcontextprotocol/tasks): a
-- tools/call answered with a task handle, polled with tasks/get, answered
-- with tasks/update, cancelled with tasks/cancel, followed through
-- subscriptions/listen; across a reload; and the cap on running tasks.
-- Over stdio, with 2026-07-28 requests (each carries its own _meta).
local client = require "spec.helpers.mcp_client"
local cjson = require "cjson"

local FIXTURE = "spec/fixtures/tasks"
local V = "2026-07-28"
local EMPTY = cjson.decode("{}")
local TASKS = "io.modelcontextprotocol/tasks"
local WITH_TASKS = { extensions = { [TASKS] = EMPTY }, elicitation = EMPTY }

local function with_meta(params, caps)
  params = params or {}
  params._meta = {
    ["io.modelcontextprotocol/protocolVersion"] = V,
    ["io.modelcontextprotocol/clientCapabilities"] = caps or WITH_TASKS,
    ["io.modelcontextprotocol/clientInfo"] = { name = "busted", version = "1" },
  }
  return params
end

local function call(server, name, args, caps)
  return server:request("tools/call", with_meta({ name = name, arguments = args or EMPTY }, caps), 10000)
end

local function get(server, id, caps)
  return server:request("tasks/get", with_meta({ taskId = id }, caps))
end

-- Poll until the task is terminal; returns the last state and every
-- status seen, in order (repeats folded).
local function poll(server, id, timeout_ms)
  local seen, state = {}, nil
  client.wait_until(function()
    local r = get(server, id)
    assert(r and r.result, "tasks/get: " .. cjson.encode(r or {}) .. "\n" .. server.stderr)
    state = r.result
    if seen[#seen] ~= state.status then seen[#seen + 1] = state.status end
    return state.status == "completed" or state.status == "failed" or state.status == "cancelled"
  end, timeout_ms or 10000)
  return state, seen
end

local function alive(pid)
  return os.execute("kill -0 " .. pid .. " 2>/dev/null") == true
end

describe("MCP tasks", function()
  local server
  before_each(function() server = client.spawn { "run", FIXTURE } end)
  after_each(function() server:close() end)

  it("runs a three-second tool as a task: working with progress, then completed with its result", function()
    local created = call(server, "build").result
    assert.are.equal("task", created.resultType)
    assert.are.equal("working", created.status)
    assert.is_string(created.taskId)
    assert.are.equal(32, #created.taskId)
    assert.is_nil(created.result)
    assert.are.equal(cjson.null, created.ttlMs) -- kept as long as it runs
    assert.truthy(created.createdAt:match("^%d%d%d%d%-%d%d%-%d%dT%d%d:%d%d:%d%d"))
    -- Follow it on subscriptions/listen as well.
    server:send({ jsonrpc = "2.0", id = "listen", method = "subscriptions/listen",
      params = with_meta({ notifications = { taskIds = { created.taskId, "not-a-task" } } }) })
    local messages = {}
    local state, seen = poll(server, created.taskId)
    assert.are.equal("completed", state.status)
    assert.are.same({ "working", "completed" }, seen)
    assert.are.equal("complete", state.resultType)
    assert.are.equal("built (task " .. created.taskId .. ")", state.result.content[1].text)
    assert.is_number(state.ttlMs)
    -- The listener was told the agreed ids, then each change, the last with the result.
    for _, n in ipairs(server.notifications) do messages[#messages + 1] = n end
    local ack, statuses, last = nil, {}, nil
    for _, n in ipairs(messages) do
      if n.method == "notifications/subscriptions/acknowledged" then ack = n end
      if n.method == "notifications/tasks" then
        assert.are.equal(created.taskId, n.params.taskId)
        assert.are.equal("listen", n.params._meta["io.modelcontextprotocol/subscriptionId"])
        statuses[#statuses + 1] = n.params.statusMessage or n.params.status
        last = n.params
      end
    end
    assert.are.same({ created.taskId }, ack.params.notifications.taskIds)
    assert.are.same({ "2/3: linking half" }, { statuses[1] })
    assert.are.equal("completed", last.status)
    assert.are.equal(state.result.content[1].text, last.result.content[1].text)
  end)

  it("cancels a task mid-run, killing its child process", function()
    local dir = client.temp_dir()
    local pidfile = dir .. "/pid"
    local created = call(server, "sleeper", { pidfile = pidfile }).result
    local pid
    assert.is_true(client.wait_until(function()
      local f = io.open(pidfile)
      pid = f and f:read("l")
      if f then f:close() end
      return pid ~= nil and pid ~= ""
    end, 5000))
    assert.is_true(alive(pid))
    assert.are.equal("working", get(server, created.taskId).result.status)
    local ack = server:request("tasks/cancel", with_meta({ taskId = created.taskId }))
    assert.are.same({ resultType = "complete" }, ack.result)
    assert.are.equal("cancelled", get(server, created.taskId).result.status)
    assert.is_true(client.wait_until(function() return not alive(pid) end, 5000), "the child outlived its task")
    -- Cancelling again, or a finished task, is the same acknowledgement.
    assert.are.same({ resultType = "complete" }, server:request("tasks/cancel", with_meta({ taskId = created.taskId })).result)
    client.remove_tree(dir)
  end)

  it("asks through the task: input_required with inputRequests, answered by tasks/update", function()
    local created = call(server, "approve").result
    local state
    assert.is_true(client.wait_until(function()
      state = get(server, created.taskId).result
      return state.status == "input_required"
    end, 5000))
    local key, request = next(state.inputRequests)
    assert.are.equal("elicitation/create", request.method)
    assert.are.equal("Approve?", request.params.message)
    -- An unknown key is ignored; the right one resumes the handler.
    local ack = server:request("tasks/update", with_meta({ taskId = created.taskId,
      inputResponses = { nope = { action = "accept" }, [key] = { action = "accept", content = { ok = true } } } }))
    assert.are.same({ resultType = "complete" }, ack.result)
    local final = poll(server, created.taskId)
    assert.are.equal("completed", final.status)
    assert.are.equal("approved: true", final.result.content[1].text)
  end)

  it("never gives a task to a client that did not declare the extension", function()
    local plain = { elicitation = EMPTY }
    local r = call(server, "wait", { ms = 10 }, plain).result
    assert.are.equal("complete", r.resultType)
    assert.are.equal("waited 10", r.content[1].text)
    local refused = call(server, "must_wait", { ms = 10 }, plain)
    assert.are.equal(-32021, refused.error.code)
    assert.is_table(refused.error.data.requiredCapabilities.extensions[TASKS])
    assert.are.equal(-32021, get(server, "0123456789abcdef0123456789abcdef", plain).error.code)
    assert.are.equal(-32602, get(server, "0123456789abcdef0123456789abcdef").error.code)
    -- A session (2025-11-25) has no tasks either: the same handler answers.
    local legacy = client.spawn { "run", FIXTURE }
    legacy:initialize()
    assert.are.equal("waited 5", legacy:call_tool("wait", { ms = 5 }).content[1].text)
    legacy:close()
  end)

  it("answers quick calls in the request and turns slow ones into tasks (after_ms)", function()
    local quick = call(server, "maybe_slow", { ms = 0 }).result
    assert.are.equal("complete", quick.resultType)
    assert.are.equal("done after 0 ms (request)", quick.content[1].text)
    local slow = call(server, "maybe_slow", { ms = 1000 }).result
    assert.are.equal("task", slow.resultType)
    assert.are.equal(50, slow.pollIntervalMs)
    local final = poll(server, slow.taskId)
    assert.are.equal("done after 1000 ms (task)", final.result.content[1].text)
  end)
end)

describe("MCP tasks under limits", function()
  it("caps the tasks that run at once (--max-tasks)", function()
    local server = client.spawn { "run", "--max-tasks", "2", FIXTURE }
    local a = call(server, "wait", { ms = 60000 }).result
    local b = call(server, "wait", { ms = 60000 }).result
    assert.are.equal("task", a.resultType)
    assert.are.equal("task", b.resultType)
    -- At the cap a tool that may run as a task answers in the request ...
    local c = call(server, "wait", { ms = 20 }).result
    assert.are.equal("complete", c.resultType)
    assert.are.equal("waited 20", c.content[1].text)
    -- ... and one that must is refused.
    local d = call(server, "must_wait", { ms = 20 })
    assert.are.equal(-32603, d.error.code)
    assert.truthy(d.error.message:find("--max-tasks", 1, true))
    -- A cancelled task frees its place.
    server:request("tasks/cancel", with_meta({ taskId = a.taskId }))
    assert.are.equal("task", call(server, "must_wait", { ms = 20 }).result.resultType)
    server:close()
  end)

  it("finishes a task on its generation across a hot reload", function()
    local dir = client.temp_dir()
    local function script(version)
      return ([[
local mcp = require "mcp"
mcp.tool { name = "slow", task = true, handler = function()
  mcp.sleep(1500)
  return "slow %s"
end }
mcp.tool { name = "version", handler = function() return "%s" end }
]]):format(version, version)
    end
    client.write_file(dir .. "/tools.lua", script("v1"))
    local server = client.spawn { "dev", dir }
    local created = call(server, "slow").result
    assert.are.equal("task", created.resultType)
    client.write_file(dir .. "/tools.lua", script("v2"))
    assert.is_true(client.wait_until(function()
      return call(server, "version").result.content[1].text == "v2"
    end, 5000))
    local final = poll(server, created.taskId)
    assert.are.equal("completed", final.status)
    assert.are.equal("slow v1", final.result.content[1].text)
    assert.are.equal("slow v2", poll(server, call(server, "slow").result.taskId).result.content[1].text)
    server:close()
    client.remove_tree(dir)
  end)
end)
