/* session_runtime.c — the session's runtime glue: the worker pool, the
 * result cache, the verifier, the LLM client, and the adapters that give
 * the search its evaluator and proposer.
 *
 * Batch policy: on a machine without a GPU the Triton interpreter runs the
 * kernels, so captures and checks use a reduced batch (MK_CPU_BATCH) unless
 * the configuration says otherwise; results say so. */
#include "mk_buf.h"
#include "mk_cache.h"
#include "mk_llm.h"
#include "mk_verify.h"
#include "mk_worker.h"
#include "session_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MK_CPU_BATCH 2

/* The LLM proposer's context for one module: it must outlive the module's
 * searches (the search borrows it), and it remembers the variants proposed
 * so far for the Optimiser. */
typedef struct llm_slot {
  const module_state *m;
  mk_llm_proposer_ctx ctx;
  char error[MK_ERRMSG_MAX];
  int run_start;           /* ledger index when the module's current evolve began */
  mk_session_progress_cb progress; /* the evolve's, while it runs */
  void *progress_data;
  double fraction;         /* the search's last progress event */
  char message[160];
  uint64_t last_ms;        /* last LLM progress report (throttle) */
  size_t chars;
  uv_loop_t *loop;
  struct llm_slot *next;
} llm_slot;

struct session_runtime {
  mk_worker_pool *pool;
  mk_worker_pool *native;  /* native workers (docs/native-worker.md), or NULL */
  const char *native_argv[2];
  mk_cache *cache;
  mk_verify *verify;
  mk_llm *llm;
  char *llm_config_json;   /* the configuration `llm` was opened with */
  llm_slot *llm_slots;     /* one proposer context per module */
  char device[128];
  bool gpu;
  void (*close_done)(void *data);
  void *close_data;
};

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

/* A cache that cannot open is a warning, not an error: verdicts are computed again. */
static void open_cache(mk_session *s, session_runtime *rt) {
  mk_buf path;
  mk_buf_init(&path, 8192);
  if (s->cfg.cache_dir) mk_buf_printf(&path, "%s/cache.sqlite", s->cfg.cache_dir);
  else mk_cache_default_path(&path);
  mk_errmsg cerr = {{0}};
  if (mk_cache_open(mk_buf_cstr(&path), 5000, &rt->cache, &cerr))
    fprintf(stderr, "mkevolve: result cache disabled: %s\n", cerr.text);
  mk_buf_free(&path);
}

/* The first `asked` visible GPUs, or all there are when fewer: the pool
 * would run stand-ins for the rest (mk_worker_config.gpus), and a worker on
 * a GPU that is not there times nothing. */
static int gpus_to_use(int asked) {
  char ids[MK_WORKER_MAX_GPUS][64];
  int visible = mk_worker_detect_gpus(ids, MK_WORKER_MAX_GPUS);
  if (asked > visible && visible > 0)
    fprintf(stderr, "mkevolve: --gpus %d: only %d GPU%s visible, using %s\n", asked, visible,
            visible == 1 ? " is" : "s are", visible == 1 ? "it" : "them");
  return asked < visible ? asked : visible;
}

/* The native worker's binary: $MKEVOLVE_NATIVE_WORKER, else the one built
 * with the engine (when CMake found libtorch); NULL when there is none. */
static const char *native_binary(void) {
  const char *path = env_or("MKEVOLVE_NATIVE_WORKER", NULL);
#ifdef MK_NATIVE_WORKER_BIN
  if (path == NULL) path = MK_NATIVE_WORKER_BIN;
#endif
  return path && access(path, X_OK) == 0 ? path : NULL;
}

/* A pool of native workers beside the Python ones, on the same GPUs, for
 * the verifier to send CUDA candidates with a launch plan to. Without a
 * GPU, the binary or the option there is none, and nothing changes. */
static void open_native(mk_session *s, session_runtime *rt, const mk_worker_config *python) {
  const char *bin = native_binary();
  if (!rt->gpu || !s->cfg.verify.native || bin == NULL) return;
  mk_worker_config wc = *python;
  rt->native_argv[0] = bin;
  rt->native_argv[1] = NULL;
  wc.argv = rt->native_argv;
  wc.gpus = mk_worker_pool_gpus(rt->pool);
  mk_errmsg err = {{0}};
  if (mk_worker_pool_new(s->loop, &wc, &rt->native, &err)) {
    fprintf(stderr, "mkevolve: native worker disabled: %s\n", err.text);
    rt->native = NULL;
    return;
  }
  mk_verify_set_native_pool(rt->verify, rt->native);
}

