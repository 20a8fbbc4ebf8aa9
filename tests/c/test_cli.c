/* test_cli.c — `mkevolve analyze` and `mkevolve check` as a user runs
 * them: the real binary, a fake worker (tests/fixtures/worker/fake_python.sh
 * as MKEVOLVE_PYTHON) for the error paths, and, when the Python worker and
 * ../shared/kernelbench are present, every KernelBench problem analysed by
 * the real worker. Every run has a wall-clock bound: no hang goes unseen. */
#include "cli_runtime.h"
#include "mk_buf.h"
#include "mk_test.h"
#include "cli_common.h"
#include "mk_time.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct run_out {
  int status; /* exit status, -1 on signal or timeout */
  bool timed_out;
  double seconds;
  char *out, *err;
} run_out;

static void run_free(run_out *r) {
  free(r->out);
  free(r->err);
  r->out = r->err = NULL;
}

static const char *bin(void) {
  const char *b = getenv("MKEVOLVE_BIN");
  if (b && access(b, X_OK) == 0) return b;
  static char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  if (n <= 0) return "mkevolve";
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  /* build/tests/mk_tests -> build/mkevolve */
  if (slash) snprintf(slash, sizeof path - (size_t)(slash - path), "/../mkevolve");
  return path;
}

/* Runs mkevolve with argv (NULL-terminated, without the program) and
 * extra environment "K=V" strings ("-K" unsets K). */
static void run(const char *const *args, const char *const *env, double timeout_s, run_out *r) {
  memset(r, 0, sizeof *r);
  char outp[128], errp[128];
  snprintf(outp, sizeof outp, "/tmp/mk_test_cli.%d.out", (int)getpid());
  snprintf(errp, sizeof errp, "/tmp/mk_test_cli.%d.err", (int)getpid());
  double t0 = mk_now_s();
  pid_t pid = fork();
  if (pid == 0) {
    int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fo, 1);
    dup2(fe, 2);
    for (const char *const *e = env; e && *e; e++) {
      if ((*e)[0] == '-') {
        unsetenv(*e + 1);
        continue;
      }
      const char *eq = strchr(*e, '=');
      char key[256];
      snprintf(key, sizeof key, "%.*s", (int)(eq - *e), *e);
      setenv(key, eq + 1, 1);
    }
    const char *argv[600];
    int n = 0;
    argv[n++] = bin();
    for (const char *const *a = args; *a && n < 599; a++) argv[n++] = *a;
    argv[n] = NULL;
    execv(argv[0], (char *const *)argv);
    _exit(127);
  }
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) break;
    if (mk_now_s() - t0 > timeout_s) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      r->timed_out = true;
      break;
    }
    usleep(10000);
  }
  r->seconds = mk_now_s() - t0;
  r->status = !r->timed_out && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  size_t len;
  if (mk_read_file(outp, 64 << 20, &r->out, &len) != 0) r->out = mk_strdup("");
  if (mk_read_file(errp, 1 << 20, &r->err, &len) != 0) r->err = mk_strdup("");
  unlink(outp);
  unlink(errp);
  if (r->status != 0 && getenv("MK_TEST_VERBOSE"))
    fprintf(stderr, "--- stdout:\n%s\n--- stderr:\n%s\n", r->out, r->err);
}

static char tmpdir[256];

static const char *tmp_file(const char *name, const char *text) {
  if (!tmpdir[0]) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/mk_test_cli_files.%d", (int)getpid());
    mkdir(tmpdir, 0755);
  }
  static char paths[16][512];
  static int next;
  char *p = paths[next++ % 16];
  snprintf(p, 512, "%s/%s", tmpdir, name);
  FILE *f = fopen(p, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
  return p;
}

static const char *good_module =
    "import torch\n"
    "class Model(torch.nn.Module):\n"
    "    def forward(self, x):\n"
    "        return torch.tanh(x)\n"
    "def get_inputs():\n"
    "    return [torch.randn(4, 4)]\n"
    "def get_init_inputs():\n"
    "    return []\n";

/* Environment for the fake worker. */
typedef struct fake_env {
  char python[600], graph[600], real[600], cache[300];
  const char *kv[12];
} fake_env;

static void fake_env_init(fake_env *f, const char *mode, bool cache) {
  snprintf(f->python, sizeof f->python, "MKEVOLVE_PYTHON=%s/tests/fixtures/worker/fake_python.sh",
           mk_test_repo_dir());
  snprintf(f->graph, sizeof f->graph, "FAKE_GRAPH=%s/tests/fixtures/ir/conv_min_tanh.json",
           mk_test_repo_dir());
  snprintf(f->real, sizeof f->real, "FAKE_REAL_PYTHON=%s",
           access(MK_DEFAULT_PYTHON, X_OK) == 0 ? MK_DEFAULT_PYTHON : "/usr/bin/python3");
  snprintf(f->cache, sizeof f->cache, "MKEVOLVE_CACHE_DIR=/tmp/mk_test_cli_cache.%d",
           (int)getpid());
  int n = 0;
  f->kv[n++] = f->python;
  f->kv[n++] = f->graph;
  f->kv[n++] = f->real;
  f->kv[n++] = f->cache;
  f->kv[n++] = cache ? "-MKEVOLVE_NO_CACHE" : "MKEVOLVE_NO_CACHE=1";
  static char modebuf[64];
  snprintf(modebuf, sizeof modebuf, "FAKE_MODE=%s", mode);
  f->kv[n++] = modebuf;
  f->kv[n] = NULL;
}

