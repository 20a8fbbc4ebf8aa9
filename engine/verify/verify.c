/* verify.c — verification jobs: cache lookup, dispatch, parse, store.
 *
 * A job goes through: (1) when caching, make sure the worker environment
 * of its kind is known (a `hello` request starts the worker if needed),
 * finish the key and look it up; (2) on a miss, send the request to the
 * pool; (3) parse the answer, store deterministic verdicts, call back.
 * Cache hits and early failures are delivered from a zero-delay timer so
 * no callback runs inside a submit. */
#include "mk_verify.h"

#include "mk_layout.h"

#include "env_memo.h"
#include "mk_buf.h"
#include "mk_sha256.h"

#include "verify_cuda.h"
#include "verify_native.h"
#include "mk_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MK_VERIFY_MAX_FILE ((size_t)64 * 1024 * 1024)

typedef enum { VJ_CAPTURE, VJ_SUBKERNEL, VJ_COMPOSITION } vj_type;

typedef struct vjob {
  mk_verify *v;
  uint64_t id;
  vj_type type;
  const char *method;
  cJSON *params;
  mk_worker_kind kind;
  double timeout_s;
  mk_cache_key key;
  bool keyed;   /* the cache applies to this job */
  bool lookup;  /* ... and we may answer from it */
  char keyhex[65];
  uint64_t pool_job;
  mk_worker_pool *in_which; /* the pool pool_job is in */
  bool in_pool, canceled, ready;
  bool ran_native; /* the native worker answered it (mk_verify_result.native) */
  /* the native worker (verify_native.h): routed there, its state in place,
   * the params for the Python worker should it refuse the job */
  bool native, state_ready;
  cJSON *fallback;
  int trials;
  char state_dir[512], state_tmp[560];
  mk_verify_cb cb;
  mk_verify_capture_cb ccb;
  void *data;
  char *file;       /* capture: the path asked for */
  char gpu[64];     /* CUDA_VISIBLE_DEVICES of the GPU worker that ran it, "" otherwise */
  uint64_t t0;
  /* ready for delivery without the pool */
  char *hit_json;
  bool synthetic;   /* hit_json is the engine's own verdict (a CUDA compile), not a cache hit */
  int fail_code;
  char fail_kind[32];
  mk_buf fail_msg;
  struct vjob *prev, *next;
} vjob;

struct mk_verify {
  uv_loop_t *loop;
  mk_worker_pool *pool;
  mk_cache *cache;
  uv_timer_t deliver;
  vjob *jobs;
  uint64_t next_id;
  bool closing, timer_closed;
  mk_verify_stats stats;
  bool memo_stored[3]; /* per mk_worker_kind: this run's handshake is remembered */
  verify_cuda cuda;    /* NVRTC for CUDA C++ candidates (verify_cuda.c) */
  verify_native native; /* the native worker's pool and state (verify_native.c) */
};

/* ---- options and parsing -------------------------------------------------- */

void mk_verify_options_init(mk_verify_options *o) {
  memset(o, 0, sizeof *o);
  o->trials = 5;
  o->atol = 1e-4;
  o->rtol = 1e-4;
  o->timing = true;
  /* On: scripts/device/native-worker.sh passed on an H200 (2026-12-07): the
   * native worker's verdicts equal the Python worker's on every builtin CUDA
   * candidate and broken copy of the fixtures (--no-native-worker: off). */
  o->native = true;
}

const char *mk_verify_compile_check_note(int compile_check, double max_abs_err, char *out, size_t size) {
  if (size == 0) return out;
  out[0] = '\0';
  if (compile_check >= 0) return out;
  if (max_abs_err >= 0)
    snprintf(out, size, "torch.compile's own output fails the comparison ours passed "
                        "(max abs error %.3g against eager)", max_abs_err);
  else snprintf(out, size, "torch.compile's own output fails the comparison ours passed");
  return out;
}

const char *mk_verify_status_name(mk_verify_status s) {
  switch (s) {
  case MK_VERIFY_OK: return "ok";
  case MK_VERIFY_MISMATCH: return "mismatch";
  case MK_VERIFY_COMPILE_ERROR: return "compile_error";
  case MK_VERIFY_RUNTIME_ERROR: return "runtime_error";
  case MK_VERIFY_OOM: return "oom";
  case MK_VERIFY_REJECTED: return "rejected";
  case MK_VERIFY_CRASHED: return "crashed";
  case MK_VERIFY_TIMEOUT: return "timeout";
  case MK_VERIFY_CANCELED: return "canceled";
  default: return "error";
  }
}

/* An error bound: the worker writes "inf" (a string: JSON has no infinity)
 * when NaN or Inf appeared where the reference is finite. */
static double jerr(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
  if (cJSON_IsNumber(v)) return v->valuedouble;
  if (cJSON_IsString(v) && (strcmp(v->valuestring, "inf") == 0 || strcmp(v->valuestring, "nan") == 0))
    return INFINITY;
  return 0;
}

static void parse_time(const cJSON *t, mk_verify_time *out) {
  memset(out, 0, sizeof *out);
  if (!cJSON_IsObject(t)) return;
  const cJSON *av = cJSON_GetObjectItemCaseSensitive(t, "available");
  const cJSON *med = cJSON_GetObjectItemCaseSensitive(t, "median_ms");
  if (cJSON_IsFalse(av) || !cJSON_IsNumber(med)) return;
  out->available = true;
  out->median_ms = med->valuedouble;
  out->min_ms = mk_json_num(t, "min_ms", med->valuedouble);
  out->spread = mk_json_num(t, "spread", 0);
}

/* torch.compile's own check (the worker's reference_compile.check, docs/verify.md):
 * ok true -> 1, false -> -1, absent or null -> 0. */
static void parse_compile_check(const cJSON *comp, mk_verify_result *r) {
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(comp, "check");
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(c, "ok");
  r->compile_check = cJSON_IsBool(ok) ? (cJSON_IsTrue(ok) ? 1 : -1) : 0;
  r->compile_max_abs_error = r->compile_check ? mk_json_num(c, "max_abs_error", -1) : -1;
}

