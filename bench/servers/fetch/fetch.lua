-- bench: a tool that GETs ORIGIN_URL with mcp.http and returns the body
-- (bench/extra.lua, "mcp.http"; the peer is bench/peer/ts2-fetch-stdio.mjs).
local mcp = require "mcp"

local URL = assert(os.getenv("ORIGIN_URL"), "set ORIGIN_URL")

mcp.tool { name = "fetch", description = "GET the origin", inputSchema = { type = "object" },
  handler = function()
    local r, err = mcp.http.get(URL)
    if not r then error(err, 0) end
    return r.body
  end }