int session_runtime_open(mk_session *s, mk_errmsg *err) {
  session_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  mk_worker_config wc;
  mk_worker_config_init(&wc);
  wc.python = s->cfg.python;
  wc.pythonpath = env_or("MKEVOLVE_WORKER_PATH", NULL);
  if (s->cfg.gpus > 0) wc.gpus = gpus_to_use(s->cfg.gpus);
  if (strcmp(s->cfg.device, "cpu") == 0) wc.gpus = 0;
  if (s->cfg.job_timeout_s > 0) wc.request_timeout_s = s->cfg.job_timeout_s;
  if (s->cfg.start_timeout_s > 0) wc.hello_timeout_s = s->cfg.start_timeout_s;
  int rc = mk_worker_pool_new(s->loop, &wc, &rt->pool, err);
  if (rc) {
    free(rt);
    return rc;
  }
  rt->gpu = mk_worker_pool_gpus(rt->pool) > 0;
  if (strcmp(s->cfg.device, "cuda") == 0 && !rt->gpu) {
    mk_worker_pool_close(rt->pool, NULL, NULL);
    free(rt);
    return mk_errf(err, MK_ENOENT, "--device cuda: no GPU is visible to this process");
  }
  snprintf(rt->device, sizeof rt->device, "%s", rt->gpu ? "cuda" : "cpu");
  if (!s->cfg.no_cache) open_cache(s, rt);
  rc = mk_verify_new(s->loop, rt->pool, rt->cache, &rt->verify, err);
  if (rc) {
    mk_worker_pool_close(rt->pool, NULL, NULL);
    if (rt->cache) mk_cache_close(rt->cache);
    free(rt);
    return rc;
  }
  open_native(s, rt, &wc);
  s->rt = rt;
  return 0;
}

static void pool_closed(void *data) {
  mk_session *s = data;
  session_runtime *rt = s->rt;
  if (rt->cache) mk_cache_close(rt->cache);
  void (*done)(void *) = rt->close_done;
  void *done_data = rt->close_data;
  free(rt);
  s->rt = NULL;
  session_free(s);
  if (done) done(done_data);
}

static void close_client(session_runtime *rt) {
  for (llm_slot *sl = rt->llm_slots; sl; sl = sl->next) sl->ctx.llm = NULL; /* until reopened */
  if (rt->llm) mk_llm_close(rt->llm); /* its memory goes when the loop runs the close callbacks */
  rt->llm = NULL;
  free(rt->llm_config_json);
  rt->llm_config_json = NULL;
}

static void close_llm(session_runtime *rt) {
  while (rt->llm_slots) {
    llm_slot *sl = rt->llm_slots;
    rt->llm_slots = sl->next;
    mk_llm_proposer_reset(&sl->ctx);
    free(sl);
  }
  close_client(rt);
}

/* The native pool closes first, then the Python one (pool_closed frees rt). */
static void native_closed(void *data) {
  mk_session *s = data;
  mk_worker_pool_close(s->rt->pool, pool_closed, s);
}

void session_runtime_close(mk_session *s, void (*done)(void *data), void *data) {
  session_runtime *rt = s->rt;
  rt->close_done = done;
  rt->close_data = data;
  mk_verify_close(rt->verify);
  rt->verify = NULL;
  close_llm(rt);
  if (rt->native) mk_worker_pool_close(rt->native, native_closed, s);
  else mk_worker_pool_close(rt->pool, pool_closed, s);
}

const char *session_runtime_device(mk_session *s) {
  session_runtime *rt = s->rt;
  if (rt == NULL) return "cpu";
  if (rt->gpu) {
    const mk_worker_info *info = mk_worker_pool_info_of(rt->pool, MK_WORKER_GPU);
    if (info && info->device && *info->device) snprintf(rt->device, sizeof rt->device, "%s", info->device);
  }
  return rt->device;
}

bool session_runtime_timed(mk_session *s) { return s->rt && s->rt->gpu; }

