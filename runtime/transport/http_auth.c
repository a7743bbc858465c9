/* http_auth.c - the HTTP side of the OAuth 2.1 resource server (MCP
 * authorization): Protected Resource Metadata (RFC 9728), the bearer token
 * of each request checked by the verifier (now, or later while the request
 * is held), and the WWW-Authenticate challenges (RFC 6750) of 401 and 403.
 * Both are one endpoint family (auth_metadata_family, see http_route.h):
 * the metadata its route, the token check its access rule, which the
 * connection applies to every route that is not public. See http.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/json.h"
#include "core/jsonrpc.h"
#include "core/log.h"
#include "transport/http.h"
#include "transport/http_route.h"
#include "transport/http_util.h"

#define PRM_PATH "/.well-known/oauth-protected-resource"

bool http_auth_on(const http_server *h) { return h->opts.auth.ops != NULL; }

/* The request's path, without its query. */
static size_t url_path_len(const http_conn *c) { return strcspn(c->url.data ? c->url.data : "", "?#"); }

/* /.well-known/oauth-protected-resource, or that followed by the MCP path
 * (RFC 9728), while OAuth is on. Public (any page may read it: see
 * answer_metadata), and it needs no token. */
static int metadata_match(const http_conn *c, unsigned *rules) {
  if (!http_auth_on(c->server) || !c->url.data) return 0;
  size_t n = url_path_len(c), base = strlen(PRM_PATH);
  if (n < base || strncmp(c->url.data, PRM_PATH, base) != 0) return 0;
  const char *path = c->server->opts.path;
  if (n != base && !(n - base == strlen(path) && strncmp(c->url.data + base, path, n - base) == 0)) return 0;
  *rules = HTTP_ROUTE_PUBLIC | HTTP_ROUTE_REPORTS;
  return 1;
}

/* This server's canonical URI: the configured one, or (allowed on loopback
 * without --allow-host only, see cli) http://NAME:PORT/PATH with the name
 * of the request's Host header and the port this server listens on (under
 * --workers the shared one): the Host's own port is the client's to write,
 * so a token for another local server's port would otherwise pass. */
static void resource_uri(const http_conn *c, buf *out) {
  const auth_config *a = &c->server->opts.auth;
  if (a->resource) {
    buf_append_str(out, a->resource);
    return;
  }
  char name[256];
  if (!c->host || !http_host_name(c->host, name, sizeof name)) snprintf(name, sizeof name, "localhost");
  bool ipv6 = strchr(name, ':') != NULL;
  buf_printf(out, "http://%s%s%s", ipv6 ? "[" : "", name, ipv6 ? "]" : "");
  /* A local socket has no port: its clients write http://localhost/PATH. */
  if (c->server->port != 80 && !c->server->opts.local[0]) buf_printf(out, ":%d", c->server->port);
  buf_append_str(out, c->server->opts.path);
}

/* RFC 9728, 3.1: the well-known name goes between the authority and the
 * resource's path. */
static void metadata_url(const http_conn *c, buf *out) {
  buf res = BUF_INIT;
  resource_uri(c, &res);
  const char *s = res.data ? res.data : "";
  const char *scheme_end = strstr(s, "://");
  const char *path = scheme_end ? strchr(scheme_end + 3, '/') : NULL;
  if (!path) path = s + strlen(s);
  buf_append(out, s, (size_t)(path - s));
  buf_puts(out, PRM_PATH);
  size_t plen = strcspn(path, "?#");
  if (plen > 1 || (plen == 1 && path[0] != '/')) buf_append(out, path, plen);
  buf_free(&res);
}

/* A value inside a quoted-string of WWW-Authenticate: no quote, backslash
 * or control character can end it early. */
static void append_quoted(buf *out, const char *s) {
  for (; s && *s; s++) buf_putc(out, (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20) ? '\'' : *s);
}

