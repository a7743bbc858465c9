/*
 * auth_verifier_driver.c - app/auth_verifier.c alone on a libuv loop, for
 * spec/auth_verifier_spec.lua: the spec names what to check on stdin and
 * reads each verdict on stdout, one JSON line each, with whether it came
 * at once ("now", inside check) or later (from the loop). The verifier's
 * settings are the command line:
 *
 *   auth_verifier_driver --issuer URL [--jwks-uri URL] [--jwks-file FILE]
 *       [--introspection-endpoint URL] [--client-id ID] [--client-secret S]
 *       [--algorithms "RS256 ..."] [--leeway S]
 *
 * stdin lines:  check ID RESOURCE TOKEN | cancel ID | free | quit
 * stdout lines: {"ready":true} or {"error":"why"} first; then
 *   {"id":ID,"when":"now"|"later","status":N,"error":...,"description":...,
 *    "principal":...,"scopes":...,"identity":{...ctx.auth...}}
 *   {"cancelled":ID} {"freed":true}
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "core/auth.h"
#include "core/buf.h"
#include "core/json.h"
#include "core/log.h"
#include "app/auth_verifier.h"

/* A check in flight. Owner: the list below, until its verdict or cancel. */
typedef struct pending_check {
  struct pending_check *next;
  char id[64];
  void *pending;
} pending_check;

static uv_loop_t *loop;
static uv_pipe_t input;
static buf line_in = BUF_INIT;
static auth_verifier *verifier;
static pending_check *checks;

static void emit(buf *b) {
  fwrite(b->data, 1, b->len, stdout);
  fputc('\n', stdout);
  fflush(stdout);
  buf_free(b);
}

static void print_verdict(const char *id, const char *when, const auth_verdict *verdict) {
  buf b = BUF_INIT;
  buf_puts(&b, "{\"id\":");
  json_write_string(&b, id, strlen(id));
  buf_printf(&b, ",\"when\":\"%s\",\"status\":%d", when, verdict->status);
  if (verdict->error) {
    buf_puts(&b, ",\"error\":");
    json_write_string(&b, verdict->error, strlen(verdict->error));
  }
  buf_puts(&b, ",\"description\":");
  json_write_string(&b, verdict->description, strlen(verdict->description));
  if (verdict->identity) {
    buf_puts(&b, ",\"principal\":");
    json_write_string(&b, verdict->identity->principal, strlen(verdict->identity->principal));
    buf_puts(&b, ",\"identity\":");
    auth_identity_write_json(verdict->identity, &b);
  }
  buf_putc(&b, '}');
  emit(&b);
}

static pending_check **find(const char *id) {
  pending_check **p = &checks;
  while (*p && strcmp((*p)->id, id) != 0) p = &(*p)->next;
  return p;
}

static int in_check; /* a done inside check() is a bug the spec must see */

static void on_done(void *data, auth_verdict *verdict) {
  pending_check *c = data;
  print_verdict(c->id, in_check ? "inside-check" : "later", verdict);
  auth_identity_unref(verdict->identity);
  pending_check **p = &checks;
  while (*p && *p != c) p = &(*p)->next;
  if (*p) *p = c->next;
  free(c);
}

static void command(char *text) {
  char *verb = strtok(text, " ");
  if (!verb) return;
  if (strcmp(verb, "check") == 0) {
    char *id = strtok(NULL, " "), *resource = strtok(NULL, " "), *token = strtok(NULL, "");
    if (!id || !resource) return;
    if (!token) token = "";
    pending_check *c = calloc(1, sizeof *c);
    snprintf(c->id, sizeof c->id, "%s", id);
    auth_verdict verdict;
    in_check++;
    bool now = AUTH_VERIFIER_OPS.check(verifier, token, strlen(token), resource, on_done, c, &verdict, &c->pending);
    in_check--;
    if (now) {
      print_verdict(id, "now", &verdict);
      auth_identity_unref(verdict.identity);
      free(c);
    } else {
      c->next = checks;
      checks = c;
    }
  } else if (strcmp(verb, "cancel") == 0) {
    char *id = strtok(NULL, " ");
    pending_check **p = id ? find(id) : NULL;
    if (p && *p) {
      pending_check *c = *p;
      *p = c->next;
      AUTH_VERIFIER_OPS.cancel(verifier, c->pending);
      free(c);
    }
    buf b = BUF_INIT;
    buf_puts(&b, "{\"cancelled\":");
    json_write_string(&b, id ? id : "", id ? strlen(id) : 0);
    buf_putc(&b, '}');
    emit(&b);
  } else if (strcmp(verb, "free") == 0 || strcmp(verb, "quit") == 0) {
    auth_verifier_free(verifier);
    verifier = NULL;
    while (checks) { /* cancelled with the verifier: no done comes */
      pending_check *c = checks;
      checks = c->next;
      free(c);
    }
    buf b = BUF_INIT;
    buf_puts(&b, "{\"freed\":true}");
    emit(&b);
    uv_close((uv_handle_t *)&input, NULL);
  }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *out) {
  (void)h;
  out->base = malloc(suggested);
  out->len = out->base ? suggested : 0;
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *b) {
  if (n > 0) buf_append(&line_in, b->base, (size_t)n);
  free(b->base);
  char *nl;
  while (verifier && line_in.data && (nl = memchr(line_in.data, '\n', line_in.len))) {
    size_t len = (size_t)(nl - line_in.data);
    char *text = strndup(line_in.data, len);
    buf_consume(&line_in, len + 1);
    command(text);
    free(text);
  }
  if (n < 0 && verifier) {
    char quit[] = "quit";
    command(quit);
  }
  (void)s;
}

int main(int argc, char **argv) {
  auth_settings settings = {.leeway_s = -1};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *name = argv[i], *value = argv[i + 1];
    if (strcmp(name, "--issuer") == 0) settings.issuer = value;
    else if (strcmp(name, "--jwks-uri") == 0) settings.jwks_uri = value;
    else if (strcmp(name, "--jwks-file") == 0) settings.jwks_file = value;
    else if (strcmp(name, "--introspection-endpoint") == 0) settings.introspection_endpoint = value;
    else if (strcmp(name, "--client-id") == 0) settings.client_id = value;
    else if (strcmp(name, "--client-secret") == 0) settings.client_secret = value;
    else if (strcmp(name, "--algorithms") == 0) settings.algorithms = value;
    else if (strcmp(name, "--leeway") == 0) settings.leeway_s = atoi(value);
    else {
      fprintf(stderr, "unknown option %s\n", name);
      return 2;
    }
  }
  log_set_level(LOG_DEBUG);
  loop = uv_default_loop();
  char why[256];
  verifier = auth_verifier_new(loop, &settings, why, sizeof why);
  buf b = BUF_INIT;
  if (!verifier) {
    buf_puts(&b, "{\"error\":");
    json_write_string(&b, why, strlen(why));
    buf_putc(&b, '}');
    emit(&b);
    return 1;
  }
  buf_puts(&b, "{\"ready\":true}");
  emit(&b);
  uv_pipe_init(loop, &input, 0);
  uv_pipe_open(&input, 0);
  uv_read_start((uv_stream_t *)&input, on_alloc, on_read);
  uv_run(loop, UV_RUN_DEFAULT);
  /* Every handle closed: the verifier freed its own. */
  int left = uv_loop_close(loop);
  buf_free(&line_in);
  fprintf(stderr, "loop closed: %s\n", left == 0 ? "clean" : "handles left open");
  return left == 0 ? 0 : 3;
}
