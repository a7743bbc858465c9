// oidc_provider.mjs: a real OAuth 2.1 / OpenID authorization server for the
// auth specs: oidc-provider (pinned in spec/package.json) on 127.0.0.1, with
// every login and consent answered by itself, so that a test follows an
// authorization URL to the redirect carrying the code without a browser.
//
//   node oidc_provider.mjs CONFIG
//
// CONFIG is JSON text, or the path of a file holding it:
//   keys      a directory written by jwt_mint.mjs (`keys DIR`): its
//             private.json becomes the provider's signing keys, so a spec can
//             also mint tokens with the very keys the provider signs with
//   port      the port to listen on (default 0: the kernel's pick)
//   alg       the JWS alg of access tokens (default "RS256")
//   ttl       access token lifetime in seconds (default 600)
//   resources { URI: { scope: "a b", format: "jwt"|"opaque", alg, ttl } }:
//             the resource servers (RFC 8707) tokens may be minted for
//   any_resource  the same fields, for any other http://127.0.0.1 or
//             http://localhost resource (the MCP server's URI is known only
//             once it listens on a port of its own)
//   clients   extra clients, oidc-provider client metadata; "x_format":
//             "opaque" makes that client's access tokens opaque
//   account   who logs in when the authorization request has no login_hint
//             (default "alice")
//   pages     true: a person logs in and consents through HTML pages (a
//             login form: any account, password "wonderland"; a consent
//             form with an Allow button) instead of the headless answers
//   dpop      true: DPoP (RFC 9449) on, so tokens are bound to a proof key
//
// Built in: clients "m2m" (client_credentials, secret "m2m-secret"),
// "opaque-m2m" (the same with opaque tokens, secret "opaque-secret"), "app"
// (public, authorization code + PKCE, redirect http://localhost/callback) and
// "luamcp-rs" (the resource server's introspection client, secret
// "rs-secret"); dynamic client registration is open at /reg.
//
// Prints one JSON line when it listens: { issuer, port, kids, endpoints }.
// Stdin takes one JSON command per line: {"rotate":"DIR","suffix":"-2"}
// replaces the signing keys with those of another jwt_mint directory (their
// kids renamed with suffix), on the same port and keeping registered clients
// and grants (it answers {"rotated":[kids]}); {"stats":true} answers
// {"hits":{PATH:N}}, the requests served per path.
// Stops on SIGTERM or SIGINT, and on stdin's end when stdin is a pipe (a
// spec's, whose end means the spec is gone); started from a shell (a
// terminal, or in the background, where stdin is /dev/null) it reads no
// commands and runs until a signal.
import fs from "node:fs";
import http from "node:http";
import path from "node:path";
import readline from "node:readline";
import Provider, { errors } from "oidc-provider";

const arg = process.argv[2];
if (!arg) {
  process.stderr.write("usage: node oidc_provider.mjs CONFIG (JSON text or a file)\n");
  process.exit(2);
}
const config = JSON.parse(arg.trimStart().startsWith("{") ? arg : fs.readFileSync(arg, "utf8"));
const alg = config.alg ?? "RS256";
const ttl = config.ttl ?? 600;

// suffix renames the kids ("rsa1" + "-2"): a rotated set whose kids the
// resource server has never seen.
function signingKeys(dir, suffix = "") {
  const priv = JSON.parse(fs.readFileSync(path.join(dir, "private.json"), "utf8"));
  return Object.entries(priv).map(([kid, { alg: keyAlg, jwk }]) => ({ ...jwk, kid: kid + suffix, alg: keyAlg, use: "sig" }));
}

