-- luamcp call/read/prompt tell the truth: an HTTP status with the server's
-- message and its WWW-Authenticate, a token from the environment and
-- headers, roots from --root, a server's question answered with --answer
-- or on a terminal or refused, and a stdio server that prints something
-- other than JSON-RPC on stdout named as such.

local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local reaper = require "reaper"
local uv = require "luv"
local cjson = client.json

local sh = client.sh

local LUAMCP = io.popen("readlink -f " .. client.LUAMCP):read("l")
local DEMO = io.popen("readlink -f scripts/demo"):read("l")
local ASKING = io.popen("readlink -f spec/fixtures/asking"):read("l")

local function quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- Run luamcp with these words from / (stdin not a terminal); returns
-- status, stdout, stderr.
local function luamcp(words, env)
  return sh("cd / && " .. (env and ("env " .. env .. " ") or "") .. LUAMCP .. " " .. words .. " </dev/null")
end

-- A tiny HTTP server in Node that answers each path with a status, for
-- what luamcp itself never answers (a proxy's page, a 5xx).
local STATUS_SERVER = [[
const http = require('http');
const answers = {
  '/forbidden': [403, {'content-type': 'application/json'},
    JSON.stringify({jsonrpc: '2.0', id: null, error: {code: -32000, message: 'Forbidden: this token may not call tools'}})],
  '/gone': [404, {'content-type': 'text/plain'}, 'no MCP endpoint here'],
  '/broken': [502, {'content-type': 'text/html'}, '<html><body>Bad Gateway</body></html>'],
  '/page': [200, {'content-type': 'text/html'}, '<html>Welcome to my blog</html>'],
  '/accepted': [202, {}, ''],
  '/oauth': [401, {'content-type': 'application/json',
    'www-authenticate': 'Bearer resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"'},
    JSON.stringify({error: 'invalid_token', error_description: 'The access token expired'})],
};
const server = http.createServer((req, res) => {
  req.on('data', () => {});
  req.on('end', () => {
    const [status, headers, body] = answers[req.url] || [500, {'content-type': 'text/plain'}, 'internal error: ' + req.url];
    res.writeHead(status, headers);
    res.end(body);
  });
});
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
]]

local function start_status_server()
  local stdout = uv.new_pipe(false)
  local out = ""
  local proc = { exited = false }
  local handle = assert(uv.spawn(node.NODE, { args = { "-e", STATUS_SERVER }, stdio = { nil, stdout, 2 } },
    function() proc.exited = true end))
  proc.pid = handle:get_pid()
  function proc.terminate()
    if not proc.exited then handle:kill("sigkill") end
    client.wait_until(function() return proc.exited end, 5000)
  end
  function proc.close()
    for _, h in ipairs { stdout, handle } do if not h:is_closing() then h:close() end end
    uv.run("nowait")
  end
  reaper.track(proc)
  stdout:read_start(function(_, data) if data then out = out .. data end end)
  assert(client.wait_until(function() return out:find("\n") ~= nil or proc.exited end, 60000), "node did not start")
  proc.port = assert(tonumber(out:match("^(%d+)")), "node printed no port: " .. out)
  return proc
end

describe("luamcp call --http tells the truth", function()
  local server, status

  setup(function()
    server = http.start({ DEMO, "--bearer-token-env", "TRUTH_TOKEN" }, { env = { "TRUTH_TOKEN=s3cret" } })
    status = start_status_server()
  end)

  teardown(function()
    if server then server:stop_cleanly() end
    if status then
      status.terminate()
      status.close()
    end
  end)

  it("reports a 401 with the server's message and its WWW-Authenticate, and says how to give a token", function()
    local code, out, err = luamcp("call --http " .. server.url .. " add a=1 b=2")
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find(server.url .. " answered HTTP 401 Unauthorized", 1, true), err)
    assert.truthy(err:find("WWW-Authenticate: Bearer", 1, true), err)
    assert.truthy(err:find("--bearer-env", 1, true), err)
    assert.falsy(err:find("nothing running", 1, true), err)
    -- an OAuth server's error_description and its resource metadata
    code, _, err = luamcp("call --http http://127.0.0.1:" .. status.port .. "/oauth")
    assert.are.equal(1, code)
    assert.truthy(err:find("HTTP 401 Unauthorized: The access token expired", 1, true), err)
    assert.truthy(err:find('resource_metadata="http://127.0.0.1/.well-known/oauth-protected-resource"', 1, true), err)
  end)

  it("sends the token of --bearer-env VAR, and refuses a variable that is not set", function()
    local code, out, err = luamcp("call --http " .. server.url .. " --bearer-env TRUTH_TOKEN add a=1 b=2",
      "TRUTH_TOKEN=s3cret")
    assert.are.equal(0, code, err)
    assert.are.equal("3\n", out)
    code, out, err = luamcp("call --http " .. server.url .. " --bearer-env TRUTH_TOKEN add a=1 b=2",
      "TRUTH_TOKEN=wrong")
    assert.are.equal(1, code)
    assert.truthy(err:find("HTTP 401", 1, true), err)
    code, _, err = luamcp("call --http " .. server.url .. " --bearer-env TRUTH_UNSET add a=1 b=2")
    assert.are.equal(2, code)
    assert.truthy(err:find("--bearer-env TRUTH_UNSET: the variable TRUTH_UNSET is not set", 1, true), err)
  end)

  it("sends every --header, the later of one name winning", function()
    local code, out, err = luamcp("read --http " .. server.url
      .. " --header 'Authorization: Bearer wrong' --header 'X-Trace: 1' --header 'Authorization: Bearer s3cret' notes://index")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("welcome", 1, true), out)
    code, _, err = luamcp("prompt " .. DEMO .. " --header 'X-Trace: 1'")
    assert.are.equal(2, code)
    assert.truthy(err:find("--header and --bearer-env are for a server reached with --http URL", 1, true), err)
  end)

  it("reports 403, 404 and 5xx with the status and what the server said", function()
    local base = "http://127.0.0.1:" .. status.port
    local cases = {
      { "/forbidden", "answered HTTP 403 Forbidden: Forbidden: this token may not call tools" },
      { "/gone", "answered HTTP 404 Not Found: no MCP endpoint here" },
      { "/broken", "answered HTTP 502 Bad Gateway: <html><body>Bad Gateway</body></html>" },
      { "/other", "answered HTTP 500 Internal Server Error: internal error: /other" },
      { "/page", "answered HTTP 200 OK with text/html, not JSON-RPC: <html>Welcome to my blog</html>" },
      { "/accepted", "answered HTTP 202 Accepted without a response to the request" },
    }
    for _, case in ipairs(cases) do
      local code, out, err = luamcp("call --http " .. base .. case[1] .. " add a=1 b=2")
      assert.are.equal(1, code, case[1])
      assert.are.equal("", out)
      assert.truthy(err:find(base .. case[1] .. " " .. case[2], 1, true), err)
      assert.falsy(err:find("nothing running", 1, true), err)
    end
  end)
