-- The web inspector's listener, as a page (or anyone on the machine) meets
-- it over HTTP on 127.0.0.1: the token, Host and Origin rules, the event
-- stream (history, resumption, live), the page's own connection, reloads,
-- and inspect --ui of other servers. The page itself is driven in a real
-- browser by spec/ui_spec.lua; docs/inspector.md is the contract.
local mcp = require "mcp_client"
local http = require "http_client"
local node = require "node_runner"
local services = require "services"
local uv = require "luv"
local cjson = mcp.json

local DEMO = "scripts/demo"

-- The page's address on stderr: base ("http://127.0.0.1:PORT"), port, token.
local function address_of(proc)
  local url
  assert(mcp.wait_until(function()
    url = proc.stderr:match("inspector at (http://%S+)")
    return url or proc.exited
  end, 60000) and url, "no inspector address on stderr:\n" .. proc.stderr)
  local port, token = url:match("^http://127%.0%.0%.1:(%d+)/%?token=(%x+)$")
  assert(port and #token == 64, "unexpected address " .. url)
  return tonumber(port), token
end

-- A copy of the demo (so a spec may edit it), served by `dev --ui` with a
-- stdio client on its pipes.
local function start_dev(extra)
  local dir = mcp.temp_dir()
  assert(mcp.sh(("cp -r %s/. %s/"):format(DEMO, dir)) == 0)
  local args = { "dev", dir, "--ui" }
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  local proc = mcp.spawn(args)
  local port, token = address_of(proc)
  return { proc = proc, port = port, token = token, dir = dir }
end

-- End of input ends dev, cleanly (a leak or a sanitizer's report shows here).
local function stop(s)
  local code = s.proc:close()
  if s.dir then mcp.remove_tree(s.dir) end
  assert.are.equal(0, code, s.proc.stderr)
end

local function request(s, opts)
  local conn = assert(http.connect(s.port))
  local r = conn:request(opts)
  conn:close()
  return r
end

local function send(s, message, headers)
  return request(s, { method = "POST", path = "/send?token=" .. s.token, body = message,
                      headers = headers or { ["Content-Type"] = "application/json" } })
end

-- An open event stream: hello first; each call to next() is the next data event.
local function open_events(s, last_event_id)
  local conn = assert(http.connect(s.port))
  conn:send_request({ path = "/events?token=" .. s.token, headers = { ["Last-Event-ID"] = last_event_id } })
  local head = conn:read_head()
  assert(head and head.status == 200, "no event stream")
  assert.truthy((head.headers["content-type"] or ""):find("text/event-stream", 1, true))
  local stream = { conn = conn, seen = {} }
  function stream.next(timeout_ms)
    while true do
      local e = conn:read_event(timeout_ms)
      if not e then return nil end
      if e.json then
        stream.seen[#stream.seen + 1] = e.json
        return e.json, e
      end
    end
  end
  -- The first event that satisfies pred (events before it are kept in seen).
  function stream.until_(pred, timeout_ms)
    uv.update_time()
    local deadline = uv.now() + (timeout_ms or 30000)
    while uv.now() < deadline do
      local e = stream.next(deadline - uv.now())
      if not e then return nil end
      if pred(e) then return e end
      uv.update_time()
    end
  end
  return stream
end

local function message_of(e) return e.kind == "message" and cjson.decode(e.text) end

local INIT = { jsonrpc = "2.0", id = 1, method = "initialize", params = {
  protocolVersion = "2025-11-25", capabilities = cjson.decode("{}"), clientInfo = { name = "spec", version = "1" } } }

describe("luamcp dev --ui", function()
  local s
  before_each(function() s = start_dev() end)
  after_each(function() stop(s) end)

  it("serves the page only with the token in its address, with a policy that keeps it to itself", function()
    local none = request(s, { path = "/" })
    assert.are.equal(401, none.status)
    assert.truthy(none.json.error:find("token", 1, true))
    assert.are.equal(401, request(s, { path = "/?token=" .. ("0"):rep(64) }).status)
    assert.are.equal(401, request(s, { path = "/?token=" .. s.token:sub(1, 63) }).status)
    local page = request(s, { path = "/?token=" .. s.token })
    assert.are.equal(200, page.status)
    assert.truthy(page.headers["content-type"]:find("text/html", 1, true))
    assert.truthy(page.body:find("<html", 1, true))
    local csp = page.headers["content-security-policy"]
    assert.truthy(csp and csp:find("default-src 'self'", 1, true) and csp:find("frame-ancestors 'none'", 1, true))
    assert.are.equal("no-referrer", page.headers["referrer-policy"])
    -- The API wants the token too (query or bearer); a bad one learns nothing.
    assert.are.equal(401, request(s, { path = "/info" }).status)
    assert.are.equal(401, request(s, { path = "/events?token=nope" }).status)
    local info = request(s, { path = "/info", headers = { Authorization = "Bearer " .. s.token } })
    assert.are.equal(200, info.status)
    assert.are.equal("dev", info.json.mode)
    assert.are.equal(401, send({ port = s.port, token = "x" }, INIT).status)
  end)

  it("refuses a Host that is not a loopback name with its port, and a foreign Origin", function()
    local path = "/info?token=" .. s.token
    assert.are.equal(403, request(s, { path = path, host = "evil.example:" .. s.port }).status)
    assert.are.equal(403, request(s, { path = path, host = "127.0.0.1:" .. (s.port == 1 and 2 or s.port - 1) }).status)
    assert.are.equal(200, request(s, { path = path, host = "localhost:" .. s.port }).status)
    -- A page of another origin cannot make the server's own page act.
    local events = open_events(s)
    local refused = send(s, INIT, { ["Content-Type"] = "application/json", Origin = "http://evil.example" })
    assert.are.equal(403, refused.status)
    assert.truthy(refused.json.error:find("origin", 1, true))
    local other_port = send(s, INIT, { ["Content-Type"] = "application/json", Origin = "http://127.0.0.1:1" })
    assert.are.equal(403, other_port.status)
    local own = send(s, INIT, { ["Content-Type"] = "application/json", Origin = "http://127.0.0.1:" .. s.port })
    assert.are.equal(202, own.status)
    -- Only the page's own request reached the server.
    local first = events.until_(function(e) return e.kind == "message" and e.dir == "c2s" end)
    assert.are.equal("initialize", message_of(first).method)
    local answer = events.until_(function(e) return e.kind == "message" and e.dir == "s2c" end)
    assert.are.equal(1, message_of(answer).id)
    events.conn:close()
  end)

  it("shows the stdio client's messages in order, and gives the page a session of its own", function()
    s.proc:initialize()
    local r = s.proc:call_tool("add", { a = 40, b = 2 })
    assert.are.equal("42", r.content[1].text)
    local events = open_events(s)
    local hello = events.next()
    assert.are.equal("hello", hello.kind)
    assert.are.equal(cjson.null, hello.initialized)
    -- History: the stdio session's initialize, then the call and its answer.
    local call = events.until_(function(e)
      local m = message_of(e)
      return m and e.conn == "stdio" and m.method == "tools/call"
    end)
    assert.is_table(call, "the stdio call is not in the history")
    assert.are.equal("c2s", call.dir)
    assert.are.equal("2025-11-25", call.version) -- the session's, whatever the history still holds
    local answer = events.until_(function(e)
      local m = message_of(e)
      return m and e.conn == "stdio" and m.id == message_of(call).id and m.result
    end)
    assert.are.equal("s2c", answer.dir)
    assert.is_true(answer.seq > call.seq and answer.t >= call.t)
    assert.are.equal("live", events.next().kind)
    -- The page's session: initialize, then a call answered on the stream.
    assert.are.equal(202, send(s, INIT).status)
    assert.are.equal(202, send(s, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
    assert.are.equal(202, send(s, { jsonrpc = "2.0", id = 2, method = "tools/call",
                                    params = { name = "add", arguments = { a = 2, b = 3 } } }).status)
    local five = events.until_(function(e)
      local m = message_of(e)
      return m and e.conn == "ui" and e.dir == "s2c" and m.id == 2
    end)
    assert.are.equal("5", message_of(five).result.content[1].text)
    -- The stdio client is not told of the page's traffic.
    assert.is_true(s.proc:silent_for(300))
    -- A page that comes back finds its session initialized.
    local info = request(s, { path = "/info?token=" .. s.token })
    assert.are.equal(1, cjson.decode(info.json.initialized).id)
    events.conn:close()
  end)

  it("resumes the stream after the last event a page saw, and says when history ends", function()
    s.proc:initialize()
    for i = 1, 5 do s.proc:call_tool("add", { a = i, b = i }) end
    local first = open_events(s)
    local seqs = {}
    local live = first.until_(function(e)
      if e.seq then seqs[#seqs + 1] = e.seq end
      return e.kind == "live"
    end)
    assert.is_table(live)
    for i = 2, #seqs do assert.are.equal(seqs[i - 1] + 1, seqs[i]) end
    first.conn:close()
    local from = seqs[#seqs - 3]
    local again = open_events(s, tostring(from))
    assert.are.equal("hello", again.next().kind)
    assert.are.equal(from + 1, again.next().seq)
    -- New events after "live" arrive as they happen.
    assert.is_table(again.until_(function(e) return e.kind == "live" end))
    s.proc:call_tool("add", { a = 1, b = 1 })
    local new = again.until_(function(e) return e.kind == "message" end)
    assert.are.equal(seqs[#seqs] + 1, new.seq)
    again.conn:close()
  end)

  it("shows each reload with the lists it changed, and a failed one with its file and line", function()
    local events = open_events(s)
    assert.is_table(events.until_(function(e) return e.kind == "live" end))
    local math_lua = s.dir .. "/math.lua"
    local original = mcp.read_file(math_lua)
    mcp.write_file(math_lua, original .. '\nmcp.tool { name = "twice", description = "2x", args = { n = "integer" },'
      .. ' handler = function(a) return a.n * 2 end }\n')
    local ok = events.until_(function(e) return e.kind == "reload" end, 60000)
    assert.is_table(ok, "no reload event")
    assert.is_true(ok.ok)
    assert.same({ "tools" }, ok.changed)
    mcp.write_file(math_lua, original .. "\nthis is not lua (\n")
    local bad = events.until_(function(e) return e.kind == "reload" end, 60000)
    assert.is_false(bad.ok)
    assert.are.equal(ok.generation, bad.generation) -- the previous one still serves
    assert.truthy(bad.error:find("math.lua:%d+:"), bad.error)
    events.conn:close()
  end)

  it("gives the page a fresh session on reset, and refuses what it must", function()
    local events = open_events(s)
    assert.are.equal(202, send(s, INIT).status)
    assert.is_table(events.until_(function(e) return e.conn == "ui" and e.dir == "s2c" end))
    assert.are.equal(202, request(s, { method = "POST", path = "/reset?token=" .. s.token }).status)
    local closed = events.until_(function(e) return e.kind == "conn" and e.state == "closed" end)
    assert.are.equal("ui", closed.conn)
    assert.is_table(events.until_(function(e) return e.kind == "conn" and e.state == "open" end))
    assert.are.equal(cjson.null, request(s, { path = "/info?token=" .. s.token }).json.initialized)
    -- The new session takes initialize again.
    assert.are.equal(202, send(s, INIT).status)
    local again = events.until_(function(e) return e.conn == "ui" and e.dir == "s2c" end)
    assert.is_table(message_of(again).result)
    -- Wrong methods, empty and oversized bodies, unknown paths.
    assert.are.equal(405, request(s, { path = "/send?token=" .. s.token }).status)
    assert.are.equal(400, request(s, { method = "POST", path = "/send?token=" .. s.token }).status)
    assert.are.equal(404, request(s, { path = "/nothing?token=" .. s.token }).status)
    local big = request(s, { method = "POST", path = "/send?token=" .. s.token, body = ("x"):rep(4194304 + 1) })
    assert.are.equal(413, big.status)
    -- A garbage message is the server's to answer, as on any transport.
    assert.are.equal(202, send(s, "{not json").status)
    local parse = events.until_(function(e) return e.conn == "ui" and e.dir == "s2c" end)
    assert.are.equal(-32700, message_of(parse).error.code)
    events.conn:close()
  end)

  it("keeps serving its client while a page never reads its stream", function()
    s.proc:initialize()
    local stalled = assert(http.connect(s.port))
    stalled.tcp:read_stop() -- the page's tab is frozen
    stalled:send_request({ path = "/events?token=" .. s.token })
    local text = ("y"):rep(200000)
    for i = 1, 60 do
      local r = s.proc:call_tool("add", { a = i, b = 0 }, { note = text })
      assert.are.equal(tostring(i), r.content[1].text)
    end
    -- Another page still gets everything, the newest included.
    local events = open_events(s)
    assert.is_table(events.until_(function(e) return e.kind == "live" end))
    s.proc:call_tool("add", { a = 7, b = 7 })
    local last = events.until_(function(e)
      local m = message_of(e)
      return m and m.result and m.result.content and m.result.content[1].text == "14"
    end)
    assert.is_table(last)
    events.conn:close()
    stalled:close()
  end)
end)

describe("luamcp dev --ui while a handler computes", function()
  it("holds the page's messages and its reset until the handler stops, in order", function()
    local proc = mcp.spawn({ "dev", "spec/fixtures/hardening", "--ui" })
    local port, token = address_of(proc)
    local s = { port = port, token = token, proc = proc }
    proc:initialize()
    proc:send({ jsonrpc = "2.0", id = 99, method = "tools/call", params = { name = "spin", arguments = {} } })
    assert.is_true(mcp.wait_until(function()
      uv.run("nowait")
      for _, line in ipairs(proc.lines) do if line:find("spinning", 1, true) then return true end end
    end, 30000), "the spin tool did not start")
    local events = open_events(s)
    assert.is_table(events.until_(function(e) return e.kind == "live" end))
    -- The loop takes turns inside the spinning handler: the page is answered
    -- at once, but nothing of its own runs until the handler stops.
    assert.are.equal(202, send(s, INIT).status)
    assert.are.equal(202, request(s, { method = "POST", path = "/reset?token=" .. token }).status)
    local again = { jsonrpc = "2.0", id = 2, method = "initialize", params = INIT.params }
    assert.are.equal(202, send(s, again).status)
    proc:notify("notifications/cancelled", { requestId = 99 })
    local order = {}
    local answer = events.until_(function(e)
      if e.conn == "ui" then order[#order + 1] = e.kind == "conn" and e.state or message_of(e).id end
      return e.conn == "ui" and e.dir == "s2c"
    end)
    assert.is_table(answer, "the page's initialize was never answered: " .. cjson.encode(events.seen) .. "\n" .. proc.stderr:sub(-3000))
    assert.same({ "closed", "open", 2, 2 }, order) -- the first initialize was for the session the reset ended
    -- The stdio client is served as before (a cancelled call gets no answer).
    assert.is_table(proc:request("ping", {}).result)
    events.conn:close()
    stop(s)
  end)
end)

describe("luamcp inspect --ui", function()
  it("serves a folder to the page alone, and stops cleanly", function()
    local proc = mcp.spawn({ "inspect", "--ui", DEMO })
    local port, token = address_of(proc)
    local s = { port = port, token = token }
    local events = open_events(s)
    assert.are.equal("inspect", events.next().mode)
    assert.are.equal(202, send(s, INIT).status)
    local answer = events.until_(function(e) return e.conn == "ui" and e.dir == "s2c" end)
    assert.are.equal("demo", message_of(answer).result.serverInfo.name)
    events.conn:close()
    local code, signal = proc:terminate(30000)
    assert.are.equal(0, code, proc.stderr)
    assert.are.equal(0, signal)
  end)

  local function drive(s)
    local events = open_events(s)
    assert.are.equal("inspect", events.next().mode)
    assert.are.equal(202, send(s, INIT).status)
    local init = events.until_(function(e) return e.conn == "ui" and e.dir == "s2c" end)
    assert.is_table(message_of(init).result, init.text)
    assert.are.equal(202, send(s, { jsonrpc = "2.0", method = "notifications/initialized" }).status)
    assert.are.equal(202, send(s, { jsonrpc = "2.0", id = 2, method = "tools/list" }).status)
    local list = events.until_(function(e)
      local m = message_of(e)
      return m and e.dir == "s2c" and m.id == 2
    end)
    return message_of(list).result.tools, events
  end

  it("drives the TypeScript SDK's example server over stdio", function()
    if not uv.fs_access(node.NODE, "X") then return pending("Node 22 is not installed (spec/node_modules)") end
    local example = "spec/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/progressExample.js"
    local proc = mcp.spawn({ "inspect", "--ui", "--", node.NODE, example })
    local port, token = address_of(proc)
    local s = { port = port, token = token }
    local tools, events = drive(s)
    assert.are.equal("count", tools[1].name)
    -- The page's reset starts the server again.
    assert.are.equal(202, request(s, { method = "POST", path = "/reset?token=" .. token }).status)
    assert.is_table(events.until_(function(e) return e.kind == "conn" and e.state == "open" end))
    assert.are.equal(202, send(s, INIT).status)
    local again = events.until_(function(e) return e.dir == "s2c" and message_of(e).id == 1 end)
    assert.is_table(message_of(again).result)
    events.conn:close()
    local code = proc:terminate(30000)
    assert.are.equal(0, code, proc.stderr)
  end)

  it("drives the TypeScript SDK's example server over Streamable HTTP", function()
    if not uv.fs_access(node.NODE, "X") then return pending("Node 22 is not installed (spec/node_modules)") end
    local mcp_port, auth_port = services.free_port(), services.free_port()
    local example = "spec/node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js"
    local server = mcp.spawn({ example }, { bin = node.NODE,
      env = { "MCP_PORT=" .. mcp_port, "MCP_AUTH_PORT=" .. auth_port, "PATH=" .. os.getenv("PATH") } })
    assert(mcp.wait_until(function() return server.stdout_closed or #server.lines > 0 or server.exited end, 60000))
    local proc = mcp.spawn({ "inspect", "--ui", "--http", "http://127.0.0.1:" .. mcp_port .. "/mcp" })
    local port, token = address_of(proc)
    local tools, events = drive({ port = port, token = token })
    local names = {}
    for _, t in ipairs(tools) do names[t.name] = true end
    assert.is_true(names.greet and names["collect-user-info"], cjson.encode(tools))
    -- A call's answer and its notifications come back on the page's stream.
    assert.are.equal(202, send({ port = port, token = token }, { jsonrpc = "2.0", id = 3, method = "tools/call",
      params = { name = "greet", arguments = { name = "Ada" } } }).status)
    local greeting = events.until_(function(e) return e.dir == "s2c" and message_of(e).id == 3 end)
    assert.truthy(message_of(greeting).result.content[1].text:find("Ada", 1, true))
    events.conn:close()
    assert.are.equal(0, (proc:terminate(30000)), proc.stderr)
    server:terminate(5000)
  end)

  it("says what it needs", function()
    local code, _, err = mcp.sh(mcp.LUAMCP .. " inspect --ui --http")
    assert.are.equal(2, code)
    assert.truthy(err:find("--http needs a URL", 1, true))
    code, _, err = mcp.sh(mcp.LUAMCP .. " inspect --ui --ui-port 99999 --http http://127.0.0.1:1/mcp")
    assert.are.equal(2, code)
  end)
end)
