/* jobs.c - the MCP tasks a server holds. See jobs.h. */
#include "core/jobs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/jsonrpc.h"
#include "core/luamcp_limits.h"
#include "core/server.h"
#include "os/crypto.h"

static char *dup_or_null(const char *s) { return s ? strdup(s) : NULL; }

/* The server's store, made on first use. */
static job_store *store(server *srv) {
  if (!srv->jobs) {
    srv->jobs = calloc(1, sizeof *srv->jobs);
    strmap_init(&srv->jobs->by_id);
    strmap_init(&srv->jobs->by_client);
  }
  return srv->jobs;
}

static void job_free(job *j) {
  for (job_input *in = j->inputs, *next; in; in = next) {
    next = in->next;
    free(in->key);
    free(in->request_json);
    free(in->response_json);
    free(in);
  }
  free(j->status_message);
  free(j->outcome_json);
  free(j->method);
  free(j->request_id);
  free(j->client_capabilities_json);
  free(j->client_info_json);
  free(j->client_key);
  free(j->owner_principal);
  free(j);
}

void jobs_release(server *srv) {
  job_store *st = store(srv);
  if (!st) return;
  for (job *j = st->first, *next; j; j = next) {
    next = j->next;
    job_free(j);
  }
  strmap_free(&st->by_id);
  /* Running jobs were counted by client: free the counters. */
  for (size_t i = 0; i < st->by_client.bucket_count; i++)
    for (strmap_entry *e = st->by_client.buckets[i]; e; e = e->next) free(e->value);
  strmap_free(&st->by_client);
  free(st);
  srv->jobs = NULL;
}

bool jobs_declared(const char *caps) {
  if (!caps) return false;
  json_doc *doc = json_parse(caps, strlen(caps), MAX_JSON_DEPTH, NULL);
  if (!doc) return false;
  const json_value *ext = json_object_get(json_object_get(json_doc_root(doc), "extensions"), JOBS_EXTENSION);
  bool declared = ext && ext->type == JSON_OBJECT;
  json_doc_free(doc);
  return declared;
}

/* ---- The store ------------------------------------------------------ */

static void unlink_done(job_store *st, job *j) {
  if (j->done_prev) j->done_prev->done_next = j->done_next;
  else if (st->done_first == j) st->done_first = j->done_next;
  if (j->done_next) j->done_next->done_prev = j->done_prev;
  else if (st->done_last == j) st->done_last = j->done_prev;
  j->done_prev = j->done_next = NULL;
}

static void uncount_client(job_store *st, const char *key);

static void remove_job(job_store *st, job *j) {
  strmap_remove(&st->by_id, j->id);
  if (j->prev) j->prev->next = j->next;
  else st->first = j->next;
  if (j->next) j->next->prev = j->prev;
  else st->last = j->prev;
  if (job_terminal(j)) unlink_done(st, j);
  else {
    st->running--;
    uncount_client(st, j->client_key);
  }
  st->kept_bytes -= j->bytes;
  job_free(j);
}

void jobs_expire(server *srv) {
  job_store *st = store(srv);
  uint64_t now = clock_monotonic_ns();
  while (st->done_first && now - st->done_first->finished_ns >= (uint64_t)JOB_KEEP_MS * 1000000u)
    remove_job(st, st->done_first);
  /* Over the budget: the oldest finished jobs go first, never the one
   * that just finished (done_last) unless it is alone over it. */
  while (st->kept_bytes > JOB_KEPT_BYTES && st->done_first && st->done_first != st->done_last)
    remove_job(st, st->done_first);
}

static void charge(job_store *st, job *j, size_t n) {
  j->bytes += n;
  st->kept_bytes += n;
}

static void uncharge(job_store *st, job *j, size_t n) {
  if (n > j->bytes) n = j->bytes;
  j->bytes -= n;
  st->kept_bytes -= n;
}

/* ---- Who asked ------------------------------------------------------ */

int jobs_client_cap(const server *srv) {
  if (srv->opts.max_tasks_per_client > 0) return srv->opts.max_tasks_per_client;
  if (srv->opts.one_client || srv->opts.max_tasks <= 0) return 0;
  int share = srv->opts.max_tasks / JOBS_CLIENT_SHARE;
  return share > 0 ? share : 1;
}

