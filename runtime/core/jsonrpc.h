/*
 * jsonrpc.h - JSON-RPC 2.0 message shapes and the one place error objects
 * are written.
 *
 * Ids are strings or integers. We echo an id exactly as its bytes arrived
 * (so 9007199254740993 and "a\"b" come back untouched) and compare ids by a
 * canonical key (so a cancellation naming "\u0041" finds request "A").
 */
#ifndef LUAMCP_JSONRPC_H
#define LUAMCP_JSONRPC_H

#include <stdbool.h>
#include <stddef.h>

#include "core/buf.h"
#include "core/json.h"

enum {
  JSONRPC_PARSE_ERROR = -32700,
  JSONRPC_INVALID_REQUEST = -32600,
  JSONRPC_METHOD_NOT_FOUND = -32601,
  JSONRPC_INVALID_PARAMS = -32602,
  JSONRPC_INTERNAL_ERROR = -32603,
  MCP_RESOURCE_NOT_FOUND = -32002,
  MCP_URL_ELICITATION_REQUIRED = -32042,
  /* 2026-07-28 */
  MCP_HEADER_MISMATCH = -32020,        /* an Mcp-* header disagrees with the body */
  MCP_MISSING_CAPABILITY = -32021,     /* the request needs a client capability it did not declare */
  MCP_UNSUPPORTED_VERSION = -32022,    /* data: {supported, requested} */
  MCP_SERVER_BUSY = -32000,            /* a budget is full: try again later (HTTP: 503) */
  /* The caller's token lacks a scope the tool, resource, template or prompt
   * requires (call_fail_scope). HTTP: 403 with WWW-Authenticate
   * error="insufficient_scope", scope="..." so the client can step up.
   * data: {"requiredScopes": [...]}. */
  MCP_INSUFFICIENT_SCOPE = -32003,
};

typedef enum jsonrpc_kind {
  JSONRPC_REQUEST,
  JSONRPC_NOTIFICATION,
  JSONRPC_RESPONSE, /* a reply to a request we sent */
  JSONRPC_INVALID,  /* answer with error_code/error_message */
} jsonrpc_kind;

/* A classified message. Points into the json_doc it came from. */
typedef struct jsonrpc_message {
  jsonrpc_kind kind;
  const json_value *id;     /* a valid id, or NULL */
  const char *method;       /* NUL-terminated (from the doc) */
  size_t method_len;
  const json_value *params; /* object or array, or NULL when absent */
  const json_value *result; /* responses: exactly one of result/error */
  const json_value *error;
  int error_code;           /* JSONRPC_INVALID: what to answer */
  const char *error_message;
} jsonrpc_message;

/* Classify a parsed message; src is the text it was parsed from. */
void jsonrpc_classify(const json_value *v, const char *src, jsonrpc_message *m);

/* An id as it travels: its exact source bytes, and a key for comparing.
 * Owner: whoever holds it; jsonrpc_id_free releases both strings (one
 * block: key points inside raw's allocation). */
typedef struct jsonrpc_id {
  char *raw;
  size_t raw_len;
  char *key;
  size_t key_len;
  bool is_integer; /* an int64 id, compared as a number */
  int64_t integer;
} jsonrpc_id;

/* Copy an id out of a doc. src is the text the doc was parsed from. */
void jsonrpc_id_copy(jsonrpc_id *out, const json_value *id, const char *src);
/* The id's text as the client wrote it in src; or, for a long string id
 * decoded where it was (json_parse_in_place: that text is gone), the same
 * value written again into tmp. */
const char *jsonrpc_id_text(const json_value *id, const char *src, buf *tmp, size_t *len);
bool jsonrpc_id_matches(const jsonrpc_id *id, const json_value *v);
void jsonrpc_id_free(jsonrpc_id *id);
/* Is v a valid id value (string, or a number written without fraction or
 * exponent)? */
bool jsonrpc_id_valid(const json_value *v, const char *src);

/* Writers. id_raw NULL means "id": null. data_json, when not NULL, is a
 * complete JSON value placed as error.data. */
void jsonrpc_write_error(buf *out, const char *id_raw, size_t id_len, int code, const char *message,
                         const char *data_json, size_t data_len);
/* Writes {"jsonrpc":"2.0","id":<id>,"result": ; the caller writes the result
 * and then jsonrpc_write_result_end. */
/* Just the error object {code, message[, data]}: a failed MCP task carries
 * it (message NULL: the code's standard message). */
void jsonrpc_write_error_object(buf *out, int code, const char *message, const char *data_json, size_t data_len);
void jsonrpc_write_result_start(buf *out, const char *id_raw, size_t id_len);
void jsonrpc_write_result_end(buf *out);
/* {"jsonrpc":"2.0","method":<method>,"params":<params_json>} (params optional). */
void jsonrpc_write_notification(buf *out, const char *method, const char *params_json, size_t params_len);
/* {"jsonrpc":"2.0","id":<id>,"method":...,"params":...} for requests we send. */
void jsonrpc_write_request(buf *out, long long id, const char *method, const char *params_json, size_t params_len);

/* The message JSON-RPC 2.0 gives each standard code. */
const char *jsonrpc_code_message(int code);

#endif
