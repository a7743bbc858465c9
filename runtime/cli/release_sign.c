/*
 * release_sign.c - the signed .mcpb of `luamcp release` (release.h), in
 * the format of the official mcpb tool (its src/node/sign.ts): the whole
 * unsigned bundle, then
 *
 *   "MCPB_SIG_V1", the signature's length (uint32, little-endian), a
 *   detached PKCS#7 SignedData over the unsigned bundle (DER), "MCPB_SIG_END"
 *
 * The signature itself is the platform's (os_pkcs7_sign_detached). The
 * same inputs give the same bytes: RSA PKCS#1 v1.5 takes no randomness,
 * and the signingTime attribute is SOURCE_DATE_EPOCH when set, else the
 * certificate's notBefore, never the clock. Zip readers skip the block, as
 * it follows the end of the central directory.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cli/files.h"
#include "cli/release.h"
#include "os/crypto.h"

#define SIG_HEADER "MCPB_SIG_V1"
#define SIG_FOOTER "MCPB_SIG_END"
enum { SIG_HEADER_LEN = sizeof SIG_HEADER - 1, SIG_FOOTER_LEN = sizeof SIG_FOOTER - 1, SIG_LENGTH_BYTES = 4 };

/* How many leading bytes of the bundle are unsigned: all of them, or those
 * before a signature block that ends the file (a bundle signed before, by
 * luamcp or mcpb, is signed again rather than twice). Only a whole block
 * at the very end counts, so marker text inside the zip is never cut. */
static size_t unsigned_length(const buf *bundle) {
  size_t len = bundle->len;
  const char *d = bundle->data;
  if (len < SIG_HEADER_LEN + SIG_LENGTH_BYTES + SIG_FOOTER_LEN ||
      memcmp(d + len - SIG_FOOTER_LEN, SIG_FOOTER, SIG_FOOTER_LEN) != 0)
    return len;
  /* The header nearest before the footer, as mcpb looks for it. */
  for (size_t at = len - SIG_FOOTER_LEN - SIG_LENGTH_BYTES - SIG_HEADER_LEN + 1; at-- > 0;) {
    if (memcmp(d + at, SIG_HEADER, SIG_HEADER_LEN) != 0) continue;
    const uint8_t *l = (const uint8_t *)d + at + SIG_HEADER_LEN;
    uint64_t sig_len = l[0] | (uint32_t)l[1] << 8 | (uint32_t)l[2] << 16 | (uint32_t)l[3] << 24;
    return at + SIG_HEADER_LEN + SIG_LENGTH_BYTES + sig_len + SIG_FOOTER_LEN == len ? at : len;
  }
  return len;
}

/* SOURCE_DATE_EPOCH (reproducible-builds.org) as the signing time, or -1
 * (the certificate's notBefore) when it is not set; false when it is set
 * to anything but a number of seconds. */
static bool signing_time(int64_t *at, buf *err) {
  const char *text = getenv("SOURCE_DATE_EPOCH");
  *at = -1;
  if (!text || !*text) return true;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (*end || errno || v < 0 || text[0] < '0' || text[0] > '9') {
    buf_printf(err, "SOURCE_DATE_EPOCH is \"%s\": it must be seconds since 1970", text);
    return false;
  }
  *at = v;
  return true;
}

/* The detached signature over n bytes of data, into *der (free it);
 * false with the reason, naming the file at fault, in err. what names the
 * thing signed in that reason. */
static bool sign_bytes(const char *cert_pem, const char *key_pem, const char *chain_pem, const void *data, size_t n,
                       const char *what, uint8_t **der, size_t *der_len, buf *err) {
  buf cert = {0}, key = {0}, chain = {0};
  int64_t at;
  os_pkcs7_input culprit;
  char why[256] = "";
  bool ok = files_read(cert_pem, &cert, err) && files_read(key_pem, &key, err) &&
            (!chain_pem || files_read(chain_pem, &chain, err)) && signing_time(&at, err);
  if (ok && chain_pem && chain.len == 0) {
    buf_printf(err, "signing %s: %s is empty (--sign-chain names a PEM file of intermediate certificates)", what,
               chain_pem);
    ok = false;
  }
  if (ok && !os_pkcs7_sign_detached(cert.data, cert.len, key.data, key.len, chain_pem ? chain.data : NULL,
                                    chain.len, at, data, n, der, der_len, &culprit, why, sizeof why)) {
    const char *file = culprit == OS_PKCS7_CERT    ? cert_pem
                       : culprit == OS_PKCS7_KEY   ? key_pem
                       : culprit == OS_PKCS7_CHAIN ? chain_pem
                                                   : NULL;
    if (file) buf_printf(err, "signing %s: %s %s", what, file, why);
    else buf_printf(err, "signing %s: %s", what, why);
    ok = false;
  }
  buf_free(&cert);
  buf_free(&key);
  buf_free(&chain);
  return ok;
}

bool release_sign_check(const char *cert_pem, const char *key_pem, const char *chain_pem, buf *err) {
  uint8_t *der = NULL;
  size_t der_len = 0;
  bool ok = sign_bytes(cert_pem, key_pem, chain_pem, "", 0, "the .mcpb", &der, &der_len, err);
  free(der);
  return ok;
}

bool release_sign_mcpb(const release_info *r, const char *cert_pem, const char *key_pem, const char *chain_pem,
                       buf *err) {
  buf bundle = {0}, out = {0};
  uint8_t *der = NULL;
  size_t der_len = 0;
  bool ok = files_read(r->mcpb_path, &bundle, err);
  size_t signed_len = ok ? unsigned_length(&bundle) : 0;
  ok = ok && sign_bytes(cert_pem, key_pem, chain_pem, bundle.data, signed_len, r->mcpb_path, &der, &der_len, err);
  if (ok && der_len > UINT32_MAX) {
    buf_printf(err, "signing %s: the signature is too large for the block", r->mcpb_path);
    ok = false;
  }
  if (ok) {
    uint8_t l[SIG_LENGTH_BYTES] = {der_len & 0xff, der_len >> 8 & 0xff, der_len >> 16 & 0xff, der_len >> 24 & 0xff};
    buf_append(&out, bundle.data, signed_len);
    buf_append(&out, SIG_HEADER, SIG_HEADER_LEN);
    buf_append(&out, l, sizeof l);
    buf_append(&out, der, der_len);
    buf_append(&out, SIG_FOOTER, SIG_FOOTER_LEN);
    ok = files_replace(r->mcpb_path, &out, 0644, err);
  }
  free(der);
  buf_free(&bundle);
  buf_free(&out);
  return ok;
}
