/* test_native_worker.c — the native worker (engine/worker/native) under the
 * engine's own supervisor (mk_worker_config.argv), on the CPU: the
 * handshake with libtorch's version, start-up in well under a second,
 * `launch` refused with the reason on a machine without a GPU (a bad
 * request on one with a GPU), other methods named as the Python worker's,
 * and a clean `shutdown` when the pool closes. The launch itself needs a
 * GPU: scripts/device/native-worker.sh.
 *
 * The ATen interpreter (run_reference) against the Python worker: for
 * fixtures covering convolutions, linear layers, norms, pools, views and
 * elementwise ops, the Python worker writes the model's state, two trials'
 * inputs (seeded as verify_subkernel draws them, with a batch shrink) and
 * its own replay's values (write_state); the native worker replays the
 * graph from the engine's ATen forms (mk_export_graph_aten) and every value
 * must match, trial 1 after trial 0's in-place updates of running
 * statistics; each subkernel's reference, run on copies of its inputs,
 * too. A trial compared with the other trial's values must fail. Bad
 * requests and unsupported values give their reasons. Skips when CMake
 * found no libtorch. */
#include "mk_test.h"
#include "mk_backend.h"
#include "mk_decompose.h"
#include "mk_export.h"
#include "mk_propose.h"
#include "mk_worker.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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

/* ---- the interpreter against the Python worker ------------------------------ */

typedef struct reply {
  int calls, status;
  char kind[64], message[2048];
  cJSON *result; /* detached from the response; the test frees it */
} reply;

static void on_reply(void *data, mk_worker_result *r) {
  reply *o = data;
  o->calls++;
  o->status = r->status;
  snprintf(o->kind, sizeof o->kind, "%s", r->kind ? r->kind : "");
  snprintf(o->message, sizeof o->message, "%s", r->message ? r->message : "");
  o->result = r->status == 0 ? cJSON_DetachItemFromObject(r->response, "result") : NULL;
}

/* Sends method(params) to the pool's CPU worker and waits for the answer. */
static reply call(uv_loop_t *loop, mk_worker_pool *p, const char *method, cJSON *params) {
  reply o = {0};
  mk_worker_request req = {.method = method, .params = params, .kind = MK_WORKER_CPU, .done = on_reply, .data = &o};
  mk_errmsg err = {{0}};
  if (mk_worker_submit(p, &req, NULL, &err) != 0) {
    o.status = -1;
    snprintf(o.message, sizeof o.message, "%s", err.text);
    return o;
  }
  if (!run_until(loop, &o.calls, 1, 120)) o.status = -2;
  return o;
}

typedef struct pools {
  uv_loop_t loop;
  mk_worker_pool *python, *native;
  char dir[256];
} pools;

static bool pools_open(pools *ps) {
  memset(ps, 0, sizeof *ps);
  if (access(MK_DEFAULT_PYTHON, X_OK) != 0) return false;
  uv_loop_init(&ps->loop);
  mk_worker_config cfg;
  mk_worker_config_init(&cfg);
  cfg.gpus = 0;
  mk_errmsg err = {{0}};
  if (mk_worker_pool_new(&ps->loop, &cfg, &ps->python, &err)) return false;
  static const char *argv[] = {MK_NATIVE_WORKER_BIN, NULL};
  cfg.argv = argv;
  if (mk_worker_pool_new(&ps->loop, &cfg, &ps->native, &err)) return false;
  snprintf(ps->dir, sizeof ps->dir, "/tmp/mk_native_test_%d", (int)getpid());
  return true;
}

static void pools_close(pools *ps) {
  int closed = 0;
  mk_worker_pool_close(ps->python, on_closed, &closed);
  mk_worker_pool_close(ps->native, on_closed, &closed);
  MK_CHECK(run_until(&ps->loop, &closed, 2, 15));
  uv_run(&ps->loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&ps->loop), ==, 0);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", ps->dir);
  MK_CHECK(system(cmd) == 0);
}

/* The fixture's capture with its file made absolute (the workers' cwd is not the repo). */
static cJSON *fixture_graph(const char *name, mk_graph **g) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/%s.json", mk_test_repo_dir(), name);
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(path, 1 << 24, &text, &len)) return NULL;
  cJSON *j = cJSON_Parse(text);
  free(text);
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/%s.py", mk_test_repo_dir(), name);
  cJSON_ReplaceItemInObject(j, "file", cJSON_CreateString(path));
  char *again = cJSON_PrintUnformatted(j);
  mk_errmsg err = {{0}};
  if (mk_graph_from_json(again, strlen(again), g, &err)) fprintf(stderr, "    %s: %s\n", name, err.text);
  free(again);
  return j;
}

