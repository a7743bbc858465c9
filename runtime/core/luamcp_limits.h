/*
 * luamcp_limits.h - every limit and default of the runtime, in one place.
 *
 * A limit that a user can change has a command-line flag; the value here is
 * its default. The README's "Limits" table is written from this file.
 */
#ifndef LUAMCP_LIMITS_H
#define LUAMCP_LIMITS_H

/* Largest JSON-RPC message accepted on any transport (--max-message-bytes).
 * A stdio line or an HTTP body over this is refused without buffering it. */
#define DEFAULT_MAX_MESSAGE_BYTES (4u * 1024u * 1024u)

/* Log and stderr trace lines waiting for a slow (or absent) reader of
 * stderr. Past this, lines are dropped and counted, never waited for. */
#define LOG_BUFFER_BYTES (1u * 1024u * 1024u)
/* While lines wait, how often the loop tries stderr again (ms). */
#define LOG_RETRY_MS 20

/* stdio input read while a handler computes is held until it stops (only
 * cancellations in it are acted on at once). Past this many held bytes the
 * transport stops reading, so the client waits on a full pipe instead of
 * the server's memory growing with whatever it sends. */
#define STDIO_HELD_INPUT_BYTES (1u * 1024u * 1024u)

/* A notifications/cancelled may arrive before the request it names has
 * started: over HTTP on another connection, or behind held input while a
 * handler computes. A session remembers the ids of the last this-many such
 * cancellations, and a request that later arrives with one of them is
 * dropped unanswered, as if cancelled at once (MCP forbids reusing a
 * request id within a session, so no later request is mistaken). */
#define SESSION_EARLY_CANCELS 16
/* Call observers (observe.h) a server takes: metrics and traces. */
#define OBSERVE_MAX_OBSERVERS 4
/* Metrics (app/metrics.c): distinct tools and methods counted by name
 * (the rest count under "_other"), and series one mcp.metrics metric may
 * have (a label set beyond it is refused), and mcp.metrics metrics a
 * script may define, so a scrape stays bounded. */
#define METRICS_MAX_TOOLS 256
#define METRICS_MAX_METHODS 64
#define METRICS_MAX_SERIES 100
#define METRICS_MAX_USER_METRICS 64
/* The longest call target (tool name, URI) observers see, and the longest
 * label value /metrics prints (longer ones are cut, UTF-8 safe): a client
 * chooses these names, and each is printed many times per scrape. */
#define OBSERVE_TARGET_MAX_BYTES 128
#define METRICS_LABEL_VALUE_MAX_BYTES 128
/* mcp.metrics: the longest label name, and all of one series' label text. */
#define METRICS_LABEL_NAME_MAX_BYTES 64
#define METRICS_SERIES_LABELS_MAX_BYTES 1024
/* Under --workers, each worker sends its metrics to the others this
 * often, so a scrape of any one shows all (at most this old), and at most
 * this much text each time (cut at a line past it): the bus shares the link. */
#define WORKER_METRICS_PUSH_MS 1000
#define WORKER_METRICS_PUSH_MAX_BYTES (1024u * 1024u)
/* --metrics ADDR's own listener: connections open at once (more are
 * closed at once), and the time one has to send its request and read
 * the answer. */
#define OBSERVE_MAX_CONNECTIONS 32
#define OBSERVE_CONN_TIMEOUT_MS 10000
/* A cancellation that came before its request is remembered only for an
 * id of at most this many bytes of JSON (ids are short; a longer one would
 * make the ring hold megabytes). */
#define SESSION_EARLY_CANCEL_ID_BYTES 256

/* Deepest nesting of arrays and objects the JSON parser accepts. Deeper
 * documents are rejected with -32700: real MCP traffic nests a few levels,
 * and a bound keeps the recursive parser and the Lua conversion safe. */
#define MAX_JSON_DEPTH 128

/* Deepest nesting the Lua-to-JSON encoder follows before it reports a
 * cycle or runaway structure as an error. */
#define MAX_ENCODE_DEPTH 128

/* Default number of items per page of tools/list, resources/list, ... 0
 * means "everything in one page" (--page-size). */
