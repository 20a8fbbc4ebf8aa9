/* test_verify.c — the asynchronous verification API over a fake worker
 * (tests/fixtures/worker/fake_worker.py answers capture/verify_* from
 * canned data): cache hits and misses, what is and is not cached,
 * cancellation, and closing with jobs in flight. */
#include "mk_backend.h"
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_test.h"
#include "verify_native.h"
#include "mk_verify.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct vout {
  int calls;
  mk_verify_status status;
  int code;
  bool cached;
  char reason[4096];
  char kind[64];
  int line;
  int trials;
  double max_abs, speedup_eager, speedup_compile, ours_ms, eager_ms;
  bool timing;
  char gpu[64];
  char device[64];
  cJSON *echo;
} vout;

static void on_verified(void *data, const mk_verify_result *r) {
  vout *o = data;
  o->calls++;
  o->status = r->status;
  o->code = r->code;
  o->cached = r->cached;
  snprintf(o->reason, sizeof o->reason, "%s", r->reason);
  snprintf(o->kind, sizeof o->kind, "%s", r->error_kind);
  o->line = r->line;
  o->trials = r->trials;
  o->max_abs = r->max_abs_error;
  o->speedup_eager = r->speedup_vs_eager;
  o->speedup_compile = r->speedup_vs_compile;
  o->ours_ms = r->ours.median_ms;
  o->eager_ms = r->eager.median_ms;
  o->timing = r->timing_available;
  snprintf(o->device, sizeof o->device, "%s", r->device);
  snprintf(o->gpu, sizeof o->gpu, "%s", r->gpu);
  cJSON_Delete(o->echo);
  const cJSON *e = r->json ? cJSON_GetObjectItem(r->json, "echo") : NULL;
  o->echo = e ? cJSON_Duplicate(e, 1) : NULL;
}

typedef struct cout {
  int calls;
  int code;
  bool cached;
  char kind[64];
  char message[2048];
  int line;
  mk_graph *graph;
} cout;

static void on_captured(void *data, mk_verify_capture_result *r) {
  cout *o = data;
  o->calls++;
  o->code = r->code;
  o->cached = r->cached;
  snprintf(o->kind, sizeof o->kind, "%s", r->error_kind ? r->error_kind : "");
  snprintf(o->message, sizeof o->message, "%s", r->message ? r->message : "");
  o->line = r->line;
  mk_graph_free(o->graph);
  o->graph = r->graph;
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

typedef struct env {
  uv_loop_t loop;
  mk_worker_pool *pool;
  mk_cache *cache;
  mk_verify *v;
  char dir[256], cache_path[320], script[1024], graph[1024];
  const char *argv[4];
} env;

static void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static int env_gpus; /* GPU workers of the next env_start */

static int env_start(env *e, bool with_cache) {
  memset(e, 0, sizeof *e);
  uv_loop_init(&e->loop);
  static int seq;
  snprintf(e->dir, sizeof e->dir, "/tmp/mk_test_verify.%d.%d", (int)getpid(), seq++);
  mkdir(e->dir, 0755);
  snprintf(e->cache_path, sizeof e->cache_path, "%s/cache.sqlite", e->dir);
  snprintf(e->script, sizeof e->script, "%s/tests/fixtures/worker/fake_worker.py",
           mk_test_repo_dir());
  snprintf(e->graph, sizeof e->graph, "%s/tests/fixtures/ir/matmul_scale_residual.json",
           mk_test_repo_dir());
  setenv("FAKE_GRAPH", e->graph, 1);
  e->argv[0] = access(MK_DEFAULT_PYTHON, X_OK) == 0 ? MK_DEFAULT_PYTHON : "/usr/bin/python3";
  e->argv[1] = e->script;
  e->argv[2] = "normal";
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = e->argv;
  cfg.gpus = env_gpus; /* stand-in GPUs: fake workers only */
  mk_errmsg err;
  if (mk_worker_pool_new(&e->loop, &cfg, &e->pool, &err)) return -1;
  if (with_cache && mk_cache_open(e->cache_path, 0, &e->cache, &err)) return -1;
  return mk_verify_new(&e->loop, e->pool, e->cache, &e->v, &err);
}

static void on_closed(void *data) { (*(int *)data)++; }

/* Closes the verifier and the pool but keeps the cache file (a later run). */
static void env_stop_keep_cache(env *e) {
  mk_verify_close(e->v);
  int closed = 0;
  mk_worker_pool_close(e->pool, on_closed, &closed);
  MK_CHECK(run_until(&e->loop, &closed, 1, 15));
  uv_run(&e->loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&e->loop), ==, 0);
  mk_cache_close(e->cache);
}

static void env_stop(env *e) {
  env_stop_keep_cache(e);
  char p[400];
  const char *sfx[] = {"", "-wal", "-shm"};
  for (int i = 0; i < 3; i++) {
    snprintf(p, sizeof p, "%s%s", e->cache_path, sfx[i]);
    unlink(p);
  }
}

static void module_file(env *e, char *path, size_t n, const char *name, const char *text) {
  snprintf(path, n, "%s/%s", e->dir, name);
  write_text(path, text);
}

