-- Scale-out as it is deployed (docs/http.md "Running many"): a real redis-server,
-- two luamcp instances ("a" and "b") with two workers each and --redis, and
-- a real nginx in front with the repository's scripts/deploy/nginx.conf
-- (only its addresses changed to run-time ports). The official TypeScript
-- SDK clients go through nginx; the cross-instance checks speak to each
-- instance directly, so that which instance serves what is certain.
local client = require "spec.helpers.mcp_client"
local http = require "spec.helpers.http_client"
local node = require "spec.helpers.node_runner"
local services = require "spec.helpers.services"
local cjson = require "cjson"
local uv = require "luv"

local FIXTURE = "spec/fixtures/scaleout"
local EMPTY = cjson.decode("{}")

local missing
if not services.which("redis-server") then missing = "redis-server is not installed"
elseif not services.which("nginx") then missing = "nginx is not installed"
elseif not uv.fs_access(node.NODE, "X") then missing = "Node 22 is not installed in spec/node_modules (npm ci)" end

-- A 2026-07-28 request, for Conn:send_request and Conn:request.
local function modern(id, method, params, caps)
  params = params or {}
  params._meta = http.modern_meta(caps)
  local headers = http.modern_headers(method, params.name or params.uri,
    { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" })
  return { method = "POST", headers = headers, body = { jsonrpc = "2.0", id = id, method = method, params = params } }
end

local rpc = http.rpc

-- The next notifications/resources/updated on an SSE stream (nil if none
-- comes within 10 events or 5 s of quiet).
local function next_update(conn)
  for _ = 1, 10 do
    local e = conn:read_event(5000)
    if not e then return nil end
    if e.json and e.json.method == "notifications/resources/updated" then return e.json end
  end
end

-- A tool's text result, or nil and the error.
local function text_of(message)
  if not message then return nil, "no response" end
  if message.error then return nil, message.error.message end
  local result = message.result
  if result.isError then return nil, result.content[1].text end
  return result.content[1].text
end

-- Call a tool on a fresh connection to port (2026-07-28).
local function call(port, name, args, caps, extra)
  local conn = assert(http.connect(port))
  local params = { name = name, arguments = args or EMPTY }
  for k, v in pairs(extra or {}) do params[k] = v end
  local r = conn:request(modern(1, "tools/call", params, caps))
  conn:close()
  return rpc(r)
end

-- The pids of a supervisor's workers.
local function workers_of(pid)
  local f = io.open(("/proc/%d/task/%d/children"):format(pid, pid))
  if not f then return {} end
  local list = {}
  for p in f:read("a"):gmatch("%d+") do list[#list + 1] = tonumber(p) end
  f:close()
  return list
end

local function count_keys(t)
  local n = 0
  for _ in pairs(t) do n = n + 1 end
  return n
end

describe("scale-out behind nginx, with Redis", function()
  if missing then
    it("is skipped: " .. missing, function() pending(missing) end)
    return
  end

  local dir, redis, a, b, proxy

  local function start_instance(name)
    return http.start({ "--workers", "2", "--node", name, "--redis", redis.url, FIXTURE },
      { env = { "NODE_NAME=" .. name, "PATH=" .. os.getenv("PATH") } })
  end

  setup(function()
    dir = client.temp_dir()
    redis = assert(services.redis())
    a = start_instance("a")
    b = start_instance("b")
    -- The repository's configuration, with this run's ports.
    local conf = client.read_file("scripts/deploy/nginx.conf")
    local nginx_port = services.free_port()
    conf = conf:gsub("127%.0%.0%.1:8001", "127.0.0.1:" .. a.port)
               :gsub("127%.0%.0%.1:8002", "127.0.0.1:" .. b.port)
               :gsub("listen 8080;", "listen 127.0.0.1:" .. nginx_port .. ";")
    proxy = assert(services.nginx(conf, nginx_port, dir))
  end)

  -- Everything is stopped first; then each instance must have exited 0 and
  -- no process of it (a worker restarted on the way included) may have
  -- reported a sanitizer error (the ASan run of this spec).
  teardown(function()
    local problems = {}
    if proxy then proxy:stop() end
    for name, instance in pairs { a = a, b = b } do
      local code, signal = instance:stop()
      local stderr = instance:stderr()
      if code ~= 0 or signal ~= 0 or stderr:find("Sanitizer", 1, true) or stderr:find("runtime error:", 1, true) then
        problems[#problems + 1] = ("instance %s exited with status %s, signal %s:\n%s"):format(name, tostring(code),
          tostring(signal), stderr)
      end
    end
    if redis then redis:stop() end
    if dir then client.remove_tree(dir) end
    assert(#problems == 0, table.concat(problems, "\n"))
  end)

  it("serves TypeScript SDK v1 clients' legacy sessions through nginx, each session always by its own worker", function()
    local out = node.run({ "spec/clients/sdk_scaleout.mjs", "v1", proxy.url, "12", "25" }, 60000)
    assert.are.same({}, out.failures)
    assert.are.equal(12, #out.clients)
    local nodes = {}
    for _, c in ipairs(out.clients) do
      assert.are.equal(25, #c.answeredBy)
      local prefix = c.sessionId:match("^(%a)%.")
      assert.truthy(prefix, "session id without its node: " .. c.sessionId)
      nodes[prefix] = true
      -- Every call of the session was answered by one process, of its node.
      for _, who in ipairs(c.answeredBy) do
        assert.are.equal(c.answeredBy[1], who)
        assert.are.equal(prefix, who:match("^(%a):"))
      end
    end
    -- nginx sent the initializes round-robin: sessions live on both nodes.
    assert.is_true(nodes.a and nodes.b)
  end)

  it("serves TypeScript SDK v2 clients (2026-07-28) through nginx on both instances, answering questions across them", function()
    local out = node.run({ "spec/clients/sdk_scaleout.mjs", "v2", proxy.url, "8", "25" }, 60000)
    assert.are.same({}, out.failures)
    assert.are.equal(8, #out.clients)
    local nodes = {}
    for _, c in ipairs(out.clients) do
      assert.are.equal(25, #c.answeredBy)
      for _, who in ipairs(c.answeredBy) do nodes[who:match("^(%a):")] = true end
      assert.are.equal(("client %d"):format(c.n), c.ask.name)
    end
    assert.is_true(nodes.a and nodes.b)
  end)

  it("answers an elicitation's retry on the other instance (a shared requestState key)", function()
    local caps = { elicitation = EMPTY }
    local first = call(a.port, "ask", nil, caps).result
    assert.are.equal("input_required", first.resultType)
    local key = next(first.inputRequests)
    local second = call(b.port, "ask", nil, caps, {
      requestState = first.requestState,
      inputResponses = { [key] = { action = "accept", content = { name = "Ada" } } },
    })
    assert.is_string(text_of(second))
    local result = second.result.structuredContent
    assert.are.equal("Ada", result.name)
    assert.are.equal("a", result.asked_on:match("^(%a):"))
    assert.are.equal("b", result.answered_on:match("^(%a):"))
  end)

  it("brings a resource update raised on one instance to listeners on the other", function()
    -- A 2026-07-28 listener on b.
    local listen = assert(http.connect(b.port))
    listen:send_request(modern("listen-1", "subscriptions/listen",
      { notifications = { resourceSubscriptions = { "test://watched" } } }))
    local head = listen:read_head(5000)
    assert.are.equal(200, head.status)
    local ack = listen:read_event(5000)
    assert.are.equal("notifications/subscriptions/acknowledged", ack.json.method)
    -- A legacy session on b, subscribed, with its GET stream open.
    local session = b:initialize("2025-11-25")
    local sub = rpc(b:post({ jsonrpc = "2.0", id = 2, method = "resources/subscribe", params = { uri = "test://watched" } },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" }))
    assert.is_table(sub.result)
    -- Both workers of b may hold them: each must hear of the update.
    local stream = assert(http.connect(b.port))
    stream:send_request({ method = "GET", headers = { Accept = "text/event-stream", ["Mcp-Session-Id"] = session,
      ["MCP-Protocol-Version"] = "2025-11-25" } })
    assert.are.equal(200, stream:read_head(5000).status)

    assert.are.equal("a", assert(text_of(call(a.port, "touch", { uri = "test://watched" }))):match("^(%a):"))
    local heard = next_update(listen)
    assert.is_table(heard, "the listener on b heard nothing")
    assert.are.equal("test://watched", heard.params.uri)
    heard = next_update(stream)
    assert.is_table(heard, "the legacy session on b heard nothing")
    assert.are.equal("test://watched", heard.params.uri)
    listen:close()
    stream:close()
  end)

  it("keeps mcp.store counters exact under concurrent increments from both instances", function()
    local before = tonumber(text_of(call(a.port, "hits")))
    local conns = {}
    for i = 1, 40 do
      local port = i % 2 == 0 and a.port or b.port
      for _ = 1, 5 do
        local conn = assert(http.connect(port))
        conn:send_request(modern(i, "tools/call", { name = "incr", arguments = EMPTY }))
        conns[#conns + 1] = conn
      end
    end
    local seen = {}
    for _, conn in ipairs(conns) do
      local value = tonumber(assert(text_of(rpc(conn:read_response(20000)))))
      assert.is_nil(seen[value], "two increments returned " .. tostring(value))
      seen[value] = true
      conn:close()
    end
    assert.are.equal(200, count_keys(seen))
    assert.are.equal(before + 200, tonumber(text_of(call(b.port, "hits"))))
    for v = before + 1, before + 200 do assert.is_true(seen[v], "no increment returned " .. v) end
  end)

  it("loses only the killed worker's calls when a worker dies under load, and restarts it", function()
    local victim = workers_of(a.proc.pid)[1]
    assert.is_number(victim, "no workers under " .. a.proc.pid)
    local conns = {}
    for i = 1, 40 do
      local conn = assert(http.connect(a.port))
      conn:send_request(modern(i, "tools/call", { name = "slow",
        arguments = { tag = "k" .. i, ms = 120000, gate = "scaleout:gate:kill" } }))
      conns[i] = conn
    end
    -- Wait until every call is running (each noted its process in the store).
    local running = client.wait_until(function()
      local n = 0
      for i = 1, 40 do
        local where = text_of(call(b.port, "store_get", { key = "scaleout:slow:k" .. i }))
        if where and where ~= "null" then n = n + 1 end
      end
      return n == 40
    end, 10000)
    assert.is_true(running, "the 40 slow calls did not all start")
    assert.are.equal(0, uv.kill(victim, "sigkill"))
    -- Only now may the calls end (none of the victim's can have ended before).
    assert.are.equal("ok", text_of(call(b.port, "store_set", { key = "scaleout:gate:kill", value = "open" })))
    local lost, answered_by_victim = 0, 0
    for i, conn in ipairs(conns) do
      local answer = text_of(rpc(conn:read_response(20000)))
      local where = text_of(call(b.port, "store_get", { key = "scaleout:slow:k" .. i }))
      if answer then
        assert.are.equal(where, answer)
        if where:match(":(%d+)$") == tostring(victim) then answered_by_victim = answered_by_victim + 1 end
      else
        lost = lost + 1
        -- Only calls that ran in the killed worker are lost.
        assert.are.equal("a:" .. victim, where)
      end
      conn:close()
    end
    assert.are.equal(0, answered_by_victim)
    assert.is_true(lost > 0, "no call ran in the killed worker")
    -- The supervisor said why, and started another worker.
    assert.is_true(client.wait_until(function()
      local now = workers_of(a.proc.pid)
      return #now == 2 and now[1] ~= victim and now[2] ~= victim
    end, 10000), "the worker was not replaced")
    assert.truthy(a:stderr():find("signal 9", 1, true) or a:stderr():find("SIGKILL", 1, true), a:stderr())
    for _ = 1, 10 do assert.is_string(text_of(call(a.port, "whoami"))) end
  end)

  it("fails calls that need Redis while it is away, serves the rest, and recovers when it returns", function()
    local port = redis.port
    redis:stop()
    local _, err = text_of(call(a.port, "incr"))
    assert.truthy(err and err:find("redis", 1, true), tostring(err))
    assert.is_string(text_of(call(a.port, "whoami")))
    assert.is_string(text_of(call(b.port, "whoami")))
    redis = assert(services.redis(port))
    for _, instance in ipairs { a, b } do
      assert.is_true(client.wait_until(function()
        return text_of(call(instance.port, "incr")) ~= nil
      end, 20000), "no recovery:\n" .. instance:stderr())
    end
    -- The bus is back too: an update from a reaches a listener on b.
    local listen = assert(http.connect(b.port))
    listen:send_request(modern("listen-2", "subscriptions/listen",
      { notifications = { resourceSubscriptions = { "test://watched" } } }))
    assert.are.equal(200, listen:read_head(5000).status)
    listen:read_event(5000)
    -- Each process's subscriber connection comes back on its own backoff,
    -- after the command connection the calls above proved; Redis pub/sub
    -- drops what is published while a subscriber is away, so touch again
    -- until one arrives (a generous bound, not a sampling window).
    local heard
    assert.is_true(client.wait_until(function()
      text_of(call(a.port, "touch", { uri = "test://watched" }))
      local e = listen:read_event(1000)
      while e and not (e.json and e.json.method == "notifications/resources/updated") do
        e = listen:read_event(1000)
      end
      heard = e and e.json
      return heard ~= nil
    end, 40000), "the listener on b heard nothing after Redis came back:\n" .. a:stderr() .. b:stderr())
    assert.are.equal("test://watched", heard.params.uri)
    listen:close()
  end)
end)