mk_worker_pool *session_runtime_pool(mk_session *s) { return s->rt ? s->rt->pool : NULL; }

mk_verify *session_runtime_verify(mk_session *s) { return s->rt ? s->rt->verify : NULL; }

void session_runtime_check_options(mk_session *s, int batch, mk_verify_options *o) {
  *o = s->cfg.verify;
  o->seed = (int64_t)s->cfg.search.seed;
  /* auto: a GPU when the pool has one, as every verification of the session */
  o->device = strcmp(s->cfg.device, "cpu") == 0    ? MK_VERIFY_DEVICE_CPU
              : strcmp(s->cfg.device, "cuda") == 0 ? MK_VERIFY_DEVICE_CUDA
                                                    : MK_VERIFY_DEVICE_AUTO;
  o->timing = true; /* on a CPU the worker says why there are no timings */
  o->batch = batch;
  o->timeout_s = s->cfg.job_timeout_s;
  o->no_cache = s->cfg.no_cache;
}

/* Reduced batch for this session: 0 = the problem's own. */
static int batch_for(mk_session *s) {
  if (s->cfg.batch > 0) return s->cfg.batch;
  if (s->cfg.batch < 0) return 0;
  return s->rt->gpu ? 0 : MK_CPU_BATCH;
}

/* ---- capture ------------------------------------------------------------- */

typedef struct capture_req {
  session_capture_cb cb;
  void *data;
} capture_req;

static void on_capture(void *data, mk_verify_capture_result *r) {
  capture_req *req = data;
  mk_buf msg;
  mk_buf_init(&msg, 1 << 16);
  if (r->code) {
    if (r->line > 0) mk_buf_printf(&msg, "line %d: ", r->line);
    mk_buf_puts(&msg, r->message && *r->message ? r->message : mk_strerror(r->code));
  }
  mk_graph *g = r->graph;
  r->graph = NULL;
  req->cb(req->data, r->code, g, g ? g->batch : 0, r->code ? mk_buf_cstr(&msg) : NULL);
  mk_buf_free(&msg);
  free(req);
}

