#!/usr/bin/env bash
# bench/startup.sh [BINARY...] - start-up time (spawn -> initialize answer,
# bench/loadclient --mode startup) of several luamcp builds, in alternation
# in one run, so that the machine's load falls on all of them alike: round
# r spawns every binary on every folder once, ROUNDS times. Prints a
# Markdown table of medians (and minimums) in milliseconds; "fails" where
# a binary gives no initialize answer (an older build, a newer folder).
#
#   bench/startup.sh build/luamcp /tmp/old/build/luamcp
#   ROUNDS=30 FOLDERS="bench/servers/add scripts/demo" bench/startup.sh ...
#
# With no BINARY: $LUAMCP (build/luamcp), and $LUAMCP_BASELINE when set
# (make bench sets it to the previous release's build, bench/baseline.sh).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

ROUNDS=${ROUNDS:-30}
FOLDERS=${FOLDERS:-"bench/servers/add scripts/demo"}
LC=build/bench/loadclient
[ -x "$LC" ] || make -s -f bench/bench.mk "$LC" >&2 || exit 1
if [ $# -eq 0 ]; then
  set -- "${LUAMCP:-build/luamcp}"
  [ -n "${LUAMCP_BASELINE:-}" ] && set -- "$@" "$LUAMCP_BASELINE"
fi
for bin in "$@"; do [ -x "$bin" ] || { echo "$bin: not built" >&2; exit 1; }; done

median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%.2f", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
minimum() { sort -n | head -n 1; }
jget() { grep -o "\"$2\":[0-9.e+-]*" <<<"$1" | head -n 1 | cut -d: -f2; }

declare -A seen=() failed=()
for r in $(seq "$ROUNDS"); do
  for folder in $FOLDERS; do
    for bin in "$@"; do
      out=$("$LC" --mode startup --repeat 1 --timeout 60 -- "$bin" run "$folder" 2>/dev/null)
      ms=$(jget "$out" startup_ms_median)
      # an older build may not run a folder written for a newer one: "fails"
      [ -n "$ms" ] || { failed["$bin|$folder"]=1; continue; }
      seen["$bin|$folder"]+="$ms "
    done
  done
done

printf '| start-up (ms, median / min of %s) |' "$ROUNDS"
for folder in $FOLDERS; do printf ' %s |' "$folder"; done
printf '\n|---|'
for _ in $FOLDERS; do printf -- '---|'; done
printf '\n'
for bin in "$@"; do
  printf '| %s |' "$bin"
  for folder in $FOLDERS; do
    v=$(tr ' ' '\n' <<<"${seen["$bin|$folder"]:-}" | grep .)
    if [ -z "$v" ]; then printf ' fails |'
    else printf ' %s / %s%s |' "$(median <<<"$v")" "$(minimum <<<"$v")" "${failed["$bin|$folder"]:+ (some failed)}"; fi
  done
  printf '\n'
done
echo "$(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