static size_t *client_count(job_store *st, const char *key) { return strmap_get(&st->by_client, key); }

static void count_client(job_store *st, const char *key) {
  size_t *n = client_count(st, key);
  if (!n) {
    n = calloc(1, sizeof *n);
    strmap_set(&st->by_client, key, n);
  }
  (*n)++;
}

static void uncount_client(job_store *st, const char *key) {
  size_t *n = key ? client_count(st, key) : NULL;
  if (n && --*n == 0) free(strmap_remove(&st->by_client, key));
}

/* ---- What a job keeps of its request --------------------------------- */

/* The value with its keys and short values, strings cut, nested objects
 * down to depth levels (deeper ones become {}), arrays emptied: what
 * ctx.capabilities and ctx.client need (which capabilities, which
 * sub-features, the client's name), without what a client could pad them
 * with. */
static void write_skeleton(buf *out, const json_value *v, int depth) {
  switch (v->type) {
    case JSON_OBJECT:
      buf_putc(out, '{');
      if (depth > 0) {
        for (uint32_t i = 0; i < v->len && out->len < JOB_CLIENT_FIELD_BYTES; i++) {
          const json_member *m = &v->u.members[i];
          if (i) buf_putc(out, ',');
          json_write_string(out, m->key, m->key_len < JOB_CLIENT_STRING_BYTES ? m->key_len : JOB_CLIENT_STRING_BYTES);
          buf_putc(out, ':');
          write_skeleton(out, &m->value, depth - 1);
        }
      }
      buf_putc(out, '}');
      break;
    case JSON_ARRAY: buf_puts(out, "[]"); break;
    case JSON_STRING:
      json_write_string(out, v->u.string, v->len < JOB_CLIENT_STRING_BYTES ? v->len : JOB_CLIENT_STRING_BYTES);
      break;
    default: json_write_value(out, v); break;
  }
}

/* A copy of a client field (JSON text) no longer than about
 * JOB_CLIENT_FIELD_BYTES: whole when it fits, else its skeleton. */
static char *keep_client_field(const char *json) {
  if (!json) return NULL;
  size_t len = strlen(json);
  if (len <= JOB_CLIENT_FIELD_BYTES) return strndup(json, len);
  json_doc *doc = json_parse(json, len, MAX_JSON_DEPTH, NULL);
  if (!doc) return NULL;
  buf out = BUF_INIT;
  write_skeleton(&out, json_doc_root(doc), 2);
  json_doc_free(doc);
  return buf_detach(&out, NULL);
}

static size_t text_bytes(const char *s) { return s ? strlen(s) : 0; }

job *job_create(server *srv, const char *method, const char *request_id, const char *caps, const char *info,
                const protocol_version *version, int poll_interval_ms, const char *client_key,
                const char *owner_principal, size_t work_bytes, char *why, size_t why_size) {
  job_store *st = store(srv);
  jobs_expire(srv);
  if (srv->opts.max_tasks > 0 && st->running >= (size_t)srv->opts.max_tasks) {
    snprintf(why, why_size, "%d tasks run already (--max-tasks)", srv->opts.max_tasks);
    return NULL;
  }
  int client_cap = jobs_client_cap(srv);
  size_t *running_for_client = client_count(st, client_key);
  if (client_cap > 0 && running_for_client && *running_for_client >= (size_t)client_cap) {
    snprintf(why, why_size, "this client (%s) runs %d tasks already (--max-tasks-per-client)", client_key, client_cap);
    return NULL;
  }
  char *kept_caps = keep_client_field(caps), *kept_info = keep_client_field(info);
  size_t held = JOB_BASE_BYTES + text_bytes(method) + text_bytes(request_id) + text_bytes(kept_caps) +
                text_bytes(kept_info) + text_bytes(client_key) + work_bytes;
  /* Room for it: the oldest finished jobs make way; running ones cannot. */
  while (st->kept_bytes + held > JOB_KEPT_BYTES && st->done_first) remove_job(st, st->done_first);
  if (st->kept_bytes + held > JOB_KEPT_BYTES) {
    snprintf(why, why_size, "the running tasks hold %zu bytes of their requests, and this one needs %zu more "
             "(the tasks' budget is %u bytes)", st->kept_bytes, held, JOB_KEPT_BYTES);
    free(kept_caps);
    free(kept_info);
    return NULL;
  }
  unsigned char raw[16];
  if (!os_random_bytes(raw, sizeof raw)) {
    snprintf(why, why_size, "no random bytes for a task id");
    free(kept_caps);
    free(kept_info);
    return NULL;
  }
  job *j = calloc(1, sizeof *j);
  for (size_t i = 0; i < sizeof raw; i++) snprintf(j->id + 2 * i, 3, "%02x", raw[i]);
  j->status = JOB_WORKING;
  j->created_ms = j->updated_ms = clock_wall_ms();
  j->poll_interval_ms = poll_interval_ms > 0 ? poll_interval_ms : JOB_POLL_INTERVAL_MS;
  j->method = strdup(method);
  j->request_id = dup_or_null(request_id);
  j->client_capabilities_json = kept_caps;
  j->client_info_json = kept_info;
  j->client_key = strdup(client_key);
  j->owner_principal = owner_principal && *owner_principal ? strdup(owner_principal) : NULL;
  j->version = version;
  j->prev = st->last;
  if (st->last) st->last->next = j;
  else st->first = j;
  st->last = j;
  st->running++;
  strmap_set(&st->by_id, j->id, j);
  count_client(st, client_key);
  j->held = held;
  charge(st, j, held);
  charge(st, j, text_bytes(j->owner_principal)); /* kept for the job's whole life, beside its record */
  return j;
}

