/* mk_session.h — the engine's facade for the language server and the CLI.
 *
 * A session owns the worker pool, the verification cache and the state of
 * every module it has seen (keyed by file path): its graph, decomposition,
 * the variants of each subkernel with their verdicts and timings, and the
 * variant chosen for each. Everything slow is asynchronous on the caller's
 * libuv loop; every call that takes a callback calls it exactly once, unless
 * it returns < 0 (then never).
 *
 * The view structs (mk_session_module ...) are snapshots owned by the
 * session: valid until the next call on the session that changes that
 * module (analyze, evolve completion, swap, forget) — copy what you keep. */
#ifndef MK_SESSION_H
#define MK_SESSION_H

#include "mk_err.h"
#include "mk_search.h"
#include "mk_verify.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <uv.h>

typedef struct mk_session mk_session;

/* The session's settings. Every default lives in the *_defaults/_init of
 * the layer that owns the setting (mk_search_config_defaults,
 * mk_verify_options_init, mk_session_config_defaults); the CLI, the
 * language server and the editors only override what the user gave, so
 * the same candidate gets the same verdict whichever door it came in by.
 * "Unset" is never a magic value here: a field holds the value in force
 * (atol 0 means exact within rtol, depth 0 means no beam steps). */
typedef struct mk_session_config {
  /* The search's settings: beam_width, depth, max_proposals (candidates
   * per evolve run, all subkernels together), max_seconds, max_cost (the
   * LLM's token budget: its proposer's cost unit is tokens),
   * seed, try_*. Its per-run fields (device, workdir, source_path,
   * only_subkernel, input_names, log, prior) are filled by the session. */
  mk_search_config search;
  /* The verifier's settings: trials, atol, rtol. Every verification of
   * the session (candidates, the composed program, mk_session_check) uses
   * them; seed is search.seed, timeout_s is job_timeout_s, and device,
   * timing and batch are decided per module by the session. */
  mk_verify_options verify;
  const char *python;          /* interpreter for workers; NULL: $MKEVOLVE_PYTHON or built-in */
  const char *device;          /* "auto" (GPU if any), "cpu", "cuda" */
  int gpus;                    /* GPU workers, one per GPU: 0 every visible GPU, N the first N
                                  visible (never more than are visible) */
  const char *proposer;        /* "builtin" or "llm" */
  const char *llm_config_json; /* provider, model, base_url, api_key_env, prices... (docs/llm.md) */
  int batch;                   /* 0: auto (reduced on CPU when shapes are large); -1: full; n: n */
  double job_timeout_s;        /* per verification job */
  double capture_timeout_s;    /* per capture job (imports the user's module); 0: job_timeout_s */
  double start_timeout_s;      /* a worker's start and handshake (the worker pool's default) */
  bool no_cache;               /* run without the result cache: no lookup, no store */
  const char *cache_dir;       /* NULL: $MKEVOLVE_CACHE_DIR or ~/.cache/mkevolve */
  const char *workdir;         /* run files (logs, composed files), one folder per module stem
                                  inside; NULL: .mkevolve beside the module (the editor's
                                  workspace; the CLI passes ./.mkevolve) */
  bool log_stderr;             /* echo worker stderr and LLM retries/failures (CLI -v) */
  bool monolithic;             /* direct synthesis: the whole module as one subkernel, no split/merge */
} mk_session_config;

/* The defaults of every setting: the search's and the verifier's own,
 * plus the session's (device auto, builtin proposer, 300 s per job). */
void mk_session_config_defaults(mk_session_config *c);

typedef enum mk_sk_state {
  MK_SK_REFERENCE, /* only the PyTorch reference so far */
  MK_SK_RUNNING,   /* being evolved or verified */
  MK_SK_VERIFIED,  /* the chosen variant is verified (and faster, when timed) */
  MK_SK_FAILED,    /* variants were tried, none verified */
  MK_SK_SLOWER,    /* verified variants exist but none beats PyTorch */
} mk_sk_state;

typedef struct mk_session_variant {
  const char *name;     /* "reference", "triton_ew_b1024_w4", ... */
  const char *origin;   /* "reference", "builtin", "llm:<model>" */
  const char *backend;  /* what it runs on: "pytorch", "triton", "cuda" (mk_candidate_backend) */
  const char *status;   /* mk_eval_status name: "ok", "mismatch", ... */
  const char *reason;   /* why it failed, or "" */
  double time_ms, min_ms;       /* < 0 when untimed */
  double speedup_eager;         /* vs eager reference, < 0 when untimed */
  double speedup_compile;       /* vs torch.compile of the reference, < 0 when untimed */
  double max_abs_err;
  double ref_tf32_noise; /* > 0: max_abs_err is against the full-FP32 reference, whose
                            TF32 run was off by up to this much (docs/verify.md) */
  int trials_passed, trials;
  long tokens;
  const char *gpu;      /* CUDA_VISIBLE_DEVICES of the GPU that timed it; "" on the CPU or
                           when it came from the cache */
  bool chosen;
} mk_session_variant;

