/* search.c — the MKEvolve search state machine (see mk_search.h).
 *
 * Work happens in batches: a phase submits proposals and evaluations, each
 * completion decrements `pending`, and when a batch is complete the machine
 * advances. A `submitting` guard keeps synchronous completions (the builtin
 * proposer, cached results, test fakes) from advancing a batch that is still
 * being filled. */
#include "mk_search.h"

#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_time.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

typedef enum {
  PH_REFERENCES,
  PH_SUBKERNEL,
  PH_SPLIT,
  PH_MERGE,
  PH_FINAL,
  PH_GRAPH, /* the verified composition replayed as one CUDA graph (GPU only) */
  PH_DONE,
} phase;

struct mk_search {
  const mk_graph *g;
  char *source;
  char *workdir;       /* owned copy of cfg.workdir */
  mk_search_config cfg;
  mk_proposer prop;
  mk_evaluator ev;
  mk_search_event_cb on_event;
  mk_search_done_cb on_done;
  void *data;

  mk_partition part;
  mk_subkernel_state *st;
  int *rep;            /* twins (mk_partition_twins) of the initial partition, or NULL after split/merge */
  int *order;          /* subkernels in budget order */
  phase ph;
  int cur;             /* position in order (PH_SUBKERNEL) / subkernel (PH_SPLIT, PH_MERGE) */
  int step;            /* beam step within the current subkernel */
  int pending;
  bool submitting;
  bool cancelled;
  bool finished;
  double t0;
  /* Under a wall-time limit, the current subkernel's share of it (see
   * start_slice): when it started and how long its beam may propose. */
  double slice_t0, slice_s;
  int budget_for_cur;

  /* merge/split trial */
  mk_partition trial;
  mk_subkernel_state trial_st[2];
  int trial_n;

  /* The CPU plan (untimed evaluator; see mk_search.h): on when cpu_budget > 0. */
  double cpu_budget;
  mk_candidate_list cpu_queue; /* the current subkernel's proposals not evaluated yet */
  int cpu_qpos;
  double cpu_base, cpu_reserve; /* the planned whole-program check: without kernels, kernels kept */
  double cpu_cost_sum;          /* measured candidate jobs (not cached), for the ETA */
  double cpu_floor;             /* what a job was seen to need at least (mk_cpu_plan.floor_s) */
  int cpu_costs;
  double ev_limit;              /* the evaluator's limit as last set (set_limit) */
  int cpu_requests;             /* proposal requests for the current subkernel (the beam's steps) */

  /* Under a wall-time limit on a timed evaluator, a subkernel's proposals
   * wait here and are evaluated a few at a time (slice_pump), so its time
   * slice ends the NEW step too once one candidate is judged: problem 10 on
   * an H100 evaluated eight candidates of a 2 GB convolution for 288 s of a
   * 150 s budget, and no other subkernel got any. */
  struct slice_item {
    mk_candidate cand;
    const mk_subkernel *sk;
    int sk_index;
    mk_subkernel_state *st;
  } *sq;
  int sq_n, sq_cap, sq_pos, sq_inflight;

  int final_round;
  /* Round 0 again without variants that passed only the TF32-aware
   * comparison: the composition with them did (choose_variants). */
  bool plain_only;
  char *graph_path;    /* the CUDA-graph variant being verified (PH_GRAPH), owned */
  /* A composition with kernels that is correct but slower than eager may be
   * launch-bound (a Triton launch costs host time per kernel): its CUDA-graph
   * variant is verified before the reference takes over (the rescue), and
   * kept at the end if faster than what the later rounds reached. */
  bool rescue_pending; /* PH_GRAPH is the rescue (once: it ends round 0) */
  char *rescue_path;          /* the rescue graph variant that beat eager, owned */
  mk_eval_result rescue;      /* its result (report_json not kept: rescue_report) */
  char *rescue_report;        /* owned */
  double rescue_plain_ms;     /* the plain composition it replays */
  int *rescue_chosen;         /* the chosen variant of each subkernel in it, owned */
  int rescue_reverted;        /* how many the later rounds reverted */
  mk_search_result *res;
};

/* ---- small helpers ------------------------------------------------------ */

const char *mk_eval_status_name(mk_eval_status s) {
  static const char *names[] = {"ok",      "mismatch", "compile_error", "runtime_error", "rejected",
                                "crashed", "timeout",  "oom",           "error",         "cancelled"};
  return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "error";
}

void mk_search_config_defaults(mk_search_config *c) {
  memset(c, 0, sizeof *c);
  c->beam_width = 4;
  c->depth = 2;
  c->max_proposals = 200; /* candidates per evolve run, all subkernels together */
  c->max_seconds = -1; /* unset: cpu_seconds on the CPU, gpu_seconds on a GPU */
  c->cpu_seconds = 150;
  c->gpu_seconds = 150;
  c->try_merge = true;
  c->try_split = true;
  c->try_cuda_graph = true;
  c->backend = MK_KBACKEND_TRITON; /* CUDA C++ only when asked for (cuda, auto) */
  c->device = "cpu";
  c->workdir = ".";
  c->only_subkernel = -1;
}

static void log_event(mk_search *s, const char *event, cJSON *fields) {
  if (s->cfg.log == NULL) {
    cJSON_Delete(fields);
    return;
  }
  cJSON *o = fields ? fields : cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "t", mk_now_s() - s->t0);
  cJSON_AddStringToObject(o, "event", event);
  char *line = cJSON_PrintUnformatted(o);
  if (line) {
    fputs(line, s->cfg.log);
    fputc('\n', s->cfg.log);
    fflush(s->cfg.log);
    free(line);
  }
  cJSON_Delete(o);
}

static void cpu_progress_fields(const mk_search *s, mk_search_event *ev);

static void emit_progress(mk_search *s, const char *msg) {
  if (s->on_event == NULL) return;
  double frac = 0.0;
  int n = s->part.nsubkernels ? s->part.nsubkernels : 1;
  switch (s->ph) {
  case PH_REFERENCES: frac = 0.02; break;
  case PH_SUBKERNEL: frac = 0.05 + 0.75 * (double)s->cur / n; break;
  case PH_SPLIT: case PH_MERGE: frac = 0.82; break;
  case PH_FINAL: frac = 0.92; break;
  case PH_GRAPH: frac = 0.96; break;
  case PH_DONE: frac = 1.0; break;
  }
  mk_search_event ev = {.kind = MK_SEARCH_PROGRESS, .fraction = frac, .message = msg, .eta_s = -1};
  if (s->cpu_budget > 0) cpu_progress_fields(s, &ev);
  s->on_event(s->data, &ev);
}

/* The run's wall-time limit in seconds: --time-budget, else on a timed
 * evaluator (a GPU) gpu_seconds; 0 = none. */
static double wall_limit(const mk_search *s) {
  return s->cfg.max_seconds >= 0 ? s->cfg.max_seconds : s->ev.timed ? s->cfg.gpu_seconds : 0;
}

static bool budget_left(const mk_search *s) {
  if (s->cancelled) return false;
  if (s->cfg.max_proposals > 0 && s->res->proposals >= s->cfg.max_proposals) return false;
  double limit = wall_limit(s);
  if (limit > 0 && mk_now_s() - s->t0 > limit) return false;
  if (s->cfg.max_cost > 0 && s->res->cost >= s->cfg.max_cost) return false;
  return true;
}

static void variant_free(mk_variant *v) {
  mk_candidate_free(&v->cand);
  free(v->report);
}

static void state_free(mk_subkernel_state *st) {
  for (int i = 0; i < st->nvariants; i++) variant_free(&st->variants[i]);
  free(st->variants);
  memset(st, 0, sizeof *st);
}

static mk_variant *state_add(mk_subkernel_state *st, mk_candidate cand) {
  if (st->nvariants == st->cap) {
    int cap = st->cap ? st->cap * 2 : 8;
    mk_variant *v = realloc(st->variants, sizeof *v * (size_t)cap);
    if (v == NULL) return NULL;
    st->variants = v;
    st->cap = cap;
  }
  mk_variant *v = &st->variants[st->nvariants++];
  memset(v, 0, sizeof *v);
  v->cand = cand;
  v->result.status = MK_EVAL_ERROR;
  v->result.time_ms = -1;
  snprintf(v->result.reason, sizeof v->result.reason, "not evaluated");
  return v;
}

static bool verified(const mk_variant *v) { return v->result.status == MK_EVAL_OK; }

/* Time used to rank a variant, in milliseconds of the subkernel's reference
 * time (variants[0]): a candidate timed together with the reference (the
 * verifier interleaves them in one run) counts as its ratio to that run's
 * reference times the reference's own time, so that variants timed at
 * different moments compare without the device's drift between them.
 * Untimed variants rank last (then by proposer order). */
static double rank_time(const mk_subkernel_state *st, const mk_variant *v) {
  const mk_eval_result *r = &v->result;
  if (!(r->time_ms >= 0)) return INFINITY;
  double ref = st->nvariants > 0 ? st->variants[0].result.time_ms : -1;
  if (v != &st->variants[0] && r->ref_eager_ms > 0 && ref > 0) return r->time_ms / r->ref_eager_ms * ref;
  return r->time_ms;
}

/* True if v passed only the TF32-aware comparison (docs/verify.md): within
 * the reference's own TF32 error of the exact result, not within tolerance of
 * the reference itself, which is what KernelBench's eval checks. */
static bool passed_widened(const mk_variant *v) { return v->result.ref_tf32_noise > 0; }

/* The fastest verified generated variant; one that passed the plain
 * comparison wins over any that needed the TF32 widening, so the composed
 * program agrees with the reference as KernelBench compares them. */
static int best_generated(const mk_subkernel_state *st) {
  int best = -1;
  for (int i = 1; i < st->nvariants; i++) {
    if (!verified(&st->variants[i])) continue;
    if (best >= 0 && passed_widened(&st->variants[i]) != passed_widened(&st->variants[best])) {
      if (passed_widened(&st->variants[best])) best = i;
      continue;
    }
    if (best < 0 || rank_time(st, &st->variants[i]) < rank_time(st, &st->variants[best])) best = i;
  }
  return best;
}

static double reference_time(const mk_subkernel_state *st) {
  return st->nvariants > 0 ? rank_time(st, &st->variants[0]) : INFINITY;
}

/* ---- evaluation plumbing ------------------------------------------------- */

typedef struct eval_req {
  mk_search *s;
  mk_subkernel_state *st;
  int variant;
  int subkernel;
  double t_submit;
  double limit_s;      /* the CPU plan's limit for this job, 0 = the evaluator's own */
  bool queued;         /* submitted by slice_pump */
} eval_req;

