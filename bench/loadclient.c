/*
 * loadclient: a raw JSON-RPC load generator for MCP servers (stdio and
 * Streamable HTTP). Plain C11 + POSIX (Linux: sched_setaffinity, /proc).
 *
 * It speaks the wire protocol itself -- no SDK -- so that the client is never
 * the bottleneck: initialize (protocolVersion 2025-11-25) +
 * notifications/initialized, then tools/call "add" {"a":i,"b":j}, checking
 * every response's id and that result.content[0].text is exactly the decimal
 * sum. See bench/README.md for the full description; `loadclient --help`.
 *
 * Output: one JSON line on stdout (machine-readable) and one human line on
 * stderr. Exit status: 0 all responses right, 1 a wrong or missing response
 * (or the server died), 2 usage or set-up error.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "payload.h"

#define MAXWIN 1024
#define MAXCONN 1024
#define MAX_ERR_PRINT 10

/* ------------------------------------------------------------------ util */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("loadclient: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(2);
}

static void *xrealloc(void *p, size_t n) {
  void *q = realloc(p, n ? n : 1);
  if (!q) die("out of memory");
  return q;
}

typedef struct {
  char *p;
  size_t len, cap, off; /* off: consumed prefix (read buffers) */
} buf;

static void buf_reserve(buf *b, size_t extra) {
  if (b->off && b->off == b->len) b->off = b->len = 0;
  if (b->len + extra <= b->cap) return;
  if (b->off) { /* compact first */
    memmove(b->p, b->p + b->off, b->len - b->off);
    b->len -= b->off;
    b->off = 0;
    if (b->len + extra <= b->cap) return;
  }
  size_t nc = b->cap ? b->cap : 4096;
  while (nc < b->len + extra) nc *= 2;
  b->p = xrealloc(b->p, nc);
  b->cap = nc;
}
static void buf_add(buf *b, const void *d, size_t n) {
  buf_reserve(b, n + 1);
  memcpy(b->p + b->len, d, n);
  b->len += n;
  b->p[b->len] = 0;
}
static void buf_printf(buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  buf_reserve(b, (size_t)n + 1);
  va_start(ap, fmt);
  vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}
static void buf_clear(buf *b) { b->len = b->off = 0; }
static size_t buf_avail(const buf *b) { return b->len - b->off; }
static char *buf_data(buf *b) { return b->p + b->off; }

/* ------------------------------------------------------ minimal JSON DOM */

enum { J_OBJ = 1, J_ARR, J_STR, J_NUM, J_TRUE, J_FALSE, J_NULL };
typedef struct {
  int type;
  int start, end; /* byte span; for strings: inside the quotes */
  int next;       /* index of the token after this value and its children */
  int size;       /* members (objects: pairs) or elements */
} jtok;
typedef struct {
  const char *s;
  int n, pos;
  jtok *t;
  int nt, cap;
  int depth;
} jdoc;

static int jnew(jdoc *d, int type, int start) {
  if (d->nt == d->cap) {
    d->cap = d->cap ? d->cap * 2 : 64;
    d->t = xrealloc(d->t, (size_t)d->cap * sizeof(jtok));
  }
  jtok *t = &d->t[d->nt];
  t->type = type;
  t->start = start;
  t->end = start;
  t->next = d->nt + 1;
  t->size = 0;
  return d->nt++;
}
static void jws(jdoc *d) {
  while (d->pos < d->n) {
    char c = d->s[d->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') d->pos++;
    else break;
  }
}
static int jvalue(jdoc *d);
static int jstring(jdoc *d) {
  /* at '"' */
  int i = jnew(d, J_STR, d->pos + 1);
  d->pos++;
  while (d->pos < d->n) {
    unsigned char c = (unsigned char)d->s[d->pos];
    if (c == '"') {
      d->t[i].end = d->pos;
      d->pos++;
      return i;
    }
    if (c < 0x20) return -1;
    if (c == '\\') {
      d->pos++;
      if (d->pos >= d->n) return -1;
      char e = d->s[d->pos];
      if (e == 'u') {
        for (int k = 1; k <= 4; k++)
          if (d->pos + k >= d->n || !isxdigit((unsigned char)d->s[d->pos + k])) return -1;
        d->pos += 4;
      } else if (!strchr("\"\\/bfnrt", e)) return -1;
    }
    d->pos++;
  }
  return -1;
}
static int jvalue(jdoc *d) {
  jws(d);
  if (d->pos >= d->n) return -1;
  if (++d->depth > 64) return -1;
  char c = d->s[d->pos];
  int i;
  if (c == '{' || c == '[') {
    int isobj = c == '{';
    i = jnew(d, isobj ? J_OBJ : J_ARR, d->pos);
    d->pos++;
    jws(d);
    if (d->pos < d->n && d->s[d->pos] == (isobj ? '}' : ']')) {
      d->pos++;
    } else {
      for (;;) {
        if (isobj) {
          jws(d);
          if (d->pos >= d->n || d->s[d->pos] != '"' || jstring(d) < 0) return -1;
          jws(d);
          if (d->pos >= d->n || d->s[d->pos] != ':') return -1;
          d->pos++;
        }
        if (jvalue(d) < 0) return -1;
        d->t[i].size++;
        jws(d);
        if (d->pos >= d->n) return -1;
        if (d->s[d->pos] == ',') { d->pos++; continue; }
        if (d->s[d->pos] == (isobj ? '}' : ']')) { d->pos++; break; }
        return -1;
      }
    }
    d->t[i].end = d->pos;
  } else if (c == '"') {
    i = jstring(d);
    if (i < 0) return -1;
  } else if (c == '-' || (c >= '0' && c <= '9')) {
    i = jnew(d, J_NUM, d->pos);
    int p = d->pos;
    if (d->s[p] == '-') p++;
    if (p >= d->n || !isdigit((unsigned char)d->s[p])) return -1;
    if (d->s[p] == '0') p++;
    else while (p < d->n && isdigit((unsigned char)d->s[p])) p++;
    if (p < d->n && d->s[p] == '.') {
      p++;
      if (p >= d->n || !isdigit((unsigned char)d->s[p])) return -1;
      while (p < d->n && isdigit((unsigned char)d->s[p])) p++;
    }
    if (p < d->n && (d->s[p] == 'e' || d->s[p] == 'E')) {
      p++;
      if (p < d->n && (d->s[p] == '+' || d->s[p] == '-')) p++;
      if (p >= d->n || !isdigit((unsigned char)d->s[p])) return -1;
      while (p < d->n && isdigit((unsigned char)d->s[p])) p++;
    }
    d->pos = p;
    d->t[i].end = p;
  } else {
    static const struct { const char *w; int t; } lit[] = {
        {"true", J_TRUE}, {"false", J_FALSE}, {"null", J_NULL}};
    i = -1;
    for (int k = 0; k < 3; k++) {
      size_t l = strlen(lit[k].w);
      if ((size_t)(d->n - d->pos) >= l && !memcmp(d->s + d->pos, lit[k].w, l)) {
        i = jnew(d, lit[k].t, d->pos);
        d->pos += (int)l;
        d->t[i].end = d->pos;
        break;
      }
    }
    if (i < 0) return -1;
  }
  d->t[i].next = d->nt;
  d->depth--;
  return i;
}
/* Parses one complete JSON text; 0 on success. */
static int jparse(jdoc *d, const char *s, size_t n) {
  d->s = s;
  d->n = (int)n;
  d->pos = 0;
  d->nt = 0;
  d->depth = 0;
  if (n > INT_MAX / 2) return -1;
  if (jvalue(d) < 0) return -1;
  jws(d);
  return d->pos == d->n ? 0 : -1;
}
/* String token equals C literal (no escapes in either: exact bytes). */
static bool jtok_is(const jdoc *d, int i, const char *lit) {
  if (i < 0 || d->t[i].type != J_STR) return false;
  size_t l = strlen(lit);
  return (size_t)(d->t[i].end - d->t[i].start) == l && !memcmp(d->s + d->t[i].start, lit, l);
}
static int jget(const jdoc *d, int obj, const char *key) {
  if (obj < 0 || d->t[obj].type != J_OBJ) return -1;
  int k = obj + 1;
  for (int m = 0; m < d->t[obj].size; m++) {
    int v = k + 1;
    if (jtok_is(d, k, key)) return v;
    k = d->t[v].next;
  }
  return -1;
}
static int jat(const jdoc *d, int arr, int idx) {
  if (arr < 0 || d->t[arr].type != J_ARR || idx >= d->t[arr].size) return -1;
  int k = arr + 1;
  for (int m = 0; m < idx; m++) k = d->t[k].next;
  return k;
}
/* Decodes a string token (escapes) into out; returns length or -1. */
static int jstr_decode(const jdoc *d, int i, char *out, size_t cap) {
  if (i < 0 || d->t[i].type != J_STR) return -1;
  size_t o = 0;
  for (int p = d->t[i].start; p < d->t[i].end; p++) {
    char c = d->s[p];
    if (c == '\\') {
      c = d->s[++p];
      switch (c) {
      case 'b': c = '\b'; break;
      case 'f': c = '\f'; break;
      case 'n': c = '\n'; break;
      case 'r': c = '\r'; break;
      case 't': c = '\t'; break;
      case 'u': {
        unsigned v = (unsigned)strtoul((char[]){d->s[p + 1], d->s[p + 2], d->s[p + 3], d->s[p + 4], 0}, NULL, 16);
        p += 4;
        if (v >= 0x80) { /* only ASCII matters here; keep a marker */
          c = '?';
        } else c = (char)v;
        break;
      }
      default: break; /* " \ / */
      }
    }
    if (o + 1 >= cap) return -1;
    out[o++] = c;
  }
  out[o] = 0;
  return (int)o;
}
static int hexval(char ch) {
  return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : ch - 'A' + 10;
}
static unsigned hex4at(const char *p) {
  return (unsigned)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}
/* Decodes a string token of any length, \u escapes (surrogate pairs
 * included) as UTF-8, into out; false when it is not a string. */
static bool jstr_decode_buf(const jdoc *d, int i, buf *out) {
  if (i < 0 || d->t[i].type != J_STR) return false;
  buf_clear(out);
  buf_reserve(out, (size_t)(d->t[i].end - d->t[i].start) + 1);
  const char *s = d->s;
  int p = d->t[i].start, end = d->t[i].end;
  while (p < end) {
    const char *bs = memchr(s + p, '\\', (size_t)(end - p));
    int run = bs ? (int)(bs - (s + p)) : end - p;
    buf_add(out, s + p, (size_t)run);
    p += run;
    if (p >= end) break;
    char e = s[p + 1], ch;
    p += 2;
    switch (e) {
      case 'b': ch = '\b'; break;
      case 'f': ch = '\f'; break;
      case 'n': ch = '\n'; break;
      case 'r': ch = '\r'; break;
      case 't': ch = '\t'; break;
      case 'u': {
        unsigned cp = hex4at(s + p);
        p += 4;
        if (cp >= 0xD800 && cp < 0xDC00 && p + 6 <= end && s[p] == '\\' && s[p + 1] == 'u') {
          cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4at(s + p + 2) - 0xDC00);
          p += 6;
        }
        char u[4];
        size_t n;
        if (cp < 0x80) u[0] = (char)cp, n = 1;
        else if (cp < 0x800) u[0] = (char)(0xC0 | cp >> 6), u[1] = (char)(0x80 | (cp & 63)), n = 2;
        else if (cp < 0x10000)
          u[0] = (char)(0xE0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 63)), u[2] = (char)(0x80 | (cp & 63)), n = 3;
        else
          u[0] = (char)(0xF0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 63)), u[2] = (char)(0x80 | ((cp >> 6) & 63)),
          u[3] = (char)(0x80 | (cp & 63)), n = 4;
        buf_add(out, u, n);
        continue;
      }
      default: ch = e; break; /* " \ / */
    }
    buf_add(out, &ch, 1);
  }
  return true;
}
/* Integer-valued number token (no fraction/exponent). */
static bool jint(const jdoc *d, int i, long long *out) {
  if (i < 0 || d->t[i].type != J_NUM) return false;
  char tmp[32];
  int l = d->t[i].end - d->t[i].start;
  if (l <= 0 || l >= (int)sizeof tmp) return false;
  memcpy(tmp, d->s + d->t[i].start, (size_t)l);
  tmp[l] = 0;
  for (int k = 0; k < l; k++)
    if (!(isdigit((unsigned char)tmp[k]) || (k == 0 && tmp[k] == '-'))) return false;
  errno = 0;
  *out = strtoll(tmp, NULL, 10);
  return errno == 0;
}

