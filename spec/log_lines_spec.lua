-- What luamcp writes for people to read (issue #41): the server's text log
-- and `luamcp call`'s output carry text that a client, a tool's caller or
-- a remote server chose, and such text must not act on the terminal
-- (escape sequences) nor forge a log line (a newline); secrets in a
-- request's query never reach the log; and the lines that say what luamcp
-- does name things as they are (each port luamcp itself connects to, each
-- declared variable once, every endpoint served).

local client = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local uv = require "luv"
local cjson = client.json

local NODE = node.NODE
local LUAMCP = os.getenv("LUAMCP") or "build/luamcp"
local ESC = "\27"

local function quote(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

-- The environment of a spawned luamcp: PATH, HOME, the sanitizers' options.
local function environment(extra)
  local env = { "PATH=" .. os.getenv("PATH"), "HOME=" .. os.getenv("HOME") }
  for _, k in ipairs { "ASAN_OPTIONS", "UBSAN_OPTIONS", "LUAMCP_TEST_RUN" } do
    if os.getenv(k) then env[#env + 1] = k .. "=" .. os.getenv(k) end
  end
  for _, e in ipairs(extra or {}) do env[#env + 1] = e end
  return env
end

-- A folder with one script, s.lua (removed with client.remove_tree).
local function script_dir(source)
  local dir = client.temp_dir()
  client.write_file(dir .. "/s.lua", source)
  return dir
end

-- A tool that fails with, or prints, the text its caller sends.
local ECHOES = [[
local mcp = require "mcp"
mcp.server { name = "echoes", version = "1.0.0" }
local text = { type = "object", properties = { text = { type = "string" } }, required = { "text" } }
mcp.tool { name = "fail", inputSchema = text, handler = function(a) error(a.text, 0) end }
mcp.tool { name = "say", inputSchema = text, handler = function(a) print(a.text) return "said" end }
mcp.tool { name = "give", inputSchema = text, handler = function(a) return a.text end }
]]

-- The lines of text, each without its newline.
local function lines_of(text)
  local out = {}
  for line in text:gmatch("[^\n]*") do out[#out + 1] = line end
  return out
end

describe("the text log, with what a caller sent in it", function()
  local dir, server
  setup(function()
    dir = script_dir(ECHOES)
    server = client.spawn({ "run", dir }, { env = environment() })
    server:initialize()
  end)
  teardown(function()
    if server then server:close() end
    if dir then client.remove_tree(dir) end
  end)

  it("a tool's error message: one line, its newline and escape sequences written out", function()
    local text = "one\nFAKE log line \27]0;title\7 \27[2J\rover"
    local r = server:call_tool("fail", { text = text })
    assert.is_true(r.isError)
    assert.truthy(client.wait_until(function() return server.stderr:find("FAKE log line", 1, true) end, 10000),
      server.stderr)
    for _, line in ipairs(lines_of(server.stderr)) do
      assert.is_nil(line:find("^FAKE"), server.stderr)
    end
    local line = server.stderr:match("[^\n]*tool fail failed:[^\n]*")
    assert.truthy(line, server.stderr)
    assert.truthy(line:find("tool fail failed: one\\nFAKE log line \\x1b]0;title\\x07 \\x1b[2J\\rover", 1, true), line)
    assert.is_nil(server.stderr:find(ESC, 1, true), server.stderr)
    assert.is_nil(server.stderr:find("\r", 1, true), server.stderr)
  end)

  it("print: its lines kept, its escape sequences and C1 controls written out", function()
    local r = server:call_tool("say", { text = "first\nsecond \27]0;title\7 \194\155 end" })
    assert.are.equal("said", r.content[1].text)
    assert.truthy(client.wait_until(function() return server.stderr:find("second", 1, true) end, 10000),
      server.stderr)
    assert.truthy(server.stderr:find("\nfirst\nsecond \\x1b]0;title\\x07 \\xc2\\x9b end\n", 1, true), server.stderr)
    assert.is_nil(server.stderr:find(ESC, 1, true), server.stderr)
    assert.is_nil(server.stderr:find("\194\155", 1, true), server.stderr)
  end)
end)

describe("the trace of a message that is not JSON", function()
  it("shows it as it came, but on one line that cannot act on a terminal", function()
    local server = client.spawn({ "run", "--trace", "-", "spec/fixtures/kitchen" }, { env = environment() })
    server:write("not json \27[2J here\r\n")
    assert.truthy(client.wait_until(function() return server.stderr:find("not json", 1, true) end, 10000),
      server.stderr)
    local stderr = server.stderr
    server:close()
    assert.truthy(stderr:find("<- not json \\x1b[2J here\n", 1, true), stderr)
    assert.is_nil(stderr:find(ESC, 1, true), stderr)
  end)
end)

describe("luamcp call, printing what a server sent", function()
  local dir
  setup(function() dir = script_dir(ECHOES) end)
  teardown(function() if dir then client.remove_tree(dir) end end)

  it("a tool's text: its lines kept, escape sequences made visible", function()
    local code, out, err = client.sh(LUAMCP .. " call " .. quote(dir) .. " give "
      .. quote("text=a\tb\nline two \27]0;title\7\r") .. " </dev/null")
    assert.are.equal(0, code, err)
    assert.are.equal("a\tb\nline two \\x1b]0;title\\x07\\r\n", out)
  end)

  it("--raw: JSON with no control byte in it, which decodes to the very text", function()
    local text = "a\127b \194\155 \27]0;title\7"
    local code, out, err = client.sh(LUAMCP .. " call --raw " .. quote(dir) .. " give " .. quote("text=" .. text)
      .. " </dev/null")
    assert.are.equal(0, code, err)
    assert.is_nil(out:find("[%z\1-\8\11-\31\127]"), out)
    assert.is_nil(out:find("\194[\128-\159]"), out)
    assert.are.equal(text, cjson.decode(out).content[1].text)
  end)

  it("a tool's error: on stderr, escape sequences made visible", function()
    local code, out, err = client.sh(LUAMCP .. " call " .. quote(dir) .. " fail "
      .. quote("text=bad \27[2J news") .. " </dev/null")
    assert.are.equal(1, code, out)
    assert.truthy(err:find("bad \\x1b[2J news", 1, true), err)
    assert.is_nil((out .. err):find(ESC, 1, true), err)
  end)
end)

describe("luamcp call, told of an authorization server's error", function()
  if not uv.fs_access(NODE, "X") then
    pending("Node 22 is not installed in spec/node_modules (npm ci)")
    return
  end
  -- An MCP server that wants a token, whose authorization server (the same
  -- process) refuses the client with an error_description meant for the
  -- terminal: a title set, the screen cleared, a line forged.
  local FAKE = [[
const http = require("http");
const server = http.createServer((req, res) => {
  const base = `http://127.0.0.1:${server.address().port}`;
  const json = (status, doc) => {
    res.statusCode = status;
    res.setHeader("Content-Type", "application/json");
    res.end(JSON.stringify(doc));
  };
  if (req.url === "/.well-known/oauth-protected-resource/mcp")
    return json(200, { resource: `${base}/mcp`, authorization_servers: [base] });
  if (req.url === "/.well-known/oauth-authorization-server")
    return json(200, { issuer: base, token_endpoint: `${base}/token` });
  if (req.url === "/token")
    return json(400, { error: "invalid_client\u001b[2J",
      error_description: "\u001b]0;pwned\u0007no such client\r\nluamcp call: FORGED line" });
  res.statusCode = 401;
  res.setHeader("WWW-Authenticate", `Bearer resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`);
  res.end();
});
server.listen(0, "127.0.0.1", () => process.stdout.write(JSON.stringify({ port: server.address().port }) + "\n"));
process.stdin.on("end", () => process.exit(0)).resume();
]]

  it("shows the error with its escape sequences made visible and on one line", function()
    local fake = client.spawn({ "-e", FAKE }, { bin = NODE })
    local line = fake:read_line(30000)
    assert(line, "the fake server did not start:\n" .. fake.stderr)
    local url = ("http://127.0.0.1:%d/mcp"):format(cjson.decode(line).port)
    local code, out, err = client.sh("SECRET=s3cret " .. LUAMCP .. " call --http " .. quote(url)
      .. " --client-id app --client-secret-env SECRET </dev/null")
    fake:terminate()
    assert.are.equal(1, code, out .. err)
    assert.truthy(err:find("HTTP 400 invalid_client\\x1b[2J: \\x1b]0;pwned\\x07no such client luamcp call: FORGED line",
      1, true), err)
    assert.is_nil(err:find(ESC, 1, true), err)
    assert.is_nil(err:find("\r", 1, true), err)
    for _, l in ipairs(lines_of(err)) do assert.is_nil(l:find("^luamcp call: FORGED"), err) end
  end)
end)

describe("the request line at --log-level debug", function()
  local s
  setup(function() s = http.start({ "--log-level", "debug", "spec/fixtures/kitchen" }, { env = environment() }) end)
  teardown(function() if s then s:stop_cleanly() end end)

  it("names the query's keys, never their values (a token sent as ?access_token=)", function()
    local conn = s:connect()
    conn:write(table.concat({
      "POST /mcp?access_token=SECRETVALUE&x=OTHERVALUE HTTP/1.1", "Host: 127.0.0.1:" .. s.port,
      "Accept: application/json, text/event-stream", "Content-Type: application/json", "Content-Length: 2",
      "", "{}" }, "\r\n"))
    local r = conn:read_response(10000)
    assert.truthy(r and r.status >= 400, r and r.body)
    local logged = "POST /mcp?access_token=[redacted]&x=[redacted]"
    assert.truthy(client.wait_until(function() return s:stderr():find(logged, 1, true) end, 10000), s:stderr())
    assert.is_nil(s:stderr():find("SECRETVALUE", 1, true), s:stderr())
    assert.is_nil(s:stderr():find("OTHERVALUE", 1, true), s:stderr())
  end)
end)

describe("the start line of run --http", function()
  local function start_line(args)
    local s = http.start(args, { env = environment() })
    local line = s:stderr():match("luamcp: serving MCP over HTTP at [^\n]*")
    local port = s.port
    s:stop_cleanly()
    return line, port
  end

  it("names the legacy SSE endpoint beside /mcp, as --sse-path sets it, and not with --no-sse", function()
    local line, port = start_line { "spec/fixtures/kitchen" }
    assert.truthy(line:find(("at http://127.0.0.1:%d/mcp (legacy SSE: /sse) ("):format(port), 1, true), line)
    line, port = start_line { "--sse-path", "/events", "spec/fixtures/kitchen" }
    assert.truthy(line:find(("at http://127.0.0.1:%d/mcp (legacy SSE: /events) ("):format(port), 1, true), line)
    line = start_line { "--no-sse", "spec/fixtures/kitchen" }
    assert.is_nil(line:find("SSE", 1, true), line)
  end)
end)

describe("the start log of a confined server", function()
  -- A free TCP port (nothing need listen there: no span is exported).
  local function spare_port()
    local tcp = uv.new_tcp()
    assert(tcp:bind("127.0.0.1", 0))
    local port = tcp:getsockname().port
    tcp:close()
    uv.run("nowait")
    return port
  end

  it("says the OpenTelemetry collector's port is what luamcp itself may reach, not an OAuth server's", function()
    local dir = script_dir([[
local mcp = require "mcp"
mcp.server { name = "confined", version = "1.0.0", permissions = { read = {} } }
mcp.tool { name = "t", handler = function() return "ok" end }
]])
    local port = spare_port()
    local server = client.spawn({ "run", dir },
      { env = environment { ("OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:%d"):format(port) } })
    assert.truthy(client.wait_until(function() return server.stderr:find("serving MCP", 1, true) end, 30000),
      server.stderr)
    local stderr = server.stderr
    server:close()
    client.remove_tree(dir)
    if not stderr:find("Landlock ABI %d+ also confines the process: [^\n]*TCP ports") then
      pending("the kernel cannot confine TCP ports here (Landlock ABI 4)")
      return
    end
    local line = stderr:match("[^\n]*luamcp itself may also connect[^\n]*")
    assert.truthy(line, stderr)
    assert.truthy(line:find(("TCP port %d for the OpenTelemetry collector"):format(port), 1, true), line)
    assert.is_nil(line:find("OAuth", 1, true), line)
  end)
end)

describe("a variable named twice in permissions.env and config", function()
  local dir
  setup(function()
    dir = script_dir([[
local mcp = require "mcp"
mcp.server { name = "twice", version = "1.0.0", permissions = { env = { "HOME", "WEATHER_URL", "WEATHER_URL" } },
  config = { weather_url = { type = "string", title = "Weather URL", description = "Where the forecasts come from" } } }
mcp.tool { name = "t", handler = function() return "ok" end }
]])
  end)
  teardown(function() if dir then client.remove_tree(dir) end end)

  it("is listed once, in the start log and by luamcp inspect", function()
    local server = client.spawn({ "run", dir }, { env = environment() })
    assert.truthy(client.wait_until(function() return server.stderr:find("serving MCP", 1, true) end, 30000),
      server.stderr)
    local stderr = server.stderr
    server:close()
    assert.truthy(stderr:find("; env HOME, WEATHER_URL; c_modules none", 1, true), stderr)
    local code, out, err = client.sh(LUAMCP .. " inspect " .. quote(dir) .. " </dev/null")
    assert.are.equal(0, code, err)
    assert.truthy(out:find("; env HOME, WEATHER_URL; c_modules none", 1, true), out)
  end)
end)