/* The composition's run at another batch (the worker's other_batch). */
static void parse_other_batch(const cJSON *ob, mk_verify_result *r) {
  if (!cJSON_IsObject(ob)) return;
  r->other_batch = (int)mk_json_num(ob, "batch", 0);
  const char *st = mk_json_str(ob, "status", "skipped");
  if (strcmp(st, "ok") != 0 && strcmp(st, "skipped") != 0) {
    const char *why = mk_json_str(ob, "reason", "");
    r->other_batch_failure = why[0] ? why : st;
  }
}

void mk_verify_parse_result(const cJSON *res, mk_verify_result *r) {
  memset(r, 0, sizeof *r);
  r->reason = r->error_kind = r->traceback = r->timing_reason = r->device = r->gpu = "";
  r->other_batch_failure = "";
  r->json = res;
  if (!cJSON_IsObject(res)) {
    r->status = MK_VERIFY_ERROR;
    r->code = MK_EPROTO;
    r->reason = "the worker's result is not an object";
    return;
  }
  const char *st = mk_json_str(res, "status", "");
  r->reason = mk_json_str(res, "reason", "");
  r->error_kind = mk_json_str(res, "error_kind", "");
  r->traceback = mk_json_str(res, "traceback", "");
  r->device = mk_json_str(res, "device", "");
  r->line = (int)mk_json_num(res, "line", 0);
  r->trials = (int)mk_json_num(res, "trials", 0);
  r->trials_passed = (int)mk_json_num(res, "trials_passed", 0);
  r->max_abs_error = jerr(res, "max_abs_error");
  r->max_rel_error = jerr(res, "max_rel_error");
  r->ref_tf32_noise = mk_json_num(cJSON_GetObjectItemCaseSensitive(res, "reference_tf32"), "noise", 0);
  r->state_tf32_noise = mk_json_num(cJSON_GetObjectItemCaseSensitive(res, "state_tf32"), "noise", 0);
  r->failing_elements = (int64_t)mk_json_num(res, "failing_elements", 0);
  parse_other_batch(cJSON_GetObjectItemCaseSensitive(res, "other_batch"), r);
  r->elements = (int64_t)mk_json_num(res, "elements", 0);
  if (strcmp(st, "ok") == 0) r->status = MK_VERIFY_OK;
  else if (strcmp(st, "mismatch") == 0) r->status = MK_VERIFY_MISMATCH;
  else if (strcmp(st, "compile_error") == 0) r->status = MK_VERIFY_COMPILE_ERROR;
  else if (strcmp(st, "runtime_error") == 0)
    r->status = strcmp(r->error_kind, "oom") == 0 ? MK_VERIFY_OOM : MK_VERIFY_RUNTIME_ERROR;
  else if (strcmp(st, "rejected") == 0) r->status = MK_VERIFY_REJECTED;
  else {
    r->status = MK_VERIFY_ERROR;
    r->code = MK_EPROTO;
    if (!r->reason[0]) r->reason = "the worker's result has no known status";
  }
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(res, "timing");
  const cJSON *av = cJSON_GetObjectItemCaseSensitive(t, "available");
  r->timing_available = cJSON_IsTrue(av);
  r->timing_reason = mk_json_str(t, "reason", "");
  parse_time(cJSON_GetObjectItemCaseSensitive(t, "reference_eager"), &r->eager);
  parse_time(cJSON_GetObjectItemCaseSensitive(t, "reference_compile"), &r->compiled);
  parse_compile_check(cJSON_GetObjectItemCaseSensitive(t, "reference_compile"), r);
  parse_time(cJSON_GetObjectItemCaseSensitive(t, "candidate"), &r->ours);
  const cJSON *modes = cJSON_GetObjectItemCaseSensitive(t, "reference_compile_modes");
  parse_time(cJSON_GetObjectItemCaseSensitive(modes, "max-autotune-no-cudagraphs"),
             &r->compiled_max);
  parse_time(cJSON_GetObjectItemCaseSensitive(modes, "reduce-overhead"), &r->compiled_ro);
  if (!r->ours.available && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(t, "median_ms")))
    parse_time(t, &r->ours);
  /* After a re-check the accepted time is the top-level median. */
  if (r->ours.available && cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(t, "median_ms")))
    r->ours.median_ms = mk_json_num(t, "median_ms", r->ours.median_ms);
  r->speedup_vs_eager = mk_json_num(t, "speedup_vs_eager", 0);
  r->speedup_vs_compile = mk_json_num(t, "speedup_vs_compile", 0);
  if (r->speedup_vs_eager == 0 && r->eager.available && r->ours.available && r->ours.median_ms > 0)
    r->speedup_vs_eager = r->eager.median_ms / r->ours.median_ms;
  if (r->speedup_vs_compile == 0 && r->compiled.available && r->ours.available &&
      r->ours.median_ms > 0)
    r->speedup_vs_compile = r->compiled.median_ms / r->ours.median_ms;
  r->suspicious = cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(res, "suspicious"));
}

/* ---- job bookkeeping ------------------------------------------------------ */

static void on_deliver(uv_timer_t *t);

static void verify_free(mk_verify *v) {
  verify_cuda_close(&v->cuda);
  verify_native_close(&v->native);
  free(v);
}

static void on_timer_closed(uv_handle_t *h) { verify_free(h->data); }

static void maybe_free(mk_verify *v) {
  if (v->closing && !v->jobs && !v->timer_closed) {
    v->timer_closed = true;
    uv_close((uv_handle_t *)&v->deliver, on_timer_closed);
  }
}