/* ------------------------------------------------------------ options */

enum { MODE_SEQ, MODE_PIPE, MODE_STARTUP, MODE_SESSIONS };
static const char *mode_name[] = {"seq", "pipe", "startup", "sessions"};

static struct {
  int mode;
  uint64_t calls, warmup;
  int window, conns;
  bool shared_session;
  int cpu, server_cpu;
  pid_t server_pid;
  bool no_sum_check;
  int repeat;
  uint64_t sessions;
  uint64_t rss_every;
  double timeout_s;
  const char *label;
  const char *tool;
  const char *payload; /* text, echo, structured, blob: the payload sweep (bench/payload.sh) */
  uint64_t bytes;      /* the payload's size */
  const char *extra_args; /* more members for the arguments object, e.g. "\"c\":1,\"d\":\"x\"" */
  const char *header;     /* one more HTTP request header, "Name: value" (--header; e.g. a bearer token) */
  bool a2a;               /* --a2a: A2A 1.0 SendMessage "add A B" (no handshake), the sum as the reply's text */
  const char *proto;
  bool quiet;
  const char *url;
  bool ws; /* --ws: url is a WebSocket (the channels speak as stdio, one message per frame) */
  char **argv; /* server command */
  const char *server_stderr;
  int verify_sessions;
  double connect_timeout_s;
  double duration_s;
  bool calls_given;
  double rate;           /* --rate: calls per second, open loop; 0: closed loop */
  const char *wait_file; /* --wait-file: after the handshake, wait for this file */
} opt = {
    .mode = MODE_SEQ,
    .calls = 1000,
    .warmup = 100,
    .window = -1,
    .conns = 1,
    .cpu = -1,
    .server_cpu = -1,
    .server_pid = 0,
    .repeat = 10,
    .sessions = 10000,
    .timeout_s = 300,
    .label = "",
    .tool = "add",
    .proto = "2025-11-25",
    .verify_sessions = 20,
};

/* http target */
static struct sockaddr_storage http_addr;
static socklen_t http_addrlen;
static char http_hostport[300];
static char http_path[1024];

/* ------------------------------------------------------------ /proc */

static long clk_tck;

/* utime+stime of a process (all its threads, dead ones included), in µs. */
static bool proc_cpu_us(pid_t pid, double *us) {
  char path[64], b[4096];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  ssize_t n = read(fd, b, sizeof b - 1);
  close(fd);
  if (n <= 0) return false;
  b[n] = 0;
  char *p = strrchr(b, ')'); /* comm may contain spaces and parens */
  if (!p) return false;
  p += 2; /* now at field 3 (state) */
  unsigned long long ut = 0, st = 0;
  for (int f = 3; f <= 15; f++) {
    char *e;
    if (f == 14) ut = strtoull(p, &e, 10);
    else if (f == 15) st = strtoull(p, &e, 10);
    else { e = strchr(p, ' '); if (!e) return false; }
    p = e + (*e == ' ');
  }
  *us = (double)(ut + st) * 1e6 / (double)clk_tck;
  return true;
}
/* Time on CPU of all live threads of a process, in µs, from
 * /proc/PID/task/TID/schedstat (nanoseconds: same quantity as utime+stime,
 * without the clock-tick granularity). Threads that exit in between are lost,
 * so utime+stime is reported beside it. */
static bool proc_sched_us(pid_t pid, double *us) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return false;
  struct dirent *e;
  unsigned long long sum = 0;
  bool any = false;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    char p2[320], b[128];
    snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", (int)pid, e->d_name);
    int fd = open(p2, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n <= 0) continue;
    b[n] = 0;
    sum += strtoull(b, NULL, 10);
    any = true;
  }
  closedir(d);
  *us = (double)sum / 1e3;
  return any;
}
static long proc_rss_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmRSS:", 6)) { kb = strtol(line + 6, NULL, 10); break; }
  fclose(f);
  return kb;
}
/* The most the process has had resident (VmHWM), since it started. */
static long proc_hwm_kb(pid_t pid) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  long kb = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) { kb = strtol(line + 6, NULL, 10); break; }
  fclose(f);
  return kb;
}
static double self_cpu_us(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec * 1e6 + (double)ru.ru_utime.tv_usec +
         (double)ru.ru_stime.tv_sec * 1e6 + (double)ru.ru_stime.tv_usec;
}

/* ------------------------------------------------------------ channels */

enum { K_INIT, K_NOTIF, K_CALL };
typedef struct {
  uint64_t id;
  int kind;
  long long expect;
  uint64_t t_send;
  bool answered;
  bool measured;
} req;

enum { HS_NONE, HS_INIT_SENT, HS_INIT_DONE, HS_NOTIF_SENT, HS_READY, HS_WAIT_SHARED, HS_FAILED };
enum { HP_STATUS, HP_HEADERS, HP_BODY_CL, HP_CHUNK_SIZE, HP_CHUNK_DATA, HP_CHUNK_CRLF, HP_TRAILERS, HP_BODY_CLOSE };

typedef struct {
  int idx;
  bool http;
  int rfd, wfd;
  buf in, out;
  req pend[MAXWIN + 4];
  int np;
  int hs;
  char sid[256];
  buf hdr;          /* cached request head for the current session */
  char hdr_sid[256];
  bool hdr_ok;
  /* http response parser */
  int hp;
  int status;
  long long clen;
  bool chunked, sse, conn_close, has_clen;
  long long chunk_left;
  char resp_sid[256];
  char ctype[128];
  buf body, sse_line, sse_data;
  bool resp_got_msg;
  bool dead;
  int reconnects;
} chan;

static chan *chans;
static int nchans;

/* run state */
static struct {
  uint64_t next_id;
  uint64_t call_k;      /* next call index (warmup + measured) */
  uint64_t phase_limit; /* calls may be sent while call_k < phase_limit */
  uint64_t calls_done;  /* answered or failed */
  uint64_t errors;
  uint64_t err_printed;
  bool measuring;
  uint64_t *lat; /* ns, measured calls only */
  uint64_t nlat, lat_cap;
  uint64_t t_stop; /* --duration: when the measured phase stops sending */
  uint64_t measured_done;
  uint64_t rss_next;
  buf rss_samples;
  uint64_t deadline;
  pid_t child;
  bool child_dead;
  char proto_neg[64];
  char server_name[128];
  /* sessions mode */
  char **sids;
  uint64_t nsids, sessions_started;
  bool sessions_mode;
  uint64_t notifs_ignored, server_requests;
  uint64_t t_init; /* when the last initialize answer arrived */
  /* --rate: call pace_k0 + i is due at pace_t0 + i / rate (each phase,
   * warm-up and measured, starts its own schedule) */
  uint64_t pace_t0, pace_k0;
  uint64_t behind_max_ns; /* how late the most late measured call went out */
} R;

static void report_error(const char *what, const char *detail, size_t dlen) {
  R.errors++;
  if (R.err_printed++ < MAX_ERR_PRINT) {
    if (dlen > 300) dlen = 300;
    fprintf(stderr, "loadclient: %s%s%.*s\n", what, detail ? ": " : "", (int)dlen, detail ? detail : "");
  } else if (R.err_printed == MAX_ERR_PRINT + 1) {
    fprintf(stderr, "loadclient: (further errors not printed)\n");
  }
}

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* call k -> arguments; mixes signs and magnitudes, stays well inside 2^53 */
static void call_args(uint64_t k, long long *a, long long *b) {
  *a = (long long)((k * 7919u) % 2000003u) - 1000001;
  *b = (long long)(k % 1000000007u) * ((k & 1) ? -1 : 1) + 17;
}

static bool http_conn_open(chan *c);

/* ------------------------------------------------------------ payloads */

/* --payload: what every answer must carry (payload.h), made once. */
static struct {
  char *text;      /* text and echo: the text */
  char *escaped;   /* echo: the text inside the request's JSON string */
  size_t escaped_len;
  char *base64;    /* blob: the base64 of the blob */
  size_t base64_len;
  size_t fields;   /* structured: members of the object */
  buf body;        /* the request being built */
  buf decoded;     /* a string of the answer, unescaped */
} P;

static void payload_prepare(void) {
  size_t n = (size_t)opt.bytes;
  if (!strcmp(opt.payload, "text") || !strcmp(opt.payload, "echo")) {
    P.text = payload_text(n);
    if (!strcmp(opt.payload, "echo")) P.escaped = payload_escape(P.text, n, &P.escaped_len);
  } else if (!strcmp(opt.payload, "blob")) {
    unsigned char *b = payload_blob(n);
    P.base64 = payload_base64(b, n, &P.base64_len);
    free(b);
  } else if (!strcmp(opt.payload, "structured")) {
    P.fields = payload_fields(n);
  } else {
    die("unknown --payload %s (text, echo, structured or blob)", opt.payload);
  }
}

