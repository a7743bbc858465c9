/*
 * main.c - the luamcp command line.
 */
#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "cli/auth_setup.h"
#include "cli/build.h"
#include "cli/release.h"
#include "cli/client.h"
#include "cli/inspector.h"
#include "cli/install.h"
#include "cli/start_line.h"
#include "cli/suggest.h"
#include "cli/supervisor.h"
#include "core/jobs.h"
#include "core/bundle.h"
#include "transport/http_route.h"
#include "transport/http_transport.h"
#include "transport/http_util.h"
#include "core/luamcp_limits.h"
#include "core/log.h"
#include "core/server.h"
#include "core/state_token.h"
#include "transport/stdio_transport.h"
#include "app/metrics.h"
#include "transport/worker_ipc.h"
#include "cli/version.h"
#include "app/otel.h"
#include "app/confine.h"
#include "os/proc.h"
#include "os/self.h"
#include "os/signals.h"
#include "app/redis.h"
#include "app/reload.h"
#include "app/vm.h"

#define LUAMCP_STR_(x) #x
#define LUAMCP_STR(x) LUAMCP_STR_(x)

/* How this process was started: the workers of --workers N run it again. */
static int main_argc;
static char **main_argv;

/* Everything one `luamcp run` process owns. */
typedef struct runtime {
  uv_loop_t *loop;
  server srv;
  lua_app app;
  stdio_transport stdio;
  http_server *http; /* NULL when serving stdio */
  redis_link *redis; /* --redis, or NULL */
  bus *bus;          /* to the other processes: over Redis, or the other workers (app/bus.h) */
  auth_setup auth;   /* OAuth's verifier and settings (cli/auth_setup.h); empty when off */
  os_signals *signals; /* SIGTERM and SIGINT, or the console's events (os/signals.h) */
  uv_timer_t shutdown_timer;
  /* SIGTERM over HTTP: the drain (see on_signal). The timer ends it at
   * --drain-time; the prepare handle, run before the loop would wait,
   * ends it as soon as the last call is answered and written. */
  uv_timer_t drain_timer;
  uv_prepare_t drain_prepare;
  bool draining;
  int drain_time_s;
  bool worker; /* started by a supervisor (--worker K) */
  bool state_key_env; /* --state-key-env: the supervisor's key is not used */
  uv_check_t stop_check; /* stops the loop once no handler computes */
  uv_check_t log_check;  /* writes pending log lines once per loop turn ... */
  uv_timer_t log_retry;  /* ... and comes back for them while stderr is full */
  bool stopping;
  int exit_code;
  char where[600]; /* the start line's "over HTTP at ..." (a worker writes it when told) */
  http_observe_hooks observe; /* what /metrics and /readyz report */
  http_observe_hooks observe_all; /* the same, with the other workers' figures (--metrics under --workers) */
  observe_listener *metrics;  /* --metrics, or NULL */
  inspector *inspector;       /* --ui, or NULL */
  bool stdio_served;          /* the scripts' client is on stdio (not inspect --ui PATH, not --http) */
} runtime;

static const char *self_path(char *out, size_t n) {
  return os_self_exe(NULL, out, n) ? out : "luamcp";
}

/* The commands of luamcp itself (a built program has none of its own). */
static void usage_commands(FILE *to) {
  fprintf(to,
          "luamcp %s - Model Context Protocol servers written in Lua\n"
          "\n"
          "Usage:\n"
          "  luamcp run PATH [options]   serve the scripts in PATH (a .lua file, or a folder:\n"
          "                              every *.lua directly inside, in sorted order)\n"
          "  luamcp dev PATH [options]   run, reloading in place whenever a script changes\n"
          "                              (sessions and calls in flight survive); run\n"
          "                              reloads on SIGHUP\n"
          "  luamcp build PATH [-o OUT]  one executable with the scripts in PATH inside\n"
          "                              (also --target PLATFORM; 'luamcp build --help')\n"
          "  luamcp release PATH --registry-name NAME\n"
          "                              every door at once, into dist/: the programs, a\n"
          "                              .mcpb (signed), npm packages, an OCI image,\n"
          "                              server.json and SHA256SUMS\n"
          "  luamcp inspect PATH [--json] what the scripts in PATH serve: tools with their\n"
          "                              arguments, resources, templates, prompts (also\n"
          "                              --http URL, or -- COMMAND for any server)\n"
          "  luamcp call PATH TOOL [key=value...]\n"
          "                              call a tool and print what it returns (also\n"
          "                              --http URL, or TOOL ... -- COMMAND for any server)\n"
          "  luamcp read PATH URI        read a resource\n"
          "  luamcp prompt PATH NAME [key=value...]\n"
          "                              get a prompt\n"
          "  luamcp login URL            log in to a remote server in the browser (OAuth);\n"
          "                              call, read, prompt and mcp.client then use the\n"
          "                              kept token (--status: what is kept)\n"
          "  luamcp logout URL           forget the login kept for URL\n"
          "  luamcp test [SPEC...]       run busted specs in the runtime (require \"mcp.testing\")\n"
          "  luamcp init DIR             start a new server: a tool, a resource, a prompt, a spec\n"
          "  luamcp install CLIENT PATH  add PATH to the MCP configuration of claude-desktop,\n"
          "                              claude-code, cursor, vscode or gemini (--project:\n"
          "                              the project's file; --url URL: a remote server)\n"
          "  luamcp uninstall CLIENT NAME take the entry NAME out of CLIENT's configuration\n"
          "  luamcp help COMMAND         the options of one command (or: luamcp COMMAND --help)\n"
          "  luamcp --version            print the version\n"
          "  luamcp --help               print this help\n"
          "\n",
          LUAMCP_VERSION);
}

/* The options of run, dev and a built program, and how a client starts
 * the server: `luamcp run FOLDER`, or (bundled) the program alone. */