typedef struct mk_session_subkernel {
  int index;
  const char *name;        /* "conv2d_add_gelu" */
  const char *ops;         /* "conv2d + add + mul + gelu" */
  int first_line, last_line;
  const int *lines; int nlines; /* every source line it covers, ascending */
  mk_sk_state state;
  const mk_session_variant *variants; int nvariants; /* variants[0] is the reference */
  int chosen;
  const char *summary;     /* "1.8x vs eager, 1.2x vs torch.compile, verified 5/5" */
} mk_session_subkernel;

/* The last evolve's decomposition moves (judged by time) and whether the emitted
 * ModelNew is the CUDA-graph variant of the composition. */
typedef struct mk_session_moves {
  int merges_tried, merges_won, splits_tried, splits_won;
  int fused; /* merges made before the beams, where one fused kernel covers the union */
  bool cuda_graph;
} mk_session_moves;

typedef struct mk_session_module {
  const char *path;
  const char *class_name;
  const char *device;      /* "cpu" or the GPU name */
  bool timed;
  const char *note;        /* e.g. "reduced batch 2 on CPU", or "" */
  const mk_session_subkernel *subkernels; int nsubkernels;
  const char *modelnew_path; /* last composed file, or NULL */
  const char *run_log;     /* the last evolve's JSONL log (<workdir>/<stem>/run.jsonl), or NULL */
  double eager_ms, compile_ms, ours_ms; /* whole program, < 0 when unknown */
  /* torch.compile mode="max-autotune-no-cudagraphs" / mode="reduce-overhead" of the whole
   * program, timed in the same run when verify.compile_baselines is set; < 0 unknown */
  double compile_max_ms, compile_ro_ms;
  /* Whether torch.compile's own output passed the comparison ours passed (plain atol and
   * rtol, KernelBench's): 1 yes, -1 no (compile_err: its max abs error against eager),
   * 0 not checked (no GPU, compile not timed or failed) */
  int compile_check;
  double compile_err;
  /* the sentence a report gives compile_check < 0 (mk_verify_compile_check_note), ""
   * otherwise: the front ends print it as it is */
  const char *compile_note;
  double gpu_fraction;     /* how close ours_ms is to the device's limit: the graph's FLOPs and
                              minimum bytes (mk_graph_cost) against the ceilings the verifier
                              measured (float32 matmul with TF32, copy bandwidth); < 0 unknown */
  const char *gpu;         /* the GPU (its CUDA_VISIBLE_DEVICES ordinal) that timed the whole
                              program (eager_ms, ours_ms); "" on the CPU or from the cache */
  long tokens_in, tokens_out;
  mk_session_moves moves;  /* what the last evolve's decomposition moves did */
  int native_evals;        /* the last evolve's evaluations run by the native worker */
} mk_session_module;

typedef void (*mk_session_cb)(void *data, int status, const mk_session_module *m,
                              const char *error);
typedef void (*mk_session_progress_cb)(void *data, double fraction, const char *message);

int mk_session_new(uv_loop_t *loop, const mk_session_config *cfg, mk_session **out, mk_errmsg *err);
int mk_session_set_config(mk_session *s, const mk_session_config *cfg, mk_errmsg *err);
/* Cancels all jobs, stops workers, frees the session, then calls done. */
void mk_session_close(mk_session *s, void (*done)(void *data), void *data);

/* Captures and decomposes the module in `path`: its saved contents, or
 * `text` (the editor's, NUL-terminated) when given. Text that differs from
 * the file (or a file not saved yet) is captured from a private copy,
 * <workdir>/unsaved-<sha>/<same file name>, so module name and line numbers
 * are the editor's; the module stays keyed by `path`, composing and the
 * final composition check use the captured text, and the copy is removed
 * when no longer used. Subkernels whose reference code did not change keep
 * their variants. Error messages carry the user's line and name `path`. */
int mk_session_analyze(mk_session *s, const char *path, const char *text, mk_session_cb cb,
                       void *data, mk_errmsg *err);

/* Evolves one subkernel (index >= 0) or all (-1) in the background, then
 * composes and verifies the whole program. *job receives an id for cancel. */
