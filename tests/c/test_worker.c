/* test_worker.c — the worker supervisor against fake workers that crash,
 * hang, print garbage or huge lines, or never start
 * (tests/fixtures/worker). Every test ends with uv_loop_close() == 0: no
 * handle may outlive the pool. A watchdog bounds every wait. */
#include "mk_buf.h"
#include "mk_test.h"
#include "mk_worker.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct outcome {
  int calls;
  int status;
  char kind[64];
  char message[8192];
  int line;
  cJSON *result;
  int progress;
  double elapsed_ms;
  char device[64];
} outcome;

static void on_done(void *data, mk_worker_result *r) {
  outcome *o = data;
  o->calls++;
  o->status = r->status;
  snprintf(o->kind, sizeof o->kind, "%s", r->kind ? r->kind : "");
  snprintf(o->message, sizeof o->message, "%s", r->message ? r->message : "");
  o->line = r->line;
  o->elapsed_ms = r->elapsed_ms;
  cJSON_Delete(o->result);
  o->result = r->result ? cJSON_Duplicate(r->result, 1) : NULL;
  snprintf(o->device, sizeof o->device, "%s", r->worker ? r->worker->device : "");
}

static void on_progress(void *data, const char *msg, double fraction) {
  outcome *o = data;
  o->progress++;
}

static void outcome_free(outcome *o) {
  cJSON_Delete(o->result);
  o->result = NULL;
}

static const char *python(void) {
  return access(MK_DEFAULT_PYTHON, X_OK) == 0 ? MK_DEFAULT_PYTHON : "/usr/bin/python3";
}

static void fixture(char *buf, size_t n, const char *name) {
  snprintf(buf, n, "%s/tests/fixtures/worker/%s", mk_test_repo_dir(), name);
}

static void on_tick(uv_timer_t *t) { (void)t; }

/* Runs the loop until *counter >= target or `seconds` pass. */
static int run_until(uv_loop_t *loop, const int *counter, int target, double seconds) {
  uv_timer_t tick;
  uv_timer_init(loop, &tick);
  uv_timer_start(&tick, on_tick, 20, 20);
  uint64_t end = uv_hrtime() + (uint64_t)(seconds * 1e9);
  while (*counter < target && uv_hrtime() < end) uv_run(loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&tick, NULL);
  uv_run(loop, UV_RUN_NOWAIT);
  return *counter >= target;
}

static void on_closed(void *data) { (*(int *)data)++; }

/* Closes the pool and checks the loop ends with no handle left. */
static void close_pool(uv_loop_t *loop, mk_worker_pool *p) {
  int closed = 0;
  mk_worker_pool_close(p, on_closed, &closed);
  MK_CHECK(run_until(loop, &closed, 1, 15));
  uv_run(loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(loop), ==, 0);
}

typedef struct fake {
  uv_loop_t loop;
  mk_worker_pool *pool;
  char script[1024];
  const char *argv[4];
} fake;

static int fake_start(fake *f, const char *mode, mk_worker_config *cfg_in) {
  uv_loop_init(&f->loop);
  fixture(f->script, sizeof f->script, "fake_worker.py");
  f->argv[0] = python();
  f->argv[1] = f->script;
  f->argv[2] = mode;
  f->argv[3] = NULL;
  mk_worker_config cfg;
  if (cfg_in) cfg = *cfg_in;
  else mk_worker_config_init(&cfg);
  if (!cfg.argv) cfg.argv = f->argv;
  if (cfg.gpus < 0) cfg.gpus = 0;
  cfg.pythonpath = "/mk/test/pythonpath";
  mk_errmsg err;
  int rc = mk_worker_pool_new(&f->loop, &cfg, &f->pool, &err);
  if (rc) fprintf(stderr, "pool: %s\n", err.text);
  return rc;
}

static uint64_t submit(fake *f, const char *method, cJSON *params, mk_worker_kind kind,
                       double timeout_s, outcome *o) {
  mk_worker_request req = {.method = method, .params = params, .kind = kind,
                           .timeout_s = timeout_s, .done = on_done, .progress = on_progress,
                           .data = o};
  uint64_t id = 0;
  mk_errmsg err;
  int rc = mk_worker_submit(f->pool, &req, &id, &err);
  if (rc) fprintf(stderr, "submit %s: %s\n", method, err.text);
  MK_CHECK_INT(rc, ==, 0);
  return id;
}

static int pid_of(fake *f) {
  outcome o = {0};
  submit(f, "pid", NULL, MK_WORKER_ANY, 0, &o);
  run_until(&f->loop, &o.calls, 1, 20);
  const cJSON *pid = o.result ? cJSON_GetObjectItem(o.result, "pid") : NULL;
  int v = cJSON_IsNumber(pid) ? pid->valueint : -1;
  outcome_free(&o);
  return v;
}