int session_runtime_capture(mk_session *s, const char *path, session_capture_cb cb, void *data,
                            mk_errmsg *err) {
  capture_req *req = malloc(sizeof *req);
  if (req == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  *req = (capture_req){cb, data};
  int rc = mk_verify_submit_capture(s->rt->verify, path, NULL, batch_for(s),
                                    s->cfg.capture_timeout_s > 0 ? s->cfg.capture_timeout_s
                                                                 : s->cfg.job_timeout_s,
                                    on_capture, req, NULL, err);
  if (rc) free(req);
  return rc;
}

/* ---- evaluator ------------------------------------------------------------- */

typedef struct eval_req {
  mk_eval_cb cb;
  void *data;
  module_state *m;
  uint64_t job;            /* the verifier's id, for cancel */
  bool candidate;          /* a subkernel candidate (counted in the progress) */
  bool composition;        /* the whole program */
} eval_req;

/* The module's list of verifications in flight (what cancel aborts). */
static void track_job(module_state *m, uint64_t job) {
  if (job == 0) return;
  if (m->nverify_jobs == m->capverify_jobs) {
    int cap = m->capverify_jobs ? m->capverify_jobs * 2 : 16;
    uint64_t *p = realloc(m->verify_jobs, sizeof *p * (size_t)cap);
    if (p == NULL) return; /* not cancellable early; it still ends on its own */
    m->verify_jobs = p;
    m->capverify_jobs = cap;
  }
  m->verify_jobs[m->nverify_jobs++] = job;
}

static void untrack_job(module_state *m, uint64_t job) {
  for (int i = 0; i < m->nverify_jobs; i++)
    if (m->verify_jobs[i] == job) {
      m->verify_jobs[i] = m->verify_jobs[--m->nverify_jobs];
      return;
    }
}

static mk_eval_status status_of(mk_verify_status v) {
  switch (v) {
  case MK_VERIFY_OK: return MK_EVAL_OK;
  case MK_VERIFY_MISMATCH: return MK_EVAL_MISMATCH;
  case MK_VERIFY_COMPILE_ERROR: return MK_EVAL_COMPILE_ERROR;
  case MK_VERIFY_RUNTIME_ERROR: return MK_EVAL_RUNTIME_ERROR;
  case MK_VERIFY_OOM: return MK_EVAL_OOM;
  case MK_VERIFY_REJECTED: return MK_EVAL_REJECTED;
  case MK_VERIFY_CRASHED: return MK_EVAL_CRASHED;
  case MK_VERIFY_TIMEOUT: return MK_EVAL_TIMEOUT;
  case MK_VERIFY_CANCELED: return MK_EVAL_CANCELLED;
  case MK_VERIFY_ERROR: return MK_EVAL_ERROR;
  }
  return MK_EVAL_ERROR;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* The median over the trials of the host seconds per_trial[].KEY, plus
 * per_trial[].KEY2 when given (docs/verify.md); 0 when the report has none. */
static double median_trial_s(const cJSON *report, const char *key, const char *key2) {
  const cJSON *trials = cJSON_GetObjectItemCaseSensitive(report, "per_trial");
  double t[64];
  int n = 0;
  const cJSON *rec;
  cJSON_ArrayForEach(rec, trials) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(rec, key);
    const cJSON *c2 = key2 ? cJSON_GetObjectItemCaseSensitive(rec, key2) : NULL;
    if (key2 && !cJSON_IsNumber(c2)) continue;
    if (cJSON_IsNumber(c) && n < (int)(sizeof t / sizeof t[0]))
      t[n++] = c->valuedouble + (c2 ? c2->valuedouble : 0);
  }
  if (n == 0) return 0;
  qsort(t, (size_t)n, sizeof t[0], cmp_double);
  return t[n / 2];
}

void session_runtime_eval_result(const mk_verify_result *v, mk_eval_result *out) {
  mk_eval_result r = {
      .status = status_of(v->status),
      .time_ms = v->ours.available ? v->ours.median_ms : -1,
      .min_ms = v->ours.available ? v->ours.min_ms : -1,
      .ref_eager_ms = v->eager.available ? v->eager.median_ms : -1,
      .ref_compile_ms = v->compiled.available ? v->compiled.median_ms : -1,
      .ref_compile_max_ms = v->compiled_max.available ? v->compiled_max.median_ms : -1,
      .ref_compile_ro_ms = v->compiled_ro.available ? v->compiled_ro.median_ms : -1,
      .compile_check = v->compile_check,
      .compile_max_abs_err = v->compile_max_abs_error,
      .max_abs_err = v->max_abs_error,
      .max_rel_err = v->max_rel_error,
      .ref_tf32_noise = v->ref_tf32_noise,
      .state_tf32_noise = v->state_tf32_noise,
      .trials_passed = v->trials_passed,
      .trials = v->trials,
      .cached = v->cached,
      .native = v->native,
      .cost_s = v->cached ? 0 : v->elapsed_ms / 1000.0,
      .run_s = median_trial_s(v->json, "candidate_s", NULL),
      .prefix_s = median_trial_s(v->json, "inputs_s", "reference_s"),
  };
  snprintf(r.reason, sizeof r.reason, "%s", v->reason ? v->reason : "");
  snprintf(r.gpu, sizeof r.gpu, "%s", v->gpu ? v->gpu : "");
  snprintf(r.other_batch_failure, sizeof r.other_batch_failure, "%s",
           v->other_batch_failure ? v->other_batch_failure : "");
  r.other_batch = v->other_batch;
  *out = r;
}

static void on_verified(void *data, const mk_verify_result *v) {
  eval_req *req = data;
  untrack_job(req->m, req->job);
  mk_eval_result r;
  session_runtime_eval_result(v, &r);
  module_state *m = req->m;
  if (req->composition && r.status != MK_EVAL_OK && r.status != MK_EVAL_CANCELLED && !m->final_failure[0])
    snprintf(m->final_failure, sizeof m->final_failure, "%s%s%.200s", mk_eval_status_name(r.status),
             r.reason[0] ? ": " : "", r.reason);
  /* The search does not accept a first composition that passed only within
   * the reference's own TF32 error (search.c, on_final): say so where the
   * kept PyTorch subkernels explain themselves. */
  if (req->composition && r.status == MK_EVAL_OK && r.ref_tf32_noise > 0 && !m->final_failure[0])
    snprintf(m->final_failure, sizeof m->final_failure,
             "it passed only within the reference's own TF32 error (%.2g), and KernelBench "
             "compares with the reference itself", r.ref_tf32_noise);
  if (req->candidate && r.status != MK_EVAL_CANCELLED) {
    m->cand_done++;
    m->cand_ok += r.status == MK_EVAL_OK;
    session_progress(m->eval.s, m);
  }
  char *report = v->json ? cJSON_PrintUnformatted(v->json) : NULL;
  r.report_json = report;
  req->cb(req->data, &r);
  free(report);
  free(req);
}

void session_runtime_candidate_options(mk_session *s, const module_state *m, mk_verify_options *o) {
  double limit = m->eval.limit_s;
  /* The user's settings as given: an explicit atol 0 stays 0. */
  *o = s->cfg.verify;
  o->seed = (int64_t)s->cfg.search.seed;
  o->device = s->rt->gpu ? MK_VERIFY_DEVICE_CUDA : MK_VERIFY_DEVICE_CPU;
  o->timing = s->rt->gpu;
  o->batch = m->batch;
  o->timeout_s = limit > 0 ? limit : s->cfg.job_timeout_s;
}

/* The search only needs to know that nothing will call back. */
static int submit_failed(eval_req *req) {
  free(req);
  return MK_EINVAL;
}

/* Deep networks (ResNet-101: 315 subkernels) would pay a torch.compile per
 * distinct subkernel before the search starts; above this many subkernels
 * each is timed eager only, and torch.compile is measured for the whole
 * program, where the comparison is made. */
#define MK_SUBKERNEL_COMPILE_MAX 24

static int evaluate(void *self, const mk_graph *g, const mk_subkernel *sk, const mk_candidate *c,
                    mk_eval_cb cb, void *data) {
  session_eval_ctx *ec = self;
  if (ec->s->rt == NULL || ec->s->rt->verify == NULL) return MK_ECANCELED; /* session closing */
  eval_req *req = malloc(sizeof *req);
  if (req == NULL) return MK_ENOMEM;
  *req = (eval_req){cb, data, ec->m, 0, .candidate = c->origin && strcmp(c->origin, "reference") != 0};
  mk_verify_options o;
  session_runtime_candidate_options(ec->s, ec->m, &o);
  o.skip_compile = ec->m->part.nsubkernels > MK_SUBKERNEL_COMPILE_MAX;
  o.compile_baselines = false; /* the other compile modes are compared on the whole program */
  mk_candidate_src src = {.source = c->source, .name = c->name, .origin = c->origin};
  mk_errmsg err = {{0}};
  /* The verifier always calls back from the loop, never from here: the id
   * can be kept after submitting. */
  if (mk_verify_submit_subkernel(ec->s->rt->verify, g, sk, &src, &o, on_verified, req, &req->job, &err))
    return submit_failed(req);
  track_job(ec->m, req->job);
  if (req->candidate) ec->m->cand_submitted++;
  return 0;
}

static int check_composition(session_eval_ctx *ec, const char *path, bool graph, mk_eval_cb cb,
                             void *data) {
  if (ec->s->rt == NULL || ec->s->rt->verify == NULL) return MK_ECANCELED; /* session closing */
  eval_req *req = malloc(sizeof *req);
  if (req == NULL) return MK_ENOMEM;
  *req = (eval_req){cb, data, ec->m, 0, .composition = true};
  mk_verify_options o;
  session_runtime_candidate_options(ec->s, ec->m, &o);
  /* a graph variant is compared with compile's own graph mode too */
  o.compile_reduce_overhead = graph;
  mk_errmsg err = {{0}};
  const char *ref = ec->m->g && ec->m->g->file ? ec->m->g->file : ec->m->path;
  if (mk_verify_submit_composition(ec->s->rt->verify, path, "ModelNew", ref,
                                   ec->m->g && ec->m->g->class_name ? ec->m->g->class_name : "Model",
                                   &o, on_verified, req, &req->job, &err))
    return submit_failed(req);
  track_job(ec->m, req->job);
  return 0;
}

static int evaluate_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  return check_composition(self, path, false, cb, data);
}

