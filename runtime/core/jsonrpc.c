/* jsonrpc.c - message classification, ids and error objects. See jsonrpc.h. */
#include "core/jsonrpc.h"

#include <stdlib.h>
#include <string.h>

bool jsonrpc_id_valid(const json_value *v, const char *src) {
  if (v->type == JSON_STRING || v->type == JSON_INTEGER) return true;
  if (v->type != JSON_FLOAT) return false;
  /* Integers beyond int64 parse as doubles; they are still integer ids if
   * written without fraction or exponent. "-0" is not an integer. */
  const char *p = src + v->src_off;
  for (uint32_t i = 0; i < v->src_len; i++)
    if (p[i] == '.' || p[i] == 'e' || p[i] == 'E') return false;
  return !(v->src_len == 2 && p[0] == '-' && p[1] == '0');
}

static void set_invalid(jsonrpc_message *m, const char *why) {
  m->kind = JSONRPC_INVALID;
  m->error_code = JSONRPC_INVALID_REQUEST;
  m->error_message = why;
}

void jsonrpc_classify(const json_value *v, const char *src, jsonrpc_message *m) {
  memset(m, 0, sizeof *m);
  if (v->type != JSON_OBJECT) return set_invalid(m, "Invalid Request: a message must be a JSON object");
  /* One pass over the members rather than six lookups (this runs for
   * every message). A later member replaces an earlier one of the same
   * key, as json_object_get finds the last. */
  const json_value *version = NULL, *id = NULL, *method = NULL, *params = NULL, *result = NULL, *error = NULL;
  for (uint32_t i = 0; i < v->len; i++) {
    const json_member *mb = &v->u.members[i];
#define KEY_IS(literal) (mb->key_len == sizeof(literal) - 1 && memcmp(mb->key, literal, sizeof(literal) - 1) == 0)
    if (KEY_IS("jsonrpc")) version = &mb->value;
    else if (KEY_IS("id")) id = &mb->value;
    else if (KEY_IS("method")) method = &mb->value;
    else if (KEY_IS("params")) params = &mb->value;
    else if (KEY_IS("result")) result = &mb->value;
    else if (KEY_IS("error")) error = &mb->value;
#undef KEY_IS
  }
  if (id && jsonrpc_id_valid(id, src)) m->id = id;
  if (!version || version->type != JSON_STRING || version->len != 3 || memcmp(version->u.string, "2.0", 3) != 0)
    return set_invalid(m, "Invalid Request: \"jsonrpc\" must be \"2.0\"");
  if (method) {
    if (method->type != JSON_STRING) return set_invalid(m, "Invalid Request: \"method\" must be a string");
    if (result || error) return set_invalid(m, "Invalid Request: a request cannot carry \"result\" or \"error\"");
    if (params && params->type != JSON_OBJECT && params->type != JSON_ARRAY)
      return set_invalid(m, "Invalid Request: \"params\" must be an object or an array");
    m->method = method->u.string;
    m->method_len = method->len;
    m->params = params;
    if (!id) {
      m->kind = JSONRPC_NOTIFICATION;
      return;
    }
    if (id->type == JSON_NULL) return set_invalid(m, "Invalid Request: \"id\" must not be null");
    if (!m->id) return set_invalid(m, "Invalid Request: \"id\" must be a string or an integer");
    m->kind = JSONRPC_REQUEST;
    return;
  }
  if (id && (result != NULL) != (error != NULL)) {
    if (error && error->type != JSON_OBJECT) return set_invalid(m, "Invalid Request: \"error\" must be an object");
    m->kind = JSONRPC_RESPONSE;
    m->result = result;
    m->error = error;
    return;
  }
  set_invalid(m, "Invalid Request: a message needs \"method\", or \"id\" with \"result\" or \"error\"");
}

const char *jsonrpc_id_text(const json_value *id, const char *src, buf *tmp, size_t *len) {
  if (!json_string_in_place(id, src)) {
    *len = id->src_len;
    return src + id->src_off;
  }
  buf_clear(tmp);
  json_write_string(tmp, id->u.string, id->len);
  *len = tmp->len;
  return tmp->data;
}

