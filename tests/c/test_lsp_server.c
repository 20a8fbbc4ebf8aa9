/* test_lsp_server.c — the whole server over an in-memory transport: a
 * scripted client sends framed messages, runs the loop, and reads what
 * the server wrote. A fake backend makes jobs observable (progress,
 * cancellation, stale results); the engine backend gives real static
 * diagnostics on KernelBench files. */
#include "mk_lsp_engine.h"
#include "mk_lsp_engine_config.h"
#include "mk_lsp_server.h"
#include "mk_test.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAXMSG 256
/* Short-named copies keep failure messages within mk_test's buffers when
 * the checked expression is a long JSON path (file:line says which). */
#define CHECK_S(a, b)        \
  do {                       \
    const char *s_ = (a);    \
    MK_CHECK_STR(s_, b);     \
  } while (0)
#define CHECK_I(a, op, b)    \
  do {                       \
    long long i_ = (a);      \
    MK_CHECK_INT(i_, op, b); \
  } while (0)

/* ---- fake backend --------------------------------------------------------- */

typedef struct fake {
  int analyses, cancels, configured;
  bool async;                 /* analyses wait for fake_finish */
  mk_lsp_sink pending;        /* the job waiting (analysis or command) */
  bool has_pending;
  uint64_t pending_job, next;
  char last_text[256];
  char last_settings[512];    /* the settings object configure got, as JSON */
  bool fail_analysis;
  bool last_opened, last_saved; /* the flags of the last analysis */
} fake;

static const char *const fake_cmds[] = {"fake.evolve", "fake.edit", "fake.fail", "fake.show", NULL};
static const char *const *f_commands(void *self) { return fake_cmds; }

static void fake_analysis(mk_lsp_analysis *a) {
  /* Line 1 is "y = \"é\" + 1": byte col 9 is after é (UTF-16 col 8). */
  mk_lsp_range r = {1, 9, 1, 13};
  mk_lsp_analysis_add_finding(a, r, MK_LSP_SEV_INFO, "subkernel", "add: 1.8x vs eager, verified 5/5");
  mk_lsp_range at = {0, 0, 0, 4};
  mk_lsp_finding_add_note(&a->findings[0], "/tmp/composed_new.py", at, "kernel here");
  mk_lsp_range reg = {1, 0, 2, 0};
  mk_lsp_analysis_add_region(a, reg, "add: 1.8x", "| variant | time |\n|---|---|\n| v1 | 1 ms |");
  mk_lsp_analysis_add_action(a, &a->regions[0], "Evolve subkernel add", "fake.evolve",
                             cJSON_Parse("[\"sk0\"]"), "refactor.rewrite", true);
  mk_lsp_analysis_add_action(a, NULL, "Decompose into subkernels", "fake.edit", cJSON_CreateArray(),
                             "source", false);
}

static int f_analyze(void *self, const mk_lsp_doc_view *doc, const mk_lsp_sink *sink, uint64_t *job) {
  fake *f = self;
  f->analyses++;
  f->last_opened = doc->opened;
  f->last_saved = doc->saved;
  snprintf(f->last_text, sizeof f->last_text, "%.*s", (int)(doc->len < 200 ? doc->len : 200), doc->text);
  *job = ++f->next;
  if (f->async) {
    if (f->has_pending) f->pending.done(f->pending.ctx, MK_ECANCELED, NULL, NULL, NULL);
    f->pending = *sink;
    f->pending_job = *job;
    f->has_pending = true;
    sink->progress(sink->ctx, 10, "capturing");
    return 0;
  }
  if (f->fail_analysis) {
    sink->done(sink->ctx, MK_ECRASHED, NULL, NULL, "worker crashed (signal 11)");
    return 0;
  }
  mk_lsp_analysis a = {0};
  fake_analysis(&a);
  sink->done(sink->ctx, 0, &a, NULL, NULL);
  return 0;
}

static int f_execute(void *self, const char *command, const cJSON *args, const mk_lsp_sink *sink,
                     uint64_t *job, mk_errmsg *err) {
  fake *f = self;
  *job = ++f->next;
  if (strcmp(command, "fake.fail") == 0) return mk_errf(err, MK_EWORKER, "no GPU and no CPU either");
  if (strcmp(command, "fake.show") == 0) {
    cJSON *r = cJSON_Parse("{\"uri\":\"file:///tmp/mk_lsp_test/edit/x.ref.py\","
                           "\"showDocument\":\"file:///tmp/mk_lsp_test/edit/x.ref.py\"}");
    sink->done(sink->ctx, 0, NULL, r, NULL);
    return 0;
  }
  if (strcmp(command, "fake.edit") == 0) {
    cJSON *r = cJSON_Parse("{\"message\":\"decomposed into 3 subkernels\",\"refresh\":true,"
                           "\"edit\":{\"changes\":{}}}");
    sink->done(sink->ctx, 0, NULL, r, NULL);
    return 0;
  }
  f->pending = *sink; /* fake.evolve: finishes when the test says */
  f->pending_job = *job;
  f->has_pending = true;
  sink->progress(sink->ctx, 0, "generation 1");
  return 0;
}

static void f_cancel(void *self, uint64_t job) {
  fake *f = self;
  f->cancels++;
  if (f->has_pending && f->pending_job == job) {
    f->has_pending = false;
    f->pending.done(f->pending.ctx, MK_ECANCELED, NULL, NULL, NULL);
  }
}
/* Takes every settings object; refuses a key "fakeBad" as a backend would. */
static int f_configure(void *self, const cJSON *settings, mk_errmsg *err) {
  fake *f = self;
  f->configured++;
  char *json = settings ? cJSON_PrintUnformatted(settings) : NULL;
  snprintf(f->last_settings, sizeof f->last_settings, "%s", json ? json : "");
  free(json);
  if (cJSON_GetObjectItem(mk_lsp_settings_scope(settings), "fakeBad"))
    return mk_errf(err, MK_EINVAL, "fake: settings ignored: fakeBad");
  return 0;
}
static void f_destroy(void *self) {}

static const mk_lsp_backend_ops fake_ops = {NULL, f_commands, f_analyze, f_execute, f_cancel,
                                            f_configure, NULL, f_destroy};

/* ---- scripted client ------------------------------------------------------ */

typedef struct client {
  uv_loop_t loop;
  mk_lsp_server *server;
  mk_lsp_transport *t;
  mk_buf out;
  size_t parsed;
  cJSON *msgs[MAXMSG];
  int n;
  int exit_code;
} client;

static int c_send(void *ctx, const char *body, size_t len) {
  client *c = ctx;
  return c->t ? mk_lsp_transport_send(c->t, body, len) : MK_EIO;
}
static void c_exit(void *ctx, int code) { ((client *)ctx)->exit_code = code; }

/* Parses frames the server wrote since the last call. */
static void c_collect(client *c) {
  while (c->parsed < c->out.len) {
    const char *p = c->out.data + c->parsed;
    size_t len;
    if (sscanf(p, "Content-Length: %zu\r\n\r\n", &len) != 1) break;
    const char *body = strstr(p, "\r\n\r\n") + 4;
    cJSON *j = cJSON_ParseWithLength(body, len);
    MK_CHECK(j != NULL);
    if (j && c->n < MAXMSG) c->msgs[c->n++] = j;
    else cJSON_Delete(j);
    c->parsed = (size_t)(body - c->out.data) + len;
  }
}

static void c_pump(client *c) {
  for (int i = 0; i < 3; i++) uv_run(&c->loop, UV_RUN_NOWAIT);
  c_collect(c);
}

