/* fuzz_http_util.c - libFuzzer target: the HTTP header parsers (Accept,
 * Content-Type, Host, Origin, the --http listen spec) and the request
 * target as logged. Host names that are accepted must be plain names: no
 * port, no path, no credentials. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/luamcp_limits.h"
#include "transport/http_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *text = malloc(size + 1);
  memcpy(text, data, size);
  text[size] = '\0';
  http_accepts(text, "text/event-stream");
  http_accepts(text, "application/json");
  http_is_json(text);
  char name[256];
  if (http_host_name(text, name, sizeof name)) {
    if (strpbrk(name, "/@?#")) __builtin_trap();
    http_is_loopback_name(name);
  }
  if (http_origin_host(text, name, sizeof name) && strpbrk(name, "/@?#")) __builtin_trap();
  /* A session id names a worker only in range, and only with the right node. */
  int k = http_session_id_worker(text, NULL), kn = http_session_id_worker(text, "east");
  if (k < 0 || k > MAX_WORKERS || kn < 0 || kn > MAX_WORKERS) __builtin_trap();
  if (k && text[0] != 'w') __builtin_trap();
  if (kn && strncmp(text, "east.w", 6) != 0) __builtin_trap();
  char host[256], local[108], path[256], err[300];
  int port;
  /* A socket is named or a port is: never an empty socket path. */
  if (http_parse_listen(text, host, sizeof host, &port, local, sizeof local, path, sizeof path, err, sizeof err) &&
      (port < 0 || port > 65535 || path[0] != '/' || (strncmp(text, "unix:", 5) == 0) != (local[0] != '\0')))
    __builtin_trap();
  http_secret_equal(text, size, "secret", 6);
  /* The logged target shows no query value: each '=' after the '?' is
   * followed by the redaction (or ends a line cut to fit). */
  char shown[64];
  http_target_for_log(text, shown, sizeof shown);
  if (strlen(shown) >= sizeof shown) __builtin_trap();
  for (const char *q = strchr(shown, '?'), *eq = q ? strchr(q, '=') : NULL; eq; eq = strchr(eq + 1, '='))
    if (eq[1] && strncmp(eq + 1, "[redacted]", 10) != 0) __builtin_trap();
  free(text);
  return 0;
}
