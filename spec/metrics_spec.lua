-- Operating luamcp (#32): /metrics in the Prometheus text format, scraped
-- by Debian's real prometheus; /healthz and /readyz; --metrics ADDR;
-- --log-format json. Every server and prometheus runs on 127.0.0.1 ports
-- chosen at run time, and is stopped by this spec. Values are waited for
-- with generous bounds (prometheus scrapes every second), never timed.

local http = require "http_client"
local client = require "mcp_client"
local services = require "services"
local uv = require "luv"
local cjson = http.json

local FIXTURE = "spec/fixtures/metrics"
local V = "2025-11-25"
local EMPTY = cjson.decode("{}")

local function on(session)
  return { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }
end

-- tools/call in a legacy session; returns the result.
local function call(server, session, name, arguments)
  local r = server:post({ jsonrpc = "2.0", id = 7, method = "tools/call",
                          params = { name = name, arguments = arguments or EMPTY } }, on(session))
  assert(r and r.json, "no JSON answer: " .. tostring(r and r.body))
  return r.json.result, r.json.error
end

-- GET path on 127.0.0.1:port; the response.
local function get(port, path, headers)
  local conn = assert(http.connect(port))
  local r = conn:request { method = "GET", path = path, headers = headers }
  conn:close()
  return r
end

-- The samples of a text exposition: {["name{labels}"] = value}.
local function samples(text)
  local out = {}
  for line in text:gmatch("[^\n]+") do
    if not line:match("^#") then
      local series, value = line:match("^(%S+) (%S+)$")
      assert(series, "not a sample line: " .. line)
      out[series] = tonumber(value) or value
    end
  end
  return out
end

-- Every line is a comment (HELP/TYPE) or a sample, and each family's
-- HELP and TYPE come once, before its samples.
local function assert_exposition(text)
  local typed = {}
  for line in text:gmatch("[^\n]+") do
    local kind, name = line:match("^# (%u+) (%S+)")
    if kind == "TYPE" then
      assert.is_nil(typed[name], "two TYPE lines for " .. name)
      typed[name] = true
    elseif not kind then
      assert.truthy(line:match("^[%a_:][%w_:]*{?.-}? %S+$"), "bad sample line: " .. line)
    end
  end
end

local function url_encode(s)
  return (s:gsub("[^%w%-_%.~]", function(c) return string.format("%%%02X", c:byte()) end))
end

-- prometheus on a free port scraping targets ({"127.0.0.1:PORT", ...})
-- every second; the service, or nil and why not.
local function start_prometheus(dir, targets)
  local bin = services.which("prometheus")
  if not bin then return nil, "prometheus is not installed (Debian package prometheus)" end
  local quoted = {}
  for i, t in ipairs(targets) do quoted[i] = "'" .. t .. "'" end
  client.write_file(dir .. "/prometheus.yml", table.concat({
    "global:",
    "  scrape_interval: 1s",
    "  evaluation_interval: 1s",
    "scrape_configs:",
    "  - job_name: luamcp",
    "    static_configs:",
    "      - targets: [" .. table.concat(quoted, ", ") .. "]",
  }, "\n") .. "\n")
  local port = services.free_port()
  local proc = client.spawn({ "--config.file=" .. dir .. "/prometheus.yml", "--storage.tsdb.path=" .. dir .. "/data",
    "--web.listen-address=127.0.0.1:" .. port, "--log.level=warn" }, { bin = bin })
  local up = client.poll_until(function()
    if proc.exited then return true end
    local conn = http.connect(port)
    if not conn then return false end
    local r = conn:request { method = "GET", path = "/-/ready", timeout_ms = 2000 }
    conn:close()
    return r and r.status == 200
  end, 60000)
  assert(up and not proc.exited, "prometheus did not start:\n" .. proc.stderr)
  return { proc = proc, port = port, stop = function() proc:terminate(30000) end }
end

-- The value of an instant query's first result (a number), or nil.
local function query(prom, expr)
  local r = get(prom.port, "/api/v1/query?query=" .. url_encode(expr))
  if not (r and r.status == 200 and r.json and r.json.status == "success") then return nil end
  local result = r.json.data.result
  if #result == 0 then return nil end
  return tonumber(result[1].value[2])
end

-- Wait (generously) until the query's value is want.
local function wait_for_value(prom, expr, want)
  local last
  local ok = client.poll_until(function()
    last = query(prom, expr)
    return last == want
  end, 60000)
  assert(ok, expr .. ": want " .. tostring(want) .. ", last " .. tostring(last))
end

local function drive(server, adds)
  local session = server:initialize(V)
  for i = 1, adds do
    local result = call(server, session, "add", { a = i, b = 1 })
    assert.are.equal(tostring(i + 1), result.content[1].text)
  end
  assert.is_true(call(server, session, "fail").isError)
  local timed_out = call(server, session, "slow")
  assert.is_true(timed_out.isError)
  assert.truthy(timed_out.content[1].text:find("time limit", 1, true))
  return session
end

describe("/metrics", function()
  local server
  setup(function() server = http.start({ FIXTURE }) end)
  teardown(function() if server then server:stop_cleanly() end end)

  it("counts calls by method and tool with their outcome, in the text format", function()
    local session = drive(server, 3)
    assert.are.equal("counted", call(server, session, "count", { kind = "a", size = 50 }).content[1].text)
    local r = get(server.port, "/metrics")
    assert.are.equal(200, r.status)
    assert.truthy(r.headers["content-type"]:find("text/plain; version=0.0.4", 1, true))
    assert_exposition(r.body)
    local s = samples(r.body)
    assert.are.equal(3, s['luamcp_tool_calls_total{tool="add",outcome="ok"}'])
    assert.are.equal(1, s['luamcp_tool_calls_total{tool="fail",outcome="tool_error"}'])
    assert.are.equal(1, s['luamcp_tool_calls_total{tool="slow",outcome="timeout"}'])
    assert.are.equal(4, s['luamcp_calls_total{method="tools/call",outcome="ok"}'])
    assert.are.equal(3, s['luamcp_tool_duration_seconds_count{tool="add"}'])
    assert.are.equal(3, s['luamcp_tool_duration_seconds_bucket{tool="add",le="+Inf"}'])
    assert.are.equal(0, s["luamcp_calls_in_flight"])
    assert.are.equal(1, s["luamcp_sessions"])
    assert.is_true(s["luamcp_lua_memory_bytes"] > 0)
    assert.are.equal(0, s["luamcp_reload_failures_total"])
    assert.is_true(s["luamcp_http_received_bytes_total"] > 0)
    assert.is_true(s["luamcp_http_sent_bytes_total"] > 0)
    assert.is_true(s["luamcp_http_connections"] >= 1)
    assert.are.equal(1, s['app_hits_total{kind="a"}'])
    assert.are.equal(1, s['app_sizes_bucket{le="100"}'])
    assert.are.equal(0, s['app_sizes_bucket{le="10"}'])
    assert.are.equal(50, s["app_sizes_sum"])
  end)

  it("counts a protocol error and a cancelled call", function()
    local session = server:initialize(V)
    local _, err = call(server, session, "no_such_tool")
    assert.is_table(err)
    -- A call cancelled by the client.
    local conn = server:connect()
    conn:send_request { method = "POST", headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json",
      ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V },
      body = { jsonrpc = "2.0", id = 99, method = "tools/call", params = { name = "wait", arguments = { ms = 30000 } } } }
    client.poll_until(function()
      return (samples(get(server.port, "/metrics").body)["luamcp_calls_in_flight"] or 0) >= 1
    end, 20000)
    server:post({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = 99 } }, on(session))
    local s
    assert.is_true(client.poll_until(function()
      s = samples(get(server.port, "/metrics").body)
      return s['luamcp_tool_calls_total{tool="wait",outcome="cancelled"}'] == 1
    end, 20000))
    conn:close()
    assert.are.equal(1, s['luamcp_calls_total{method="tools/call",outcome="protocol_error"}'])
  end)

  it("refuses a metric's label sets past the bound", function()
    local session = server:initialize(V)
    local last
    for i = 1, 101 do last = call(server, session, "count", { kind = "k" .. i }).content[1].text end
    assert.truthy(last:find("refused", 1, true), last)
  end)

  it("answers /healthz and /readyz whatever the Origin, showing no data", function()
    local r = get(server.port, "/healthz", { Origin = "https://evil.example" })
    assert.are.equal(200, r.status)
    assert.are.same({ status = "ok" }, r.json)
    r = get(server.port, "/readyz")
    assert.are.equal(200, r.status)
    assert.are.same({ status = "ready" }, r.json)
    r = server:request { method = "POST", path = "/healthz", body = "{}" }
    assert.are.equal(405, r.status)
  end)
