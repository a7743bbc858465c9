-- A notebook in SQLite, through a Lua C module from Debian
-- (apt install lua-sql-sqlite3). A query runs on the loop's thread: keep
-- them short (what blocks: docs/lua-api.md).
--
--   NOTES_DB=notes.sqlite3 luamcp run scripts/sqlite   (default: in memory)
local mcp = require "mcp"
local sqlite3 = require "luasql.sqlite3"

mcp.server { name = "sqlite-notes", version = "1.0.0" }

local env = assert(sqlite3.sqlite3())
local db = assert(env:connect(os.getenv("NOTES_DB") or ":memory:"))
assert(db:execute("create table if not exists notes (id integer primary key, title text not null, body text)"))

local function rows(sql)
  local cursor = assert(db:execute(sql))
  local out = {}
  local row = cursor:fetch({}, "a")
  while row do
    out[#out + 1] = row
    row = cursor:fetch({}, "a")
  end
  cursor:close()
  return out
end

mcp.tool { name = "add_note", title = "Add a note", description = "Store a note; returns its id",
  inputSchema = { type = "object", required = { "title" },
    properties = { title = { type = "string", maxLength = 200 }, body = { type = "string" } } },
  handler = function(args)
    assert(db:execute(("insert into notes (title, body) values ('%s', '%s')")
      :format(db:escape(args.title), db:escape(args.body or ""))))
    return { id = math.tointeger(rows("select last_insert_rowid() as id")[1].id) }
  end }

mcp.tool { name = "find_notes", title = "Find notes", description = "Notes whose title or body contains the words",
  inputSchema = { type = "object", required = { "text" }, properties = { text = { type = "string" } } },
  annotations = { readOnlyHint = true },
  handler = function(args)
    local like = db:escape("%" .. args.text .. "%")
    return { notes = mcp.array(rows(("select id, title, body from notes where title like '%s' or body like '%s' order by id")
      :format(like, like))) }
  end }
