-- luamcp.remote (runtime/app/lua_remote.c), the C side of the server-side
-- mcp.client, driven directly by a fixture's tools (no mcp.client Lua
-- layer): a tool of the outer server connects to an inner MCP server, a
-- child over stdio or a URL over Streamable HTTP, and waits for answers
-- inside its handler while the loop keeps serving.

local client = require "mcp_client"
local http = require "http_client"
local reaper = require "reaper"
local json = client.json
local uv = require "luv"

local OUTER = "spec/fixtures/remote_conn/outer"
local INNER = "spec/fixtures/remote_conn/inner"
local DEMO = "scripts/demo"

local function structured(result)
  assert(result and result.structuredContent, "no structured result: " .. json.encode(result or {}))
  local r = result.structuredContent
  if r.pid then r.pid = math.tointeger(r.pid) end
  return r
end

local function child_command(script, ...) return { client.LUAMCP, "run", script, ... } end

-- Stop the outer server and check it exited cleanly (status 0: under the
-- ASan build a leak or a use-after-free at exit shows here).
local function stop_outer(outer)
  local stderr = outer.stderr
  local code = outer:close()
  assert(code == 0, "the outer server exited with status " .. tostring(code) .. ":\n" .. stderr)
end

local function start_outer(command)
  local outer = client.spawn { command or "run", OUTER }
  outer:initialize()
  return outer
end

