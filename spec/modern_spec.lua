-- The 2026-07-28 era beside the initialize era, in one process: era per
-- request, server/discover, the modern error rules (code, HTTP status and
-- the echoed id), input_required rounds (the same handler as a legacy
-- session's real requests), sealed requestState, cancellation by closing a
-- stream, subscriptions/listen, cache hints and logging by request.
local client = require "spec.helpers.mcp_client"
local http = require "spec.helpers.http_client"
local cjson = require "cjson"

local FIXTURE = "spec/fixtures/modern"
local V = http.MODERN
local EMPTY = cjson.decode("{}")

local meta = http.modern_meta

local function with_meta(params, caps, extra)
  params = params or {}
  params._meta = meta(caps, extra)
  return params
end

local BOTH = { elicitation = EMPTY, sampling = EMPTY }

local headers = http.modern_headers

local function post(server, id, method, params, extra_headers)
  local name = params and (params.name or params.uri)
  return server:post({ jsonrpc = "2.0", id = id, method = method, params = params },
    headers(method, name, extra_headers))
end

local rpc = http.rpc

describe("2026-07-28 over HTTP", function()
  local server
  before_each(function() server = http.start({ FIXTURE }) end)
  after_each(function() server:stop_cleanly() end)

  it("answers server/discover with versions, capabilities, serverInfo and cache hints", function()
    local r = post(server, 1, "server/discover", with_meta())
    assert.are.equal(200, r.status)
    local result = rpc(r).result
    assert.are.same({ V }, result.supportedVersions)
    assert.is_table(result.capabilities.tools)
    assert.is_table(result.capabilities.prompts)
    assert.is_table(result.capabilities.resources)
    assert.are.equal("complete", result.resultType)
    assert.are.same({ name = "modern-fixture", version = "1.2.3" }, result._meta["io.modelcontextprotocol/serverInfo"])
    assert.are.same({ ["com.example/greeting"] = { languages = { "en", "fr" } } }, result.capabilities.extensions)
    assert.are.equal(0, result.ttlMs)
    assert.are.equal("private", result.cacheScope)
    assert.is_nil(r.headers["mcp-session-id"])
  end)

  it("marks every result and puts cache hints on the lists and reads", function()
    for _, case in ipairs {
      { "tools/list", {}, true }, { "prompts/list", {}, true }, { "resources/list", {}, true },
      { "resources/templates/list", {}, true }, { "resources/read", { uri = "test://there" }, true },
      { "prompts/get", { name = "plain" }, false },
    } do
      local result = rpc(post(server, 2, case[1], with_meta(case[2]))).result
      assert.are.equal("complete", result.resultType, case[1])
      assert.are.equal("modern-fixture", result._meta["io.modelcontextprotocol/serverInfo"].name)
      if case[3] then
        assert.are.equal(0, result.ttlMs, case[1])
        assert.are.equal("private", result.cacheScope, case[1])
      else
        assert.is_nil(result.ttlMs)
      end
    end
  end)

  it("answers every envelope error with its code, its HTTP status and the request's id", function()
    -- No MCP-Protocol-Version header, but a modern body: -32020.
    local r = server:post({ jsonrpc = "2.0", id = 11, method = "tools/list", params = with_meta() },
      { ["Mcp-Method"] = "tools/list" })
    http.assert_error(r, 400, -32020, "MCP-Protocol-Version", 11)
    -- _meta missing, or its required keys: -32602.
    http.assert_error(post(server, 12, "tools/list", {}), 400, -32602, "_meta", 12)
    local no_caps = { _meta = { ["io.modelcontextprotocol/protocolVersion"] = V } }
    http.assert_error(post(server, "a", "tools/list", no_caps), 400, -32602, "clientCapabilities", "a")
    -- Header and body disagree: -32020.
    http.assert_error(post(server, 13, "tools/list", with_meta({}, nil, {
      ["io.modelcontextprotocol/protocolVersion"] = "2099-01-01" })), 400, -32020, nil, 13)
    http.assert_error(server:post({ jsonrpc = "2.0", id = 14, method = "tools/list", params = with_meta() },
      headers("tools/call")), 400, -32020, "Mcp-Method", 14)
    http.assert_error(server:post({ jsonrpc = "2.0", id = 15, method = "tools/call",
      params = with_meta { name = "logs" } }, headers("tools/call", "other")), 400, -32020, "Mcp-Name", 15)
    -- A version we do not speak: -32022 with what we do.
    r = post(server, 16, "tools/list", with_meta({}, nil, { ["io.modelcontextprotocol/protocolVersion"] = "2099-01-01" }),
      { ["MCP-Protocol-Version"] = "2099-01-01" })
    http.assert_error(r, 400, -32022, nil, 16)
    assert.are.same({ supported = { V }, requested = "2099-01-01" }, r.json.error.data)
    -- Methods 2026-07-28 removed, and unknown ones: -32601 and 404.
    for i, method in ipairs { "initialize", "ping", "logging/setLevel", "resources/subscribe",
                              "resources/unsubscribe", "no/such" } do
      http.assert_error(post(server, 20 + i, method, with_meta()), 404, -32601, nil, 20 + i)
    end
    -- A capability the request did not declare: -32021, naming it.
    r = post(server, 30, "tools/call", with_meta { name = "needs_sampling" })
    http.assert_error(r, 400, -32021, "sampling", 30)
    assert.are.same({ requiredCapabilities = { sampling = EMPTY } }, r.json.error.data)
    -- A resource that is not there: -32602 with its URI (SEP-2164).
    r = post(server, 31, "resources/read", with_meta { uri = "test://nowhere" })
    assert.are.equal(-32602, rpc(r).error.code)
    assert.are.same({ uri = "test://nowhere" }, rpc(r).error.data)
    assert.is_true(server:alive())
  end)

  it("asks through input_required rounds, re-running the handler, with ctx:once kept across rounds", function()
    local call = { name = "greet", arguments = { lang = "French" } }
    local r1 = rpc(post(server, 40, "tools/call", with_meta(call, BOTH))).result
    assert.are.equal("input_required", r1.resultType)
    local key1, q1 = next(r1.inputRequests)
    assert.are.equal("elicitation/create", q1.method)
    assert.is_string(r1.requestState)
    call.requestState = r1.requestState
    call.inputResponses = { [key1] = { action = "accept", content = { name = "Ann" } } }
    local r2 = rpc(post(server, 41, "tools/call", with_meta(call, BOTH))).result
    assert.are.equal("input_required", r2.resultType)
    local key2, q2 = next(r2.inputRequests)
    assert.are.equal("sampling/createMessage", q2.method)
    assert.are.equal("Greet Ann in French", q2.params.messages[1].content.text)
    assert.are_not.equal(r1.requestState, r2.requestState)
    call.requestState = r2.requestState
    call.inputResponses = { [key2] = { role = "assistant", content = { type = "text", text = "Bonjour Ann" },
                                       model = "m", stopReason = "endTurn" } }
    local r3 = rpc(post(server, 42, "tools/call", with_meta(call, BOTH))).result
    assert.are.equal("complete", r3.resultType)
    assert.are.equal("Ann / Bonjour Ann / ticket 1", r3.content[1].text)
    -- Three rounds, one run of the once-block.
    local n = rpc(post(server, 43, "tools/call", with_meta { name = "side_effects" })).result
    assert.are.equal("1", n.content[1].text)
  end)

  it("refuses a requestState that was altered or issued for another request", function()
    local r1 = rpc(post(server, 50, "tools/call", with_meta({ name = "greet" }, BOTH))).result
    local key = next(r1.inputRequests)
    local answer = { [key] = { action = "accept", content = { name = "Eve" } } }
    local state = r1.requestState
    local flipped = (state:sub(20, 20) == "A" and "B" or "A")
    local tampered = state:sub(1, 19) .. flipped .. state:sub(21)
    local r = rpc(post(server, 51, "tools/call", with_meta({ name = "greet", requestState = tampered,
      inputResponses = answer }, BOTH)))
    assert.are.equal(-32602, r.error.code)
    assert.are.equal(51, r.id)
    r = rpc(post(server, 52, "tools/call", with_meta({ name = "logs", requestState = state, inputResponses = answer },
      BOTH)))
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("another request", 1, true))
  end)

  it("cancels a call when the client closes its stream", function()
    -- Counted before the request: its line may come before the next statement.
    local started = client.count(server:stderr(), "slow started")
    local stopped = client.count(server:stderr(), "slow stopped")
    local conn = server:connect()
    conn:send_request { method = "POST", headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json",
      ["MCP-Protocol-Version"] = V, ["Mcp-Method"] = "tools/call", ["Mcp-Name"] = "slow" },
      body = { jsonrpc = "2.0", id = 60, method = "tools/call", params = with_meta { name = "slow" } } }
    -- The call has started once the tool says so on stderr.
    assert.is_true(server:wait_stderr("slow started", started + 1), server:stderr())
    conn:close()
    -- The tool says when it stops too; then it counts itself stopped.
    assert.is_true(server:wait_stderr("slow stopped", stopped + 1), "the slow call was not stopped:\n" .. server:stderr())
    assert.are.equal("1", rpc(post(server, 61, "tools/call", with_meta { name = "stopped" })).result.content[1].text)
  end)

  it("sends log messages only to a request that asked for them, at its level", function()
    local r = post(server, 70, "tools/call", with_meta { name = "logs" })
    assert.is_nil(r.body:find("notifications/message", 1, true))
    for _, e in ipairs(r.events or {}) do assert.is_nil(e.data:find("notifications/message", 1, true)) end
    r = post(server, 71, "tools/call", with_meta({ name = "logs" }, nil,
      { ["io.modelcontextprotocol/logLevel"] = "info" }))
    local seen = false
    for _, e in ipairs(r.events or {}) do seen = seen or e.data:find("hello from the tool", 1, true) ~= nil end
    assert.is_true(seen, r.body)
    r = post(server, 72, "tools/call", with_meta({ name = "logs" }, nil,
      { ["io.modelcontextprotocol/logLevel"] = "error" }))
    assert.is_nil((r.body or ""):find("hello from the tool", 1, true))
  end)

  it("keeps legacy sessions working on the same endpoint", function()
    local session = server:initialize("2025-11-25")
    local r = server:post({ jsonrpc = "2.0", id = 80, method = "tools/list" },
      { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" })
    assert.are.equal(200, r.status)
    assert.is_nil(rpc(r).result.resultType)
    assert.is_nil(rpc(r).result.ttlMs)
  end)
end)

describe("2026-07-28 over stdio", function()
  local proc
  before_each(function() proc = client.spawn({ "run", FIXTURE }, { env = { "STATE_TTL_MS=1" } }) end)
  after_each(function() proc:close() end)

  it("needs no initialize, and refuses an expired requestState", function()
    local r = proc:request("tools/call", with_meta({ name = "greet" }, BOTH))
    assert.are.equal("input_required", r.result.resultType)
    local key = next(r.result.inputRequests)
    client.sleep(20) -- the fixture seals states for 1 ms
    r = proc:request("tools/call", with_meta({ name = "greet", requestState = r.result.requestState,
      inputResponses = { [key] = { action = "accept", content = { name = "Al" } } } }, BOTH))
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("expired", 1, true), r.error.message)
  end)

  it("gives the handler its request's client, capabilities and _meta, less the envelope", function()
    local r = proc:request("tools/call", with_meta({ name = "whoami" }, BOTH,
      { progressToken = 7, ["example.com/trace"] = "abc" }))
    assert.are.same({ meta_keys = "example.com/trace,progressToken", client = "busted", sampling = true, version = V },
      r.result.structuredContent)
    proc:initialize("2025-11-25", EMPTY)
    r = proc:request("tools/call", { name = "whoami", _meta = { progressToken = 8 } })
    assert.are.same({ meta_keys = "progressToken", client = "busted", sampling = false, version = "2025-11-25" },
      r.result.structuredContent)
  end)

  it("serves a legacy session and modern requests side by side", function()
    local d = proc:request("server/discover", with_meta())
    assert.are.same({ V }, d.result.supportedVersions)
    proc:initialize("2025-11-25", BOTH)
    local r = proc:request("tools/list", {})
    assert.is_nil(r.result.resultType)
    r = proc:request("tools/list", with_meta())
    assert.are.equal("complete", r.result.resultType)
  end)

  it("runs the same handler with real requests in a legacy session", function()
    proc:initialize("2025-11-25", BOTH)
    proc:send { jsonrpc = "2.0", id = 90, method = "tools/call", params = { name = "greet" } }
    local answers = {
      ["elicitation/create"] = { action = "accept", content = { name = "Ann" } },
      ["sampling/createMessage"] = { role = "assistant", content = { type = "text", text = "Hello Ann" },
                                     model = "m", stopReason = "endTurn" },
    }
    local result
    assert.is_true(client.wait_until(function()
      local msg = proc:read(100)
      if msg and msg.method and msg.id then
        proc:send { jsonrpc = "2.0", id = msg.id, result = answers[msg.method] }
      elseif msg and msg.id == 90 then
        result = msg.result
      end
      return result ~= nil
    end, 5000), proc.stderr)
    assert.are.equal("Ann / Hello Ann / ticket 1", result.content[1].text)
  end)

  it("delivers list_changed to a subscriptions/listen call, tagged with its id", function()
    proc:send { jsonrpc = "2.0", id = "sub-1", method = "subscriptions/listen",
                params = with_meta { notifications = { toolsListChanged = true } } }
    local ack = proc:read(2000)
    assert.are.equal("notifications/subscriptions/acknowledged", ack.method)
    assert.are.same({ toolsListChanged = true }, ack.params.notifications)
    assert.are.equal("sub-1", ack.params._meta["io.modelcontextprotocol/subscriptionId"])
    -- Cancelling the subscription ends it: nothing more arrives for it.
    proc:notify("notifications/cancelled", { requestId = "sub-1" })
    assert.is_true(proc:silent_for(200))
  end)
end)

