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
  client.poll_until(function()
    local r = get(server, id)
    assert(r and r.result, "tasks/get: " .. cjson.encode(r or {}) .. "\n" .. server.stderr)
    state = r.result
    if seen[#seen] ~= state.status then seen[#seen + 1] = state.status end
    return state.status == "completed" or state.status == "failed" or state.status == "cancelled"
  end, timeout_ms or 60000)
  return state, seen
end

-- Wait (generously: a loaded machine is slow) until the task asks the
-- client; returns its state then.
local function wait_input_required(server, id)
  local state
  assert.is_true(client.poll_until(function()
    state = get(server, id).result
    return state.status == "input_required"
  end, 60000), "the task never asked: " .. cjson.encode(state or {}))
  return state
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
    assert.is_true(client.poll_until(function() -- a file appearing: no event says so
      local f = io.open(pidfile)
      pid = f and f:read("l")
      if f then f:close() end
      return pid ~= nil and pid ~= ""
    end, 60000))
    assert.is_true(alive(pid))
    assert.are.equal("working", get(server, created.taskId).result.status)
    local ack = server:request("tasks/cancel", with_meta({ taskId = created.taskId }))
    assert.are.same({ resultType = "complete" }, ack.result)
    assert.are.equal("cancelled", get(server, created.taskId).result.status)
    assert.is_true(client.poll_until(function() return not alive(pid) end, 60000), "the child outlived its task")
    -- Cancelling again, or a finished task, is the same acknowledgement.
    assert.are.same({ resultType = "complete" }, server:request("tasks/cancel", with_meta({ taskId = created.taskId })).result)
    client.remove_tree(dir)
  end)

  it("asks through the task: input_required with inputRequests, answered by tasks/update", function()
    local created = call(server, "approve").result
    local state = wait_input_required(server, created.taskId)
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
    assert.is_true(client.poll_until(function()
      return call(server, "version").result.content[1].text == "v2"
    end, 60000))
    local final = poll(server, created.taskId)
    assert.are.equal("completed", final.status)
    assert.are.equal("slow v1", final.result.content[1].text)
    assert.are.equal("slow v2", poll(server, call(server, "slow").result.taskId).result.content[1].text)
    server:close()
    client.remove_tree(dir)
  end)
end)

