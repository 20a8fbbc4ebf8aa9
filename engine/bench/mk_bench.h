/* mk_bench.h — benchmark sweeps: per-problem records, aggregates and the
 * reports (results.json, Markdown summary, self-contained HTML with SVG
 * plots).
 *
 * Schema of results.json (stable, documented in docs/bench.md):
 *   {"schema": 1, "command": "...", "device": "...", "proposer": "...",
 *    "started": "ISO time", "problems": [record...], "aggregate": {...}}
 * A record is written per problem as soon as it finishes (problems/<id>.json
 * in the output folder), which is what makes sweeps resumable.
 *
 * Ownership: mk_bench_results owns its records and strings. */
#ifndef MK_BENCH_H
#define MK_BENCH_H

#include "mk_buf.h"
#include "mk_err.h"

#include <cjson/cJSON.h>
#include <stdbool.h>

typedef struct mk_bench_subkernel {
  char *name;
  char *variant;    /* chosen variant name */
  char *origin;     /* "reference", "builtin", "llm:..." */
  double ref_ms;    /* reference time of this subkernel, < 0 unknown */
  double ours_ms;   /* chosen variant's time, < 0 unknown */
  char *reason;     /* why it stayed the PyTorch reference (the session's summary), or NULL */
  char *gpu;        /* the GPU (CUDA_VISIBLE_DEVICES ordinal) that timed ours_ms, or NULL */
  char *backend;    /* what the chosen variant runs on: "pytorch", "triton", "cuda"; NULL in
                       records older than --backend (mk_bench_subkernel_backend reads those) */
} mk_bench_subkernel;

/* The cross-check of a record's ModelNew with KernelBench's own evaluation
 * code (bench --kb-crosscheck; docs/bench.md, "Cross-check"). */
typedef enum mk_bench_kb_status {
  MK_BENCH_KB_NOT_RUN = 0,  /* not asked for, or no ModelNew to check */
  MK_BENCH_KB_AGREE,        /* same verdict (and speedup within the tolerance, when both timed) */
  MK_BENCH_KB_DISAGREE,     /* different verdict, or speedups further apart than the tolerance */
  MK_BENCH_KB_UNAVAILABLE,  /* KernelBench's evaluation code is not importable */
  MK_BENCH_KB_ERROR,        /* it ran but gave no verdict (raised, crashed, timed out) */
} mk_bench_kb_status;

typedef struct mk_bench_kbcheck {
  mk_bench_kb_status status;
  char *reason;      /* what disagrees, why unavailable, or the error; when agreeing NULL,
                        or a note: KernelBench timed a higher speedup than ours */
  char *evaluator;   /* "kernelbench.eval.eval_kernel_against_ref", or NULL */
  char *root;        /* the KernelBench checkout asked for ("" = installed package), or NULL */
  int compiled;      /* KernelBench's verdicts: 1, 0, or -1 unknown */
  int correct;
  double speedup;    /* KernelBench's reference time over ModelNew's, < 0 unknown */
  double runtime;    /* KernelBench's own times (its unit, ms for CUDA events) of ModelNew */
  double ref_runtime; /* and of the Model; <= 0 unknown */
} mk_bench_kbcheck;

typedef struct mk_bench_record {
  char *id;          /* "level2/40_Matmul_Scaling_ResidualAdd" */
  char *path;
  int level;         /* 1..3, 0 when not from a level folder */
  bool correct;
  char *error;       /* why it failed, or NULL */
  char *note;        /* how it ran, not a failure ("reduced batch 2 on CPU"), or NULL */
  double eager_ms, compile_ms, ours_ms; /* medians from one run; < 0 unknown */
  /* torch.compile mode="max-autotune-no-cudagraphs" and mode="reduce-overhead", timed in
   * the same run as the three above; <= 0 unknown */
  double compile_max_ms, compile_ro_ms;
  /* torch.compile's own output under the comparison ours passed: 1 passed, -1 failed
   * (compile_err: its max abs error against eager), 0 not checked */
  int compile_check;
  double compile_err;
  /* the search's decomposition moves (judged by time; tried / kept) and whether the
   * ModelNew is the composition replayed as a CUDA graph */
  int merges_tried, merges_won, splits_tried, splits_won;
  int fused; /* subkernels merged before the search because one kernel fuses them */
  int native_evals; /* evaluations the native worker ran (--backend cuda|auto on a GPU) */
  bool cuda_graph;
  long tokens_in, tokens_out;
  double cost_usd;
  double wall_s;
  double gpu_fraction; /* achieved fraction of the device's roofline, < 0 unknown */
  mk_bench_subkernel *subkernels; int nsubkernels;
  char *modelnew;      /* the emitted ModelNew, relative to the output folder, or NULL */
  char *host;          /* the machine that evolved it (a Slurm node, ...), or NULL */
  char *gpu;           /* the GPU (its CUDA_VISIBLE_DEVICES ordinal on `host`) that timed the
                          whole program, or NULL (CPU, cached, unknown) */
  mk_bench_kbcheck kb; /* cross-check with KernelBench's evaluation */
} mk_bench_record;

