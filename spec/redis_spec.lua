-- --redis: a real redis-server (a port chosen at run time, no persistence,
-- stopped here) and two separate luamcp processes on it. mcp.store stays
-- consistent under concurrent increments from both; the bus carries a
-- resource update and a reload's list_changed from one process to the
-- other's clients; an input_required retry sent to the other process is
-- accepted (the requestState key is agreed through Redis); when Redis goes
-- away, store calls fail with a clear error and everything else carries
-- on, and they recover when it comes back. The in-process backend keeps the
-- same semantics and survives a reload.
local client = require "spec.helpers.mcp_client"
local http = require "spec.helpers.http_client"
local services = require "spec.helpers.services"
local cjson = require "cjson"
local uv = require "luv"

local FIXTURE = "spec/fixtures/redis"
local EMPTY = cjson.decode("{}")

local meta, modern_headers, rpc = http.modern_meta, http.modern_headers, http.rpc

-- A stateless tools/call; returns the result.
local function call(server, name, args, caps, extra)
  local params = { name = name, arguments = args or EMPTY, _meta = meta(caps) }
  for k, v in pairs(extra or {}) do params[k] = v end
  local m = rpc(server:post({ jsonrpc = "2.0", id = 1, method = "tools/call", params = params },
    modern_headers("tools/call", name)))
  assert(m and m.result, "no result: " .. cjson.encode(m or {}))
  return m.result
end

local function text(result) return result.content[1] and result.content[1].text end

-- One mcp.store call through the fixture's store tool: its value, or
-- raises with the tool's error.
local function store(server, args)
  local r = call(server, "store", args)
  if r.isError then error(text(r), 0) end
  local v = r.structuredContent.value
  if v == "<nil>" then return nil end
  return v
end

-- The same checks on either backend.
local function semantics(server)
  local key = "sem-" .. tostring(uv.hrtime())
  assert.is_nil(store(server, { op = "get", key = key }))
  assert.is_true(store(server, { op = "set", key = key, value = { a = { 1, 2 }, b = "x" } }))
  assert.are.same({ a = { 1, 2 }, b = "x" }, store(server, { op = "get", key = key }))
  -- incr: from absent, by a step; a value that is not an integer refuses.
  assert.are.equal(1, store(server, { op = "incr", key = key .. "n" }))
  assert.are.equal(11, store(server, { op = "incr", key = key .. "n", by = 10 }))
  assert.are.equal(11, store(server, { op = "get", key = key .. "n" }))
  local ok, err = pcall(store, server, { op = "incr", key = key })
  assert.is_false(ok)
  assert.truthy(err:find("is not an integer", 1, true), err)
  -- cas: nil expected means absent; a mismatch changes nothing; nil new deletes.
  local c = key .. "c"
  assert.is_true(store(server, { op = "cas", key = c, expected = "<nil>", new = "one" }))
  assert.is_false(store(server, { op = "cas", key = c, expected = "<nil>", new = "two" }))
  assert.is_false(store(server, { op = "cas", key = c, expected = "zero", new = "two" }))
  assert.are.equal("one", store(server, { op = "get", key = c }))
  assert.is_true(store(server, { op = "cas", key = c, expected = "one", new = "two" }))
  assert.are.equal("two", store(server, { op = "get", key = c }))
  assert.is_true(store(server, { op = "cas", key = c, expected = "two", new = "<nil>" }))
  assert.is_nil(store(server, { op = "get", key = c }))
  -- delete says whether the key was there.
  assert.is_true(store(server, { op = "delete", key = key }))
  assert.is_false(store(server, { op = "delete", key = key }))
  -- ttl: there, then gone (no bound on when: only that it goes).
  assert.is_true(store(server, { op = "set", key = key .. "t", value = 5, ttl = 0.2 }))
  assert.is_true(client.wait_until(function() return store(server, { op = "get", key = key .. "t" }) == nil end, 10000))
  -- Outside the handler's own coroutine: a clear error, on both backends.
  assert.truthy(text(call(server, "outside")):find("mcp.store.get can only be called while handling a request", 1, true))
