/*
 * test_session.c - the protocol core (JSON-RPC + MCP lifecycle) with a stub
 * app and a stub transport: no Lua, no libuv.
 */
#include <math.h>
#include <stdlib.h>

#include "core/jobs.h"
#include "core/server.h"
#include "core/observe.h"
#include "core/session.h"
#include "core/state_token.h"
#include "check.h"

/* ---- Stub transport: remembers what was sent ------------------------ */

enum { MAX_SENT = 64 };
static char *sent[MAX_SENT];
static int sent_count;
static int finals_without_json;

static void stub_send(session *s, const session_message *m) {
  (void)s;
  if (m->chain) { /* a transport that takes chains: its text, flattened */
    buf flat = BUF_INIT;
    chain_flatten(m->chain, &flat);
    if (sent_count < MAX_SENT) sent[sent_count++] = strndup(flat.data, flat.len);
    buf_free(&flat);
    return;
  }
  if (!m->json) {
    finals_without_json++;
    return;
  }
  if (sent_count < MAX_SENT) sent[sent_count++] = strndup(m->json, m->len);
}

static void clear_sent(void) {
  for (int i = 0; i < sent_count; i++) free(sent[i]);
  sent_count = 0;
  finals_without_json = 0;
}

static const transport_ops STUB_TRANSPORT = {.send = stub_send};
static const transport_ops STUB_CHAIN_TRANSPORT = {.send = stub_send, .chains = true};

/* ---- Stub app: "echo" answers at once, "hold" waits ------------------ */

static call *held[16];
static int held_count;
static int cancelled_count;

static void stub_call_start(void *app, call *c, const json_value *params, const char *src) {
  (void)app;
  (void)src;
  if (strcmp(c->method, "echo") == 0) {
    buf b = BUF_INIT;
    if (params) json_write_value(&b, params);
    else buf_puts(&b, "null");
    call_respond(c, b.data, b.len);
    buf_free(&b);
  } else if (strcmp(c->method, "pieces") == 0) {
    /* {"text":"<params.text, borrowed>"}, as luamcp's encoder answers */
    const json_value *text = json_object_get(params, "text");
    chain ch = CHAIN_INIT;
    buf_puts(&ch.own, "{\"text\":\"");
    chain_borrow(&ch, text->u.string, text->len);
    buf_puts(&ch.own, "\"}");
    call_respond_chain(c, &ch);
    chain_free(&ch);
  } else if (strcmp(c->method, "hold") == 0) {
    held[held_count++] = c;
  } else {
    call_fail(c, JSONRPC_METHOD_NOT_FOUND, "Method not found", NULL, 0);
  }
}

static void stub_call_cancel(void *app, call *c) {
  (void)app;
  for (int i = 0; i < held_count; i++)
    if (held[i] == c) held[i] = NULL;
  cancelled_count++;
}

static void stub_describe(void *app, app_description *d) {
  (void)app;
  d->server_info_json = "{\"name\":\"stub\",\"version\":\"1\"}";
  d->tools = true;
}

/* Every URI but a://unknown... is served. */
static bool stub_resource_known(void *app, const char *uri, size_t len) {
  (void)app;
  return !(len >= 11 && memcmp(uri, "a://unknown", 11) == 0);
}

static const app_ops STUB_APP = {.call_start = stub_call_start, .call_cancel = stub_call_cancel, .describe = stub_describe,
                                 .resource_known = stub_resource_known};

static server srv;

static session *new_session(void) {
  server_options o;
  server_options_defaults(&o);
  jobs_release(&srv); /* the previous test's tasks, if any */
  server_init(&srv, &o, &STUB_APP, NULL);
  clear_sent();
  held_count = cancelled_count = 0;
  return session_new(&srv, &STUB_TRANSPORT, NULL, "test");
}

static void receive(session *s, const char *json) { session_receive(s, json, strlen(json), NULL); }

static void initialize(session *s, const char *version) {
  char msg[256];
  snprintf(msg, sizeof msg,
           "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\","
           "\"capabilities\":{\"sampling\":{}},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}",
           version);
  receive(s, msg);
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
  clear_sent();
}

/* ---- Tests ------------------------------------------------------------ */

static void test_negotiation(void) {
  const char *versions[] = {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"};
  for (int i = 0; i < 4; i++) {
    session *s = new_session();
    char msg[256], want[512];
    snprintf(msg, sizeof msg,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\"}}",
             versions[i]);
    receive(s, msg);
    snprintf(want, sizeof want,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"protocolVersion\":\"%s\",\"capabilities\":{\"logging\":{},"
             "\"tools\":{\"listChanged\":true}},\"serverInfo\":{\"name\":\"stub\",\"version\":\"1\"}}}",
             versions[i]);
    CHECK(sent_count == 1, "one answer");
    CHECK_STR(sent[0], want);
    session_free(s);
  }
  session *s = new_session();
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2026-07-28\"}}");
  CHECK(strstr(sent[0], "\"protocolVersion\":\"2025-11-25\"") != NULL, "initialize never negotiates the modern era: %s", sent[0]);
  CHECK(session_client_has_capability(s, "sampling") == false, "no capabilities were declared");
  session_free(s);

  s = new_session();
  initialize(s, "2025-06-18");
  CHECK(session_client_has_capability(s, "sampling"), "declared capability");
  CHECK(!session_client_has_capability(s, "roots"), "undeclared capability");
  session_free(s);
}