const builtinClients = [
  { client_id: "m2m", client_secret: "m2m-secret", grant_types: ["client_credentials"], response_types: [],
    redirect_uris: [], token_endpoint_auth_method: "client_secret_basic" },
  { client_id: "opaque-m2m", client_secret: "opaque-secret", grant_types: ["client_credentials"],
    response_types: [], redirect_uris: [], token_endpoint_auth_method: "client_secret_basic", x_format: "opaque" },
  { client_id: "app", token_endpoint_auth_method: "none", grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"], redirect_uris: ["http://localhost/callback"] },
  { client_id: "luamcp-rs", client_secret: "rs-secret", grant_types: [], response_types: [], redirect_uris: [],
    token_endpoint_auth_method: "client_secret_basic" },
];
// An empty list may arrive as {} (Lua's JSON encoders cannot tell them apart).
const lists = (c) => Object.fromEntries(Object.entries(c).map(([k, v]) =>
  [k, v && typeof v === "object" && !Array.isArray(v) && !Object.keys(v).length ? [] : v]));
const clients = [...builtinClients, ...(config.clients ?? []).map(lists)];
// Which clients get opaque tokens; oidc-provider itself would refuse the
// unknown x_format field, so it is taken off here.
const opaqueClients = new Set(clients.filter((c) => c.x_format === "opaque").map((c) => c.client_id));
const providerClients = clients.map(({ x_format, ...c }) => c);

function loopbackResource(uri) {
  try {
    const u = new URL(uri);
    return u.protocol === "http:" && (u.hostname === "127.0.0.1" || u.hostname === "localhost");
  } catch {
    return false;
  }
}

function resourceServer(indicator, client) {
  const known = config.resources?.[indicator] ?? (loopbackResource(indicator) ? config.any_resource : undefined);
  if (!known) throw new errors.InvalidTarget(`unknown resource ${indicator}`);
  const opaque = known.format === "opaque" || opaqueClients.has(client?.clientId);
  return {
    scope: known.scope ?? "",
    audience: indicator,
    accessTokenTTL: known.ttl ?? ttl,
    accessTokenFormat: opaque ? "opaque" : "jwt",
    ...(opaque ? {} : { jwt: { sign: { alg: known.alg ?? alg } } }),
  };
}

// Dynamic registration accepts only scopes the provider announces, so the
// resource servers' scopes are announced too.
const announcedScopes = new Set(["openid", "offline_access"]);
for (const r of [...Object.values(config.resources ?? {}), config.any_resource ?? {}]) {
  for (const s of (r.scope ?? "").split(" ").filter(Boolean)) announcedScopes.add(s);
}

let issuer; // known once the server listens
let provider;

function makeProvider(keysDir, suffix) {
  const p = new Provider(issuer, {
    jwks: { keys: signingKeys(keysDir, suffix) },
    clients: providerClients,
    scopes: [...announcedScopes],
    cookies: { keys: ["oidc-provider spec cookie key"] },
    findAccount: (ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
    pkce: { required: () => true },
    ttl: { AccessToken: ttl, ClientCredentials: ttl, AuthorizationCode: 60, Interaction: 600, Session: 600, Grant: 600 },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      dPoP: { enabled: !!config.dpop },
      introspection: { enabled: true },
      revocation: { enabled: true },
      registration: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // A client that names no resource gets one only when the request
        // named exactly one; otherwise plain OAuth without an audience.
        defaultResource: (ctx, client, oneOf) => oneOf,
        useGrantedResource: () => true,
        getResourceServerInfo: (ctx, indicator, client) => resourceServer(indicator, client),
      },
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    // The loopback issuer is plain http; oidc-provider allows that.
  });
  p.proxy = false;
  p.on("server_error", (ctx, err) => process.stderr.write(`oidc-provider server_error: ${err.stack}\n`));
  return p;
}

// Every scope asked for granted: the grant a consent saves.
async function grantAll(details) {
  const { prompt, params, session } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  const { missingOIDCScope, missingOIDCClaims, missingResourceScopes } = prompt.details;
  if (missingOIDCScope) grant.addOIDCScope(missingOIDCScope.join(" "));
  if (missingOIDCClaims) grant.addOIDCClaims(missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(" "));
  }
  return grant.save();
}

// The headless login and consent: whoever asks is logged in (login_hint, or
// the configured account), and every scope asked for is granted.
async function interaction(req, res) {
  if (config.pages) return pageInteraction(req, res);
  const details = await provider.interactionDetails(req, res);
  const { prompt, params } = details;
  if (prompt.name === "login") {
    const accountId = params.login_hint || config.account || "alice";
    return provider.interactionFinished(req, res, { login: { accountId } }, { mergeWithLastSubmission: false });
  }
  if (prompt.name === "consent") {
    const grantId = await grantAll(details);
    return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
  }
  res.statusCode = 400;
  res.end(`unexpected prompt ${prompt.name}`);
}