end

-- A 2026-07-28 subscriptions/listen stream on its own connection, read
-- up to its acknowledgement.
local function listen(server, filter, caps)
  local conn = server:connect()
  conn:send_request { method = "POST", headers = (function()
    local h = modern_headers("subscriptions/listen")
    h.Accept = http.ACCEPT_BOTH
    h["Content-Type"] = "application/json"
    return h
  end)(), body = { jsonrpc = "2.0", id = "listen-1", method = "subscriptions/listen",
                   params = { notifications = filter, _meta = meta(caps) } } }
  local head = conn:read_head()
  assert.are.equal(200, head.status)
  local ack = conn:read_event()
  assert.are.equal("notifications/subscriptions/acknowledged", ack.json.method)
  return conn
end

-- A legacy session subscribed to uri, with its GET stream open.
local function legacy_session(server, uri)
  local session = server:initialize()
  local h = { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" }
  if uri then
    local r = server:post({ jsonrpc = "2.0", id = 2, method = "resources/subscribe", params = { uri = uri } }, h)
    assert.are.equal(200, r.status)
  end
  local conn = server:connect()
  conn:send_request { method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = session,
                                                  ["MCP-Protocol-Version"] = "2025-11-25" } }
  assert.are.equal(200, conn:read_head().status)
  return conn
end

-- The next event with a message named method (skipping priming events).
local function next_message(conn, method)
  while true do
    local e = conn:read_event(10000)
    if not e then return nil end
    if e.json and e.json.method == method then return e.json end
  end
end