static void job_unlink_free(vjob *j) {
  mk_verify *v = j->v;
  if (j->prev) j->prev->next = j->next;
  else v->jobs = j->next;
  if (j->next) j->next->prev = j->prev;
  cJSON_Delete(j->params);
  cJSON_Delete(j->fallback);
  free(j->file);
  free(j->hit_json);
  mk_buf_free(&j->fail_msg);
  free(j);
  maybe_free(v);
}

static vjob *job_new(mk_verify *v, vj_type type, const char *method) {
  vjob *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->v = v;
  j->id = v->next_id++;
  j->type = type;
  j->method = method;
  j->t0 = uv_hrtime();
  mk_buf_init(&j->fail_msg, 16 * 1024);
  j->next = v->jobs;
  if (v->jobs) v->jobs->prev = j;
  v->jobs = j;
  return j;
}

static double since_ms(const vjob *j) { return (double)(uv_hrtime() - j->t0) / 1e6; }

static void make_ready(vjob *j) {
  j->ready = true;
  uv_timer_start(&j->v->deliver, on_deliver, 0, 0);
}

static void fail_later(vjob *j, int code, const char *kind, const char *msg) {
  j->fail_code = code;
  mk_strlcpy(j->fail_kind, kind, sizeof j->fail_kind);
  mk_buf_puts(&j->fail_msg, msg);
  make_ready(j);
}

static mk_verify_status status_of_code(int code) {
  switch (code) {
  case MK_ECRASHED: return MK_VERIFY_CRASHED;
  case MK_ETIMEDOUT: return MK_VERIFY_TIMEOUT;
  case MK_ECANCELED: return MK_VERIFY_CANCELED;
  default: return MK_VERIFY_ERROR;
  }
}

/* Calls the job's callback with an error and no worker result. */
static void deliver_error(vjob *j, int code, const char *kind, const char *msg, int line,
                          const char *tb) {
  if (j->type == VJ_CAPTURE) {
    mk_verify_capture_result cr = {.code = code, .error_kind = kind, .message = msg,
                                   .line = line, .traceback = tb ? tb : "",
                                   .elapsed_ms = since_ms(j)};
    j->ccb(j->data, &cr);
    return;
  }
  mk_verify_result r;
  mk_verify_parse_result(NULL, &r);
  r.json = NULL;
  r.status = status_of_code(code);
  r.code = code;
  r.reason = msg;
  r.error_kind = kind;
  r.line = line;
  r.traceback = tb ? tb : "";
  r.elapsed_ms = since_ms(j);
  r.gpu = j->gpu;
  r.native = j->ran_native;
  j->cb(j->data, &r);
}

/* Sets the path a capture was asked for (the cached graph may come from a
 * copy of the same file elsewhere). */
static void patch_file(cJSON *res, const char *file) {
  if (!file || !cJSON_IsObject(res)) return;
  cJSON *f = cJSON_GetObjectItemCaseSensitive(res, "file");
  if (cJSON_IsString(f) && strcmp(f->valuestring, file) == 0) return;
  cJSON_ReplaceItemInObjectCaseSensitive(res, "file", cJSON_CreateString(file));
}

/* Delivers a worker/cache result object (takes `res`). */
static void deliver_result(vjob *j, cJSON *res, bool cached) {
  if (j->type == VJ_CAPTURE) {
    patch_file(res, j->file);
    mk_graph *g = NULL;
    mk_errmsg err = {{0}};
    int rc = mk_graph_from_cjson(res, &g, &err); /* takes res */
    mk_verify_capture_result cr = {.code = rc, .error_kind = rc ? "protocol" : "",
                                   .message = rc ? err.text : "", .traceback = "", .graph = g,
                                   .cached = cached, .elapsed_ms = since_ms(j)};
    j->ccb(j->data, &cr);
    return;
  }
  mk_verify_result r;
  mk_verify_parse_result(res, &r);
  r.cached = cached;
  r.elapsed_ms = since_ms(j);
  r.gpu = j->gpu;
  r.native = j->ran_native && !cached;
  j->cb(j->data, &r);
  cJSON_Delete(res);
}

static void deliver_ready(vjob *j) {
  if (j->canceled) {
    deliver_error(j, MK_ECANCELED, "canceled", "cancelled", 0, NULL);
  } else if (j->hit_json) {
    cJSON *res = cJSON_Parse(j->hit_json);
    if (res) {
      deliver_result(j, res, !j->synthetic);
    } else {
      deliver_error(j, MK_EPARSE, "internal", "a cache entry is not valid JSON", 0, NULL);
    }
  } else {
    deliver_error(j, j->fail_code, j->fail_kind, mk_buf_cstr(&j->fail_msg), 0, NULL);
  }
  job_unlink_free(j);
}

static void on_deliver(uv_timer_t *t) {
  mk_verify *v = t->data;
  /* Restart the scan after each delivery: callbacks may add or end jobs. */
  for (;;) {
    vjob *j = v->jobs;
    while (j && !j->ready) j = j->next;
    if (!j) break;
    deliver_ready(j);
  }
}

/* ---- the pipeline --------------------------------------------------------- */

static bool deterministic(const mk_verify_result *r) {
  return r->code == 0 && r->status != MK_VERIFY_OOM && r->status <= MK_VERIFY_REJECTED;
}

static void store(vjob *j, const cJSON *res) {
  mk_verify *v = j->v;
  if (!v->cache || !j->keyed || !j->keyhex[0]) return;
  char *text = cJSON_PrintUnformatted(res);
  if (!text) return;
  mk_errmsg err;
  const char *kind = j->type == VJ_CAPTURE ? "capture" : j->method;
  /* A failed store loses nothing but time: the verdict still goes out. */
  if (mk_cache_put(v->cache, j->keyhex, kind, text, strlen(text), &err) == 0) v->stats.stores++;
  free(text);
}

/* The supervisor killed the worker for its host memory: for a verification
 * that is the candidate's verdict (`oom`, never cached), not a crash. */
