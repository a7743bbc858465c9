/* protocol.c - the protocol version table. See protocol.h. */
#include "core/protocol.h"

#include <stdio.h>
#include <string.h>

const protocol_version PROTOCOL_VERSIONS[] = {
    {.name = "2024-11-05", .era = PROTOCOL_ERA_INITIALIZE},
    {.name = "2025-03-26", .era = PROTOCOL_ERA_INITIALIZE, .batches = true},
    {.name = "2025-06-18", .era = PROTOCOL_ERA_INITIALIZE, .structured_output = true, .elicitation = true},
    {.name = "2025-11-25",
     .era = PROTOCOL_ERA_INITIALIZE,
     .tool_errors_as_results = true,
     .structured_output = true,
     .elicitation = true,
     .url_elicitation = true,
     .sse_priming = true},
    {.name = "2026-07-28",
     .era = PROTOCOL_ERA_MODERN,
     .tool_errors_as_results = true,
     .structured_output = true,
     .elicitation = true,
     .url_elicitation = true,
     .input_required = true,
     .not_found_invalid_params = true},
};
const size_t PROTOCOL_VERSION_COUNT = sizeof PROTOCOL_VERSIONS / sizeof PROTOCOL_VERSIONS[0];

const protocol_version *protocol_find(const char *name, size_t len) {
  for (size_t i = 0; i < PROTOCOL_VERSION_COUNT; i++) {
    const char *n = PROTOCOL_VERSIONS[i].name;
    if (strlen(n) == len && memcmp(n, name, len) == 0) return &PROTOCOL_VERSIONS[i];
  }
  return NULL;
}

const protocol_version *protocol_preferred(void) { return protocol_find("2025-11-25", 10); }

/* Streamable HTTP (2025-06-18 onwards): "the server SHOULD assume protocol
 * version 2025-03-26" when the header is missing. */
const protocol_version *protocol_http_default(void) { return protocol_find("2025-03-26", 10); }

const char *protocol_supported_json(void) {
  static char text[256];
  if (!text[0]) {
    size_t n = 0;
    text[n++] = '[';
    for (size_t i = 0; i < PROTOCOL_VERSION_COUNT; i++) {
      if (PROTOCOL_VERSIONS[i].era != PROTOCOL_ERA_MODERN) continue;
      n += (size_t)snprintf(text + n, sizeof text - n, "%s\"%s\"", n > 1 ? "," : "", PROTOCOL_VERSIONS[i].name);
    }
    snprintf(text + n, sizeof text - n, "]");
  }
  return text;
}

bool protocol_is_envelope_key(const char *key, size_t len) {
  static const char *const envelope[] = {MCP_META_PROTOCOL_VERSION, MCP_META_CLIENT_CAPABILITIES,
                                         MCP_META_CLIENT_INFO, MCP_META_LOG_LEVEL};
  for (size_t i = 0; i < sizeof envelope / sizeof *envelope; i++)
    if (strlen(envelope[i]) == len && memcmp(envelope[i], key, len) == 0) return true;
  return false;
}