bool job_owned_by(const job *j, const char *principal) {
  return strcmp(j->owner_principal ? j->owner_principal : "", principal ? principal : "") == 0;
}

job *job_find_for(server *srv, const char *id, size_t len, const char *principal) {
  job *j = job_find(srv, id, len);
  return j && job_owned_by(j, principal) ? j : NULL;
}

job *job_find(server *srv, const char *id, size_t len) {
  jobs_expire(srv);
  if (len != 32 || memchr(id, 0, len)) return NULL;
  char key[33];
  memcpy(key, id, 32);
  key[32] = 0;
  return strmap_get(&store(srv)->by_id, key);
}

/* ---- Changes -------------------------------------------------------- */

static void touch(job *j) { j->updated_ms = clock_wall_ms(); }

/* Outstanding questions decide between working and input_required. */
static void settle_status(job *j) {
  if (job_terminal(j)) return;
  job_status s = JOB_WORKING;
  for (job_input *in = j->inputs; in; in = in->next)
    if (!in->response_json && in->waiter) s = JOB_INPUT_REQUIRED;
  if (s != j->status) {
    j->status = s;
    touch(j);
  }
}

static void end_job(server *srv, job *j, job_status status) {
  job_store *st = store(srv);
  j->status = status;
  j->app_data = NULL;
  j->finished_ns = clock_monotonic_ns();
  touch(j);
  st->running--;
  uncount_client(st, j->client_key);
  /* What the request said was for the work: it has ended (a cancelled
   * job's work is being stopped), so only the job's record stays charged,
   * with its outcome (job_finish). */
  uncharge(st, j, j->held - JOB_BASE_BYTES);
  j->held = 0;
  free(j->request_id);
  free(j->client_capabilities_json);
  free(j->client_info_json);
  free(j->client_key);
  j->request_id = j->client_capabilities_json = j->client_info_json = j->client_key = NULL;
  j->done_prev = st->done_last;
  if (st->done_last) st->done_last->done_next = j;
  else st->done_first = j;
  st->done_last = j;
  /* Questions cost nothing once the job ended. */
  for (job_input *in = j->inputs; in; in = in->next) {
    in->waiter = NULL;
    size_t n = (in->request_json ? strlen(in->request_json) : 0) + (in->response_json ? strlen(in->response_json) : 0);
    free(in->request_json);
    free(in->response_json);
    in->request_json = in->response_json = NULL;
    uncharge(st, j, n);
  }
}

static void set_message(job *j, const char *message, size_t len) {
  free(j->status_message);
  j->status_message = message ? strndup(message, len) : NULL;
}

