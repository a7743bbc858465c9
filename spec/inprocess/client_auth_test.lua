-- mcp.client_auth's pure pieces (luamcp call as an OAuth client, issue
-- #33): the challenge parser, the discovery URLs with the MCP spec's path
-- insertion, the resource check, the choice of client authentication. Run
-- by `luamcp test --pattern=_test spec/inprocess` (spec/run-all.sh) and by
-- spec/client_oauth_spec.lua; the flow itself is tested there against
-- oidc-provider.
local auth = require "mcp.client_auth"

describe("mcp.client_auth", function()
  it("parses a Bearer challenge, quoted and bare, with commas and escapes", function()
    local c = auth.parse_challenge('Bearer resource_metadata="http://h/.well-known/oauth-protected-resource/mcp", '
      .. 'scope="a b", error="insufficient_scope", error_description="needs \\"b\\", really"')
    assert.are.equal("http://h/.well-known/oauth-protected-resource/mcp", c.resource_metadata)
    assert.are.equal("a b", c.scope)
    assert.are.equal("insufficient_scope", c.error)
    assert.are.equal('needs "b", really', c.error_description)
    assert.are.same({ error = "invalid_token", realm = "x" }, auth.parse_challenge("bearer realm=x,error=invalid_token"))
    assert.are.same({}, auth.parse_challenge(nil))
    assert.are.same({}, auth.parse_challenge('Basic realm="x"'))
  end)

  it("parses a DPoP challenge as a Bearer one (RFC 9449 7.1)", function()
    assert.are.same({ error = "use_dpop_nonce", resource_metadata = "http://h/prm" },
      auth.parse_challenge('DPoP error="use_dpop_nonce", resource_metadata="http://h/prm"'))
    assert.are.same({ algs = "ES256" }, auth.parse_challenge('dpop algs="ES256"'))
  end)

  it("reads an authorization response's query (the redirect back to luamcp)", function()
    local login = require "mcp.client_login"
    assert.are.same({ code = "a b/c", state = "s", iss = "http://as:1" },
      login.parse_query("code=a+b%2Fc&state=s&iss=http%3A%2F%2Fas%3A1"))
    assert.are.same({ error = "access_denied", flag = "" }, login.parse_query("error=access_denied&flag"))
    assert.are.same({}, login.parse_query(""))
  end)

  it("finds Protected Resource Metadata at the path-aware URL, then the root", function()
    assert.are.same({ "https://h:8/.well-known/oauth-protected-resource/a/mcp",
      "https://h:8/.well-known/oauth-protected-resource" }, auth.resource_metadata_urls("https://H:8/a/mcp?x=1"))
    assert.are.same({ "http://h/.well-known/oauth-protected-resource" }, auth.resource_metadata_urls("http://h/"))
  end)

  it("inserts the issuer's path after the well-known prefix (MCP 2025-11-25)", function()
    assert.are.same({ "https://as/.well-known/oauth-authorization-server",
      "https://as/.well-known/openid-configuration" }, auth.server_metadata_urls("https://as"))
    assert.are.same({ "https://as/.well-known/oauth-authorization-server/tenant1",
      "https://as/.well-known/openid-configuration/tenant1",
      "https://as/tenant1/.well-known/openid-configuration" }, auth.server_metadata_urls("https://as/tenant1/"))
  end)

  it("takes a resource for the server only with the same origin and a covering path", function()
    assert.is_true(auth.resource_allowed("http://h:1/mcp", "http://h:1/mcp"))
    assert.is_true(auth.resource_allowed("http://h:1/mcp", "http://h:1/"))
    assert.is_true(auth.resource_allowed("http://h:1/api/mcp", "http://h:1/api"))
    assert.is_false(auth.resource_allowed("http://h:1/mcp", "https://evil.example.com/mcp"))
    assert.is_false(auth.resource_allowed("http://h:1/mcp", "http://h:2/mcp"))
    assert.is_false(auth.resource_allowed("http://h:1/mcpx", "http://h:1/mcp"))
    assert.are.equal("https://h/mcp", auth.canonical_url("HTTPS://H/mcp/#frag"))
  end)

  it("sends credentials only over https, or plain http to a loopback host", function()
    for _, url in ipairs { "https://as.example.com/token", "http://127.0.0.1:9/token", "http://localhost/t",
      "http://[::1]:8/token" } do
      assert.is_true(auth.credentials_allowed(url), url)
    end
    for _, url in ipairs { "http://as.example.com/token", "http://127.0.0.1.evil.example/t", "ftp://x/t", "token" } do
      assert.is_false(auth.credentials_allowed(url), url)
    end
    -- The host is the one libcurl connects to: "127.0.0.1:1@" is a user and
    -- a password, and any user or password is refused (it hides the host).
    for _, url in ipairs { "http://127.0.0.1:1@as.example.com/token", "http://localhost@as.example.com/t",
      "https://user:pw@as.example.com/token", "http://127.0.0.1@127.0.0.1/t" } do
      local allowed, why = auth.credentials_allowed(url)
      assert.is_false(allowed, url)
      assert.truthy(why:find("user name or password", 1, true), why)
    end
    assert.is_true(auth.credentials_allowed("http://127.0.0.2:8/token"))
  end)

  it("authenticates the way the authorization server takes", function()
    local secret, key = { client_secret = "s" }, { key_pem = "PEM" }
    assert.are.equal("client_secret_basic", auth.auth_method(secret, {}))
    assert.are.equal("client_secret_basic", auth.auth_method(secret,
      { token_endpoint_auth_methods_supported = { "client_secret_post", "client_secret_basic" } }))
    assert.are.equal("client_secret_post", auth.auth_method(secret,
      { token_endpoint_auth_methods_supported = { "client_secret_post" } }))
    local none, why = auth.auth_method(secret, { token_endpoint_auth_methods_supported = { "private_key_jwt" } })
    assert.is_nil(none)
    assert.truthy(why:find("--client-key", 1, true))
    assert.are.equal("private_key_jwt", auth.auth_method(key, {}))
    none, why = auth.auth_method(key, { token_endpoint_auth_methods_supported = { "client_secret_basic" } })
    assert.is_nil(none)
    assert.truthy(why:find("does not take private_key_jwt", 1, true))
    -- The JWT bearer grant with no client secret: the assertion is the proof.
    assert.are.equal("none", auth.auth_method({ assertion = "a.b.c" }, {}))
    assert.are.equal("none", auth.auth_method({ idp = { issuer = "https://idp" } }, {}))
    assert.are.equal("client_secret_basic", auth.auth_method({ assertion = "a.b.c", client_secret = "s" }, {}))
  end)
end)
