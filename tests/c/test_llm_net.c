/* test_llm_net.c — the client against scripted providers on loopback
 * (tests/llm/fake_llm.py): both wire formats, streaming and not, usage,
 * retries with Retry-After, 5xx, malformed and truncated replies, timeouts,
 * cancellation, the concurrency limit, budgets and key redaction. */
#include "../llm/fake_server.h"

typedef struct got {
  bool done;
  int status;
  char *text;
  char *finish;
  long tin, tout;
  bool estimated;
  int attempts, http, ledger_index;
  char err[MK_ERRMSG_MAX];
  int ntext, nretry;
  size_t chars;
  double wait;
} got;

static void on_reply(void *data, mk_llm_reply *r) {
  got *g = data;
  g->done = true;
  g->status = r->status;
  g->text = mk_strdup(r->text);
  g->finish = mk_strdup(r->finish_reason);
  g->tin = r->tokens_in;
  g->tout = r->tokens_out;
  g->estimated = r->usage_estimated;
  g->attempts = r->attempts;
  g->http = r->http_status;
  g->ledger_index = r->ledger_index;
  mk_strlcpy(g->err, r->err.text, sizeof g->err);
}

static void on_progress(void *data, const mk_llm_progress *p) {
  got *g = data;
  if (p->kind == MK_LLM_PROGRESS_TEXT) {
    g->ntext++;
    g->chars = p->chars;
  } else {
    g->nretry++;
    g->wait = p->wait_s;
  }
}

static void got_free(got *g) {
  free(g->text);
  free(g->finish);
  memset(g, 0, sizeof *g);
}

typedef struct logsink {
  mk_buf text;
  int lines;
} logsink;

static void on_log(void *data, const char *line) {
  logsink *s = data;
  mk_buf_printf(&s->text, "%s\n", line);
  s->lines++;
}

static int start_chat(mk_llm *llm, got *g, const char *agent, mk_llm_req **req) {
  mk_llm_message m = {.role = "user", .content = "write a kernel"};
  mk_llm_chat chat = {.system = "you are terse", .messages = &m, .nmessages = 1, .agent = agent,
                      .subkernel = "sk0", .progress = on_progress, .progress_data = g};
  mk_errmsg err;
  int rc = mk_llm_chat_async(llm, &chat, on_reply, g, req, &err);
  if (rc) mk_strlcpy(g->err, err.text, sizeof g->err);
  return rc;
}

/* One fixture: server + loop + client. */
typedef struct fx {
  fake_llm f;
  uv_loop_t loop;
  mk_llm_config cfg;
  mk_llm *llm;
  logsink log;
} fx;

static bool fx_open(fx *x, const char *script, mk_llm_provider p, void (*tune)(mk_llm_config *)) {
  memset(x, 0, sizeof *x);
  if (fake_start(&x->f, script)) {
    fake_stop(&x->f);
    mk_test_skip("cannot start tests/llm/fake_llm.py (python3 missing?)");
    return false;
  }
  uv_loop_init(&x->loop);
  fake_config(&x->cfg, &x->f, p);
  if (tune) tune(&x->cfg);
  mk_errmsg err;
  if (mk_llm_new(&x->loop, &x->cfg, &x->llm, &err)) {
    MK_CHECK_STR(err.text, "");
    return false;
  }
  mk_buf_init(&x->log.text, 0);
  mk_llm_set_log(x->llm, on_log, &x->log);
  return true;
}

static void fx_close(fx *x) {
  /* Nothing the client wrote may contain the key. */
  MK_CHECK(strstr(mk_buf_cstr(&x->log.text), FAKE_KEY) == NULL);
  if (x->llm) {
    cJSON *l = mk_llm_ledger_json(mk_llm_get_ledger(x->llm), true);
    char *s = cJSON_PrintUnformatted(l);
    MK_CHECK(s && strstr(s, FAKE_KEY) == NULL);
    free(s);
    cJSON_Delete(l);
  }
  close_and_drain(&x->loop, x->llm);
  mk_llm_config_free(&x->cfg);
  mk_buf_free(&x->log.text);
  fake_stop(&x->f);
}