end)

describe("luamcp call answers the server's questions", function()
  it("answers roots/list with each --root, as file:// URIs", function()
    local dir = client.temp_dir()
    assert(os.execute("mkdir -p " .. quote(dir .. "/my project")))
    local code, out, err = luamcp("call " .. ASKING .. " roots --root " .. quote(dir .. "/my project") .. " --root /tmp")
    assert.are.equal(0, code, err)
    local real = io.popen("readlink -f " .. quote(dir)):read("l")
    assert.are.same({ roots = {
      { uri = "file://" .. real:gsub(" ", "%%20") .. "/my%20project", name = "my project" },
      { uri = "file:///tmp", name = "tmp" },
    } }, cjson.decode(out))
    code, _, err = luamcp("call " .. ASKING .. " roots --root " .. quote(dir .. "/missing"))
    assert.are.equal(2, code)
    assert.truthy(err:find("--root " .. dir .. "/missing: no such folder", 1, true), err)
    client.remove_tree(dir)
  end)

  it("answers an elicitation with --answer key=value, typed by the requested schema", function()
    local code, out, err = luamcp("call " .. ASKING .. " elicit --answer name=Ada --answer age=36")
    assert.are.equal(0, code, err)
    assert.are.same({ elicited = { action = "accept", content = { name = "Ada", age = 36 } } }, cjson.decode(out))
    code, out, err = luamcp("call " .. ASKING .. " elicit --answer name=Ada --answer age=old")
    assert.are.equal(0, code, err)
    assert.are.same({ elicited = { action = "cancel" } }, cjson.decode(out))
    assert.truthy(err:find("age=old: the schema wants integer", 1, true), err)
  end)

  it("refuses the question clearly with no terminal and no --answer", function()
    local code, out, err = luamcp("call " .. ASKING .. " elicit message='Who goes there?'")
    assert.are.equal(0, code, err)
    assert.are.same({ elicited = { action = "cancel" } }, cjson.decode(out))
    assert.truthy(err:find("luamcp call: the server asks: Who goes there?", 1, true), err)
    assert.truthy(err:find("there is no terminal to ask on and no --answer was given (--answer name=VALUE", 1, true),
      err)
    -- a required field left without an answer
    code, out, err = luamcp("call " .. ASKING .. " elicit --answer age=3")
    assert.are.equal(0, code, err)
    assert.are.same({ elicited = { action = "cancel" } }, cjson.decode(out))
    assert.truthy(err:find("no --answer for name, and there is no terminal to ask on", 1, true), err)
  end)

  it("asks on the terminal when stdin is one, again until an answer fits", function()
    if not os.execute("command -v script >/dev/null 2>&1") then
      pending("util-linux script is not installed: no terminal to test with")
      return
    end
    -- script(1) gives luamcp a terminal; the typed lines are its input:
    -- name, then age "x" (refused), then age left empty.
    local code, out = sh("cd / && printf 'Grace\\nx\\n\\n' | script -qec " .. quote(LUAMCP .. " call " .. ASKING
      .. " elicit") .. " /dev/null")
    assert.are.equal(0, code, out)
    assert.truthy(out:find("the server asks: Who are you?", 1, true), out)
    assert.truthy(out:find("name (string; required) - Your name:", 1, true), out)
    assert.truthy(out:find("age=x: the schema wants integer", 1, true), out)
    assert.truthy(out:find('{"elicited":{"action":"accept","content":{"name":"Grace"}}}', 1, true), out)
  end)
end)