static void cpu_measure(mk_search *s, const eval_req *req, mk_variant *v);
static void cpu_learn_check_base(mk_search *s, int k, const mk_eval_result *r);

static void advance(mk_search *s);

static void batch_done(mk_search *s) {
  if (--s->pending == 0 && !s->submitting) advance(s);
}

static void slice_pump(mk_search *s);
static bool slice_spent(const mk_search *s);

static void on_evaluated(void *data, const mk_eval_result *r) {
  eval_req *req = data;
  mk_search *s = req->s;
  mk_variant *v = &req->st->variants[req->variant];
  v->result = *r;
  v->result.report_json = NULL;
  free(v->report);
  v->report = r->report_json ? mk_strdup(r->report_json) : NULL;
  if (req->variant > 0 && r->status != MK_EVAL_CANCELLED) {
    if (verified(v)) s->res->verified++;
    else s->res->failed++;
  }
  if (s->cpu_budget > 0 && req->variant > 0 && r->status != MK_EVAL_CANCELLED) cpu_measure(s, req, v);
  s->res->native_evals += r->native;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "subkernel", req->subkernel);
  cJSON_AddStringToObject(f, "variant", v->cand.name ? v->cand.name : "?");
  cJSON_AddStringToObject(f, "origin", v->cand.origin ? v->cand.origin : "?");
  cJSON_AddStringToObject(f, "backend", mk_candidate_backend(&v->cand));
  cJSON_AddStringToObject(f, "status", mk_eval_status_name(r->status));
  cJSON_AddNumberToObject(f, "time_ms", r->time_ms);
  cJSON_AddNumberToObject(f, "max_abs_err", r->max_abs_err);
  if (r->ref_tf32_noise > 0) cJSON_AddNumberToObject(f, "ref_tf32_noise", r->ref_tf32_noise);
  if (r->state_tf32_noise > 0) cJSON_AddNumberToObject(f, "state_tf32_noise", r->state_tf32_noise);
  cJSON_AddBoolToObject(f, "cached", r->cached);
  if (r->native) cJSON_AddStringToObject(f, "worker", "native");
  if (r->status != MK_EVAL_OK) cJSON_AddStringToObject(f, "reason", r->reason);
  log_event(s, "evaluated", f);
  if (s->on_event) {
    mk_search_event ev = {.kind = MK_SEARCH_VARIANT, .subkernel = req->subkernel, .variant = v};
    s->on_event(s->data, &ev);
  }
  bool queued = req->queued;
  free(req);
  if (queued) {
    s->sq_inflight--;
    slice_pump(s); /* before batch_done: the batch stays open while the queue has work */
  }
  batch_done(s);
}

/* Keeps a generated candidate's source as <workdir>/candidates/<subkernel>.<variant>.py
 * (the folder is made at start), so a run's kernels can be read, rerun or
 * profiled after it (bench brings the workdir back from a GPU machine). Best
 * effort: a failure costs nothing. */
static void keep_source(const mk_search *s, const mk_subkernel *sk, const mk_candidate *c) {
  if (c->source == NULL || s->cfg.workdir == NULL) return;
  mk_buf path;
  mk_buf_init(&path, 256);
  mk_buf_printf(&path, "%s/candidates/%s.", s->cfg.workdir, sk->name ? sk->name : "subkernel");
  for (const char *q = c->name ? c->name : "candidate"; *q; q++) {
    char ch = *q;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    mk_buf_printf(&path, "%c", ok ? ch : '_');
  }
  mk_buf_puts(&path, ".py");
  if (!path.err) (void)mk_write_file(mk_buf_cstr(&path), c->source, strlen(c->source));
  mk_buf_free(&path);
}

/* Evaluates variant `vi` of state `st` for subkernel `sk`. */
static void submit_eval_as(mk_search *s, const mk_subkernel *sk, int sk_index, mk_subkernel_state *st,
                           int vi, bool queued) {
  eval_req *req = malloc(sizeof *req);
  if (req == NULL) {
    if (queued) s->sq_inflight--;
    return;
  }
  *req = (eval_req){s, st, vi, sk_index, mk_now_s(), s->ev_limit, queued};
  if (vi > 0) keep_source(s, sk, &st->variants[vi].cand);
  s->pending++;
  if (s->cancelled) { /* nothing new starts after a cancel */
    mk_eval_result r = {.status = MK_EVAL_CANCELLED, .time_ms = -1};
    snprintf(r.reason, sizeof r.reason, "cancelled");
    on_evaluated(req, &r);
    return;
  }
  int rc = s->ev.evaluate(s->ev.self, s->g, sk, &st->variants[vi].cand, on_evaluated, req);
  if (rc < 0) {
    mk_eval_result r = {.status = MK_EVAL_ERROR, .time_ms = -1};
    snprintf(r.reason, sizeof r.reason, "could not submit: %s", mk_strerror(rc));
    on_evaluated(req, &r);
  }
}

static void submit_eval(mk_search *s, const mk_subkernel *sk, int sk_index, mk_subkernel_state *st,
                        int vi) {
  submit_eval_as(s, sk, sk_index, st, vi, false);
}

/* Frees the proposals still waiting in the slice queue, saying how many. */
static void slice_drop(mk_search *s, const char *why) {
  int dropped = s->sq_n - s->sq_pos;
  for (int i = s->sq_pos; i < s->sq_n; i++) mk_candidate_free(&s->sq[i].cand);
  if (dropped > 0) {
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "subkernel", s->sq[s->sq_pos].sk_index);
    cJSON_AddNumberToObject(f, "dropped", dropped);
    cJSON_AddStringToObject(f, "reason", why);
    log_event(s, "not_evaluated", f);
  }
  s->sq_n = s->sq_pos = 0;
}

/* Submits waiting proposals while fewer than the evaluator's parallelism
 * plus one are in flight (one more keeps a worker fed), until the slice or
 * the whole budget is spent; a subkernel gets at least one candidate judged. */
static void slice_pump(mk_search *s) {
  int depth = (s->ev.parallel > 0 ? s->ev.parallel : 1) + 1;
  while (s->sq_pos < s->sq_n && s->sq_inflight < depth) {
    struct slice_item *it = &s->sq[s->sq_pos];
    if (!budget_left(s)) {
      slice_drop(s, "budget spent");
      return;
    }
    if (slice_spent(s) && it->st->nvariants > 1) {
      slice_drop(s, "the subkernel's share of the wall-time budget is spent");
      return;
    }
    s->sq_pos++;
    s->res->proposals++;
    s->res->cost += it->cand.cost;
    it->st->proposals++;
    if (state_add(it->st, it->cand) == NULL) {
      mk_candidate_free(&it->cand);
      continue;
    }
    s->sq_inflight++;
    submit_eval_as(s, it->sk, it->sk_index, it->st, it->st->nvariants - 1, true);
  }
  if (s->sq_pos == s->sq_n) s->sq_n = s->sq_pos = 0;
}

/* Queues a proposal for slice_pump; false when out of memory (not queued). */
static bool slice_push(mk_search *s, const mk_subkernel *sk, int sk_index, mk_subkernel_state *st,
                       mk_candidate c) {
  if (s->sq_n == s->sq_cap) {
    int cap = s->sq_cap ? 2 * s->sq_cap : 16;
    struct slice_item *n = realloc(s->sq, sizeof *n * (size_t)cap);
    if (n == NULL) return false;
    s->sq = n;
    s->sq_cap = cap;
  }
  s->sq[s->sq_n++] = (struct slice_item){c, sk, sk_index, st};
  return true;
}

/* True if a proposal with this source already waits in the slice queue. */
static bool queued_already(const mk_search *s, const mk_candidate *c) {
  for (int i = s->sq_pos; i < s->sq_n; i++)
    if (s->sq[i].cand.source && c->source && strcmp(s->sq[i].cand.source, c->source) == 0) return true;
  return false;
}

typedef struct propose_req {
  mk_search *s;
  const mk_subkernel *sk;
  int sk_index;
  mk_subkernel_state *st;
  int limit;
  bool queue;  /* CPU plan: keep the proposals in cpu_queue, evaluated one at a time */
} propose_req;

/* A proposal whose code is already a variant of this subkernel teaches
 * nothing new: it is dropped before it costs budget or a verification. */
static bool is_duplicate(const mk_subkernel_state *st, const mk_candidate *c) {
  for (int i = 0; i < st->nvariants; i++) {
    const char *a = st->variants[i].cand.source;
    if (a && c->source && strcmp(a, c->source) == 0) return true;
  }
  return false;
}

static void on_proposed(void *data, int status, mk_candidate_list *cands, const char *err) {
  propose_req *pr = data;
  mk_search *s = pr->s;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "subkernel", pr->sk_index);
  cJSON_AddNumberToObject(f, "candidates", cands ? cands->n : 0);
  if (status) cJSON_AddStringToObject(f, "error", err ? err : mk_strerror(status));
  log_event(s, "proposed", f);
  if (status == MK_EUNSUPPORTED && pr->st->nvariants <= 1) {
    pr->st->unsupported = true;
    snprintf(pr->st->unsupported_reason, sizeof pr->st->unsupported_reason, "%s",
             err ? err : "unsupported");
  }
  for (int i = 0; cands && i < cands->n; i++) {
    mk_candidate c = cands->items[i];
    cands->items[i] = (mk_candidate){0};
    if (i >= pr->limit || !budget_left(s) || is_duplicate(pr->st, &c) || queued_already(s, &c)) {
      mk_candidate_free(&c);
      continue;
    }
    if (pr->queue) {
      if (mk_candidate_list_push(&s->cpu_queue, c)) mk_candidate_free(&c);
      continue;
    }
    if (s->ph == PH_SUBKERNEL && s->slice_s > 0) {
      if (!slice_push(s, pr->sk, pr->sk_index, pr->st, c)) mk_candidate_free(&c);
      continue;
    }
    s->res->proposals++;
    s->res->cost += c.cost;
    pr->st->proposals++;
    if (state_add(pr->st, c) == NULL) {
      mk_candidate_free(&c);
      continue;
    }
    submit_eval(s, pr->sk, pr->sk_index, pr->st, pr->st->nvariants - 1);
  }
  if (cands) mk_candidate_list_free(cands);
  free(pr);
  slice_pump(s);
  batch_done(s);
}