static int evaluate_graph(void *self, const char *path, mk_eval_cb cb, void *data) {
  return check_composition(self, path, true, cb, data);
}

/* A deep program's torch.compile baselines take minutes to compile at the
 * end (DenseNet-121 on an H200: about 100 s after its 150 s search): the GPU
 * worker compiles them ahead, beside the search, and the check loads them
 * (docs/verify.md, "warm_reference"). A shallow one compiles in seconds and
 * its candidates are timed against their own compiled references: left as is. */
static void prepare_check(void *self, bool graph) {
  session_eval_ctx *ec = self;
  if (ec->s->rt == NULL || ec->s->rt->verify == NULL) return;
  if (ec->m->part.nsubkernels <= MK_SUBKERNEL_COMPILE_MAX) return;
  mk_verify_options o;
  session_runtime_candidate_options(ec->s, ec->m, &o);
  const char *ref = ec->m->g && ec->m->g->file ? ec->m->g->file : ec->m->path;
  mk_errmsg err = {{0}};
  /* best effort: without it the check compiles them itself, as before */
  (void)mk_verify_warm_reference(ec->s->rt->verify, ref,
                                 ec->m->g && ec->m->g->class_name ? ec->m->g->class_name : "Model", &o,
                                 graph, &err);
}

/* Cancels every verification in flight for the module: each calls back
 * (later, from the loop) with CANCELED, or with its verdict if it was
 * already decided. */
