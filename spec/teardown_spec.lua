-- Specs stop what they start whatever the outcome (issue 34): a spec file
-- whose tests fail with servers still running (spec/fixtures/teardown),
-- run by a busted of its own with this repository's .busted, leaves none
-- of them behind once it ends.

local client = require "mcp_client"
local reaper = require "reaper"
local uv = require "luv"

describe("the teardown net", function()
  local pids = {}
  after_each(function()
    for _, pid in ipairs(pids) do
      if reaper.alive(pid) then uv.kill(pid, "sigkill") end
    end
  end)

  it("stops the servers of failed tests and of their block", function()
    local code, out = client.sh("busted -o TAP --pattern=fails spec/fixtures/teardown/fails.lua 2>&1")
    assert.are_not.equal(0, code, out) -- the test in it fails, on purpose
    for pid in out:gmatch("PID (%d+)") do pids[#pids + 1] = tonumber(pid) end
    assert.are.equal(2, #pids, out)
    for _, pid in ipairs(pids) do
      assert.is_true(client.poll_until(function() return not reaper.alive(pid) end, 30000),
        "pid " .. pid .. " outlived the spec file that started it:\n" .. out)
    end
  end)
end)