static void test_batches(void) {
  session *s = new_session();
  initialize(s, "2025-03-26");
  receive(s, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hold\"},{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\","
             "\"params\":{\"x\":1}},{\"jsonrpc\":\"2.0\",\"method\":\"n\"},{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"ping\"}]");
  CHECK(sent_count == 0, "a batch is answered only when complete (sent %d)", sent_count);
  CHECK(held_count == 1 && held[0], "one held call");
  call_respond(held[0], "\"late\"", 6);
  CHECK(sent_count == 1, "batch answered");
  CHECK_STR(sent[0], "[{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"x\":1}},{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}},"
                     "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":\"late\"}]");
  clear_sent();
  receive(s, "[{\"jsonrpc\":\"2.0\",\"method\":\"a\"},{\"jsonrpc\":\"2.0\",\"method\":\"b\"}]");
  CHECK(sent_count == 0 && finals_without_json == 1, "all-notification batch: nothing sent, exchange ended");
  clear_sent();
  /* A cancelled call in a batch leaves it out. */
  receive(s, "[{\"jsonrpc\":\"2.0\",\"id\":\"h\",\"method\":\"hold\"},{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"ping\"}]");
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"h\"}}");
  CHECK(sent_count == 1, "batch with a cancelled call");
  CHECK_STR(sent[0], "[{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}]");
  session_free(s);
}

static void test_cancel_and_close(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":\"A\",\"method\":\"hold\"}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"\\u0041\"}}");
  CHECK(cancelled_count == 1 && held[0] == NULL, "cancelled by an equal id written differently");
  CHECK(sent_count == 0, "no answer for a cancelled call");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"hold\"}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"7\"}}");
  CHECK(cancelled_count == 1, "the string \"7\" is not the integer 7");
  session_close(s);
  CHECK(cancelled_count == 2, "closing cancels what is in flight");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
  CHECK(sent_count == 0, "a closed session says nothing");
  session_free(s);
}

static void test_cancel_before_request(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  /* The cancellation overtook its request (another HTTP connection, or
   * input held while a handler computed). */
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"B\"}}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":9}}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":\"\\u0042\",\"method\":\"hold\"}");
  CHECK(held_count == 0 && sent_count == 0, "a request cancelled before it came is not started or answered");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":\"9\",\"method\":\"echo\",\"params\":{}}");
  CHECK(sent_count == 1, "the string \"9\" was not cancelled by the integer 9");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"echo\",\"params\":{}}");
  CHECK(sent_count == 1, "the integer 9 was");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"echo\",\"params\":{}}");
  CHECK(sent_count == 2, "an early cancellation cancels one request, not every later use of the id");
  /* Only the most recent SESSION_EARLY_CANCELS are kept. */
  char msg[160];
  for (int i = 0; i <= SESSION_EARLY_CANCELS; i++) {
    snprintf(msg, sizeof msg, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":%d}}", 100 + i);
    receive(s, msg);
  }
  clear_sent();
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":100,\"method\":\"echo\",\"params\":{}}");
  CHECK(sent_count == 1, "the oldest remembered cancellation was forgotten");
  snprintf(msg, sizeof msg, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"echo\",\"params\":{}}", 100 + SESSION_EARLY_CANCELS);
  receive(s, msg);
  CHECK(sent_count == 1, "the newest is kept");
  session_free(s);
}

static void test_responses_without_usable_id(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  /* A client's error with id null (it could not read one of our
   * requests), or a response whose id is no valid id: ignored, and the
   * session goes on. */
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32700,\"message\":\"Parse error\"}}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":4.5,\"result\":{}}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":true,\"result\":{}}");
  CHECK(sent_count == 0, "nothing answers a response");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}");
  CHECK(sent_count == 1, "the session goes on after responses with no usable id");
  session_free(s);
}

static int replies;
static char reply_seen[128];
static void on_reply(void *data, const json_value *result, const json_value *error) {
  (void)data;
  replies++;
  buf b = BUF_INIT;
  if (result) json_write_value(&b, result);
  else if (error) json_write_value(&b, error);
  else buf_puts(&b, "closed");
  snprintf(reply_seen, sizeof reply_seen, "%s", b.data);
  buf_free(&b);
}