static void submit_propose(mk_search *s, const mk_subkernel *sk, int sk_index,
                           mk_subkernel_state *st, mk_propose_mode mode, int parent, int limit,
                           bool queue) {
  propose_req *pr = malloc(sizeof *pr);
  if (pr == NULL) return;
  *pr = (propose_req){s, sk, sk_index, st, limit, queue};
  mk_propose_request req = {
      .graph = s->g,
      .subkernel = sk,
      .mode = mode,
      .parent = parent >= 0 ? &st->variants[parent].cand : NULL,
      .report = parent >= 0 ? st->variants[parent].report : NULL,
      .max_candidates = limit,
      .seed = s->cfg.seed + (unsigned long long)sk_index * 1000003ULL + (unsigned long long)s->step,
      .device = s->cfg.device,
      .backend = s->cfg.backend,
  };
  s->pending++;
  int rc = s->prop.propose(s->prop.self, &req, on_proposed, pr);
  if (rc < 0) on_proposed(pr, rc, NULL, "proposer refused the request");
}

/* ---- phases ------------------------------------------------------------- */

static void start_batch(mk_search *s) {
  s->submitting = true;
  s->pending++; /* the batch itself, released by end_batch */
}

static void end_batch(mk_search *s) {
  s->submitting = false;
  batch_done(s);
}

static int add_reference(mk_search *s, const mk_subkernel *sk, mk_subkernel_state *st) {
  mk_candidate ref = {0};
  mk_errmsg err = {{0}};
  int rc = mk_reference_candidate(s->g, sk, &ref, &err);
  if (rc) {
    ref.name = mk_strdup("reference");
    ref.origin = mk_strdup("reference");
    ref.source = NULL; /* emitted inline by the composer */
  }
  return state_add(st, ref) ? 0 : MK_ENOMEM;
}

static int copy_candidate(const mk_candidate *src, mk_candidate *dst) {
  *dst = (mk_candidate){.name = mk_strdup(src->name), .source = mk_strdup(src->source),
                        .origin = mk_strdup(src->origin), .notes = mk_strdup(src->notes),
                        .cost = src->cost};
  return (src->name && !dst->name) || (src->source && !dst->source) ? MK_ENOMEM : 0;
}

/* Deep copy of a state (candidates, verdicts, reports); *dst is overwritten. */
static int state_copy(const mk_subkernel_state *src, mk_subkernel_state *dst) {
  memset(dst, 0, sizeof *dst);
  for (int k = 0; k < src->nvariants; k++) {
    mk_candidate c;
    if (copy_candidate(&src->variants[k].cand, &c)) {
      mk_candidate_free(&c);
      state_free(dst);
      return MK_ENOMEM;
    }
    mk_variant *v = state_add(dst, c);
    if (v == NULL) {
      mk_candidate_free(&c);
      state_free(dst);
      return MK_ENOMEM;
    }
    v->result = src->variants[k].result;
    v->report = mk_strdup(src->variants[k].report);
  }
  dst->chosen = src->chosen;
  dst->proposals = 0; /* proposals were counted once, for the representative */
  dst->unsupported = src->unsupported;
  memcpy(dst->unsupported_reason, src->unsupported_reason, sizeof dst->unsupported_reason);
  dst->planned_out = src->planned_out;
  memcpy(dst->plan_reason, src->plan_reason, sizeof dst->plan_reason);
  return 0;
}

static bool is_twin(const mk_search *s, int i) { return s->rep && s->rep[i] != i; }

/* Number of subkernels that share representative i's variants (itself included). */
static int multiplicity(const mk_search *s, int i) {
  if (s->rep == NULL) return 1;
  int m = 0;
  for (int k = 0; k < s->part.nsubkernels; k++) m += s->rep[k] == i;
  return m;
}

/* Twins take their representative's state: the reference's timing after
 * the reference phase, every variant after the subkernel phase. A twin
 * computes the same function of its inputs (mk_subkernel_signature), so a
 * candidate verified for the representative is one for the twin; the
 * whole program is still verified at the end. */
static void share_with_twins(mk_search *s, bool announce) {
  if (s->rep == NULL) return;
  for (int i = 0; i < s->part.nsubkernels; i++) {
    if (!is_twin(s, i)) continue;
    mk_subkernel_state copy;
    if (state_copy(&s->st[s->rep[i]], &copy)) continue; /* keeps its own (reference) state */
    state_free(&s->st[i]);
    s->st[i] = copy;
    if (!announce) continue;
    cJSON *f = cJSON_CreateObject();
    cJSON_AddNumberToObject(f, "subkernel", i);
    cJSON_AddNumberToObject(f, "twin_of", s->rep[i]);
    cJSON_AddNumberToObject(f, "variants", s->st[i].nvariants);
    log_event(s, "shared", f);
    for (int k = 1; s->on_event && k < s->st[i].nvariants; k++) {
      mk_search_event ev = {.kind = MK_SEARCH_VARIANT, .subkernel = i, .variant = &s->st[i].variants[k]};
      s->on_event(s->data, &ev);
    }
  }
}

/* Copies prior variants of subkernel i; returns true when its reference
 * already has the verdict this search needs (verified, and timed when the
 * evaluator times): then it is not evaluated again. A session's fresh
 * states hold an untimed reference. */
static bool adopt_prior(mk_search *s, int i) {
  if (s->cfg.prior == NULL || i >= s->cfg.nprior) return false;
  const mk_subkernel_state *p = &s->cfg.prior[i];
  for (int k = 0; k < p->nvariants; k++) {
    mk_candidate c;
    if (copy_candidate(&p->variants[k].cand, &c)) return false;
    mk_variant *v = state_add(&s->st[i], c);
    if (v == NULL) {
      mk_candidate_free(&c);
      return false;
    }
    v->result = p->variants[k].result;
    v->report = mk_strdup(p->variants[k].report);
  }
  s->st[i].chosen = p->chosen < s->st[i].nvariants ? p->chosen : 0;
  const mk_variant *ref = s->st[i].nvariants > 0 ? &s->st[i].variants[0] : NULL;
  return ref && ref->result.status == MK_EVAL_OK && (!s->ev.timed || ref->result.time_ms >= 0);
}

/* Subkernel i starts from its prior variants, or from the reference,
 * which is then evaluated (its time is what every candidate must beat).
 * A twin whose prior holds nothing but the reference shares its
 * representative's state instead; one with variants of its own keeps them
 * and is searched on its own. */
static void adopt_prior_or_reference(mk_search *s, int i) {
  bool judged = adopt_prior(s, i);
  mk_subkernel_state *st = &s->st[i];
  if (s->rep && (st->nvariants > 1 || st->chosen > 0)) s->rep[i] = i;
  if (is_twin(s, i)) {
    state_free(st); /* share_with_twins fills it */
    return;
  }
  if (judged) return;
  if (st->nvariants == 0 && add_reference(s, &s->part.subkernels[i], st)) return;
  if (st->variants[0].cand.source) submit_eval(s, &s->part.subkernels[i], i, st, 0);
}

static int by_reference_time_desc(const void *a, const void *b, void *ctx) {
  const mk_search *s = ctx;
  double ta = reference_time(&s->st[*(const int *)a]);
  double tb = reference_time(&s->st[*(const int *)b]);
  if (isinf(ta) && isinf(tb)) return *(const int *)a - *(const int *)b;
  return ta < tb ? 1 : ta > tb ? -1 : *(const int *)a - *(const int *)b;
}

/* Budget per subkernel: an even floor so every subkernel gets proposals, the
 * rest in proportion to its share of the reference time. */
static int budget_for(const mk_search *s, int sk) {
  int n = 0;
  for (int i = 0; i < s->part.nsubkernels; i++) n += !is_twin(s, i);
  int total = s->cfg.max_proposals > 0 ? s->cfg.max_proposals : 1000000;
  int floor_share = total / (2 * (n ? n : 1));
  double sum = 0; /* twins count in their representative's share: it runs once per twin */
  for (int i = 0; i < s->part.nsubkernels; i++)
    if (!isinf(reference_time(&s->st[i]))) sum += reference_time(&s->st[i]);
  double t = reference_time(&s->st[sk]) * multiplicity(s, sk);
  int prop = sum > 0 && !isinf(t) ? (int)((total / 2) * (t / sum)) : floor_share;
  int b = floor_share + prop;
  return b < s->cfg.beam_width ? s->cfg.beam_width : b;
}

static void order_subkernels(mk_search *s) {
  for (int i = 0; i < s->part.nsubkernels; i++) s->order[i] = i;
  /* insertion sort keeps it dependency-free and stable */
  for (int i = 1; i < s->part.nsubkernels; i++)
    for (int j = i; j > 0 && by_reference_time_desc(&s->order[j - 1], &s->order[j], s) > 0; j--) {
      int t = s->order[j];
      s->order[j] = s->order[j - 1];
      s->order[j - 1] = t;
    }
}

/* Under a wall-time limit each subkernel's beam gets a slice of what is left
 * of three quarters of it (the last quarter is for merges and splits), in
 * proportion to its proposal budget, so the first subkernels in budget order
 * do not spend it all: problem 10 on an H100 spent the whole 150 s on its
 * transposed convolution's beam, its pool subkernel kept PyTorch, and no merge
 * was tried. The NEW step always runs; OPTIMISE steps stop with the slice. */
static void start_slice(mk_search *s) {
  s->slice_t0 = mk_now_s();
  s->slice_s = 0; /* no slice: the beam runs its depth */
  double limit = wall_limit(s);
  if (limit <= 0 || s->cpu_budget > 0) return;
  double left = 0.75 * limit - (s->slice_t0 - s->t0), mine = 0, rest = 0;
  for (int p = s->cur; p < s->part.nsubkernels; p++) {
    int k = s->order[p];
    if (is_twin(s, k)) continue;
    double b = budget_for(s, k);
    rest += b;
    if (p == s->cur) mine = b;
  }
  s->slice_s = left > 0 && rest > 0 ? left * mine / rest : 1e-9;
}

static bool slice_spent(const mk_search *s) {
  return s->slice_s > 0 && mk_now_s() - s->slice_t0 > s->slice_s;
}

/* One beam step for subkernel order[cur]: NEW at step 0, then OPTIMISE of
 * the best W verified variants, or REPAIR of failures when none verified. */
