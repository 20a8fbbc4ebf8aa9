/* cli_bench_slurm.c — `mkevolve bench PATHS --slurm`: the sweep as one
 * Slurm job array (sbatch), one task per problem; Slurm does the
 * scheduling, we write the script, submit, wait, resubmit what ended
 * without a record once, and record what failed twice.
 *
 * The SQLite cache on a cluster is per node (docs/bench.md, "Slurm"): each
 * task uses a cache on the node's own disk, because SQLite's locking (and
 * WAL's shared memory) is not safe on network file systems. The submitter
 * gives the tasks a snapshot of its cache (DIR/slurm/cache/seed.sqlite),
 * each task copies its node's cache back next to it, and the submitter
 * merges those copies into its own cache by key: a key is the digest of
 * everything a verdict depends on (device and versions included), so
 * entries from different nodes never contradict each other. Files on the
 * shared folder are written once (a local file, then a copy and a rename)
 * and read as immutable, so no SQLite lock is ever taken there. */
#include "cli_bench_slurm.h"

#include "mk_buf.h"
#include "mk_cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLURM_ROUNDS 2     /* the first submission and one resubmission */
#define MAX_TASKS 100000

/* Runs argv (PATH searched), its stdout appended to out, stderr passed
 * through. Returns the exit status, or -1 when it could not run. */