void jsonrpc_id_copy(jsonrpc_id *out, const json_value *id, const char *src) {
  buf tmp = BUF_INIT;
  const char *text = jsonrpc_id_text(id, src, &tmp, &out->raw_len);
  bool is_string = id->type == JSON_STRING;
  out->is_integer = id->type == JSON_INTEGER;
  out->integer = out->is_integer ? id->u.integer : 0;
  /* A string's key is its value behind a '"' (never equal to a number's);
   * an integer's text is canonical: JSON has no leading zeros or '+'. */
  out->key_len = is_string ? id->len + 1 : out->raw_len;
  /* Both strings in one block (one malloc per call): raw owns it. */
  out->raw = malloc(out->raw_len + 1 + out->key_len + 1);
  out->key = out->raw + out->raw_len + 1;
  memcpy(out->raw, text, out->raw_len);
  out->raw[out->raw_len] = '\0';
  buf_free(&tmp);
  if (is_string) {
    out->key[0] = '"';
    memcpy(out->key + 1, id->u.string, id->len);
  } else {
    memcpy(out->key, out->raw, out->raw_len);
  }
  out->key[out->key_len] = '\0';
}

bool jsonrpc_id_matches(const jsonrpc_id *id, const json_value *v) {
  if (!id->key) return false;
  if (v->type == JSON_STRING)
    return id->key[0] == '"' && id->key_len == v->len + 1u && memcmp(id->key + 1, v->u.string, v->len) == 0;
  if (v->type == JSON_INTEGER) return id->is_integer && id->integer == v->u.integer;
  return false;
}

void jsonrpc_id_free(jsonrpc_id *id) {
  free(id->raw); /* key is in the same block (jsonrpc_id_copy) */
  id->raw = id->key = NULL;
  id->raw_len = id->key_len = 0;
}

const char *jsonrpc_code_message(int code) {
  switch (code) {
    case JSONRPC_PARSE_ERROR: return "Parse error";
    case JSONRPC_INVALID_REQUEST: return "Invalid Request";
    case JSONRPC_METHOD_NOT_FOUND: return "Method not found";
    case JSONRPC_INVALID_PARAMS: return "Invalid params";
    case JSONRPC_INTERNAL_ERROR: return "Internal error";
    case MCP_RESOURCE_NOT_FOUND: return "Resource not found";
    default: return "Server error";
  }
}

static void write_id(buf *out, const char *id_raw, size_t id_len) {
  if (id_raw) buf_append(out, id_raw, id_len);
  else buf_puts(out, "null");
}

void jsonrpc_write_error(buf *out, const char *id_raw, size_t id_len, int code, const char *message,
                         const char *data_json, size_t data_len) {
  buf_puts(out, "{\"jsonrpc\":\"2.0\",\"id\":");
  write_id(out, id_raw, id_len);
  buf_puts(out, ",\"error\":");
  jsonrpc_write_error_object(out, code, message, data_json, data_len);
  buf_putc(out, '}');
}

void jsonrpc_write_error_object(buf *out, int code, const char *message, const char *data_json, size_t data_len) {
  buf_printf(out, "{\"code\":%d,\"message\":", code);
  if (!message) message = jsonrpc_code_message(code);
  json_write_string(out, message, strlen(message));
  if (data_json) {
    buf_puts(out, ",\"data\":");
    buf_append(out, data_json, data_len);
  }
  buf_putc(out, '}');
}

void jsonrpc_write_result_start(buf *out, const char *id_raw, size_t id_len) {
  buf_puts(out, "{\"jsonrpc\":\"2.0\",\"id\":");
  write_id(out, id_raw, id_len);
  buf_puts(out, ",\"result\":");
}

void jsonrpc_write_result_end(buf *out) { buf_putc(out, '}'); }

void jsonrpc_write_notification(buf *out, const char *method, const char *params_json, size_t params_len) {
  buf_puts(out, "{\"jsonrpc\":\"2.0\",\"method\":");
  json_write_string(out, method, strlen(method));
  if (params_json) {
    buf_puts(out, ",\"params\":");
    buf_append(out, params_json, params_len);
  }
  buf_putc(out, '}');
}

void jsonrpc_write_request(buf *out, long long id, const char *method, const char *params_json, size_t params_len) {
  buf_printf(out, "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":", id);
  json_write_string(out, method, strlen(method));
  if (params_json) {
    buf_puts(out, ",\"params\":");
    buf_append(out, params_json, params_len);
  }
  buf_putc(out, '}');
}