static void cancel_all(void *self) {
  session_eval_ctx *ec = self;
  if (ec->s->rt == NULL || ec->s->rt->verify == NULL) return; /* closing cancels them all */
  for (int i = 0; i < ec->m->nverify_jobs; i++) mk_verify_cancel(ec->s->rt->verify, ec->m->verify_jobs[i]);
}

/* The search's per-job limit (its CPU plan): kept for the jobs it submits next. */
static void set_limit(void *self, double seconds) {
  session_eval_ctx *ec = self;
  ec->limit_s = seconds > 0 ? seconds : 0;
}

mk_evaluator session_runtime_evaluator(mk_session *s, module_state *m) {
  m->eval = (session_eval_ctx){s, m, 0};
  return (mk_evaluator){.self = &m->eval, .evaluate = evaluate,
                        .evaluate_composition = evaluate_composition,
                        .evaluate_graph = evaluate_graph, .prepare_check = prepare_check,
                        .cancel = cancel_all,
                        .limit = set_limit, .timed = s->rt->gpu,
                        .parallel = mk_worker_pool_gpus(s->rt->pool)};
}

/* ---- proposers ----------------------------------------------------------------- */

static void llm_log_stderr(void *data, const char *line) {
  (void)data;
  fprintf(stderr, "mkevolve: %s\n", line);
}

static bool same_str(const char *a, const char *b) {
  return (a == NULL && b == NULL) || (a && b && strcmp(a, b) == 0);
}

/* Opens the LLM client on first use, and again when the configuration
 * changed (settings edited in the editor) and nothing is in flight. The
 * session's token budget (--token-budget) becomes the client's when the
 * configuration sets none, so unusable replies count against it too. */
