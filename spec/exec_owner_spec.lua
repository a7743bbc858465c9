-- Nothing outlives its owner (issue 34): a child of mcp.exec dies with its
-- server whatever ends the server, SIGKILL included, and leads a process
-- group of its own inside the server's session (so that a deadline or a
-- cancellation signals its children too, and whoever started the server can
-- still find it).

local client = require "mcp_client"
local reaper = require "reaper"
local uv = require "luv"

-- pgrp and session of a process, from /proc/PID/stat.
local function group_and_session(pid)
  local f = assert(io.open("/proc/" .. pid .. "/stat"))
  local stat = f:read("a")
  f:close()
  local pgrp, session = stat:match("%) %S %d+ (%d+) (%d+)")
  return tonumber(pgrp), tonumber(session)
end

-- Start the fixture's streaming tool on `sh -c 'echo $$; exec sleep 600'`
-- and return the child's pid, read from its first output line.
local function start_sleeper(server)
  server:send({ jsonrpc = "2.0", id = "sleeper", method = "tools/call",
                params = { name = "run_streaming", arguments = { argv = { "sh", "-c", "echo $$; exec sleep 600" } } } })
  local note = server:read(60000)
  assert(note and note.params, "no output from the child:\n" .. server.stderr)
  return assert(tonumber(note.params.data:match("(%d+)")), note.params.data)
end

describe("a child of mcp.exec", function()
  local pid
  after_each(function()
    -- Whatever the outcome, the sleeper goes.
    if pid and reaper.alive(pid) then uv.kill(pid, "sigkill") end
    pid = nil
  end)

  it("is gone soon after its server is SIGKILLed", function()
    local server = client.spawn { "run", "spec/fixtures/limits" }
    server:initialize()
    pid = start_sleeper(server)
    assert.is_true(reaper.alive(pid))
    server:kill("sigkill")
    server:wait_exit(30000)
    assert.are.equal(9, server.exit_signal)
    -- The issue asks for well under a second; a loaded machine gets 10 s
    -- before this counts as a child that outlived its server.
    assert.is_true(client.poll_until(function() return not reaper.alive(pid) end, 10000),
      "child " .. pid .. " still running after its server was killed")
    server:close()
  end)

  it("leads its own process group, in its server's session", function()
    local server = client.spawn { "run", "spec/fixtures/limits" }
    server:initialize()
    pid = start_sleeper(server)
    local pgrp, session = group_and_session(pid)
    local _, server_session = group_and_session(server.pid)
    assert.are.equal(pid, pgrp)
    assert.are.equal(server_session, session)
    server:close()
    assert.is_true(client.poll_until(function() return not reaper.alive(pid) end, 10000))
  end)
end)