static bool beam_step(mk_search *s) {
  int k = s->order[s->cur];
  mk_subkernel_state *st = &s->st[k];
  const mk_subkernel *sk = &s->part.subkernels[k];
  int left = s->budget_for_cur - st->proposals;
  if (s->cfg.only_subkernel >= 0 && k != s->cfg.only_subkernel) return false;
  if (is_twin(s, k)) return false; /* searched once, as its representative */
  if (left <= 0 || !budget_left(s) || st->unsupported) return false;
  if (s->step > 0 && slice_spent(s)) return false;
  int w = s->cfg.beam_width;
  if (s->step == 0) {
    submit_propose(s, sk, k, st, MK_PROPOSE_NEW, -1, left < 2 * w ? left : 2 * w, false);
    return true;
  }
  int *rank = malloc(sizeof *rank * (size_t)(st->nvariants + 1));
  if (rank == NULL) return false;
  int nr = 0;
  bool any_ok = best_generated(st) >= 0;
  for (int i = 1; i < st->nvariants; i++)
    if (verified(&st->variants[i]) == any_ok) rank[nr++] = i;
  for (int i = 1; i < nr; i++)
    for (int j = i; j > 0 && rank_time(st, &st->variants[rank[j]]) < rank_time(st, &st->variants[rank[j - 1]]); j--) {
      int t = rank[j];
      rank[j] = rank[j - 1];
      rank[j - 1] = t;
    }
  int submitted = 0;
  for (int i = 0; i < nr && i < w && left > 0; i++, submitted++)
    submit_propose(s, sk, k, st, any_ok ? MK_PROPOSE_OPTIMISE : MK_PROPOSE_REPAIR, rank[i],
                   left < 2 ? left : 2, false);
  free(rank);
  return submitted > 0;
}

static bool cpu_step(mk_search *s);

static void phase_subkernel(mk_search *s) {
  while (s->cur < s->part.nsubkernels) {
    if (s->step == 0) {
      s->budget_for_cur = budget_for(s, s->order[s->cur]);
      start_slice(s);
    }
    /* The CPU plan takes a step per candidate and per request for more. */
    int last_step = s->cpu_budget > 0 ? 2 * (s->cfg.depth + 1) : s->cfg.depth;
    if (s->step <= last_step) {
      if (s->cpu_budget <= 0) {
        char msg[256];
        snprintf(msg, sizeof msg, "%s: step %d", s->part.subkernels[s->order[s->cur]].name, s->step);
        emit_progress(s, msg);
      }
      start_batch(s);
      bool any = s->cpu_budget > 0 ? cpu_step(s) : beam_step(s);
      s->step++;
      if (any) {
        end_batch(s);
        return;
      }
      s->submitting = false;
      s->pending--; /* nothing submitted: drop the batch token and move on */
      if (s->pending) return;
    }
    s->cur++;
    s->step = 0;
    mk_candidate_list_free(&s->cpu_queue); /* the surplus of a subkernel the plan is done with */
    s->cpu_qpos = 0;
  }
  share_with_twins(s, true);
  free(s->rep); /* split and merge renumber subkernels: from here on each stands alone */
  s->rep = NULL;
  bool whole = s->cfg.only_subkernel < 0;
  /* Under the CPU plan the budget goes to the subkernels as decomposed: a
   * split would search two more with what is left of it. */
  bool split = whole && s->cfg.try_split && s->cpu_budget <= 0;
  s->ph = split ? PH_SPLIT : whole && s->cfg.try_merge ? PH_MERGE : PH_FINAL;
  s->cur = 0;
  s->step = 0;
  advance(s);
}

/* ---- the CPU plan (untimed evaluator) ------------------------------------- */

static void set_limit(mk_search *s, double seconds) {
  s->ev_limit = seconds;
  if (s->ev.limit) s->ev.limit(s->ev.self, seconds);
}

static bool in_scope(const mk_search *s, int k) {
  return !is_twin(s, k) && (s->cfg.only_subkernel < 0 || s->cfg.only_subkernel == k);
}

/* Distinct subkernels the plan has not started yet (the current one included
 * while it has no candidate). */
static int cpu_untouched(const mk_search *s) {
  int n = 0;
  for (int p = s->cur; p < s->part.nsubkernels; p++) {
    int k = s->order[p];
    const mk_subkernel_state *st = &s->st[k];
    n += in_scope(s, k) && st->proposals == 0 && !st->unsupported && !st->plan_reason[0];
  }
  return n;
}

static mk_cpu_plan cpu_snapshot(const mk_search *s) {
  return (mk_cpu_plan){.budget_s = s->cpu_budget, .job_cap_s = s->cfg.job_timeout_s,
                       .spent_s = mk_now_s() - s->t0, .base_s = s->cpu_base,
                       .reserve_s = s->cpu_reserve, .subkernels_left = cpu_untouched(s),
                       .floor_s = s->cpu_floor};
}

static void cpu_progress_fields(const mk_search *s, mk_search_event *ev) {
  int done = s->res->verified + s->res->failed;
  int in_flight = s->res->proposals - done; /* the plan counts a proposal when it submits it */
  ev->cand_done = done;
  ev->cand_planned = done + in_flight + (s->ph <= PH_SUBKERNEL ? cpu_untouched(s) : 0);
  mk_cpu_plan p = cpu_snapshot(s);
  double mean = s->cpu_costs ? s->cpu_cost_sum / s->cpu_costs : -1;
  ev->eta_s = mk_cpu_plan_eta(&p, mean, ev->cand_planned - done);
}

static void cpu_log_plan(mk_search *s, int k, const char *decision, double seconds) {
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "subkernel", k);
  cJSON_AddStringToObject(f, "decision", decision);
  cJSON_AddNumberToObject(f, "seconds", seconds);
  cJSON_AddNumberToObject(f, "budget_s", s->cpu_budget);
  cJSON_AddNumberToObject(f, "check_base_s", s->cpu_base);
  cJSON_AddNumberToObject(f, "check_kernels_s", s->cpu_reserve);
  log_event(s, "cpu_plan", f);
}

/* A verified kernel is kept when the whole-program check can still afford
 * it: it runs there once per twin and trial (its own trials and the check's
 * extra one), at the speed measured here. */
static void cpu_keep_or_plan_out(mk_search *s, int k, mk_subkernel_state *st, const mk_variant *v) {
  const mk_eval_result *r = &v->result;
  int trials = r->trials > 0 ? r->trials : 1, copies = multiplicity(s, k);
  double cost = r->cost_s;
  double add = mk_cpu_plan_kernel_cost(r->run_s > 0 ? r->run_s : cost / trials, copies,
                                       trials + MK_CHECK_EXTRA_TRIALS);
  mk_cpu_plan p = cpu_snapshot(s);
  if (mk_cpu_plan_affords(&p, add)) {
    s->cpu_reserve += add;
    cpu_log_plan(s, k, "kept", add);
    return;
  }
  st->planned_out = true;
  snprintf(st->plan_reason, sizeof st->plan_reason,
           "verified, but under the CPU interpreter it would add ~%.0f s (%d cop%s x %d trials) to "
           "the whole-program check, which already needs ~%.0f s with %.0f s used, past the CPU "
           "budget of %.0f s: PyTorch kept",
           add, copies, copies == 1 ? "y" : "ies", trials + MK_CHECK_EXTRA_TRIALS, p.base_s + p.reserve_s, p.spent_s,
           s->cpu_budget);
  cpu_log_plan(s, k, "planned_out", add);
}

/* The whole-program check's cost without kernels, at least: the most any
 * job ran of the program per trial (twice per trial in the check), or what
 * a job spent outside its candidate's calls. */
static void cpu_learn_check_base(mk_search *s, int k, const mk_eval_result *r) {
  (void)k;
  int trials = r->trials > 0 ? r->trials : 1;
  double rest = r->cost_s - trials * r->run_s;
  double seen = mk_cpu_plan_check_base(r->prefix_s, trials + MK_CHECK_EXTRA_TRIALS);
  if (seen > s->cpu_base) s->cpu_base = seen;
  if (r->run_s > 0 && rest > s->cpu_base) s->cpu_base = rest;
}

/* What a candidate's job cost teaches the plan: the mean job (ETA), the
 * check's part without kernels (the job less its candidate's calls), and
 * whether a verified kernel fits. A timeout says which limit it hit. */
static void cpu_measure(mk_search *s, const eval_req *req, mk_variant *v) {
  mk_eval_result *r = &v->result;
  if (r->cost_s <= 0) r->cost_s = r->cached ? 0 : mk_now_s() - req->t_submit;
  if (!r->cached) {
    s->cpu_cost_sum += r->cost_s;
    s->cpu_costs++;
  }
  cpu_learn_check_base(s, req->subkernel, r);
  if (r->status == MK_EVAL_TIMEOUT && req->limit_s > 0) {
    /* Later subkernels replay a longer prefix of the program to make their
     * inputs: they need at least as long, and some more. */
    if (1.5 * req->limit_s > s->cpu_floor) s->cpu_floor = 1.5 * req->limit_s;
    size_t n = strlen(r->reason);
    snprintf(r->reason + n, sizeof r->reason - n,
             " (the CPU plan's limit for this candidate: %.0f s of a %.0f s budget)", req->limit_s,
             s->cpu_budget);
  }
  /* The first verified kernel is the one an untimed choice takes: it alone
   * goes into the planned check. */
  if (verified(v) && req->st == &s->st[req->subkernel] && best_generated(req->st) == req->variant)
    cpu_keep_or_plan_out(s, req->subkernel, req->st, v);
}

static bool last_timed_out(const mk_subkernel_state *st) {
  return st->nvariants > 1 && st->variants[st->nvariants - 1].result.status == MK_EVAL_TIMEOUT;
}

/* The next candidate from the queue, evaluated within the plan's limit. */
static bool cpu_submit_next(mk_search *s, int k, double limit) {
  mk_subkernel_state *st = &s->st[k];
  if (s->cpu_qpos >= s->cpu_queue.n || !budget_left(s)) return false;
  mk_candidate c = s->cpu_queue.items[s->cpu_qpos];
  s->cpu_queue.items[s->cpu_qpos++] = (mk_candidate){0};
  if (state_add(st, c) == NULL) {
    mk_candidate_free(&c);
    return false;
  }
  s->res->proposals++;
  s->res->cost += c.cost;
  st->proposals++;
  char msg[256];
  snprintf(msg, sizeof msg, "%s: candidate %d (up to %.0f s)", s->part.subkernels[k].name,
           st->proposals, limit);
  set_limit(s, limit);
  submit_eval(s, &s->part.subkernels[k], k, st, st->nvariants - 1);
  emit_progress(s, msg);
  return true;
}

/* Candidates for the current subkernel: depth + 1, within its share of the
 * proposal budget (budget_for, as the beam's). */
static int cpu_candidate_cap(const mk_search *s) {
  int cap = s->cfg.depth + 1;
  return s->budget_for_cur < cap ? s->budget_for_cur : cap;
}

/* A request for more proposals, kept in the queue: REPAIR of the last
 * failure, or OPTIMISE of the kernel that will be chosen, as the beam asks;
 * NEW again when nothing came at all (an LLM's unusable reply). */
