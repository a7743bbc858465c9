/*
 * unix_url.h - "unix:SOCKET[:/PATH]": an HTTP server on a local socket, as
 * --http, --metrics, `luamcp call --http`, mcp.client{url} and mcp.http
 * write it. SOCKET is a Unix socket file (Windows: a named pipe,
 * \\.\pipe\NAME); PATH is the HTTP path on it (the MCP endpoint). The
 * separator is nginx's (proxy_pass http://unix:/run/x.sock:/mcp), so one
 * text serves both. A socket path holds slashes of its own, so the split is
 * at the last ":/": a socket path that itself contains ":/" must be followed
 * by the endpoint's path (unix:/odd:/x.sock:/mcp).
 */
#ifndef LUAMCP_UNIX_URL_H
#define LUAMCP_UNIX_URL_H

#include <stdbool.h>
#include <stddef.h>

#define UNIX_URL_PREFIX "unix:"

/* Does the text name a local socket (it starts with "unix:")? */
bool unix_url_is(const char *text);

/* Split "unix:SOCKET[:/PATH]": the socket into socket, the path (or
 * default_path when none is given) into path. False with a message in err
 * when SOCKET is empty, PATH has a query, fragment or space, or either does
 * not fit. */
bool unix_url_parse(const char *text, const char *default_path, char *socket, size_t socket_len, char *path,
                    size_t path_len, char *err, size_t err_len);

/* The same as curl is handed it: the socket into socket (for
 * CURLOPT_UNIX_SOCKET_PATH) and the URL http://localhost/PATH into url,
 * the local name the server's Host rule accepts. */
bool unix_url_for_curl(const char *text, char *socket, size_t socket_len, char *url, size_t url_len, char *err,
                       size_t err_len);

#endif