MK_TEST(verify, parse_gpu_result) {
  const char *text =
      "{\"status\":\"ok\",\"reason\":\"\",\"trials\":5,\"trials_passed\":5,"
      "\"max_abs_error\":3e-6,\"max_rel_error\":1e-5,\"failing_elements\":0,\"elements\":100,"
      "\"device\":\"NVIDIA H200\",\"suspicious\":{\"reasons\":[\"x\"],\"accepted\":true},"
      "\"timing\":{\"available\":true,\"reference_eager\":{\"median_ms\":4.0,\"min_ms\":3.9,"
      "\"spread\":0.01},\"reference_compile\":{\"available\":false,\"reason\":\"compile failed\"},"
      "\"candidate\":{\"median_ms\":1.0,\"min_ms\":0.9,\"spread\":0.02},\"median_ms\":2.0,"
      "\"speedup_vs_eager\":2.0,\"speedup_vs_compile\":null}}";
  cJSON *j = cJSON_Parse(text);
  mk_verify_result r;
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.status, ==, MK_VERIFY_OK);
  MK_CHECK_INT(r.code, ==, 0);
  MK_CHECK_INT(r.trials, ==, 5);
  MK_CHECK(r.max_abs_error == 3e-6);
  MK_CHECK(r.timing_available);
  MK_CHECK(r.eager.available && r.eager.median_ms == 4.0);
  MK_CHECK(!r.compiled.available);
  MK_CHECK(r.ours.available && r.ours.median_ms == 2.0); /* the re-checked time wins */
  MK_CHECK(r.speedup_vs_eager == 2.0);
  MK_CHECK(r.speedup_vs_compile == 0);
  MK_CHECK(r.suspicious);
  MK_CHECK_STR(r.device, "NVIDIA H200");
  MK_CHECK(r.ref_tf32_noise == 0); /* passed the plain comparison */
  MK_CHECK_INT(r.compile_check, ==, 0); /* compile failed: nothing checked */
  cJSON_Delete(j);

  /* torch.compile's own output under the same comparison (reference_compile.check). */
  j = cJSON_Parse("{\"status\":\"ok\",\"timing\":{\"available\":true,\"reference_compile\":"
                  "{\"median_ms\":1.5,\"check\":{\"ok\":false,\"max_abs_error\":0.0021}}}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK(r.compiled.available && r.compiled.median_ms == 1.5);
  MK_CHECK_INT(r.compile_check, ==, -1);
  MK_CHECK(r.compile_max_abs_error == 0.0021);
  cJSON_Delete(j);
  j = cJSON_Parse("{\"status\":\"ok\",\"timing\":{\"available\":true,\"reference_compile\":"
                  "{\"median_ms\":1.5,\"check\":{\"ok\":true,\"max_abs_error\":0}}}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.compile_check, ==, 1);
  MK_CHECK(r.compile_max_abs_error == 0);
  cJSON_Delete(j);
  j = cJSON_Parse("{\"status\":\"ok\",\"timing\":{\"available\":true,\"reference_compile\":"
                  "{\"median_ms\":1.5,\"check\":{\"ok\":null,\"reason\":\"not checked\"}}}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.compile_check, ==, 0);
  cJSON_Delete(j);

  /* A composition's run at a smaller batch: a failure there, or nothing. */
  j = cJSON_Parse("{\"status\":\"ok\",\"other_batch\":{\"batch\":7,\"status\":\"runtime_error\","
                  "\"reason\":\"RuntimeError: shape '[8, -1]' is invalid\"}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.other_batch, ==, 7);
  MK_CHECK_STR(r.other_batch_failure, "RuntimeError: shape '[8, -1]' is invalid");
  cJSON_Delete(j);
  const char *fine[] = {"{\"status\":\"ok\",\"other_batch\":{\"batch\":7,\"status\":\"ok\",\"reason\":\"\"}}",
                        "{\"status\":\"ok\",\"other_batch\":{\"batch\":null,\"status\":\"skipped\","
                        "\"reason\":\"no smaller batch to run\"}}",
                        "{\"status\":\"ok\"}"};
  for (size_t i = 0; i < sizeof fine / sizeof fine[0]; i++) {
    j = cJSON_Parse(fine[i]);
    mk_verify_parse_result(j, &r);
    MK_CHECK_STR(r.other_batch_failure, "");
    cJSON_Delete(j);
  }

  /* Passed only against the full-FP32 reference (docs/verify.md). */
  j = cJSON_Parse("{\"status\":\"ok\",\"max_abs_error\":2e-4,"
                  "\"reference_tf32\":{\"noise\":5.4e-4,\"factor\":2,\"compared_with\":\"fp32\"}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.status, ==, MK_VERIFY_OK);
  MK_CHECK(r.ref_tf32_noise == 5.4e-4);
  MK_CHECK(r.state_tf32_noise == 0);
  cJSON_Delete(j);

  /* Outputs plain, a buffer (running statistics) only against the FP32 run. */
  j = cJSON_Parse("{\"status\":\"ok\",\"reference_tf32\":null,"
                  "\"state_tf32\":{\"noise\":2.2e-4,\"factor\":2,\"compared_with\":\"fp32\"}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK(r.ref_tf32_noise == 0);
  MK_CHECK(r.state_tf32_noise == 2.2e-4);
  cJSON_Delete(j);

  j = cJSON_Parse("{\"status\":\"runtime_error\",\"error_kind\":\"oom\",\"reason\":\"out of memory\","
                  "\"line\":7,\"timing\":{\"available\":false,\"reason\":\"not timed\"}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.status, ==, MK_VERIFY_OOM);
  MK_CHECK_INT(r.line, ==, 7);
  MK_CHECK(!r.timing_available);
  MK_CHECK_STR(r.timing_reason, "not timed");
  cJSON_Delete(j);
  j = cJSON_Parse("{\"status\":\"weird\"}");
  mk_verify_parse_result(j, &r);
  MK_CHECK_INT(r.status, ==, MK_VERIFY_ERROR);
  MK_CHECK_INT(r.code, ==, MK_EPROTO);
  cJSON_Delete(j);
  mk_verify_parse_result(NULL, &r);
  MK_CHECK_INT(r.status, ==, MK_VERIFY_ERROR);
  MK_CHECK_STR(mk_verify_status_name(MK_VERIFY_REJECTED), "rejected");
}

MK_TEST(verify, capture_then_cached) {
  env e;
  MK_REQUIRE(env_start(&e, true) == 0);
  char file[512], copy[512];
  module_file(&e, file, sizeof file, "m.py", "class Model: pass\n");
  module_file(&e, copy, sizeof copy, "copy.py", "class Model: pass\n");
  cout a = {0}, b = {0}, c = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_verify_submit_capture(e.v, file, NULL, 0, 0, on_captured, &a, NULL, &err) == 0);
  MK_CHECK_INT(a.calls, ==, 0);
  MK_CHECK(run_until(&e.loop, &a.calls, 1, 20));
  MK_CHECK_INT(a.code, ==, 0);
  MK_CHECK(!a.cached);
  MK_REQUIRE(a.graph != NULL);
  MK_CHECK_STR(a.graph->file, file);
  MK_CHECK_INT(a.graph->nnodes, >, 0);
  MK_REQUIRE(mk_verify_submit_capture(e.v, file, NULL, 0, 0, on_captured, &b, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &b.calls, 1, 20));
  MK_CHECK(b.cached);
  MK_REQUIRE(b.graph != NULL);
  MK_CHECK_INT(b.graph->nnodes, ==, a.graph->nnodes);
  /* Same content elsewhere: a hit, with the new path. */
  MK_REQUIRE(mk_verify_submit_capture(e.v, copy, NULL, 0, 0, on_captured, &c, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &c.calls, 1, 20));
  MK_CHECK(c.cached);
  MK_REQUIRE(c.graph != NULL);
  MK_CHECK_STR(c.graph->file, copy);
  mk_verify_stats st;
  mk_verify_get_stats(e.v, &st);
  MK_CHECK_INT(st.dispatched, ==, 1);
  MK_CHECK_INT(st.hits, ==, 2);
  MK_CHECK_INT(st.stores, ==, 1);
  /* Another batch is another key. */
  cout d = {0};
  MK_REQUIRE(mk_verify_submit_capture(e.v, file, NULL, 2, 0, on_captured, &d, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &d.calls, 1, 20));
  MK_CHECK(!d.cached);
  mk_graph_free(a.graph);
  mk_graph_free(b.graph);
  mk_graph_free(c.graph);
  mk_graph_free(d.graph);
  env_stop(&e);
}

MK_TEST(verify, capture_errors) {
  env e;
  MK_REQUIRE(env_start(&e, true) == 0);
  char file[512];
  module_file(&e, file, sizeof file, "bad.py", "SYNTAX\n");
  cout a = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_verify_submit_capture(e.v, file, NULL, 0, 0, on_captured, &a, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &a.calls, 1, 20));
  MK_CHECK_INT(a.code, ==, MK_EWORKER);
  MK_CHECK_STR(a.kind, "syntax_error");
  MK_CHECK_INT(a.line, ==, 3);
  MK_CHECK(a.graph == NULL);
  MK_CHECK_INT(mk_cache_count(e.cache, NULL), ==, 0); /* errors are not cached */
  char missing[512];
  snprintf(missing, sizeof missing, "%s/nope.py", e.dir);
  MK_CHECK_INT(mk_verify_submit_capture(e.v, missing, NULL, 0, 0, on_captured, &a, NULL, &err),
               ==, MK_ENOENT);
  MK_CHECK(strstr(err.text, "nope.py") != NULL);
  env_stop(&e);
}

static mk_graph *load_graph(env *e) {
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(e->graph, 1 << 24, &text, &len)) return NULL;
  mk_graph *g = NULL;
  mk_errmsg err;
  mk_graph_from_json(text, len, &g, &err);
  free(text);
  return g;
}

static uint64_t sub(env *e, mk_graph *g, mk_subkernel *sk, const char *src, double atol,
                    bool no_cache, vout *o) {
  mk_candidate_src c = {.source = src, .name = "k", .origin = "builtin"};
  mk_verify_options opt;
  mk_verify_options_init(&opt);
  opt.atol = atol;
  opt.trials = 3;
  opt.no_cache = no_cache;
  opt.timeout_s = 0.5;
  uint64_t id = 0;
  mk_errmsg err;
  int rc = mk_verify_submit_subkernel(e->v, g, sk, &c, &opt, on_verified, o, &id, &err);
  if (rc) fprintf(stderr, "submit: %s\n", err.text);
  MK_CHECK_INT(rc, ==, 0);
  return id;
}

MK_TEST(verify, subkernel_verdicts_and_cache) {
  env e;
  MK_REQUIRE(env_start(&e, true) == 0);
  mk_graph *g = load_graph(&e);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0 && p.nsubkernels > 0);
  mk_subkernel *sk = &p.subkernels[0];
  vout ok1 = {0}, ok2 = {0}, other = {0}, tol = {0}, forced = {0}, wrong1 = {0}, wrong2 = {0};
  sub(&e, g, sk, "def run(x): return x  # v1", 1e-4, false, &ok1);
  MK_CHECK(run_until(&e.loop, &ok1.calls, 1, 20));
  MK_CHECK_INT(ok1.status, ==, MK_VERIFY_OK);
  MK_CHECK(!ok1.cached);
  MK_CHECK_INT(ok1.trials, ==, 3);
  MK_CHECK(!ok1.timing);
  MK_REQUIRE(ok1.echo != NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(ok1.echo, "device")->valuestring, "cpu");
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(ok1.echo, "nodes")), ==, sk->nnodes);
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(ok1.echo, "inputs")), ==, sk->ninputs);
  sub(&e, g, sk, "def run(x): return x  # v1", 1e-4, false, &ok2);
  sub(&e, g, sk, "def run(x): return x  # v2", 1e-4, false, &other);
  sub(&e, g, sk, "def run(x): return x  # v1", 1e-3, false, &tol);
  sub(&e, g, sk, "def run(x): return x  # v1", 1e-4, true, &forced);
  MK_CHECK(run_until(&e.loop, &forced.calls, 1, 20));
  MK_CHECK(ok2.cached);
  MK_CHECK_INT(ok2.status, ==, MK_VERIFY_OK);
  MK_CHECK(!other.cached);
  MK_CHECK(!tol.cached);
  MK_CHECK(!forced.cached);
  sub(&e, g, sk, "WRONG", 1e-4, false, &wrong1);
  MK_CHECK(run_until(&e.loop, &wrong1.calls, 1, 20));
  MK_CHECK_INT(wrong1.status, ==, MK_VERIFY_MISMATCH);
  MK_CHECK(wrong1.max_abs == 0.5);
  MK_CHECK(strstr(wrong1.reason, "differs") != NULL);
  sub(&e, g, sk, "WRONG", 1e-4, false, &wrong2);
  MK_CHECK(run_until(&e.loop, &wrong2.calls, 1, 20));
  MK_CHECK(wrong2.cached); /* wrong verdicts are verdicts too */
  MK_CHECK_INT(wrong2.status, ==, MK_VERIFY_MISMATCH);
  mk_verify_stats st;
  mk_verify_get_stats(e.v, &st);
  MK_CHECK_INT(st.hits, ==, 2);
  MK_CHECK_INT(st.dispatched, ==, 5);
  vout *all[] = {&ok1, &ok2, &other, &tol, &forced, &wrong1, &wrong2};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    MK_CHECK_INT(all[i]->calls, ==, 1);
    cJSON_Delete(all[i]->echo);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
  env_stop(&e);
}