/* The JSON-RPC request of a payload call. */
static void payload_request(uint64_t id, const char *meta) {
  buf *b = &P.body;
  buf_clear(b);
  buf_printf(b, "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",", id);
  if (!strcmp(opt.payload, "blob")) {
    buf_printf(b, "\"method\":\"resources/read\",\"params\":{\"uri\":\"blob://%" PRIu64 "\"%s}}", opt.bytes, meta);
  } else if (!strcmp(opt.payload, "echo")) {
    buf_printf(b, "\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"");
    buf_add(b, P.escaped, P.escaped_len);
    buf_printf(b, "\"}%s}}", meta);
  } else {
    buf_printf(b, "\"method\":\"tools/call\",\"params\":{\"name\":\"%s\",\"arguments\":{\"bytes\":%" PRIu64 "}%s}}",
               opt.payload, opt.bytes, meta);
  }
}

/* 2026-07-28 and later: no handshake; every request names its version and
 * the client's capabilities in its own _meta (and, over HTTP, in headers). */
static bool modern_era(void) { return strcmp(opt.proto, "2026-07-28") >= 0; }
static void buf_puts_a2a(buf *b) { buf_printf(b, "A2A-Version: 1.0\r\n"); }

/* --rate: when call k may go out (open loop: the schedule does not wait for
 * answers; only the window can hold a call back). */
static uint64_t due_ns(uint64_t k) { return R.pace_t0 + (uint64_t)((double)(k - R.pace_k0) * 1e9 / opt.rate); }
static void pace_start(void) {
  R.pace_t0 = now_ns();
  R.pace_k0 = R.call_k;
}

static void chan_send(chan *c, int kind, uint64_t k) {
  if (c->http && c->dead && !http_conn_open(c)) return;
  req *r = &c->pend[c->np];
  char body_small[1024], meta[256] = "";
  const char *body = body_small;
  int bl;
  memset(r, 0, sizeof *r);
  r->kind = kind;
  if (kind == K_INIT) {
    r->id = R.next_id++;
    bl = snprintf(body_small, sizeof body_small,
                  "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\","
                  "\"capabilities\":{},\"clientInfo\":{\"name\":\"luamcp-loadclient\",\"version\":\"1.0.0\"}}}",
                  r->id, opt.proto);
  } else if (kind == K_NOTIF) {
    bl = snprintf(body_small, sizeof body_small, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  } else {
    long long a, b;
    call_args(k, &a, &b);
    r->id = R.next_id++;
    r->expect = a + b;
    r->measured = R.measuring;
    if (modern_era())
      snprintf(meta, sizeof meta,
               ",\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"%s\","
               "\"io.modelcontextprotocol/clientCapabilities\":{},"
               "\"io.modelcontextprotocol/clientInfo\":{\"name\":\"luamcp-loadclient\",\"version\":\"1.0.0\"}}",
               opt.proto);
    if (opt.a2a) {
      bl = snprintf(body_small, sizeof body_small,
                    "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"SendMessage\",\"params\":{\"message\":"
                    "{\"messageId\":\"m%" PRIu64 "\",\"role\":\"ROLE_USER\",\"parts\":[{\"text\":\"add %lld %lld\"}]}}}",
                    r->id, r->id, a, b);
    } else if (opt.payload) {
      payload_request(r->id, meta);
      body = P.body.p;
      bl = (int)P.body.len;
    } else {
      bl = snprintf(body_small, sizeof body_small,
                    "{\"jsonrpc\":\"2.0\",\"id\":%" PRIu64 ",\"method\":\"tools/call\",\"params\":{\"name\":\"%s\","
                    "\"arguments\":{\"a\":%lld,\"b\":%lld%s%s}%s}}",
                    r->id, opt.tool, a, b, opt.extra_args ? "," : "", opt.extra_args ? opt.extra_args : "", meta);
      if (bl < 0 || (size_t)bl >= sizeof body_small) die("request body too long (--extra-args)");
    }
  }
  if (c->http) {
    if (kind == K_INIT) {
      buf_printf(&c->out,
                 "POST %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json, text/event-stream\r\n"
                 "Content-Type: application/json\r\n",
                 http_path, http_hostport);
      if (opt.header) buf_printf(&c->out, "%s\r\n", opt.header);
    } else {
      if (!c->hdr_ok || strcmp(c->hdr_sid, c->sid)) {
        buf_clear(&c->hdr);
        buf_printf(&c->hdr,
                   "POST %s HTTP/1.1\r\nHost: %s\r\nAccept: application/json, text/event-stream\r\n"
                   "Content-Type: application/json\r\n",
                   http_path, http_hostport);
        if (opt.header) buf_printf(&c->hdr, "%s\r\n", opt.header);
        if (c->sid[0]) buf_printf(&c->hdr, "Mcp-Session-Id: %s\r\n", c->sid);
        if (opt.a2a) buf_puts_a2a(&c->hdr);
        else buf_printf(&c->hdr, "MCP-Protocol-Version: %s\r\n", R.proto_neg[0] ? R.proto_neg : opt.proto);
        if (modern_era() && !opt.a2a) buf_printf(&c->hdr, "Mcp-Method: tools/call\r\nMcp-Name: %s\r\n", opt.tool);
        snprintf(c->hdr_sid, sizeof c->hdr_sid, "%s", c->sid);
        c->hdr_ok = true;
      }
      buf_add(&c->out, c->hdr.p, c->hdr.len);
    }
    char cl[48];
    int cll = snprintf(cl, sizeof cl, "Content-Length: %d\r\n\r\n", bl);
    buf_add(&c->out, cl, (size_t)cll);
    buf_add(&c->out, body, (size_t)bl);
  } else if (opt.ws) {
    /* A client frame: FIN and text, masked with a zero key (RFC 6455 5.3:
     * any key will do; this one leaves the payload as it is). */
    unsigned char head[14];
    size_t hl = 0, n = (size_t)bl;
    head[hl++] = 0x81;
    if (n < 126) {
      head[hl++] = (unsigned char)(0x80 | n);
    } else if (n < 65536) {
      head[hl++] = 0x80 | 126;
      head[hl++] = (unsigned char)(n >> 8);
      head[hl++] = (unsigned char)n;
    } else {
      head[hl++] = 0x80 | 127;
      for (int i = 7; i >= 0; i--) head[hl++] = (unsigned char)((uint64_t)n >> (8 * i));
    }
    memset(head + hl, 0, 4);
    hl += 4;
    buf_add(&c->out, head, hl);
    buf_add(&c->out, body, (size_t)bl);
  } else {
    buf_add(&c->out, body, (size_t)bl);
    buf_add(&c->out, "\n", 1);
  }
  r->t_send = now_ns();
  if (kind == K_CALL && opt.rate > 0) {
    /* open loop: latency counts from when the call was due, so a client
     * (or window) that falls behind shows up in it, not hides it */
    uint64_t due = due_ns(k);
    if (r->measured && r->t_send > due && r->t_send - due > R.behind_max_ns) R.behind_max_ns = r->t_send - due;
    if (due < r->t_send) r->t_send = due;
  }
  /* stdio notifications get no answer: nothing to wait for */
  if (!(kind == K_NOTIF && !c->http)) c->np++;
}

static void flush_out(chan *c) {
  while (buf_avail(&c->out)) {
    ssize_t n = write(c->wfd, buf_data(&c->out), buf_avail(&c->out));
    if (n > 0) {
      c->out.off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    /* EPIPE etc: peer gone */
    c->out.len = c->out.off = 0;
    return;
  }
  buf_clear(&c->out);
}

/* ------------------------------------------------------- message checks */

static void record_latency(req *r, uint64_t t) {
  if (!r->measured) return;
  if (R.nlat == R.lat_cap) {
    R.lat_cap = R.lat_cap ? R.lat_cap * 2 : 65536;
    R.lat = xrealloc(R.lat, R.lat_cap * sizeof(uint64_t));
  }
  R.lat[R.nlat++] = t - r->t_send;
}

static void call_done(req *r) {
  R.calls_done++;
  if (r->measured) R.measured_done++;
}

static jdoc JD_INNER; /* structured: the JSON inside the text */

/* A payload call's result carries exactly the payload (payload.h). */
static bool check_payload(jdoc *d, int res, const char *raw, size_t rawlen) {
  const char *want = NULL;
  size_t want_len = 0;
  int str;
  if (!strcmp(opt.payload, "blob")) {
    str = jget(d, jat(d, jget(d, res, "contents"), 0), "blob");
    want = P.base64;
    want_len = P.base64_len;
  } else {
    int c0 = jat(d, jget(d, res, "content"), 0);
    if (!jtok_is(d, jget(d, c0, "type"), "text")) {
      report_error("payload: result without text content", raw, rawlen);
      return false;
    }
    str = jget(d, c0, "text");
    if (P.text) want = P.text, want_len = (size_t)opt.bytes;
  }
  if (!jstr_decode_buf(d, str, &P.decoded)) {
    report_error("payload: the answer has no payload string", raw, rawlen);
    return false;
  }
  if (want) {
    if (P.decoded.len != want_len || memcmp(P.decoded.p, want, want_len)) {
      char m[128];
      snprintf(m, sizeof m, "payload: %zu bytes back, not the %zu expected (or different ones)", P.decoded.len, want_len);
      report_error(m, raw, rawlen > 200 ? 200 : rawlen);
      return false;
    }
    return true;
  }
  /* structured: structuredContent, and the object again as JSON text */
  int sc = jget(d, res, "structuredContent");
  if (sc < 0 || d->t[sc].type != J_OBJ || (size_t)d->t[sc].size != P.fields) {
    report_error("payload: structuredContent is not an object of the expected size", raw, rawlen > 200 ? 200 : rawlen);
    return false;
  }
  if (jparse(&JD_INNER, P.decoded.p, P.decoded.len) || JD_INNER.t[0].type != J_OBJ ||
      (size_t)JD_INNER.t[0].size != P.fields) {
    report_error("payload: the text is not the structuredContent as JSON", raw, rawlen > 200 ? 200 : rawlen);
    return false;
  }
  return true;
}

/* A JSON-RPC response for request r. */
static void check_response(chan *c, req *r, jdoc *d, const char *raw, size_t rawlen) {
  uint64_t t = now_ns();
  r->answered = true;
  int err = jget(d, 0, "error");
  int res = jget(d, 0, "result");
  if (r->kind == K_INIT) {
    if (res < 0) {
      report_error("initialize failed", raw, rawlen);
      c->hs = HS_FAILED;
      return;
    }
    int pv = jget(d, res, "protocolVersion");
    if (pv < 0 || jstr_decode(d, pv, R.proto_neg, sizeof R.proto_neg) < 0) {
      report_error("initialize result without protocolVersion", raw, rawlen);
    }
    int si = jget(d, res, "serverInfo");
    if (si >= 0) jstr_decode(d, jget(d, si, "name"), R.server_name, sizeof R.server_name);
    c->hs = HS_INIT_DONE;
    R.t_init = t;
    return;
  }
  if (opt.a2a) { /* SendMessage: {"message": {"parts": [{"text": SUM}]}} */
    int tx = jget(d, jat(d, jget(d, jget(d, res, "message"), "parts"), 0), "text");
    char txt[64], want[32];
    snprintf(want, sizeof want, "%lld", r->expect);
    if (err >= 0 || res < 0 || jstr_decode(d, tx, txt, sizeof txt) < 0 || strcmp(txt, want)) {
      report_error("SendMessage: no message with the sum", raw, rawlen);
      call_done(r);
      return;
    }
    record_latency(r, t);
    call_done(r);
    return;
  }
  /* tools/call */
  if (err >= 0 || res < 0) {
    report_error("tools/call returned an error", raw, rawlen);
    call_done(r);
    return;
  }
  if (modern_era() && !jtok_is(d, jget(d, res, "resultType"), "complete")) {
    report_error("tools/call result without resultType \"complete\"", raw, rawlen);
    call_done(r);
    return;
  }
  int ie = jget(d, res, "isError");
  if (ie >= 0 && d->t[ie].type == J_TRUE) {
    report_error("tools/call result isError", raw, rawlen);
    call_done(r);
    return;
  }
  if (opt.payload) {
    if (check_payload(d, res, raw, rawlen)) record_latency(r, t);
    call_done(r);
    return;
  }
  int ct = jget(d, res, "content");
  int c0 = jat(d, ct, 0);
  int ty = jget(d, c0, "type");
  int tx = jget(d, c0, "text");
  char txt[64];
  if (!jtok_is(d, ty, "text") || jstr_decode(d, tx, txt, sizeof txt) < 0) {
    report_error("tools/call result without text content", raw, rawlen);
    call_done(r);
    return;
  }
  if (!opt.no_sum_check) {
    char want[32];
    snprintf(want, sizeof want, "%lld", r->expect);
    if (strcmp(txt, want)) {
      char m[160];
      snprintf(m, sizeof m, "wrong sum (want \"%s\", got \"%.40s\")", want, txt);
      report_error(m, raw, rawlen);
      call_done(r);
      return;
    }
  }
  record_latency(r, t);
  call_done(r);
}

static jdoc JD;

/* One JSON-RPC message from the server. For HTTP, `head` is the request whose
 * HTTP response carries it (responses on a connection come in order). */
static void on_message(chan *c, const char *s, size_t n) {
  if (jparse(&JD, s, n) || JD.t[0].type != J_OBJ) {
    if (n && s[0] == '[') { report_error("batch response not expected", s, n); return; }
    report_error("invalid JSON from server", s, n);
    return;
  }
  int idt = jget(&JD, 0, "id");
  int mt = jget(&JD, 0, "method");
  if (mt >= 0) {
    if (idt < 0) { R.notifs_ignored++; return; }
    /* a server-to-client request: answer "method not found" (stdio only) */
    R.server_requests++;
    if (!c->http) {
      buf_add(&c->out, "{\"jsonrpc\":\"2.0\",\"id\":", 22);
      buf_add(&c->out, s + JD.t[idt].start - (JD.t[idt].type == J_STR), (size_t)(JD.t[idt].end - JD.t[idt].start) + 2 * (JD.t[idt].type == J_STR));
      const char *tail = ",\"error\":{\"code\":-32601,\"message\":\"Method not found\"}}\n";
      buf_add(&c->out, tail, strlen(tail));
    }
    return;
  }
  long long id;
  if (!jint(&JD, idt, &id)) {
    report_error("response without an integer id", s, n > 300 ? 300 : n);
    /* an error for a message the server could not read (id null): the
     * call it was will never be answered */
    if (idt >= 0 && JD.t[idt].type == J_NULL && jget(&JD, 0, "error") >= 0) c->hs = HS_FAILED;
    return;
  }
  for (int i = 0; i < c->np; i++) {
    req *r = &c->pend[i];
    if (r->kind == K_NOTIF || r->answered || r->id != (uint64_t)id) continue;
    check_response(c, r, &JD, s, n);
    if (!c->http) { /* stdio: remove at once; http: at end of the HTTP response */
      memmove(&c->pend[i], &c->pend[i + 1], (size_t)(c->np - i - 1) * sizeof(req));
      c->np--;
    }
    c->resp_got_msg = true;
    return;
  }
  report_error("response with an unknown id", s, n);
}

/* ---------------------------------------------------------------- stdio */

static void stdio_read(chan *c) {
  for (;;) {
    buf_reserve(&c->in, 65536);
    ssize_t n = read(c->rfd, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      c->dead = true;
      break;
    }
    c->in.len += (size_t)n;
    if ((size_t)n < 65536) break;
  }
  if (opt.ws) { /* split frames: the server's are unmasked */
    for (;;) {
      unsigned char *s = (unsigned char *)buf_data(&c->in);
      size_t av = buf_avail(&c->in), hl = 2;
      if (av < 2) break;
      uint64_t n = s[1] & 0x7f;
      if (n == 126) {
        hl = 4;
        if (av < hl) break;
        n = (uint64_t)s[2] << 8 | s[3];
      } else if (n == 127) {
        hl = 10;
        if (av < hl) break;
        n = 0;
        for (int i = 0; i < 8; i++) n = n << 8 | s[2 + i];
      }
      if (av < hl + n) break;
      int op = s[0] & 0x0f;
      if (op == 1) on_message(c, (char *)s + hl, (size_t)n);
      else if (op == 8) c->dead = true;
      c->in.off += hl + (size_t)n;
    }
    if (!buf_avail(&c->in)) buf_clear(&c->in);
    return;
  }
  /* split lines */
  for (;;) {
    char *s = buf_data(&c->in);
    size_t av = buf_avail(&c->in);
    char *nl = memchr(s, '\n', av);
    if (!nl) break;
    size_t l = (size_t)(nl - s);
    size_t ll = l;
    if (ll && s[ll - 1] == '\r') ll--;
    if (ll) on_message(c, s, ll);
    c->in.off += l + 1;
  }
  if (!buf_avail(&c->in)) buf_clear(&c->in);
}

/* Spawns opt.argv. stdio: its stdin/stdout are pipes to us. For an HTTP
 * server (stdout_to_stderr) stdout goes to our stderr; stdin stays a pipe that
 * we hold open until we stop it, so a server that exits on stdin EOF does not. */
static pid_t spawn_server(int *to_child, int *from_child, cpu_set_t *orig_mask, bool stdout_to_stderr) {
  int in[2], out[2];
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC)) die("pipe: %s", strerror(errno));
  pid_t pid = fork();
  if (pid < 0) die("fork: %s", strerror(errno));
  if (pid == 0) {
    if (opt.server_cpu >= 0) {
      cpu_set_t m;
      CPU_ZERO(&m);
      CPU_SET(opt.server_cpu, &m);
      sched_setaffinity(0, sizeof m, &m);
    } else if (orig_mask) {
      sched_setaffinity(0, sizeof *orig_mask, orig_mask);
    }
    dup2(in[0], 0);
    dup2(stdout_to_stderr ? 2 : out[1], 1);
    if (opt.server_stderr && strcmp(opt.server_stderr, "inherit")) {
      int fd = open(opt.server_stderr, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) dup2(fd, 2);
    }
    signal(SIGPIPE, SIG_DFL);
    execvp(opt.argv[0], opt.argv);
    fprintf(stderr, "loadclient: exec %s: %s\n", opt.argv[0], strerror(errno));
    _exit(127);
  }
  close(in[0]);
  close(out[1]);
  *to_child = in[1];
  *from_child = out[0];
  if (stdout_to_stderr) {
    close(out[0]);
    *from_child = -1;
  }
  return pid;
}

/* waits up to ms for pid; returns true when it exited (status in *st) */
static bool wait_exit(pid_t pid, int ms, int *st) {
  uint64_t end = now_ns() + (uint64_t)ms * 1000000ull;
  for (;;) {
    pid_t w = waitpid(pid, st, WNOHANG);
    if (w == pid) return true;
    if (w < 0 && errno != EINTR) return true;
    if (now_ns() > end) return false;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
}
/* closes the server's stdin, waits; escalates to SIGTERM / SIGKILL.
 * Returns ms from EOF to exit, or -1 when it had to be killed. */
static double stop_child(pid_t pid, int wfd, int rfd) {
  int st;
  uint64_t t0 = now_ns();
  if (wfd >= 0) close(wfd);
  double ms = -1;
  if (wait_exit(pid, 5000, &st)) ms = (double)(now_ns() - t0) / 1e6;
  else {
    kill(pid, SIGTERM);
    if (!wait_exit(pid, 2000, &st)) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
    }
  }
  if (rfd >= 0) close(rfd);
  return ms;
}

/* ----------------------------------------------------------------- http */

static bool parse_url(const char *url) {
  const char *p = url;
  if (strncmp(p, "http://", 7)) return false;
  p += 7;
  const char *hs = p, *he;
  char host[256];
  if (*p == '[') {
    he = strchr(p, ']');
    if (!he) return false;
    snprintf(host, sizeof host, "%.*s", (int)(he - p - 1), p + 1);
    p = he + 1;
  } else {
    he = p;
    while (*he && *he != ':' && *he != '/') he++;
    snprintf(host, sizeof host, "%.*s", (int)(he - p), p);
    p = he;
  }
  int port = 80;
  if (*p == ':') {
    port = (int)strtol(p + 1, (char **)&p, 10);
    if (port <= 0 || port > 65535) return false;
  }
  snprintf(http_hostport, sizeof http_hostport, "%.*s", (int)(p - hs), hs);
  snprintf(http_path, sizeof http_path, "%s", *p ? p : "/");
  memset(&http_addr, 0, sizeof http_addr);
  if (!strcmp(host, "localhost")) strcpy(host, "127.0.0.1");
  struct sockaddr_in *a4 = (struct sockaddr_in *)&http_addr;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&http_addr;
  if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
    /* loopback only: 127.0.0.0/8 */
    if ((ntohl(a4->sin_addr.s_addr) >> 24) != 127) die("refusing non-loopback address %s", host);
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    http_addrlen = sizeof *a4;
  } else if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
    if (!IN6_IS_ADDR_LOOPBACK(&a6->sin6_addr)) die("refusing non-loopback address %s", host);
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    http_addrlen = sizeof *a6;
  } else {
    die("host must be a loopback IP address or localhost: %s", host);
  }
  return true;
}

