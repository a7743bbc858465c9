-- luamcp login (issue #47): a person logs in to an MCP server protected by
-- a real authorization server, oidc-provider (spec/helpers/oidc_provider.mjs
-- with pages: its own sign-in and consent forms), in Debian's Chromium
-- driven by puppeteer-core (spec/clients/login_browser.mjs, which luamcp
-- login starts as $BROWSER). The protected server is the real luamcp
-- binary (--auth-issuer, as spec/client_oauth_spec.lua runs it).
--   * luamcp login opens the page, says what it waits for, the person signs
--     in and allows; the token is kept in $XDG_CONFIG_HOME/luamcp, 0600,
--     never printed;
--   * luamcp call (no terminal, no flag) then calls a tool with it;
--   * login --status lists it without the token or refresh token;
--   * once it expires, the refresh token gets another (the tool still sees
--     the person);
--   * a tool's mcp.client.connect{url} reaches the protected server with
--     the kept token;
--   * logout forgets it: call then reports the 401 and names luamcp login.
local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local uv = require "luv"
local cjson = http.json

local NODE = node.NODE
local LUAMCP = os.getenv("LUAMCP") or "build/luamcp"
local FIXTURE = "spec/fixtures/auth_e2e"

local function chromium()
  for _, p in ipairs { os.getenv("CHROMIUM") or "", "/usr/bin/chromium", "/usr/bin/chromium-browser" } do
    if p ~= "" and uv.fs_access(p, "X") then return p end
  end
end

local missing
if not uv.fs_access(NODE, "X") then missing = "Node 22 is not installed in spec/node_modules (npm ci)"
elseif not chromium() then missing = "no chromium (Debian's chromium: runtime/tools/deps.sh test installs it)" end

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

describe("luamcp login (oidc-provider's pages in Chromium)", function()
  if missing then
    pending(missing)
    return
  end
  local dir, p, s, env, browser_out

  -- luamcp COMMAND ARGS with the spec's config folder and browser, no
  -- terminal: exit code, stdout, stderr.
  local function luamcp(args)
    local parts = {}
    for name, value in pairs(env) do parts[#parts + 1] = name .. "=" .. quote(value) end
    parts[#parts + 1] = LUAMCP
    for _, a in ipairs(args) do parts[#parts + 1] = quote(a) end
    local code, out, err = client.sh(table.concat(parts, " ") .. " </dev/null")
    assert(not err:find("Sanitizer", 1, true) and not err:find("runtime error:", 1, true), err)
    return code, out, err
  end
  -- The same on a terminal (script(1) gives it one): what it printed there.
  local function on_terminal(args)
    local parts = {}
    for name, value in pairs(env) do parts[#parts + 1] = name .. "=" .. quote(value) end
    parts[#parts + 1] = LUAMCP
    for _, a in ipairs(args) do parts[#parts + 1] = quote(a) end
    local code, out, err = client.sh("script -qec " .. quote(table.concat(parts, " ")) .. " /dev/null </dev/null")
    return code, out .. err
  end
  -- What the browser saw in its last run (luamcp runs it in the background).
  local function browser_runs()
    local runs = {}
    for line in (uv.fs_stat(browser_out) and client.read_file(browser_out) or ""):gmatch("[^\n]+") do
      runs[#runs + 1] = cjson.decode(line)
    end
    return runs
  end
  local function kept()
    local text = client.read_file(dir .. "/config/luamcp/tokens.json")
    return text and cjson.decode(text)
  end
  local function entry()
    local doc = kept()
    return doc and doc.servers[s.url]
  end
  local function assert_no_secrets(text)
    assert.is_nil(text:find("eyJ[%w_-]+%.eyJ"), text)
    local e = entry()
    if e and e.refresh_token then assert.is_nil(text:find(e.refresh_token, 1, true), text) end
  end

  setup(function()
    dir = client.temp_dir()
    local code, _, err = client.sh(NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(dir))
    assert(code == 0, err)
    -- Access tokens that run out in 3 s: the refresh is seen within the spec.
    -- "desk": a confidential client registered beforehand (a native one:
    -- any loopback port), which may also use client credentials.
    local desk = { client_id = "desk", client_secret = "desk-secret", application_type = "native",
      token_endpoint_auth_method = "client_secret_basic", response_types = { "code" },
      grant_types = { "authorization_code", "refresh_token", "client_credentials" },
      redirect_uris = { "http://127.0.0.1/callback" } }
    local config = { keys = dir, ttl = 3, any_resource = { scope = "notes:read notes:write", ttl = 3 }, pages = true,
      clients = { desk } }
    local proc = client.spawn({ "spec/helpers/oidc_provider.mjs", cjson.encode(config) }, { bin = NODE })
    local line = proc:read_line(60000)
    assert(line, "oidc-provider did not start:\n" .. proc.stderr)
    p = cjson.decode(line)
    p.proc = proc
    s = http.start { "--auth-issuer", p.issuer, "--auth-scopes", "notes:read", FIXTURE }
    browser_out = dir .. "/browser.jsonl"
    env = { XDG_CONFIG_HOME = dir .. "/config",
      BROWSER = table.concat({ NODE, "spec/clients/login_browser.mjs", chromium(), browser_out, "%s" }, " ") }
  end)
  teardown(function()
    if s then s:stop_cleanly() end
    if p then p.proc:terminate() end
    if dir then client.remove_tree(dir) end
  end)

  it("opens the authorization page; the person signs in and allows; the token is kept 0600", function()
    local code, out, err = luamcp { "login", s.url }
    -- The browser runs in the background; it says what it saw once closed.
    client.poll_until(function() return uv.fs_stat(browser_out) ~= nil end, 60000, 100)
    local seen = uv.fs_stat(browser_out) and client.read_file(browser_out) or ""
    assert.are.equal(0, code, err .. "\nbrowser: " .. seen)
    assert.truthy(err:find("waiting for the browser to come back to http://127.0.0.1:", 1, true), err)
    assert.truthy(err:find(p.issuer .. "/auth?", 1, true), err) -- the address, for a machine with no browser
    local browser = cjson.decode(seen:match("[^\n]+"))
    assert.is_nil(browser.error, browser.error)
    assert.are.same({ "Sign in", "Allow access?" }, browser.steps)
    assert.truthy(browser.asked:find("notes:read", 1, true), browser.asked)
    assert.truthy(browser.final:match("^http://127%.0%.0%.1:%d+/callback$"), browser.final)
    -- The listener was there for the login only.
    local refused = client.sh("curl -s -o /dev/null " .. quote(browser.final))
    assert.are.equal(7, refused, "something still listens at " .. browser.final)
    local e = entry()
    assert.truthy(e, "nothing kept for " .. s.url)
    assert.are.equal(p.issuer, e.issuer)
    assert.truthy(e.refresh_token, "no refresh token: offline_access was not asked for")
    local st = uv.fs_stat(dir .. "/config/luamcp/tokens.json")
    assert.are.equal(tonumber("600", 8), st.mode & tonumber("777", 8))
    assert_no_secrets(out .. err)
  end)

  it("luamcp call uses the kept token without a terminal or a flag", function()
    local code, out, err = luamcp { "call", "--http", s.url, "whoami", "--raw" }
    assert.are.equal(0, code, err)
    local r = cjson.decode(out)
    assert.are.equal("alice", r.structuredContent.subject)
    assert_no_secrets(out .. err)
  end)

  it("login --status lists the login without its secrets", function()
    local code, out, err = luamcp { "login", "--status" }
    assert.are.equal(0, code, err)
    assert.truthy(out:find(s.url, 1, true), out)
    assert.truthy(out:find("authorization server " .. p.issuer, 1, true), out)
    assert.truthy(out:find("refreshable", 1, true), out)
    assert_no_secrets(out .. err)
  end)

  it("refreshes the token once it expired", function()
    local before = entry()
    assert.truthy(client.poll_until(function() return os.time() > before.expires_at end, 30000, 200),
      ("expires_at %s, now %d"):format(tostring(before.expires_at), os.time()))
    local code, out, err = luamcp { "call", "--http", s.url, "whoami", "--raw" }
    assert.are.equal(0, code, err)
    assert.are.equal("alice", cjson.decode(out).structuredContent.subject)
    local after = entry()
    assert.are_not.equal(before.access_token, after.access_token)
    assert.truthy(after.expires_at > before.expires_at)
    assert_no_secrets(out .. err)
  end)

  it("a tool's mcp.client reaches the protected server with the kept token", function()
    local script = dir .. "/via.lua"
    client.write_file(script, ([[
local mcp = require "mcp"
mcp.server { name = "via", version = "1.0.0" }
local notes = mcp.client.connect { url = %q, name = "notes" }
mcp.tool { name = "whoami_there", handler = function()
  local r, err = notes:call("whoami", {})
  if not r then error(err, 0) end
  return r.structuredContent
end }
]]):format(s.url))
    local code, out, err = luamcp { "call", script, "whoami_there", "--raw" }
    assert.are.equal(0, code, err)
    local r = cjson.decode(out)
    assert.are.equal("alice", r.structuredContent.subject, out)
    assert_no_secrets(out .. err)
  end)

  it("logout forgets it: call then reports the 401 and names luamcp login", function()
    local code, out, err = luamcp { "logout", s.url }
    assert.are.equal(0, code, err)
    assert.truthy(err:find("forgot the login for " .. s.url, 1, true), err)
    assert.is_nil(entry())
    code, out, err = luamcp { "login", "--status" }
    assert.truthy(out:find("no logins kept", 1, true), out)
    code, out, err = luamcp { "call", "--http", s.url, "whoami" }
    assert.are.equal(1, code, out)
    assert.truthy(err:find("401", 1, true), err)
    assert.truthy(err:find("luamcp login", 1, true), err)
  end)

  it("login with a client registered beforehand (and its secret) logs the person in, not the client", function()
    env.DESK_SECRET = "desk-secret"
    local code, out, err = luamcp { "login", s.url, "--client-id", "desk", "--client-secret-env", "DESK_SECRET" }
    env.DESK_SECRET = nil
    assert.are.equal(0, code, err)
    assert.are.equal("desk", entry().client.client_id)
    assert.is_nil(client.read_file(dir .. "/config/luamcp/tokens.json"):find("desk-secret", 1, true))
    code, out, err = luamcp { "call", "--http", s.url, "whoami", "--raw" }
    assert.are.equal(0, code, err)
    local me = cjson.decode(out).structuredContent
    assert.are.equal("alice", me.subject)
    assert.are.equal("desk", me.client_id)
    assert_no_secrets(out .. err)
    -- Once it ran out, the refresh authenticates with the secret given again.
    local before = entry()
    assert.truthy(client.poll_until(function() return os.time() > before.expires_at end, 30000, 200))
    env.DESK_SECRET = "desk-secret"
    code, out, err = luamcp { "call", "--http", s.url, "whoami", "--raw", "--client-id", "desk",
      "--client-secret-env", "DESK_SECRET" }
    env.DESK_SECRET = nil
    assert.are.equal(0, code, err)
    assert.are.equal("alice", cjson.decode(out).structuredContent.subject)
    assert.are_not.equal(before.access_token, entry().access_token)
    code, out, err = luamcp { "logout", s.url }
    assert.are.equal(0, code, err)
  end)

  it("call on a terminal logs in through the browser when the server asks", function()
    local before = #browser_runs()
    local code, shown = on_terminal { "call", "--http", s.url, "whoami", "--raw" }
    assert.are.equal(0, code, shown)
    assert.truthy(shown:find("waiting for the browser", 1, true), shown)
    assert.truthy(shown:find('"subject":"alice"', 1, true) or shown:find('"subject": "alice"', 1, true), shown)
    client.poll_until(function() return #browser_runs() > before end, 60000, 100)
    local run = browser_runs()[before + 1]
    assert.is_nil(run.error, run.error)
    assert.truthy(entry(), "the login was not kept")
    assert_no_secrets(shown)
  end)

  it("a 403 insufficient_scope steps up once through the browser", function()
    -- Without a terminal the kept token's scope is not enough, and nobody
    -- can log in for more.
    local code, out, err = luamcp { "call", "--http", s.url, "write_note" }
    assert.are.equal(1, code, out)
    assert.truthy(err:find("403", 1, true), err)
    assert.truthy(err:find("luamcp login", 1, true), err)
    local before = #browser_runs()
    local shown
    code, shown = on_terminal { "call", "--http", s.url, "write_note" }
    assert.are.equal(0, code, shown)
    assert.truthy(shown:find("written by alice", 1, true), shown)
    client.poll_until(function() return #browser_runs() > before end, 60000, 100)
    local run = browser_runs()[before + 1]
    assert.is_nil(run.error, run.error)
    -- The scope asked for: the token's and the one the 403 named (SEP-2350).
    local asked = shown:match("/auth%?[^%s]*[?&]scope=([^&%s]+)")
    asked = asked and asked:gsub("%%(%x%x)", function(h) return string.char(tonumber(h, 16)) end)
    assert.truthy(asked and asked:find("notes:write", 1, true) and asked:find("notes:read", 1, true), shown)
    assert.truthy(entry().scope:find("notes:write", 1, true), entry().scope)
    assert_no_secrets(shown)
  end)
end)

describe("luamcp login with DPoP (oidc-provider, a server that demands it)", function()
  if missing then
    pending(missing)
    return
  end
  local dir, p, rs, env, browser_out

  local function luamcp(args)
    local parts = {}
    for name, value in pairs(env) do parts[#parts + 1] = name .. "=" .. quote(value) end
    parts[#parts + 1] = LUAMCP
    for _, a in ipairs(args) do parts[#parts + 1] = quote(a) end
    return client.sh(table.concat(parts, " ") .. " </dev/null")
  end
  local function stats()
    local code, out, err = client.sh("curl -sf " .. quote((rs.url:gsub("/mcp$", "/stats"))))
    assert(code == 0, err)
    return cjson.decode(out)
  end

  setup(function()
    dir = client.temp_dir()
    local code, _, err = client.sh(NODE .. " spec/helpers/jwt_mint.mjs keys " .. quote(dir))
    assert(code == 0, err)
    local config = { keys = dir, any_resource = { scope = "notes:read" }, pages = true, dpop = true }
    local proc = client.spawn({ "spec/helpers/oidc_provider.mjs", cjson.encode(config) }, { bin = NODE })
    local line = proc:read_line(60000)
    assert(line, "oidc-provider did not start:\n" .. proc.stderr)
    p = cjson.decode(line)
    p.proc = proc
    local rproc = client.spawn({ "spec/clients/dpop_resource.mjs", p.issuer }, { bin = NODE })
    line = rproc:read_line(60000)
    assert(line, "the DPoP resource server did not start:\n" .. rproc.stderr)
    rs = cjson.decode(line)
    rs.proc = rproc
    browser_out = dir .. "/browser.jsonl"
    env = { XDG_CONFIG_HOME = dir .. "/config",
      BROWSER = table.concat({ NODE, "spec/clients/login_browser.mjs", chromium(), browser_out, "%s" }, " ") }
  end)
  teardown(function()
    if rs then rs.proc:terminate() end
    if p then p.proc:terminate() end
    if dir then client.remove_tree(dir) end
  end)

  it("gets a DPoP-bound token, keeps its key, and calls with fresh proofs and the server's nonce", function()
    local code, out, err = luamcp { "login", rs.url, "--protocol-version", "2025-11-25" }
    assert.are.equal(0, code, err .. "\n" .. (uv.fs_stat(browser_out) and client.read_file(browser_out) or ""))
    local doc = cjson.decode(client.read_file(dir .. "/config/luamcp/tokens.json"))
    local e = doc.servers[rs.url]
    assert.are.equal("DPoP", e.token_type)
    assert.truthy(e.dpop_key and e.dpop_key.pem, "no key kept with the token")
    code, out, err = luamcp { "call", "--http", rs.url, "whoami", "--raw", "--protocol-version", "2025-11-25" }
    assert.are.equal(0, code, err)
    assert.are.equal("alice", cjson.decode(out).structuredContent.subject)
    local seen = stats()
    assert.are.same({}, seen.bad_proofs)
    assert.are.equal(0, seen.bearer)
    assert.are.equal(0, seen.replays)
    -- Each run meets the nonce challenge once and answers it.
    assert.are.equal(2, seen.nonce_challenges)
    assert.truthy(seen.authenticated >= 4, cjson.encode(seen))
    assert.is_nil((out .. err):find("eyJ[%w_-]+%.eyJ"), out .. err)
  end)
end)