static void usage_options(FILE *to, bool bundled) {
  char self[PATH_MAX];
  char example[PATH_MAX];
  const char *exe = self_path(self, sizeof self);
  /* Suggest the example folder that sits next to build/luamcp, if any. */
  snprintf(example, sizeof example, "%s", exe);
  char *slash = strrchr(example, '/');
  if (slash) *slash = '\0';
  slash = strrchr(example, '/');
  if (slash) *slash = '\0';
  size_t used = strlen(example);
  snprintf(example + used, sizeof example - used, "/scripts/demo");
  if (access(example, F_OK) != 0) snprintf(example, sizeof example, "/path/to/your/scripts");
  fprintf(to,
          "Options:\n"
          "  --log-level LEVEL           debug, info, notice, warning, error, critical, alert or\n"
          "                              emergency: what reaches stderr, and the level clients get\n"
          "                              until they send logging/setLevel (default: info)\n"
          "  --trace FILE                write every message in and out, with direction and time,\n"
          "                              to FILE (\"-\" for stderr)\n"
          "  --ui                        the web inspector: a page on 127.0.0.1 that shows every\n"
          "                              message live, and calls the tools from forms; its address\n"
          "                              (with a token) is printed on stderr\n"
          "  --ui-port N                 ... on this port (default: a free one)\n"
          "  --log-format FORMAT         text (the default) or json: one JSON object per line on\n"
          "                              stderr (time, level, message, and tool, request id,\n"
          "                              session when known)\n"
          "  --metrics [HOST:]PORT       serve /metrics (Prometheus), /healthz and /readyz on a\n"
          "                              listener of their own, without auth (HOST default\n"
          "                              127.0.0.1; not loopback needs --allow-remote; or\n"
          "                              unix:SOCKET, a Unix socket as for --http); over\n"
          "                              HTTP they are on the MCP port too;\n"
          "                              --metrics off: count nothing, no /metrics\n"
          "  --max-message-bytes N       largest message accepted (default: %u)\n"
          "  --page-size N               items per page of tools/list and the other lists\n"
          "                              (default: all in one page)\n"
          "  --timeout MS                a call's deadline unless its tool sets timeout_ms\n"
          "                              (default: %d; 0: none)\n"
          "  --load-timeout MS           how long loading the scripts may take, at start and\n"
          "                              at each reload (default: %d; 0: none)\n"
          "  --memory-limit MB           what the scripts' Lua state may allocate (default: %d; 0: no cap)\n"
          "  --client-timeout MS         how long a tool waits for the client to answer\n"
          "                              sampling, elicitation or roots (default: %d)\n"
          "  --max-tasks N               MCP tasks (the tasks extension) running at once\n"
          "                              (default: %d; 0: no cap)\n"
          "  --max-tasks-per-client N    ... for one client (default: a quarter of --max-tasks;\n"
          "                              over stdio, --max-tasks)\n"
          "\n"
          "Permissions (README \"Permissions\"; added to what mcp.server{permissions} declares):\n"
          "  --allow-read PATHS          files and folders tools may read (comma-separated)\n"
          "  --allow-write PATHS         ... and write\n"
          "  --allow-exec PROGRAMS       programs mcp.exec may run\n"
          "  --allow-net HOSTS           host or host:port mcp.http may reach\n"
          "  --allow-env NAMES           environment variables os.getenv may read\n"
          "  --allow-c-modules NAMES     Lua C modules require may load\n"
          "  --allow-all                 run unconfined, whatever the scripts declare\n"
          "\n"
          "  --state-key-env NAME        seal 2026-07-28 requestState with the secret in $NAME\n"
          "                              (shared by every process that serves the same clients;\n"
          "                              default: agreed through --redis, else random per process)\n"
          "  --redis URL                 redis://[[user]:password@]host[:port][/db] or unix:///path:\n"
          "                              mcp.store in Redis, and a bus that carries resource updates,\n"
          "                              list changes and tasks to every process on the same Redis\n"
          "  --redis-env NAME            the same, the URL read from $NAME: a password in it stays\n"
          "                              out of the command line (/proc/PID/cmdline), workers' too\n"
          "\n"
          "Streamable HTTP instead of stdio:\n"
          "  --http [HOST:]PORT[/PATH]   listen on HOST (default 127.0.0.1), path /mcp by default;\n"
          "                              port 0 picks a free port (printed on stderr)\n"
          "  --http unix:SOCKET[:/PATH]  listen on a Unix socket instead (Windows: a named pipe,\n"
          "                              unix:\\\\.\\pipe\\NAME), e.g. unix:/run/luamcp/mcp.sock:/mcp;\n"
          "                              a stale socket is replaced, a live one or any other file\n"
          "                              refused; removed at stop\n"
          "  --socket-mode MODE          the Unix socket's permission bits, in octal (default\n"
          "                              0600: only this user; 0660: its group too)\n"
          "  --allow-remote              allow a HOST that is not loopback, of --http and of\n"
          "                              --metrics (prints a warning)\n"
          "  --allow-host NAME           accept this Host header name too (repeatable)\n"
          "  --allow-origin ORIGIN       accept this Origin too, e.g. https://app.example (repeatable)\n"
          "  --bearer-token-env NAME     require Authorization: Bearer $NAME on every request\n"
          "  --sse-path PATH             serve the 2024-11-05 HTTP+SSE transport too: GET PATH opens a\n"
          "                              session's stream, its POSTs go to messages beside it\n"
          "                              (default /sse, POSTs to /messages?session_id=ID)\n"
          "  --no-sse                    serve Streamable HTTP only\n"
          "  --ws-path PATH              where WebSockets (subprotocol mcp) are served (default: the\n"
          "                              MCP path: GET /mcp with Upgrade: websocket)\n"
          "OAuth 2.1 resource server (README \"Authorization\"; each flag wins over mcp.server{auth}):\n"
          "  --auth-issuer URL           accept access tokens from this authorization server (turns\n"
          "                              OAuth on; not with --bearer-token-env)\n"
          "  --auth-audience URI         this server's canonical URI, the audience tokens must name\n"
          "                              (default on loopback: http://HOST/PATH of each request;\n"
          "                              required on any other address)\n"
          "  --auth-scopes \"A B\"         scopes_supported, and the scope= of a 401 challenge\n"
          "  --auth-jwks-uri URL         the JWK Set (default: found by discovery from the issuer)\n"
          "  --auth-jwks-file FILE       ... or read from a file (no fetching)\n"
          "  --auth-introspection-endpoint URL  check opaque tokens there (RFC 7662), as\n"
          "  --auth-client-id ID         ... this client, with the secret in the environment\n"
          "  --auth-client-secret-env NAME  variable NAME\n"
          "  --auth-algorithms \"RS256 ES256\"  the JWT algs allowed (default \"RS256 PS256 ES256 EdDSA\")\n"
          "  --auth-leeway SECONDS       clock skew forgiven on exp and nbf (default 60)\n"
          "  --max-connections N         connections at once (default %d)\n"
          "  --max-sessions N            sessions at once (default %d)\n"
          "  --session-timeout SECONDS   end sessions idle this long (default %d)\n"
          "  --http-memory MB            what replay buffers, unsent output and unread input may hold\n"
          "                              in all (default %d); the oldest replay events go first, then\n"
          "                              clients that do not read\n"
          "  --drain-time SECONDS        on SIGTERM or SIGINT, stop taking requests and give the calls\n"
          "                              in flight this long to finish (default %d; 0: cancel them at\n"
          "                              once; a second signal cancels them too)\n"
          "  --workers N                 serve from N processes sharing the port, each with its own\n"
          "                              Lua state; a free worker takes each new connection; they\n"
          "                              share tasks, resource updates and list changes (Redis not\n"
          "                              needed); a supervisor restarts them and passes SIGHUP on\n"
          "                              (mcp.info().worker tells which one runs a call)\n"
          "  --node NAME                 begin session ids with NAME. (NAME.wK-HEX), for a proxy\n"
          "                              to route legacy sessions by\n"
          "\n"
          "stdout carries only protocol messages; print() and io.write() in scripts go to stderr.\n"
          "\n"
          "Use it from Claude Desktop (claude_desktop_config.json) or any MCP client:\n"
          "\n"
          "  {\n"
          "    \"mcpServers\": {\n"
          "      \"%s\": {\n"
          "        \"command\": \"%s\"%s%s%s\n"
          "      }\n"
          "    }\n"
          "  }\n",
          DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_CALL_TIMEOUT_MS, DEFAULT_LOAD_TIMEOUT_MS, DEFAULT_MEMORY_LIMIT_MB,
          DEFAULT_CLIENT_TIMEOUT_MS, DEFAULT_MAX_TASKS, DEFAULT_HTTP_MAX_CONNECTIONS,
          DEFAULT_HTTP_MAX_SESSIONS, DEFAULT_HTTP_SESSION_TIMEOUT_S, DEFAULT_HTTP_MEMORY_MB, DEFAULT_DRAIN_TIME_S,
          bundled ? bundle_self()->name : "demo", exe, bundled ? "" : ",\n        \"args\": [\"run\", \"",
          bundled ? "" : example, bundled ? "" : "\"]");
}

