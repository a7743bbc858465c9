-- Non-blocking subprocesses and files, and per-call limits: deadlines,
-- memory, and cancellation that stops running code.

local client = require "mcp_client"
local uv = require "luv"
local cjson = client.json

local function alive(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local stat = f:read("a")
  f:close()
  return stat:match("^%d+ %b() (%a)") ~= "Z" -- a zombie is not alive either, but is a leak
end

local function exists(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if f then f:close() return true end
  return false
end

describe("limits", function()
  local server
  before_each(function()
    server = client.spawn { "run", "spec/fixtures/limits" }
    server:initialize()
  end)
  after_each(function() server:close() end)

  it("runs 200 children at once", function()
    -- A barrier, not a stopwatch, that costs nothing while it waits: each
    -- child opens a FIFO this spec holds open, marks itself in a folder, and
    -- blocks reading it; once all 200 marks are there the spec closes its
    -- end and every child reads end-of-file and exits. Run one after
    -- another, the first would block for ever and the marks never reach 200.
    -- Generous limits (the server's --timeout and each exec's): a loaded
    -- machine starts 200 programs slowly.
    server:close()
    server = client.spawn { "run", "--timeout", "600000", "spec/fixtures/limits" }
    server:initialize()
    local dir = client.temp_dir()
    assert.are.equal(0, (client.sh("mkfifo " .. dir .. "/gate")))
    local gate = assert(uv.fs_open(dir .. "/gate", "r+", 0)) -- read-write: never blocks, and is the only writer
    local script = 'exec 3<"$1/gate"; : >"$1/in.$2"; read -r _ <&3; exit 0'
    for i = 1, 200 do
      server:send({ jsonrpc = "2.0", id = i, method = "tools/call",
                    params = { name = "run", arguments = { argv = { "sh", "-c", script, "sh", dir, tostring(i) },
                                                           timeout_ms = 600000 } } })
    end
    local function arrived()
      local n, req = 0, uv.fs_scandir(dir)
      while req and uv.fs_scandir_next(req) do n = n + 1 end
      return n - 1 -- the gate
    end
    local all_in = client.poll_until(function() return arrived() >= 200 end, 300000, 200)
    uv.fs_close(gate) -- opens the barrier (and frees the children if the assertion below fails)
    assert.is_true(all_in, arrived() .. " of 200 children running at once")
    local done = 0
    for _ = 1, 200 do
      local msg = server:read(300000)
      assert(msg, "missing response")
      assert(msg.result and msg.result.structuredContent, client.json.encode(msg))
      assert.is_false(msg.result.structuredContent.timed_out)
      assert.are.equal(0, msg.result.structuredContent.code)
      done = done + 1
    end
    assert.are.equal(200, done)
    client.remove_tree(dir)
  end)

  it("cuts 10 MB of output at max_output_bytes and drains the rest", function()
    local r = server:call_tool("run", { argv = { "head", "-c", "10000000", "/dev/zero" }, max_output_bytes = 1000 })
    local out = r.structuredContent
    assert.are.equal(0, out.code)
    assert.are.equal(1000, out.length)
    assert.is_true(out.truncated)
  end)

  it("passes stdin, env and cwd, and never uses a shell", function()
    local out = server:call_tool("run", { argv = { "cat" }, stdin = "piped in" }).structuredContent
    assert.are.equal("piped in", out.stdout)
    out = server:call_tool("run", { argv = { "env" }, env = { ONLY = "this" } }).structuredContent
    assert.are.equal("ONLY=this\n", out.stdout)
    out = server:call_tool("run", { argv = { "pwd" }, cwd = "/tmp" }).structuredContent
    assert.are.equal("/tmp\n", out.stdout)
    out = server:call_tool("run", { argv = { "echo", "$HOME;", "`id`" } }).structuredContent
    assert.are.equal("$HOME; `id`\n", out.stdout)
    out = server:call_tool("run", { argv = { "/no/such/program" } }).structuredContent
    assert.are.equal("ENOENT", out.code)
  end)

  it("exits cleanly right after failing to start a program (signals nobody else)", function()
    local out = server:call_tool("run", { argv = { "/no/such/program" } }).structuredContent
    assert.are.equal("ENOENT", out.code)
    -- The server shuts down while that op's handles may still be closing:
    -- it must not signal "process 0" (its own group, this test runner too).
    assert.are.equal(0, server:close())
    server = client.spawn { "run", "spec/fixtures/limits" } -- for after_each
  end)

  it("kills a child at its timeout and leaves no zombie", function()
    local out = server:call_tool("run", { argv = { "sleep", "30" }, timeout_ms = 200 }).structuredContent
    assert.is_true(out.timed_out)
    assert.are.equal(15, out.signal) -- SIGTERM
    assert.is_true(client.poll_until(function() return not exists(out.pid) end, 30000),
      "child " .. out.pid .. " still in /proc")
  end)

  it("streams output as it arrives", function()
    local r = server:call_tool("run_streaming", { argv = { "sh", "-c", "echo one; sleep 0.2; echo two" } })
    assert.are.equal(2, r.structuredContent.chunks)
    local logs = server:notifications_named("notifications/message")
    assert.are.equal("stdout: one\n", logs[1].params.data)
    assert.are.equal("stdout: two\n", logs[2].params.data)
  end)

  it("kills the child of a cancelled call", function()
    server:send({ jsonrpc = "2.0", id = "c", method = "tools/call",
                  params = { name = "run_streaming", arguments = { argv = { "sh", "-c", "echo $$; exec sleep 30" } } } })
    local note = server:read()
    local pid = tonumber(note.params.data:match("(%d+)"))
    assert.is_true(alive(pid))
    server:notify("notifications/cancelled", { requestId = "c" })
    local gone = client.poll_until(function() return not exists(pid) end, 30000)
    assert.is_true(gone, "child " .. pid .. " still running 30 s after the cancellation")
    assert.is_true(server:silent_for(200)) -- no response for a cancelled call
  end)

  it("stops `while true do end` at the deadline", function()
    local t0 = uv.hrtime()
    local r = server:call_tool("spin", {})
    local ms = (uv.hrtime() - t0) / 1e6
    assert.is_true(r.isError)
    assert.are.equal("stopped: the call exceeded its time limit of 500 ms", r.content[1].text)
    print(("\n# spin stopped after %.1f ms (limit 500 ms)"):format(ms))
  end)

  it("stops a loop around pcall at the deadline", function()
    local t0 = uv.hrtime()
    local r = server:call_tool("spin_pcall", {})
    local ms = (uv.hrtime() - t0) / 1e6
    assert.is_true(r.isError)
    assert.truthy(r.content[1].text:find("time limit of 500 ms", 1, true))
    print(("\n# spin_pcall stopped after %.1f ms (limit 500 ms)"):format(ms))
  end)

  it("stops loops inside coroutines the handler created", function()
    for _, wrap in ipairs { true, false } do
      local r = server:call_tool("spin_in_coroutines", { wrap = wrap })
      assert.is_true(r.isError)
      assert.truthy(r.content[1].text:find("time limit of 500 ms", 1, true), r.content[1].text)
    end
    assert.are.same({}, server:request("ping", {}).result)
  end)

  it("stops a backtracking string pattern at the deadline (find, match, gmatch, gsub, and around pcall)", function()
    for _, fn in ipairs { "find", "match", "gmatch", "gsub", "pcall" } do
      local r = server:call_tool("backtrack", { fn = fn })
      assert.is_true(r.isError, fn)
      assert.truthy(r.content[1].text:find("time limit of 500 ms", 1, true), fn .. ": " .. r.content[1].text)
    end
    assert.are.same({}, server:request("ping", {}).result)
  end)

  it("stops a backtracking string pattern when the call is cancelled, and answers others meanwhile", function()
    server:send({ jsonrpc = "2.0", id = "bt", method = "tools/call", params = { name = "backtrack_forever", arguments = { fn = "gsub" } } })
    assert.is_true(server:wait_stderr("backtrack_forever started"), server.stderr)
    -- While it matches, the loop still turns: the cancellation is read.
    server:notify("notifications/cancelled", { requestId = "bt" })
    assert.are.same({}, server:request("ping", {}).result)
    assert.is_true(server:silent_for(200)) -- and the cancelled call is not answered
  end)

  it("stops a waiting call at its deadline", function()
    local r = server:call_tool("sleep_long", {})
    assert.are.equal("stopped: the call exceeded its time limit of 300 ms", r.content[1].text)
  end)

  it("stops computing code when the call is cancelled", function()
    server:send({ jsonrpc = "2.0", id = "spin", method = "tools/call", params = { name = "spin_counting", arguments = {} } })
    assert.is_true(server:wait_stderr("spin_counting started"), server.stderr)
    server:notify("notifications/cancelled", { requestId = "spin" })
    -- The server answers again, and the loop is not running any more.
    assert.are.same({}, server:request("ping", {}).result)
    local first = tonumber(server:call_tool("counter", {}).content[1].text)
    client.sleep(100)
    local second = tonumber(server:call_tool("counter", {}).content[1].text)
    assert.is_true(first > 0)
    assert.are.equal(first, second)
    assert.is_nil(server.other) -- and no response was sent for the cancelled call
  end)

  it("answers a 1 GiB string with not enough memory, then a ping", function()
    local r = server:call_tool("big_string", {})
    assert.is_true(r.isError)
    assert.truthy(r.content[1].text:find("not enough memory", 1, true))
    assert.are.same({}, server:request("ping", {}).result)
  end)

  it("survives cjson.encode of 341 MiB", function()
    local r = server:call_tool("cjson_huge", {})
    assert.is_true(r.isError)
    assert.truthy(r.content[1].text:find("not enough memory", 1, true))
    assert.are.same({}, server:request("ping", {}).result)
  end)

  it("refuses os.execute, saying why", function()
    local r = server:call_tool("os_execute", {})
    assert.truthy(r.content[1].text:find("os.execute is not available in luamcp: it blocks every other request", 1, true))
  end)

  it("reads, writes, lists and stats files on the thread pool", function()
    local dir = client.temp_dir()
    local out = server:call_tool("files", { dir = dir }).structuredContent
    assert.are.equal("hello", out.data)
    assert.are.equal(3, out.size)
    assert.are.equal("file", out.type)
    assert.are.same({ "a.txt:file", "b.bin:file" }, out.names)
    assert.are.equal("nil", out.missing)
    assert.are.equal("ENOENT", out.code)
    assert.truthy(out.err:find("/nope: No such file or directory", 1, true))
    client.remove_tree(dir)
  end)

  it("runs work concurrently with mcp.spawn and mcp.all", function()
    local out = server:call_tool("concurrent", {}).structuredContent
    assert.are.equal(42, out.spawned)
    assert.are.same({ "a", "b", 0 }, out.all)
    assert.are.equal("boom", out.failed)
    assert.is_true(out.done)
    -- At once, not one after another: all three started before any ended,
    -- and the shorter sleep ended first (the exec ends wherever it does).
    assert.are.same({ "start a", "start b", "start exec" }, { out.order[1], out.order[2], out.order[3] })
    local at = {}
    for i, what in ipairs(out.order) do at[what] = i end
    assert.is_true(at.exec and at.b < at.a, table.concat(out.order, ", "))
  end)
end)

describe("limits over HTTP", function()
  local http = require "http_client"
  local server, session
  before_each(function()
    server = http.start { "spec/fixtures/limits" }
    session = server:initialize()
  end)
  after_each(function() server:stop_cleanly() end)

  local function headers() return { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" } end

  local function start_spin(id)
    local conn = server:connect()
    conn:send_request { method = "POST", headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json",
      ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" },
      body = { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = "spin_counting", arguments = {} } } }
    assert.is_true(server:wait_stderr("spin_counting started"), server:stderr())
    return conn
  end

  local function counter_is_still()
    local r1 = server:post({ jsonrpc = "2.0", id = 90, method = "tools/call", params = { name = "counter" } }, headers())
    client.sleep(100)
    local r2 = server:post({ jsonrpc = "2.0", id = 91, method = "tools/call", params = { name = "counter" } }, headers())
    local a = tonumber(r1.json.result.content[1].text)
    local b = tonumber(r2.json.result.content[1].text)
    return a > 0 and a == b
  end

  it("stops computing code when the call is cancelled", function()
    local conn = start_spin("spin")
    local r = server:post({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = "spin" } }, headers())
    assert.are.equal(202, r.status)
    assert.is_true(counter_is_still())
    -- The cancelled call's exchange ends without an answer.
    local response = conn:read_response(30000)
    assert.is_truthy(response)
    assert.are.same({}, response.events)
  end)

  it("stops computing code when its session is deleted", function()
    start_spin("spin")
    local r = server:request { method = "DELETE", headers = headers() }
    assert.are.equal(200, r.status)
    assert.are.equal(404, server:post({ jsonrpc = "2.0", id = 1, method = "ping" }, headers()).status)
    local other = server:initialize()
    local c1 = server:post({ jsonrpc = "2.0", id = 2, method = "tools/call", params = { name = "counter" } },
      { ["Mcp-Session-Id"] = other })
    client.sleep(100)
    local c2 = server:post({ jsonrpc = "2.0", id = 3, method = "tools/call", params = { name = "counter" } },
      { ["Mcp-Session-Id"] = other })
    assert.are.equal(c1.json.result.content[1].text, c2.json.result.content[1].text)
  end)
end)