const html = (t) => String(t ?? "").replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
function page(res, title, body) {
  res.setHeader("Content-Type", "text/html; charset=utf-8");
  res.end(`<!doctype html><meta charset=utf-8><title>${title}</title><h1>${title}</h1>${body}`);
}

// config.pages: a login form and a consent form, as a person sees them.
async function pageInteraction(req, res) {
  const details = await provider.interactionDetails(req, res);
  const { prompt, params, uid } = details;
  const action = `/interaction/${html(uid)}`;
  if (req.method === "GET") {
    if (prompt.name === "login") {
      return page(res, "Sign in", `<form method=post action="${action}"><label>Account <input id=login name=login></label>
        <label>Password <input id=password name=password type=password></label><button id=submit type=submit>Sign in</button></form>`);
    }
    return page(res, "Allow access?", `<p id=ask>${html(params.client_id)} asks for: <b id=scope>${html(params.scope)}</b></p>
      <form method=post action="${action}"><button id=allow type=submit>Allow</button></form>`);
  }
  const form = await new Promise((resolve) => {
    let data = "";
    req.on("data", (c) => { data += c; });
    req.on("end", () => resolve(new URLSearchParams(data)));
  });
  if (prompt.name === "login") {
    if (!form.get("login") || form.get("password") !== "wonderland") {
      res.statusCode = 401;
      return page(res, "Sign in", `<p id=error>Wrong account or password.</p><a href="${action}">Again</a>`);
    }
    return provider.interactionFinished(req, res, { login: { accountId: form.get("login") } }, { mergeWithLastSubmission: false });
  }
  const grantId = await grantAll(details);
  return provider.interactionFinished(req, res, { consent: { grantId } }, { mergeWithLastSubmission: true });
}

// Requests per path, for {"stats":true}: a spec counts the JWKS fetches.
const hits = {};
const server = http.createServer((req, res) => {
  const where = req.url.split("?")[0];
  hits[where] = (hits[where] ?? 0) + 1;
  if (req.url.startsWith("/interaction/")) {
    interaction(req, res).catch((err) => {
      process.stderr.write(`interaction failed: ${err.stack}\n`);
      if (!res.headersSent) res.statusCode = 500;
      res.end(String(err.message));
    });
    return;
  }
  provider.callback()(req, res);
});

function kids(dir, suffix) {
  return signingKeys(dir, suffix).map((k) => k.kid);
}

server.listen(config.port ?? 0, "127.0.0.1", () => {
  const { port } = server.address();
  issuer = `http://127.0.0.1:${port}`;
  provider = makeProvider(config.keys);
  process.stdout.write(JSON.stringify({
    issuer, port, kids: kids(config.keys),
    endpoints: {
      discovery: `${issuer}/.well-known/openid-configuration`, jwks: `${issuer}/jwks`, token: `${issuer}/token`,
      authorization: `${issuer}/auth`, introspection: `${issuer}/token/introspection`,
      revocation: `${issuer}/token/revocation`, registration: `${issuer}/reg`,
    },
  }) + "\n");
});

function stop() {
  server.close();
  server.closeAllConnections();
  process.exit(0);
}
process.on("SIGTERM", stop);
process.on("SIGINT", stop);

function stdinIsPipe() {
  try {
    const stdin = fs.fstatSync(0);
    return stdin.isFIFO() || stdin.isSocket(); // libuv's pipes are socket pairs
  } catch {
    return false; // closed
  }
}

if (stdinIsPipe()) readline.createInterface({ input: process.stdin }).on("line", (line) => {
  if (!line.trim()) return;
  let command;
  try {
    command = JSON.parse(line);
  } catch (err) {
    process.stdout.write(JSON.stringify({ error: `not JSON: ${err.message}` }) + "\n");
    return;
  }
  if (command.rotate) {
    // A new provider over the same store (oidc-provider's memory adapter is
    // shared by the process): the same clients and grants, other keys.
    provider = makeProvider(command.rotate, command.suffix);
    process.stdout.write(JSON.stringify({ rotated: kids(command.rotate, command.suffix) }) + "\n");
  } else if (command.stats) {
    process.stdout.write(JSON.stringify({ hits }) + "\n");
  } else {
    process.stdout.write(JSON.stringify({ error: "unknown command" }) + "\n");
  }
}).on("close", stop);