MK_TEST(verify, failures_are_not_cached) {
  env e;
  MK_REQUIRE(env_start(&e, true) == 0);
  mk_graph *g = load_graph(&e);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_subkernel *sk = &p.subkernels[0];
  const char *srcs[] = {"CRASH", "HANG", "OOM"};
  mk_verify_status want[] = {MK_VERIFY_CRASHED, MK_VERIFY_TIMEOUT, MK_VERIFY_OOM};
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < 3; i++) {
      vout o = {0};
      sub(&e, g, sk, srcs[i], 1e-4, false, &o);
      MK_CHECK(run_until(&e.loop, &o.calls, 1, 30));
      MK_CHECK_INT(o.status, ==, want[i]);
      MK_CHECK(!o.cached);
      if (want[i] != MK_VERIFY_OOM) MK_CHECK(o.code != 0);
      cJSON_Delete(o.echo);
    }
  }
  MK_CHECK_INT(mk_cache_count(e.cache, NULL), ==, 0);
  /* The pool recovered: a good candidate still verifies. */
  vout ok = {0};
  sub(&e, g, sk, "def run(x): return x", 1e-4, false, &ok);
  MK_CHECK(run_until(&e.loop, &ok.calls, 1, 20));
  MK_CHECK_INT(ok.status, ==, MK_VERIFY_OK);
  cJSON_Delete(ok.echo);
  mk_partition_free(&p);
  mk_graph_free(g);
  env_stop(&e);
}