void job_finish(server *srv, job *j, bool completed, const char *json, size_t len, const char *status_message) {
  if (job_terminal(j)) {
    j->app_data = NULL;
    return;
  }
  j->outcome_json = strndup(json, len);
  charge(store(srv), j, len);
  size_t message_len = status_message ? strlen(status_message) : 0;
  set_message(j, status_message, message_len < JOB_STATUS_MESSAGE_BYTES ? message_len : JOB_STATUS_MESSAGE_BYTES);
  end_job(srv, j, completed ? JOB_COMPLETED : JOB_FAILED);
  jobs_expire(srv);
}

void job_detach(server *srv, job *j, const char *why) {
  if (job_terminal(j)) {
    j->app_data = NULL;
    return;
  }
  buf err = BUF_INIT;
  jsonrpc_write_error_object(&err, JSONRPC_INTERNAL_ERROR, why, NULL, 0);
  job_finish(srv, j, false, err.data, err.len, why);
  buf_free(&err);
}

void job_set_message(server *srv, job *j, const char *message, size_t len) {
  (void)srv;
  if (job_terminal(j)) return;
  if (len > JOB_STATUS_MESSAGE_BYTES) len = JOB_STATUS_MESSAGE_BYTES;
  set_message(j, message, len);
  touch(j);
}

bool job_ask(server *srv, job *j, const char *key, const char *request_json, size_t len, void *waiter) {
  for (job_input *in = j->inputs; in; in = in->next)
    if (strcmp(in->key, key) == 0) return false;
  job_input *in = calloc(1, sizeof *in);
  in->key = strdup(key);
  in->request_json = strndup(request_json, len);
  in->waiter = waiter;
  job_input **tail = &j->inputs;
  while (*tail) tail = &(*tail)->next;
  *tail = in;
  charge(store(srv), j, len);
  settle_status(j);
  return true;
}

const char *job_answer(const job *j, const char *key) {
  for (const job_input *in = j->inputs; in; in = in->next)
    if (strcmp(in->key, key) == 0) return in->response_json;
  return NULL;
}

void job_abandon(server *srv, job *j, void *waiter) {
  (void)srv;
  for (job_input *in = j->inputs; in; in = in->next)
    if (in->waiter == waiter) in->waiter = NULL;
  settle_status(j);
}

bool job_waiting(const job *j, void *waiter) {
  for (const job_input *in = j->inputs; in; in = in->next)
    if (in->waiter == waiter && !in->response_json) return true;
  return false;
}

/* ---- The wire ------------------------------------------------------- */

static const char *status_name(job_status s) {
  switch (s) {
    case JOB_WORKING: return "working";
    case JOB_INPUT_REQUIRED: return "input_required";
    case JOB_COMPLETED: return "completed";
    case JOB_FAILED: return "failed";
    case JOB_CANCELLED: return "cancelled";
  }
  return "working";
}

static void write_time(buf *out, int64_t ms) {
  time_t secs = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&secs, &tm);
  buf_printf(out, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03dZ\"", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
             tm.tm_min, tm.tm_sec, (int)(ms % 1000));
}

void job_write(buf *out, const job *j, job_view view) {
  buf_putc(out, '{');
  if (view == JOB_VIEW_CREATED) buf_puts(out, "\"resultType\":\"task\",");
  else if (view == JOB_VIEW_GET) buf_puts(out, "\"resultType\":\"complete\",");
  buf_printf(out, "\"taskId\":\"%s\",\"status\":\"%s\"", j->id, status_name(j->status));
  if (j->status_message) {
    buf_puts(out, ",\"statusMessage\":");
    json_write_string(out, j->status_message, strlen(j->status_message));
  }
  buf_puts(out, ",\"createdAt\":");
  write_time(out, j->created_ms);
  buf_puts(out, ",\"lastUpdatedAt\":");
  write_time(out, j->updated_ms);
  /* A running job is never discarded (null: unlimited); a finished one is
   * kept JOB_KEEP_MS after it ended, counted from its creation. */
  if (job_terminal(j)) {
    int64_t ended_ms = j->updated_ms - j->created_ms;
    buf_printf(out, ",\"ttlMs\":%lld", (long long)((ended_ms > 0 ? ended_ms : 0) + JOB_KEEP_MS));
  } else {
    buf_puts(out, ",\"ttlMs\":null");
  }
  buf_printf(out, ",\"pollIntervalMs\":%d", j->poll_interval_ms);
  if (view != JOB_VIEW_CREATED) {
    if (j->status == JOB_COMPLETED && j->outcome_json) {
      buf_puts(out, ",\"result\":");
      buf_append_str(out, j->outcome_json);
    } else if (j->status == JOB_FAILED && j->outcome_json) {
      buf_puts(out, ",\"error\":");
      buf_append_str(out, j->outcome_json);
    } else if (j->status == JOB_INPUT_REQUIRED) {
      buf_puts(out, ",\"inputRequests\":{");
      bool first = true;
      for (const job_input *in = j->inputs; in; in = in->next) {
        if (in->response_json || !in->waiter || !in->request_json) continue;
        if (!first) buf_putc(out, ',');
        first = false;
        json_write_string(out, in->key, strlen(in->key));
        buf_putc(out, ':');
        buf_append_str(out, in->request_json);
      }
      buf_putc(out, '}');
    }
  }
  buf_putc(out, '}');
}