static const char *TEXT = "Hello from the streaming fake provider, in pieces.";

MK_TEST(llm_net, openai_stream_text_usage_and_progress) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"Hello from the streaming fake provider, in pieces.\","
                   "\"usage\":{\"in\":42,\"out\":7},\"chunk\":4}]}",
               MK_LLM_OPENAI, NULL))
    return fake_stop(&x.f);
  got g = {0};
  MK_REQUIRE(start_chat(x.llm, &g, "kernel_writer", NULL) == 0);
  MK_CHECK(!g.done); /* never called back from inside the call */
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_STR(g.text, TEXT);
  MK_CHECK_STR(g.finish, "stop");
  MK_CHECK_INT(g.tin, ==, 42);
  MK_CHECK_INT(g.tout, ==, 7);
  MK_CHECK(!g.estimated);
  MK_CHECK_INT(g.ntext, ==, (int)((strlen(TEXT) + 3) / 4));
  MK_CHECK_INT(g.chars, ==, strlen(TEXT));
  MK_CHECK_INT(g.attempts, ==, 1);
  cJSON *log = fake_log(&x.f);
  cJSON *req = cJSON_GetArrayItem(cJSON_GetObjectItem(log, "requests"), 0);
  cJSON *h = cJSON_GetObjectItem(req, "headers"), *b = cJSON_GetObjectItem(req, "body");
  MK_CHECK_STR(cJSON_GetObjectItem(req, "path")->valuestring, "/v1/chat/completions");
  MK_CHECK_STR(cJSON_GetObjectItem(h, "authorization")->valuestring, "Bearer " FAKE_KEY);
  MK_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(b, "stream")));
  MK_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(b, "stream_options"), "include_usage")));
  cJSON *m0 = cJSON_GetArrayItem(cJSON_GetObjectItem(b, "messages"), 0);
  MK_CHECK_STR(cJSON_GetObjectItem(m0, "role")->valuestring, "system");
  MK_CHECK_INT(cJSON_GetObjectItem(b, "max_tokens")->valueint, ==, 8192);
  cJSON_Delete(log);
  mk_llm_ledger *l = mk_llm_get_ledger(x.llm);
  MK_CHECK_INT(l->total.calls, ==, 1);
  MK_CHECK_INT(l->total.tokens_in + l->total.tokens_out, ==, 49);
  MK_CHECK_INT(mk_llm_ledger_sum(l, "kernel_writer", "sk0").tokens_out, ==, 7);
  got_free(&g);
  fx_close(&x);
}

MK_TEST(llm_net, anthropic_stream_text_usage) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"Hello from the streaming fake provider, in pieces.\","
                   "\"usage\":{\"in\":42,\"out\":7},\"chunk\":5}]}",
               MK_LLM_ANTHROPIC, NULL))
    return fake_stop(&x.f);
  got g = {0};
  MK_REQUIRE(start_chat(x.llm, &g, "repairer", NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_STR(g.text, TEXT);
  MK_CHECK_STR(g.finish, "end_turn");
  MK_CHECK_INT(g.tin, ==, 42);
  MK_CHECK_INT(g.tout, ==, 7);
  MK_CHECK_INT(g.ntext, ==, 10);
  cJSON *log = fake_log(&x.f);
  cJSON *req = cJSON_GetArrayItem(cJSON_GetObjectItem(log, "requests"), 0);
  cJSON *h = cJSON_GetObjectItem(req, "headers"), *b = cJSON_GetObjectItem(req, "body");
  MK_CHECK_STR(cJSON_GetObjectItem(req, "path")->valuestring, "/v1/messages");
  MK_CHECK_STR(cJSON_GetObjectItem(h, "x-api-key")->valuestring, FAKE_KEY);
  MK_CHECK_STR(cJSON_GetObjectItem(h, "anthropic-version")->valuestring, "2023-06-01");
  MK_CHECK(cJSON_GetObjectItem(h, "authorization") == NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(b, "system")->valuestring, "you are terse");
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(b, "messages")), ==, 1);
  cJSON_Delete(log);
  got_free(&g);
  fx_close(&x);
}

