#!/usr/bin/env bash
# bench/ui.sh -- what the web inspector's page costs a server (#45: "with
# the page attached, a server doing 5,000 calls per second loses at most 5%
# of its throughput").
#
#   bash bench/ui.sh LUAMCP BENCH_DIR OUT
#
# `luamcp dev bench/servers/add --ui --trace /dev/null` (stderr, with the
# page's address, to a file; the trace nowhere: both arms pay the same for
# it), driven over stdio by the load client, in two arms alternating for
# ROUNDS rounds: "detached" (no page) and "attached" (a headless Chromium
# showing the printed address). Both arms are the same command; only the
# browser differs. The client waits (--wait-file) until the arm is ready:
# for "attached", until GET /info says the "ui" connection is initialized
# (the page got its hello on /events and sent initialize: it is attached
# and live), then WARMUP calls at the pace, then the measured phase.
#
# Two loads: paced (--rate RATE, open loop, UI_SECONDS s) and unpaced (pipe,
# window 64, UNPACED_SECONDS s: the cost at full speed). Per arm: medians of
# the calls/s achieved, of the server's CPU per call (schedstat), of p50/p99
# latency (from when each call was due, for the paced load); the ratio
# attached/detached; the most bytes the page left unread in the server's
# socket (Send-Q, sampled: a page falling behind shows there); Chromium's
# CPU. Server on CPU 0; client and Chromium on CPU 1.
#
# The page is the one built into LUAMCP (runtime/ui/). Chromium missing:
# installed with apt-get when root, else skipped (said so; exit 0).
#
# Then instructions per call in the server under callgrind, with the page
# and without (IR_N1, IR_N2 calls; IR=0 skips it).
#
# Settings: ROUNDS (5), RATE (5000), UI_SECONDS (10), UNPACED_SECONDS (3),
# WARMUP (5000 calls), IR_N1 (2000), IR_N2 (12000); QUICK=1: 2 rounds, 3 s,
# 1 s, 500 and 3000 calls.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
LUAMCP=${1:-build/luamcp}
BB=${2:-build/bench}
OUT=${3:-bench/results/$(date +%Y-%m-%d)-ui.md}
if [[ -n "${QUICK:-}" ]]; then
  : "${ROUNDS:=2}" "${UI_SECONDS:=3}" "${UNPACED_SECONDS:=1}" "${WARMUP:=2000}" "${IR_N1:=500}" "${IR_N2:=3000}"
fi
ROUNDS=${ROUNDS:-5}
RATE=${RATE:-5000}
UI_SECONDS=${UI_SECONDS:-10}
UNPACED_SECONDS=${UNPACED_SECONDS:-3}
WARMUP=${WARMUP:-5000}
LC=$BB/loadclient
LOG=$BB/ui-$(date +%Y%m%d-%H%M%S).log
[[ -x $LC ]] || make -s -f bench/bench.mk "$LC" LUAMCP="$LUAMCP" >/dev/null || exit 2
[[ -x $LUAMCP ]] || { echo "bench/ui.sh: $LUAMCP is not built" >&2; exit 2; }