static cJSON *memory_verdict(const mk_worker_result *wr) {
  cJSON *res = cJSON_CreateObject();
  cJSON *timing = cJSON_AddObjectToObject(res, "timing");
  cJSON_AddStringToObject(res, "status", "runtime_error");
  cJSON_AddStringToObject(res, "error_kind", "oom");
  cJSON_AddStringToObject(res, "reason", wr->message ? wr->message : "exceeded the memory limit");
  cJSON_AddFalseToObject(timing, "available");
  cJSON_AddStringToObject(timing, "reason", "not timed: the candidate ran out of memory");
  return res;
}

static void dispatch(vjob *j);

/* The job goes to the Python worker after all, with the params it would
 * have had (the native worker refused it, or its state could not be made). */
static void to_python(vjob *j) {
  cJSON_Delete(j->params);
  j->params = j->fallback;
  j->fallback = NULL;
  j->native = false;
  j->v->native.fallbacks++;
  dispatch(j);
}

static bool native_refused(const vjob *j, const mk_worker_result *wr) {
  return j->native && !j->canceled && wr->status == MK_EWORKER && wr->kind &&
         (strcmp(wr->kind, "unsupported") == 0 || strcmp(wr->kind, "bad_request") == 0);
}

static void on_pool_done(void *data, mk_worker_result *wr) {
  vjob *j = data;
  j->in_pool = false;
  if (native_refused(j, wr)) {
    to_python(j);
    return;
  }
  mk_strlcpy(j->gpu, wr->gpu ? wr->gpu : "", sizeof j->gpu);
  j->ran_native = j->native;
  if (wr->status == MK_ECRASHED && !j->canceled && j->type != VJ_CAPTURE && wr->kind &&
      strcmp(wr->kind, "oom") == 0) {
    deliver_result(j, memory_verdict(wr), false);
    job_unlink_free(j);
    return;
  }
  if (wr->status != 0) {
    const char *tb = mk_json_str(wr->error, "traceback", "");
    deliver_error(j, j->canceled ? MK_ECANCELED : wr->status, wr->kind ? wr->kind : "internal",
                  wr->message, wr->line, tb);
    job_unlink_free(j);
    return;
  }
  cJSON *res = cJSON_DetachItemViaPointer(wr->response, wr->result);
  if (j->type == VJ_CAPTURE) {
    store(j, res);
  } else {
    mk_verify_result r;
    mk_verify_parse_result(res, &r);
    if (deterministic(&r)) store(j, res);
  }
  deliver_result(j, res, false);
  job_unlink_free(j);
}

static void on_state(void *data, mk_worker_result *wr) {
  vjob *j = data;
  j->in_pool = false;
  if (j->canceled) {
    deliver_error(j, MK_ECANCELED, "canceled", "cancelled", 0, NULL);
    job_unlink_free(j);
    return;
  }
  if (wr->status == 0) verify_native_state_commit(j->state_tmp, j->state_dir);
  if (!verify_native_state_ready(j->state_dir, j->trials)) {
    to_python(j); /* no state: the Python worker verifies it as always */
    return;
  }
  j->v->native.states++;
  dispatch(j);
}

/* A native job's state: in place already, or written now by the Python
 * worker's write_state into a folder of its own, renamed into place. */
static void native_state(vjob *j) {
  mk_verify *v = j->v;
  if (verify_native_state_ready(j->state_dir, j->trials)) {
    verify_native_add_state(j->params, j->state_dir, j->trials);
    j->state_ready = true;
    dispatch(j);
    return;
  }
  snprintf(j->state_tmp, sizeof j->state_tmp, "%s.tmp%llu", j->state_dir, (unsigned long long)j->id);
  cJSON *p = cJSON_CreateObject();
  cJSON_AddItemToObject(p, "graph", cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(j->params, "graph"), 1));
  cJSON_AddStringToObject(p, "dir", j->state_tmp);
  static const char *const keys[] = {"trials", "seed", "batch"}; /* the draws depend on these */
  for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(j->params, keys[i]);
    if (x) cJSON_AddItemToObject(p, keys[i], cJSON_Duplicate(x, 1));
  }
  mk_worker_request req = {.method = "write_state", .params = p, .kind = j->kind, .timeout_s = j->timeout_s,
                           .done = on_state, .data = j};
  mk_errmsg err;
  if (mk_worker_submit(v->pool, &req, &j->pool_job, &err)) {
    to_python(j);
    return;
  }
  j->in_which = v->pool;
  j->in_pool = true;
}

static void dispatch(vjob *j) {
  mk_verify *v = j->v;
  if (j->native && !j->state_ready) {
    native_state(j);
    return;
  }
  mk_worker_pool *pool = j->native ? v->native.pool : v->pool;
  mk_worker_request req = {.method = j->method, .params = j->params, .kind = j->kind,
                           .timeout_s = j->timeout_s, .done = on_pool_done, .data = j};
  j->params = NULL;
  mk_errmsg err;
  int rc = mk_worker_submit(pool, &req, &j->pool_job, &err);
  if (rc) {
    fail_later(j, rc, rc == MK_ECANCELED ? "canceled" : "unavailable", err.text);
    return;
  }
  j->in_which = pool;
  j->in_pool = true;
  v->stats.dispatched++;
  if (j->native) v->native.routed++;
}

/* The environment part of a key, from a handshake (live or remembered):
 * the same fields mk_worker_info takes from it. */
static void add_env(mk_cache_key *k, const cJSON *hello) {
  mk_cache_key_str(k, "env_torch", mk_json_str(hello, "torch", ""));
  mk_cache_key_str(k, "env_triton", mk_json_str(hello, "triton", ""));
  mk_cache_key_str(k, "env_python", mk_json_str(hello, "python", ""));
  mk_cache_key_str(k, "env_device", mk_json_str(hello, "device", ""));
  mk_cache_key_str(k, "env_cuda", mk_json_str(hello, "cuda", ""));
  /* Optional handshake fields: the full torch build ("2.11.0+cu130"),
   * the driver, the worker's own version. */
  mk_cache_key_str(k, "env_torch_full", mk_json_str(hello, "torch_full", ""));
  const char *driver = mk_json_str(hello, "driver", "");
  mk_cache_key_str(k, "env_driver", driver);
  const char *wv = mk_json_str(hello, "worker_version", "");
  mk_cache_key_str(k, "env_worker_version", wv);
  mk_cache_key_str(k, "engine_version", MK_VERSION);
  mk_cache_key_int(k, "protocol", MK_WORKER_PROTOCOL);
}

