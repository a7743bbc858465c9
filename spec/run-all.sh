#!/usr/bin/env bash
# run-all.sh - every test suite, several at a time, then the summary, a
# table of the suites' wall times (slowest first) and one line that sums
# them: "N passed, N failed, N skipped". Called by `make test`; builds what
# the suites need first. Exits non-zero when anything failed, and when a
# suite left a process running (see run_owned).
#
#   spec/run-all.sh                        every suite (make test)
#   spec/run-all.sh spec/x_spec.lua [...]  only those busted specs, with any
#                                          busted options (--filter=NAME ...)
#   spec/run-all.sh --check                the inner loop (make check)
#   RUN_FOREIGN="linux-arm64 windows"      only those foreign builds' suites
#   RUN_ALL_SPECS="spec/a_spec.lua ..."    the same as naming them
#   TEST_JOBS=N                            how many suites run at once
#
# Most suites spend their time waiting on the processes they drive, so more
# of them run at once than there are cores (TEST_JOBS, default cores + 3);
# each busted spec file is a suite of its own, so a file that crashes busted
# while loading is that file's failure, with its error. Every suite's output
# goes to build/test-logs/NAME.log and is printed, shortened, when it ends.
# The cross-built dependencies are cached under the user's cache folder
# (runtime/tools/cross/*-deps.sh): a warm cache makes the foreign lanes short.
set -uo pipefail
cd "$(dirname "$0")/.."

SHARED=${SHARED:-../shared}
export LUAMCP=${LUAMCP:-build/luamcp}
cores=$(nproc 2>/dev/null || echo 2)
JOBS=${TEST_JOBS:-$((cores + 3))}
logs=build/test-logs
results=$(mktemp -d)
started_at=$(date +%s)
# A marker in every suite's environment (see run_owned), one per run.
run_marker="$$.$(date +%s%N)"

# Every busted run is Lua 5.4 whatever /usr/bin/lua is: .busted starts
# busted again under lua5.4 when another Lua reads it, and here busted is
# started under lua5.4 directly (no second start).
BUSTED=(lua5.4 "$(command -v busted || echo /usr/bin/busted)" --ignore-lua)

mode=all
busted_args=()
if [ "${1:-}" = --check ]; then
  mode=check
  shift
elif [ $# -gt 0 ]; then
  mode=specs
  busted_args=("$@")
elif [ -n "${RUN_ALL_SPECS:-}" ]; then
  mode=specs
  read -r -a busted_args <<<"$RUN_ALL_SPECS"
elif [ -n "${RUN_FOREIGN:-}" ]; then
  mode=foreign
fi

# What the suites need from Debian (busted, luv, servers, npm...), installed
# if missing: make test has done it already; `spec/run-all.sh FILE` on a
# fresh clone has not.
[ "$mode" = foreign ] || runtime/tools/deps.sh test || echo "== note: runtime/tools/deps.sh test failed: some suites may lack their tools"

# ---- One suite ------------------------------------------------------------
# These run inside a job (a background subshell): each writes its result
# as a line of $results/JOB.rec, "name<TAB>passed<TAB>failed<TAB>skipped
# <TAB>seconds<TAB>left running", which the summary adds up.
job_id=main
session_sid=""

record() { # NAME PASSED FAILED [SKIPPED [SECONDS [LEFT]]]
  printf '%s\t%d\t%d\t%d\t%d\t%d\n' "$1" "$2" "$3" "${4:-0}" "${5:-0}" "${6:-0}" >>"$results/$job_id.rec"
}

# A suite that cannot run here (its data or build is missing): counted as
# skipped, with the reason printed, never as failed.
skip_suite() {
  echo "== $1: skipped: $2"
  record "$1" 0 0 1
}

# The live processes (zombies aside) of session $1 or with marker $2.
session_members() {
  local sid=$1 marker=$2 f stat state session p
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
    grep -lz "^LUAMCP_TEST_RUN=$marker\$" /proc/[0-9]*/environ 2>/dev/null | sed 's#^/proc/\([0-9]*\)/environ$#\1#'
  } | sort -un
}