MK_TEST(cli, usage_errors) {
  run_out r;
  const char *a1[] = {"analyze", NULL};
  run(a1, NULL, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "usage: mkevolve analyze") != NULL);
  run_free(&r);
  const char *a2[] = {"check", "x.py", NULL};
  run(a2, NULL, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  run_free(&r);
  const char *a3[] = {"analyze", "--frobnicate", "x.py", NULL};
  run(a3, NULL, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "--frobnicate") != NULL);
  run_free(&r);
  const char *a4[] = {"check", "a.py", "--against", "b.py", "--trials", "zero", NULL};
  run(a4, NULL, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "--trials") != NULL);
  run_free(&r);
  const char *a5[] = {"evolve", "x.py", "--backend", "cuda9", NULL};
  run(a5, NULL, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "--backend") != NULL);
  run_free(&r);
}

MK_TEST(cli, static_errors_need_no_python) {
  /* A Python that does not exist proves no worker is involved. */
  const char *env[] = {"MKEVOLVE_PYTHON=/nonexistent/python", "MKEVOLVE_NO_CACHE=1", NULL};
  run_out r;
  const char *bad = tmp_file("syntax.py", "import torch\nclass Model:\n    def forward(self, x:\n"
                                          "        return x\n");
  const char *a1[] = {"analyze", bad, NULL};
  run(a1, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "syntax.py:3:") != NULL);
  MK_CHECK(strstr(r.err, "syntax error") != NULL);
  MK_CHECK(strstr(r.err, "def forward(self, x:") != NULL); /* the line is shown */
  MK_CHECK(r.seconds < 5);
  run_free(&r);

  const char *nomodel = tmp_file("nomodel.py", "class Net:\n    pass\ndef get_inputs():\n"
                                               "    return []\n");
  const char *a2[] = {"analyze", nomodel, NULL};
  run(a2, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "no top-level class `Model` (classes here: Net)") != NULL);
  run_free(&r);

  const char *noinputs = tmp_file("noinputs.py", "class Model:\n    pass\n");
  const char *a3[] = {"analyze", noinputs, NULL};
  run(a3, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "get_inputs") != NULL);
  run_free(&r);

  const char *a4[] = {"analyze", "/nonexistent/dir/model.py", NULL};
  run(a4, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "no such file") != NULL);
  run_free(&r);

  /* 10 MB of Python: refused with a clear message, quickly. */
  mk_buf big;
  mk_buf_init(&big, 0);
  mk_buf_puts(&big, good_module);
  while (big.len < 10u * 1024 * 1024) mk_buf_puts(&big, "# padding padding padding padding\n");
  const char *huge = tmp_file("huge.py", mk_buf_cstr(&big));
  mk_buf_free(&big);
  const char *a5[] = {"analyze", "--json", huge, NULL};
  run(a5, env, 20, &r);
  MK_CHECK_INT(r.status, ==, 1);
  cJSON *j = cJSON_Parse(r.out);
  MK_REQUIRE(j != NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "kind")->valuestring,
               "too_large");
  cJSON_Delete(j);
  run_free(&r);
  unlink(huge);

  /* check: a syntax error in the ModelNew is reported against that file. */
  const char *prob = tmp_file("problem.py", good_module);
  const char *newbad = tmp_file("new_bad.py", "class ModelNew(\n");
  const char *a6[] = {"check", newbad, "--against", prob, NULL};
  run(a6, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "new_bad.py:") != NULL);
  run_free(&r);
}

MK_TEST(cli, analyze_with_worker) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *m = tmp_file("model.py", good_module);
  run_out r;
  const char *a1[] = {"analyze", m, NULL};
  run(a1, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK(strstr(r.out, "class Model, 4 nodes, 2 subkernels") != NULL);
  MK_CHECK(strstr(r.out, "conv2d(") != NULL);
  MK_CHECK(strstr(r.out, "line 13") != NULL);
  MK_CHECK(strstr(r.out, "subkernels (2, 2 distinct):") != NULL);
  MK_CHECK(strstr(r.out, "conv.weight") != NULL);
  run_free(&r);

  const char *a2[] = {"analyze", "--json", m, NULL};
  run(a2, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 0);
  cJSON *j = cJSON_Parse(r.out);
  MK_REQUIRE(j != NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(j, "schema")->valuestring, "mkevolve.analyze/1");
  MK_CHECK_STR(cJSON_GetObjectItem(j, "file")->valuestring, m);
  const cJSON *nodes = cJSON_GetObjectItem(j, "nodes");
  MK_CHECK_INT(cJSON_GetArraySize(nodes), ==, 4);
  const cJSON *n0 = cJSON_GetArrayItem(nodes, 0);
  MK_CHECK_STR(cJSON_GetObjectItem(n0, "op")->valuestring, "torch.nn.functional.conv2d");
  MK_CHECK_STR(cJSON_GetObjectItem(n0, "category")->valuestring, "conv");
  MK_CHECK_INT(cJSON_GetObjectItem(cJSON_GetObjectItem(n0, "span"), "line")->valueint, ==, 13);
  const cJSON *sks = cJSON_GetObjectItem(j, "subkernels");
  MK_CHECK_INT(cJSON_GetArraySize(sks), ==, 2);
  MK_CHECK(cJSON_IsArray(cJSON_GetObjectItem(cJSON_GetArrayItem(sks, 0), "nodes")));
  MK_CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "cached")));
  cJSON_Delete(j);
  run_free(&r);

  /* Several files: a JSON array, one entry each, failures included. */
  const char *bad = tmp_file("broken.py", "class Model(:\n");
  const char *a3[] = {"analyze", "--json", m, bad, NULL};
  run(a3, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  j = cJSON_Parse(r.out);
  MK_REQUIRE(cJSON_IsArray(j));
  MK_CHECK_INT(cJSON_GetArraySize(j), ==, 2);
  MK_CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 1), "error") != NULL);
  cJSON_Delete(j);
  run_free(&r);
}

