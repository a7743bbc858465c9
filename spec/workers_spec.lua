-- luamcp run --http ... --workers N: a supervisor and N worker processes
-- sharing one port, driven over raw HTTP on 127.0.0.1 (spec/helpers/
-- http_client.lua). Which worker accepts a connection is the kernel's
-- choice, so the specs ask often enough to see every worker, and assert
-- which worker answered (the fixture's tools say: "INDEX PID"), never how
-- fast.

local http = require "http_client"
local uv = require "luv"
local cjson = http.json

local FIXTURE = "spec/fixtures/workers"
local V = "2025-11-25"
local EMPTY = cjson.decode("{}")

local function modern_call(server, name, arguments)
  local r = server:post({ jsonrpc = "2.0", id = 1, method = "tools/call", params = {
    name = name, arguments = arguments or EMPTY, _meta = http.modern_meta() } },
    http.modern_headers("tools/call", name))
  assert(r and r.json and r.json.result, "no result: " .. cjson.encode(r or {}))
  return r.json.result.content[1].text
end

-- "INDEX PID" -> index, pid
local function who(text)
  local index, pid = text:match("^(%d+) (%d+)$")
  assert(index, "not INDEX PID: " .. tostring(text))
  return tonumber(index), tonumber(pid)
end

-- Ask fresh connections until every one of n workers answered; returns
-- {[index] = pid}.
local function worker_pids(server, n)
  local pids, seen = {}, 0
  for _ = 1, 200 do
    local index, pid = who(modern_call(server, "whoami"))
    if not pids[index] then pids[index], seen = pid, seen + 1 end
    if seen == n then return pids end
  end
  error("not every worker answered: " .. cjson.encode(pids))
end

local function on(session, extra)
  local h = { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local function call_message(id, name, arguments)
  return { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = name, arguments = arguments or EMPTY } }
end

-- A legacy session's tools/call on a fresh connection: the response.
local function legacy_call(server, session, name, arguments)
  return server:post(call_message(7, name, arguments), on(session))
end

local function text_of(r)
  assert.is_table(r, "no response")
  assert.are.equal(200, r.status, r.body)
  return r.json.result.content[1].text
end

-- The worker a session id names.
local function owner(id)
  return tonumber(id:match("^w(%d+)%-%x+$") or id:match("^[%w_-]+%.w(%d+)%-%x+$"))
end

-- Initialize sessions on fresh connections until there is one of every
-- worker; returns {[index] = session id}.
local function sessions_of_every_worker(server, n)
  local by_owner, seen = {}, 0
  for _ = 1, 200 do
    local id = server:initialize()
    local k = owner(id)
    if not by_owner[k] then by_owner[k], seen = id, seen + 1 end
    if seen == n then return by_owner end
  end
  error("no session on every worker")
end

local function gone(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return true end
  local state = f:read("a"):match("^%d+ %b() (%a)")
  f:close()
  return state == "Z"
end

-- stop_cleanly, and no worker may have crashed or reported undefined
-- behaviour on the way (under the ASan build a report ends a worker,
-- which the supervisor would otherwise quietly restart).
local function stop_cleanly(server)
  local stderr = server:stderr()
  assert.is_nil(stderr:match("ERROR: AddressSanitizer[^\n]*") or stderr:match("runtime error:[^\n]*")
    or stderr:match("killed by signal 6[^\n]*") or stderr:match("killed by signal 11[^\n]*"), stderr)
  server:stop_cleanly()
end

local function count(text, pattern)
  local n = 0
  for _ in text:gmatch(pattern) do n = n + 1 end
  return n
end

describe("--workers 2", function()
  local server
  setup(function() server = http.start({ FIXTURE, "--workers", "2" }) end)
  teardown(function() stop_cleanly(server) end)

  it("says where it serves once, and serves from two worker processes, children of the supervisor", function()
    assert.are.equal(1, count(server:stderr(), "serving MCP over HTTP at"))
    assert.truthy(server:stderr():find("by 2 workers", 1, true), server:stderr())
    local pids = worker_pids(server, 2)
    assert.are_not.equal(pids[1], pids[2])
    for _, pid in pairs(pids) do
      assert.are_not.equal(server.proc.pid, pid)
      local f = assert(io.open("/proc/" .. pid .. "/stat"))
      local ppid = tonumber(f:read("a"):match("^%d+ %b() %a (%d+)"))
      f:close()
      assert.are.equal(server.proc.pid, ppid)
    end
  end)

  it("names the worker in every legacy session id, and each request of a session reaches it, whoever accepts", function()
    -- Which worker accepts is the kernel's choice (a loaded machine may
    -- give one worker many in a row): sessions until both own some, and
    -- 16 at least, with a generous bound.
    local sessions, by = {}, {}
    while #sessions < 16 or not (by[1] and by[2]) do
      assert(#sessions < 400, "no session on the second worker after 400")
      local id = server:initialize()
      assert.truthy(id:match("^w[12]%-" .. ("%x"):rep(32) .. "$"), id)
      sessions[#sessions + 1] = id
      by[owner(id)] = true
    end
    local owners = {}
    for _, id in ipairs(sessions) do
      for _ = 1, 4 do
        local index = who(text_of(legacy_call(server, id, "whoami")))
        assert.are.equal(owner(id), index)
        owners[index] = true
      end
    end
    assert.is_true(owners[1] and owners[2], "sessions on both workers")
  end)

  it("streams a session's notifications on a GET opened on any connection, and ends it on DELETE", function()
    local by_owner = sessions_of_every_worker(server, 2)
    for k, id in pairs(by_owner) do
      for _ = 1, 3 do -- fresh connections: some land on the other worker
        -- The previous round's stream was closed by this client; its worker
        -- may not have seen the close yet, and a session has one GET stream
        -- (409 until then): ask again until it has, generously bounded.
        local get, head
        assert.is_true(http.wait_until(function()
          if get then get:close() end
          get = server:connect()
          assert.is_true(get:send_request { method = "GET", headers = on(id, { Accept = "text/event-stream" }) })
          head = get:read_head()
          return head and head.status ~= 409
        end, 30000), "the session's previous GET stream was never released")
        assert.are.equal(200, head.status)
        assert.are.equal("text/event-stream", head.headers["content-type"])
        assert.are.equal(k, who(text_of(legacy_call(server, id, "toggle"))))
        local found
        for _ = 1, 10 do
          local e = get:read_event(3000)
          if not e then break end
          if e.json and e.json.method == "notifications/tools/list_changed" then found = e break end
        end
        assert.is_table(found, "no list_changed on the GET stream of " .. id)
        get:close()
      end
      local r = server:request { method = "DELETE", headers = on(id) }
      assert.are.equal(200, r.status, r.body)
      http.assert_error(legacy_call(server, id, "whoami"), 404, -32001, "Session not found", 7)
    end
  end)

  it("carries requests of sessions of both workers on one keep-alive connection, one by one and pipelined", function()
    local by_owner = sessions_of_every_worker(server, 2)
    local conn = server:connect()
    local function request(id, n)
      return { method = "POST", headers = on(id, { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }),
               body = call_message(n, "whoami") }
    end
    for i = 1, 8 do
      local k = i % 2 + 1
      local r = conn:request(request(by_owner[k], i))
      assert.are.equal(k, who(text_of(r)))
      assert.are.equal(i, r.json.id)
    end
    -- Pipelined: the second request is read by the worker that answers
    -- the first, and handed over with the bytes after it.
    local bytes = http.format_request(server.port, request(by_owner[1], 100))
      .. http.format_request(server.port, request(by_owner[2], 101))
      .. http.format_request(server.port, request(by_owner[1], 102))
    conn.methods = { "POST", "POST", "POST" }
    assert.is_true(conn:write(bytes))
    for n, k in ipairs { 1, 2, 1 } do
      local r = conn:read_response()
      assert.are.equal(99 + n, r.json.id)
      assert.are.equal(k, who(text_of(r)))
    end
  end)

  it("resumes a session's stream with Last-Event-ID on a connection another worker accepted", function()
    local by_owner = sessions_of_every_worker(server, 2)
    for k, id in pairs(by_owner) do
      local get = server:connect()
      assert.is_true(get:send_request { method = "GET", headers = on(id, { Accept = "text/event-stream" }) })
      assert.are.equal(200, get:read_head().status)
      local prime = get:read_event()
      assert.truthy(prime and prime.id, "a priming event")
      get:close()
      -- The stream is detached: what the session is told now is kept.
      assert.are.equal(k, who(text_of(legacy_call(server, id, "toggle"))))
      for _ = 1, 3 do
        local again = server:connect()
        assert.is_true(again:send_request { method = "GET",
          headers = on(id, { Accept = "text/event-stream", ["Last-Event-ID"] = prime.id }) })
        assert.are.equal(200, again:read_head().status)
        local e = again:read_event()
        assert.is_table(e and e.json, "the missed notification, replayed")
        assert.are.equal("notifications/tools/list_changed", e.json.method)
        again:close()
      end
    end
  end)

  it("answers one tools/list on every worker after a tool is registered, and removed, at run time", function()
    -- Keep-alive connections pinned to each worker (the kernel's choice),
    -- several per worker: sessionless 2026-07-28 requests, each answered by
    -- the worker its connection reached.
    local function modern(conn, id, method, params)
      params._meta = http.modern_meta()
      local r = conn:request { method = "POST", headers = http.modern_headers(method, params.name,
        { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }),
        body = { jsonrpc = "2.0", id = id, method = method, params = params } }
      assert(r and r.json and r.json.result, cjson.encode(r and r.json or {}))
      return r.json.result
    end
    local function names(conn)
      local out = {}
      for i, t in ipairs(modern(conn, 2, "tools/list", {}).tools) do out[i] = t.name end
      return table.concat(out, " ")
    end
    local conns, per_worker = {}, { 0, 0 }
    for _ = 1, 200 do
      local conn = server:connect()
      local index = who(modern(conn, 1, "tools/call", { name = "whoami", arguments = EMPTY }).content[1].text)
      if per_worker[index] < 4 then
        per_worker[index] = per_worker[index] + 1
        conns[#conns + 1] = { conn = conn, worker = index }
      else
        conn:close()
      end
      if per_worker[1] == 4 and per_worker[2] == 4 then break end
    end
    assert.are.same({ 4, 4 }, per_worker, "not every worker answered")
    local before = names(conns[1].conn)
    -- Registered by worker 2's call: every connection lists it, in one order.
    local by = conns[#conns].worker
    for _, c in ipairs(conns) do
      if c.worker ~= conns[1].worker then by = c break end
    end
    assert.are.equal(by.worker, who(modern(by.conn, 3, "tools/call",
      { name = "add", arguments = { name = "late", text = "here" } }).content[1].text))
    local want = before .. " late"
    for _, c in ipairs(conns) do
      -- The other worker hears of it over the bus: wait for that, then
      -- nothing differs.
      assert.is_true(http.wait_until(function() return names(c.conn) == want end, 30000),
        "worker " .. c.worker .. " lists: " .. names(c.conn))
      assert.are.equal("here", modern(c.conn, 4, "tools/call", { name = "late", arguments = EMPTY }).content[1].text)
    end
    for _ = 1, 8 do
      for _, c in ipairs(conns) do assert.are.equal(want, names(c.conn)) end
    end
    -- Removed by the other worker's call: gone everywhere.
    local other = conns[1].worker == by.worker and conns[#conns] or conns[1]
    assert.are_not.equal(by.worker, other.worker)
    modern(other.conn, 5, "tools/call", { name = "drop", arguments = { name = "late" } })
    for _, c in ipairs(conns) do
      assert.is_true(http.wait_until(function() return names(c.conn) == before end, 30000),
        "worker " .. c.worker .. " lists: " .. names(c.conn))
    end
    for _, c in ipairs(conns) do c.conn:close() end
  end)

  it("warns once that a tool registered at run time without mcp.everywhere is on one worker only", function()
    modern_call(server, "add_here")
    assert.is_true(server:wait_stderr("tool here_only registered at run time (server.lua:"),
      server:stderr())
    modern_call(server, "add_here")
    modern_call(server, "add_here")
    -- mcp.everywhere's changes (the test before) are every worker's: no
    -- warning of theirs; one per worker that ran add_here.
    local stderr = server:stderr()
    assert.is_nil(stderr:find("tool late registered at run time", 1, true), stderr)
    local warnings = count(stderr, "tool here_only registered at run time")
    assert.is_true(warnings >= 1 and warnings <= 2, stderr)
  end)

  it("seals 2026-07-28 requestState with one key: a retry opens it on whichever worker reads it", function()
    -- Which worker accepts a connection is the kernel's choice: open
    -- connections (kept open) until one of each worker has answered on its
    -- own, then ask on one worker's connection and retry on the other's.
    local function call_on(conn, id, name, extra)
      local params = { name = name, arguments = EMPTY, _meta = http.modern_meta({ elicitation = EMPTY }) }
      for k, v in pairs(extra or {}) do params[k] = v end
      local headers = http.modern_headers("tools/call", name,
        { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" })
      local r = conn:request { method = "POST", headers = headers,
        body = { jsonrpc = "2.0", id = id, method = "tools/call", params = params } }
      assert(r and r.json and r.json.result, cjson.encode(r or {}))
      return r.json.result
    end
    local conn_of = {}
    for _ = 1, 200 do
      local conn = server:connect()
      local index = who(call_on(conn, 1, "whoami").content[1].text)
      conn_of[index] = conn_of[index] or conn
      if conn_of[1] and conn_of[2] then break end
    end
    assert.is_truthy(conn_of[1] and conn_of[2], "not every worker answered")
    for _, pair in ipairs { { 1, 2 }, { 2, 1 } } do
      local sealer, opener = pair[1], pair[2]
      for i = 1, 2 do
        local first = call_on(conn_of[sealer], i, "ask")
        assert.are.equal("input_required", first.resultType)
        local key = next(first.inputRequests)
        local done = call_on(conn_of[opener], i, "ask", { requestState = first.requestState,
          inputResponses = { [key] = { action = "accept", content = { name = "Ann" } } } })
        assert.are.equal("complete", done.resultType, cjson.encode(done))
        local name, index = done.content[1].text:match("^(%a+) (%d+) %d+$")
        assert.are.equal("Ann", name)
        assert.are.equal(opener, tonumber(index), "the retry is answered by the worker its connection reached")
      end
    end
  end)

  it("answers 404 to an id naming a worker it does not have, or another node", function()
    for _, id in ipairs { "w3-" .. ("a"):rep(32), "east.w1-" .. ("a"):rep(32), ("a"):rep(32) } do
      http.assert_error(legacy_call(server, id, "whoami"), 404, -32001, "Session not found", 7)
    end
  end)
end)

describe("--workers 2 when a worker dies", function()
  it("costs only that worker's calls: the other keeps serving, the supervisor says why and restarts it", function()
    local server = http.start({ FIXTURE, "--workers", "2" })
    local by_owner = sessions_of_every_worker(server, 2)
    local pids = worker_pids(server, 2)
    -- Calls in flight on both workers, each on its own connection.
    local inflight = {}
    for k = 1, 2 do
      for i = 1, 3 do
        local conn = server:connect()
        assert.is_true(conn:send_request { method = "POST",
          headers = on(by_owner[k], { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }),
          body = call_message(i, "sleep", { ms = 3000, tag = k .. "." .. i }) })
        inflight[#inflight + 1] = { k = k, conn = conn }
      end
    end
    -- The calls are running: each says so on stderr.
    for k = 1, 2 do
      for i = 1, 3 do assert.is_true(server:wait_stderr("sleep " .. k .. "." .. i .. " started"), server:stderr()) end
    end
    uv.kill(pids[2], "sigkill")
    local answered = { 0, 0 }
    for _, c in ipairs(inflight) do
      local r = c.conn:read_response()
      if r and r.status == 200 then
        assert.are.equal(c.k, who(text_of(r)))
        answered[c.k] = answered[c.k] + 1
      end
    end
    assert.are.same({ 3, 0 }, answered)
    assert.is_true(http.wait_until(function()
      return server:stderr():find("worker 2 %(pid " .. pids[2] .. "%) was killed by signal 9") ~= nil
        and server:stderr():find("worker 2 %(pid %d+%) serves again") ~= nil
    end), server:stderr())
    local after = worker_pids(server, 2)
    assert.are.equal(pids[1], after[1])
    assert.are_not.equal(pids[2], after[2])
    -- Worker 1's session lives on; worker 2's died with it (the client
    -- initializes again).
    assert.are.equal(1, who(text_of(legacy_call(server, by_owner[1], "whoami"))))
    http.assert_error(legacy_call(server, by_owner[2], "whoami"), 404, -32001, "Session not found", 7)
    local fresh = sessions_of_every_worker(server, 2)
    assert.are.equal(2, who(text_of(legacy_call(server, fresh[2], "whoami"))))
    stop_cleanly(server)
  end)

  it("ends every worker when the supervisor is killed", function()
    local server = http.start({ FIXTURE, "--workers", "2" })
    local pids = worker_pids(server, 2)
    server.proc:kill("sigkill")
    assert.is_true(http.wait_until(function() return gone(pids[1]) and gone(pids[2]) end, 5000))
    server:stop()
  end)
end)

describe("--workers 2 and signals", function()
  local dir
  before_each(function()
    dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir .. " && cp " .. FIXTURE .. "/server.lua " .. dir .. "/"))
  end)
  after_each(function() os.execute("rm -rf " .. dir) end)

  local function set_version(v)
    local path = dir .. "/server.lua"
    local f = assert(io.open(path))
    local text = f:read("a")
    f:close()
    text = text:gsub('local VERSION = "v%d+"', 'local VERSION = "' .. v .. '"')
    f = assert(io.open(path, "w"))
    f:write(text)
    f:close()
  end

  it("passes SIGHUP on: every worker reloads and serves the new version", function()
    local server = http.start({ dir, "--workers", "2" })
    worker_pids(server, 2) -- both listen
    set_version("v2")
    server.proc:kill("sighup")
    assert.is_true(http.wait_until(function()
      return count(server:stderr(), "%] notice: reloaded %(SIGHUP%)") == 2
    end, 5000), server:stderr())
    -- Every worker that answers now answers v2.
    local seen = {}
    for _ = 1, 60 do
      local r = server:post({ jsonrpc = "2.0", id = 1, method = "initialize", params = {
        protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "t", version = "1" } } })
      local id = r.headers["mcp-session-id"]
      local text = text_of(legacy_call(server, id, "version"))
      assert.are.equal("v2", text)
      seen[owner(id)] = true
    end
    assert.is_true(seen[1] and seen[2])
    stop_cleanly(server)
  end)

  it("reloads every worker of luamcp dev when a script changes", function()
    local server = http.start({ dir, "--workers", "2" }, { command = "dev" })
    worker_pids(server, 2)
    set_version("v3")
    assert.is_true(http.wait_until(function()
      return count(server:stderr(), "%] notice: reloaded %(a script changed%)") >= 2
    end, 5000), server:stderr())
    local seen = {}
    for _ = 1, 60 do
      local id = server:initialize()
      assert.are.equal("v3", text_of(legacy_call(server, id, "version")))
      seen[owner(id)] = true
    end
    assert.is_true(seen[1] and seen[2])
    stop_cleanly(server)
  end)

  it("stops every worker on SIGTERM and exits 0", function()
    local server = http.start({ dir, "--workers", "2" })
    local pids = worker_pids(server, 2)
    server.proc:kill("sigterm")
    local code, signal = server.proc:wait_exit(8000)
    assert.are.equal(0, code, server:stderr())
    assert.are.equal(0, signal)
    assert.is_true(gone(pids[1]) and gone(pids[2]))
    assert.are.equal(1, count(server:stderr(), "received signal 15; stopping 2 workers"))
    assert.are.equal(2, count(server:stderr(), "luamcp%[w%d%] info: received signal 15; stopping"))
    stop_cleanly(server)
  end)
end)

describe("--workers 2 without Redis: one server", function()
  local TASKS = "io.modelcontextprotocol/tasks"
  local CAPS = { extensions = { [TASKS] = EMPTY }, elicitation = EMPTY }
  local server
  setup(function() server = http.start({ FIXTURE, "--workers", "2" }) end)
  teardown(function() if server then stop_cleanly(server) end end)

  -- A 2026-07-28 request on a fresh connection: the JSON-RPC message.
  local function request(method, params, name)
    params._meta = http.modern_meta(CAPS)
    return http.rpc(server:post({ jsonrpc = "2.0", id = 9, method = method, params = params },
      http.modern_headers(method, name)))
  end

  -- A subscriptions/listen stream on its own connection (whichever worker
  -- accepts it), read up to its acknowledgement.
  local function listen(filter)
    local conn = server:connect()
    local h = http.modern_headers("subscriptions/listen")
    h.Accept, h["Content-Type"] = http.ACCEPT_BOTH, "application/json"
    conn:send_request { method = "POST", headers = h, body = { jsonrpc = "2.0", id = "listen-1",
      method = "subscriptions/listen", params = { notifications = filter, _meta = http.modern_meta(CAPS) } } }
    assert.are.equal(200, conn:read_head().status)
    assert.are.equal("notifications/subscriptions/acknowledged", conn:read_event().json.method)
    return conn
  end

  -- The next message named method on a stream, or nil after a long wait.
  local function next_message(conn, method)
    while true do
      local e = conn:read_event(15000)
      if not e then return nil end
      if e.json and e.json.method == method then return e.json end
    end
  end

  -- Call a tool on fresh connections until each worker ran it once;
  -- returns how many calls that took.
  local function on_both_workers(name)
    local seen, calls = {}, 0
    for _ = 1, 200 do
      calls = calls + 1
      seen[who(modern_call(server, name))] = true
      if seen[1] and seen[2] then return calls end
    end
    error(name .. " never ran on both workers")
  end

  it("serves tasks/get and tasks/update on every worker for a task either runs, and tells every worker's listeners", function()
    local created = request("tools/call", { name = "approve", arguments = EMPTY }, "approve").result
    assert.are.equal("task", created.resultType, cjson.encode(created))
    local id = created.taskId
    local streams = {}
    for i = 1, 6 do streams[i] = listen({ taskIds = { id } }) end
    -- Fresh connections land on both workers: each is answered by the owner.
    local state
    for _ = 1, 12 do
      local m = request("tasks/get", { taskId = id }, id)
      assert.is_table(m.result, cjson.encode(m))
      state = m.result
      assert.are.equal(id, state.taskId)
    end
    assert.are.equal("input_required", state.status, cjson.encode(state))
    local key = next(state.inputRequests)
    local r = request("tasks/update", { taskId = id, inputResponses = {
      [key] = { action = "accept", content = { ok = true } } } }, id)
    assert.is_table(r.result, cjson.encode(r))
    for i, stream in ipairs(streams) do
      local m
      repeat m = next_message(stream, "notifications/tasks") until not m or m.params.status == "completed"
      assert.is_table(m, "no notifications/tasks for completed on listen stream " .. i)
      stream:close()
    end
    for _ = 1, 6 do
      local done = request("tasks/get", { taskId = id }, id).result
      assert.are.equal("completed", done.status)
      assert.truthy(done.result.content[1].text:match("^approved: true by [12] %d+$"), done.result.content[1].text)
    end
    -- A task nobody holds: the answer one process gives.
    assert.are.equal(-32602, request("tasks/get", { taskId = ("0"):rep(32) }, ("0"):rep(32)).error.code)
  end)

  it("carries a resource update raised on either worker to the listeners of both", function()
    local streams = {}
    for i = 1, 6 do streams[i] = listen({ resourceSubscriptions = { "test://doc" } }) end
    local touches = on_both_workers("touch")
    for i, stream in ipairs(streams) do
      for n = 1, touches do
        local m = next_message(stream, "notifications/resources/updated")
        assert.is_table(m, ("listen stream %d heard %d of %d updates"):format(i, n - 1, touches))
        assert.are.equal("test://doc", m.params.uri)
      end
      stream:close()
    end
  end)

  it("tells the clients of both workers that a list changed at run time on either", function()
    local streams = {}
    for i = 1, 6 do streams[i] = listen({ toolsListChanged = true }) end
    -- Each toggle disables and enables a tool: two changes.
    local changes = 2 * on_both_workers("toggle")
    for i, stream in ipairs(streams) do
      for n = 1, changes do
        assert.is_table(next_message(stream, "notifications/tools/list_changed"),
          ("listen stream %d heard %d of %d list changes"):format(i, n - 1, changes))
      end
      stream:close()
    end
  end)
end)

describe("--workers 2 accepting new connections", function()
  local server
  after_each(function() if server then stop_cleanly(server) end server = nil end)

  it("gives none to a worker whose handler computes: the other worker takes every one", function()
    server = http.start({ FIXTURE, "--workers", "2" })
    worker_pids(server, 2) -- both serve
    local conn = server:connect()
    local h = http.modern_headers("tools/call", "spin")
    h.Accept, h["Content-Type"] = http.ACCEPT_BOTH, "application/json"
    conn:send_request { method = "POST", headers = h, body = { jsonrpc = "2.0", id = 1, method = "tools/call",
      params = { name = "spin", arguments = { ms = 120000 }, _meta = http.modern_meta(nil, { progressToken = "spin" }) } } }
    assert.are.equal(200, conn:read_head(30000).status)
    local e = conn:read_event(30000)
    assert(e and e.json and e.json.method == "notifications/progress", "no progress from spin")
    local busy = who(e.json.params.message)
    -- It computes now: every new connection goes to the other worker.
    for _ = 1, 8 do assert.are_not.equal(busy, (who(modern_call(server, "whoami")))) end
    -- Still computing (no answer yet); closing its stream cancels it.
    assert.is_nil(conn:read_event(0))
    conn:close()
  end)
end)

describe("--workers and --node", function()
  it("puts the node's name before the worker in session ids", function()
    local server = http.start({ FIXTURE, "--workers", "2", "--node", "east-1" })
    local by_owner = sessions_of_every_worker(server, 2)
    for k, id in pairs(by_owner) do
      assert.truthy(id:match("^east%-1%.w" .. k .. "%-" .. ("%x"):rep(32) .. "$"), id)
      assert.are.equal(k, who(text_of(legacy_call(server, id, "whoami"))))
    end
    stop_cleanly(server)
  end)

  it("names worker 1 in a single process's ids when --node is given, and nothing without it", function()
    local server = http.start({ FIXTURE, "--node", "solo" })
    local id = server:initialize()
    assert.truthy(id:match("^solo%.w1%-" .. ("%x"):rep(32) .. "$"), id)
    local index, pid = who(text_of(legacy_call(server, id, "whoami")))
    assert.are.equal(1, index)
    assert.are.equal(server.proc.pid, pid)
    stop_cleanly(server)
    server = http.start({ FIXTURE, "--workers", "1" })
    id = server:initialize()
    assert.truthy(id:match("^" .. ("%x"):rep(32) .. "$"), id)
    assert.are.equal(server.proc.pid, select(2, who(text_of(legacy_call(server, id, "whoami")))))
    stop_cleanly(server)
  end)

  it("refuses --workers and --node without --http, and a bad node name", function()
    local mcp_client = require "mcp_client"
    for _, case in ipairs {
      { { "run", FIXTURE, "--workers", "2" }, "--workers needs --http" },
      { { "run", FIXTURE, "--node", "x" }, "--node needs --http" },
      { { "run", FIXTURE, "--http", "127.0.0.1:0", "--node", "a.b" }, "--node needs a name" },
      { { "run", FIXTURE, "--http", "127.0.0.1:0", "--workers", "0" }, "--workers needs a whole number" },
    } do
      local proc = mcp_client.spawn(case[1])
      local code = proc:wait_exit(5000)
      assert.are.equal(2, code, proc.stderr)
      assert.truthy(proc.stderr:find(case[2], 1, true), proc.stderr)
      proc:close()
    end
  end)
end)

-- SIGTERM drains (--drain-time): no new work, the calls in flight are
-- answered, then the process exits 0. Asserted by order and counts: which
-- responses arrive whole, what the log says, in what order.
describe("SIGTERM with calls in flight", function()
  local function modern_message(id, method, params)
    params = params or {}
    params._meta = http.modern_meta()
    return { jsonrpc = "2.0", id = id, method = method, params = params }
  end

  local function modern_headers(method, name)
    return http.modern_headers(method, name, { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" })
  end

  local function legacy_headers(session)
    return on(session, { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" })
  end

  -- Did the call on conn get its result? (A call cancelled by the stop
  -- gets none: its connection closes, or its session's end answers 404.)
  local function answered(conn)
    local r = conn:read_response(1000)
    return (r and r.json and r.json.result) ~= nil
  end

  -- Requests the server has read (its debug log names each).
  local function requests_read(server)
    return count(server:stderr(), "POST /mcp %(")
  end

  it("answers them, ends the standing streams, refuses new work, and exits 0 once they are written", function()
    local server = http.start({ FIXTURE, "--log-level", "debug" }, { drain_time = false }) -- the default, 10 s
    local session = server:initialize()
    -- The session's GET stream, a 2026-07-28 subscriptions/listen call,
    -- and a keep-alive connection that is idle: none of them is work.
    local get = server:connect()
    assert.is_true(get:send_request { method = "GET", headers = on(session, { Accept = "text/event-stream" }) })
    assert.are.equal(200, get:read_head().status)
    local listen = server:connect()
    assert.is_true(listen:send_request { method = "POST", headers = modern_headers("subscriptions/listen"),
      body = modern_message("sub-1", "subscriptions/listen", { notifications = { toolsListChanged = true } }) })
    assert.are.equal(200, listen:read_head().status)
    local ack = listen:read_event()
    assert.are.equal("notifications/subscriptions/acknowledged", ack.json.method)
    local idle = server:connect()
    local pong = idle:request { method = "POST", headers = legacy_headers(session),
                                body = { jsonrpc = "2.0", id = 2, method = "ping" } }
    assert.are.equal(200, pong.status)
    -- A request whose headers are on their way when the signal comes.
    local late = server:connect()
    local late_bytes = http.format_request(server.port, { method = "POST", headers = legacy_headers(session),
      body = call_message(42, "whoami") })
    local cut = late_bytes:find("\r\n", 1, true) + 1
    assert.is_true(late:write(late_bytes:sub(1, cut)))
    -- Two slow calls, a legacy and a 2026-07-28 one, read by the server.
    local before = requests_read(server)
    local slow = server:connect()
    assert.is_true(slow:send_request { method = "POST", headers = legacy_headers(session),
                                       body = call_message(7, "sleep", { ms = 1500 }) })
    local slow_modern = server:connect()
    assert.is_true(slow_modern:send_request { method = "POST", headers = modern_headers("tools/call", "sleep"),
      body = modern_message(8, "tools/call", { name = "sleep", arguments = { ms = 1500 } }) })
    assert.is_true(http.wait_until(function() return requests_read(server) == before + 2 end, 5000), server:stderr())

    server.proc:kill("sigterm")
    assert.is_true(http.wait_until(function()
      return server:stderr():find("received signal 15; stopping: draining 2 calls for up to 10 s", 1, true) ~= nil
    end, 5000), server:stderr())
    -- The standing streams end cleanly (their chunked bodies are complete).
    local events, ended = get:read_events(5000)
    assert.is_true(ended, "the GET stream did not end")
    for _, e in ipairs(events) do assert.is_nil(e.json) end -- the priming event only
    events, ended = listen:read_events(5000)
    assert.is_true(ended, "the listen stream did not end")
    assert.is_true(idle:wait_eof(5000), "the idle connection stayed open")
    -- New connections are refused: nobody listens any more.
    local refused = http.connect(server.port, 2000)
    assert.is_nil(refused)
    -- The request that was on its way: 503, its id echoed, and close.
    assert.is_true(late:write(late_bytes:sub(cut + 1)))
    local r = late:read_response()
    http.assert_error(r, 503, -32000, "shutting down", 42)
    assert.are.equal("close", r.headers.connection)
    assert.is_true(late:wait_eof(5000))
    -- The calls in flight are answered in full.
    assert.is_true(server:alive(), "stopped before its calls were answered:\n" .. server:stderr())
    r = slow:read_response()
    assert.are.equal(1, who(text_of(r)))
    assert.are.equal("close", r.headers.connection)
    r = slow_modern:read_response()
    assert.is_table(r.json, r.body)
    assert.are.equal(8, r.json.id)
    assert.are.equal(1, who(r.json.result.content[1].text))
    -- Then, and only then, the process exits, 0.
    local code, signal = server.proc:wait_exit(8000)
    assert.are.equal(0, code, server:stderr())
    assert.are.equal(0, signal)
    local stderr = server:stderr()
    local drain_at = stderr:find("draining 2 calls", 1, true)
    local done_at = stderr:find("drained: every call answered; stopping", 1, true)
    assert.truthy(done_at and done_at > drain_at, stderr)
    assert.is_nil(stderr:find("cancelling", 1, true), stderr)
    stop_cleanly(server)
  end)

  it("cancels them at once with --drain-time 0, or on a second signal, or when the drain time is over", function()
    -- A server with a 30 s call in flight, sent SIGTERM.
    local function terminated_while_busy(drain_time)
      local server = http.start({ FIXTURE }, { drain_time = drain_time })
      local slow = server:connect()
      assert.is_true(slow:send_request { method = "POST", headers = legacy_headers(server:initialize()),
                                         body = call_message(7, "sleep", { ms = 30000, tag = "busy" }) })
      assert.is_true(server:wait_stderr("sleep busy started"), server:stderr()) -- in flight
      server.proc:kill("sigterm")
      return server, slow
    end

    -- --drain-time 0: today's immediate stop.
    local server, slow = terminated_while_busy(0)
    assert.are.equal(0, (server.proc:wait_exit(5000)), server:stderr())
    assert.is_false(answered(slow))
    assert.truthy(server:stderr():find("received signal 15; stopping\n", 1, true), server:stderr())
    assert.is_nil(server:stderr():find("draining", 1, true))
    stop_cleanly(server)

    -- A second signal during the drain.
    server, slow = terminated_while_busy(60)
    assert.is_true(http.wait_until(function()
      return server:stderr():find("draining 1 call for up to 60 s", 1, true) ~= nil
    end), server:stderr())
    server.proc:kill("sigint")
    assert.are.equal(0, (server.proc:wait_exit(5000)), server:stderr())
    assert.is_false(answered(slow))
    assert.truthy(server:stderr():find("received signal 2 again; cancelling 1 call", 1, true), server:stderr())
    stop_cleanly(server)

    -- The drain time runs out.
    server, slow = terminated_while_busy(1)
    assert.are.equal(0, (server.proc:wait_exit(8000)), server:stderr())
    assert.is_false(answered(slow))
    local stderr = server:stderr()
    local drain_at = stderr:find("draining 1 call for up to 1 s", 1, true)
    local over_at = stderr:find("drain time (1 s) is over with 1 call in flight; cancelling it", 1, true)
    assert.truthy(drain_at and over_at and over_at > drain_at, stderr)
    stop_cleanly(server)
  end)

  it("under --workers 2: the supervisor waits while every worker answers its calls, then exits 0", function()
    local server = http.start({ FIXTURE, "--workers", "2" }, { drain_time = false })
    local by_owner = sessions_of_every_worker(server, 2)
    local conns = {}
    for k = 1, 2 do
      conns[k] = server:connect()
      assert.is_true(conns[k]:send_request { method = "POST", headers = legacy_headers(by_owner[k]),
                                              body = call_message(10 + k, "sleep", { ms = 3000, tag = "w" .. k }) })
    end
    -- Both calls are running (each worker's drain line counts it): each says so.
    for k = 1, 2 do assert.is_true(server:wait_stderr("sleep w" .. k .. " started"), server:stderr()) end
    server.proc:kill("sigterm")
    for k = 1, 2 do
      local r = conns[k]:read_response()
      assert.are.equal(k, who(text_of(r)), server:stderr())
      assert.are.equal(10 + k, r.json.id)
    end
    local code, signal = server.proc:wait_exit(8000)
    assert.are.equal(0, code, server:stderr())
    assert.are.equal(0, signal)
    local stderr = server:stderr()
    assert.are.equal(1, count(stderr, "received signal 15; stopping 2 workers"))
    assert.are.equal(2, count(stderr, "luamcp%[w%d%] info: received signal 15; stopping: draining 1 call for up to 10 s"),
      stderr)
    assert.are.equal(2, count(stderr, "luamcp%[w%d%] info: drained: every call answered; stopping"), stderr)
    assert.is_nil(stderr:find("killing it", 1, true), stderr)
    stop_cleanly(server)
  end)
end)