MK_TEST(worker, echo_and_handshake) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  MK_CHECK_INT(mk_worker_pool_size(f.pool), ==, 1);
  MK_CHECK(mk_worker_pool_info(f.pool, 0) == NULL); /* lazy: nothing started yet */
  outcome o = {0};
  cJSON *params = cJSON_CreateObject();
  cJSON_AddNumberToObject(params, "a", 41);
  cJSON_AddStringToObject(params, "s", "caf\xc3\xa9 \"quoted\"\n");
  submit(&f, "echo", params, MK_WORKER_ANY, 0, &o);
  MK_CHECK_INT(o.calls, ==, 0); /* never called back from inside submit */
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 20));
  MK_CHECK_INT(o.status, ==, 0);
  MK_REQUIRE(o.result != NULL);
  MK_CHECK_INT(cJSON_GetObjectItem(o.result, "a")->valueint, ==, 41);
  MK_CHECK_STR(cJSON_GetObjectItem(o.result, "s")->valuestring, "caf\xc3\xa9 \"quoted\"\n");
  MK_CHECK_STR(o.device, "fake-cpu");
  const mk_worker_info *info = mk_worker_pool_info(f.pool, 0);
  MK_REQUIRE(info != NULL);
  MK_CHECK_STR(info->torch, "0.0+fake");
  MK_CHECK_STR(info->cuda, "");
  MK_CHECK(mk_worker_pool_info_of(f.pool, MK_WORKER_CPU) == info);
  MK_CHECK(mk_worker_pool_info_of(f.pool, MK_WORKER_GPU) == NULL);
  outcome_free(&o);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, environment) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 2;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  MK_CHECK_INT(mk_worker_pool_size(f.pool), ==, 3);
  MK_CHECK_INT(mk_worker_pool_gpus(f.pool), ==, 2);
  outcome cpu = {0}, gpu = {0};
  submit(&f, "env", NULL, MK_WORKER_CPU, 0, &cpu);
  submit(&f, "env", NULL, MK_WORKER_GPU, 0, &gpu);
  int both = 0;
  uint64_t end = uv_hrtime() + 20000000000ull;
  while ((cpu.calls == 0 || gpu.calls == 0) && uv_hrtime() < end) {
    both = cpu.calls + gpu.calls;
    run_until(&f.loop, &both, both + 1, 1);
    both = cpu.calls + gpu.calls;
  }
  MK_REQUIRE(cpu.result && gpu.result);
  MK_CHECK_STR(cJSON_GetObjectItem(cpu.result, "TRITON_INTERPRET")->valuestring, "1");
  MK_CHECK_STR(cJSON_GetObjectItem(cpu.result, "CUDA_VISIBLE_DEVICES")->valuestring, "");
  MK_CHECK_STR(cJSON_GetObjectItem(cpu.result, "MKWORKER_KIND")->valuestring, "cpu");
  MK_CHECK_STR(cJSON_GetObjectItem(cpu.result, "PYTHONUNBUFFERED")->valuestring, "1");
  const char *pp = cJSON_GetObjectItem(cpu.result, "PYTHONPATH")->valuestring;
  MK_CHECK(strncmp(pp, "/mk/test/pythonpath", 19) == 0);
  MK_CHECK(cJSON_IsNull(cJSON_GetObjectItem(gpu.result, "TRITON_INTERPRET")));
  MK_CHECK_STR(cJSON_GetObjectItem(gpu.result, "MKWORKER_KIND")->valuestring, "gpu");
  const char *vis = cJSON_GetObjectItem(gpu.result, "CUDA_VISIBLE_DEVICES")->valuestring;
  MK_CHECK(vis != NULL && vis[0] != '\0');
  MK_CHECK_STR(gpu.device, "fake-gpu");
  outcome_free(&cpu);
  outcome_free(&gpu);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, detect_gpus) {
  char ids[8][64];
  const char *saved = getenv("CUDA_VISIBLE_DEVICES");
  char keep[256] = "";
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  setenv("CUDA_VISIBLE_DEVICES", "2, 5", 1);
  MK_CHECK_INT(mk_worker_detect_gpus(ids, 8), ==, 2);
  MK_CHECK_STR(ids[0], "2");
  MK_CHECK_STR(ids[1], "5");
  setenv("CUDA_VISIBLE_DEVICES", "GPU-1a2b,-1,3", 1);
  MK_CHECK_INT(mk_worker_detect_gpus(ids, 8), ==, 1);
  MK_CHECK_STR(ids[0], "GPU-1a2b");
  setenv("CUDA_VISIBLE_DEVICES", "", 1);
  MK_CHECK_INT(mk_worker_detect_gpus(ids, 8), ==, 0);
  setenv("CUDA_VISIBLE_DEVICES", "0,1,2,3", 1);
  MK_CHECK_INT(mk_worker_detect_gpus(ids, 2), ==, 2);
  if (saved) setenv("CUDA_VISIBLE_DEVICES", keep, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
}

MK_TEST(worker, no_gpu_rejects_gpu_jobs) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o = {0};
  mk_worker_request req = {.method = "echo", .params = cJSON_CreateObject(),
                           .kind = MK_WORKER_GPU, .done = on_done, .data = &o};
  mk_errmsg err;
  MK_CHECK_INT(mk_worker_submit(f.pool, &req, NULL, &err), ==, MK_ENOENT);
  MK_CHECK(strstr(err.text, "GPU") != NULL);
  MK_CHECK(req.params == NULL); /* freed */
  mk_worker_request bad = {.method = "", .done = on_done, .data = &o};
  MK_CHECK_INT(mk_worker_submit(f.pool, &bad, NULL, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_worker_pool_warm(f.pool, MK_WORKER_GPU), ==, MK_ENOENT);
  close_pool(&f.loop, f.pool);
  MK_CHECK_INT(o.calls, ==, 0);
}

MK_TEST(worker, fifo_many_jobs) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  enum { N = 40 };
  static outcome o[N];
  memset(o, 0, sizeof o);
  for (int i = 0; i < N; i++) {
    cJSON *p = cJSON_CreateObject();
    cJSON_AddNumberToObject(p, "i", i);
    submit(&f, "echo", p, MK_WORKER_ANY, 0, &o[i]);
  }
  MK_CHECK(run_until(&f.loop, &o[N - 1].calls, 1, 30));
  for (int i = 0; i < N; i++) {
    MK_CHECK_INT(o[i].calls, ==, 1);
    MK_CHECK(o[i].result && cJSON_GetObjectItem(o[i].result, "i")->valueint == i);
    outcome_free(&o[i]);
  }
  mk_worker_stats st;
  mk_worker_pool_stats(f.pool, &st);
  MK_CHECK_INT(st.spawns, ==, 1);
  MK_CHECK_INT(st.completed, ==, N);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, crash_mid_request_restarts) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  int pid1 = pid_of(&f);
  MK_CHECK(pid1 > 0);
  outcome o = {0}, after = {0};
  cJSON *p = cJSON_CreateObject();
  cJSON_AddNumberToObject(p, "code", 7);
  submit(&f, "crash", p, MK_WORKER_ANY, 0, &o);
  submit(&f, "echo", cJSON_CreateObject(), MK_WORKER_ANY, 0, &after); /* queued behind */
  MK_CHECK(run_until(&f.loop, &after.calls, 1, 30));
  MK_CHECK_INT(o.calls, ==, 1);
  MK_CHECK_INT(o.status, ==, MK_ECRASHED);
  MK_CHECK_STR(o.kind, "crashed");
  if (!strstr(o.message, "exited with status 7")) fprintf(stderr, "    got: %s\n", o.message);
  MK_CHECK(strstr(o.message, "exited with status 7") != NULL);
  MK_CHECK(strstr(o.message, "while running `crash`") != NULL);
  MK_CHECK(strstr(o.message, "fake: last words") != NULL);
  MK_CHECK_INT(after.calls, ==, 1);
  MK_CHECK_INT(after.status, ==, 0);
  int pid2 = pid_of(&f);
  MK_CHECK(pid2 > 0 && pid2 != pid1);
  mk_worker_stats st;
  mk_worker_pool_stats(f.pool, &st);
  MK_CHECK_INT(st.crashes, ==, 1);
  MK_CHECK_INT(st.spawns, ==, 2);
  outcome_free(&o);
  outcome_free(&after);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, segfault_is_contained) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o = {0};
  submit(&f, "segv", NULL, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 30));
  MK_CHECK_INT(o.status, ==, MK_ECRASHED);
  MK_CHECK(strstr(o.message, "signal 11") != NULL);
  MK_CHECK(strstr(o.message, "fake: segfaulting") != NULL);
  outcome_free(&o);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, hang_times_out_and_restarts) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  int pid1 = pid_of(&f);
  outcome o = {0}, after = {0};
  submit(&f, "sleep", NULL, MK_WORKER_ANY, 0.4, &o);
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &after);
  uint64_t t0 = uv_hrtime();
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 10));
  double waited = (double)(uv_hrtime() - t0) / 1e9;
  MK_CHECK(waited < 3.0);
  MK_CHECK_INT(o.status, ==, MK_ETIMEDOUT);
  MK_CHECK_STR(o.kind, "timeout");
  MK_CHECK(strstr(o.message, "0.4 s") != NULL);
  MK_CHECK(run_until(&f.loop, &after.calls, 1, 30));
  MK_CHECK_INT(after.status, ==, 0);
  int pid2 = pid_of(&f);
  MK_CHECK(pid2 > 0 && pid2 != pid1);
  MK_CHECK(kill(pid1, 0) != 0); /* the hung process is gone */
  mk_worker_stats st;
  mk_worker_pool_stats(f.pool, &st);
  MK_CHECK_INT(st.timeouts, ==, 1);
  MK_CHECK_INT(st.crashes, ==, 0);
  outcome_free(&o);
  outcome_free(&after);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, hang_with_grandchild_holding_pipes) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o = {0}, after = {0};
  submit(&f, "spawn_child_hang", NULL, MK_WORKER_ANY, 0.5, &o);
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &after);
  MK_CHECK(run_until(&f.loop, &after.calls, 1, 20));
  MK_CHECK_INT(o.status, ==, MK_ETIMEDOUT);
  MK_CHECK_INT(after.status, ==, 0);
  outcome_free(&o);
  outcome_free(&after);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, garbage_on_stdout_is_ignored) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o = {0};
  submit(&f, "garbage", NULL, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 20));
  MK_CHECK_INT(o.status, ==, 0);
  MK_CHECK(o.result && cJSON_IsString(cJSON_GetObjectItem(o.result, "after")));
  mk_worker_stats st;
  mk_worker_pool_stats(f.pool, &st);
  MK_CHECK_INT(st.garbage_lines, >=, 3);
  mk_buf tail;
  mk_buf_init(&tail, 0);
  mk_worker_pool_stderr_tail(f.pool, 0, 10, &tail);
  MK_CHECK(strstr(mk_buf_cstr(&tail), "[stdout] hello from user code") != NULL);
  mk_buf_free(&tail);
  outcome_free(&o);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, huge_line_is_bounded) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.max_line = 64 * 1024;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  outcome small = {0}, big = {0}, junk = {0}, after = {0};
  cJSON *p1 = cJSON_CreateObject();
  cJSON_AddNumberToObject(p1, "bytes", 32 * 1024);
  submit(&f, "huge_reply", p1, MK_WORKER_ANY, 0, &small);
  cJSON *p2 = cJSON_CreateObject();
  cJSON_AddNumberToObject(p2, "bytes", 1 << 20);
  submit(&f, "huge_reply", p2, MK_WORKER_ANY, 0, &big);
  cJSON *p3 = cJSON_CreateObject();
  cJSON_AddNumberToObject(p3, "bytes", 4 << 20);
  submit(&f, "huge", p3, MK_WORKER_ANY, 0, &junk);
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &after);
  MK_CHECK(run_until(&f.loop, &after.calls, 1, 30));
  MK_CHECK_INT(small.status, ==, 0);
  MK_CHECK_INT(big.status, ==, MK_EPROTO);
  MK_CHECK(strstr(big.message, "longer than 65536 bytes") != NULL);
  MK_CHECK_INT(junk.status, ==, MK_EPROTO);
  MK_CHECK_INT(after.status, ==, 0);
  outcome_free(&small);
  outcome_free(&big);
  outcome_free(&junk);
  outcome_free(&after);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, large_reply_under_default_limit) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o = {0}, s = {0};
  cJSON *p = cJSON_CreateObject();
  cJSON_AddNumberToObject(p, "bytes", 8 << 20);
  submit(&f, "huge_reply", p, MK_WORKER_ANY, 0, &o);
  submit(&f, "split", NULL, MK_WORKER_ANY, 0, &s);
  MK_CHECK(run_until(&f.loop, &s.calls, 1, 30));
  MK_CHECK_INT(o.status, ==, 0);
  MK_CHECK(o.result && strlen(cJSON_GetObjectItem(o.result, "blob")->valuestring) == (8u << 20));
  MK_CHECK_INT(s.status, ==, 0);
  outcome_free(&o);
  outcome_free(&s);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, progress_and_worker_errors) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome pr = {0}, er = {0}, un = {0};
  submit(&f, "progress", NULL, MK_WORKER_ANY, 0, &pr);
  submit(&f, "error", NULL, MK_WORKER_ANY, 0, &er);
  submit(&f, "no_such_method", NULL, MK_WORKER_ANY, 0, &un);
  MK_CHECK(run_until(&f.loop, &un.calls, 1, 20));
  MK_CHECK_INT(pr.status, ==, 0);
  MK_CHECK_INT(pr.progress, ==, 3);
  MK_CHECK_INT(er.status, ==, MK_EWORKER);
  MK_CHECK_STR(er.kind, "python_error");
  MK_CHECK_INT(er.line, ==, 12);
  MK_CHECK(strstr(er.message, "ZeroDivisionError") != NULL);
  MK_CHECK_STR(un.kind, "bad_request");
  mk_worker_stats st;
  mk_worker_pool_stats(f.pool, &st);
  MK_CHECK_INT(st.spawns, ==, 1); /* reported errors never restart the worker */
  outcome_free(&pr);
  outcome_free(&er);
  outcome_free(&un);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, reply_then_exit_is_not_a_crash) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome a = {0}, b = {0}, c = {0};
  submit(&f, "reply_then_exit", NULL, MK_WORKER_ANY, 0, &a);
  submit(&f, "exit_silently", NULL, MK_WORKER_ANY, 0, &b);
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &c);
  MK_CHECK(run_until(&f.loop, &c.calls, 1, 30));
  MK_CHECK_INT(a.status, ==, 0);
  MK_CHECK_INT(b.status, ==, MK_ECRASHED);
  MK_CHECK(strstr(b.message, "exited with status 0") != NULL);
  MK_CHECK_INT(c.status, ==, 0);
  outcome_free(&a);
  outcome_free(&b);
  outcome_free(&c);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, closed_stdout_is_a_crash) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome a = {0}, b = {0};
  submit(&f, "close_stdout", NULL, MK_WORKER_ANY, 0, &a);
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &b);
  MK_CHECK(run_until(&f.loop, &b.calls, 1, 30));
  MK_CHECK_INT(a.status, ==, MK_ECRASHED);
  MK_CHECK_INT(b.status, ==, 0);
  outcome_free(&a);
  outcome_free(&b);
  close_pool(&f.loop, f.pool);
}