static int tcp_connect(bool quiet) {
  int fd = socket(http_addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket: %s", strerror(errno));
  if (connect(fd, (struct sockaddr *)&http_addr, http_addrlen)) {
    int e = errno;
    close(fd);
    if (!quiet) die("connect %s: %s", http_hostport, strerror(e));
    errno = e;
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  set_nonblock(fd);
  return fd;
}

static void hp_reset(chan *c) {
  c->hp = HP_STATUS;
  c->status = 0;
  c->clen = 0;
  c->has_clen = c->chunked = c->sse = c->conn_close = false;
  c->resp_sid[0] = 0;
  c->ctype[0] = 0;
  c->resp_got_msg = false;
  buf_clear(&c->body);
  buf_clear(&c->sse_line);
  buf_clear(&c->sse_data);
}

static void http_fail_pending(chan *c, const char *why) {
  for (int i = 0; i < c->np; i++) {
    req *r = &c->pend[i];
    if (r->kind == K_CALL && !r->answered) {
      report_error(why, NULL, 0);
      call_done(r);
    } else if (r->kind != K_CALL) {
      report_error(why, r->kind == K_INIT ? "during initialize" : "during notifications/initialized", 40);
      c->hs = HS_FAILED;
    }
  }
  c->np = 0;
}

static void http_conn_close(chan *c) {
  if (c->rfd >= 0) close(c->rfd);
  c->rfd = c->wfd = -1;
  c->dead = true;
  buf_clear(&c->in);
  buf_clear(&c->out);
  hp_reset(c);
}

static bool http_conn_open(chan *c) {
  if (c->rfd >= 0) http_conn_close(c);
  int fd = tcp_connect(true);
  if (fd < 0) {
    char m[512];
    snprintf(m, sizeof m, "connect %s (connection %d): %s", http_hostport, c->idx, strerror(errno));
    report_error(m, NULL, 0);
    c->hs = HS_FAILED;
    return false;
  }
  c->rfd = c->wfd = fd;
  c->dead = false;
  c->reconnects++;
  hp_reset(c);
  return true;
}

/* one complete HTTP response arrived for c->pend[0] */
static void http_response_done(chan *c) {
  if (c->np == 0) {
    report_error("HTTP response without a request", NULL, 0);
    return;
  }
  req *r = &c->pend[0];
  bool ok2xx = c->status >= 200 && c->status < 300;
  if (!c->sse && c->body.len && ok2xx) on_message(c, c->body.p, c->body.len);
  if (r->kind == K_NOTIF) {
    if (!ok2xx) {
      char m[64];
      snprintf(m, sizeof m, "notifications/initialized: HTTP %d", c->status);
      report_error(m, c->body.p, c->body.len);
    }
    c->hs = HS_READY;
  } else if (!r->answered) {
    char m[96];
    snprintf(m, sizeof m, "%s: HTTP %d without a JSON-RPC response", r->kind == K_INIT ? "initialize" : "tools/call",
             c->status);
    report_error(m, c->body.p, c->body.len);
    if (r->kind == K_CALL) call_done(r);
    else c->hs = HS_FAILED;
  } else if (r->kind == K_INIT) {
    /* no Mcp-Session-Id: a stateless server; then no session header is sent */
    snprintf(c->sid, sizeof c->sid, "%s", c->resp_sid);
  }
  memmove(&c->pend[0], &c->pend[1], (size_t)(c->np - 1) * sizeof(req));
  c->np--;
  bool close_it = c->conn_close;
  hp_reset(c);
  if (close_it) {
    http_fail_pending(c, "server closed the connection with requests in flight");
    http_conn_close(c);
  }
}

static void sse_dispatch(chan *c) {
  if (c->sse_data.len) {
    size_t l = c->sse_data.len;
    if (c->sse_data.p[l - 1] == '\n') l--;
    if (l) on_message(c, c->sse_data.p, l);
  }
  buf_clear(&c->sse_data);
}
static void sse_feed(chan *c, const char *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    char ch = p[i];
    if (ch == '\n') {
      char *l = c->sse_line.p ? c->sse_line.p : "";
      size_t ll = c->sse_line.len;
      if (ll && l[ll - 1] == '\r') ll--;
      if (ll == 0) sse_dispatch(c);
      else if (ll >= 5 && !memcmp(l, "data:", 5)) {
        size_t o = 5 + (ll > 5 && l[5] == ' ');
        buf_add(&c->sse_data, l + o, ll - o);
        buf_add(&c->sse_data, "\n", 1);
      } /* event:, id:, retry:, comments: ignored */
      buf_clear(&c->sse_line);
    } else {
      buf_add(&c->sse_line, &ch, 1);
    }
  }
}
static void body_feed(chan *c, const char *p, size_t n) {
  if (c->sse) sse_feed(c, p, n);
  else buf_add(&c->body, p, n);
}

static bool header_is(const char *l, size_t ll, const char *name, const char **val, size_t *vl) {
  size_t nl = strlen(name);
  if (ll <= nl || l[nl] != ':' || strncasecmp(l, name, nl)) return false;
  const char *v = l + nl + 1;
  const char *e = l + ll;
  while (v < e && (*v == ' ' || *v == '\t')) v++;
  while (e > v && (e[-1] == ' ' || e[-1] == '\t')) e--;
  *val = v;
  *vl = (size_t)(e - v);
  return true;
}

/* parses what is buffered; returns -1 on a protocol error */
static int http_parse(chan *c) {
  for (;;) {
    char *s = buf_data(&c->in);
    size_t av = buf_avail(&c->in);
    if (c->hp == HP_STATUS || c->hp == HP_HEADERS || c->hp == HP_CHUNK_SIZE || c->hp == HP_CHUNK_CRLF ||
        c->hp == HP_TRAILERS) {
      char *nl = memchr(s, '\n', av);
      if (!nl) {
        if (av > 65536) return -1;
        return 0;
      }
      size_t ll = (size_t)(nl - s);
      c->in.off += ll + 1;
      if (ll && s[ll - 1] == '\r') ll--;
      if (c->hp == HP_STATUS) {
        if (ll < 12 || strncmp(s, "HTTP/1.", 7)) return -1;
        c->status = atoi(s + 9);
        c->hp = HP_HEADERS;
      } else if (c->hp == HP_HEADERS) {
        if (ll == 0) {
          if (c->status >= 100 && c->status < 200) { hp_reset(c); continue; }
          if (c->status == 204 || c->status == 304) { http_response_done(c); continue; }
          if (c->chunked) c->hp = HP_CHUNK_SIZE;
          else if (c->has_clen) {
            c->hp = HP_BODY_CL;
            if (c->clen == 0) { http_response_done(c); continue; }
          } else c->hp = HP_BODY_CLOSE;
          continue;
        }
        const char *v;
        size_t vl;
        if (header_is(s, ll, "content-length", &v, &vl)) {
          c->clen = strtoll(v, NULL, 10);
          c->has_clen = true;
        } else if (header_is(s, ll, "transfer-encoding", &v, &vl)) {
          if (vl >= 7 && !strncasecmp(v + vl - 7, "chunked", 7)) c->chunked = true;
        } else if (header_is(s, ll, "content-type", &v, &vl)) {
          snprintf(c->ctype, sizeof c->ctype, "%.*s", (int)vl, v);
          c->sse = vl >= 17 && !strncasecmp(v, "text/event-stream", 17);
        } else if (header_is(s, ll, "mcp-session-id", &v, &vl)) {
          snprintf(c->resp_sid, sizeof c->resp_sid, "%.*s", (int)vl, v);
        } else if (header_is(s, ll, "connection", &v, &vl)) {
          if (vl == 5 && !strncasecmp(v, "close", 5)) c->conn_close = true;
        }
      } else if (c->hp == HP_CHUNK_SIZE) {
        char *e;
        c->chunk_left = strtoll(s, &e, 16);
        if (e == s || c->chunk_left < 0) return -1;
        c->hp = c->chunk_left ? HP_CHUNK_DATA : HP_TRAILERS;
      } else if (c->hp == HP_CHUNK_CRLF) {
        if (ll) return -1;
        c->hp = HP_CHUNK_SIZE;
      } else { /* trailers */
        if (ll == 0) http_response_done(c);
      }
      continue;
    }
    if (av == 0) return 0;
    if (c->hp == HP_BODY_CL || c->hp == HP_CHUNK_DATA) {
      long long need = c->hp == HP_BODY_CL ? c->clen : c->chunk_left;
      size_t take = av < (size_t)need ? av : (size_t)need;
      body_feed(c, s, take);
      c->in.off += take;
      if (c->hp == HP_BODY_CL) {
        c->clen -= (long long)take;
        if (c->clen == 0) http_response_done(c);
      } else {
        c->chunk_left -= (long long)take;
        if (c->chunk_left == 0) c->hp = HP_CHUNK_CRLF;
      }
      continue;
    }
    if (c->hp == HP_BODY_CLOSE) {
      body_feed(c, s, av);
      c->in.off += av;
      return 0;
    }
    return -1;
  }
}

static void http_read(chan *c) {
  bool eof = false;
  for (;;) {
    buf_reserve(&c->in, 65536);
    ssize_t n = read(c->rfd, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) {
      eof = true;
      break;
    }
    c->in.len += (size_t)n;
    if ((size_t)n < 65536) break;
  }
  if (http_parse(c) < 0) {
    report_error("HTTP protocol error from server", buf_data(&c->in), buf_avail(&c->in));
    http_fail_pending(c, "connection dropped after a protocol error");
    http_conn_close(c);
    return;
  }
  if (!buf_avail(&c->in)) buf_clear(&c->in);
  if (eof) {
    if (c->hp == HP_BODY_CLOSE) http_response_done(c);
    if (c->np) http_fail_pending(c, "server closed the connection with a request in flight");
    http_conn_close(c);
  }
}

/* ---------------------------------------------------------- event loop */

static void rss_sample(void) {
  if (!opt.rss_every || !R.measuring || R.measured_done < R.rss_next) return;
  pid_t pid = R.child ? R.child : opt.server_pid;
  long kb = pid ? proc_rss_kb(pid) : -1;
  buf_printf(&R.rss_samples, "%s%" PRIu64 ":%ld", R.rss_samples.len ? " " : "", R.measured_done, kb);
  R.rss_next += opt.rss_every;
}

/* The producer: decides what each channel sends next. */
static void produce(chan *c) {
  if (c->http && c->dead && c->np == 0 && c->rfd >= 0) http_conn_close(c);
  if (c->np) {
    /* handshake steps go one at a time; calls fill the window */
    if (c->hs != HS_READY) return;
  }
  switch (c->hs) {
  case HS_NONE:
    if (modern_era() || opt.a2a) {
      snprintf(R.proto_neg, sizeof R.proto_neg, "%s", opt.proto);
      c->hs = HS_READY;
      produce(c);
      return;
    }
    if (opt.shared_session && c->http && c->idx > 0) {
      c->hs = HS_WAIT_SHARED;
      return;
    }
    if (R.sessions_mode && R.sessions_started >= opt.sessions) return;
    if (R.sessions_mode) R.sessions_started++;
    chan_send(c, K_INIT, 0);
    if (c->hs != HS_FAILED) c->hs = HS_INIT_SENT;
    return;
  case HS_INIT_DONE:
    chan_send(c, K_NOTIF, 0);
    if (c->hs == HS_FAILED) return;
    c->hs = c->http ? HS_NOTIF_SENT : HS_READY;
    if (c->http) return;
    /* fallthrough */
  case HS_READY:
    if (R.sessions_mode) {
      if (c->np) return;
      R.sids = xrealloc(R.sids, (R.nsids + 1) * sizeof(char *));
      R.sids[R.nsids++] = strdup(c->sid);
      c->sid[0] = 0;
      c->hs = HS_NONE;
      produce(c);
      return;
    }
    if (!R.measuring && R.phase_limit == 0) return; /* handshake only */
    {
      int win = opt.window;
      uint64_t now = opt.rate > 0 ? now_ns() : 0;
      while (c->np < win && R.call_k < R.phase_limit && c->hs == HS_READY && (opt.rate <= 0 || due_ns(R.call_k) <= now))
        chan_send(c, K_CALL, R.call_k++);
    }
    return;
  case HS_WAIT_SHARED:
    if (chans[0].hs == HS_READY && chans[0].sid[0]) {
      memcpy(c->sid, chans[0].sid, sizeof c->sid);
      c->hs = HS_READY;
      produce(c);
    } else if (chans[0].hs == HS_READY) {
      c->hs = HS_READY; /* stateless server */
      produce(c);
    }
    return;
  default:
    return;
  }
}

static bool all_ready(void) {
  for (int i = 0; i < nchans; i++)
    if (chans[i].hs != HS_READY || chans[i].np) return false;
  return true;
}

typedef bool (*until_fn)(void);
static bool until_calls(void) { return R.calls_done >= R.phase_limit; }
static bool until_sessions(void) {
  if (R.sessions_started < opt.sessions) return false;
  for (int i = 0; i < nchans; i++)
    if (chans[i].np || (chans[i].hs != HS_NONE && chans[i].hs != HS_FAILED)) return false;
  return true;
}

/* Runs until `until` holds; false on deadline or when the stdio server died. */
static bool run_loop(until_fn until) {
  struct pollfd *pf = xrealloc(NULL, sizeof(struct pollfd) * (size_t)(2 * nchans));
  int *pmap = xrealloc(NULL, sizeof(int) * (size_t)(2 * nchans));
  bool ok = true;
  uint64_t prev_errors = R.errors;
  for (;;) {
    for (int i = 0; i < nchans; i++) {
      produce(&chans[i]);
      if (buf_avail(&chans[i].out)) flush_out(&chans[i]);
    }
    if (R.t_stop && R.measuring && R.call_k < R.phase_limit && now_ns() >= R.t_stop) R.phase_limit = R.call_k;
    if (until()) break;
    if (R.errors > prev_errors + 1000) {
      fprintf(stderr, "loadclient: over 1000 errors, giving up\n");
      ok = false;
      break;
    }
    for (int i = 0; i < nchans; i++)
      if (chans[i].hs == HS_FAILED) {
        fprintf(stderr, "loadclient: connection %d failed\n", i);
        ok = false;
        goto out;
      }
    if (now_ns() > R.deadline) {
      fprintf(stderr, "loadclient: timeout (--timeout %.0f s): %" PRIu64 " of %" PRIu64 " calls answered\n",
              opt.timeout_s, R.calls_done, R.phase_limit);
      R.errors++;
      ok = false;
      break;
    }
    int np = 0;
    for (int i = 0; i < nchans; i++) {
      chan *c = &chans[i];
      if (c->rfd < 0) continue;
      if (c->rfd == c->wfd) {
        pf[np] = (struct pollfd){c->rfd, (short)(POLLIN | (buf_avail(&c->out) ? POLLOUT : 0)), 0};
        pmap[np++] = i;
      } else {
        pf[np] = (struct pollfd){c->rfd, POLLIN, 0};
        pmap[np++] = i;
        if (buf_avail(&c->out) && c->wfd >= 0) {
          pf[np] = (struct pollfd){c->wfd, POLLOUT, 0};
          pmap[np++] = i;
        }
      }
    }
    if (np == 0) {
      /* nothing can progress: e.g. all connections failed */
      bool any = false;
      for (int i = 0; i < nchans; i++) any |= chans[i].hs != HS_READY || chans[i].np;
      if (!any && until()) break;
      if (chans[0].http) { struct timespec ts = {0, 1000000}; nanosleep(&ts, NULL); continue; }
      ok = false;
      break;
    }
    struct timespec wait = {0, 100000000};
    if (opt.rate > 0 && R.call_k < R.phase_limit) { /* wake when the next call is due */
      uint64_t due = due_ns(R.call_k), now = now_ns();
      uint64_t ns = due > now ? due - now : 0;
      if (ns < 100000000) wait.tv_nsec = (long)ns;
    }
    int n = ppoll(pf, (nfds_t)np, &wait, NULL);
    if (n < 0 && errno != EINTR) die("poll: %s", strerror(errno));
    for (int k = 0; k < np && n > 0; k++) {
      if (!pf[k].revents) continue;
      chan *c = &chans[pmap[k]];
      if (pf[k].revents & POLLOUT) flush_out(c);
      if (pf[k].revents & (POLLIN | POLLHUP | POLLERR)) {
        if (pf[k].fd != c->rfd) { /* stdin of the server closed */
          if (pf[k].revents & (POLLHUP | POLLERR)) c->dead = true;
          continue;
        }
        if (c->http) http_read(c);
        else stdio_read(c);
      }
    }
    if (opt.rss_every) rss_sample();
    for (int i = 0; i < nchans; i++) {
      chan *c = &chans[i];
      if (!c->http && c->dead) {
        fprintf(stderr, "loadclient: the server closed its stdout (exited?) with %d request(s) in flight\n", c->np);
        for (int j = 0; j < c->np; j++)
          if (c->pend[j].kind == K_CALL) { R.errors++; call_done(&c->pend[j]); }
        R.errors++;
        c->np = 0;
        ok = false;
        goto out;
      }
    }
  }
out:
  free(pf);
  free(pmap);
  return ok;
}

/* ---------------------------------------------------------- results */

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}
static double pct(uint64_t *v, uint64_t n, double p) {
  if (!n) return -1;
  double r = p * (double)n;
  uint64_t idx = (uint64_t)r;
  if ((double)idx < r) idx++;
  if (idx == 0) idx = 1;
  if (idx > n) idx = n;
  return (double)v[idx - 1];
}
static double median_d(double *v, int n) {
  if (n <= 0) return -1;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
      double t = v[j];
      v[j] = v[j - 1];
      v[j - 1] = t;
    }
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void json_str(FILE *f, const char *k, const char *v) {
  fprintf(f, ",\"%s\":\"", k);
  for (; *v; v++) {
    if (*v == '"' || *v == '\\') fputc('\\', f), fputc(*v, f);
    else if ((unsigned char)*v < 0x20) fprintf(f, "\\u%04x", *v);
    else fputc(*v, f);
  }
  fputc('"', f);
}
static void json_num(FILE *f, const char *k, double v) {
  if (v != v) fprintf(f, ",\"%s\":null", k);
  else if (v == (double)(long long)v && v < 1e15 && v > -1e15) fprintf(f, ",\"%s\":%lld", k, (long long)v);
  else fprintf(f, ",\"%s\":%.3f", k, v);
}
static void json_num_or_null(FILE *f, const char *k, double v, bool have) {
  if (have) json_num(f, k, v);
  else fprintf(f, ",\"%s\":null", k);
}

