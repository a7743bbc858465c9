-- luamcp on a Unix socket (--http unix:SOCKET[:/PATH], issue 48): served
-- as over TCP, behind Debian's nginx to the official SDK clients; the
-- socket file's mode, its removal at stop, a live one refused, a stale one
-- replaced, a regular file left alone; --workers sharing it; --metrics on
-- one; and the clients that reach it (luamcp call, mcp.client, mcp.http),
-- judged by the net permission.
local client = require "mcp_client"
local services = require "services"
local node = require "node_runner"
local uv = require "luv"
local cjson = client.json

local DEMO = "scripts/demo"
local CALLER = "spec/fixtures/unix_socket/caller.lua"

-- Start `luamcp run --http unix:SOCKET ARGS...` and wait for its start line.
local function serve(socket, args, opts)
  local full = { "run", "--http", "unix:" .. socket, "--drain-time", "0" }
  for _, a in ipairs(args) do full[#full + 1] = a end
  local proc = client.spawn(full, opts)
  local ok = client.wait_until(function()
    return proc.stderr:find("serving MCP over HTTP at unix:" .. socket .. ":/mcp", 1, true) or proc.exited
  end, 60000)
  assert(ok and not proc.exited, "luamcp did not start:\n" .. proc.stderr)
  return proc
end

-- Run a luamcp command to its end: exit code, stdout, stderr.
local function run(args)
  local proc = client.spawn(args)
  assert(proc:wait_exit(60000), "luamcp " .. table.concat(args, " ") .. " did not end")
  local out = table.concat(proc.lines, "\n") .. proc.buffer
  proc:close()
  return proc.exit_code, out, proc.stderr
end

local function mode_of(path)
  local st = uv.fs_lstat(path)
  return st and st.type, st and (st.mode & tonumber("777", 8))
end

-- GET path over the socket with curl (its own Unix-socket client), with
-- extra curl arguments: the status and body.
local function curl(socket, path, extra)
  local code, out = client.sh(("curl -s -w '\\n%%{http_code}' --unix-socket '%s' %s 'http://localhost%s'")
    :format(socket, extra or "", path))
  assert(code == 0, "curl failed: " .. tostring(code))
  local body, status = out:match("^(.*)\n(%d+)$")
  return tonumber(status), body
end

describe("luamcp on a Unix socket", function()
  local dir
  before_each(function() dir = client.temp_dir() end)
  after_each(function() client.remove_tree(dir) end)

  it("serves MCP there: luamcp call reaches it, the file is 0600 and goes at stop", function()
    local socket = dir .. "/demo.sock"
    local server = serve(socket, { DEMO })
    local kind, mode = mode_of(socket)
    assert.are.equal("socket", kind)
    assert.are.equal(tonumber("600", 8), mode)
    local code, out, err = run { "call", "--http", "unix:" .. socket .. ":/mcp", "add", "a=2", "b=40" }
    assert.are.equal(0, code, err)
    assert.matches("42", out)
    -- The endpoint's path may be left out: /mcp.
    code, out, err = run { "call", "--http", "unix:" .. socket, "add", "a=1", "b=1" }
    assert.are.equal(0, code, err)
    assert.matches("2", out)
    server:terminate(30000)
    assert.are.equal(0, server.exit_code, server.stderr)
    assert.is_nil(uv.fs_lstat(socket), "the socket file is still there after the stop")
  end)

  it("takes --socket-mode, and checks Host as on loopback", function()
    local socket = dir .. "/mode.sock"
    local server = serve(socket, { "--socket-mode", "0660", DEMO })
    local _, mode = mode_of(socket)
    assert.are.equal(tonumber("660", 8), mode)
    local status = curl(socket, "/healthz")
    assert.are.equal(200, status)
    -- A name a rebound page would send is refused; a local one is served.
    local init = [[-X POST -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream' ]]
      .. [[-d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",]]
      .. [["capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}']]
    status = curl(socket, "/mcp", init .. " -H 'Host: evil.example'")
    assert.are.equal(403, status)
    status = curl(socket, "/mcp", init)
    assert.are.equal(200, status)
    server:terminate(30000)
    assert.is_nil(uv.fs_lstat(socket))
  end)

  it("refuses bad --socket-mode values", function()
    local code, _, err = run { "run", "--http", "unix:" .. dir .. "/x.sock", "--socket-mode", "999", DEMO }
    assert.are.equal(2, code, err)
    assert.matches("%-%-socket%-mode needs permission bits in octal", err)
  end)

  it("refuses a socket another server listens on, and replaces a stale one", function()
    local socket = dir .. "/busy.sock"
    local first = serve(socket, { DEMO })
    local code, _, err = run { "run", "--http", "unix:" .. socket, DEMO }
    assert.are.equal(1, code)
    assert.matches("another server is listening on it", err)
    -- The refused one removed nothing: the first still serves.
    assert.are.equal(200, (curl(socket, "/healthz")))
    -- A server that dies without removing its socket leaves a stale file.
    first:kill("sigkill")
    assert(first:wait_exit(30000))
    assert.are.equal("socket", (mode_of(socket)))
    local second = serve(socket, { DEMO })
    assert.are.equal(200, (curl(socket, "/healthz")))
    second:terminate(30000)
    assert.is_nil(uv.fs_lstat(socket))
  end)

  it("leaves a file that is not a socket alone", function()
    local path = dir .. "/notes.txt"
    client.write_file(path, "precious\n")
    local code, _, err = run { "run", "--http", "unix:" .. path, DEMO }
    assert.are.equal(1, code)
    assert.matches("is not a socket %(it is left alone%)", err)
    assert.are.equal("precious\n", client.read_file(path))
  end)

  it("--workers 2 serve the one socket, which the supervisor removes at stop", function()
    local socket = dir .. "/workers.sock"
    local server = serve(socket, { "--workers", "2", DEMO })
    assert.matches("by 2 workers", server.stderr)
    for i = 1, 4 do
      local code, out, err = run { "call", "--http", "unix:" .. socket .. ":/mcp", "add", "a=" .. i, "b=100" }
      assert.are.equal(0, code, err)
      assert.matches(tostring(100 + i), out)
    end
    server:terminate(30000)
    assert.are.equal(0, server.exit_code, server.stderr)
    assert.is_nil(uv.fs_lstat(socket))
  end)

  it("--metrics unix:SOCKET serves /metrics there", function()
    local socket, metrics = dir .. "/mcp.sock", dir .. "/metrics.sock"
    local server = serve(socket, { "--metrics", "unix:" .. metrics, DEMO })
    assert.is_truthy(server:wait_stderr("metrics at unix:" .. metrics .. ":/metrics", 1, 30000))
    local _, mode = mode_of(metrics)
    assert.are.equal(tonumber("600", 8), mode)
    local status, body = curl(metrics, "/metrics")
    assert.are.equal(200, status)
    assert.matches("luamcp_", body)
    server:terminate(30000)
    assert.is_nil(uv.fs_lstat(metrics))
  end)

  it("behind nginx (scripts/deploy/nginx-unix.conf): the SDK v1 and v2 clients call through it", function()
    if not services.which("nginx") then pending("nginx is not installed") return end
    local socket = dir .. "/luamcp.sock"
    local server = serve(socket, { "--workers", "2", DEMO })
    local conf = client.read_file("scripts/deploy/nginx-unix.conf")
    local port = services.free_port()
    conf = conf:gsub("unix:/run/luamcp/luamcp%.sock;", "unix:" .. socket .. ";")
               :gsub("listen 8080;", "listen 127.0.0.1:" .. port .. ";")
    local proxy = assert(services.nginx(conf, port, dir))
    local ok, result = pcall(node.run, { "spec/clients/sdk_unix_proxy.mjs", "http://127.0.0.1:" .. port .. "/mcp" })
    proxy:stop()
    server:terminate(30000)
    assert(ok, result)
    assert.is_nil(result.error, result.error)
    for _, which in ipairs { "v1", "v2" } do
      assert.are.equal("42", result[which].sum, cjson.encode(result))
      assert.is_truthy(table.concat(result[which].tools, " "):find("add", 1, true))
    end
  end)

  it("mcp.client{url = 'unix:...'} and mcp.http{unix_socket} reach it, with the net permission only", function()
    local socket = dir .. "/target.sock"
    local target = serve(socket, { DEMO })
    -- The caller runs as a stdio server of luamcp call (-- COMMAND), with
    -- or without the socket among its net permissions.
    local function call(allowed, tool, arg)
      local a = { "call", tool, arg, "--", client.LUAMCP, "run" }
      if allowed then a[#a + 1] = "--allow-net" a[#a + 1] = "unix:" .. socket end
      a[#a + 1] = CALLER
      local _, out, err = run(a)
      return out .. err
    end
    local denied = "permission denied: net unix:" .. socket:gsub("%p", "%%%0")
    assert.matches("sum: 42", call(true, "client_add", "url=unix:" .. socket .. ":/mcp"))
    assert.matches("status 200", call(true, "http_health", "socket=" .. socket))
    assert.matches(denied, call(false, "client_add", "url=unix:" .. socket .. ":/mcp"))
    assert.matches(denied, call(false, "http_health", "socket=" .. socket))
    target:terminate(30000)
  end)
end)