static void check_gives_up(fake *f, const char *needle, int expect_spawns) {
  outcome o = {0};
  submit(f, "echo", NULL, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f->loop, &o.calls, 1, 30));
  MK_CHECK_INT(o.status, ==, MK_ECRASHED);
  MK_CHECK_STR(o.kind, "unavailable");
  if (!strstr(o.message, needle)) fprintf(stderr, "    message: %s\n", o.message);
  MK_CHECK(strstr(o.message, needle) != NULL);
  mk_worker_stats st;
  mk_worker_pool_stats(f->pool, &st);
  MK_CHECK_INT(st.spawns, ==, expect_spawns);
  /* Later submits fail at once with the same explanation. */
  outcome o2 = {0};
  mk_worker_request req = {.method = "echo", .done = on_done, .data = &o2};
  mk_errmsg err;
  MK_CHECK_INT(mk_worker_submit(f->pool, &req, NULL, &err), ==, MK_ECRASHED);
  MK_CHECK(strstr(err.text, needle) != NULL);
  outcome_free(&o);
}

MK_TEST(worker, exit_at_start_gives_up) {
  fake f;
  char sh[1024];
  fixture(sh, sizeof sh, "exit_at_start.sh");
  const char *argv[] = {"/bin/sh", sh, NULL};
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = argv;
  cfg.backoff_ms = 10;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  check_gives_up(&f, "failed to start 3 times", 3);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, exit_at_start_message_has_stderr) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.backoff_ms = 10;
  cfg.max_start_failures = 2;
  MK_REQUIRE(fake_start(&f, "exit_at_start", &cfg) == 0);
  check_gives_up(&f, "no module named torch", 2);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, retry_after_fix) {
  fake f;
  char flag[256];
  snprintf(flag, sizeof flag, "/tmp/mk_test_worker_flag.%d", (int)getpid());
  unlink(flag);
  setenv("FAKE_FLAG", flag, 1);
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.backoff_ms = 10;
  MK_REQUIRE(fake_start(&f, "flaky_start", &cfg) == 0);
  check_gives_up(&f, "flaky start", 3);
  FILE *fp = fopen(flag, "w"); /* "the user fixed the environment" */
  if (fp) fclose(fp);
  mk_worker_pool_retry(f.pool);
  outcome o = {0};
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 20));
  MK_CHECK_INT(o.status, ==, 0);
  outcome_free(&o);
  close_pool(&f.loop, f.pool);
  unlink(flag);
  unsetenv("FAKE_FLAG");
}

