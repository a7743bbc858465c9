-- A CPU-bound tool: what the deadline hook costs Lua code that never yields.
local mcp = require "mcp"
mcp.server { name = "bench-spin", version = "1.0.0" }
mcp.tool { name = "add", description = "Add two integers, slowly",
  handler = function(args)
    local s = 0
    for i = 1, 100000 do s = s + (i % 7) end
    return args.a + args.b + (s - s)
  end }