static void test_client_requests(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  replies = 0;
  long long id = session_request(s, NULL, "roots/list", NULL, 0, on_reply, NULL);
  CHECK(id == 1, "first id is 1");
  CHECK_STR(sent[0], "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"roots/list\"}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  CHECK(replies == 0, "a reply to another id is ignored");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"roots\":[]}}");
  CHECK(replies == 1, "reply delivered");
  CHECK_STR(reply_seen, "{\"roots\":[]}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
  CHECK(replies == 1, "a second reply to the same id is ignored");
  session_request(s, NULL, "sampling/createMessage", "{}", 2, on_reply, NULL);
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"error\":{\"code\":-1,\"message\":\"no\"}}");
  CHECK_STR(reply_seen, "{\"code\":-1,\"message\":\"no\"}");
  session_request(s, NULL, "x", NULL, 0, on_reply, NULL);
  long long forgotten = session_request(s, NULL, "y", NULL, 0, on_reply, NULL);
  session_forget_request(s, forgotten);
  session_close(s);
  CHECK(replies == 3, "closing fails the pending request once (and not the forgotten one): %d", replies);
  CHECK_STR(reply_seen, "closed");
  session_free(s);
}

static void test_progress_and_logging(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hold\",\"params\":{\"_meta\":{\"progressToken\":\"p\"}}}");
  call *c = held[0];
  CHECK(call_progress(c, 1, 10, "one", 3) == NULL, "first progress");
  CHECK(call_progress(c, 1, 10, NULL, 0) != NULL, "progress must increase");
  CHECK(call_progress(c, 2.5, NAN, NULL, 0) == NULL, "fractional progress, no total");
  CHECK_STR(sent[0], "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\","
                     "\"progress\":1,\"total\":10,\"message\":\"one\"}}");
  CHECK_STR(sent[1], "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p\","
                     "\"progress\":2.5}}");
  clear_sent();
  session_log(s, c, 7, NULL, "\"debug\"", 7);
  CHECK(sent_count == 0, "debug is below the default level (info)");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"logging/setLevel\",\"params\":{\"level\":\"debug\"}}");
  session_log(s, c, 7, "L", "\"debug\"", 7);
  CHECK(sent_count == 2, "debug after setLevel debug");
  CHECK_STR(sent[1], "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"debug\","
                     "\"logger\":\"L\",\"data\":\"debug\"}}");
  call_fail(c, -32000, "custom", "{\"why\":1}", 9);
  CHECK_STR(sent[2], "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32000,\"message\":\"custom\",\"data\":{\"why\":1}}}");
  session_free(s);
}

static void test_subscriptions(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"a://b\"}}");
  CHECK(session_subscribed(s, "a://b", 5), "subscribed");
  server_resource_updated(&srv, "a://b", 5);
  server_resource_updated(&srv, "a://c", 5);
  CHECK(sent_count == 2, "one update for the subscribed uri");
  CHECK_STR(sent[1], "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/resources/updated\",\"params\":{\"uri\":\"a://b\"}}");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/unsubscribe\",\"params\":{\"uri\":\"a://b\"}}");
  CHECK(!session_subscribed(s, "a://b", 5), "unsubscribed");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/subscribe\",\"params\":{}}");
  CHECK(strstr(sent[sent_count - 1], "-32602") != NULL, "subscribe needs a uri");
  session_free(s);
}

/* ---- What a session keeps (issue 27.3, 27.8) --------------------------- */

/* A transport with a budget of stub_room bytes for what sessions keep. */
static size_t stub_room, stub_kept;
static bool stub_keep(session *s, size_t bytes) {
  (void)s;
  if (stub_kept + bytes > stub_room) return false;
  stub_kept += bytes;
  return true;
}
static void stub_release(session *s, size_t bytes) {
  (void)s;
  stub_kept -= bytes;
}
static const transport_ops STUB_BUDGET_TRANSPORT = {.send = stub_send, .keep = stub_keep, .release = stub_release};

static const char *last_sent(void) { return sent_count ? sent[sent_count - 1] : ""; }

static void subscribe(session *s, int id, const char *uri) {
  buf msg = BUF_INIT;
  buf_printf(&msg, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"%s\"}}",
             id, uri);
  clear_sent();
  session_receive(s, msg.data, msg.len, NULL);
  buf_free(&msg);
}