static void c_start(client *c, mk_lsp_backend backend) {
  memset(c, 0, sizeof *c);
  c->exit_code = -1;
  MK_CHECK(uv_loop_init(&c->loop) == 0);
  mk_buf_init(&c->out, 0);
  mk_lsp_server_options o = {.loop = &c->loop, .backend = backend, .send = c_send, .send_ctx = c,
                             .on_exit = c_exit, .exit_ctx = c, .log = NULL};
  MK_CHECK(mk_lsp_server_new(&o, &c->server) == 0);
  mk_lsp_transport_events ev = {mk_lsp_server_frames(c->server), NULL};
  MK_CHECK(mk_lsp_transport_memory(&ev, &c->out, 1 << 20, &c->t) == 0);
}

static void c_raw(client *c, const char *bytes, size_t len) {
  mk_lsp_transport_feed(c->t, bytes, len);
  c_pump(c);
}

static void c_sendf(client *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void c_sendf(client *c, const char *fmt, ...) {
  mk_buf body, frame;
  mk_buf_init(&body, 0);
  mk_buf_init(&frame, 0);
  va_list ap;
  va_start(ap, fmt);
  mk_buf_vprintf(&body, fmt, ap);
  va_end(ap);
  mk_lsp_frame_write(&frame, body.data, body.len);
  c_raw(c, frame.data, frame.len);
  mk_buf_free(&body);
  mk_buf_free(&frame);
}

static void c_stop(client *c) {
  mk_lsp_server_close(c->server);
  mk_lsp_transport_close(c->t);
  c->t = NULL;
  uv_run(&c->loop, UV_RUN_DEFAULT);
  MK_CHECK(uv_loop_close(&c->loop) == 0);
  for (int i = 0; i < c->n; i++) cJSON_Delete(c->msgs[i]);
  mk_buf_free(&c->out);
}

static bool is_method(const cJSON *m, const char *method) {
  const cJSON *x = cJSON_GetObjectItem(m, "method");
  return cJSON_IsString(x) && strcmp(x->valuestring, method) == 0;
}

/* Responses (not requests) with numeric id. */
static int count_replies(client *c, int id) {
  int n = 0;
  for (int i = 0; i < c->n; i++) {
    const cJSON *x = cJSON_GetObjectItem(c->msgs[i], "id");
    if (cJSON_IsNumber(x) && x->valueint == id && !cJSON_GetObjectItem(c->msgs[i], "method")) n++;
  }
  return n;
}

static cJSON *reply(client *c, int id) {
  for (int i = 0; i < c->n; i++) {
    const cJSON *x = cJSON_GetObjectItem(c->msgs[i], "id");
    if (cJSON_IsNumber(x) && x->valueint == id && !cJSON_GetObjectItem(c->msgs[i], "method"))
      return c->msgs[i];
  }
  return NULL;
}

/* The last message with `method` (from index `from`), or NULL. */
static cJSON *last_with(client *c, const char *method, int from) {
  cJSON *m = NULL;
  for (int i = from; i < c->n; i++)
    if (is_method(c->msgs[i], method)) m = c->msgs[i];
  return m;
}

static int count_with(client *c, const char *method) {
  int n = 0;
  for (int i = 0; i < c->n; i++) n += is_method(c->msgs[i], method);
  return n;
}

/* Runs the loop until a message with `method` arrives after index `from`
 * (at most `ms` milliseconds). */
static cJSON *wait_for(client *c, const char *method, int from, int ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    c_pump(c);
    cJSON *m = last_with(c, method, from);
    if (m) return m;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms) return NULL;
    usleep(1000);
  }
}

static const char *CAPS =
    "{\"window\":{\"workDoneProgress\":true},\"workspace\":{\"applyEdit\":true},"
    "\"textDocument\":{\"publishDiagnostics\":{\"relatedInformation\":true},"
    "\"codeAction\":{\"codeActionLiteralSupport\":{\"codeActionKind\":{\"valueSet\":[]}}}}}";

static void c_init(client *c, const char *options) {
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"capabilities\":%s,"
          "\"initializationOptions\":%s}}", CAPS, options ? options : "null");
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}");
}

static void c_open(client *c, const char *uri, const char *text) {
  cJSON *t = cJSON_CreateString(text);
  char *q = cJSON_PrintUnformatted(t);
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didOpen\",\"params\":{\"textDocument\":"
          "{\"uri\":\"%s\",\"languageId\":\"python\",\"version\":1,\"text\":%s}}}", uri, q);
  cJSON_free(q);
  cJSON_Delete(t);
}

static const char *FAKE_TEXT = "x = 1\ny = \"\xc3\xa9\" + 1\nz = y\n";
#define URI "file:///tmp/mk_lsp_test/model.py"

static mk_lsp_backend fake_backend(fake *f) {
  memset(f, 0, sizeof *f);
  return (mk_lsp_backend){&fake_ops, f};
}

/* ---- tests ---------------------------------------------------------------- */

MK_TEST(lsp_server, lifecycle_and_capabilities) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"textDocument/hover\",\"params\":{}}");
  CHECK_I(count_replies(&c, 7), ==, 1);
  c_init(&c, NULL);
  cJSON *r = reply(&c, 1);
  MK_REQUIRE(r != NULL);
  cJSON *caps = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "capabilities");
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(caps, "textDocumentSync"), "change")->valueint, ==, 2);
  cJSON *cmds = cJSON_GetObjectItem(cJSON_GetObjectItem(caps, "executeCommandProvider"), "commands");
  CHECK_I(cJSON_GetArraySize(cmds), ==, 4);
  CHECK_I(f.configured, ==, 1);
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"shutdown\"}");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"shutdown\"}");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"textDocument/hover\",\"params\":{}}");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}");
  CHECK_I(count_replies(&c, 2), ==, 1);
  CHECK_I(count_replies(&c, 3), ==, 1);
  CHECK_I(count_replies(&c, 4), ==, 1);
  CHECK_I(c.exit_code, ==, 0);
  c_stop(&c);
}

MK_TEST(lsp_server, hostile_input_never_kills_it) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_init(&c, NULL);
  const char junk[] = "Content-Length: abc\r\n\r\n{}"
                      "Content-Length: 5\r\n\r\n\xff\xff\xff\xff\xff"
                      "Content-Length: 9999999999\r\n\r\n"; /* over the 1 MiB cap: skipped */
  c_raw(&c, junk, sizeof junk - 1);
  /* The skipped body "eats" the next bytes it claims; feed them. */
  char *filler = malloc(10000);
  MK_REQUIRE(filler != NULL);
  memset(filler, ' ', 10000);
  c_raw(&c, filler, 10000);
  free(filler);
  mk_lsp_server_close(c.server); /* the rest of the stream is gone: restart */
  mk_lsp_transport_close(c.t);
  c.t = NULL;
  uv_run(&c.loop, UV_RUN_DEFAULT);
  uv_loop_close(&c.loop);
  for (int i = 0; i < c.n; i++) cJSON_Delete(c.msgs[i]);
  mk_buf_free(&c.out);

  c_start(&c, fake_backend(&f));
  c_init(&c, NULL);
  int before = c.n;
  char deep[3000];
  int n = snprintf(deep, sizeof deep, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"x\",\"params\":");
  for (int i = 0; i < 1000; i++) deep[n++] = '[';
  for (int i = 0; i < 1000; i++) deep[n++] = ']';
  deep[n++] = '}';
  deep[n] = 0;
  c_sendf(&c, "%s", deep);
  c_raw(&c, "Content-Length: 3\r\n\r\n\xc3\x28x", 24); /* invalid UTF-8 */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"shutdown\"}");
  int answers = 0;
  for (int i = before; i < c.n; i++) answers += cJSON_GetObjectItem(c.msgs[i], "method") == NULL;
  CHECK_I(answers, ==, 3); /* parse error, parse error, shutdown reply (plus logMessages) */
  CHECK_I(count_replies(&c, 6), ==, 1);
  c_stop(&c);
}