static int open_llm(mk_session *s, mk_errmsg *err) {
  session_runtime *rt = s->rt;
  if (rt->llm && (same_str(rt->llm_config_json, s->cfg.llm_config_json) || mk_llm_pending(rt->llm)))
    return 0;
  /* Searches of other modules may hold their slot's context between
   * proposals: the slots stay, and point at the new client below. */
  if (rt->llm) close_client(rt);
  mk_llm_config cfg;
  mk_llm_config_init(&cfg);
  int rc = 0;
  if (s->cfg.llm_config_json) {
    cJSON *j = cJSON_Parse(s->cfg.llm_config_json);
    if (!cJSON_IsObject(j)) rc = mk_errf(err, MK_EPARSE, "the LLM configuration is not a JSON object");
    else rc = mk_llm_config_from_json(&cfg, j, err);
    cJSON_Delete(j);
  }
  /* The LLM proposer's cost unit is tokens: the search's budget is the client's. */
  if (!rc && cfg.budget_tokens <= 0 && s->cfg.search.max_cost > 0)
    cfg.budget_tokens = (long)s->cfg.search.max_cost;
  if (!rc) rc = mk_llm_new(s->loop, &cfg, &rt->llm, err);
  mk_llm_config_free(&cfg);
  if (rc) return rc;
  if (s->cfg.log_stderr) mk_llm_set_log(rt->llm, llm_log_stderr, NULL);
  if (s->cfg.llm_config_json && !(rt->llm_config_json = mk_strdup(s->cfg.llm_config_json))) {
    close_client(rt);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  for (llm_slot *sl = rt->llm_slots; sl; sl = sl->next) sl->ctx.llm = rt->llm;
  return 0;
}

static llm_slot *slot_of(session_runtime *rt, const module_state *m, bool create) {
  for (llm_slot *sl = rt->llm_slots; sl; sl = sl->next)
    if (sl->m == m) return sl;
  if (!create) return NULL;
  llm_slot *sl = calloc(1, sizeof *sl);
  if (sl == NULL) return NULL;
  sl->m = m;
  sl->next = rt->llm_slots;
  rt->llm_slots = sl;
  return sl;
}

int session_runtime_proposer(mk_session *s, module_state *m, mk_proposer *out, mk_errmsg *err) {
  if (strcmp(s->cfg.proposer, "builtin") == 0) {
    *out = mk_builtin_proposer();
    return 0;
  }
  if (strcmp(s->cfg.proposer, "llm") != 0)
    return mk_errf(err, MK_EINVAL, "unknown proposer '%s' (builtin or llm)", s->cfg.proposer);
  int rc = open_llm(s, err);
  if (rc) return rc;
  session_runtime *rt = s->rt;
  llm_slot *sl = slot_of(rt, m, true);
  if (sl == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  /* module_source follows re-analysis; the memory of variants stays (keyed by node sets). */
  sl->ctx.llm = rt->llm;
  sl->ctx.module_source = m->source;
  sl->ctx.last_error = sl->error;
  *out = mk_llm_proposer(&sl->ctx);
  return 0;
}

void session_runtime_search_event(mk_session *s, module_state *m, const mk_search_event *ev) {
  llm_slot *sl = s->rt ? slot_of(s->rt, m, false) : NULL;
  if (sl == NULL || ev == NULL) return;
  if (ev->kind == MK_SEARCH_VARIANT && ev->variant)
    mk_llm_proposer_observe(&sl->ctx, &ev->variant->cand, &(mk_propose_verdict){
        .verified = ev->variant->result.status == MK_EVAL_OK,
        .time_ms = ev->variant->result.time_ms,
        .ref_eager_ms = ev->variant->result.ref_eager_ms,
        .ref_compile_ms = ev->variant->result.ref_compile_ms,
        .trials_passed = ev->variant->result.trials_passed,
        .trials = ev->variant->result.trials});
  if (ev->kind == MK_SEARCH_PROGRESS) {
    sl->fraction = ev->fraction;
    snprintf(sl->message, sizeof sl->message, "%s", ev->message ? ev->message : "");
    sl->chars = 0;
  }
}

/* Streaming text and retries, so a long LLM call shows it is alive; text
 * at most 4 times a second, retries always. */
static void on_llm_progress(void *data, const mk_llm_progress *p) {
  llm_slot *sl = data;
  if (sl->progress == NULL) return;
  uv_loop_t *loop = sl->loop;
  uint64_t now = loop ? uv_now(loop) : 0;
  char msg[512];
  if (p->kind == MK_LLM_PROGRESS_TEXT) {
    sl->chars += p->ndelta;
    if (now - sl->last_ms < 250) return;
    snprintf(msg, sizeof msg, "%s: LLM writing (%zu characters)", sl->message, sl->chars);
  } else {
    snprintf(msg, sizeof msg, "%s: LLM attempt %d failed (%s); retrying in %.1fs", sl->message,
             p->attempt, p->reason ? p->reason : "?", p->wait_s);
  }
  sl->last_ms = now;
  sl->progress(sl->progress_data, sl->fraction, msg);
}

void session_runtime_set_progress(mk_session *s, module_state *m, mk_session_progress_cb cb,
                                  void *data) {
  llm_slot *sl = s->rt ? slot_of(s->rt, m, false) : NULL;
  if (sl == NULL) return;
  sl->progress = cb;
  sl->progress_data = data;
  sl->loop = s->loop;
  sl->chars = 0;
  sl->ctx.progress = cb ? on_llm_progress : NULL;
  sl->ctx.progress_data = sl;
}

void session_runtime_forget(mk_session *s, module_state *m) {
  session_runtime *rt = s->rt;
  for (llm_slot **pp = rt ? &rt->llm_slots : NULL; pp && *pp; pp = &(*pp)->next)
    if ((*pp)->m == m) {
      llm_slot *sl = *pp;
      *pp = sl->next;
      mk_llm_proposer_reset(&sl->ctx);
      free(sl);
      return;
    }
}

cJSON *mk_session_llm_ledger(mk_session *s, bool with_calls) {
  session_runtime *rt = s->rt;
  if (rt == NULL || rt->llm == NULL) return NULL;
  cJSON *o = mk_llm_ledger_json(mk_llm_get_ledger(rt->llm), with_calls);
  if (o == NULL) return NULL;
  const mk_llm_config *c = mk_llm_get_config(rt->llm);
  cJSON_AddStringToObject(o, "provider", mk_llm_provider_name(c->provider));
  cJSON_AddStringToObject(o, "model", c->model ? c->model : "");
  cJSON_AddStringToObject(o, "endpoint", mk_llm_endpoint(rt->llm));
  return o;
}

/* The ledger of calls [from, end): one run's share of the session's. */
static cJSON *run_ledger_json(const mk_llm_ledger *l, int from) {
  mk_llm_ledger run;
  mk_llm_ledger_init(&run, l->budget_tokens, l->budget_usd);
  for (int i = from < 0 ? 0 : from; i < l->ncalls; i++) mk_llm_ledger_add(&run, &l->calls[i]);
  cJSON *o = mk_llm_ledger_json(&run, true);
  mk_llm_ledger_free(&run);
  /* The budget is the session's: say what is left of it, not of this run. */
  cJSON *full = mk_llm_ledger_json(l, false);
  if (o && full) cJSON_ReplaceItemInObjectCaseSensitive(o, "budget", cJSON_DetachItemFromObjectCaseSensitive(full, "budget"));
  cJSON_Delete(full);
  return o;
}

void session_runtime_llm_run_tokens(mk_session *s, module_state *m, long *in, long *out) {
  *in = *out = 0;
  session_runtime *rt = s->rt;
  if (rt == NULL || rt->llm == NULL || strcmp(s->cfg.proposer, "llm") != 0) return;
  llm_slot *sl = slot_of(rt, m, false);
  const mk_llm_ledger *l = mk_llm_get_ledger(rt->llm);
  for (int i = sl ? sl->run_start : 0; i < l->ncalls; i++) {
    *in += l->calls[i].u.tokens_in;
    *out += l->calls[i].u.tokens_out;
  }
}

void session_runtime_log_llm(mk_session *s, module_state *m, FILE *log, const char *event) {
  session_runtime *rt = s->rt;
  if (rt == NULL || rt->llm == NULL || strcmp(s->cfg.proposer, "llm") != 0) return;
  llm_slot *sl = slot_of(rt, m, false);
  mk_llm_ledger *l = mk_llm_get_ledger(rt->llm);
  bool start = strcmp(event, "llm_config") == 0;
  if (start && sl) sl->run_start = l->ncalls;
  if (log == NULL) return;
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", event);
  if (start) {
    cJSON_AddItemToObject(o, "config", mk_llm_config_to_json(mk_llm_get_config(rt->llm)));
    cJSON_AddStringToObject(o, "endpoint", mk_llm_endpoint(rt->llm));
  } else {
    cJSON_AddItemToObject(o, "ledger", run_ledger_json(l, sl ? sl->run_start : 0));
    cJSON *full = mk_llm_ledger_json(l, false);
    cJSON_AddItemToObject(o, "session_total", cJSON_DetachItemFromObjectCaseSensitive(full, "total"));
    cJSON_Delete(full);
  }
  char *line = cJSON_PrintUnformatted(o);
  if (line) {
    /* Everything in it already went through the client's redaction; the
     * configuration names the key's variable, never its value. */
    fprintf(log, "%s\n", line);
    fflush(log);
  }
  free(line);
  cJSON_Delete(o);
}
