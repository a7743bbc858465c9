-- An A2A agent in Lua: counts the words of a text, one artifact chunk per
-- line, and asks for the text when the message has none.
--
--   luamcp run --http 127.0.0.1:8101 scripts/a2a/counter.lua
local mcp = require "mcp"

mcp.server { name = "counter", version = "1.0.0" }

mcp.agent {
  name = "Word counter", description = "Counts the words of a text, line by line", version = "1.0.0",
  provider = { organization = "luamcp examples", url = "https://github.com/luamcp" },
  skills = { { id = "count", name = "Count words", description = "the number of words of each line, and in all",
               tags = { "text" }, examples = { "the quick brown fox" } } },
  handler = function(message, ctx)
    local text = message.text
    if text == "" then text = ctx:ask("Which text shall I count?").text end
    ctx:status("working", "counting")
    local total, n = 0, 0
    for line in (text .. "\n"):gmatch("(.-)\n") do
      local words = select(2, line:gsub("%S+", ""))
      total, n = total + words, n + 1
      ctx:artifact { id = "lines", name = "words per line", data = { line = n, words = words }, append = n > 1 }
      mcp.sleep(50) -- a slow worker, so that the progress shows
    end
    ctx:artifact { id = "lines", data = { total = total }, append = true, last_chunk = true }
    return ("%d words in %d line%s"):format(total, n, n == 1 and "" or "s")
  end,
}