MK_TEST(lsp_server, diagnostics_hover_actions_lenses) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_init(&c, NULL);
  c_open(&c, URI, FAKE_TEXT);
  cJSON *d = wait_for(&c, "textDocument/publishDiagnostics", 0, 2000);
  MK_REQUIRE(d != NULL);
  cJSON *diags = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "diagnostics");
  MK_REQUIRE(cJSON_GetArraySize(diags) == 1);
  cJSON *d0 = cJSON_GetArrayItem(diags, 0);
  cJSON *start = cJSON_GetObjectItem(cJSON_GetObjectItem(d0, "range"), "start");
  CHECK_I(cJSON_GetObjectItem(start, "character")->valueint, ==, 8); /* UTF-16, not byte 9 */
  CHECK_I(cJSON_GetObjectItem(d0, "severity")->valueint, ==, 3);
  cJSON *rel = cJSON_GetObjectItem(d0, "relatedInformation");
  CHECK_I(cJSON_GetArraySize(rel), ==, 1);
  CHECK_S(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(rel, 0), "location"), "uri")->valuestring,
               "file:///tmp/composed_new.py");

  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"textDocument/hover\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"},\"position\":{\"line\":1,\"character\":2}}}");
  cJSON *h = cJSON_GetObjectItem(reply(&c, 10), "result");
  MK_REQUIRE(cJSON_IsObject(h));
  MK_CHECK(strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "contents"), "value")->valuestring,
                  "| variant |") != NULL);
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"textDocument/hover\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"},\"position\":{\"line\":0,\"character\":0}}}");
  MK_CHECK(cJSON_IsNull(cJSON_GetObjectItem(reply(&c, 11), "result")));

  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"textDocument/codeAction\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"},\"range\":{\"start\":{\"line\":1,\"character\":0},\"end\":{\"line\":1,"
          "\"character\":0}},\"context\":{\"diagnostics\":[]}}}");
  cJSON *acts = cJSON_GetObjectItem(reply(&c, 12), "result");
  MK_REQUIRE(cJSON_GetArraySize(acts) == 2);
  CHECK_S(cJSON_GetObjectItem(cJSON_GetArrayItem(acts, 0), "title")->valuestring, "Evolve subkernel add");
  CHECK_S(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(acts, 0), "command"), "command")->valuestring,
               "fake.evolve");
  /* Outside the region only the document action; `only` filters by kind. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"textDocument/codeAction\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"},\"range\":{\"start\":{\"line\":0,\"character\":0},\"end\":{\"line\":0,"
          "\"character\":0}},\"context\":{\"diagnostics\":[],\"only\":[\"refactor\"]}}}");
  CHECK_I(cJSON_GetArraySize(cJSON_GetObjectItem(reply(&c, 13), "result")), ==, 0);

  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"textDocument/codeLens\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"}}}");
  cJSON *lenses = cJSON_GetObjectItem(reply(&c, 14), "result");
  MK_REQUIRE(cJSON_GetArraySize(lenses) == 1);
  CHECK_S(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetArrayItem(lenses, 0), "command"), "title")->valuestring,
               "add: 1.8x");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"textDocument/hover\",\"params\":{\"textDocument\":"
          "{\"uri\":\"file:///not/open.py\"},\"position\":{\"line\":0,\"character\":0}}}");
  CHECK_I(count_replies(&c, 15), ==, 1);

  int before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didClose\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"}}}");
  cJSON *cleared = last_with(&c, "textDocument/publishDiagnostics", before);
  MK_REQUIRE(cleared != NULL);
  CHECK_I(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(cleared, "params"), "diagnostics")), ==, 0);
  c_stop(&c);
}

MK_TEST(lsp_server, debounce_coalesces_edits) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_init(&c, "{\"debounceMs\":40}");
  CHECK_I(mk_lsp_server_settings(c.server)->debounce_ms, ==, 40);
  c_open(&c, URI, FAKE_TEXT);
  MK_REQUIRE(wait_for(&c, "textDocument/publishDiagnostics", 0, 2000) != NULL);
  CHECK_I(f.analyses, ==, 1);
  int before = c.n;
  for (int v = 2; v <= 6; v++)
    c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
            "{\"uri\":\"" URI "\",\"version\":%d},\"contentChanges\":[{\"range\":{\"start\":{\"line\":2,"
            "\"character\":0},\"end\":{\"line\":2,\"character\":0}},\"text\":\"#\"}]}}", v);
  CHECK_I(f.analyses, ==, 1); /* nothing yet: still typing */
  cJSON *d = wait_for(&c, "textDocument/publishDiagnostics", before, 2000);
  MK_REQUIRE(d != NULL);
  CHECK_I(f.analyses, ==, 2);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "version")->valueint, ==, 6);
  MK_CHECK(strstr(f.last_text, "#####z = y") != NULL);
  /* Save analyses at once, no debounce wait. */
  before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didSave\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\"}}}");
  c_pump(&c);
  CHECK_I(f.analyses, ==, 3);
  /* A refused edit keeps the text and tells the user. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\",\"version\":9},\"contentChanges\":[{\"range\":{\"start\":{\"line\":2,"
          "\"character\":3},\"end\":{\"line\":1,\"character\":0}},\"text\":\"#\"}]}}");
  MK_CHECK(last_with(&c, "window/showMessage", before) != NULL);
  CHECK_I(mk_lsp_docs_get(mk_lsp_server_docs(c.server), URI)->version, ==, 6);
  c_stop(&c);
}

MK_TEST(lsp_server, stale_analysis_is_cancelled_and_dropped) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  f.async = true;
  c_init(&c, "{\"debounceMs\":0}");
  c_open(&c, URI, FAKE_TEXT);
  c_pump(&c);
  CHECK_I(f.analyses, ==, 1);
  mk_lsp_sink first = f.pending;
  (void)first;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\",\"version\":2},\"contentChanges\":[{\"text\":\"x = 2\\n\"}]}}");
  c_pump(&c);
  CHECK_I(f.analyses, ==, 2);
  CHECK_I(f.cancels, >=, 1); /* the first one was cancelled */
  CHECK_I(count_with(&c, "textDocument/publishDiagnostics"), ==, 0);
  /* The current one finishes: published with the new version. */
  mk_lsp_analysis a = {0};
  fake_analysis(&a);
  f.has_pending = false;
  f.pending.done(f.pending.ctx, 0, &a, NULL, NULL);
  mk_lsp_analysis_free(&a);
  c_pump(&c);
  cJSON *d = last_with(&c, "textDocument/publishDiagnostics", 0);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "version")->valueint, ==, 2);
  CHECK_I(mk_lsp_server_jobs(c.server), ==, 0);
  c_stop(&c);
}

MK_TEST(lsp_server, analysis_failure_is_a_diagnostic) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  f.fail_analysis = true;
  c_init(&c, NULL);
  c_open(&c, URI, FAKE_TEXT);
  cJSON *d = wait_for(&c, "textDocument/publishDiagnostics", 0, 2000);
  MK_REQUIRE(d != NULL);
  cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "diagnostics"), 0);
  MK_REQUIRE(d0 != NULL);
  CHECK_S(cJSON_GetObjectItem(d0, "code")->valuestring, "analysis-failed");
  MK_CHECK(strstr(cJSON_GetObjectItem(d0, "message")->valuestring, "signal 11") != NULL);
  c_stop(&c);
}