describe("luamcp.remote over stdio", function()
  local outer
  before_each(function() outer = start_outer() end)
  after_each(function()
    local o = outer
    outer = nil
    if o then stop_outer(o) end
  end)

  it("calls a tool of a child server and returns its answer", function()
    local r = structured(outer:call_tool("call_inner",
      { command = child_command(DEMO), tool = "add", arguments = { a = 2, b = 3 } }))
    assert.are.equal("5", r.text)
    assert.are.equal("new", r.how)
    assert.are.equal("child", r.kind)
    assert.is_true(r.pid > 0)
  end)

  it("gives two overlapping requests on one connection each its own answer", function()
    local r = structured(outer:call_tool("two_at_once", { key = "pair", command = child_command(INNER) }))
    assert.are.equal("waited quick", r.quick)
    assert.are.equal("waited slow", r.slow)
    assert.are.equal("answer", r.quick_kind)
    assert.are.equal("answer", r.slow_kind)
    assert.are.same({ "quick", "slow" }, r.order)
  end)

  it("times a wait out without losing the answer", function()
    local r = structured(outer:call_tool("timeout_then_answer", { key = "late", command = child_command(INNER) }))
    assert.are.equal("timeout", r.first)
    assert.are.equal("answer", r.second)
    assert.are.equal("waited late", r.text)
  end)

  it("answers mistakes clearly", function()
    local r = structured(outer:call_tool("bad_use", { key = "bad", command = child_command(INNER) }))
    assert.truthy(r.spawn:find("/nonexistent/program", 1, true), r.spawn)
    assert.truthy(r.both:find("command", 1, true), r.both)
    assert.truthy(r.not_json:find("not JSON", 1, true), r.not_json)
    assert.truthy(r.unknown_id:find("987654", 1, true), r.unknown_id)
  end)

  it("passes the child's stderr through, a line at a time behind its name, and a cancelled call cancels the inner one",
    function()
      outer:send { jsonrpc = "2.0", id = "slow-1", method = "tools/call",
                   params = { name = "call_slow",
                             arguments = { key = "canc", command = child_command(INNER, "--log-level", "debug"), tag = "A" } } }
      assert.is_true(client.wait_until(function() return outer.stderr:find("[canc] inner: slow A started", 1, true) end),
        "the inner call never started:\n" .. outer.stderr)
      outer:notify("notifications/cancelled", { requestId = "slow-1", reason = "spec" })
      assert.is_true(client.wait_until(function() return outer.stderr:find("[canc] inner: slow A ended", 1, true) end),
        "the inner call was not cancelled:\n" .. outer.stderr)
      assert.truthy(outer.stderr:find("cancelled by the client", 1, true), outer.stderr)
    end)

  it("sends notifications/cancelled when the outer call's deadline passes", function()
    -- Connected (and initialized) first, by a call with no deadline: the
    -- deadline then runs out on the slow call, however slow the start was.
    structured(outer:call_tool("call_inner", { key = "dl", command = child_command(INNER, "--log-level", "debug"),
                                               tool = "echo", arguments = { text = "warm" } }))
    local response = outer:request("tools/call",
      { name = "call_slow_deadline",
        arguments = { key = "dl", command = child_command(INNER, "--log-level", "debug"), tag = "B" } })
    assert.truthy(response, outer.stderr)
    assert.truthy(response.error or (response.result and response.result.isError), json.encode(response))
    assert.is_true(client.wait_until(function() return outer.stderr:find("[dl] inner: slow B ended", 1, true) end),
      "the inner call was not cancelled at the deadline:\n" .. outer.stderr)
    assert.truthy(outer.stderr:find("[dl] ", 1, true) and outer.stderr:find("cancelled by the client", 1, true),
      outer.stderr)
  end)

  it("gives a request the progress notifications whose token is its id", function()
    local r = structured(outer:call_tool("call_counting",
      { key = "count", command = child_command(DEMO), tool = "countdown", arguments = { n = 3 } }))
    assert.are.equal(3, r.progress)
    assert.are.equal("Liftoff!", r.text)
  end)

  it("ends the connection when the child exits: \"ended\" with its status, and on_message(nil, why)", function()
    local r = structured(outer:call_tool("wait_for_end", { key = "gone", command = { "sh", "-c", "exit 3" } }))
    assert.are.equal("ended", r.kind)
    assert.truthy(r.why:find("exited with status 3", 1, true), r.why)
    assert.truthy(r.ended:find("exited with status 3", 1, true), r.ended)
    assert.are.equal(3, math.tointeger(r.exit_status))
    assert.are.same({ "ended: " .. r.why }, r.seen)
  end)

  it("ends the connection when the child closes its stdout and goes on running (and stops that child)", function()
    local r = structured(outer:call_tool("wait_for_end", { key = "mute", command = { "sh", "-c", "exec 1>&-; sleep 600" } }))
    assert.are.equal("ended", r.kind)
    assert.truthy(r.why:find("closed its stdout", 1, true), r.why)
  end)

  it("hands messages no request takes to on_message", function()
    local r = structured(outer:call_tool("wait_for_end", { key = "note", command = { "sh", "-c",
      [[printf '{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}\n'; read line; exit 0]] } }))
    assert.are.equal("ended", r.kind)
    assert.are.same({ jsonrpc = "2.0", method = "notifications/tools/list_changed" }, json.decode(r.seen[1]))
  end)

  it("reads what a child wrote before it exited: its last answer comes before the end", function()
    local r = structured(outer:call_tool("wait_for_end", { key = "last", command = { "sh", "-c",
      [[read line; printf '{"jsonrpc":"2.0","id":1,"result":{"last":true}}\n'; exit 0]] } }))
    assert.are.equal("answer", r.kind)
    assert.are.same({ jsonrpc = "2.0", id = 1, result = { last = true } }, json.decode(r.why))
    assert.truthy(r.seen[1] and r.seen[1]:find("exited with status 0", 1, true), json.encode(r.seen))
  end)

  it("ends the connection, saying why, when the child sends a line over the message limit", function()
    local r = structured(outer:call_tool("wait_for_end",
      { key = "huge", command = { "sh", "-c", "head -c 5000000 /dev/zero | tr '\\0' x; sleep 30" } }))
    assert.are.equal("ended", r.kind)
    assert.truthy(r.why:find("over 4194304 bytes", 1, true), r.why)
  end)

  it("refuses connections past the limit per server", function()
    local r = structured(outer:call_tool("open_until_refused", { url = "http://127.0.0.1:9/mcp" }))
    assert.are.equal(64, math.tointeger(r.opened))
    assert.truthy(r.refusal:find("too many connections", 1, true), r.refusal)
    assert.is_true(r.again, "a connection closed still counted")
  end)

  it("closes an un-keyed connection the script dropped, once it is garbage", function()
    local r = structured(outer:call_tool("drop_and_collect", { command = child_command(INNER) }))
    assert.is_true(r.pid > 0)
    assert.is_true(client.poll_until(function() return not reaper.alive(r.pid) end, 30000),
      "child " .. r.pid .. " still runs after its connection was collected")
  end)

  it("keeps a keyed connection across a reload (same child), and kills the child when the server stops", function()
    local first = structured(outer:call_tool("call_inner",
      { key = "kept", command = child_command(INNER), tool = "echo", arguments = { text = "one" } }))
    assert.are.equal("new", first.how)
    assert.are.equal("echo one", first.text)
    outer:kill("sighup")
    assert.is_true(client.wait_until(function() return outer.stderr:find("reloaded", 1, true) end),
      "no reload:\n" .. outer.stderr)
    local second = structured(outer:call_tool("call_inner",
      { key = "kept", command = child_command(INNER), tool = "echo", arguments = { text = "two" } }))
    assert.are.equal("reused", second.how)
    assert.are.equal(first.pid, second.pid)
    assert.are.equal("echo two", second.text)
    assert.is_true(reaper.alive(first.pid), "child " .. first.pid .. " gone:\n" .. outer.stderr)
    local o = outer
    outer = nil
    stop_outer(o)
    assert.is_true(client.poll_until(function() return not reaper.alive(first.pid) end, 30000),
      "child " .. first.pid .. " outlived its server")
  end)
end)