static void test_subscription_limits(void) {
  session *s = new_session();
  initialize(s, "2025-11-25");
  subscribe(s, 1, "a://unknown/x");
  CHECK_STR(last_sent(), "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32002,\"message\":\"Resource not found: "
                         "a://unknown/x\",\"data\":{\"uri\":\"a://unknown/x\"}}}");
  CHECK(!session_subscribed(s, "a://unknown/x", 13), "an unknown URI is not kept");
  buf uri = BUF_INIT;
  buf_puts(&uri, "a://");
  while (uri.len < MAX_RESOURCE_URI_BYTES + 1) buf_putc(&uri, 'l');
  subscribe(s, 2, uri.data);
  CHECK(strstr(last_sent(), "-32602") && strstr(last_sent(), "4096"), "a URI over the limit: %s", last_sent());
  uri.data[--uri.len] = '\0';
  subscribe(s, 3, uri.data);
  CHECK_STR(last_sent(), "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}");
  subscribe(s, 4, "a://nul\\u0000inside");
  CHECK(strstr(last_sent(), "-32602") != NULL, "a URI with a NUL: %s", last_sent());
  char name[32];
  for (int i = 1; i < LISTEN_MAX_URIS; i++) {
    snprintf(name, sizeof name, "a://r/%d", i);
    subscribe(s, 10 + i, name);
  }
  CHECK(s->subscription_count == LISTEN_MAX_URIS && s->subscribed.count == LISTEN_MAX_URIS, "%zu subscriptions",
        s->subscription_count);
  bool all = session_subscribed(s, uri.data, uri.len);
  for (int i = 1; i < LISTEN_MAX_URIS; i++) {
    snprintf(name, sizeof name, "a://r/%d", i);
    all = all && session_subscribed(s, name, strlen(name));
  }
  CHECK(all, "every subscription is found");
  CHECK(session_subscribed(s, "a://r/1x", 7), "a URI given by length (not NUL-ended) is found");
  subscribe(s, 500, "a://r/1");
  CHECK_STR(last_sent(), "{\"jsonrpc\":\"2.0\",\"id\":500,\"result\":{}}");
  subscribe(s, 501, "a://one-more");
  CHECK(strstr(last_sent(), "-32602") && strstr(last_sent(), "256"), "the 257th: %s", last_sent());
  clear_sent();
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":502,\"method\":\"resources/unsubscribe\",\"params\":{\"uri\":\"a://r/7\"}}");
  CHECK(!session_subscribed(s, "a://r/7", 7) && s->subscription_count == LISTEN_MAX_URIS - 1, "unsubscribed");
  subscribe(s, 503, "a://one-more");
  CHECK_STR(last_sent(), "{\"jsonrpc\":\"2.0\",\"id\":503,\"result\":{}}");
  buf_free(&uri);
  session_free(s);
}

static void test_kept_fields(void) {
  /* clientInfo over MAX_CLIENT_FIELD_BYTES: refused, nothing kept. */
  session *s = new_session();
  buf msg = BUF_INIT;
  buf_puts(&msg, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\","
                 "\"clientInfo\":{\"name\":\"");
  for (unsigned i = 0; i < MAX_CLIENT_FIELD_BYTES; i++) buf_putc(&msg, 'x');
  buf_puts(&msg, "\"}}}");
  session_receive(s, msg.data, msg.len, NULL);
  CHECK(strstr(last_sent(), "-32602") && strstr(last_sent(), "clientInfo"), "clientInfo too big: %.120s", last_sent());
  CHECK(s->state == SESSION_NEW && !s->client_info_json && !s->kept_bytes, "nothing kept");
  session_free(s);

  /* A transport whose budget is full refuses initialize (503) and a
   * subscription; a freed session gives back all it kept. */
  s = new_session();
  s->transport = &STUB_BUDGET_TRANSPORT;
  stub_room = 10;
  stub_kept = 0;
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\","
             "\"capabilities\":{},\"clientInfo\":{\"name\":\"c\",\"version\":\"1\"}}}");
  CHECK(strstr(last_sent(), "-32000") != NULL && s->state == SESSION_NEW, "budget full: %s", last_sent());
  stub_room = 300;
  initialize(s, "2025-11-25");
  CHECK(s->state == SESSION_INITIALIZED && stub_kept > 0 && stub_kept == s->kept_bytes, "kept %zu", stub_kept);
  subscribe(s, 2, "a://fits");
  CHECK_STR(last_sent(), "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
  size_t with_one = stub_kept;
  subscribe(s, 3, "a://does-not-fit-in-what-is-left-of-the-budget-of-three-hundred-bytes-at-all-no");
  CHECK(strstr(last_sent(), "-32000") != NULL, "budget full: %s", last_sent());
  CHECK(stub_kept == with_one, "nothing more kept");
  session_free(s);
  CHECK(stub_kept == 0, "all given back (%zu left)", stub_kept);

  /* A cancellation with a very long id is not remembered. */
  s = new_session();
  initialize(s, "2025-11-25");
  buf id = BUF_INIT;
  for (unsigned i = 0; i < SESSION_EARLY_CANCEL_ID_BYTES; i++) buf_putc(&id, 'q');
  buf_clear(&msg);
  buf_printf(&msg, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":\"%s\"}}", id.data);
  session_receive(s, msg.data, msg.len, NULL);
  for (int i = 0; i < SESSION_EARLY_CANCELS; i++) CHECK(s->early_cancels[i] == NULL, "slot %d empty", i);
  buf_clear(&msg);
  buf_printf(&msg, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"hold\"}", id.data);
  session_receive(s, msg.data, msg.len, NULL);
  CHECK(held_count == 1, "the request with that id runs");
  buf_free(&id);
  buf_free(&msg);
  session_free(s);
}