static void no_stream(mk_llm_config *c) { c->stream = false; }

MK_TEST(llm_net, json_replies_both_providers) {
  for (int p = 0; p < 2; p++) {
    fx x;
    if (!fx_open(&x, "{\"replies\":[{\"text\":\"whole reply\",\"usage\":{\"in\":11,\"out\":3}}]}",
                 p ? MK_LLM_ANTHROPIC : MK_LLM_OPENAI, no_stream))
      return fake_stop(&x.f);
    got g = {0};
    MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
    MK_REQUIRE(run_until(&x.loop, &g.done, 20));
    MK_CHECK_INT(g.status, ==, 0);
    MK_CHECK_STR(g.text, "whole reply");
    MK_CHECK_INT(g.tin, ==, 11);
    MK_CHECK_INT(g.tout, ==, 3);
    MK_CHECK_INT(g.ntext, ==, 0);
    cJSON *log = fake_log(&x.f);
    cJSON *b = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(log, "requests"), 0), "body");
    MK_CHECK(cJSON_GetObjectItem(b, "stream") == NULL);
    cJSON_Delete(log);
    MK_CHECK_INT(mk_llm_ledger_sum(mk_llm_get_ledger(x.llm), "chat", NULL).calls, ==, 1);
    got_free(&g);
    fx_close(&x);
  }
}

MK_TEST(llm_net, missing_usage_is_estimated_and_flagged) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"0123456789abcdefghij\",\"usage\":null}]}", MK_LLM_OPENAI, NULL))
    return fake_stop(&x.f);
  got g = {0};
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK(g.estimated);
  MK_CHECK_INT(g.tout, ==, 5); /* 20 characters / 4 */
  MK_CHECK(g.tin > 0);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->total.estimated, ==, 1);
  got_free(&g);
  fx_close(&x);
}

MK_TEST(llm_net, rate_limit_honours_retry_after) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"status\":429,\"headers\":{\"Retry-After\":\"1\"},"
                   "\"error_message\":\"slow down\"},"
                   "{\"status\":429,\"headers\":{\"retry-after-ms\":\"300\"}},"
                   "{\"text\":\"finally\",\"usage\":{\"in\":5,\"out\":2}}]}",
               MK_LLM_OPENAI, NULL))
    return fake_stop(&x.f);
  got g = {0};
  uint64_t t0 = uv_hrtime();
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  double took = (double)(uv_hrtime() - t0) / 1e9;
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_STR(g.text, "finally");
  MK_CHECK_INT(g.attempts, ==, 3);
  MK_CHECK_INT(g.nretry, ==, 2);
  MK_CHECK(g.wait > 0.29 && g.wait < 0.31); /* the last wait: retry-after-ms */
  MK_CHECK(took >= 1.25);                   /* 1 s + 0.3 s, not the 0.05 s backoff */
  MK_CHECK(strstr(mk_buf_cstr(&x.log.text), "HTTP 429 (slow down)") != NULL);
  cJSON *log = fake_log(&x.f);
  cJSON *reqs = cJSON_GetObjectItem(log, "requests");
  double gap = cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 1), "t")->valuedouble -
               cJSON_GetObjectItem(cJSON_GetArrayItem(reqs, 0), "t")->valuedouble;
  MK_CHECK(gap >= 0.95);
  cJSON_Delete(log);
  got_free(&g);
  fx_close(&x);
}