/* Answers the server's window/workDoneProgress/create request. */
static void ack_create(client *c, int from) {
  cJSON *req = last_with(c, "window/workDoneProgress/create", from);
  MK_REQUIRE(req != NULL);
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":null}", cJSON_GetObjectItem(req, "id")->valueint);
}

static const char *progress_kind(cJSON *m) {
  return cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "params"), "value"), "kind")->valuestring;
}

MK_TEST(lsp_server, execute_command_with_progress) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_init(&c, NULL);
  c_open(&c, URI, FAKE_TEXT);
  MK_REQUIRE(wait_for(&c, "textDocument/publishDiagnostics", 0, 2000) != NULL);
  int before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":20,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"fake.evolve\",\"arguments\":[\"sk0\"]}}");
  CHECK_I(count_replies(&c, 20), ==, 0); /* still running */
  CHECK_I(count_with(&c, "$/progress"), ==, 0); /* held until create is acknowledged */
  ack_create(&c, before);
  cJSON *begin = last_with(&c, "$/progress", before);
  MK_REQUIRE(begin != NULL);
  c_pump(&c);
  CHECK_I(count_with(&c, "$/progress"), ==, 2); /* begin + held report */
  for (int i = before; i < c.n; i++) {
    if (!is_method(c.msgs[i], "$/progress")) continue;
    CHECK_S(progress_kind(c.msgs[i]), "begin");
    CHECK_S(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(c.msgs[i], "params"), "value"),
                                     "title")->valuestring, "Evolve subkernel add");
    break;
  }
  MK_REQUIRE(f.has_pending);
  f.pending.progress(f.pending.ctx, 50, "generation 3: 1.4x");
  c_pump(&c);
  cJSON *rep = last_with(&c, "$/progress", before);
  CHECK_S(progress_kind(rep), "report");
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(rep, "params"), "value"), "percentage")->valueint, ==, 50);
  f.has_pending = false;
  f.pending.done(f.pending.ctx, 0, NULL, cJSON_Parse("{\"speedup\":1.6}"), NULL);
  c_pump(&c);
  CHECK_S(progress_kind(last_with(&c, "$/progress", before)), "end");
  CHECK_I(count_replies(&c, 20), ==, 1);
  MK_CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(reply(&c, 20), "result"), "speedup") != NULL);

  /* A command that edits: applyEdit request, message, re-analysis. */
  int analyses = f.analyses;
  before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":21,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"fake.edit\",\"arguments\":[]}}");
  c_pump(&c);
  CHECK_I(count_replies(&c, 21), ==, 1);
  MK_CHECK(last_with(&c, "workspace/applyEdit", before) != NULL);
  MK_CHECK(last_with(&c, "window/showMessage", before) != NULL);
  CHECK_I(f.analyses, ==, analyses + 1);
  /* Failing and unknown commands: one error reply each. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":22,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"fake.fail\"}}");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":23,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"rm -rf\"}}");
  c_pump(&c);
  CHECK_I(count_replies(&c, 22), ==, 1);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(reply(&c, 22), "error"), "code")->valueint, ==,
               MK_RPC_REQUEST_FAILED);
  CHECK_I(count_replies(&c, 23), ==, 1);
  CHECK_I(mk_lsp_server_jobs(c.server), ==, 0);
  c_stop(&c);
}

MK_TEST(lsp_server, cancellation) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_init(&c, NULL);
  /* $/cancelRequest on a running command. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":30,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"fake.evolve\",\"arguments\":[\"sk0\"]}}");
  MK_REQUIRE(f.has_pending);
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":30}}");
  CHECK_I(f.cancels, ==, 1);
  CHECK_I(count_replies(&c, 30), ==, 1);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(reply(&c, 30), "error"), "code")->valueint, ==,
               MK_RPC_REQUEST_CANCELLED);
  CHECK_I(mk_lsp_server_jobs(c.server), ==, 0);
  /* window/workDoneProgress/cancel on another. */
  int before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"fake.evolve\",\"arguments\":[\"sk1\"]}}");
  ack_create(&c, before);
  cJSON *create = last_with(&c, "window/workDoneProgress/create", before);
  MK_REQUIRE(create != NULL);
  char *tok = cJSON_PrintUnformatted(cJSON_GetObjectItem(cJSON_GetObjectItem(create, "params"), "token"));
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"window/workDoneProgress/cancel\",\"params\":{\"token\":%s}}", tok);
  cJSON_free(tok);
  CHECK_I(f.cancels, ==, 2);
  CHECK_I(count_replies(&c, 31), ==, 1);
  CHECK_S(progress_kind(last_with(&c, "$/progress", before)), "end");
  /* Shutdown cancels what still runs; the open request gets its answer. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":32,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"fake.evolve\",\"arguments\":[\"sk2\"]}}");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":33,\"method\":\"shutdown\"}");
  CHECK_I(f.cancels, ==, 3);
  CHECK_I(count_replies(&c, 32), ==, 1);
  CHECK_I(count_replies(&c, 33), ==, 1);
  c_stop(&c);
}

MK_TEST(lsp_server, configuration) {
  fake f;
  client c;
  c_start(&c, fake_backend(&f));
  c_init(&c, "{\"mkevolve\":{\"debounceMs\":25,\"codeLens\":false,\"budget\":8}}");
  /* The core takes its own keys; the backend gets the whole object. */
  const mk_lsp_settings *st = mk_lsp_server_settings(c.server);
  CHECK_I(st->debounce_ms, ==, 25);
  MK_CHECK(!st->code_lens);
  MK_CHECK(strstr(f.last_settings, "\"budget\":8") != NULL);
  int before = c.n, configured = f.configured;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"workspace/didChangeConfiguration\",\"params\":{\"settings\":"
          "{\"mkevolve\":{\"debounceMs\":\"soon\",\"codeLens\":true,\"fakeBad\":1}}}}");
  CHECK_I(st->debounce_ms, ==, 25); /* refused, kept */
  MK_CHECK(st->code_lens);
  /* Each side names what it refused. */
  bool core_said = false, backend_said = false;
  for (int i = before; i < c.n; i++) {
    if (!is_method(c.msgs[i], "window/showMessage")) continue;
    const char *text = cJSON_GetObjectItem(cJSON_GetObjectItem(c.msgs[i], "params"), "message")->valuestring;
    core_said = core_said || (strstr(text, "debounceMs") && !strstr(text, "fakeBad"));
    backend_said = backend_said || (strstr(text, "fakeBad") && !strstr(text, "debounceMs"));
  }
  MK_CHECK(core_said);
  MK_CHECK(backend_said);
  CHECK_I(f.configured, ==, configured + 1);
  c_stop(&c);
}

/* The real engine backend on KernelBench files: a well-formed problem has
 * no findings; removing get_inputs or breaking the syntax is reported. */
