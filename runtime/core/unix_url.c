/* unix_url.c - see unix_url.h. */
#include "core/unix_url.h"

#include <stdio.h>
#include <string.h>

bool unix_url_is(const char *text) { return text && strncmp(text, UNIX_URL_PREFIX, strlen(UNIX_URL_PREFIX)) == 0; }

bool unix_url_parse(const char *text, const char *default_path, char *socket, size_t socket_len, char *path,
                    size_t path_len, char *err, size_t err_len) {
  if (!unix_url_is(text)) {
    snprintf(err, err_len, "'%s' does not start with " UNIX_URL_PREFIX, text ? text : "");
    return false;
  }
  const char *s = text + strlen(UNIX_URL_PREFIX), *split = NULL;
  for (const char *p = strstr(s, ":/"); p; p = strstr(p + 1, ":/")) split = p;
  size_t n = split ? (size_t)(split - s) : strlen(s);
  const char *endpoint = split ? split + 1 : default_path;
  if (n == 0) {
    snprintf(err, err_len, "'%s' names no socket: write unix:/path/to/server.sock[:/mcp]", text);
    return false;
  }
  if (n >= socket_len || strlen(endpoint) >= path_len) {
    snprintf(err, err_len, "'%s' is too long", text);
    return false;
  }
  if (strpbrk(endpoint, "?# ")) {
    snprintf(err, err_len, "'%s': the path after the socket (%s) cannot hold '?', '#' or a space", text, endpoint);
    return false;
  }
  memcpy(socket, s, n);
  socket[n] = '\0';
  snprintf(path, path_len, "%s", endpoint);
  return true;
}

bool unix_url_for_curl(const char *text, char *socket, size_t socket_len, char *url, size_t url_len, char *err,
                       size_t err_len) {
  char path[1024];
  if (!unix_url_parse(text, "/mcp", socket, socket_len, path, sizeof path, err, err_len)) return false;
  if ((size_t)snprintf(url, url_len, "http://localhost%s", path) >= url_len) {
    snprintf(err, err_len, "'%s' is too long", text);
    return false;
  }
  return true;
}
