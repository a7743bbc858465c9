/*
 * chain.h - a JSON text in pieces: bytes of its own, and long strings it
 * borrows from their owner instead of copying them.
 *
 * A tool's result can hold a string of megabytes (a Lua string the script
 * keeps or made). Copying it into the encoder's buffer, the response, and
 * the transport's queue, each escaped, was most of what a big answer cost
 * in time and memory. A chain keeps the JSON text around such a string and
 * only points at the string itself; it is escaped as a JSON string literal
 * when the text is finally written (json_escape_chunk, a piece at a time
 * into the transport's write buffer, or all at once by chain_flatten for
 * a transport that wants one block of text).
 *
 * The borrowed bytes belong to someone else (the Lua state) and must stay
 * alive and unchanged while anyone may still read them: the chain's lease
 * says so. Whoever keeps a borrowed string past the call it was handed in
 * (a transport whose write is queued) holds the lease, and drops it when
 * done; the owner's release runs when the last holder drops it.
 *
 * Ownership: a chain is embedded in its builder's struct or stack, which
 * frees it (chain_free). The lease is made by the code that borrows (it
 * holds it once) and freed by its release.
 */
#ifndef LUAMCP_CHAIN_H
#define LUAMCP_CHAIN_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"

typedef struct chain_lease chain_lease;
struct chain_lease {
  int holders;
  void (*release)(chain_lease *lease); /* the last holder dropped it */
};

static inline void chain_lease_hold(chain_lease *l) {
  if (l) l->holders++;
}
static inline void chain_lease_drop(chain_lease *l) {
  if (l && --l->holders == 0) l->release(l);
}

/* A borrowed string, written as the inside of a JSON string literal (the
 * quotes are own bytes around it). */
typedef struct chain_string {
  size_t at; /* where it goes: after this many of the chain's own bytes */
  const char *data;
  size_t len;
} chain_string;

typedef struct chain {
  buf own;                /* the JSON text, less the borrowed strings */
  chain_string *strings;  /* in the order they are written (at never decreases) */
  size_t count, cap;
  chain_lease *lease;     /* keeps every borrowed string alive; NULL when there is none */
} chain;

#define CHAIN_INIT {BUF_INIT, NULL, 0, 0, NULL}

/* Borrow len bytes at data as the next piece of the text (after the own
 * bytes written so far). The caller makes sure the lease covers them. */
void chain_borrow(chain *c, const char *data, size_t len);
/* Append src: its own bytes are copied, its strings borrowed in turn; dst
 * takes src's lease (without holding it again: the caller's hold covers
 * both while they are alive). dst must have no lease of another owner. */
void chain_append(chain *dst, const chain *src);
/* The whole text, borrowed strings escaped, appended to out. */
void chain_flatten(const chain *c, buf *out);
/* Empty it for reuse (the lease is the caller's to drop). */
void chain_clear(chain *c);
void chain_free(chain *c);

#endif
