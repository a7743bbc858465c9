/*
 * protocol.h - the MCP protocol versions we speak and what differs between
 * them. This table is the one place that knows; everything else asks it.
 *
 * The version is a property of each request (a session's negotiated version
 * in the initialize era, the request's own _meta in the 2026-07-28 era), so
 * code receives a protocol_version pointer with the request, never a global.
 */
#ifndef LUAMCP_PROTOCOL_H
#define LUAMCP_PROTOCOL_H

#include <stdbool.h>
#include <stddef.h>

typedef enum protocol_era {
  PROTOCOL_ERA_INITIALIZE, /* initialize handshake + sessions (2024-11-05 .. 2025-11-25) */
  PROTOCOL_ERA_MODERN,     /* sessionless, version in every request (2026-07-28) */
} protocol_era;

typedef struct protocol_version {
  const char *name;
  protocol_era era;
  bool batches;                /* JSON-RPC batches (only 2025-03-26 allowed them) */
  bool tool_errors_as_results; /* invalid tool input is an isError result (SEP-1303) */
  bool structured_output;      /* outputSchema / structuredContent */
  bool elicitation;            /* elicitation/create */
  bool url_elicitation;        /* elicitation in URL mode */
  bool sse_priming;            /* SSE streams start with a priming event */
  /* 2026-07-28 onwards (the modern era): */
  bool input_required;         /* the server asks the client through input_required results (MRTR),
                                  never with a request of its own */
  bool not_found_invalid_params; /* resource not found is -32602 (SEP-2164), not -32002 */
} protocol_version;

/* Versions in ascending order; the last initialize-era one is what we answer
 * an initialize with when asked for one we do not speak. */
extern const protocol_version PROTOCOL_VERSIONS[];
extern const size_t PROTOCOL_VERSION_COUNT;

const protocol_version *protocol_find(const char *name, size_t len);
/* The version we answer an initialize with when the client asks for one we
 * do not speak. */
const protocol_version *protocol_preferred(void);
/* What a Streamable HTTP request without MCP-Protocol-Version means. */
const protocol_version *protocol_http_default(void);
/* The versions a request may name in its _meta, as a JSON array of
 * strings (server/discover's supportedVersions and -32022's
 * data.supported). The initialize-era versions are not among them: those
 * are negotiated by initialize. */
const char *protocol_supported_json(void);

/* The _meta keys of the 2026-07-28 era. A modern request's envelope is the
 * first four: the runtime reads them into the call, and handlers see them
 * as ctx.protocol_version, ctx.capabilities, ctx.client and the log level,
 * not in ctx.meta. */
#define MCP_META_PROTOCOL_VERSION "io.modelcontextprotocol/protocolVersion"
#define MCP_META_CLIENT_CAPABILITIES "io.modelcontextprotocol/clientCapabilities"
#define MCP_META_CLIENT_INFO "io.modelcontextprotocol/clientInfo"
#define MCP_META_LOG_LEVEL "io.modelcontextprotocol/logLevel"
#define MCP_META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
#define MCP_META_SUBSCRIPTION_ID "io.modelcontextprotocol/subscriptionId"

/* Is this _meta key one of the request envelope's four? */
bool protocol_is_envelope_key(const char *key, size_t len);

#endif
