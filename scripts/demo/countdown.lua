-- A tool that takes its time: it waits without blocking anything else, and
-- reports progress to clients that asked for it.
local mcp = require "mcp"

mcp.tool {
  name = "countdown", title = "Countdown", description = "Count down from n, one step per 100 ms, with progress",
  inputSchema = { type = "object", properties = { n = { type = "integer", minimum = 1, maximum = 50, default = 5 } } },
  handler = function(args, ctx)
    local n = args.n or 5
    for i = n, 1, -1 do
      ctx:progress(n - i + 1, n, ("%d..."):format(i))
      mcp.sleep(100)
    end
    ctx:log("info", "countdown of " .. n .. " finished")
    return "Liftoff!"
  end,
}
