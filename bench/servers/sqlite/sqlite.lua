-- bench: `add` through mcp.sqlite (bench/sqlite.lua): each call inserts
-- its two integers as a row and reads the row back by its id (a point
-- query), answering their sum. The peer is bench/peer/ts2-sqlite-stdio.mjs.
local mcp = require "mcp"
mcp.server { name = "bench-sqlite", version = "1.0.0" }

-- In memory, or (bench/sqlite.lua's second table) a file in WAL mode with
-- synchronous=NORMAL, as the peer does.
local file = os.getenv("BENCH_SQLITE_FILE")
local db = assert(mcp.sqlite.open(file or ":memory:", { wal = file ~= nil }))
if file then db:exec "PRAGMA synchronous=NORMAL" end
db:exec "CREATE TABLE pairs(id INTEGER PRIMARY KEY, a INTEGER NOT NULL, b INTEGER NOT NULL)"

mcp.tool { name = "add", description = "Add two integers, through a SQLite row",
  inputSchema = { type = "object", required = { "a", "b" }, properties = { a = { type = "integer" }, b = { type = "integer" } } },
  handler = function(args)
    local _, id = db:exec("INSERT INTO pairs(a, b) VALUES (?, ?)", args.a, args.b)
    return db:first("SELECT a + b AS sum FROM pairs WHERE id = ?", id).sum
  end }