/* A transport's own buffer, parsed in place: long strings (the id among
 * them) are decoded where they are, and the answer still carries the id. */
static void test_in_place(void) {
  buf id = BUF_INIT, text = BUF_INIT, msg = BUF_INIT, want = BUF_INIT;
  /* An id of 360 decoded bytes (past JSON_IN_PLACE_BYTES): answered with
   * the same value, written again (its text is gone). Shorter ids keep
   * their spelling, as the other tests check. */
  for (int i = 0; i < 60; i++) buf_puts(&id, "id\\\"\\u00e9-");
  for (int i = 0; i < 100; i++) buf_puts(&text, "line \\\"quoted\\\"\\n");
  for (int pass = 0; pass < 2; pass++) {
    session *s = new_session();
    if (pass) s->transport = &STUB_CHAIN_TRANSPORT;
    initialize(s, "2025-11-25");
    const char *methods[] = {"echo", "pieces", "nope"};
    for (int m = 0; m < 3; m++) {
      buf_clear(&msg);
      buf_printf(&msg, "{\"jsonrpc\":\"2.0\",\"id\":\"%s\",\"method\":\"%s\",\"params\":{\"text\":\"%s\"}}", id.data,
                 methods[m], text.data);
      /* What the answer must say: the id and the text as the writer spells them. */
      json_doc *doc = json_parse(msg.data, msg.len, 8, NULL);
      const json_value *root = json_doc_root(doc);
      buf_clear(&want);
      buf_puts(&want, "{\"jsonrpc\":\"2.0\",\"id\":");
      json_write_value(&want, json_object_get(root, "id"));
      if (m < 2) {
        buf_puts(&want, ",\"result\":{\"text\":");
        json_write_value(&want, json_object_get(json_object_get(root, "params"), "text"));
        buf_puts(&want, "}}");
      }
      json_doc_free(doc);
      session_receive_in_place(s, msg.data, msg.len, NULL);
      CHECK(sent_count == 1, "one answer to %s", methods[m]);
      if (m < 2) CHECK_STR(sent[0], want.data);
      else CHECK(strncmp(sent[0], want.data, want.len) == 0 && strstr(sent[0], "-32601"), "the error carries the id: %.80s", sent[0]);
      clear_sent();
    }
    session_free(s);
  }
  buf_free(&id);
  buf_free(&text);
  buf_free(&msg);
  buf_free(&want);
}

/* requestState tokens: the text is fixed by the format (state_token.h),
 * whatever crypto library computes it. The expected tokens were computed
 * apart from luamcp (Python's hashlib, hmac and base64), and are what the
 * runtime sealed when it used libcrypto directly. */