MK_TEST(verify, cancel_and_close) {
  env e;
  MK_REQUIRE(env_start(&e, true) == 0);
  mk_graph *g = load_graph(&e);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_subkernel *sk = &p.subkernels[0];
  vout warm = {0}, hang = {0}, hit = {0}, queued = {0};
  sub(&e, g, sk, "def run(x): return x", 1e-4, false, &warm);
  MK_CHECK(run_until(&e.loop, &warm.calls, 1, 20));
  mk_candidate_src c = {.source = "HANG", .name = "h", .origin = "builtin"};
  uint64_t id = 0;
  MK_REQUIRE(mk_verify_submit_subkernel(e.v, g, sk, &c, NULL, on_verified, &hang, &id, &err) == 0);
  uint64_t hid = sub(&e, g, sk, "def run(x): return x", 1e-4, false, &hit); /* a cache hit */
  MK_CHECK_INT(mk_verify_cancel(e.v, hid), ==, 0);
  int spin = 0;
  run_until(&e.loop, &spin, 1, 0.3); /* the hang is running now */
  MK_CHECK_INT(mk_verify_cancel(e.v, id), ==, 0);
  MK_CHECK(run_until(&e.loop, &hang.calls, 1, 10));
  MK_CHECK_INT(hang.status, ==, MK_VERIFY_CANCELED);
  MK_CHECK_INT(hit.calls, ==, 1);
  MK_CHECK_INT(hit.status, ==, MK_VERIFY_CANCELED);
  MK_CHECK_INT(mk_verify_cancel(e.v, id), ==, MK_ENOENT);
  /* Close with a job in flight: it is cancelled, nothing leaks. */
  sub(&e, g, sk, "HANG again", 1e-4, false, &queued);
  cJSON_Delete(warm.echo);
  cJSON_Delete(hit.echo);
  mk_partition_free(&p);
  mk_graph_free(g);
  env_stop(&e);
  MK_CHECK_INT(queued.calls, ==, 1);
  MK_CHECK_INT(queued.status, ==, MK_VERIFY_CANCELED);
}

MK_TEST(verify, composition_and_no_cache) {
  env e;
  MK_REQUIRE(env_start(&e, false) == 0);
  char ref[512], mine[512];
  module_file(&e, ref, sizeof ref, "problem.py", "class Model: pass\n");
  module_file(&e, mine, sizeof mine, "new.py", "class ModelNew: pass  # FAST\n");
  mk_verify_options opt;
  mk_verify_options_init(&opt);
  vout a = {0}, b = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &a,
                                          NULL, &err) == 0);
  MK_REQUIRE(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &b,
                                          NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &b.calls, 1, 20));
  MK_CHECK_INT(a.status, ==, MK_VERIFY_OK);
  MK_CHECK(!b.cached); /* no cache configured */
  MK_CHECK(a.timing);
  MK_CHECK(a.speedup_eager == 4.0 && a.speedup_compile == 2.0);
  MK_CHECK(a.ours_ms == 0.5 && a.eager_ms == 2.0);
  MK_REQUIRE(a.echo != NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(a.echo, "class")->valuestring, "ModelNew");
  MK_CHECK_STR(cJSON_GetObjectItem(a.echo, "reference_class")->valuestring, "Model");
  opt.device = MK_VERIFY_DEVICE_CUDA;
  MK_CHECK_INT(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &a,
                                            NULL, &err), ==, MK_ENOENT);
  MK_CHECK(strstr(err.text, "GPU") != NULL);
  opt.device = MK_VERIFY_DEVICE_AUTO;
  opt.trials = 0;
  MK_CHECK_INT(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &a,
                                            NULL, &err), ==, MK_EINVAL);
  cJSON_Delete(a.echo);
  cJSON_Delete(b.echo);
  env_stop(&e);
}

/* Which torch.compile modes a composition check asks for: none by default,
 * "reduce-overhead" alone for a CUDA-graph variant (its fair baseline), both
 * other modes with compile_baselines; skip_compile asks for none. */
