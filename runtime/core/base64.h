/*
 * base64.h - RFC 4648 base64, standard alphabet, padded: what MCP carries
 * binary in (a resource's blob, image and audio data, cursors).
 *
 * Encoding goes 12 bits at a time through a table of character pairs, so
 * a big blob costs about what copying it does. No allocation: the caller
 * gives the output's room (base64_encoded_len, base64_decoded_max).
 */
#ifndef LUAMCP_BASE64_H
#define LUAMCP_BASE64_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the encoding of n bytes: 4 characters per 3 bytes, rounded up. */
static inline size_t base64_encoded_len(size_t n) { return (n + 2) / 3 * 4; }
/* Write the encoding of src[0..n) at dst: exactly base64_encoded_len(n)
 * bytes, no NUL. */
void base64_encode(const unsigned char *src, size_t n, char *dst);

/* Room base64_decode needs for n characters. */
static inline size_t base64_decoded_max(size_t n) { return n / 4 * 3 + 3; }
/* Decode s[0..n) into out, up to the first '=' (padding is not required;
 * bits left over at the end are dropped). Returns false and the index of
 * the first character outside the alphabet in *bad; else true and the
 * bytes written in *out_len. */
bool base64_decode(const char *s, size_t n, unsigned char *out, size_t *out_len, size_t *bad);

/* base64url without padding (RFC 4648 section 5, RFC 7515 section 2): what
 * JWTs and JWKs carry. The encoding of n bytes at dst, room
 * base64_encoded_len(n); returns its length (no '=', no NUL). */
size_t base64url_encode(const unsigned char *src, size_t n, char *dst);
/* Strict: only [A-Za-z0-9_-], no padding, no length that no encoding has
 * (n % 4 == 1), and the unused bits of the last character zero, so each
 * byte string has exactly one encoding (a signature cannot be respelled).
 * out has room base64_decoded_max(n). False for anything else. */
bool base64url_decode(const char *s, size_t n, unsigned char *out, size_t *out_len);

#endif