static void test_state_tokens(void) {
  static const char secret[] = "test secret";
  state_key_set(secret, sizeof secret - 1);
  static const struct {
    const char *binding, *payload, *token;
  } cases[] = {
      {"tools/call weather", "{\"step\":1}x", "AQAAAYvP5WgAeyJzdGVwIjoxfXiSlvmo+nroRrOjB1zX3aSBO3YJrMA0RvwnKV4P87oD0A=="},
      {"prompts/get", "{\"n\":22}", "AQAAAYvP5WgAeyJuIjoyMn1ew46pNG7dyzKW7mmf8vs3uVUa26hULv8VpGJGPzMZqw=="},
  };
  const uint64_t expires = 1700000000000u;
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    size_t len;
    char *token = state_seal(cases[i].binding, strlen(cases[i].binding), cases[i].payload, strlen(cases[i].payload),
                             expires, &len);
    CHECK_STR(token, cases[i].token);
    CHECK(token && len == strlen(cases[i].token), "the token's length");
    char *payload;
    size_t payload_len;
    CHECK(state_open(cases[i].binding, strlen(cases[i].binding), token, len, expires, &payload, &payload_len) ==
              STATE_OK, "opens");
    CHECK_STR(payload, cases[i].payload);
    free(payload);
    CHECK(state_open("other", 5, token, len, expires, &payload, &payload_len) == STATE_FORGED, "another binding");
    CHECK(state_open(cases[i].binding, strlen(cases[i].binding), token, len, expires + 1, &payload, &payload_len) ==
              STATE_EXPIRED, "expired");
    token[12] = token[12] == 'A' ? 'B' : 'A';
    CHECK(state_open(cases[i].binding, strlen(cases[i].binding), token, len, expires, &payload, &payload_len) ==
              STATE_FORGED, "a changed byte");
    free(token);
  }
  /* Padding only at the end, and at most two of it. */
  static const char *const malformed[] = {
      "AQAAAYvP5WgAeyJuIjoyMn1ew46pNG7dyzKW7mmf8vs3uVUa26hULv8VpGJGPzMZ=qw=",
      "AQAAAYvP5WgAeyJuIjoyMn1ew46pNG7dyzKW7mmf8vs3uVUa26hULv8VpGJGPzMZq===",
      "AQAAAYvP5WgAeyJuIjoyMn1ew46pNG7dyzKW7mmf8vs3uVUa26hULv8VpGJGPzMZq.==",
      "AQAAAYvP5WgAeyJuIjoyMn1ew46pNG7dyzKW7mmf8vs3uVUa26hULv8VpGJGPzMZqw=",
      "AAAA",
  };
  for (size_t i = 0; i < sizeof malformed / sizeof *malformed; i++) {
    char *payload;
    size_t payload_len;
    CHECK(state_open("prompts/get", 11, malformed[i], strlen(malformed[i]), expires, &payload, &payload_len) ==
              STATE_MALFORMED, "malformed: %s", malformed[i]);
  }
  char hex[65];
  state_digest("abc", 3, hex);
  CHECK_STR(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* ---- Who is calling (issue 29): identities, owners, scopes ------------ */

/* A transport whose every exchange carries the verified caller
 * current_identity (HTTP with OAuth), remembering the last message's
 * status and challenge scopes. */
static auth_identity *current_identity;
static int last_status;
static char last_scopes[128];
static void id_send(session *s, const session_message *m) {
  last_status = m->http_status;
  snprintf(last_scopes, sizeof last_scopes, "%s", m->required_scopes ? m->required_scopes : "");
  stub_send(s, m);
}
static auth_identity *id_request_identity(session *s, void *origin) {
  (void)s;
  (void)origin;
  return current_identity;
}
static const transport_ops ID_TRANSPORT = {.send = id_send, .request_identity = id_request_identity};

/* a://secret... needs "notes:read"; a://unknown... is not served. */
static bool id_resource_scopes(void *app, const char *uri, size_t len, buf *required) {
  if (!stub_resource_known(app, uri, len)) return false;
  if (len >= 10 && memcmp(uri, "a://secret", 10) == 0) buf_puts(required, "notes:read");
  return true;
}
static void id_describe(void *app, app_description *d) {
  stub_describe(app, d);
  d->resources = true;
}
static const app_ops ID_APP = {.call_start = stub_call_start, .call_cancel = stub_call_cancel,
                               .describe = id_describe, .resource_known = stub_resource_known,
                               .resource_scopes = id_resource_scopes};

static session *new_id_session(void) {
  new_session();
  session_free(srv.sessions);
  server_init(&srv, &srv.opts, &ID_APP, NULL);
  return session_new(&srv, &ID_TRANSPORT, NULL, "test-auth");
}

#define MODERN_META                                                                                   \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                            \
  "\"io.modelcontextprotocol/clientCapabilities\":{\"extensions\":{\"io.modelcontextprotocol/tasks\":{}}}}"

static void modern(session *s, int id, const char *method, const char *params) {
  buf msg = BUF_INIT;
  buf_printf(&msg, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"%s\",\"params\":{%s%s" MODERN_META "}}", id, method,
             params, *params ? "," : "");
  clear_sent();
  session_receive(s, msg.data, msg.len, NULL);
  buf_free(&msg);
}

static void test_call_identity(void) {
  auth_identity *alice = auth_identity_new("iss alice", "alice", "app", "read", 0, "{\"sub\":\"alice\"}");
  auth_identity *alice_more = auth_identity_new("iss alice", "alice", "app", "read write", 0, NULL);
  auth_identity *bob = auth_identity_new("iss bob", "bob", NULL, "", 0, NULL);
  session *s = new_id_session();
  current_identity = alice;
  initialize(s, "2025-11-25");
  CHECK(s->owner == alice && alice->refs == 2, "the session keeps who initialized it");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hold\"}");
  CHECK(held_count == 1 && held[0]->identity == alice, "a call is its request's caller's");
  /* A stepped-up token of the same principal: the call sees its scopes. */
  current_identity = alice_more;
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"hold\"}");
  CHECK(held_count == 2 && held[1]->identity == alice_more, "the request's token, with its current scopes");
  CHECK(auth_has_scopes(held[1]->identity, "write") && !auth_has_scopes(held[0]->identity, "write"), "scopes");
  /* No token on the exchange (cannot happen over HTTP with OAuth): the owner. */
  current_identity = NULL;
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"hold\"}");
  CHECK(held_count == 3 && held[2]->identity == alice, "else the session's owner");
  call_fail_scope(held[0], "notes:write", NULL);
  CHECK(last_status == 403, "a scope refusal is 403, got %d", last_status);
  CHECK_STR(last_scopes, "notes:write");
  CHECK(strstr(last_sent(), "\"code\":-32003") && strstr(last_sent(), "\"requiredScopes\":[\"notes:write\"]"),
        "-32003 naming the scopes: %s", last_sent());
  session_free(s);
  CHECK(alice->refs == 1 && alice_more->refs == 1, "the calls and the session let their references go");
  /* A 2026-07-28 request on a sessionless exchange is its token's. */
  s = new_id_session();
  current_identity = bob;
  modern(s, 4, "hold", "");
  CHECK(held_count == 1 && held[0]->identity == bob && s->owner == NULL, "a modern request is its caller's");
  session_free(s);
  current_identity = NULL;
  auth_identity_unref(alice);
  auth_identity_unref(alice_more);
  auth_identity_unref(bob);
}

