/* bench_slurm.c — the text side of a sweep on a Slurm cluster: the batch
 * script of the job array (one task per problem), the --array value, and
 * the task states that `scontrol show job -o` reports. Running sbatch and
 * waiting is the CLI's (engine/cli/cli_bench_slurm.c); Slurm schedules. */
#include "mk_bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void mk_bench_shell_quote(const char *s, mk_buf *out) {
  mk_buf_putc(out, '\'');
  for (; s && *s; s++) {
    if (*s == '\'') mk_buf_puts(out, "'\\''");
    else mk_buf_putc(out, *s);
  }
  mk_buf_putc(out, '\'');
}

/* An #SBATCH line for a value the user gave (skipped when there is none). */
static void directive(mk_buf *out, const char *name, const char *value) {
  if (value == NULL || *value == '\0') return;
  mk_buf_printf(out, "#SBATCH --%s=%s\n", name, value);
}

static void directive_int(mk_buf *out, const char *name, int value) {
  if (value > 0) mk_buf_printf(out, "#SBATCH --%s=%d\n", name, value);
}

int mk_bench_slurm_script(const mk_bench_slurm_job *job, mk_buf *out) {
  if (job->mkevolve == NULL || job->tasks_file == NULL || job->outdir == NULL) return MK_EINVAL;
  mk_buf_puts(out, "#!/bin/bash\n"
                   "# mkevolve bench --slurm: one array task per problem (docs/bench.md).\n"
                   "# Resubmit tasks by hand with: sbatch --array=3,7 THIS_FILE\n");
  mk_buf_printf(out, "#SBATCH --job-name=%s\n", job->job_name ? job->job_name : "mkevolve-bench");
  mk_buf_printf(out, "#SBATCH --output=%s/slurm/logs/%%A_%%a.out\n", job->outdir);
  directive(out, "partition", job->partition);
  directive(out, "time", job->time);
  directive(out, "mem", job->mem);
  directive_int(out, "gpus-per-task", job->gpus_per_task);
  directive_int(out, "cpus-per-task", job->cpus_per_task);
  mk_buf_puts(out, "#SBATCH --ntasks=1\n"
                   "set -u\n"
                   "exec ");
  mk_bench_shell_quote(job->mkevolve, out);
  mk_buf_puts(out, " bench --slurm-task ");
  mk_bench_shell_quote(job->tasks_file, out);
  mk_buf_puts(out, " -o ");
  mk_bench_shell_quote(job->outdir, out);
  for (int i = 0; i < job->nforward; i++) {
    mk_buf_putc(out, ' ');
    mk_bench_shell_quote(job->forward[i], out);
  }
  mk_buf_putc(out, '\n');
  return out->err;
}

int mk_bench_slurm_array_spec(const int *indices, int n, int limit, mk_buf *out) {
  if (n <= 0) return MK_EINVAL;
  for (int i = 0; i < n;) {
    int k = i;
    while (k + 1 < n && indices[k + 1] == indices[k] + 1) k++;
    if (i) mk_buf_putc(out, ',');
    if (k > i) mk_buf_printf(out, "%d-%d", indices[i], indices[k]);
    else mk_buf_printf(out, "%d", indices[i]);
    i = k + 1;
  }
  if (limit > 0) mk_buf_printf(out, "%%%d", limit);
  return out->err;
}

/* The value of `key=` in one line of `scontrol show job -o` (space separated
 * key=value pairs), copied into out; "" when absent. */
static void field_of(const char *line, size_t len, const char *key, char *out, size_t n) {
  out[0] = '\0';
  size_t klen = strlen(key);
  for (size_t i = 0; i + klen < len; i++) {
    if ((i == 0 || line[i - 1] == ' ') && strncmp(line + i, key, klen) == 0 && line[i + klen] == '=') {
      size_t s = i + klen + 1, e = s;
      while (e < len && line[e] != ' ' && line[e] != '\n') e++;
      size_t m = e - s < n - 1 ? e - s : n - 1;
      memcpy(out, line + s, m);
      out[m] = '\0';
      return;
    }
  }
}

int mk_bench_slurm_parse_states(const char *text, mk_bench_slurm_task *tasks, int max) {
  int n = 0;
  for (const char *p = text; p && *p && n < max;) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    char id[32], state[sizeof tasks->state];
    field_of(p, len, "ArrayTaskId", id, sizeof id);
    field_of(p, len, "JobState", state, sizeof state);
    char *end = NULL;
    long task = strtol(id, &end, 10);
    if (id[0] && end && *end == '\0' && state[0]) { /* "1-3%2" is the pending rest: skip it */
      mk_bench_slurm_task *t = &tasks[n++];
      memset(t, 0, sizeof *t);
      t->task = (int)task;
      memcpy(t->state, state, sizeof t->state);
      field_of(p, len, "NodeList", t->node, sizeof t->node);
      field_of(p, len, "ExitCode", t->exit_code, sizeof t->exit_code);
      field_of(p, len, "Reason", t->reason, sizeof t->reason);
    }
    p = e ? e + 1 : NULL;
  }
  return n;
}

bool mk_bench_slurm_state_final(const char *state) {
  static const char *const live[] = {"PENDING", "RUNNING", "CONFIGURING", "COMPLETING", "REQUEUED",
                                     "RESIZING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "REQUEUE_HOLD",
                                     "REQUEUE_FED", "RESV_DEL_HOLD", "STOPPED"};
  for (size_t i = 0; i < sizeof live / sizeof live[0]; i++)
    if (strcmp(state, live[i]) == 0) return false;
  return true;
}
