/*
 * luamcp_limits.h - every limit and default of the runtime, in one place.
 *
 * A limit that a user can change has a command-line flag; the value here is
 * its default. The README's "Limits" table is written from this file.
 */
#ifndef LUAMCP_LIMITS_H
#define LUAMCP_LIMITS_H

/* Largest JSON-RPC message accepted on any transport (--max-message-bytes).
 * A stdio line or an HTTP body over this is refused without buffering it. */
#define DEFAULT_MAX_MESSAGE_BYTES (4u * 1024u * 1024u)

/* Deepest nesting of arrays and objects the JSON parser accepts. Deeper
 * documents are rejected with -32700: real MCP traffic nests a few levels,
 * and a bound keeps the recursive parser and the Lua conversion safe. */
#define MAX_JSON_DEPTH 128

/* Deepest nesting the Lua-to-JSON encoder follows before it reports a
 * cycle or runaway structure as an error. */
#define MAX_ENCODE_DEPTH 128

/* Default number of items per page of tools/list, resources/list, ... 0
 * means "everything in one page" (--page-size). */
#define DEFAULT_PAGE_SIZE 0

/* completion/complete answers at most this many values (spec: 100). */
#define MAX_COMPLETION_VALUES 100

/* How long the server waits for in-flight work to stop after stdin ends. */
#define SHUTDOWN_GRACE_MS 1500

/* Longest a reply from the client (sampling, elicitation, roots) is
 * awaited before the waiting handler gets an error (--client-timeout). */
#define DEFAULT_CLIENT_TIMEOUT_MS 60000

#endif