static void challenge_header(const http_conn *c, buf *out, const char *error, const char *description,
                             const char *scope) {
  buf_puts(out, "WWW-Authenticate: Bearer ");
  if (error && strcmp(error, "insufficient_scope") == 0) {
    /* As the MCP authorization specification's step-up example orders it. */
    buf_printf(out, "error=\"%s\", scope=\"", error);
    append_quoted(out, scope);
    buf_puts(out, "\", resource_metadata=\"");
    metadata_url(c, out);
    buf_puts(out, "\"");
  } else {
    buf_puts(out, "resource_metadata=\"");
    metadata_url(c, out);
    buf_puts(out, "\"");
    if (scope && *scope) {
      buf_puts(out, ", scope=\"");
      append_quoted(out, scope);
      buf_puts(out, "\"");
    }
    if (error) buf_printf(out, ", error=\"%s\"", error);
  }
  if (description && *description) {
    buf_puts(out, ", error_description=\"");
    append_quoted(out, description);
    buf_puts(out, "\"");
  }
  buf_puts(out, "\r\n");
}

void http_auth_scope_challenge(const http_conn *c, buf *headers, const char *required) {
  char description[200];
  snprintf(description, sizeof description, "this needs the scope%s %s", strchr(required, ' ') ? "s" : "", required);
  challenge_header(c, headers, "insufficient_scope", description, required);
}

/* 401: no token (error NULL), or a token refused. The body was read: the
 * JSON-RPC error echoes the request's id. */
static void send_unauthorized(http_conn *c, const char *error, const char *description) {
  buf headers = BUF_INIT;
  challenge_header(c, &headers, error, description, c->server->opts.auth.scopes);
  char message[240];
  snprintf(message, sizeof message, "Unauthorized: %s",
           description && *description ? description : "a valid bearer token is required");
  conn_send_error(c, 401, -32000, message, headers.data);
  buf_free(&headers);
}

/* GET/HEAD/OPTIONS on the metadata path (public, CORS for any origin). */
static void answer_metadata(http_conn *c, int route) {
  (void)route;
  const auth_config *a = &c->server->opts.auth;
  /* Public metadata: any page may read it (no credentials are involved). */
  const char *cors = "Access-Control-Allow-Origin: *\r\n";
  if (c->parser.method == HTTP_OPTIONS) {
    char headers[400];
    snprintf(headers, sizeof headers,
             "%sAllow: GET, HEAD, OPTIONS\r\nAccess-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
             "Access-Control-Allow-Headers: MCP-Protocol-Version, Content-Type, Accept, Authorization\r\n"
             "Access-Control-Max-Age: 600\r\n",
             cors);
    conn_send_response(c, 204, headers, NULL, NULL, 0);
    conn_response_done(c);
    return;
  }
  if (c->parser.method != HTTP_GET && c->parser.method != HTTP_HEAD) {
    conn_send_error(c, 405, -32000, "Method Not Allowed: use GET", "Allow: GET, HEAD, OPTIONS\r\n");
    return;
  }
  buf body = BUF_INIT, res = BUF_INIT;
  resource_uri(c, &res);
  buf_puts(&body, "{\"resource\":");
  json_write_string(&body, res.data, res.len);
  buf_puts(&body, ",\"authorization_servers\":[");
  for (int i = 0; i < a->authorization_server_count; i++) {
    if (i) buf_putc(&body, ',');
    json_write_string(&body, a->authorization_servers[i], strlen(a->authorization_servers[i]));
  }
  buf_putc(&body, ']');
  if (a->scopes && *a->scopes) {
    buf_puts(&body, ",\"scopes_supported\":[");
    const char *p = a->scopes;
    bool first = true;
    while (*p) {
      p += strspn(p, " ");
      size_t n = strcspn(p, " ");
      if (!n) break;
      if (!first) buf_putc(&body, ',');
      json_write_string(&body, p, n);
      first = false;
      p += n;
    }
    buf_putc(&body, ']');
  }
  buf_puts(&body, ",\"bearer_methods_supported\":[\"header\"]}");
  char headers[160];
  snprintf(headers, sizeof headers, "%sCache-Control: max-age=300\r\n", cors);
  conn_send_response(c, 200, headers, "application/json", body.data, body.len);
  conn_response_done(c);
  buf_free(&body);
  buf_free(&res);
}

/* ---- Checking the token ---------------------------------------------- */

static void on_verdict(void *data, auth_verdict *v) {
  http_conn *c = data;
  c->auth_pending = NULL;
  c->auth_answer = *v;
  c->auth_answered = true;
  /* Handled again on the loop's next turn (on_later), never from inside
   * the verifier's callback. */
  c->request_held = true;
  conn_defer(c);
}

