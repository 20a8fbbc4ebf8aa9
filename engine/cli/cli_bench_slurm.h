/* cli_bench_slurm.h — `mkevolve bench --slurm`: a sweep as a Slurm job
 * array, and the task side of it (--slurm-task). Internal to engine/cli. */
#ifndef MK_CLI_BENCH_SLURM_H
#define MK_CLI_BENCH_SLURM_H

#include "mk_bench.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct cli_slurm_problem {
  const char *path, *id, *slug;
  int level;
} cli_slurm_problem;

typedef struct cli_slurm_opts {
  mk_bench_slurm_job job; /* partition, time, gpus_per_task, forward...; the rest is filled in */
  int array_limit;        /* tasks at a time, 0: no limit */
  bool wait;              /* wait for the array, resubmit failures once, record what failed twice */
  const char *cache_dir;  /* the submitter's cache folder (--cache-dir), NULL: the default */
} cli_slurm_opts;

/* Submits one array task per problem to sbatch, from the absolute output
 * folder `outdir` (DIR/slurm/ gets tasks.txt, bench.sbatch, logs/, the
 * cache files). Without wait, prints the job id and returns. With wait:
 * tasks that ended without a record are resubmitted once; those that fail
 * again get a failure record (never lost). Returns 0, or 1 after printing
 * why to stderr. */
int cli_bench_slurm_submit(const char *outdir, const cli_slurm_problem *probs, int n,
                           const cli_slurm_opts *o);

/* The problem of this array task: line $SLURM_ARRAY_TASK_ID (0-based) of
 * `tasks_file`, malloc'd into *path (caller frees). 0, or 1 after printing why. */
int cli_bench_slurm_task_problem(const char *tasks_file, char **path);

/* The SQLite cache of an array task: a folder on the node's own disk
 * ($MKEVOLVE_NODE_CACHE_DIR, else $TMPDIR or /tmp, then mkevolve-cache-UID),
 * written into `out`. 0, or MK_ERANGE. */
int cli_bench_slurm_node_cache_dir(char *out, size_t n);

/* Task side, before the session opens: merges the submitter's cache
 * snapshot (DIR/slurm/cache/seed.sqlite) into the node's cache. */
void cli_bench_slurm_seed_node_cache(const char *outdir, const char *node_cache_dir);
/* Task side, after the session closed: copies the node's cache to
 * DIR/slurm/cache/<host>_<job>_<task>.sqlite for the submitter to merge. */
void cli_bench_slurm_export_node_cache(const char *outdir, const char *node_cache_dir);
/* Submitter side: merges every .sqlite file of DIR/slurm/cache but the seed into
 * the cache in `cache_dir` (NULL: the default) by key, then removes them. */
void cli_bench_slurm_merge_caches(const char *outdir, const char *cache_dir);

/* Calls `each` for every problem path in DIR/slurm/tasks.txt (none when
 * there is no such file): the reports of a sweep whose tasks did not all
 * write a record still list those problems. */
typedef void (*cli_slurm_path_cb)(void *data, const char *path);
void cli_bench_slurm_each_listed(const char *outdir, cli_slurm_path_cb each, void *data);

#endif