/* Every value a node makes (all the Python replay binds). */
static cJSON *node_values(const mk_graph *g) {
  cJSON *ids = cJSON_CreateArray();
  for (int v = 0; v < g->nvalues; v++)
    if (g->values[v].kind == MK_VALUE_NODE) cJSON_AddItemToArray(ids, cJSON_CreateNumber(v));
  return ids;
}

static cJSON *reference_params(const cJSON *graph, const cJSON *aten, const cJSON *state, int trial,
                               int expected_trial, const cJSON *layouts) {
  cJSON *p = cJSON_CreateObject();
  if (layouts) cJSON_AddItemToObject(p, "layouts", cJSON_Duplicate(layouts, 1));
  cJSON_AddItemToObject(p, "graph", cJSON_Duplicate(graph, 1));
  cJSON_AddItemToObject(p, "aten", cJSON_Duplicate(aten, 1));
  cJSON_AddItemToObject(p, "state_file", cJSON_Duplicate(cJSON_GetObjectItem(state, "state_file"), 1));
  cJSON *files = cJSON_AddArrayToObject(p, "inputs_files"); /* trials 0..trial, in order */
  for (int t = 0; t <= trial; t++)
    cJSON_AddItemToArray(files, cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(state, "inputs_files"), t), 1));
  cJSON_AddItemToObject(p, "expected_file",
                        cJSON_Duplicate(cJSON_GetArrayItem(cJSON_GetObjectItem(state, "values_files"), expected_trial), 1));
  return p;
}

/* A layout plan putting every 4-d value channels_last (replay.py's `layouts`). */
static cJSON *all_channels_last(const mk_graph *g) {
  cJSON *l = cJSON_CreateObject();
  for (int v = 0; v < g->nvalues; v++) {
    if (g->values[v].rank != 4 || g->values[v].kind == MK_VALUE_PARAM || g->values[v].kind == MK_VALUE_BUFFER) continue;
    char id[16];
    snprintf(id, sizeof id, "%d", v);
    cJSON_AddStringToObject(l, id, "channels_last");
  }
  return l;
}

/* One fixture: Python's replay against the native interpreter's, whole and
 * per subkernel; with `channels_last`, both under a layout plan. */
