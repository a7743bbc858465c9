-- bench/redis.lua LUAMCP [OUT.md]
--
-- What --redis costs per operation, against a local redis-server (started
-- here on a free port, no persistence), without and with --redis, in
-- alternation over ROUNDS rounds, medians with min-max:
--
--   1. mcp.notify_resource_updated: the sender's CPU per call (with
--      --redis each call also PUBLISHes on the bus), and the CPU a second
--      process spends per bus message it receives (and ignores: it has no
--      subscriber);
--   2. mcp.store.incr: one after another (a round trip each with Redis) and
--      N at once (mcp.all, pipelined on the one connection): wall time per
--      call and the server's CPU per call.
--
-- Ratios matter, not absolute numbers (a shared 2-core machine). Prints a
-- markdown section and appends it to OUT.md when given.

package.path = "bench/?.lua;spec/helpers/?.lua;" .. package.path
local report = require "report"
local client = require "mcp_client"
local services = require "services"
local uv = require "luv"

local LUAMCP, OUT = arg[1] or "build/luamcp", arg[2]
client.LUAMCP = LUAMCP
local ROUNDS = tonumber(os.getenv("ROUNDS") or "5")
local QUICK = os.getenv("QUICK") ~= nil
local NOTIFY = QUICK and 20000 or 100000
local INCR = QUICK and 5000 or 20000
local SCRIPTS = "bench/servers/redis"

local out = report.new()
local function say(...) out:say(...) end

local median = report.median

local function range(t)
  local lo, hi = math.huge, -math.huge
  for _, v in ipairs(t) do lo, hi = math.min(lo, v), math.max(hi, v) end
  return ("%.2f (%.2f-%.2f)"):format(median(t), lo, hi)
end

-- CPU time of pid's main thread (where the loop runs), in seconds, to the
-- nanosecond (/proc/PID/schedstat; /proc/PID/stat counts 10 ms ticks).
local function cpu_s(pid)
  local f = assert(io.open("/proc/" .. pid .. "/schedstat"))
  local ns = tonumber(f:read("a"):match("^(%d+)"))
  f:close()
  return ns / 1e9
end

local redis = assert(services.redis())
local URL = redis.url .. "/0"

local function start(with_redis)
  local args = { "run", SCRIPTS }
  if with_redis then args[#args + 1] = "--redis" args[#args + 1] = URL end
  local p = client.spawn(args)
  p:initialize()
  return p
end

-- CPU counts what follows the answer too (hiredis writes the PUBLISHes
-- and reads their replies once the handler has returned): it is read after
-- a pause, which the wall time leaves out.
local function timed_call(p, name, args)
  local c0, t0 = cpu_s(p.pid), uv.hrtime()
  local r = p:call_tool(name, args, nil)
  local wall = (uv.hrtime() - t0) / 1e9
  assert(r and not r.isError, "call failed: " .. p.stderr)
  client.sleep(200)
  return cpu_s(p.pid) - c0, wall
end

-- Results in microseconds per operation.
local notify = { local_cpu = {}, redis_cpu = {}, receiver_cpu = {} }
local incr = { local_seq = {}, redis_seq = {}, local_all = {}, redis_all = {}, local_all_cpu = {}, redis_all_cpu = {} }

-- The receiver: a second process on the bus that only listens.
local receiver = start(true)

for round = 1, ROUNDS do
  for _, with_redis in ipairs { false, true } do
    local p = start(with_redis)
    p:call_tool("notify", { n = 1000 }) -- warm up
    local r0 = cpu_s(receiver.pid)
    local cpu = timed_call(p, "notify", { n = NOTIFY })
    -- Let the receiver drain the channel before reading its CPU.
    client.sleep(200)
    local recv = cpu_s(receiver.pid) - r0
    table.insert(with_redis and notify.redis_cpu or notify.local_cpu, cpu / NOTIFY * 1e6)
    if with_redis then table.insert(notify.receiver_cpu, recv / NOTIFY * 1e6) end
    p:call_tool("incr", { n = 100 })
    local _, swall = timed_call(p, "incr", { n = INCR })
    local acpu, awall = timed_call(p, "incr", { n = INCR, concurrent = true })
    local k = with_redis and "redis" or "local"
    table.insert(incr[k .. "_seq"], swall / INCR * 1e6)
    table.insert(incr[k .. "_all"], awall / INCR * 1e6)
    table.insert(incr[k .. "_all_cpu"], acpu / INCR * 1e6)
    p:close()
  end
  io.stderr:write(("bench/redis.lua: round %d of %d\n"):format(round, ROUNDS))
end
receiver:close()
redis:stop()

say("")
say("## --redis: the bus and the store (bench/redis.lua)")
say("")
say("A local redis-server; %d rounds in alternation, median (min-max), microseconds per operation.", ROUNDS)
say("")
say("| | without --redis | with --redis | ratio |")
say("| --- | --- | --- | --- |")
say("| notify_resource_updated, sender CPU (%d calls) | %s | %s | %.1fx |", NOTIFY, range(notify.local_cpu),
  range(notify.redis_cpu), median(notify.redis_cpu) / math.max(median(notify.local_cpu), 1e-9))
say("| the same, CPU of another process receiving the bus message | – | %s | |", range(notify.receiver_cpu))
say("| store.incr one after another, wall time per call (%d) | %s | %s | %.0fx |", INCR, range(incr.local_seq),
  range(incr.redis_seq), median(incr.redis_seq) / math.max(median(incr.local_seq), 1e-9))
say("| store.incr %d at once (mcp.all), wall time per call | %s | %s | %.1fx |", INCR, range(incr.local_all),
  range(incr.redis_all), median(incr.redis_all) / math.max(median(incr.local_all), 1e-9))
say("| store.incr at once, server CPU per call | %s | %s | %.1fx |", range(incr.local_all_cpu),
  range(incr.redis_all_cpu), median(incr.redis_all_cpu) / math.max(median(incr.local_all_cpu), 1e-9))
out:save(OUT)
