/* session.c — module state, views, analyze/evolve/swap/compose.
 *
 * The runtime (workers, capture, verification) sits behind
 * session_runtime.c; this file only keeps per-module state and runs the
 * search. */
#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_frontend.h"
#include "mk_sha256.h"
#include "mk_verify.h"
#include "mk_worker.h"
#include "session_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void mk_session_config_defaults(mk_session_config *c) {
  memset(c, 0, sizeof *c);
  mk_search_config_defaults(&c->search);
  mk_verify_options_init(&c->verify);
  c->device = "auto";
  c->proposer = "builtin";
  c->batch = 0;
  c->job_timeout_s = 300;
  mk_worker_config wc; /* the pool's own default, not a copy of it */
  mk_worker_config_init(&wc);
  c->start_timeout_s = wc.hello_timeout_s;
}

/* Copies the config's strings so callers may free theirs. */
static int own_config(mk_session *s, const mk_session_config *cfg) {
  const char *src[8] = {cfg->python, cfg->device, cfg->proposer, cfg->llm_config_json,
                        cfg->cache_dir, cfg->workdir, NULL, NULL};
  char *copy[8] = {0};
  for (int i = 0; i < 6; i++)
    if (src[i] && (copy[i] = mk_strdup(src[i])) == NULL) {
      for (int k = 0; k < i; k++) free(copy[k]);
      return MK_ENOMEM;
    }
  for (int i = 0; i < 8; i++) free(s->cfg_strings[i]);
  memcpy(s->cfg_strings, copy, sizeof copy);
  mk_session_config dflt; /* what a NULL string means: the default, defined once */
  mk_session_config_defaults(&dflt);
  s->cfg = *cfg;
  s->cfg.python = copy[0];
  s->cfg.device = copy[1] ? copy[1] : dflt.device;
  s->cfg.proposer = copy[2] ? copy[2] : dflt.proposer;
  s->cfg.llm_config_json = copy[3];
  s->cfg.cache_dir = copy[4];
  s->cfg.workdir = copy[5];
  /* The search's per-run fields are each evolve's own: keep no caller pointer. */
  s->cfg.search.device = s->cfg.search.workdir = s->cfg.search.source_path = NULL;
  s->cfg.search.input_names = NULL;
  s->cfg.search.log = NULL;
  s->cfg.search.prior = NULL;
  return 0;
}

