/* mk_search.h — MKEvolve's search: beam search per subkernel, split/merge
 * over the decomposition, budget, and the final swap.
 *
 * The search talks to proposers and to the verifier only through the two
 * small interfaces below, so it is tested with fakes and runs the same with
 * the builtin generator, LLM agents, the CPU interpreter or a GPU.
 *
 * Flow (all asynchronous, on the caller's libuv loop):
 *   1. every subkernel gets its reference variant, timed;
 *   2. budget is handed out: first to subkernels with no verified candidate,
 *      then in proportion to each subkernel's share of the reference time;
 *   3. per subkernel, a beam of width W for D steps: NEW proposals, REPAIR of
 *      failures, OPTIMISE of the best verified; each candidate verified;
 *   4. merge: adjacent subkernels whose merged candidate measures faster than
 *      the two apart are merged; split: a subkernel with no verified
 *      candidate is split after its anchor and searched again;
 *   5. swap: per subkernel the fastest verified variant (the reference
 *      included); the whole program is verified once more, and subkernels
 *      are reverted to the reference until it passes. Never worse than
 *      PyTorch, never incorrect.
 * Every step is written to a JSONL run log.
 *
 * Ownership: the search borrows the graph, the proposer and the evaluator
 * for its lifetime; it owns its partition copy and all candidates. */
#ifndef MK_SEARCH_H
#define MK_SEARCH_H

#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_propose.h"

#include <stdbool.h>
#include <stdio.h>

typedef enum mk_eval_status {
  MK_EVAL_OK,
  MK_EVAL_MISMATCH,
  MK_EVAL_COMPILE_ERROR,
  MK_EVAL_RUNTIME_ERROR,
  MK_EVAL_REJECTED,   /* a guard fired */
  MK_EVAL_CRASHED,
  MK_EVAL_TIMEOUT,
  MK_EVAL_OOM,
  MK_EVAL_ERROR,      /* anything else (worker unavailable, ...) */
  MK_EVAL_CANCELLED,  /* the search was cancelled while it ran (mk_evaluator.cancel) */
} mk_eval_status;

typedef struct mk_eval_result {
  mk_eval_status status;
  double time_ms;        /* median; < 0 when not timed (CPU) */
  double min_ms;
  double ref_eager_ms;   /* reference, same protocol; < 0 when not timed */
  double ref_compile_ms; /* torch.compile of the reference; < 0 when not timed */
  double ref_compile_max_ms; /* its mode="max-autotune-no-cudagraphs"; < 0 when not timed */
  double ref_compile_ro_ms;  /* its mode="reduce-overhead" (CUDA graphs); < 0 when not timed */
  int compile_check;         /* torch.compile's output under the plain comparison: 1 passed,
                                -1 failed, 0 not checked (mk_verify_result) */
  double compile_max_abs_err; /* its error against eager; meaningful when compile_check != 0 */
  double max_abs_err, max_rel_err;
  double ref_tf32_noise; /* > 0: verified against the full-FP32 reference (mk_verify_result) */
  double state_tf32_noise; /* > 0: its state (running statistics) was, outputs maybe not */
  int trials_passed, trials;
  bool cached;
  bool native;           /* the native worker ran it (mk_verify_result.native) */
  char gpu[64];          /* CUDA_VISIBLE_DEVICES of the GPU that ran it; "" on the CPU or
                            when the answer came from the cache */
  char reason[1024];     /* one readable sentence when status != OK */
  /* A composition that passed at its batch but failed at another one
   * (mk_verify_result.other_batch_failure; "" otherwise): the search composes
   * it again with every input's whole shape guarded. */
  char other_batch_failure[256];
  int other_batch;
  const char *report_json; /* the verifier's full report (borrowed, valid during the callback) */
  /* What the evaluation cost, for the CPU plan (mk_cpu_plan): the job's wall
   * seconds (0: unknown, the search measures submit to callback) and the
   * median seconds of one call of the candidate (0: unknown). */
  double cost_s, run_s;
  /* Median seconds of eager PyTorch through the subkernel per trial (its
   * inputs made by the program before it, then its reference); 0: unknown. */
  double prefix_s;
} mk_eval_result;

