-- The busted helper (.busted: helper = "spec/helpers/teardown.lua"): tells
-- spec/helpers/reaper.lua which file, describe block and test is running,
-- so that every process a spec started is stopped when its owner ends, even
-- when an assertion failed before the spec's own stop. Loading mcp_client
-- here also makes it one module for every spec file (busted insulates each
-- file's package.loaded, but keeps what was loaded before the first one).
local busted = require "busted"
-- The specs' helpers drive processes with luv, from Debian's lua-luv: say
-- how to get it rather than fail on the first spec's require.
if not pcall(require, "luv") then
  error("the specs need luv for Lua 5.4 (and the other test tools): install them with\n"
    .. "  make test-deps        (Debian: apt-get install lua-luv)", 0)
end
local reaper = require "reaper"
require "mcp_client"

local function guarded(fn)
  return function(element)
    local ok, err = pcall(fn, element)
    if not ok then io.stderr:write("# teardown: " .. tostring(err) .. "\n") end
    return nil, true
  end
end

busted.subscribe({ "file", "start" }, guarded(reaper.enter))
busted.subscribe({ "describe", "start" }, guarded(reaper.enter))
busted.subscribe({ "test", "start" }, guarded(reaper.enter))
busted.subscribe({ "test", "end" }, guarded(reaper.test_ended))
busted.subscribe({ "describe", "end" }, guarded(reaper.leave))
busted.subscribe({ "file", "end" }, guarded(reaper.leave))