static void add_job_env(const vjob *j, mk_cache_key *k, const cJSON *hello) {
  if (j->type == VJ_CAPTURE) {
    /* The capture key is fixed by docs/runtime.md: torch and the worker's own
     * version (a capture that records more, such as the calls inside
     * multi-head attention, must not be answered by an older one). */
    mk_cache_key_str(k, "torch", mk_json_str(hello, "torch", ""));
    mk_cache_key_str(k, "worker", mk_json_str(hello, "worker_version", ""));
  } else {
    add_env(k, hello);
  }
}

/* Pool identity of the job's kind as text (caller frees), or NULL. */
static char *identity_of(const mk_verify *v, mk_worker_kind kind) {
  mk_buf b;
  mk_buf_init(&b, 1 << 16);
  if (kind == MK_WORKER_ANY || mk_worker_pool_identity(v->pool, kind, &b)) {
    mk_buf_free(&b);
    return NULL;
  }
  return mk_buf_steal(&b, NULL);
}

/* Before any worker of the job's kind has started: answers the job from
 * the cache with the handshake remembered from an earlier run, when it
 * still holds (env_memo.h). True when the job was answered. */
static bool answer_from_memo(vjob *j) {
  mk_verify *v = j->v;
  if (!j->lookup) return false;
  char *identity = identity_of(v, j->kind);
  cJSON *hello = identity ? mk_env_memo_load(v->cache, identity, j->kind == MK_WORKER_GPU) : NULL;
  free(identity);
  if (hello == NULL) return false;
  mk_cache_key k = j->key; /* a copy: on a miss the real handshake finishes j->key */
  add_job_env(j, &k, hello);
  cJSON_Delete(hello);
  char hex[65], *hit = NULL;
  if (mk_cache_key_final(&k, hex) != 0) return false;
  v->stats.lookups++;
  if (mk_cache_get(v->cache, hex, &hit, NULL, NULL) != 0) return false;
  v->stats.hits++;
  v->stats.memo_hits++;
  memcpy(j->keyhex, hex, sizeof j->keyhex);
  j->hit_json = hit;
  make_ready(j);
  return true;
}

/* After a real handshake: remembers it for later runs, once per kind. */
static void remember_env(mk_verify *v, mk_worker_kind kind, const mk_worker_info *info) {
  if (kind == MK_WORKER_ANY || v->memo_stored[kind] || info == NULL || info->hello == NULL) return;
  v->memo_stored[kind] = true;
  char *identity = identity_of(v, kind);
  if (identity) mk_env_memo_store(v->cache, identity, kind == MK_WORKER_GPU, info->hello);
  free(identity);
}

/* The environment of the job's kind is known (or unknowable): key, look up. */
static void after_env(vjob *j) {
  mk_verify *v = j->v;
  const mk_worker_info *info = mk_worker_pool_info_of(v->pool, j->kind);
  if (!info) {
    j->keyed = false;
    dispatch(j);
    return;
  }
  remember_env(v, j->kind, info);
  add_job_env(j, &j->key, info->hello);
  if (mk_cache_key_final(&j->key, j->keyhex) != 0) {
    j->keyed = false;
    dispatch(j);
    return;
  }
  if (j->lookup) {
    v->stats.lookups++;
    mk_errmsg err;
    char *hit = NULL;
    if (mk_cache_get(v->cache, j->keyhex, &hit, NULL, &err) == 0) {
      v->stats.hits++;
      j->hit_json = hit;
      make_ready(j);
      return;
    }
  }
  dispatch(j);
}

static void on_env(void *data, mk_worker_result *wr) {
  vjob *j = data;
  j->in_pool = false;
  if (j->canceled) {
    deliver_error(j, MK_ECANCELED, "canceled", "cancelled", 0, NULL);
    job_unlink_free(j);
    return;
  }
  if (wr->status != 0 && wr->status != MK_EWORKER) {
    /* No worker of this kind can start: the job cannot run either. */
    deliver_error(j, wr->status, wr->kind ? wr->kind : "unavailable", wr->message, 0, NULL);
    job_unlink_free(j);
    return;
  }
  after_env(j);
}

static void start(vjob *j) {
  mk_verify *v = j->v;
  if (!v->cache || !j->keyed) {
    dispatch(j);
    return;
  }
  if (mk_worker_pool_info_of(v->pool, j->kind)) {
    after_env(j);
    return;
  }
  if (answer_from_memo(j)) return;
  /* Start the worker and learn its environment from a hello. */
  mk_worker_request req = {.method = "hello", .params = cJSON_CreateObject(), .kind = j->kind,
                           .timeout_s = 0, .done = on_env, .data = j};
  cJSON_AddNumberToObject(req.params, "protocol", MK_WORKER_PROTOCOL);
  mk_errmsg err;
  int rc = mk_worker_submit(v->pool, &req, &j->pool_job, &err);
  if (rc) {
    fail_later(j, rc, "unavailable", err.text);
    return;
  }
  j->in_which = v->pool;
  j->in_pool = true;
}

/* ---- public API ----------------------------------------------------------- */

int mk_verify_new(uv_loop_t *loop, mk_worker_pool *pool, mk_cache *cache, mk_verify **out,
                  mk_errmsg *err) {
  *out = NULL;
  if (!loop || !pool) return mk_errf(err, MK_EINVAL, "a verifier needs a loop and a worker pool");
  mk_verify *v = calloc(1, sizeof *v);
  if (!v) return mk_errf(err, MK_ENOMEM, "out of memory");
  v->loop = loop;
  v->pool = pool;
  v->cache = cache;
  v->next_id = 1;
  uv_timer_init(loop, &v->deliver);
  v->deliver.data = v;
  *out = v;
  return 0;
}