MK_TEST(llm_net, server_errors_retry_then_fail_contained) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"status\":500},{\"status\":503},{\"status\":502,\"error_message\":\"bad gw\"},"
                   "{\"status\":400,\"error_message\":\"model not found\"}]}",
               MK_LLM_ANTHROPIC, NULL))
    return fake_stop(&x.f);
  got g = {0};
  MK_REQUIRE(start_chat(x.llm, &g, "optimiser", NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, MK_ENET);
  MK_CHECK_INT(g.attempts, ==, 3); /* 1 + max_retries 2 */
  MK_CHECK_INT(g.http, ==, 502);
  MK_CHECK(strstr(g.err, "HTTP 502") && strstr(g.err, "bad gw"));
  MK_CHECK_STR(g.text, "");
  mk_llm_ledger *l = mk_llm_get_ledger(x.llm);
  MK_CHECK_INT(l->total.failures, ==, 1);
  MK_CHECK_STR(l->calls[0].outcome, "error");
  MK_CHECK_INT(x.log.lines, >=, 3); /* two retries and the failure */
  got_free(&g);
  /* A 400 is not retried. */
  x.cfg.max_retries = 5;
  got g2 = {0};
  mk_llm_close(x.llm);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  mk_errmsg err;
  MK_REQUIRE(mk_llm_new(&x.loop, &x.cfg, &x.llm, &err) == 0);
  MK_REQUIRE(start_chat(x.llm, &g2, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK_INT(g2.attempts, ==, 1);
  MK_CHECK_INT(g2.status, ==, MK_EINVAL);
  MK_CHECK(strstr(g2.err, "model not found") != NULL);
  got_free(&g2);
  fx_close(&x);
}

MK_TEST(llm_net, malformed_and_truncated_replies_are_retried_then_contained) {
  fx x;
  if (!fx_open(&x, "{\"replies\":["
                   "{\"malformed\":\"{not json\"},"
                   "{\"text\":\"this stream is cut in the middle\",\"truncate\":true},"
                   "{\"text\":\"whole\",\"stream_error\":true},"
                   "{\"text\":\"good at last\",\"usage\":{\"in\":3,\"out\":4}},"
                   "{\"malformed\":\"<html>bad gateway</html>\"},"
                   "{\"malformed\":\"{\\\"choices\\\": 7}\"},"
                   "{\"text\":\"x\",\"truncate\":true}]}",
               MK_LLM_OPENAI, NULL))
    return fake_stop(&x.f);
  x.cfg.max_retries = 3;
  mk_llm_close(x.llm);
  uv_run(&x.loop, UV_RUN_DEFAULT);
  mk_errmsg err;
  MK_REQUIRE(mk_llm_new(&x.loop, &x.cfg, &x.llm, &err) == 0);
  got g = {0};
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, 0);
  MK_CHECK_INT(g.attempts, ==, 4);
  MK_CHECK_STR(g.text, "good at last"); /* nothing of the failed attempts leaks in */
  MK_CHECK_INT(g.tin, ==, 3);
  got_free(&g);
  /* Second call: malformed, non-object, truncated again, then the script ends (500). */
  got g2 = {0};
  MK_REQUIRE(start_chat(x.llm, &g2, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK(g2.status != 0);
  MK_CHECK_INT(g2.attempts, ==, 4);
  MK_CHECK(strstr(g2.err, "script exhausted") != NULL);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->total.failures, ==, 1);
  got_free(&g2);
  fx_close(&x);
}

static void quick_timeout(mk_llm_config *c) {
  c->timeout_s = 0.5;
  c->max_retries = 0;
}

MK_TEST(llm_net, slow_reply_times_out) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"late\",\"delay_s\":3}]}", MK_LLM_OPENAI, quick_timeout))
    return fake_stop(&x.f);
  got g = {0};
  uint64_t t0 = uv_hrtime();
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  double took = (double)(uv_hrtime() - t0) / 1e9;
  MK_CHECK_INT(g.status, ==, MK_ETIMEDOUT);
  MK_CHECK(took < 2.0);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->total.failures, ==, 1);
  got_free(&g);
  fx_close(&x);
}