/* ---------------------------------------------------------- main */

static void usage(FILE *f) {
  fputs(
      "usage: loadclient [options] -- SERVER-COMMAND [ARGS...]   (stdio: spawns the server)\n"
      "       loadclient [options] --http http://127.0.0.1:PORT/PATH\n"
      "       loadclient [options] --ws ws://127.0.0.1:PORT/PATH   (subprotocol mcp, a session per connection)\n"
      "       loadclient --mode startup [--http URL] -- SERVER-COMMAND [ARGS...]\n"
      "       loadclient --free-port\n"
      "options:\n"
      "  --mode seq|pipe|startup|sessions  (default seq)\n"
      "      seq: one call in flight (per connection); pipe: --window calls in flight\n"
      "      startup: spawn the server --repeat times, time fork -> initialize answer\n"
      "      sessions: HTTP only, create --sessions sessions, report server RSS\n"
      "  -n, --calls N          measured calls (default 1000)\n"
      "  --warmup N             unmeasured calls first (default 100)\n"
      "  -d, --duration S       measure for S seconds instead (then -n is a cap, default\n"
      "                         none); in-flight calls are still waited for\n"
      "  --window W             calls in flight in pipe mode (default 64; HTTP: per\n"
      "                         connection, i.e. HTTP/1.1 pipelining, default 1)\n"
      "  --rate R               open loop: call i goes out no earlier than t0 + i/R s\n"
      "                         (t0: the start of the warm-up, again of the measured\n"
      "                         phase), whether or not earlier calls were answered;\n"
      "                         pipe mode's window defaults to the most (1024), so the\n"
      "                         pace limits, not the window; latency counts from when\n"
      "                         a call was due; calls_per_s is what was achieved\n"
      "  --wait-file PATH       after the handshake, wait until PATH exists (a script\n"
      "                         attaching something to the server first)\n"
      "  -c, --connections C    HTTP connections (default 1); each one a closed loop\n"
      "  --shared-session       HTTP: one session for all connections (default: one\n"
      "                         session per connection)\n"
      "  --cpu N                pin this client to CPU N (sched_setaffinity)\n"
      "  --server-cpu N         pin the spawned server to CPU N\n"
      "  --server-pid PID       server process for CPU/RSS figures (HTTP)\n"
      "  --no-sum-check         accept any text result (raw echo floor)\n"
      "  --repeat N             startup: number of spawns (default 10)\n"
      "  --sessions N           sessions mode: how many (default 10000)\n"
      "  --verify-sessions N    sessions mode: call add on N of them after (default 20)\n"
      "  --rss-every N          sample server RSS every N measured calls\n"
      "  --timeout S            give up after S seconds (default 300)\n"
      "  --connect-timeout S    HTTP: retry connecting for up to S seconds first (a\n"
      "                         server that is still starting); default: no retry\n"
      "  --server-stderr FILE   where a spawned server's stderr goes (default inherit)\n"
      "  --tool NAME            tool to call (default add)\n"
      "  --a2a                  HTTP: A2A 1.0 instead of MCP: SendMessage \"add A B\" to\n"
      "                         the URL (no handshake), answered by a message whose\n"
      "                         text is the sum\n"
      "  --extra-args JSON      more members for the call's arguments, e.g. '\"c\":1'\n"
      "  --payload KIND         instead of add: text (tools/call text {bytes}), echo\n"
      "                         (tools/call echo {text}), structured (tools/call\n"
      "                         structured {bytes}) or blob (resources/read\n"
      "                         blob://BYTES); every answer must carry exactly the\n"
      "                         payload of bench/payload.h; rss_peak_kb is VmHWM\n"
      "  --bytes N              the payload's size (default 0)\n"
      "  --protocol-version V   (default 2025-11-25); 2026-07-28 or later: no\n"
      "                         handshake, each call carries its version, client\n"
      "                         capabilities and info in _meta (over HTTP also\n"
      "                         MCP-Protocol-Version, Mcp-Method and Mcp-Name) and\n"
      "                         must come back with resultType \"complete\"\n"
      "  --label STR            copied into the JSON output\n"
      "  --header 'NAME: VALUE' HTTP: one more header on every request (e.g.\n"
      "                         'Authorization: Bearer TOKEN')\n"
      "  -q, --quiet            no human line on stderr\n"
      "output: one JSON line on stdout, one human line on stderr.\n"
      "exit: 0 ok, 1 wrong/missing responses or server died, 2 usage/set-up error\n",
      f);
}

