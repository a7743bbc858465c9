-- Permissions with $ROOTS, through mcp.testing: the roots are the calling
-- client's, asked at each call, so a client that changes them is followed.
local testing = require "mcp.testing"

describe("permissions with $ROOTS", function()
  it("allow reading inside the client's roots, and follow a change of roots", function()
    local base = os.tmpname()
    os.remove(base)
    assert(os.execute("mkdir -p " .. base .. "/a " .. base .. "/b"))
    for _, name in ipairs { "a", "b" } do
      local f = assert(io.open(base .. "/" .. name .. "/file.txt", "w"))
      f:write("in " .. name)
      f:close()
    end
    local roots = { "file://" .. base .. "/a" }
    local t = testing.server("spec/fixtures/permissions_roots", { roots = function() return roots end })
    assert.equal("in a", testing.text(t:call("read", { path = base .. "/a/file.txt" })))
    local denied = testing.text(t:call("read", { path = base .. "/b/file.txt" }))
    assert.equal("permission denied: read " .. base .. "/b/file.txt (allowed: roots)", denied)
    roots = { "file://" .. base .. "/b" }
    t:notify("notifications/roots/list_changed")
    assert.equal("in b", testing.text(t:call("read", { path = base .. "/b/file.txt" })))
    assert.truthy(testing.text(t:call("read", { path = base .. "/a/file.txt" })):find("permission denied", 1, true))
    -- The roots are asked before the handler runs, so they apply where the
    -- call could not wait for the client: in a coroutine the tool made, in
    -- a sort comparator.
    assert.equal("in b", testing.text(t:call("read_in_coroutine", { path = base .. "/b/file.txt" })))
    assert.equal("opened, then in b", testing.text(t:call("read_after_sort", { path = base .. "/b/file.txt" })))
    -- A client without roots gives none.
    local bare = testing.server("spec/fixtures/permissions_roots")
    assert.truthy(testing.text(bare:call("read", { path = base .. "/a/file.txt" })):find("permission denied", 1, true))
    bare:close()
    t:close()
    os.execute("rm -rf " .. base)
  end)
end)