/* Act on a verdict: true (c->identity set) when the request goes on. */
static bool apply(http_conn *c, auth_verdict *v) {
  if (v->status == 0 && v->identity) {
    auth_identity_unref(c->identity);
    c->identity = v->identity;
    log_write(LOG_DEBUG, "http#%u: bearer token of %s", c->id, c->identity->principal);
    return true;
  }
  auth_identity_unref(v->identity);
  if (v->status == 503) {
    char message[240];
    snprintf(message, sizeof message, "Service Unavailable: the token cannot be checked now (%s)",
             v->description[0] ? v->description : "the authorization server cannot be reached");
    conn_send_error(c, 503, MCP_SERVER_BUSY, message, "Retry-After: 5\r\n");
  } else {
    send_unauthorized(c, "invalid_token", v->description[0] ? v->description : "the token is not valid");
  }
  return false;
}

/* The access rule (see http_route_family.access): the request's bearer
 * token, while OAuth is on. True when it may go on (c->identity set);
 * false when answered (401, 503) or held while the verifier checks (the
 * request is handled again with the verdict). */
static bool check_request(http_conn *c) {
  const auth_config *a = &c->server->opts.auth;
  if (!http_auth_on(c->server)) return true;
  if (c->auth_pending) return false;
  if (c->auth_answered) {
    c->auth_answered = false;
    auth_verdict v = c->auth_answer;
    memset(&c->auth_answer, 0, sizeof c->auth_answer);
    return apply(c, &v);
  }
  if (c->identity) return true; /* checked already (a request handled again after a hold) */
  const char *given = c->authorization;
  if (!given || strncasecmp(given, "Bearer ", 7) != 0 || !given[7 + strspn(given + 7, " ")]) {
    send_unauthorized(c, NULL, NULL);
    return false;
  }
  const char *token = given + 7 + strspn(given + 7, " ");
  size_t len = strlen(token);
  while (len && (token[len - 1] == ' ' || token[len - 1] == '\t')) len--;
  buf res = BUF_INIT;
  resource_uri(c, &res);
  free(c->auth_resource);
  c->auth_resource = strdup(res.data); /* kept while the check is pending */
  buf_free(&res);
  auth_verdict v;
  memset(&v, 0, sizeof v);
  void *pending = NULL;
  if (!a->ops->check(a->verifier, token, len, c->auth_resource, on_verdict, c, &v, &pending)) {
    c->auth_pending = pending;
    log_write(LOG_DEBUG, "http#%u: holding the request while its token is checked", c->id);
    return false;
  }
  return apply(c, &v);
}

/* The server drains: a request still waiting for its token's verdict is
 * answered 503 now (check cancelled, connection closed after), since the
 * loop may stop before the verdict. Nothing when no check is pending. */
static void drain_check(http_conn *c) {
  if (!c->auth_pending) return;
  const auth_config *a = &c->server->opts.auth;
  log_write(LOG_DEBUG, "http#%u: the server drains while its token is checked: check cancelled", c->id);
  if (a->ops && a->ops->cancel) a->ops->cancel(a->verifier, c->auth_pending);
  c->auth_pending = NULL;
  c->close_after_response = true;
  conn_send_error(c, 503, -32000, "Service Unavailable: the server is shutting down", "Retry-After: 1\r\n");
}

/* The request or its connection is going: cancel a pending check, drop
 * the identity. */
static void release(http_conn *c) {
  if (c->auth_pending) {
    const auth_config *a = &c->server->opts.auth;
    log_write(LOG_DEBUG, "http#%u: gone while its token was being checked: check cancelled", c->id);
    if (a->ops && a->ops->cancel) a->ops->cancel(a->verifier, c->auth_pending);
    c->auth_pending = NULL;
  }
  if (c->auth_answered) {
    auth_identity_unref(c->auth_answer.identity);
    memset(&c->auth_answer, 0, sizeof c->auth_answer);
    c->auth_answered = false;
  }
  auth_identity_unref(c->identity);
  c->identity = NULL;
  free(c->auth_resource);
  c->auth_resource = NULL;
}

const http_route_family auth_metadata_family = {
    .name = "oauth-protected-resource",
    .match = metadata_match,
    .handle = answer_metadata,
    .access = check_request,
    .request_end = release,
    .conn_drain = drain_check,
};
