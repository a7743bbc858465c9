/*
 * ui_http.h - the web inspector's listener (luamcp dev --ui, luamcp
 * inspect --ui): a page built into the binary, and the page's way to the
 * wire. On loopback only, behind a random token in the page's address (as
 * Jupyter does); docs/inspector.md is the contract with the page:
 *
 *   GET  /, /NAME        the page's files (runtime/ui/), no token: they hold no data
 *   GET  /events         server-sent events: hello, the history, live, then each new event
 *   GET  /info           the hello object
 *   POST /send           one message (or a batch) for the page's own connection
 *   POST /reset          a fresh connection for the page
 *
 * Every request needs a Host that is a loopback name with this port (no
 * DNS rebinding), and an Origin, when it has one, that is the page's own;
 * all but the files need the token (?token= or Authorization: Bearer).
 *
 * What the page sees of the wire is a wire_log (core/wire_log.h) the
 * caller fills; this file sends it. Nothing here knows what is inspected:
 * the caller's hooks do the page's sending.
 */
#ifndef LUAMCP_UI_HTTP_H
#define LUAMCP_UI_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "core/buf.h"
#include "core/wire_log.h"

/* A file of the page, built into the binary (build/embedded_ui.c, made
 * from runtime/ui/ by tools/embed.c). */
typedef struct ui_file {
  const char *name; /* "index.html", "timeline.js" */
  const unsigned char *data;
  size_t len;
} ui_file;
extern const ui_file EMBEDDED_UI[];
extern const size_t EMBEDDED_UI_COUNT;

/* What the page does through luamcp. Owner: the caller, for the life of
 * the listener. */
typedef struct ui_hooks {
  /* The hello object's fields ("\"mode\":\"dev\",..."), appended to out. */
  void (*describe)(void *arg, buf *out);
  /* The page's message (or batch), for its own connection. False with
   * the reason in why (answered 503). */
  bool (*send)(void *arg, const char *json, size_t len, buf *why);
  /* A fresh connection for the page. False with the reason in why. */
  bool (*reset)(void *arg, buf *why);
  void *arg;
} ui_hooks;

typedef struct ui_server ui_server;

/* Listen on 127.0.0.1:port (0: a free one) and serve log to the pages.
 * max_body is the largest message a page may send. NULL with the reason in
 * err. */
ui_server *ui_start(uv_loop_t *loop, int port, wire_log *log, size_t max_body, const ui_hooks *hooks, char *err,
                    size_t err_len);
/* The page's address, token included ("http://127.0.0.1:PORT/?token=..."). */
const char *ui_address(const ui_server *u);
/* The log has new events: send them to the pages (batched, see
 * UI_FLUSH_INTERVAL_MS). */
void ui_notify(ui_server *u);
/* Stop listening and close every page's connection; freed once the
 * handles have closed. */
void ui_stop(ui_server *u);

#endif