MK_TEST(worker, missing_python_fails_at_once) {
  fake f;
  const char *argv[] = {"/nonexistent/bin/python", "-m", "mkworker", NULL};
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = argv;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  check_gives_up(&f, "cannot run /nonexistent/bin/python", 1);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, protocol_mismatch_and_hello_error) {
  fake f;
  MK_REQUIRE(fake_start(&f, "bad_protocol", NULL) == 0);
  check_gives_up(&f, "speaks protocol 99", 1);
  close_pool(&f.loop, f.pool);
  fake g;
  MK_REQUIRE(fake_start(&g, "hello_error", NULL) == 0);
  check_gives_up(&g, "torch is broken", 1);
  close_pool(&g.loop, g.pool);
}

MK_TEST(worker, handshake_timeout) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.hello_timeout_s = 0.3;
  cfg.backoff_ms = 10;
  cfg.max_start_failures = 2;
  MK_REQUIRE(fake_start(&f, "no_hello", &cfg) == 0);
  check_gives_up(&f, "did not answer its handshake", 2);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, not_a_worker_at_all) {
  fake f;
  char sh[1024];
  fixture(sh, sizeof sh, "garbage.sh");
  const char *argv[] = {"/bin/sh", sh, NULL};
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = argv;
  cfg.hello_timeout_s = 0.3;
  cfg.backoff_ms = 10;
  cfg.max_start_failures = 1;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  check_gives_up(&f, "did not answer its handshake", 1);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, garbage_before_hello_is_tolerated) {
  fake f;
  MK_REQUIRE(fake_start(&f, "garbage_hello", NULL) == 0);
  outcome o = {0};
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 20));
  MK_CHECK_INT(o.status, ==, 0);
  outcome_free(&o);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, cancel_queued_and_running) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  int pid1 = pid_of(&f);
  outcome hang = {0}, queued = {0}, after = {0};
  uint64_t h = submit(&f, "sleep", NULL, MK_WORKER_ANY, 0, &hang);
  uint64_t q = submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &queued);
  uv_run(&f.loop, UV_RUN_NOWAIT);
  MK_CHECK_INT(mk_worker_cancel(f.pool, q), ==, 0);
  MK_CHECK_INT(mk_worker_cancel(f.pool, h), ==, 0);
  MK_CHECK_INT(hang.calls + queued.calls, ==, 0); /* delivered from the loop */
  MK_CHECK_INT(mk_worker_cancel(f.pool, h), ==, MK_ENOENT);
  submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &after);
  MK_CHECK(run_until(&f.loop, &after.calls, 1, 20));
  MK_CHECK_INT(hang.calls, ==, 1);
  MK_CHECK_INT(hang.status, ==, MK_ECANCELED);
  MK_CHECK_INT(queued.calls, ==, 1);
  MK_CHECK_INT(queued.status, ==, MK_ECANCELED);
  MK_CHECK_INT(after.status, ==, 0);
  MK_CHECK(kill(pid1, 0) != 0);
  MK_CHECK_INT(mk_worker_cancel(f.pool, 9999), ==, MK_ENOENT);
  outcome_free(&hang);
  outcome_free(&queued);
  outcome_free(&after);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, close_with_jobs_in_flight) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o[4];
  memset(o, 0, sizeof o);
  submit(&f, "sleep", NULL, MK_WORKER_ANY, 0, &o[0]);
  for (int i = 1; i < 4; i++) submit(&f, "echo", NULL, MK_WORKER_ANY, 0, &o[i]);
  /* Let the worker start and take the sleep. */
  int started = 0;
  uint64_t end = uv_hrtime() + 10000000000ull;
  while (!mk_worker_pool_info(f.pool, 0) && uv_hrtime() < end) run_until(&f.loop, &started, 1, 0.05);
  int closed = 0;
  mk_worker_pool_close(f.pool, on_closed, &closed);
  mk_worker_request late = {.method = "echo", .done = on_done, .data = &o[0]};
  mk_errmsg err;
  MK_CHECK_INT(mk_worker_submit(f.pool, &late, NULL, &err), ==, MK_ECANCELED);
  MK_CHECK(run_until(&f.loop, &closed, 1, 10));
  for (int i = 0; i < 4; i++) {
    MK_CHECK_INT(o[i].calls, ==, 1);
    MK_CHECK_INT(o[i].status, ==, MK_ECANCELED);
    outcome_free(&o[i]);
  }
  uv_run(&f.loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&f.loop), ==, 0);
}

