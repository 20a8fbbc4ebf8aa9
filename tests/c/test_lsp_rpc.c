/* test_lsp_rpc.c — JSON-RPC: one reply per request, lifecycle, cancel. */
#include "mk_lsp_rpc.h"
#include "mk_test.h"

#include <stdlib.h>
#include <string.h>

#define MAXOUT 64

typedef struct {
  cJSON *out[MAXOUT];
  int nout;
  int exit_code, shutdowns, cancels, ran;
  mk_lsp_handle deferred;
  mk_lsp_rpc *rpc;
  char last[512]; /* the last body sent, as text */
} harness;

static int h_send(void *ctx, const char *body, size_t len) {
  harness *h = ctx;
  snprintf(h->last, sizeof h->last, "%.*s", (int)len, body);
  cJSON *j = cJSON_ParseWithLength(body, len);
  MK_CHECK(j != NULL);
  if (j && h->nout < MAXOUT) h->out[h->nout++] = j;
  else cJSON_Delete(j);
  return 0;
}
static void h_shutdown(void *ctx) { ((harness *)ctx)->shutdowns++; }
static void h_exit(void *ctx, int code) { ((harness *)ctx)->exit_code = code; }

static void m_init(void *ctx, mk_lsp_request *req, const cJSON *p) { mk_lsp_reply(req, cJSON_CreateObject()); }
static void m_echo(void *ctx, mk_lsp_request *req, const cJSON *p) {
  ((harness *)ctx)->ran++;
  mk_lsp_reply(req, cJSON_Duplicate(p, 1));
}
static void m_twice(void *ctx, mk_lsp_request *req, const cJSON *p) {
  mk_lsp_reply(req, cJSON_CreateNumber(1));
  mk_lsp_reply(req, cJSON_CreateNumber(2));
  mk_lsp_reply_error(req, -1, "three");
}
static void m_silent(void *ctx, mk_lsp_request *req, const cJSON *p) { (void)req; }
static void on_cancel(void *ctx, mk_lsp_handle h) {
  harness *t = ctx;
  t->cancels++;
  /* Replying from the cancel callback must be dropped, not doubled. */
  MK_CHECK(!mk_lsp_rpc_reply(t->rpc, h, cJSON_CreateString("late")));
}
static void m_slow(void *ctx, mk_lsp_request *req, const cJSON *p) {
  harness *h = ctx;
  h->deferred = mk_lsp_request_defer(req, on_cancel, h);
}
static void m_note(void *ctx, const cJSON *p) { ((harness *)ctx)->ran++; }

static const mk_lsp_method M[] = {
    {"initialize", m_init, NULL}, {"echo", m_echo, NULL},   {"twice", m_twice, NULL},
    {"silent", m_silent, NULL},   {"slow", m_slow, NULL},   {"note", NULL, m_note},
};

static mk_lsp_rpc *start(harness *h) {
  memset(h, 0, sizeof *h);
  h->exit_code = -1;
  mk_lsp_rpc_hooks hooks = {h_send, h_shutdown, h_exit, NULL, h};
  MK_CHECK(mk_lsp_rpc_new(&hooks, M, (int)(sizeof M / sizeof M[0]), h, &h->rpc) == 0);
  return h->rpc;
}

static void stop(harness *h) {
  mk_lsp_rpc_free(h->rpc);
  for (int i = 0; i < h->nout; i++) cJSON_Delete(h->out[i]);
}

static void recv_(mk_lsp_rpc *rpc, const char *s) { mk_lsp_rpc_receive(rpc, s, strlen(s)); }

/* Replies carrying id `id` (a JSON literal: "3", "\"a\"", "null"). */
static int replies(harness *h, const char *id) {
  int n = 0;
  for (int i = 0; i < h->nout; i++) {
    cJSON *v = cJSON_GetObjectItem(h->out[i], "id");
    char *p = v ? cJSON_PrintUnformatted(v) : NULL;
    if (p && strcmp(p, id) == 0 && !cJSON_GetObjectItem(h->out[i], "method")) n++;
    cJSON_free(p);
  }
  return n;
}

static int error_code(harness *h, int idx) {
  if (idx < 0 || idx >= h->nout) return 0;
  cJSON *e = cJSON_GetObjectItem(h->out[idx], "error");
  return e ? cJSON_GetObjectItem(e, "code")->valueint : 0;
}

static void init(mk_lsp_rpc *rpc) { recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{}}"); }

