-- OAuth end to end (issue #29) with a real authorization server:
-- oidc-provider (spec/helpers/oidc_provider.mjs) on a run-time port, signing
-- with keys made by spec/helpers/jwt_mint.mjs so that the spec can also mint
-- hostile tokens with the very same keys, and the real luamcp binary as the
-- resource server (--auth-issuer: everything else found by discovery).
--
--   * the official TypeScript SDK v2 client (spec/clients/sdk_oauth.mjs)
--     starts from a 401, discovers, registers or uses a pre-registered
--     client, gets a token (client credentials; authorization code + PKCE
--     followed headlessly) and calls tools, in both eras, stepping up;
--   * every bad token refused with 401 and its challenge; opaque tokens
--     introspected, a revoked one refused;
--   * 403 insufficient_scope, then a token with the scope;
--   * one caller kept out of another's session, task, requestState and
--     streams: one process, --workers 2, two instances sharing Redis;
--   * the provider's keys rotated mid-run, followed.
local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local services = require "services"
local uv = require "luv"
local cjson = http.json

local NODE = node.NODE
local FIXTURE = "spec/fixtures/auth_e2e"
local LEGACY, MODERN = "2025-11-25", "2026-07-28"
local EMPTY = cjson.decode("{}")
local TASKS = { extensions = { ["io.modelcontextprotocol/tasks"] = EMPTY }, elicitation = EMPTY }

local missing
if not uv.fs_access(NODE, "X") then missing = "Node 22 is not installed in spec/node_modules (npm ci)" end

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

---------------------------------------------------------------------------
-- The authorization server
---------------------------------------------------------------------------

local CLIENTS = {}
for _, who in ipairs { "alice", "bob" } do
  CLIENTS[#CLIENTS + 1] = { client_id = who, client_secret = who .. "-secret", grant_types = { "client_credentials" },
    response_types = {}, redirect_uris = {}, token_endpoint_auth_method = "client_secret_basic" }
end
local SECRETS = { m2m = "m2m-secret", ["opaque-m2m"] = "opaque-secret", alice = "alice-secret", bob = "bob-secret" }

local function new_keys()
  local dir = client.temp_dir()
  local code, _, err = client.sh(NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(dir))
  assert(code == 0, err)
  return dir
end

--- Start oidc-provider with the keys of dir; returns it ({issuer, port,
--- proc, keys}); stopped with its test block by the reaper if not before.
local function start_provider(keys)
  local config = { keys = keys, any_resource = { scope = "notes:read notes:write" }, clients = CLIENTS }
  local proc = client.spawn({ "spec/helpers/oidc_provider.mjs", cjson.encode(config) }, { bin = NODE })
  local line = proc:read_line(60000)
  assert(line, "oidc-provider did not start:\n" .. proc.stderr)
  local p = cjson.decode(line)
  p.proc, p.keys = proc, keys
  function p.command(_, t)
    proc:send(t)
    local answer = proc:read_line(10000)
    assert(answer, "oidc-provider did not answer:\n" .. proc.stderr)
    return cjson.decode(answer)
  end
  return p
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(s)
  return ((s:gsub(".", function(c)
    local bits, b = "", c:byte()
    for i = 8, 1, -1 do bits = bits .. (b % 2 ^ i - b % 2 ^ (i - 1) > 0 and "1" or "0") end
    return bits
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return B64:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#s % 3 + 1])
end

local function form(t)
  local parts = {}
  for k, v in pairs(t) do
    parts[#parts + 1] = k .. "=" .. tostring(v):gsub("[^%w%-%._~]", function(c) return ("%%%02X"):format(c:byte()) end)
  end
  return table.concat(parts, "&")
end

--- POST a form to the provider as client id (HTTP Basic); the response.
local function provider_post(p, path, id, fields)
  local conn = assert(http.connect(p.port))
  local r = conn:request({ method = "POST", path = path, body = form(fields), headers = {
    Authorization = "Basic " .. base64(id .. ":" .. SECRETS[id]),
    ["Content-Type"] = "application/x-www-form-urlencoded", Accept = "application/json" } })
  conn:close()
  return r
end

--- An access token from the provider (client credentials) for resource.
local function provider_token(p, id, resource, scope)
  local r = provider_post(p, "/token", id, { grant_type = "client_credentials", resource = resource,
    scope = scope or "notes:read" })
  assert(r and r.status == 200 and r.json, "no token: " .. cjson.encode(r or {}))
  return r.json.access_token
end

--- A token signed by jwt_mint with the provider's own keys (spec: see there).
local function mint(p, spec)
  local code, out, err = client.sh(NODE .. " spec/helpers/jwt_mint.mjs token " .. quote(p.keys) .. " " ..
    quote(cjson.encode(spec)))
  assert(code == 0, err)
  return (out:gsub("%s+$", ""))
end

---------------------------------------------------------------------------
-- The resource server
---------------------------------------------------------------------------

local function start_luamcp(p, extra, opts)
  local args = { "--auth-issuer", p.issuer, "--auth-scopes", "notes:read" }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  args[#args + 1] = FIXTURE
  return http.start(args, opts)
end

-- Stop a luamcp: exit 0, no signal, and no sanitizer report (the ASan run).
local function stop(s)
  local stderr = s:stderr()
  s:stop_cleanly()
  assert(not stderr:find("Sanitizer", 1, true) and not stderr:find("runtime error:", 1, true), stderr)
end

local function bearer(token, extra)
  local h = { Authorization = "Bearer " .. token }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

-- A 2026-07-28 request to port with token; the HTTP response.
local function modern_post(port, token, id, method, params, caps)
  params = params or {}
  params._meta = http.modern_meta(caps or TASKS)
  local conn = assert(http.connect(port))
  local r = conn:request({ method = "POST", body = { jsonrpc = "2.0", id = id, method = method, params = params },
    headers = http.modern_headers(method, params.name or params.taskId or params.uri, bearer(token, {
      Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" })) })
  conn:close()
  return r
end

-- A legacy session opened with token: its id.
local function legacy_session(s, token)
  local r = s:post({ jsonrpc = "2.0", id = 0, method = "initialize", params = {
    protocolVersion = LEGACY, capabilities = { elicitation = EMPTY }, clientInfo = { name = "t", version = "1" } } },
    bearer(token))
  assert.are.equal(200, r.status, r.body)
  local session = r.headers["mcp-session-id"]
  local n = s:post({ jsonrpc = "2.0", method = "notifications/initialized" },
    bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = LEGACY }))
  assert.are.equal(202, n.status)
  return session
end

local function in_session(session, token, extra)
  local h = bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = LEGACY })
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local function text_of(message)
  assert.is_table(message, "no response")
  assert.is_nil(message.error, cjson.encode(message))
  return message.result.content[1].text
end

-- A tools/call's result: structured content, else its text.
local function rpc_text(r)
  local m = http.rpc(r)
  assert.is_table(m, "no response: " .. cjson.encode(r or {}))
  assert.is_nil(m.error, cjson.encode(m))
  return m.result.structuredContent or m.result.content[1].text
end

-- The parameters of a Bearer challenge: { error=, scope=, resource_metadata=, ... }.
local function challenge(r)
  local h = r.headers["www-authenticate"]
  assert.is_string(h, "no WWW-Authenticate")
  assert.truthy(h:match("^Bearer "), h)
  local params = {}
  for k, v in h:gmatch('([%w_]+)="([^"]*)"') do params[k] = v end
  return params, h
end

local function assert_refused(s, token, what)
  local r = s:post({ jsonrpc = "2.0", id = 7, method = "tools/list" }, bearer(token))
  http.assert_error(r, 401, -32000, nil, 7)
  local c = challenge(r)
  assert.are.equal("invalid_token", c.error, what)
  assert.are.equal("http://127.0.0.1:" .. s.port .. "/.well-known/oauth-protected-resource/mcp", c.resource_metadata, what)
  assert.is_string(c.error_description, what)
  return c
end

local function sdk(opts)
  return node.run({ "spec/clients/sdk_oauth.mjs", cjson.encode(opts) }, 120000)
end

if missing then
  describe("OAuth with a real authorization server", function()
    it("is skipped: " .. missing, function() pending(missing) end)
  end)
  return
end

describe("OAuth with a real authorization server (oidc-provider)", function()
  local keys, p, s
  -- setup, not lazy_setup: the processes belong to this block (the reaper
  -- stops them when the block that started them ends).
  setup(function()
    keys = new_keys()
    p = start_provider(keys)
    s = start_luamcp(p, { "--auth-client-id", "luamcp-rs", "--auth-client-secret-env", "RS_SECRET" },
      { env = { "RS_SECRET=rs-secret" } })
  end)
  teardown(function()
    if s then stop(s) end
    if p then p.proc:terminate() end
    if keys then client.remove_tree(keys) end
  end)

  describe("the official TypeScript SDK v2 client", function()
    -- What every run must show: a 401 without a token naming the metadata,
    -- the metadata read, a token from the provider, then tokens on every
    -- request to the MCP server.
    local function assert_discovered(out, url, issuer)
      assert.is_nil(out.error, cjson.encode(out.error))
      assert.is_true(out.ok)
      local first = out.exchanges[1]
      assert.are.equal(url, first.url)
      assert.is_false(first.bearer)
      assert.are.equal(401, first.status)
      assert.truthy(first.wwwAuthenticate:find('resource_metadata="' .. url:gsub("/mcp$", "") ..
        '/.well-known/oauth-protected-resource/mcp"', 1, true), first.wwwAuthenticate)
      local seen = {}
      for _, e in ipairs(out.exchanges) do seen[#seen + 1] = e.url:gsub("^http://127%.0%.0%.1:%d+", "") end
      assert.are.equal("/.well-known/oauth-protected-resource/mcp", seen[2])
      assert.truthy(out.exchanges[3].url:find(issuer, 1, true))
      local after_token = false
      for _, e in ipairs(out.exchanges) do
        if e.url == issuer .. "/token" then after_token = true end
        if e.url == url and after_token then assert.is_true(e.bearer) end
      end
      assert.is_true(after_token)
      for _, t in ipairs(out.tokens) do
        assert.are.equal(issuer, t.iss)
        assert.are.equal(url, t.aud)
      end
      assert.truthy(#out.tools >= 5)
    end

    local function result(out, i) return out.calls[i].result.structuredContent or out.calls[i].result.content[1].text end

    for _, mode in ipairs { "pin", "legacy" } do
      local era = mode == "pin" and MODERN or LEGACY
      it("client credentials in " .. era .. ": 401, discovery, token, calls, step-up", function()
        local out = sdk { url = s.url, mode = mode, flow = "client_credentials", issuer = p.issuer,
          client_id = "m2m", client_secret = "m2m-secret",
          calls = { { name = "whoami" }, { name = "add", arguments = { a = 2, b = 3 } }, { name = "write_note" } } }
        assert_discovered(out, s.url, p.issuer)
        assert.are.equal(era, out.negotiated)
        local me = result(out, 1)
        assert.are.equal("m2m", me.subject)
        assert.are.equal("m2m", me.client_id)
        assert.are.same({ "notes:read" }, me.scopes)
        assert.is_false(me.token_seen)
        assert.are.equal("5", out.calls[2].result.content[1].text)
        -- write_note needs notes:write: a 403 challenge, a new token, the call again.
        assert.are.equal("written by m2m", result(out, 3))
        assert.are.equal(2, #out.tokens)
        assert.are.equal("notes:read notes:write", out.tokens[2].scope)
        local forbidden = 0
        for _, e in ipairs(out.exchanges) do
          if e.status == 403 then
            forbidden = forbidden + 1
            assert.truthy(e.wwwAuthenticate:find('error="insufficient_scope"', 1, true))
            assert.truthy(e.wwwAuthenticate:find('scope="notes:write"', 1, true))
          end
        end
        assert.are.equal(1, forbidden)
      end)

      it("authorization code + PKCE in " .. era .. " with dynamic client registration", function()
        local out = sdk { url = s.url, mode = mode, flow = "authorization_code", issuer = p.issuer,
          login_hint = "bob", calls = { { name = "whoami" } } }
        assert_discovered(out, s.url, p.issuer)
        assert.are.equal(era, out.negotiated)
        local registered = false
        for _, e in ipairs(out.exchanges) do
          if e.url == p.issuer .. "/reg" then registered = e.status == 201 end
        end
        assert.is_true(registered)
        assert.are.equal(1, out.redirects)
        assert.are.equal("S256", out.authorize.code_challenge_method)
        assert.are.equal(s.url, out.authorize.resource)
        assert.are.equal(out.registered.client_id, out.authorize.client_id)
        local me = result(out, 1)
        assert.are.equal("bob", me.subject)
        assert.are.equal(out.registered.client_id, me.client_id)
      end)

      it("authorization code + PKCE in " .. era .. " with a pre-registered client, stepping up", function()
        local out = sdk { url = s.url, mode = mode, flow = "authorization_code", issuer = p.issuer,
          client_id = "app", login_hint = "carol", calls = { { name = "whoami" }, { name = "write_note" } } }
        assert_discovered(out, s.url, p.issuer)
        for _, e in ipairs(out.exchanges) do assert.are_not.equal(p.issuer .. "/reg", e.url) end
        assert.are.equal("carol", result(out, 1).subject)
        assert.are.same({ "notes:read" }, result(out, 1).scopes)
        -- The step-up went through the authorization server again.
        assert.are.equal("written by carol", result(out, 2))
        assert.are.equal(2, out.redirects)
        assert.are.equal("notes:read notes:write", out.tokens[#out.tokens].scope)
      end)
    end
  end)

  describe("refuses", function()
    local function good(extra)
      local now = os.time()
      local c = { iss = p.issuer, aud = s.url, sub = "mallory", iat = now, exp = now + 600, scope = "notes:read" }
      for k, v in pairs(extra or {}) do c[k] = v end
      return c
    end

    it("no token: 401 with the challenge the specification shows", function()
      local r = s:post({ jsonrpc = "2.0", id = 3, method = "tools/list" })
      http.assert_error(r, 401, -32000, nil, 3)
      local c, h = challenge(r)
      assert.are.equal(('Bearer resource_metadata="http://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp", ' ..
        'scope="notes:read"'):format(s.port), h)
      assert.is_nil(c.error)
      local meta = s:request({ path = "/.well-known/oauth-protected-resource/mcp" })
      assert.are.equal(200, meta.status)
      assert.are.same({ p.issuer }, meta.json.authorization_servers)
      assert.are.equal(s.url, meta.json.resource)
    end)

    it("accepts the provider's token and a token minted with its keys (the control)", function()
      local r = modern_post(s.port, provider_token(p, "m2m", s.url), 1, "tools/list")
      assert.are.equal(200, r.status, r.body)
      r = modern_post(s.port, mint(p, { claims = good() }), 1, "tools/list")
      assert.are.equal(200, r.status, r.body)
      for _, alg in ipairs { "PS256", "ES256", "EdDSA" } do
        r = modern_post(s.port, mint(p, { alg = alg, claims = good() }), 1, "tools/call", { name = "whoami" })
        assert.are.equal("mallory", rpc_text(r).subject, alg)
      end
    end)

    it("expired, not yet valid, wrong issuer, wrong audience, alg none, HS256 with the public key, tampered, unknown kid",
      function()
        local now = os.time()
        local cases = {
          expired = mint(p, { claims = good { exp = now - 3600, iat = now - 7200 } }),
          ["not yet valid"] = mint(p, { claims = good { nbf = now + 3600 } }),
          ["wrong issuer"] = mint(p, { claims = good { iss = "http://127.0.0.1:1" } }),
          ["wrong audience (the provider's token for another resource)"] =
            provider_token(p, "m2m", "http://127.0.0.1:9/other"),
          ["wrong audience (minted)"] = mint(p, { claims = good { aud = "https://elsewhere.example/mcp" } }),
          ["alg none"] = mint(p, { none = true, claims = good() }),
          ["HS256 keyed with the public key (PEM)"] = mint(p, { hs256_with_public_key = true, claims = good() }),
          ["HS256 keyed with the public key (JWK)"] = mint(p, { hs256_with_public_key = true, hs256_secret = "jwk",
            claims = good() }),
          tampered = mint(p, { tamper = true, claims = good() }),
          ["unknown kid"] = mint(p, { kid = "nobody-knows", claims = good() }),
          garbage = "not.a.jwt",
        }
        local n = 0
        for what, token in pairs(cases) do
          assert_refused(s, token, what)
          n = n + 1
        end
        assert.are.equal(11, n)
      end)

    it("opaque tokens through introspection, and a revoked one", function()
      local token = provider_token(p, "opaque-m2m", s.url)
      assert.is_nil(token:find(".", 1, true)) -- opaque indeed
      local revoked = provider_token(p, "opaque-m2m", s.url)
      local r = provider_post(p, "/token/revocation", "opaque-m2m", { token = revoked, token_type_hint = "access_token" })
      assert.are.equal(200, r.status, r.body)
      local who = rpc_text(modern_post(s.port, token, 1, "tools/call", { name = "whoami", arguments = EMPTY }))
      -- RFC 7662: a client-credentials token has a client_id and no sub.
      assert.are.equal("opaque-m2m", who.client_id)
      assert.are.same({ "notes:read" }, who.scopes)
      assert.are.equal(s.url, who.audience)
      assert_refused(s, revoked, "revoked")
      -- An opaque token for another resource is refused too.
      assert_refused(s, provider_token(p, "opaque-m2m", "http://127.0.0.1:9/other"), "opaque, other audience")
    end)
  end)

  describe("scopes", function()
    it("403 insufficient_scope naming the scope, the tool still listed; a token with it gets through", function()
      local reader = provider_token(p, "m2m", s.url, "notes:read")
      local listed = modern_post(s.port, reader, 1, "tools/list")
      local names = {}
      for _, t in ipairs(http.rpc(listed).result.tools) do names[t.name] = true end
      assert.is_true(names.write_note)
      local call = { jsonrpc = "2.0", id = 9, method = "tools/call", params = { name = "write_note", arguments = EMPTY } }
      for _, era in ipairs { LEGACY, MODERN } do
        local r
        if era == MODERN then
          r = modern_post(s.port, reader, 9, "tools/call", { name = "write_note", arguments = EMPTY })
        else
          r = s:post(call, in_session(legacy_session(s, reader), reader))
        end
        assert.are.equal(403, r.status, r.body)
        local c = challenge(r)
        assert.are.equal("insufficient_scope", c.error)
        assert.are.equal("notes:write", c.scope)
        assert.truthy(c.resource_metadata:find("/.well-known/oauth-protected-resource/mcp", 1, true))
        assert.are.equal(9, http.rpc(r).id)
        assert.are.equal(-32003, http.rpc(r).error.code)
      end
      local writer = provider_token(p, "m2m", s.url, "notes:read notes:write")
      assert.are.equal("written by m2m", text_of(http.rpc(s:post(call, in_session(legacy_session(s, writer), writer)))))
      assert.are.equal("written by m2m", text_of(http.rpc(modern_post(s.port, writer, 9, "tools/call",
        { name = "write_note", arguments = EMPTY }))))
    end)
  end)
end)

---------------------------------------------------------------------------
-- One caller kept out of another's things
---------------------------------------------------------------------------

-- The error of a 2026-07-28 request (asserting there is one).
local function error_of(r)
  local m = http.rpc(r)
  assert.is_table(m, "no response: " .. cjson.encode(r or {}))
  assert.is_table(m.error, "not refused: " .. cjson.encode(m))
  return m.error
end

-- alice and bob with their tokens for audience; A and B are the ports to
-- ask (the same one for a single process or for --workers 2: then each
-- request on a fresh connection goes to whichever worker the kernel picks).
local function isolation_checks(p, audience, A, B, workers)
  local alice = provider_token(p, "alice", audience, "notes:read notes:write")
  local bob = provider_token(p, "bob", audience, "notes:read notes:write")
  local ports = { A, B }

  -- bob's MCP task, created on A.
  local created = http.rpc(modern_post(A, bob, 1, "tools/call", { name = "job", arguments = { ms = 4000 } }))
  assert.is_table(created and created.result, cjson.encode(created or {}))
  assert.are.equal("task", created.result.resultType)
  local id = created.result.taskId
  -- Listeners for that task on every port: alice's and bob's.
  local function listen(port, token)
    local conn = assert(http.connect(port))
    local params = { notifications = { taskIds = { id } }, _meta = http.modern_meta(TASKS) }
    conn:send_request({ method = "POST", body = { jsonrpc = "2.0", id = "l", method = "subscriptions/listen",
      params = params }, headers = http.modern_headers("subscriptions/listen", nil, bearer(token, {
        Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" })) })
    local head = conn:read_head(10000)
    assert.are.equal(200, head and head.status)
    local ack = conn:read_event(10000)
    assert.are.equal("notifications/subscriptions/acknowledged", ack.json.method)
    return { conn = conn, agreed = ack.json.params.notifications.taskIds or {} }
  end
  local listeners = { alice = {}, bob = {} }
  for _, port in ipairs(ports) do
    listeners.alice[#listeners.alice + 1] = listen(port, alice)
    listeners.bob[#listeners.bob + 1] = listen(port, bob)
  end
  -- The notifications/tasks a listener got about the task so far (up to
  -- its completion, read for at most ms).
  local function heard(l, ms)
    l.heard = l.heard or {}
    while true do
      local e = l.conn:read_event(ms)
      if not e then break end
      if e.json and e.json.method == "notifications/tasks" and e.json.params.taskId == id then
        l.heard[#l.heard + 1] = e.json.params.status
        if e.json.params.status == "completed" then break end
      end
    end
    return l.heard
  end

  -- What an id nobody made gets: alice must get exactly that for bob's.
  local unknown = error_of(modern_post(A, alice, 2, "tasks/get", { taskId = string.rep("0", 32) }))
  assert.are.equal(-32602, unknown.code, unknown.message)

  -- bob's question (requestState), asked on A.
  local asked = http.rpc(modern_post(A, bob, 3, "tools/call", { name = "greet", arguments = EMPTY }))
  assert.are.equal("input_required", asked.result.resultType, cjson.encode(asked))
  local key = next(asked.result.inputRequests)
  local answer = { name = "greet", arguments = EMPTY, requestState = asked.result.requestState,
    inputResponses = { [key] = { action = "accept", content = { name = "Ada" } } } }

  local workers_seen, rounds = {}, 0
  local function round()
    rounds = rounds + 1
    for _, port in ipairs(ports) do
      for _, m in ipairs { "tasks/get", "tasks/cancel" } do
        local e = error_of(modern_post(port, alice, 4, m, { taskId = id }))
        assert.are.same({ unknown.code, unknown.message }, { e.code, e.message }, m)
      end
      local e = error_of(modern_post(port, alice, 5, "tasks/update", { taskId = id, inputResponses = EMPTY }))
      assert.are.same({ unknown.code, unknown.message }, { e.code, e.message })
      -- bob's answer, given by alice, is refused.
      e = error_of(modern_post(port, alice, 6, "tools/call", answer))
      assert.are.equal(-32602, e.code)
      -- bob still sees his task, wherever he asks.
      local mine = http.rpc(modern_post(port, bob, 7, "tasks/get", { taskId = id }))
      assert.is_table(mine.result, cjson.encode(mine))
      assert.are_not.equal("cancelled", mine.result.status)
      workers_seen[rpc_text(modern_post(port, bob, 8, "tools/call", { name = "where", arguments = EMPTY }))] = true
    end
  end
  round()
  if workers then
    -- Until requests on fresh connections reached both workers.
    while rounds < 60 do
      local n = 0
      for _ in pairs(workers_seen) do n = n + 1 end
      if n >= 2 then break end
      round()
    end
  end
  local seen = {}
  for w in pairs(workers_seen) do seen[#seen + 1] = w end

  -- bob gets his result and his answer (on B); alice still nothing.
  local done
  assert.is_true(client.poll_until(function()
    done = http.rpc(modern_post(B, bob, 9, "tasks/get", { taskId = id })).result
    return done.status ~= "working"
  end, 60000), "bob's task never ended")
  assert.are.equal("completed", done.status)
  assert.are.equal("done for bob", done.result.content[1].text)
  local e = error_of(modern_post(B, alice, 10, "tasks/get", { taskId = id }))
  assert.are.same({ unknown.code, unknown.message }, { e.code, e.message })
  assert.are.equal("hello Ada from bob", rpc_text(modern_post(B, bob, 11, "tools/call", answer)))

  -- Streams: each of bob's listeners heard his task complete; none of
  -- alice's heard anything of it (read once bob's had heard it all).
  for _, l in ipairs(listeners.bob) do
    local statuses = heard(l, 30000)
    assert.are.equal("completed", statuses[#statuses])
  end
  for _, l in ipairs(listeners.alice) do assert.are.same({}, heard(l, 1000)) end
  local agreed = {}
  for who, ls in pairs(listeners) do
    agreed[who] = {}
    for i, l in ipairs(ls) do
      agreed[who][i] = l.agreed
      l.conn:close()
    end
  end

  -- bob's legacy session, on A: alice cannot post to it, open its stream or
  -- end it; bob still can.
  local function post(port, token, session, message)
    local conn = assert(http.connect(port))
    local r = conn:request({ method = "POST", body = message, headers = in_session(session, token,
      { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }) })
    conn:close()
    return r
  end
  local function other(port, token, session, method)
    local conn = assert(http.connect(port))
    local r = conn:request({ method = method, headers = in_session(session, token, { Accept = "text/event-stream" }),
      timeout_ms = 10000 })
    conn:close()
    return r
  end
  local session = legacy_session({ post = function(_, message, headers)
    local conn = assert(http.connect(A))
    local h = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }
    for k, v in pairs(headers or {}) do h[k] = v end
    local r = conn:request({ method = "POST", body = message, headers = h })
    conn:close()
    return r
  end }, bob)
  local ping = { jsonrpc = "2.0", id = 12, method = "ping" }
  for _ = 1, workers and 4 or 1 do
    assert.are.equal(404, post(A, alice, session, ping).status)
    assert.are.equal(404, other(A, alice, session, "GET").status)
    assert.are.equal(404, other(A, alice, session, "DELETE").status)
  end
  assert.are.equal(200, post(A, bob, session, ping).status)
  return seen, agreed, id
end

describe("isolation of callers", function()
  if missing then return end
  local keys, p
  setup(function()
    keys = new_keys()
    p = start_provider(keys)
  end)
  teardown(function()
    if p then p.proc:terminate() end
    if keys then client.remove_tree(keys) end
  end)

  it("on one process: session, task, requestState and streams", function()
    local s = start_luamcp(p)
    local ok, err, agreed, id = pcall(isolation_checks, p, s.url, s.port, s.port, false)
    stop(s)
    assert(ok, err)
    -- The listen filters said so at once: alice's dropped bob's task.
    assert.are.same({ {}, {} }, agreed.alice)
    assert.are.same({ { id }, { id } }, agreed.bob)
  end)

  it("across --workers 2", function()
    local s = start_luamcp(p, { "--workers", "2" })
    local ok, seen = pcall(isolation_checks, p, s.url, s.port, s.port, true)
    stop(s)
    assert(ok, seen)
    assert.are.equal(2, #seen, "requests reached one worker only: " .. table.concat(seen, " "))
  end)

  it("across two instances sharing Redis", function()
    local redis, why = services.redis()
    if not redis then return pending(why) end
    local audience = "http://127.0.0.1:" .. services.free_port() .. "/mcp" -- the address a proxy would have
    local a, b
    local ok, seen = pcall(function()
      a = start_luamcp(p, { "--redis", redis.url, "--node", "a", "--auth-audience", audience },
        { env = { "NODE_NAME=a", "PATH=" .. os.getenv("PATH") } })
      b = start_luamcp(p, { "--redis", redis.url, "--node", "b", "--auth-audience", audience },
        { env = { "NODE_NAME=b", "PATH=" .. os.getenv("PATH") } })
      return isolation_checks(p, audience, a.port, b.port, false)
    end)
    if a then stop(a) end
    if b then stop(b) end
    redis:stop()
    assert(ok, seen)
    table.sort(seen)
    assert.are.equal("a", seen[1]:sub(1, 1))
    assert.are.equal("b", seen[2]:sub(1, 1))
  end)
end)

---------------------------------------------------------------------------
-- Key rotation
---------------------------------------------------------------------------

describe("the provider's keys rotated mid-run", function()
  if missing then return end
  it("are followed: a token under an unknown kid makes luamcp fetch the JWK Set again", function()
    local keys, fresh = new_keys(), new_keys()
    local p = start_provider(keys)
    local s = start_luamcp(p)
    local ok, err = pcall(function()
      local before = provider_token(p, "m2m", s.url)
      local session = legacy_session(s, before)
      assert.are.equal(200, s:post({ jsonrpc = "2.0", id = 1, method = "ping" }, in_session(session, before)).status)
      local fetched = p:command({ stats = true }).hits["/jwks"]
      assert.are.equal(1, fetched)
      assert.are.same({ "rsa1-2", "ps1-2", "ec1-2", "ed1-2" }, p:command({ rotate = fresh, suffix = "-2" }).rotated)
      local after = provider_token(p, "m2m", s.url)
      assert.truthy(after ~= before)
      -- No pause: a token under an unknown kid that comes within the
      -- refetch floor of the last fetch waits for the fetch at its end.
      -- The same session goes on with the new token (the same caller).
      local r = s:post({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "whoami", arguments = EMPTY } },
        in_session(session, after))
      assert.are.equal(200, r.status, r.body)
      assert.are.equal("m2m", rpc_text(r).subject)
      assert.are.equal(2, p:command({ stats = true }).hits["/jwks"])
      -- A token under the old key that luamcp never saw is now refused.
      p.keys = keys
      assert_refused(s, mint(p, { claims = { iss = p.issuer, aud = s.url, sub = "old", exp = os.time() + 600 } }),
        "signed with a retired key")
    end)
    stop(s)
    p.proc:terminate()
    client.remove_tree(keys)
    client.remove_tree(fresh)
    assert(ok, err)
  end)
end)