describe("2026-07-28 elicitation answers", function()
  local proc
  before_each(function() proc = client.spawn({ "run", FIXTURE }) end)
  after_each(function() proc:close() end)

  -- Retry greet with answer to its elicitation: the JSON-RPC response.
  local function retry_with(answer)
    local r = proc:request("tools/call", with_meta({ name = "greet" }, BOTH))
    assert.are.equal("input_required", r.result.resultType)
    local key = next(r.result.inputRequests)
    return proc:request("tools/call", with_meta({ name = "greet", requestState = r.result.requestState,
      inputResponses = { [key] = answer } }, BOTH))
  end

  it("refuses an answer with an action other than accept, decline or cancel with -32602", function()
    local r = retry_with({ action = "bogus" })
    assert.is_table(r.error, cjson.encode(r))
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find('action "bogus"', 1, true), r.error.message)
    r = retry_with({ content = { name = "Ann" } })
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("action", 1, true), r.error.message)
  end)

  it("refuses an accepted answer whose content does not match requestedSchema with -32602", function()
    local r = retry_with({ action = "accept", content = { name = 5 } })
    assert.is_table(r.error, cjson.encode(r))
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("requestedSchema", 1, true), r.error.message)
    assert.truthy(r.error.message:find("/name", 1, true), r.error.message)
    r = retry_with({ action = "accept" }) -- name is required
    assert.are.equal(-32602, r.error.code)
    r = retry_with({ action = "accept", content = "Ann" })
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("not an object", 1, true), r.error.message)
  end)

  it("checks a session client's reply to elicitation/create the same way", function()
    proc:initialize("2025-11-25", BOTH)
    proc:send { jsonrpc = "2.0", id = 91, method = "tools/call", params = { name = "greet" } }
    local result
    assert.is_true(client.wait_until(function()
      local msg = proc:read(100)
      if msg and msg.method == "elicitation/create" then
        proc:send { jsonrpc = "2.0", id = msg.id, result = { action = "bogus" } }
      elseif msg and msg.id == 91 then
        result = msg.result
      end
      return result ~= nil
    end, 10000), proc.stderr)
    assert.is_true(result.isError)
    assert.truthy(result.content[1].text:find('action "bogus"', 1, true), result.content[1].text)
  end)