# Kill what is left of the running suite's session (on ^C, or after the report).
stop_session() {
  # Interrupted while the suite runs: its session's id is in its file.
  [ -n "$session_sid" ] || session_sid=$(cat "${current_sidfile:-/nonexistent}" 2>/dev/null)
  [ -n "$session_sid" ] || return 0
  local pids
  pids=$(session_members "$session_sid" "$suite_marker")
  [ -n "$pids" ] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null
  sleep 1
  pids=$(session_members "$session_sid" "$suite_marker")
  # shellcheck disable=SC2086
  [ -z "$pids" ] || kill -KILL $pids 2>/dev/null
}

# run_owned COMMAND...: sets out (stdout and stderr), status, seconds and
# left; then reports and kills what the command left running. Every suite
# runs as the leader of a session of its own, with a marker of its own in
# its environment; when it ends, whatever is left in that session (or
# carries the marker: a process that made a session of its own) is a
# process the suite failed to stop. Those are listed with their command
# lines, killed, and counted as failed checks in the summary. (mcp.exec may
# give a child a reduced environment, but never a session of its own.)
suite_count=0
run_owned() {
  local log sidfile t0
  suite_count=$((suite_count + 1))
  suite_marker="$run_marker.$job_id.$BASHPID.$suite_count"
  log=$(mktemp)
  sidfile=$(mktemp)
  current_sidfile=$sidfile
  t0=$(date +%s)
  # setsid forks first only when it leads a process group already; either
  # way the shell it runs leads the new session and writes down its id.
  LUAMCP_TEST_RUN=$suite_marker setsid -w sh -c 'echo $$ >"$0"; exec "$@"' "$sidfile" "$@" >"$log" 2>&1 </dev/null &
  wait $!
  status=$?
  seconds=$(($(date +%s) - t0))
  out=$(cat "$log")
  session_sid=$(cat "$sidfile")
  rm -f "$log" "$sidfile"
  left=0
  [ -n "$session_sid" ] || return 0
  # What was exiting as the suite ended (a child its server's death just
  # killed, say) is given some seconds to go.
  local pids="" i
  for i in $(seq 50); do
    pids=$(session_members "$session_sid" "$suite_marker")
    [ -z "$pids" ] && break
    sleep 0.2
  done
  if [ -n "$pids" ]; then
    local p
    for p in $pids; do
      left=$((left + 1))
      echo "LEFT RUNNING: pid $p: $(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)"
    done
    echo "$left process(es) left running by this suite, now killed"
    stop_session
  fi
  session_sid=""
}

# A suite whose last line is "N passed, N failed".
run_counted() {
  local name=$1
  shift
  echo "== $name"
  run_owned "$@"
  echo "$out" | grep -v '^ok ' | tail -n 40
  local line
  line=$(echo "$out" | grep -E '(^|: )[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' | tail -n 1 | grep -oE '[0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?')
  if [ -z "$line" ]; then
    echo "$name: no result line (exit status $status)"
    record "$name" 0 1 0 "$seconds" "$left"
    return
  fi
  local p f s
  p=$(echo "$line" | awk '{print $1}')
  f=$(echo "$line" | awk '{print $3}')
  s=$(echo "$line" | awk '{print $5}')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "$name" "$p" "$f" "${s:-0}" "$seconds" "$left"
}

