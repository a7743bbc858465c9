/* state_token.c - sealed requestState tokens. See state_token.h. */
#include "core/state_token.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#define STATE_FORMAT 1
#define MAC_BYTES 32
#define HEADER_BYTES 9 /* format byte + expiry */

static unsigned char key[32];
static bool have_key;

void state_key_set(const char *secret, size_t len) {
  SHA256((const unsigned char *)secret, len, key);
  have_key = true;
}

bool state_key_ensure(void) {
  if (!have_key && RAND_bytes(key, sizeof key) == 1) have_key = true;
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
  unsigned int mac_len = MAC_BYTES;
  HMAC(EVP_sha256(), key, sizeof key, message, n, mac, &mac_len);
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
  char *token = malloc(4 * ((raw_len + 2) / 3) + 1);
  int n = EVP_EncodeBlock((unsigned char *)token, raw, (int)raw_len);
  free(raw);
  *token_len = (size_t)n;
  return token;
}

state_verdict state_open(const char *binding, size_t binding_len, const char *token, size_t token_len,
                         uint64_t now_ms, char **payload, size_t *payload_len) {
  *payload = NULL;
  *payload_len = 0;
  if (!have_key || token_len % 4 != 0 || token_len < 4 || token_len > (size_t)1 << 30) return STATE_MALFORMED;
  unsigned char *raw = malloc(token_len / 4 * 3 + 1);
  int n = EVP_DecodeBlock(raw, (const unsigned char *)token, (int)token_len);
  if (n < 0) {
    free(raw);
    return STATE_MALFORMED;
  }
  /* EVP_DecodeBlock counts the padding as zero bytes. */
  size_t raw_len = (size_t)n;
  if (token[token_len - 1] == '=') raw_len--;
  if (token[token_len - 2] == '=') raw_len--;
  if (raw_len < HEADER_BYTES + MAC_BYTES || raw[0] != STATE_FORMAT) {
    free(raw);
    return STATE_MALFORMED;
  }
  size_t body_len = raw_len - MAC_BYTES;
  unsigned char mac[MAC_BYTES];
  compute_mac(binding, binding_len, raw, body_len, mac);
  if (CRYPTO_memcmp(mac, raw + body_len, MAC_BYTES) != 0) {
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
    case STATE_FORGED: return "was altered, or was issued for another request";
    case STATE_EXPIRED: return "has expired";
  }
  return "invalid";
}

void state_digest(const char *text, size_t len, char hex[65]) {
  static const char digits[] = "0123456789abcdef";
  unsigned char sum[SHA256_DIGEST_LENGTH];
  SHA256((const unsigned char *)text, len, sum);
  for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) {
    hex[2 * i] = digits[sum[i] >> 4];
    hex[2 * i + 1] = digits[sum[i] & 15];
  }
  hex[64] = '\0';
}
