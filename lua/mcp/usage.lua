-- mcp.usage: misuse of the library's functions, raised at the script's
-- line.
--
-- mcp.exec, mcp.fs, mcp.http and the ctx methods pass through the
-- library's own frames (the permission doors, the question helpers) before
-- the work starts, so error(message, 2) would blame a line of
-- [luamcp]/mcp/permissions.lua. M.raise finds the first frame that is not
-- the library's and blames it; M.fields refuses an option the function
-- does not take, with the one it most likely meant.

local M = {}

-- Library chunks are named "@[luamcp]/mcp/....lua" (runtime/app/vm.c).
local function library_frame(info)
  return info.what == "C" or info.source:sub(1, 9) == "@[luamcp]" or info.source:sub(1, 9) == "=[luamcp]"
end

--- Raise message at the first script frame below the library's (the line
--- that called mcp.exec, ctx:elicit, ...).
function M.raise(message)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info then
      -- No line of the scripts on the stack (their call was a tail call,
      -- `return mcp.exec{...}`): no position rather than the library's.
      level = 0
      break
    end
    if not library_frame(info) then break end
    level = level + 1
  end
  error(message, level)
end

--- A message raised by the library without a position of its own (or
--- with one inside the library), raised again at the script's line.
function M.reraise(err)
  if type(err) ~= "string" then error(err, 0) end
  local stripped, library = err:gsub("^%[luamcp%][^:]*:%d+: ", "")
  -- Already at a line of the scripts (task_check's, a stream function's own error).
  if library == 0 and err:match("^[^%[][^:\n]*:%d+: ") then error(err, 0) end
  M.raise(stripped)
end