MK_TEST(worker, close_kills_worker_ignoring_shutdown) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.shutdown_grace_s = 0.3;
  MK_REQUIRE(fake_start(&f, "ignore_shutdown", &cfg) == 0);
  int pid = pid_of(&f);
  MK_CHECK(pid > 0);
  uint64_t t0 = uv_hrtime();
  close_pool(&f.loop, f.pool);
  MK_CHECK((double)(uv_hrtime() - t0) / 1e9 < 5);
  MK_CHECK(kill(pid, 0) != 0);
}

MK_TEST(worker, close_idle_is_polite) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.shutdown_grace_s = 10;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  int pid = pid_of(&f);
  uint64_t t0 = uv_hrtime();
  close_pool(&f.loop, f.pool);
  /* `shutdown` is answered by exiting: no need to wait for the grace. */
  MK_CHECK((double)(uv_hrtime() - t0) / 1e9 < 5);
  MK_CHECK(kill(pid, 0) != 0);
}

MK_TEST(worker, close_unstarted_pool) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  close_pool(&f.loop, f.pool);
}

/* Callbacks may submit, cancel and close re-entrantly. */
typedef struct chain {
  fake *f;
  int done;
  int closed;
  outcome last;
} chain;

static void chain_done(void *data, mk_worker_result *r) {
  chain *c = data;
  c->done++;
  if (c->done < 5) {
    mk_worker_request req = {.method = c->done % 2 ? "crash" : "echo", .done = chain_done, .data = c};
    mk_errmsg err;
    if (mk_worker_submit(c->f->pool, &req, NULL, &err) != 0) c->done = 100;
  } else if (c->done == 5) {
    outcome *o = &c->last;
    mk_worker_request req = {.method = "sleep", .done = on_done, .data = o};
    mk_errmsg err;
    mk_worker_submit(c->f->pool, &req, NULL, &err);
    mk_worker_pool_close(c->f->pool, on_closed, &c->closed);
  }
}

MK_TEST(worker, reentrant_callbacks) {
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  chain c = {.f = &f};
  mk_worker_request req = {.method = "echo", .done = chain_done, .data = &c};
  mk_errmsg err;
  MK_REQUIRE(mk_worker_submit(f.pool, &req, NULL, &err) == 0);
  MK_CHECK(run_until(&f.loop, &c.closed, 1, 40));
  MK_CHECK_INT(c.done, ==, 5);
  MK_CHECK_INT(c.last.calls, ==, 1);
  MK_CHECK_INT(c.last.status, ==, MK_ECANCELED);
  outcome_free(&c.last);
  uv_run(&f.loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&f.loop), ==, 0);
}

MK_TEST(worker, many_workers_mixed_failures) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 2;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  enum { N = 24 };
  static outcome o[N];
  memset(o, 0, sizeof o);
  int total = 0;
  for (int i = 0; i < N; i++) {
    const char *m = i % 4 == 1 ? "crash" : i % 4 == 3 ? "sleep" : "echo";
    mk_worker_kind k = i % 3 == 0 ? MK_WORKER_ANY : i % 3 == 1 ? MK_WORKER_CPU : MK_WORKER_GPU;
    submit(&f, m, NULL, k, i % 4 == 3 ? 0.3 : 0, &o[i]);
  }
  uint64_t end = uv_hrtime() + 60000000000ull;
  while (uv_hrtime() < end) {
    total = 0;
    for (int i = 0; i < N; i++) total += o[i].calls;
    if (total == N) break;
    run_until(&f.loop, &total, total + 1, 0.2);
  }
  for (int i = 0; i < N; i++) {
    MK_CHECK_INT(o[i].calls, ==, 1);
    int want = i % 4 == 1 ? MK_ECRASHED : i % 4 == 3 ? MK_ETIMEDOUT : 0;
    MK_CHECK_INT(o[i].status, ==, want);
    if (i % 3 == 1 && o[i].status == 0) MK_CHECK_STR(o[i].device, "fake-cpu");
    if (i % 3 == 2 && o[i].status == 0) MK_CHECK_STR(o[i].device, "fake-gpu");
    outcome_free(&o[i]);
  }
  close_pool(&f.loop, f.pool);
}