describe("luamcp call -- COMMAND", function()
  it("names a server that prints something that is not JSON-RPC on stdout", function()
    local dir = client.temp_dir()
    client.write_file(dir .. "/chatty.sh", '#!/bin/sh\necho "Starting my server v1.0 on stdio"\nexec cat >/dev/null\n')
    assert(os.execute("chmod +x " .. quote(dir .. "/chatty.sh")))
    local code, out, err = luamcp("call add a=1 -- " .. quote(dir .. "/chatty.sh"))
    assert.are.equal(1, code)
    assert.are.equal("", out)
    assert.truthy(err:find("the server printed something that is not JSON-RPC on stdout: Starting my server v1.0 on stdio",
      1, true), err)
    -- JSON that is no JSON-RPC message (a structured log line) is named too
    client.write_file(dir .. "/logger.sh", '#!/bin/sh\necho \'{"level":"info","msg":"ready"}\'\nexec cat >/dev/null\n')
    assert(os.execute("chmod +x " .. quote(dir .. "/logger.sh")))
    code, _, err = luamcp("call -- " .. quote(dir .. "/logger.sh"))
    assert.are.equal(1, code)
    assert.truthy(err:find('not JSON-RPC on stdout: {"level":"info","msg":"ready"}', 1, true), err)
    client.remove_tree(dir)
  end)
end)