typedef struct mk_bench_results {
  char *command, *device, *proposer, *started, *note;
  mk_bench_record *records; int nrecords, cap;
} mk_bench_results;

typedef struct mk_bench_fast {
  double p;
  double vs_eager;   /* fraction of problems correct and > p times faster */
  double vs_compile;
  double vs_compile_max, vs_compile_ro; /* over all problems, like the others */
} mk_bench_fast;

typedef struct mk_bench_aggregate {
  int problems, correct;
  int timed;             /* problems with both an eager and our time (none on the CPU) */
  mk_bench_fast fast[4]; /* p = 0, 1, 1.5, 2; p > 0 means nothing when timed is 0 */
  double geomean_vs_eager, geomean_vs_compile; /* over correct, timed problems */
  int timed_max, timed_ro; /* problems with a max-autotune / reduce-overhead time */
  double geomean_vs_compile_max, geomean_vs_compile_ro; /* over those; < 0 none */
  long tokens_in, tokens_out;
  double cost_usd, wall_s;
  int subkernels;              /* subkernels of all records */
  int by_backend[3];           /* of them, chosen variants per MK_BENCH_BACKEND_* */
  int native_evals;            /* evaluations the native worker ran, all records */
  int kb_checked;              /* records with a cross-check status other than NOT_RUN */
  int kb_count[5];             /* per mk_bench_kb_status */
} mk_bench_aggregate;

/* Indices of mk_bench_aggregate.by_backend. */
enum { MK_BENCH_BACKEND_CUDA, MK_BENCH_BACKEND_TRITON, MK_BENCH_BACKEND_PYTORCH };
/* The subkernel's backend index: its `backend`, or for records written
 * before it existed, PyTorch for the reference and Triton otherwise (the
 * only kernels compositions had then). */
int mk_bench_subkernel_backend(const mk_bench_subkernel *sk);
/* "cuda", "triton", "pytorch" for an index above. */
const char *mk_bench_backend_name(int index);

/* speedup helpers: < 0 when either time is unknown */
double mk_bench_speedup(double base_ms, double ours_ms);

/* Adds "compile_matches_eager" (true / false / null when check is 0) and
 * "compile_max_abs_error" (null unless checked) to o: torch.compile's own output under
 * the comparison ours passed (docs/bench.md "Baselines"). */
void mk_bench_json_add_compile_check(cJSON *o, int check, double max_abs_err);

/* Aggregates records; level 0 means all levels. */
void mk_bench_aggregate_of(const mk_bench_results *r, int level, mk_bench_aggregate *out);

/* Judges KernelBench's answer (the worker's kernelbench_check result, or
 * NULL with `error` when the worker could not answer) against the record:
 * correctness must match; when both sides timed, our speedup (vs eager) must
 * not exceed KernelBench's (its reference time over ModelNew's) by more than
 * a factor of 1 + speed_tolerance; a KernelBench speedup beyond that factor
 * above ours agrees with a note in `reason`. Fills `out` (caller frees with
 * mk_bench_kbcheck_free). */
void mk_bench_kbcheck_judge(const cJSON *result, const char *error, const mk_bench_record *rec,
                            double speed_tolerance, mk_bench_kbcheck *out);

/* A kept verdict (a resumed record) judged again by the current rule and
 * speed_tolerance from what the record holds of KernelBench's answer; nothing
 * is evaluated again. Only speed is judged again: a verdict on correctness
 * keeps its reason (KernelBench's own words, not kept elsewhere). True when
 * the verdict or its reason changed (the record is then worth saving). */