MK_TEST(lsp_server, engine_static_diagnostics) {
  char path[1024];
  snprintf(path, sizeof path, "%s/kernelbench/level2/40_Matmul_Scaling_ResidualAdd.py", mk_test_shared_dir());
  char *src;
  size_t len;
  if (mk_read_file(path, 1 << 20, &src, &len) != 0) {
    mk_test_skip("KernelBench problems not found in ../shared");
    return;
  }
  mk_lsp_backend b;
  client c;
  MK_REQUIRE(mk_lsp_engine_backend_new(NULL, &b) == 0);
  c_start(&c, b);
  c_init(&c, "{\"debounceMs\":5}");
  c_open(&c, URI, src);
  cJSON *d = wait_for(&c, "textDocument/publishDiagnostics", 0, 2000);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "diagnostics")), ==, 0);
  /* Rename get_inputs: an error on the Model class line. */
  char *at = strstr(src, "def get_inputs");
  MK_REQUIRE(at != NULL);
  int line = 0;
  for (char *p = src; p < at; p++) line += *p == '\n';
  int before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\",\"version\":2},\"contentChanges\":[{\"range\":{\"start\":{\"line\":%d,"
          "\"character\":4},\"end\":{\"line\":%d,\"character\":7}},\"text\":\"make\"}]}}", line, line);
  d = wait_for(&c, "textDocument/publishDiagnostics", before, 2000);
  MK_REQUIRE(d != NULL);
  cJSON *diags = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "diagnostics");
  MK_REQUIRE(cJSON_GetArraySize(diags) == 1);
  CHECK_S(cJSON_GetObjectItem(cJSON_GetArrayItem(diags, 0), "code")->valuestring, "missing-get-inputs");
  /* A syntax error at an exact place. */
  before = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\",\"version\":3},\"contentChanges\":[{\"range\":{\"start\":{\"line\":%d,"
          "\"character\":4},\"end\":{\"line\":%d,\"character\":8}},\"text\":\"get\"}]}}", line, line);
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
          "{\"uri\":\"" URI "\",\"version\":4},\"contentChanges\":[{\"range\":{\"start\":{\"line\":0,"
          "\"character\":0},\"end\":{\"line\":0,\"character\":0}},\"text\":\"x = (1 +\\n\"}]}}");
  d = wait_for(&c, "textDocument/publishDiagnostics", before, 2000);
  MK_REQUIRE(d != NULL);
  diags = cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "diagnostics");
  CHECK_I(cJSON_GetArraySize(diags), >=, 1);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "params"), "version")->valueint, ==, 4);
  cJSON *d0 = cJSON_GetArrayItem(diags, 0);
  if (d0) CHECK_S(cJSON_GetObjectItem(d0, "code")->valuestring, "syntax");
  c_stop(&c);
  free(src);
}

MK_TEST(lsp_server, engine_static_check_cases) {
  mk_lsp_analysis a;
  const char *plain = "def f(:\n  pass\n";
  CHECK_I(mk_lsp_engine_static_check(plain, strlen(plain), &a), ==, 0);
  CHECK_I(a.nfindings, >=, 1); /* syntax, but no KernelBench complaints */
  for (int i = 0; i < a.nfindings; i++) CHECK_S(a.findings[i].code, "syntax");
  mk_lsp_analysis_free(&a);
  const char *composed = "import torch\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x\n";
  CHECK_I(mk_lsp_engine_static_check(composed, strlen(composed), &a), ==, 0);
  CHECK_I(a.nfindings, ==, 0);
  mk_lsp_analysis_free(&a);
  const char *noforward = "import torch\nclass Model(torch.nn.Module):\n    pass\n"
                          "def get_inputs():\n    return []\ndef get_init_inputs():\n    return []\n";
  CHECK_I(mk_lsp_engine_static_check(noforward, strlen(noforward), &a), ==, 0);
  MK_REQUIRE(a.nfindings == 1);
  CHECK_S(a.findings[0].code, "missing-forward");
  CHECK_I(a.findings[0].range.line, ==, 1);
  mk_lsp_analysis_free(&a);
  /* Deep nesting must not blow the stack. */
  size_t n = 200000;
  char *deep = malloc(n + 1);
  MK_REQUIRE(deep != NULL);
  for (size_t i = 0; i < n; i++) deep[i] = i < n / 2 ? '(' : ')';
  deep[n] = 0;
  CHECK_I(mk_lsp_engine_static_check(deep, n, &a), ==, 0);
  mk_lsp_analysis_free(&a);
  free(deep);
}

/* ---- the engine backend on a real session ---------------------------------- */

static cJSON *wait_reply(client *c, int id, int ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    c_pump(c);
    cJSON *r = reply(c, id);
    if (r) return r;
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms) return NULL;
    usleep(2000);
  }
}

/* The latest diagnostic with `code` in the latest publication, or NULL;
 * waits up to `ms` for one to appear. */
static cJSON *wait_diag(client *c, const char *code, int ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    c_pump(c);
    cJSON *m = last_with(c, "textDocument/publishDiagnostics", 0);
    cJSON *d, *ds = m ? cJSON_GetObjectItem(cJSON_GetObjectItem(m, "params"), "diagnostics") : NULL;
    cJSON_ArrayForEach(d, ds) {
      cJSON *k = cJSON_GetObjectItem(d, "code");
      if (cJSON_IsString(k) && strcmp(k->valuestring, code) == 0) return d;
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms) return NULL;
    usleep(2000);
  }
}

static const char *TINY =
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        y = torch.relu(x * 2.0)\n        return y + 1.0\n\n\n"
    "def get_inputs():\n    return [torch.randn(4, 64)]\n\n\n"
    "def get_init_inputs():\n    return []\n";

/* Open a tiny module: a capture in a Python worker, subkernel diagnostics
 * and a hover table; decompose writes the composed file beside it;
 * evolve all verifies kernels on CPU (builtin proposer) and the
 * diagnostics say so. Slow (a worker, the Triton interpreter). */
MK_TEST(lsp_server, engine_session_end_to_end) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  char dir[] = "/tmp/mk_lsp_engine_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char file[256], cache[256], composed[256], uri[300];
  snprintf(file, sizeof file, "%s/tiny.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(composed, sizeof composed, "%s/tiny_new.py", dir);
  snprintf(uri, sizeof uri, "file://%s", file);
  MK_REQUIRE(mk_write_file(file, TINY, strlen(TINY)) == 0);
  setenv("MKEVOLVE_CACHE_DIR", cache, 1);
  client c;
  mk_lsp_backend b;
  MK_REQUIRE(mk_lsp_engine_backend_new(&c.loop, &b) == 0);
  c_start(&c, b);
  c_init(&c, "{\"backend\":\"cpu\",\"proposer\":\"builtin\",\"budget\":{\"proposals\":2},"
             "\"tolerance\":{\"atol\":1e-4,\"rtol\":1e-4},\"debounceMs\":5}");
  c_open(&c, uri, TINY);
  cJSON *d = wait_diag(&c, "subkernel-unverified", 120000);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetObjectItem(d, "severity")->valueint, ==, 4); /* a hint until the user acts */
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "range"), "start"), "line")->valueint, ==, 9);
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":40,\"method\":\"textDocument/hover\",\"params\":{\"textDocument\":"
          "{\"uri\":\"%s\"},\"position\":{\"line\":9,\"character\":12}}}", uri);
  cJSON *h = wait_reply(&c, 40, 2000);
  MK_REQUIRE(h != NULL);
  cJSON *hv = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(h, "result"), "contents"), "value");
  MK_CHECK(cJSON_IsString(hv) && strstr(hv->valuestring, "| variant |") != NULL);
  /* Decompose: the composed file beside the module. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":41,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"mkevolve.decompose\",\"arguments\":[{\"uri\":\"%s\"}]}}", uri);
  cJSON *r = wait_reply(&c, 41, 60000);
  MK_REQUIRE(r != NULL);
  MK_CHECK(cJSON_GetObjectItem(r, "error") == NULL);
  char *text = NULL;
  size_t len;
  MK_CHECK(mk_read_file(composed, 1 << 22, &text, &len) == 0 && strstr(text, "class ModelNew") != NULL);
  free(text);
  d = wait_diag(&c, "subkernel-unverified", 5000);
  MK_CHECK(d && cJSON_GetObjectItem(d, "severity")->valueint == 2); /* now a warning */
  /* Evolve all on CPU: verified kernels. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":42,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"mkevolve.evolveAll\",\"arguments\":[{\"uri\":\"%s\"}]}}", uri);
  r = wait_reply(&c, 42, 300000);
  MK_REQUIRE(r != NULL);
  cJSON *msg = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "message");
  MK_CHECK(cJSON_IsString(msg) && strstr(msg->valuestring, "verified") != NULL);
  d = wait_diag(&c, "subkernel-verified", 10000);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetObjectItem(d, "severity")->valueint, ==, 3);
  MK_CHECK(strstr(cJSON_GetObjectItem(d, "message")->valuestring, "verified") != NULL);
  /* An unknown subkernel is an error reply, and the server lives on. */
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":43,\"method\":\"workspace/executeCommand\",\"params\":"
          "{\"command\":\"mkevolve.swap\",\"arguments\":[{\"uri\":\"%s\",\"subkernel\":99,\"variant\":1}]}}", uri);
  r = wait_reply(&c, 43, 5000);
  MK_CHECK(r != NULL && cJSON_GetObjectItem(r, "error") != NULL);
  c_stop(&c);
  unsetenv("MKEVOLVE_CACHE_DIR");
  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK(system(mk_buf_cstr(&rm)) == 0);
  mk_buf_free(&rm);
}