static uint64_t num_arg(const char *s, const char *name) {
  char *e;
  errno = 0;
  double v = strtod(s, &e);
  if (e == s || *e || errno || v < 0) die("bad value for %s: %s", name, s);
  return (uint64_t)v;
}

/* --ws: connect and upgrade (blocking, before the run), the 101's
 * leftover bytes kept as the first input. */
static void ws_open(chan *c) {
  int fd = tcp_connect(false);
  char req[1600];
  int n = snprintf(req, sizeof req,
                   "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
                   "Sec-WebSocket-Protocol: mcp\r\n%s%s\r\n",
                   http_path, http_hostport, opt.header ? opt.header : "", opt.header ? "\r\n" : "");
  for (int off = 0; off < n;) {
    ssize_t w = write(fd, req + off, (size_t)(n - off));
    if (w > 0) off += (int)w;
    else if (w < 0 && errno != EAGAIN && errno != EINTR) die("ws: write: %s", strerror(errno));
    else poll(&(struct pollfd){.fd = fd, .events = POLLOUT}, 1, 1000);
  }
  char *end = NULL;
  while (!end) {
    if (now_ns() > R.deadline) die("ws: no answer to the upgrade");
    buf_reserve(&c->in, 4096);
    ssize_t r = read(fd, c->in.p + c->in.len, c->in.cap - c->in.len - 1);
    if (r > 0) {
      c->in.len += (size_t)r;
      c->in.p[c->in.len] = '\0';
      end = strstr(c->in.p, "\r\n\r\n");
    } else if (r == 0 || (errno != EAGAIN && errno != EINTR)) {
      die("ws: the server closed the upgrade");
    } else {
      poll(&(struct pollfd){.fd = fd, .events = POLLIN}, 1, 1000);
    }
  }
  if (strncmp(c->in.p, "HTTP/1.1 101", 12)) die("ws: the upgrade was refused: %.80s", c->in.p);
  c->in.off = (size_t)(end + 4 - c->in.p);
  c->rfd = c->wfd = fd;
  c->dead = false;
}

static void init_chans(int n, bool http) {
  nchans = n;
  chans = xrealloc(NULL, sizeof(chan) * (size_t)n);
  memset(chans, 0, sizeof(chan) * (size_t)n);
  for (int i = 0; i < n; i++) {
    chans[i].idx = i;
    chans[i].http = http;
    chans[i].rfd = chans[i].wfd = -1;
    chans[i].dead = http;
    hp_reset(&chans[i]);
  }
}