/* ---- several GPUs ----------------------------------------------------------- */

/* Runs the loop until every outcome of o[0..n) is in, or `seconds` pass. */
static void run_all(fake *f, outcome *o, int n, double seconds) {
  uint64_t end = uv_hrtime() + (uint64_t)(seconds * 1e9);
  int total = 0;
  while (uv_hrtime() < end) {
    total = 0;
    for (int i = 0; i < n; i++) total += o[i].calls;
    if (total == n) break;
    run_until(&f->loop, &total, total + 1, 0.2);
  }
}

static double num_of(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItem(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : -1;
}

static cJSON *timed_params(double seconds) {
  cJSON *p = cJSON_CreateObject();
  cJSON_AddNumberToObject(p, "seconds", seconds);
  return p;
}

/* Three stand-in GPUs, nine timings queued at once: every GPU starts and
 * takes work, no two timings ever overlap on one GPU, and they run side by
 * side on different GPUs. */
MK_TEST(worker, gpus_share_the_work_one_timing_each) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 3;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  enum { N = 9 };
  static outcome o[N];
  memset(o, 0, sizeof o);
  for (int i = 0; i < N; i++) submit(&f, "timed", timed_params(0.3), MK_WORKER_GPU, 0, &o[i]);
  run_all(&f, o, N, 60);
  int per_gpu[3] = {0, 0, 0};
  bool overlap_elsewhere = false;
  for (int i = 0; i < N; i++) {
    MK_REQUIRE(o[i].calls == 1 && o[i].status == 0 && o[i].result);
    const char *gpu = cJSON_GetObjectItem(o[i].result, "gpu")->valuestring;
    int g = -1;
    for (int w = 1; w <= 3; w++)
      if (strcmp(mk_worker_pool_info(f.pool, w)->visible, gpu) == 0) g = w - 1;
    MK_REQUIRE(g >= 0 && g < 3);
    per_gpu[g]++;
    for (int k = 0; k < i; k++) {
      double a0 = num_of(o[i].result, "t0"), a1 = num_of(o[i].result, "t1");
      double b0 = num_of(o[k].result, "t0"), b1 = num_of(o[k].result, "t1");
      bool overlap = a0 < b1 && b0 < a1;
      if (strcmp(gpu, cJSON_GetObjectItem(o[k].result, "gpu")->valuestring) == 0) MK_CHECK(!overlap);
      else overlap_elsewhere |= overlap;
    }
  }
  for (int g = 0; g < 3; g++) MK_CHECK_INT(per_gpu[g], >=, 2);
  MK_CHECK(overlap_elsewhere);
  uint64_t jobs = 0;
  for (int w = 1; w <= 3; w++) {
    mk_worker_load load;
    MK_REQUIRE(mk_worker_pool_load(f.pool, w, &load) == 0);
    jobs += load.jobs;
    MK_CHECK(load.busy_s >= 0.3 * (double)load.jobs);
  }
  MK_CHECK_INT((int)jobs, ==, N);
  mk_worker_load none;
  MK_CHECK_INT(mk_worker_pool_load(f.pool, 4, &none), ==, MK_EINVAL);
  for (int i = 0; i < N; i++) outcome_free(&o[i]);
  close_pool(&f.loop, f.pool);
}

/* Returns the pool index of the GPU worker that ran one timing of
 * `seconds` (1 is the first GPU), or -1. */
static int timed_on(fake *f, double seconds) {
  outcome o = {0};
  submit(f, "timed", timed_params(seconds), MK_WORKER_GPU, 0, &o);
  run_all(f, &o, 1, 20);
  int index = -1;
  const char *gpu = o.result ? cJSON_GetObjectItem(o.result, "gpu")->valuestring : "";
  for (int w = 1; w < mk_worker_pool_size(f->pool); w++)
    if (strcmp(mk_worker_pool_info(f->pool, w)->visible, gpu) == 0) index = w;
  outcome_free(&o);
  return index;
}

/* With both GPUs idle, a timing goes to the one that has been busy least:
 * after a long one on GPU 0, the next two short ones both go to GPU 1. */
MK_TEST(worker, least_loaded_gpu_takes_the_job) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 2;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  MK_REQUIRE(mk_worker_pool_warm(f.pool, MK_WORKER_GPU) == 0);
  uint64_t end = uv_hrtime() + 20000000000ull;
  while ((!mk_worker_pool_info(f.pool, 1) || !mk_worker_pool_info(f.pool, 2)) && uv_hrtime() < end)
    uv_run(&f.loop, UV_RUN_ONCE);
  MK_REQUIRE(mk_worker_pool_info(f.pool, 2) != NULL);
  MK_CHECK_INT(timed_on(&f, 0.4), ==, 1); /* a tie: the first GPU */
  MK_CHECK_INT(timed_on(&f, 0.05), ==, 2);
  MK_CHECK_INT(timed_on(&f, 0.05), ==, 2);
  close_pool(&f.loop, f.pool);
}

/* Stand-in GPUs beyond the detected ones never repeat an ordinal. */
MK_TEST(worker, standin_gpus_have_their_own_ordinals) {
  const char *saved = getenv("CUDA_VISIBLE_DEVICES");
  char keep[256] = "";
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  setenv("CUDA_VISIBLE_DEVICES", "1", 1);
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 3;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  if (saved) setenv("CUDA_VISIBLE_DEVICES", keep, 1);
  else unsetenv("CUDA_VISIBLE_DEVICES");
  MK_REQUIRE(mk_worker_pool_warm(f.pool, MK_WORKER_GPU) == 0);
  uint64_t end = uv_hrtime() + 20000000000ull;
  while (!(mk_worker_pool_info(f.pool, 1) && mk_worker_pool_info(f.pool, 2) && mk_worker_pool_info(f.pool, 3)) &&
         uv_hrtime() < end)
    uv_run(&f.loop, UV_RUN_ONCE);
  MK_REQUIRE(mk_worker_pool_info(f.pool, 3) != NULL);
  MK_CHECK_STR(mk_worker_pool_info(f.pool, 1)->visible, "1");
  MK_CHECK_STR(mk_worker_pool_info(f.pool, 2)->visible, "0");
  MK_CHECK_STR(mk_worker_pool_info(f.pool, 3)->visible, "2");
  close_pool(&f.loop, f.pool);
}