MK_TEST(verify, composition_compile_modes_requested) {
  env e;
  MK_REQUIRE(env_start(&e, false) == 0);
  char ref[512], mine[512];
  module_file(&e, ref, sizeof ref, "problem.py", "class Model: pass\n");
  module_file(&e, mine, sizeof mine, "new.py", "class ModelNew: pass  # FAST\n");
  struct { bool ro, baselines, skip; int nmodes; const char *last; } cases[] = {
      {false, false, false, -1, NULL},
      {true, false, false, 1, "reduce-overhead"},
      {true, true, false, 2, "reduce-overhead"},
      {true, false, true, -1, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mk_verify_options opt;
    mk_verify_options_init(&opt);
    opt.compile_reduce_overhead = cases[i].ro;
    opt.compile_baselines = cases[i].baselines;
    opt.skip_compile = cases[i].skip;
    vout a = {0};
    mk_errmsg err;
    MK_REQUIRE(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &a,
                                            NULL, &err) == 0);
    MK_CHECK(run_until(&e.loop, &a.calls, 1, 20));
    MK_REQUIRE(a.echo != NULL);
    const cJSON *modes = cJSON_GetObjectItem(a.echo, "compile_modes");
    if (cases[i].nmodes < 0) {
      MK_CHECK(modes == NULL);
    } else {
      MK_REQUIRE(cJSON_IsArray(modes));
      MK_CHECK_INT(cJSON_GetArraySize(modes), ==, cases[i].nmodes);
      MK_CHECK_STR(cJSON_GetArrayItem(modes, cases[i].nmodes - 1)->valuestring, cases[i].last);
    }
    cJSON_Delete(a.echo);
  }
  env_stop(&e);
}

/* A compile ahead goes to the GPU worker before the check that needs it,
 * with the modes the check will time; where nothing would be compiled (the
 * CPU, or skip_compile) it is refused and nothing is sent. */
MK_TEST(verify, warm_reference_asks_the_gpu_worker_for_the_check_modes) {
  env e;
  env_gpus = 1;
  int started = env_start(&e, false);
  env_gpus = 0;
  MK_REQUIRE(started == 0);
  char ref[512], mine[512];
  module_file(&e, ref, sizeof ref, "problem.py", "class Model: pass\n");
  module_file(&e, mine, sizeof mine, "new.py", "class ModelNew: pass\n");
  mk_verify_options opt;
  mk_verify_options_init(&opt);
  opt.device = MK_VERIFY_DEVICE_CUDA;
  opt.seed = 7;
  opt.batch = 3;
  mk_errmsg err;
  opt.skip_compile = true;
  MK_CHECK_INT(mk_verify_warm_reference(e.v, ref, "Model", &opt, true, &err), ==, MK_EUNSUPPORTED);
  opt.skip_compile = false;
  mk_verify_options cpu = opt;
  cpu.device = MK_VERIFY_DEVICE_CPU;
  MK_CHECK_INT(mk_verify_warm_reference(e.v, ref, "Model", &cpu, true, &err), ==, MK_EUNSUPPORTED);
  MK_REQUIRE(mk_verify_warm_reference(e.v, ref, "Model", &opt, true, &err) == 0);
  vout a = {0};
  MK_REQUIRE(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &a, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &a.calls, 1, 20));
  MK_REQUIRE(a.echo != NULL);
  const cJSON *warmed = cJSON_GetObjectItem(a.echo, "warmed");
  MK_REQUIRE(cJSON_IsArray(warmed));
  MK_CHECK_INT(cJSON_GetArraySize(warmed), ==, 1); /* the refused ones sent nothing */
  const cJSON *w = cJSON_GetArrayItem(warmed, 0);
  MK_CHECK_STR(cJSON_GetObjectItem(w, "file")->valuestring, ref);
  MK_CHECK_STR(cJSON_GetObjectItem(w, "class")->valuestring, "Model");
  MK_CHECK_STR(cJSON_GetObjectItem(w, "device")->valuestring, "cuda");
  MK_CHECK_INT((int)cJSON_GetObjectItem(w, "seed")->valuedouble, ==, 7);
  MK_CHECK_INT((int)cJSON_GetObjectItem(w, "batch")->valuedouble, ==, 3);
  const cJSON *modes = cJSON_GetObjectItem(w, "modes");
  MK_REQUIRE(cJSON_GetArraySize(modes) == 2);
  MK_CHECK_STR(cJSON_GetArrayItem(modes, 0)->valuestring, "default");
  MK_CHECK_STR(cJSON_GetArrayItem(modes, 1)->valuestring, "reduce-overhead");
  cJSON_Delete(a.echo);
  env_stop(&e);
}

/* Two stand-in GPUs: each result names the GPU that ran it (both run, one
 * job each, when two are submitted together); a cached one names none. */
MK_TEST(verify, result_names_its_gpu) {
  env e;
  env_gpus = 2;
  int started = env_start(&e, true);
  env_gpus = 0;
  MK_REQUIRE(started == 0);
  char ref[512], mine[512], other[512];
  module_file(&e, ref, sizeof ref, "problem.py", "class Model: pass\n");
  module_file(&e, mine, sizeof mine, "new.py", "class ModelNew: pass  # FAST SLOW\n");
  module_file(&e, other, sizeof other, "new2.py", "class ModelNew: pass  # FAST SLOW 2\n");
  mk_verify_options opt;
  mk_verify_options_init(&opt);
  opt.device = MK_VERIFY_DEVICE_CUDA;
  vout a = {0}, b = {0}, c = {0};
  mk_errmsg err;
  MK_REQUIRE(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &a, NULL, &err) == 0);
  MK_REQUIRE(mk_verify_submit_composition(e.v, other, NULL, ref, NULL, &opt, on_verified, &b, NULL, &err) == 0);
  int both = 0;
  uint64_t end = uv_hrtime() + 30000000000ull;
  while (a.calls + b.calls < 2 && uv_hrtime() < end) {
    both = a.calls + b.calls;
    run_until(&e.loop, &both, both + 1, 1);
  }
  MK_CHECK_INT(a.status, ==, MK_VERIFY_OK);
  MK_CHECK_INT(b.status, ==, MK_VERIFY_OK);
  MK_CHECK(a.gpu[0] != '\0' && b.gpu[0] != '\0');
  MK_CHECK(strcmp(a.gpu, b.gpu) != 0);
  MK_REQUIRE(mk_verify_submit_composition(e.v, mine, NULL, ref, NULL, &opt, on_verified, &c, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &c.calls, 1, 20));
  MK_CHECK(c.cached);
  MK_CHECK_STR(c.gpu, "");
  cJSON_Delete(a.echo);
  cJSON_Delete(b.echo);
  cJSON_Delete(c.echo);
  env_stop(&e);
}