static void test_job_owners(void) {
  auth_identity *alice = auth_identity_new("iss alice", "alice", NULL, "", 0, NULL);
  auth_identity *bob = auth_identity_new("iss bob", "bob", NULL, "", 0, NULL);
  session *s = new_id_session();
  char why[200];
  job *j = job_create(&srv, "tools/call", "1", NULL, NULL, NULL, 0, "k", auth_principal(alice), 0, why, sizeof why);
  job *anon = job_create(&srv, "tools/call", "2", NULL, NULL, NULL, 0, "k", NULL, 0, why, sizeof why);
  CHECK(j && anon && strcmp(j->owner_principal, "iss alice") == 0 && anon->owner_principal == NULL, "owners kept");
  CHECK(job_find_for(&srv, j->id, 32, "iss alice") == j && !job_find_for(&srv, j->id, 32, "iss bob") &&
            !job_find_for(&srv, j->id, 32, ""),
        "found for its owner only");
  CHECK(job_find_for(&srv, anon->id, 32, "") == anon && !job_find_for(&srv, anon->id, 32, "iss alice"),
        "nobody's job is nobody's");
  char params[128], unknown[512];
  /* What an unknown id gets, word for word. */
  current_identity = bob;
  modern(s, 1, "tasks/get", "\"taskId\":\"00000000000000000000000000000000\"");
  snprintf(unknown, sizeof unknown, "%s", strstr(last_sent(), "\"error\""));
  CHECK(strstr(unknown, "-32602") != NULL, "unknown: %s", unknown);
  snprintf(params, sizeof params, "\"taskId\":\"%s\"", j->id);
  const char *methods[] = {"tasks/get", "tasks/cancel"};
  for (int i = 0; i < 2; i++) {
    modern(s, 2, methods[i], params);
    CHECK(sent_count == 1 && strcmp(strstr(last_sent(), "\"error\""), unknown) == 0, "%s by another: %s", methods[i],
          last_sent());
  }
  snprintf(params, sizeof params, "\"taskId\":\"%s\",\"inputResponses\":{}", j->id);
  modern(s, 3, "tasks/update", params);
  CHECK(strcmp(strstr(last_sent(), "\"error\""), unknown) == 0, "tasks/update by another: %s", last_sent());
  CHECK(j->status == JOB_WORKING, "another's cancel did nothing");
  /* Listening: another's task is dropped from the filter. */
  snprintf(params, sizeof params, "\"notifications\":{\"taskIds\":[\"%s\"]}", j->id);
  modern(s, 10, "subscriptions/listen", params);
  CHECK(strstr(last_sent(), "\"taskIds\":[]") != NULL, "bob follows nothing: %s", last_sent());
  current_identity = alice;
  modern(s, 11, "subscriptions/listen", params);
  CHECK(strstr(last_sent(), j->id) != NULL, "alice follows her task: %s", last_sent());
  clear_sent();
  server_job_notify(&srv, j->id, "iss alice", "{}", 2);
  CHECK(sent_count == 1 && strstr(sent[0], "subscriptionId\":11"), "only alice's listener hears");
  clear_sent();
  server_job_notify(&srv, j->id, "iss bob", "{}", 2);
  CHECK(sent_count == 0, "a job of bob's (another process) is not told to alice's listener");
  snprintf(params, sizeof params, "\"taskId\":\"%s\"", j->id);
  modern(s, 4, "tasks/get", params);
  CHECK(strstr(last_sent(), "\"status\":\"working\"") != NULL, "alice gets it: %s", last_sent());
  /* With other processes (a bus): bob's tasks/get for alice's job here
   * goes to the app to ask the others, as for an id held nowhere here;
   * alice's is answered here. */
  srv.jobs_elsewhere = true;
  current_identity = bob;
  modern(s, 6, "tasks/get", params);
  CHECK(strstr(last_sent(), "-32601") != NULL, "forwarded like an unknown id (the stub app answers -32601): %s",
        last_sent());
  current_identity = alice;
  modern(s, 7, "tasks/get", params);
  CHECK(strstr(last_sent(), "\"status\":\"working\"") != NULL, "alice's is answered here: %s", last_sent());
  srv.jobs_elsewhere = false;
  modern(s, 5, "tasks/cancel", params);
  CHECK(j->status == JOB_CANCELLED, "alice cancels it");
  session_free(s);
  current_identity = NULL;
  auth_identity_unref(alice);
  auth_identity_unref(bob);
}

