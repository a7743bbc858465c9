-- Arithmetic and dice: the smallest useful tools.
local mcp = require "mcp"
mcp.server {
  name = "demo", version = "1.0.0", title = "luamcp demo",
  instructions = "Small demo tools: arithmetic, dice, a countdown with progress, a report that becomes a task when it takes long, and a notebook "
    .. "you can write to and read back as resources (notes://{name}), with a skill on using it "
    .. "(skill://notes-howto/SKILL.md).",
  -- What these tools may touch: nothing outside the server. No files, no
  -- programs, no network, no environment (docs/lua-api.md "Permissions").
  permissions = {},
}

mcp.tool {
  name = "add", title = "Add", description = "Add two integers",
  inputSchema = { type = "object", required = { "a", "b" },
                  properties = { a = { type = "integer" }, b = { type = "integer" } } },
  annotations = { readOnlyHint = true },
  handler = function(args, ctx) return args.a + args.b end,   -- becomes text "5", never "5.0"
}

mcp.tool {
  name = "roll_dice", title = "Roll dice", description = "Roll some dice, e.g. 3 six-sided dice",
  inputSchema = { type = "object",
                  properties = { count = { type = "integer", minimum = 1, maximum = 100, default = 1 },
                                 sides = { type = "integer", minimum = 2, maximum = 1000, default = 6 } } },
  outputSchema = { type = "object", required = { "rolls", "total" },
                   properties = { rolls = { type = "array", items = { type = "integer" } },
                                  total = { type = "integer" } } },
  annotations = { readOnlyHint = true, openWorldHint = false },
  handler = function(args)
    local rolls, total = mcp.array(), 0
    for i = 1, args.count or 1 do
      rolls[i] = math.random(args.sides or 6)
      total = total + rolls[i]
    end
    return { rolls = rolls, total = total }   -- structuredContent, plus its JSON as text
  end,
}