if ! command -v chromium >/dev/null && [[ $EUID -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "bench/ui.sh: installing chromium (apt-get)" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >>"$LOG" 2>&1 || true
fi
if ! command -v chromium >/dev/null; then
  echo "bench/ui.sh: SKIPPED: no chromium (apt-get install chromium); the page's cost is not measured" >&2
  exit 0
fi
for tool in curl ss setsid taskset; do
  command -v $tool >/dev/null || { echo "bench/ui.sh: SKIPPED: needs $tool" >&2; exit 0; }
done

TMP=$(mktemp -d)
CHROME_PID=
# Chromium and every process it started (its session: setsid made it lead one).
stop_chrome() {
  [[ -n $CHROME_PID ]] || return 0
  local p
  kill -- -"$CHROME_PID" 2>/dev/null
  wait "$CHROME_PID" 2>/dev/null
  for p in $(ps -o pid= --sid "$CHROME_PID" 2>/dev/null); do kill "$p" 2>/dev/null; done
  CHROME_PID=
}
cleanup() {
  stop_chrome
  rm -rf "$TMP"
}
trap cleanup EXIT

jget() { # json key -> value
  local v
  v=$(grep -o "\"$2\":[^,}]*" <<<"$1" | head -1) || true
  v=${v#*:}
  printf '%s' "${v//\"/}"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else if (NR) print (a[NR/2]+a[NR/2+1])/2}'; }
med() { tr ' ' '\n' <<<"$1" | grep -v '^$' | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.3f", a / b; else print "n/a" }'; }

# The address the server printed in FILE (waits for it; the server's pid to
# watch). Sets URL, BASE, TOKEN, PORT.
wait_address() {
  local file=$1 pid=$2 i
  for ((i = 0; i < 3000; i++)); do
    URL=$(grep -o 'http://127\.0\.0\.1:[0-9]*/?token=[0-9a-f]*' "$file" 2>/dev/null | head -1)
    [[ -n $URL ]] && break
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.01
  done
  [[ -n $URL ]] || return 1
  BASE=${URL%%/\?*}
  TOKEN=${URL##*token=}
  PORT=${BASE##*:}
}

SERVER=$LUAMCP
PAGE_NOTE="the page built into \`$LUAMCP\` (runtime/ui/)"

# Chromium's CPU (every live thread of every process in the session
# CHROME_PID leads: schedstat, in ns), in ms.
chrome_cpu_ms() {
  local p
  for p in $(ps -o pid= --sid "$CHROME_PID" 2>/dev/null); do cat /proc/"$p"/task/*/schedstat 2>/dev/null; done |
    awk '{ns += $1} END {printf "%d\n", ns / 1e6}'
}

# Chromium's GPU process (software rendering) gives its worker pool one
# thread per core, each pinned to its core, whatever affinity it was started
# with: one would run beside the server on CPU 0. Every thread of every
# Chromium process back to CPU 1 (they exist once the page has rendered).
pin_chrome() {
  local p
  for p in $(ps -o pid= --sid "$CHROME_PID" 2>/dev/null); do taskset -a -p -c 1 "$p" >/dev/null 2>&1; done
}
# Threads of Chromium that may still run on CPU 0 (0: none).
chrome_on_cpu0() {
  local p t n=0
  for p in $(ps -o pid= --sid "$CHROME_PID" 2>/dev/null); do
    for t in /proc/"$p"/task/*/status; do
      [[ $(awk '/^Cpus_allowed_list/ {print $2}' "$t" 2>/dev/null) == 1 ]] || n=$((n + 1))
    done
  done
  echo $n
}

# One arm: LOAD (paced|unpaced|ir:CALLS) PAGE (0|1) (not in a subshell: it sets
# CHROME_PID for cleanup). Prints the load client's JSON
# line, then "sendq=BYTES chrome_pct=PERCENT".
run_arm() {
  local load=$1 page=$2 gate=$TMP/gate err=$TMP/server.err out=$TMP/lc.json i
  local -a args wrap=()
  rm -f "$gate"
  : >"$err"
  if [[ $load == paced ]]; then
    args=(--mode pipe --rate "$RATE" -d "$UI_SECONDS")
  elif [[ $load == ir:* ]]; then # the server under callgrind, CALLS calls
    args=(--mode pipe --window 64 -n "${load#ir:}" --warmup 0 --timeout 900)
    wrap=(valgrind --tool=callgrind --callgrind-out-file="$TMP/callgrind.out")
    rm -f "$TMP/callgrind.out"
  else
    args=(--mode pipe --window 64 -d "$UNPACED_SECONDS")
  fi
  "$LC" -q --label "$load/$page" --warmup "$WARMUP" --timeout 600 "${args[@]}" --cpu 1 --server-cpu 0 --server-stderr "$err" \
    --wait-file "$gate" -- "${wrap[@]}" "$SERVER" dev bench/servers/add --ui --trace /dev/null >"$out" &
  local lc=$!
  if ! wait_address "$err" "$lc"; then
    echo "bench/ui.sh: the server printed no inspector address:" >&2
    cat "$err" >&2
    wait "$lc"
    return 1
  fi
  curl -s "$BASE/info?token=$TOKEN" >/dev/null # both arms alike
  CHROME_PID=
  if ((page)); then
    local profile=$TMP/profile
    rm -rf "$profile"
    setsid taskset -c 1 chromium --headless=new --no-sandbox --disable-gpu --user-data-dir="$profile" "$URL" >>"$LOG" 2>&1 &
    CHROME_PID=$!
    local attached=
    for ((i = 0; i < 600; i++)); do
      if curl -s "$BASE/info?token=$TOKEN" | grep -q '"initialized":"'; then attached=1; break; fi
      sleep 0.1
    done
    if [[ -z $attached ]]; then
      echo "bench/ui.sh: the page never initialized its connection (60 s): not attached" >&2
      stop_chrome
      kill "$lc"
      wait "$lc"
      return 1
    fi
  fi
  local c0=0 t0 t1
  [[ -n $CHROME_PID ]] && pin_chrome
  t0=$(date +%s%N)
  [[ -n $CHROME_PID ]] && c0=$(chrome_cpu_ms)
  touch "$gate"
  # the most bytes the page left unread in the server's side of /events
  local sendq=0 q
  while kill -0 "$lc" 2>/dev/null; do
    q=$(ss -tnH state established "( sport = :$PORT )" 2>/dev/null | awk 'BEGIN {m = 0} $2 > m {m = $2} END {print m}')
    ((q > sendq)) && sendq=$q
    sleep 0.2
  done
  wait "$lc"
  local rc=$? c1=0
  if [[ -n $CHROME_PID ]]; then
    c1=$(chrome_cpu_ms)
    t1=$(date +%s%N)
    local stray
    stray=$(chrome_on_cpu0)
    ((stray == 0)) || echo "bench/ui.sh: $stray Chromium thread(s) were not on CPU 1 alone" >&2
    stop_chrome
  fi
  cat "$err" >>"$LOG"
  cat "$out"
  # Chromium's share of a CPU from the gate to the end (warm-up included)
  [[ -n ${t1:-} ]] || t1=$t0
  echo "sendq=$sendq chrome_pct=$(awk -v ms=$((c1 - c0)) -v ns=$((t1 - t0)) 'BEGIN { printf "%.1f", (ns > 0 ? ms * 1e8 / ns : 0) }')"
  return $rc
}

declare -A RATE_ CPU P50 P99 SENDQ CHROME ALL
FAIL=0
for ((r = 1; r <= ROUNDS; r++)); do
  for load in paced unpaced; do
    for page in 0 1; do
      run_arm $load $page >"$TMP/arm" || { FAIL=1; echo "bench/ui.sh: $load page=$page FAILED (round $r)" >&2; }
      res=$(cat "$TMP/arm")
      j=$(head -1 <<<"$res")
      tail=$(tail -1 <<<"$res")
      echo "$j" >>"$LOG"
      [[ $(jget "$j" result) == ok ]] || { FAIL=1; echo "bench/ui.sh: $load page=$page: $j" >&2; continue; }
      k=${load}_$page
      RATE_[$k]+="$(jget "$j" calls_per_s) "
      CPU[$k]+="$(jget "$j" server_sched_us_per_call) "
      P50[$k]+="$(jget "$j" lat_p50_us) "
      P99[$k]+="$(jget "$j" lat_p99_us) "
      sq=${tail#sendq=}; sq=${sq%% *}
      SENDQ[$k]+="$sq "
      CHROME[$k]+="${tail##*chrome_pct=} "
      ALL[$k]+="$(printf '%.0f' "$(jget "$j" calls_per_s)") "
    done
  done
  echo "round $r/$ROUNDS done" >&2
done

# Instructions per call under callgrind (deterministic, unlike the clocks on
# a shared machine), with and without the page: the whole server run for
# IR_N2 calls minus that for IR_N1, over IR_N2 - IR_N1, so start-up and
# attaching cancel out. The server is ~50x slower there, so the page gets
# its events in smaller batches than at full speed: if anything, this
# overstates the page's share. Skipped without valgrind, or IR=0.
IR_N1=${IR_N1:-2000} IR_N2=${IR_N2:-12000}
ir_total() { # page calls -> instructions of the whole server run
  run_arm "ir:$2" "$1" >"$TMP/arm" || return 1
  grep -E '^(summary|totals):' "$TMP/callgrind.out" | head -1 | awk '{print $2}'
}
declare -A IR
if command -v valgrind >/dev/null && [[ ${IR:-1} != 0 ]]; then
  for page in 0 1; do
    a=$(ir_total $page "$IR_N1") && b=$(ir_total $page "$IR_N2") && [[ -n $a && -n $b ]] &&
      IR[$page]=$(((b - a) / (IR_N2 - IR_N1)))
  done
  echo "callgrind done" >&2
fi

maxof() { tr ' ' '\n' <<<"$1" | grep -v '^$' | sort -g | tail -1; }
{
  echo
  echo "## The inspector's page attached vs not (bench/ui.sh, $(date -u +%Y-%m-%dT%H:%MZ))"
  echo
  echo "\`luamcp dev bench/servers/add --ui --trace /dev/null\` over stdio (stderr to a file), with no page and with"
  echo "headless Chromium ($(chromium --version 2>/dev/null | head -1 | sed 's/ built on.*//')) showing $PAGE_NOTE;"
  echo "attached = GET /info reports the page's \"ui\" connection initialized, then $WARMUP warm-up calls."
  echo "Alternating, $ROUNDS rounds; medians. Paced: \`loadclient --rate $RATE\` (open loop) for $UI_SECONDS s,"
  echo "latency from when each call was due. Unpaced: pipelined, window 64, $UNPACED_SECONDS s."
  echo "Server on CPU 0; the load client and Chromium on CPU 1."
  echo
  echo "| load | page | calls/s | attached/detached | server µs/call | attached/detached | p50 µs | p99 µs | Send-Q max (B) | Chromium CPU % |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for load in paced unpaced; do
    r0=$(med "${RATE_[${load}_0]:-}"); r1=$(med "${RATE_[${load}_1]:-}")
    c0=$(med "${CPU[${load}_0]:-}"); c1=$(med "${CPU[${load}_1]:-}")
    for page in 0 1; do
      k=${load}_$page
      name=$([[ $page == 1 ]] && echo attached || echo detached)
      rr=""; cr=""
      if [[ $page == 1 ]]; then rr=$(ratio "$r1" "$r0"); cr=$(ratio "$c1" "$c0"); fi
      printf '| %s | %s | %.0f | %s | %s | %s | %.0f | %.0f | %s | %s |\n' "$load" "$name" "$(med "${RATE_[$k]:-}")" "$rr" \
        "$(med "${CPU[$k]:-}")" "$cr" "$(med "${P50[$k]:-}")" "$(med "${P99[$k]:-}")" \
        "$([[ $page == 1 ]] && maxof "${SENDQ[$k]:-}" || echo -)" "$([[ $page == 1 ]] && med "${CHROME[$k]:-}" || echo -)"
    done
  done
  pr=$(ratio "$(med "${RATE_[paced_1]:-}")" "$(med "${RATE_[paced_0]:-}")")
  echo
  if [[ -n ${IR[0]:-} && -n ${IR[1]:-} ]]; then
    echo "Instructions per call in the server (callgrind, unpaced, calls $IR_N1 to $IR_N2): detached ${IR[0]}," \
      "attached ${IR[1]}, attached/detached $(ratio "${IR[1]}" "${IR[0]}")."
    echo
  fi
  echo "#45 (paced, attached/detached calls/s >= 0.95): $pr — $(awk -v r="$pr" 'BEGIN { print (r + 0 >= 0.95) ? "met" : "NOT met" }')."
  echo
  echo "Every round, calls/s: paced detached ${ALL[paced_0]:-}/ attached ${ALL[paced_1]:-}; unpaced detached ${ALL[unpaced_0]:-}/ attached ${ALL[unpaced_1]:-}"
  echo "Every round, attached, the most bytes the page left unread (Send-Q): paced ${SENDQ[paced_1]:-}; unpaced ${SENDQ[unpaced_1]:-}"
  ((FAIL)) && echo && echo "Some runs FAILED: see $LOG."
} | tee -a "$OUT"
exit $FAIL