MK_TEST(llm_net, cancel_and_close_report_cancelled) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"a\",\"delay_s\":2},{\"text\":\"b\",\"delay_s\":2},"
                   "{\"text\":\"c\",\"delay_s\":2}]}",
               MK_LLM_OPENAI, NULL))
    return fake_stop(&x.f);
  got g = {0}, g2 = {0}, g3 = {0};
  mk_llm_req *req = NULL;
  MK_REQUIRE(start_chat(x.llm, &g, NULL, &req) == 0);
  MK_REQUIRE(start_chat(x.llm, &g2, NULL, NULL) == 0);
  MK_REQUIRE(start_chat(x.llm, &g3, NULL, NULL) == 0);
  MK_CHECK_INT(mk_llm_pending(x.llm), ==, 3);
  bool never = false;
  run_until(&x.loop, &never, 0.3); /* let the transfers start */
  uint64_t t0 = uv_hrtime();
  mk_llm_cancel(req);
  MK_CHECK(!g.done);
  MK_REQUIRE(run_until(&x.loop, &g.done, 5));
  MK_CHECK((double)(uv_hrtime() - t0) / 1e9 < 1.5); /* not the 2 s reply */
  MK_CHECK_INT(g.status, ==, MK_ECANCELED);
  MK_CHECK_INT(mk_llm_pending(x.llm), ==, 2);
  /* Closing cancels the rest, synchronously. */
  mk_llm_close(x.llm);
  MK_CHECK(g2.done && g3.done);
  MK_CHECK_INT(g2.status, ==, MK_ECANCELED);
  MK_CHECK_INT(g3.status, ==, MK_ECANCELED);
  x.llm = NULL;
  got_free(&g);
  got_free(&g2);
  got_free(&g3);
  fx_close(&x);
}

static void two_at_a_time(mk_llm_config *c) { c->max_concurrency = 2; }

MK_TEST(llm_net, concurrency_limit_holds) {
  fx x;
  mk_buf s;
  mk_buf_init(&s, 0);
  mk_buf_puts(&s, "{\"replies\":[");
  for (int i = 0; i < 6; i++)
    mk_buf_printf(&s, "%s{\"text\":\"r%d\",\"delay_s\":0.3,\"usage\":{\"in\":10,\"out\":1}}", i ? "," : "", i);
  mk_buf_puts(&s, "]}");
  bool ok = fx_open(&x, mk_buf_cstr(&s), MK_LLM_ANTHROPIC, two_at_a_time);
  mk_buf_free(&s);
  if (!ok) return fake_stop(&x.f);
  got g[6];
  memset(g, 0, sizeof g);
  uint64_t t0 = uv_hrtime();
  for (int i = 0; i < 6; i++) MK_REQUIRE(start_chat(x.llm, &g[i], NULL, NULL) == 0);
  for (int i = 0; i < 6; i++) MK_REQUIRE(run_until(&x.loop, &g[i].done, 20));
  double took = (double)(uv_hrtime() - t0) / 1e9;
  for (int i = 0; i < 6; i++) MK_CHECK_INT(g[i].status, ==, 0);
  MK_CHECK(took >= 0.85); /* three waves of 0.3 s */
  cJSON *log = fake_log(&x.f);
  MK_CHECK_INT(cJSON_GetObjectItem(log, "max_concurrent")->valueint, ==, 2);
  cJSON_Delete(log);
  MK_CHECK_INT(mk_llm_get_ledger(x.llm)->total.tokens_in, ==, 60);
  for (int i = 0; i < 6; i++) got_free(&g[i]);
  fx_close(&x);
}