static void usage(FILE *to) {
  usage_commands(to);
  usage_options(to, false);
}

/* luamcp run --help, luamcp dev --help. */
static void usage_serve(FILE *to, bool watch) {
  if (watch)
    fputs("Usage: luamcp dev PATH [options]\n"
          "  Serve the scripts in PATH as 'luamcp run' does, and reload them in place\n"
          "  whenever one changes: sessions and calls in flight survive a reload. The\n"
          "  wire trace goes to stderr unless --trace sends it elsewhere.\n\n",
          to);
  else
    fputs("Usage: luamcp run PATH [options]\n"
          "  Serve the scripts in PATH (a .lua file, or a folder: every *.lua directly\n"
          "  inside, in sorted order) on stdio, or over HTTP with --http. SIGHUP reloads\n"
          "  them in place.\n\n",
          to);
  usage_options(to, false);
}

/* Where a usage error points: the help of the command that failed. */
static const char *help_command = "luamcp --help";

static void fail_usage(const char *fmt, const char *arg) {
  fprintf(stderr, "luamcp: ");
  fprintf(stderr, fmt, arg);
  fprintf(stderr, "\nRun '%s' for usage.\n", help_command);
  exit(2);
}

/* The options of run and dev (a built program's too), for "did you mean". */
static void usage_run_options(FILE *to) { usage_options(to, false); }

static void fail_unknown_option(const char *option) {
  buf message = BUF_INIT;
  buf_printf(&message, "unknown option %s%s", option, suggest_option(option, usage_run_options));
  fail_usage("%s", message.data);
}

static long parse_count(const char *flag, const char *value, long min) {
  char *end;
  long n = value ? strtol(value, &end, 10) : -1;
  if (!value || *end || n < min) fail_usage("%s needs a whole number", flag);
  return n;
}

enum { MAX_ALLOWED = 32 };

typedef struct run_options {
  bool help;
  const char *path;
  const char *trace;
  const char *redis_url;  /* --redis, or the value of --redis-env's variable */
  const char *redis_env;  /* --redis-env NAME */
  bool state_key_env;     /* --state-key-env was given: every process has that key already */
  server_options server;
  bool http;
  int workers;       /* --workers N (0: not given) */
  int worker_index;  /* --worker K: this process is worker K of a supervisor (internal) */
  int worker_port;   /* --worker-port PORT: the port the supervisor reserved (internal) */
  int drain_time_s;  /* --drain-time SECONDS */
  const char *node;  /* --node NAME */
  /* --metrics [HOST:]PORT: the operator's listener (http_observe.c);
   * --metrics off: no counting at all, and no /metrics. */
  bool metrics;
  bool metrics_off;
  /* --ui: the web inspector on 127.0.0.1:ui_port (cli/inspector.h);
   * ui_only: inspect --ui PATH, the page is the only client (no stdio). */
  bool ui;
  bool ui_only;
  int ui_port;
  char metrics_host[256];
  int metrics_port;
  char metrics_local[108]; /* --metrics unix:SOCKET, or "" */
  http_options http_opts;
  auth_flags auth;   /* --auth-*: over mcp.server{auth}, field by field */
  const char *allow_hosts[MAX_ALLOWED];
  const char *allow_origins[MAX_ALLOWED];
  /* --allow-read and the others, as lua/mcp/permissions.lua reads them:
   * {"read": [...], ..., "all": true}; server.permissions_json points here. */
  buf permissions;
} run_options;

/* The --allow-KIND flags of run and dev, and the permission kinds they add to. */
static const char *const PERMISSION_FLAGS[][2] = {
    {"--allow-read", "read"}, {"--allow-write", "write"}, {"--allow-exec", "exec"},
    {"--allow-net", "net"},   {"--allow-env", "env"},     {"--allow-c-modules", "c_modules"},
};

/* Add VALUE (comma-separated) to KIND in the permissions JSON object. */
static void add_permission(buf *b, const char *kind, const char *value) {
  buf_putc(b, b->len ? ',' : '{');
  json_write_string(b, kind, strlen(kind));
  buf_puts(b, ":[");
  for (const char *p = value; *p;) {
    const char *comma = strchr(p, ',');
    size_t n = comma ? (size_t)(comma - p) : strlen(p);
    if (p != value) buf_putc(b, ',');
    json_write_string(b, p, n);
    p += n + (comma ? 1 : 0);
  }
  buf_putc(b, ']');
}

