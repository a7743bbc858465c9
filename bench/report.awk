# bench/report.awk -- turns bench/run.sh's raw records into markdown tables.
# Input: TSV lines "server placement metric value". POSIX awk (mawk is fine).
# Variables: servers="luamcp luamcp-jwt ts ts2 floor echo", placements="same split",
#            luamcp=path of the binary (for the "not built" note).

function isnum(v) { return v ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }

# median / min / max of the values recorded for key k
function stats(k,    n, i, j, t, a) {
  n = cnt[k]
  if (n == 0) return 0
  for (i = 1; i <= n; i++) a[i] = val[k, i] + 0
  for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
  S_MIN = a[1]; S_MAX = a[n]
  S_MED = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  S_N = n
  return 1
}

function fmt(x, unit) {
  if (unit == "cps") return sprintf("%.0f", x)
  if (unit == "us") return (x < 10) ? sprintf("%.2f", x) : (x < 100) ? sprintf("%.1f", x) : sprintf("%.0f", x)
  if (unit == "ms") return (x < 10) ? sprintf("%.2f", x) : sprintf("%.1f", x)
  if (unit == "kb") return (x < 10240) ? sprintf("%.2f", x / 1024) : sprintf("%.1f", x / 1024)
  if (unit == "kbx") return sprintf("%.1f", x)
  if (unit == "kbi") return sprintf("%.0f", x)
  if (unit == "s") return sprintf("%.1f", x)
  if (unit == "bytes") return (x < 1048576) ? sprintf("%.0f kB", x / 1024) : sprintf("%.1f MiB", x / 1048576)
  return x ""
}

# one cell: "median (min–max)" or a reason
function cell(s, p, m, unit,    k) {
  if (missing[s]) return (s == "luamcp") ? "not built" : "n/a"
  k = s SUBSEP p SUBSEP m
  if (!stats(k)) return failed[s, p] ? "FAIL" : "–"
  if (S_N == 1 || S_MIN == S_MAX) return fmt(S_MED, unit)
  return fmt(S_MED, unit) " (" fmt(S_MIN, unit) "–" fmt(S_MAX, unit) ")"
}
function med(s, p, m) { if (missing[s] || !stats(s SUBSEP p SUBSEP m)) return ""; return S_MED }
function ratio(s1, s2, p, m,    a, b) {
  a = med(s1, p, m); b = med(s2, p, m)
  if (a == "" || b == "" || b + 0 == 0) return "–"
  return sprintf("%.2f", a / b)
}

function header(extra,    i, h, l) {
  h = "| " extra " |"; l = "|---|"
  for (i = 1; i <= ns; i++) { h = h " " name[sv[i]] " |"; l = l "---:|" }
  if (has_luamcp && has_jwt) { h = h " JWT/no auth |"; l = l "---:|" }
  if (has_luamcp) {
    if (has_ts) { h = h " luamcp/TS v1 |"; l = l "---:|" }
    if (has_ts2) { h = h " luamcp/TS v2 |"; l = l "---:|" }
    if (has_floor) { h = h " luamcp/floor |"; l = l "---:|" }
  }
  print h; print l
}
function row(label, p, m, unit, only,    i, r, s) {
  r = "| " label " |"
  for (i = 1; i <= ns; i++) {
    s = sv[i]
    if (only != "" && index(" " only " ", " " s " ") == 0) r = r " – |"
    else if (m ~ /^(m?http_|sessions_)/ && nohttp[s] && !missing[s]) r = r " no HTTP |"
    else r = r " " cell(s, p, m, unit) " |"
  }
  if (has_luamcp && has_jwt) r = r " " ratio("luamcp-jwt", "luamcp", p, m) " |"
  if (has_luamcp) {
    if (has_ts) r = r " " ratio("luamcp", "ts", p, m) " |"
    if (has_ts2) r = r " " ratio("luamcp", "ts2", p, m) " |"
    if (has_floor) r = r " " ((only != "" && index(" " only " ", " floor ") == 0) ? "–" : ratio("luamcp", "floor", p, m)) " |"
  }
  print r
}