MK_TEST(llm_net, key_never_appears_in_errors_logs_or_ledger) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"status\":401,\"echo_key\":true},{\"status\":500,\"echo_key\":true},"
                   "{\"status\":500,\"echo_key\":true},{\"status\":500,\"echo_key\":true}]}",
               MK_LLM_OPENAI, NULL))
    return fake_stop(&x.f);
  got g = {0};
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_CHECK_INT(g.status, ==, MK_EAUTH);
  MK_CHECK_INT(g.attempts, ==, 1);
  MK_CHECK(strstr(g.err, "Incorrect API key provided: [redacted]") != NULL);
  MK_CHECK(strstr(g.err, FAKE_KEY) == NULL);
  MK_CHECK(strstr(g.err, "MK_TEST_LLM_KEY") != NULL); /* names the variable to check */
  got g2 = {0};
  MK_REQUIRE(start_chat(x.llm, &g2, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK(strstr(g2.err, FAKE_KEY) == NULL);
  MK_CHECK(strstr(mk_buf_cstr(&x.log.text), "[redacted]") != NULL); /* retries logged, redacted */
  cJSON *cfg = mk_llm_config_to_json(mk_llm_get_config(x.llm));
  char *s = cJSON_PrintUnformatted(cfg);
  MK_CHECK(strstr(s, FAKE_KEY) == NULL);
  free(s);
  cJSON_Delete(cfg);
  got_free(&g);
  got_free(&g2);
  fx_close(&x); /* checks the log and the ledger dump too */
}

static void small_budget(mk_llm_config *c) { c->budget_tokens = 60; }

MK_TEST(llm_net, token_budget_stops_new_calls) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"a\",\"usage\":{\"in\":40,\"out\":9}},"
                   "{\"text\":\"b\",\"usage\":{\"in\":40,\"out\":9}},{\"text\":\"c\"}]}",
               MK_LLM_OPENAI, small_budget))
    return fake_stop(&x.f);
  got g = {0}, g2 = {0}, g3 = {0};
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  MK_REQUIRE(start_chat(x.llm, &g2, NULL, NULL) == 0); /* 49 < 60: allowed */
  MK_REQUIRE(run_until(&x.loop, &g2.done, 20));
  MK_CHECK_INT(start_chat(x.llm, &g3, NULL, NULL), ==, MK_EBUDGET);
  MK_CHECK(strstr(g3.err, "budget") != NULL);
  cJSON *l = mk_llm_ledger_json(mk_llm_get_ledger(x.llm), false);
  MK_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "budget"), "exhausted")));
  MK_CHECK_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(l, "total"), "tokens")->valueint, ==, 98);
  cJSON_Delete(l);
  got_free(&g);
  got_free(&g2);
  got_free(&g3);
  fx_close(&x);
}

static void priced(mk_llm_config *c) {
  c->nprices = 1;
  c->prices = calloc(1, sizeof *c->prices);
  c->prices[0].model = mk_strdup("claude-*");
  c->prices[0].input_per_mtok = 3;
  c->prices[0].output_per_mtok = 15;
  c->budget_usd = 0.001;
}

MK_TEST(llm_net, money_from_price_table_and_budget) {
  fx x;
  if (!fx_open(&x, "{\"replies\":[{\"text\":\"a\",\"usage\":{\"in\":100,\"out\":50},\"model\":\"claude-test-20250101\"}]}",
               MK_LLM_ANTHROPIC, priced))
    return fake_stop(&x.f);
  got g = {0}, g2 = {0};
  MK_REQUIRE(start_chat(x.llm, &g, NULL, NULL) == 0);
  MK_REQUIRE(run_until(&x.loop, &g.done, 20));
  mk_llm_ledger *l = mk_llm_get_ledger(x.llm);
  double want = (100 * 3.0 + 50 * 15.0) / 1e6;
  MK_CHECK(l->total.usd > want * 0.999 && l->total.usd < want * 1.001);
  MK_CHECK_STR(l->calls[0].model, "claude-test-20250101");
  MK_CHECK_INT(start_chat(x.llm, &g2, NULL, NULL), ==, MK_EBUDGET); /* $0.00105 >= $0.001 */
  got_free(&g);
  got_free(&g2);
  fx_close(&x);
}