static void parse_run_options(int argc, char **argv, run_options *o) {
  server_options_defaults(&o->server);
  http_options_defaults(&o->http_opts);
  o->http_opts.families = HTTP_FAMILIES; /* the endpoints luamcp serves (http_routes.c) */
  o->drain_time_s = DEFAULT_DRAIN_TIME_S;
  o->http_opts.allow_hosts = o->allow_hosts;
  o->http_opts.allow_origins = o->allow_origins;
  auth_flags_init(&o->auth);
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *value = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--log-level") == 0) {
      int level = value ? log_level_parse(value, strlen(value)) : -1;
      if (level < 0) fail_usage("--log-level needs one of debug, info, notice, warning, error, critical, alert, emergency%s", "");
      o->server.default_log_level = level;
      log_set_level(level);
      i++;
    } else if (strcmp(a, "--trace") == 0) {
      if (!value) fail_usage("%s needs a file name (or - for stderr)", a);
      o->trace = value;
      i++;
    } else if (strcmp(a, "--max-message-bytes") == 0) {
      o->server.max_message_bytes = (size_t)parse_count(a, value, 64);
      i++;
    } else if (strcmp(a, "--page-size") == 0) {
      o->server.page_size = (int)parse_count(a, value, 0);
      i++;
    } else if (strcmp(a, "--timeout") == 0) {
      o->server.call_timeout_ms = (int)parse_count(a, value, 0);
      i++;
    } else if (strcmp(a, "--load-timeout") == 0) {
      o->server.load_timeout_ms = (int)parse_count(a, value, 0);
      i++;
    } else if (strcmp(a, "--memory-limit") == 0) {
      o->server.memory_limit = (size_t)parse_count(a, value, 0) * 1024 * 1024;
      i++;
    } else if (strcmp(a, "--max-tasks") == 0) {
      o->server.max_tasks = (int)parse_count(a, value, 0);
      i++;
    } else if (strcmp(a, "--max-tasks-per-client") == 0) {
      o->server.max_tasks_per_client = (int)parse_count(a, value, 1);
      i++;
    } else if (strcmp(a, "--client-timeout") == 0) {
      o->server.client_timeout_ms = (int)parse_count(a, value, 1);
      i++;
    } else if (strcmp(a, "--http") == 0) {
      char err[300];
      if (!value) fail_usage("%s needs [HOST:]PORT[/PATH]", a);
      if (!http_parse_listen(value, o->http_opts.host, sizeof o->http_opts.host, &o->http_opts.port,
                             o->http_opts.local, sizeof o->http_opts.local, o->http_opts.path,
                             sizeof o->http_opts.path, err, sizeof err))
        fail_usage("%s", err);
      o->http = true;
      i++;
    } else if (strcmp(a, "--metrics") == 0) {
      char err[300], path[256];
      if (!value) fail_usage("%s needs [HOST:]PORT or off", a);
      o->metrics = o->metrics_off = false;
      if (strcmp(value, "off") == 0) {
        o->metrics_off = true;
        i++;
        continue;
      }
      if (!http_parse_listen(value, o->metrics_host, sizeof o->metrics_host, &o->metrics_port, o->metrics_local,
                             sizeof o->metrics_local, path, sizeof path, err, sizeof err))
        fail_usage("--metrics: %s", err);
      o->metrics = true;
      i++;
    } else if (strcmp(a, "--ui") == 0) {
      o->ui = true;
    } else if (strcmp(a, "--ui-port") == 0) {
      o->ui_port = (int)parse_count(a, value, 0);
      if (o->ui_port > 65535) fail_usage("%s needs a port number (0: a free one)", a);
      o->ui = true;
      i++;
    } else if (strcmp(a, "--log-format") == 0) {
      if (!value || (strcmp(value, "text") != 0 && strcmp(value, "json") != 0))
        fail_usage("%s needs text or json", a);
      log_set_json(strcmp(value, "json") == 0);
      i++;
    } else if (strcmp(a, "--drain-time") == 0) {
      o->drain_time_s = (int)parse_count(a, value, 0);
      if (o->drain_time_s > MAX_DRAIN_TIME_S) fail_usage("--drain-time: at most " LUAMCP_STR(MAX_DRAIN_TIME_S) " seconds%s", "");
      i++;
    } else if (strcmp(a, "--workers") == 0) {
      o->workers = (int)parse_count(a, value, 1);
      if (o->workers > MAX_WORKERS) fail_usage("--workers: at most " LUAMCP_STR(MAX_WORKERS) "%s", "");
      i++;
    } else if (strcmp(a, "--node") == 0) {
      size_t n = value ? strlen(value) : 0;
      bool ok = n >= 1 && n <= MAX_NODE_NAME;
      for (size_t k = 0; ok && k < n; k++) ok = isalnum((unsigned char)value[k]) || value[k] == '-' || value[k] == '_';
      if (!ok) fail_usage("%s needs a name of 1 to " LUAMCP_STR(MAX_NODE_NAME) " letters, digits, - or _", a);
      o->node = value;
      i++;
    } else if (strcmp(a, "--worker") == 0) { /* internal: how the supervisor starts a worker */
      o->worker_index = (int)parse_count(a, value, 1);
      i++;
    } else if (strcmp(a, "--worker-port") == 0) {
      o->worker_port = (int)parse_count(a, value, 0); /* 0 with a local socket */
      i++;
    } else if (strcmp(a, "--allow-remote") == 0) {
      o->http_opts.allow_remote = true;
    } else if (strcmp(a, "--allow-host") == 0 || strcmp(a, "--allow-origin") == 0) {
      bool host = a[8] == 'h';
      int *count = host ? &o->http_opts.allow_host_count : &o->http_opts.allow_origin_count;
      if (!value) fail_usage("%s needs a value", a);
      if (*count == MAX_ALLOWED) fail_usage("too many %s flags", a);
      (host ? o->allow_hosts : o->allow_origins)[(*count)++] = value;
      i++;
    } else if (strcmp(a, "--state-key-env") == 0) {
      if (!value) fail_usage("%s needs the name of an environment variable", a);
      const char *secret = getenv(value);
      if (!secret || strlen(secret) < 16)
        fail_usage("--state-key-env: the environment variable %s must hold a secret of at least 16 characters", value);
      state_key_set(secret, strlen(secret));
      o->state_key_env = true;
      i++;
    } else if (strcmp(a, "--redis") == 0) {
      if (!value) fail_usage("%s needs a URL (redis://host:port/db or unix:///path)", a);
      if (o->redis_env) fail_usage("%s", "give --redis or --redis-env, not both");
      o->redis_url = value;
      i++;
    } else if (strcmp(a, "--redis-env") == 0) {
      /* The URL from the environment: a password in it stays out of
       * /proc/PID/cmdline, ours and the workers' (they get this option,
       * not the URL, and read the variable themselves). */
      if (!value) fail_usage("%s needs the name of an environment variable", a);
      if (o->redis_url) fail_usage("%s", "give --redis or --redis-env, not both");
      const char *url = getenv(value);
      if (!url || !*url) fail_usage("--redis-env: the environment variable %s is empty or unset", value);
      o->redis_url = url;
      o->redis_env = value;
      i++;
    } else if (strcmp(a, "--bearer-token-env") == 0) {
      if (!value) fail_usage("%s needs the name of an environment variable", a);
      const char *token = getenv(value);
      if (!token || !*token) fail_usage("--bearer-token-env: the environment variable %s is empty or unset", value);
      o->http_opts.bearer_token = token;
      i++;
    } else if (strncmp(a, "--auth-", 7) == 0) {
      const char *why;
      auth_flag_parse(&o->auth, a, value, &why);
      if (why && strcmp(why, "unknown option") == 0) fail_usage("unknown option %s", a);
      if (why) {
        char msg[200];
        snprintf(msg, sizeof msg, "%s %s", a, why);
        fail_usage("%s", msg);
      }
      i++;
    } else if (strcmp(a, "--sse-path") == 0) {
      if (!value || value[0] != '/') fail_usage("%s", "--sse-path needs a path beginning with /, e.g. /sse");
      snprintf(o->http_opts.sse_path, sizeof o->http_opts.sse_path, "%s", value);
      i++;
    } else if (strcmp(a, "--no-sse") == 0) {
      o->http_opts.sse_path[0] = '\0';
    } else if (strcmp(a, "--ws-path") == 0) {
      if (!value || value[0] != '/') fail_usage("%s", "--ws-path needs a path beginning with /, e.g. /ws");
      snprintf(o->http_opts.ws_path, sizeof o->http_opts.ws_path, "%s", value);
      i++;
    } else if (strcmp(a, "--socket-mode") == 0) {
      char *end = NULL;
      long mode = value ? strtol(value, &end, 8) : -1;
      if (!value || !*value || *end || mode < 0 || mode > 0777)
        fail_usage("%s needs permission bits in octal, e.g. 0600 or 0660", a);
      o->http_opts.socket_mode = (int)mode;
      i++;
    } else if (strcmp(a, "--max-connections") == 0) {
      o->http_opts.max_connections = (int)parse_count(a, value, 1);
      i++;
    } else if (strcmp(a, "--max-sessions") == 0) {
      o->http_opts.max_sessions = (int)parse_count(a, value, 1);
      i++;
    } else if (strcmp(a, "--session-timeout") == 0) {
      o->http_opts.session_timeout_ms = (int)parse_count(a, value, 1) * 1000;
      i++;
    } else if (strcmp(a, "--http-memory") == 0) {
      o->http_opts.buffer_bytes = (size_t)parse_count(a, value, 1) * 1024 * 1024;
      i++;
    } else if (strcmp(a, "--allow-all") == 0) {
      buf_append_str(&o->permissions, o->permissions.len ? ",\"all\":true" : "{\"all\":true");
    } else if (strncmp(a, "--allow-", 8) == 0 && strcmp(a, "--allow-host") != 0 && strcmp(a, "--allow-origin") != 0) {
      const char *kind = NULL;
      for (size_t k = 0; k < sizeof PERMISSION_FLAGS / sizeof *PERMISSION_FLAGS; k++)
        if (strcmp(a, PERMISSION_FLAGS[k][0]) == 0) kind = PERMISSION_FLAGS[k][1];
      if (!kind) fail_unknown_option(a);
      if (!value || !*value) fail_usage("%s needs a value (several: comma-separated)", a);
      add_permission(&o->permissions, kind, value);
      i++;
    } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      o->help = true;
      return;
    } else if (a[0] == '-' && a[1]) {
      fail_unknown_option(a);
    } else if (!o->path) {
      o->path = a;
    } else {
      fail_usage("unexpected argument %s (one script file or folder)", a);
    }
  }
  if (!o->path) fail_usage("%s", "run needs a script file or folder");
  if (o->workers > 1 && !o->http)
    fail_usage("%s", "--workers needs --http: over stdio one client talks to one process");
  if (o->node && !o->http) fail_usage("%s", "--node needs --http: it names the node in HTTP session ids");
  if (o->auth.any && !o->http) fail_usage("%s", "the --auth-* options need --http: OAuth protects HTTP requests");
  if (o->auth.issuer && o->http_opts.bearer_token)
    fail_usage("%s", "--bearer-token-env and --auth-issuer cannot be used together: give one way to authenticate");
  if (o->worker_index && (o->workers < 2 || o->worker_index > o->workers || (!o->worker_port && !o->http_opts.local[0]) || !o->http))
    fail_usage("%s", "--worker is for the supervisor of --workers N to start its workers with");
  if (o->permissions.len) {
    buf_putc(&o->permissions, '}');
    o->server.permissions_json = o->permissions.data;
  }
}