# The rows of one HTTP table: each connection count in counts (a set),
# ascending; key is the metrics' prefix (http, or mhttp for 2026-07-28).
function http_rows(p, key, counts, only,    n, list, a, b, t, c) {
  n = 0
  for (c in counts) list[++n] = c + 0
  for (a = 2; a <= n; a++) { t = list[a]; for (b = a - 1; b >= 1 && list[b] > t; b--) list[b + 1] = list[b]; list[b + 1] = t }
  for (a = 1; a <= n; a++) {
    c = list[a]
    row("calls/s, " c " connection" (c > 1 ? "s" : ""), p, key "_c" c "_cps", "cps", only)
    row("latency p50, " c " conn, µs", p, key "_c" c "_p50_us", "us", only)
    row("latency p99, " c " conn, µs", p, key "_c" c "_p99_us", "us", only)
    row("server CPU µs/call, " c " conn", p, key "_c" c "_cpu_us", "us", only)
  }
}

BEGIN { FS = "\t" }
{
  s = $1; p = $2; m = $3; v = $4
  if (m == "missing") { missing[s] = 1; next }
  if (m == "no_http") { nohttp[s] = 1; next }
  if (m ~ /^fail_/) { failed[s, p] = 1; fails[s, p, substr(m, 6)] = 1; next }
  if (m == "size_note" || m == "long_samples") { note[s, m] = v; next }
  if (!isnum(v)) next
  k = s SUBSEP p SUBSEP m
  val[k, ++cnt[k]] = v
}
END {
  name["luamcp"] = "luamcp"; name["luamcp-jwt"] = "luamcp, JWT each request"; name["ts"] = "TS SDK v1"; name["ts2"] = "TS SDK v2"
  name["floor"] = "floor (Lua+cjson)"; name["echo"] = "echo (raw C; HTTP: httpecho)"
  ns = split(servers, sv, " ")
  for (i = 1; i <= ns; i++) {
    if (sv[i] == "luamcp") has_luamcp = 1
    if (sv[i] == "luamcp-jwt") has_jwt = 1
    if (sv[i] == "ts") has_ts = 1
    if (sv[i] == "ts2") has_ts2 = 1
    if (sv[i] == "floor") has_floor = 1
    if (!(sv[i] in name)) name[sv[i]] = sv[i]
  }
  if (missing["luamcp"]) print "**luamcp: not built** (" luamcp " missing): its cells say \"not built\".\n"
  for (i = 1; i <= ns; i++) if (nohttp[sv[i]] && !missing[sv[i]]) print "**" name[sv[i]] ": no HTTP** (its Streamable HTTP server exited at start; see the run log).\n"
  print "Cells: median over the rounds (min–max). Ratios: luamcp's median / the other's median (for calls/s higher is better, for everything else lower is better)."
  if (has_jwt) print "luamcp, JWT each request: the same luamcp and script as an OAuth resource server (--auth-issuer, --auth-jwks-file), every HTTP request carrying `Authorization: Bearer` with one RS256 JWT (checked in full once, then found in luamcp's cache of verified tokens by its SHA-256, its exp still checked); JWT/no auth: its median / plain luamcp's. HTTP only."
  print "CPU µs/call: the server process's time on CPU (all threads) over the measured phase / calls, from /proc/PID/task/*/schedstat (ns; the same quantity as utime+stime in /proc/PID/stat, which the raw JSON also has, without its 10 ms ticks). RSS: VmRSS of the server process. MiB = 1024 kB."
  print ""
  np = split(placements, pl, " ")
  for (j = 1; j <= np; j++) {
    p = pl[j]
    if (p == "same") desc = "client and server on the same core (both `taskset` CPU 0)"
    else if (p == "split") desc = "separate cores (server CPU 0, client CPU 1)"
    else desc = p
    print "## stdio — " desc
    print ""
    header("stdio, " p)
    row("calls/s, sequential (1 in flight)", p, "seq_cps", "cps")
    row("latency p50, sequential, µs", p, "seq_p50_us", "us")
    row("latency p99, sequential, µs", p, "seq_p99_us", "us")
    row("latency p99.9, sequential, µs", p, "seq_p999_us", "us")
    row("server CPU µs/call, sequential", p, "seq_cpu_us", "us")
    row("calls/s, pipelined (window 64)", p, "pipe_cps", "cps")
    row("server CPU µs/call, pipelined", p, "pipe_cpu_us", "us")
    row("start-up: spawn → initialize answer, ms", p, "startup_ms", "ms")
    row("idle RSS (after initialize), MiB", p, "rss_idle_kb", "kb")
    row("RSS after warm-up + 100k calls, MiB", p, "rss_100k_kb", "kb")
    print ""
    print "## Streamable HTTP — " desc
    print ""
    header("HTTP, " p)
    nc = 0
    for (k in cnt) {
      split(k, kk, SUBSEP)
      if (kk[2] == p && kk[3] ~ /^http_c[0-9]+_cps$/) { c = kk[3]; sub(/^http_c/, "", c); sub(/_cps$/, "", c); conns[c] = 1 }
      if (kk[2] == p && kk[3] ~ /^mhttp_c[0-9]+_cps$/) { c = kk[3]; sub(/^mhttp_c/, "", c); sub(/_cps$/, "", c); mconns[c] = 1; has_modern[p] = 1 }
    }
    http_rows(p, "http", conns, "luamcp luamcp-jwt ts ts2 echo")
    delete conns
    row("idle RSS (1 session), MiB", p, "http_rss_idle_kb", "kb", "luamcp luamcp-jwt ts ts2 echo")
    row("RSS after all HTTP runs, MiB", p, "http_rss_after_kb", "kb", "luamcp luamcp-jwt ts ts2 echo")
    print ""
    if (("luamcp", p, "ws_seq_cps") in cnt) {
      print "## WebSocket (GET /mcp, subprotocol mcp: a session on one connection) — " desc
      print ""
      header("WebSocket, " p)
      row("calls/s, sequential (1 in flight)", p, "ws_seq_cps", "cps", "luamcp")
      row("latency p50, sequential, µs", p, "ws_seq_p50_us", "us", "luamcp")
      row("server CPU µs/call, sequential", p, "ws_seq_cpu_us", "us", "luamcp")
      row("calls/s, pipelined (window 64)", p, "ws_pipe_cps", "cps", "luamcp")
      row("server CPU µs/call, pipelined", p, "ws_pipe_cpu_us", "us", "luamcp")
      print ""
    }
    if (!has_modern[p]) continue
    print "## Streamable HTTP, 2026-07-28 (stateless: no initialize, no session; each request carries its version, capabilities and client info) — " desc
    print ""
    header("HTTP 2026-07-28, " p)
    http_rows(p, "mhttp", mconns, "luamcp luamcp-jwt ts2")
    delete mconns
    row("RSS after all 2026-07-28 runs, MiB", p, "mhttp_rss_after_kb", "kb", "luamcp luamcp-jwt ts2")
    print ""
  }
  print "## Once per server (split placement: server CPU 0, client CPU 1)"
  print ""
  header("")
  row("binary size", "-", "size_bytes", "bytes")
  row("idle HTTP sessions (" sessions "): server RSS, MiB", "split", "sessions_rss_kb", "kb", "luamcp ts ts2")
  row("  RSS before them, MiB", "split", "sessions_base_kb", "kb", "luamcp ts ts2")
  row("  kB per idle session", "split", "sessions_kb_each", "kbx", "luamcp ts ts2")
  row("  time to create them, s", "split", "sessions_s", "s", "luamcp ts ts2")
  row("stdio run of " longcalls " calls: RSS after warm-up, MiB", "split", "long_rss_start_kb", "kb")
  row("  RSS at the end, MiB", "split", "long_rss_end_kb", "kb")
  row("  RSS growth, kB", "split", "long_growth_kb", "kbi")
  row("  calls/s", "split", "long_cps", "cps")
  row("  time, s", "split", "long_s", "s")
  print ""
  print "What the sizes count:"
  for (i = 1; i <= ns; i++) if ((sv[i], "size_note") in note) print "- " name[sv[i]] ": " note[sv[i], "size_note"]
  print ""
  print "RSS during the long stdio run (calls:kB, sampled every tenth):"
  for (i = 1; i <= ns; i++) if ((sv[i], "long_samples") in note) print "- " name[sv[i]] ": " note[sv[i], "long_samples"]
  nf = 0
  for (k in fails) nf++
  if (nf) {
    print ""
    print "Failed measurements (server, placement, test):"
    for (k in fails) { split(k, kk, SUBSEP); print "- " kk[1] ", " kk[2] ", " kk[3] }
  }
}
