-- What sessions keep from their clients (issue 27): legacy
-- resources/subscribe is capped and refuses URIs nothing serves (item 3);
-- initialize's clientInfo and capabilities are bounded and charged to the
-- HTTP buffer budget (item 8); a 2026-07-28 requestState is bound to the
-- arguments it was issued for (item 9). Memory cases assert an RSS bound
-- for a stated load, never a duration; every wait is generous.
local client = require "spec.helpers.mcp_client"
local http = require "spec.helpers.http_client"
local cjson = require "cjson"

local FIXTURE = "spec/fixtures/session_limits"
local V = "2025-11-25"
local EMPTY = cjson.decode("{}")
local WAIT_MS = 60000
-- AddressSanitizer keeps freed memory in quarantine: RSS says nothing then.
local SANITIZED = (os.getenv("LUAMCP") or ""):find("asan") ~= nil

local MB = 1024 * 1024
local LISTEN_MAX_URIS = 256     -- luamcp_limits.h
local MAX_URI_BYTES = 4096      -- MAX_RESOURCE_URI_BYTES
local MAX_FIELD_BYTES = 16384   -- MAX_CLIENT_FIELD_BYTES

local function subscribe(proc, uri, method)
  local r = proc:request(method or "resources/subscribe", { uri = uri }, WAIT_MS)
  assert(r, "no answer to " .. (method or "resources/subscribe") .. "\n" .. proc.stderr)
  return r
end

describe("legacy resources/subscribe (issue 27.3)", function()
  local proc
  before_each(function()
    proc = client.spawn({ "run", FIXTURE })
    proc:initialize(V)
  end)
  after_each(function() proc:terminate() end)

  it("takes URIs the server serves and refuses others with -32002 and the URI", function()
    assert.are.same(EMPTY, subscribe(proc, "test://there").result)
    assert.are.same(EMPTY, subscribe(proc, "test://clock/utc").result)
    local r = subscribe(proc, "test://nowhere")
    assert.are.equal(-32002, r.error.code)
    assert.truthy(r.error.message:find("test://nowhere", 1, true), r.error.message)
    assert.are.same({ uri = "test://nowhere" }, r.error.data)
    -- As resources/read answers the same URI in this session.
    r = proc:request("resources/read", { uri = "test://nowhere" }, WAIT_MS)
    assert.are.equal(-32002, r.error.code)
    -- Unsubscribing from what was never subscribed is fine.
    assert.are.same(EMPTY, subscribe(proc, "test://nowhere", "resources/unsubscribe").result)
  end)

  it("caps a session at 256 subscriptions and URIs at 4096 bytes", function()
    local r = subscribe(proc, "test://clock/" .. ("z"):rep(MAX_URI_BYTES))
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("4096", 1, true), r.error.message)
    -- The longest URI allowed is taken.
    local longest = "test://clock/" .. ("z"):rep(MAX_URI_BYTES - #"test://clock/")
    assert.are.same(EMPTY, subscribe(proc, longest).result)
    for i = 2, LISTEN_MAX_URIS do assert.are.same(EMPTY, subscribe(proc, "test://clock/" .. i).result) end
    -- Subscribing again to one it has is no new subscription.
    assert.are.same(EMPTY, subscribe(proc, "test://clock/2").result)
    r = subscribe(proc, "test://there")
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("256", 1, true), r.error.message)
    -- One unsubscribed makes room for one more.
    assert.are.same(EMPTY, subscribe(proc, "test://clock/2", "resources/unsubscribe").result)
    assert.are.same(EMPTY, subscribe(proc, "test://there").result)
    assert.are.equal(-32602, subscribe(proc, "test://clock/2").error.code)
  end)

  it("keeps RSS bounded when one session asks for 500 distinct 1 MB URIs", function()
    local before = http.rss_kb(proc.pid)
    local padding = ("p"):rep(MB)
    local codes = {}
    for i = 1, 500 do
      local r = subscribe(proc, "test://clock/" .. i .. padding)
      codes[r.error and r.error.code or "ok"] = (codes[r.error and r.error.code or "ok"] or 0) + 1
    end
    assert.are.same({ [-32602] = 500 }, codes)
    local grown = http.rss_kb(proc.pid) - before
    -- Without a cap every URI was kept: +500 MB.
    assert.is_true(SANITIZED or grown < 48 * 1024, ("RSS grew by %d kB"):format(grown))
    assert.are.same(EMPTY, subscribe(proc, "test://there").result)
  end)
