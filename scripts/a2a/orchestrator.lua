-- The orchestrator: an MCP server whose tool hands a text to two agents,
-- the Lua word counter and the @a2a-js/sdk shouter, follows the counter's
-- stream and passes its progress on to its own caller.
--
--   COUNTER_URL=http://127.0.0.1:8101 SHOUTER_URL=http://127.0.0.1:8102 \
--     luamcp run --http 127.0.0.1:8100 scripts/a2a/orchestrator.lua
local mcp = require "mcp"

mcp.server { name = "orchestrator", version = "1.0.0",
  instructions = "review(text): the text in capitals, and its words counted line by line, by two A2A agents" }

local function agent(name)
  local url = os.getenv(name)
  if not url then error(name .. " is not set (the agent's base URL)", 0) end
  return mcp.a2a.connect(url) -- the card is read once, then cached
end

mcp.tool {
  name = "review", description = "Shout a text and count its words, with two A2A agents",
  inputSchema = { type = "object", properties = { text = { type = "string" } }, required = { "text" } },
  handler = function(args, ctx)
    local shouted = agent("SHOUTER_URL"):send(args.text).message.parts[1].text
    local lines, summary = 0, nil
    local total = select(2, args.text:gsub("\n", "")) + 1
    agent("COUNTER_URL"):stream(args.text, function(event)
      local update = event.artifactUpdate
      if update then
        for _, part in ipairs(update.artifact.parts) do
          if part.data and part.data.line then
            lines = lines + 1
            ctx:progress(lines, total, ("line %d: %d words"):format(part.data.line, part.data.words))
          end
        end
      elseif event.statusUpdate and event.statusUpdate.status.state == "TASK_STATE_COMPLETED" then
        summary = event.statusUpdate.status.message.parts[1].text
      end
    end)
    return ("%s\n(%s)"):format(shouted, summary or "no count")
  end,
}