MK_TEST(verify, unavailable_worker_is_an_error_result) {
  env e;
  memset(&e, 0, sizeof e);
  uv_loop_init(&e.loop);
  const char *argv[] = {"/nonexistent/python", NULL};
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = argv;
  cfg.gpus = 0;
  mk_errmsg err;
  MK_REQUIRE(mk_worker_pool_new(&e.loop, &cfg, &e.pool, &err) == 0);
  snprintf(e.cache_path, sizeof e.cache_path, "/tmp/mk_test_verify_unavail.%d.sqlite",
           (int)getpid());
  MK_REQUIRE(mk_cache_open(e.cache_path, 0, &e.cache, &err) == 0);
  MK_REQUIRE(mk_verify_new(&e.loop, e.pool, e.cache, &e.v, &err) == 0);
  char file[256];
  snprintf(file, sizeof file, "/tmp/mk_test_verify_unavail.%d.py", (int)getpid());
  write_text(file, "class Model: pass\n");
  cout a = {0};
  MK_REQUIRE(mk_verify_submit_capture(e.v, file, NULL, 0, 0, on_captured, &a, NULL, &err) == 0);
  MK_CHECK(run_until(&e.loop, &a.calls, 1, 10));
  MK_CHECK_INT(a.code, ==, MK_ECRASHED);
  MK_CHECK(strstr(a.message, "/nonexistent/python") != NULL);
  unlink(file);
  env_stop(&e);
}

static int env_reopen(env *e, const char *dir) {
  int rc = env_start(e, false);
  snprintf(e->cache_path, sizeof e->cache_path, "%s/cache.sqlite", dir);
  mk_errmsg err;
  mk_verify_close(e->v);
  if (mk_cache_open(e->cache_path, 0, &e->cache, &err)) return -1;
  return rc ? rc : mk_verify_new(&e->loop, e->pool, e->cache, &e->v, &err);
}

/* A repeated check in a later run costs a lookup: the handshake remembered
 * from the first run stands in while the files it names are unchanged; once
 * one changes, a real worker starts again. */
MK_TEST(verify, remembered_handshake_answers_without_a_worker) {
  env e;
  MK_REQUIRE(env_start(&e, true) == 0);
  char stamp[400], dir[256];
  snprintf(dir, sizeof dir, "%s", e.dir);
  snprintf(stamp, sizeof stamp, "%s/torch_version.py", e.dir);
  write_text(stamp, "__version__ = '0.0+fake'\n");
  setenv("FAKE_ENV_FILE", stamp, 1);
  mk_graph *g = load_graph(&e);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, NULL) == 0);
  vout first = {0}, again = {0}, after_change = {0};
  sub(&e, g, &p.subkernels[0], "def run(x): return x  # memo", 1e-4, false, &first);
  MK_CHECK(run_until(&e.loop, &first.calls, 1, 20));
  MK_CHECK(!first.cached);
  env_stop_keep_cache(&e);

  MK_REQUIRE(env_reopen(&e, dir) == 0);
  sub(&e, g, &p.subkernels[0], "def run(x): return x  # memo", 1e-4, false, &again);
  MK_CHECK(run_until(&e.loop, &again.calls, 1, 20));
  MK_CHECK(again.cached);
  MK_CHECK_INT(again.status, ==, MK_VERIFY_OK);
  mk_verify_stats st;
  mk_verify_get_stats(e.v, &st);
  MK_CHECK_INT(st.memo_hits, ==, 1);
  mk_worker_stats ws;
  mk_worker_pool_stats(e.pool, &ws);
  MK_CHECK_INT(ws.spawns, ==, 0); /* no worker was started to answer it */
  env_stop_keep_cache(&e);

  sleep(1); /* a new mtime on file systems with coarse timestamps */
  write_text(stamp, "__version__ = '0.1+fake'\n");
  MK_REQUIRE(env_reopen(&e, dir) == 0);
  sub(&e, g, &p.subkernels[0], "def run(x): return x  # memo", 1e-4, false, &after_change);
  MK_CHECK(run_until(&e.loop, &after_change.calls, 1, 20));
  mk_verify_get_stats(e.v, &st);
  MK_CHECK_INT(st.memo_hits, ==, 0);
  mk_worker_pool_stats(e.pool, &ws);
  MK_CHECK_INT(ws.spawns, ==, 1); /* the remembered handshake went stale: a real one */
  MK_CHECK(after_change.cached); /* the fake's versions did not change: the verdict stands */
  unsetenv("FAKE_ENV_FILE");
  cJSON_Delete(first.echo);
  cJSON_Delete(again.echo);
  cJSON_Delete(after_change.echo);
  mk_partition_free(&p);
  mk_graph_free(g);
  env_stop(&e);
}

/* A CUDA C++ candidate that does not compile is judged by the engine
 * (engine/backend): compile_error on the candidate's line, no worker started
 * (this pool's Python does not exist, so a dispatched job would crash). */