/* Nothing set: the session the editor starts verifies and searches exactly
 * like `mkevolve evolve` with no options (mk_session_config_defaults); the
 * server only adds its own capture limit. */
MK_TEST(lsp_server, no_settings_mean_the_engine_defaults) {
  mk_lsp_engine_config c;
  mk_lsp_engine_config_defaults(&c);
  mk_session_config got, want;
  char *json = NULL;
  mk_lsp_engine_config_session(&c, &got, &json);
  mk_session_config_defaults(&want);
  MK_CHECK(got.verify.atol == want.verify.atol && got.verify.rtol == want.verify.rtol);
  MK_CHECK_INT(got.verify.trials, ==, want.verify.trials);
  MK_CHECK_INT(got.search.max_proposals, ==, want.search.max_proposals);
  MK_CHECK_INT(got.search.beam_width, ==, want.search.beam_width);
  MK_CHECK_INT(got.search.depth, ==, want.search.depth);
  MK_CHECK_INT(got.search.backend, ==, want.search.backend);
  MK_CHECK(got.search.max_seconds == want.search.max_seconds);
  MK_CHECK(got.search.max_cost == want.search.max_cost);
  MK_CHECK(got.job_timeout_s == want.job_timeout_s);
  MK_CHECK_STR(got.device, want.device);
  MK_CHECK_STR(got.proposer, want.proposer);
  MK_CHECK(got.python == NULL); /* the engine finds its Python itself */
  MK_CHECK_STR(json, "{}");     /* the LLM configuration's own defaults */
  free(json);
}

/* The beam and trials are settings; an explicit 0 tolerance stays 0. */
MK_TEST(lsp_server, beam_trials_and_zero_tolerance) {
  mk_lsp_engine_config c;
  mk_lsp_engine_config_defaults(&c);
  mk_errmsg err;
  cJSON *s = cJSON_Parse("{\"mkevolve\": {\"beam\": {\"width\": 7, \"depth\": 0}, \"trials\": 3, "
                         "\"tolerance\": 0, \"budget\": 9}}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, 0);
  cJSON_Delete(s);
  mk_session_config sc;
  char *json = NULL;
  mk_lsp_engine_config_session(&c, &sc, &json);
  free(json);
  MK_CHECK_INT(sc.search.beam_width, ==, 7);
  MK_CHECK_INT(sc.search.depth, ==, 0);
  MK_CHECK_INT(sc.verify.trials, ==, 3);
  MK_CHECK(sc.verify.atol == 0 && sc.verify.rtol == 0);
  MK_CHECK_INT(sc.search.max_proposals, ==, 9);
  s = cJSON_Parse("{\"beam\": {\"width\": 0, \"depth\": 65}, \"trials\": 0}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "width") && strstr(err.text, "depth") && strstr(err.text, "trials"));
  MK_CHECK_INT(c.session.search.beam_width, ==, 7); /* refused: unchanged */
  cJSON_Delete(s);
  cJSON *j = mk_lsp_engine_config_to_json(&c);
  MK_CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "beam"), "width")->valuedouble == 7);
  MK_CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "tolerance"), "atol")->valuedouble == 0);
  cJSON_Delete(j);
}

/* kernelBackend is `--backend` ("backend" is the device); a bad value is
 * refused by name and keeps the one in force. */