-- What a misspelt or shortened word meant: mcp.check's suggestion, or the
-- one known name it begins ("timeout" for timeout_ms, "warn" for warning).
local function meant(word, known)
  local hint = require("mcp.check").suggest(word, known)
  if hint or type(word) ~= "string" or #word < 3 then return hint end
  local found
  for k in pairs(known) do
    if k:sub(1, #word) == word then
      if found then return nil end
      found = k
    end
  end
  return found
end

--- Refuse a field of opts that what does not take: "mcp.exec: unknown
--- field agrv (did you mean argv?)". known: a set of names; noun: what the
--- documentation calls them ("field", or "option" for mcp.http).
function M.fields(what, opts, known, noun)
  noun = noun or "field"
  local unknown = {}
  for k in pairs(opts) do
    if not known[k] then unknown[#unknown + 1] = k end
  end
  if #unknown == 0 then return end
  table.sort(unknown, function(a, b) return tostring(a) < tostring(b) end)
  local first = unknown[1]
  local names = {}
  for k in pairs(known) do
    if k:sub(1, 1) ~= "_" then names[#names + 1] = k end
  end
  table.sort(names)
  if math.type(first) == "integer" then
    M.raise(("%s takes named %ss (%s), not a list"):format(what, noun, table.concat(names, ", ")))
  end
  local hint = meant(first, known)
  M.raise(("%s: unknown %s %s%s"):format(what, noun, tostring(first),
    hint and (" (did you mean " .. hint .. "?)") or (" (the " .. noun .. "s: " .. table.concat(names, ", ") .. ")")))
end

local function set(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

-- ---- mcp.exec ----------------------------------------------------------------

local EXEC = set { "argv", "cwd", "env", "stdin", "timeout_ms", "max_output_bytes", "stream", "file" }
local EXEC_TYPES = { cwd = "string", env = "table", stdin = "string", timeout_ms = "number",
                     max_output_bytes = "number", stream = "function", file = "string" }

--- mcp.exec's options, checked before anything runs.
function M.exec(opts)
  if type(opts) ~= "table" then
    M.raise(('mcp.exec needs a table: mcp.exec{ argv = { "ls", "-l" } }, got %s'):format(type(opts)))
  end
  if opts.argv == nil and type(opts[1]) == "string" then
    M.raise(('mcp.exec needs argv = { ... }: write mcp.exec{ argv = { %q, ... } } (no shell is used)'):format(opts[1]))
  end
  M.fields("mcp.exec", opts, EXEC)
  local argv = opts.argv
  if type(argv) ~= "table" or argv[1] == nil then
    M.raise('mcp.exec needs argv, a list such as { "ls", "-l" } (no shell is used)')
  end
  for i, a in ipairs(argv) do
    if type(a) ~= "string" then
      M.raise(("mcp.exec: argv[%d] must be a string, got %s"):format(i, type(a)))
    end
  end
  for field, expected in pairs(EXEC_TYPES) do
    local v = opts[field]
    if v ~= nil and type(v) ~= expected then
      M.raise(("mcp.exec: %s must be a %s, got %s"):format(field, expected, type(v)))
    end
  end
end

-- ---- mcp.fs ------------------------------------------------------------------

local FS_OPTIONS = { mkdir = { parents = "boolean" }, remove = { recursive = "boolean" } }

--- mcp.fs.NAME's arguments: a path (a string), and for write the data,
--- for rename the new name, for mkdir and remove their options.
function M.fs(name, path, data)
  if type(path) ~= "string" then
    M.raise(("mcp.fs.%s needs a path (a string), got %s"):format(name, type(path)))
  end
  if name == "write" and type(data) ~= "string" then
    M.raise(("mcp.fs.write needs the data to write (a string), got %s"):format(type(data)))
  end
  if name == "rename" and type(data) ~= "string" then
    M.raise(("mcp.fs.rename needs the new name (a string), got %s"):format(type(data)))
  end
  local known = FS_OPTIONS[name]
  if known and data ~= nil then
    if type(data) ~= "table" then
      M.raise(("mcp.fs.%s's options must be a table, got %s"):format(name, type(data)))
    end
    M.fields("mcp.fs." .. name, data, known, "option")
    for k, v in pairs(data) do
      if type(v) ~= known[k] then
        M.raise(("mcp.fs.%s: %s must be a %s, got %s"):format(name, k, known[k], type(v)))
      end
    end
  end
end

-- ---- mcp.http ----------------------------------------------------------------

--- mcp.http.request's options (known: the names it takes).
function M.http(opts, known)
  if type(opts) ~= "table" then
    M.raise(("mcp.http.request needs a table of options, got %s"):format(type(opts)))
  end
  M.fields("mcp.http", opts, known, "option")
  if type(opts.url) ~= "string" then
    M.raise(("mcp.http needs url, a string, got %s"):format(type(opts.url)))
  end
end

-- ---- ctx ---------------------------------------------------------------------

local QUESTION_FIELDS = {
  elicit = set { "message", "requestedSchema", "mode", "url", "elicitationId", "_meta", "task" },
  sample = set { "messages", "maxTokens", "systemPrompt", "temperature", "stopSequences", "modelPreferences",
                 "includeContext", "metadata", "tools", "toolChoice", "_meta", "task" },
}

--- ctx:elicit's and ctx:sample's params: fields the request has.
function M.question(kind, params)
  if type(params) == "table" and QUESTION_FIELDS[kind] then M.fields("ctx:" .. kind, params, QUESTION_FIELDS[kind]) end
end

local LEVELS = set { "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency" }

--- ctx:log(level, data, logger?).
function M.log(level, logger)
  if not LEVELS[level] then
    local hint = meant(level, LEVELS)
    M.raise(("ctx:log: %s is not a log level%s (debug, info, notice, warning, error, critical, alert, emergency)")
      :format(type(level) == "string" and ("%q"):format(level) or tostring(level),
        hint and (" (did you mean " .. hint .. "?)") or ""))
  end
  if logger ~= nil and type(logger) ~= "string" then
    M.raise(("ctx:log: the logger name must be a string, got %s"):format(type(logger)))
  end
end

--- ctx:progress(progress, total?, message?).
function M.progress(progress, total, message)
  if type(progress) == "table" then
    M.raise('ctx:progress takes (progress, total?, message?), not a table: ctx:progress(3, 10, "copying")')
  end
  if type(progress) ~= "number" then
    M.raise(("ctx:progress: progress must be a number, got %s"):format(type(progress)))
  end
  if total ~= nil and type(total) ~= "number" then
    M.raise(("ctx:progress: total must be a number, got %s"):format(type(total)))
  end
  if message ~= nil and type(message) ~= "string" then
    M.raise(("ctx:progress: message must be a string, got %s"):format(type(message)))
  end
end

return M
