/* state_token.c - sealed requestState tokens. See state_token.h. */
#include "core/state_token.h"

#include "core/base64.h"
#include "os/crypto.h"

#include <stdlib.h>
#include <string.h>

#define STATE_FORMAT 1
#define MAC_BYTES OS_SHA256_BYTES
#define HEADER_BYTES 9 /* format byte + expiry */

static unsigned char key[OS_SHA256_BYTES];
static bool have_key;

void state_key_set(const char *secret, size_t len) {
  os_sha256(secret, len, key);
  have_key = true;
}

bool state_key_ensure(void) {
  if (!have_key && os_random_bytes(key, sizeof key)) have_key = true;
  return have_key;
}

/* HMAC(key, binding || 0 || header || payload). */
static void compute_mac(const char *binding, size_t binding_len, const unsigned char *body, size_t body_len,
                        unsigned char mac[MAC_BYTES]) {
  size_t n = binding_len + 1 + body_len;
  unsigned char *message = malloc(n);
  memcpy(message, binding, binding_len);
  message[binding_len] = 0;
  memcpy(message + binding_len + 1, body, body_len);
  os_hmac_sha256(key, sizeof key, message, n, mac);
  free(message);
}

char *state_seal(const char *binding, size_t binding_len, const char *payload, size_t len, uint64_t expires_ms,
                 size_t *token_len) {
  if (!state_key_ensure()) return NULL;
  size_t raw_len = HEADER_BYTES + len + MAC_BYTES;
  unsigned char *raw = malloc(raw_len);
  raw[0] = STATE_FORMAT;
  for (int i = 0; i < 8; i++) raw[1 + i] = (unsigned char)(expires_ms >> (56 - 8 * i));
  memcpy(raw + HEADER_BYTES, payload, len);
  compute_mac(binding, binding_len, raw, HEADER_BYTES + len, raw + HEADER_BYTES + len);
  /* Standard padded base64, NUL-terminated (as libcrypto's
   * EVP_EncodeBlock wrote it before: the same text). */
  size_t n = base64_encoded_len(raw_len);
  char *token = malloc(n + 1);
  base64_encode(raw, raw_len, token);
  token[n] = '\0';
  free(raw);
  *token_len = n;
  return token;
}

state_verdict state_open(const char *binding, size_t binding_len, const char *token, size_t token_len,
                         uint64_t now_ms, char **payload, size_t *payload_len) {
  *payload = NULL;
  *payload_len = 0;
  if (!have_key || token_len % 4 != 0 || token_len < 4 || token_len > (size_t)1 << 30) return STATE_MALFORMED;
  /* Padded base64: at most two '=', only at the end. */
  size_t chars = token_len;
  while (chars > 0 && token[chars - 1] == '=') chars--;
  if (token_len - chars > 2 || memchr(token, '=', chars)) return STATE_MALFORMED;
  unsigned char *raw = malloc(base64_decoded_max(chars) + 1);
  size_t raw_len, bad;
  if (!base64_decode(token, chars, raw, &raw_len, &bad) || raw_len < HEADER_BYTES + MAC_BYTES ||
      raw[0] != STATE_FORMAT) {
    free(raw);
    return STATE_MALFORMED;
  }
  size_t body_len = raw_len - MAC_BYTES;
  unsigned char mac[MAC_BYTES];
  compute_mac(binding, binding_len, raw, body_len, mac);
  if (!os_equal_secret(mac, raw + body_len, MAC_BYTES)) {
    free(raw);
    return STATE_FORGED;
  }
  uint64_t expires = 0;
  for (int i = 0; i < 8; i++) expires = expires << 8 | raw[1 + i];
  if (now_ms > expires) {
    free(raw);
    return STATE_EXPIRED;
  }
  size_t len = body_len - HEADER_BYTES;
  memmove(raw, raw + HEADER_BYTES, len);
  raw[len] = '\0';
  *payload = (char *)raw;
  *payload_len = len;
  return STATE_OK;
}

const char *state_verdict_text(state_verdict v) {
  switch (v) {
    case STATE_OK: return "valid";
    case STATE_MALFORMED: return "not a requestState this server issued";
    case STATE_FORGED: return "was altered, or was issued for another request or caller";
    case STATE_EXPIRED: return "has expired";
  }
  return "invalid";
}

void state_digest(const char *text, size_t len, char hex[65]) {
  static const char digits[] = "0123456789abcdef";
  unsigned char sum[OS_SHA256_BYTES];
  os_sha256(text, len, sum);
  for (int i = 0; i < OS_SHA256_BYTES; i++) {
    hex[2 * i] = digits[sum[i] >> 4];
    hex[2 * i + 1] = digits[sum[i] & 15];
  }
  hex[64] = '\0';
}
