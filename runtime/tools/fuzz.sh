#!/usr/bin/env bash
# fuzz.sh [SECONDS] - build every fuzz target with libFuzzer, ASan and UBSan
# and run each for SECONDS (default 10), starting from the seed corpus
# (JSONTestSuite and the JSON Schema Test Suite in ../shared, read here,
# never copied). Prints "N passed, N failed": one per target.
set -uo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-10}
SHARED=${SHARED:-../shared}
out=build/fuzz
mkdir -p "$out"
CFLAGS="-std=c11 -D_GNU_SOURCE -g -O1 -Iruntime -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
# Each target lives beside the layer it tests: runtime/LAYER/fuzz/fuzz_NAME.c.
c=runtime/core
core="$c/buf.c $c/json.c $c/jsonrpc.c $c/protocol.c $c/session.c $c/server.c $c/log.c"
declare -A sources=(
  [json]="$core"
  [session]="$core $c/strmap.c"
  [http_util]="runtime/transport/http_util.c"
  [regex]="$c/regex.c"
  [schema]="$c/buf.c $c/json.c $c/schema.c $c/regex.c"
)
passed=0
failed=0
for target in json session http_util regex schema; do
  src=$(ls runtime/*/fuzz/fuzz_$target.c)
  if ! clang $CFLAGS -o "$out/fuzz_$target" "$src" ${sources[$target]} -lm 2>"$out/$target.build.log"; then
    echo "fuzz_$target: does not build"; cat "$out/$target.build.log"; failed=$((failed + 1)); continue
  fi
  corpus="$out/corpus_$target"
  mkdir -p "$corpus"
  seeds=()
  case $target in
    json|session) seeds=("$SHARED/JSONTestSuite/test_parsing") ;;
  esac
  # A fresh clone has no ../shared: start from the target's own corpus only.
  if [ ${#seeds[@]} -gt 0 ] && [ ! -d "${seeds[0]}" ]; then
    echo "fuzz_$target: no seed corpus at ${seeds[0]}; starting without it"
    seeds=()
  fi
  if "$out/fuzz_$target" -max_total_time="$seconds" -max_len=65536 -timeout=10 -print_final_stats=0 \
       -artifact_prefix="$out/$target-" "$corpus" "${seeds[@]}" >"$out/$target.log" 2>&1; then
    echo "fuzz_$target: $(grep -o 'Done [0-9]* runs' "$out/$target.log" | head -n 1) in ${seconds}s, no crash"
    passed=$((passed + 1))
  else
    echo "fuzz_$target: FOUND A PROBLEM (see $out/$target.log and $out/$target-*)"
    grep -A20 'ERROR\|==ERROR\|runtime error' "$out/$target.log" | head -n 30
    failed=$((failed + 1))
  fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