/* ---- containment ---------------------------------------------------------- */

/* A process is gone when /proc has no entry for it or it is a zombie (a
 * container's pid 1 may never reap what it adopts). */
static bool proc_gone(int pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return true;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static bool wait_gone(int pid, double seconds) {
  uint64_t end = uv_hrtime() + (uint64_t)(seconds * 1e9);
  while (!proc_gone(pid) && uv_hrtime() < end) usleep(20000);
  return proc_gone(pid);
}

typedef struct escape_outcome {
  outcome o;
  int grandchild;
} escape_outcome;

static void on_escape_progress(void *data, const char *msg, double fraction) {
  escape_outcome *e = data;
  e->grandchild = atoi(msg);
}

static void on_escape_done(void *data, mk_worker_result *r) { on_done(&((escape_outcome *)data)->o, r); }

/* Starts `escape` under the guard: a double-forked grandchild in its own
 * session. Returns its pid (alive), or -1. */
static int start_escape(fake *f, escape_outcome *e, double timeout_s, uint64_t *job) {
  memset(e, 0, sizeof *e);
  mk_worker_request req = {.method = "escape", .kind = MK_WORKER_ANY, .timeout_s = timeout_s,
                           .done = on_escape_done, .progress = on_escape_progress, .data = e};
  mk_errmsg err;
  if (mk_worker_submit(f->pool, &req, job, &err) != 0) return -1;
  uint64_t end = uv_hrtime() + 20000000000ull;
  while (e->grandchild == 0 && uv_hrtime() < end) uv_run(&f->loop, UV_RUN_ONCE);
  return e->grandchild > 0 && !proc_gone(e->grandchild) ? e->grandchild : -1;
}

MK_TEST(worker, escaped_grandchild_dies_with_a_timeout) {
  fake f;
  MK_REQUIRE(fake_start(&f, "guarded", NULL) == 0);
  escape_outcome e;
  uint64_t job;
  int gc = start_escape(&f, &e, 2, &job);
  MK_REQUIRE(gc > 0);
  MK_CHECK(run_until(&f.loop, &e.o.calls, 1, 20));
  MK_CHECK_INT(e.o.status, ==, MK_ETIMEDOUT);
  MK_CHECK(wait_gone(gc, 5));
  if (!proc_gone(gc)) kill(gc, SIGKILL);
  outcome_free(&e.o);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, escaped_grandchild_dies_with_a_cancel_and_a_close) {
  fake f;
  MK_REQUIRE(fake_start(&f, "guarded", NULL) == 0);
  escape_outcome e;
  uint64_t job;
  int gc = start_escape(&f, &e, 0, &job);
  MK_REQUIRE(gc > 0);
  MK_CHECK_INT(mk_worker_cancel(f.pool, job), ==, 0);
  MK_CHECK(run_until(&f.loop, &e.o.calls, 1, 20));
  MK_CHECK_INT(e.o.status, ==, MK_ECANCELED);
  MK_CHECK(wait_gone(gc, 5));
  if (!proc_gone(gc)) kill(gc, SIGKILL);
  outcome_free(&e.o);
  /* the restarted worker, closed mid-job */
  int gc2 = start_escape(&f, &e, 0, &job);
  MK_REQUIRE(gc2 > 0);
  close_pool(&f.loop, f.pool);
  MK_CHECK_INT(e.o.status, ==, MK_ECANCELED);
  MK_CHECK(wait_gone(gc2, 5));
  if (!proc_gone(gc2)) kill(gc2, SIGKILL);
  outcome_free(&e.o);
}

MK_TEST(worker, guard_reports_the_worker_s_death) {
  /* Under the guard a crash and a segfault read as before: the guard exits
   * the way the worker did. */
  fake f;
  MK_REQUIRE(fake_start(&f, "guarded", NULL) == 0);
  outcome o = {0};
  cJSON *params = cJSON_CreateObject();
  cJSON_AddNumberToObject(params, "code", 7);
  submit(&f, "crash", params, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 20));
  MK_CHECK_INT(o.status, ==, MK_ECRASHED);
  if (!strstr(o.message, "exited with status 7")) fprintf(stderr, "    got: %s\n", o.message);
  MK_CHECK(strstr(o.message, "exited with status 7") != NULL);
  MK_CHECK(strstr(o.message, "fake: last words") != NULL);
  outcome_free(&o);
  outcome s = {0};
  submit(&f, "segv", NULL, MK_WORKER_ANY, 0, &s);
  MK_CHECK(run_until(&f.loop, &s.calls, 1, 20));
  MK_CHECK_INT(s.status, ==, MK_ECRASHED);
  MK_CHECK(strstr(s.message, "signal 11") != NULL);
  outcome_free(&s);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, memory_limit_kills_a_hog) {
  fake f;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.memory_limit_gb = 0.25;
  MK_REQUIRE(fake_start(&f, "normal", &cfg) == 0);
  MK_CHECK(mk_worker_pool_memory_limit(f.pool) == (uint64_t)(0.25 * 1024 * 1024 * 1024));
  outcome o = {0};
  cJSON *params = cJSON_CreateObject();
  cJSON_AddNumberToObject(params, "mib", 1024);
  uint64_t t0 = uv_hrtime();
  submit(&f, "alloc", params, MK_WORKER_ANY, 60, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 30));
  MK_CHECK_INT(o.status, ==, MK_ECRASHED);
  MK_CHECK_STR(o.kind, "oom");
  MK_CHECK(strstr(o.message, "exceeded the memory limit of 0.25 GiB") != NULL);
  MK_CHECK((uv_hrtime() - t0) / 1000000000ull < 20); /* not the 60 s time limit */
  mk_worker_stats st;
  mk_worker_pool_stats(f.pool, &st);
  MK_CHECK(st.memory_kills == 1);
  outcome_free(&o);
  /* the worker restarts; a job within the limit runs */
  outcome ok = {0};
  params = cJSON_CreateObject();
  cJSON_AddNumberToObject(params, "mib", 16);
  cJSON_AddNumberToObject(params, "hold", 0);
  submit(&f, "alloc", params, MK_WORKER_ANY, 60, &ok);
  MK_CHECK(run_until(&f.loop, &ok.calls, 1, 30));
  MK_CHECK_INT(ok.status, ==, 0);
  outcome_free(&ok);
  close_pool(&f.loop, f.pool);
}