#define DEFAULT_PAGE_SIZE 0

/* completion/complete answers at most this many values (spec: 100). */
#define MAX_COMPLETION_VALUES 100

/* OAuth access tokens (core/jwt.c). A bearer token longer than this is
 * refused unread: real JWTs are 1-2 KiB, and a bound keeps the decoding
 * and the JSON parse of a hostile header cheap. */
#define AUTH_MAX_TOKEN_BYTES (16u * 1024u)
/* A JWK Set's first this-many keys are used, the rest ignored (an issuer
 * publishes a handful: current, next, previous). */
#define AUTH_MAX_JWKS_KEYS 64
/* A token without a kid is tried against at most this many keys of its
 * alg, so one request costs a bounded number of signature checks. */
#define AUTH_MAX_KEYS_TRIED 8

/* How long the server waits for in-flight work to stop after stdin ends. */
#define SHUTDOWN_GRACE_MS 1500

/* --drain-time SECONDS: an HTTP server that gets SIGTERM or SIGINT stops
 * taking work and gives the calls in flight this long to be answered
 * before it cancels what is left (0: cancel at once). At most
 * MAX_DRAIN_TIME_S, a bound that keeps the supervisor's grace in range. */
#define DEFAULT_DRAIN_TIME_S 10
#define MAX_DRAIN_TIME_S 3600

/* The client side (luamcp call, mcp.testing): how long a request waits for
 * its answer unless told otherwise, and how long a stdio server started as
 * a child gets to exit once its input ends before it is killed. */
#define CLIENT_DEFAULT_TIMEOUT_MS 60000
#define CLIENT_CHILD_GRACE_MS (SHUTDOWN_GRACE_MS + 500)
/* The client side: the most headers one request may add (Mcp-Param-* and
 * the standard ones), and how often a waiting client looks for a Ctrl-C
 * (the longest a Ctrl-C waits to be noticed, ms). */
#define CLIENT_MAX_REQUEST_HEADERS 64
#define CLIENT_INTERRUPT_POLL_MS 250

/* luamcp call as an OAuth client (cli/client_oauth.c): each discovery or
 * token request (metadata documents, the token endpoint) is cut off after
 * this long and this many bytes of answer. */
#define CLIENT_OAUTH_FETCH_TIMEOUT_MS 30000
#define CLIENT_OAUTH_MAX_BODY_BYTES (256u * 1024u)

/* How long the requestState of an input_required result (2026-07-28)
 * stays valid: the client must retry with its answers within this (ms). */
#define MRTR_STATE_TTL_MS (15u * 60u * 1000u)

/* MCP tasks (the tasks extension): at most this many run at once
 * (--max-tasks; 0: no cap). Past it, a tool that may run as a task answers
 * in the request instead, and one that must is refused with -32603. */
#define DEFAULT_MAX_TASKS 1000
/* A finished task's outcome is kept this long after it ends (ms), and the
 * outcomes of all finished tasks together at most this many bytes: past
 * that, the oldest finished tasks are discarded first. */
#define JOB_KEEP_MS (60u * 60u * 1000u)
#define JOB_KEPT_BYTES (64u * 1024u * 1024u)
/* The polling interval a task suggests unless its tool says poll_ms. */
#define JOB_POLL_INTERVAL_MS 500
/* A task's statusMessage (from ctx:progress and ctx:log) is cut here. */
#define JOB_STATUS_MESSAGE_BYTES 1024
/* One client runs at most a JOBS_CLIENT_SHARE-th of --max-tasks (at least
 * one) unless --max-tasks-per-client says otherwise, so that one client
 * filling its quota leaves places for others. */
#define JOBS_CLIENT_SHARE 4
/* A running task keeps the client's capabilities and clientInfo for its
 * ctx: whole up to this many bytes each, else only their skeleton (keys,
 * short values, strings cut to JOB_CLIENT_STRING_BYTES). A client key
 * (clientInfo name/version) is cut to JOB_CLIENT_KEY_BYTES. */
