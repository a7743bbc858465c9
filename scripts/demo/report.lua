-- A tool that may take long: for a client that declared the tasks
-- extension, a call still running after a second becomes an MCP task
-- (answered at once with a task id; the client polls tasks/get, sees the
-- progress as the task's status message, and fetches the result). Other
-- clients wait for it in the request as usual.
local mcp = require "mcp"

mcp.tool {
  name = "report", title = "Report", description = "Write a report on a topic, one section per second",
  inputSchema = { type = "object", properties = {
    topic = { type = "string", default = "luamcp" },
    sections = { type = "integer", minimum = 1, maximum = 20, default = 3 },
  } },
  task = { after_ms = 1000 },
  handler = function(args, ctx)
    local topic, n = args.topic or "luamcp", args.sections or 3
    local lines = { "# A report on " .. topic }
    for i = 1, n do
      ctx:progress(i - 1, n, "writing section " .. i)
      mcp.sleep(1000)
      lines[#lines + 1] = ("%d. Section %d of %d about %s."):format(i, i, n, topic)
    end
    return table.concat(lines, "\n")
  end,
}