static void check_fixture(pools *ps, const char *name, int batch, bool channels_last) {
  mk_graph *g = NULL;
  cJSON *graph = fixture_graph(name, &g);
  MK_REQUIRE(graph != NULL && g != NULL);
  cJSON *aten = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_export_graph_aten(g, &aten, &err) == 0);
  cJSON *p = cJSON_CreateObject();
  char dir[512];
  snprintf(dir, sizeof dir, "%s/%s%s", ps->dir, name, channels_last ? "_cl" : "");
  cJSON_AddItemToObject(p, "graph", cJSON_Duplicate(graph, 1));
  cJSON_AddStringToObject(p, "dir", dir);
  cJSON_AddNumberToObject(p, "trials", 2);
  cJSON_AddNumberToObject(p, "seed", 3);
  if (batch) cJSON_AddNumberToObject(p, "batch", batch);
  cJSON *ids = node_values(g);
  cJSON_AddItemToObject(p, "values", ids);
  cJSON *all = cJSON_Duplicate(ids, 1);
  cJSON *layouts = channels_last ? all_channels_last(g) : NULL;
  if (layouts) cJSON_AddItemToObject(p, "layouts", cJSON_Duplicate(layouts, 1));
  int planned_cl = 0;
  reply st = call(&ps->loop, ps->python, "write_state", p);
  if (st.status) fprintf(stderr, "    %s: write_state: %s %s\n", name, st.kind, st.message);
  MK_REQUIRE(st.status == 0);
  for (int t = 0; t < 2; t++) { /* the whole graph, every value; trial 1 after trial 0's updates */
    cJSON *rp = reference_params(graph, aten, st.result, t, t, layouts);
    cJSON_AddItemToObject(rp, "values", cJSON_Duplicate(all, 1));
    reply r = call(&ps->loop, ps->native, "run_reference", rp);
    if (r.status) fprintf(stderr, "    %s: run_reference: %s %s\n", name, r.kind, r.message);
    MK_REQUIRE(r.status == 0);
    const cJSON *cmp = cJSON_GetObjectItem(r.result, "comparison");
    if (strcmp(cJSON_GetObjectItem(r.result, "status")->valuestring, "ok") != 0)
      fprintf(stderr, "    %s trial %d: %s\n", name, t, cJSON_GetObjectItem(cmp, "reason")->valuestring);
    MK_CHECK_STR(cJSON_GetObjectItem(r.result, "status")->valuestring, "ok");
    MK_CHECK(cJSON_GetObjectItem(cmp, "elements")->valuedouble > 0);
    /* shapes as captured, dim 0 cut to the batch where the capture had the full one */
    const cJSON *o;
    cJSON_ArrayForEach(o, cJSON_GetObjectItem(r.result, "outputs")) {
      const mk_value *v = &g->values[cJSON_GetObjectItem(o, "id")->valueint];
      const cJSON *shape = cJSON_GetObjectItem(o, "shape");
      MK_CHECK_INT(cJSON_GetArraySize(shape), ==, v->rank);
      for (int d = 0; d < v->rank && d < cJSON_GetArraySize(shape); d++)
        if (!(batch && d == 0)) MK_CHECK_INT((int64_t)cJSON_GetArrayItem(shape, d)->valuedouble, ==, v->shape[d]);
      char id[16];
      snprintf(id, sizeof id, "%d", cJSON_GetObjectItem(o, "id")->valueint);
      if (layouts && cJSON_GetObjectItem(layouts, id) && v->shape[1] > 1 && v->shape[2] * v->shape[3] > 1) {
        /* made channels_last where the plan says so */
        MK_CHECK_INT(cJSON_GetArrayItem(cJSON_GetObjectItem(o, "strides"), 1)->valueint, ==, 1);
        planned_cl++;
      }
    }
    cJSON_Delete(r.result);
  }
  /* the comparison can fail: trial 0's values against trial 1's inputs */
  cJSON *rp = reference_params(graph, aten, st.result, 1, 0, layouts);
  cJSON_AddItemToObject(rp, "values", cJSON_Duplicate(all, 1));
  reply r = call(&ps->loop, ps->native, "run_reference", rp);
  MK_REQUIRE(r.status == 0);
  MK_CHECK_STR(cJSON_GetObjectItem(r.result, "status")->valuestring, "mismatch");
  cJSON_Delete(r.result);
  /* each subkernel's reference on copies of its inputs, as verify_subkernel runs it */
  mk_partition part = {0};
  MK_REQUIRE(mk_decompose_initial(g, &part, &err) == 0);
  for (int k = 0; k < part.nsubkernels; k++) {
    const mk_subkernel *sk = &part.subkernels[k];
    if (sk->noutputs == 0) continue;
    cJSON *skj = cJSON_CreateObject();
    cJSON_AddItemToObject(skj, "nodes", cJSON_CreateIntArray(sk->nodes, sk->nnodes));
    cJSON_AddItemToObject(skj, "inputs", cJSON_CreateIntArray(sk->inputs, sk->ninputs));
    cJSON_AddItemToObject(skj, "outputs", cJSON_CreateIntArray(sk->outputs, sk->noutputs));
    rp = reference_params(graph, aten, st.result, 0, 0, layouts);
    cJSON_AddItemToObject(rp, "subkernel", skj);
    r = call(&ps->loop, ps->native, "run_reference", rp);
    if (r.status) fprintf(stderr, "    %s sk%d: %s %s\n", name, k, r.kind, r.message);
    MK_REQUIRE(r.status == 0);
    MK_CHECK_STR(cJSON_GetObjectItem(r.result, "status")->valuestring, "ok");
    MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(r.result, "outputs")), ==, sk->noutputs);
    cJSON_Delete(r.result);
  }
  fprintf(stderr, "    %s%s: %d values x 2 trials and %d subkernels match the Python worker\n", name,
          channels_last ? " (channels_last)" : "", cJSON_GetArraySize(all), part.nsubkernels);
  if (layouts) MK_CHECK(planned_cl > 0);
  cJSON_Delete(layouts);
  mk_partition_free(&part);
  cJSON_Delete(all);
  cJSON_Delete(st.result);
  cJSON_Delete(aten);
  cJSON_Delete(graph);
  mk_graph_free(g);
}