MK_TEST(lsp_server, kernel_backend_is_a_setting) {
  mk_lsp_engine_config c;
  mk_lsp_engine_config_defaults(&c);
  mk_errmsg err;
  cJSON *s = cJSON_Parse("{\"mkevolve\": {\"kernelBackend\": \"auto\", \"backend\": \"cuda\"}}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, 0);
  cJSON_Delete(s);
  mk_session_config sc;
  char *json = NULL;
  mk_lsp_engine_config_session(&c, &sc, &json);
  free(json);
  MK_CHECK_INT(sc.search.backend, ==, MK_KBACKEND_AUTO);
  MK_CHECK_STR(sc.device, "cuda");
  s = cJSON_Parse("{\"kernelBackend\": \"ptx\"}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "kernelBackend") != NULL);
  cJSON_Delete(s);
  s = cJSON_Parse("{\"kernelBackend\": 3}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, MK_EINVAL);
  cJSON_Delete(s);
  MK_CHECK_INT(c.session.search.backend, ==, MK_KBACKEND_AUTO);
  cJSON *j = mk_lsp_engine_config_to_json(&c);
  MK_CHECK_STR(cJSON_GetObjectItem(j, "kernelBackend")->valuestring, "auto");
  cJSON_Delete(j);
}

MK_TEST(lsp_server, job_timeouts_are_settings) {
  mk_lsp_engine_config c;
  mk_lsp_engine_config_defaults(&c);
  /* a shorter default for capture (an import-time hang) than for verification */
  MK_CHECK(c.session.capture_timeout_s == 60 && c.session.job_timeout_s == 300);
  MK_CHECK(c.session.capture_timeout_s < c.session.job_timeout_s);
  mk_errmsg err;
  cJSON *s = cJSON_Parse("{\"mkevolve\": {\"timeout\": {\"capture\": 15, \"verify\": 900}}}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, 0);
  MK_CHECK(c.session.capture_timeout_s == 15 && c.session.job_timeout_s == 900);
  cJSON_Delete(s);
  s = cJSON_Parse("{\"timeout\": 42}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, 0);
  MK_CHECK(c.session.capture_timeout_s == 42 && c.session.job_timeout_s == 42);
  cJSON_Delete(s);
  s = cJSON_Parse("{\"timeout\": {\"capture\": 0, \"verify\": 1e300}}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&c, s, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "capture") != NULL);
  MK_CHECK(c.session.capture_timeout_s == 42 && c.session.job_timeout_s == 42); /* refused: unchanged */
  cJSON_Delete(s);
  cJSON *j = mk_lsp_engine_config_to_json(&c);
  const cJSON *t = cJSON_GetObjectItem(j, "timeout");
  MK_CHECK(cJSON_GetObjectItem(t, "capture")->valuedouble == 42);
  cJSON_Delete(j);
}

/* The engine adapter's settings: strings, budget and tolerance taken;
 * a bad value refused and kept, the rest of the update applied. */
MK_TEST(lsp_server, engine_config_applies_and_refuses) {
  mk_lsp_engine_config cfg;
  mk_lsp_engine_config_defaults(&cfg);
  mk_errmsg err;
  cJSON *s = cJSON_Parse("{\"mkevolve\":{\"backend\":\"cpu\",\"proposer\":\"llm\",\"llm\":{\"provider\":"
                         "\"anthropic\",\"model\":\"m\",\"baseUrl\":\"http://localhost:1\",\"apiKeyEnv\":"
                         "\"MY_KEY\"},\"budget\":{\"proposals\":8,\"tokens\":100000},\"tolerance\":"
                         "{\"atol\":0.001,\"rtol\":0.002},\"debounceMs\":5}}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&cfg, s, &err), ==, 0); /* the core's key is not refused */
  cJSON_Delete(s);
  CHECK_S(cfg.backend, "cpu");
  CHECK_S(cfg.proposer, "llm");
  CHECK_S(cfg.llm_provider, "anthropic");
  CHECK_S(cfg.llm_key_env, "MY_KEY");
  CHECK_I(cfg.session.search.max_proposals, ==, 8);
  CHECK_I(cfg.session.search.max_cost, ==, 100000);
  MK_CHECK(cfg.session.verify.atol == 0.001 && cfg.session.verify.rtol == 0.002);
  s = cJSON_Parse("{\"mkevolve\":{\"backend\":\"tpu\",\"budget\":4,\"tolerance\":\"loose\","
                  "\"pythonPath\":\"/opt/py\"}}");
  MK_CHECK_INT(mk_lsp_engine_config_apply(&cfg, s, &err), ==, MK_EINVAL);
  cJSON_Delete(s);
  MK_CHECK(strstr(err.text, "backend") != NULL && strstr(err.text, "tolerance") != NULL);
  MK_CHECK(strstr(err.text, "budget") == NULL);
  CHECK_S(cfg.backend, "cpu"); /* refused, kept */
  CHECK_I(cfg.session.search.max_proposals, ==, 4);
  CHECK_S(cfg.python, "/opt/py");
  MK_CHECK(cfg.session.verify.atol == 0.001);
}

/* ---- editable variants ------------------------------------------------------------------ */

/* A command's "showDocument" becomes window/showDocument when the client
 * has it, else a message with the path; analyses say whether they follow
 * didOpen or didSave. */
MK_TEST(lsp_server, show_document_and_open_save_flags) {
  for (int with = 0; with < 2; with++) {
    fake f;
    client c;
    c_start(&c, fake_backend(&f));
    if (with)
      c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"capabilities\":"
                  "{\"window\":{\"showDocument\":{\"support\":true}}}}}");
    else
      c_init(&c, NULL);
    c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}");
    c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"workspace/executeCommand\",\"params\":"
                "{\"command\":\"fake.show\",\"arguments\":[]}}");
    c_pump(&c);
    CHECK_I(count_replies(&c, 7), ==, 1);
    cJSON *sd = last_with(&c, "window/showDocument", 0);
    if (with) {
      MK_REQUIRE(sd != NULL);
      CHECK_S(cJSON_GetObjectItem(cJSON_GetObjectItem(sd, "params"), "uri")->valuestring,
              "file:///tmp/mk_lsp_test/edit/x.ref.py");
      MK_CHECK(cJSON_GetObjectItem(sd, "id") != NULL); /* a request */
    } else {
      MK_CHECK(sd == NULL);
      cJSON *m = last_with(&c, "window/showMessage", 0);
      MK_REQUIRE(m != NULL);
      MK_CHECK(strstr(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "params"), "message")->valuestring,
                      "mkevolve: open /tmp/mk_lsp_test/edit/x.ref.py") != NULL);
      /* didOpen -> opened; didChange -> neither; didSave -> saved */
      c_open(&c, URI, FAKE_TEXT);
      c_pump(&c);
      MK_CHECK(f.last_opened && !f.last_saved);
      c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
                  "{\"uri\":\"%s\",\"version\":2},\"contentChanges\":[{\"text\":\"x = 2\\n\"}]}}", URI);
      usleep(450000);
      c_pump(&c);
      MK_CHECK(!f.last_opened && !f.last_saved);
      c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didSave\",\"params\":{\"textDocument\":"
                  "{\"uri\":\"%s\"}}}", URI);
      c_pump(&c);
      MK_CHECK(!f.last_opened && f.last_saved);
    }
    c_stop(&c);
  }
}

/* The publication for `uri` after message index `from` with a diagnostic of
 * `code`; waits up to `ms`. Returns that diagnostic. */
static cJSON *wait_diag_on(client *c, const char *uri, const char *code, int from, int ms) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (;;) {
    c_pump(c);
    for (int i = c->n - 1; i >= from; i--) {
      if (!is_method(c->msgs[i], "textDocument/publishDiagnostics")) continue;
      cJSON *p = cJSON_GetObjectItem(c->msgs[i], "params");
      if (strcmp(cJSON_GetObjectItem(p, "uri")->valuestring, uri) != 0) continue;
      cJSON *d;
      cJSON_ArrayForEach(d, cJSON_GetObjectItem(p, "diagnostics")) {
        cJSON *k = cJSON_GetObjectItem(d, "code");
        if (cJSON_IsString(k) && strcmp(k->valuestring, code) == 0) return d;
      }
      break; /* only the latest publication for the uri counts */
    }
    clock_gettime(CLOCK_MONOTONIC, &t);
    if ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 > ms) return NULL;
    usleep(2000);
  }
}

/* Publications for `uri` (from `from`) whose text contains `needle`. */
static int count_published(client *c, const char *uri, const char *needle, int from) {
  int n = 0;
  for (int i = from; i < c->n; i++) {
    if (!is_method(c->msgs[i], "textDocument/publishDiagnostics")) continue;
    cJSON *p = cJSON_GetObjectItem(c->msgs[i], "params");
    if (strcmp(cJSON_GetObjectItem(p, "uri")->valuestring, uri) != 0) continue;
    char *txt = cJSON_PrintUnformatted(p);
    n += txt && strstr(txt, needle) != NULL;
    free(txt);
  }
  return n;
}

static bool actions_have(client *c, int id, const char *uri, int line, const char *title_part) {
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"textDocument/codeAction\",\"params\":{"
             "\"textDocument\":{\"uri\":\"%s\"},\"range\":{\"start\":{\"line\":%d,\"character\":0},"
             "\"end\":{\"line\":%d,\"character\":0}},\"context\":{\"diagnostics\":[]}}}", id, uri, line, line);
  cJSON *r = wait_reply(c, id, 5000);
  cJSON *a;
  cJSON *res = r ? cJSON_GetObjectItem(r, "result") : NULL;
  cJSON_ArrayForEach(a, res) {
    cJSON *t = cJSON_GetObjectItem(a, "title");
    if (cJSON_IsString(t) && strstr(t->valuestring, title_part)) return true;
  }
  return false;
}

static void c_change_save(client *c, const char *uri, int version, const char *path, const char *text) {
  MK_CHECK(mk_write_file(path, text, strlen(text)) == 0);
  cJSON *t = cJSON_CreateString(text);
  char *q = cJSON_PrintUnformatted(t);
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didChange\",\"params\":{\"textDocument\":"
             "{\"uri\":\"%s\",\"version\":%d},\"contentChanges\":[{\"text\":%s}]}}", uri, version, q);
  c_sendf(c, "{\"jsonrpc\":\"2.0\",\"method\":\"textDocument/didSave\",\"params\":{\"textDocument\":"
             "{\"uri\":\"%s\"}}}", uri);
  cJSON_free(q);
  cJSON_Delete(t);
}