#define JOB_CLIENT_FIELD_BYTES 4096
#define JOB_CLIENT_STRING_BYTES 256
#define JOB_CLIENT_KEY_BYTES 200
/* What a task costs against JOB_KEPT_BYTES besides what it holds: its
 * record, its coroutine, its status. */
#define JOB_BASE_BYTES 2048

/* A subscriptions/listen call follows at most this many resource URIs
 * (and this many task ids), and a legacy session subscribes
 * (resources/subscribe) to at most this many: one rule for both eras. */
#define LISTEN_MAX_URIS 256
/* A resource URI that is followed or subscribed to is at most this long
 * (PATH_MAX, so a file:// URI of any real path fits); a longer one is
 * refused (resources/subscribe: -32602) or left out (listen). */
#define MAX_RESOURCE_URI_BYTES 4096

/* What a session keeps from its client: initialize's clientInfo and
 * capabilities (and a 2026-07-28 request's, for as long as its call runs)
 * may be at most this many bytes of JSON each; more is refused with -32602.
 * Real clients send a few hundred bytes, icons included. Over HTTP what a
 * session keeps (these and its subscribed URIs) is also charged to the
 * buffer budget (--http-memory, below): a full budget refuses initialize
 * with 503 and a subscription with -32000. */
#define MAX_CLIENT_FIELD_BYTES (16u * 1024u)

/* Longest a reply from the client (sampling, elicitation, roots) is
 * awaited before the waiting handler gets an error (--client-timeout). */
#define DEFAULT_CLIENT_TIMEOUT_MS 60000

/* ---- Per-call limits ------------------------------------------------ */

/* A call's deadline unless its tool sets timeout_ms (--timeout, ms; 0 turns
 * deadlines off). */
#define DEFAULT_CALL_TIMEOUT_MS 60000
/* How long loading the scripts (running their top level, at start and at
 * each reload) may take (--load-timeout, ms; 0 turns it off). A script
 * that loops while loading is stopped like a call past its deadline: at
 * start luamcp exits with the error, at a reload the old generation keeps
 * serving. */
#define DEFAULT_LOAD_TIMEOUT_MS 10000
/* string.find, match, gmatch and gsub let the deadline and cancellation
 * check run every this many matching steps (Lua's own matcher never runs
 * the instruction hook; see app/lua_pattern.h). */
#define PATTERN_STEPS_PER_CHECK 1024u
/* The cap on what one generation's Lua state may allocate (--memory-limit,
 * MiB; 0 turns it off). */
#define DEFAULT_MEMORY_LIMIT_MB 256
/* A handler that computes without yielding lets the loop run one turn this
 * often, to see cancellations and flush its output (watchdog.c). */
#define TASK_POLL_INTERVAL_MS 10
/* Big arguments and results die when their call or its write ends, which
 * Lua's pacing does not know: once this many bytes of them (and at least a
 * quarter of the heap) have died, the next call first collects them. */
#define LUA_BIG_GARBAGE_BYTES (1u * 1024u * 1024u)
/* Small blocks a Lua state freed and keeps for its next allocations
 * (lua_heap.c): beyond this, freed blocks go back to malloc, so a burst of
 * garbage does not stay held. */
#define LUA_HEAP_CACHE_BYTES (512u * 1024u)
/* Finished coroutines a generation keeps for reuse. */
#define TASK_THREAD_POOL 32
/* After SIGTERM, a child process of mcp.exec gets this long before SIGKILL. */
#define EXEC_KILL_GRACE_MS 500
/* What mcp.exec keeps of a child's stdout and of its stderr, unless the call
 * says max_output_bytes. */
#define DEFAULT_EXEC_MAX_OUTPUT_BYTES (16u * 1024u * 1024u)
/* mcp.http: a response body larger than this fails with "too_large" unless
 * the request says max_bytes; the whole request (connect, TLS, redirects,
 * body) must finish within the timeout unless it says timeout_ms; this many
 * redirects are followed unless it says max_redirects. */
