// Verifies a signed MCP Bundle with the official @anthropic-ai/mcpb
// library's own verifyMcpbFile (what `mcpb verify` and `mcpb info` run):
// its signature block parsing, its node-forge reading of the PKCS#7, its
// messageDigest check against the unsigned bytes, its certificate chain
// check (`openssl verify ... -CApath /etc/ssl/certs`) and its self-signed
// test. One piece is missing from the library, so it is filled in here:
// node-forge's PKCS#7 verify() is a stub that always throws (mcpb 2.1.2 reports
// every bundle, its own included, as unsigned: modelcontextprotocol/mcpb#276),
// so the signature over the authenticated attributes and the content is
// checked by OpenSSL instead (`openssl cms -verify`, the chain left to mcpb).
// Prints verifyMcpbFile's result as one JSON line; release_sign_spec.lua.
//
// Usage: node mcpb_verify.mjs MCPB_LIBRARY_NODE_JS FORGE_INDEX_JS FILE.mcpb
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { pathToFileURL } from "node:url";

const [library, forgePath, mcpbPath] = process.argv.slice(2);
// The very node-forge module the library loads (CommonJS: one instance).
const forge = createRequire(import.meta.url)(resolve(forgePath));
const { verifyMcpbFile, extractSignatureBlock } = await import(pathToFileURL(resolve(library)).href);

const fromAsn1 = forge.pkcs7.messageFromAsn1;
forge.pkcs7.messageFromAsn1 = (asn1) => {
  const message = fromAsn1(asn1);
  if (message.type !== forge.pki.oids.signedData) return message;
  message.verify = () => {
    const { originalContent } = extractSignatureBlock(readFileSync(mcpbPath));
    const dir = mkdtempSync(join(tmpdir(), "mcpb-p7-"));
    try {
      writeFileSync(join(dir, "sig.der"), Buffer.from(forge.asn1.toDer(asn1).getBytes(), "binary"));
      writeFileSync(join(dir, "content"), originalContent);
      // Throws, as verify() would, when the signature does not hold.
      execFileSync("openssl", ["cms", "-verify", "-inform", "DER", "-in", join(dir, "sig.der"), "-binary",
        "-content", join(dir, "content"), "-noverify", "-out", "/dev/null"], { stdio: "ignore" });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  };
  return message;
};

console.log(JSON.stringify(await verifyMcpbFile(mcpbPath)));