MK_TEST(cli, analyze_uses_the_cache) {
  fake_env f;
  fake_env_init(&f, "normal", true);
  const char *m = tmp_file("cached.py", good_module);
  run_out r;
  const char *a[] = {"analyze", "--json", m, NULL};
  for (int i = 0; i < 2; i++) {
    run(a, f.kv, 30, &r);
    MK_CHECK_INT(r.status, ==, 0);
    cJSON *j = cJSON_Parse(r.out);
    MK_REQUIRE(j != NULL);
    MK_CHECK(cJSON_IsBool(cJSON_GetObjectItem(j, "cached")));
    if (i == 1) MK_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(j, "cached")));
    cJSON_Delete(j);
    run_free(&r);
  }
  /* Two files answered from the cache in one run: the second hit is
   * delivered from a timer while the idle worker keeps the loop alive (this
   * hung on libuv 1.44 until the run's timeout). */
  const char *m2 = tmp_file("cached2.py", good_module);
  const char *warm[] = {"analyze", "--json", m2, NULL};
  run(warm, f.kv, 30, &r);
  run_free(&r);
  const char *both[] = {"analyze", "--json", m, m2, NULL};
  run(both, f.kv, 30, &r);
  MK_CHECK(!r.timed_out);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK(r.seconds < 20);
  cJSON *arr = cJSON_Parse(r.out);
  MK_REQUIRE(cJSON_IsArray(arr));
  MK_CHECK_INT(cJSON_GetArraySize(arr), ==, 2);
  for (int i = 0; i < 2; i++)
    MK_CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(arr, i), "cached")));
  cJSON_Delete(arr);
  run_free(&r);
  const char *nc[] = {"analyze", "--json", "--no-cache", m, NULL};
  run(nc, f.kv, 30, &r);
  cJSON *j = cJSON_Parse(r.out);
  MK_CHECK(j && cJSON_IsFalse(cJSON_GetObjectItem(j, "cached")));
  cJSON_Delete(j);
  run_free(&r);
}

MK_TEST(cli, analyze_worker_failures) {
  const char *m = tmp_file("victim.py", good_module);
  run_out r;
  fake_env f;
  fake_env_init(&f, "exit_at_start", false);
  const char *a1[] = {"analyze", m, NULL};
  run(a1, f.kv, 60, &r);
  MK_CHECK(!r.timed_out);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "no module named torch") != NULL);
  MK_CHECK(strstr(r.err, "failed to start 3 times") != NULL);
  run_free(&r);

  fake_env_init(&f, "no_hello", false);
  const char *a2[] = {"analyze", "--timeout", "0.5", m, NULL};
  run(a2, f.kv, 60, &r);
  MK_CHECK(!r.timed_out);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "did not answer its handshake") != NULL);
  run_free(&r);

  /* A worker-side error with a line: shown with the source line. */
  fake_env_init(&f, "normal", false);
  const char *s = tmp_file("worker_syntax.py",
                           "import torch\nclass Model(torch.nn.Module):\n    x = 1  # SYNTAX\n"
                           "def get_inputs():\n    return []\n");
  const char *a3[] = {"analyze", s, NULL};
  run(a3, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "worker_syntax.py:3: syntax_error: invalid syntax") != NULL);
  MK_CHECK(strstr(r.err, "x = 1  # SYNTAX") != NULL);
  run_free(&r);
}

MK_TEST(cli, check_table_and_verdicts) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *prob = tmp_file("prob.py", good_module);
  const char *good = tmp_file("good_new.py", "class ModelNew:\n    pass  # FAST\n");
  const char *wrong = tmp_file("wrong_new.py", "class ModelNew:\n    pass  # WRONG\n");
  const char *crash = tmp_file("crash_new.py", "class ModelNew:\n    pass  # CRASH\n");
  run_out r;
  const char *a1[] = {"check", good, "--against", prob, "--trials", "3", NULL};
  run(a1, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK(strstr(r.out, "yes (3/3 trials)") != NULL);
  MK_CHECK(strstr(r.out, "4.00x vs eager, 2.00x vs torch.compile") != NULL);
  MK_CHECK(strstr(r.out, "torch.compile") != NULL);
  run_free(&r);

  const char *a2[] = {"check", wrong, "--against", prob, NULL};
  run(a2, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.out, "NO: mismatch") != NULL);
  MK_CHECK(strstr(r.out, "17 of 4096 elements") != NULL);
  MK_CHECK(strstr(r.out, "differs") != NULL);
  run_free(&r);

  const char *a3[] = {"check", crash, "--against", prob, "--json", NULL};
  run(a3, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  cJSON *j = cJSON_Parse(r.out);
  MK_REQUIRE(j != NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(j, "status")->valuestring, "crashed");
  MK_CHECK(cJSON_IsFalse(cJSON_GetObjectItem(j, "correct")));
  cJSON_Delete(j);
  run_free(&r);

  /* the text form names the status once */
  const char *a3b[] = {"check", crash, "--against", prob, "--no-cache", NULL};
  run(a3b, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "mkevolve check: crashed: ") != NULL);
  MK_CHECK(strstr(r.err, "crashed crashed") == NULL);
  run_free(&r);

  /* a pass whose kernels never ran says so */
  const char *idle = tmp_file("idle_new.py", "class ModelNew:\n    pass  # IDLE\n");
  const char *a3d[] = {"check", idle, "--against", prob, "--no-cache", NULL};
  run(a3d, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK(strstr(r.out, "note            no custom kernel ran: _k") != NULL);
  run_free(&r);

  /* NaN in the output: the bound is infinite, not 0 */
  const char *nan = tmp_file("nan_new.py", "class ModelNew:\n    pass  # NAN\n");
  const char *a3c[] = {"check", nan, "--against", prob, "--no-cache", NULL};
  run(a3c, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.out, "max abs error   inf") != NULL);
  run_free(&r);

  const char *a4[] = {"check", good, "--against", prob, "--device", "cuda", NULL};
  const char *nogpu[] = {f.kv[0], f.kv[1], f.kv[2], "MKEVOLVE_NO_CACHE=1",
                         "CUDA_VISIBLE_DEVICES=", NULL};
  run(a4, nogpu, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "no GPU") != NULL);
  run_free(&r);
}