#define HTTP_CLIENT_MAX_BYTES (16u * 1024u * 1024u)
#define HTTP_CLIENT_TIMEOUT_MS 30000
#define HTTP_CLIENT_CONNECT_TIMEOUT_MS 10000
#define HTTP_CLIENT_MAX_REDIRECTS 5
/* A request body larger than this is refused before anything is sent. */
#define HTTP_CLIENT_MAX_REQUEST_BYTES (64u * 1024u * 1024u)

/* luamcp dev reloads this long after the last change to a script, so an
 * editor's burst of writes becomes one reload. */
#define RELOAD_DEBOUNCE_MS 100

/* ---- Streamable HTTP ------------------------------------------------- */

/* A request's line and headers together; beyond this: 431. */
#define HTTP_MAX_HEADER_BYTES (16u * 1024u)
/* The header block must arrive within this long of the request's first byte
 * (408 and close otherwise). */
#define HTTP_HEADER_TIMEOUT_MS 10000
/* A body gets this long, plus one second per HTTP_MIN_BODY_RATE bytes that
 * have arrived: a client has to keep sending at that average rate. */
#define HTTP_BODY_GRACE_MS 10000
#define HTTP_MIN_BODY_RATE (16u * 1024u)
/* An idle keep-alive connection is closed after this long. */
#define HTTP_KEEPALIVE_IDLE_MS 120000
/* Connections at once (--max-connections); beyond, the oldest connection
 * that has not sent a complete request yet is closed for the new one, and
 * when there is none: 503 and close. */
#define DEFAULT_HTTP_MAX_CONNECTIONS 1024
/* Sessions at once (--max-sessions); beyond: 503 on initialize. */
#define DEFAULT_HTTP_MAX_SESSIONS 20000
/* A session with no request and no open stream for this long ends
 * (--session-timeout, seconds). */
#define DEFAULT_HTTP_SESSION_TIMEOUT_S 3600
/* What SSE streams ask clients to wait before reconnecting. */
#define HTTP_SSE_RETRY_MS 2000
/* A comment line on an idle SSE stream this often keeps proxies from
 * closing it and finds dead clients. */
#define HTTP_SSE_KEEPALIVE_MS 15000
/* A WebSocket (http_ws.c) silent this long gets a ping; one that answers
 * nothing (a pong, or anything else) within WS_PONG_TIMEOUT_MS after it is
 * gone, and is closed: a peer whose machine vanished sends no FIN. */
#define WS_PING_INTERVAL_MS 15000
#define WS_PONG_TIMEOUT_MS 15000
/* Per session, the most recent SSE events kept for Last-Event-ID replay:
 * at most this many, and at most this many bytes (and all sessions together
 * at most half of the buffer budget below). */
#define HTTP_REPLAY_EVENTS 256
#define HTTP_REPLAY_BYTES (1u * 1024u * 1024u)
/* One memory budget for everything the HTTP transport buffers (--http-memory,
 * MiB): the replay events of every session, the bytes written to clients and
 * not yet taken by them, held input (pipelined bytes not parsed yet and
 * request bodies being read), and what sessions keep from their clients
 * (MAX_CLIENT_FIELD_BYTES above: refused when the budget is full). Over it, the oldest replay events of any
 * session are dropped first; then every connection over its share (the
 * budget divided by the connections, at least HTTP_MIN_CONN_SHARE_BYTES) is
 * closed: a slow reader may use more than its share only while the budget
 * has room. Pipelined input beyond a connection's share waits in the kernel
 * (reading stops) until the response in progress is done. */
#define DEFAULT_HTTP_MEMORY_MB 64
#define HTTP_MIN_CONN_SHARE_BYTES (64u * 1024u)
/* A connection closed after an error (413, 431, 400, ...) or Connection:
 * close is shut down for writing, then what the client still sends is read
 * and discarded, up to this many bytes and this long, so the client reads
 * the response instead of a reset. */
#define HTTP_LINGER_BYTES (16u * 1024u * 1024u)
#define HTTP_LINGER_MS 5000
/* A client that half-closes (EOF) while waiting for a JSON answer gets
 * "102 Processing"; a client that had closed entirely answers it with a
 * reset, seen within this long, and its call is cancelled. */
#define HTTP_EOF_PROBE_MS 20