static int run_startup(cpu_set_t *orig) {
  double *t = xrealloc(NULL, sizeof(double) * (size_t)opt.repeat);
  double *te = xrealloc(NULL, sizeof(double) * (size_t)opt.repeat);
  int nt = 0, nte = 0;
  double tmin = 1e18, tmax = 0;
  long rss_kb = -1;
  for (int i = 0; i < opt.repeat; i++) {
    R.deadline = now_ns() + (uint64_t)(opt.timeout_s * 1e9);
    init_chans(1, opt.url != NULL);
    chan *c = &chans[0];
    int to, from;
    uint64_t t0 = now_ns();
    pid_t pid = spawn_server(&to, &from, orig, opt.url != NULL);
    R.child = pid;
    bool ok = false;
    if (!opt.url) {
      c->rfd = from;
      c->wfd = to;
      set_nonblock(to);
      set_nonblock(from);
      chan_send(c, K_INIT, 0);
      c->hs = HS_INIT_SENT;
      flush_out(c);
      R.phase_limit = 0;
      ok = run_loop(all_ready) || c->hs == HS_INIT_DONE;
      ok = ok && c->hs >= HS_INIT_DONE;
    } else {
      /* poll-connect until the server listens */
      int fd = -1;
      while (now_ns() < R.deadline) {
        fd = tcp_connect(true);
        if (fd >= 0) break;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) { R.child_dead = true; break; }
        struct timespec ts = {0, 250000};
        nanosleep(&ts, NULL);
      }
      if (fd >= 0) {
        c->rfd = c->wfd = fd;
        c->dead = false;
        hp_reset(c);
        chan_send(c, K_INIT, 0);
        c->hs = HS_INIT_SENT;
        R.phase_limit = 0;
        run_loop(all_ready);
        ok = c->hs >= HS_INIT_DONE;
      }
    }
    uint64_t t1 = R.t_init ? R.t_init : now_ns();
    R.t_init = 0;
    if (ok) {
      double ms = (double)(t1 - t0) / 1e6;
      t[nt++] = ms;
      if (ms < tmin) tmin = ms;
      if (ms > tmax) tmax = ms;
      long kb = proc_rss_kb(pid);
      if (kb > rss_kb) rss_kb = kb;
    } else {
      report_error("startup: no initialize answer", NULL, 0);
    }
    if (!opt.url) {
      double ems = stop_child(pid, c->wfd, c->rfd);
      if (ems >= 0) te[nte++] = ems;
    } else {
      if (c->rfd >= 0) close(c->rfd);
      close(to);
      kill(pid, SIGTERM);
      int st;
      if (!wait_exit(pid, 3000, &st)) { kill(pid, SIGKILL); waitpid(pid, &st, 0); }
    }
    R.child = 0;
    free(chans);
  }
  double med = median_d(t, nt);
  double emed = median_d(te, nte);
  printf("{\"label\":\"%s\",\"transport\":\"%s\",\"mode\":\"startup\"", opt.label, opt.url ? "http" : "stdio");
  json_num(stdout, "repeat", opt.repeat);
  json_num(stdout, "ok", nt);
  json_num(stdout, "errors", (double)R.errors);
  json_num_or_null(stdout, "startup_ms_median", med, nt > 0);
  json_num_or_null(stdout, "startup_ms_min", tmin, nt > 0);
  json_num_or_null(stdout, "startup_ms_max", tmax, nt > 0);
  json_num_or_null(stdout, "rss_at_init_kb", (double)rss_kb, rss_kb >= 0);
  if (!opt.url) {
    json_num_or_null(stdout, "exit_on_eof_ms_median", emed, nte > 0);
    json_num(stdout, "exited_on_eof", nte);
  }
  json_str(stdout, "server_name", R.server_name);
  json_str(stdout, "protocol_version", R.proto_neg);
  printf("}\n");
  fflush(stdout);
  if (!opt.quiet)
    fprintf(stderr, "%s startup (%s): median %.2f ms (min %.2f, max %.2f) over %d spawns%s\n", opt.label,
            opt.url ? "http" : "stdio", med, nt ? tmin : 0, tmax, nt,
            (!opt.url && nte < opt.repeat) ? "; some did not exit on stdin EOF" : "");
  return (R.errors || nt != opt.repeat) ? 1 : 0;
}

int main(int argc, char **argv) {
  clk_tck = sysconf(_SC_CLK_TCK);
  signal(SIGPIPE, SIG_IGN);
  int i;
  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
#define NEXT() (i + 1 < argc ? argv[++i] : (die("%s needs a value", a), ""))
    if (!strcmp(a, "--")) { i++; break; }
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(stdout); return 0; }
    else if (!strcmp(a, "--mode")) {
      const char *m = NEXT();
      int k;
      for (k = 0; k < 4 && strcmp(m, mode_name[k]); k++) ;
      if (k == 4) die("unknown mode %s", m);
      opt.mode = k;
    } else if (!strcmp(a, "-n") || !strcmp(a, "--calls")) opt.calls = num_arg(NEXT(), a), opt.calls_given = true;
    else if (!strcmp(a, "--warmup")) opt.warmup = num_arg(NEXT(), a);
    else if (!strcmp(a, "-d") || !strcmp(a, "--duration")) opt.duration_s = strtod(NEXT(), NULL);
    else if (!strcmp(a, "--rate")) {
      opt.rate = strtod(NEXT(), NULL);
      if (!(opt.rate > 0)) die("--rate wants calls per second > 0");
    } else if (!strcmp(a, "--wait-file")) opt.wait_file = NEXT();
    else if (!strcmp(a, "--window")) opt.window = (int)num_arg(NEXT(), a);
    else if (!strcmp(a, "-c") || !strcmp(a, "--connections")) opt.conns = (int)num_arg(NEXT(), a);
    else if (!strcmp(a, "--shared-session")) opt.shared_session = true;
    else if (!strcmp(a, "--cpu")) opt.cpu = (int)num_arg(NEXT(), a);
    else if (!strcmp(a, "--server-cpu")) opt.server_cpu = (int)num_arg(NEXT(), a);
    else if (!strcmp(a, "--server-pid")) opt.server_pid = (pid_t)num_arg(NEXT(), a);
    else if (!strcmp(a, "--no-sum-check")) opt.no_sum_check = true;
    else if (!strcmp(a, "--repeat")) opt.repeat = (int)num_arg(NEXT(), a);
    else if (!strcmp(a, "--sessions")) opt.sessions = num_arg(NEXT(), a);
    else if (!strcmp(a, "--verify-sessions")) opt.verify_sessions = (int)num_arg(NEXT(), a);
    else if (!strcmp(a, "--rss-every")) opt.rss_every = num_arg(NEXT(), a);
    else if (!strcmp(a, "--timeout")) opt.timeout_s = (double)num_arg(NEXT(), a);
    else if (!strcmp(a, "--connect-timeout")) opt.connect_timeout_s = strtod(NEXT(), NULL);
    else if (!strcmp(a, "--server-stderr")) opt.server_stderr = NEXT();
    else if (!strcmp(a, "--tool")) opt.tool = NEXT();
    else if (!strcmp(a, "--a2a")) opt.a2a = true;
    else if (!strcmp(a, "--extra-args")) opt.extra_args = NEXT();
    else if (!strcmp(a, "--payload")) opt.payload = NEXT();
    else if (!strcmp(a, "--bytes")) opt.bytes = num_arg(NEXT(), a);
    else if (!strcmp(a, "--protocol-version")) opt.proto = NEXT();
    else if (!strcmp(a, "--label")) opt.label = NEXT();
    else if (!strcmp(a, "--header")) opt.header = NEXT();
    else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) opt.quiet = true;
    else if (!strcmp(a, "--http")) opt.url = NEXT();
    else if (!strcmp(a, "--ws")) {
      const char *u = NEXT();
      if (strncmp(u, "ws://", 5)) die("bad URL (want ws://127.0.0.1:PORT/PATH): %s", u);
      static char as_http[1100];
      snprintf(as_http, sizeof as_http, "http://%s", u + 5);
      opt.url = as_http;
      opt.ws = true;
    }
    else if (!strcmp(a, "--free-port")) {
      int fd = socket(AF_INET, SOCK_STREAM, 0);
      struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
      socklen_t sl = sizeof sa;
      if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || getsockname(fd, (struct sockaddr *)&sa, &sl))
        die("free-port: %s", strerror(errno));
      printf("%d\n", ntohs(sa.sin_port));
      close(fd);
      return 0;
    } else if (a[0] == '-') {
      usage(stderr);
      die("unknown option %s", a);
    } else break;
