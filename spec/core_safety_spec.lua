-- Issue 13's attacks on the concurrency core, each of which killed, froze
-- or bloated the server before: a child process ending while another
-- handler computes (use after free), tens of thousands of calls in flight
-- (deferred resumes recursed until the stack overflowed), and input sent
-- while a handler computes (held without limit). `make test` runs this
-- file against the release build and the ASan/UBSan build.

local client = require "mcp_client"
local http = require "http_client"
local uv = require "luv"
local cjson = client.json

local SCRIPT = [[
local mcp = require "mcp"
local object = { type = "object" }
-- With a tag, child and compute say on stderr when they start: the events
-- the tests wait for.
mcp.tool { name = "child", inputSchema = object, handler = function(args)
  if args.tag then io.stderr:write("child " .. args.tag .. " started\n") end
  return mcp.exec { argv = { "sleep", "0.1" } }.code
end }
mcp.tool { name = "compute", inputSchema = object, handler = function(args)
  if args.tag then io.stderr:write("compute " .. args.tag .. " started\n") end
  local parts, deadline = {}, os.clock() + (args.ms or 300) / 1000
  while os.clock() < deadline do parts[#parts % 100 + 1] = string.rep("z", 200) .. #parts end
  return "computed"
end }
mcp.tool { name = "big", inputSchema = object, handler = function(args) return string.rep("b", args.n) end }
mcp.tool { name = "sleep", inputSchema = object, handler = function(args)
  mcp.sleep(args.ms or 1000)
  return "slept"
end }
]]

local ASAN = (os.getenv("LUAMCP") or ""):find("asan", 1, true) ~= nil

local function sanitizer_report(text)
  return text:match("ERROR: AddressSanitizer[^\n]*") or text:match("runtime error:[^\n]*")
end

local rss_kb = http.rss_kb

local function call(id, name, arguments)
  return cjson.encode { jsonrpc = "2.0", id = id, method = "tools/call", params = { name = name, arguments = arguments or {} } }
end

describe("the concurrency core", function()
  local dir
  setup(function()
    dir = client.temp_dir()
    client.write_file(dir .. "/tools.lua", SCRIPT)
  end)
  teardown(function() client.remove_tree(dir) end)

  it("survives a child process that ends while another handler computes (stdio)", function()
    local server = client.spawn { "run", dir }
    server:initialize()
    for round = 1, 5 do
      -- The child starts first and ends (after 0.1 s) while the other
      -- handler computes (0.4 s).
      server:send(call("e" .. round, "child"))
      server:send(call("c" .. round, "compute", { ms = 400 }))
      local got = {}
      for _ = 1, 2 do
        local msg = server:read(20000)
        assert.is_table(msg, "no answer; the server " .. (server.exited and "died" or "hangs") .. ":\n" .. server.stderr)
        got[msg.id] = msg.result.content[1].text
      end
      assert.are.same({ ["c" .. round] = "computed", ["e" .. round] = "0" }, got)
    end
    local pong = server:request("ping", nil, 10000)
    assert.is_table(pong and pong.result, server.stderr)
    server:close()
    assert.is_nil(sanitizer_report(server.stderr), server.stderr)
  end)

  it("survives a child process that ends while another session's handler computes (HTTP)", function()
    local server = http.start({ dir })
    local a = server:initialize()
    local b = server:initialize()
    local headers = function(s)
      return { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json", ["Mcp-Session-Id"] = s,
               ["MCP-Protocol-Version"] = "2025-11-25" }
    end
    for round = 1, 5 do
      local ca, cb = server:connect(), server:connect()
      -- The child starts first (the tool says so), then the computation.
      cb:send_request { method = "POST", headers = headers(b), body = call(round, "child", { tag = tostring(round) }) }
      assert.is_true(server:wait_stderr("child " .. round .. " started"), server:stderr())
      ca:send_request { method = "POST", headers = headers(a), body = call(round, "compute", { ms = 400 }) }
      local ra, rb = ca:read_response(20000), cb:read_response(20000)
      assert.is_table(ra, "no answer to the computation:\n" .. server:stderr())
      assert.is_table(rb, "no answer to the exec:\n" .. server:stderr())
      assert.are.equal("computed", ra.json.result.content[1].text)
      assert.are.equal("0", rb.json.result.content[1].text)
      ca:close()
      cb:close()
    end
    assert.is_true(server:alive(), server:stderr())
    local stderr = server:stderr()
    local code, signal = server:stop()
    assert.are.equal(0, signal)
    assert.is_nil(sanitizer_report(stderr), stderr)
  end)

  it("cancels a request held behind a computation, with its cancellation (stdio)", function()
    local server = client.spawn { "run", dir }
    server:initialize()
    -- While "c" computes, the request "s" and then its cancellation are
    -- held; the scan of held input for cancellations sees the cancellation
    -- before "s" has started, and "s" must still end unanswered.
    server:send(call("c", "compute", { ms = 300 }))
    server:send(call("s", "sleep", { ms = 60000 }))
    server:send(cjson.encode { jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = "s" } })
    server:send(cjson.encode { jsonrpc = "2.0", id = "p", method = "ping" })
    local ids = {}
    for _ = 1, 2 do
      local msg = server:read(20000)
      assert.is_table(msg, server.stderr)
      ids[#ids + 1] = msg.id
    end
    assert.are.same({ "c", "p" }, ids)
    -- "s" is not running: nothing else arrives, and a later request is answered.
    local pong = server:request("ping", nil, 10000)
    assert.is_table(pong and pong.result, server.stderr)
    server:close()
    assert.is_nil(server:read(0))
  end)

  it("drops a request whose cancellation came first on another connection (HTTP)", function()
    local server = http.start({ dir })
    local session = server:initialize()
    local headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json", ["Mcp-Session-Id"] = session,
                      ["MCP-Protocol-Version"] = "2025-11-25" }
    local r = server:request { method = "POST", headers = headers, body = cjson.encode {
      jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = "late" } } }
    assert.are.equal(202, r.status)
    -- The request arrives after its cancellation: its exchange ends at once
    -- with no result instead of sleeping for a minute.
    local conn = server:connect()
    conn:send_request { method = "POST", headers = headers, body = call("late", "sleep", { ms = 60000 }) }
    local answer = conn:read_response(20000)
    assert.is_table(answer, server:stderr())
    assert.are.equal(200, answer.status)
    assert.is_true(answer.complete)
    for _, e in ipairs(answer.events or {}) do assert.is_nil(e.json and e.json.result) end
    assert.is_nil(answer.json)
    conn:close()
    local stderr = server:stderr()
    local code, signal = server:stop()
    assert.are.equal(0, signal)
    assert.is_nil(sanitizer_report(stderr), stderr)
  end)

  it("survives a client's error response with id null (stdio and HTTP)", function()
    local bad = cjson.encode { jsonrpc = "2.0", id = cjson.null, error = { code = -32700, message = "Parse error" } }
    local float_id = '{"jsonrpc":"2.0","id":4.5,"result":{}}'
    local server = client.spawn { "run", dir }
    server:initialize()
    server:send(bad)
    server:send(float_id)
    local pong = server:request("ping", nil, 10000)
    assert.is_table(pong and pong.result, server.stderr)
    server:close()
    assert.truthy(server.stderr:find("no usable id", 1, true), server.stderr)

    local web = http.start({ dir })
    local session = web:initialize()
    local headers = { ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" }
    assert.are.equal(202, web:post(bad, headers).status)
    assert.are.equal(202, web:post(float_id, headers).status)
    assert.are.equal(200, web:post({ jsonrpc = "2.0", id = 1, method = "ping" }, headers).status)
    local stderr = web:stderr()
    local code, signal = web:stop()
    assert.are.equal(0, signal)
    assert.is_nil(sanitizer_report(stderr), stderr)
  end)

  it("survives clients that go away while their request computes (HTTP)", function()
    -- The connection ends during the loop turns a computing handler takes:
    -- it must not be freed under the request being handled.
    local server = http.start({ dir })
    local session = server:initialize()
    local headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json", ["Mcp-Session-Id"] = session,
                      ["MCP-Protocol-Version"] = "2025-11-25" }
    for round = 1, 6 do
      -- A client that pipelines a big answer it does not read and a
      -- computation, then goes away (a reset, with unread data) while the
      -- computation runs: the big answer's write fails inside the turns
      -- the computation takes.
      local conn = server:connect()
      conn.tcp:read_stop()
      conn:write(http.format_request(server.port, { method = "POST", headers = headers, body = call("b" .. round, "big", { n = 4000000 }) })
                 .. http.format_request(server.port, { method = "POST", headers = headers,
                                                       body = call(round, "compute", { ms = 400, tag = tostring(round) }) }))
      assert.is_true(server:wait_stderr("compute " .. round .. " started"), server:stderr())
      conn:close()
    end
    local r = server:post({ jsonrpc = "2.0", id = "after", method = "ping" }, headers, { timeout_ms = 20000 })
    assert.is_table(r, "the server is gone:\n" .. server:stderr())
    assert.are.equal(200, r.status)
    local stderr = server:stderr()
    local code, signal = server:stop()
    assert.are.equal(0, signal)
    assert.is_nil(sanitizer_report(stderr), stderr)
  end)

  it("answers every one of a huge number of calls in flight at once", function()
    -- 120,000 calls overflowed the stack of the release build through
    -- recursive deferred resumes; under ASan fewer suffice to show the same
    -- paths and keep the run short.
    local count = ASAN and 20000 or 120000
    local server = client.spawn { "run", dir }
    server:initialize()
    local lines = {}
    for i = 1, count do lines[i] = call(i, "sleep", { ms = 1000 }) end
    -- One computing call first, so that the sleeps' wake-ups pile up in
    -- the deferred queue while it runs.
    server:send(call("compute", "compute", { ms = 1500 }))
    for i = 1, count, 5000 do
      server:write(table.concat(lines, "\n", i, math.min(i + 4999, count)) .. "\n")
    end
    local answered, seen = 0, {}
    local ok = client.wait_until(function()
      while #server.lines > 0 do
        local msg = cjson.decode(table.remove(server.lines, 1))
        if type(msg.id) == "number" and not seen[msg.id] and msg.result then
          seen[msg.id] = true
          answered = answered + 1
        end
      end
      return answered == count or server.exited
    end, 240000)
    assert.is_false(server.exited, ("the server died after %d answers (signal %s):\n%s")
      :format(answered, tostring(server.exit_signal), server.stderr:sub(-2000)))
    assert.is_true(ok, ("%d of %d answered"):format(answered, count))
    assert.are.equal(count, answered)
    server:close()
    assert.is_nil(sanitizer_report(server.stderr), server.stderr:sub(-3000))
  end)

  it("stops reading stdin instead of holding everything sent while a handler computes", function()
    local server = client.spawn { "run", dir }
    server:initialize()
    local before = rss_kb(server.pid)
    server:send(call("long", "compute", { ms = 4000, tag = "long" }))
    assert.is_true(server:wait_stderr("compute long started"), server.stderr)
    -- 128 MB of pings, written without waiting: the pipe fills and the
    -- writes wait in the client while the server computes.
    local ping = '{"jsonrpc":"2.0","id":"p","method":"ping"}\n'
    local chunk = string.rep(ping, math.floor(1024 * 1024 / #ping))
    local written, pending = 0, 0
    local peak = before
    for _ = 1, 128 do
      pending = pending + 1
      server.stdin:write(chunk, function() pending = pending - 1 end)
      written = written + #chunk
    end
    -- While the computation runs, the server's memory stays bounded.
    client.wait_until(function()
      local now = rss_kb(server.pid)
      if now and now > peak then peak = now end
      return #server.lines > 0 or server.exited
    end, 60000)
    assert.is_false(server.exited, server.stderr)
    if not ASAN then -- ASan's quarantine keeps freed memory: RSS means nothing there
      assert.is_true(peak - before < 64 * 1024, ("RSS grew by %d kB while input was held"):format(peak - before))
    end
    -- Afterwards every ping is answered.
    local pongs, want = 0, 128 * math.floor(1024 * 1024 / #ping)
    local ok = client.wait_until(function()
      while #server.lines > 0 do
        local msg = cjson.decode(table.remove(server.lines, 1))
        if msg.id == "p" then pongs = pongs + 1 end
      end
      return pongs == want or server.exited
    end, 600000)
    assert.is_true(ok, ("%d of %d pings answered"):format(pongs, want))
    assert.are.equal(0, pending)
    server:close()
  end)
end)