static bool cpu_ask_more(mk_search *s, int k, mk_subkernel_state *st, bool has_verified) {
  int left = cpu_candidate_cap(s) - st->proposals;
  int parent = has_verified ? best_generated(st) : st->nvariants - 1;
  if (left <= 0 || s->cpu_requests > s->cfg.depth) return false;
  mk_propose_mode mode = has_verified ? MK_PROPOSE_OPTIMISE : parent >= 1 ? MK_PROPOSE_REPAIR : MK_PROPOSE_NEW;
  mk_candidate_list_free(&s->cpu_queue);
  s->cpu_qpos = 0;
  s->cpu_requests++;
  char msg[256];
  snprintf(msg, sizeof msg, "%s: asking for %s", s->part.subkernels[k].name,
           mode == MK_PROPOSE_OPTIMISE ? "an optimisation" : mode == MK_PROPOSE_REPAIR ? "a repair"
                                                                                   : "proposals again");
  emit_progress(s, msg);
  submit_propose(s, &s->part.subkernels[k], k, st, mode, mode == MK_PROPOSE_NEW ? -1 : parent, left, true);
  return true;
}

/* One step of the CPU plan for subkernel order[cur]: the beam's modes, one
 * candidate at a time. Step 0 asks for up to depth + 1 proposals (kept in
 * order); each later step evaluates the next, and when none is left asks for
 * more (cpu_ask_more), depth more requests at most, like the beam's steps.
 * A subkernel ends at depth + 1 candidates, at a timeout (its next would run
 * as long), after its requests, or when the plan has no time for another job; once it has a verified
 * kernel (all an untimed choice uses) it gets more only from a full share of
 * the budget, never from the least a job needs: that goes to the subkernels
 * not started yet. */
static bool cpu_step(mk_search *s) {
  int k = s->order[s->cur];
  mk_subkernel_state *st = &s->st[k];
  if (!in_scope(s, k) || st->unsupported || s->cancelled) return false;
  if (last_timed_out(st) || st->proposals >= cpu_candidate_cap(s)) return false;
  bool has_verified = best_generated(st) >= 0;
  mk_cpu_plan p = cpu_snapshot(s);
  if (has_verified && mk_cpu_plan_share(&p) < mk_cpu_plan_job_need(&p)) return false;
  double limit = mk_cpu_plan_candidate_limit(&p);
  if (limit <= 0) {
    if (st->proposals == 0)
      snprintf(st->plan_reason, sizeof st->plan_reason,
               "not tried: what is left of the CPU budget of %.0f s (%.0f s used, %.0f s kept for "
               "the whole-program check) cannot pay for another job of the %.0f s one needs here",
               s->cpu_budget, p.spent_s, p.base_s + p.reserve_s, mk_cpu_plan_job_need(&p));
    cpu_log_plan(s, k, "no_time", 0);
    return false;
  }
  if (s->step == 0) {
    mk_candidate_list_free(&s->cpu_queue);
    s->cpu_qpos = 0;
    s->cpu_requests = 1;
    char msg[256];
    snprintf(msg, sizeof msg, "%s: proposing", s->part.subkernels[k].name);
    emit_progress(s, msg);
    submit_propose(s, &s->part.subkernels[k], k, st, MK_PROPOSE_NEW, -1, cpu_candidate_cap(s), true);
    return true;
  }
  if (s->cpu_qpos < s->cpu_queue.n) return cpu_submit_next(s, k, limit);
  return cpu_ask_more(s, k, st, has_verified);
}

/* The whole-program check gets what the plan kept for it; the plain
 * subclass (a later round, eager PyTorch only) gets the evaluator's own limit. */
static bool any_chosen(const mk_search *s) {
  for (int i = 0; i < s->part.nsubkernels; i++)
    if (s->st[i].chosen > 0) return true;
  return false;
}

/* A composition without kernels is the user's Model, eager: the check it
 * needs is all PyTorch, and cutting it short would only make the plain
 * subclass pay the same again. */
static void cpu_limit_final(mk_search *s) {
  mk_cpu_plan p = cpu_snapshot(s);
  double limit = s->final_round == 0 && any_chosen(s) ? mk_cpu_plan_final_limit(&p) : 0;
  cpu_log_plan(s, -1, "final_check", limit);
  set_limit(s, limit);
}

/* ---- split and merge trials ---------------------------------------------- */

static void trial_reset(mk_search *s) {
  for (int i = 0; i < s->trial_n; i++) state_free(&s->trial_st[i]);
  mk_partition_free(&s->trial);
  s->trial_n = 0;
}

/* Replaces subkernels [index, index+count) of the search with the trial's
 * [tindex, tindex+tcount) and their states. */
static void adopt_trial(mk_search *s, int count) {
  int n_old = s->part.nsubkernels;
  int n_new = s->trial.nsubkernels;
  mk_subkernel_state *st = calloc((size_t)n_new, sizeof *st);
  if (st == NULL) return;
  int delta = n_new - n_old; /* +1 split, -1 merge */
  int at = s->cur;
  for (int i = 0, j = 0; i < n_new; i++) {
    if (i >= at && i < at + s->trial_n) {
      st[i] = s->trial_st[i - at];
      memset(&s->trial_st[i - at], 0, sizeof s->trial_st[0]);
      continue;
    }
    j = i < at ? i : i - delta;
    st[i] = s->st[j];
    memset(&s->st[j], 0, sizeof s->st[0]);
  }
  for (int i = at; i < at + count; i++) state_free(&s->st[i]);
  free(s->st);
  s->st = st;
  mk_partition_free(&s->part);
  s->part = s->trial;
  memset(&s->trial, 0, sizeof s->trial);
  s->trial_n = 0;
  int *order = realloc(s->order, sizeof *order * (size_t)(n_new + 1));
  if (order) s->order = order;
}

static void submit_trial(mk_search *s) {
  start_batch(s);
  for (int i = 0; i < s->trial_n; i++) {
    const mk_subkernel *sk = &s->trial.subkernels[s->cur + i];
    if (add_reference(s, sk, &s->trial_st[i]) == 0 && s->trial_st[i].variants[0].cand.source)
      submit_eval(s, sk, s->cur + i, &s->trial_st[i], 0);
    submit_propose(s, sk, s->cur + i, &s->trial_st[i], MK_PROPOSE_NEW, -1, 2 * s->cfg.beam_width,
                   false);
  }
  end_batch(s);
}

/* A split is worth trying where nothing generated was verified. */
static bool try_next_split(mk_search *s) {
  for (; s->cur < s->part.nsubkernels; s->cur++) {
    const mk_subkernel *sk = &s->part.subkernels[s->cur];
    if (best_generated(&s->st[s->cur]) >= 0 || sk->nnodes < 2 || !budget_left(s)) continue;
    int at = sk->anchor >= 0 && sk->anchor < sk->nodes[sk->nnodes - 1] ? sk->anchor + 1
                                                                         : sk->nodes[sk->nnodes / 2];
    if (mk_partition_copy(&s->part, &s->trial)) return false;
    if (mk_partition_split(s->g, &s->trial, s->cur, at, NULL)) {
      mk_partition_free(&s->trial);
      continue;
    }
    s->trial_n = 2;
    submit_trial(s);
    return true;
  }
  return false;
}

static void judge_split(mk_search *s) {
  int a = best_generated(&s->trial_st[0]), b = best_generated(&s->trial_st[1]);
  bool accept;
  if (s->ev.timed) {
    double ta = a >= 0 ? rank_time(&s->trial_st[0], &s->trial_st[0].variants[a]) : reference_time(&s->trial_st[0]);
    double tb = b >= 0 ? rank_time(&s->trial_st[1], &s->trial_st[1].variants[b]) : reference_time(&s->trial_st[1]);
    accept = (a >= 0 || b >= 0) && ta + tb < reference_time(&s->st[s->cur]);
  } else {
    accept = a >= 0 || b >= 0; /* correctness is all an untimed run can judge */
  }
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "subkernel", s->cur);
  cJSON_AddBoolToObject(f, "accepted", accept);
  log_event(s, "split", f);
  s->res->splits_tried++;
  if (accept) {
    adopt_trial(s, 1);
    s->res->splits++;
    s->cur += 2;
  } else {
    trial_reset(s);
    s->cur++;
  }
}

static bool try_next_merge(mk_search *s) {
  for (; s->cur + 1 < s->part.nsubkernels; s->cur++) {
    if (!budget_left(s) || !s->ev.timed) return false; /* merges are judged by time only */
    if (mk_partition_copy(&s->part, &s->trial)) return false;
    if (mk_partition_merge(s->g, &s->trial, s->cur, NULL)) {
      mk_partition_free(&s->trial);
      continue;
    }
    s->trial_n = 1;
    submit_trial(s);
    return true;
  }
  return false;
}

static double chosen_time(const mk_subkernel_state *st) {
  int b = best_generated(st);
  double tb = b >= 0 ? rank_time(st, &st->variants[b]) : INFINITY;
  double tr = reference_time(st);
  return tb < tr ? tb : tr;
}

static void judge_merge(mk_search *s) {
  int m = best_generated(&s->trial_st[0]);
  double tm = m >= 0 ? rank_time(&s->trial_st[0], &s->trial_st[0].variants[m]) : INFINITY;
  double apart = chosen_time(&s->st[s->cur]) + chosen_time(&s->st[s->cur + 1]);
  bool accept = m >= 0 && tm < apart;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "subkernel", s->cur);
  cJSON_AddNumberToObject(f, "merged_ms", isinf(tm) ? -1 : tm);
  cJSON_AddNumberToObject(f, "apart_ms", isinf(apart) ? -1 : apart);
  cJSON_AddBoolToObject(f, "accepted", accept);
  log_event(s, "merge", f);
  s->res->merges_tried++;
  if (accept) {
    adopt_trial(s, 2);
    s->res->merges++;
  } else {
    trial_reset(s);
    s->cur++;
  }
}

/* ---- final swap, compose, verify ------------------------------------------ */

static void choose_variants(mk_search *s, bool reference_only) {
  for (int i = 0; i < s->part.nsubkernels; i++) {
    mk_subkernel_state *st = &s->st[i];
    st->chosen = 0;
    if (reference_only) continue;
    int b = best_generated(st);
    if (b < 0 || st->planned_out || (s->plain_only && passed_widened(&st->variants[b]))) continue;
    /* Timed: only when faster than the reference. Untimed: the verified kernel. */
    if (!s->ev.timed || rank_time(st, &st->variants[b]) < reference_time(st)) st->chosen = b;
  }
}

