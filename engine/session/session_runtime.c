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

#define MK_CPU_BATCH 2

struct session_runtime {
  mk_worker_pool *pool;
  mk_cache *cache;
  mk_verify *verify;
  mk_llm *llm;
  mk_llm_proposer_ctx llm_ctx;
  char llm_error[MK_ERRMSG_MAX];
  char device[128];
  bool gpu;
  void (*close_done)(void *data);
  void *close_data;
};

static const char *env_or(const char *name, const char *dflt) {
  const char *v = getenv(name);
  return v && *v ? v : dflt;
}

int session_runtime_open(mk_session *s, mk_errmsg *err) {
  session_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  mk_worker_config wc;
  mk_worker_config_init(&wc);
  wc.python = s->cfg.python;
  wc.pythonpath = env_or("MKEVOLVE_WORKER_PATH", NULL);
  if (strcmp(s->cfg.device, "cpu") == 0) wc.gpus = 0;
  if (s->cfg.job_timeout_s > 0) wc.request_timeout_s = s->cfg.job_timeout_s;
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
  mk_buf path;
  mk_buf_init(&path, 8192);
  if (s->cfg.cache_dir) mk_buf_printf(&path, "%s/cache.sqlite", s->cfg.cache_dir);
  else mk_cache_default_path(&path);
  mk_errmsg cerr = {{0}};
  if (mk_cache_open(mk_buf_cstr(&path), 5000, &rt->cache, &cerr))
    fprintf(stderr, "mkevolve: result cache disabled: %s\n", cerr.text);
  mk_buf_free(&path);
  rc = mk_verify_new(s->loop, rt->pool, rt->cache, &rt->verify, err);
  if (rc) {
    mk_worker_pool_close(rt->pool, NULL, NULL);
    if (rt->cache) mk_cache_close(rt->cache);
    free(rt);
    return rc;
  }
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

void session_runtime_close(mk_session *s, void (*done)(void *data), void *data) {
  session_runtime *rt = s->rt;
  rt->close_done = done;
  rt->close_data = data;
  mk_verify_close(rt->verify);
  rt->verify = NULL;
  if (rt->llm) mk_llm_close(rt->llm);
  rt->llm = NULL;
  mk_worker_pool_close(rt->pool, pool_closed, s);
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
  int rc = mk_verify_submit_capture(s->rt->verify, path, NULL, batch_for(s), s->cfg.job_timeout_s,
                                    on_capture, req, NULL, err);
  if (rc) free(req);
  return rc;
}

/* ---- evaluator ------------------------------------------------------------- */

typedef struct eval_req {
  mk_eval_cb cb;
  void *data;
} eval_req;

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
  case MK_VERIFY_CANCELED:
  case MK_VERIFY_ERROR: return MK_EVAL_ERROR;
  }
  return MK_EVAL_ERROR;
}

static void on_verified(void *data, const mk_verify_result *v) {
  eval_req *req = data;
  mk_eval_result r = {
      .status = status_of(v->status),
      .time_ms = v->ours.available ? v->ours.median_ms : -1,
      .min_ms = v->ours.available ? v->ours.min_ms : -1,
      .ref_eager_ms = v->eager.available ? v->eager.median_ms : -1,
      .ref_compile_ms = v->compiled.available ? v->compiled.median_ms : -1,
      .max_abs_err = v->max_abs_error,
      .max_rel_err = v->max_rel_error,
      .trials_passed = v->trials_passed,
      .trials = v->trials,
      .cached = v->cached,
  };
  snprintf(r.reason, sizeof r.reason, "%s", v->reason ? v->reason : "");
  char *report = v->json ? cJSON_PrintUnformatted(v->json) : NULL;
  r.report_json = report;
  req->cb(req->data, &r);
  free(report);
  free(req);
}

