/*
 * wslay.h - WebSocket framing (RFC 6455) from Debian's libwslay: frames
 * read and written, masking, ping and pong, the close handshake, a
 * message's size limit (1009) and its text's UTF-8 (1007), protocol
 * errors (1002). The server's WebSocket connections (transport/http_ws.c)
 * and the client's (app/ws_client.c) use it; nobody frames by hand.
 *
 * libwslay is a shared library (Debian ships no static one), loaded on
 * first use like libcurl (dynlib.h), so that luamcp runs where it is
 * missing and only WebSockets say what they need: wslay_posix.c loads
 * libwslay.so.1; a program that cannot load shared libraries (a fully
 * static one), or Windows (wslay_windows.c), has none.
 */
#ifndef LUAMCP_OS_WSLAY_H
#define LUAMCP_OS_WSLAY_H

#include <stddef.h>
#include <wslay/wslay.h>

/* The functions of libwslay luamcp calls, under their own names. */
#define OS_WSLAY_FUNCTIONS(X)                                                                                     \
  X(wslay_event_context_server_init)                                                                             \
  X(wslay_event_context_client_init)                                                                             \
  X(wslay_event_context_free)                                                                                    \
  X(wslay_event_config_set_max_recv_msg_length)                                                                  \
  X(wslay_event_recv)                                                                                            \
  X(wslay_event_send)                                                                                            \
  X(wslay_event_queue_msg)                                                                                       \
  X(wslay_event_queue_close)                                                                                     \
  X(wslay_event_set_error)                                                                                       \
  X(wslay_event_want_read)                                                                                       \
  X(wslay_event_want_write)                                                                                      \
  X(wslay_event_get_close_sent)                                                                                  \
  X(wslay_event_get_close_received)                                                                              \
  X(wslay_event_get_status_code_received)

typedef struct os_wslay_api {
#define OS_WSLAY_FIELD(name) __typeof__(&name) name;
  OS_WSLAY_FUNCTIONS(OS_WSLAY_FIELD)
#undef OS_WSLAY_FIELD
} os_wslay_api;

/* libwslay's functions, loaded on the first call (and kept for the life of
 * the process); NULL when it cannot be had, with why (a sentence that
 * says what to install) in why. */
const os_wslay_api *os_wslay(char *why, size_t why_len);

#endif