static int compose_to_file(mk_search *s, char **path_out, mk_errmsg *err) {
  const mk_candidate **chosen = calloc((size_t)s->part.nsubkernels + 1, sizeof *chosen);
  if (chosen == NULL) return MK_ENOMEM;
  for (int i = 0; i < s->part.nsubkernels; i++)
    chosen[i] = s->st[i].chosen > 0 ? &s->st[i].variants[s->st[i].chosen].cand : NULL;
  mk_buf out;
  mk_buf_init(&out, 0);
  mk_compose_options opt = {.module_source = s->source,
                            .source_path = s->cfg.source_path ? s->cfg.source_path : s->g->file,
                            .input_names = s->cfg.input_names, .ninput_names = s->cfg.ninput_names,
                            .forward_takes_more = s->cfg.forward_takes_more,
                            .fixed_shapes = s->res->fixed_shapes};
  int rc = s->final_round >= 2 ? mk_errf(err, MK_EUNSUPPORTED, "plain subclass")
                               : mk_compose_modelnew(s->g, &s->part, chosen, &opt, &out, err);
  free(chosen);
  s->res->plain_subclass = rc != 0;
  if (rc) {
    /* Last resort, always correct: ModelNew is the user's Model unchanged. */
    mk_buf_reset(&out);
    mk_compose_plain_subclass(s->g, s->source, &out);
  }
  mk_buf path;
  mk_buf_init(&path, 4096);
  mk_buf_printf(&path, "%s/modelnew.round%d%s.py", s->cfg.workdir, s->final_round,
                s->plain_only && s->final_round == 0 ? "-plain" : "");
  rc = mk_write_file(mk_buf_cstr(&path), mk_buf_cstr(&out), out.len);
  mk_buf_free(&out);
  if (rc) {
    mk_buf_free(&path);
    return mk_errf(err, rc, "cannot write the composed file in %s", s->cfg.workdir);
  }
  *path_out = mk_buf_steal(&path, NULL);
  return 0;
}

/* A composition more than 2% slower than eager (the spread of repeated
 * medians on the H200) is replaced by the plain subclass. */
#define MK_SLOWER_MARGIN 1.02

/* The CUDA-graph variant is tried once, on a GPU, for a timed composition:
 * it only removes launch gaps, so its worth is a measurement. */
static bool graph_worth_trying(const mk_search *s) {
  return s->cfg.try_cuda_graph && s->ev.timed && !s->cancelled && s->res->final.time_ms > 0;
}

/* Adds `compile_s` ({"default": s, "<mode>": s}) to a whole-program event
 * from the verifier's report: the seconds torch.compile took to compile the
 * reference for the baselines, which fall after the search's wall-time budget
 * and grow with the network's depth (docs/cli.md, the wall-time budget); and
 * `compiled_ahead`, what the check found of the compile ahead started by
 * prepare_check (docs/verify.md, "warm_reference"). */
static void add_compile_seconds(cJSON *event, const char *report) {
  cJSON *rep = report ? cJSON_Parse(report) : NULL;
  const cJSON *tim = cJSON_GetObjectItemCaseSensitive(rep, "timing");
  const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(tim, "reference_compile");
  const cJSON *modes = cJSON_GetObjectItemCaseSensitive(tim, "reference_compile_modes");
  cJSON *out = cJSON_CreateObject();
  const cJSON *secs = cJSON_GetObjectItemCaseSensitive(dflt, "compile_s");
  if (cJSON_IsNumber(secs)) cJSON_AddNumberToObject(out, "default", secs->valuedouble);
  const cJSON *m;
  cJSON_ArrayForEach(m, modes) {
    secs = cJSON_GetObjectItemCaseSensitive(m, "compile_s");
    if (cJSON_IsNumber(secs) && m->string) cJSON_AddNumberToObject(out, m->string, secs->valuedouble);
  }
  if (out->child) cJSON_AddItemToObject(event, "compile_s", out);
  else cJSON_Delete(out);
  /* what the check found of a compile ahead (prepare_check), waited for or done */
  cJSON *ahead = cJSON_DetachItemFromObjectCaseSensitive(rep, "compiled_ahead");
  if (cJSON_IsObject(ahead)) cJSON_AddItemToObject(event, "compiled_ahead", ahead);
  else cJSON_Delete(ahead);
  cJSON_Delete(rep);
}

/* How many chosen variants passed only the TF32-aware comparison. */
static int chosen_widened(const mk_search *s) {
  int n = 0;
  for (int i = 0; i < s->part.nsubkernels; i++)
    n += s->st[i].chosen > 0 && passed_widened(&s->st[i].variants[s->st[i].chosen]);
  return n;
}

static void on_final(void *data, const mk_eval_result *r) {
  mk_search *s = data;
  s->res->final = *r;
  s->res->final.report_json = NULL;
  free(s->res->final_report);
  s->res->final_report = r->report_json ? mk_strdup(r->report_json) : NULL;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "round", s->final_round);
  cJSON_AddStringToObject(f, "status", mk_eval_status_name(r->status));
  cJSON_AddNumberToObject(f, "time_ms", r->time_ms);
  if (r->status != MK_EVAL_OK) cJSON_AddStringToObject(f, "reason", r->reason);
  /* Correct but slower than the user's Model (beyond timing noise): the
   * plain subclass, which is the Model itself, is never worse. */
  bool slower = s->ev.timed && r->status == MK_EVAL_OK && r->time_ms > 0 && r->ref_eager_ms > 0 &&
                r->time_ms > MK_SLOWER_MARGIN * r->ref_eager_ms && s->final_round < 2;
  cJSON_AddBoolToObject(f, "slower_than_eager", slower);
  /* Kernels in the program and a pass only within the reference's own TF32
   * error (docs/verify.md): KernelBench compares with the reference itself,
   * at 1e-4, and would not agree (problem 15 on an H100: 5.9e-4). Not
   * accepted: first without the variants that needed the widening, then
   * (as after a mismatch) the reference. */
  bool widened = r->status == MK_EVAL_OK && r->ref_tf32_noise > 0 && s->final_round == 0;
  cJSON_AddBoolToObject(f, "tf32_widened", widened);
  /* buffers within the reference's own TF32 error do not count: KernelBench
   * compares outputs only (docs/verify.md) */
  if (r->state_tf32_noise > 0) cJSON_AddNumberToObject(f, "state_tf32_noise", r->state_tf32_noise);
  /* Correct at its own batch, wrong at another, which its guard lets through
   * (docs/capture.md, "Running at any batch"): the same composition again,
   * every input's whole shape guarded, before anything else is judged. */
  bool other_batch = r->status == MK_EVAL_OK && r->other_batch_failure[0] && !s->res->fixed_shapes &&
                     !s->cancelled;
  if (r->other_batch_failure[0]) {
    cJSON_AddNumberToObject(f, "other_batch", r->other_batch);
    cJSON_AddStringToObject(f, "other_batch_failure", r->other_batch_failure);
  }
  add_compile_seconds(f, r->report_json);
  log_event(s, "final_verify", f);
  if (other_batch) {
    s->res->fixed_shapes = true; /* PH_FINAL again, same round, composed with it */
  } else if ((r->status == MK_EVAL_OK && !slower && !widened) || r->status == MK_EVAL_CANCELLED ||
      s->cancelled || s->final_round >= 2) {
    s->ph = r->status == MK_EVAL_OK && graph_worth_trying(s) ? PH_GRAPH : PH_DONE;
  } else if (s->final_round == 0 && !s->plain_only && chosen_widened(s) > 0 && (widened || !slower)) {
    /* without the widened variants first, slower or not: the rescue below
     * needs a composition that passed plainly */
    s->plain_only = true;
    s->res->reverted += chosen_widened(s);
  } else if (s->final_round == 0 && slower && !widened && graph_worth_trying(s)) {
    s->rescue_pending = true;
    s->ph = PH_GRAPH;
  } else {
    s->final_round = slower ? 2 : s->final_round + 1;
    for (int i = 0; i < s->part.nsubkernels; i++)
      if (s->st[i].chosen > 0) s->res->reverted++;
  }
  batch_done(s);
}

static void cpu_limit_final(mk_search *s);

static void phase_final(mk_search *s) {
  choose_variants(s, s->final_round >= 1);
  emit_progress(s, "verifying the composed program");
  mk_errmsg err = {{0}};
  char *path = NULL;
  int rc = compose_to_file(s, &path, &err);
  if (rc) {
    s->res->final.status = MK_EVAL_ERROR;
    snprintf(s->res->final.reason, sizeof s->res->final.reason, "%s", err.text);
    s->ph = PH_DONE;
    advance(s);
    return;
  }
  free(s->res->modelnew_path);
  s->res->modelnew_path = path;
  if (s->cancelled) {
    /* Cancelled: the best composition so far, made of verified variants,
     * but the whole program is not verified again (that is the slow part
     * the user asked to stop). */
    s->res->final = (mk_eval_result){.status = MK_EVAL_CANCELLED, .time_ms = -1, .min_ms = -1,
                                     .ref_eager_ms = -1, .ref_compile_ms = -1,
                                     .ref_compile_max_ms = -1, .ref_compile_ro_ms = -1};
    snprintf(s->res->final.reason, sizeof s->res->final.reason,
             "cancelled: the composed program was not verified as a whole");
    s->ph = PH_DONE;
    advance(s);
    return;
  }
  if (s->cpu_budget > 0) cpu_limit_final(s);
  start_batch(s);
  s->pending++;
  if (s->ev.evaluate_composition(s->ev.self, path, on_final, s) < 0) {
    mk_eval_result r = {.status = MK_EVAL_ERROR, .time_ms = -1};
    snprintf(r.reason, sizeof r.reason, "the verifier refused the composition");
    on_final(s, &r);
  }
  end_batch(s);
}

/* A graph variant is kept when it beats the plain composition beyond timing
 * noise (MK_SLOWER_MARGIN); the plain one stays otherwise. */
static void revert_to_reference_round(mk_search *s) {
  s->final_round = 2;
  for (int i = 0; i < s->part.nsubkernels; i++)
    if (s->st[i].chosen > 0) {
      s->res->reverted++;
      s->rescue_reverted++;
    }
  s->ph = PH_FINAL;
}

/* Adds `captured` (and `why`, when not) to a cuda_graph event from the
 * verifier's report (`cuda_graph_captured`, docs/verify.md): a variant that
 * never captured timed its plain forward, and the event must say so. */
static void add_capture(cJSON *event, const char *report) {
  cJSON *rep = report ? cJSON_Parse(report) : NULL;
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(rep, "cuda_graph_captured");
  if (cJSON_IsBool(c)) {
    cJSON_AddBoolToObject(event, "captured", cJSON_IsTrue(c));
    const cJSON *notes = cJSON_GetObjectItemCaseSensitive(rep, "notes");
    const cJSON *n;
    cJSON_ArrayForEach(n, notes) {
      if (!cJSON_IsFalse(c) || !cJSON_IsString(n) || !strstr(n->valuestring, "CUDA graph never captured"))
        continue;
      cJSON_AddStringToObject(event, "why", n->valuestring);
      break;
    }
  }
  cJSON_Delete(rep);
}