/* ---- integration: the real worker over ../shared/kernelbench ------------- */

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

#define MK_CAPTURE_BOUND_MS 15000

MK_TEST(cli, analyze_kernelbench) {
  char server[1024], kb[1024];
  snprintf(server, sizeof server, "%s/engine/worker/python/mkworker/capture.py", mk_test_repo_dir());
  snprintf(kb, sizeof kb, "%s/kernelbench", mk_test_shared_dir());
  if (access(server, R_OK) != 0 || access(MK_DEFAULT_PYTHON, X_OK) != 0) {
    mk_test_skip("no Python worker (engine/worker/python) or .venv");
    return;
  }
  if (access(kb, R_OK) != 0) {
    mk_test_skip("../shared/kernelbench is absent");
    return;
  }
  /* All problems in one run (one worker start); each file's time is the
   * capture job's wall time, worker start-up included only in the first.
   * The bound catches a capture gone pathological (a retrace per op, say),
   * not a latency target: that is measured by scripts/bench-lsp-latency.mjs.
   * SwinV2, the largest, took 5.2 s on the 2-core CI machine under ASan with
   * the other suites running beside it. */
  const char *levels[] = {"level1", "level2", "level3"};
  char *files[512];
  int n = 0;
  for (int l = 0; l < 3; l++) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/%s", kb, levels[l]);
    DIR *d = opendir(dir);
    if (!d) continue;
    struct dirent *de;
    while ((de = readdir(d)) && n < 512) {
      size_t len = strlen(de->d_name);
      if (len < 4 || strcmp(de->d_name + len - 3, ".py") != 0) continue;
      char p[1600];
      snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
      files[n++] = mk_strdup(p);
    }
    closedir(d);
  }
  qsort(files, (size_t)n, sizeof files[0], cmp_str);
  MK_REQUIRE(n > 0);
  const char *args[520];
  int k = 0;
  args[k++] = "analyze";
  args[k++] = "--json";
  args[k++] = "--no-cache";
  for (int i = 0; i < n; i++) args[k++] = files[i];
  args[k] = NULL;
  const char *env[] = {"-MKEVOLVE_PYTHON", NULL};
  run_out r;
  run(args, env, 580, &r);
  MK_CHECK(!r.timed_out);
  cJSON *j = cJSON_Parse(r.out);
  MK_REQUIRE(cJSON_IsArray(j));
  MK_CHECK_INT(cJSON_GetArraySize(j), ==, n);
  double slowest = 0;
  const char *slowest_file = "";
  int failures = 0;
  for (int i = 0; i < cJSON_GetArraySize(j); i++) {
    const cJSON *e = cJSON_GetArrayItem(j, i);
    const char *file = cJSON_GetObjectItem(e, "file")->valuestring;
    const cJSON *err = cJSON_GetObjectItem(e, "error");
    if (err) {
      fprintf(stderr, "    %s: %s\n", file, cJSON_GetObjectItem(err, "message")->valuestring);
      failures++;
      continue;
    }
    double ms = cJSON_GetObjectItem(e, "elapsed_ms")->valuedouble;
    if (i > 0 && ms > slowest) {
      slowest = ms;
      slowest_file = file;
    }
    if (i > 0 && ms >= MK_CAPTURE_BOUND_MS) fprintf(stderr, "    %s took %.0f ms\n", file, ms);
    MK_CHECK(i == 0 || ms < MK_CAPTURE_BOUND_MS);
    MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(e, "nodes")), >, 0);
    MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(e, "subkernels")), >, 0);
  }
  MK_CHECK_INT(failures, ==, 0);
  fprintf(stderr, "    %d problems in %.1f s; slowest %.0f ms (%s)\n", n, r.seconds, slowest,
          slowest_file);
  cJSON_Delete(j);
  run_free(&r);
  for (int i = 0; i < n; i++) free(files[i]);
}

/* ---- help, usage and the first errors a new user meets ------------------- */

/* Every option of docs/cli.md's "Session options shared by `evolve` and
 * `bench`" paragraph, as the docs spell them. */
static int doc_session_options(char opts[][32], int max) {
  char path[4096], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/docs/cli.md", mk_test_repo_dir());
  if (mk_read_file(path, 1 << 20, &text, &len) != 0) return 0;
  const char *p = strstr(text, "Session options shared by");
  const char *end = p ? strstr(p, "\n\n") : NULL;
  int n = 0;
  for (; p && p < end && n < max; p++) {
    if (p[0] != '`' || p[1] != '-') continue;
    size_t k = strspn(p + 1, "-abcdefghijklmnopqrstuvwxyz");
    if (k >= 2 && k < 32) snprintf(opts[n++], 32, "%.*s", (int)k, p + 1);
  }
  free(text);
  return n;
}