/* ---- Shutdown -------------------------------------------------------- */

static void stop_loop(runtime *rt) {
  observe_close(rt->metrics);
  rt->metrics = NULL;
  inspector_stop(rt->inspector);
  rt->inspector = NULL;
  /* The server (and the workers' pipe) goes: the bus has no way out now. */
  if (rt->http && !rt->redis) bus_set_transport(rt->bus, NULL);
  if (rt->http) http_stop(rt->http);
  else if (rt->stdio_served) stdio_close_handles(&rt->stdio);
  uv_stop(rt->loop);
}

static void on_stop_check(uv_check_t *h) {
  runtime *rt = h->data;
  if (rt->srv.nested_poll > 0) return;
  uv_check_stop(h);
  stop_loop(rt);
}

/* Stop the loop, but not from inside a handler that lets the loop take a
 * turn while it computes: that would stop only that turn, and free what the
 * handler's callers still use. */
static void request_stop(runtime *rt) {
  if (rt->srv.nested_poll == 0) {
    stop_loop(rt);
    return;
  }
  rt->stop_check.data = rt;
  uv_check_start(&rt->stop_check, on_stop_check);
}

static void on_shutdown_timeout(uv_timer_t *h) {
  runtime *rt = h->data;
  log_write(LOG_WARNING, "output not flushed within %d ms; exiting", SHUTDOWN_GRACE_MS);
  request_stop(rt);
}

static void begin_shutdown(runtime *rt) {
  if (rt->stopping) return;
  rt->stopping = true;
  uv_timer_init(rt->loop, &rt->shutdown_timer);
  rt->shutdown_timer.data = rt;
  uv_timer_start(&rt->shutdown_timer, on_shutdown_timeout, SHUTDOWN_GRACE_MS, 0);
  uv_unref((uv_handle_t *)&rt->shutdown_timer);
}

static void on_stdio_done(stdio_transport *t) {
  runtime *rt = (runtime *)((char *)t - offsetof(runtime, stdio));
  begin_shutdown(rt);
  request_stop(rt);
}

/* Cancel every call now, one that is computing included, and stop. */
static void stop_now(runtime *rt) {
  uv_timer_stop(&rt->drain_timer);
  uv_prepare_stop(&rt->drain_prepare);
  begin_shutdown(rt);
  for (session *s = rt->srv.sessions; s; s = s->next) session_close(s);
  request_stop(rt);
}

static void on_drain_prepare(uv_prepare_t *h) {
  runtime *rt = h->data;
  /* A call computing in a nested turn is still in flight anyway. */
  if (rt->srv.nested_poll > 0 || !http_drained(rt->http)) return;
  log_write(LOG_INFO, "drained: every call answered; stopping");
  stop_now(rt);
}

static void on_drain_timeout(uv_timer_t *h) {
  runtime *rt = h->data;
  int n = http_calls_in_flight(rt->http);
  log_write(LOG_WARNING, "drain time (%d s) is over with %d call%s in flight; cancelling %s", rt->drain_time_s, n,
            n == 1 ? "" : "s", n == 1 ? "it" : "them");
  stop_now(rt);
}

/* SIGTERM or SIGINT (Windows: a console event). Over HTTP the first one
 * drains: no new work, the calls in flight get --drain-time to be
 * answered, then the stop below; a second signal (or --drain-time 0)
 * stops at once, cancelling every call. Over stdio the client owns the
 * process: a signal stops at once (stdin's end is how a client asks for
 * an orderly stop). */
static void on_signal(void *arg, os_signal_kind kind, const char *name) {
  runtime *rt = arg;
  if (rt->worker && kind == OS_SIGNAL_INTERRUPT) {
    /* A terminal's ^C reaches the whole process group: the supervisor
     * passes it on as SIGTERM, which must count once, not twice. */
    log_write(LOG_DEBUG, "received SIGINT; waiting for the supervisor's SIGTERM");
    return;
  }
  if (rt->draining) {
    int n = http_calls_in_flight(rt->http);
    log_write(LOG_INFO, "received %s again; cancelling %d call%s", name, n, n == 1 ? "" : "s");
    stop_now(rt);
    return;
  }
  if (!rt->http || rt->drain_time_s == 0 || rt->stopping) {
    log_write(LOG_INFO, "received %s; stopping", name);
    stop_now(rt);
    return;
  }
  rt->draining = true;
  int n = http_drain(rt->http);
  log_write(LOG_INFO, "received %s; stopping: draining %d call%s for up to %d s", name, n, n == 1 ? "" : "s",
            rt->drain_time_s);
  uv_timer_start(&rt->drain_timer, on_drain_timeout, (uint64_t)rt->drain_time_s * 1000u, 0);
  uv_prepare_start(&rt->drain_prepare, on_drain_prepare);
}

/* bus_everywhere_fn: another process's mcp.everywhere call, in the current
 * generation, once no Lua of it runs (the bus waits for the nested turns). */
static bool run_everywhere(void *arg, const char *name, size_t name_len, const char *args, size_t args_len) {
  runtime *rt = arg;
  vm *v = rt->app.current;
  if (v && v->running) return false;
  if (!v) return true;
  lua_State *L = v->L;
  int top = lua_gettop(L);
  lua_pushlstring(L, name, name_len);
  lua_pushlstring(L, args, args_len);
  if (!vm_call_library(v, "_everywhere", 2))
    log_write(LOG_WARNING, "mcp.everywhere %.*s (run for another process): %s", (int)name_len, name,
              lua_tostring(L, -1));
  lua_settop(L, top);
  return true;
}