int mk_session_evolve(mk_session *s, const char *path, int subkernel,
                      mk_session_progress_cb progress, mk_session_cb done, void *data, int *job,
                      mk_errmsg *err);
/* Cancels an evolve job or an edit verification (mk_session_verify_edit). */
int mk_session_cancel(mk_session *s, int job);

/* The current state of a module, or NULL if never analysed. */
const mk_session_module *mk_session_get(mk_session *s, const char *path);

/* Chooses variant `variant` (0 = PyTorch reference) for a subkernel; the
 * variant must be verified. Recomposes the ModelNew file. */
int mk_session_swap(mk_session *s, const char *path, int subkernel, int variant, mk_errmsg *err);

/* Writes the composed ModelNew for the current choices to out_path (NULL:
 * the session's default beside the module) and returns the path used
 * (caller frees). */
int mk_session_compose(mk_session *s, const char *path, const char *out_path, char **written,
                       mk_errmsg *err);

/* "cpu" or the GPU's name, as the workers reported it. */
const char *mk_session_device(mk_session *s);

/* The LLM token ledger of this session (docs/llm.md, "Ledger"): total,
 * by_agent, by_subkernel, by_model, budget, `calls` when with_calls, plus
 * provider, model and endpoint. NULL when no LLM client is open (builtin
 * proposer, or no evolve yet). Caller frees with cJSON_Delete. */
cJSON *mk_session_llm_ledger(mk_session *s, bool with_calls);

/* Cross-check with KernelBench's own evaluation code (docs/bench.md,
 * "Cross-check"): a worker runs KernelBench's eval_kernel_against_ref on
 * `ref_path` (the problem) and `new_path` (a ModelNew), in a fresh
 * interpreter, on a GPU worker when the session has one. `result` is the
 * worker's answer (available, reason, evaluator, error, compiled, correct,
 * runtime, ref_runtime, speedup, metadata), borrowed for the callback;
 * status < 0 (and `error`) when the worker could not answer at all. */
typedef struct mk_session_kbcheck_opts {
  const char *root;   /* KernelBench checkout, or NULL: an installed kernelbench package */
  int trials;         /* correctness trials (KernelBench's num_correct_trials) */
  int perf_trials;    /* timing trials */
  bool measure;       /* ask KernelBench to time both (speedup) */
  unsigned long long seed;
  double timeout_s;   /* for the evaluation process */
} mk_session_kbcheck_opts;
/* The one place these default (5 trials, 100 timing trials, measured,
 * seed 42, 900 s); the worker has none of its own. */
void mk_session_kbcheck_opts_defaults(mk_session_kbcheck_opts *o);
typedef void (*mk_session_json_cb)(void *data, int status, const cJSON *result, const char *error);
int mk_session_kernelbench_check(mk_session *s, const char *ref_path, const char *new_path,
                                 const mk_session_kbcheck_opts *opts, mk_session_json_cb cb,
                                 void *data, mk_errmsg *err);

/* ---- one-shot doors (session_check.c): the CLI's `analyze` and `check`
 * use the session's runtime like everyone else, and keep no state in it. */

/* Captures class `class_name` (NULL: "Model") of `path` (absolute) with
 * batch `batch` (0: the problem's own) and nothing more: no decomposition,
 * no module state (`mkevolve analyze`). `r` is the verifier's, valid during
 * the callback; the callback owns r->graph. */
typedef void (*mk_session_capture_cb)(void *data, mk_verify_capture_result *r);
int mk_session_capture(mk_session *s, const char *path, const char *class_name, int batch,
                       mk_session_capture_cb cb, void *data, mk_errmsg *err);

/* Verifies class `new_class` (NULL: "ModelNew") of `new_path` against
 * `ref_class` (NULL: "Model") of `ref_path` (absolute paths) with the
 * session's verification settings (cfg.verify, the seed, job_timeout_s,
 * the device) — the check the evolve's composed program gets, so a
 * candidate has one verdict whichever door it came in by (`mkevolve
 * check`, an editor). batch: 0 for the problem's own. `r` is valid during
 * the callback; `status` is its status's name. */
typedef void (*mk_session_check_cb)(void *data, const mk_verify_result *r, const char *status);
int mk_session_check(mk_session *s, const char *new_path, const char *new_class,
                     const char *ref_path, const char *ref_class, int batch,
                     mk_session_check_cb cb, void *data, mk_errmsg *err);