end)

describe("what a session keeps from initialize (issue 27.8)", function()
  local function initialize_params(info_bytes, caps)
    return { protocolVersion = V, capabilities = caps or EMPTY,
             clientInfo = { name = "big", version = "1", padding = ("i"):rep(info_bytes) } }
  end

  it("refuses a clientInfo or capabilities over 16 KiB with -32602, over stdio", function()
    local proc = client.spawn({ "run", FIXTURE })
    finally(function() proc:terminate() end)
    local r = proc:request("initialize", initialize_params(MB), WAIT_MS)
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("clientInfo", 1, true), r.error.message)
    assert.truthy(r.error.message:find(tostring(MAX_FIELD_BYTES), 1, true), r.error.message)
    r = proc:request("initialize", initialize_params(10, { experimental = { blob = ("c"):rep(MB) } }), WAIT_MS)
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("capabilities", 1, true), r.error.message)
    -- Nothing was kept: the session is still new, and a reasonable client gets in.
    r = proc:request("initialize", initialize_params(8000), WAIT_MS)
    assert.is_table(r.result, cjson.encode(r))
  end)

  it("keeps RSS bounded with 50 HTTP initializes of 1 MB clientInfo that never send initialized", function()
    local server = http.start { FIXTURE }
    finally(function() server:stop_cleanly() end)
    local conn = server:connect()
    local before = http.rss_kb(server.proc.pid)
    for i = 1, 50 do
      local r = conn:request { method = "POST", timeout_ms = WAIT_MS,
        headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" },
        body = { jsonrpc = "2.0", id = i, method = "initialize", params = initialize_params(MB) } }
      assert.is_table(r, "no answer to initialize " .. i)
      assert.are.equal(-32602, r.json.error.code, r.body)
      assert.are.equal(i, r.json.id)
      assert.is_nil(r.headers["mcp-session-id"])
    end
    local grown = http.rss_kb(server.proc.pid) - before
    -- Each session kept its 1 MB clientInfo for the session timeout: +51 MB.
    assert.is_true(SANITIZED or grown < 24 * 1024, ("RSS grew by %d kB"):format(grown))
  end)

  it("charges what sessions keep to --http-memory: a full budget refuses initialize with 503", function()
    local server = http.start { FIXTURE, "--http-memory", "1" }
    finally(function() server:stop_cleanly() end)
    local conn = server:connect()
    local function initialize(id)
      return conn:request { method = "POST", timeout_ms = WAIT_MS,
        headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" },
        body = { jsonrpc = "2.0", id = id, method = "initialize", params = initialize_params(15000) } }
    end
    local sessions, refused = {}, nil
    for i = 1, 200 do
      local r = initialize(i)
      assert.is_table(r, "no answer to initialize " .. i)
      if r.status ~= 200 then
        refused = r
        break
      end
      assert.is_table(r.json.result, r.body)
      sessions[#sessions + 1] = r.headers["mcp-session-id"]
    end
    -- 1 MiB holds about 68 sessions of 15 kB: never all 200.
    assert.is_table(refused, "200 sessions of 15 kB each fitted in a 1 MiB budget")
    http.assert_error(refused, 503, -32000, "try again later", #sessions + 1)
    assert.is_true(#sessions > 20, "only " .. #sessions .. " sessions fitted")
    -- Sessions that end give their bytes back.
    for i = 1, 5 do
      local r = conn:request { method = "DELETE", headers = { ["Mcp-Session-Id"] = sessions[i] } }
      assert.are.equal(200, r.status)
    end
    local r = initialize(1000)
    assert.are.equal(200, r.status, r.body)
    assert.is_table(r.json.result, r.body)
  end)

  it("refuses a 2026-07-28 request whose _meta clientInfo is over 16 KiB with -32602", function()
    local proc = client.spawn({ "run", FIXTURE })
    finally(function() proc:terminate() end)
    local meta = http.modern_meta(EMPTY)
    meta["io.modelcontextprotocol/clientInfo"] = { name = "big", version = "1", padding = ("i"):rep(MB) }
    local r = proc:request("tools/list", { _meta = meta }, WAIT_MS)
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("clientInfo", 1, true), r.error.message)
  end)
end)

describe("requestState binds the arguments (issue 27.9)", function()
  local proc
  before_each(function() proc = client.spawn({ "run", FIXTURE }) end)
  after_each(function() proc:terminate() end)

  local CAPS = { elicitation = EMPTY }
  local function with_meta(params)
    params._meta = http.modern_meta(CAPS)
    return params
  end

  local function first_round(method, params)
    local r = proc:request(method, with_meta(params), WAIT_MS)
    assert.is_table(r.result, cjson.encode(r))
    assert.are.equal("input_required", r.result.resultType)
    local key = next(r.result.inputRequests)
    return r.result.requestState, key
  end

  it("refuses a retry of pay{to=self} with other arguments, before the handler runs", function()
    local state, key = first_round("tools/call", { name = "pay", arguments = { to = "self" } })
    local r = proc:request("tools/call", with_meta { name = "pay", arguments = { to = "attacker", amount = 1000 },
      requestState = state, inputResponses = { [key] = { action = "accept", content = { ok = true } } } }, WAIT_MS)
    assert.is_table(r.error, cjson.encode(r))
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("other arguments", 1, true), r.error.message)
    -- The same state with the same arguments still completes.
    r = proc:request("tools/call", with_meta { name = "pay", arguments = { to = "self" },
      requestState = state, inputResponses = { [key] = { action = "accept", content = { ok = true } } } }, WAIT_MS)
    assert.are.equal("complete", r.result.resultType, cjson.encode(r))
    assert.are.equal("paid self 1 (quoted for self 1, ok=true)", r.result.content[1].text)
  end)

  it("accepts the same arguments re-serialised: other key order, spacing and number spelling", function()
    local state, key = first_round("tools/call",
      { name = "pay", arguments = { to = "self", amount = 5, memo = { a = 1, b = { 2.5, 3 } } } })
    local line = cjson.encode { jsonrpc = "2.0", id = 9001, method = "tools/call", params = with_meta {
      name = "pay", arguments = "ARGS", requestState = state,
      inputResponses = { [key] = { action = "accept", content = { ok = true } } } } }
    local args = '{ "memo" : { "b" : [ 2.50, 3.0 ], "a" : 1 }, "amount" : 5.0, "to" : "self" }'
    proc:send((line:gsub('"ARGS"', function() return args end)))
    local r = proc:await_response(9001, WAIT_MS)
    assert.is_table(r and r.result, cjson.encode(r or {}))
    assert.are.equal("paid self 5 (quoted for self 5, ok=true)", r.result.content[1].text)
  end)

  it("binds a prompt's arguments too", function()
    local state, key = first_round("prompts/get", { name = "letter", arguments = { to = "Ann" } })
    local answer = { [key] = { action = "accept", content = { name = "Bo" } } }
    local r = proc:request("prompts/get", with_meta { name = "letter", arguments = { to = "Mallory" },
      requestState = state, inputResponses = answer }, WAIT_MS)
    assert.are.equal(-32602, r.error.code)
    assert.truthy(r.error.message:find("other arguments", 1, true), r.error.message)
    r = proc:request("prompts/get", with_meta { name = "letter", arguments = { to = "Ann" },
      requestState = state, inputResponses = answer }, WAIT_MS)
    assert.are.equal("Dear Ann, from Bo", r.result.messages[1].content.text, cjson.encode(r))
  end)
end)