-- Issue 27: what tasks keep, whose places they take, and how long they wait.
describe("MCP tasks and what they hold", function()
  local http = require "spec.helpers.http_client"
  local MiB = 1024 * 1024

  -- A 2026-07-28 request's params with its envelope (caps and info replace
  -- the defaults) and more _meta keys (extra).
  local function modern(params, caps, info, extra)
    params._meta = {
      ["io.modelcontextprotocol/protocolVersion"] = V,
      ["io.modelcontextprotocol/clientCapabilities"] = caps or WITH_TASKS,
      ["io.modelcontextprotocol/clientInfo"] = info or { name = "busted", version = "1" },
    }
    for k, v in pairs(extra or {}) do params._meta[k] = v end
    return params
  end

  it("keeps only what a task needs of padded clientInfo and capabilities (1 MiB is refused at the door): 300 tasks grow RSS < 48 MiB", function()
    -- Under ASan, freed blocks wait in its quarantine (256 MiB) before reuse:
    -- a small one measures what the server keeps, not what ASan does.
    local asan = (os.getenv("ASAN_OPTIONS") or "detect_leaks=0") .. ":quarantine_size_mb=4"
    local server = client.spawn({ "run", FIXTURE }, { env = {
      "PATH=" .. os.getenv("PATH"), "HOME=" .. (os.getenv("HOME") or "/tmp"), "ASAN_OPTIONS=" .. asan } })
    finally(function() server:close() end)
    -- A request's clientInfo and capabilities are bounded (16 KiB each):
    -- 1 MiB is refused before anything is kept, ...
    local huge = server:request("tools/call", modern({ name = "wait", arguments = { ms = 1 } }, nil,
      { name = "busted", version = "1", padding = string.rep("x", MiB) }), 30000)
    assert.are.equal(-32602, huge.error and huge.error.code, cjson.encode(huge))
    -- ... and a task keeps only what it needs of what fits.
    local pad = string.rep("x", 15 * 1024)
    local padded_caps = { extensions = { [TASKS] = EMPTY }, elicitation = EMPTY, padding = pad }
    local padded_info = { name = "busted", version = "1", padding = pad }
    local function start()
      local params = modern({ name = "wait", arguments = { ms = 600000 } }, padded_caps, padded_info)
      local r = server:request("tools/call", params, 30000)
      assert(r and r.result and r.result.resultType == "task", "tools/call: " .. cjson.encode(r or {}) .. "\n" .. server.stderr)
    end
    for _ = 1, 10 do start() end -- buffers reach their size
    local before = http.rss_kb(server.pid)
    for _ = 11, 310 do start() end
    local after = http.rss_kb(server.pid)
    assert.is_true(after - before < 48 * 1024,
      ("300 tasks with 30 KiB of padding each grew RSS by %d kB"):format(after - before))
    -- What the task keeps still says who the client is and what it declared.
    local created = server:request("tools/call", modern({ name = "who", arguments = EMPTY }, padded_caps, padded_info))
    local state = poll(server, created.result.taskId)
    local who = state.result.structuredContent
    assert.are.equal("busted", who.name)
    assert.are.equal("1", who.version)
    assert.is_true(who.elicitation)
    assert.is_true(who.tasks)
    assert.is_true(who.padding <= 256, "clientInfo.padding kept " .. tostring(who.padding) .. " bytes")
  end)

  it("charges what running tasks hold to the tasks' budget, and gives it back when they are cancelled", function()
    local server = client.spawn { "run", FIXTURE }
    finally(function() server:close() end)
    local pad = string.rep("y", MiB)
    local function start()
      return server:request("tools/call", modern({ name = "must_wait", arguments = { ms = 600000 } }, nil, nil,
        { ["example.com/padding"] = pad }), 30000)
    end
    local ids, refused = {}, nil
    for _ = 1, 100 do
      local r = start()
      if r.error then
        refused = r.error
        break
      end
      ids[#ids + 1] = r.result.taskId
    end
    assert.is_table(refused, "100 tasks holding 1 MiB each were all kept")
    assert.are.equal(-32603, refused.code)
    assert.truthy(refused.message:find("budget", 1, true), refused.message)
    assert.is_true(#ids >= 32, #ids .. " tasks before the budget")
    for _, id in ipairs(ids) do
      assert.are.same({ resultType = "complete" }, server:request("tasks/cancel", modern({ taskId = id })).result)
    end
    local r = start()
    assert.is_table(r.result, cjson.encode(r))
    assert.are.equal("task", r.result.resultType)
  end)

  it("caps tasks per client (a quarter of --max-tasks) before the server's cap: one client cannot lock others out", function()
    local server = http.start({ FIXTURE, "--max-tasks", "8" })
    finally(function() server:stop() end)
    local next_id = 0
    local function call_as(name, tool)
      next_id = next_id + 1
      local params = modern({ name = tool, arguments = EMPTY }, nil, { name = name, version = "1.0" })
      return http.rpc(server:post({ jsonrpc = "2.0", id = next_id, method = "tools/call", params = params },
        http.modern_headers("tools/call", tool)))
    end
    -- alice's two tasks wait for answers she never gives.
    assert.are.equal("task", call_as("alice", "must_approve").result.resultType)
    assert.are.equal("task", call_as("alice", "must_approve").result.resultType)
    local third = call_as("alice", "must_approve")
    assert.is_table(third.error, cjson.encode(third))
    assert.are.equal(-32603, third.error.code)
    assert.truthy(third.error.message:find("--max-tasks-per-client", 1, true), third.error.message)
    assert.truthy(third.error.message:find("alice", 1, true), third.error.message)
    -- bob still gets his.
    local bob = call_as("bob", "must_approve")
    assert.is_table(bob.result, cjson.encode(bob))
    assert.are.equal("task", bob.result.resultType)
  end)

  it("fails a task whose question is not answered within --client-timeout, freeing its place", function()
    local server = client.spawn { "run", "--max-tasks", "5", "--client-timeout", "8000", FIXTURE }
    finally(function() server:close() end)
    local ids = {}
    for i = 1, 5 do
      local r = call(server, "must_approve")
      assert.is_table(r.result, cjson.encode(r))
      ids[i] = r.result.taskId
    end
    assert.are.equal(-32603, call(server, "must_wait", { ms = 10 }).error.code)
    -- Each waits for its answer (the timeout is far off at this point) ...
    for _, id in ipairs(ids) do assert.are.equal("input_required", get(server, id).result.status) end
    -- ... until it fails, naming the question and the limit.
    for _, id in ipairs(ids) do
      local state = poll(server, id, 60000)
      assert.are.equal("failed", state.status, cjson.encode(state))
      assert.truthy(state.statusMessage:find("did not answer within 8000 ms (--client-timeout)", 1, true),
        state.statusMessage)
      assert.truthy(state.error.message:find("elicitation/create", 1, true), state.error.message)
    end
    local r = call(server, "must_wait", { ms = 10 })
    assert.is_table(r.result, cjson.encode(r))
    assert.are.equal("completed", poll(server, r.result.taskId).status)
  end)

  it("does not keep a generation open for a task waiting for input across reloads (5 SIGHUPs)", function()
    local server = client.spawn { "run", "--client-timeout", "600000", FIXTURE }
    finally(function() server:close() end)
    local function info() return call(server, "info").result.structuredContent end
    local ids = {}
    for g = 1, 5 do
      local r = call(server, "must_approve")
      assert.is_table(r.result, cjson.encode(r))
      ids[g] = r.result.taskId
      wait_input_required(server, ids[g])
      server:kill("sighup")
      assert.is_true(client.wait_until(function() return info().generation == g + 1 end, 20000), server.stderr)
    end
    local open
    assert.is_true(client.wait_until(function()
      open = info().generations_open
      return open == 1
    end, 20000), "generations still open: " .. tostring(open))
    for _, id in ipairs(ids) do
      local state = get(server, id).result
      assert.are.equal("failed", state.status)
      assert.truthy(state.statusMessage:find("reloaded", 1, true), state.statusMessage)
    end
  end)

  it("rejects an elicitation answer the protocol does not allow (tasks/update) with -32602", function()
    local server = client.spawn { "run", FIXTURE }
    finally(function() server:close() end)
    local created = call(server, "must_approve").result
    local state = wait_input_required(server, created.taskId)
    local key = next(state.inputRequests)
    server:request("tasks/update", with_meta({ taskId = created.taskId, inputResponses = { [key] = { action = "bogus" } } }))
    local final = poll(server, created.taskId)
    assert.are.equal("failed", final.status, cjson.encode(final))
    assert.are.equal(-32602, final.error.code)
    assert.truthy(final.error.message:find('action "bogus"', 1, true), final.error.message)
  end)

  it("frees the tasks still waiting when the server stops (LeakSanitizer)", function()
    local asan = os.getenv("LUAMCP_ASAN") or "build/luamcp-asan"
    local f = io.open(asan)
    if not f then
      pending("no ASan build at " .. asan)
      return
    end
    f:close()
    local server = client.spawn({ "run", FIXTURE }, { bin = asan, env = {
      "PATH=" .. os.getenv("PATH"), "HOME=" .. (os.getenv("HOME") or "/tmp"),
      "ASAN_OPTIONS=detect_leaks=1:abort_on_error=0" } })
    finally(function() server:close() end)
    -- An ASan build starts slowly on a busy machine: a generous first wait.
    local function start(name, args)
      local r = server:request("tools/call", with_meta({ name = name, arguments = args or EMPTY }), 60000)
      assert(r and r.result, "tools/call " .. name .. ": " .. cjson.encode(r or {}) .. "\n" .. server.stderr)
      assert.are.equal("task", r.result.resultType)
      return r.result
    end
    for _ = 1, 3 do start("must_approve") end
    start("wait", { ms = 600000 })
    local created = start("must_approve")
    wait_input_required(server, created.taskId)
    server:close_stdin()
    server:wait_exit(60000)
    assert.is_true(server.exited, "still running after its input ended")
    assert.is_nil(server.stderr:find("LeakSanitizer", 1, true), server.stderr)
    assert.is_nil(server.stderr:find("AddressSanitizer", 1, true), server.stderr)
    assert.are.equal(0, server.exit_code, server.stderr)
  end)
end)
