-- The scale-out bench's CPU-bound tool (bench/scale.sh): `add` burns
-- CPU_MS milliseconds of the process's CPU time in a Lua loop (default 1),
-- then adds.
local mcp = require "mcp"
mcp.server { name = "bench-cpu", version = "1.0.0" }

local cpu_s = (tonumber(os.getenv("CPU_MS")) or 1) / 1000

mcp.tool { name = "add", description = "Add two integers, after about a millisecond of work",
  inputSchema = { type = "object", properties = { a = { type = "integer" }, b = { type = "integer" } },
    required = { "a", "b" } },
  handler = function(args)
    local until_s = os.clock() + cpu_s
    local s = 0
    while os.clock() < until_s do
      for i = 1, 200 do s = s + (i % 7) end
    end
    return args.a + args.b + (s - s)
  end }
