-- The bench's A2A agent (bench/a2a.sh): "add A B" answered with a message
-- whose text is the sum, as bench/peer/a2a-sdk.mjs answers it.
local mcp = require "mcp"
mcp.server { name = "a2a-bench", version = "1.0.0" }
mcp.agent {
  name = "Adder", description = "adds two numbers", version = "1.0.0",
  skills = { { id = "add", name = "Add", description = "add A B", tags = { "math" } } },
  handler = function(message)
    local a, b = message.text:match("^add (%-?%d+) (%-?%d+)$")
    return tostring(math.tointeger(a + b))
  end,
}