describe("--redis", function()
  if not services.which("redis-server") then
    print("redis_spec: skipped: redis-server is not installed (Debian: apt install redis-server)")
    return
  end

  local redis, port, url, a, b, a_dir
  setup(function()
    port = services.free_port()
    redis = services.redis(port)
    url = "redis://127.0.0.1:" .. port .. "/3"
    -- A's scripts in a folder of their own, so that the spec can change them.
    a_dir = client.temp_dir()
    client.write_file(a_dir .. "/tools.lua", client.read_file(FIXTURE .. "/tools.lua"))
    a = http.start({ a_dir, "--redis", url })
    b = http.start({ FIXTURE, "--redis", url })
  end)
  teardown(function()
    if a then a:stop_cleanly() end
    if b then b:stop_cleanly() end
    if redis then redis:stop() end
    if a_dir then client.remove_tree(a_dir) end
  end)

  it("keeps counters consistent under concurrent increments from two processes", function()
    -- 200 concurrent increments in each process (mcp.all), both at once.
    local body = function(id)
      return { jsonrpc = "2.0", id = id, method = "tools/call",
               params = { name = "incr_many", arguments = { key = "hits", n = 200 }, _meta = meta() } }
    end
    local h = modern_headers("tools/call", "incr_many")
    h.Accept, h["Content-Type"] = http.ACCEPT_BOTH, "application/json"
    local ca, cb = a:connect(), b:connect()
    ca:send_request { method = "POST", headers = h, body = body(1) }
    cb:send_request { method = "POST", headers = h, body = body(2) }
    assert.are.equal("200", text(rpc(ca:read_response(30000)).result))
    assert.are.equal("200", text(rpc(cb:read_response(30000)).result))
    assert.are.equal(400, store(a, { op = "get", key = "hits" }))
    assert.are.equal(400, store(b, { op = "get", key = "hits" }))
  end)

  it("has get, set, ttl, incr, delete and cas semantics, one process seeing the other's writes", function()
    semantics(a)
    assert.is_true(store(a, { op = "set", key = "shared", value = { from = "a" } }))
    assert.are.same({ from = "a" }, store(b, { op = "get", key = "shared" }))
    assert.is_true(store(b, { op = "cas", key = "shared", expected = { from = "a" }, new = { from = "b" } }))
    assert.are.same({ from = "b" }, store(a, { op = "get", key = "shared" }))
  end)

  it("carries a resource update raised on one process to the other's listeners and subscribed sessions", function()
    local stream = listen(b, { resourceSubscriptions = { "test://doc" } })
    local legacy = legacy_session(b, "test://doc")
    assert.are.equal("ok", text(call(a, "touch", { uri = "test://doc" })))
    local m = next_message(stream, "notifications/resources/updated")
    assert.is_table(m, "no resources/updated on B's listen stream")
    assert.are.equal("test://doc", m.params.uri)
    assert.are.equal("listen-1", m.params._meta["io.modelcontextprotocol/subscriptionId"])
    m = next_message(legacy, "notifications/resources/updated")
    assert.is_table(m, "no resources/updated on B's legacy session")
    assert.are.equal("test://doc", m.params.uri)
  end)

  it("tells the other process's clients that the lists changed after a reload", function()
    local stream = listen(b, { toolsListChanged = true })
    local legacy = legacy_session(b)
    client.write_file(a_dir .. "/more.lua", 'require("mcp").tool { name = "more", handler = function() return 1 end }\n')
    a.proc.handle:kill("sighup")
    assert.is_table(next_message(stream, "notifications/tools/list_changed"), "no list_changed on B's listen stream")
    assert.is_table(next_message(legacy, "notifications/tools/list_changed"), "no list_changed on B's session")
    -- B itself was not reloaded: it does not serve the new tool.
    local r = rpc(b:post({ jsonrpc = "2.0", id = 3, method = "tools/list", params = { _meta = meta() } },
      modern_headers("tools/list")))
    for _, t in ipairs(r.result.tools) do assert.are_not.equal("more", t.name) end
  end)

  it("tells the other process's clients that a list changed at run time", function()
    local stream = listen(b, { toolsListChanged = true })
    local legacy = legacy_session(b)
    assert.are.equal("ok", text(call(a, "toggle")))
    assert.is_table(next_message(stream, "notifications/tools/list_changed"), "no list_changed on B's listen stream")
    assert.is_table(next_message(legacy, "notifications/tools/list_changed"), "no list_changed on B's session")
  end)

  it("accepts an input_required retry on the other process (the requestState key is shared)", function()
    local caps = { elicitation = EMPTY }
    local r1 = call(a, "greet", nil, caps)
    assert.are.equal("input_required", r1.resultType)
    local key = next(r1.inputRequests)
    local r2 = call(b, "greet", nil, caps, { requestState = r1.requestState,
      inputResponses = { [key] = { action = "accept", content = { name = "Bo" } } } })
    assert.are.equal("Hello, Bo", text(r2), cjson.encode(r2))
  end)

  it("serves tasks/get, tasks/update and tasks/cancel for a task another process runs, and its notifications", function()
    local TASKS = "io.modelcontextprotocol/tasks"
    local caps = { extensions = { [TASKS] = EMPTY }, elicitation = EMPTY }
    local function request(server, method, params)
      params._meta = meta(caps)
      return rpc(server:post({ jsonrpc = "2.0", id = 9, method = method, params = params },
        modern_headers(method, params.taskId)))
    end
    local created = call(a, "approve", nil, caps)
    assert.are.equal("task", created.resultType, cjson.encode(created))
    local id = created.taskId
    local stream = listen(b, { taskIds = { id } }, caps)
    -- B does not hold the task: A answers through the bus.
    local state
    assert.is_true(client.wait_until(function()
      state = request(b, "tasks/get", { taskId = id }).result
      return state.status == "input_required"
    end, 10000), cjson.encode(state))
    local key = next(state.inputRequests)
    local r = request(b, "tasks/update", { taskId = id, inputResponses = {
      [key] = { action = "accept", content = { ok = true } } } })
    assert.is_table(r.result, cjson.encode(r))
    -- B's listener hears of the task's changes, which happen in A.
    local m
    repeat m = next_message(stream, "notifications/tasks") until not m or m.params.status == "completed"
    assert.is_table(m, "no notifications/tasks for completed on B's listen stream")
    local done = request(b, "tasks/get", { taskId = id }).result
    assert.are.equal("completed", done.status)
    assert.are.equal("approved: true", done.result.content[1].text)
    -- Cancelled from B, stopped in A.
    local long = call(a, "long_job", nil, caps)
    local c = request(b, "tasks/cancel", { taskId = long.taskId })
    assert.is_table(c.result, cjson.encode(c))
    assert.are.equal("cancelled", request(a, "tasks/get", { taskId = long.taskId }).result.status)
    -- A task nobody holds: the answer one process gives.
    local unknown = request(b, "tasks/get", { taskId = ("0"):rep(32) })
    assert.are.equal(-32602, unknown.error.code)
  end)

  it("drops a reply whose call was cancelled first", function()
    -- Redis pauses every client for a moment: the call is cancelled (its
    -- connection closed) while its command waits, and the reply that
    -- follows finds no task.
    assert(os.execute("redis-cli -p " .. port .. " CLIENT PAUSE 1000 ALL >/dev/null"))
    for i = 1, 5 do
      local conn = a:connect()
      local h = modern_headers("tools/call", "store")
      h.Accept, h["Content-Type"] = "application/json", "application/json"
      conn:send_request { method = "POST", headers = h, body = { jsonrpc = "2.0", id = i, method = "tools/call",
        params = { name = "store", arguments = { op = "incr", key = "paused" }, _meta = meta() } } }
      assert.is_true(conn:server_read_all()) -- its command is sent, and waits
      conn:close()
    end
    -- This call's command follows theirs on the same Redis connection: its
    -- reply comes after the ones nobody waits for any more.
    assert.is_number(store(a, { op = "incr", key = "paused" }))
    assert.is_true(a:alive())
  end)

  it("fails store calls at once while Redis is away, keeps serving the rest, and recovers", function()
    redis:stop()
    redis = nil
    for _, server in ipairs { a, b } do
      local ok, err = pcall(store, server, { op = "incr", key = "hits" })
      assert.is_false(ok)
      assert.truthy(err:find("redis unavailable", 1, true), err)
      assert.are.equal("pong", text(call(server, "plain")))
    end
    assert.truthy(a:stderr():find("connection to 127.0.0.1:" .. port .. "/3 lost", 1, true), a:stderr())
    redis = services.redis(port)
    for _, server in ipairs { a, b } do
      assert.is_true(client.wait_until(function()
        return pcall(store, server, { op = "set", key = "back", value = true })
      end, 20000), server:stderr())
    end
    assert.truthy(a:stderr():find("is back", 1, true))
    -- The bus came back too.
    local stream = listen(b, { resourceSubscriptions = { "test://doc" } })
    assert.is_true(client.wait_until(function()
      call(a, "touch", { uri = "test://doc" })
      local e = stream:read_event(500)
      return e and e.json and e.json.method == "notifications/resources/updated"
    end, 20000))
  end)
end)

