#!/usr/bin/env bash
# bench/cross.sh [BINARY...] - the small-call figures of `make bench` (its
# load client, its `add` server) for several builds side by side, in
# alternation, in one run: the native build beside the foreign ones run
# here (build/linux-arm64/luamcp under qemu-user-static through
# binfmt_misc: runtime/tools/cross/qemu-binfmt.sh). A sanity check of an
# emulated build, not a measure of arm64 hardware. Prints a Markdown table.
#
#   ROUNDS=3 SEQ_SECONDS=2 PIPE_CALLS=5000 HTTP_SECONDS=2 bench/cross.sh
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

ROUNDS=${ROUNDS:-3}
SEQ_SECONDS=${SEQ_SECONDS:-2}
PIPE_CALLS=${PIPE_CALLS:-5000}
HTTP_SECONDS=${HTTP_SECONDS:-2}
STARTUP_REPEAT=${STARTUP_REPEAT:-5}
LC=build/bench/loadclient
[ $# -gt 0 ] || set -- build/luamcp build/luamcp-static build/linux-arm64/luamcp
[ -x "$LC" ] || make -s "$LC" || exit 1
bins=()
for bin in "$@"; do
  if [ -x "$bin" ]; then bins+=("$bin"); else echo "$bin: not built, left out" >&2; fi
done
set -- "${bins[@]}"

# The median of the numbers on stdin.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
jget() { grep -o "\"$2\":[0-9.e+-]*" <<<"$1" | head -n 1 | cut -d: -f2; }

declare -A seen=()
record() { seen["$1|$2"]+="$3 "; }

for r in $(seq "$ROUNDS"); do
  for bin in "$@"; do
    echo "round $r/$ROUNDS: $bin" >&2
    out=$("$LC" --mode startup --repeat "$STARTUP_REPEAT" --timeout 120 -- "$bin" run bench/servers/add 2>/dev/null)
    record "$bin" startup_ms "$(jget "$out" startup_ms_median)"
    out=$("$LC" --mode seq -d "$SEQ_SECONDS" --warmup 200 --timeout 300 -- "$bin" run bench/servers/add 2>/dev/null)
    record "$bin" seq_cps "$(jget "$out" calls_per_s)"
    record "$bin" seq_p50_us "$(jget "$out" lat_p50_us)"
    out=$("$LC" --mode pipe --window 64 -n "$PIPE_CALLS" --warmup 200 --timeout 600 -- "$bin" run bench/servers/add 2>/dev/null)
    record "$bin" pipe_cps "$(jget "$out" calls_per_s)"
    record "$bin" rss_idle_kb "$(jget "$out" rss_idle_kb)"
    port=$("$LC" --free-port)
    "$bin" run --http "127.0.0.1:$port" bench/servers/add 2>/dev/null </dev/null &
    pid=$!
    out=$("$LC" --http "http://127.0.0.1:$port/mcp" --connect-timeout 60 -c 1 -d "$HTTP_SECONDS" --warmup 100 \
      --server-pid "$pid" --timeout 300 2>/dev/null)
    record "$bin" http_c1_cps "$(jget "$out" calls_per_s)"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
done

metrics="startup_ms seq_cps seq_p50_us pipe_cps http_c1_cps rss_idle_kb"
printf '| build | size (stripped) |'
for m in $metrics; do printf ' %s |' "$m"; done
printf '\n|---|---|'
for _ in $metrics; do printf -- '---|'; done
printf '\n'
for bin in "$@"; do
  stripped=$(mktemp)
  objcopy --strip-all "$bin" "$stripped" 2>/dev/null || aarch64-linux-gnu-objcopy --strip-all "$bin" "$stripped" 2>/dev/null
  printf '| %s | %s (%s) |' "$bin" "$(stat -c %s "$bin")" "$(stat -c %s "$stripped")"
  rm -f "$stripped"
  for m in $metrics; do
    printf ' %s |' "$(tr ' ' '\n' <<<"${seen["$bin|$m"]}" | grep . | median)"
  done
  printf '\n'
done
echo "medians of $ROUNDS rounds; $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
