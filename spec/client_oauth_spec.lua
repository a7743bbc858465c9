-- luamcp call as an OAuth client (issue #33, item 5), against a real
-- authorization server: oidc-provider (spec/helpers/oidc_provider.mjs) on a
-- run-time port, and the real luamcp binary as the protected MCP server
-- (--auth-issuer, as spec/auth_spec.lua runs it). luamcp call starts with
-- no token, takes the server's 401, finds the authorization server through
-- the Protected Resource Metadata and gets a token by client credentials:
--   * client_secret_basic: the tools listed, a tool called as that client;
--   * a 403 insufficient_scope: a token with more scope, the call again;
--   * private_key_jwt with an ES256 and an RS256 key (made by Node here);
--   * a wrong secret: the authorization server's error shown, exit 1, and
--     neither the secret nor any token printed;
--   * where the credentials may go: authorization server metadata without
--     its issuer is refused; --issuer pins the authorization server, and
--     without it stderr names the one a secret goes to; OAuth options over
--     plain http to a non-loopback host are a usage error, --bearer-env
--     there a warning;
--   * no credentials: the 401 reported with a hint naming the flags;
--   * flags that do not go together: a usage error (exit 2).
local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local uv = require "luv"
local cjson = http.json

local NODE = node.NODE
local LUAMCP = os.getenv("LUAMCP") or "build/luamcp"
local FIXTURE = "spec/fixtures/auth_e2e"

local missing
if not uv.fs_access(NODE, "X") then missing = "Node 22 is not installed in spec/node_modules (npm ci)" end

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- A key pair for private_key_jwt: the private key as PEM in dir/NAME.pem,
-- the public one as a JWK (returned) for the provider's client metadata.
local KEYGEN = [[
const c = require("crypto"), fs = require("fs");
const [kind, file] = process.argv.slice(1);
const { privateKey, publicKey } = kind === "ec"
  ? c.generateKeyPairSync("ec", { namedCurve: "P-256" })
  : c.generateKeyPairSync("rsa", { modulusLength: 2048 });
fs.writeFileSync(file, privateKey.export({ type: "pkcs8", format: "pem" }));
process.stdout.write(JSON.stringify(publicKey.export({ format: "jwk" })));
]]
local function key_pair(kind, file)
  local code, out, err = client.sh(NODE .. " -e " .. quote(KEYGEN) .. " " .. kind .. " " .. quote(file))
  assert(code == 0, err)
  return cjson.decode(out)
end

-- luamcp call ARGS with env (a table NAME = value): exit code, stdout, stderr.
local function call(args, env)
  local parts = {}
  for name, value in pairs(env or {}) do parts[#parts + 1] = name .. "=" .. quote(value) end
  parts[#parts + 1] = LUAMCP
  parts[#parts + 1] = "call"
  for _, a in ipairs(args) do parts[#parts + 1] = quote(a) end
  local code, out, err = client.sh(table.concat(parts, " ") .. " </dev/null")
  -- The ASan build's reports (LUAMCP=build/luamcp-asan) fail every case.
  assert(not err:find("Sanitizer", 1, true) and not err:find("runtime error:", 1, true), err)
  return code, out, err
end

-- Nothing secret in what luamcp printed: not the secret, no JWT (the
-- provider's access tokens and our client assertions are JWTs).
local function assert_no_secrets(text, secret)
  if secret then assert.is_nil(text:find(secret, 1, true), text) end
  assert.is_nil(text:find("eyJ[%w_-]+%.eyJ"), text)
end

describe("luamcp call as an OAuth client (oidc-provider)", function()
  if missing then
    pending(missing)
    return
  end
  local dir, keys, p, s
  setup(function()
    dir = client.temp_dir()
    local code, _, err = client.sh(NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(dir))
    assert(code == 0, err)
    keys = dir
    local ec = key_pair("ec", dir .. "/ec.pem")
    local rsa = key_pair("rsa", dir .. "/rsa.pem")
    local clients = {}
    for id, jwk in pairs { ["jwt-es256"] = ec, ["jwt-rs256"] = rsa } do
      clients[#clients + 1] = { client_id = id, grant_types = { "client_credentials" }, response_types = {},
        redirect_uris = {}, token_endpoint_auth_method = "private_key_jwt", jwks = { keys = { jwk } } }
    end
    local config = { keys = keys, any_resource = { scope = "notes:read notes:write" }, clients = clients }
    local proc = client.spawn({ "spec/helpers/oidc_provider.mjs", cjson.encode(config) }, { bin = NODE })
    local line = proc:read_line(60000)
    assert(line, "oidc-provider did not start:\n" .. proc.stderr)
    p = cjson.decode(line)
    p.proc = proc
    -- The requests the provider served, per path.
    function p.stats()
      proc:send(cjson.encode { stats = true })
      local answer = proc:read_line(10000)
      assert(answer, "oidc-provider did not answer:\n" .. proc.stderr)
      return cjson.decode(answer).hits
    end
    s = http.start { "--auth-issuer", p.issuer, "--auth-scopes", "notes:read", FIXTURE }
  end)
  teardown(function()
    if s then s:stop_cleanly() end
    if p then p.proc:terminate() end
    if dir then client.remove_tree(dir) end
  end)

  it("client_secret_basic: a token found through the 401, the tools listed", function()
    local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET" },
      { SECRET = "m2m-secret" })
    assert.are.equal(0, code, err)
    assert.truthy(out:find("whoami", 1, true), out)
    assert.truthy(out:find("write_note", 1, true), out)
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  it("calls a tool as the client, with the scope the 401 asked for", function()
    local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET", "--raw",
      "whoami" }, { SECRET = "m2m-secret" })
    assert.are.equal(0, code, err)
    local me = cjson.decode(out).structuredContent
    assert.are.equal("m2m", me.subject)
    assert.are.equal(s.url, me.audience)
    assert.are.same({ "notes:read" }, me.scopes)
  end)

  it("a tool's mcp.client.connect{url, oauth} gets a token by client credentials (issue #47)", function()
    local script = dir .. "/via_cc.lua"
    client.write_file(script, ([[
local mcp = require "mcp"
mcp.server { name = "via", version = "1.0.0" }
local notes = mcp.client.connect { url = %q, name = "notes",
  oauth = { client_id = "m2m", client_secret_env = "M2M_SECRET", scope = "notes:read" } }
mcp.tool { name = "whoami_there", handler = function()
  local r, err = notes:call("whoami", {})
  if not r then error(err, 0) end
  return r.structuredContent
end }
]]):format(s.url))
    local code, out, err = call({ script, "whoami_there", "--raw" }, { M2M_SECRET = "m2m-secret" })
    assert.are.equal(0, code, err)
    local me = cjson.decode(out).structuredContent
    assert.are.equal("m2m", me.subject)
    assert.are.equal(s.url, me.audience)
    assert_no_secrets(out .. err, "m2m-secret")
    -- Without the secret in the environment: a usage error when the script loads.
    code, out, err = call({ script, "whoami_there" }, {})
    assert.are_not.equal(0, code)
    assert.truthy(err:find("oauth.client_secret_env: the variable M2M_SECRET is not set", 1, true), err)
  end)

  it("a 403 insufficient_scope: a token with the scope added, the call again", function()
    local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET",
      "write_note" }, { SECRET = "m2m-secret" })
    assert.are.equal(0, code, err)
    assert.truthy(out:find("written by m2m", 1, true), out)
  end)

  it("--scope asks for exactly that scope", function()
    local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET",
      "--scope", "notes:read notes:write", "--raw", "whoami" }, { SECRET = "m2m-secret" })
    assert.are.equal(0, code, err)
    local scopes = cjson.decode(out).structuredContent.scopes
    table.sort(scopes)
    assert.are.same({ "notes:read", "notes:write" }, scopes)
  end)

  for _, case in ipairs { { "ES256", "jwt-es256", "ec.pem" }, { "RS256", "jwt-rs256", "rsa.pem" } } do
    it("private_key_jwt signed " .. case[1], function()
      local code, out, err = call({ "--http", s.url, "--client-id", case[2], "--client-key", dir .. "/" .. case[3],
        "--client-key-alg", case[1], "--raw", "whoami" })
      assert.are.equal(0, code, err)
      assert.are.equal(case[2], cjson.decode(out).structuredContent.subject)
      assert_no_secrets(out .. err)
    end)
  end

  it("a key of the wrong kind for the algorithm is a clear error", function()
    local code, _, err = call({ "--http", s.url, "--client-id", "jwt-es256", "--client-key", dir .. "/rsa.pem",
      "--client-key-alg", "ES256" })
    assert.are.equal(1, code)
    assert.truthy(err:find("ES256 needs an EC P-256 private key", 1, true), err)
  end)

  it("a wrong secret: the authorization server's error, no secret or token printed", function()
    local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET" },
      { SECRET = "not-the-secret" })
    assert.are.equal(1, code)
    assert.truthy(err:find("authorization failed", 1, true), err)
    assert.truthy(err:find(p.issuer .. "/token", 1, true), err)
    assert.truthy(err:find("HTTP 401 invalid_client", 1, true), err)
    assert_no_secrets(out .. err, "not-the-secret")
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  -- A hostile or broken MCP server (Node, below): its 401 leads to a PRM
  -- for another resource (/mismatch/mcp), or it refuses every token the
  -- provider gives for it (/refuses/mcp).
  local FAKE = [[
const http = require("http"), issuer = process.argv[1];
const server = http.createServer((req, res) => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const which = ["mismatch", "noissuer", "userinfo"].find((w) => req.url.includes(w)) || "refuses";
  if (req.method === "GET" && req.url.startsWith("/.well-known/oauth-protected-resource/")) {
    res.setHeader("Content-Type", "application/json");
    const as = which === "noissuer" ? `${base}/as` : which === "userinfo" ? `${base}/ui` : issuer;
    return res.end(JSON.stringify({ authorization_servers: [as],
      resource: which === "mismatch" ? "https://evil.example.com/mcp" : `${base}/${which}/mcp` }));
  }
  if (req.method === "GET" && req.url === "/.well-known/oauth-authorization-server/as") {
    // Metadata without an issuer, whose token endpoint is this server.
    res.setHeader("Content-Type", "application/json");
    return res.end(JSON.stringify({ token_endpoint: `${base}/token` }));
  }
  if (req.method === "GET" && req.url === "/.well-known/oauth-authorization-server/ui") {
    // A token endpoint whose "127.0.0.1:1@" is a user and password: the
    // host is 0.0.0.0 (this machine, but not a loopback name).
    res.setHeader("Content-Type", "application/json");
    return res.end(JSON.stringify({ issuer: `${base}/ui`,
      token_endpoint: `http://127.0.0.1:1@0.0.0.0:${server.address().port}/token` }));
  }
  process.stdout.write(JSON.stringify({ path: req.url, bearer: !!req.headers.authorization }) + "\n");
  res.statusCode = 401;
  res.setHeader("WWW-Authenticate", `Bearer error="invalid_token", resource_metadata="${base}/.well-known/oauth-protected-resource/${which}/mcp"`);
  res.end();
});
server.listen(0, "127.0.0.1", () => process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n"));
process.stdin.on("end", () => process.exit(0)).resume();
]]
  local function start_fake()
    local proc = client.spawn({ "-e", FAKE, p.issuer }, { bin = NODE })
    local line = proc:read_line(30000)
    assert(line, "the fake server did not start:\n" .. proc.stderr)
    return proc, ("http://127.0.0.1:%d"):format(cjson.decode(line).port)
  end

  it("a Protected Resource Metadata for another resource: no credentials sent anywhere", function()
    local fake, base = start_fake()
    local before = p.stats()["/token"] or 0
    local code, out, err = call({ "--http", base .. "/mismatch/mcp", "--client-id", "m2m", "--client-secret-env",
      "SECRET" }, { SECRET = "m2m-secret" })
    fake:terminate()
    assert.are.equal(1, code)
    assert.truthy(err:find("is for https://evil.example.com/mcp, not " .. base .. "/mismatch/mcp: not sending credentials",
      1, true), err)
    assert.are.equal(before, p.stats()["/token"] or 0)
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  it("authorization server metadata with no issuer: refused, the secret not sent to its token endpoint", function()
    local fake, base = start_fake()
    local code, out, err = call({ "--http", base .. "/noissuer/mcp", "--client-id", "m2m", "--client-secret-env",
      "SECRET" }, { SECRET = "m2m-secret" })
    -- What reached the fake besides the metadata (its lines wait in the pipe).
    local seen = {}
    for i = 1, 3 do
      local line = fake:read_line(i == 1 and 10000 or 500)
      if line then seen[#seen + 1] = cjson.decode(line).path end
    end
    fake:terminate()
    assert.are.equal(1, code)
    assert.truthy(err:find(base .. "/.well-known/oauth-authorization-server/as names no issuer", 1, true), err)
    assert.truthy(err:find(base .. "/as", 1, true), err)
    assert.are.same({ "/noissuer/mcp" }, seen)
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  it("a token endpoint whose host hides behind a user and password: refused, the secret sent nowhere", function()
    local fake, base = start_fake()
    local code, out, err = call({ "--http", base .. "/userinfo/mcp", "--client-id", "m2m", "--client-secret-env",
      "SECRET" }, { SECRET = "m2m-secret" })
    local seen = {}
    for i = 1, 3 do
      local line = fake:read_line(i == 1 and 10000 or 500)
      if line then seen[#seen + 1] = cjson.decode(line).path end
    end
    fake:terminate()
    assert.are.equal(1, code)
    local port = base:match(":(%d+)$")
    assert.truthy(err:find("not sending credentials to http://127.0.0.1:1@0.0.0.0:" .. port .. "/token: it has a user"
      .. " name or password before its host", 1, true), err)
    assert.are.same({ "/userinfo/mcp" }, seen)
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  it("without --issuer, stderr names the authorization server the secret goes to (not the secret)", function()
    local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET", "--raw",
      "whoami" }, { SECRET = "m2m-secret" })
    assert.are.equal(0, code, err)
    assert.truthy(err:find("sending the client credentials to the authorization server " .. p.issuer, 1, true), err)
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  it("--issuer: the named authorization server is used, silently; another is refused before anything is sent",
    function()
      local code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET",
        "--issuer", p.issuer, "--raw", "whoami" }, { SECRET = "m2m-secret" })
      assert.are.equal(0, code, err)
      assert.are.equal("m2m", cjson.decode(out).structuredContent.subject)
      assert.is_nil(err:find("sending the client credentials", 1, true), err)

      local before = p.stats()["/token"] or 0
      code, out, err = call({ "--http", s.url, "--client-id", "m2m", "--client-secret-env", "SECRET",
        "--issuer", "https://as.example.com" }, { SECRET = "m2m-secret" })
      assert.are.equal(1, code)
      assert.truthy(err:find("names the authorization server " .. p.issuer .. ", not --issuer https://as.example.com",
        1, true), err)
      assert.are.equal(before, p.stats()["/token"] or 0)
      assert_no_secrets(out .. err, "m2m-secret")
    end)

  it("plain http to a host that is not loopback: OAuth options refused, --bearer-env warned about", function()
    -- 0.0.0.0 reaches this machine but is not a loopback name.
    local remote = s.url:gsub("127%.0%.0%.1", "0.0.0.0")
    assert.are_not.equal(s.url, remote)
    local before = p.stats()["/token"] or 0
    local code, out, err = call({ "--http", remote, "--client-id", "m2m", "--client-secret-env", "SECRET" },
      { SECRET = "m2m-secret" })
    assert.are.equal(2, code, err)
    assert.truthy(err:find("need an https URL or a loopback host, not " .. remote, 1, true), err)
    assert.are.equal(before, p.stats()["/token"] or 0)
    assert_no_secrets(out .. err, "m2m-secret")
    -- "127.0.0.1:1@" is a user and password: the host is still 0.0.0.0.
    local hidden = s.url:gsub("127%.0%.0%.1", "127.0.0.1:1@0.0.0.0")
    code, out, err = call({ "--http", hidden, "--client-id", "m2m", "--client-secret-env", "SECRET" },
      { SECRET = "m2m-secret" })
    assert.are.equal(2, code, err)
    assert.truthy(err:find("need an https URL or a loopback host, not " .. hidden, 1, true), err)
    assert.truthy(err:find("it has a user name or password before its host", 1, true), err)
    assert.are.equal(before, p.stats()["/token"] or 0)
    assert_no_secrets(out .. err, "m2m-secret")

    code, out, err = call({ "--http", remote, "--bearer-env", "TOKEN" }, { TOKEN = "not-a-token" })
    assert.are.equal(1, code, err)
    assert.truthy(err:find("warning: --bearer-env sends the token in the clear to " .. remote, 1, true), err)
    -- Sent all the same (the server answers: its Host check refuses 0.0.0.0).
    assert.truthy(err:find("answered HTTP", 1, true), err)
    assert.is_nil((out .. err):find("not-a-token", 1, true))
    -- Loopback: no warning.
    code, out, err = call({ "--http", s.url, "--bearer-env", "TOKEN" }, { TOKEN = "not-a-token" })
    assert.are.equal(1, code, err)
    assert.is_nil(err:find("warning", 1, true), err)
  end)

  it("a server that refuses the fresh token: one retry, then a clear failure", function()
    local fake, base = start_fake()
    local code, out, err = call({ "--http", base .. "/refuses/mcp", "--client-id", "m2m", "--client-secret-env",
      "SECRET" }, { SECRET = "m2m-secret" })
    -- Every request reached the fake before luamcp exited: its lines wait
    -- in the pipe.
    local seen = {}
    for i = 1, 3 do
      local line = fake:read_line(i <= 2 and 10000 or 200)
      if line then seen[#seen + 1] = cjson.decode(line) end
    end
    fake:terminate()
    assert.are.equal(1, code)
    assert.truthy(err:find("refused the access token the authorization server just issued", 1, true), err)
    assert.are.equal(2, #seen, cjson.encode(seen))
    assert.is_false(seen[1].bearer)
    assert.is_true(seen[2].bearer)
    assert_no_secrets(out .. err, "m2m-secret")
  end)

  it("no credentials: the 401 reported with the flags that give them", function()
    local code, out, err = call({ "--http", s.url })
    assert.are.equal(1, code)
    assert.truthy(err:find("401", 1, true), err)
    assert.truthy(err:find("resource_metadata=", 1, true), err)
    assert.truthy(err:find("--client-id", 1, true), err)
    assert.truthy(err:find("--bearer-env", 1, true), err)
    assert.are.equal("", out)
  end)

  it("flags that do not go together are usage errors", function()
    local cases = {
      { { "--client-secret-env", "SECRET" }, "need --client-id" },
      { { "--client-id", "m2m" }, "--client-id needs --client-secret-env VAR or --client-key" },
      { { "--client-id", "m2m", "--client-secret-env", "UNSET_FOR_THIS_SPEC" }, "is not set" },
      { { "--client-id", "m2m", "--client-key", dir .. "/ec.pem", "--client-key-alg", "HS256" }, "ES256 or RS256" },
      { { "--client-id", "m2m", "--client-key", dir .. "/missing.pem" }, "--client-key:" },
      { { "--assertion-env", "UNSET_FOR_THIS_SPEC" }, "--assertion-env UNSET_FOR_THIS_SPEC: the variable" },
      { { "--client-id", "m2m", "--client-secret-env", "SECRET", "--id-token-env", "SECRET" },
        "--id-token-env and --idp-issuer go together", { SECRET = "m2m-secret" } },
      { { "--client-id", "m2m", "--client-secret-env", "SECRET", "--bearer-env", "SECRET" }, "not both",
        { SECRET = "m2m-secret" } },
      { { "--client-id", "m2m", "--client-secret-env", "SECRET", "--issuer", "http://as.example.com" },
        "--issuer http://as.example.com: an authorization server is https", { SECRET = "m2m-secret" } },
      { { "--client-id", "m2m", "--client-secret-env", "SECRET", "--issuer", "http://127.0.0.1:1@as.example.invalid" },
        "--issuer http://127.0.0.1:1@as.example.invalid: an authorization server is https", { SECRET = "m2m-secret" } },
    }
    for _, case in ipairs(cases) do
      local args = { "--http", s.url }
      for _, a in ipairs(case[1]) do args[#args + 1] = a end
      local code, _, err = call(args, case[3])
      assert.are.equal(2, code, err)
      assert.truthy(err:find(case[2], 1, true), err)
    end
  end)
end)

describe("mcp.client_auth's pure pieces", function()
  it("passes spec/inprocess/client_auth_test.lua under luamcp test", function()
    local code, out, err = client.sh(LUAMCP .. " test -o TAP --pattern=_test spec/inprocess/client_auth_test.lua </dev/null")
    assert.are.equal(0, code, out .. err)
    local passed = 0
    for line in out:gmatch("[^\n]+") do
      if line:match("^ok ") then passed = passed + 1 end
      assert.is_nil(line:match("^not ok .*"), line)
    end
    assert.are.equal(8, passed, out)
  end)
end)
