/*
 * state_token.h - the requestState of an input_required result (MRTR,
 * 2026-07-28): what the server hands the client to bring back with its
 * answers, sealed so that the client can read it but not change it.
 *
 * A token is base64 of: a format byte, the expiry (unix ms, 8 bytes, big
 * endian), the payload, and an HMAC-SHA-256 (os/crypto.h) over a
 * binding string, the expiry and the payload. The binding (the method and
 * the tool, prompt or resource the request names) is not in the token: a
 * state opened for another request fails its MAC like a tampered one.
 *
 * The key is process-wide: set once at start (state_key_set, from
 * --state-key-env so that several processes share it), else random.
 */
#ifndef LUAMCP_STATE_TOKEN_H
#define LUAMCP_STATE_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum state_verdict {
  STATE_OK,
  STATE_MALFORMED, /* not a token of ours */
  STATE_FORGED,    /* the MAC does not match: changed, or made for another request or key */
  STATE_EXPIRED,
} state_verdict;

/* Derive the key from a secret of any length (SHA-256 of it). */
void state_key_set(const char *secret, size_t len);
/* A random key, unless one was set. False when no randomness is available. */
bool state_key_ensure(void);

/* Seal payload for binding until expires_ms. Returns a malloc'd NUL-ended
 * token (its length in *token_len), or NULL when there is no key. */
char *state_seal(const char *binding, size_t binding_len, const char *payload, size_t len, uint64_t expires_ms,
                 size_t *token_len);
/* Check and open a token at now_ms. On STATE_OK, *payload is malloc'd
 * (NUL-ended, *payload_len bytes). */
state_verdict state_open(const char *binding, size_t binding_len, const char *token, size_t token_len,
                         uint64_t now_ms, char **payload, size_t *payload_len);
const char *state_verdict_text(state_verdict v);

/* What else a state is bound to travels in its payload as a digest (the
 * request's arguments, so that a retry with other arguments is refused
 * with a message that says so): SHA-256 (libcrypto) of text, as 64 hex
 * digits and a NUL. */
void state_digest(const char *text, size_t len, char hex[65]);

#endif