/* ---- editable variants (session_edit.c): a user edits one subkernel's
 * kernel in a file of its own, and saving it verifies that subkernel alone.
 *
 * Edit files live in the module's run folder (the one composed files and
 * run logs use): <workdir>/<stem>/edit/<subkernel name>.<variant>.py, by
 * default .mkevolve/<stem>/edit/ beside the module. The file is a candidate
 * module (docs/candidates.md) under a short comment header that names the
 * subkernel and a fingerprint of its reference (so a changed module is
 * noticed); the reference gets an MK_USES_TORCH line naming its ops, so an
 * edit that still calls some of them verifies. */

/* Writes variant `variant` (an index into the subkernel's variants; -1:
 * the chosen one, 0: the PyTorch reference; verified or failed) of
 * subkernel `subkernel` of module `path` to its edit file and returns the
 * path (*file_path, caller frees). An edit file that exists is kept as it
 * is (the user's edits are never overwritten): delete it to start again.
 * MK_ENOENT: module not analysed; MK_EINVAL: no such subkernel or variant. */
int mk_session_edit_variant(mk_session *s, const char *path, int subkernel, int variant,
                            char **file_path, mk_errmsg *err);

/* True if `path` has an edit file's shape: .../edit/<subkernel>.<variant>.py
 * (the name mk_session_edit_variant writes). Pure: no session needed. */
bool mk_session_is_edit_path(const char *path);

/* The module and subkernel an edit file belongs to, from its path alone:
 * a module the session knows whose edit folder holds it, else (default
 * work directory) <dir>/<stem>.py for <dir>/.mkevolve/<stem>/edit/.
 * *module_path and *subkernel_name (either may be NULL) are the caller's to
 * free. MK_EINVAL when the path is not inside an edit folder. */
int mk_session_edit_target(mk_session *s, const char *edit_path, char **module_path,
                           char **subkernel_name, mk_errmsg *err);

typedef struct mk_session_edit_diag {
  int line, column;         /* 1-based in the edit file; column 0 unknown */
  const char *severity;     /* "error", "warning", "note" */
  const char *message;
} mk_session_edit_diag;

/* The verdict on an edit file. Strings and arrays are valid during the
 * callback only. */
typedef struct mk_session_edit_result {
  const char *edit_path;
  const char *module_path;
  int subkernel;            /* index in the module's current partition */
  const char *subkernel_name;
  const char *variant;      /* the name it has as a variant: "user_<variant>" */
  const char *backend;      /* "pytorch", "triton", "cuda" (mk_candidate_backend) */
  const char *status;       /* mk_eval_status name: "ok", "compile_error", "runtime_error", ... */
  const char *reason;       /* why not, "" when ok */
  int line, column;         /* 1-based line (and column) in the edit file the failure points
                               at; 0 unknown */
  const mk_session_edit_diag *diags; int ndiags; /* NVRTC's diagnostics of a CUDA candidate */
  double time_ms;           /* median, < 0 untimed (CPU) */
  double speedup_eager;     /* vs the subkernel's PyTorch reference, < 0 untimed */
  int trials_passed, trials;
  bool added;               /* verified and now a variant of the subkernel (replacing an
                               older one of the same name); false when not verified or an
                               evolve ran on the module meanwhile */
  const mk_session_module *module; /* the module's view after it */
} mk_session_edit_result;

/* status 0 with r (a verdict, good or bad); status < 0 with error and r NULL
 * when there is none (MK_ECANCELED, MK_ESTALE: the module changed under it). */
typedef void (*mk_session_edit_cb)(void *data, int status, const mk_session_edit_result *r,
                                   const char *error);

/* Verifies `text` (NULL: the file's contents) of edit file `edit_path` as a
 * candidate of its subkernel only (origin "user", variant "user_<variant>"
 * from the file name): a CUDA candidate is compiled with NVRTC first (a
 * compile error is the verdict at once, diagnostics on the file's lines),
 * anything else goes to a worker like every candidate, with the session's
 * verification settings. A verified edit is added to the subkernel's
 * variants (replacing one of the same name; a chosen one that is replaced
 * is recomposed). Exactly one callback, unless it returns < 0: MK_EINVAL
 * (not an edit file, unknown subkernel), MK_ENOENT (module not analysed),
 * MK_ESTALE (the module's file changed since its capture, or the subkernel
 * changed since the edit file was written), MK_EBUSY (an evolve runs on the
 * module). *job (may be NULL) receives an id for mk_session_cancel. */
int mk_session_verify_edit(mk_session *s, const char *edit_path, const char *text,
                           mk_session_edit_cb cb, void *data, int *job, mk_errmsg *err);

/* Drops what the session knows about a module (on close or delete). */
void mk_session_forget(mk_session *s, const char *path);

#endif