/* ---- Workers (--workers N) --------------------------------------------- */

/* At most this many worker processes behind one supervisor. */
#define MAX_WORKERS 64
/* The listen() backlog: connections the kernel queues until one is taken. */
#define HTTP_LISTEN_BACKLOG 511
/* A worker that cannot accept (out of file descriptors) tries again after
 * this long, leaving the queue to the other workers meanwhile. */
#define WORKER_ACCEPT_RETRY_MS 100
/* --node NAME: at most this many characters, from [A-Za-z0-9_-]. */
#define MAX_NODE_NAME 32
/* A legacy session id: [NODE "."] ["w" K "-"] 32 hex digits, and its NUL. */
#define HTTP_SESSION_ID_BYTES (MAX_NODE_NAME + 1 + 8 + 32 + 1)
/* A worker that dies is started again after a delay that doubles from
 * WORKER_RESTART_MIN_MS up to WORKER_RESTART_MAX_MS while it keeps dying
 * young (within WORKER_STABLE_MS of its start), so a crash loop costs little;
 * one that ran longer is restarted at once. */
#define WORKER_RESTART_MIN_MS 100
#define WORKER_RESTART_MAX_MS 5000
#define WORKER_STABLE_MS 10000
/* How long the supervisor waits for workers to exit after passing on
 * SIGTERM before it kills them: their drain time (--drain-time, in s),
 * their own shutdown grace, and some. */
#define WORKER_STOP_MARGIN_MS 3000
#define WORKER_STOP_GRACE_MS(drain_s) ((drain_s) * 1000 + SHUTDOWN_GRACE_MS + WORKER_STOP_MARGIN_MS)
/* The largest frame on a worker's IPC pipe: a request handed over with the
 * input after it (the connection's share of the buffer budget bounds it
 * well below). */
#define WORKER_FRAME_MAX_BYTES (256u * 1024u * 1024u)
/* How long a tasks/ request for a job this process does not hold waits for
 * the process that holds it to answer on the bus (app/bus.h: the workers'
 * IPC, or Redis); then no process holds it. */
#define BUS_FORWARD_TIMEOUT_MS 2000
/* A foreign request (A2A) another process said it runs for us (a stream
 * of a task it holds): it says every BUS_FOLLOW_ALIVE_MS that the request
 * still runs, and the asker answers that it still follows it; heard
 * nothing for BUS_FOLLOW_SILENCE_MS, each takes the other as gone and ends
 * its side (the asker its call, the holder the request it runs). */
#define BUS_FOLLOW_ALIVE_MS 5000
#define BUS_FOLLOW_SILENCE_MS (4 * BUS_FOLLOW_ALIVE_MS)
/* What the supervisor may hold of bus messages not yet read by one worker
 * (a worker that is stopped or stuck): past it, that worker misses them,
 * as a worker that restarts does, instead of the supervisor growing. */
#define WORKER_BUS_BACKLOG_BYTES (64u * 1024u * 1024u)

/* ---- OAuth resource server (core/auth.h, app/auth_verifier.c) -------- */

/* Clock skew forgiven on a token's exp and nbf (--auth-leeway). */
#define AUTH_DEFAULT_LEEWAY_S 60
/* The most --auth-leeway / auth.leeway_s may forgive: beyond it exp means little. */
#define AUTH_MAX_LEEWAY_S 600
/* One fetch of the authorization server's metadata, JWK Set or an
 * introspection answer: past this long it fails (503 to whoever waits);
 * connecting alone gets at most AUTH_CONNECT_TIMEOUT_MS of it. */
#define AUTH_FETCH_TIMEOUT_MS 10000
#define AUTH_CONNECT_TIMEOUT_MS 5000
/* The largest metadata document, JWK Set or introspection answer read. */
#define AUTH_MAX_DOCUMENT_BYTES (256u * 1024u)
/* How long a fetched JWK Set is used: its Cache-Control max-age, clamped
 * to [MIN, MAX] (MIN keeps a max-age=0 from costing a fetch per request),
 * or DEFAULT when it gives none. */