# run_tap NAME COMMAND...: a command that prints TAP (busted -o TAP,
# `luamcp test -o TAP`): counts "ok", "not ok" and "ok ... # SKIP" lines. A
# run that printed no test line and failed (busted crashed loading a file)
# counts as one failure, and its output is shown.
run_tap() {
  local name=$1
  shift
  echo "== $name"
  run_owned "$@"
  echo "$out" | grep -v '^ok ' | tail -n 200
  echo "$out" | grep '^ok .*# SKIP' || true
  local p f s
  s=$(echo "$out" | grep -c '^ok .*# SKIP')
  p=$(($(echo "$out" | grep -c '^ok ') - s))
  f=$(echo "$out" | grep -c '^not ok ')
  if [ "$status" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
  record "$name" "$p" "$f" "$s" "$seconds" "$left"
}

run_busted() { # NAME BUSTED_ARGS...
  local name=$1
  shift
  run_tap "$name" "${BUSTED[@]}" -o TAP "$@"
}

# run_step NAME COMMAND...: a step that is not a test (a build): timed,
# counted as one failure if it fails, else neither passed nor failed.
run_step() {
  local name=$1
  shift
  echo "== $name"
  run_owned "$@"
  if [ "$status" -ne 0 ]; then
    echo "$out" | tail -n 60
    echo "$name: failed (exit status $status)"
    record "$name" 0 1 0 "$seconds" "$left"
    return 1
  fi
  record "$name" 0 0 0 "$seconds" "$left"
}

# ---- Jobs -----------------------------------------------------------------
# job ID FUNCTION ARGS...: run FUNCTION in the background once fewer than
# JOBS jobs run; its output goes to build/test-logs/ID.log and is printed
# (shortened) when it ends. A job's suites run one after another; jobs run
# side by side.
declare -A job_of_pid=()
mkdir -p "$logs"

# Print a finished job's report (its log, which its suites shortened).
reap_one() {
  local pid
  wait -n -p pid
  [ -n "${pid:-}" ] || return 1
  local id=${job_of_pid[$pid]:-}
  unset "job_of_pid[$pid]"
  [ -n "$id" ] && cat "$logs/$id.log"
  return 0
}

job() {
  local id=$1
  shift
  while [ "${#job_of_pid[@]}" -ge "$JOBS" ]; do reap_one || break; done
  (
    job_id=$id
    SECONDS=0
    trap 'stop_session; exit 130' INT TERM
    "$@"
    printf '%s\t%d\n' "$id" "$SECONDS" >"$results/$id.time" # bash's SECONDS: since the subshell began
  ) >"$logs/$id.log" 2>&1 &
  job_of_pid[$!]=$id
}

wait_jobs() {
  while [ "${#job_of_pid[@]}" -gt 0 ]; do reap_one || break; done
}

on_interrupt() {
  # shellcheck disable=SC2046
  kill -TERM "${!job_of_pid[@]}" 2>/dev/null
  wait
  exit 130
}
trap on_interrupt INT TERM

# A file that says a job is done, for a job that needs another's result.
await_flag() { # FILE: wait for it (the job that writes it always does)
  while [ ! -e "$1" ]; do sleep 1; done
}

# ---- What runs ------------------------------------------------------------

# The test tools from npm (official SDK, conformance suite, Node 22).
npm_tools() {
  if ! make -s -q spec/node_modules/.package-lock.json; then
    run_step "npm ci (spec/package-lock.json)" make -s spec/node_modules/.package-lock.json
  fi
  touch "$results/npm.done"
  # Node for linux-arm64 and Windows (spec/foreign-node, large), for
  # spec/release_npm_spec.lua alone, which skips what it lacks.
  if [ "$mode" = all ] || [[ " ${busted_args[*]:-} " == *release_npm* ]]; then
    make -s -q spec/foreign-node/node_modules/.package-lock.json ||
      run_step "npm ci (spec/foreign-node)" make -s foreign-node || true
  fi
  touch "$results/foreign-node.done"
}

unit_tests() {
  run_counted "layers (includes, calls, loops)" runtime/tools/check-layers.sh
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
  local schema_suite="$SHARED/json-schema-test-suite/tests"
  if [ ! -d "$schema_suite" ] && [ -d /usr/share/json-schema-test-suite/tests ]; then
    echo "== note: no JSON Schema Test Suite at $schema_suite; using Debian's /usr/share/json-schema-test-suite/tests"
    schema_suite=/usr/share/json-schema-test-suite/tests
  fi
  run_counted "C unit: JSON Schema suite" build/tests/test_schema "$schema_suite"
}

# A spec that runs Node (the SDKs, the conformance suite, the helpers'
# scripts) waits for npm ci; the others start at once.
await_npm_for() { # FILE
  ! grep -q -e node_modules -e node_runner -e NODE "$1" || await_flag "$results/npm.done"
}

# One busted spec file (release build).
busted_file() { # FILE
  await_npm_for "$1"
  JSON_TEST_SUITE="$SHARED/JSONTestSuite/test_parsing" run_busted "busted: ${1#spec/}" --exclude-tags=soak "$1"
}

# The ASan/UBSan build, LeakSanitizer included, so that a use-after-free,
# a leak at exit or undefined behaviour fails the run (the specs check the
# servers' exit status or stderr for sanitizer reports).
asan_env() {
  export LUAMCP=build/luamcp-asan ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
  export AUTH_VERIFIER_DRIVER=build/tests/auth_verifier_driver-asan
}
asan_file() { # FILE
  await_npm_for "$1"
  asan_env
  run_busted "ASan/UBSan: ${1#spec/}" "$1"
}
# The specs that exercise tasks, exec, reload and HTTP, run again under the
# sanitizers.
ASAN_SPECS="core_safety sqlite concurrency limits reload load_limits http_hardening modern http_client tasks client workers
  redis scaleout exec_owner session_limits auth_http auth_verifier legacy_sse metrics tracing remote_conn mcp_client
  mount client_eras log_lines stdio ui_http unix_socket websocket a2a a2a_client"

# The foreign builds, run here: linux-arm64 under qemu, Windows under wine.
# run_foreign NAME LAUNCHER PLATFORM: the portable specs
# (spec/platform_spec.lua, with LUAMCP_PLATFORM choosing the platform's
# programs and paths), the official SDK v1 and v2 clients spawning it over
# stdio, and the conformance suite's 2025-11-25 and 2026-07-28 requirement
# sets against it over HTTP.
run_foreign() (
  name=$1 launcher=$2 platform=$3
  await_flag "$results/npm.done"
  # In this subshell only: the job's later suites run the native build.
  export LUAMCP=$launcher LUAMCP_PLATFORM=$platform
  side_by_side \
    "run_busted '$name: platform spec' spec/platform_spec.lua" \
    "run_busted '$name: SDK v1, v2 clients (stdio)' --filter='over stdio' spec/sdk_client_spec.lua spec/sdk_v2_spec.lua" \
    "run_counted '$name: conformance (2 eras)' spec/conformance.sh eras"
)

# side_by_side COMMAND...: shell commands (suites of this job) run at once,
# their reports printed one after another once all have ended. For a
# foreign build's suites, which each mostly wait on an emulator.
side_by_side() {
  local dir i=0 cmd
  dir=$(mktemp -d)
  trap 'kill -TERM $(jobs -p) 2>/dev/null; wait; exit 130' INT TERM
  for cmd in "$@"; do
    i=$((i + 1))
    (
      trap 'stop_session; exit 130' INT TERM
      eval "$cmd"
    ) >"$dir/$i" 2>&1 &
  done
  wait
  for ((j = 1; j <= i; j++)); do cat "$dir/$j"; done
  rm -rf "$dir"
}

# The native build's outcome (build_native), for the jobs that started
# before it ended: the cross builds' libraries and packages need nothing of
# it, their programs need build/embedded_lua.c.
native_built() {
  await_flag "$results/native.done"
  [ "$(cat "$results/native.done")" = ok ]
}

# Linux arm64 under qemu-user-static (make linux-arm64). With binfmt_misc
# (runtime/tools/cross/qemu-binfmt.sh registers qemu) the binary runs as
# itself, and so do the children mcp.exec starts through /proc/self/exe.
# Without it (no privilege), qemu runs the binary alone: everything but
# mcp.exec is tested, and the exec tests say why they are pending.
foreign_arm64() {
  local bin=build/linux-arm64/luamcp why="" how=skip
  if [ "$mode" != foreign ]; then
    run_step "build: arm64 packages (make arm64-deps)" make --no-print-directory -s arm64-deps
    native_built && run_step "build: linux-arm64 (make linux-arm64)" make --no-print-directory -s linux-arm64
  fi
  if [ ! -x "$bin" ]; then
    why="$bin is not built (make linux-arm64)"
  elif why=$(runtime/tools/cross/qemu-binfmt.sh "$bin"); then
    how=binfmt
  elif [ -x /usr/bin/qemu-aarch64-static ]; then
    how=qemu
  fi
  # Built and registered: spec/cross_build_spec.lua may run it now.
  touch "$results/arm64.ready"
  case $how in
    binfmt)
      [ -z "$why" ] || echo "== $why"
      run_foreign "linux-arm64 (qemu)" "$bin" linux
      ;;
    qemu)
      echo "== linux-arm64: $why; running it with qemu-aarch64-static directly, without mcp.exec"
      # shellcheck disable=SC2016 # expanded by the wrapper, when it runs
      printf '#!/bin/sh\nexec /usr/bin/qemu-aarch64-static "$(dirname "$0")/luamcp" "$@"\n' >build/linux-arm64/luamcp-qemu
      chmod +x build/linux-arm64/luamcp-qemu
      LUAMCP_SKIP_EXEC="no binfmt_misc handler for aarch64: $why" run_foreign "linux-arm64 (qemu, no exec)" \
        build/linux-arm64/luamcp-qemu linux
      ;;
    *) skip_suite "linux-arm64" "$why" ;;
  esac
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
  if [ "$mode" != foreign ]; then
    run_step "build: windows libraries (make windows-deps)" make --no-print-directory -s windows-deps
    native_built && run_step "build: windows (make windows)" make --no-print-directory -s windows
  fi
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
  fi
  # spec/cross_build_spec.lua runs the programs it builds for every target:
  # natively, under qemu and under wine (in the same prefix), so it runs
  # here, once both cross builds are there, and before the wineserver goes;
  # so does spec/probe_spec.lua, the probe built for every target and held
  # against docs/platforms.md.
  # So do the specs of luamcp release, which makes every target's program,
  # packs each for its door and runs it there: npm packages under qemu and
  # wine too, the OCI image for amd64 and arm64. Two groups side by side,
  # as both mostly wait on emulators and child processes.
  if [ "$mode" = all ]; then
    await_flag "$results/arm64.ready"
    side_by_side \
      "busted_file spec/cross_build_spec.lua; busted_file spec/probe_spec.lua" \
      "busted_file spec/release_spec.lua; busted_file spec/release_oci_spec.lua; busted_file spec/release_sign_spec.lua; await_flag \"\$results/foreign-node.done\"; busted_file spec/release_npm_spec.lua"
  fi
  if [ -f "$exe" ] && command -v wineserver >/dev/null 2>&1; then
    WINEPREFIX=$prefix wineserver -k 2>/dev/null
    WINEPREFIX=$prefix wineserver -w 2>/dev/null
  fi
}

