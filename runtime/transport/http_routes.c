/* http_routes.c - the one table of HTTP endpoint families (see
 * http_route.h). The connection asks them in this order which one a
 * request is for: a family whose paths could be configured to overlap
 * another's comes first. Adding a family is its file and one line here.
 *
 * HTTP_EXTRA_ROUTE_FAMILIES adds families at build time without editing
 * this file: `make build/luamcp-routes EXTRA_ROUTES=dir/x_route.c` links
 * luamcp with x_family as the last line (spec/routes_spec.lua). */
#include "transport/http_route.h"

#ifndef HTTP_EXTRA_ROUTE_FAMILIES
#define HTTP_EXTRA_ROUTE_FAMILIES(X)
#endif

#define HTTP_ROUTE_FAMILIES(X)                                                                               \
  X(auth_metadata_family) /* /.well-known/oauth-protected-resource (http_auth.c) */                         \
  X(observe_family)       /* /healthz, /readyz, /metrics (http_observe.c) */                                \
  X(legacy_sse_family)    /* /sse and its /messages (http_legacy_sse.c) */                                  \
  X(ws_family)            /* GET /mcp with Upgrade: websocket (http_ws.c), before the MCP endpoint's GET */  \
  X(a2a_family)           /* /.well-known/agent-card.json and /a2a (http_a2a.c) */                           \
  X(streamable_family)    /* the MCP endpoint, /mcp (http_streamable.c) */                                  \
  HTTP_EXTRA_ROUTE_FAMILIES(X)

#define DECLARE(family) extern const http_route_family family;
#define LIST(family) &family,
HTTP_ROUTE_FAMILIES(DECLARE)
const http_route_family *const HTTP_FAMILIES[] = {HTTP_ROUTE_FAMILIES(LIST) NULL};
