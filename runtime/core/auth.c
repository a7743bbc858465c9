/*
 * auth.c - verified callers (auth.h): their references, scopes and
 * principals. The checking of tokens is the verifier's (app/).
 */
#include "core/auth.h"

#include <stdlib.h>
#include <string.h>

#include "core/json.h"

static char *copy(const char *s) { return s ? strdup(s) : NULL; }

auth_identity *auth_identity_new(const char *principal, const char *subject, const char *client_id, const char *scopes,
                                 int64_t expires_s, const char *claims_json) {
  if (!principal || !*principal) return NULL;
  auth_identity *id = calloc(1, sizeof *id);
  if (!id) return NULL;
  id->refs = 1;
  id->principal = strdup(principal);
  id->subject = copy(subject);
  id->client_id = copy(client_id);
  id->scopes = strdup(scopes ? scopes : "");
  id->expires_s = expires_s;
  id->claims_json = strdup(claims_json ? claims_json : "{}");
  if (!id->principal || !id->scopes || !id->claims_json || (subject && !id->subject) ||
      (client_id && !id->client_id)) {
    auth_identity_unref(id);
    return NULL;
  }
  return id;
}

auth_identity *auth_identity_ref(auth_identity *id) {
  if (id) id->refs++;
  return id;
}

void auth_identity_unref(auth_identity *id) {
  if (!id || --id->refs > 0) return;
  free(id->principal);
  free(id->subject);
  free(id->client_id);
  free(id->scopes);
  free(id->claims_json);
  free(id);
}

bool auth_scope_next(const char **cursor, const char **word, size_t *len) {
  const char *p = *cursor;
  while (*p == ' ') p++;
  const char *end = p;
  while (*end && *end != ' ') end++;
  *cursor = end;
  *word = p;
  *len = (size_t)(end - p);
  return end > p;
}

/* Is the scope word (len bytes) one of the space-separated granted? */
static bool granted(const char *scopes, const char *word, size_t len) {
  const char *have;
  size_t have_len;
  for (const char *p = scopes; auth_scope_next(&p, &have, &have_len);)
    if (have_len == len && memcmp(have, word, len) == 0) return true;
  return false;
}

bool auth_has_scopes(const auth_identity *id, const char *required) {
  if (!id || !required) return true;
  const char *word;
  size_t len;
  for (const char *p = required; auth_scope_next(&p, &word, &len);)
    if (!granted(id->scopes, word, len)) return false;
  return true;
}

/* scopes (space-separated) as a JSON array of strings. */
void auth_write_scopes_json(const char *scopes, buf *out) {
  buf_putc(out, '[');
  const char *word;
  size_t len;
  bool first = true;
  for (const char *p = scopes ? scopes : ""; auth_scope_next(&p, &word, &len); first = false) {
    if (!first) buf_putc(out, ',');
    json_write_string(out, word, len);
  }
  buf_putc(out, ']');
}

bool auth_same_principal(const auth_identity *a, const auth_identity *b) {
  if (!a || !b) return a == b;
  return a == b || strcmp(a->principal, b->principal) == 0;
}

const char *auth_principal(const auth_identity *id) { return id ? id->principal : ""; }

static void write_field(buf *out, bool *first, const char *name) {
  if (!*first) buf_putc(out, ',');
  *first = false;
  json_write_string(out, name, strlen(name));
  buf_putc(out, ':');
}

void auth_identity_write_json(const auth_identity *id, buf *out) {
  if (!id) {
    buf_puts(out, "null");
    return;
  }
  bool first = true;
  buf_putc(out, '{');
  if (id->subject) {
    write_field(out, &first, "subject");
    json_write_string(out, id->subject, strlen(id->subject));
  }
  if (id->client_id) {
    write_field(out, &first, "client_id");
    json_write_string(out, id->client_id, strlen(id->client_id));
  }
  write_field(out, &first, "scopes");
  auth_write_scopes_json(id->scopes, out);
  if (id->expires_s) {
    write_field(out, &first, "expires_at");
    buf_printf(out, "%lld", (long long)id->expires_s);
  }
  write_field(out, &first, "claims");
  buf_append(out, id->claims_json, strlen(id->claims_json));
  buf_putc(out, '}');
}
