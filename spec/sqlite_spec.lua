-- mcp.sqlite, driven over stdio as a client would: statements with bound
-- parameters, the types, errors at the script's line, a long query that
-- blocks no other call and stops when its call is cancelled or past its
-- deadline, transactions, permissions, and a connection kept across a
-- reload (luamcp dev).

local client = require "mcp_client"
local cjson = client.json

local FIXTURE = "spec/fixtures/sqlite"

-- The line of the fixture holding needle.
local function line_of(needle)
  local n = 0
  for line in io.lines(FIXTURE .. "/server.lua") do
    n = n + 1
    if line:find(needle, 1, true) then return n end
  end
end

local function structured(result)
  assert(not result.isError, result.content and result.content[1].text)
  return result.structuredContent or cjson.decode(result.content[1].text)
end

describe("mcp.sqlite", function()
  local server, dir
  before_each(function()
    dir = client.temp_dir()
    server = client.spawn({ "run", FIXTURE }, { env = { "SQLITE_WRITE=" .. dir } })
    server:initialize()
  end)
  after_each(function()
    server:close()
    client.remove_tree(dir)
  end)

  it("creates a table, inserts with bound parameters and counts", function()
    local first = structured(server:call_tool("add", { body = "one" }))
    local second = structured(server:call_tool("add", { body = "it's; DROP TABLE notes" }))
    assert.are.same({ changes = 1, id = 1, count = 1, count_type = "integer" }, first)
    assert.are.same({ changes = 1, id = 2, count = 2, count_type = "integer" }, second)
  end)

  it("round-trips integers, floats, text, blobs, NULL and booleans", function()
    local r = structured(server:call_tool("types", {}))
    assert.are.same({ i = 42, i_type = "integer", r = 2.5, r_type = "float", s = "héllo", b_len = 3, b_zero = 0,
      z_absent = true, yes = 1, rows = 1 }, r)
  end)

  it("raises bad SQL as an error with SQLite's message at the script's line", function()
    local result = server:call_tool("bad", {})
    assert.is_true(result.isError)
    local text = result.content[1].text
    assert.truthy(text:find("server.lua:" .. line_of('other:query("SELEC 1")'), 1, true), text)
    assert.truthy(text:find('near "SELEC": syntax error', 1, true), text)
  end)

  it("commits a transaction, and rolls it back when its function fails", function()
    local ok = structured(server:call_tool("tx", { fail = false }))
    assert.are.same({ ok = true, count = 1 }, ok)
    local failed = structured(server:call_tool("tx", { fail = true }))
    assert.is_false(failed.ok)
    assert.truthy(failed.err:find("undo it", 1, true), failed.err)
    assert.are.equal(1, failed.count)
  end)

  it("rolls back the transaction of a call cancelled inside it, and frees the connection", function()
    server:send { jsonrpc = "2.0", id = "tx", method = "tools/call", params = { name = "tx_hang", arguments = {} } }
    assert.is_true(server:wait_stderr("tx_hang inside"), server.stderr)
    server:notify("notifications/cancelled", { requestId = "tx" })
    -- Answered only once the transaction's lock is given back; its row gone.
    local count = server:request("tools/call", { name = "count", arguments = {} })
    assert.truthy(count and count.result, server.stderr)
    assert.are.same({ count = 0 }, structured(count.result))
  end)

  it("answers other calls while a long query runs, and a cancellation interrupts it", function()
    server:send { jsonrpc = "2.0", id = "endless", method = "tools/call", params = { name = "endless", arguments = {} } }
    assert.is_true(server:wait_stderr("endless started"), server.stderr)
    -- Another call (on another connection) is answered while it runs.
    local quick = server:request("tools/call", { name = "quick", arguments = {} })
    assert.are.same({ n = 7 }, structured(quick.result))
    assert.is_nil(server.other, "the endless query answered before the quick call")
    server:notify("notifications/cancelled", { requestId = "endless" })
    -- Its connection is free again only if the query was interrupted.
    local count = server:request("tools/call", { name = "count", arguments = {} })
    assert.truthy(count and count.result, server.stderr)
    assert.are.same({ count = 0 }, structured(count.result))
    assert.is_nil(server.other, "the cancelled call was answered")
  end)

  it("interrupts a long query at its call's deadline", function()
    local response = server:request("tools/call", { name = "endless_deadline", arguments = {} })
    assert.is_true(response.result.isError)
    assert.truthy(response.result.content[1].text:find("time limit of 300 ms", 1, true), response.result.content[1].text)
    local count = server:request("tools/call", { name = "count", arguments = {} })
    assert.are.same({ count = 0 }, structured(count.result))
  end)

  it("opens a file inside the write permission and refuses one outside", function()
    assert.are.same({ ok = true }, structured(server:call_tool("open", { path = dir .. "/inside.db" })))
    local outside = client.temp_dir()
    local r = structured(server:call_tool("open", { path = outside .. "/outside.db" }))
    client.remove_tree(outside)
    assert.is_false(r.ok)
    assert.are.equal("EACCES", r.code)
    assert.truthy(r.err:find("permission denied: write", 1, true), r.err)
  end)
end)

