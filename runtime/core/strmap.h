/*
 * strmap.h - a hash map from NUL-terminated string keys to pointers.
 *
 * Ownership: the map owns copies of its keys, never the values. Used for
 * HTTP sessions by id, where a linear list would make every request O(n).
 */
#ifndef LUAMCP_STRMAP_H
#define LUAMCP_STRMAP_H

#include <stddef.h>

typedef struct strmap_entry {
  char *key;
  void *value;
  struct strmap_entry *next;
} strmap_entry;

typedef struct strmap {
  strmap_entry **buckets;
  size_t bucket_count; /* a power of two */
  size_t count;
} strmap;

void strmap_init(strmap *m);
void strmap_free(strmap *m);
void *strmap_get(const strmap *m, const char *key);
/* Insert or replace. */
void strmap_set(strmap *m, const char *key, void *value);
/* Remove; returns the value that was there, or NULL. */
void *strmap_remove(strmap *m, const char *key);

#endif