end)

describe("2026-07-28 cache hints", function()
  it("come from the read, else the resource or template, else mcp.server, and never reach a legacy session", function()
    local proc = client.spawn({ "run", FIXTURE }, { env = { "LIST_TTL_MS=5000" } })
    local function hints(method, params)
      local result = proc:request(method, with_meta(params)).result
      return { result.ttlMs, result.cacheScope }
    end
    assert.are.same({ 5000, "private" }, hints("tools/list", {}))
    assert.are.same({ 5000, "private" }, hints("server/discover", {}))
    assert.are.same({ 5000, "private" }, hints("resources/read", { uri = "test://there" }))
    assert.are.same({ 60000, "public" }, hints("resources/read", { uri = "test://static" }))
    assert.are.same({ 1000, "private" }, hints("resources/read", { uri = "test://clock/utc" }))
    proc:initialize("2025-11-25", EMPTY)
    local legacy = proc:request("resources/read", { uri = "test://static" }).result
    assert.is_nil(legacy.ttlMs)
    assert.is_nil(legacy.cacheScope)
    proc:close()
  end)

  it("are checked when a script declares them", function()
    local dir = os.tmpname()
    os.remove(dir)
    assert(os.execute("mkdir -p " .. dir))
    local f = assert(io.open(dir .. "/bad.lua", "w"))
    f:write('require("mcp").template { uriTemplate = "x://{a}", name = "x", read = function() end, cacheScope = "shared" }\n')
    f:close()
    local proc = client.spawn({ "run", dir })
    proc:wait_exit(5000)
    assert.is_true(proc.exited)
    assert.truthy(proc.stderr:find('bad.lua:1: cacheScope must be "public" or "private", got shared', 1, true), proc.stderr)
    proc:close()
    os.execute("rm -rf " .. dir)
  end)
end)