int mk_session_new(uv_loop_t *loop, const mk_session_config *cfg, mk_session **out,
                   mk_errmsg *err) {
  mk_session *s = calloc(1, sizeof *s);
  if (s == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  s->loop = loop;
  s->next_job = 1;
  mk_session_config dflt;
  mk_session_config_defaults(&dflt);
  int rc = own_config(s, cfg ? cfg : &dflt);
  if (!rc) rc = session_runtime_open(s, err);
  if (rc) {
    for (int i = 0; i < 8; i++) free(s->cfg_strings[i]);
    free(s);
    return rc == MK_ENOMEM ? mk_errf(err, rc, "out of memory") : rc;
  }
  *out = s;
  return 0;
}

int mk_session_set_config(mk_session *s, const mk_session_config *cfg, mk_errmsg *err) {
  int rc = own_config(s, cfg);
  return rc ? mk_errf(err, rc, "out of memory") : 0;
}

/* ---- module state ---------------------------------------------------------- */

static void module_clear_views(module_state *m) {
  for (int i = 0; i < m->nstrings; i++) free(m->strings[i]);
  m->nstrings = 0;
  free(m->sk_views);
  free(m->var_views);
  free(m->line_pool);
  m->sk_views = NULL;
  m->var_views = NULL;
  m->line_pool = NULL;
}

static void module_clear_search(module_state *m) {
  for (int i = 0; m->st && i < m->part.nsubkernels; i++) {
    for (int k = 0; k < m->st[i].nvariants; k++) {
      mk_candidate_free(&m->st[i].variants[k].cand);
      free(m->st[i].variants[k].report);
    }
    free(m->st[i].variants);
  }
  free(m->st);
  m->st = NULL;
  mk_partition_free(&m->part);
}

static void free_input_names(module_state *m) {
  for (int i = 0; i < m->ninput_names; i++) free(m->input_names[i]);
  free(m->input_names);
  m->input_names = NULL;
  m->ninput_names = 0;
  m->forward_takes_more = false;
}

/* forward's plain parameter names (self, *args and **kw excluded) so the
 * composed forward reads like the user's. Best effort: on any doubt the
 * composer falls back to x0, x1, ... */
static void read_input_names(module_state *m) {
  free_input_names(m);
  mk_pyoutline o;
  const char *cls = m->g && m->g->class_name ? m->g->class_name : "Model";
  if (mk_frontend_outline_text(m->source, strlen(m->source), cls, &o, NULL)) return;
  const mk_pyclass *c = mk_pyoutline_class(&o, cls);
  if (c && c->forward.nparams > 1) {
    m->input_names = calloc((size_t)c->forward.nparams, sizeof *m->input_names);
    for (int i = 1; m->input_names && i < c->forward.nparams; i++) {
      const char *p = c->forward.params[i];
      if (p[0] == '*' || strchr(p, '=') || strchr(p, ':')) {
        m->forward_takes_more = true;
        break;
      }
      m->input_names[m->ninput_names++] = mk_strdup(p);
    }
  }
  mk_pyoutline_free(&o);
}

static void remove_unsaved(const char *file);

static void module_free(module_state *m) {
  remove_unsaved(m->capture_file);
  free(m->capture_file);
  free(m->verify_jobs);
  free_input_names(m);
  module_clear_views(m);
  module_clear_search(m);
  mk_graph_free(m->g);
  free(m->strings);
  free(m->path);
  free(m->source);
  free(m->modelnew_path);
  free(m->run_log);
  free(m);
}

module_state *session_module(mk_session *s, const char *path, bool create) {
  for (module_state *m = s->modules; m; m = m->next)
    if (strcmp(m->path, path) == 0) return m;
  if (!create) return NULL;
  module_state *m = calloc(1, sizeof *m);
  if (m == NULL || (m->path = mk_strdup(path)) == NULL) {
    free(m);
    return NULL;
  }
  m->eager_ms = m->compile_ms = m->ours_ms = m->gpu_fraction = -1;
  m->compile_max_ms = m->compile_ro_ms = m->compile_err = -1;
  m->gpu[0] = '\0';
  m->running_subkernel = -1;
  m->next = s->modules;
  s->modules = m;
  return m;
}

void mk_session_forget(mk_session *s, const char *path) {
  for (module_state **pp = &s->modules; *pp; pp = &(*pp)->next) {
    if (strcmp((*pp)->path, path) != 0) continue;
    module_state *m = *pp;
    if (m->search) {
      mk_search_cancel(m->search); /* the done callback frees it later */
      return;
    }
    *pp = m->next;
    session_runtime_forget(s, m);
    module_free(m);
    return;
  }
}

/* Keeps a formatted string alive as long as the views. */
static const char *keep(module_state *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static const char *keep(module_state *m, const char *fmt, ...) {
  if (m->nstrings == m->capstrings) {
    int cap = m->capstrings ? m->capstrings * 2 : 64;
    char **p = realloc(m->strings, sizeof *p * (size_t)cap);
    if (p == NULL) return "";
    m->strings = p;
    m->capstrings = cap;
  }
  va_list ap;
  va_start(ap, fmt);
  char *s = mk_strdup_vprintf(fmt, ap);
  va_end(ap);
  if (s == NULL) return "";
  m->strings[m->nstrings++] = s;
  return s;
}

static double speedup(double base, double t) { return base > 0 && t > 0 ? base / t : -1; }

static void variant_view(const mk_variant *v, const mk_variant *ref, bool chosen,
                         mk_session_variant *out) {
  const mk_eval_result *r = &v->result;
  double eager = r->ref_eager_ms > 0 ? r->ref_eager_ms : ref->result.time_ms;
  double compile = r->ref_compile_ms > 0 ? r->ref_compile_ms : ref->result.ref_compile_ms;
  *out = (mk_session_variant){
      .name = v->cand.name ? v->cand.name : "?",
      .origin = v->cand.origin ? v->cand.origin : "?",
      .backend = mk_candidate_backend(&v->cand),
      .status = mk_eval_status_name(r->status),
      .reason = r->status == MK_EVAL_OK ? "" : r->reason,
      .time_ms = r->time_ms,
      .min_ms = r->min_ms,
      .speedup_eager = speedup(eager, r->time_ms),
      .speedup_compile = speedup(compile, r->time_ms),
      .max_abs_err = r->max_abs_err,
      .ref_tf32_noise = r->ref_tf32_noise,
      .trials_passed = r->trials_passed,
      .trials = r->trials,
      .tokens = (long)v->cand.cost, /* the LLM proposer's cost is tokens; the builtin's 0 */
      .gpu = r->gpu,
      .chosen = chosen,
  };
}

static mk_sk_state subkernel_state(const module_state *m, int i) {
  if (m->job && (m->running_subkernel < 0 || m->running_subkernel == i)) return MK_SK_RUNNING;
  const mk_subkernel_state *st = &m->st[i];
  if (st->chosen > 0) return MK_SK_VERIFIED;
  bool tried = false, any_ok = false;
  for (int k = 1; k < st->nvariants; k++) {
    tried = true;
    any_ok |= st->variants[k].result.status == MK_EVAL_OK;
  }
  if (!tried) return MK_SK_REFERENCE;
  return any_ok ? MK_SK_SLOWER : MK_SK_FAILED;
}

/* Why no variant of subkernel v verified: how many failed in which way,
 * and the first reason ("3 tried: 2 timeout, 1 mismatch; first: ..."). */
static const char *failed_summary(module_state *m, const mk_session_subkernel *v) {
  int count[MK_EVAL_CANCELLED + 1] = {0};
  const char *first = NULL;
  for (int k = 1; k < v->nvariants; k++) {
    const mk_eval_result *r = &m->st[v->index].variants[k].result;
    if ((unsigned)r->status <= MK_EVAL_CANCELLED) count[r->status]++;
    if (first == NULL && r->reason[0]) first = r->reason;
  }
  mk_buf b;
  mk_buf_init(&b, 4096);
  mk_buf_printf(&b, "no verified variant (%d tried:", v->nvariants - 1);
  const char *sep = " ";
  for (int st = 0; st <= MK_EVAL_CANCELLED; st++)
    if (count[st]) {
      mk_buf_printf(&b, "%s%d %s", sep, count[st], mk_eval_status_name((mk_eval_status)st));
      sep = ", ";
    }
  mk_buf_printf(&b, ")%s%.200s", first ? "; first: " : "", first ? first : "");
  const char *out = keep(m, "%s", mk_buf_cstr(&b));
  mk_buf_free(&b);
  return out;
}

/* Why the PyTorch reference stayed although a variant verified: the whole
 * program failed its check with it (reverted), or, when timed, none was
 * faster. On the CPU nothing is timed, so "slower" is never the reason. */
static const char *kept_summary(module_state *m, const mk_session_subkernel *v) {
  int ok = 0;
  double best = -1;
  for (int k = 1; k < v->nvariants; k++) {
    const mk_session_variant *x = &v->variants[k];
    if (strcmp(x->status, "ok") != 0) continue;
    ok++;
    if (x->time_ms > 0 && (best < 0 || x->time_ms < best)) best = x->time_ms;
  }
  double ref = v->variants[0].time_ms;
  bool timed = m->view.timed;
  if (!timed || (best > 0 && ref > 0 && best < ref)) {
    if (m->final_failure[0])
      return keep(m, "%d of %d tried verified alone, but the composed program failed its "
                     "whole-program check (%.200s): reverted to PyTorch",
                  ok, v->nvariants - 1, m->final_failure);
    if (!timed)
      return keep(m, "%d of %d tried verified; PyTorch kept (no timings on the CPU to choose by)", ok,
                  v->nvariants - 1);
    return keep(m, "%d verified, the fastest %.3f ms vs PyTorch %.3f ms, but the composed program "
                   "as a whole was not faster than eager: PyTorch kept", ok, best, ref);
  }
  if (best > 0 && ref > 0)
    return keep(m, "slower: the fastest of %d verified %.3f ms vs PyTorch %.3f ms", ok, best, ref);
  return keep(m, "%d verified, none faster than PyTorch", ok);
}

static const char *summary(module_state *m, const mk_session_subkernel *v) {
  if (v->nvariants == 0) return "PyTorch reference";
  const mk_session_variant *c = &v->variants[v->chosen];
  const mk_subkernel_state *st = &m->st[v->index];
  switch (v->state) {
  case MK_SK_RUNNING: return "evolving…";
  case MK_SK_REFERENCE:
    if (st->plan_reason[0]) return keep(m, "%s", st->plan_reason);
    if (st->unsupported)
      return keep(m, "PyTorch reference: the proposer has no kernel for it (%s)", st->unsupported_reason);
    return "PyTorch reference (not evolved: no candidate was tried)";
  case MK_SK_FAILED: return failed_summary(m, v);
  case MK_SK_SLOWER: return st->planned_out ? keep(m, "%s", st->plan_reason) : kept_summary(m, v);
  case MK_SK_VERIFIED: break;
  }
  if (c->speedup_eager > 0 && c->speedup_compile > 0)
    return keep(m, "%s: %.2fx vs eager, %.2fx vs torch.compile, verified %d/%d", c->name,
                c->speedup_eager, c->speedup_compile, c->trials_passed, c->trials);
  if (c->speedup_eager > 0)
    return keep(m, "%s: %.2fx vs eager, verified %d/%d", c->name, c->speedup_eager,
                c->trials_passed, c->trials);
  return keep(m, "%s: verified %d/%d (untimed on %s)", c->name, c->trials_passed, c->trials,
              m->view.device ? m->view.device : "cpu");
}

static const char *ops_of(module_state *m, const mk_subkernel *sk) {
  mk_buf b;
  mk_buf_init(&b, 4096);
  for (int i = 0; i < sk->nnodes && i < 12; i++) {
    char tmp[64];
    if (i) mk_buf_puts(&b, " + ");
    mk_buf_puts(&b, mk_op_short_name(m->g->nodes[sk->nodes[i]].op, tmp, sizeof tmp));
  }
  if (sk->nnodes > 12) mk_buf_printf(&b, " + … (%d ops)", sk->nnodes);
  const char *s = keep(m, "%s", mk_buf_cstr(&b));
  mk_buf_free(&b);
  return s;
}

/* Fills `lines` (room for sk->nnodes) with the distinct source lines the
 * subkernel covers, ascending; returns how many. */
static int lines_of(const module_state *m, const mk_subkernel *sk, int *lines) {
  int n = 0;
  for (int i = 0; i < sk->nnodes; i++) {
    int line = m->g->nodes[sk->nodes[i]].span.line;
    int seen = 0;
    for (int k = 0; k < n; k++) seen |= lines[k] == line;
    if (!seen && line > 0) lines[n++] = line;
  }
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && lines[j] < lines[j - 1]; j--) {
      int t = lines[j];
      lines[j] = lines[j - 1];
      lines[j - 1] = t;
    }
  return n;
}

void session_module_refresh_views(mk_session *s, module_state *m) {
  module_clear_views(m);
  int n = m->part.nsubkernels, nv = 0, nl = 0;
  for (int i = 0; i < n; i++) nv += m->st[i].nvariants;
  for (int i = 0; i < n; i++) nl += m->part.subkernels[i].nnodes;
  m->sk_views = calloc((size_t)n + 1, sizeof *m->sk_views);
  m->var_views = calloc((size_t)nv + 1, sizeof *m->var_views);
  m->line_pool = calloc((size_t)nl + 1, sizeof *m->line_pool);
  m->view = (mk_session_module){
      .path = m->path,
      .class_name = m->g && m->g->class_name ? m->g->class_name : "Model",
      .device = session_runtime_device(s),
      .timed = session_runtime_timed(s),
      .note = m->note,
      .subkernels = m->sk_views,
      .nsubkernels = m->sk_views ? n : 0,
      .modelnew_path = m->modelnew_path,
      .run_log = m->run_log,
      .eager_ms = m->eager_ms,
      .compile_ms = m->compile_ms,
      .compile_max_ms = m->compile_max_ms,
      .compile_ro_ms = m->compile_ro_ms,
      .compile_check = m->compile_check,
      .compile_err = m->compile_err,
      .compile_note = m->compile_note,
      .moves = m->moves,
      .native_evals = m->native_evals,
      .ours_ms = m->ours_ms,
      .gpu_fraction = m->gpu_fraction,
      .gpu = m->gpu,
      .tokens_in = m->tokens_in,
      .tokens_out = m->tokens_out,
  };
  if (m->sk_views == NULL || m->var_views == NULL || m->line_pool == NULL) return;
  mk_session_variant *vv = m->var_views;
  int *lines = m->line_pool;
  for (int i = 0; i < n; i++) {
    const mk_subkernel *sk = &m->part.subkernels[i];
    mk_subkernel_state *st = &m->st[i];
    mk_session_subkernel *v = &m->sk_views[i];
    for (int k = 0; k < st->nvariants; k++)
      variant_view(&st->variants[k], &st->variants[0], k == st->chosen, &vv[k]);
    int nlines = lines_of(m, sk, lines);
    *v = (mk_session_subkernel){.index = i, .name = sk->name, .ops = ops_of(m, sk),
                                .first_line = sk->first_line, .last_line = sk->last_line,
                                .lines = lines, .nlines = nlines, .variants = vv,
                                .nvariants = st->nvariants, .chosen = st->chosen};
    v->state = subkernel_state(m, i);
    v->summary = summary(m, v);
    vv += st->nvariants;
    lines += sk->nnodes;
  }
}

const char *mk_session_device(mk_session *s) { return session_runtime_device(s); }

const mk_session_module *mk_session_get(mk_session *s, const char *path) {
  module_state *m = session_module(s, path, false);
  return m && m->g ? &m->view : NULL;
}

/* ---- analyze ---------------------------------------------------------------- */

typedef struct analyze_req {
  mk_session *s;
  char *path;
  char *source;
  char *capture_file;  /* private copy of unsaved text, NULL: the file itself */
  mk_session_cb cb;
  void *data;
} analyze_req;

static void analyze_req_free(analyze_req *req) {
  free(req->path);
  free(req->source);
  free(req->capture_file);
  free(req);
}

/* Deletes a private copy of unsaved text and its folder. */
static void remove_unsaved(const char *file) {
  if (file == NULL) return;
  unlink(file);
  const char *slash = strrchr(file, '/');
  if (slash == NULL) return;
  char dir[4096];
  if ((size_t)(slash - file) >= sizeof dir) return;
  memcpy(dir, file, (size_t)(slash - file));
  dir[slash - file] = '\0';
  rmdir(dir); /* fails harmlessly when something else is in it */
}

static void free_states(mk_partition *part, mk_subkernel_state *st) {
  for (int j = 0; st && j < part->nsubkernels; j++) {
    for (int k = 0; k < st[j].nvariants; k++) {
      mk_candidate_free(&st[j].variants[k].cand);
      free(st[j].variants[k].report);
    }
    free(st[j].variants);
  }
  free(st);
  mk_partition_free(part);
}

/* Moves the states of old subkernels whose reference code is identical to
 * a new subkernel's (same ops, shapes and parameters) onto it, so an edit
 * elsewhere in the file (a comment, another statement) keeps the variants
 * verified for the unchanged parts. */
static void carry_states(module_state *m, mk_partition *old_part, mk_subkernel_state *old_st) {
  for (int i = 0; old_st && i < m->part.nsubkernels; i++) {
    const char *ref = m->st[i].nvariants ? m->st[i].variants[0].cand.source : NULL;
    if (ref == NULL) continue;
    for (int j = 0; j < old_part->nsubkernels; j++) {
      const char *o = old_st[j].nvariants ? old_st[j].variants[0].cand.source : NULL;
      if (o == NULL || strcmp(o, ref) != 0) continue;
      mk_subkernel_state tmp = m->st[i];
      m->st[i] = old_st[j];
      old_st[j] = tmp; /* the fresh state is freed with the old ones */
      break;
    }
  }
  free_states(old_part, old_st);
}

/* The worker's message with the private copy's path replaced by the
 * module's, so errors name the file the user edits. */
static void user_message(const char *msg, const char *capture_file, const char *path, mk_buf *out) {
  if (capture_file == NULL) {
    mk_buf_puts(out, msg);
    return;
  }
  size_t n = strlen(capture_file);
  for (const char *p = msg, *hit; *p; p = hit + n) {
    hit = strstr(p, capture_file);
    if (hit == NULL) {
      mk_buf_puts(out, p);
      return;
    }
    mk_buf_append(out, p, (size_t)(hit - p));
    mk_buf_puts(out, path);
  }
}

static int fresh_states(module_state *m, mk_errmsg *err) {
  m->st = calloc((size_t)m->part.nsubkernels + 1, sizeof *m->st);
  if (m->st == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  for (int i = 0; i < m->part.nsubkernels; i++) {
    mk_candidate ref = {0};
    if (mk_reference_candidate(m->g, &m->part.subkernels[i], &ref, NULL)) {
      ref.name = mk_strdup("reference");
      ref.origin = mk_strdup("reference");
    }
    m->st[i].variants = calloc(1, sizeof *m->st[i].variants);
    if (m->st[i].variants == NULL) {
      mk_candidate_free(&ref);
      return mk_errf(err, MK_ENOMEM, "out of memory");
    }
    m->st[i].nvariants = m->st[i].cap = 1;
    m->st[i].variants[0].cand = ref;
    m->st[i].variants[0].result = (mk_eval_result){.status = MK_EVAL_OK, .time_ms = -1,
                                                   .min_ms = -1, .ref_eager_ms = -1,
                                                   .ref_compile_ms = -1};
  }
  return 0;
}

/* Direct synthesis (--monolithic): one subkernel over every node, so the
 * same search writes the whole forward at once (modular vs monolithic
 * comparisons of tokens and results). */
static int monolithic_partition(const mk_graph *g, mk_partition *out, mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  int *nodes = malloc(sizeof *nodes * ((size_t)g->nnodes + 1));
  out->subkernels = calloc(1, sizeof *out->subkernels);
  if (nodes == NULL || out->subkernels == NULL) {
    free(nodes);
    free(out->subkernels);
    out->subkernels = NULL;
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  for (int i = 0; i < g->nnodes; i++) nodes[i] = i;
  int rc = mk_subkernel_from_nodes(g, nodes, g->nnodes, &out->subkernels[0], err);
  free(nodes);
  if (!rc) out->nsubkernels = 1;
  if (!rc) rc = mk_partition_validate(g, out, err);
  if (rc) mk_partition_free(out);
  return rc;
}

static void on_captured(void *data, int status, mk_graph *g, int batch, const char *error) {
  analyze_req *req = data;
  mk_session *s = req->s;
  module_state *m = session_module(s, req->path, true);
  mk_errmsg err = {{0}};
  int rc = status;
  if (m == NULL) rc = mk_errf(&err, MK_ENOMEM, "out of memory");
  if (!rc && m->job) rc = mk_errf(&err, MK_EBUSY, "an evolve job is running on this module");
  if (!rc) {
    mk_partition part = {0};
    rc = s->cfg.monolithic ? monolithic_partition(g, &part, &err) : mk_decompose_initial(g, &part, &err);
    if (!rc) {
      mk_partition old_part = m->part;
      mk_subkernel_state *old_st = m->st;
      m->st = NULL;
      memset(&m->part, 0, sizeof m->part);
      mk_graph_free(m->g);
      m->g = g;
      g = NULL;
      m->part = part;
      free(m->source);
      m->source = req->source;
      req->source = NULL;
      /* The previous private copy goes unless this capture read the same one. */
      if (m->capture_file && (req->capture_file == NULL || strcmp(m->capture_file, req->capture_file) != 0))
        remove_unsaved(m->capture_file);
      free(m->capture_file);
      m->capture_file = req->capture_file;
      req->capture_file = NULL;
      m->batch = batch;
      read_input_names(m);
      if (batch > 0) snprintf(m->note, sizeof m->note, "reduced batch %d on %s", batch, session_runtime_device(s));
      else m->note[0] = '\0';
      if (s->cfg.monolithic) {
        size_t len = strlen(m->note);
        snprintf(m->note + len, sizeof m->note - len, "%smonolithic (whole module as one subkernel)",
                 len ? "; " : "");
      }
      rc = fresh_states(m, &err);
      if (!rc) carry_states(m, &old_part, old_st);
      else {
        module_clear_search(m); /* the partial fresh states */
        free_states(&old_part, old_st);
      }
      session_module_refresh_views(s, m);
    }
  }
  mk_graph_free(g);
  /* A private copy nobody adopted is not needed any more. */
  if (req->capture_file && !(m && m->capture_file && strcmp(m->capture_file, req->capture_file) == 0))
    remove_unsaved(req->capture_file);
  mk_buf msg;
  mk_buf_init(&msg, 1 << 16);
  if (rc) user_message(error && *error ? error : err.text[0] ? err.text : mk_strerror(rc), req->capture_file,
                       req->path, &msg);
  req->cb(req->data, rc, rc ? NULL : &m->view, rc ? mk_buf_cstr(&msg) : NULL);
  mk_buf_free(&msg);
  analyze_req_free(req);
}

/* The work directory for module `path`: config's, else .mkevolve/<file
 * stem> beside the module. Created if missing. */
int session_workdir(mk_session *s, const char *path, bool create, char *out, size_t size) {
  const char *slash = strrchr(path, '/');
  const char *stem = slash ? slash + 1 : path;
  int dirlen = slash ? (int)(slash - path) : 1;
  int n;
  if (s->cfg.workdir) n = snprintf(out, size, "%s", s->cfg.workdir);
  else n = snprintf(out, size, "%.*s/.mkevolve", dirlen, slash ? path : ".");
  if (n < 0 || (size_t)n >= size) return MK_ERANGE;
  if (create) mkdir(out, 0755);
  size_t len = strlen(out);
  n = snprintf(out + len, size - len, "/%.*s", (int)strcspn(stem, "."), stem);
  if (n < 0 || (size_t)n >= size - len) return MK_ERANGE;
  if (create) mkdir(out, 0755);
  return 0;
}

static int path_workdir(mk_session *s, const char *path, char *out, size_t size) {
  return session_workdir(s, path, true, out, size);
}

/* Writes unsaved `text` of module `path` to <workdir>/unsaved-<sha>/<file
 * name>: the same name, so the worker sees the same module name and line
 * numbers; a folder per content, so a copy an evolve still uses is never
 * overwritten. */
static int write_unsaved(mk_session *s, const char *path, const char *text, char **out, mk_errmsg *err) {
  char dir[4096], hex[65];
  if (path_workdir(s, path, dir, sizeof dir)) return mk_errf(err, MK_ERANGE, "work directory path too long");
  mk_sha256_hex(text, strlen(text), hex);
  const char *slash = strrchr(path, '/');
  mk_buf b;
  mk_buf_init(&b, 8192);
  mk_buf_printf(&b, "%s/unsaved-%.16s", dir, hex);
  if (!b.err && mkdir(mk_buf_cstr(&b), 0700) != 0 && errno != EEXIST) {
    int e = errno;
    mk_errf(err, MK_EIO, "cannot create %s: %s", mk_buf_cstr(&b), strerror(e));
    mk_buf_free(&b);
    return MK_EIO;
  }
  mk_buf_printf(&b, "/%s", slash ? slash + 1 : path);
  int rc = b.err ? MK_ERANGE : mk_write_file(mk_buf_cstr(&b), text, strlen(text));
  if (rc) {
    mk_errf(err, rc, "cannot write the unsaved text to %s: %s", mk_buf_cstr(&b), mk_strerror(rc));
    mk_buf_free(&b);
    return rc;
  }
  *out = mk_buf_steal(&b, NULL);
  return *out ? 0 : mk_errf(err, MK_ENOMEM, "out of memory");
}

int mk_session_analyze(mk_session *s, const char *path, const char *text, mk_session_cb cb,
                       void *data, mk_errmsg *err) {
  analyze_req *req = calloc(1, sizeof *req);
  if (req == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  req->s = s;
  req->cb = cb;
  req->data = data;
  req->path = mk_strdup(path);
  size_t len = 0;
  char *disk = NULL;
  int rc = mk_read_file(path, (size_t)64 << 20, &disk, &len);
  if (text == NULL) {
    req->source = disk;
    disk = NULL;
  } else {
    req->source = mk_strdup(text);
    /* Unsaved text (the file differs or is missing): capture a private copy. */
    if (req->source && (rc || strcmp(disk, text) != 0)) rc = write_unsaved(s, path, text, &req->capture_file, err);
    else rc = 0;
    if (rc) {
      free(disk);
      analyze_req_free(req);
      return rc;
    }
  }
  free(disk);
  if (rc || req->path == NULL || req->source == NULL) {
    analyze_req_free(req);
    return mk_errf(err, rc ? rc : MK_ENOMEM, "cannot read %s: %s", path, mk_strerror(rc ? rc : MK_ENOMEM));
  }
  rc = session_runtime_capture(s, req->capture_file ? req->capture_file : path, on_captured, req, err);
  if (rc) {
    remove_unsaved(req->capture_file);
    analyze_req_free(req);
  }
  return rc;
}

/* ---- evolve ----------------------------------------------------------------- */

typedef struct evolve_req {
  mk_session *s;
  module_state *m;
  mk_session_progress_cb progress;
  mk_session_cb done;
  void *data;
  FILE *log;
  int only;
} evolve_req;

/* "1m05s" */
static void fmt_duration(char *out, size_t n, double secs) {
  long t = (long)(secs + 0.5);
  if (t >= 3600) snprintf(out, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
  else if (t >= 60) snprintf(out, n, "%ldm%02lds", t / 60, t % 60);
  else snprintf(out, n, "%lds", t);
}

/* The ETA, from two estimates, whichever is longer: the search's fraction
 * extrapolated over the time so far (once it moved past the reference
 * phase), and the candidates still in flight at the mean time per verdict
 * so far. < 0 when neither is known yet. */
static double progress_eta(const module_state *m, double elapsed) {
  if (m->plan_eta_s >= 0) { /* the CPU plan's own estimate, less the time since it was made */
    double left = m->plan_eta_s - (elapsed - m->plan_eta_at);
    return left > 0 ? left : 0;
  }
  double eta = -1;
  if (m->fraction > 0.06 && m->fraction < 1) eta = elapsed * (1 - m->fraction) / m->fraction;
  if (m->cand_done > 0) {
    double flight = elapsed / m->cand_done * (m->cand_submitted - m->cand_done);
    if (flight > eta) eta = flight;
  }
  return eta;
}

void session_progress(mk_session *s, module_state *m) {
  (void)s;
  if (m->progress == NULL) return;
  double elapsed = (double)uv_hrtime() * 1e-9 - m->evolve_t0;
  char el[32], eta[32], msg[512];
  fmt_duration(el, sizeof el, elapsed);
  double e = progress_eta(m, elapsed);
  if (e >= 0) fmt_duration(eta, sizeof eta, e);
  int n = snprintf(msg, sizeof msg, "%s", m->phase);
  int total = m->plan_candidates > m->cand_submitted ? m->plan_candidates : m->cand_submitted;
  if (total > 0 && n >= 0 && (size_t)n < sizeof msg)
    n += snprintf(msg + n, sizeof msg - (size_t)n, " | candidates %d/%d done, %d verified", m->cand_done,
                  total, m->cand_ok);
  if (n >= 0 && (size_t)n < sizeof msg)
    snprintf(msg + n, sizeof msg - (size_t)n, " | %s%s%s", el, e >= 0 ? ", ETA ~" : "", e >= 0 ? eta : "");
  m->progress(m->progress_data, m->fraction, msg);
}

static void on_search_event(void *data, const mk_search_event *ev) {
  evolve_req *req = data;
  if (ev->kind == MK_SEARCH_PROGRESS) {
    req->m->fraction = ev->fraction;
    req->m->plan_candidates = ev->cand_planned;
    req->m->plan_eta_s = ev->eta_s;
    req->m->plan_eta_at = (double)uv_hrtime() * 1e-9 - req->m->evolve_t0;
    snprintf(req->m->phase, sizeof req->m->phase, "%s", ev->message ? ev->message : "");
    session_progress(req->s, req->m);
  }
  session_runtime_search_event(req->s, req->m, ev); /* LLM proposer: verdicts, progress text */
}

/* The fraction of the device's limit the composed program reaches, from
 * the ceilings in the final verification's report (timing.limits). */
static double roofline_fraction(const mk_graph *g, const char *report, double ours_ms) {
  if (g == NULL || report == NULL || ours_ms <= 0) return -1;
  cJSON *j = cJSON_Parse(report);
  const cJSON *lim = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "timing"), "limits");
  const cJSON *flops = cJSON_GetObjectItemCaseSensitive(lim, "matmul_flops_tf32");
  const cJSON *bw = cJSON_GetObjectItemCaseSensitive(lim, "copy_bandwidth");
  mk_graph_cost_t cost;
  double f = -1;
  if (cJSON_IsNumber(flops) && cJSON_IsNumber(bw) && mk_graph_cost(g, &cost) == 0)
    f = mk_roofline_fraction(&cost, flops->valuedouble, bw->valuedouble, ours_ms);
  cJSON_Delete(j);
  return f;
}

static void adopt_result(module_state *m, mk_search_result *r) {
  module_clear_search(m);
  m->part = r->partition;
  memset(&r->partition, 0, sizeof r->partition);
  m->st = r->states;
  r->states = NULL;
  free(m->modelnew_path);
  m->modelnew_path = r->modelnew_path;
  r->modelnew_path = NULL;
  m->moves = (mk_session_moves){.merges_tried = r->merges_tried, .merges_won = r->merges,
                                .splits_tried = r->splits_tried, .splits_won = r->splits,
                                .fused = r->fused, .cuda_graph = r->cuda_graph};
  m->native_evals = r->native_evals;
  m->fixed_shapes = r->fixed_shapes;
  m->plain_subclass = r->plain_subclass;
  if (r->final.status == MK_EVAL_OK) {
    m->ours_ms = r->final.time_ms;
    m->eager_ms = r->final.ref_eager_ms;
    m->compile_ms = r->final.ref_compile_ms;
    m->compile_max_ms = r->final.ref_compile_max_ms > 0 ? r->final.ref_compile_max_ms : -1;
    m->compile_ro_ms = r->final.ref_compile_ro_ms > 0 ? r->final.ref_compile_ro_ms : -1;
    m->compile_check = r->final.compile_check;
    m->compile_err = r->final.compile_max_abs_err;
    mk_verify_compile_check_note(m->compile_check, m->compile_err, m->compile_note, sizeof m->compile_note);
    m->gpu_fraction = roofline_fraction(m->g, r->final_report, r->final.time_ms);
    snprintf(m->gpu, sizeof m->gpu, "%s", r->final.gpu);
  }
}

static void on_search_done(void *data, int status, mk_search_result *r, const char *error) {
  evolve_req *req = data;
  module_state *m = req->m;
  m->search = NULL;
  m->job = 0;
  m->progress = NULL;
  session_runtime_set_progress(req->s, m, NULL, NULL);
  /* `error` may point into r: keep a copy past its release. */
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", error ? error : "");
  if (r) adopt_result(m, r);
  mk_search_result_free(r);
  long tin, tout;
  session_runtime_llm_run_tokens(req->s, m, &tin, &tout);
  m->tokens_in += tin;
  m->tokens_out += tout;
  session_runtime_log_llm(req->s, m, req->log, "llm_usage");
  if (req->log) fclose(req->log);
  session_module_refresh_views(req->s, m);
  req->done(req->data, status, &m->view, error ? msg : NULL);
  free(req);
}

/* Opens <workdir>/run.jsonl for appending and remembers its path in m. */
static FILE *open_run_log(module_state *m, const char *workdir) {
  mk_buf path;
  mk_buf_init(&path, 8192);
  mk_buf_printf(&path, "%s/run.jsonl", workdir);
  FILE *f = path.err ? NULL : fopen(mk_buf_cstr(&path), "a");
  free(m->run_log);
  m->run_log = f ? mk_buf_steal(&path, NULL) : NULL;
  mk_buf_free(&path);
  return f;
}

static int module_workdir(mk_session *s, module_state *m, char *out, size_t size) {
  return path_workdir(s, m->path, out, size);
}

int mk_session_evolve(mk_session *s, const char *path, int subkernel,
                      mk_session_progress_cb progress, mk_session_cb done, void *data, int *job,
                      mk_errmsg *err) {
  module_state *m = session_module(s, path, false);
  if (m == NULL || m->g == NULL) return mk_errf(err, MK_ENOENT, "%s has not been analysed", path);
  if (m->job) return mk_errf(err, MK_EBUSY, "an evolve job is already running on %s", path);
  if (subkernel >= m->part.nsubkernels)
    return mk_errf(err, MK_EINVAL, "no subkernel %d (the module has %d)", subkernel, m->part.nsubkernels);
  mk_proposer prop;
  int rc = session_runtime_proposer(s, m, &prop, err);
  if (rc) return rc;
  char workdir[4096];
  if (module_workdir(s, m, workdir, sizeof workdir))
    return mk_errf(err, MK_ERANGE, "work directory path too long");
  evolve_req *req = calloc(1, sizeof *req);
  if (req == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  *req = (evolve_req){s, m, progress, done, data, open_run_log(m, workdir), subkernel};
  /* The user's search settings; the per-run fields below are this run's. */
  mk_search_config cfg = s->cfg.search;
  cfg.job_timeout_s = s->cfg.job_timeout_s; /* the CPU plan's ceiling per job */
  cfg.device = session_runtime_device(s);
  cfg.workdir = workdir;
  cfg.source_path = m->path;
  cfg.log = req->log;
  cfg.only_subkernel = subkernel;
  cfg.prior = m->st;
  if (s->cfg.monolithic) cfg.try_split = cfg.try_merge = false; /* stay one subkernel */
  session_runtime_log_llm(s, m, req->log, "llm_config");
  session_runtime_set_progress(s, m, progress, data);
  m->progress = progress;
  m->progress_data = data;
  m->evolve_t0 = (double)uv_hrtime() * 1e-9;
  m->fraction = 0;
  m->phase[0] = m->final_failure[0] = '\0';
  m->cand_submitted = m->cand_done = m->cand_ok = 0;
  m->plan_candidates = 0;
  m->plan_eta_s = -1;
  cfg.nprior = m->part.nsubkernels;
  cfg.input_names = (const char *const *)m->input_names;
  cfg.ninput_names = m->ninput_names;
  cfg.forward_takes_more = m->forward_takes_more;
  m->job = s->next_job++;
  m->running_subkernel = subkernel;
  if (job) *job = m->job;
  session_module_refresh_views(s, m);
  rc = mk_search_start(m->g, &m->part, m->source, &cfg, prop, session_runtime_evaluator(s, m),
                       on_search_event, on_search_done, req, &m->search, err);
  if (rc) {
    m->job = 0;
    if (req->log) fclose(req->log);
    free(req);
  }
  return rc;
}

int mk_session_cancel(mk_session *s, int job) {
  for (module_state *m = s->modules; m; m = m->next)
    if (m->job == job && m->search) {
      mk_search_cancel(m->search);
      return 0;
    }
  return session_edit_cancel(s, job);
}

/* ---- swap and compose ---------------------------------------------------------- */

int mk_session_compose(mk_session *s, const char *path, const char *out_path, char **written,
                       mk_errmsg *err) {
  module_state *m = session_module(s, path, false);
  if (m == NULL || m->g == NULL) return mk_errf(err, MK_ENOENT, "%s has not been analysed", path);
  const mk_candidate **chosen = calloc((size_t)m->part.nsubkernels + 1, sizeof *chosen);
  if (chosen == NULL) return mk_errf(err, MK_ENOMEM, "out of memory");
  for (int i = 0; i < m->part.nsubkernels; i++)
    chosen[i] = m->st[i].chosen > 0 ? &m->st[i].variants[m->st[i].chosen].cand : NULL;
  mk_buf text;
  mk_buf_init(&text, 0);
  mk_compose_options opt = {.module_source = m->source, .source_path = m->path,
                            .input_names = (const char *const *)m->input_names,
                            .ninput_names = m->ninput_names, .forward_takes_more = m->forward_takes_more,
                            .note = m->note[0] ? m->note : NULL, .fixed_shapes = m->fixed_shapes};
  /* What the evolve verified: the plain subclass where it kept that (a
   * composition of PyTorch subkernels is another program), else the
   * composition of the chosen variants. */
  int rc = m->plain_subclass ? mk_compose_plain_subclass(m->g, m->source, &text)
                             : mk_compose_modelnew(m->g, &m->part, chosen, &opt, &text, err);
  if (rc && m->plain_subclass) mk_errf(err, rc, "out of memory");
  free(chosen);
  /* the evolve kept its CUDA-graph variant: the file says so, so it is one */
  if (!rc && m->moves.cuda_graph) {
    mk_buf graph;
    mk_buf_init(&graph, 0);
    rc = mk_compose_cuda_graph(mk_buf_cstr(&text), "ModelNew", &graph, err);
    mk_buf_free(&text);
    text = graph;
  }
  char dir[4096];
  mk_buf def;
  mk_buf_init(&def, 8192);
  if (!rc && out_path == NULL) {
    if (module_workdir(s, m, dir, sizeof dir))
      rc = mk_errf(err, MK_ERANGE, "work directory path too long");
    mk_buf_printf(&def, "%s/ModelNew.py", dir);
    out_path = mk_buf_cstr(&def);
  }
  if (!rc && (rc = mk_write_file(out_path, mk_buf_cstr(&text), text.len)))
    mk_errf(err, rc, "cannot write %s", out_path);
  mk_buf_free(&text);
  if (!rc) {
    if (written) *written = mk_strdup(out_path);
    free(m->modelnew_path);
    m->modelnew_path = mk_strdup(out_path);
    session_module_refresh_views(s, m);
  }
  mk_buf_free(&def);
  return rc;
}

int mk_session_swap(mk_session *s, const char *path, int subkernel, int variant, mk_errmsg *err) {
  module_state *m = session_module(s, path, false);
  if (m == NULL || m->g == NULL) return mk_errf(err, MK_ENOENT, "%s has not been analysed", path);
  if (subkernel < 0 || subkernel >= m->part.nsubkernels)
    return mk_errf(err, MK_EINVAL, "no subkernel %d", subkernel);
  mk_subkernel_state *st = &m->st[subkernel];
  if (variant < 0 || variant >= st->nvariants)
    return mk_errf(err, MK_EINVAL, "subkernel %d has no variant %d", subkernel, variant);
  if (variant > 0 && st->variants[variant].result.status != MK_EVAL_OK)
    return mk_errf(err, MK_EINVAL, "variant %s is not verified (%s)", st->variants[variant].cand.name,
                   st->variants[variant].result.reason);
  int old = st->chosen;
  bool was_plain = m->plain_subclass;
  st->chosen = variant;
  m->plain_subclass = false; /* the user's choice is composed, whatever the evolve kept */
  int rc = mk_session_compose(s, path, NULL, NULL, err);
  if (rc) {
    st->chosen = old;
    m->plain_subclass = was_plain;
  }
  session_module_refresh_views(s, m);
  return rc;
}

/* ---- close ------------------------------------------------------------------- */

void mk_session_close(mk_session *s, void (*done)(void *data), void *data) {
  s->closing = true;
  for (module_state *m = s->modules; m; m = m->next)
    if (m->search) mk_search_cancel(m->search);
  /* Workers stop first: their pending jobs fail, searches finish, and
   * session_runtime_close then calls session_free. */
  session_runtime_close(s, done, data);
}

void session_free(mk_session *s) {
  while (s->modules) {
    module_state *m = s->modules;
    s->modules = m->next;
    module_free(m);
  }
  for (int i = 0; i < 8; i++) free(s->cfg_strings[i]);
  free(s);
}