MK_TEST(worker, memory_limit_defaults) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  mk_worker_pool *p = NULL;
  mk_errmsg err;
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 0;
  const char *saved = getenv("MKEVOLVE_WORKER_MEMORY_GB");
  char keep[64] = "";
  if (saved) snprintf(keep, sizeof keep, "%s", saved);
  unsetenv("MKEVOLVE_WORKER_MEMORY_GB");
  MK_REQUIRE(mk_worker_pool_new(&loop, &cfg, &p, &err) == 0);
  /* 3/4 of the machine for the one CPU worker, at least 1 GiB */
  uint64_t lim = mk_worker_pool_memory_limit(p);
  MK_CHECK(lim >= (uint64_t)1 << 30);
  long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
  MK_CHECK(lim <= (uint64_t)pages * (uint64_t)size);
  close_pool(&loop, p);
  setenv("MKEVOLVE_WORKER_MEMORY_GB", "2.5", 1);
  uv_loop_init(&loop);
  MK_REQUIRE(mk_worker_pool_new(&loop, &cfg, &p, &err) == 0);
  MK_CHECK(mk_worker_pool_memory_limit(p) == (uint64_t)(2.5 * 1024 * 1024 * 1024));
  close_pool(&loop, p);
  setenv("MKEVOLVE_WORKER_MEMORY_GB", "0", 1); /* 0 in the environment: no limit */
  uv_loop_init(&loop);
  MK_REQUIRE(mk_worker_pool_new(&loop, &cfg, &p, &err) == 0);
  MK_CHECK(mk_worker_pool_memory_limit(p) == 0);
  close_pool(&loop, p);
  cfg.memory_limit_gb = -1; /* the config wins over the environment */
  setenv("MKEVOLVE_WORKER_MEMORY_GB", "3", 1);
  uv_loop_init(&loop);
  MK_REQUIRE(mk_worker_pool_new(&loop, &cfg, &p, &err) == 0);
  MK_CHECK(mk_worker_pool_memory_limit(p) == 0);
  close_pool(&loop, p);
  if (saved) setenv("MKEVOLVE_WORKER_MEMORY_GB", keep, 1);
  else unsetenv("MKEVOLVE_WORKER_MEMORY_GB");
}

MK_TEST(worker, environment_is_scrubbed) {
  static const char *const secrets[][2] = {
      {"OPENAI_API_KEY", "sk-test-secret"}, {"ANTHROPIC_API_KEY", "sk-ant-secret"},
      {"MK_TEST_LLM_KEY", "k"}, {"GITHUB_TOKEN", "ghp_x"}, {"HF_TOKEN", "hf_x"},
      {"AWS_SECRET_ACCESS_KEY", "aws"}, {"MKEVOLVE_API_KEY", "mk"}, {"DB_PASSWORD", "pw"},
      {"SOME_RANDOM_SETTING", "r"}};
  size_t ns = sizeof secrets / sizeof secrets[0];
  for (size_t i = 0; i < ns; i++) setenv(secrets[i][0], secrets[i][1], 1);
  setenv("TRITON_CACHE_DIR", "/tmp/mk-triton", 1);
  setenv("MKEVOLVE_SOMETHING", "kept", 1);
  setenv("FAKE_PASSED", "yes", 1); /* FAKE_* is in MKEVOLVE_WORKER_ENV (runner.c) */
  fake f;
  MK_REQUIRE(fake_start(&f, "normal", NULL) == 0);
  outcome o = {0};
  submit(&f, "environ", NULL, MK_WORKER_ANY, 0, &o);
  MK_CHECK(run_until(&f.loop, &o.calls, 1, 20));
  MK_REQUIRE(o.result != NULL);
  for (size_t i = 0; i < ns; i++) {
    if (cJSON_GetObjectItem(o.result, secrets[i][0]) != NULL)
      fprintf(stderr, "    %s reached the worker\n", secrets[i][0]);
    MK_CHECK(cJSON_GetObjectItem(o.result, secrets[i][0]) == NULL);
  }
  /* no value of a secret under any name either */
  char *text = cJSON_PrintUnformatted(o.result);
  MK_CHECK(text && strstr(text, "sk-test-secret") == NULL && strstr(text, "ghp_x") == NULL);
  free(text);
  const char *path = getenv("PATH"), *home = getenv("HOME");
  if (path) MK_CHECK_STR(cJSON_GetObjectItem(o.result, "PATH")->valuestring, path);
  if (home) MK_CHECK_STR(cJSON_GetObjectItem(o.result, "HOME")->valuestring, home);
  MK_CHECK_STR(cJSON_GetObjectItem(o.result, "TRITON_CACHE_DIR")->valuestring, "/tmp/mk-triton");
  MK_CHECK_STR(cJSON_GetObjectItem(o.result, "MKEVOLVE_SOMETHING")->valuestring, "kept");
  MK_CHECK_STR(cJSON_GetObjectItem(o.result, "FAKE_PASSED")->valuestring, "yes");
  MK_CHECK(cJSON_IsString(cJSON_GetObjectItem(o.result, "MKWORKER_PARENT")));
  outcome_free(&o);
  close_pool(&f.loop, f.pool);
  for (size_t i = 0; i < ns; i++) unsetenv(secrets[i][0]);
  unsetenv("TRITON_CACHE_DIR");
  unsetenv("MKEVOLVE_SOMETHING");
  unsetenv("FAKE_PASSED");
}

MK_TEST(worker, env_allow_list) {
  MK_CHECK(mk_worker_env_allowed("PATH", 4));
  MK_CHECK(mk_worker_env_allowed("LC_ALL", 6));
  MK_CHECK(mk_worker_env_allowed("CUDA_HOME", 9));
  MK_CHECK(!mk_worker_env_allowed("PATHX", 5));
  MK_CHECK(!mk_worker_env_allowed("OPENAI_API_KEY", 14));
  MK_CHECK(!mk_worker_env_allowed("TRITON_API_TOKEN", 16)); /* allowed prefix, secret name */
  MK_CHECK(!mk_worker_env_allowed("mkevolve_secret", 15));
  MK_CHECK(mk_worker_env_allowed("PATH=junk", 4)); /* only `len` bytes are the name */
}
