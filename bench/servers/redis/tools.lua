-- bench/redis.lua: what the --redis bus and store cost per operation.
local mcp = require "mcp"
mcp.server { name = "bench-redis", version = "1.0.0" }

mcp.tool { name = "notify", description = "n resource updates",
  inputSchema = { type = "object", properties = { n = { type = "integer" } } },
  handler = function(a)
    for _ = 1, a.n do mcp.notify_resource_updated("bench://r") end
    return a.n
  end }

mcp.tool { name = "incr", description = "n increments, one after the other or all at once",
  inputSchema = { type = "object", properties = { n = { type = "integer" }, concurrent = { type = "boolean" } } },
  handler = function(a)
    if not a.concurrent then
      for _ = 1, a.n do mcp.store.incr("bench") end
      return a.n
    end
    local fns = {}
    for i = 1, a.n do fns[i] = function() return mcp.store.incr("bench") end end
    return #mcp.all(fns)
  end }
