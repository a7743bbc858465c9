// A tiny MCP server that demands DPoP (RFC 9449), for spec/login_spec.lua:
// luamcp's own server side takes Bearer tokens only. It speaks just enough
// 2025-11-25 MCP over HTTP for luamcp call (initialize, tools/list, one tool)
// and is a resource server of oidc-provider's (spec/helpers/oidc_provider.mjs
// with dpop: true): an access token must be a JWT the provider signed
// (its JWKS), for this server (aud), sent as "Authorization: DPoP TOKEN"
// with a proof (the DPoP header) signed by the key the token is bound to
// (cnf.jkt), for this request (htm, htu, ath), fresh (jti never seen, iat
// near), carrying this server's nonce: the first proof without it gets
// 401 use_dpop_nonce with a DPoP-Nonce header.
//
// Usage: node dpop_resource.mjs ISSUER
// Prints {"url": ".../mcp"} when it listens; GET /stats answers what it saw:
// {authenticated, bearer, nonce_challenges, nonce_honoured, bad_proofs, replays, subjects}.
import crypto from "node:crypto";
import http from "node:http";
import * as jose from "jose";

const issuer = process.argv[2];
const NONCE = "luamcp-spec-rs-nonce";
const stats = { authenticated: 0, bearer: 0, nonce_challenges: 0, nonce_honoured: 0, bad_proofs: [], replays: 0, subjects: [] };
const jtis = new Set();
const jwks = jose.createRemoteJWKSet(new URL(`${issuer}/jwks`));
let base;

function send(res, status, body, headers = {}) {
  res.writeHead(status, { "Content-Type": "application/json", ...headers });
  res.end(body === undefined ? "" : JSON.stringify(body));
}

// The caller's token's claims, or an answer already sent.
async function authenticate(req, res) {
  const challenge = (extra) => `DPoP ${extra ? extra + ", " : ""}resource_metadata="${base}/.well-known/oauth-protected-resource/mcp", scope="notes:read"`;
  const auth = req.headers.authorization ?? "";
  const [scheme, token] = auth.split(" ");
  if (!token) return send(res, 401, { error: "unauthorized" }, { "WWW-Authenticate": challenge() });
  if (scheme.toLowerCase() !== "dpop") {
    stats.bearer++;
    return send(res, 401, { error: "invalid_token" }, { "WWW-Authenticate": challenge('error="invalid_token", error_description="DPoP tokens only"') });
  }
  const refuse = (why) => {
    stats.bad_proofs.push(why);
    send(res, 401, { error: "invalid_dpop_proof", error_description: why }, { "WWW-Authenticate": challenge('error="invalid_dpop_proof"') });
  };
  let claims, proof, header;
  try {
    ({ payload: claims } = await jose.jwtVerify(token, jwks, { issuer, audience: `${base}/mcp` }));
  } catch (e) {
    return send(res, 401, { error: "invalid_token" }, { "WWW-Authenticate": challenge('error="invalid_token"') });
  }
  try {
    ({ payload: proof, protectedHeader: header } = await jose.jwtVerify(req.headers.dpop ?? "", jose.EmbeddedJWK, { typ: "dpop+jwt" }));
  } catch (e) {
    return refuse(`the proof does not verify: ${e.message}`);
  }
  if (claims.cnf?.jkt !== await jose.calculateJwkThumbprint(header.jwk)) return refuse("the proof's key is not the token's");
  if (proof.htm !== req.method || proof.htu !== `${base}${req.url.split("?")[0]}`) return refuse(`htm/htu ${proof.htm} ${proof.htu}`);
  if (proof.ath !== crypto.createHash("sha256").update(token).digest("base64url")) return refuse("ath");
  if (Math.abs(Date.now() / 1000 - proof.iat) > 300) return refuse("iat");
  if (jtis.has(proof.jti)) {
    stats.replays++;
    return refuse("a jti seen before");
  }
  jtis.add(proof.jti);
  if (proof.nonce !== NONCE) {
    stats.nonce_challenges++;
    return send(res, 401, { error: "use_dpop_nonce" }, { "WWW-Authenticate": challenge('error="use_dpop_nonce"'), "DPoP-Nonce": NONCE });
  }
  stats.nonce_honoured++;
  stats.authenticated++;
  return claims;
}

const server = http.createServer(async (req, res) => {
  if (req.url === "/stats") return send(res, 200, stats);
  if (req.url === "/.well-known/oauth-protected-resource/mcp") {
    return send(res, 200, { resource: `${base}/mcp`, authorization_servers: [issuer], scopes_supported: ["notes:read"] });
  }
  if (req.url !== "/mcp") return send(res, 404, { error: "not found" });
  if (req.method !== "POST") return send(res, 405, { error: "POST only" });
  let text = "";
  for await (const chunk of req) text += chunk;
  const claims = await authenticate(req, res);
  if (!claims || res.headersSent) return;
  const msg = JSON.parse(text);
  if (msg.id === undefined) return send(res, 202);
  const answer = (result) => send(res, 200, { jsonrpc: "2.0", id: msg.id, result });
  if (msg.method === "initialize") {
    return answer({ protocolVersion: msg.params.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: "dpop-rs", version: "1.0.0" } });
  }
  if (msg.method === "tools/list") return answer({ tools: [{ name: "whoami", inputSchema: { type: "object" } }] });
  if (msg.method === "tools/call") {
    stats.subjects.push(claims.sub);
    return answer({ content: [{ type: "text", text: `${claims.sub} with a DPoP-bound token` }], structuredContent: { subject: claims.sub, jkt: claims.cnf.jkt } });
  }
  return send(res, 200, { jsonrpc: "2.0", id: msg.id, error: { code: -32601, message: `Method not found: ${msg.method}` } });
});

server.listen(0, "127.0.0.1", () => {
  base = `http://127.0.0.1:${server.address().port}`;
  process.stdout.write(JSON.stringify({ url: `${base}/mcp` }) + "\n");
});
process.stdin.on("end", () => process.exit(0));
process.stdin.resume();