/* bus_holds_fn and bus_list_fn: another process's A2A request, about a
 * task one of the generations here may hold (app/vm.c). */
static bool foreign_holds(void *arg, const char *method, const char *params, size_t len, const char *principal) {
  return app_foreign_holder(&((runtime *)arg)->app, method, params, len, principal) != NULL;
}

static void foreign_lists(void *arg, const char *params, size_t len, const char *principal, int first, buf *out) {
  app_foreign_lists(&((runtime *)arg)->app, params, len, principal, first, out);
}

/* A worker's hooks (http_worker_hooks). */
static void on_worker_announce(void *arg) {
  runtime *rt = arg;
  start_line_write(rt->app.current, rt->where, true);
}

/* The supervisor gone counts as its SIGTERM. */
static void on_supervisor_lost(void *arg) {
  char name[16];
  snprintf(name, sizeof name, "signal %d", SIGTERM);
  on_signal(arg, OS_SIGNAL_STOP, name);
}

/* The supervisor's state key, as a frame (see serve). */
static void on_worker_state_key(void *arg, const char *key, size_t len) {
  runtime *rt = arg;
  if (!rt->state_key_env) state_key_set(key, len);
}

/* The supervisor's stop frame (Windows, which has no SIGTERM to send). */
static void on_supervisor_stop(void *arg) { on_signal(arg, OS_SIGNAL_STOP, "the supervisor's stop"); }

static void on_worker_bus(void *arg, const char *message, size_t len) { bus_receive(((runtime *)arg)->bus, message, len); }

/* The bus's transport without Redis (bus_transport.send). */
static bool worker_bus_send(void *arg, const char *message, size_t len, const char **why) {
  runtime *rt = arg;
  return rt->http && http_worker_publish(rt->http, message, len, why);
}

static void close_any(uv_handle_t *h, void *arg) {
  (void)arg;
  if (!uv_is_closing(h)) uv_close(h, NULL);
}

static void on_log_retry(uv_timer_t *h) { (void)h; } /* the check after it flushes */

static void on_log_check(uv_check_t *h) {
  runtime *rt = h->data;
  log_flush();
  if (log_pending() && !uv_is_active((uv_handle_t *)&rt->log_retry))
    uv_timer_start(&rt->log_retry, on_log_retry, LOG_RETRY_MS, 0);
}

/* /metrics: the app's figures (the HTTP server adds its own). */
static void observe_metrics(void *arg, buf *out) {
  (void)arg;
  metrics_format(out);
}

/* /metrics of every worker (--metrics under --workers). */
static void observe_metrics_all(void *arg, buf *out) {
  runtime *rt = arg;
  if (rt->http) http_metrics_all(rt->http, out);
  else metrics_format(out);
}

/* /readyz: scripts loaded, Redis reachable when configured, not draining. */
static bool observe_ready(void *arg, const char **why) {
  runtime *rt = arg;
  if (rt->draining || rt->stopping) *why = "draining";
  else if (!rt->app.current) *why = "the scripts are not loaded";
  else if (rt->redis && !redis_ready(rt->redis, why)) *why = "redis is not reachable";
  else return true;
  return false;
}

/* luamcp run (watch false) and luamcp dev (watch true). */
/* luamcp inspect --ui: the web inspector rather than the printed lists. */
static bool inspect_with_page(int argc, char **argv) {
  for (int i = 0; i < argc && strcmp(argv[i], "--") != 0; i++)
    if (strcmp(argv[i], "--ui") == 0 || strcmp(argv[i], "--ui-port") == 0) return true;
  return false;
}