#define AUTH_JWKS_DEFAULT_TTL_MS (5 * 60 * 1000)
#define AUTH_JWKS_MIN_TTL_MS (30 * 1000)
#define AUTH_JWKS_MAX_TTL_MS (24 * 60 * 60 * 1000)
/* A token naming a kid the key set lacks fetches the set again (the
 * issuer rotated its keys), but at most once per this long: a stream of
 * made-up kids cannot turn into a stream of fetches. The same floor keeps
 * a failed discovery from being retried sooner. */
#define AUTH_JWKS_REFETCH_FLOOR_MS 5000
/* Checks waiting for a fetch (keys, metadata, introspection) at once;
 * beyond: 503 at once. */
#define AUTH_MAX_WAITERS 1024
/* Of those, checks of a JWT whose kid is not in the key set, waiting for
 * it to be fetched again; beyond: 503 at once (not judged: the key may be
 * rotating in). Made-up kids cost a hash and a lookup each, and cannot
 * crowd out the checks that wait for the first key set or an
 * introspection. */
#define AUTH_MAX_UNKNOWN_KID_WAITERS 64
/* Introspection requests in flight at once (checks of the same token share
 * one); beyond: 503 at once. A stream of random opaque tokens costs the
 * authorization server at most this many requests at a time; while it
 * lasts, opaque tokens not yet remembered get 503 too (JWTs never wait). */
#define AUTH_MAX_INTROSPECTIONS 64
/* Verified tokens remembered (by SHA-256 of token and resource, never the
 * token), so the same token on every request costs a hash, not a
 * signature check or an introspection round trip; the oldest goes first. */
#define AUTH_TOKEN_CACHE_ENTRIES 4096
/* A remembered token is checked again after at most this long even if its
 * exp is later: bounds how long a revoked opaque token still works. */
#define AUTH_TOKEN_CACHE_MAX_MS (5 * 60 * 1000)
/* An introspection answer of "not active" is remembered this long. */
#define AUTH_NEGATIVE_CACHE_MS (30 * 1000)

/* Traces (core/trace.h, app/otel.c). A tracestate is passed on only when
 * it has at most this many members and bytes (the W3C Trace Context
 * limits); a longer one is dropped whole, the traceparent kept. */
#define TRACESTATE_MAX_MEMBERS 32
#define TRACESTATE_MAX_BYTES 512
/* The OTLP exporter's batching, the OpenTelemetry defaults
 * (OTEL_BSP_MAX_QUEUE_SIZE, OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
 * OTEL_BSP_SCHEDULE_DELAY, OTEL_EXPORTER_OTLP_TIMEOUT change them): spans
 * wait in a queue of at most MAX_QUEUE (past it, new spans are dropped and
 * counted), and go out MAX_BATCH at a time, when that many wait or every
 * SCHEDULE_DELAY ms. At most OTEL_MAX_EXPORTS_IN_FLIGHT posts run at once:
 * a slow collector fills the queue, never the memory. */
#define OTEL_DEFAULT_MAX_QUEUE 2048
#define OTEL_DEFAULT_MAX_BATCH 512
#define OTEL_DEFAULT_SCHEDULE_DELAY_MS 5000
#define OTEL_DEFAULT_EXPORT_TIMEOUT_MS 10000
#define OTEL_MAX_EXPORTS_IN_FLIGHT 2
/* At exit, what waits is sent for at most this long (ms): a stdio server's
 * last spans are not lost, and a collector that is away delays the exit
 * by this much at most. */
#define OTEL_SHUTDOWN_FLUSH_MS 1000
/* A span's attribute values are cut at this many bytes (a tool name or a
 * URL from a script could be anything). */
#define OTEL_MAX_ATTRIBUTE_BYTES 1024
/* The encoded spans waiting in the queue hold at most this many bytes
 * (past it new spans are dropped and counted, as when the queue is full),
 * and one export's body stops growing past OTEL_MAX_EXPORT_BYTES: with
 * OTEL_MAX_EXPORTS_IN_FLIGHT posts, memory stays bounded by bytes, not
 * just by a count of spans whose size a client chooses. */
