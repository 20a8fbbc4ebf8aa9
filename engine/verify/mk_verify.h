/* mk_verify.h — asynchronous verification on the libuv loop.
 *
 * Submits capture / verify_subkernel / verify_composition jobs to the
 * worker pool (mk_worker.h), looks every job up in the result cache
 * (mk_cache.h) first and stores deterministic verdicts afterwards, and
 * hands back parsed results. Cache keys include everything a verdict
 * depends on: the reference (the capture graph and the subkernel's node,
 * input and output ids, or the problem file's content), the candidate
 * source, backend, tolerance, trials and seed, and the worker's
 * environment from its handshake (device name, CUDA, torch, triton,
 * Python); see docs/runtime.md. Worker-side schemas: docs/verify.md.
 *
 * Callbacks: a submit that returns 0 calls back exactly once, from the
 * loop, never from inside submit/cancel/close. Crashes, time-outs and
 * cancellations are results (status CRASHED/TIMEOUT/CANCELED), never lost.
 *
 * Ownership: mk_verify borrows the pool and the cache (both must outlive
 * it); inputs to submit are copied; result structs and their strings are
 * valid during the callback only, except a capture's graph, which the
 * callback owns. */
#ifndef MK_VERIFY_H
#define MK_VERIFY_H

#include "mk_cache.h"
#include "mk_decompose.h"
#include "mk_err.h"
#include "mk_ir.h"
#include "mk_worker.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef enum mk_verify_device {
  MK_VERIFY_DEVICE_AUTO = 0, /* a GPU when the pool has one, else the CPU */
  MK_VERIFY_DEVICE_CPU,
  MK_VERIFY_DEVICE_CUDA,
} mk_verify_device;

typedef struct mk_verify_options {
  int trials;             /* defaults: mk_verify_options_init, the only place they live */
  double atol, rtol;      /* an element passes when |a - e| <= atol + rtol * |e|; 0 is honoured */
  int64_t seed;           /* default 0 */
  mk_verify_device device;
  bool timing;            /* time on GPU (default true) */
  int batch;              /* reduced batch size, 0 for the problem's own */
  double timeout_s;       /* per job; 0: the pool's default */
  bool no_cache;          /* skip the lookup (the verdict is still stored) */
  bool skip_compile;      /* time the reference eager only, not under torch.compile */
  bool compile_baselines; /* also time torch.compile's "max-autotune-no-cudagraphs" and
                             "reduce-overhead" modes, in the same run (default false) */
  bool compile_reduce_overhead; /* also time "reduce-overhead" alone: the fair baseline of
                                   a CUDA-graph variant (default false; the search's
                                   graph check sets it) */
  bool native;             /* CUDA candidates with a launch plan go to the native worker
                              when the verifier has one (mk_verify_set_native_pool) and
                              the job runs on a GPU; default true (its GPU test passed),
                              --no-native-worker turns it off (docs/native-worker.md) */
} mk_verify_options;

void mk_verify_options_init(mk_verify_options *o);

typedef enum mk_verify_status {
  MK_VERIFY_OK,            /* correct within tolerance on every trial */
  MK_VERIFY_MISMATCH,      /* wrong results (errors say how wrong) */
  MK_VERIFY_COMPILE_ERROR, /* the candidate does not load or compile */
  MK_VERIFY_RUNTIME_ERROR, /* the candidate raised */
  MK_VERIFY_OOM,           /* the candidate ran out of memory */
  MK_VERIFY_REJECTED,      /* a guard refused it (aliasing, side streams, ...) */
  MK_VERIFY_CRASHED,       /* the worker process died running it */
  MK_VERIFY_TIMEOUT,       /* it ran past the time limit */
  MK_VERIFY_CANCELED,
  MK_VERIFY_ERROR,         /* no verdict: bad request, reference failed, no worker */
} mk_verify_status;

const char *mk_verify_status_name(mk_verify_status s);

/* The sentence every report gives a torch.compile baseline that failed the
 * comparison ours passed (compile_check < 0 below), with its error when known
 * (max_abs_err >= 0), into out (caller-owned, truncated to size); "" when it
 * passed or was not checked. Returns out. */
const char *mk_verify_compile_check_note(int compile_check, double max_abs_err, char *out, size_t size);

typedef struct mk_verify_time {
  bool available;
  double median_ms, min_ms, spread; /* spread = IQR / median */
} mk_verify_time;

typedef struct mk_verify_result {
  mk_verify_status status;
  int code;               /* 0 with a verdict; MK_E* when there is none */
  const char *reason;     /* readable; "" when ok */
  const char *error_kind; /* worker error kind or "" */
  int line;               /* line in the candidate / user file, 0 unknown */
  const char *traceback;  /* "" when none */
  int trials, trials_passed;
  double max_abs_error, max_rel_error;
  /* > 0: passed against the full-FP32 reference, whose TF32 run was itself off by
   * up to this much (docs/verify.md "The reference's own precision"); 0 otherwise */
  double ref_tf32_noise;
  /* the same for the state the forward updated (batch-norm running statistics);
   * outputs may have passed plainly */
  double state_tf32_noise;
  int64_t failing_elements, elements;
  bool timing_available;
  const char *timing_reason; /* why not, when not */
  mk_verify_time eager, compiled, ours;
  /* torch.compile mode="max-autotune-no-cudagraphs" and mode="reduce-overhead" of the
   * reference, when compile_baselines asked for them (else not available) */
  mk_verify_time compiled_max, compiled_ro;
  /* Whether torch.compile's own output passed the plain comparison a candidate must
   * pass (docs/verify.md "torch.compile's own check"): 1 it did, -1 it did not, 0 not
   * checked; compile_max_abs_error is its error against eager, < 0 unknown. */
  int compile_check;
  double compile_max_abs_error;
  double speedup_vs_eager, speedup_vs_compile; /* 0 when unknown */
  bool suspicious;        /* speedup needed the stricter re-check */
  /* A composition that passed, run once more at a batch one smaller
   * (docs/verify.md): other_batch is that batch (0: not run), and
   * other_batch_failure why it failed there ("" when it passed or was skipped). */
  int other_batch;
  const char *other_batch_failure;
  const char *device;     /* "cpu", "NVIDIA H200", ... */
  const char *gpu;        /* CUDA_VISIBLE_DEVICES of the GPU worker that ran it; "" on the
                             CPU, from the cache, or when no worker ran it */
  bool cached;            /* answered from the cache */
  bool native;            /* run by the native worker (mk_verify_set_native_pool), not the
                             Python one; false when cached */
  double elapsed_ms;      /* wall time of this job, lookup included */
  const cJSON *json;      /* the worker's whole result, NULL without one */
} mk_verify_result;

