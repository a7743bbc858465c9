#!/usr/bin/env bash
# bench/smoke.sh -- `make bench-smoke`: a few hundred calls of the load client
# against one server, over stdio and/or Streamable HTTP on 127.0.0.1, checking
# every answer. Exits non-zero on any wrong or missing response. Bounded: every
# load-client run has a --timeout and the HTTP server is killed at the end.
#
# Environment (bench/bench.mk sets these):
#   BENCH_DIR               where loadclient was built (build/bench)
#   BENCH_SMOKE_STDIO       stdio server command
#   BENCH_SMOKE_HTTP        HTTP server command; {port} is replaced by a free port
#   BENCH_SMOKE_HTTP_PATH   endpoint path (/mcp)
#   BENCH_SMOKE_TRANSPORTS  "stdio http", "stdio", "http", or "auto" (default):
#                           stdio, plus http unless the HTTP command is of the
#                           form `X ... --http ...` and `X --help` does not
#                           mention --http (a luamcp without HTTP yet: the
#                           skip is printed and counted as skipped)
set -u
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
BENCH_DIR=${BENCH_DIR:-build/bench}
LC=$BENCH_DIR/loadclient
DEFAULT_HTTP='build/luamcp run --http 127.0.0.1:{port} bench/servers/add'
STDIO=${BENCH_SMOKE_STDIO:-build/luamcp run bench/servers/add}
HTTP=${BENCH_SMOKE_HTTP:-$DEFAULT_HTTP}
HPATH=${BENCH_SMOKE_HTTP_PATH:-/mcp}
TRANSPORTS=${BENCH_SMOKE_TRANSPORTS:-auto}

[[ -x $LC ]] || { echo "bench-smoke: $LC not built" >&2; exit 2; }
pass=0
fail=0
skip=0
if [[ $TRANSPORTS == auto ]]; then
  TRANSPORTS=stdio
  exe=${HTTP%% *}
  if [[ " $HTTP " != *" --http "* ]] || "$exe" --help 2>&1 | grep -qE -- '--http([^-a-z]|$)'; then
    TRANSPORTS="stdio http"
  else
    echo "skip http ($exe --help does not list --http)"
    skip=1
  fi
fi
check() { # name -- loadclient args
  local name=$1
  shift 2
  if "$LC" --quiet --label "$name" --timeout 30 "$@" >/dev/null; then
    echo "ok   $name"
    pass=$((pass + 1))
  else
    echo "FAIL $name"
    fail=$((fail + 1))
  fi
}
need_exe() {
  local exe=${1%% *}
  if ! command -v "$exe" >/dev/null 2>&1; then
    echo "bench-smoke: server not found: $exe" >&2
    echo "bench-smoke: 0 passed, 1 failed"
    exit 1
  fi
}

if [[ " $TRANSPORTS " == *" stdio "* ]]; then
  need_exe "$STDIO"
  # shellcheck disable=SC2086
  check "stdio seq" -- --mode seq -n 200 --warmup 20 -- $STDIO
  # shellcheck disable=SC2086
  check "stdio pipe" -- --mode pipe -n 500 --warmup 20 --window 64 -- $STDIO
  # shellcheck disable=SC2086
  check "stdio startup" -- --mode startup --repeat 2 -- $STDIO
fi

if [[ " $TRANSPORTS " == *" http "* ]]; then
  need_exe "$HTTP"
  port=$("$LC" --free-port)
  cmd=${HTTP//\{port\}/$port}
  # shellcheck disable=SC2086
  $cmd </dev/null >&2 &
  spid=$!
  trap 'kill "$spid" 2>/dev/null; wait "$spid" 2>/dev/null' EXIT
  url="http://127.0.0.1:$port$HPATH"
  # --server-pid: a server that exits is noticed at once instead of waited for
  hc() { # name -- args
    local name=$1
    shift 2
    if ! kill -0 "$spid" 2>/dev/null; then
      echo "FAIL $name (the HTTP server is not running: $cmd)"
      fail=$((fail + 1))
      return
    fi
    check "$name" -- --http "$url" --connect-timeout 15 --server-pid "$spid" "$@"
  }
  hc "http 1 connection" -- -c 1 -n 200 --warmup 20
  hc "http 4 connections" -- -c 4 -n 400 --warmup 20
  hc "http 4 connections, shared session" -- --shared-session -c 4 -n 200 --warmup 0
  hc "http 50 sessions" -- --mode sessions --sessions 50 -c 4 --verify-sessions 5
  kill "$spid" 2>/dev/null
  for _ in $(seq 30); do kill -0 "$spid" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$spid" 2>/dev/null
  wait "$spid" 2>/dev/null
  trap - EXIT
fi

echo "bench-smoke: $pass passed, $fail failed, $skip skipped"
((fail == 0 && pass > 0))
