/* fuzz_ws.c - libFuzzer target: the WebSocket frame path in process
 * (transport/http_ws.c over the real listener and connection code, with
 * libwslay reading the frames and the stub app of fuzz_app.c answering
 * the session), through a real loopback connection upgraded to the mcp
 * subprotocol.
 *
 * The first byte of an input picks how the rest is sent: even, as raw
 * bytes after the upgrade (unmasked and malformed frames, anything);
 * odd, as frames the harness masks, so the fuzzer reaches the session:
 * each is [opcode byte (FIN and RSV bits included)][length, 2 bytes LE]
 * [payload], sent with the mask bit set and a zero key. Whatever it is,
 * the server answers 101 and then only frames, and frees everything once
 * the client goes. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "transport/fuzz/fuzz_app.h"
#include "transport/http.h"
#include "transport/http_route.h"

enum { QUIET_TURNS = 3, MAX_TURNS = 4000 };

static uv_loop_t loop;
static server srv;
static http_server *h;

static const char UPGRADE[] = "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                              "Sec-WebSocket-Protocol: mcp\r\n\r\n";

static int fd = -1;
static char *out;
static size_t out_len, out_off;
static bool shut, saw_101;
static size_t received;

static bool turn(void) {
  bool moved = false;
  if (fd >= 0 && out_off < out_len) {
    ssize_t n = send(fd, out + out_off, out_len - out_off, MSG_NOSIGNAL);
    if (n > 0) {
      out_off += (size_t)n;
      moved = true;
    } else if (n < 0 && errno != EAGAIN && errno != EINPROGRESS && errno != ENOTCONN) {
      out_off = out_len;
    }
  } else if (fd >= 0 && !shut) {
    shutdown(fd, SHUT_WR);
    shut = true;
    moved = true;
  }
  uv_run(&loop, UV_RUN_NOWAIT);
  if (fd >= 0) {
    char in[16384];
    ssize_t n;
    while ((n = recv(fd, in, sizeof in, MSG_DONTWAIT)) > 0) {
      /* The upgrade is answered 101 before anything else. */
      if (!received && (n < 12 || memcmp(in, "HTTP/1.1 101", 12) != 0)) __builtin_trap();
      saw_101 = true;
      received += (size_t)n;
      moved = true;
    }
    if (n == 0) {
      close(fd);
      fd = -1;
      moved = true;
    }
  }
  return moved;
}

static void settle(void) {
  int quiet = 0;
  for (int i = 0; i < MAX_TURNS; i++) {
    if (turn()) {
      quiet = 0;
    } else if (++quiet >= QUIET_TURNS) {
      if (!fuzz_app_answer_one()) return;
      quiet = 0;
    }
  }
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  signal(SIGPIPE, SIG_IGN);
  uv_loop_init(&loop);
  server_options o;
  server_options_defaults(&o);
  o.max_message_bytes = 16 * 1024;
  server_init(&srv, &o, &FUZZ_APP, &loop);
  http_options ho;
  http_options_defaults(&ho);
  strcpy(ho.host, "127.0.0.1");
  ho.port = 0;
  ho.buffer_bytes = 64 * 1024;
  ho.families = HTTP_FAMILIES;
  char err[256];
  h = http_start(&loop, &srv, &ho, err, sizeof err);
  if (!h) __builtin_trap();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  out = malloc(sizeof UPGRADE + size * 2 + 16);
  memcpy(out, UPGRADE, sizeof UPGRADE - 1);
  out_len = sizeof UPGRADE - 1;
  if (!(data[0] & 1)) {
    memcpy(out + out_len, data + 1, size - 1);
    out_len += size - 1;
  } else {
    for (size_t i = 1; i + 3 <= size;) {
      size_t len = (size_t)data[i + 1] | (size_t)data[i + 2] << 8;
      if (len > size - i - 3) len = size - i - 3;
      out[out_len++] = (char)data[i];
      if (len < 126) {
        out[out_len++] = (char)(0x80 | len);
      } else {
        out[out_len++] = (char)(0x80 | 126);
        out[out_len++] = (char)(len >> 8);
        out[out_len++] = (char)(len & 0xff);
      }
      memset(out + out_len, 0, 4); /* a zero mask key: the payload goes as it is */
      out_len += 4;
      memcpy(out + out_len, data + i + 3, len);
      out_len += len;
      i += 3 + len;
    }
  }
  out_off = 0;
  shut = saw_101 = false;
  received = 0;
  fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons((uint16_t)http_bound_port(h))};
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, (struct sockaddr *)&addr, sizeof addr) < 0 && errno != EINPROGRESS) __builtin_trap();
  settle();
  if (fd >= 0) close(fd);
  fd = -1;
  free(out);
  for (int i = 0; i < MAX_TURNS && h->conn_count > 0; i++) uv_run(&loop, UV_RUN_NOWAIT);
  fuzz_app_reset();
  for (int i = 0; i < 8; i++) uv_run(&loop, UV_RUN_NOWAIT);
  return 0;
}