typedef void (*mk_eval_cb)(void *data, const mk_eval_result *r);

/* The verifier as the search sees it. `evaluate` checks candidate `c` for
 * subkernel `sk`; `evaluate_composition` checks a ModelNew file against the
 * problem. Each returns 0 and later calls cb exactly once, or returns < 0
 * and never calls cb. `cancel` (optional, NULL when the verifier cannot
 * abort) cancels every evaluation submitted through `self` that has not
 * called back yet: each still calls back exactly once, with
 * MK_EVAL_CANCELLED or the verdict it already had; it may call back
 * before `cancel` returns. */
typedef struct mk_evaluator {
  void *self;
  int (*evaluate)(void *self, const mk_graph *g, const mk_subkernel *sk, const mk_candidate *c,
                  mk_eval_cb cb, void *data);
  int (*evaluate_composition)(void *self, const char *modelnew_path, mk_eval_cb cb, void *data);
  /* Optional: as evaluate_composition, for a CUDA-graph variant; the
   * verifier also times torch.compile's "reduce-overhead" mode (which replays
   * graphs too) for the result's ref_compile_ro_ms. NULL: evaluate_composition. */
  int (*evaluate_graph)(void *self, const char *modelnew_path, mk_eval_cb cb, void *data);
  void (*cancel)(void *self);
  /* Optional: the time limit, in seconds, of the evaluations submitted from
   * now on (0: the evaluator's own). The CPU plan sets it per job. */
  void (*limit)(void *self, double seconds);
  /* Optional: called once as a timed search starts. The whole-program check
   * (and, when `graph`, its CUDA-graph variant) comes at the search's end;
   * the evaluator may get it ready beside the search (the session has the
   * GPU worker compile the reference's torch.compile baselines ahead). */
  void (*prepare_check)(void *self, bool graph);
  bool timed; /* false on CPU: no timings, choices say "untimed" */
  /* How many evaluations run at once (the workers behind it); 0: one. The
   * search keeps that many plus one in flight under a wall-time slice. */
  int parallel;
} mk_evaluator;

typedef struct mk_search_config {
  int beam_width;          /* W (defaults: mk_search_config_defaults, the only place they live) */
  int depth;               /* D: beam steps after the first proposals */
  int max_proposals;       /* candidates per run, all subkernels together (0: no limit) */
  double max_seconds;      /* wall-time budget (--time-budget); default -1 = unset: the
                              device's budget below; 0 = none (on the CPU: no plan) */
  double cpu_seconds;      /* untimed evaluator (the CPU's interpreter), max_seconds unset:
                              the wall time the CPU plan sizes the work to, default 150 */
  double gpu_seconds;      /* timed evaluator (a GPU), max_seconds unset: no new
                              candidates, merges or splits after this much wall time, so a
                              problem ends in minutes (the final whole-program check and
                              its CUDA-graph variant come after), default 150 */
  double job_timeout_s;    /* the configured limit of one evaluation (the plan's ceiling),
                              0 = none */
  double max_cost;         /* the proposer's budget per run, in its cost unit (mk_candidate.cost:
                              the LLM's tokens), 0 = none */
  unsigned long long seed;
  bool try_merge;          /* default true */
  bool try_split;          /* default true */
  bool try_cuda_graph;     /* default true: on a GPU, also verify the composed program
                              replayed as one CUDA graph; kept only when faster */
  mk_kernel_backend backend; /* default MK_KBACKEND_TRITON: the builtin generator's kernel
                              language(s) (--backend triton|cuda|auto) */
  const char *device;      /* "cpu" or GPU name, for proposers */
  const char *workdir;     /* where composed files are written */
  const char *source_path; /* the module's path for composed files' header (borrowed for the
                              search's lifetime); NULL: the graph's file */
  int only_subkernel;      /* >= 0: search this subkernel only (no split/merge); -1: all */
  const char *const *input_names; /* forward's parameter names (borrowed), or NULL */
  int ninput_names;
  bool forward_takes_more; /* mk_compose_options.forward_takes_more */
  FILE *log;               /* JSONL run log, or NULL */
  /* Variants already known for the initial partition (one state per
   * subkernel, borrowed and copied at start): they are kept and not
   * evaluated again. NULL for a fresh search. */
  const struct mk_subkernel_state *prior;
  int nprior;
} mk_search_config;

