/* cli_bench.c — `mkevolve bench PATHS...`: evolve and evaluate every
 * KernelBench-format problem given (files or folders), resumable, then
 * write results.json, summary.md and report.html (engine/bench).
 *
 *   mkevolve bench PATHS... [-o DIR] [--levels 1,2,3] [--limit N] [--gpus N]
 *                  [--fresh] [--compile-baselines] [--kb-crosscheck] [--kb-root DIR] [--kb-trials N]
 *                  [--kb-tolerance F] plus every session option of `evolve`
 *
 * Each problem's record is written to DIR/problems/<level>_<name>.json as
 * soon as it finishes, its ModelNew to DIR/modelnew/<level>_<name>.py; a
 * later run with the same DIR skips those (unless --fresh), so an
 * interrupted sweep resumes where it stopped.
 *
 * --kb-crosscheck evaluates every emitted ModelNew again with KernelBench's
 * own eval_kernel_against_ref (a checkout named by --kb-root, or an
 * installed kernelbench package) and records whether it agrees; a resumed
 * sweep checks the cached records that have no verdict yet, without
 * evolving them again (docs/bench.md, "Cross-check"). */
#include "cli_bench_slurm.h"
#include "cli_common.h"
#include "mk_bench.h"
#include "mk_buf.h"
#include "mk_time.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MK_BENCH_MAX_FORWARD 1024 /* arguments of one bench command line */

typedef struct problem {
  char *path;
  char *id;   /* "level2/40_Matmul_Scaling_ResidualAdd" */
  char *slug; /* "level2_40_Matmul_Scaling_ResidualAdd" */
  int level;
  int number;
} problem;

typedef struct bench_cli {
  uv_loop_t *loop;
  mk_session *session;
  problem *probs;
  int nprobs, cap;
  int next, running, done, parallel;
  const char *outdir;
  bool fresh, tty;
  bool kb;                      /* --kb-crosscheck */
  mk_session_kbcheck_opts kbopts;
  double kb_tolerance;          /* speedups may differ by this fraction */
  mk_bench_results results;
  double t0;
  double *started; /* per problem start time */
} bench_cli;

static int level_of(const char *path) {
  const char *p = strstr(path, "level");
  while (p) {
    if (p[5] >= '1' && p[5] <= '9') return p[5] - '0';
    p = strstr(p + 5, "level");
  }
  return 0;
}

static int add_problem(bench_cli *b, const char *path, unsigned level_mask) {
  int level = level_of(path);
  if (level && level_mask && !(level_mask & (1u << level))) return 0;
  if (b->nprobs == b->cap) {
    int cap = b->cap ? b->cap * 2 : 64;
    problem *p = realloc(b->probs, sizeof *p * (size_t)cap);
    if (p == NULL) return MK_ENOMEM;
    b->probs = p;
    b->cap = cap;
  }
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  size_t stem = strcspn(base, ".");
  mk_buf id, slug;
  mk_buf_init(&id, 4096);
  mk_buf_init(&slug, 4096);
  if (level) mk_buf_printf(&id, "level%d/", level);
  mk_buf_append(&id, base, stem);
  if (level) mk_buf_printf(&slug, "level%d_", level);
  mk_buf_append(&slug, base, stem);
  problem *p = &b->probs[b->nprobs++];
  *p = (problem){.path = mk_strdup(path), .id = mk_buf_steal(&id, NULL),
                 .slug = mk_buf_steal(&slug, NULL), .level = level, .number = atoi(base)};
  return p->path && p->id && p->slug ? 0 : MK_ENOMEM;
}