MK_TEST(cli, help_for_every_command) {
  const char *env[] = {"MKEVOLVE_PYTHON=/nonexistent/python", "MKEVOLVE_NO_CACHE=1", NULL};
  const char *cmds[] = {"analyze", "check", "evolve", "bench", "export", "lsp"};
  const char *flags[] = {"--help", "-h"};
  run_out r;
  for (int i = 0; i < 6; i++)
    for (int f = 0; f < 2; f++) {
      const char *a[] = {cmds[i], flags[f], NULL};
      run(a, env, 10, &r);
      char want[64];
      snprintf(want, sizeof want, "usage: mkevolve %s", cmds[i]);
      MK_CHECK_INT(r.status, ==, 0);
      MK_CHECK(strstr(r.out, want) != NULL); /* on stdout: `| less` works */
      if (r.status != 0 || !strstr(r.out, want)) fprintf(stderr, "    %s %s\n", cmds[i], flags[f]);
      run_free(&r);
    }
  const char *top[] = {"help", NULL};
  run(top, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK(strstr(r.out, "usage: mkevolve <command>") != NULL);
  run_free(&r);
  const char *topcmd[] = {"help", "evolve", NULL};
  run(topcmd, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK(strstr(r.out, "usage: mkevolve evolve") != NULL);
  run_free(&r);

  /* evolve and bench list every session option docs/cli.md documents. */
  char opts[64][32];
  int n = doc_session_options(opts, 64);
  MK_CHECK_INT(n, >=, 20);
  const char *both[] = {"evolve", "bench"};
  for (int i = 0; i < 2; i++) {
    const char *a[] = {both[i], "--help", NULL};
    run(a, env, 10, &r);
    for (int k = 0; k < n; k++) {
      bool listed = strstr(r.out, opts[k]) != NULL;
      if (!listed) fprintf(stderr, "    %s --help lacks %s\n", both[i], opts[k]);
      MK_CHECK(listed);
    }
    MK_CHECK(strstr(r.out, "--json") != NULL || i == 1);
    MK_CHECK(strstr(r.out, "--kb-crosscheck") != NULL || i == 0);
    run_free(&r);
  }
  /* A mistake prints the usage too, on stderr, with status 2. */
  const char *bad[] = {"bench", "--frobnicate", "x", NULL};
  run(bad, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "--frobnicate") != NULL);
  MK_CHECK(strstr(r.err, "usage: mkevolve bench") != NULL);
  run_free(&r);
  const char *bad2[] = {"evolve", "--frobnicate", NULL};
  run(bad2, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "usage: mkevolve evolve") != NULL);
  run_free(&r);
}

/* `bench --report-only` rewrites the reports from the records and keeps the
 * sweep's start from the results.json it replaces (the done-when reads
 * it); with no earlier results.json it has none to keep. */
MK_TEST(cli, report_only_keeps_the_sweeps_start) {
  const char *env[] = {"MKEVOLVE_PYTHON=/nonexistent/python", "MKEVOLVE_NO_CACHE=1", NULL};
  (void)tmp_file("placeholder.py", good_module); /* creates tmpdir */
  char dir[512], cmd[2048];
  snprintf(dir, sizeof dir, "%s/sweep", tmpdir);
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp -r '%s/tests/fixtures/bench/gpu/problems' '%s/'",
           dir, dir, mk_test_repo_dir(), dir);
  MK_REQUIRE(system(cmd) == 0);
  const char *a[] = {"bench", "--report-only", "-o", dir, NULL};
  run_out r;
  run(a, env, 30, &r);
  MK_CHECK_INT(r.status, ==, 0);
  run_free(&r);
  char path[600], *text = NULL;
  size_t n = 0;
  snprintf(path, sizeof path, "%s/results.json", dir);
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &n) == 0);
  MK_CHECK(strstr(text, "\"started\":\tnull") != NULL); /* nothing to keep */
  free(text);
  snprintf(cmd, sizeof cmd, "printf '{\"schema\": 1, \"started\": \"2026-12-07T04:16:00Z\"}' > '%s'", path);
  MK_REQUIRE(system(cmd) == 0);
  run(a, env, 30, &r);
  MK_CHECK_INT(r.status, ==, 0);
  run_free(&r);
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &n) == 0);
  MK_CHECK(strstr(text, "2026-12-07T04:16:00Z") != NULL);
  free(text);
  snprintf(path, sizeof path, "%s/summary.md", dir);
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &n) == 0);
  MK_CHECK(strstr(text, "Started: 2026-12-07T04:16:00Z") != NULL);
  free(text);
}

MK_TEST(cli, directories_and_evolve_static_errors) {
  /* No Python at all: these must be answered before any worker starts. */
  const char *env[] = {"MKEVOLVE_PYTHON=/nonexistent/python", "MKEVOLVE_NO_CACHE=1", NULL};
  run_out r;
  (void)tmp_file("placeholder.py", good_module); /* creates tmpdir */
  const char *cmds[] = {"analyze", "evolve"};
  for (int i = 0; i < 2; i++) {
    const char *a[] = {cmds[i], tmpdir, NULL};
    run(a, env, 10, &r);
    MK_CHECK_INT(r.status, ==, 1);
    MK_CHECK(strstr(r.err, "is a directory") != NULL);
    MK_CHECK(strstr(r.err, "KernelBench format") != NULL);
    MK_CHECK(strstr(r.err, "mkevolve bench DIR") != NULL);
    MK_CHECK(strstr(r.err, "i/o error") == NULL);
    run_free(&r);
  }
  const char *bad = tmp_file("evolve_syntax.py", "import torch\nclass Model:\n    def forward(self, x:\n"
                                                 "        return x\ndef get_inputs():\n    return []\n");
  const char *a1[] = {"evolve", bad, "--workdir", tmpdir, NULL};
  run(a1, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "evolve_syntax.py:3:") != NULL);
  MK_CHECK(strstr(r.err, "def forward(self, x:") != NULL);
  MK_CHECK(strstr(r.err, "nonexistent") == NULL); /* no worker was started */
  MK_CHECK(r.seconds < 2);
  run_free(&r);
  const char *a2[] = {"evolve", "/nonexistent/dir/model.py", NULL};
  run(a2, env, 10, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "no such file") != NULL);
  run_free(&r);
  /* An -o that cannot be written is refused before the search, not after it. */
  const char *good = tmp_file("evolve_good.py", good_module);
  char missing[600], taken[600];
  snprintf(missing, sizeof missing, "%s/no_such_folder/ModelNew.py", tmpdir);
  snprintf(taken, sizeof taken, "%s/evolve_good.py/ModelNew.py", tmpdir);
  char slash[600];
  snprintf(slash, sizeof slash, "%s/new_folder/", tmpdir);
  const char *outs[] = {missing, taken, tmpdir, slash};
  const char *why[] = {"no_such_folder does not exist", "evolve_good.py is not a folder", "it is a folder",
                       "it is a folder"};
  for (int i = 0; i < 4; i++) {
    const char *a3[] = {"evolve", good, "-o", outs[i], "--workdir", tmpdir, NULL};
    run(a3, env, 10, &r);
    MK_CHECK_INT(r.status, ==, 1);
    MK_CHECK(strstr(r.err, "cannot write") != NULL);
    MK_CHECK(strstr(r.err, why[i]) != NULL);
    MK_CHECK(strstr(r.err, "nonexistent") == NULL); /* no worker was started */
    MK_CHECK(r.seconds < 2);
    run_free(&r);
  }
}