#undef NEXT
  }
  if (i < argc) opt.argv = &argv[i];
  if (opt.url && !parse_url(opt.url)) die("bad URL (want http://127.0.0.1:PORT/PATH): %s", opt.url);
  if (!opt.url && !opt.argv) { usage(stderr); die("give a server command after -- or --http URL"); }
  if (opt.mode == MODE_STARTUP && !opt.argv) die("startup mode needs a server command after --");
  if (opt.mode == MODE_SESSIONS && !opt.url) die("sessions mode needs --http URL");
  if (opt.ws && (opt.mode == MODE_STARTUP || opt.mode == MODE_SESSIONS || opt.shared_session))
    die("--ws: seq or pipe mode, a session per connection");
  if (modern_era() && (opt.mode == MODE_STARTUP || opt.mode == MODE_SESSIONS || opt.shared_session))
    die("--protocol-version %s has no handshake and no sessions: use seq or pipe mode", opt.proto);
  if (opt.payload && opt.url && modern_era()) die("--payload over HTTP speaks the 2025-11-25 era only");
  if (opt.payload) payload_prepare();
  if (opt.window < 0) opt.window = opt.mode == MODE_PIPE ? (opt.rate > 0 ? MAXWIN : !opt.url ? 64 : 1) : 1;
  if (opt.mode == MODE_SEQ) opt.window = 1;
  if (opt.window < 1 || opt.window > MAXWIN) die("--window must be 1..%d", MAXWIN);
  if (opt.conns < 1 || opt.conns > MAXCONN) die("--connections must be 1..%d", MAXCONN);
  if (!opt.url) opt.conns = 1;

  cpu_set_t orig;
  bool have_orig = sched_getaffinity(0, sizeof orig, &orig) == 0;
  if (opt.cpu >= 0) {
    cpu_set_t m;
    CPU_ZERO(&m);
    CPU_SET(opt.cpu, &m);
    if (sched_setaffinity(0, sizeof m, &m)) die("sched_setaffinity(cpu %d): %s", opt.cpu, strerror(errno));
  }

  if (opt.mode == MODE_STARTUP) return run_startup(have_orig ? &orig : NULL);

  R.deadline = now_ns() + (uint64_t)(opt.timeout_s * 1e9);
  R.next_id = 1;
  init_chans(opt.conns, opt.url != NULL && !opt.ws);
  pid_t spid = opt.server_pid;
  if (opt.url && opt.connect_timeout_s > 0) {
    uint64_t until = now_ns() + (uint64_t)(opt.connect_timeout_s * 1e9);
    for (;;) {
      int fd = tcp_connect(true);
      if (fd >= 0) { close(fd); break; }
      if (now_ns() > until) die("connect %s: %s (waited %.1f s)", http_hostport, strerror(errno), opt.connect_timeout_s);
      if (opt.server_pid && kill(opt.server_pid, 0) && errno == ESRCH) die("server pid %d is gone", (int)opt.server_pid);
      struct timespec ts = {0, 5000000};
      nanosleep(&ts, NULL);
    }
  }
  if (!opt.url) {
    int to, from;
    R.child = spawn_server(&to, &from, have_orig ? &orig : NULL, false);
    spid = R.child;
    chans[0].rfd = from;
    chans[0].wfd = to;
    chans[0].dead = false;
    set_nonblock(to);
    set_nonblock(from);
  }
  if (opt.ws)
    for (int i = 0; i < nchans; i++) ws_open(&chans[i]);
  const char *transport = opt.ws ? "ws" : opt.url ? "http" : "stdio";
  bool ok = true;

  /* handshake (all connections) */
  uint64_t t_hs0 = now_ns();
  if (opt.mode == MODE_SESSIONS) {
    R.sessions_mode = true;
    long rss0 = spid ? proc_rss_kb(spid) : -1;
    double cpu0 = 0;
    bool hc0 = spid && proc_cpu_us(spid, &cpu0);
    ok = run_loop(until_sessions);
    uint64_t t_hs1 = now_ns();
    struct timespec settle = {0, 200000000}; /* let the server finish its bookkeeping */
    nanosleep(&settle, NULL);
    long rss1 = spid ? proc_rss_kb(spid) : -1;
    double cpu1 = 0;
    bool hc1 = hc0 && proc_cpu_us(spid, &cpu1);
    /* verify: a call on a spread of the sessions created */
    R.sessions_mode = false;
    uint64_t nv = (uint64_t)opt.verify_sessions < R.nsids ? (uint64_t)opt.verify_sessions : R.nsids;
    uint64_t verified = 0;
    for (uint64_t v = 0; v < nv && ok; v++) {
      uint64_t s = nv > 1 ? v * (R.nsids - 1) / (nv - 1) : 0;
      chan *c = &chans[0];
      snprintf(c->sid, sizeof c->sid, "%s", R.sids[s]);
      c->hs = HS_READY;
      uint64_t before = R.errors;
      R.phase_limit = R.call_k + 1;
      opt.window = 1;
      int save = nchans; /* only connection 0 is used */
      nchans = 1;
      ok = run_loop(until_calls);
      nchans = save;
      if (R.errors == before) verified++;
    }
    double el = (double)(t_hs1 - t_hs0) / 1e9;
    printf("{\"label\":\"%s\",\"transport\":\"http\",\"mode\":\"sessions\"", opt.label);
    json_num(stdout, "sessions", (double)R.nsids);
    json_num(stdout, "connections", opt.conns);
    json_num(stdout, "errors", (double)R.errors);
    json_num(stdout, "elapsed_s", el);
    json_num(stdout, "sessions_per_s", el > 0 ? (double)R.nsids / el : 0);
    json_num_or_null(stdout, "rss_before_kb", (double)rss0, rss0 >= 0);
    json_num_or_null(stdout, "rss_after_kb", (double)rss1, rss1 >= 0);
    json_num_or_null(stdout, "rss_per_session_kb", R.nsids ? (double)(rss1 - rss0) / (double)R.nsids : 0,
                     rss0 >= 0 && rss1 >= 0 && R.nsids);
    json_num_or_null(stdout, "server_cpu_us_per_session", R.nsids ? (cpu1 - cpu0) / (double)R.nsids : 0,
                     hc1 && R.nsids);
    json_num(stdout, "verified", (double)verified);
    json_num(stdout, "verify_wanted", (double)nv);
    json_str(stdout, "server_name", R.server_name);
    json_str(stdout, "protocol_version", R.proto_neg);
    printf("}\n");
    fflush(stdout);
    if (!opt.quiet)
      fprintf(stderr, "%s: %" PRIu64 " sessions in %.2f s over %d connections; server RSS %ld -> %ld kB (%.2f kB/session); %" PRIu64 "/%" PRIu64 " verified\n",
              opt.label, R.nsids, el, opt.conns, rss0, rss1,
              R.nsids ? (double)(rss1 - rss0) / (double)R.nsids : 0.0, verified, nv);
    return (ok && !R.errors && R.nsids == opt.sessions && verified == nv) ? 0 : 1;
  }

  R.phase_limit = 0;
  ok = run_loop(all_ready);
  double hs_ms = (double)(now_ns() - t_hs0) / 1e6;
  long rss_idle = spid ? proc_rss_kb(spid) : -1;

  if (ok && opt.wait_file) {
    struct timespec tick = {0, 10000000};
    while (access(opt.wait_file, F_OK) != 0) {
      if (now_ns() > R.deadline) die("--wait-file %s: not there after %.0f s (--timeout)", opt.wait_file, opt.timeout_s);
      if (R.child && waitpid(R.child, NULL, WNOHANG) == R.child) die("the server exited while waiting for %s", opt.wait_file);
      nanosleep(&tick, NULL);
    }
  }
  /* warm-up */
  if (ok && opt.warmup) {
    pace_start();
    R.phase_limit = opt.warmup;
    ok = run_loop(until_calls);
  }
  double cpu0 = 0, cpu1 = 0, scpu0 = self_cpu_us(), scpu1, sch0 = 0, sch1 = 0;
  bool have_sched = spid && proc_sched_us(spid, &sch0);
  bool have_cpu = spid && proc_cpu_us(spid, &cpu0);
  long rss0 = spid ? proc_rss_kb(spid) : -1;
  uint64_t warm_done = R.calls_done;
  R.rss_next = opt.rss_every;
  if (opt.rss_every) buf_printf(&R.rss_samples, "0:%ld", rss0);
  uint64_t t0 = now_ns();
  uint64_t k0 = R.call_k;
  pace_start();
  if (opt.duration_s > 0) {
    R.t_stop = t0 + (uint64_t)(opt.duration_s * 1e9);
    if (!opt.calls_given) opt.calls = UINT64_MAX / 4;
  }
  if (ok) {
    R.measuring = true;
    R.phase_limit = R.call_k + opt.calls;
    ok = run_loop(until_calls);
  }
  uint64_t sent = R.call_k - k0; /* measured calls issued */
  uint64_t t1 = now_ns();
  scpu1 = self_cpu_us();
  have_cpu = have_cpu && proc_cpu_us(spid, &cpu1);
  have_sched = have_sched && proc_sched_us(spid, &sch1) && sch1 >= sch0;
  long rss1 = spid ? proc_rss_kb(spid) : -1;
  long hwm = spid ? proc_hwm_kb(spid) : -1;
  uint64_t measured = R.calls_done - warm_done;
  double el = (double)(t1 - t0) / 1e9;

  double exit_ms = -2;
  if (R.child) exit_ms = stop_child(R.child, chans[0].wfd, chans[0].rfd);
  for (int k = 0; k < nchans; k++)
    if (chans[k].http && chans[k].rfd >= 0) close(chans[k].rfd);

  qsort(R.lat, R.nlat, sizeof(uint64_t), cmp_u64);
  double p50 = pct(R.lat, R.nlat, .50) / 1e3, p99 = pct(R.lat, R.nlat, .99) / 1e3,
         p999 = pct(R.lat, R.nlat, .999) / 1e3, pmax = R.nlat ? (double)R.lat[R.nlat - 1] / 1e3 : -1;
  double mean = 0;
  for (uint64_t k = 0; k < R.nlat; k++) mean += (double)R.lat[k];
  mean = R.nlat ? mean / (double)R.nlat / 1e3 : -1;
  double cps = el > 0 ? (double)measured / el : 0;
  int reconn = 0;
  for (int k = 0; k < nchans; k++) reconn += chans[k].reconnects > 1 ? chans[k].reconnects - 1 : 0;

  bool good = ok && R.errors == 0 && R.nlat == sent && sent > 0;
  printf("{\"label\":\"%s\",\"transport\":\"%s\",\"mode\":\"%s\"", opt.label, transport, mode_name[opt.mode]);
  json_str(stdout, "result", good ? "ok" : "FAIL");
  json_num(stdout, "calls", (double)sent);
  json_num(stdout, "duration_s", opt.duration_s);
  json_num(stdout, "ok", (double)R.nlat);
  json_num(stdout, "errors", (double)R.errors);
  json_num(stdout, "warmup", (double)opt.warmup);
  json_num(stdout, "window", opt.window);
  json_num(stdout, "connections", opt.conns);
  fprintf(stdout, ",\"session\":\"%s\"", !opt.url ? "stdio" : opt.shared_session ? "shared" : "per-connection");
  json_num(stdout, "cpu", opt.cpu);
  json_num(stdout, "server_cpu", opt.server_cpu);
  json_num(stdout, "elapsed_s", el);
  json_num(stdout, "calls_per_s", cps);
  if (opt.rate > 0) {
    json_num(stdout, "rate", opt.rate);
    json_num(stdout, "behind_max_us", (double)R.behind_max_ns / 1e3);
  }
  json_num_or_null(stdout, "lat_mean_us", mean, R.nlat > 0);
  json_num_or_null(stdout, "lat_p50_us", p50, R.nlat > 0);
  json_num_or_null(stdout, "lat_p99_us", p99, R.nlat > 0);
  json_num_or_null(stdout, "lat_p999_us", p999, R.nlat > 0);
  json_num_or_null(stdout, "lat_max_us", pmax, R.nlat > 0);
  json_num_or_null(stdout, "server_cpu_s", (cpu1 - cpu0) / 1e6, have_cpu);
  json_num_or_null(stdout, "server_cpu_us_per_call", measured ? (cpu1 - cpu0) / (double)measured : 0,
                   have_cpu && measured);
  json_num_or_null(stdout, "server_sched_us_per_call", measured ? (sch1 - sch0) / (double)measured : 0,
                   have_sched && measured);
  json_num(stdout, "client_cpu_us_per_call", measured ? (scpu1 - scpu0) / (double)measured : 0);
  json_num_or_null(stdout, "rss_idle_kb", (double)rss_idle, rss_idle >= 0);
  json_num_or_null(stdout, "rss_before_kb", (double)rss0, rss0 >= 0);
  json_num_or_null(stdout, "rss_after_kb", (double)rss1, rss1 >= 0);
  json_num_or_null(stdout, "rss_peak_kb", (double)hwm, hwm >= 0);
  if (opt.payload) {
    json_str(stdout, "payload", opt.payload);
    json_num(stdout, "payload_bytes", (double)opt.bytes);
  }
  json_num(stdout, "handshake_ms", hs_ms);
  if (R.child) {
    json_num_or_null(stdout, "exit_on_eof_ms", exit_ms, exit_ms >= 0);
  }
  json_num(stdout, "reconnects", reconn);
  json_num(stdout, "server_notifications", (double)R.notifs_ignored);
  if (opt.rss_every) json_str(stdout, "rss_samples", R.rss_samples.p ? R.rss_samples.p : "");
  json_str(stdout, "server_name", R.server_name);
  json_str(stdout, "protocol_version", R.proto_neg);
  printf("}\n");
  fflush(stdout);
  if (!opt.quiet) {
    char conn[64] = "";
    if (opt.url) snprintf(conn, sizeof conn, ", %d conn%s", opt.conns, opt.conns > 1 ? "s" : "");
    char scpu[64] = "n/a";
    if (have_cpu && measured) snprintf(scpu, sizeof scpu, "%.1f", (cpu1 - cpu0) / (double)measured);
    if (have_sched && measured)
      snprintf(scpu + strlen(scpu), sizeof scpu - strlen(scpu), " (schedstat %.2f)", (sch1 - sch0) / (double)measured);
    char win[32] = "";
    if (opt.window > 1) snprintf(win, sizeof win, " window %d", opt.window);
    fprintf(stderr,
            "%s%s%s %s%s%s: %" PRIu64 " calls in %.3f s = %.0f calls/s; latency p50 %.1f p99 %.1f p999 %.1f us; "
            "server CPU %s us/call, client %.1f; server RSS %ld -> %ld kB; %s\n",
            opt.label, opt.label[0] ? ": " : "", transport, mode_name[opt.mode], win, conn, measured, el, cps, p50,
            p99, p999, scpu, measured ? (scpu1 - scpu0) / (double)measured : 0.0, rss0, rss1,
            good ? "all answers correct" : "ERRORS");
  }
  return good ? 0 : 1;
}