MK_TEST(native_worker, interpreter_matches_the_python_worker) {
  pools ps;
  if (!pools_open(&ps)) {
    mk_test_skip("no Python worker (.venv) to compare with");
    return;
  }
  uint64_t t0 = uv_hrtime();
  check_fixture(&ps, "norm_pools", 1, false);    /* conv 2d/3d, group / batch / instance norm, pools, batch shrink */
  check_fixture(&ps, "norm_pools", 1, true);     /* the same under a channels_last layout plan */
  check_fixture(&ps, "linear_epilogue", 0, false); /* linear, elementwise */
  check_fixture(&ps, "conv_shuffle", 0, false);  /* views: the channel shuffle */
  check_fixture(&ps, "conv_inplace_relu", 0, false); /* in-place calls */
  check_fixture(&ps, "reductions", 0, false);
  check_fixture(&ps, "attention_4d", 0, false);  /* matmul, softmax, views, transposes */
  fprintf(stderr, "    %.1f s\n", (double)(uv_hrtime() - t0) * 1e-9);
  pools_close(&ps);
}

/* ---- overloads, bad requests, unsupported values (no Python needed) -------- */

/* A tensor file (docs/export.md) of float32 tensors filled with `fill`. */
static void write_mkt(const char *path, int n, const char *const *names, const int64_t *shape, int rank, float fill) {
  FILE *f = fopen(path, "wb");
  MK_REQUIRE(f != NULL);
  uint32_t count = (uint32_t)n, len;
  fwrite("MKTENS1\n", 1, 8, f);
  fwrite(&count, 4, 1, f);
  int64_t numel = 1;
  for (int d = 0; d < rank; d++) numel *= shape[d];
  for (int i = 0; i < n; i++) {
    len = (uint32_t)strlen(names[i]);
    fwrite(&len, 4, 1, f);
    fwrite(names[i], 1, len, f);
    len = 7;
    fwrite(&len, 4, 1, f);
    fwrite("float32", 1, 7, f);
    uint32_t r = (uint32_t)rank;
    fwrite(&r, 4, 1, f);
    fwrite(shape, 8, (size_t)rank, f);
    uint64_t bytes = (uint64_t)numel * 4;
    fwrite(&bytes, 8, 1, f);
    for (int64_t k = 0; k < numel; k++) fwrite(&fill, 4, 1, f);
  }
  MK_CHECK(fclose(f) == 0);
}

typedef struct hand {
  char dir[256], state[300], inputs[300];
} hand;

/* Two inputs of ones [2, 3] and a state holding w (ones); values 0, 1 inputs, 2 w,
 * 3 a const, 4.. made by nodes. */
static const char hand_values[] =
    "[{\"id\":0,\"kind\":\"input\",\"index\":0},{\"id\":1,\"kind\":\"input\",\"index\":1},"
    "{\"id\":2,\"kind\":\"param\",\"name\":\"w\"},{\"id\":3,\"kind\":\"const\"},"
    "{\"id\":4,\"kind\":\"node\"},{\"id\":5,\"kind\":\"node\"},{\"id\":6,\"kind\":\"node\"}]";

static void hand_files(hand *h) {
  snprintf(h->dir, sizeof h->dir, "/tmp/mk_native_hand_%d", (int)getpid());
  char cmd[300];
  snprintf(cmd, sizeof cmd, "mkdir -p '%s'", h->dir);
  MK_REQUIRE(system(cmd) == 0);
  snprintf(h->state, sizeof h->state, "%s/state.mkt", h->dir);
  snprintf(h->inputs, sizeof h->inputs, "%s/inputs_0.mkt", h->dir);
  const int64_t shape[] = {2, 3};
  const char *const in[] = {"input.0", "input.1"}, *const st[] = {"w"};
  write_mkt(h->inputs, 2, in, shape, 2, 1.0f);
  write_mkt(h->state, 1, st, shape, 2, 1.0f);
}

/* run_reference of one hand-written form reporting `values`. */
static reply run_form(uv_loop_t *loop, mk_worker_pool *p, const hand *h, const char *form, const char *values) {
  char text[4096];
  snprintf(text, sizeof text,
           "{\"graph\":{\"values\":%s},\"aten\":[%s],\"state_file\":\"%s\",\"inputs_files\":[\"%s\"],"
           "\"values\":%s,\"explain\":true}",
           hand_values, form, h->state, h->inputs, values);
  cJSON *params = cJSON_Parse(text);
  if (params == NULL) {
    reply r = {.status = -3};
    snprintf(r.message, sizeof r.message, "the test's form is not JSON: %s", form);
    return r;
  }
  return call(loop, p, "run_reference", params);
}

