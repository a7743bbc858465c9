/*
 * http_route.h - endpoint families: how a family of HTTP endpoints (the MCP
 * endpoint, legacy HTTP+SSE, the authorization metadata, health and
 * metrics, and the next ones) plugs into the connection, which names none
 * of them.
 *
 * The connection (http_conn.c) reads and parses a request, asks the
 * families of HTTP_FAMILIES (http_routes.c) in turn which of them it is
 * for, applies the rules every route shares (Host, Origin and CORS, the
 * --bearer-token-env token and OAuth, the body limit and the buffer
 * budget, requests that wait while a handler computes, the drain), and
 * only then calls the family's handler. A family calls down into the
 * connection (http.h's conn_* functions, or the few helpers below), never
 * the other way by name: adding one is adding its file and one line in
 * http_routes.c, as nginx adds a module or Redis a command.
 */
#ifndef LUAMCP_HTTP_ROUTE_H
#define LUAMCP_HTTP_ROUTE_H

#include "transport/http.h"

/* The shared rules a route is outside of (set by http_route_family.match). */
enum {
  /* Public: past the Host check, nothing more of its headers is checked
   * (no Origin rule, and so no CORS headers but the family's own; no
   * --bearer-token-env token; no OAuth; the body limit only as the body is
   * read). For what any page may read: the authorization metadata, health. */
  HTTP_ROUTE_PUBLIC = 1u << 0,
  /* It only reports, never acts or runs Lua: answered at once, even while
   * a handler computes, and while the server drains. */
  HTTP_ROUTE_REPORTS = 1u << 1,
};

/* One family of endpoints. Only match and handle are required. Owner: the
 * family's file (a static constant). */
typedef struct http_route_family {
  const char *name;
  /* The request's headers are read: which of the family's routes it is (a
   * number above 0, handed back to the other functions), or 0 when none.
   * *rules starts at 0: the HTTP_ROUTE_* rules the route is outside of.
   * The families are asked in table order; the first that claims a
   * request has it. */
  int (*match)(const http_conn *c, unsigned *rules);
  /* The methods it answers ("GET, POST"), for a family that leaves the rest
   * to the connection: a CORS preflight (OPTIONS) answered with them, any
   * other method 405. NULL: handle answers every method itself. */
  const char *methods;
  /* A complete request that passed the shared rules: answer it (now, or
   * later through the connection functions). */
  void (*handle)(http_conn *c, int route);
  /* The headers are read, before any rule is checked: take what the rules
   * need from the request (legacy SSE's session id in the query). */
  void (*headers_read)(http_conn *c, int route);
  /* The request arrived while a handler computes (server.nested_poll):
   * it waits for a later turn, but what must not wait (a cancellation) is
   * acted on now. True when that answered it. */
  bool (*urgent)(http_conn *c, int route);
  /* The server drains (http_drain): may the request still go on? NULL:
   * none may (503), unless the route only reports. */
  bool (*drain_admits)(http_conn *c, int route);

  /* A rule of the family's own for every route (nginx's access phase):
   * called for each request past the drain check that is not public and
   * not a CORS preflight (those carry no credentials). True when it may go
   * on; false when answered, or held (the request is handled again from
   * the top later). */
  bool (*access)(http_conn *c);
  /* The request is done with, or its connection is going: drop what
   * access kept for it. */
  void (*request_end)(http_conn *c);
  /* http_drain, for each open connection: answer what cannot wait for
   * the end of the drain (a request held by access). */
  void (*conn_drain)(http_conn *c);

  /* For a family with state beyond one response (sessions, streams): */
  void (*server_start)(http_server *h);
  /* http_stop, before the connections close. */
  void (*server_stop)(http_server *h);
  /* http_drain: end the standing work that is a client waiting, not work. */
  void (*server_drain)(http_server *h);
  /* Once a second, never under a computing handler. */
  void (*sweep)(http_server *h, uint64_t now);
  /* Over the buffer budget: drop the oldest thing that may be dropped and
   * return true, or false when it keeps nothing droppable. */
  bool (*budget_drop)(http_server *h);
  /* The connection is closing (perhaps under a computing handler): let go
   * of it. */
  void (*conn_gone)(http_conn *c);
  /* The client half-closed while a response is in progress: send it
   * something harmless on that response (see input_ended in http_conn.c)
   * and return true, or false when the response is not the family's. */
  bool (*probe)(http_conn *c);
  /* A family that takes connections over (a WebSocket, after its 101:
   * http_route_upgrade): the bytes read since. Returns how many it used;
   * the rest stays buffered (reading stops past the held-input limit) and
   * is offered again with the next bytes, or after conn_defer. */
  size_t (*upgraded_input)(http_conn *c, const char *data, size_t len);
} http_route_family;

/* luamcp's families, NULL-terminated (http_routes.c): the program hands
 * them to http_start (http_options.families); no transport file names it. */
extern const http_route_family *const HTTP_FAMILIES[];

/* ---- For families: the request and its answer ---------------------------- */

/* Is the request's path (without its query) exactly this one? */
bool http_route_path_is(const http_conn *c, const char *path);
/* The request's body (len set; never NULL). */
const char *http_route_body(const http_conn *c, size_t *len);
/* A whole response (a body of len bytes, or none), and the request is done. */
void http_route_answer(http_conn *c, int status, const char *content_type, const char *body, size_t len);

/* The connection is the family's from now on (its 101 is written): no
 * more HTTP requests are parsed on it, no HTTP timeout or the
 * --max-connections cap closes it, and what it reads goes to
 * upgraded_input (first, on the next turn, the bytes already read after
 * the request). conn_write still writes, within the connection's share
 * of the buffer budget; conn_close ends it (conn_gone tells the family). */
void http_route_upgrade(http_conn *c);
/* An upgraded connection is done: shut down once every byte is written
 * (a WebSocket's close frame), then close. */
void http_route_finish(http_conn *c);
/* What an upgraded connection's family holds for it grew (or, negative,
 * shrank) by delta bytes: charged to the buffer budget. */
void http_route_hold(http_conn *c, long delta);

#endif