static const char *EDIT_CUDA =
    "import torch\n\n"
    "MK_BACKEND = \"cuda\"\n"
    "MK_CUDA_SOURCE = r\"\"\"\n"
    "extern \"C\" __global__ void k(const float *x, float *y, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  y[i] = fmaxf(x[i] * undeclared_scale, 0.0f) + 1.0f;\n"
    "}\n"
    "\"\"\"\n"
    "MK_CUDA_KERNELS = {\"k\": \"ffq\"}\n\n\n"
    "def run(x):\n"
    "    y = torch.empty_like(x)\n"
    "    _mk_cuda.launch(\"k\", ((y.numel() + 255) // 256,), (256,), (x.contiguous(), y, y.numel()))\n"
    "    return y\n";

static const char *EDIT_BOOM =
    "import torch\n\n\ndef run(x):\n    raise RuntimeError('boom from a stale save')\n";
/* Slow (a minute of Python before it raises): still running when the newer
 * save arrives, however slow the server is (ASan), and only stopping it lets
 * the newer save's verdict come in time. */
static const char *EDIT_SLOW_BOOM =
    "import torch\n\n\ndef run(x):\n    n = sum(range(3_000_000_000))\n"
    "    raise RuntimeError('boom from a stale save %d' % n)\n";
static const char *EDIT_GOOD =
    "import torch\n\nMK_USES_TORCH = (\"mul\", \"relu\", \"add\")\n\n\n"
    "def run(x):\n    return torch.relu(x * 2.0) + 1.0\n";

/* The editor's loop on a real session: the Edit code action, the command
 * (showDocument), opening the edit file verifies it (Information at line 1),
 * the module gains the Swap action, a CUDA compile error at its line, and a
 * newer save cancels a stale one (its result is never published). */
MK_TEST(lsp_server, engine_edit_variant) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  char dir[] = "/tmp/mk_lsp_edit_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char file[256], cache[256], uri[300];
  snprintf(file, sizeof file, "%s/tiny.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(uri, sizeof uri, "file://%s", file);
  MK_REQUIRE(mk_write_file(file, TINY, strlen(TINY)) == 0);
  setenv("MKEVOLVE_CACHE_DIR", cache, 1);
  client c;
  mk_lsp_backend b;
  MK_REQUIRE(mk_lsp_engine_backend_new(&c.loop, &b) == 0);
  c_start(&c, b);
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"capabilities\":"
              "{\"window\":{\"workDoneProgress\":true,\"showDocument\":{\"support\":true}},"
              "\"textDocument\":{\"codeAction\":{\"codeActionLiteralSupport\":{\"codeActionKind\":"
              "{\"valueSet\":[]}}}}},\"initializationOptions\":{\"backend\":\"cpu\",\"debounceMs\":5}}}");
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"method\":\"initialized\",\"params\":{}}");
  c_open(&c, uri, TINY);
  MK_REQUIRE(wait_diag(&c, "subkernel-unverified", 120000) != NULL);
  MK_CHECK(actions_have(&c, 50, uri, 9, "Edit subkernel"));
  MK_CHECK(actions_have(&c, 51, uri, 9, "(variant reference)"));

  /* The command: the edit file's uri, and a showDocument request. */
  int from = c.n;
  c_sendf(&c, "{\"jsonrpc\":\"2.0\",\"id\":52,\"method\":\"workspace/executeCommand\",\"params\":"
              "{\"command\":\"mkevolve.editVariant\",\"arguments\":[{\"uri\":\"%s\",\"subkernel\":0}]}}", uri);
  cJSON *r = wait_reply(&c, 52, 30000);
  MK_REQUIRE(r != NULL);
  cJSON *eu = cJSON_GetObjectItem(cJSON_GetObjectItem(r, "result"), "uri");
  MK_REQUIRE(cJSON_IsString(eu));
  char euri[600], epath[600];
  snprintf(euri, sizeof euri, "%s", eu->valuestring);
  snprintf(epath, sizeof epath, "%s", euri + 7);
  MK_CHECK(strstr(euri, "/.mkevolve/tiny/edit/") != NULL && strstr(euri, ".reference.py") != NULL);
  cJSON *sd = wait_for(&c, "window/showDocument", from, 2000);
  MK_CHECK(sd && strcmp(cJSON_GetObjectItem(cJSON_GetObjectItem(sd, "params"), "uri")->valuestring, euri) == 0);
  for (int i = 0; i < 10; i++) c_pump(&c);
  CHECK_I(count_replies(&c, 52), ==, 1);

  /* Opening it verifies it: Information at line 1, no static checks. */
  char *etext = NULL;
  size_t elen = 0;
  MK_REQUIRE(mk_read_file(epath, 1 << 20, &etext, &elen) == 0);
  from = c.n;
  c_open(&c, euri, etext);
  free(etext);
  cJSON *d = wait_diag_on(&c, euri, "edit-verified", from, 120000);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetObjectItem(d, "severity")->valueint, ==, 3);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "range"), "start"), "line")->valueint, ==, 0);
  MK_CHECK(strstr(cJSON_GetObjectItem(d, "message")->valuestring, "verified (untimed on CPU)") != NULL);
  MK_CHECK(last_with(&c, "$/progress", from) != NULL || last_with(&c, "window/workDoneProgress/create", from) != NULL);
  /* The module's actions now include the swap (its diagnostics re-published). */
  for (int i = 0; i < 50; i++) {
    c_pump(&c);
    usleep(2000);
  }
  MK_CHECK(actions_have(&c, 53, uri, 9, "Swap subkernel"));
  MK_CHECK(actions_have(&c, 54, uri, 9, "user_reference"));

  /* A CUDA edit with an undeclared identifier: NVRTC's error at line 8. */
  from = c.n;
  c_change_save(&c, euri, 2, epath, EDIT_CUDA);
  d = wait_diag_on(&c, euri, "edit-compile-error", from, 60000);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetObjectItem(d, "severity")->valueint, ==, 1);
  cJSON *msg = cJSON_GetObjectItem(d, "message");
  if (strstr(msg->valuestring, "need NVRTC") == NULL) {
    CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "range"), "start"), "line")->valueint, ==, 7);
    MK_CHECK(strstr(msg->valuestring, "undeclared_scale") != NULL);
  } else {
    fprintf(stderr, "  (NVRTC unavailable: the CUDA line check is skipped)\n");
  }

  /* A stale save: "boom" saved, then at once a good text saved; only the
   * newer verdict is published. */
  from = c.n;
  c_change_save(&c, euri, 3, epath, EDIT_SLOW_BOOM);
  c_change_save(&c, euri, 4, epath, EDIT_GOOD);
  d = wait_diag_on(&c, euri, "edit-verified", from, 25000);
  MK_REQUIRE(d != NULL);
  for (int i = 0; i < 100; i++) {
    c_pump(&c);
    usleep(2000);
  }
  CHECK_I(count_published(&c, euri, "boom from a stale save", from), ==, 0);
  d = wait_diag_on(&c, euri, "edit-verified", from, 10);
  MK_CHECK(d != NULL); /* still the latest */

  /* A broken save: the runtime error at the raising line (5). */
  from = c.n;
  c_change_save(&c, euri, 5, epath, EDIT_BOOM);
  d = wait_diag_on(&c, euri, "edit-runtime-error", from, 120000);
  MK_REQUIRE(d != NULL);
  CHECK_I(cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(d, "range"), "start"), "line")->valueint, ==, 4);
  MK_CHECK(strstr(cJSON_GetObjectItem(d, "message")->valuestring, "boom") != NULL);

  c_stop(&c);
  unsetenv("MKEVOLVE_CACHE_DIR");
  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK(system(mk_buf_cstr(&rm)) == 0);
  mk_buf_free(&rm);
}