MK_TEST(cli, traceback_shows_the_users_frames) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *m = tmp_file("raises.py", "def helper(x):\n    return x @ x\nclass Model:\n"
                                        "    def forward(self, x): return helper(x)  # RAISES\n"
                                        "def get_inputs():\n    return []\n");
  run_out r;
  const char *a[] = {"analyze", m, NULL};
  run(a, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "traceback (your code") != NULL);
  MK_CHECK(strstr(r.err, "line 4, in forward") != NULL);
  MK_CHECK(strstr(r.err, "line 2, in helper") != NULL);
  MK_CHECK(strstr(r.err, "RuntimeError: a and b must have same reduction dim") != NULL);
  MK_CHECK(strstr(r.err, "_meta_registrations") == NULL); /* torch's frames are not the user's */
  MK_CHECK(strstr(r.err, "mkworker/capture.py") == NULL);
  MK_CHECK(strstr(r.err, "^^^") == NULL);
  run_free(&r);
}

MK_TEST(cli, user_traceback_filter) {
  mk_buf b;
  mk_buf_init(&b, 0);
  const char *tb = "Traceback (most recent call last):\n"
                   "  File \"/lib/x.py\", line 3, in run\n    f()\n"
                   "  File \"/u/m.py\", line 9, in forward\n    return g(x)\n           ^^^^\n"
                   "  File \"/u/m.pyx\", line 1, in g\n    pass\n"
                   "ValueError: bad\n";
  MK_CHECK_INT(mk_cli_user_traceback(tb, "/u/m.py", &b), ==, 1);
  MK_CHECK_STR(mk_buf_cstr(&b), "  File \"/u/m.py\", line 9, in forward\n    return g(x)\nValueError: bad\n");
  mk_buf_reset(&b);
  MK_CHECK_INT(mk_cli_user_traceback(tb, "/other.py", &b), ==, 0);
  MK_CHECK_INT((int)b.len, ==, 0);
  mk_buf_free(&b);
}

MK_TEST(cli, check_table_without_compared_values) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *prob = tmp_file("prob2.py", good_module);
  const char *shape = tmp_file("shape_new.py", "class ModelNew:\n    pass  # SHAPE\n");
  const char *nans = tmp_file("nans_new.py", "class ModelNew:\n    pass  # NANS\n");
  run_out r;
  const char *a1[] = {"check", shape, "--against", prob, NULL};
  run(a1, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.out, "NO: mismatch") != NULL);
  MK_CHECK(strstr(r.out, "has shape [4, 2], the reference [4, 4]") != NULL);
  MK_CHECK(strstr(r.out, "max abs error") == NULL);
  MK_CHECK(strstr(r.out, "0 of 0 elements") == NULL);
  run_free(&r);
  const char *a2[] = {"check", nans, "--against", prob, NULL};
  run(a2, f.kv, 30, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.out, "5 NaN and 0 Inf values where the reference is finite") != NULL);
  MK_CHECK(strstr(r.out, "5 of 4096 elements") != NULL);
  MK_CHECK(strstr(r.out, "max abs error   0\n") == NULL);
  run_free(&r);
}

/* A verified kernel reverted because the whole program timed out in its
 * check says so: the true reason, not "none faster than PyTorch" (a CPU run
 * has no timings to be slower by). The progress names the subkernel and
 * counts candidates; the run log is where the closing line says. */
MK_TEST(cli, evolve_reports_the_true_reason) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *m = tmp_file("hang_whole.py", "import torch\nclass Model(torch.nn.Module):\n"
                                            "    def forward(self, x):\n"
                                            "        return torch.tanh(x)  # HANG in the whole-program check\n"
                                            "def get_inputs():\n    return [torch.randn(4, 4)]\n"
                                            "def get_init_inputs():\n    return []\n");
  char work[600];
  snprintf(work, sizeof work, "%s/work_true_reason", tmpdir);
  run_out r;
  const char *a[] = {"evolve", m, "--job-timeout", "1", "--budget", "4", "--workdir", work, NULL};
  run(a, f.kv, 120, &r);
  MK_CHECK(!r.timed_out);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.out, "why PyTorch: 3 of 3 tried verified alone, but the composed program failed its "
                         "whole-program check (timeout") != NULL);
  MK_CHECK(strstr(r.out, "none faster") == NULL);
  /* reverted to the reference: every subkernel is PyTorch's, under the default backend */
  MK_CHECK(strstr(r.out, "subkernels by backend: 0 CUDA C++, 0 Triton, ") != NULL);
  MK_CHECK(strstr(r.out, "PyTorch (--backend triton)") != NULL);
  MK_CHECK(strstr(r.err, "conv2d_min: candidate 1 (up to 1 s)") != NULL);
  MK_CHECK(strstr(r.err, "candidates 4/4 done, 4 verified") != NULL);
  MK_CHECK(strstr(r.err, "ETA ~") != NULL);
  char log[700];
  snprintf(log, sizeof log, "run log: %s/hang_whole/run.jsonl", work);
  MK_CHECK(strstr(r.out, log) != NULL);
  MK_CHECK(access(log + strlen("run log: "), R_OK) == 0);
  run_free(&r);
}