# The specs of the inner loop (make check): the protocol over both
# transports and both eras, without the slow families.
CHECK_SPECS="stdio primitives schema meta modern mistakes args json_bridge patterns log"

# The jobs of a full run, the longest first, so that no long one starts
# last: as long as the last run on this machine took (its times are kept in
# the cache folder), else a guess from the spec file's length.
times_file=${XDG_CACHE_HOME:-$HOME/.cache}/luamcp/test-times.tsv
expected() { # ID GUESS
  local t
  t=$(awk -F'\t' -v id="$1" '$1 == id { t = $2 } END { print t }' "$times_file" 2>/dev/null)
  echo "${t:-$2}"
}
queue() { # ID GUESS FUNCTION ARGS...: one line of the queue
  local id=$1 guess=$2
  shift 2
  printf '%s\t%s\t%s\n' "$(expected "$id" "$guess")" "$id" "$*"
}
run_queue() { # reads queue lines, longest first
  local t id cmd
  sort -t$'\t' -k1,1nr -s | while IFS=$'\t' read -r t id cmd; do printf '%s\t%s\n' "$id" "$cmd"; done >"$results/queue"
  while IFS=$'\t' read -r id cmd; do
    # shellcheck disable=SC2086 # the function and its words
    job "$id" $cmd
  done <"$results/queue"
}
lines_of() { wc -l <"$1"; }