static double output_sum(const reply *r, int i) {
  const cJSON *o = cJSON_GetArrayItem(cJSON_GetObjectItem(r->result, "outputs"), i);
  const cJSON *s = cJSON_GetObjectItem(o, "sum");
  return cJSON_IsNumber(s) ? s->valuedouble : -1e300;
}

static const char *schema_of(const reply *r) {
  const cJSON *s = cJSON_GetArrayItem(cJSON_GetObjectItem(r->result, "schemas"), 0);
  return cJSON_IsString(s) ? s->valuestring : "";
}

#define FORM(call, out) "{\"node\":0,\"op\":\"test\",\"line\":3,\"call\":" call ",\"outputs\":[4,5],\"out\":" out "}"

MK_TEST(native_worker, overloads_are_chosen_by_the_values) {
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
  hand h;
  hand_files(&h);
  static const struct {
    const char *form, *values, *schema;
    double sum;
  } cases[] = {
      /* x + 2.5: the Scalar overload (a float fits no Tensor) */
      {FORM("{\"op\":\"aten::add\",\"args\":[{\"t\":0},{\"float\":2.5}]}", "{\"t\":4}"), "[4]",
       "aten::add.Scalar(", 6 * 3.5},
      /* x + 2 * w: the Tensor overload, alpha by position although keyword-only in the schema */
      {FORM("{\"op\":\"aten::add\",\"args\":[{\"t\":0},{\"t\":2},2]}", "{\"t\":4}"), "[4]", "aten::add.Tensor(", 18},
      /* x.to(float64): to.dtype, not to.dtype_layout (fewer defaults filled in) */
      {FORM("{\"op\":\"aten::to\",\"args\":[{\"t\":0},{\"dtype\":\"float64\"}]}", "{\"t\":4}"), "[4]",
       "aten::to.dtype(", 6},
      /* sum(x, None, False, None): dim_IntList, the only one taking four values */
      {FORM("{\"op\":\"aten::sum\",\"args\":[{\"t\":0},null,false,null]}", "{\"t\":4}"), "[4]",
       "aten::sum.dim_IntList(", 6},
      /* max(x, 1): values and indices bound to two ids */
      {FORM("{\"op\":\"aten::max\",\"args\":[{\"t\":0},1,false]}", "{\"tuple\":[{\"t\":4},{\"t\":5}]}"), "[4,5]",
       "aten::max.dim(", 2},
      /* clamp(x, None, 0.5): both forms take None; the default overload (Scalar?) wins */
      {FORM("{\"op\":\"aten::clamp\",\"args\":[{\"t\":0},null,{\"float\":0.5}]}", "{\"t\":4}"), "[4]",
       "aten::clamp(Tensor self, Scalar? min", 3},
      /* a nested call: -x * y */
      {FORM("{\"op\":\"aten::mul\",\"args\":[{\"call\":{\"op\":\"aten::neg\",\"args\":[{\"t\":0}]}},{\"t\":1}]}",
            "{\"t\":4}"), "[4]", "aten::neg(", -6},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    reply r = run_form(&loop, p, &h, cases[i].form, cases[i].values);
    if (r.status) fprintf(stderr, "    case %zu: %s %s\n", i, r.kind, r.message);
    MK_REQUIRE(r.status == 0);
    if (strstr(schema_of(&r), cases[i].schema) == NULL) fprintf(stderr, "    case %zu ran %s\n", i, schema_of(&r));
    MK_CHECK(strstr(schema_of(&r), cases[i].schema) != NULL);
    MK_CHECK(output_sum(&r, 0) == cases[i].sum);
    cJSON_Delete(r.result);
  }
  /* bad requests and unsupported values: each answered with its reason, the worker alive */
  static const struct {
    const char *form, *kind, *text;
  } bad[] = {
      {FORM("{\"op\":\"aten::no_such_op\",\"args\":[{\"t\":0}]}", "{\"t\":4}"), "unsupported",
       "aten::no_such_op is not an operator of this libtorch"},
      {FORM("{\"op\":\"aten::add\",\"args\":[{\"t\":0},\"x\"]}", "{\"t\":4}"), "unsupported",
       "no overload of aten::add takes aten::add(Tensor, str); its schemas:"},
      {FORM("{\"op\":\"aten::relu\",\"args\":[{\"t\":3}]}", "{\"t\":4}"), "unsupported",
       "value 3 is a tensor made outside forward"},
      {FORM("{\"op\":\"aten::relu\",\"args\":[{\"t\":6}]}", "{\"t\":4}"), "bad_request",
       "value 6 (node) is not available"},
      {FORM("{\"op\":\"torch.relu\",\"args\":[{\"t\":0}]}", "{\"t\":4}"), "unsupported", "node 0 (test, line 3): op torch.relu"},
      {FORM("{\"op\":\"aten::mm\",\"args\":[{\"t\":0},{\"t\":1}]}", "{\"t\":4}"), "python_error",
       "node 0 (test, line 3): mat1 and mat2 shapes cannot be multiplied"},
      {"{\"node\":0}", "bad_request", "a node form needs a call"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    reply r = run_form(&loop, p, &h, bad[i].form, "[4]");
    if (strstr(r.message, bad[i].text) == NULL) fprintf(stderr, "    bad %zu: %s %s\n", i, r.kind, r.message);
    MK_CHECK_INT(r.status, ==, MK_EWORKER);
    MK_CHECK_STR(r.kind, bad[i].kind);
    MK_CHECK(strstr(r.message, bad[i].text) != NULL);
  }
  cJSON *params = cJSON_Parse("{\"graph\":{\"values\":[]},\"state_file\":\"/nonexistent\"}");
  reply r = call(&loop, p, "run_reference", params);
  MK_CHECK_STR(r.kind, "bad_request");
  MK_CHECK(strstr(r.message, "`aten`") != NULL);
  char text[512];
  snprintf(text, sizeof text, "{\"graph\":{\"values\":[]},\"aten\":[],\"state_file\":\"%s/none.mkt\"}", h.dir);
  r = call(&loop, p, "run_reference", cJSON_Parse(text));
  MK_CHECK_STR(r.kind, "bad_request");
  MK_CHECK(strstr(r.message, "no such tensor file") != NULL);
  mk_worker_stats st;
  mk_worker_pool_stats(p, &st);
  MK_CHECK(st.spawns == 1 && st.crashes == 0 && st.protocol_errors == 0);
  int closed = 0;
  mk_worker_pool_close(p, on_closed, &closed);
  MK_CHECK(run_until(&loop, &closed, 1, 15));
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&loop), ==, 0);
  snprintf(text, sizeof text, "rm -rf '%s'", h.dir);
  MK_CHECK(system(text) == 0);
}

