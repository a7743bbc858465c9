-- bench/report.lua: what the Lua benchmarks share. A report is markdown
-- printed line by line as it grows and appended to OUT.md at the end (the
-- file `make bench` collects); median and spread summarise rounds.
local M = {}

local Report = {}
Report.__index = Report

function M.new()
  return setmetatable({ lines = {} }, Report)
end

--- Print a formatted line and keep it for save().
function Report:say(fmt, ...)
  local s = fmt:format(...)
  print(s)
  self.lines[#self.lines + 1] = s
end

--- Append every line said so far to path (nothing when path is nil).
function Report:save(path)
  if not path then return end
  local f = assert(io.open(path, "a"))
  f:write(table.concat(self.lines, "\n"), "\n")
  f:close()
end

--- The median of a list of numbers; nil for an empty list.
function M.median(t)
  local s = {}
  for i, v in ipairs(t) do s[i] = v end
  table.sort(s)
  local n = #s
  if n == 0 then return nil end
  if n % 2 == 1 then return s[(n + 1) // 2] end
  return (s[n // 2] + s[n // 2 + 1]) / 2
end

--- The lowest and the highest of a list of numbers.
function M.spread(t)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(t) do lo, hi = math.min(lo, v), math.max(hi, v) end
  return lo, hi
end

return M
