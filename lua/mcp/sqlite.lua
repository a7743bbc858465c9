-- mcp.sqlite: SQLite databases for the scripts (docs/lua-api.md "mcp.sqlite").
--
--   local db = mcp.sqlite.open("data/notes.db", { wal = true })
--   db:exec("CREATE TABLE IF NOT EXISTS notes(id INTEGER PRIMARY KEY, body TEXT)")
--   local n, id = db:exec("INSERT INTO notes(body) VALUES (?)", body)
--   local rows  = db:query("SELECT id, body FROM notes WHERE id > :after", { after = 10 })
--   local row   = db:first("SELECT count(*) AS n FROM notes")
--   db:transaction(function() ... end)   -- COMMIT, or ROLLBACK on error
--
-- The statements run on libuv's thread pool (runtime/app/lua_sqlite.c;
-- short ones on the loop, within a budget of steps); the calling handler
-- waits without stopping other calls. db:stats() counts where they ran. A connection
-- belongs to the server, not to a generation: after a reload, opening the
-- same path with the same options returns the same connection.
local core = require "mcp.core"
local permissions = require "mcp.permissions"
local usage = require "mcp.usage"

local M = {}

M.version = core.sqlite.version

local methods = core.sqlite.methods
local begin, commit, abort = methods._begin, methods._commit, methods._abort

--- db:transaction(fn, ...) or db:transaction("immediate", fn, ...): run fn
--- inside BEGIN ... COMMIT; an error in fn (or in COMMIT) rolls back and is
--- raised again; fn's results are returned. While it runs, other calls'
--- statements on this connection wait.
function methods.transaction(db, mode, fn, ...)
  if type(mode) == "function" then return methods.transaction(db, "deferred", mode, fn, ...) end
  if type(fn) ~= "function" then
    usage.raise(("db:transaction needs a function, got %s"):format(type(fn)))
  end
  local token = begin(db, mode)
  -- Closed however the function leaves: by an error, or by the call being
  -- cancelled while it waits (its coroutine is closed then).
  local open <close> = setmetatable({}, { __close = function() abort(db, token) end })
  local results = table.pack(pcall(fn, ...))
  if not results[1] then error(results[2], 0) end
  commit(db, token)
  return table.unpack(results, 2, results.n)
end

--- A value bound as a BLOB (a plain string binds as TEXT).
function M.blob(s)
  if type(s) ~= "string" then usage.raise(("mcp.sqlite.blob needs a string, got %s"):format(type(s))) end
  return { blob = s }
end

--- mcp.sqlite.open(path, options?) -> db, or nil, message, code.
--- path ":memory:" is a database in memory (kept across reloads, like a
--- file's connection). options: readonly, wal, busy_timeout_ms (5000),
--- create (true).
function M.open(path, options)
  if type(path) ~= "string" then
    usage.raise(("mcp.sqlite.open needs a path (a string), got %s"):format(type(path)))
  end
  if options ~= nil and type(options) ~= "table" then
    usage.raise(("mcp.sqlite.open's options are a table, got %s"):format(type(options)))
  end
  options = options or {}
  if path ~= ":memory:" and path ~= "" then
    local ok, message, code = permissions.check_path(options.readonly and "read" or "write", path)
    if not ok then return nil, message, code end
  end
  return core.sqlite.open(path, options)
end

return M