/* The rescue's verdict: a graph variant faster than eager beyond noise is
 * kept aside (finish() compares it with the final composition); the
 * reference round runs either way. */
static void on_rescue_graph(mk_search *s, const mk_eval_result *r) {
  s->rescue_pending = false;
  bool beats_eager = r->status == MK_EVAL_OK && r->time_ms > 0 && r->ref_eager_ms > 0 &&
                     r->time_ms * MK_SLOWER_MARGIN < r->ref_eager_ms;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "status", mk_eval_status_name(r->status));
  cJSON_AddNumberToObject(f, "time_ms", r->time_ms);
  cJSON_AddNumberToObject(f, "plain_ms", s->res->final.time_ms);
  if (r->status != MK_EVAL_OK) cJSON_AddStringToObject(f, "reason", r->reason);
  cJSON_AddBoolToObject(f, "rescue", true);
  cJSON_AddBoolToObject(f, "beats_eager", beats_eager);
  add_capture(f, r->report_json);
  add_compile_seconds(f, r->report_json);
  log_event(s, "cuda_graph", f);
  int *chosen = beats_eager ? malloc(sizeof *chosen * ((size_t)s->part.nsubkernels + 1)) : NULL;
  if (chosen) {
    for (int i = 0; i < s->part.nsubkernels; i++) chosen[i] = s->st[i].chosen;
    s->rescue = *r;
    s->rescue.report_json = NULL;
    s->rescue_report = r->report_json ? mk_strdup(r->report_json) : NULL;
    s->rescue_plain_ms = s->res->final.time_ms;
    s->rescue_chosen = chosen;
    s->rescue_path = s->graph_path;
    s->graph_path = NULL;
  }
  revert_to_reference_round(s);
  batch_done(s);
}

/* At the end: the rescue graph replaces the final composition when it is
 * faster beyond noise (or the final one failed); the chosen variants are
 * those it composed. */
static void prefer_rescue(mk_search *s) {
  mk_search_result *res = s->res;
  if (s->rescue_path == NULL || s->cancelled || s->st == NULL) return;
  bool final_ok = res->final.status == MK_EVAL_OK && res->final.time_ms > 0;
  if (final_ok && s->rescue.time_ms * MK_SLOWER_MARGIN >= res->final.time_ms) return;
  for (int i = 0; i < s->part.nsubkernels; i++) s->st[i].chosen = s->rescue_chosen[i];
  res->reverted -= s->rescue_reverted;
  res->cuda_graph = true;
  res->plain_ms = s->rescue_plain_ms;
  res->cuda_graph_ms = s->rescue.time_ms;
  res->cuda_graph_reason[0] = '\0';
  res->final = s->rescue;
  free(res->final_report);
  res->final_report = s->rescue_report;
  s->rescue_report = NULL;
  free(res->modelnew_path);
  res->modelnew_path = s->rescue_path;
  res->plain_subclass = false; /* round 0's composition, as a graph */
  s->rescue_path = NULL;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "time_ms", res->final.time_ms);
  cJSON_AddNumberToObject(f, "plain_ms", res->plain_ms);
  log_event(s, "rescue_kept", f);
}

static void on_graph(void *data, const mk_eval_result *r) {
  mk_search *s = data;
  if (s->rescue_pending) {
    on_rescue_graph(s, r);
    return;
  }
  mk_search_result *res = s->res;
  bool faster = r->status == MK_EVAL_OK && r->time_ms > 0 &&
                r->time_ms * MK_SLOWER_MARGIN < res->final.time_ms;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "status", mk_eval_status_name(r->status));
  cJSON_AddNumberToObject(f, "time_ms", r->time_ms);
  cJSON_AddNumberToObject(f, "plain_ms", res->final.time_ms);
  if (r->status != MK_EVAL_OK) cJSON_AddStringToObject(f, "reason", r->reason);
  cJSON_AddBoolToObject(f, "kept", faster);
  add_capture(f, r->report_json);
  add_compile_seconds(f, r->report_json);
  const cJSON *why = cJSON_GetObjectItemCaseSensitive(f, "why");
  char not_captured[sizeof res->cuda_graph_reason] = "";
  if (cJSON_IsString(why)) snprintf(not_captured, sizeof not_captured, "%s", why->valuestring);
  log_event(s, "cuda_graph", f); /* frees f */
  res->cuda_graph_ms = r->status == MK_EVAL_OK ? r->time_ms : -1;
  if (faster) {
    res->cuda_graph = true;
    res->plain_ms = res->final.time_ms;
    res->final = *r;
    res->final.report_json = NULL;
    free(res->final_report);
    res->final_report = r->report_json ? mk_strdup(r->report_json) : NULL;
    free(res->modelnew_path);
    res->modelnew_path = s->graph_path;
    s->graph_path = NULL;
  } else {
    snprintf(res->cuda_graph_reason, sizeof res->cuda_graph_reason, "%s",
             r->status != MK_EVAL_OK ? r->reason
             : not_captured[0]      ? not_captured
                                    : "not faster than the plain composition");
  }
  s->ph = PH_DONE;
  batch_done(s);
}

static int write_graph_variant(mk_search *s, char **path_out, mk_errmsg *err) {
  char *src = NULL;
  size_t len = 0;
  int rc = mk_read_file(s->res->modelnew_path, 64u << 20, &src, &len);
  if (rc) return mk_errf(err, rc, "cannot read %s", s->res->modelnew_path);
  mk_buf out, path;
  mk_buf_init(&out, 0);
  mk_buf_init(&path, 4096);
  rc = mk_compose_cuda_graph(src, "ModelNew", &out, err);
  free(src);
  mk_buf_printf(&path, "%s/modelnew.%sgraph.py", s->cfg.workdir, s->rescue_pending ? "round0." : "");
  if (!rc && (rc = mk_write_file(mk_buf_cstr(&path), mk_buf_cstr(&out), out.len)) != 0)
    mk_errf(err, rc, "cannot write %s", mk_buf_cstr(&path));
  mk_buf_free(&out);
  if (rc) {
    mk_buf_free(&path);
    return rc;
  }
  *path_out = mk_buf_steal(&path, NULL);
  return 0;
}

static void phase_graph(mk_search *s) {
  emit_progress(s, "verifying the program replayed as a CUDA graph");
  mk_errmsg err = {{0}};
  free(s->graph_path);
  s->graph_path = NULL;
  if (write_graph_variant(s, &s->graph_path, &err)) {
    snprintf(s->res->cuda_graph_reason, sizeof s->res->cuda_graph_reason, "%s", err.text);
    if (s->rescue_pending) {
      /* no rescue: the slower composition gives way to the reference round */
      s->rescue_pending = false;
      revert_to_reference_round(s);
    } else {
      s->ph = PH_DONE;
    }
    advance(s);
    return;
  }
  start_batch(s);
  s->pending++;
  int (*check)(void *, const char *, mk_eval_cb, void *) =
      s->ev.evaluate_graph ? s->ev.evaluate_graph : s->ev.evaluate_composition;
  if (check(s->ev.self, s->graph_path, on_graph, s) < 0) {
    mk_eval_result r = {.status = MK_EVAL_ERROR, .time_ms = -1};
    snprintf(r.reason, sizeof r.reason, "the verifier refused the CUDA-graph variant");
    on_graph(s, &r);
  }
  end_batch(s);
}

/* Drops variants whose evaluation was cancelled: they were never judged.
 * The reference (index 0) stays whatever happened to it. */
static void prune_cancelled(mk_search *s) {
  for (int i = 0; s->st && i < s->part.nsubkernels; i++) {
    mk_subkernel_state *st = &s->st[i];
    int out = st->nvariants > 0 ? 1 : 0, chosen = 0;
    for (int k = 1; k < st->nvariants; k++) {
      if (st->variants[k].result.status == MK_EVAL_CANCELLED) {
        variant_free(&st->variants[k]);
        continue;
      }
      if (k == st->chosen) chosen = out;
      st->variants[out++] = st->variants[k];
    }
    st->nvariants = out;
    st->chosen = chosen;
  }
}

/* Which backend each subkernel's chosen variant uses, and how many of each. */
static void add_chosen_backends(const mk_search_result *r, cJSON *f) {
  cJSON *each = cJSON_AddArrayToObject(f, "backends");
  int counts[3] = {0, 0, 0}; /* pytorch, triton, cuda */
  static const char *const names[] = {"pytorch", "triton", "cuda"};
  for (int i = 0; r->states && i < r->partition.nsubkernels; i++) {
    const mk_subkernel_state *st = &r->states[i];
    const mk_candidate *c = st->chosen > 0 && st->chosen < st->nvariants ? &st->variants[st->chosen].cand : NULL;
    const char *b = mk_candidate_backend(c);
    cJSON_AddItemToArray(each, cJSON_CreateString(b));
    for (int k = 0; k < 3; k++) counts[k] += strcmp(b, names[k]) == 0;
  }
  cJSON *o = cJSON_AddObjectToObject(f, "backend_counts");
  for (int k = 0; k < 3; k++) cJSON_AddNumberToObject(o, names[k], counts[k]);
}

static void finish(mk_search *s) {
  if (s->finished) return;
  s->finished = true;
  if (s->cancelled) prune_cancelled(s);
  prefer_rescue(s);
  mk_search_result *r = s->res;
  r->partition = s->part;
  memset(&s->part, 0, sizeof s->part);
  r->states = s->st;
  s->st = NULL;
  r->wall_s = mk_now_s() - s->t0;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "proposals", r->proposals);
  cJSON_AddNumberToObject(f, "verified", r->verified);
  cJSON_AddStringToObject(f, "final", mk_eval_status_name(r->final.status));
  cJSON_AddNumberToObject(f, "native_worker_evals", r->native_evals);
  add_chosen_backends(r, f);
  log_event(s, "done", f);
  if (s->on_event) {
    mk_search_event ev = {.kind = MK_SEARCH_DONE, .fraction = 1.0, .message = "done"};
    s->on_event(s->data, &ev);
  }
  int status = s->cancelled ? MK_ECANCELED : r->final.status == MK_EVAL_OK ? 0 : MK_EMISMATCH;
  s->res = NULL;
  mk_search_done_cb done = s->on_done;
  void *data = s->data;
  trial_reset(s);
  mk_candidate_list_free(&s->cpu_queue);
  for (int i = s->sq_pos; i < s->sq_n; i++) mk_candidate_free(&s->sq[i].cand);
  free(s->sq);
  free(s->rep);
  free(s->order);
  free(s->source);
  free(s->workdir);
  free(s->graph_path);
  free(s->rescue_path);
  free(s->rescue_report);
  free(s->rescue_chosen);
  free(s);
  done(data, status, r, status && r->final.reason[0] ? r->final.reason : NULL);
}