MK_TEST(lsp_rpc, not_initialized) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"echo\",\"params\":{}}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}");
  MK_CHECK_INT(h.nout, ==, 1);
  MK_CHECK_INT(error_code(&h, 0), ==, MK_RPC_SERVER_NOT_INITIALIZED);
  MK_CHECK_INT(h.ran, ==, 0); /* the notification was dropped */
  init(rpc);
  MK_CHECK_INT(mk_lsp_rpc_state(rpc), ==, MK_LSP_RUNNING);
  init(rpc);
  MK_CHECK_INT(replies(&h, "0"), ==, 2);
  MK_CHECK_INT(error_code(&h, 2), ==, MK_RPC_INVALID_REQUEST);
  stop(&h);
}

MK_TEST(lsp_rpc, exactly_one_reply) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  init(rpc);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":\"s1\",\"method\":\"twice\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"silent\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"nope/unknown\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"nope/unknown\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"echo\",\"params\":5}");
  MK_CHECK_INT(replies(&h, "\"s1\""), ==, 1);
  MK_CHECK_INT(replies(&h, "2"), ==, 1);
  MK_CHECK_INT(error_code(&h, 2), ==, MK_RPC_INTERNAL_ERROR);
  MK_CHECK_INT(replies(&h, "3"), ==, 1);
  MK_CHECK_INT(error_code(&h, 3), ==, MK_RPC_METHOD_NOT_FOUND);
  MK_CHECK_INT(replies(&h, "4"), ==, 1);
  MK_CHECK_INT(error_code(&h, 4), ==, MK_RPC_INVALID_PARAMS);
  MK_CHECK_INT(h.nout, ==, 5); /* notifications never answered */
  stop(&h);
}

MK_TEST(lsp_rpc, malformed_messages) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  init(rpc);
  recv_(rpc, "{\"id\":1,");
  recv_(rpc, "[{\"id\":1,\"method\":\"echo\"}]");
  recv_(rpc, "{\"id\":{\"x\":1},\"method\":\"echo\"}");
  recv_(rpc, "{\"id\":1.5,\"method\":\"echo\"}");
  recv_(rpc, "42");
  recv_(rpc, "{\"id\":7}");
  char deep[4096];
  int n = 0;
  for (int i = 0; i < 1000; i++) deep[n++] = '[';
  for (int i = 0; i < 1000; i++) deep[n++] = ']';
  deep[n] = 0;
  recv_(rpc, deep);
  MK_CHECK_INT(h.nout, ==, 8);
  MK_CHECK_INT(error_code(&h, 1), ==, MK_RPC_PARSE_ERROR);
  MK_CHECK_INT(error_code(&h, 2), ==, MK_RPC_INVALID_REQUEST);
  MK_CHECK_INT(error_code(&h, 3), ==, MK_RPC_INVALID_REQUEST);
  MK_CHECK_INT(error_code(&h, 4), ==, MK_RPC_INVALID_REQUEST);
  MK_CHECK_INT(error_code(&h, 5), ==, MK_RPC_INVALID_REQUEST);
  MK_CHECK_INT(error_code(&h, 6), ==, MK_RPC_INVALID_REQUEST);
  MK_CHECK_INT(replies(&h, "7"), ==, 1);
  MK_CHECK_INT(error_code(&h, 7), ==, MK_RPC_PARSE_ERROR);
  mk_lsp_rpc_frame_error(rpc, MK_LSP_FRAME_BAD_UTF8, "bad");
  MK_CHECK_INT(error_code(&h, 8), ==, MK_RPC_PARSE_ERROR);
  mk_lsp_rpc_frame_error(rpc, MK_LSP_FRAME_BAD_HEADER, "bad");
  MK_CHECK_INT(h.nout, ==, 9); /* header problems are logged, not answered */
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"echo\",\"params\":{}}");
  MK_CHECK_INT(replies(&h, "9"), ==, 1);
  stop(&h);
}

MK_TEST(lsp_rpc, cancel_deferred_request) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  init(rpc);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"slow\"}");
  MK_CHECK(h.deferred != 0);
  MK_CHECK_INT(mk_lsp_rpc_open_requests(rpc), ==, 1);
  MK_CHECK_INT(replies(&h, "5"), ==, 0);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":5}}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":5}}");
  MK_CHECK_INT(h.cancels, ==, 1);
  MK_CHECK_INT(replies(&h, "5"), ==, 1);
  MK_CHECK_INT(error_code(&h, 1), ==, MK_RPC_REQUEST_CANCELLED);
  MK_CHECK(!mk_lsp_rpc_reply(rpc, h.deferred, cJSON_CreateString("too late")));
  MK_CHECK_INT(replies(&h, "5"), ==, 1);
  MK_CHECK_INT(mk_lsp_rpc_open_requests(rpc), ==, 0);
  /* A deferred request answered normally, then a stale cancel: one reply. */
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"slow\"}");
  MK_CHECK(mk_lsp_rpc_reply(rpc, h.deferred, cJSON_CreateString("done")));
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"$/cancelRequest\",\"params\":{\"id\":6}}");
  MK_CHECK_INT(replies(&h, "6"), ==, 1);
  /* Still open at teardown: answered by rpc_free. */
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"slow\"}");
  int before = h.nout;
  mk_lsp_rpc_free(rpc);
  MK_CHECK_INT(h.nout, ==, before + 1);
  MK_CHECK_INT(replies(&h, "7"), ==, 1);
  for (int i = 0; i < h.nout; i++) cJSON_Delete(h.out[i]);
}