/* Without --workdir, run files go to ./.mkevolve of the working directory,
 * not beside the problem. */
MK_TEST(cli, evolve_writes_to_the_working_directory) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *m = tmp_file("where.py", good_module);
  char cwd[600], problem_dir[600];
  snprintf(cwd, sizeof cwd, "%s/cwd_run", tmpdir);
  mkdir(cwd, 0755);
  snprintf(problem_dir, sizeof problem_dir, "%s/.mkevolve", tmpdir);
  char old[4096];
  MK_REQUIRE(getcwd(old, sizeof old) != NULL);
  MK_REQUIRE(chdir(cwd) == 0);
  run_out r;
  const char *a[] = {"evolve", m, "--budget", "2", NULL};
  run(a, f.kv, 120, &r);
  MK_CHECK(chdir(old) == 0);
  MK_CHECK_INT(r.status, ==, 0);
  char want[700];
  snprintf(want, sizeof want, "run log: %s/.mkevolve/where/run.jsonl", cwd);
  MK_CHECK(strstr(r.out, want) != NULL);
  snprintf(want, sizeof want, "ModelNew written to %s/.mkevolve/where/ModelNew.py", cwd);
  MK_CHECK(strstr(r.out, want) != NULL);
  MK_CHECK(strstr(r.out, "TRITON_INTERPRET=1") != NULL);
  MK_CHECK(access(problem_dir, F_OK) != 0); /* nothing beside the problem */
  run_free(&r);
}

/* --backend cuda on the CPU: the CUDA generator declines (no GPU), every
 * subkernel keeps the PyTorch reference with that reason, and the JSON says
 * which backend the run asked for and what each subkernel became. */
MK_TEST(cli, backend_cuda_on_the_cpu_keeps_pytorch_with_the_reason) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *m = tmp_file("cuda_cpu.py", good_module);
  char work[600];
  snprintf(work, sizeof work, "%s/work_cuda_cpu", tmpdir);
  run_out r;
  const char *a[] = {"evolve", m, "--backend", "cuda", "--budget", "4", "--json", "--workdir", work, NULL};
  run(a, f.kv, 120, &r);
  MK_CHECK_INT(r.status, ==, 0);
  cJSON *o = cJSON_Parse(r.out);
  MK_REQUIRE(o != NULL);
  MK_CHECK_STR(cJSON_GetObjectItem(o, "backend")->valuestring, "cuda");
  const cJSON *counts = cJSON_GetObjectItem(o, "backend_counts");
  const cJSON *sks = cJSON_GetObjectItem(o, "subkernels");
  MK_REQUIRE(cJSON_IsArray(sks) && cJSON_GetArraySize(sks) > 0);
  MK_CHECK_INT(cJSON_GetObjectItem(counts, "cuda")->valueint, ==, 0);
  MK_CHECK_INT(cJSON_GetObjectItem(counts, "triton")->valueint, ==, 0);
  MK_CHECK_INT(cJSON_GetObjectItem(counts, "pytorch")->valueint, ==, cJSON_GetArraySize(sks));
  const cJSON *sk;
  cJSON_ArrayForEach(sk, sks) {
    MK_CHECK_STR(cJSON_GetObjectItem(sk, "backend")->valuestring, "pytorch");
    MK_CHECK(strstr(cJSON_GetObjectItem(sk, "summary")->valuestring, "CUDA candidates need a GPU") != NULL);
  }
  cJSON_Delete(o);
  run_free(&r);
}

/* The LLM proposer takes every --backend. On the CPU, cuda asks the LLM for
 * nothing (CUDA candidates need a GPU): every subkernel keeps PyTorch with
 * that reason and the ledger has no call (the endpoint below has no server,
 * so a call would have failed with another reason). auto asks for Triton:
 * its calls fail there, each recorded. */
MK_TEST(cli, llm_proposer_takes_every_backend) {
  fake_env f;
  fake_env_init(&f, "normal", false);
  const char *m = tmp_file("llm_backend.py", good_module);
  char work[600];
  snprintf(work, sizeof work, "%s/work_llm_backend", tmpdir);
  const char *backends[] = {"cuda", "auto"};
  for (int i = 0; i < 2; i++) {
    run_out r;
    const char *a[] = {"evolve", m, "--backend", backends[i], "--model", "m", "--base-url", "http://127.0.0.1:9/v1",
                       "--llm-config", "{\"max_retries\": 0, \"connect_timeout_s\": 2}", "--budget", "4",
                       "--json", "--workdir", work, NULL};
    run(a, f.kv, 120, &r);
    MK_CHECK_INT(r.status, ==, 0);
    if (r.status || getenv("MK_TEST_VERBOSE")) fprintf(stderr, "%s\n%s\n", r.out, r.err);
    cJSON *o = cJSON_Parse(r.out);
    MK_REQUIRE(o != NULL);
    MK_CHECK_STR(cJSON_GetObjectItem(o, "backend")->valuestring, backends[i]);
    const cJSON *total = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "llm"), "total");
    MK_REQUIRE(cJSON_IsObject(total));
    int calls = cJSON_GetObjectItem(total, "calls")->valueint;
    const cJSON *sk;
    cJSON_ArrayForEach(sk, cJSON_GetObjectItem(o, "subkernels")) {
      MK_CHECK_STR(cJSON_GetObjectItem(sk, "backend")->valuestring, "pytorch");
      const char *why = cJSON_GetObjectItem(sk, "summary")->valuestring;
      if (i == 0) MK_CHECK(strstr(why, "CUDA candidates need a GPU") != NULL);
    }
    if (i == 0) MK_CHECK_INT(calls, ==, 0);
    else MK_CHECK(calls >= 1 && cJSON_GetObjectItem(total, "failures")->valueint == calls);
    cJSON_Delete(o);
    run_free(&r);
  }
}