static int serve(int argc, char **argv, bool watch, bool ui_only) {
  if (!bundle_self()) help_command = watch ? "luamcp dev --help" : "luamcp run --help";
  run_options o = {0};
  parse_run_options(argc, argv, &o);
  o.ui_only = ui_only;
  if (o.help) {
    usage_serve(stdout, watch);
    return 0;
  }
  if (o.workers > 1 && !o.worker_index) {
    /* The supervisor: it loads no scripts; its workers (this program again,
     * with --worker K) do. */
    o.http_opts.node[0] = '\0';
    supervisor_options so = {.workers = o.workers,
                             .drain_time_s = o.drain_time_s,
                             .http = &o.http_opts,
                             .argc = main_argc,
                             .argv = main_argv};
    return supervisor_run(&so);
  }
  if (o.worker_index) {
    char tag[16];
    snprintf(tag, sizeof tag, "w%d", o.worker_index);
    log_set_tag(tag);
    /* The pipe to the supervisor is ours alone: no program a script runs
     * may hold it open after we are gone. */
    fcntl(WORKER_IPC_FD, F_SETFD, FD_CLOEXEC);
    /* The state key is the pipe's first frame. With the listening socket
     * inherited we serve as soon as we attach: read it now. Else (Windows)
     * libuv frames the pipe's bytes with headers of its own, so it reaches
     * us as a frame on the loop (on_worker_state_key), before the socket,
     * and so before we serve. */
    if (WORKER_LISTEN_FD >= 0) {
      char key[64];
      int key_len = worker_read_state_key(WORKER_IPC_FD, key, sizeof key);
      if (key_len < 16) {
        fprintf(stderr, "luamcp: --worker: no state key from the supervisor on fd %d\n", WORKER_IPC_FD);
        return 1;
      }
      if (!o.state_key_env) state_key_set(key, (size_t)key_len);
    }
    /* The shared listening socket, like the pipe: not for our children. */
    fcntl(WORKER_LISTEN_FD, F_SETFD, FD_CLOEXEC);
    o.http_opts.worker_index = o.worker_index;
    o.http_opts.worker_count = o.workers;
    o.http_opts.port = o.worker_port;
    o.server.worker_index = o.worker_index;
    o.server.worker_count = o.workers;
  }
  if (o.node) snprintf(o.http_opts.node, sizeof o.http_opts.node, "%s", o.node);
  /* The development loop: the wire trace on stderr unless sent elsewhere. */
  if (watch && !o.trace && !o.ui_only) o.trace = "-";
  if (o.trace && !trace_open(o.trace)) fail_usage("cannot open the trace file %s", o.trace);

  runtime *rt = calloc(1, sizeof *rt);
  rt->loop = uv_default_loop();
  os_signals_ignore_broken_pipe();
  if (!stdio_claim_fds(&rt->stdio)) {
    fprintf(stderr, "luamcp: cannot set up stdin/stdout\n");
    return 1;
  }
  log_nonblocking();
  uv_check_init(rt->loop, &rt->log_check);
  uv_timer_init(rt->loop, &rt->log_retry);
  rt->log_check.data = rt;
  uv_check_start(&rt->log_check, on_log_check);
  uv_unref((uv_handle_t *)&rt->log_check);
  uv_unref((uv_handle_t *)&rt->log_retry);
  o.server.one_client = !o.http; /* stdio: its one session is every client */
  server_init(&rt->srv, &o.server, &VM_APP_OPS, &rt->app);
  {
    char why[300];
    if (!otel_start(rt->loop, &rt->srv, why, sizeof why)) log_write(LOG_WARNING, "traces are off: %s", why);
  }
  build_unset_unfilled_settings(); /* before the scripts' first os.getenv */
  buf err = BUF_INIT;
  while (!app_start(&rt->app, &rt->srv, rt->loop, o.path, bundle_self(), watch, &err)) {
    fprintf(stderr, "luamcp: %s\n", err.data ? err.data : "cannot load the scripts");
    buf_free(&err);
    /* luamcp dev waits for the fix, as it does when a reload fails; a
     * client that connected meanwhile is answered once the scripts load. */
    if (!watch || bundle_self()) {
      free(rt);
      return 1;
    }
    if (!app_wait_for_change(rt->loop, o.path, o.http ? -1 : rt->stdio.in_fd)) {
      free(rt);
      return 1;
    }
    log_write(LOG_NOTICE, "luamcp dev: a script changed: loading again");
  }
  buf_free(&err);
  rt->bus = bus_new(rt->loop, &rt->srv);
  rt->app.bus = rt->bus;
  bus_on_everywhere(rt->bus, run_everywhere, rt);
  bus_on_foreign(rt->bus, foreign_holds, foreign_lists, rt);
  rt->observe = (http_observe_hooks){.metrics = observe_metrics, .ready = observe_ready, .arg = rt};
  rt->observe_all = (http_observe_hooks){.metrics = observe_metrics_all, .ready = observe_ready, .arg = rt};
  /* Counting is on unless --metrics off: it costs a small call about 1 %
   * (bench/results/2026-11-26-metrics.md), and mcp.metrics needs it. */
  if (!o.metrics_off) metrics_start(&rt->srv, &rt->app, o.worker_index);
  o.http_opts.observe = &rt->observe;
  o.http_opts.metrics_on_mcp_port = !o.metrics_off;
  if (o.redis_url) {
    char why[400];
    if (!o.redis_env && strncmp(o.redis_url, "redis://", 8) == 0 && strchr(o.redis_url, '@') && !o.worker_index)
      log_write(LOG_WARNING, "--redis: a password on the command line can be read by anyone on this machine "
                             "(/proc/PID/cmdline); give the URL in an environment variable with --redis-env NAME");
    rt->redis = redis_link_new(rt->loop, &rt->srv, rt->bus, o.redis_url, !o.state_key_env, why, sizeof why);
    if (!rt->redis) fail_usage("%s", why);
    /* The link has its copy: the scripts' children and os.getenv need not
     * see the secret (the supervisor keeps it for the workers it starts). */
    if (o.redis_env) unsetenv(o.redis_env);
    rt->app.redis = rt->redis;
    /* Before serving, so that the first requestState is sealed with the
     * shared key; bounded, so that a Redis that is down delays nothing
     * more than this. */
    if (!redis_link_start(rt->redis, REDIS_STARTUP_WAIT_MS))
      log_write(LOG_WARNING, "redis: not reached within %d ms; serving anyway and retrying: mcp.store fails until "
                             "it is reached%s", REDIS_STARTUP_WAIT_MS,
                o.state_key_env ? "" : ", and requestState is sealed with a key of this process until then "
                                       "(an input_required retry that reaches another process is refused)");
  }
  {
    /* luamcp's own fetches (the OAuth server's metadata, JWKS,
     * introspection) run under the same kernel rules as the scripts. */
    static const char oauth[] = "for the OAuth authorization server (issuer, JWKS, introspection); a JWKS or "
                                "introspection endpoint that discovery finds on another port must be given with "
                                "--auth-jwks-uri / --auth-introspection-endpoint";
    confine_port own_ports[4];
    size_t own_port_count = 0;
    if (o.http) {
      app_description d;
      memset(&d, 0, sizeof d);
      rt->srv.app->describe(rt->srv.app_data, &d);
      unsigned ports[3];
      size_t n = auth_setup_ports(&o.auth, d.auth_json, ports, 3);
      for (size_t i = 0; i < n; i++) own_ports[own_port_count++] = (confine_port){ports[i], oauth};
    }
    if (otel_collector_port())
      own_ports[own_port_count++] = (confine_port){otel_collector_port(), "for the OpenTelemetry collector (traces)"};
    const char *own_sockets[2];
    size_t own_socket_count = 0;
    if (o.http && o.http_opts.local[0] && !o.worker_index) own_sockets[own_socket_count++] = o.http_opts.local;
    if (o.metrics && o.metrics_local[0] && o.worker_index <= 1) own_sockets[own_socket_count++] = o.metrics_local;
    confine_process(rt->app.current, own_ports, own_port_count, own_sockets, own_socket_count);
  }

  uv_check_init(rt->loop, &rt->stop_check);
  uv_timer_init(rt->loop, &rt->drain_timer);
  uv_prepare_init(rt->loop, &rt->drain_prepare);
  rt->drain_timer.data = rt->drain_prepare.data = rt;
  rt->drain_time_s = o.drain_time_s;
  rt->worker = o.worker_index > 0;
  rt->state_key_env = o.state_key_env;
  int signals_rc = os_signals_start(&rt->signals, rt->loop, OS_SIGNAL_STOP | OS_SIGNAL_INTERRUPT, on_signal, rt);
  if (signals_rc == 0) os_signals_unref(rt->signals);
  else log_write(LOG_WARNING, "cannot watch for stop signals: %s", uv_strerror(signals_rc));

  if (o.http) {
    char err_text[400];
    /* OAuth: the scripts' mcp.server{auth} is known now; the flags win. */
    app_description d;
    memset(&d, 0, sizeof d);
    rt->srv.app->describe(rt->srv.app_data, &d);
    if (!auth_setup_start(&rt->auth, rt->loop, &o.auth, d.auth_json, &o.http_opts, err_text, sizeof err_text)) {
      fprintf(stderr, "luamcp: %s\n", err_text);
      return 1;
    }
    rt->http = http_start(rt->loop, &rt->srv, &o.http_opts, err_text, sizeof err_text);
    if (!rt->http) {
      fprintf(stderr, "luamcp: %s\n", err_text);
      return 1;
    }
    char url[400];
    http_listen_url(&o.http_opts, http_bound_port(rt->http), url, sizeof url);
    int n = snprintf(rt->where, sizeof rt->where, "over HTTP at %s", url);
    /* The 2024-11-05 endpoint is served too (unless --no-sse): say where. */
    if (o.http_opts.sse_path[0] && n > 0 && (size_t)n < sizeof rt->where)
      n += snprintf(rt->where + n, sizeof rt->where - (size_t)n, " (legacy SSE: %s)", o.http_opts.sse_path);
    if (o.worker_index && n > 0 && (size_t)n < sizeof rt->where)
      snprintf(rt->where + n, sizeof rt->where - (size_t)n, " by %d workers", o.workers);
    if (o.worker_index) {
      /* Worker 1 says where we serve once every worker listens (the
       * supervisor tells it): one line, as from a single process. */
      http_worker_hooks hooks = {
          .announce = on_worker_announce,
          .lost = on_supervisor_lost,
          .stop = on_supervisor_stop,
          .state_key = on_worker_state_key,
          .bus = on_worker_bus,
          .arg = rt};
      int rc = http_worker_attach(rt->http, WORKER_IPC_FD, WORKER_LISTEN_FD, &hooks);
      if (rc != 0) {
        fprintf(stderr, "luamcp: --worker: no pipe to the supervisor on fd %d: %s\n", WORKER_IPC_FD, uv_strerror(rc));
        return 1;
      }
      /* Without Redis the other workers are reached through the supervisor. */
      if (!rt->redis)
        bus_set_transport(rt->bus, &(bus_transport){.send = worker_bus_send, .arg = rt, .name = "the supervisor",
                                                    .peers = o.server.worker_count - 1});
    } else {
      start_line_write(rt->app.current, rt->where, true);
    }
  } else if (!o.ui_only) {
    stdio_start(&rt->stdio, rt->loop, &rt->srv, on_stdio_done);
    rt->stdio_served = true;
    start_line_write(rt->app.current, "on stdio", false);
  }
  if (o.ui && o.worker_index <= 1) {
    /* Under --workers, worker 1 shows what its own clients do. */
    char err_text[400];
    rt->inspector = inspector_start(rt->loop, &rt->srv, &rt->app, o.path, !o.ui_only, o.ui_port, err_text,
                                    sizeof err_text);
    if (!rt->inspector) {
      fprintf(stderr, "luamcp: %s\n", err_text);
      return 1;
    }
  }
  if (o.metrics && o.worker_index <= 1) {
    /* Under --workers, worker 1 serves it, with every worker's figures. */
    char err_text[400];
    rt->metrics = observe_listen(rt->loop, o.metrics_host, o.metrics_port, o.metrics_local, o.http_opts.socket_mode,
                                 o.http_opts.allow_remote,
                                 o.worker_index ? &rt->observe_all : &rt->observe, err_text, sizeof err_text);
    if (!rt->metrics) {
      fprintf(stderr, "luamcp: %s\n", err_text);
      return 1;
    }
    if (o.metrics_local[0]) log_write(LOG_INFO, "metrics at unix:%s:/metrics", o.metrics_local);
    else log_write(LOG_INFO, "metrics at http://%s%s%s:%d/metrics", strchr(o.metrics_host, ':') ? "[" : "",
                   o.metrics_host, strchr(o.metrics_host, ':') ? "]" : "", observe_bound_port(rt->metrics));
  }
  uv_run(rt->loop, UV_RUN_DEFAULT);

  /* Release everything so leak checkers see a clean exit. */
  if (rt->stdio_served) session_free(rt->stdio.session);
  bus_stop_requests(rt->bus); /* while the generations they run in are there */
  app_stop(&rt->app);
  otel_flush(); /* the last spans (a stdio server's, say) */
  otel_stop();
  redis_link_close(rt->redis); /* after the tasks: their replies are dropped */
  auth_setup_free(&rt->auth);   /* after the server: no connection waits on it */
  bus_free(rt->bus);
  jobs_release(&rt->srv);
  os_signals_stop(rt->signals);
  uv_walk(rt->loop, close_any, NULL);
  uv_run(rt->loop, UV_RUN_DEFAULT);
  uv_loop_close(rt->loop);
  log_flush();
  trace_close();
  int code = rt->exit_code;
  free(rt);
  return code;
}