/* On the CPU, verify_subkernel of a CUDA candidate is refused with the reason. */
MK_TEST(native_worker, verify_needs_a_gpu) {
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
  reply r = call(&loop, p, "verify_subkernel", cJSON_Parse("{\"candidate\":{\"source\":\"\",\"cubin\":\"\"}}"));
  const mk_worker_info *info = mk_worker_pool_info(p, 0);
  MK_REQUIRE(info != NULL);
  MK_CHECK_INT(r.status, ==, MK_EWORKER);
  if (strcmp(info->device, "cpu") == 0) {
    MK_CHECK_STR(r.kind, "unsupported");
    MK_CHECK(strstr(r.message, "verify_subkernel of a CUDA candidate needs a GPU: no CUDA driver") != NULL ||
             strstr(r.message, "needs a GPU") != NULL);
  } else {
    MK_CHECK_STR(r.kind, "bad_request");
  }
  int closed = 0;
  mk_worker_pool_close(p, on_closed, &closed);
  MK_CHECK(run_until(&loop, &closed, 1, 15));
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK_INT(uv_loop_close(&loop), ==, 0);
}

/* ---- cases for the GPU test (tests/python/test_native_verify.py) ----------- */

static void put_file(const char *dir, const char *name, const void *data, size_t len) {
  char path[1200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  MK_CHECK(mk_write_file(path, data, len) == 0);
}

static void put_json(const char *dir, const char *name, const cJSON *j) {
  char *text = cJSON_PrintUnformatted(j);
  put_file(dir, name, text, strlen(text));
  free(text);
}

/* A candidate and its cubin under dir; `broken` adds 0.5 to every element an
 * elementwise kernel stores, so both workers must call it a mismatch. */
static bool put_candidate(mk_backend *b, const char *dir, const char name[300], const char *source, bool broken) {
  char *src = mk_strdup(source);
  if (broken) {
    char *at = strstr(src, "[offs] = v");
    if (at == NULL) {
      free(src);
      return false;
    }
    size_t off = (size_t)(at - src) + strlen("[offs] = ");
    mk_buf m;
    mk_buf_init(&m, 0);
    mk_buf_printf(&m, "%.*s0.5f + %s", (int)off, src, src + off);
    free(src);
    src = mk_buf_steal(&m, NULL);
  }
  const char *cuda;
  size_t len;
  int first;
  mk_errmsg err = {{0}};
  bool ok = false;
  if (mk_backend_candidate_source(src, &cuda, &len, &first, &err) == 0) {
    char *text = mk_strndup(cuda, len);
    mk_backend_result r;
    if (mk_backend_compile(b, text, "candidate.cu", NULL, first - 1, &r, &err) == 0 && r.ok) {
      char file[400];
      snprintf(file, sizeof file, "%s.py", name);
      put_file(dir, file, src, strlen(src));
      snprintf(file, sizeof file, "%s.cubin", name);
      put_file(dir, file, r.image, r.image_len);
      ok = true;
    }
    if (ok || r.log) mk_backend_result_free(&r);
    free(text);
  }
  free(src);
  return ok;
}

/* With MK_NATIVE_VERIFY_OUT set: per fixture its graph (file made absolute)
 * and ATen forms, and per subkernel with a planned builtin CUDA candidate
 * that candidate, a broken copy, their cubins (sm_90) and manifest.json. */
MK_TEST(native_worker, gpu_cases) {
  const char *out = getenv("MK_NATIVE_VERIFY_OUT");
  if (out == NULL) {
    mk_test_skip("writes cases only for tests/python/test_native_verify.py (MK_NATIVE_VERIFY_OUT)");
    return;
  }
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &b, &err)) {
    mk_test_skip(err.text);
    return;
  }
  mkdir(out, 0700);
  cJSON *man = cJSON_CreateObject(), *cases = cJSON_AddArrayToObject(man, "cases");
  static const char *const fixtures[] = {"ew_broadcast", "reductions", "conv_chain"};
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    mk_graph *g = NULL;
    cJSON *graph = fixture_graph(fixtures[f], &g), *aten = NULL;
    MK_REQUIRE(graph != NULL && g != NULL);
    if (mk_export_graph_aten(g, &aten, &err)) { /* the native worker cannot replay this graph */
      fprintf(stderr, "    %s: %s\n", fixtures[f], err.text);
      cJSON_Delete(graph);
      mk_graph_free(g);
      continue;
    }
    char name[300];
    snprintf(name, sizeof name, "%s.graph.json", fixtures[f]);
    put_json(out, name, graph);
    snprintf(name, sizeof name, "%s.aten.json", fixtures[f]);
    put_json(out, name, aten);
    mk_partition part = {0};
    MK_REQUIRE(mk_decompose_initial(g, &part, &err) == 0);
    for (int k = 0; k < part.nsubkernels; k++) {
      const mk_subkernel *sk = &part.subkernels[k];
      mk_candidate_list l = {0};
      mk_propose_request req = {.graph = g, .subkernel = sk, .device = "cuda", .max_candidates = 1};
      if (mk_builtin_cuda_propose(&req, &l, &err) != 0 || l.n == 0 || !strstr(l.items[0].source, "MK_CUDA_PLAN")) {
        mk_candidate_list_free(&l);
        continue;
      }
      for (int broken = 0; broken < 2; broken++) {
        char cname[300];
        snprintf(cname, sizeof cname, "%s_sk%d_%s%s", fixtures[f], k, l.items[0].name, broken ? "_broken" : "");
        if (!put_candidate(b, out, cname, l.items[0].source, broken)) continue;
        cJSON *c = cJSON_CreateObject();
        cJSON_AddStringToObject(c, "fixture", fixtures[f]);
        cJSON_AddStringToObject(c, "candidate", cname);
        cJSON_AddStringToObject(c, "expect", broken ? "mismatch" : "ok");
        cJSON_AddItemToObject(c, "nodes", cJSON_CreateIntArray(sk->nodes, sk->nnodes));
        cJSON_AddItemToObject(c, "inputs", cJSON_CreateIntArray(sk->inputs, sk->ninputs));
        cJSON_AddItemToObject(c, "outputs", cJSON_CreateIntArray(sk->outputs, sk->noutputs));
        cJSON_AddItemToArray(cases, c);
      }
      mk_candidate_list_free(&l);
    }
    mk_partition_free(&part);
    cJSON_Delete(aten);
    cJSON_Delete(graph);
    mk_graph_free(g);
  }
  fprintf(stderr, "    %d cases written to %s\n", cJSON_GetArraySize(cases), out);
  MK_CHECK(cJSON_GetArraySize(cases) >= 4);
  put_json(out, "manifest.json", man);
  cJSON_Delete(man);
  mk_backend_close(b);
}