/* ---- tasks/get, tasks/update, tasks/cancel -------------------------- */

static bool is(const char *method, const char *name) { return strcmp(method, name) == 0; }

int jobs_handle(server *srv, const char *method, const json_value *params, const char *principal, buf *out,
                job **changed, const char **message) {
  *changed = NULL;
  const json_value *id = json_object_get(params, "taskId");
  if (!id || id->type != JSON_STRING) {
    *message = "Invalid params: taskId (a string) is required";
    return JSONRPC_INVALID_PARAMS;
  }
  const json_value *responses = NULL;
  if (is(method, "tasks/update")) {
    responses = json_object_get(params, "inputResponses");
    if (!responses || responses->type != JSON_OBJECT) {
      *message = "Invalid params: inputResponses (an object of answers by key) is required";
      return JSONRPC_INVALID_PARAMS;
    }
  }
  job *j = job_find_for(srv, id->u.string, id->len, principal);
  if (!j) {
    *message = "Invalid params: no such task (unknown, or expired and discarded)";
    return JSONRPC_INVALID_PARAMS;
  }
  if (is(method, "tasks/get")) {
    job_write(out, j, JOB_VIEW_GET);
    return 0;
  }
  if (is(method, "tasks/update")) {
    /* Answers to questions still outstanding are taken; any other key (never
     * asked, already answered, abandoned) is ignored, as the spec says. */
    for (uint32_t i = 0; i < responses->len; i++) {
      const json_member *m = &responses->u.members[i];
      job_input *in = j->inputs;
      while (in && !(strlen(in->key) == m->key_len && memcmp(in->key, m->key, m->key_len) == 0)) in = in->next;
      if (!in || in->response_json || !in->waiter || job_terminal(j)) continue;
      if (m->value.type != JSON_OBJECT) {
        *message = "Invalid params: each of inputResponses must be an object (the answer to its question)";
        return JSONRPC_INVALID_PARAMS;
      }
    }
    bool answered = false;
    for (uint32_t i = 0; i < responses->len && !job_terminal(j); i++) {
      const json_member *m = &responses->u.members[i];
      for (job_input *in = j->inputs; in; in = in->next) {
        if (in->response_json || !in->waiter) continue;
        if (!(strlen(in->key) == m->key_len && memcmp(in->key, m->key, m->key_len) == 0)) continue;
        buf text = BUF_INIT;
        json_write_value(&text, &m->value);
        charge(store(srv), j, text.len);
        in->response_json = buf_detach(&text, NULL);
        answered = true;
      }
    }
    buf_puts(out, "{\"resultType\":\"complete\"}");
    if (answered) {
      settle_status(j);
      touch(j);
      *changed = j;
      if (srv->app && srv->app->job_answered) srv->app->job_answered(srv->app_data, j);
    }
    return 0;
  }
  /* tasks/cancel: the same empty acknowledgement for a finished job. */
  if (!job_terminal(j)) {
    void *work = j->app_data;
    j->outcome_json = NULL;
    set_message(j, "cancelled by the client", strlen("cancelled by the client"));
    end_job(srv, j, JOB_CANCELLED);
    *changed = j;
    if (work && srv->app && srv->app->job_cancel) srv->app->job_cancel(srv->app_data, work);
  }
  buf_puts(out, "{\"resultType\":\"complete\"}");
  return 0;
}
