--- mcp.metrics: a tool's own figures, exported at /metrics with luamcp's
--- (docs/operating.md). Metrics live in the process, not the Lua
--- state: a reload that defines the same name again keeps counting.
---
---   local hits = mcp.metrics.counter("app_cache_hits_total", "Cache hits.")
---   hits:inc()                        -- by 1
---   hits:inc(3, { cache = "users" })  -- by 3, in the series cache="users"
---   local size = mcp.metrics.histogram("app_reply_bytes", "Reply sizes.", { 100, 1000, 10000 })
---   size:observe(#body, { tool = "fetch" })
---
--- A metric takes at most a fixed number of label sets (100): past them
--- inc and observe return nil and a message, and the value is dropped.
local core = require "mcp.core"

local M = {}

local Counter = {}
Counter.__index = Counter

--- Add n (default 1, never negative) to the series of labels.
function Counter:inc(n, labels)
  return core.metric_add(self.id, n or 1, labels)
end

local Histogram = {}
Histogram.__index = Histogram

--- Count v in its bucket of the series of labels.
function Histogram:observe(v, labels)
  if type(v) ~= "number" then error("mcp.metrics: observe needs a number", 2) end
  return core.metric_add(self.id, v, labels)
end

local function check_name(name, help)
  if type(name) ~= "string" then error("mcp.metrics: the name must be a string", 3) end
  if help ~= nil and type(help) ~= "string" then error("mcp.metrics: help must be a string", 3) end
end

--- A counter (TYPE counter): a total that only goes up.
function M.counter(name, help)
  check_name(name, help)
  return setmetatable({ name = name, id = core.metric_define("counter", name, help) }, Counter)
end

--- A histogram (TYPE histogram): buckets is an increasing list of upper
--- bounds (default: 0.005 ... 10, for seconds).
function M.histogram(name, help, buckets)
  check_name(name, help)
  if buckets ~= nil and type(buckets) ~= "table" then error("mcp.metrics: buckets must be a list of numbers", 2) end
  return setmetatable({ name = name, id = core.metric_define("histogram", name, help, buckets) }, Histogram)
end

return M
