#!/usr/bin/env bash
# run.sh - requests per second for tools/call over Streamable HTTP with wrk,
# at 1, 16 and 64 connections, against spec/fixtures/kitchen's `add` tool.
# Not part of `make test`. Usage: spec/wrk/run.sh [SECONDS] (default 10)
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-10}
LUAMCP=${LUAMCP:-build/luamcp}
log=$(mktemp)
"$LUAMCP" run --http 127.0.0.1:0 spec/fixtures/kitchen 2>"$log" &
server_pid=$!
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -f "$log"' EXIT

url=""
for _ in $(seq 1 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*/mcp' "$log" | head -n 1 || true)
  [ -n "$url" ] && break
  sleep 0.05
done
[ -n "$url" ] || { cat "$log"; exit 1; }

accept='Accept: application/json, text/event-stream'
json='Content-Type: application/json'
session=$(curl -sS -D - -o /dev/null "$url" -H "$accept" -H "$json" \
  -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"wrk","version":"1"}}}' |
  tr -d '\r' | awk -F': ' 'tolower($1) == "mcp-session-id" { print $2 }')
[ -n "$session" ] || { echo "no session id"; exit 1; }
curl -sS -o /dev/null -w '%{http_code}\n' "$url" -H "$accept" -H "$json" -H "Mcp-Session-Id: $session" \
  -H 'MCP-Protocol-Version: 2025-11-25' -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' | grep -qx 202

threads=$(nproc)
for connections in 1 16 64; do
  t=$(( connections < threads ? connections : threads ))
  echo "== $connections connection(s): wrk -t$t -c$connections -d${seconds}s"
  MCP_SESSION_ID=$session wrk -t"$t" -c"$connections" -d"${seconds}s" --latency -s spec/wrk/tools_call.lua "$url"
done