end)

describe("/metrics and names a client chooses", function()
  local server
  setup(function() server = http.start({ FIXTURE }) end)
  teardown(function() if server then server:stop_cleanly() end end)

  it("counts unknown tools and methods under one label each; the scrape stays small", function()
    local session = server:initialize(V)
    for i = 1, 3 do
      local _, err = call(server, session, string.rep(string.char(96 + i), 300 * 1024))
      assert.is_table(err)
      local r = server:post({ jsonrpc = "2.0", id = 8, method = string.rep(string.char(96 + i), 300 * 1024) },
                            on(session))
      assert.is_table(r.json and r.json.error)
    end
    for i = 1, 300 do
      local _, err = call(server, session, "junk_" .. i)
      assert.is_table(err)
      server:post({ jsonrpc = "2.0", id = 9, method = "junk/" .. i }, on(session))
    end
    -- A known tool whose calls fail still counts under its name.
    call(server, session, "add", { a = 1, b = 2 })
    local body = get(server.port, "/metrics").body
    assert_exposition(body)
    assert.is_true(#body < 32 * 1024, "the scrape is " .. #body .. " bytes")
    local s = samples(body)
    assert.are.equal(303, s['luamcp_tool_calls_total{tool="_unknown",outcome="protocol_error"}'])
    assert.are.equal(303, s['luamcp_calls_total{method="_other",outcome="protocol_error"}'])
    assert.are.equal(1, s['luamcp_tool_calls_total{tool="add",outcome="ok"}'])
    assert.is_nil(body:find("junk", 1, true))
    assert.is_true(http.rss_kb(server.proc.pid) < 200 * 1024)
  end)

  it("mcp.metrics: cuts a long label value, refuses reserved and bad label names at the script's line", function()
    local session = server:initialize(V)
    local long = string.rep("é", 100 * 1024) -- 2 bytes each
    assert.are.equal("counted", call(server, session, "tag", { labels = { v = long } }).content[1].text)
    for _, name in ipairs({ "le", "worker", "a:b", "__x", string.rep("n", 65) }) do
      local text = call(server, session, "tag", { labels = { [name] = "x" } }).content[1].text
      assert.truthy(text:find("tools.lua:%d+: mcp.metrics"), text)
    end
    local many = {}
    for i = 1, 12 do many["k" .. i] = string.rep("v", 120) end
    local text = call(server, session, "tag", { labels = many }).content[1].text
    assert.truthy(text:find("tools.lua:%d+: mcp.metrics: a label set of at most", 1), text)
    text = call(server, session, "tag", { raising = true }).content[1].text
    assert.truthy(text:find("no text", 1, true), text)
    local body = get(server.port, "/metrics").body
    assert_exposition(body)
    assert.is_true(#body < 32 * 1024, "the scrape is " .. #body .. " bytes")
    local s = samples(body)
    assert.are.equal(1, s['app_tagged_total{v="' .. string.rep("é", 64) .. '"}'])
  end)
end)

describe("/metrics with --bearer-token-env", function()
  local server
  setup(function()
    server = http.start({ FIXTURE, "--bearer-token-env", "OBS_TOKEN" }, { env = { "OBS_TOKEN=s3cret-token-value" } })
  end)
  teardown(function() if server then server:stop_cleanly() end end)

  it("needs the token on the MCP port; health does not", function()
    assert.are.equal(401, get(server.port, "/metrics").status)
    local r = get(server.port, "/metrics", { Authorization = "Bearer s3cret-token-value" })
    assert.are.equal(200, r.status)
    assert.truthy(r.body:find("luamcp_up 1", 1, true))
    assert.are.equal(200, get(server.port, "/healthz").status)
  end)
end)

describe("--metrics ADDR", function()
  it("serves a stdio server's metrics on a listener of its own", function()
    local port = services.free_port()
    local proc = client.spawn({ "run", FIXTURE, "--metrics", "127.0.0.1:" .. port })
    proc:initialize()
    local r = proc:request("tools/call", { name = "add", arguments = { a = 1, b = 2 } })
    assert.are.equal("3", r.result.content[1].text)
    local s
    assert.is_true(client.poll_until(function()
      local m = get(port, "/metrics")
      s = m and samples(m.body)
      return s and s['luamcp_tool_calls_total{tool="add",outcome="ok"}'] == 1
    end, 20000))
    assert.are.equal(200, get(port, "/readyz").status)
    assert.are.equal(404, get(port, "/mcp").status)
    proc:close()
  end)

  -- The rule of the MCP port: a listener others can reach needs
  -- --allow-remote, and is warned about when allowed.
  it("refuses an address that is not loopback without --allow-remote", function()
    local proc = client.spawn({ "run", FIXTURE, "--metrics", "0.0.0.0:" .. services.free_port() })
    local code = proc:wait_exit()
    assert.is_true(proc.exited, "the server did not stop")
    assert.are.equal(1, code)
    assert.truthy(proc.stderr:find("refusing to listen on 0.0.0.0: it is not a loopback address", 1, true), proc.stderr)
    assert.truthy(proc.stderr:find("--allow-remote", 1, true), proc.stderr)
    proc:close()
  end)

  it("serves an address that is not loopback with --allow-remote, warning", function()
    local port = services.free_port()
    local proc = client.spawn({ "run", FIXTURE, "--metrics", "0.0.0.0:" .. port, "--allow-remote" })
    proc:initialize()
    assert.is_true(client.poll_until(function()
      local m = get(port, "/metrics") -- 0.0.0.0 includes 127.0.0.1
      return m and m.status == 200
    end, 20000))
    assert.truthy(proc.stderr:find("listening on 0.0.0.0, which is not loopback: anyone who can reach it", 1, true),
      proc.stderr)
    proc:close()
  end)

  it("closes a connection that sends nothing, and one past the connection cap", function()
    local port = services.free_port()
    local proc = client.spawn({ "run", FIXTURE, "--metrics", "127.0.0.1:" .. port })
    proc:initialize()
    local conns = {}
    for i = 1, 33 do conns[i] = assert(http.connect(port)) end -- the cap is 32 (OBSERVE_MAX_CONNECTIONS)
    local past_cap = 0
    assert.is_true(client.poll_until(function()
      past_cap = 0
      for _, c in ipairs(conns) do
        if c.eof then past_cap = past_cap + 1 end
      end
      return past_cap >= 1
    end, 20000), "no connection past the cap was closed")
    -- The idle ones are closed too (OBSERVE_CONN_TIMEOUT_MS).
    for _, c in ipairs(conns) do assert.is_true(c:wait_eof(60000), "an idle connection stayed open") end
    for _, c in ipairs(conns) do c:close() end
    assert.are.equal(200, get(port, "/healthz").status)
    proc:close()
  end)

  it("answers /readyz 503 while draining", function()
    local port = services.free_port()
    local server = http.start({ FIXTURE, "--metrics", "127.0.0.1:" .. port }, { drain_time = 30 })
    local session = server:initialize(V)
    local conn = server:connect()
    conn:send_request { method = "POST", headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json",
      ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V },
      body = { jsonrpc = "2.0", id = 5, method = "tools/call", params = { name = "wait", arguments = { ms = 3000 } } } }
    assert.is_true(client.poll_until(function()
      return (samples(get(port, "/metrics").body)["luamcp_calls_in_flight"] or 0) >= 1
    end, 20000))
    assert.are.equal(200, get(port, "/readyz").status)
    server.proc.handle:kill("sigterm")
    local r
    assert.is_true(client.poll_until(function()
      r = get(port, "/readyz")
      return r and r.status == 503
    end, 20000))
    assert.are.same({ status = "unavailable", reason = "draining" }, r.json)
    conn:close()
    server:stop()
  end)
end)

describe("/readyz with --redis", function()
  if not services.which("redis-server") then
    print("metrics_spec: /readyz with --redis skipped: redis-server is not installed (Debian: apt install redis-server)")
    return
  end
  it("is 503 while Redis is down", function()
    local redis = services.redis()
    local server = http.start({ FIXTURE, "--redis", redis.url })
    assert.is_true(client.poll_until(function() return get(server.port, "/readyz").status == 200 end, 20000))
    assert.are.equal(1, samples(get(server.port, "/metrics").body)["luamcp_redis_up"])
    redis:stop()
    local r
    assert.is_true(client.poll_until(function()
      r = get(server.port, "/readyz")
      return r.status == 503
    end, 30000))
    assert.are.equal("unavailable", r.json.status)
    assert.truthy(r.json.reason:find("redis", 1, true) or r.json.reason:find("Redis", 1, true), r.json.reason)
    assert.are.equal(0, samples(get(server.port, "/metrics").body)["luamcp_redis_up"])
    server:stop()
  end)
end)

describe("--log-format json", function()
  it("writes one JSON object per log line, with the request's tool, id and session", function()
    local server = http.start({ FIXTURE, "--log-format", "json" })
    local session = server:initialize(V)
    call(server, session, "fail")
    call(server, session, "add", { a = 2, b = 2 })
    local objects
    assert.is_true(client.poll_until(function()
      objects = {}
      for line in server:stderr():gmatch("[^\n]+") do
        if not line:match("^luamcp: serving") then
          local ok, v = pcall(cjson.decode, line)
          assert(ok and type(v) == "table", "not a JSON line: " .. line)
          objects[#objects + 1] = v
        end
      end
      local failed, printed
      for _, o in ipairs(objects) do
        if o.level == "error" and o.message:find("boom", 1, true) then failed = o end
        if o.message == "adding 2 and 2" then printed = o end
      end
      return failed and printed and { failed, printed }
    end, 20000))
    for _, o in ipairs(objects) do
      assert.is_string(o.time)
      assert.is_string(o.level)
      assert.is_string(o.message)
    end
    local failed
    for _, o in ipairs(objects) do
      if o.level == "error" and o.message:find("boom", 1, true) then failed = o end
    end
    assert.are.equal("fail", failed.tool)
    assert.are.equal("7", failed.request_id)
    assert.is_string(failed.session)
    server:stop_cleanly()
  end)
end)

describe("a real prometheus", function()
  if not services.which("prometheus") then
    print("metrics_spec: prometheus skipped: prometheus is not installed (Debian: apt install prometheus)")
    return
  end

  local function scrape_and_check(args, label)
    local dir = client.temp_dir()
    local server = http.start(args)
    local prom = start_prometheus(dir, { "127.0.0.1:" .. server.port })
    local ok, err = pcall(function()
      local session = drive(server, 4)
      -- More calls on fresh connections: under --workers they reach every worker.
      for i = 1, 6 do
        assert.are.equal(tostring(i + 1), call(server, session, "add", { a = i, b = 1 }).content[1].text)
      end
      wait_for_value(prom, 'sum(luamcp_tool_calls_total{tool="add",outcome="ok"})', 10)
      wait_for_value(prom, 'sum(luamcp_tool_calls_total{tool="fail",outcome="tool_error"})', 1)
      wait_for_value(prom, 'sum(luamcp_tool_calls_total{tool="slow",outcome="timeout"})', 1)
      wait_for_value(prom, 'sum(luamcp_tool_duration_seconds_count{tool="add"})', 10)
      -- The slow tool's one call took its 100 ms deadline: its median is
      -- past 0.05 s and finite, whatever the machine's load (a libuv timer
      -- counts whole ms from the loop's cached time, so the measured
      -- duration may fall just under 0.1 s, and the quantile is then
      -- interpolated inside (0.05, 0.1]).
      local q
      assert.is_true(client.poll_until(function()
        q = query(prom, 'histogram_quantile(0.5, sum by (le) (luamcp_tool_duration_seconds_bucket{tool="slow"}))')
        return q ~= nil
      end, 60000))
      assert.is_true(q > 0.05 and q < math.huge, label .. ": quantile " .. tostring(q))
      local add_q = query(prom, 'histogram_quantile(0.99, sum by (le) (luamcp_tool_duration_seconds_bucket{tool="add"}))')
      assert.is_true(add_q ~= nil and add_q >= 0 and add_q < math.huge, label .. ": add quantile " .. tostring(add_q))
      wait_for_value(prom, 'count(up{job="luamcp"} == 1)', 1)
    end)
    prom.stop()
    server:stop()
    client.remove_tree(dir)
    assert(ok, err)
  end

  it("scrapes one process: the tool counters and a quantile match the calls", function()
    scrape_and_check({ FIXTURE }, "one process")
  end)

  it("scrapes --workers 2 on the shared port: every worker, labelled", function()
    local dir = client.temp_dir()
    local server = http.start({ FIXTURE, "--workers", "2" })
    local prom = start_prometheus(dir, { "127.0.0.1:" .. server.port })
    local ok, err = pcall(function()
      local total = 0
      -- Fresh connections until both workers have answered some calls.
      local session = server:initialize(V)
      for i = 1, 40 do
        local r = server:post({ jsonrpc = "2.0", id = i, method = "tools/call", params = {
          name = "add", arguments = { a = i, b = 0 }, _meta = http.modern_meta() } }, http.modern_headers("tools/call", "add"))
        assert(r and r.json and r.json.result, "no result")
        total = total + 1
      end
      assert.is_string(session)
      wait_for_value(prom, 'sum(luamcp_tool_calls_total{tool="add",outcome="ok"})', total)
      wait_for_value(prom, 'count(luamcp_up)', 2)
      -- One scrape of the shared port: both workers, each family once.
      local text = get(server.port, "/metrics").body
      assert_exposition(text)
      assert.truthy(text:find('luamcp_up{worker="1"} 1', 1, true))
      assert.truthy(text:find('luamcp_up{worker="2"} 1', 1, true))
      local q
      assert.is_true(client.poll_until(function()
        q = query(prom, 'histogram_quantile(0.9, sum by (le) (luamcp_tool_duration_seconds_bucket{tool="add"}))')
        return q ~= nil
      end, 60000))
      assert.is_true(q >= 0 and q < math.huge)
    end)
    prom.stop()
    server:stop()
    client.remove_tree(dir)
    assert(ok, err)
  end)
end)