describe("2026-07-28 subscriptions/listen and luamcp dev", function()
  it("notifies a listener when a reload changes the tools", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/tools.lua", 'local mcp = require "mcp"\nmcp.tool { name = "one", handler = function() return 1 end }\n')
    local proc = client.spawn { "dev", dir }
    proc:send { jsonrpc = "2.0", id = 7, method = "subscriptions/listen",
                params = with_meta { notifications = { toolsListChanged = true, promptsListChanged = true } } }
    local ack = proc:read(2000)
    assert.are.equal("notifications/subscriptions/acknowledged", ack.method)
    -- No prompts: the server agrees to tools only.
    assert.are.same({ toolsListChanged = true }, ack.params.notifications)
    client.write_file(dir .. "/tools.lua", 'local mcp = require "mcp"\nmcp.tool { name = "two", handler = function() return 2 end }\n')
    local changed
    assert.is_true(client.wait_until(function()
      local msg = proc:read(100)
      if msg and msg.method == "notifications/tools/list_changed" then changed = msg end
      return changed ~= nil
    end, 10000), proc.stderr)
    assert.are.equal(7, changed.params._meta["io.modelcontextprotocol/subscriptionId"])
    proc:close()
    client.remove_tree(dir)
  end)
end)

describe("2026-07-28 CORS and shared state keys", function()
  it("answers a preflight for an allowed origin and lets the page read Mcp-Session-Id", function()
    local server = http.start({ FIXTURE, "--allow-origin", "https://app.example", "--bearer-token-env", "TOKEN" },
      { env = { "TOKEN=secret-token" } })
    local r = server:request { method = "OPTIONS", headers = { Origin = "https://app.example",
      ["Access-Control-Request-Method"] = "POST", ["Access-Control-Request-Headers"] = "mcp-protocol-version" } }
    assert.are.equal(204, r.status)
    assert.are.equal("https://app.example", r.headers["access-control-allow-origin"])
    assert.truthy(r.headers["access-control-allow-headers"]:find("MCP-Protocol-Version", 1, true))
    assert.truthy(r.headers["access-control-allow-methods"]:find("POST", 1, true))
    r = server:request { method = "OPTIONS", headers = { Origin = "https://evil.example" } }
    assert.are.equal(403, r.status)
    local init = server:post({ jsonrpc = "2.0", id = 1, method = "initialize", params = { protocolVersion = "2025-11-25",
      capabilities = EMPTY, clientInfo = { name = "page", version = "1" } } },
      { Origin = "https://app.example", Authorization = "Bearer secret-token" })
    assert.are.equal(200, init.status)
    assert.are.equal("https://app.example", init.headers["access-control-allow-origin"])
    -- a browser client reads the session id, and WWW-Authenticate to find the authorization server
    assert.are.equal("Mcp-Session-Id, WWW-Authenticate", init.headers["access-control-expose-headers"])
    assert.is_string(init.headers["mcp-session-id"])
    server:stop_cleanly()
  end)

  it("accepts another process's requestState only when both share --state-key-env", function()
    local env = { "STATE_KEY=0123456789abcdef0123456789abcdef" }
    local a = client.spawn({ "run", "--state-key-env", "STATE_KEY", FIXTURE }, { env = env })
    local r = a:request("tools/call", with_meta({ name = "greet" }, BOTH))
    a:close()
    local key = next(r.result.inputRequests)
    local retry = with_meta({ name = "greet", requestState = r.result.requestState,
      inputResponses = { [key] = { action = "accept", content = { name = "Bo" } } } }, BOTH)
    local b = client.spawn({ "run", "--state-key-env", "STATE_KEY", FIXTURE }, { env = env })
    local rb = b:request("tools/call", retry)
    b:close()
    assert.are.equal("input_required", rb.result.resultType) -- on to the next question: the state was accepted
    assert.are.equal("sampling/createMessage", select(2, next(rb.result.inputRequests)).method)
    local c = client.spawn({ "run", FIXTURE })
    local rc = c:request("tools/call", retry)
    c:close()
    assert.are.equal(-32602, rc.error.code)
  end)
end)