MK_TEST(verify, cuda_compile_error_is_a_verdict_without_a_worker) {
  env e;
  memset(&e, 0, sizeof e);
  uv_loop_init(&e.loop);
  const char *argv[] = {"/nonexistent/python", NULL};
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = argv;
  cfg.gpus = 0;
  mk_errmsg err;
  MK_REQUIRE(mk_worker_pool_new(&e.loop, &cfg, &e.pool, &err) == 0);
  snprintf(e.cache_path, sizeof e.cache_path, "/tmp/mk_test_verify_cuda.%d.sqlite", (int)getpid());
  MK_REQUIRE(mk_cache_open(e.cache_path, 0, &e.cache, &err) == 0);
  MK_REQUIRE(mk_verify_new(&e.loop, e.pool, e.cache, &e.v, &err) == 0);
  char path[1024], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/ew_broadcast.json", mk_test_repo_dir());
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &len) == 0);
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(text, len, &g, &err) == 0);
  free(text);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const char *src = "import torch\n\nMK_BACKEND = \"cuda\"\nMK_CUDA_SOURCE = r\"\"\"\n"
                    "extern \"C\" __global__ void k(float *y) {\n"
                    "  y[0] = not_declared;\n"
                    "}\n\"\"\"\nMK_CUDA_KERNELS = {\"k\": \"f\"}\n\n\ndef run(*xs):\n    return xs[0]\n";
  vout o = {0};
  MK_REQUIRE(sub(&e, g, &p.subkernels[0], src, 1e-4, true, &o) != 0);
  MK_CHECK(run_until(&e.loop, &o.calls, 1, 10));
  mk_backend *b = NULL;
  if (mk_backend_open(NULL, &b, &err) == 0) {
    MK_CHECK(o.status == MK_VERIFY_COMPILE_ERROR);
    MK_CHECK_INT(o.line, ==, 6);
    MK_CHECK(strstr(o.reason, "not_declared") != NULL);
    MK_CHECK(!o.cached);
    mk_backend_close(b);
  } else {
    /* Without NVRTC the verdict says what is missing; still no worker. */
    MK_CHECK(o.status == MK_VERIFY_COMPILE_ERROR);
    MK_CHECK(strstr(o.reason, "need NVRTC") != NULL);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
  env_stop(&e);
}

/* The other torch.compile modes (compile_baselines) come back beside the default one. */
MK_TEST(verify, parse_compile_mode_times) {
  const char *text =
      "{\"status\":\"ok\",\"timing\":{\"available\":true,"
      "\"reference_eager\":{\"median_ms\":4.0},\"reference_compile\":{\"median_ms\":3.0},"
      "\"reference_compile_modes\":{\"max-autotune-no-cudagraphs\":{\"median_ms\":2.5},"
      "\"reduce-overhead\":{\"available\":false,\"reason\":\"torch.compile failed\"}},"
      "\"candidate\":{\"median_ms\":2.0}}}";
  cJSON *j = cJSON_Parse(text);
  mk_verify_result r;
  mk_verify_parse_result(j, &r);
  MK_CHECK(r.compiled.available && r.compiled.median_ms == 3.0);
  MK_CHECK(r.compiled_max.available && r.compiled_max.median_ms == 2.5);
  MK_CHECK(!r.compiled_ro.available);
  cJSON_Delete(j);
  j = cJSON_Parse("{\"status\":\"ok\",\"timing\":{\"available\":true}}");
  mk_verify_parse_result(j, &r);
  MK_CHECK(!r.compiled_max.available && !r.compiled_ro.available);
  cJSON_Delete(j);
}

/* ---- the native worker (verify_native.c) ------------------------------------ */

typedef struct nout {
  vout v;
  char worker[32];
  bool native; /* mk_verify_result.native */
} nout;

static void on_native_verified(void *data, const mk_verify_result *r) {
  nout *o = data;
  on_verified(&o->v, r);
  const cJSON *w = r->json ? cJSON_GetObjectItem(r->json, "worker") : NULL;
  snprintf(o->worker, sizeof o->worker, "%s", cJSON_IsString(w) ? w->valuestring : "");
  o->native = r->native;
}

static void native_sub(env *e, mk_graph *g, mk_subkernel *sk, const char *src, bool native, bool gpu, nout *o) {
  mk_candidate_src c = {.source = src, .name = "k", .origin = "builtin"};
  mk_verify_options opt;
  mk_verify_options_init(&opt);
  MK_CHECK(opt.native); /* the default since its GPU test passed */
  opt.native = native;
  opt.trials = 3;
  opt.device = gpu ? MK_VERIFY_DEVICE_CUDA : MK_VERIFY_DEVICE_CPU;
  mk_errmsg err;
  MK_CHECK_INT(mk_verify_submit_subkernel(e->v, g, sk, &c, &opt, on_native_verified, o, NULL, &err), ==, 0);
}

static int count_lines(const char *path) {
  FILE *f = fopen(path, "r");
  int n = 0;
  for (int ch; f && (ch = fgetc(f)) != EOF;) n += ch == '\n';
  if (f) fclose(f);
  return n;
}

/* GPU jobs whose candidate has a launch plan go to the native pool, with the
 * graph's ATen forms and the state the Python pool writes once per graph and
 * seeds; others, and those the native worker refuses, go to the Python pool;
 * one reply per job. Fake workers on both sides (stand-in GPUs). */
