// jwt_mint.mjs: keys and tokens for the auth specs, with Node's own crypto only.
//
//   node jwt_mint.mjs keys DIR
//     writes DIR/jwks.json (public keys: "rsa1" RS256, "ps1" PS256, "ec1" ES256,
//     "ed1" EdDSA; each with kid, alg, use "sig") and DIR/private.json (the
//     private JWKs by kid). Fresh keys on every run.
//
//   node jwt_mint.mjs token DIR JSON
//     prints one compact JWS. JSON fields:
//       claims   the payload, as given (iss/aud/sub/exp/iat are the caller's)
//       kid      which key signs (default: the key of `alg`, else "rsa1");
//                an unknown kid is written in the header and the token is
//                signed with the key of `alg` (an "unknown kid" token)
//       alg      header alg (default: the key's alg)
//       header   extra header fields, merged last (they may override typ/kid)
//       none     true: alg "none", empty signature
//       hs256_with_public_key  true: alg "HS256", HMAC-SHA256 keyed with the
//                public key's bytes (`hs256_secret`: "pem" (default, SPKI PEM),
//                "jwk" (the public JWK's JSON text), "der" (SPKI DER))
//       tamper   true: the payload is changed after signing (signature kept)
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const KEYS = [
  { kid: "rsa1", alg: "RS256", gen: () => crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }) },
  { kid: "ps1", alg: "PS256", gen: () => crypto.generateKeyPairSync("rsa", { modulusLength: 2048 }) },
  { kid: "ec1", alg: "ES256", gen: () => crypto.generateKeyPairSync("ec", { namedCurve: "P-256" }) },
  { kid: "ed1", alg: "EdDSA", gen: () => crypto.generateKeyPairSync("ed25519") },
];

const b64u = (buf) => Buffer.from(buf).toString("base64url");

function die(msg) {
  process.stderr.write(`jwt_mint: ${msg}\n`);
  process.exit(2);
}

function writeKeys(dir) {
  fs.mkdirSync(dir, { recursive: true });
  const pub = { keys: [] };
  const priv = {};
  for (const k of KEYS) {
    const { publicKey, privateKey } = k.gen();
    pub.keys.push({ ...publicKey.export({ format: "jwk" }), kid: k.kid, alg: k.alg, use: "sig" });
    priv[k.kid] = { alg: k.alg, jwk: privateKey.export({ format: "jwk" }) };
  }
  fs.writeFileSync(path.join(dir, "jwks.json"), JSON.stringify(pub, null, 2) + "\n");
  fs.writeFileSync(path.join(dir, "private.json"), JSON.stringify(priv, null, 2) + "\n", { mode: 0o600 });
}

function signWith(alg, privJwk, data) {
  const key = crypto.createPrivateKey({ key: privJwk, format: "jwk" });
  switch (alg) {
    case "RS256": return crypto.sign("sha256", data, key);
    case "PS256": return crypto.sign("sha256", data, {
      key, padding: crypto.constants.RSA_PKCS1_PSS_PADDING, saltLength: 32 });
    case "ES256": return crypto.sign("sha256", data, { key, dsaEncoding: "ieee-p1363" });
    case "EdDSA": return crypto.sign(null, data, key);
    default: die(`cannot sign with alg ${alg}`);
  }
}

function publicBytes(privJwk, form) {
  const pubKey = crypto.createPublicKey({ key: privJwk, format: "jwk" });
  if (form === "jwk") {
    const { d, p, q, dp, dq, qi, ...pubJwk } = privJwk;
    return Buffer.from(JSON.stringify(pubJwk));
  }
  if (form === "der") return pubKey.export({ type: "spki", format: "der" });
  return Buffer.from(pubKey.export({ type: "spki", format: "pem" }));
}

function mintToken(dir, spec) {
  const priv = JSON.parse(fs.readFileSync(path.join(dir, "private.json"), "utf8"));
  const byAlg = (alg) => Object.keys(priv).find((kid) => priv[kid].alg === alg);
  let kid = spec.kid;
  if (kid === undefined) kid = (spec.alg && byAlg(spec.alg)) || "rsa1";
  const known = priv[kid];
  const signKid = known ? kid : byAlg(spec.alg || "RS256");
  if (!signKid) die(`no key for kid ${kid} / alg ${spec.alg}`);
  const signer = priv[signKid];

  let alg = spec.alg || signer.alg;
  if (spec.none) alg = "none";
  if (spec.hs256_with_public_key) alg = "HS256";
  const header = { alg, typ: "JWT", kid, ...(spec.header || {}) };
  if (header.kid === null) delete header.kid;
  const claims = spec.claims || {};
  const h = b64u(JSON.stringify(header));
  const p = b64u(JSON.stringify(claims));
  const input = Buffer.from(`${h}.${p}`);

  let sig;
  if (spec.none) sig = Buffer.alloc(0);
  else if (spec.hs256_with_public_key)
    sig = crypto.createHmac("sha256", publicBytes(signer.jwk, spec.hs256_secret)).update(input).digest();
  else sig = signWith(signer.alg, signer.jwk, input);

  let payload = p;
  if (spec.tamper) {
    const changed = { ...claims, sub: `${claims.sub ?? ""}x`, tampered: true };
    payload = b64u(JSON.stringify(changed));
  }
  return `${h}.${payload}.${b64u(sig)}`;
}

const [cmd, dir, json] = process.argv.slice(2);
if (cmd === "keys" && dir) writeKeys(dir);
else if (cmd === "token" && dir && json !== undefined) {
  let spec;
  try { spec = JSON.parse(json); } catch (e) { die(`bad JSON: ${e.message}`); }
  process.stdout.write(mintToken(dir, spec) + "\n");
} else die("usage: jwt_mint.mjs keys DIR | token DIR JSON");