describe("luamcp.remote over Streamable HTTP", function()
  local outer, inner
  before_each(function()
    inner = http.start { DEMO }
    outer = start_outer()
  end)
  after_each(function()
    local o, i = outer, inner
    outer, inner = nil, nil
    if i then i:stop() end
    if o then stop_outer(o) end
  end)

  it("calls a tool of an HTTP server (session id captured and sent) and reuses the connection by key", function()
    local r = structured(outer:call_tool("call_inner",
      { key = "web", url = inner.url, tool = "add", arguments = { a = 20, b = 22 } }))
    assert.are.equal("42", r.text)
    assert.are.equal("http", r.kind)
    assert.are.equal("new", r.how)
    assert.truthy(r.session_id and #r.session_id > 0, json.encode(r))
    local again = structured(outer:call_tool("call_inner",
      { key = "web", url = inner.url, tool = "add", arguments = { a = 1, b = 1 } }))
    assert.are.equal("2", again.text)
    assert.are.equal("reused", again.how)
    assert.are.equal(r.session_id, again.session_id)
  end)

  it("gives a request the progress that comes on its POST's event stream", function()
    local r = structured(outer:call_tool("call_counting",
      { key = "webcount", url = inner.url, tool = "countdown", arguments = { n = 3 } }))
    assert.are.equal(3, r.progress)
    assert.are.equal("Liftoff!", r.text)
  end)

  it("closes with DELETE; the same key then opens a new session", function()
    local first = structured(outer:call_tool("call_inner",
      { key = "web2", url = inner.url, tool = "add", arguments = { a = 1, b = 2 }, close = true }))
    assert.are.equal("3", first.text)
    local second = structured(outer:call_tool("call_inner",
      { key = "web2", url = inner.url, tool = "add", arguments = { a = 2, b = 2 } }))
    assert.are.equal("new", second.how)
    assert.are.equal("4", second.text)
    assert.are_not.equal(first.session_id, second.session_id)
  end)

  it("a cancelled outer call cancels the inner one over HTTP", function()
    local slow = http.start { INNER, "--log-level", "debug" }
    finally(function() slow:stop() end)
    outer:send { jsonrpc = "2.0", id = "slow-h", method = "tools/call",
                 params = { name = "call_slow", arguments = { key = "webslow", url = slow.url, tag = "C" } } }
    assert.is_true(client.wait_until(function() return slow:stderr():find("inner: slow C started", 1, true) end),
      "the inner call never started:\n" .. slow:stderr() .. "\n" .. outer.stderr)
    outer:notify("notifications/cancelled", { requestId = "slow-h", reason = "spec" })
    assert.is_true(client.wait_until(function() return slow:stderr():find("inner: slow C ended", 1, true) end),
      "the inner call was not cancelled:\n" .. slow:stderr())
    -- By the notification (the POST's stream is stopped too, which alone would not say so).
    assert.is_true(client.wait_until(function() return slow:stderr():find("cancelled by the client", 1, true) end),
      "no notifications/cancelled reached the inner server:\n" .. slow:stderr())
  end)

  it("turns an HTTP error status into failed, with the status", function()
    local response = outer:request("tools/call",
      { name = "call_inner", arguments = { url = inner.url .. "-nowhere", tool = "add", arguments = {} } })
    local text = json.encode(response)
    assert.truthy(text:find("failed", 1, true) and text:find("404", 1, true), text)
  end)
end)

-- A Streamable HTTP server written here (luv) for what luamcp's own server
-- does not do: the POST's event stream ends after its priming event (an
-- id and a retry, no data), and the answer comes on the GET that resumes
-- it with Last-Event-ID, as the spec's resumability section describes.
local function resuming_server()
  local srv = { requests = {}, clients = {} }
  local tcp = uv.new_tcp()
  assert(tcp:bind("127.0.0.1", 0))
  srv.port = tcp:getsockname().port
  srv.url = "http://127.0.0.1:" .. srv.port .. "/mcp"
  local call_id
  local function reply(c, status, headers, body)
    local head = { "HTTP/1.1 " .. status, "Connection: close" }
    for _, h in ipairs(headers) do head[#head + 1] = h end
    c:write(table.concat(head, "\r\n") .. "\r\n\r\n" .. (body or ""))
    c:shutdown(function() if not c:is_closing() then c:close() end end)
  end
  local function respond(c, req)
    local msg = req.body ~= "" and json.decode(req.body) or {}
    if req.head:match("^%u+ (%S+)") == "/auth" then
      reply(c, "401 Unauthorized", { "Content-Type: application/json",
                                     'WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1/prm"' },
            '{"error":"invalid_token"}')
    elseif req.method == "POST" and msg.method == "initialize" then
      reply(c, "200 OK", { "Content-Type: application/json", "Mcp-Session-Id: s-1" }, json.encode {
        jsonrpc = "2.0", id = msg.id, result = { protocolVersion = "2025-11-25", capabilities = json.decode("{}"),
                                                 serverInfo = { name = "resuming", version = "1" } } })
    elseif req.method == "POST" and msg.method == "tools/call" then
      call_id = msg.id
      reply(c, "200 OK", { "Content-Type: text/event-stream" }, "id: e1\nretry: 50\ndata:\n\n")
    elseif req.method == "GET" and req.head:lower():find("last%-event%-id: e1") then
      reply(c, "200 OK", { "Content-Type: text/event-stream" }, "id: e2\ndata: " .. json.encode {
        jsonrpc = "2.0", id = call_id, result = { content = { { type = "text", text = "resumed" } } } } .. "\n\n")
    elseif req.method == "POST" or req.method == "DELETE" then
      reply(c, "202 Accepted", { "Content-Length: 0" })
    else
      reply(c, "405 Method Not Allowed", { "Content-Length: 0" })
    end
  end
  tcp:listen(16, function()
    local c = uv.new_tcp()
    tcp:accept(c)
    srv.clients[#srv.clients + 1] = c
    local data = ""
    c:read_start(function(_, chunk)
      if not chunk then
        if not c:is_closing() then c:close() end
        return
      end
      data = data .. chunk
      local head_end = data:find("\r\n\r\n", 1, true)
      if not head_end then return end
      local head = data:sub(1, head_end - 1)
      local len = tonumber(head:lower():match("content%-length: *(%d+)")) or 0
      if #data < head_end + 3 + len then return end
      local req = { method = head:match("^(%u+)"), head = head, body = data:sub(head_end + 4, head_end + 3 + len) }
      data = ""
      srv.requests[#srv.requests + 1] = req
      respond(c, req)
    end)
  end)
  function srv.close()
    for _, c in ipairs(srv.clients) do if not c:is_closing() then c:close() end end
    tcp:close()
    uv.run("nowait")
  end
  return srv
end

describe("luamcp.remote's SSE resumption", function()
  local outer, srv
  before_each(function()
    srv = resuming_server()
    outer = start_outer()
  end)
  after_each(function()
    local o = outer
    outer = nil
    if o then stop_outer(o) end
    if srv then srv.close() end
    srv = nil
  end)

  it("resumes a POST's stream that ended before the answer with GET and Last-Event-ID (and the session id)", function()
    local r = structured(outer:call_tool("call_inner", { key = "resume", url = srv.url, tool = "anything" }))
    assert.are.equal("resumed", r.text)
    assert.are.equal("s-1", r.session_id)
    local get
    for _, req in ipairs(srv.requests) do
      if req.method == "GET" then get = req end
    end
    assert.truthy(get, "no GET")
    assert.truthy(get.head:lower():find("last%-event%-id: e1"), get.head)
    assert.truthy(get.head:lower():find("mcp%-session%-id: s%-1"), get.head)
    assert.truthy(get.head:lower():find("accept: text/event%-stream"), get.head)
  end)
end)

describe("luamcp.remote's failed answers", function()
  local outer, srv
  before_each(function()
    srv = resuming_server()
    outer = start_outer()
  end)
  after_each(function()
    local o = outer
    outer = nil
    if o then stop_outer(o) end
    if srv then srv.close() end
    srv = nil
  end)

  it("gives an error status with its WWW-Authenticate challenge and body, and sends send()'s own headers", function()
    local r = structured(outer:call_tool("probe_failed", { url = "http://127.0.0.1:" .. srv.port .. "/auth" }))
    assert.are.equal("failed", r.kind)
    assert.are.equal(401, math.tointeger(r.status))
    assert.are.equal('Bearer resource_metadata="http://127.0.0.1/prm"', r.challenge)
    assert.are.equal('{"error":"invalid_token"}', r.body)
    assert.truthy(r.why:find("401", 1, true), r.why)
    assert.truthy(srv.requests[1].head:lower():find("x%-probe: yes"), srv.requests[1].head)
  end)

  it("gives status 0 when nothing answers", function()
    local port = srv.port
    srv.close()
    srv = nil
    local r = structured(outer:call_tool("probe_failed", { url = "http://127.0.0.1:" .. port .. "/mcp" }))
    assert.are.equal("failed", r.kind)
    assert.are.equal(0, math.tointeger(r.status))
  end)
end)