int mk_verify_cancel(mk_verify *v, uint64_t id) {
  for (vjob *j = v->jobs; j; j = j->next) {
    if (j->id != id) continue;
    if (j->canceled) return 0;
    j->canceled = true;
    if (j->in_pool) mk_worker_cancel(j->in_which, j->pool_job);
    else if (!j->ready) make_ready(j);
    return 0;
  }
  return MK_ENOENT;
}

void mk_verify_close(mk_verify *v) {
  if (v->closing) return;
  v->closing = true;
  for (vjob *j = v->jobs; j; j = j->next) {
    if (j->canceled) continue;
    j->canceled = true;
    if (j->in_pool) mk_worker_cancel(j->in_which, j->pool_job);
    else make_ready(j);
  }
  maybe_free(v);
}

void mk_verify_get_stats(const mk_verify *v, mk_verify_stats *out) {
  *out = v->stats;
  out->native_routed = v->native.routed;
  out->native_fallbacks = v->native.fallbacks;
  out->native_states = v->native.states;
}

void mk_verify_set_native_pool(mk_verify *v, mk_worker_pool *pool) { v->native.pool = pool; }

static int file_sha(const char *path, char hex[65], mk_errmsg *err) {
  char *text = NULL;
  size_t len = 0;
  int rc = mk_read_file(path, MK_VERIFY_MAX_FILE, &text, &len);
  if (rc == MK_ERANGE)
    return mk_errf(err, rc, "%s is larger than %zu MiB", path, MK_VERIFY_MAX_FILE >> 20);
  if (rc) return mk_errf(err, rc, "cannot read %s: %s", path, mk_strerror(rc));
  mk_sha256_hex(text, len, hex);
  free(text);
  return 0;
}

static int resolve_kind(mk_verify *v, const mk_verify_options *o, mk_worker_kind *kind,
                        const char **device, mk_errmsg *err) {
  mk_verify_device d = o->device;
  if (d == MK_VERIFY_DEVICE_AUTO)
    d = mk_worker_pool_gpus(v->pool) > 0 ? MK_VERIFY_DEVICE_CUDA : MK_VERIFY_DEVICE_CPU;
  if (d == MK_VERIFY_DEVICE_CUDA && mk_worker_pool_gpus(v->pool) == 0)
    return mk_errf(err, MK_ENOENT, "--device cuda: no GPU is visible to this process");
  *kind = d == MK_VERIFY_DEVICE_CUDA ? MK_WORKER_GPU : MK_WORKER_CPU;
  *device = d == MK_VERIFY_DEVICE_CUDA ? "cuda" : "cpu";
  return 0;
}

static int check_options(const mk_verify_options *o, mk_errmsg *err) {
  if (o->trials < 1 || o->trials > 1000) return mk_errf(err, MK_EINVAL, "trials must be 1..1000");
  if (!(o->atol >= 0) || !(o->rtol >= 0) || !isfinite(o->atol) || !isfinite(o->rtol))
    return mk_errf(err, MK_EINVAL, "atol and rtol must be finite and >= 0");
  if (o->batch < 0) return mk_errf(err, MK_EINVAL, "batch must be >= 1");
  return 0;
}

/* Adds the options to both the request and the key. */
static void add_options(cJSON *params, mk_cache_key *k, const mk_verify_options *o,
                        const char *device) {
  cJSON_AddNumberToObject(params, "trials", o->trials);
  cJSON_AddNumberToObject(params, "seed", (double)o->seed);
  cJSON_AddNumberToObject(params, "atol", o->atol);
  cJSON_AddNumberToObject(params, "rtol", o->rtol);
  cJSON_AddStringToObject(params, "device", device);
  cJSON_AddBoolToObject(params, "timing", o->timing);
  if (o->batch > 0) cJSON_AddNumberToObject(params, "batch", o->batch);
  if (o->skip_compile) {
    /* only when set: the keys of every verdict made before the option stay valid */
    cJSON_AddBoolToObject(params, "compile_reference", false);
    mk_cache_key_int(k, "skip_compile", 1);
  }
  if (o->compile_baselines && !o->skip_compile) {
    cJSON *modes = cJSON_AddArrayToObject(params, "compile_modes");
    cJSON_AddItemToArray(modes, cJSON_CreateString("max-autotune-no-cudagraphs"));
    cJSON_AddItemToArray(modes, cJSON_CreateString("reduce-overhead"));
    mk_cache_key_int(k, "compile_baselines", 1);
  } else if (o->compile_reduce_overhead && !o->skip_compile) {
    cJSON *modes = cJSON_AddArrayToObject(params, "compile_modes");
    cJSON_AddItemToArray(modes, cJSON_CreateString("reduce-overhead"));
    mk_cache_key_int(k, "compile_ro", 1);
  }
  mk_cache_key_int(k, "trials", o->trials);
  mk_cache_key_int(k, "seed", o->seed);
  mk_cache_key_double(k, "atol", o->atol);
  mk_cache_key_double(k, "rtol", o->rtol);
  mk_cache_key_str(k, "backend", device);
  mk_cache_key_int(k, "timing", o->timing);
  mk_cache_key_int(k, "batch", o->batch);
}

static cJSON *int_array(const int *xs, int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber(xs[i]));
  return a;
}