static int collect(bench_cli *b, const char *path, unsigned level_mask) {
  struct stat st;
  if (stat(path, &st) != 0) {
    fprintf(stderr, "mkevolve bench: %s does not exist\n", path);
    return MK_ENOENT;
  }
  if (!S_ISDIR(st.st_mode)) {
    char abs[4096];
    return add_problem(b, realpath(path, abs) ? abs : path, level_mask);
  }
  DIR *d = opendir(path);
  if (d == NULL) return MK_EIO;
  struct dirent *e;
  int rc = 0;
  while (!rc && (e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.' || strcmp(e->d_name, "__pycache__") == 0) continue;
    mk_buf child;
    mk_buf_init(&child, 8192);
    mk_buf_printf(&child, "%s/%s", path, e->d_name);
    struct stat cs;
    if (!child.err && stat(mk_buf_cstr(&child), &cs) == 0) {
      size_t n = strlen(e->d_name);
      if (S_ISDIR(cs.st_mode)) rc = collect(b, mk_buf_cstr(&child), level_mask);
      else if (n > 3 && strcmp(e->d_name + n - 3, ".py") == 0) rc = collect(b, mk_buf_cstr(&child), level_mask);
    }
    mk_buf_free(&child);
  }
  closedir(d);
  return rc;
}

static int by_level_number(const void *x, const void *y) {
  const problem *a = x, *b = y;
  if (a->level != b->level) return a->level - b->level;
  if (a->number != b->number) return a->number - b->number;
  return strcmp(a->id, b->id);
}

static char *record_path(const bench_cli *b, const problem *p) {
  mk_buf path;
  mk_buf_init(&path, 8192);
  mk_buf_printf(&path, "%s/problems/%s.json", b->outdir, p->slug);
  return mk_buf_steal(&path, NULL);
}

/* Loads a finished record (resume) into *rec; returns true if one was found. */
static bool load_record(bench_cli *b, const problem *p, mk_bench_record *rec) {
  char *path = record_path(b, p);
  char *text = NULL;
  size_t n = 0;
  bool ok = false;
  if (path && mk_read_file(path, 16 << 20, &text, &n) == 0) {
    cJSON *j = cJSON_Parse(text);
    ok = j && mk_bench_record_from_json(j, rec, NULL) == 0;
    if (!ok) mk_bench_record_free(rec);
    cJSON_Delete(j);
  }
  free(text);
  free(path);
  return ok;
}

/* A cached record still wants a cross-check when none gave a verdict yet, or
 * when its verdict came from another KernelBench than the one asked for now. */
static bool wants_crosscheck(const bench_cli *b, const mk_bench_record *rec) {
  if (!b->kb || rec->modelnew == NULL) return false;
  if (rec->kb.status != MK_BENCH_KB_AGREE && rec->kb.status != MK_BENCH_KB_DISAGREE) return true;
  const char *asked = b->kbopts.root ? b->kbopts.root : "";
  return rec->kb.root == NULL || strcmp(rec->kb.root, asked) != 0;
}

static void save_record(bench_cli *b, const problem *p, const mk_bench_record *rec) {
  char *path = record_path(b, p);
  cJSON *j = mk_bench_record_to_json(rec);
  char *text = cJSON_Print(j);
  if (path && text) mk_write_file(path, text, strlen(text));
  free(text);
  cJSON_Delete(j);
  free(path);
}

/* Copies the emitted ModelNew into DIR/modelnew/ (the session's own copy is
 * in the work directory and is rewritten by the next run); returns the path
 * relative to DIR, or NULL. */
static char *keep_modelnew(const bench_cli *b, const problem *p, const char *from) {
  char *text = NULL;
  size_t n = 0;
  if (from == NULL || mk_read_file(from, 64 << 20, &text, &n) != 0) return NULL;
  mk_buf rel, abs;
  mk_buf_init(&rel, 8192);
  mk_buf_init(&abs, 8192);
  mk_buf_printf(&rel, "modelnew/%s.py", p->slug);
  mk_buf_printf(&abs, "%s/%s", b->outdir, mk_buf_cstr(&rel));
  char *kept = NULL;
  if (!rel.err && !abs.err && mk_write_file(mk_buf_cstr(&abs), text, n) == 0) kept = mk_buf_steal(&rel, NULL);
  mk_buf_free(&rel);
  mk_buf_free(&abs);
  free(text);
  return kept;
}

static void fill_record(mk_bench_record *rec, const problem *p, int status,
                        const mk_session_module *m, const char *error, double wall) {
  *rec = (mk_bench_record){.id = mk_strdup(p->id), .path = mk_strdup(p->path), .level = p->level,
                           .correct = status == 0, .eager_ms = -1, .compile_ms = -1, .ours_ms = -1,
                           .wall_s = wall, .gpu_fraction = -1};
  if (error) rec->error = mk_strdup(error);
  char host[256];
  if (gethostname(host, sizeof host) == 0 && (host[sizeof host - 1] = '\0', host[0])) rec->host = mk_strdup(host);
  if (m == NULL) return;
  if (m->gpu && *m->gpu) rec->gpu = mk_strdup(m->gpu);
  rec->eager_ms = m->eager_ms;
  rec->compile_ms = m->compile_ms;
  rec->compile_max_ms = m->compile_max_ms;
  rec->compile_ro_ms = m->compile_ro_ms;
  rec->compile_check = m->compile_check;
  rec->compile_err = m->compile_err;
  rec->merges_tried = m->moves.merges_tried;
  rec->merges_won = m->moves.merges_won;
  rec->splits_tried = m->moves.splits_tried;
  rec->splits_won = m->moves.splits_won;
  rec->fused = m->moves.fused;
  rec->native_evals = m->native_evals;
  rec->cuda_graph = m->moves.cuda_graph;
  rec->ours_ms = m->ours_ms;
  rec->gpu_fraction = m->gpu_fraction;
  rec->tokens_in = m->tokens_in;
  rec->tokens_out = m->tokens_out;
  if (m->note && *m->note) rec->note = mk_strdup(m->note); /* how it ran, not an error */
  rec->subkernels = calloc((size_t)m->nsubkernels + 1, sizeof *rec->subkernels);
  if (rec->subkernels == NULL) return;
  rec->nsubkernels = m->nsubkernels;
  for (int i = 0; i < m->nsubkernels; i++) {
    const mk_session_subkernel *sk = &m->subkernels[i];
    const mk_session_variant *v = &sk->variants[sk->chosen];
    rec->subkernels[i] = (mk_bench_subkernel){
        .name = mk_strdup(sk->name), .variant = mk_strdup(v->name), .origin = mk_strdup(v->origin),
        .backend = mk_strdup(v->backend ? v->backend : "pytorch"),
        .ref_ms = sk->nvariants ? sk->variants[0].time_ms : -1, .ours_ms = v->time_ms,
        .reason = sk->chosen == 0 && sk->summary ? mk_strdup(sk->summary) : NULL,
        .gpu = v->gpu && *v->gpu ? mk_strdup(v->gpu) : NULL};
  }
}

static void start_next(bench_cli *b);

static void show_progress(bench_cli *b, const problem *p, int status, const char *gpu) {
  double el = mk_now_s() - b->t0;
  int finished = b->done;
  double eta = finished ? el / finished * (b->nprobs - finished) : 0;
  fprintf(stderr, "[%d/%d] %-55.55s %s%s%s  elapsed %.0fs  eta %.0fs\n", finished, b->nprobs, p->id,
          status == 0 ? "ok" : "FAILED", gpu ? ", timed on GPU " : "", gpu ? gpu : "", el, eta);
}

typedef struct job {
  bench_cli *b;
  int index;
  int status;
  mk_bench_record rec; /* filled once evolved (or loaded), until it is added */
} job;

/* Saves and adds the finished record, then starts the next problem. */
static void complete(job *j) {
  bench_cli *b = j->b;
  const problem *p = &b->probs[j->index];
  save_record(b, p, &j->rec);
  b->running--;
  b->done++;
  show_progress(b, p, j->status, j->rec.gpu);
  const mk_bench_kbcheck *kb = &j->rec.kb;
  if (kb->status != MK_BENCH_KB_NOT_RUN)
    fprintf(stderr, "      KernelBench cross-check: %s%s%s\n", mk_bench_kb_status_name(kb->status),
            kb->reason ? ": " : "", kb->reason ? kb->reason : "");
  mk_bench_results_add(&b->results, &j->rec);
  free(j);
  start_next(b);
}

static void on_kbcheck(void *data, int status, const cJSON *result, const char *error) {
  job *j = data;
  (void)status;
  mk_bench_kbcheck_free(&j->rec.kb);
  mk_bench_kbcheck_judge(result, error, &j->rec, j->b->kb_tolerance, &j->rec.kb);
  j->rec.kb.root = mk_strdup(j->b->kbopts.root ? j->b->kbopts.root : "");
  complete(j);
}

/* Runs the KernelBench cross-check of j's record when asked for and there is
 * a ModelNew to check; completes the job either way. */
static void crosscheck_or_complete(job *j) {
  bench_cli *b = j->b;
  if (!b->kb || j->rec.modelnew == NULL) {
    complete(j);
    return;
  }
  mk_buf path;
  mk_buf_init(&path, 8192);
  mk_buf_printf(&path, "%s/%s", b->outdir, j->rec.modelnew);
  mk_errmsg err = {{0}};
  int rc = path.err ? path.err
                    : mk_session_kernelbench_check(b->session, b->probs[j->index].path, mk_buf_cstr(&path),
                                                   &b->kbopts, on_kbcheck, j, &err);
  mk_buf_free(&path);
  if (rc) on_kbcheck(j, rc, NULL, err.text[0] ? err.text : mk_strerror(rc));
}

static void finish_problem(job *j, int status, const mk_session_module *m, const char *error) {
  bench_cli *b = j->b;
  const problem *p = &b->probs[j->index];
  j->status = status;
  fill_record(&j->rec, p, status, m, error, mk_now_s() - b->started[j->index]);
  if (m) j->rec.modelnew = keep_modelnew(b, p, m->modelnew_path);
  mk_session_forget(b->session, p->path);
  crosscheck_or_complete(j);
}

static void on_evolved(void *data, int status, const mk_session_module *m, const char *error) {
  finish_problem(data, status, m, error);
}

static void on_analyzed(void *data, int status, const mk_session_module *m, const char *error) {
  job *j = data;
  if (status) {
    finish_problem(j, status, NULL, error);
    return;
  }
  mk_errmsg err = {{0}};
  if (mk_session_evolve(j->b->session, j->b->probs[j->index].path, -1, NULL, on_evolved, j, NULL,
                        &err))
    finish_problem(j, MK_EINVAL, NULL, err.text);
}

static void start_next(bench_cli *b) {
  if (b->running == 0 && b->next >= b->nprobs) {
    uv_stop(b->loop); /* all problems done; the worker pool would keep the loop alive */
    return;
  }
  while (b->running < b->parallel && b->next < b->nprobs) {
    int i = b->next++;
    mk_bench_record cached;
    if (!b->fresh && load_record(b, &b->probs[i], &cached)) {
      if (wants_crosscheck(b, &cached)) {
        job *j = calloc(1, sizeof *j);
        if (j == NULL) return;
        *j = (job){.b = b, .index = i, .status = cached.correct ? 0 : MK_EINVAL, .rec = cached};
        b->running++;
        crosscheck_or_complete(j);
        continue;
      }
      /* a kept verdict under the current rule, without a new run */
      if (b->kb && mk_bench_kbcheck_rejudge(&cached, b->kb_tolerance))
        save_record(b, &b->probs[i], &cached);
      mk_bench_results_add(&b->results, &cached);
      b->done++;
      fprintf(stderr, "[%d/%d] %-55.55s cached\n", b->done, b->nprobs, b->probs[i].id);
      if (b->running == 0 && b->next >= b->nprobs) uv_stop(b->loop);
      continue;
    }
    job *j = calloc(1, sizeof *j);
    if (j == NULL) return;
    *j = (job){.b = b, .index = i};
    b->running++;
    b->started[i] = mk_now_s();
    mk_errmsg err = {{0}};
    if (mk_session_analyze(b->session, b->probs[i].path, NULL, on_analyzed, j, &err))
      finish_problem(j, MK_EINVAL, NULL, err.text);
  }
}

static int write_reports(bench_cli *b) {
  /* Records arrive in completion order; reports list problems in order. */
  for (int i = 1; i < b->results.nrecords; i++)
    for (int k = i; k > 0; k--) {
      mk_bench_record *x = &b->results.records[k - 1], *y = &b->results.records[k];
      problem px = {.id = x->id, .level = x->level, .number = atoi(strchr(x->id, '/') ? strchr(x->id, '/') + 1 : x->id)};
      problem py = {.id = y->id, .level = y->level, .number = atoi(strchr(y->id, '/') ? strchr(y->id, '/') + 1 : y->id)};
      if (by_level_number(&px, &py) <= 0) break;
      mk_bench_record t = *x;
      *x = *y;
      *y = t;
    }
  const char *names[3] = {"results.json", "summary.md", "report.html"};
  int (*writers[3])(const mk_bench_results *, mk_buf *) = {mk_bench_write_json, mk_bench_write_markdown,
                                                           mk_bench_write_html};
  for (int k = 0; k < 3; k++) {
    mk_buf text, path;
    mk_buf_init(&text, 0);
    mk_buf_init(&path, 8192);
    mk_buf_printf(&path, "%s/%s", b->outdir, names[k]);
    int rc = writers[k](&b->results, &text);
    if (!rc) rc = mk_write_file(mk_buf_cstr(&path), mk_buf_cstr(&text), text.len);
    if (rc) fprintf(stderr, "mkevolve bench: cannot write %s\n", mk_buf_cstr(&path));
    else printf("wrote %s\n", mk_buf_cstr(&path));
    mk_buf_free(&text);
    mk_buf_free(&path);
    if (rc) return rc;
  }
  return 0;
}

static char *joined_command(int argc, char **argv) {
  mk_buf b;
  mk_buf_init(&b, 1 << 16);
  mk_buf_puts(&b, "mkevolve");
  for (int i = 1; i < argc; i++) mk_buf_printf(&b, " %s", argv[i]);
  return mk_buf_steal(&b, NULL);
}

static char *iso_now(void) {
  char buf[64];
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return mk_strdup(buf);
}

/* --report-only: every record already in DIR/problems, no runs. */
static int load_all_records(bench_cli *b) {
  mk_buf dir;
  mk_buf_init(&dir, 8192);
  mk_buf_printf(&dir, "%s/problems", b->outdir);
  DIR *d = opendir(mk_buf_cstr(&dir));
  if (d == NULL) {
    fprintf(stderr, "mkevolve bench: no records in %s\n", mk_buf_cstr(&dir));
    mk_buf_free(&dir);
    return MK_ENOENT;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 6 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
    mk_buf path;
    mk_buf_init(&path, 8192);
    mk_buf_printf(&path, "%s/%s", mk_buf_cstr(&dir), e->d_name);
    char *text = NULL;
    size_t len = 0;
    if (!path.err && mk_read_file(mk_buf_cstr(&path), 16 << 20, &text, &len) == 0) {
      cJSON *j = cJSON_Parse(text);
      mk_bench_record rec;
      if (j && mk_bench_record_from_json(j, &rec, NULL) == 0) mk_bench_results_add(&b->results, &rec);
      cJSON_Delete(j);
    }
    free(text);
    mk_buf_free(&path);
  }
  closedir(d);
  mk_buf_free(&dir);
  return 0;
}

/* Frees the problem list; b has none afterwards (it may be called twice). */
static void free_problems(bench_cli *b) {
  for (int i = 0; i < b->nprobs; i++) {
    free(b->probs[i].path);
    free(b->probs[i].id);
    free(b->probs[i].slug);
  }
  free(b->probs);
  free(b->started);
  b->probs = NULL;
  b->started = NULL;
  b->nprobs = b->cap = 0;
}

/* A problem listed for a Slurm sweep that has no record yet: its task is
 * still queued or running, or ended without writing one. The reports list
 * it as not correct, so that no problem of a sweep is ever lost. */
static void add_if_unrecorded(void *data, const char *path) {
  bench_cli *b = data;
  int before = b->nprobs;
  if (add_problem(b, path, 0) || b->nprobs == before) return;
  const problem *p = &b->probs[b->nprobs - 1];
  for (int i = 0; i < b->results.nrecords; i++)
    if (strcmp(b->results.records[i].id, p->id) == 0) return;
  mk_bench_record rec = {.id = mk_strdup(p->id), .path = mk_strdup(p->path), .level = p->level,
                         .eager_ms = -1, .compile_ms = -1, .ours_ms = -1, .gpu_fraction = -1,
                         .error = mk_strdup("no record: its Slurm task has not ended yet, or ended "
                                            "without writing one (run the --slurm command again to "
                                            "resubmit it)")};
  mk_bench_results_add(&b->results, &rec);
}

/* The `started` of DIR/results.json from the run that wrote it (the
 * sweep's start, which the rewritten reports keep), or NULL. Caller frees. */
static char *previous_started(const char *outdir) {
  mk_buf path;
  mk_buf_init(&path, 8192);
  mk_buf_printf(&path, "%s/results.json", outdir);
  char *text = NULL, *started = NULL;
  size_t len = 0;
  mk_bench_results prev;
  if (!path.err && mk_read_file(mk_buf_cstr(&path), 64 << 20, &text, &len) == 0 &&
      mk_bench_read_json(text, &prev, NULL) == 0) {
    started = prev.started;
    prev.started = NULL;
    mk_bench_results_free(&prev);
  }
  free(text);
  mk_buf_free(&path);
  return started;
}

/* --report-only (and the end of --slurm --wait): the reports from the
 * records in DIR/problems, the problems of a Slurm sweep without one, and
 * the tasks' caches merged into this machine's. */
static int report_from_records(bench_cli *b, const mk_session_config *cfg, const char *command,
                               const char *device, const char *note) {
  int rc = load_all_records(b);
  int recorded = b->results.nrecords;
  cli_bench_slurm_each_listed(b->outdir, add_if_unrecorded, b);
  if (b->results.nrecords > recorded) {
    fprintf(stderr, "mkevolve bench: %d listed problem%s without a record yet\n", b->results.nrecords - recorded,
            b->results.nrecords - recorded == 1 ? "" : "s");
    rc = 0;
  }
  cli_bench_slurm_merge_caches(b->outdir, cfg->cache_dir);
  b->results.command = mk_strdup(command ? command : "(see note)");
  b->results.device = mk_strdup(device ? device : "unknown");
  b->results.proposer = mk_strdup(cfg->proposer);
  b->results.note = note ? mk_strdup(note) : NULL;
  if (b->results.started == NULL) b->results.started = previous_started(b->outdir);
  if (!rc) rc = write_reports(b);
  mk_bench_results_free(&b->results);
  free_problems(b); /* the listed ones */
  return rc ? 1 : 0;
}

/* The full usage (docs/bench.md): on stdout for --help, on stderr after a
 * usage error. */
static void usage(FILE *out) {
  fputs("usage: mkevolve bench PATHS... [-o DIR] [--levels 1,2,3] [--limit N] [--gpus N] [--fresh]\n"
        "                      [--compile-baselines] [--kb-crosscheck] [--kb-root DIR] [--kb-trials N]\n"
        "                      [--kb-tolerance F]\n"
        "                      [session options]\n"
        "       mkevolve bench PATHS... --slurm [--partition P] [--gpus-per-task N] [--cpus-per-task N]\n"
        "                      [--array-limit K] [--time T] [--mem M] [--wait] [-o DIR] [...]\n"
        "       mkevolve bench --report-only -o DIR [--device-name NAME] [--command CMD] [--note TEXT]\n"
        "\n"
        "Evolves every KernelBench-format problem in PATHS (files, or folders searched\n"
        "recursively; a levelN folder gives its problems level N), resumable, and writes\n"
        "DIR/results.json, DIR/summary.md and DIR/report.html (docs/bench.md).\n"
        "\n"
        "  -o, --output DIR           results (default bench-out); DIR/problems/ holds one record\n"
        "                             per finished problem, DIR/modelnew/ its ModelNew\n"
        "  --levels 1,2,3             only problems of these levels\n"
        "  --limit N                  the first N problems (level, then number order)\n"
        "  --gpus N                   N GPUs, one worker each, and N problems at a time\n"
        "                             (a session option, below)\n"
        "  --fresh                    run every problem again (default: resume from DIR/problems)\n"
        "  --compile-baselines        also time torch.compile with mode=\"max-autotune-no-cudagraphs\"\n"
        "                             and mode=\"reduce-overhead\", in the same run as eager, the\n"
        "                             default mode and ours (their compiles add minutes on big nets)\n"
        "  --kb-crosscheck            check every ModelNew with KernelBench's own evaluation\n"
        "  --kb-root DIR              the KernelBench checkout to use (implies --kb-crosscheck)\n"
        "  --kb-trials N              KernelBench's correctness trials\n"
        "  --kb-tolerance F           how far the two speedups may differ (a fraction)\n"
        "  --report-only              rewrite the reports from DIR/problems, run nothing\n"
        "  --device-name, --command, --note   what the rewritten reports say\n"
        "\n"
        "On a Slurm cluster (DIR on a file system every node sees; docs/bench.md):\n"
        "  --slurm                    submit one job-array task per problem (sbatch) instead of\n"
        "                             running them here; each writes its record to DIR/problems\n"
        "  --partition P              the partition (default: the cluster's)\n"
        "  --gpus-per-task N          GPUs per task (default 1; 0 for a CPU sweep)\n"
        "  --cpus-per-task N          CPUs per task (default: Slurm's)\n"
        "  --array-limit K            at most K tasks at a time\n"
        "  --time T, --mem M          each task's limits, in sbatch's format\n"
        "  --wait                     wait for the array, resubmit tasks that ended without a\n"
        "                             record once, then write the reports (else: --report-only)\n"
        "\n",
        out);
  mk_cli_print_session_options(out);
}

static unsigned parse_levels(const char *v) {
  unsigned mask = 0;
  for (; v && *v; v++)
    if (*v >= '1' && *v <= '9') mask |= 1u << (*v - '0');
  return mask;
}


/* --slurm: the problems without a record (all with --fresh) as one array,
 * from the output folder's absolute path (every node must see it). */
static int submit_to_slurm(bench_cli *b, cli_slurm_opts *so, const mk_session_config *cfg,
                           const char **forward, int nforward) {
  char outdir[4096];
  if (realpath(b->outdir, outdir) == NULL) {
    fprintf(stderr, "mkevolve bench: cannot find %s\n", b->outdir);
    return 1;
  }
  cli_slurm_problem *todo = calloc((size_t)b->nprobs + 1, sizeof *todo);
  if (todo == NULL) return 1;
  int n = 0;
  const char *saved = b->outdir;
  b->outdir = outdir;
  for (int i = 0; i < b->nprobs; i++) {
    mk_bench_record rec;
    if (!b->fresh && load_record(b, &b->probs[i], &rec)) {
      mk_bench_record_free(&rec);
      continue; /* done earlier: a resumed sweep keeps it */
    }
    const problem *p = &b->probs[i];
    todo[n++] = (cli_slurm_problem){.path = p->path, .id = p->id, .slug = p->slug, .level = p->level};
  }
  so->job.forward = forward;
  so->job.nforward = nforward;
  so->cache_dir = cfg->cache_dir;
  fprintf(stderr, "mkevolve bench: %d problems, %d to run as Slurm tasks, results in %s\n", b->nprobs, n, outdir);
  int rc = cli_bench_slurm_submit(outdir, todo, n, so);
  free(todo);
  b->outdir = saved;
  return rc;
}

int mk_cli_bench(int argc, char **argv) {
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  bench_cli b = {.outdir = "bench-out", .parallel = 1, .tty = isatty(2), .kb_tolerance = 0.25};
  mk_session_kbcheck_opts_defaults(&b.kbopts);
  unsigned levels = 0;
  int limit = 0;
  bool report_only = false;
  const char *device_name = NULL, *note = NULL, *command = NULL;
  const char *paths[256];
  int npaths = 0;
  bool slurm = false;
  const char *slurm_task = NULL;
  cli_slurm_opts so = {.job = {.gpus_per_task = 1}};
  const char *forward[MK_BENCH_MAX_FORWARD]; /* what every Slurm task gets */
  int nforward = 0;
  if (argc > MK_BENCH_MAX_FORWARD) {
    fprintf(stderr, "mkevolve bench: more than %d arguments\n", MK_BENCH_MAX_FORWARD);
    return 2;
  }
  for (int i = 2; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int used = mk_cli_session_option(&cfg, a, v);
    if (used < 0) {
      fprintf(stderr, "mkevolve bench: bad value for %s\n", a);
      mk_cli_options_free();
      return 2;
    }
    if (used > 0) {
      /* a task uses the GPUs Slurm gives it (--gpus-per-task), one problem */
      for (int k = 0; k < used && strcmp(a, "--gpus") != 0; k++) forward[nforward++] = argv[i + k];
      i += used - 1;
      continue;
    }
    if (strcmp(a, "--fresh") == 0 || strcmp(a, "--kb-crosscheck") == 0 ||
        strcmp(a, "--compile-baselines") == 0)
      forward[nforward++] = a;
    else if ((strcmp(a, "--kb-root") == 0 || strcmp(a, "--kb-trials") == 0 || strcmp(a, "--kb-tolerance") == 0) && v)
      forward[nforward++] = a, forward[nforward++] = v;
    if (mk_cli_is_help(a)) {
      usage(stdout);
      mk_cli_options_free();
      return 0;
    }
    if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && v) b.outdir = argv[++i];
    else if (strcmp(a, "--levels") == 0 && v) levels = parse_levels(argv[++i]);
    else if (strcmp(a, "--limit") == 0 && v) limit = atoi(argv[++i]);
    else if (strcmp(a, "--fresh") == 0) b.fresh = true;
    else if (strcmp(a, "--kb-crosscheck") == 0) b.kb = true;
    else if (strcmp(a, "--compile-baselines") == 0) cfg.verify.compile_baselines = true;
    else if (strcmp(a, "--kb-root") == 0 && v) b.kb = true, b.kbopts.root = argv[++i];
    else if (strcmp(a, "--kb-trials") == 0 && v) b.kbopts.trials = atoi(argv[++i]);
    else if (strcmp(a, "--kb-tolerance") == 0 && v) b.kb_tolerance = atof(argv[++i]);
    else if (strcmp(a, "--report-only") == 0) report_only = true;
    else if (strcmp(a, "--device-name") == 0 && v) device_name = argv[++i];
    else if (strcmp(a, "--note") == 0 && v) note = argv[++i];
    else if (strcmp(a, "--command") == 0 && v) command = argv[++i];
    else if (strcmp(a, "--slurm") == 0) slurm = true;
    else if (strcmp(a, "--slurm-task") == 0 && v) slurm_task = argv[++i];
    else if (strcmp(a, "--wait") == 0) so.wait = true;
    else if (strcmp(a, "--partition") == 0 && v) so.job.partition = argv[++i];
    else if (strcmp(a, "--time") == 0 && v) so.job.time = argv[++i];
    else if (strcmp(a, "--mem") == 0 && v) so.job.mem = argv[++i];
    else if (strcmp(a, "--gpus-per-task") == 0 && v) so.job.gpus_per_task = atoi(argv[++i]);
    else if (strcmp(a, "--cpus-per-task") == 0 && v) so.job.cpus_per_task = atoi(argv[++i]);
    else if (strcmp(a, "--array-limit") == 0 && v) so.array_limit = atoi(argv[++i]);
    else if (a[0] != '-' && npaths < 256) paths[npaths++] = a;
    else {
      fprintf(stderr, "mkevolve bench: unknown option '%s'\n", a);
      usage(stderr);
      mk_cli_options_free();
      return 2;
    }
  }
  if (report_only) {
    /* Regenerates results.json, summary.md and report.html from the records
     * of an earlier (possibly interrupted, remote or Slurm) sweep. */
    mk_cli_options_free();
    return report_from_records(&b, &cfg, command, device_name, note);
  }
  b.parallel = cfg.gpus > 0 ? cfg.gpus : 1;
  char *task_path = NULL;
  char node_cache[4096] = "";
  if (slurm_task) {
    /* One array task: its problem, its record; the reports are the submitter's. */
    if (cli_bench_slurm_task_problem(slurm_task, &task_path)) return mk_cli_options_free(), 1;
    paths[0] = task_path;
    npaths = 1;
    b.parallel = 1;
    if (cfg.cache_dir == NULL && cli_bench_slurm_node_cache_dir(node_cache, sizeof node_cache) == 0) {
      cfg.cache_dir = node_cache; /* SQLite on the node's own disk, never on a shared one */
      cli_bench_slurm_seed_node_cache(b.outdir, node_cache);
    }
  }
  if (npaths == 0) {
    usage(stderr);
    mk_cli_options_free();
    return 2;
  }
  char workdir[4096];
  if (mk_cli_default_workdir(&cfg, workdir, sizeof workdir)) {
    fprintf(stderr, "mkevolve bench: cannot name the work directory (./%s); give --workdir DIR\n",
            MK_CLI_WORKDIR);
    mk_cli_options_free();
    return 1;
  }
  for (int i = 0; i < npaths; i++)
    if (collect(&b, paths[i], levels)) return free_problems(&b), 1;
  qsort(b.probs, (size_t)b.nprobs, sizeof *b.probs, by_level_number);
  while (limit > 0 && b.nprobs > limit) {
    problem *p = &b.probs[--b.nprobs];
    free(p->path);
    free(p->id);
    free(p->slug);
  }
  b.started = calloc((size_t)b.nprobs + 1, sizeof *b.started);
  mkdir(b.outdir, 0755);
  if (slurm) {
    int rc = submit_to_slurm(&b, &so, &cfg, forward, nforward);
    char *cmd = joined_command(argc, argv);
    if (rc == 0 && so.wait)
      rc = report_from_records(&b, &cfg, cmd, device_name ? device_name : "Slurm job array", note);
    free(cmd);
    free_problems(&b);
    mk_cli_options_free();
    return rc;
  }
  mk_buf sub;
  mk_buf_init(&sub, 8192);
  mk_buf_printf(&sub, "%s/problems", b.outdir);
  mkdir(mk_buf_cstr(&sub), 0755);
  mk_buf_reset(&sub);
  mk_buf_printf(&sub, "%s/modelnew", b.outdir);
  mkdir(mk_buf_cstr(&sub), 0755);
  mk_buf_free(&sub);
  b.kbopts.seed = cfg.search.seed;
  char *kb_root = b.kbopts.root ? realpath(b.kbopts.root, NULL) : NULL;
  if (kb_root) b.kbopts.root = kb_root; /* the worker runs elsewhere; a missing folder it reports */
  uv_loop_t loop;
  uv_loop_init(&loop);
  b.loop = &loop;
  mk_errmsg err = {{0}};
  int started = mk_session_new(&loop, &cfg, &b.session, &err);
  mk_cli_options_free(); /* the session copied the merged LLM configuration */
  if (started) {
    fprintf(stderr, "mkevolve bench: %s\n", err.text);
    uv_loop_close(&loop);
    free(kb_root);
    free_problems(&b);
    return 1;
  }
  b.results.command = joined_command(argc, argv);
  b.results.proposer = mk_strdup(cfg.proposer);
  b.results.started = iso_now();
  b.t0 = mk_now_s();
  fprintf(stderr, "mkevolve bench: %d problems, %d at a time, results in %s\n", b.nprobs, b.parallel,
          b.outdir);
  start_next(&b);
  uv_run(&loop, UV_RUN_DEFAULT);
  b.results.device = mk_strdup(mk_session_device(b.session));
  mk_cli_close_session(&loop, b.session);
  if (slurm_task) {
    /* The record is written (complete()); the submitter merges the cache. */
    if (node_cache[0]) cli_bench_slurm_export_node_cache(b.outdir, node_cache);
    int written = b.results.nrecords;
    mk_bench_results_free(&b.results);
    free_problems(&b);
    free(kb_root);
    free(task_path);
    return written ? 0 : 1;
  }
  int rc = write_reports(&b);
  mk_bench_aggregate a;
  mk_bench_aggregate_of(&b.results, 0, &a);
  if (a.timed > 0)
    printf("%d problems: %d correct; fast_1 vs eager %.2f, vs torch.compile %.2f\n", a.problems,
           a.correct, a.fast[1].vs_eager, a.fast[1].vs_compile);
  else
    printf("%d problems: %d correct; no timings on the CPU (Triton's interpreter runs the kernels: "
           "correctness only)\n"
           "the ModelNew files in %s/modelnew/ run Triton kernels: on a machine without a GPU, run "
           "them with TRITON_INTERPRET=1\n",
           a.problems, a.correct, b.outdir);
  printf("run logs: %s/<problem>/run.jsonl\n", cfg.workdir);
  if (a.kb_checked > 0)
    printf("KernelBench cross-check of %d: %d agree, %d disagree, %d not importable, %d without a verdict\n",
           a.kb_checked, a.kb_count[MK_BENCH_KB_AGREE], a.kb_count[MK_BENCH_KB_DISAGREE],
           a.kb_count[MK_BENCH_KB_UNAVAILABLE], a.kb_count[MK_BENCH_KB_ERROR]);
  mk_bench_results_free(&b.results);
  free_problems(&b);
  free(kb_root);
  /* a disagreement with KernelBench is a failed sweep for scripts and CI */
  return rc ? 1 : a.kb_count[MK_BENCH_KB_DISAGREE] ? 3 : 0;
}