void mk_search_config_defaults(mk_search_config *c);

/* One verified or failed variant of a subkernel. */
typedef struct mk_variant {
  mk_candidate cand;     /* owned */
  mk_eval_result result; /* report_json is copied into report (owned) */
  char *report;
} mk_variant;

typedef struct mk_subkernel_state {
  mk_variant *variants; int nvariants, cap;
  int chosen;            /* index into variants (0 is always the reference) */
  int proposals;         /* candidates proposed for this subkernel */
  bool unsupported;      /* the proposer had nothing for it */
  char unsupported_reason[256];
  /* The CPU plan's word on this subkernel: `planned_out` when a verified
   * variant is not used because the whole-program check could not afford
   * it; `plan_reason` why the reference stays (budget spent, a timeout, too
   * costly), "" when the plan had nothing to say. */
  bool planned_out;
  char plan_reason[256];
} mk_subkernel_state;

typedef struct mk_search_result {
  mk_partition partition;          /* final decomposition (owned) */
  mk_subkernel_state *states;      /* one per subkernel (owned) */
  char *modelnew_path;             /* the composed, verified file (owned) */
  mk_eval_result final;            /* verification of the whole program */
  char *final_report;              /* owned */
  int proposals, verified, failed, merges, splits, reverted;
  int merges_tried, splits_tried;  /* merges/splits judged (merges, splits: those kept) */
  int fused;  /* merges made before the beams: the proposer fuses the union (mk_proposer.fuses) */
  int native_evals; /* evaluations the native worker ran (mk_eval_result.native) */
  double cost;                     /* the proposals' cost (mk_candidate.cost, summed) */
  double wall_s;
  /* CUDA-graph variant (PH_GRAPH): cuda_graph when modelnew_path is it;
   * plain_ms the composition without it (then), cuda_graph_ms its own time
   * (0 when not tried, -1 when it failed), cuda_graph_reason why it was not
   * kept (empty when kept or not tried). */
  bool cuda_graph;
  /* The composition failed at another batch, so modelnew_path guards every
   * input's whole shape (mk_compose_options.fixed_shapes). */
  bool fixed_shapes;
  /* modelnew_path is the plain subclass (mk_compose_plain_subclass): the
   * composition failed or was slower than the Model itself. */
  bool plain_subclass;
  double plain_ms, cuda_graph_ms;
  char cuda_graph_reason[1024];
} mk_search_result;

typedef enum mk_search_event_kind {
  MK_SEARCH_PROGRESS, /* fraction + message */
  MK_SEARCH_VARIANT,  /* a subkernel got a verified or failed variant */
  MK_SEARCH_DONE,
} mk_search_event_kind;

typedef struct mk_search_event {
  mk_search_event_kind kind;
  double fraction;
  const char *message;
  int subkernel;           /* for VARIANT */
  const mk_variant *variant;
  /* PROGRESS under the CPU plan: candidates judged, candidates planned in
   * all (judged + in flight + one per subkernel still to search), and the
   * plan's estimate of the seconds left (< 0: none; the GPU search gives
   * none and these stay 0). */
  int cand_done, cand_planned;
  double eta_s;
} mk_search_event;

typedef void (*mk_search_event_cb)(void *data, const mk_search_event *ev);
typedef void (*mk_search_done_cb)(void *data, int status, mk_search_result *result,
                                  const char *error);

typedef struct mk_search mk_search;

/* Starts a search over graph `g` from partition `initial` (copied). The
 * module source is needed to compose ModelNew files. done is called exactly
 * once; the result passed to it is owned by the receiver
 * (mk_search_result_free). */
int mk_search_start(const mk_graph *g, const mk_partition *initial, const char *module_source,
                    const mk_search_config *cfg, mk_proposer proposer, mk_evaluator evaluator,
                    mk_search_event_cb on_event, mk_search_done_cb on_done, void *data,
                    mk_search **out, mk_errmsg *err);