#define OTEL_MAX_QUEUE_BYTES (16u * 1024u * 1024u)
#define OTEL_MAX_EXPORT_BYTES (4u * 1024u * 1024u)

/* The server-side client's connections to other MCP servers
 * (app/lua_remote.c). */
/* An SSE event id longer than this is ignored (it would be sent back as
 * Last-Event-ID on every resumption). */
#define SSE_MAX_EVENT_ID_BYTES 256
/* At most this many open connections per app: each is a child process or
 * an HTTP session the server keeps open across calls and reloads (a
 * closed one no longer counts). */
#define REMOTE_MAX_CONNECTIONS 64
/* Requests in flight on one connection (sent, answer not yet taken by a
 * waiting task): past it, send refuses a new request. */
#define REMOTE_MAX_IN_FLIGHT 1024
/* Messages queued for one request that its task has not taken yet
 * (progress, logs): past it the oldest is dropped (the answer never is). */
#define REMOTE_MAX_QUEUED_PER_REQUEST 256
/* Messages no request takes, waiting for the script's on_message
 * function: past it the oldest is dropped and that is logged once. */
#define REMOTE_MAX_UNCLAIMED 256
/* Bytes written to a child's stdin that it has not read yet: past it,
 * send refuses (the child does not read; memory must not grow). */
#define REMOTE_MAX_WRITE_QUEUE_BYTES (16u * 1024u * 1024u)
/* A line of a child's stderr is passed on cut at this many bytes. */
#define REMOTE_MAX_STDERR_LINE 4096
/* The body of an HTTP error answer kept for the script (failed.body). */
#define REMOTE_MAX_ERROR_BODY 4096
/* A POST's SSE stream that ends before the answer is resumed (GET with
 * Last-Event-ID) at most this many times in a row, after the server's
 * retry: delay, or REMOTE_DEFAULT_RETRY_MS when it gave none (capped at
 * REMOTE_MAX_RETRY_MS, whatever the server says). */
#define REMOTE_MAX_RESUMES 5
#define REMOTE_DEFAULT_RETRY_MS 1000
#define REMOTE_MAX_RETRY_MS 30000
/* Closing a child: its stdin is closed and it gets this long to exit
 * before SIGTERM (then EXEC_KILL_GRACE_MS before SIGKILL). */
#define REMOTE_CLOSE_GRACE_MS 2000
/* A child that exited is read this long more for what it wrote last
 * (its final answer) before its connection ends. */
#define REMOTE_EXIT_DRAIN_MS 1000
/* A keyed connection no generation holds any more (a reload freed the
 * old one before the new one opened it) stays open this long for the
 * next generation to reuse, then is closed. */
#define REMOTE_LINGER_MS 60000
/* Connecting to an HTTP server gives up after this long. */
#define REMOTE_CONNECT_TIMEOUT_MS 30000

/* ---- The web inspector (luamcp dev --ui, inspect --ui) ------------------ */
/* Who may watch every message in and out (core/wire.h): the inspector,
 * and room for one more. */
#define WIRE_MAX_OBSERVERS 2
/* What the inspector keeps of the wire for a page that (re)connects: the
 * newest this many events, within this many bytes; older ones are dropped
 * (and counted). A message's text is kept cut to UI_EVENT_TEXT_MAX_BYTES. */
#define UI_HISTORY_MAX_EVENTS 100000
#define UI_HISTORY_MAX_BYTES (64u * 1024u * 1024u)
#define UI_EVENT_TEXT_MAX_BYTES (1024u * 1024u)
/* Pages attached at once, and what one of them may leave unread: a page
 * past it is disconnected (its EventSource reconnects and catches up from
 * the history), so a stalled tab never holds the server's memory. */
#define UI_MAX_CONNECTIONS 16
#define UI_MAX_UNREAD_BYTES (32u * 1024u * 1024u)
/* The page's request: its head, and a body (one message the page sends). */
#define UI_MAX_HEAD_BYTES 16384
/* Live events go out in batches, at most this often, so that a server
 * doing thousands of calls a second writes to the page a few times a
 * second, not once a message. */
#define UI_FLUSH_INTERVAL_MS 50

#endif