/* With MK_NATIVE_PLAN_OUT set: every builtin CUDA candidate with a launch
 * plan of the proposer fixtures (every variant), with its subkernel's input
 * shapes and dtypes and the graph, for tests/python/test_native_plan.py,
 * which holds each plan's launches to run()'s. No NVRTC or GPU needed. */
MK_TEST(native_worker, plan_cases) {
  const char *out = getenv("MK_NATIVE_PLAN_OUT");
  if (out == NULL) {
    mk_test_skip("writes cases only for tests/python/test_native_plan.py (MK_NATIVE_PLAN_OUT)");
    return;
  }
  mkdir(out, 0700);
  cJSON *man = cJSON_CreateObject(), *cases = cJSON_AddArrayToObject(man, "cases");
  static const char *const fixtures[] = {"ew_broadcast", "reductions", "conv_chain", "cost_ops", "repeated_blocks",
                                         "attention_4d", "conv_softmax", "conv_tails", "pools", "conv_layouts",
                                         "norms", "norm_pools", "bn_channels_last", "conv_bn_tails",
                                         "normalize_rows", "linear_epilogue", "matmul_bmm"};
  mk_errmsg err = {{0}};
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    mk_graph *g = NULL;
    cJSON *graph = fixture_graph(fixtures[f], &g);
    MK_REQUIRE(graph != NULL && g != NULL);
    char name[300];
    snprintf(name, sizeof name, "%s.graph.json", fixtures[f]);
    put_json(out, name, graph);
    mk_partition part = {0};
    MK_REQUIRE(mk_decompose_initial(g, &part, &err) == 0);
    for (int k = 0; k < part.nsubkernels; k++) {
      const mk_subkernel *sk = &part.subkernels[k];
      mk_candidate_list l = {0};
      mk_propose_request req = {.graph = g, .subkernel = sk, .device = "cuda"};
      if (mk_builtin_cuda_propose(&req, &l, &err) != 0) continue;
      for (int c = 0; c < l.n; c++) {
        if (!strstr(l.items[c].source, "\nMK_CUDA_PLAN = r\"\"\"\n")) continue;
        char cname[400];
        snprintf(cname, sizeof cname, "%s_sk%d_%s.py", fixtures[f], k, l.items[c].name);
        put_file(out, cname, l.items[c].source, strlen(l.items[c].source));
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "graph", name);
        cJSON_AddStringToObject(o, "candidate", cname);
        cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
        for (int i = 0; i < sk->ninputs; i++) {
          const mk_value *v = &g->values[sk->inputs[i]];
          cJSON *in = cJSON_CreateObject();
          cJSON *shape = cJSON_AddArrayToObject(in, "shape");
          for (int d = 0; d < v->rank; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)v->shape[d]));
          cJSON_AddStringToObject(in, "dtype", mk_dtype_name(v->dtype));
          cJSON_AddItemToArray(ins, in);
        }
        cJSON_AddItemToArray(cases, o);
      }
      mk_candidate_list_free(&l);
    }
    mk_partition_free(&part);
    cJSON_Delete(graph);
    mk_graph_free(g);
  }
  fprintf(stderr, "    %d planned candidates written to %s\n", cJSON_GetArraySize(cases), out);
  MK_CHECK(cJSON_GetArraySize(cases) >= 20);
  put_json(out, "manifest.json", man);
  cJSON_Delete(man);
}

#else

MK_TEST(native_worker, protocol_under_the_supervisor) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

MK_TEST(native_worker, interpreter_matches_the_python_worker) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

MK_TEST(native_worker, overloads_are_chosen_by_the_values) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

MK_TEST(native_worker, verify_needs_a_gpu) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

MK_TEST(native_worker, gpu_cases) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

MK_TEST(native_worker, plan_cases) {
  mk_test_skip("the native worker was not built: CMake found no libtorch");
}

#endif
