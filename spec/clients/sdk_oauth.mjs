// The official TypeScript SDK v2 client (@modelcontextprotocol/client) with
// its OAuth support against a luamcp that is an OAuth resource server, and a
// real authorization server (spec/helpers/oidc_provider.mjs). The client
// starts without a token: the 401 leads it through Protected Resource
// Metadata, the authorization server's metadata, registration (or a
// pre-registered client) and a token, then it calls tools. auth_spec.lua
// checks what it prints.
//
// Usage: node sdk_oauth.mjs JSON
//   url        the MCP endpoint
//   mode       "pin" (2026-07-28, server/discover) or "legacy" (initialize)
//   flow       "client_credentials" (ClientCredentialsProvider) or
//              "authorization_code" (an OAuthClientProvider whose
//              redirectToAuthorization is followed headlessly: the provider
//              logs in login_hint and consents by itself; then finishAuth)
//   issuer     the authorization server the credentials belong to
//   client_id, client_secret   a pre-registered client; without client_id
//              the authorization-code client registers itself (RFC 7591)
//   scope      the scope the client asks for (default: what the server says)
//   login_hint who logs in (authorization code)
//   calls      [{ name, arguments }] tools called in order after connecting;
//              a call whose tool asks for more scope steps up on its own
//
// Prints one JSON object: ok, era, negotiated, every HTTP exchange (method,
// URL, status, WWW-Authenticate, whether a bearer token went), the claims of
// each access token the client received, the registration, and each call's
// result or error.
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport, UnauthorizedError } from "@modelcontextprotocol/client";

const opts = JSON.parse(process.argv[2]);
const REDIRECT = "http://localhost/callback";
const out = { mode: opts.mode, flow: opts.flow, exchanges: [], tokens: [], calls: [], redirects: 0 };

const claimsOf = (jwt) => {
  const parts = String(jwt).split(".");
  if (parts.length !== 3) return { opaque: true };
  try { return JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8")); } catch { return { opaque: true }; }
};

// Every request the SDK makes (to the MCP server and to the authorization
// server alike) goes through here and is recorded.
async function recordingFetch(url, init) {
  const headers = new Headers(init?.headers);
  const exchange = {
    method: init?.method ?? "GET", url: String(url),
    bearer: (headers.get("authorization") ?? "").startsWith("Bearer "),
  };
  if (typeof init?.body === "string" && init.body.startsWith("{")) {
    try { exchange.rpc = JSON.parse(init.body).method; } catch { /* not JSON-RPC */ }
  }
  out.exchanges.push(exchange);
  const res = await fetch(url, init);
  exchange.status = res.status;
  const challenge = res.headers.get("www-authenticate");
  if (challenge) exchange.wwwAuthenticate = challenge;
  return res;
}

// The authorization-code client: keeps what the SDK hands it in memory and
// remembers the authorization URL instead of opening a browser.
class HeadlessProvider {
  constructor() {
    this.info = opts.client_id ? { client_id: opts.client_id, ...(opts.client_secret ? { client_secret: opts.client_secret } : {}) } : undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.discovery = undefined;
    this.authorizationUrl = undefined;
  }
  get redirectUrl() { return REDIRECT; }
  get clientMetadata() {
    return { client_name: "luamcp auth_spec", redirect_uris: [REDIRECT], grant_types: ["authorization_code"],
             response_types: ["code"], token_endpoint_auth_method: "none", ...(opts.scope ? { scope: opts.scope } : {}) };
  }
  clientInformation() { return this.info; }
  saveClientInformation(info) { this.info = info; out.registered = { client_id: info.client_id }; }
  tokens() { return this.saved; }
  saveTokens(tokens) { this.saved = tokens; out.tokens.push(claimsOf(tokens.access_token)); }
  redirectToAuthorization(url) { this.authorizationUrl = url; out.redirects += 1; }
  saveCodeVerifier(v) { this.verifier = v; }
  codeVerifier() { return this.verifier; }
  saveDiscoveryState(state) { this.discovery = state; }
  discoveryState() { return this.discovery; }
}

// What a browser would do: follow the authorization URL through the
// provider's login and consent (its cookies kept) to the redirect back.
async function followHeadlessly(url) {
  const jar = new Map();
  let next = new URL(url);
  if (opts.login_hint) next.searchParams.set("login_hint", opts.login_hint);
  out.authorize = Object.fromEntries(new URL(url).searchParams.entries());
  delete out.authorize.state;
  delete out.authorize.code_challenge;
  for (let hop = 0; hop < 12; hop++) {
    const cookie = [...jar].map(([k, v]) => `${k}=${v}`).join("; ");
    const res = await fetch(next, { redirect: "manual", headers: cookie ? { cookie } : {} });
    for (const c of res.headers.getSetCookie()) {
      const pair = c.split(";")[0];
      const eq = pair.indexOf("=");
      jar.set(pair.slice(0, eq), pair.slice(eq + 1));
    }
    const location = res.headers.get("location");
    if (!location) throw new Error(`the authorization server stopped at ${next}: ${res.status} ${await res.text()}`);
    next = new URL(location, next);
    if (next.href.startsWith(REDIRECT)) return next.searchParams;
  }
  throw new Error("too many redirects");
}

const versionNegotiation = opts.mode === "pin" ? { mode: { pin: "2026-07-28" } } : { mode: "legacy" };
const authProvider = opts.flow === "client_credentials"
  ? new ClientCredentialsProvider({ clientId: opts.client_id, clientSecret: opts.client_secret,
                                    expectedIssuer: opts.issuer, ...(opts.scope ? { scope: opts.scope } : {}) })
  : new HeadlessProvider();
if (opts.flow === "client_credentials") {
  const save = authProvider.saveTokens.bind(authProvider);
  authProvider.saveTokens = (tokens) => { out.tokens.push(claimsOf(tokens.access_token)); return save(tokens); };
}

let transport;
let client;
async function connect() {
  transport = new StreamableHTTPClientTransport(new URL(opts.url), { authProvider, fetch: recordingFetch });
  client = new Client({ name: "auth-spec", version: "1.0.0" }, { versionNegotiation, capabilities: {} });
  await client.connect(transport);
}

// Runs step; when the SDK stopped to send the user to the authorization
// server, goes there headlessly, finishes, and runs step again.
async function authorizing(step) {
  try {
    return await step();
  } catch (e) {
    if (!(e instanceof UnauthorizedError) || !authProvider.authorizationUrl) throw e;
    const url = authProvider.authorizationUrl;
    authProvider.authorizationUrl = undefined;
    await transport.finishAuth(await followHeadlessly(url));
    return await step();
  }
}

try {
  await authorizing(connect).catch(async (e) => {
    // After finishAuth the first transport is spent: connect anew.
    if (e?.message?.includes("already started")) return connect();
    throw e;
  });
  out.era = client.getProtocolEra?.();
  out.negotiated = client.getNegotiatedProtocolVersion?.();
  out.tools = (await client.listTools()).tools.map((t) => t.name);
  for (const call of opts.calls ?? []) {
    try {
      out.calls.push({ name: call.name, result: await authorizing(() => client.callTool({ name: call.name, arguments: call.arguments ?? {} })) });
    } catch (e) {
      out.calls.push({ name: call.name, error: { message: e.message, code: e.code, name: e.constructor?.name } });
    }
  }
  await client.close();
  out.ok = true;
} catch (e) {
  out.error = { message: e.message, code: e.code, name: e.constructor?.name, stack: e.stack };
}
process.stdout.write(JSON.stringify(out) + "\n");
process.exit(0);