static void advance(mk_search *s) {
  if (s->pending) return;
  switch (s->ph) {
  case PH_REFERENCES:
    share_with_twins(s, false);
    order_subkernels(s);
    s->ph = PH_SUBKERNEL;
    s->cur = 0;
    s->step = 0;
    phase_subkernel(s);
    return;
  case PH_SUBKERNEL:
    phase_subkernel(s);
    return;
  case PH_SPLIT:
    if (s->trial_n) judge_split(s);
    if (!try_next_split(s)) {
      s->ph = s->cfg.try_merge ? PH_MERGE : PH_FINAL;
      s->cur = 0;
      advance(s);
    }
    return;
  case PH_MERGE:
    if (s->trial_n) judge_merge(s);
    if (!try_next_merge(s)) {
      s->ph = PH_FINAL;
      advance(s);
    }
    return;
  case PH_FINAL:
    phase_final(s);
    return;
  case PH_GRAPH:
    phase_graph(s);
    return;
  case PH_DONE:
    finish(s);
    return;
  }
}

/* True if subkernel i (orig: its index in the caller's partition, -1 for
 * one merged here) has no prior variants of its own: merging it loses nothing. */
static bool prior_is_bare(const mk_search_config *cfg, int orig) {
  if (orig < 0 || cfg->prior == NULL || orig >= cfg->nprior) return true;
  const mk_subkernel_state *p = &cfg->prior[orig];
  return p->nvariants <= 1 && p->chosen == 0;
}

/* Merges neighbours whose union the proposer writes as one fused kernel
 * (mk_proposer.fuses), before anything is timed: the merge phase comes after
 * every beam and, on a heavy program, after the wall budget (problem 10 on an
 * H100: its convolution's beam took the whole budget and no merge was tried).
 * The merged subkernel still gets the unfused variants (cuDNN, then a kernel
 * per stage) from the proposer, so nothing is lost, and a split may undo it.
 * Where a subkernel and its neighbour do not fuse, the next PREMERGE_SPAN - 1
 * are tried with them: ShuffleNet's bn3 and the shortcut norm whose epilogue
 * applies it have the shortcut's convolution and the norm's counter update
 * between them. Subkernels with prior variants of their own (a user's
 * earlier evolve) stay. orig[i]: subkernel i's index in the caller's
 * partition, -1 when merged. */
#define PREMERGE_SPAN 3

/* The partition with subkernels [i, i + span] of s->part merged into i, in
 * *trial, if the proposer fuses their union and none has prior variants. */
static bool premerge_trial(mk_search *s, const mk_search_config *cfg, const int *orig, int i, int span,
                           mk_partition *trial) {
  for (int k = 0; k <= span; k++)
    if (!prior_is_bare(cfg, orig[i + k])) return false;
  *trial = (mk_partition){0};
  if (mk_partition_copy(&s->part, trial)) return false;
  bool ok = true;
  for (int k = 0; k < span && ok; k++) ok = mk_partition_merge(s->g, trial, i, NULL) == 0;
  ok = ok && s->prop.fuses(s->prop.self, s->g, &trial->subkernels[i], cfg->backend);
  if (!ok) mk_partition_free(trial);
  return ok;
}

static int premerge_fused(mk_search *s, const mk_search_config *cfg, int *orig) {
  int merged = 0;
  for (int i = 0; i < s->part.nsubkernels; i++) orig[i] = i;
  /* Merges are a timed move (try_next_merge): on the CPU, where the implicit
   * GEMM comes last anyway, the decomposition stays as the user sees it. */
  if (s->prop.fuses == NULL || !cfg->try_merge || cfg->only_subkernel >= 0 || !s->ev.timed) return 0;
  for (int i = 0; i + 1 < s->part.nsubkernels;) {
    mk_partition trial = {0};
    int span = 0;
    for (int k = 1; k <= PREMERGE_SPAN && i + k < s->part.nsubkernels && span == 0; k++)
      if (premerge_trial(s, cfg, orig, i, k, &trial)) span = k;
    if (span == 0) {
      i++;
      continue;
    }
    cJSON *f = cJSON_CreateObject();
    cJSON_AddStringToObject(f, "first", s->part.subkernels[i].name);
    cJSON_AddStringToObject(f, "second", s->part.subkernels[i + span].name);
    cJSON_AddNumberToObject(f, "between", span - 1);
    cJSON_AddStringToObject(f, "merged", trial.subkernels[i].name);
    log_event(s, "fused", f);
    mk_partition_free(&s->part);
    s->part = trial;
    orig[i] = -1;
    for (int k = i + 1; k < s->part.nsubkernels; k++) orig[k] = orig[k + span];
    merged += span; /* and try the next neighbour onto the same subkernel */
  }
  return merged;
}

/* The caller's prior states renumbered after premerge_fused: a shallow copy
 * per subkernel, empty for a merged one. NULL when nothing was merged. */
static mk_subkernel_state *renumber_prior(const mk_search_config *cfg, const int *orig, int n) {
  if (cfg->prior == NULL) return NULL;
  mk_subkernel_state *pr = calloc((size_t)n + 1, sizeof *pr);
  if (pr == NULL) return NULL;
  for (int i = 0; i < n; i++)
    if (orig[i] >= 0 && orig[i] < cfg->nprior) pr[i] = cfg->prior[orig[i]];
  return pr;
}

static void log_twins(mk_search *s) {
  int twins = 0;
  for (int i = 0; i < s->part.nsubkernels; i++) twins += is_twin(s, i);
  cJSON *f = cJSON_CreateObject();
  cJSON_AddNumberToObject(f, "subkernels", s->part.nsubkernels);
  cJSON_AddNumberToObject(f, "distinct", s->part.nsubkernels - twins);
  log_event(s, "twins", f);
}

int mk_search_start(const mk_graph *g, const mk_partition *initial, const char *module_source,
                    const mk_search_config *cfg, mk_proposer proposer, mk_evaluator evaluator,
                    mk_search_event_cb on_event, mk_search_done_cb on_done, void *data,
                    mk_search **out, mk_errmsg *err) {
  if (g == NULL || initial == NULL || module_source == NULL || on_done == NULL ||
      proposer.propose == NULL || evaluator.evaluate == NULL ||
      evaluator.evaluate_composition == NULL)
    return mk_errf(err, MK_EINVAL, "search: missing graph, partition, source or callbacks");
  mk_search *s = calloc(1, sizeof *s);
  if (s == NULL) return mk_errf(err, MK_ENOMEM, "search: out of memory");
  s->g = g;
  s->cfg = *cfg;
  s->prop = proposer;
  s->ev = evaluator;
  s->on_event = on_event;
  s->on_done = on_done;
  s->data = data;
  s->t0 = mk_now_s();
  s->source = mk_strdup(module_source);
  s->workdir = mk_strdup(cfg->workdir ? cfg->workdir : ".");
  s->cfg.workdir = s->workdir;
  char *kept = mk_strdup_printf("%s/candidates", s->workdir);
  if (kept) (void)mkdir(kept, 0755); /* keep_source's folder; best effort */
  free(kept);
  s->cfg.prior = NULL; /* borrowed only during start (copied below) */
  if (!evaluator.timed) s->cpu_budget = cfg->max_seconds >= 0 ? cfg->max_seconds : cfg->cpu_seconds;
  s->res = calloc(1, sizeof *s->res);
  int n = initial->nsubkernels;
  s->st = calloc((size_t)n + 1, sizeof *s->st);
  s->order = calloc((size_t)n + 1, sizeof *s->order);
  if (!s->source || !s->workdir || !s->res || !s->st || !s->order ||
      mk_partition_copy(initial, &s->part)) {
    free(s->source);
    free(s->workdir);
    free(s->res);
    free(s->st);
    free(s->order);
    free(s);
    return mk_errf(err, MK_ENOMEM, "search: out of memory");
  }
  if (out) *out = s;
  cJSON *f = cJSON_CreateObject();
  cJSON_AddStringToObject(f, "file", g->file ? g->file : "");
  cJSON_AddNumberToObject(f, "subkernels", n);
  cJSON_AddStringToObject(f, "proposer", proposer.name ? proposer.name : "?");
  cJSON_AddStringToObject(f, "backend", mk_kernel_backend_name(cfg->backend));
  cJSON_AddNumberToObject(f, "beam", cfg->beam_width);
  cJSON_AddNumberToObject(f, "depth", cfg->depth);
  cJSON_AddNumberToObject(f, "seed", (double)cfg->seed);
  log_event(s, "start", f);
  if (evaluator.timed && evaluator.prepare_check) evaluator.prepare_check(evaluator.self, cfg->try_cuda_graph);
  s->ph = PH_REFERENCES;
  int *orig = malloc(sizeof *orig * ((size_t)n + 1));
  mk_subkernel_state *renumbered = NULL;
  if (orig && (s->res->fused = premerge_fused(s, cfg, orig)) > 0) {
    n = s->part.nsubkernels;
    renumbered = renumber_prior(cfg, orig, n);
  }
  free(orig);
  emit_progress(s, "timing the PyTorch reference");
  s->cfg.prior = renumbered ? renumbered : s->res->fused > 0 ? NULL : cfg->prior;
  s->cfg.nprior = renumbered ? n : cfg->nprior;
  s->rep = malloc(sizeof *s->rep * ((size_t)n + 1));
  if (s->rep && (cfg->only_subkernel >= 0 || mk_partition_twins(g, &s->part, s->rep))) {
    free(s->rep); /* searching one subkernel, or no memory: no sharing */
    s->rep = NULL;
  }
  log_twins(s);
  s->submitting = true; /* references may complete synchronously: finish start first */
  for (int i = 0; i < n; i++) adopt_prior_or_reference(s, i);
  s->cfg.prior = NULL;
  free(renumbered);
  s->submitting = false;
  s->pending++;
  batch_done(s);
  return 0;
}

void mk_search_cancel(mk_search *s) {
  if (s == NULL || s->cancelled || s->finished) return;
  s->cancelled = true;
  /* Last: the evaluator may call back (and the search finish) right here. */
  if (s->ev.cancel) s->ev.cancel(s->ev.self);
}

void mk_search_result_free(mk_search_result *r) {
  if (r == NULL) return;
  for (int i = 0; r->states && i < r->partition.nsubkernels; i++) state_free(&r->states[i]);
  free(r->states);
  mk_partition_free(&r->partition);
  free(r->modelnew_path);
  free(r->final_report);
  free(r);
}
