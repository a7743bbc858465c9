-- luamcp.remote (runtime/app/lua_remote.c), the C side of the server-side
-- mcp.client, driven directly by a fixture's tools (no mcp.client Lua
-- layer): a tool of the outer server connects to an inner MCP server, a
-- child over stdio or a URL over Streamable HTTP, and waits for answers
-- inside its handler while the loop keeps serving.

local client = require "mcp_client"
local http = require "http_client"
local reaper = require "reaper"
local json = client.json

local OUTER = "spec/fixtures/remote_conn/outer"
local INNER = "spec/fixtures/remote_conn/inner"
local DEMO = "scripts/demo"

local function structured(result)
  assert(result and result.structuredContent, "no structured result: " .. json.encode(result or {}))
  local r = result.structuredContent
  if r.pid then r.pid = math.tointeger(r.pid) end
  return r
end

local function child_command(script) return { client.LUAMCP, "run", script } end

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
                   params = { name = "call_slow", arguments = { key = "canc", command = child_command(INNER), tag = "A" } } }
      assert.is_true(client.wait_until(function() return outer.stderr:find("[canc] inner: slow A started", 1, true) end),
        "the inner call never started:\n" .. outer.stderr)
      outer:notify("notifications/cancelled", { requestId = "slow-1", reason = "spec" })
      assert.is_true(client.wait_until(function() return outer.stderr:find("[canc] inner: slow A ended", 1, true) end),
        "the inner call was not cancelled:\n" .. outer.stderr)
    end)

  it("sends notifications/cancelled when the outer call's deadline passes", function()
    local response = outer:request("tools/call",
      { name = "call_slow_deadline", arguments = { key = "dl", command = child_command(INNER), tag = "B" } })
    assert.truthy(response, outer.stderr)
    assert.truthy(response.error or (response.result and response.result.isError), json.encode(response))
    assert.is_true(client.wait_until(function() return outer.stderr:find("[dl] inner: slow B ended", 1, true) end),
      "the inner call was not cancelled at the deadline:\n" .. outer.stderr)
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

  it("turns an HTTP error status into failed, with the status", function()
    local response = outer:request("tools/call",
      { name = "call_inner", arguments = { url = inner.url .. "-nowhere", tool = "add", arguments = {} } })
    local text = json.encode(response)
    assert.truthy(text:find("failed", 1, true) and text:find("404", 1, true), text)
  end)
end)