/* Cancels the search: no new evaluation starts, the evaluator's `cancel`
 * (when it has one) aborts those in flight, and done reports MK_ECANCELED
 * with the best composition so far: the verified variants chosen as usual,
 * composed to modelnew_path but not verified as a whole (result->final has
 * MK_EVAL_CANCELLED); variants whose evaluation was cancelled are dropped.
 * done may be called before this returns (an evaluator that cancels
 * synchronously): the search is freed with it. Never call it after done. */
void mk_search_cancel(mk_search *s);

void mk_search_result_free(mk_search_result *r);

/* ---- the CPU plan (search_plan.c) ----------------------------------------
 * On the CPU every kernel runs in Triton's interpreter, where one candidate
 * can cost seconds to minutes and nothing is timed: one verified candidate
 * per subkernel is all a choice can use. The search then evaluates
 * candidates one at a time (at most depth + 1 per subkernel), gives a
 * subkernel that has its verified kernel more only from a full share of the
 * budget, and sizes every job from what jobs measured so far against a
 * wall-time budget. These functions are that arithmetic, pure, on a snapshot. */
typedef struct mk_cpu_plan {
  double budget_s;      /* the search's wall-time budget */
  double job_cap_s;     /* the configured limit of one job, 0 = none */
  double spent_s;       /* wall time so far */
  double base_s;        /* the whole-program check without kernels: the reference model
                           and the eager rest over every trial (largest measured) */
  double reserve_s;     /* what the kernels kept so far add to that check */
  int subkernels_left;  /* distinct subkernels still to search, the current one included */
  double floor_s;       /* what a job was seen to need at least (a timed-out job's limit, and
                           half again), 0: nothing seen */
} mk_cpu_plan;

/* Below this a job cannot do its work (a worker restart alone is seconds). */
#define MK_CPU_PLAN_MIN_JOB_S 10.0

/* The whole-program check runs the subkernels' trials and one more at a
 * smaller batch (docs/verify.md, verify_composition's other_batch). */
#define MK_CHECK_EXTRA_TRIALS 1

/* Seconds the next candidate may run: the budget left after the planned
 * whole-program check, shared by the subkernels left and the check's share
 * of this candidate's kernel; when that share is below what a job needs
 * (MK_CPU_PLAN_MIN_JOB_S, floor_s), that much, first come first served, as
 * long as the budget left pays for it and its check; at most job_cap_s.
 * 0: none fits. */
double mk_cpu_plan_candidate_limit(const mk_cpu_plan *p);
/* What the whole-program check costs without kernels at least, from one
 * job: `prefix_s` seconds of eager PyTorch ran the program through a
 * subkernel, and the check runs the whole program twice (reference and
 * composition) per trial. 0: unknown. */
double mk_cpu_plan_check_base(double prefix_s, int trials);
/* The least a job needs: MK_CPU_PLAN_MIN_JOB_S or floor_s, the larger. */
double mk_cpu_plan_job_need(const mk_cpu_plan *p);
/* The budget left after the planned check over subkernels_left + 1 parts. */
double mk_cpu_plan_share(const mk_cpu_plan *p);
/* What a kernel adds to the whole-program check: run_s per call, `copies`
 * calls per forward (twins), `trials` forwards. */
double mk_cpu_plan_kernel_cost(double run_s, int copies, int trials);
/* True when the check still fits the budget with `add_s` more. */
bool mk_cpu_plan_affords(const mk_cpu_plan *p, double add_s);
/* Seconds the whole-program check may run: the budget left or half again
 * its planned cost, whichever is larger, within [MIN_JOB, job_cap_s]. */
double mk_cpu_plan_final_limit(const mk_cpu_plan *p);
/* Seconds left, estimated: `per_candidate_s` for each of `candidates_left`
 * plus the planned check. < 0 when per_candidate_s is unknown (<= 0). */
double mk_cpu_plan_eta(const mk_cpu_plan *p, double per_candidate_s, int candidates_left);
const char *mk_eval_status_name(mk_eval_status s);

#endif