static void test_subscribe_scopes(void) {
  auth_identity *reader = auth_identity_new("iss r", "r", NULL, "notes:read", 0, NULL);
  auth_identity *none = auth_identity_new("iss n", "n", NULL, "", 0, NULL);
  session *s = new_id_session();
  current_identity = none;
  initialize(s, "2025-11-25");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"a://secret/1\"}}");
  CHECK(strstr(last_sent(), "\"code\":-32003") && last_status == 403, "refused: %s", last_sent());
  CHECK_STR(last_scopes, "notes:read");
  CHECK(!session_subscribed(s, "a://secret/1", 12), "not subscribed");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"a://open\"}}");
  CHECK(session_subscribed(s, "a://open", 8), "a resource with no scopes is followed");
  session_free(s);
  s = new_id_session();
  current_identity = reader;
  initialize(s, "2025-11-25");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"a://secret/1\"}}");
  CHECK(session_subscribed(s, "a://secret/1", 12), "with the scope it is followed");
  session_free(s);
  /* subscriptions/listen drops the URIs the caller may not read. */
  s = new_id_session();
  current_identity = none;
  modern(s, 5, "subscriptions/listen", "\"notifications\":{\"resourceSubscriptions\":[\"a://secret/1\",\"a://open\"]}");
  CHECK(strstr(last_sent(), "\"resourceSubscriptions\":[\"a://open\"]") != NULL, "listen: %s", last_sent());
  clear_sent();
  server_resource_updated(&srv, "a://secret/1", 12);
  CHECK(sent_count == 0, "no update of what it may not read");
  session_free(s);
  current_identity = NULL;
  auth_identity_unref(reader);
  auth_identity_unref(none);
}

/* The observation hook: started before the app sees the call, finished
 * once with the outcome, and nothing for an unobserved server. */
static int observed_started, observed_finished;
static call_outcome last_outcome;
static char last_target[256], last_method[64];
static bool last_method_known;
static void obs_started(void *data, call *c) {
  (void)data;
  observed_started++;
  snprintf(last_target, sizeof last_target, "%s", call_target(c) ? call_target(c) : "");
  snprintf(last_method, sizeof last_method, "%s", c->method);
  CHECK(call_params(c) != NULL || strcmp(c->method, "nope") == 0, "params while starting");
}
static void obs_finished(void *data, call *c, call_outcome outcome, uint64_t took) {
  (void)data;
  (void)c;
  (void)took;
  observed_finished++;
  last_outcome = outcome;
  last_method_known = call_method_known(c);
}
static const call_observer OBSERVER = {.started = obs_started, .finished = obs_finished};

static void test_observer(void) {
  session *s = new_session();
  initialize(s, "2025-06-18");
  observed_started = observed_finished = 0;
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{}}");
  CHECK(observed_started == 0 && observed_finished == 0, "no observer, no calls to it");
  CHECK(observe_add(&srv, &OBSERVER, NULL), "observer taken");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"echo\",\"params\":{}}");
  CHECK(observed_started == 1 && observed_finished == 1, "one start, one end");
  CHECK(last_outcome == CALL_OK, "ok");
  CHECK(last_method_known, "answered: a known method");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"nope\"}");
  CHECK(last_outcome == CALL_PROTOCOL_ERROR, "an error answer is a protocol error");
  CHECK_STR(last_method, "nope");
  CHECK(!last_method_known, "answered method-not-found: an unknown method");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"hold\",\"params\":{}}");
  CHECK(observed_started == 3 && observed_finished == 2, "held: started, not finished");
  receive(s, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":4}}");
  CHECK(observed_finished == 3 && last_outcome == CALL_CANCELLED, "cancelled");
  receive(s, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"add\"}}");
  CHECK_STR(last_target, "add");
  /* A long name is cut at OBSERVE_TARGET_MAX_BYTES, never inside a UTF-8
   * character ("\u00e9" is 2 bytes: 127 would split the 64th). */
  {
    char msg[512] = "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":\"x";
    for (int i = 0; i < 100; i++) strcat(msg, "\xc3\xa9");
    strcat(msg, "\"}}");
    receive(s, msg);
    CHECK(strlen(last_target) == 127, "cut at 127 bytes (a whole character)");
    CHECK(((unsigned char)last_target[126] & 0xC0) == 0x80, "ends with a whole character");
  }
  CHECK(!strcmp(call_outcome_name(CALL_TOOL_ERROR), "tool_error"), "outcome names");
  observe_remove(&srv, &OBSERVER, NULL);
  CHECK(srv.observer_count == 0, "removed");
  session_free(s);
}

int main(void) {
  test_negotiation();
  test_batches();
  test_cancel_and_close();
  test_cancel_before_request();
  test_responses_without_usable_id();
  test_client_requests();
  test_progress_and_logging();
  test_subscriptions();
  test_subscription_limits();
  test_kept_fields();
  test_in_place();
  test_state_tokens();
  test_call_identity();
  test_job_owners();
  test_subscribe_scopes();
  test_observer();
  clear_sent();
  return check_report();
}
