-- The Lua state's allocator (runtime/app/vm.c, lua_heap.c): values survive
-- blocks being grown, shrunk, freed and reused, and --memory-limit refuses
-- at the limit with the state's memory counted exactly.

local client = require "mcp_client"

local function expected_tails(n)
  local out = {}
  for len = 1, n do out[len] = string.char(97 + len % 26) end
  return table.concat(out)
end

describe("the Lua heap", function()
  local server
  after_each(function() if server then server:close() end end)

  it("keeps every value while tables and strings grow and shrink through every block size", function()
    server = client.spawn { "run", "spec/fixtures/heap" }
    server:initialize()
    for _ = 1, 3 do -- again on the blocks the earlier rounds freed
      local r = server:call_tool("grow_shrink", { n = 1200 })
      assert.is_not_true(r.isError, r.content and r.content[1].text)
      assert.are.equal(expected_tails(1200), r.content[1].text)
    end
  end)

  it("refuses small objects at --memory-limit, counts memory exactly, and serves the next call", function()
    local limit = 16 * 1024 * 1024
    server = client.spawn { "run", "--memory-limit", "16", "spec/fixtures/heap" }
    server:initialize()
    local counts = {}
    for round = 1, 2 do -- the second fills blocks the first freed
      local r = server:call_tool("fill", {})
      assert.is_not_true(r.isError, r.content and r.content[1].text)
      local s = r.structuredContent
      assert.truthy(s.refused and s.refused:find("not enough memory", 1, true), s.refused)
      -- At the refusal the state holds nearly all of the limit, never more
      -- (as Lua counts it), and afterwards what vm_alloc counts is what Lua
      -- counts (plus mcp.info's table).
      assert.is_true(s.at_refusal <= limit, s.at_refusal .. " > " .. limit)
      assert.is_true(limit - s.at_refusal < 64 * 1024, "refused " .. (limit - s.at_refusal) .. " bytes below the limit")
      assert.is_true(s.memory >= s.counted and s.memory - s.counted < 2048,
                     "mcp.info().memory " .. s.memory .. " vs collectgarbage " .. s.counted)
      counts[round] = s.count
      assert.are.same({}, server:request("ping", {}).result)
    end
    assert.is_true(math.abs(counts[1] - counts[2]) < counts[1] / 100, counts[1] .. " then " .. counts[2])
    local r = server:call_tool("grow_shrink", { n = 600 })
    assert.are.equal(expected_tails(600), r.content[1].text)
  end)
end)