bool mk_bench_kbcheck_rejudge(mk_bench_record *rec, double speed_tolerance);
void mk_bench_kbcheck_free(mk_bench_kbcheck *kb);
/* "agree", "disagree", "unavailable", "error", or "not run". */
const char *mk_bench_kb_status_name(mk_bench_kb_status s);
/* The record's "kernelbench_check" value (cJSON null when not run) and back. */
cJSON *mk_bench_kbcheck_to_json(const mk_bench_kbcheck *kb);
void mk_bench_kbcheck_from_json(const cJSON *json, mk_bench_kbcheck *out);

/* Records <-> JSON. record_from_json copies what it needs (json stays the caller's). */
cJSON *mk_bench_record_to_json(const mk_bench_record *rec);
int mk_bench_record_from_json(const cJSON *json, mk_bench_record *out, mk_errmsg *err);
void mk_bench_record_free(mk_bench_record *rec);

/* Adds a record (takes ownership of its contents; *rec is zeroed). */
int mk_bench_results_add(mk_bench_results *r, mk_bench_record *rec);
void mk_bench_results_free(mk_bench_results *r);

/* results.json text, the Markdown summary and the HTML report (no network
 * needed to open it: inline CSS and SVG only). Each appends to out. */
int mk_bench_write_json(const mk_bench_results *r, mk_buf *out);
int mk_bench_write_markdown(const mk_bench_results *r, mk_buf *out);
int mk_bench_write_html(const mk_bench_results *r, mk_buf *out);

/* Reads a results.json back (for report regeneration). */
int mk_bench_read_json(const char *text, mk_bench_results *out, mk_errmsg *err);

/* ---- sweeps on a Slurm cluster (bench_slurm.c; docs/bench.md, "Slurm") ----
 * One job array, one task per problem: task i runs
 * `mkevolve bench --slurm-task TASKS -o DIR ...`, which evolves line i
 * (0-based) of TASKS and writes its record into DIR/problems/ as a resumed
 * sweep does. */
typedef struct mk_bench_slurm_job {
  const char *mkevolve;    /* absolute path of the binary the tasks run */
  const char *tasks_file;  /* absolute: one problem path per line */
  const char *outdir;      /* absolute, shared by every node */
  const char *job_name;    /* NULL: "mkevolve-bench" */
  const char *partition;   /* NULL: the cluster's default */
  const char *time;        /* per task, sbatch's --time format; NULL: the partition's */
  const char *mem;         /* sbatch --mem; NULL: the partition's */
  int gpus_per_task;       /* 0: none (a CPU sweep) */
  int cpus_per_task;       /* 0: Slurm's default */
  const char *const *forward; int nforward; /* more arguments for every task (session options) */
} mk_bench_slurm_job;

/* The batch script (#SBATCH directives for what job sets, then the task's
 * command line, every argument shell-quoted), appended to out. */
int mk_bench_slurm_script(const mk_bench_slurm_job *job, mk_buf *out);
/* sbatch's --array value for these ascending task indices: "0-3,7", with
 * "%limit" (tasks at a time) when limit > 0. MK_EINVAL when n <= 0. */
int mk_bench_slurm_array_spec(const int *indices, int n, int limit, mk_buf *out);
/* `s` in single quotes for a POSIX shell, appended to out. */
void mk_bench_shell_quote(const char *s, mk_buf *out);

/* One array task as `scontrol show job -o JOBID` describes it. */
typedef struct mk_bench_slurm_task {
  int task;            /* ArrayTaskId */
  char state[32];      /* JobState: COMPLETED, FAILED, PREEMPTED, NODE_FAIL, CANCELLED, ... */
  char node[128];      /* NodeList */
  char exit_code[16];  /* ExitCode "0:9" (status:signal) */
  char reason[64];     /* Reason */
} mk_bench_slurm_task;
/* Fills tasks[] from scontrol's one-line-per-task text; returns how many
 * (lines for tasks not started yet, "ArrayTaskId=3-7%2", are skipped). */
int mk_bench_slurm_parse_states(const char *text, mk_bench_slurm_task *tasks, int max);
/* Whether a task in `state` has ended (for good, not requeued). */
bool mk_bench_slurm_state_final(const char *state);

#endif
