-- `add` with a 10-property inputSchema: what validating arguments costs.
local mcp = require "mcp"
mcp.server { name = "bench-add10", version = "1.0.0" }
mcp.tool { name = "add", description = "Add two integers (and check eight more fields)",
  inputSchema = { type = "object", required = { "a", "b", "c", "e" }, additionalProperties = false,
    properties = {
      a = { type = "integer" }, b = { type = "integer" },
      c = { type = "string", minLength = 1, maxLength = 64, pattern = "^[a-z]+$" },
      d = { type = "number", minimum = 0, maximum = 100 },
      e = { type = "boolean" },
      f = { type = "array", items = { type = "integer" }, maxItems = 10 },
      g = { type = "object", properties = { x = { type = "integer" } } },
      h = { type = "string", enum = { "abc", "def", "ghi" } },
      i = { type = "integer", multipleOf = 2 },
      j = { type = "string", format = "date" },
    } },
  handler = function(args) return args.a + args.b end }
