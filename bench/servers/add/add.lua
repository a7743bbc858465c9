local mcp = require "mcp"
mcp.server { name = "bench", version = "1.0.0" }
mcp.tool { name = "add", description = "Add two integers",
  inputSchema = { type = "object", required = { "a", "b" }, properties = { a = { type = "integer" }, b = { type = "integer" } } },
  handler = function(args) return args.a + args.b end }