/* A program made by `luamcp build`: it serves its bundle, and takes the
 * options of `luamcp run` without PATH. */
static int command_bundled(const bundle *b, int argc, char **argv) {
  const char *first = argc > 1 ? argv[1] : "";
  if (strcmp(first, "--bundle-info") == 0) {
    build_print_info(b, stdout);
    return 0;
  }
  if (strcmp(first, "--version") == 0 || strcmp(first, "-V") == 0) {
    printf("%s (built by luamcp %s; runtime luamcp %s, %s, libuv %s)\n", b->name, b->runtime_version, LUAMCP_VERSION,
           LUA_RELEASE_STRING, uv_version_string());
    return 0;
  }
  if (strcmp(first, "--help") == 0 || strcmp(first, "-h") == 0) {
    printf("%s: an MCP server built from \"%s\" by luamcp %s.\n"
           "\n"
           "  %s [options]\n"
           "      serve it on stdio (--http: over HTTP), with the options below\n"
           "  %s --bundle-info\n"
           "      list the files it carries and the luamcp that built it\n"
           "\n",
           argv[0], b->name, b->runtime_version, argv[0], argv[0]);
    usage_options(stdout, true);
    return 0;
  }
  /* The bundle's name stands where run's PATH goes: it is the server's
   * default name, as the folder's name is under luamcp run. */
  static char help[PATH_MAX + 8];
  snprintf(help, sizeof help, "%s --help", argv[0]);
  help_command = help;
  char **run_argv = calloc((size_t)argc + 1, sizeof *run_argv);
  run_argv[0] = b->name;
  for (int i = 1; i < argc; i++) run_argv[i] = argv[i];
  int code = serve(argc, run_argv, false, false);
  free(run_argv);
  return code;
}

int main(int argc, char **argv) {
  os_proc_child_main(argc, argv); /* returns unless this is a child mcp.exec is starting */
  main_argc = argc;
  main_argv = argv;
  buf bundle_err = BUF_INIT;
  int bundled = bundle_open_self(argv[0], &bundle_err);
  if (bundled < 0) {
    /* Never run part of a bundle: say what is wrong and stop. */
    fprintf(stderr, "luamcp: %s\n", bundle_err.data);
    buf_free(&bundle_err);
    return 1;
  }
  buf_free(&bundle_err);
  log_set_color(log_color_wanted(2));
  if (bundled) return command_bundled(bundle_self(), argc, argv);
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  /* `luamcp help COMMAND` is `luamcp COMMAND --help`, so every command
   * that answers --help answers it here too. */
  if (argc == 3 && strcmp(argv[1], "help") == 0) {
    argv[1] = argv[2];
    argv[2] = "--help";
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
    usage(stdout);
    return 0;
  }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    printf("luamcp %s (%s, libuv %s)\n", LUAMCP_VERSION, LUA_RELEASE_STRING, uv_version_string());
    return 0;
  }
  if (strcmp(cmd, "run") == 0) return serve(argc - 2, argv + 2, false, false);
  if (strcmp(cmd, "dev") == 0) return serve(argc - 2, argv + 2, true, false);
  if (strcmp(cmd, "inspect") == 0 && inspect_with_page(argc - 2, argv + 2)) {
    /* Scripts are served here, reloads and all, to the page alone; any
     * other server is reached as luamcp call reaches it. */
    for (int i = 2; i < argc; i++)
      if (strcmp(argv[i], "--http") == 0 || strcmp(argv[i], "--") == 0) return inspector_proxy_command(argc - 2, argv + 2);
    return serve(argc - 2, argv + 2, true, true);
  }
  if (strcmp(cmd, "build") == 0) return build_command(argc - 2, argv + 2);
  if (strcmp(cmd, "release") == 0) return release_command(argc - 2, argv + 2);
  if (strcmp(cmd, "install") == 0) return install_command(argc - 2, argv + 2);
  if (strcmp(cmd, "uninstall") == 0) return uninstall_command(argc - 2, argv + 2);
  static const char *const client_commands[] = {"call", "read", "prompt", "inspect", "login", "logout", "test", "init"};
  for (size_t i = 0; i < sizeof client_commands / sizeof *client_commands; i++)
    if (strcmp(cmd, client_commands[i]) == 0) return client_command(argc - 1, argv + 1);
  if (strcmp(cmd, "--bundle-info") == 0) {
    fprintf(stderr, "luamcp: this program carries no bundle (luamcp build makes programs that do)\n");
    return 1;
  }
  buf message = BUF_INIT;
  buf_printf(&message, "unknown command %s%s", cmd, suggest_command(cmd, usage_commands));
  fail_usage("%s", message.data);
  return 2;
}