# Specs that run inside luamcp itself, as users run theirs: `luamcp test`
# with mcp.testing (spec/inprocess/*_test.lua; busted's own runs skip them,
# by their name); then under the sanitizers.
inprocess() {
  run_tap "luamcp test (in process)" "$LUAMCP" test -o TAP --pattern=_test spec/inprocess
}
inprocess_asan() {
  asan_env
  run_tap "ASan/UBSan: luamcp test (in process)" "$LUAMCP" test -o TAP --pattern=_test spec/inprocess
}
fuzz_smoke() {
  run_counted "fuzz smoke (5 s a target)" runtime/tools/fuzz.sh 5
}
bench_smoke() {
  run_counted "bench smoke (load client)" env BENCH_SMOKE_TRANSPORTS="stdio http" make --no-print-directory -s bench-smoke
}
# The soak (spec/soak_spec.lua, tag #soak: left out of the release runs):
# SOAK_SECONDS (default 60) of exec, sleeps, computations, cancellations,
# reloads and pipelined HTTP at once, under the sanitizers, which must lose
# no answer and print no sanitizer report.
soak() {
  asan_env
  run_busted "ASan/UBSan: soak (${SOAK_SECONDS:-60} s)" --tags=soak spec/soak_spec.lua
}
conformance_server() {
  await_flag "$results/npm.done"
  run_counted "MCP conformance suite" spec/conformance.sh
}
conformance_eras() {
  await_flag "$results/npm.done"
  run_counted "MCP conformance (2 eras)" spec/conformance.sh eras
}
conformance_client() {
  await_flag "$results/npm.done"
  run_counted "MCP conformance (client)" spec/conformance_client_run.sh
}

