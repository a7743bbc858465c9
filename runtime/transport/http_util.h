/*
 * http_util.h - small HTTP header parsers for the Streamable HTTP transport.
 * Pure functions (no I/O), so they are unit-tested directly.
 */
#ifndef LUAMCP_HTTP_UTIL_H
#define LUAMCP_HTTP_UTIL_H

#include <stdbool.h>
#include <stddef.h>

/* Does an Accept header allow this media type (e.g. "text/event-stream")?
 * Handles lists, parameters, wildcards and q=0. NULL accepts nothing. */
bool http_accepts(const char *accept, const char *media_type);

/* Is this Content-Type application/json (parameters allowed)? */
bool http_is_json(const char *content_type);

/* The host name of a Host header ("example.com:8080", "[::1]:3000"), without
 * port or brackets, lower-cased. Returns false when malformed. */
bool http_host_name(const char *host_header, char *out, size_t out_len);

/* The host name of an Origin header ("http://localhost:3000"). Returns false
 * for "null", other schemes than http/https, or malformed values. */
bool http_origin_host(const char *origin, char *out, size_t out_len);

/* localhost, 127.0.0.1 or ::1 (as http_host_name returns it). Names are
 * compared whole: "127.evil.com" is not loopback. */
bool http_is_loopback_name(const char *name);

/* Is the listen address a loopback one ("127.0.0.1", "::1", "localhost")? */
bool http_is_loopback_address(const char *address);

/* Parse --http [HOST:]PORT[/PATH] or unix:SOCKET[:/PATH] (core/unix_url.h:
 * the socket into local, "" for TCP). host defaults to 127.0.0.1 (and stays
 * that with a socket: it is reached from this machine only) and path to
 * /mcp. Returns false with a message in err. */
bool http_parse_listen(const char *spec, char *host, size_t host_len, int *port, char *local, size_t local_len,
                       char *path, size_t path_len, char *err, size_t err_len);

/* A request target as the log shows it: the path, and the query's keys
 * with every value replaced by "[redacted]" ("/mcp?access_token=[redacted]"):
 * a value may be a token a client wrongly put there, or a session id, and
 * neither is ever logged. Cut to fit out_len (always terminated). */
void http_target_for_log(const char *target, char *out, size_t out_len);

/* Compare a given token with the secret in time that depends only on the
 * secret's length. */
bool http_secret_equal(const char *given, size_t given_len, const char *secret, size_t secret_len);

/* The worker a legacy session id names (--workers): K for an id
 * "[NODE.]wK-HEX" whose node part is this node's (none when node is NULL or
 * empty); 0 for anything else (an id of another node, of a single process,
 * or not an id of ours at all), which the worker that read it answers. */
int http_session_id_worker(const char *id, const char *node);

#endif