describe("mcp.sqlite across a reload", function()
  it("keeps an in-memory database's connection, and its rows", function()
    local dir = client.temp_dir()
    local source = client.read_file(FIXTURE .. "/server.lua")
    client.write_file(dir .. "/server.lua", source)
    local server = client.spawn({ "dev", dir }, { env = { "SQLITE_WRITE=" .. dir } })
    server:initialize()
    structured(server:call_tool("add", { body = "before" }))
    structured(server:call_tool("add", { body = "before too" }))
    client.write_file(dir .. "/server.lua", source .. "\n-- changed\n")
    assert.is_true(server:wait_stderr("reloaded ("), server.stderr)
    assert.are.same({ count = 2 }, structured(server:call_tool("count", {})))
    server:close()
    client.remove_tree(dir)
  end)
end)

describe("mcp.sqlite with a file in WAL mode", function()
  local server, dir
  local function start(env)
    dir = client.temp_dir()
    local vars = { "SQLITE_WRITE=" .. dir }
    for _, v in ipairs(env or {}) do vars[#vars + 1] = v end
    server = client.spawn({ "run", FIXTURE }, { env = vars })
    server:initialize()
  end
  after_each(function()
    server:close()
    client.remove_tree(dir)
  end)

  it("writes on the loop with synchronous=NORMAL, checkpointing the -wal file itself", function()
    start()
    local r = structured(server:call_tool("wal_fill", { dir = dir, sync = "NORMAL", n = 3000 }))
    assert.are.equal(1, r.synchronous)
    assert.are.equal(3000, r.rows)
    -- The inserts ran on the loop, but for the one after each checkpoint
    -- (it waited behind it in the connection's queue, for the pool).
    assert.are.equal(3000, r.on_loop + r.on_pool)
    assert.is_true(r.on_pool <= r.checkpoints, ("%d on the pool, %d checkpoints"):format(r.on_pool, r.checkpoints))
    -- About 3000 commits of a frame or more: checkpointed at SQLite's
    -- threshold (1000 pages), the file reused rather than grown.
    assert.is_true(r.checkpoints >= 2, "checkpoints: " .. r.checkpoints)
    assert.is_true(r.most_wal_frames > 900 and r.most_wal_frames < 1100, "frames: " .. r.most_wal_frames)
    -- A threshold set with PRAGMA wal_autocheckpoint is honoured.
    local small = structured(server:call_tool("wal_fill", { dir = dir, sync = "OFF", n = 1000, autocheckpoint = 100 }))
    assert.are.same({ 1000, 1000 }, { small.on_loop + small.on_pool, small.rows })
    assert.is_true(small.on_pool <= small.checkpoints, ("%d on the pool"):format(small.on_pool))
    assert.is_true(small.checkpoints >= 5, "checkpoints: " .. small.checkpoints)
    assert.is_true(small.most_wal_frames < 120, "frames: " .. small.most_wal_frames)
  end)

  it("sends the writes of a synchronous=FULL database to the thread pool", function()
    start()
    local r = structured(server:call_tool("wal_fill", { dir = dir, sync = "FULL", n = 50 }))
    assert.are.equal(2, r.synchronous)
    assert.are.same({ 0, 50, 50 }, { r.on_loop, r.on_pool, r.rows })
  end)

  it("runs the checkpoint on the thread pool, after the statements before it and before those after", function()
    -- One thread in the pool, taken by an endless query: what needs the
    -- pool waits, what runs on the loop does not.
    start({ "UV_THREADPOOL_SIZE=1" })
    structured(server:call_tool("wal_fill", { dir = dir, sync = "NORMAL", n = 0 }))
    server:send { jsonrpc = "2.0", id = "endless", method = "tools/call", params = { name = "endless", arguments = {} } }
    assert.is_true(server:wait_stderr("endless started"), server.stderr)
    -- Its inserts run on the loop, until one passes the threshold: the
    -- checkpoint is queued, and waits for the pool.
    local filled = structured(server:call_tool("wal_until_checkpoint", {}))
    assert.are.same({ true, 0 }, { filled.pending, filled.checkpoints })
    assert.is_true(filled.inserted > 500, "inserted: " .. filled.inserted)
    -- A read on that connection waits behind the checkpoint (it would
    -- otherwise run on the loop); other calls are answered meanwhile.
    server:send { jsonrpc = "2.0", id = "count", method = "tools/call", params = { name = "wal_count", arguments = {} } }
    local quick = server:request("tools/call", { name = "quick", arguments = {} })
    assert.are.same({ n = 7 }, structured(quick.result))
    assert.is_nil(server.other, "answered while the pool was taken")
    -- The pool free again: the checkpoint runs, then the read.
    server:notify("notifications/cancelled", { requestId = "endless" })
    local count = server:await_response("count")
    assert.truthy(count and count.result, server.stderr)
    local r = structured(count.result)
    assert.are.same({ filled.inserted, 1 }, { r.rows, r.checkpoints })
  end)
end)