int mk_verify_submit_capture(mk_verify *v, const char *file, const char *class_name, int batch,
                             double timeout_s, mk_verify_capture_cb cb, void *data,
                             uint64_t *job_out, mk_errmsg *err) {
  if (job_out) *job_out = 0;
  if (v->closing) return mk_errf(err, MK_ECANCELED, "the verifier is closing");
  if (!file || !cb) return mk_errf(err, MK_EINVAL, "capture needs a file and a callback");
  if (batch < 0) return mk_errf(err, MK_EINVAL, "batch must be >= 1");
  char sha[65];
  int rc = file_sha(file, sha, err);
  if (rc) return rc;
  vjob *j = job_new(v, VJ_CAPTURE, "capture");
  if (!j) return mk_errf(err, MK_ENOMEM, "out of memory");
  j->ccb = cb;
  j->data = data;
  /* Capture needs no device (fake tensors), but on a GPU machine the GPU
   * worker is the one that runs anyway: no second Python process to start. */
  j->kind = mk_worker_pool_gpus(v->pool) > 0 ? MK_WORKER_GPU : MK_WORKER_CPU;
  j->timeout_s = timeout_s;
  j->file = mk_strdup(file);
  j->params = cJSON_CreateObject();
  if (!j->file || !j->params) {
    job_unlink_free(j);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  cJSON_AddStringToObject(j->params, "file", file);
  cJSON_AddStringToObject(j->params, "class", class_name ? class_name : "Model");
  if (batch > 0) cJSON_AddNumberToObject(j->params, "batch", batch);
  /* Same fields as mk_cache_capture_key; torch comes with the environment. */
  mk_cache_key_init(&j->key, "capture");
  mk_cache_key_str(&j->key, "source_sha256", sha);
  mk_cache_key_str(&j->key, "class", class_name ? class_name : "Model");
  mk_cache_key_int(&j->key, "batch", batch);
  j->keyed = v->cache != NULL;
  j->lookup = j->keyed;
  if (job_out) *job_out = j->id;
  start(j);
  return 0;
}

/* The program's layout plan as the worker's `layouts` parameter ({"<value id>":
 * "channels_last" | "contiguous"}), or NULL when it converts nothing (no
 * convolution) or on allocation failure: the subkernel then runs as captured. */
static cJSON *layouts_param(const mk_graph *g) {
  unsigned char *lay = malloc((size_t)g->nvalues + 1), *conv = malloc((size_t)g->nvalues + 1);
  cJSON *obj = NULL;
  if (lay && conv && mk_layout_plan(g, lay, conv) >= 0) {
    for (int v = 0; v < g->nvalues; v++) {
      const char *how = mk_layout_conv_name((mk_layout_conv)conv[v]);
      if (how == NULL) continue;
      if (obj == NULL && (obj = cJSON_CreateObject()) == NULL) break;
      char key[24];
      snprintf(key, sizeof key, "%d", v);
      cJSON_AddStringToObject(obj, key, how);
    }
  }
  free(lay);
  free(conv);
  return obj;
}

/* A job the native worker can take goes there (verify_native.h); its key
 * says so, since that worker's verdict comes with another timing (no
 * torch.compile baseline). */
static void route_native(vjob *j, const mk_graph *g, const char *source, const mk_verify_options *o) {
  char why[256];
  cJSON *aten = verify_native_route(&j->v->native, o->native, j->kind == MK_WORKER_GPU, g, o->trials, source, why,
                                    sizeof why);
  if (aten == NULL) return;
  const cJSON *graph = cJSON_GetObjectItemCaseSensitive(j->params, "graph");
  if (verify_native_state_dir(&j->v->native, graph, (long long)o->seed, o->batch, o->trials, j->state_dir,
                              sizeof j->state_dir) ||
      (j->fallback = cJSON_Duplicate(j->params, 1)) == NULL) {
    cJSON_Delete(aten);
    return;
  }
  cJSON_AddItemToObject(j->params, "aten", aten);
  mk_cache_key_int(&j->key, "native_worker", 1);
  j->native = true;
  j->trials = o->trials;
}

int mk_verify_submit_subkernel(mk_verify *v, const mk_graph *g, const mk_subkernel *sk,
                               const mk_candidate_src *cand, const mk_verify_options *opt,
                               mk_verify_cb cb, void *data, uint64_t *job_out, mk_errmsg *err) {
  if (job_out) *job_out = 0;
  if (v->closing) return mk_errf(err, MK_ECANCELED, "the verifier is closing");
  if (!g || !g->json || !sk || !cand || !cand->source || !cb)
    return mk_errf(err, MK_EINVAL, "verify_subkernel needs a graph, a subkernel and a candidate");
  mk_verify_options o;
  if (opt) o = *opt;
  else mk_verify_options_init(&o);
  int rc = check_options(&o, err);
  if (rc) return rc;
  mk_worker_kind kind = MK_WORKER_ANY;
  const char *device = "";
  if ((rc = resolve_kind(v, &o, &kind, &device, err))) return rc;
  vjob *j = job_new(v, VJ_SUBKERNEL, "verify_subkernel");
  if (!j) return mk_errf(err, MK_ENOMEM, "out of memory");
  j->cb = cb;
  j->data = data;
  j->kind = kind;
  j->timeout_s = o.timeout_s;
  cJSON *params = j->params = cJSON_CreateObject();
  cJSON *graph = cJSON_Duplicate(g->json, 1);
  if (!params || !graph) {
    cJSON_Delete(graph);
    job_unlink_free(j);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  /* Capture timing varies run to run; it is no part of the reference. */
  cJSON_DeleteItemFromObjectCaseSensitive(graph, "stats");
  mk_cache_key_init(&j->key, "verify_subkernel");
  mk_cache_key_json(&j->key, "reference_graph", graph);
  cJSON_AddItemToObject(params, "graph", graph);
  cJSON *nodes = int_array(sk->nodes, sk->nnodes);
  cJSON *ins = int_array(sk->inputs, sk->ninputs);
  cJSON *outs = int_array(sk->outputs, sk->noutputs);
  mk_cache_key_json(&j->key, "reference_nodes", nodes);
  mk_cache_key_json(&j->key, "reference_inputs", ins);
  mk_cache_key_json(&j->key, "reference_outputs", outs);
  cJSON_AddItemToObject(params, "nodes", nodes);
  cJSON_AddItemToObject(params, "inputs", ins);
  cJSON_AddItemToObject(params, "outputs", outs);
  cJSON *layouts = layouts_param(g);
  if (layouts) {
    mk_cache_key_json(&j->key, "layouts", layouts);
    cJSON_AddItemToObject(params, "layouts", layouts);
  }
  cJSON *c = cJSON_AddObjectToObject(params, "candidate");
  cJSON_AddStringToObject(c, "source", cand->source);
  cJSON_AddStringToObject(c, "name", cand->name ? cand->name : "candidate");
  cJSON_AddStringToObject(c, "origin", cand->origin ? cand->origin : "unknown");
  mk_cache_key_str(&j->key, "candidate_source", cand->source);
  mk_cache_key_str(&j->key, "candidate_name", cand->name ? cand->name : "candidate");
  mk_cache_key_str(&j->key, "candidate_origin", cand->origin ? cand->origin : "unknown");
  add_options(params, &j->key, &o, device);
  j->keyed = v->cache != NULL;
  j->lookup = j->keyed && !o.no_cache;
  /* CUDA C++: the engine compiles; a compile error is the verdict, no worker needed. */
  char *report = NULL;
  if (verify_cuda_prepare(&v->cuda, v->cache, cand->source, c, &report) != 0) {
    job_unlink_free(j);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  if (job_out) *job_out = j->id;
  if (report) {
    j->hit_json = report;
    j->synthetic = true;
    make_ready(j);
    return 0;
  }
  route_native(j, g, cand->source, &o);
  start(j);
  return 0;
}

int mk_verify_submit_composition(mk_verify *v, const char *file, const char *new_class,
                                 const char *reference_file, const char *ref_class,
                                 const mk_verify_options *opt, mk_verify_cb cb, void *data,
                                 uint64_t *job_out, mk_errmsg *err) {
  if (job_out) *job_out = 0;
  if (v->closing) return mk_errf(err, MK_ECANCELED, "the verifier is closing");
  if (!file || !reference_file || !cb)
    return mk_errf(err, MK_EINVAL, "verify_composition needs two files and a callback");
  mk_verify_options o;
  if (opt) o = *opt;
  else mk_verify_options_init(&o);
  int rc = check_options(&o, err);
  if (rc) return rc;
  mk_worker_kind kind = MK_WORKER_ANY;
  const char *device = "";
  if ((rc = resolve_kind(v, &o, &kind, &device, err))) return rc;
  char sha_new[65], sha_ref[65];
  if ((rc = file_sha(file, sha_new, err)) || (rc = file_sha(reference_file, sha_ref, err)))
    return rc;
  vjob *j = job_new(v, VJ_COMPOSITION, "verify_composition");
  if (!j) return mk_errf(err, MK_ENOMEM, "out of memory");
  j->cb = cb;
  j->data = data;
  j->kind = kind;
  j->timeout_s = o.timeout_s;
  cJSON *params = j->params = cJSON_CreateObject();
  if (!params) {
    job_unlink_free(j);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  const char *nc = new_class ? new_class : "ModelNew";
  const char *rcls = ref_class ? ref_class : "Model";
  cJSON_AddStringToObject(params, "file", file);
  cJSON_AddStringToObject(params, "class", nc);
  cJSON_AddStringToObject(params, "reference_file", reference_file);
  cJSON_AddStringToObject(params, "reference_class", rcls);
  mk_cache_key_init(&j->key, "verify_composition");
  mk_cache_key_str(&j->key, "candidate_sha256", sha_new);
  mk_cache_key_str(&j->key, "candidate_class", nc);
  mk_cache_key_str(&j->key, "reference_sha256", sha_ref);
  mk_cache_key_str(&j->key, "reference_class", rcls);
  add_options(params, &j->key, &o, device);
  j->keyed = v->cache != NULL;
  j->lookup = j->keyed && !o.no_cache;
  if (job_out) *job_out = j->id;
  start(j);
  return 0;
}

/* The answer to a compile ahead: nothing waits for it (the check finds the
 * child's work through the worker, docs/verify.md "warm_reference"). */
static void on_warm_done(void *data, mk_worker_result *wr) {
  (void)data;
  (void)wr;
}

int mk_verify_warm_reference(mk_verify *v, const char *reference_file, const char *ref_class,
                             const mk_verify_options *opt, bool graph, mk_errmsg *err) {
  if (v->closing) return mk_errf(err, MK_ECANCELED, "the verifier is closing");
  if (!reference_file || !opt) return mk_errf(err, MK_EINVAL, "warm_reference needs a file and options");
  mk_worker_kind kind = MK_WORKER_ANY;
  const char *device = "";
  int rc = resolve_kind(v, opt, &kind, &device, err);
  if (rc) return rc;
  if (kind != MK_WORKER_GPU || !opt->timing || opt->skip_compile)
    return mk_errf(err, MK_EUNSUPPORTED, "nothing to compile ahead: the check times no torch.compile here");
  cJSON *params = cJSON_CreateObject();
  cJSON *modes = cJSON_AddArrayToObject(params, "modes");
  cJSON_AddItemToArray(modes, cJSON_CreateString("default"));
  if (graph) cJSON_AddItemToArray(modes, cJSON_CreateString("reduce-overhead"));
  cJSON_AddStringToObject(params, "file", reference_file);
  cJSON_AddStringToObject(params, "class", ref_class ? ref_class : "Model");
  cJSON_AddNumberToObject(params, "seed", (double)opt->seed);
  cJSON_AddStringToObject(params, "device", device);
  if (opt->batch > 0) cJSON_AddNumberToObject(params, "batch", opt->batch);
  mk_worker_request req = {.method = "warm_reference", .params = params, .kind = kind,
                           .timeout_s = 60, .done = on_warm_done, .data = NULL};
  return mk_worker_submit(v->pool, &req, NULL, err);
}

