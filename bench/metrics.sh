#!/usr/bin/env bash
# bench/metrics.sh -- what counting costs a small call (#32): luamcp with
# its metrics on (the default) against `--metrics off`, in the same run,
# alternating (on, off, on, off, ...) so that drift hits both alike.
#
#   bash bench/metrics.sh LUAMCP BENCH_DIR OUT
#
# stdio: pipelined add calls (window 64); HTTP: 16 keep-alive connections,
# one session each. For each, the medians over ROUNDS of calls/s and of the
# server's CPU per call (schedstat), and the ratio on/off. Appends a
# section to OUT. Settings: ROUNDS (default 7), CALLS (stdio, default
# 100000), HTTP_SECONDS (default 3); QUICK=1: 3 rounds, small numbers.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
LUAMCP=${1:-build/luamcp}
BB=${2:-build/bench}
OUT=${3:-bench/results/$(date +%Y-%m-%d)-metrics.md}
if [[ -n "${QUICK:-}" ]]; then : "${ROUNDS:=3}" "${CALLS:=20000}" "${HTTP_SECONDS:=1}"; fi
ROUNDS=${ROUNDS:-7}
CALLS=${CALLS:-100000}
HTTP_SECONDS=${HTTP_SECONDS:-3}
LC=$BB/loadclient
LOG=$BB/metrics-$(date +%Y%m%d-%H%M%S).log
[[ -x $LC ]] || make -s -f bench/bench.mk "$LC" LUAMCP="$LUAMCP" >/dev/null || exit 2
[[ -x $LUAMCP ]] || { echo "bench/metrics.sh: $LUAMCP is not built" >&2; exit 2; }
pin() { command -v taskset >/dev/null && echo "taskset -c $1"; }

jget() { # json key -> value
  local v
  v=$(grep -o "\"$2\":[^,}]*" <<<"$1" | head -1) || true
  v=${v#*:}
  printf '%s' "${v//\"/}"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
flags() { [[ $1 == off ]] && echo "--metrics off"; }

declare -A RATE CPU
for ((r = 1; r <= ROUNDS; r++)); do
  for mode in on off; do
    # shellcheck disable=SC2046
    j=$("$LC" -q --label "stdio/$mode" --mode pipe --window 64 -n "$CALLS" --warmup 2000 --cpu 1 --server-cpu 0 \
      --server-stderr "$LOG" -- "$LUAMCP" run bench/servers/add $(flags $mode))
    RATE[stdio_$mode]+="$(jget "$j" calls_per_s) "
    CPU[stdio_$mode]+="$(jget "$j" server_sched_us_per_call) "
    port=$("$LC" --free-port)
    # shellcheck disable=SC2046
    $(pin 0) "$LUAMCP" run --http "127.0.0.1:$port" bench/servers/add $(flags $mode) >>"$LOG" 2>&1 </dev/null &
    pid=$!
    j=$("$LC" -q --label "http/$mode" --http "http://127.0.0.1:$port/mcp" --connect-timeout 30 -c 16 -d "$HTTP_SECONDS" \
      --warmup 2000 --cpu 1 --server-pid "$pid")
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    RATE[http_$mode]+="$(jget "$j" calls_per_s) "
    CPU[http_$mode]+="$(jget "$j" server_sched_us_per_call) "
  done
  echo "round $r/$ROUNDS done" >&2
done

# Instructions per stdio call under callgrind (deterministic, unlike the
# clocks on a shared machine): the total for N2 calls minus that for N1,
# over N2 - N1, so start-up cancels out. Skipped without valgrind.
IR_N1=2000 IR_N2=12000
ir_total() { # mode calls -> instructions of the whole server run
  local cg=$BB/metrics-callgrind.out
  rm -f "$cg"
  # shellcheck disable=SC2046
  "$LC" -q --mode pipe -n "$2" --warmup 0 --timeout 900 -- valgrind --tool=callgrind --callgrind-out-file="$cg" \
    "$LUAMCP" run bench/servers/add $(flags "$1") >/dev/null 2>>"$LOG"
  grep -E '^(summary|totals):' "$cg" | head -1 | awk '{print $2}'
}
declare -A IR
if command -v valgrind >/dev/null; then
  for mode in on off; do
    a=$(ir_total "$mode" "$IR_N1"); b=$(ir_total "$mode" "$IR_N2")
    [[ -n $a && -n $b ]] && IR[$mode]=$(( (b - a) / (IR_N2 - IR_N1) ))
  done
fi

med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }
{
  echo
  echo "## Metrics on vs off (bench/metrics.sh, $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "luamcp \`$LUAMCP\` serving bench/servers/add, counting on (the default) and with \`--metrics off\`,"
  echo "alternating, $ROUNDS rounds each; medians. stdio: $CALLS pipelined calls (window 64);"
  echo "HTTP: 16 connections for ${HTTP_SECONDS} s. Server on CPU 0, client on CPU 1."
  echo
  echo "| transport | calls/s on | calls/s off | on/off | server µs/call on | off | on/off |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for t in stdio http; do
    ron=$(med "${RATE[${t}_on]}"); roff=$(med "${RATE[${t}_off]}")
    con=$(med "${CPU[${t}_on]}"); coff=$(med "${CPU[${t}_off]}")
    echo "| $t | $ron | $roff | $(ratio "$ron" "$roff") | $con | $coff | $(ratio "$con" "$coff") |"
  done
  if [[ -n ${IR[on]:-} && -n ${IR[off]:-} ]]; then
    echo
    echo "Instructions per stdio call (callgrind, calls $IR_N1 to $IR_N2): on ${IR[on]}, off ${IR[off]}," \
      "on/off $(ratio "${IR[on]}" "${IR[off]}")."
  fi
  echo
  echo "Every round: stdio on: ${RATE[stdio_on]}/ off: ${RATE[stdio_off]}(calls/s); HTTP on: ${RATE[http_on]}/ off: ${RATE[http_off]}"
} | tee -a "$OUT"