# ---- Build ----------------------------------------------------------------
# make test-build: every native program the suites run, in parallel.
build_native() { # TARGETS...
  echo "== build: native (make $*)"
  local t0=$(date +%s)
  if ! make --no-print-directory -s -j"$cores" "$@" >"$logs/build.log" 2>&1; then
    tail -n 60 "$logs/build.log"
    job_id=build record "build: native (make $*)" 0 1 0 $(($(date +%s) - t0))
    echo failed >"$results/native.done"
    return 1
  fi
  job_id=build record "build: native (make $*)" 0 0 0 $(($(date +%s) - t0))
  echo ok >"$results/native.done"
}

case $mode in
  specs)
    build_native build/luamcp build/luamcp-static || true
    job npm npm_tools
    wait_jobs
    job specs run_busted "busted specs: ${busted_args[*]}" "${busted_args[@]}"
    ;;
  foreign)
    touch "$results/npm.done" "$results/foreign-node.done"
    case " $RUN_FOREIGN " in *" linux-arm64 "*) job arm64 foreign_arm64 ;; esac
    case " $RUN_FOREIGN " in *" windows "*) job windows foreign_windows ;; esac
    ;;
  check)
    build_native check-build || true
    job npm npm_tools
    {
      queue units 30 unit_tests
      for n in $CHECK_SPECS; do queue "busted-${n}_spec.lua" $(($(lines_of "spec/${n}_spec.lua") / 20)) busted_file "spec/${n}_spec.lua"; done
      queue conformance-eras 60 conformance_eras
    } >"$results/queue.in"
    run_queue <"$results/queue.in"
    ;;
  all)
    # The cross builds start first, beside the native one: they are the
    # longest (their libraries, apt and configure), and their libraries
    # need nothing of it. Their suites wait for npm ci.
    job windows foreign_windows
    job arm64 foreign_arm64
    if build_native test-build; then
      job npm npm_tools
      {
        queue units 30 unit_tests
        for f in $(ls spec/*_spec.lua | grep -v -x -e spec/cross_build_spec.lua -e spec/probe_spec.lua -e "spec/release_.*_spec.lua" -e spec/release_spec.lua); do queue "busted-${f#spec/}" $(($(lines_of "$f") / 20)) busted_file "$f"; done
        for n in $ASAN_SPECS; do
          f=spec/${n}_spec.lua
          queue "asan-${f#spec/}" $(($(lines_of "$f") / 8)) asan_file "$f"
        done
        queue inprocess 20 inprocess
        queue inprocess-asan 40 inprocess_asan
        queue soak $((${SOAK_SECONDS:-60} + 30)) soak
        queue conformance 300 conformance_server
        queue conformance-client 300 conformance_client
        queue fuzz 200 fuzz_smoke
        queue bench 30 bench_smoke
      } >"$results/queue.in"
      run_queue <"$results/queue.in"
    else
      touch "$results/npm.done" "$results/foreign-node.done" # nothing left to wait for them
    fi
    ;;
esac
wait_jobs

# ---- Summary --------------------------------------------------------------
cat "$results"/*.rec >"$results/all" 2>/dev/null
total_passed=0 total_failed=0 total_skipped=0 left_behind=0
echo
echo "== summary"
while IFS=$'\t' read -r name p f s secs l; do
  printf '%-48s %5d passed, %d failed, %d skipped\n' "$name" "$p" "$f" "$s"
  total_passed=$((total_passed + p))
  total_failed=$((total_failed + f))
  total_skipped=$((total_skipped + s))
  left_behind=$((left_behind + l))
done < <(sort -t$'\t' -k1,1 "$results/all")
if [ "$left_behind" -eq 0 ]; then
  printf '%-48s %5d passed, %d failed, %d skipped\n' "no process left running" 1 0 0
  total_passed=$((total_passed + 1))
else
  printf '%-48s %5d passed, %d failed, %d skipped\n' "processes left running (killed)" 0 "$left_behind" 0
  total_failed=$((total_failed + left_behind))
fi

# Where the minutes go: every suite's wall time, slowest first. Suites run
# side by side, so the total is the run's own wall time, not the sum.
echo
echo "== wall time per suite (${JOBS} at a time on ${cores} cores), slowest first"
sort -t$'\t' -k5,5nr "$results/all" | awk -F'\t' '{ printf "%6d:%02d  %s\n", $5 / 60, $5 % 60, $1 }'
elapsed=$(($(date +%s) - started_at))
awk -F'\t' -v e="$elapsed" '{ sum += $5 } END {
  printf "%6d:%02d  total wall time (the suites added up: %d:%02d)\n", e / 60, e % 60, sum / 60, sum % 60 }' "$results/all"
# Each job's time, for the next run's order (expected): safe to remove.
if [ "$mode" = all ] && mkdir -p "$(dirname "$times_file")" 2>/dev/null; then
  cat "$results"/*.time >"$times_file" 2>/dev/null
fi
rm -rf "$results"
echo
echo "$total_passed passed, $total_failed failed, $total_skipped skipped"
[ "$total_failed" -eq 0 ]
