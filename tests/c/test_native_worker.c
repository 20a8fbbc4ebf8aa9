/* test_native_worker.c — the native worker (engine/worker/native) under the
 * engine's own supervisor (mk_worker_config.argv), on the CPU: the
 * handshake with libtorch's version, start-up in well under a second,
 * `launch` refused with the reason on a machine without a GPU (a bad
 * request on one with a GPU), other methods named as the Python worker's,
 * and a clean `shutdown` when the pool closes. The launch itself needs a
 * GPU: scripts/device/native-worker.sh. Skips when CMake found no libtorch. */
#include "mk_test.h"
#include "mk_worker.h"

#include <stdio.h>
#include <string.h>

#ifdef MK_NATIVE_WORKER_BIN

typedef struct outcome {
  int calls, status;
  char kind[64], message[1024];
} outcome;

static void on_done(void *data, mk_worker_result *r) {
  outcome *o = data;
  o->calls++;
  o->status = r->status;
  snprintf(o->kind, sizeof o->kind, "%s", r->kind ? r->kind : "");
  snprintf(o->message, sizeof o->message, "%s", r->message ? r->message : "");
}

static void on_tick(uv_timer_t *t) { (void)t; }

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

static int submit(mk_worker_pool *p, const char *method, outcome *o) {
  mk_worker_request req = {.method = method, .params = cJSON_CreateObject(), .kind = MK_WORKER_CPU,
                           .done = on_done, .data = o};
  mk_errmsg err = {{0}};
  return mk_worker_submit(p, &req, NULL, &err);
}

static void on_closed(void *data) { (*(int *)data)++; }

MK_TEST(native_worker, protocol_under_the_supervisor) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  const char *argv[] = {MK_NATIVE_WORKER_BIN, NULL};
  cfg.argv = argv;
  cfg.gpus = 0;
  mk_worker_pool *p = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_worker_pool_new(&loop, &cfg, &p, &err) == 0);
  outcome first = {0}, other = {0};
  uint64_t t0 = uv_hrtime();
  MK_REQUIRE(submit(p, "launch", &first) == 0);
  MK_REQUIRE(run_until(&loop, &first.calls, 1, 30));
  double start_s = (double)(uv_hrtime() - t0) * 1e-9; /* spawn, hello, one answer */
  fprintf(stderr, "    native worker: started and answered in %.3f s\n", start_s);
  MK_CHECK(start_s < 2.0); /* ~0.4 s here; the bound leaves room for a loaded CI machine */
  const mk_worker_info *info = mk_worker_pool_info(p, 0);
  MK_REQUIRE(info != NULL);
  MK_CHECK(info->torch[0] != '\0');
  MK_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(info->hello, "native")));
  MK_CHECK_INT(first.status, ==, MK_EWORKER);
  if (strcmp(info->device, "cpu") == 0) { /* no driver: the reason, not a crash */
    MK_CHECK_STR(first.kind, "unsupported");
    MK_CHECK(strstr(first.message, "launch needs a GPU") != NULL);
  } else { /* a GPU: the empty request is refused */
    MK_CHECK_STR(first.kind, "bad_request");
  }
  MK_REQUIRE(submit(p, "capture", &other) == 0);
  MK_REQUIRE(run_until(&loop, &other.calls, 1, 30));
  MK_CHECK_INT(other.status, ==, MK_EWORKER);
  MK_CHECK_STR(other.kind, "bad_request");
  MK_CHECK(strstr(other.message, "the Python worker's") != NULL);
  mk_worker_stats st;
  mk_worker_pool_stats(p, &st);
  MK_CHECK(st.spawns == 1 && st.crashes == 0 && st.protocol_errors == 0);
  int closed = 0;
  mk_worker_pool_close(p, on_closed, &closed);
  MK_CHECK(run_until(&loop, &closed, 1, 15));
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&loop), ==, 0);
}

#else

MK_TEST(native_worker, protocol_under_the_supervisor) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

#endif