/* A CPU evolve is bounded by its plan: a candidate that never finishes (a
 * kernel too slow for the interpreter) runs only as long as the plan's share
 * of the budget; the next subkernel, which would need half again as long, is
 * not started with what is left; each subkernel's summary, in the table and
 * the JSON, says which of those happened, not "slower". */
MK_TEST(cli, cpu_evolve_stays_inside_its_budget) {
  fake_env f;
  fake_env_init(&f, "slow_candidates", false);
  const char *m = tmp_file("slow_kernels.py", good_module);
  char work[600];
  snprintf(work, sizeof work, "%s/work_slow", tmpdir);
  run_out r;
  const char *a[] = {"evolve", m, "--json", "--time-budget", "33", "--workdir", work, NULL};
  run(a, f.kv, 120, &r);
  MK_CHECK(!r.timed_out);
  MK_CHECK_INT(r.status, ==, 0); /* the plain program verifies */
  MK_CHECK(r.seconds < 33);      /* the budget bounds the whole run */
  MK_CHECK(r.seconds > 10);      /* the first candidate had its share */
  cJSON *j = cJSON_Parse(r.out);
  MK_REQUIRE(j != NULL);
  const cJSON *sks = cJSON_GetObjectItemCaseSensitive(j, "subkernels");
  MK_REQUIRE(cJSON_GetArraySize(sks) == 2);
  const char *s0 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sks, 0), "summary")->valuestring;
  const char *s1 = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(sks, 1), "summary")->valuestring;
  /* 33 s over two subkernels and the check's share: 11 s for the first. */
  MK_CHECK(strstr(s0, "no verified variant (1 tried: 1 timeout)") != NULL);
  MK_CHECK(strstr(s0, "the CPU plan's limit for this candidate: 11 s of a 33 s budget") != NULL);
  MK_CHECK(strstr(s1, "not tried: what is left of the CPU budget of 33 s") != NULL);
  MK_CHECK(strstr(s0, "faster") == NULL && strstr(s1, "faster") == NULL);
  cJSON_Delete(j);
  MK_CHECK(strstr(r.err, "conv2d_min: candidate 1 (up to 11 s)") != NULL);
  MK_CHECK(strstr(r.err, "candidates 0/2 done") != NULL);
  MK_CHECK(strstr(r.err, "candidates 1/1 done") != NULL);
  run_free(&r);
}

/* `mkevolve export` refuses at once (no worker) what it cannot export:
 * a file compose did not write, and Triton subkernels (compiled in for a
 * GPU: test_export.c) with --device cpu and without --kernels-as-pytorch,
 * naming each; a usage mistake is status 2. The export itself, built and
 * tested against libtorch, is tests/suites/65-export.sh. */
MK_TEST(cli, export_refusals) {
  const char *env[] = {"MKEVOLVE_PYTHON=/nonexistent/python", "MKEVOLVE_NO_CACHE=1", NULL};
  char fixture[1024], plain[1024], dir[] = "/tmp/mk_export_cliXXXXXX";
  snprintf(fixture, sizeof fixture, "%s/tests/fixtures/export/small_net_modelnew.py", mk_test_repo_dir());
  snprintf(plain, sizeof plain, "%s/tests/fixtures/export/small_net.py", mk_test_repo_dir());
  MK_REQUIRE(mkdtemp(dir) != NULL);
  run_out r;
  const char *triton[] = {"export", fixture, "-o", dir, "--device", "cpu", NULL};
  run(triton, env, 20, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "6 subkernels run a Triton kernel, which the export compiles for a GPU (sm_90)") != NULL);
  MK_CHECK(strstr(r.err, "sk0 conv2d (Triton: triton_convcl)") != NULL);
  MK_CHECK(strstr(r.err, "--kernels-as-pytorch") != NULL);
  run_free(&r);
  const char *bad_arch[] = {"export", fixture, "-o", dir, "--arch", "sm_x", NULL};
  run(bad_arch, env, 20, &r);
  MK_CHECK_INT(r.status, ==, 2);
  run_free(&r);
  const char *foreign[] = {"export", plain, "-o", dir, NULL};
  run(foreign, env, 20, &r);
  MK_CHECK_INT(r.status, ==, 1);
  MK_CHECK(strstr(r.err, "not a ModelNew composed by MKEvolve") != NULL);
  run_free(&r);
  const char *no_out[] = {"export", fixture, NULL};
  run(no_out, env, 20, &r);
  MK_CHECK_INT(r.status, ==, 2);
  run_free(&r);
  const char *bad_ns[] = {"export", fixture, "-o", dir, "--namespace", "9 lives", NULL};
  run(bad_ns, env, 20, &r);
  MK_CHECK_INT(r.status, ==, 2);
  MK_CHECK(strstr(r.err, "--namespace wants a C++ identifier") != NULL);
  run_free(&r);
  rmdir(dir);
}

/* --no-native-worker turns the verifier's routing to mkworker-native off and
 * --native-worker on again; the default (mk_verify_options_init) has it on
 * since the native verifier's GPU test passed. */
MK_TEST(cli, native_worker_option) {
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  MK_CHECK(cfg.verify.native);
  MK_CHECK_INT(mk_cli_session_option(&cfg, "--no-native-worker", NULL), ==, 1);
  MK_CHECK(!cfg.verify.native);
  MK_CHECK_INT(mk_cli_session_option(&cfg, "--native-worker", NULL), ==, 1);
  MK_CHECK(cfg.verify.native);
}