typedef void (*mk_verify_cb)(void *data, const mk_verify_result *r);

typedef struct mk_verify_capture_result {
  int code;               /* 0, or MK_EWORKER / MK_ECRASHED / MK_ETIMEDOUT / MK_EPARSE ... */
  const char *error_kind; /* "syntax_error", "missing", "python_error", "crashed", ... */
  const char *message;
  int line;               /* line in the module file, 0 unknown */
  const char *traceback;
  mk_graph *graph;        /* on success; the callback owns it (mk_graph_free) */
  bool cached;
  double elapsed_ms;
} mk_verify_capture_result;

typedef void (*mk_verify_capture_cb)(void *data, mk_verify_capture_result *r);

typedef struct mk_candidate_src {
  const char *source; /* the module text (docs/candidates.md) */
  const char *name;   /* readable name, e.g. "relu_bias_v3" */
  const char *origin; /* "reference", "builtin", "llm:<model>", ... */
} mk_candidate_src;

typedef struct mk_verify mk_verify;

/* cache may be NULL (no caching). */
int mk_verify_new(uv_loop_t *loop, mk_worker_pool *pool, mk_cache *cache, mk_verify **out,
                  mk_errmsg *err);

/* Cancels every job (their callbacks come with CANCELED) and frees the
 * verifier once the last one is delivered; keep running the loop. */
void mk_verify_close(mk_verify *v);

/* Captures `file` (absolute path) class `class_name` (NULL: "Model") with
 * an optional reduced batch (0: none). */
int mk_verify_submit_capture(mk_verify *v, const char *file, const char *class_name, int batch,
                             double timeout_s, mk_verify_capture_cb cb, void *data,
                             uint64_t *job_out, mk_errmsg *err);

/* Gives the verifier a pool of native workers (argv: mkworker-native;
 * borrowed: the caller closes it after mk_verify_close's last callback).
 * Subkernel jobs on a GPU whose candidate has a launch plan go there when
 * their options allow (mk_verify_options.native), with the ATen forms of
 * the graph and the state the Python worker writes once (write_state); a
 * job the native worker refuses goes to the Python worker. NULL: none. */
void mk_verify_set_native_pool(mk_verify *v, mk_worker_pool *pool);

/* Verifies `cand` against subkernel `sk` of graph `g` (g, sk copied). */
int mk_verify_submit_subkernel(mk_verify *v, const mk_graph *g, const mk_subkernel *sk,
                               const mk_candidate_src *cand, const mk_verify_options *opt,
                               mk_verify_cb cb, void *data, uint64_t *job_out, mk_errmsg *err);

/* Verifies class `new_class` (NULL: "ModelNew") of `file` against
 * `ref_class` (NULL: "Model") of `reference_file` (absolute paths). */
int mk_verify_submit_composition(mk_verify *v, const char *file, const char *new_class,
                                 const char *reference_file, const char *ref_class,
                                 const mk_verify_options *opt, mk_verify_cb cb, void *data,
                                 uint64_t *job_out, mk_errmsg *err);

/* Asks a GPU worker to compile the reference's torch.compile baselines
 * ahead, in a child process beside the jobs that follow (docs/verify.md,
 * "warm_reference"): the default mode, and "reduce-overhead" when `graph`
 * (a CUDA-graph variant will be checked). The whole-program check of the
 * same reference, file, seed and batch then loads what the child compiled,
 * or waits for it. Fire and forget: nothing calls back, and a child that
 * fails only leaves the check to compile as before. MK_EUNSUPPORTED when the
 * options time no torch.compile (the CPU, no timing, skip_compile). */
int mk_verify_warm_reference(mk_verify *v, const char *reference_file, const char *ref_class,
                             const mk_verify_options *opt, bool graph, mk_errmsg *err);

/* Cancels a job; its callback comes with CANCELED (or its verdict, if it
 * was already decided). MK_ENOENT when unknown or delivered. */
int mk_verify_cancel(mk_verify *v, uint64_t job);

/* Parses a worker's verification result (docs/verify.md) into *out; the
 * strings point into `res`. Unknown statuses give MK_VERIFY_ERROR. */
void mk_verify_parse_result(const cJSON *res, mk_verify_result *out);

/* Counters: lookups, hits, stores, dispatched jobs. */
typedef struct mk_verify_stats {
  uint64_t lookups, hits, stores, dispatched;
  uint64_t memo_hits; /* hits answered with a remembered handshake: no worker started */
  uint64_t native_routed;    /* jobs dispatched to the native worker */
  uint64_t native_fallbacks; /* jobs it refused (or that got no state): the Python worker's */
  uint64_t native_states;    /* states the Python worker wrote for it */
} mk_verify_stats;
void mk_verify_get_stats(const mk_verify *v, mk_verify_stats *out);

#endif
