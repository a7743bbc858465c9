-- The same `add` as bench/servers/add10 with nothing to validate: the
-- difference between the two is the cost of the 10-property schema.
local mcp = require "mcp"
mcp.server { name = "bench-add10-noschema", version = "1.0.0" }
mcp.tool { name = "add", description = "Add two integers", inputSchema = { type = "object" },
  handler = function(args) return args.a + args.b end }