MK_TEST(lsp_rpc, shutdown_exit) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  init(rpc);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"shutdown\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"shutdown\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"echo\"}");
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"note\"}");
  MK_CHECK_INT(h.shutdowns, ==, 1);
  MK_CHECK_INT(replies(&h, "1"), ==, 1);
  MK_CHECK_INT(replies(&h, "2"), ==, 1);
  MK_CHECK(cJSON_IsNull(cJSON_GetObjectItem(h.out[2], "result")));
  MK_CHECK_INT(error_code(&h, 3), ==, MK_RPC_INVALID_REQUEST);
  MK_CHECK_INT(h.ran, ==, 0);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}");
  MK_CHECK_INT(h.exit_code, ==, 0);
  MK_CHECK_INT(mk_lsp_rpc_state(rpc), ==, MK_LSP_EXITED);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"echo\"}");
  MK_CHECK_INT(replies(&h, "4"), ==, 0);
  stop(&h);

  rpc = start(&h);
  init(rpc);
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"method\":\"exit\"}");
  MK_CHECK_INT(h.exit_code, ==, 1);
  stop(&h);
}

static int got_response;
static void on_resp(void *ctx, const cJSON *result, const cJSON *error) {
  got_response = result ? (cJSON_IsString(result) ? 1 : 3) : error ? 2 : 4;
}

MK_TEST(lsp_rpc, outgoing_calls) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  init(rpc);
  got_response = 0;
  MK_CHECK_INT(mk_lsp_rpc_call(rpc, "client/thing", NULL, on_resp, NULL), ==, 0);
  cJSON *sent = h.out[h.nout - 1];
  MK_CHECK_STR(cJSON_GetObjectItem(sent, "method")->valuestring, "client/thing");
  char msg[128];
  snprintf(msg, sizeof msg, "{\"jsonrpc\":\"2.0\",\"id\":%d,\"result\":\"ok\"}",
           cJSON_GetObjectItem(sent, "id")->valueint);
  recv_(rpc, msg);
  MK_CHECK_INT(got_response, ==, 1);
  got_response = 0;
  recv_(rpc, msg); /* duplicate: dropped */
  MK_CHECK_INT(got_response, ==, 0);
  MK_CHECK_INT(mk_lsp_rpc_call(rpc, "client/other", NULL, on_resp, NULL), ==, 0);
  stop(&h); /* pending call: callback with (NULL, NULL) */
  MK_CHECK_INT(got_response, ==, 4);
}

MK_TEST(lsp_rpc, json_depth) {
  MK_CHECK_INT(mk_lsp_json_depth("{\"a\":[1,{\"b\":2}]}", 17, 100), ==, 3);
  MK_CHECK_INT(mk_lsp_json_depth("\"[[[[\"", 6, 100), ==, 0);
  MK_CHECK_INT(mk_lsp_json_depth("[\"\\\"[\"]", 7, 100), ==, 1);
}

MK_TEST(lsp_rpc, ids_beyond_2_to_the_53_are_echoed_exactly) {
  harness h;
  mk_lsp_rpc *rpc = start(&h);
  init(rpc);
  const char *ids[] = {"9007199254740993", "-9007199254740993", "123456789012345678901234567890"};
  for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    char msg[256], want[128];
    snprintf(msg, sizeof msg, "{\"jsonrpc\":\"2.0\",\"id\" : %s,\"method\":\"echo\",\"params\":{}}",
             ids[i]);
    recv_(rpc, msg);
    snprintf(want, sizeof want, "\"id\":%s", ids[i]);
    if (!strstr(h.last, want)) fprintf(stderr, "    sent: %s\n", h.last);
    MK_CHECK(strstr(h.last, want) != NULL);
  }
  /* small ids and a nested "id" are untouched */
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"params\":{\"id\":9007199254740993},\"id\":7,\"method\":\"echo\"}");
  MK_CHECK(strstr(h.last, "\"id\":7") != NULL);
  /* fractional and huge non-integer ids stay invalid */
  recv_(rpc, "{\"jsonrpc\":\"2.0\",\"id\":1e300,\"method\":\"echo\",\"params\":{}}");
  MK_CHECK(strstr(h.last, "invalid request id") != NULL);
  stop(&h);
}