describe("--redis-env", function()
  if not services.which("redis-server") then return end
  local PASSWORD = "pw-" .. tostring(uv.hrtime())

  -- The command line of pid, its arguments joined by spaces.
  local function cmdline(pid)
    local f = io.open("/proc/" .. pid .. "/cmdline")
    if not f then return "" end
    local text = f:read("a"):gsub("%z", " ")
    f:close()
    return text
  end

  -- The pids whose parent is pid.
  local function children(pid)
    local found = {}
    for dir in io.popen("ls /proc"):lines() do
      local f = dir:match("^%d+$") and io.open("/proc/" .. dir .. "/stat")
      if f then
        local ppid = tonumber((f:read("a") or ""):match("^%d+ %b() %a (%d+)"))
        f:close()
        if ppid == pid then found[#found + 1] = tonumber(dir) end
      end
    end
    return found
  end

  local redis, server
  after_each(function()
    if server then server:stop_cleanly() end
    if redis then redis:stop() end
    server, redis = nil, nil
  end)

  it("reads the URL, password and all, from the environment: no command line shows it, the workers' neither", function()
    local port = services.free_port()
    redis = services.redis(port, { password = PASSWORD })
    local env = { "LUAMCP_TEST_REDIS=redis://:" .. PASSWORD .. "@127.0.0.1:" .. port .. "/5",
                  "PATH=" .. (os.getenv("PATH") or "/usr/bin:/bin"), "ASAN_OPTIONS=" .. (os.getenv("ASAN_OPTIONS") or "") }
    server = http.start({ FIXTURE, "--workers", "2", "--redis-env", "LUAMCP_TEST_REDIS" }, { env = env })
    -- Authenticated: the store works, from whichever worker.
    for i = 1, 4 do assert.are.equal(i, store(server, { op = "incr", key = "env-hits" })) end
    local workers = children(server.proc.pid)
    assert.are.equal(2, #workers)
    for _, pid in ipairs { server.proc.pid, table.unpack(workers) } do
      local line = cmdline(pid)
      assert.truthy(line:find("--redis-env LUAMCP_TEST_REDIS", 1, true), line)
      assert.falsy(line:find(PASSWORD, 1, true), line)
    end
    assert.falsy(server:stderr():find(PASSWORD, 1, true), server:stderr())
    assert.falsy(server:stderr():find("--redis-env NAME", 1, true), server:stderr())
  end)

  it("warns when --redis has the password on the command line, and refuses a variable that is unset, or both options", function()
    local port = services.free_port()
    redis = services.redis(port, { password = PASSWORD })
    server = http.start({ FIXTURE, "--redis", "redis://:" .. PASSWORD .. "@127.0.0.1:" .. port })
    assert.are.equal(1, store(server, { op = "incr", key = "argv-hits" }))
    assert.truthy(server:stderr():find("give the URL in an environment variable with --redis-env NAME", 1, true),
      server:stderr())
    for _, args in ipairs {
      { "run", "--redis-env", "LUAMCP_TEST_UNSET_VARIABLE", FIXTURE },
      { "run", "--redis-env", "PATH", "--redis", "redis://127.0.0.1", FIXTURE },
    } do
      local proc = client.spawn(args)
      proc:wait_exit(5000)
      assert.are.equal(2, proc.exit_code, proc.stderr)
      assert.truthy(proc.stderr:find("LUAMCP_TEST_UNSET_VARIABLE is empty or unset", 1, true)
        or proc.stderr:find("give --redis or --redis-env, not both", 1, true), proc.stderr)
      proc:close()
    end
  end)
end)

describe("mcp.store without --redis", function()
  it("has the same semantics in the process", function()
    local server = http.start({ FIXTURE })
    semantics(server)
    server:stop_cleanly()
  end)

  it("survives a reload", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/tools.lua", client.read_file(FIXTURE .. "/tools.lua"))
    local server = http.start({ dir })
    assert.is_true(store(server, { op = "set", key = "kept", value = { n = 1 } }))
    assert.are.equal(7, store(server, { op = "incr", key = "count", by = 7 }))
    client.write_file(dir .. "/more.lua", 'require("mcp").tool { name = "more", handler = function() return 1 end }\n')
    server.proc.handle:kill("sighup")
    assert.is_true(client.wait_until(function() return server:stderr():find("reloaded", 1, true) end, 10000))
    assert.are.same({ n = 1 }, store(server, { op = "get", key = "kept" }))
    assert.are.equal(8, store(server, { op = "incr", key = "count" }))
    server:stop_cleanly()
    client.remove_tree(dir)
  end)

  it("starts with Redis down, serves, and fails store calls with a clear error", function()
    local server = http.start({ FIXTURE, "--redis", "redis://127.0.0.1:" .. services.free_port() })
    assert.truthy(server:stderr():find("not reached", 1, true), server:stderr())
    assert.are.equal("pong", text(call(server, "plain")))
    local ok, err = pcall(store, server, { op = "get", key = "x" })
    assert.is_false(ok)
    assert.truthy(err:find("redis unavailable", 1, true), err)
    server:stop_cleanly()
  end)

  it("refuses a --redis URL it cannot read", function()
    local proc = client.spawn({ "run", "--redis", "http://x", FIXTURE })
    proc:wait_exit(5000)
    assert.are.equal(2, proc.exit_code)
    assert.truthy(proc.stderr:find("expected redis://", 1, true), proc.stderr)
    proc:close()
  end)
end)
