/* strmap.c - see strmap.h. */
#include "core/strmap.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static uint64_t hash(const char *s) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  while (*s) {
    h ^= (unsigned char)*s++;
    h *= 1099511628211ull;
  }
  return h;
}

void strmap_init(strmap *m) {
  m->bucket_count = 64;
  m->count = 0;
  m->buckets = calloc(m->bucket_count, sizeof *m->buckets);
}

void strmap_free(strmap *m) {
  for (size_t i = 0; i < m->bucket_count; i++) {
    strmap_entry *e = m->buckets[i];
    while (e) {
      strmap_entry *next = e->next;
      free(e->key);
      free(e);
      e = next;
    }
  }
  free(m->buckets);
  m->buckets = NULL;
  m->count = m->bucket_count = 0;
}

void *strmap_get(const strmap *m, const char *key) {
  for (strmap_entry *e = m->buckets[hash(key) & (m->bucket_count - 1)]; e; e = e->next)
    if (strcmp(e->key, key) == 0) return e->value;
  return NULL;
}

static void grow(strmap *m) {
  size_t n = m->bucket_count * 2;
  strmap_entry **b = calloc(n, sizeof *b);
  if (!b) return; /* stay at the current size; lookups still work */
  for (size_t i = 0; i < m->bucket_count; i++) {
    strmap_entry *e = m->buckets[i];
    while (e) {
      strmap_entry *next = e->next;
      size_t j = hash(e->key) & (n - 1);
      e->next = b[j];
      b[j] = e;
      e = next;
    }
  }
  free(m->buckets);
  m->buckets = b;
  m->bucket_count = n;
}

void strmap_set(strmap *m, const char *key, void *value) {
  size_t i = hash(key) & (m->bucket_count - 1);
  for (strmap_entry *e = m->buckets[i]; e; e = e->next) {
    if (strcmp(e->key, key) == 0) {
      e->value = value;
      return;
    }
  }
  strmap_entry *e = malloc(sizeof *e);
  e->key = strdup(key);
  e->value = value;
  e->next = m->buckets[i];
  m->buckets[i] = e;
  if (++m->count > m->bucket_count) grow(m);
}

void *strmap_remove(strmap *m, const char *key) {
  for (strmap_entry **pp = &m->buckets[hash(key) & (m->bucket_count - 1)]; *pp; pp = &(*pp)->next) {
    if (strcmp((*pp)->key, key) == 0) {
      strmap_entry *e = *pp;
      void *value = e->value;
      *pp = e->next;
      free(e->key);
      free(e);
      m->count--;
      return value;
    }
  }
  return NULL;
}
