-- HTTP endpoint families as registrations (issue #42, item 1): a family
-- that is not luamcp's own, /hello (spec/fixtures/routes/hello_route.c),
-- is one file and one line of registration, built into a variant of
-- luamcp from the objects already built; the rules every route shares
-- (Host, Origin and CORS, the bearer token, the body limit, methods) apply
-- to it with no code of its own, and the MCP endpoint still answers beside
-- it. Every wait is bounded; nothing is timed.

local http = require "http_client"
local client = require "mcp_client"

local FIXTURE = "spec/fixtures/routes"
local VARIANT = "build/luamcp-routes"

-- The variant, built (or found up to date) once for the file.
local built
local function variant()
  if built then return built end
  local code, out, err = client.sh("make --no-print-directory " .. VARIANT ..
    " EXTRA_ROUTES=" .. FIXTURE .. "/hello_route.c")
  assert(code == 0, "make " .. VARIANT .. " failed:\n" .. out .. err)
  built = VARIANT
  return built
end

local function start(args, opts)
  opts = opts or {}
  opts.bin = variant()
  local full = { FIXTURE .. "/tools.lua" }
  for _, a in ipairs(args or {}) do full[#full + 1] = a end
  return http.start(full, opts)
end

describe("an endpoint family added by registration (/hello)", function()
  local server
  setup(function() server = start() end)
  teardown(function() if server then server:stop_cleanly() end end)

  it("answers GET and POST on its path", function()
    local r = server:request { path = "/hello" }
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("text/plain", r.headers["content-type"])
    assert.are.equal("hello", r.body)
    r = server:request { method = "POST", path = "/hello?x=1", body = "routes" }
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("hello, routes", r.body)
  end)

  it("leaves every other path as it was: the MCP endpoint answers, others are 404", function()
    local session = server:initialize()
    assert.truthy(session)
    http.assert_error(server:request { path = "/hello/there" }, 404, -32000, "Not Found")
    http.assert_error(server:request { path = "/nothing" }, 404, -32000, "Not Found")
  end)

  it("is refused a Host the server does not answer to (403), as every route is", function()
    http.assert_error(server:request { path = "/hello", host = "evil.example" }, 403, -32000, "Host not allowed")
  end)

  it("is refused a foreign Origin (403), and an allowed one gets the CORS headers", function()
    http.assert_error(server:request { path = "/hello", headers = { Origin = "http://evil.example" } },
      403, -32000, "Origin not allowed")
    local origin = "http://localhost:" .. server.port
    local r = server:request { path = "/hello", headers = { Origin = origin } }
    assert.are.equal(200, r.status, r.body)
    assert.are.equal(origin, r.headers["access-control-allow-origin"])
    assert.are.equal("Origin", r.headers["vary"])
  end)

  it("answers a CORS preflight with the methods it registered", function()
    local origin = "http://localhost:" .. server.port
    local r = server:request { method = "OPTIONS", path = "/hello",
      headers = { Origin = origin, ["Access-Control-Request-Method"] = "POST" } }
    assert.are.equal(204, r.status, r.body)
    assert.are.equal(origin, r.headers["access-control-allow-origin"])
    assert.are.equal("GET, POST, OPTIONS", r.headers["access-control-allow-methods"])
    assert.are.equal("GET, POST, OPTIONS", r.headers["allow"])
    assert.truthy((r.headers["access-control-allow-headers"] or ""):find("Authorization", 1, true))
    http.assert_error(server:request { method = "OPTIONS", path = "/hello", headers = { Origin = "http://evil.example" } },
      403, -32000, "Origin not allowed")
  end)

  it("answers a method it did not register 405, with Allow", function()
    local r = server:request { method = "DELETE", path = "/hello" }
    http.assert_error(r, 405, -32000, "Method Not Allowed")
    assert.are.equal("GET, POST, OPTIONS", r.headers["allow"])
  end)
end)

describe("/hello under --bearer-token-env", function()
  local server
  setup(function()
    server = start({ "--bearer-token-env", "HELLO_TOKEN" }, { env = { "HELLO_TOKEN=hello-secret-token-1234" } })
  end)
  teardown(function() if server then server:stop_cleanly() end end)

  it("needs the token (401 without it or with another), and answers with it", function()
    local r = server:request { path = "/hello" }
    http.assert_error(r, 401, -32000, "bearer token")
    assert.truthy((r.headers["www-authenticate"] or ""):find("^Bearer"), r.headers["www-authenticate"])
    http.assert_error(server:request { path = "/hello", headers = { Authorization = "Bearer wrong" } }, 401, -32000)
    r = server:request { path = "/hello", headers = { Authorization = "Bearer hello-secret-token-1234" } }
    assert.are.equal(200, r.status, r.body)
    assert.are.equal("hello", r.body)
  end)

  it("answers a preflight without it (a preflight carries no credentials)", function()
    local r = server:request { method = "OPTIONS", path = "/hello",
      headers = { Origin = "http://localhost:" .. server.port } }
    assert.are.equal(204, r.status, r.body)
  end)
end)

describe("/hello under --max-message-bytes", function()
  local server
  setup(function() server = start { "--max-message-bytes", "64" } end)
  teardown(function() if server then server:stop_cleanly() end end)

  it("refuses a body over the limit (413), declared or sent chunked", function()
    http.assert_error(server:request { method = "POST", path = "/hello", body = ("x"):rep(65) },
      413, -32600, "Content Too Large")
    local chunk = ("y"):rep(100)
    local conn = server:connect()
    conn:write("POST /hello HTTP/1.1\r\nHost: 127.0.0.1:" .. server.port .. "\r\nTransfer-Encoding: chunked\r\n\r\n" ..
      string.format("%x\r\n%s\r\n0\r\n\r\n", #chunk, chunk))
    http.assert_error(conn:read_response(), 413, -32600, "Content Too Large")
    conn:close()
    local r = server:request { method = "POST", path = "/hello", body = ("z"):rep(10) }
    assert.are.equal(200, r.status, r.body)
  end)
end)