static int run_command(char *const argv[], mk_buf *out) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    execvp(argv[0], argv);
    fprintf(stderr, "mkevolve bench: cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  char buf[4096];
  ssize_t r;
  while ((r = read(fds[0], buf, sizeof buf)) != 0) {
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) break;
    mk_buf_append(out, buf, (size_t)r);
  }
  close(fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void make_dirs(const char *outdir) {
  const char *subs[] = {"slurm", "slurm/logs", "slurm/cache"};
  for (size_t i = 0; i < sizeof subs / sizeof subs[0]; i++) {
    char p[8192];
    snprintf(p, sizeof p, "%s/%s", outdir, subs[i]);
    mkdir(p, 0755);
  }
}

/* Copies a file: a temporary name beside `to`, then a rename, so that a
 * reader on another node sees all of it or nothing. */
static int copy_file(const char *from, const char *to) {
  char tmp[8192];
  if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", to, (long)getpid()) >= (int)sizeof tmp) return MK_ERANGE;
  int in = open(from, O_RDONLY);
  if (in < 0) return MK_ENOENT;
  int outfd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (outfd < 0) {
    close(in);
    return MK_EIO;
  }
  char buf[1 << 16];
  ssize_t r;
  int rc = 0;
  while (!rc && (r = read(in, buf, sizeof buf)) != 0) {
    if (r < 0) rc = errno == EINTR ? 0 : MK_EIO;
    else if (write(outfd, buf, (size_t)r) != r) rc = MK_EIO;
  }
  close(in);
  if (close(outfd) != 0) rc = MK_EIO;
  if (!rc && rename(tmp, to) != 0) rc = MK_EIO;
  if (rc) unlink(tmp);
  return rc;
}

/* Exports the cache at `cache_file` to `to` on the shared folder: a local
 * snapshot first (SQLite writes only local files), then a copy. */
static int export_cache(const char *cache_file, const char *to) {
  mk_cache *c = NULL;
  mk_errmsg err = {{0}};
  struct stat st;
  if (stat(cache_file, &st) != 0) return MK_ENOENT; /* nothing cached yet */
  if (mk_cache_open(cache_file, 0, &c, &err)) return MK_EIO;
  char snap[4096];
  snprintf(snap, sizeof snap, "%s.export.%ld", cache_file, (long)getpid());
  unlink(snap);
  int rc = mk_cache_export(c, snap, &err);
  mk_cache_close(c);
  if (!rc) rc = copy_file(snap, to);
  unlink(snap);
  if (rc) fprintf(stderr, "mkevolve bench: cache not exported to %s: %s\n", to, err.text[0] ? err.text : mk_strerror(rc));
  return rc;
}

static int merge_into(const char *cache_file, const char *from, int64_t *added) {
  mk_cache *c = NULL;
  mk_errmsg err = {{0}};
  int rc = mk_cache_open(cache_file, 0, &c, &err);
  if (!rc) rc = mk_cache_merge(c, from, added, &err);
  if (c) mk_cache_close(c);
  if (rc) fprintf(stderr, "mkevolve bench: cannot merge %s into %s: %s\n", from, cache_file, err.text);
  return rc;
}

static void cache_file_of(const char *cache_dir, mk_buf *out) {
  if (cache_dir) mk_buf_printf(out, "%s/cache.sqlite", cache_dir);
  else mk_cache_default_path(out);
}

int cli_bench_slurm_node_cache_dir(char *out, size_t n) {
  const char *dir = getenv("MKEVOLVE_NODE_CACHE_DIR");
  int w;
  if (dir && *dir) w = snprintf(out, n, "%s", dir);
  else {
    const char *tmp = getenv("TMPDIR");
    w = snprintf(out, n, "%s/mkevolve-cache-%ld", tmp && *tmp ? tmp : "/tmp", (long)getuid());
  }
  return w < 0 || (size_t)w >= n ? MK_ERANGE : 0;
}

void cli_bench_slurm_seed_node_cache(const char *outdir, const char *node_cache_dir) {
  char seed[8192], file[8192];
  snprintf(seed, sizeof seed, "%s/slurm/cache/seed.sqlite", outdir);
  snprintf(file, sizeof file, "%s/cache.sqlite", node_cache_dir);
  struct stat st;
  if (stat(seed, &st) == 0) merge_into(file, seed, NULL);
}

void cli_bench_slurm_export_node_cache(const char *outdir, const char *node_cache_dir) {
  char host[256] = "node", file[8192], to[8192];
  gethostname(host, sizeof host);
  host[sizeof host - 1] = '\0';
  const char *job = getenv("SLURM_ARRAY_JOB_ID"), *task = getenv("SLURM_ARRAY_TASK_ID");
  snprintf(file, sizeof file, "%s/cache.sqlite", node_cache_dir);
  snprintf(to, sizeof to, "%s/slurm/cache/%s_%s_%s.sqlite", outdir, host, job ? job : "0", task ? task : "0");
  export_cache(file, to);
}

void cli_bench_slurm_merge_caches(const char *outdir, const char *cache_dir) {
  char dir[4096];
  snprintf(dir, sizeof dir, "%s/slurm/cache", outdir);
  DIR *d = opendir(dir);
  if (d == NULL) return;
  mk_buf file;
  mk_buf_init(&file, 8192);
  cache_file_of(cache_dir, &file);
  struct dirent *e;
  int files = 0;
  int64_t total = 0;
  while ((e = readdir(d)) != NULL) {
    size_t n = strlen(e->d_name);
    if (n < 8 || strcmp(e->d_name + n - 7, ".sqlite") != 0 || strcmp(e->d_name, "seed.sqlite") == 0) continue;
    char from[4096 + 512];
    snprintf(from, sizeof from, "%s/%s", dir, e->d_name);
    int64_t added = 0;
    if (merge_into(mk_buf_cstr(&file), from, &added) == 0) {
      unlink(from); /* merged: its entries are all in the cache now */
      files++;
      total += added;
    }
  }
  closedir(d);
  if (files)
    fprintf(stderr, "mkevolve bench: merged the caches of %d task%s into %s (%lld new entries)\n", files,
            files == 1 ? "" : "s", mk_buf_cstr(&file), (long long)total);
  mk_buf_free(&file);
}

/* The submitter's cache as the tasks' seed (DIR/slurm/cache/seed.sqlite). */
static void write_seed(const char *outdir, const char *cache_dir) {
  mk_buf file;
  mk_buf_init(&file, 8192);
  cache_file_of(cache_dir, &file);
  char to[8192];
  snprintf(to, sizeof to, "%s/slurm/cache/seed.sqlite", outdir);
  if (!file.err && export_cache(mk_buf_cstr(&file), to) == MK_ENOENT) unlink(to); /* no cache yet */
  mk_buf_free(&file);
}

int cli_bench_slurm_task_problem(const char *tasks_file, char **path) {
  *path = NULL;
  const char *id = getenv("SLURM_ARRAY_TASK_ID");
  char *end = NULL;
  long want = id ? strtol(id, &end, 10) : -1;
  if (id == NULL || *end != '\0' || want < 0) {
    fprintf(stderr, "mkevolve bench --slurm-task: SLURM_ARRAY_TASK_ID is not set (run by sbatch --array)\n");
    return 1;
  }
  char *text = NULL;
  size_t n = 0;
  if (mk_read_file(tasks_file, 64 << 20, &text, &n) != 0) {
    fprintf(stderr, "mkevolve bench --slurm-task: cannot read %s\n", tasks_file);
    return 1;
  }
  const char *p = text;
  for (long i = 0; i < want && p; i++) {
    p = strchr(p, '\n');
    if (p) p++;
  }
  size_t len = p ? strcspn(p, "\n") : 0;
  if (len) *path = mk_strndup(p, len);
  free(text);
  if (*path == NULL) {
    fprintf(stderr, "mkevolve bench --slurm-task: %s has no line %ld\n", tasks_file, want + 1);
    return 1;
  }
  return 0;
}

void cli_bench_slurm_each_listed(const char *outdir, cli_slurm_path_cb each, void *data) {
  char file[8192], *text = NULL;
  size_t n = 0;
  snprintf(file, sizeof file, "%s/slurm/tasks.txt", outdir);
  if (mk_read_file(file, 64 << 20, &text, &n) != 0) return;
  for (char *line = text, *next; line && *line; line = next) {
    next = strchr(line, '\n');
    if (next) *next++ = '\0';
    if (*line) each(data, line);
  }
  free(text);
}

static int write_tasks(const char *file, const cli_slurm_problem *probs, int n) {
  mk_buf b;
  mk_buf_init(&b, 64 << 20);
  for (int i = 0; i < n; i++) mk_buf_printf(&b, "%s\n", probs[i].path);
  int rc = b.err ? b.err : mk_write_file(file, mk_buf_cstr(&b), b.len);
  mk_buf_free(&b);
  return rc;
}

/* sbatch --parsable [--wait] --array=SPEC script; the array job's id into
 * jobid. Returns 0 when Slurm took it (with --wait, whatever the tasks did). */
static int sbatch(const char *script, const int *idx, int n, int limit, bool wait, char *jobid, size_t jn) {
  mk_buf spec, out;
  mk_buf_init(&spec, 1 << 20);
  mk_buf_init(&out, 1 << 16);
  mk_buf_puts(&spec, "--array=");
  mk_bench_slurm_array_spec(idx, n, limit, &spec);
  char *argv[6] = {"sbatch", "--parsable"};
  int argc = 2;
  if (wait) argv[argc++] = "--wait";
  argv[argc++] = (char *)mk_buf_cstr(&spec);
  argv[argc++] = (char *)script;
  argv[argc] = NULL;
  int status = run_command(argv, &out);
  size_t idlen = strspn(mk_buf_cstr(&out), "0123456789");
  snprintf(jobid, jn, "%.*s", (int)idlen, mk_buf_cstr(&out));
  mk_buf_free(&spec);
  mk_buf_free(&out);
  if (idlen == 0 || status < 0) {
    fprintf(stderr, "mkevolve bench: sbatch did not take the job array (exit status %d)\n", status);
    return 1;
  }
  return 0;
}

static bool has_record(const char *outdir, const cli_slurm_problem *p) {
  char path[8192];
  snprintf(path, sizeof path, "%s/problems/%s.json", outdir, p->slug);
  struct stat st;
  return stat(path, &st) == 0;
}

/* How task `t` of array `jobid` ended, from scontrol (forgotten after
 * Slurm's MinJobAge: then "unknown"). */
static void describe_task(const char *jobid, int t, char *out, size_t n) {
  mk_buf text;
  mk_buf_init(&text, 16 << 20);
  char *argv[] = {"scontrol", "show", "job", "-o", (char *)jobid, NULL};
  run_command(argv, &text);
  static mk_bench_slurm_task tasks[4096];
  int nt = mk_bench_slurm_parse_states(mk_buf_cstr(&text), tasks, 4096);
  snprintf(out, n, "state unknown");
  for (int i = 0; i < nt; i++)
    if (tasks[i].task == t)
      snprintf(out, n, "%s on %s, exit code %s, reason %s", tasks[i].state, tasks[i].node,
               tasks[i].exit_code, tasks[i].reason);
  mk_buf_free(&text);
}

/* The record of a problem whose task ended twice without writing one. */
static void record_lost(const char *outdir, const cli_slurm_problem *p, const char *why) {
  mk_bench_record rec = {.id = mk_strdup(p->id), .path = mk_strdup(p->path), .level = p->level,
                         .error = mk_strdup(why), .eager_ms = -1, .compile_ms = -1, .ours_ms = -1,
                         .gpu_fraction = -1};
  cJSON *j = mk_bench_record_to_json(&rec);
  char *text = cJSON_Print(j);
  char path[8192];
  snprintf(path, sizeof path, "%s/problems/%s.json", outdir, p->slug);
  if (text) mk_write_file(path, text, strlen(text));
  free(text);
  cJSON_Delete(j);
  mk_bench_record_free(&rec);
}

/* Waits for each round; after the last, records what is still missing. */
static int submit_and_wait(const char *outdir, const char *script, const cli_slurm_problem *probs, int n,
                           const cli_slurm_opts *o) {
  int *idx = malloc(sizeof *idx * (size_t)n);
  if (idx == NULL) return 1;
  int nidx = n;
  for (int i = 0; i < n; i++) idx[i] = i;
  char jobid[64] = "";
  for (int round = 1; round <= SLURM_ROUNDS && nidx > 0; round++) {
    fprintf(stderr, "mkevolve bench: %s %d task%s to Slurm, waiting\n", round == 1 ? "submitting" : "resubmitting",
            nidx, nidx == 1 ? "" : "s");
    if (sbatch(script, idx, nidx, o->array_limit, true, jobid, sizeof jobid)) {
      free(idx);
      return 1;
    }
    int missing = 0;
    for (int k = 0; k < nidx; k++) {
      const cli_slurm_problem *p = &probs[idx[k]];
      if (has_record(outdir, p)) continue;
      char how[512], why[2048];
      describe_task(jobid, idx[k], how, sizeof how);
      fprintf(stderr, "mkevolve bench: task %s_%d (%s) ended without a record: %s%s\n", jobid, idx[k], p->id, how,
              round < SLURM_ROUNDS ? "; resubmitting it" : "");
      if (round == SLURM_ROUNDS) {
        snprintf(why, sizeof why, "the Slurm task ended twice without a record (last: job %s_%d, %s; log: %s/slurm/logs/%s_%d.out)",
                 jobid, idx[k], how, outdir, jobid, idx[k]);
        record_lost(outdir, p, why);
      }
      idx[missing++] = idx[k];
    }
    nidx = missing;
  }
  free(idx);
  return 0;
}

int cli_bench_slurm_submit(const char *outdir, const cli_slurm_problem *probs, int n, const cli_slurm_opts *o) {
  if (n <= 0) {
    fprintf(stderr, "mkevolve bench: every problem has a record in %s/problems: nothing to submit\n", outdir);
    return 0;
  }
  if (n > MAX_TASKS) {
    fprintf(stderr, "mkevolve bench: %d problems: more than %d tasks in one array\n", n, MAX_TASKS);
    return 1;
  }
  make_dirs(outdir);
  char self[4096], tasks[8192], script[8192];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl <= 0) {
    fprintf(stderr, "mkevolve bench: cannot find the mkevolve binary (/proc/self/exe)\n");
    return 1;
  }
  self[sl] = '\0';
  snprintf(tasks, sizeof tasks, "%s/slurm/tasks.txt", outdir);
  snprintf(script, sizeof script, "%s/slurm/bench.sbatch", outdir);
  mk_bench_slurm_job job = o->job;
  job.mkevolve = self;
  job.tasks_file = tasks;
  job.outdir = outdir;
  mk_buf text;
  mk_buf_init(&text, 1 << 20);
  int rc = write_tasks(tasks, probs, n);
  if (!rc) rc = mk_bench_slurm_script(&job, &text);
  if (!rc) rc = mk_write_file(script, mk_buf_cstr(&text), text.len);
  mk_buf_free(&text);
  if (rc) {
    fprintf(stderr, "mkevolve bench: cannot write %s\n", script);
    return 1;
  }
  write_seed(outdir, o->cache_dir);
  if (o->wait) return submit_and_wait(outdir, script, probs, n, o);
  int *idx = malloc(sizeof *idx * (size_t)n);
  if (idx == NULL) return 1;
  for (int i = 0; i < n; i++) idx[i] = i;
  char jobid[64];
  rc = sbatch(script, idx, n, o->array_limit, false, jobid, sizeof jobid);
  free(idx);
  if (rc) return 1;
  printf("submitted Slurm job array %s: %d task%s, logs in %s/slurm/logs/\n"
         "when it has ended: mkevolve bench --report-only -o %s\n"
         "(run this command again to resubmit the problems whose tasks left no record)\n",
         jobid, n, n == 1 ? "" : "s", outdir, outdir);
  return 0;
}
