-- A bounded soak of the concurrency core: for SOAK_SECONDS (default 60)
-- one server takes, all at once, child processes (mcp.exec), sleeps,
-- handlers that compute, tasks spawned inside a call, cancellations of
-- running computations, reloads (SIGHUP) and pipelined HTTP requests on
-- several keep-alive connections, while a second server does the same mix
-- over stdio. Every request that was not cancelled must be answered with
-- the right result, the servers must survive, and (under the ASan build,
-- as `make test` runs it: tag #soak, left out of the release run) print
-- no sanitizer report. It stops by itself:
-- the run is bounded in time and every wait is bounded.

local client = require "mcp_client"
local http = require "http_client"
local uv = require "luv"
local cjson = client.json

local SECONDS = tonumber(os.getenv("SOAK_SECONDS") or "60")
local CONNECTIONS = 4
local PIPELINE = 8 -- requests written at once on one connection

local SCRIPT = [[
local mcp = require "mcp"
local generation = mcp.state("generation", { n = 0 })
generation.n = generation.n + 1
local object = { type = "object" }

mcp.tool { name = "exec", inputSchema = object, handler = function(args)
  local r = mcp.exec { argv = { "sh", "-c", "echo " .. args.n } }
  return "exec " .. r.stdout:gsub("%s+$", "") .. " " .. r.code
end }

mcp.tool { name = "sleep", inputSchema = object, handler = function(args)
  mcp.sleep(args.ms)
  return "slept " .. args.n
end }

-- Computes (allocating strings) long enough to be inside the instruction
-- hook's loop turns while other events arrive.
mcp.tool { name = "compute", inputSchema = object, handler = function(args)
  local parts, deadline = {}, os.clock() + args.ms / 1000
  while os.clock() < deadline do
    parts[#parts % 64 + 1] = string.rep("x", 100) .. #parts
  end
  return "computed " .. args.n
end }

-- Computes until cancelled (or until --timeout, as a backstop).
mcp.tool { name = "forever", inputSchema = object, handler = function(args)
  local s = ""
  while true do s = string.rep("y", 64) .. #s % 7 end
end }

-- Tasks inside one call: a child process, a sleep and a computation.
mcp.tool { name = "spawn", inputSchema = object, handler = function(args)
  local a = mcp.spawn(function() return mcp.exec { argv = { "true" } }.code end)
  local b = mcp.spawn(function() mcp.sleep(5) return 1 end)
  local c = mcp.spawn(function() local x = 0 for i = 1, 200000 do x = x + i end return 2 end)
  return "spawned " .. args.n .. " " .. (a:wait() + b:wait() + c:wait())
end }
]]

local KINDS = { "exec", "sleep", "compute", "spawn", "exec", "sleep" }

-- The arguments and the answer expected for request number n.
local function plan(n)
  local kind = KINDS[n % #KINDS + 1]
  local args = { n = n }
  if kind == "sleep" then args.ms = n % 20 end
  if kind == "compute" then args.ms = 20 + n % 40 end
  local expected = ({
    exec = "exec " .. n .. " 0", sleep = "slept " .. n, compute = "computed " .. n, spawn = "spawned " .. n .. " 3",
  })[kind]
  return kind, args, expected
end

local function sanitizer_report(text)
  return text:match("ERROR: AddressSanitizer[^\n]*") or text:match("runtime error:[^\n]*")
      or text:match("ERROR: LeakSanitizer[^\n]*")
end

describe("a soak of exec, sleeps, computations, cancellations, reloads and pipelined HTTP #soak", function()
  local dir, server, stdio

  setup(function()
    dir = client.temp_dir()
    client.write_file(dir .. "/soak.lua", SCRIPT)
  end)

  teardown(function()
    if server then server:stop() end
    if stdio then stdio:close() end
    client.remove_tree(dir)
  end)

  it("answers every request that was not cancelled, and survives", function()
    server = http.start({ "--timeout", "20000", dir })
    local session = server:initialize()
    local headers = { Accept = http.ACCEPT_BOTH, ["Content-Type"] = "application/json",
                      ["Mcp-Session-Id"] = session, ["MCP-Protocol-Version"] = "2025-11-25" }
    stdio = client.spawn { "run", "--timeout", "20000", dir }
    stdio:initialize()

    local conns = {}
    for i = 1, CONNECTIONS do conns[i] = server:connect() end
    local canceller = server:connect()

    local counts = { sent = 0, answered = 0, wrong = 0, cancelled = 0, reloads = 0, stdio_sent = 0, stdio_answered = 0 }
    local wrong = {}
    local n = 0
    uv.update_time()
    local stop_at = uv.now() + SECONDS * 1000
    local round = 0
    while uv.now() < stop_at and server:alive() and not stdio.exited do
      round = round + 1
      -- A computation that will be cancelled while the pipelines run: its
      -- POST waits on its own connection.
      local forever_id = "forever-" .. round
      local forever_conn = server:connect()
      forever_conn:send_request { method = "POST", headers = headers, body = {
        jsonrpc = "2.0", id = forever_id, method = "tools/call", params = { name = "forever", arguments = {} } } }

      -- Pipelined requests on every connection, written before any is read.
      local expect = {}
      for c = 1, CONNECTIONS do
        local bytes, ids = {}, {}
        for _ = 1, PIPELINE do
          n = n + 1
          local kind, args, expected = plan(n)
          bytes[#bytes + 1] = http.format_request(server.port, { method = "POST", headers = headers, body = {
            jsonrpc = "2.0", id = n, method = "tools/call", params = { name = kind, arguments = args } } })
          ids[#ids + 1] = { id = n, expected = expected }
        end
        conns[c]:write(table.concat(bytes))
        counts.sent = counts.sent + PIPELINE
        expect[c] = ids
      end

      -- The same mix over stdio, pipelined too.
      local stdio_expect = {}
      for _ = 1, PIPELINE do
        n = n + 1
        local kind, args, expected = plan(n)
        stdio:send { jsonrpc = "2.0", id = n, method = "tools/call", params = { name = kind, arguments = args } }
        stdio_expect[n] = expected
        counts.stdio_sent = counts.stdio_sent + 1
      end

      -- Cancel the computation, and now and then reload the scripts.
      local r = canceller:request { method = "POST", headers = headers, body = {
        jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = forever_id } } }
      assert.is_table(r, "the cancellation got no answer")
      assert.are.equal(202, r.status)
      if round % 3 == 0 then
        server.proc:kill("sighup")
        stdio:kill("sighup")
        counts.reloads = counts.reloads + 1
      end

      -- Read every pipelined answer, in order.
      for c = 1, CONNECTIONS do
        for _, want in ipairs(expect[c]) do
          local response = conns[c]:read_response(30000)
          local body = response and (response.json or (response.events and response.events[#response.events]
                                                        and response.events[#response.events].json))
          local text = body and body.result and body.result.content and body.result.content[1].text
          if body and body.id == want.id and text == want.expected then
            counts.answered = counts.answered + 1
          else
            counts.wrong = counts.wrong + 1
            if #wrong < 5 then wrong[#wrong + 1] = ("id %d: %s"):format(want.id, cjson.encode(response or "none")) end
          end
        end
      end
      local fr = forever_conn:read_response(30000)
      assert.is_table(fr, "the cancelled computation's request got no answer")
      assert.are.equal(200, fr.status)
      for _, e in ipairs(fr.events or {}) do assert.is_nil(e.json and e.json.result, "a cancelled call was answered") end
      counts.cancelled = counts.cancelled + 1
      forever_conn:close()

      local deadline = uv.now() + 30000
      while next(stdio_expect) and uv.now() < deadline do
        local msg = stdio:read(1000)
        if msg and msg.id and stdio_expect[msg.id] then
          local text = msg.result and msg.result.content and msg.result.content[1].text
          if text == stdio_expect[msg.id] then counts.stdio_answered = counts.stdio_answered + 1
          else
            counts.wrong = counts.wrong + 1
            if #wrong < 5 then wrong[#wrong + 1] = "stdio " .. cjson.encode(msg) end
          end
          stdio_expect[msg.id] = nil
        end
        uv.update_time()
      end
      uv.update_time()
    end

    -- Both servers are still there and answer.
    assert.is_true(server:alive(), ("the HTTP server died (exit %s, signal %s):\n"):format(tostring(server.proc.exit_code), tostring(server.proc.exit_signal)) .. server:stderr())
    assert.is_false(stdio.exited, "the stdio server died:\n" .. stdio.stderr)
    local ping = server:post({ jsonrpc = "2.0", id = "last", method = "ping" }, { ["Mcp-Session-Id"] = session })
    assert.are.equal(200, ping.status)
    local pong = stdio:request("ping")
    assert.is_table(pong and pong.result, "the stdio server does not answer a ping")

    print(("\nsoak: %d rounds, HTTP %d/%d answered, stdio %d/%d answered, %d cancelled, %d reloads, %d wrong")
      :format(round, counts.answered, counts.sent, counts.stdio_answered, counts.stdio_sent, counts.cancelled,
              counts.reloads, counts.wrong))
    assert.are.same({}, wrong)
    assert.are.equal(counts.sent, counts.answered)
    assert.are.equal(counts.stdio_sent, counts.stdio_answered)
    assert.is_true(counts.reloads >= 1 or round < 3)

    local code, signal = server:stop()
    local stderr = server:stderr()
    server = nil
    stdio:close()
    local stdio_stderr = stdio.stderr
    stdio = nil
    assert.is_nil(sanitizer_report(stderr), stderr)
    assert.is_nil(sanitizer_report(stdio_stderr), stdio_stderr)
    assert.are.equal(0, signal)
    assert.are.equal(0, code)
  end)
end)