MK_TEST(verify, plan_candidates_go_to_the_native_worker) {
  env e;
  env_gpus = 1;
  int started = env_start(&e, false);
  env_gpus = 0;
  MK_REQUIRE(started == 0);
  char tmpdir[300];
  snprintf(tmpdir, sizeof tmpdir, "%s/tmp", e.dir);
  mkdir(tmpdir, 0755);
  setenv("TMPDIR", tmpdir, 1); /* where the verifier's state folder goes */
  const char *argv[] = {e.argv[0], e.script, "native", NULL};
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.argv = argv;
  cfg.gpus = 1;
  mk_worker_pool *native = NULL;
  mk_errmsg err;
  MK_REQUIRE(mk_worker_pool_new(&e.loop, &cfg, &native, &err) == 0);
  mk_verify_set_native_pool(e.v, native);
  mk_graph *g = load_graph(&e);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0 && p.nsubkernels > 0);
  mk_subkernel *sk = &p.subkernels[0];
  const char *plan = "def run(x): return x\nMK_CUDA_PLAN = r\"\"\"\n{}\n\"\"\"\n";
  const char *plan2 = "def run(x): return x  # 2\nMK_CUDA_PLAN = r\"\"\"\n{}\n\"\"\"\n";
  const char *refuses = "def run(x): return x  # NATIVE_REFUSES\nMK_CUDA_PLAN = r\"\"\"\n{}\n\"\"\"\n";
  const char *crashes = "def run(x): return x  # CRASH\nMK_CUDA_PLAN = r\"\"\"\n{}\n\"\"\"\n";
  nout a = {0}, b = {0}, noplan = {0}, off = {0}, cpu = {0}, refused = {0}, crash = {0};
  native_sub(&e, g, sk, plan, true, true, &a);
  MK_CHECK(run_until(&e.loop, &a.v.calls, 1, 30));
  if (a.v.status != MK_VERIFY_OK) fprintf(stderr, "    %s: %s\n", a.v.kind, a.v.reason);
  MK_CHECK_INT(a.v.status, ==, MK_VERIFY_OK);
  MK_CHECK_STR(a.worker, "native");
  MK_REQUIRE(a.v.echo != NULL);
  MK_CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(a.v.echo, "aten")) == g->nnodes);
  MK_CHECK(strstr(cJSON_GetObjectItem(a.v.echo, "state_file")->valuestring, tmpdir) != NULL);
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(a.v.echo, "inputs_files")), ==, 3);
  native_sub(&e, g, sk, plan2, true, true, &b); /* the same graph and seeds: the state is reused */
  native_sub(&e, g, sk, "def run(x): return x  # no plan\n", true, true, &noplan);
  native_sub(&e, g, sk, plan, false, true, &off);
  native_sub(&e, g, sk, plan, true, false, &cpu);
  native_sub(&e, g, sk, refuses, true, true, &refused);
  native_sub(&e, g, sk, crashes, true, true, &crash);
  nout *rest[] = {&b, &noplan, &off, &cpu, &refused, &crash};
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) MK_CHECK(run_until(&e.loop, &rest[i]->v.calls, 1, 30));
  MK_CHECK_STR(b.worker, "native");
  MK_CHECK_STR(noplan.worker, "normal");
  MK_CHECK_STR(off.worker, "normal");
  MK_CHECK_STR(cpu.worker, "normal");
  MK_CHECK_STR(refused.worker, "normal"); /* refused there: the Python worker's verdict */
  MK_CHECK(cJSON_GetObjectItem(refused.v.echo, "aten") == NULL);
  MK_CHECK_INT(refused.v.status, ==, MK_VERIFY_OK);
  MK_CHECK_INT(crash.v.status, ==, MK_VERIFY_CRASHED); /* a crash costs that job, no other */
  /* The result says which worker answered: the run log's "worker" and the
   * evolve's count of native evaluations come from it. */
  MK_CHECK(a.native && b.native && crash.native);
  MK_CHECK(!noplan.native && !off.native && !cpu.native && !refused.native);
  mk_verify_stats st;
  mk_verify_get_stats(e.v, &st);
  MK_CHECK_INT(st.native_routed, ==, 4);
  MK_CHECK_INT(st.native_fallbacks, ==, 1);
  MK_CHECK_INT(st.native_states, ==, 1);
  char calls[480], root[400];
  snprintf(root, sizeof root, "%s", cJSON_GetObjectItem(a.v.echo, "state_file")->valuestring);
  *strrchr(root, '/') = '\0'; /* the state's folder */
  *strrchr(root, '/') = '\0'; /* the verifier's */
  snprintf(calls, sizeof calls, "%s/write_state.calls", root);
  MK_CHECK_INT(count_lines(calls), ==, 1);
  nout *all[] = {&a, &b, &noplan, &off, &cpu, &refused, &crash};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    MK_CHECK_INT(all[i]->v.calls, ==, 1);
    cJSON_Delete(all[i]->v.echo);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
  mk_verify_close(e.v);
  int closed = 0;
  mk_worker_pool_close(native, on_closed, &closed);
  mk_worker_pool_close(e.pool, on_closed, &closed);
  MK_CHECK(run_until(&e.loop, &closed, 2, 15));
  uv_run(&e.loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&e.loop), ==, 0);
  struct stat sst;
  MK_CHECK(stat(root, &sst) != 0); /* the state folder went with the verifier */
  unsetenv("TMPDIR");
}

/* A graph whose state would not fit the disk budget stays with the Python
 * worker; a small one with a planned candidate goes native. */
MK_TEST(verify, native_route_keeps_large_states_in_python) {
  static const char graph_fmt[] =
      "{\"schema\":1,\"file\":\"/tmp/m.py\",\"class\":\"Model\",\"source_sha256\":\"0\",\"batch\":null,"
      "\"values\":[{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[%d,1024],\"dtype\":\"float32\"},"
      "{\"id\":1,\"kind\":\"node\",\"producer\":0,\"shape\":[%d,1024],\"dtype\":\"float32\"}],"
      "\"nodes\":[{\"id\":0,\"op\":\"torch.relu\",\"args\":[{\"t\":0}],\"kwargs\":{},\"inputs\":[0],\"outputs\":[1],"
      "\"out\":{\"t\":1},\"mutates\":[],\"span\":{\"line\":3,\"col\":0,\"end_line\":3,\"end_col\":1}}],"
      "\"outputs\":{\"t\":1},\"forward\":{\"line\":1,\"end_line\":4},\"statements\":[]}";
  const char *plan = "def run(x): return x\nMK_CUDA_PLAN = r\"\"\"\n{}\n\"\"\"\n";
  int rows[] = {1024, 1 << 20}; /* 4 MiB, 4 GiB per trial */
  verify_native vn = {.pool = (mk_worker_pool *)&vn}; /* any pool: routing reads only that there is one */
  for (int i = 0; i < 2; i++) {
    char json[2048], why[256] = "";
    snprintf(json, sizeof json, graph_fmt, rows[i], rows[i]);
    mk_graph *g = NULL;
    mk_errmsg err;
    MK_REQUIRE(mk_graph_from_json(json, strlen(json), &g, &err) == 0);
    MK_CHECK(verify_native_state_bytes(g, 5) == (int64_t)rows[i] * 1024 * 4 * 5);
    cJSON *aten = verify_native_route(&vn, true, true, g, 5, plan, why, sizeof why);
    if (i == 0) {
      MK_CHECK(aten != NULL && cJSON_GetArraySize(aten) == 1);
    } else {
      MK_CHECK(aten == NULL);
      MK_CHECK(strstr(why, "2 GiB") != NULL);
    }
    cJSON_Delete(aten);
    MK_CHECK(verify_native_route(&vn, true, false, g, 5, plan, why, sizeof why) == NULL); /* not a GPU job */
    MK_CHECK_STR(why, "not a GPU job");
    mk_graph_free(g);
  }
}
