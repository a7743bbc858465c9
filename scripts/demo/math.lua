local mcp = require "mcp"
mcp.server { name = "demo", version = "1.0.0", instructions = "Small demo tools." }

mcp.tool {
  name = "add", title = "Add", description = "Add two integers",
  inputSchema = { type = "object", required = { "a", "b" },
                  properties = { a = { type = "integer" }, b = { type = "integer" } } },
  annotations = { readOnlyHint = true },
  handler = function(args, ctx) return args.a + args.b end,
}