static void options_for(mk_session *s, const module_state *m, mk_verify_options *o) {
  mk_verify_options_init(o);
  o->trials = s->cfg.trials > 0 ? s->cfg.trials : o->trials;
  o->atol = s->cfg.atol > 0 ? s->cfg.atol : o->atol;
  o->rtol = s->cfg.rtol > 0 ? s->cfg.rtol : o->rtol;
  o->seed = (int64_t)s->cfg.seed;
  o->device = s->rt->gpu ? MK_VERIFY_DEVICE_CUDA : MK_VERIFY_DEVICE_CPU;
  o->timing = s->rt->gpu;
  o->batch = m->batch;
  o->timeout_s = s->cfg.job_timeout_s;
}

/* The search only needs to know that nothing will call back. */
static int submit_failed(eval_req *req) {
  free(req);
  return MK_EINVAL;
}

static int evaluate(void *self, const mk_graph *g, const mk_subkernel *sk, const mk_candidate *c,
                    mk_eval_cb cb, void *data) {
  session_eval_ctx *ec = self;
  if (ec->s->rt == NULL || ec->s->rt->verify == NULL) return MK_ECANCELED; /* session closing */
  eval_req *req = malloc(sizeof *req);
  if (req == NULL) return MK_ENOMEM;
  *req = (eval_req){cb, data};
  mk_verify_options o;
  options_for(ec->s, ec->m, &o);
  mk_candidate_src src = {.source = c->source, .name = c->name, .origin = c->origin};
  mk_errmsg err = {{0}};
  if (mk_verify_submit_subkernel(ec->s->rt->verify, g, sk, &src, &o, on_verified, req, NULL, &err))
    return submit_failed(req);
  return 0;
}

static int evaluate_composition(void *self, const char *path, mk_eval_cb cb, void *data) {
  session_eval_ctx *ec = self;
  if (ec->s->rt == NULL || ec->s->rt->verify == NULL) return MK_ECANCELED; /* session closing */
  eval_req *req = malloc(sizeof *req);
  if (req == NULL) return MK_ENOMEM;
  *req = (eval_req){cb, data};
  mk_verify_options o;
  options_for(ec->s, ec->m, &o);
  mk_errmsg err = {{0}};
  const char *ref = ec->m->g && ec->m->g->file ? ec->m->g->file : ec->m->path;
  if (mk_verify_submit_composition(ec->s->rt->verify, path, "ModelNew", ref,
                                   ec->m->g && ec->m->g->class_name ? ec->m->g->class_name : "Model",
                                   &o, on_verified, req, NULL, &err))
    return submit_failed(req);
  return 0;
}

mk_evaluator session_runtime_evaluator(mk_session *s, module_state *m) {
  m->eval = (session_eval_ctx){s, m};
  return (mk_evaluator){.self = &m->eval, .evaluate = evaluate,
                        .evaluate_composition = evaluate_composition, .timed = s->rt->gpu};
}

/* ---- proposers ----------------------------------------------------------------- */

static int open_llm(mk_session *s, mk_errmsg *err) {
  session_runtime *rt = s->rt;
  if (rt->llm) return 0;
  mk_llm_config cfg;
  mk_llm_config_init(&cfg);
  int rc = 0;
  if (s->cfg.llm_config_json) {
    cJSON *j = cJSON_Parse(s->cfg.llm_config_json);
    if (j == NULL) rc = mk_errf(err, MK_EPARSE, "the LLM configuration is not valid JSON");
    else rc = mk_llm_config_from_json(&cfg, j, err);
    cJSON_Delete(j);
  }
  if (!rc) rc = mk_llm_new(s->loop, &cfg, &rt->llm, err);
  mk_llm_config_free(&cfg);
  return rc;
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
  rt->llm_ctx = (mk_llm_proposer_ctx){.llm = rt->llm, .module_source = m->source,
                                      .last_error = rt->llm_error};
  *out = mk_llm_proposer(&rt->llm_ctx);
  return 0;
}
