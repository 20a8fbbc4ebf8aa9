/* test_doors.c — one verdict whichever door a candidate comes in by: the
 * editor (the language server's configuration handed to a session), the
 * CLI's `evolve` configuration and `mkevolve check` get the same verdict on
 * the same ModelNew with no settings given, and an explicit 0 tolerance is
 * honoured (not replaced by a default). Real workers on the CPU; skipped
 * without a Python that has torch and triton. */
#include "mk_buf.h"
#include "mk_loop.h"
#include "mk_lsp_engine_config.h"
#include "mk_session.h"
#include "mk_test.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *PROBLEM =
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def forward(self, x):\n        return torch.relu(x * 2.0) + 1.0\n\n\n"
    "def get_inputs():\n    return [torch.randn(4, 64)]\n\n\n"
    "def get_init_inputs():\n    return []\n";

/* A ModelNew off by `delta` everywhere. */
static void write_candidate(const char *path, const char *delta) {
  mk_buf b;
  mk_buf_init(&b, 4096);
  mk_buf_printf(&b,
                "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
                "    def forward(self, x):\n        return torch.relu(x * 2.0) + 1.0 + %s\n",
                delta);
  MK_CHECK(mk_write_file(path, mk_buf_cstr(&b), b.len) == 0);
  mk_buf_free(&b);
}

typedef struct verdict {
  bool done;
  char status[32];
} verdict;

static void on_checked(void *data, const mk_verify_result *r, const char *status) {
  verdict *v = data;
  (void)r;
  snprintf(v->status, sizeof v->status, "%s", status);
  v->done = true;
}

static void on_closed(void *data) { *(bool *)data = true; }

/* The verdict of a session made from `cfg` on candidate `cand`. */
static void session_verdict(const mk_session_config *cfg, const char *cand, const char *prob,
                            char *out, size_t size) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  mk_session *s = NULL;
  mk_errmsg err = {{0}};
  verdict v = {0};
  snprintf(out, size, "no session");
  if (mk_session_new(&loop, cfg, &s, &err) == 0) {
    if (mk_session_check(s, cand, NULL, prob, NULL, 0, on_checked, &v, &err) == 0) {
      (void)mk_loop_run_until(&loop, &v.done);
      snprintf(out, size, "%s", v.status);
    } else {
      snprintf(out, size, "submit failed: %.100s", err.text);
    }
    bool closed = false;
    mk_session_close(s, on_closed, &closed);
    (void)mk_loop_run_until(&loop, &closed);
  } else {
    fprintf(stderr, "    session: %s\n", err.text);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
}

/* The editor's session configuration for settings `json` (NULL: none). */
static void editor_config(mk_lsp_engine_config *lc, const char *json, mk_session_config *out,
                          char **llm) {
  mk_lsp_engine_config_defaults(lc);
  if (json) {
    cJSON *j = cJSON_Parse(json);
    mk_errmsg err;
    MK_CHECK_INT(mk_lsp_engine_config_apply(lc, j, &err), ==, 0);
    cJSON_Delete(j);
  }
  mk_lsp_engine_config_session(lc, out, llm);
  out->device = "cpu";
}

static const char *bin(void) {
  const char *b = getenv("MKEVOLVE_BIN");
  if (b && access(b, X_OK) == 0) return b;
  static char path[4096];
  ssize_t n = readlink("/proc/self/exe", path, sizeof path - 32);
  if (n <= 0) return "mkevolve";
  path[n] = '\0';
  char *slash = strrchr(path, '/');
  if (slash) snprintf(slash, sizeof path - (size_t)(slash - path), "/../mkevolve");
  return path;
}

/* `mkevolve check CAND --against PROB --device cpu EXTRA`: exit status and
 * whether the table says correct. */
static int cli_check(const char *dir, const char *cand, const char *prob, const char *extra,
                     bool *said_correct) {
  mk_buf cmd;
  mk_buf_init(&cmd, 8192);
  mk_buf_printf(&cmd, "MKEVOLVE_NO_CACHE=1 '%s' check '%s' --against '%s' --device cpu %s "
                      ">'%s/check.out' 2>&1", bin(), cand, prob, extra, dir);
  int st = system(mk_buf_cstr(&cmd));
  mk_buf_reset(&cmd);
  mk_buf_printf(&cmd, "%s/check.out", dir);
  char *text = NULL;
  size_t len = 0;
  *said_correct = false;
  if (mk_read_file(mk_buf_cstr(&cmd), 1 << 20, &text, &len) == 0) {
    *said_correct = strstr(text, "yes (") != NULL;
    free(text);
  }
  mk_buf_free(&cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

MK_TEST(doors, same_verdict_with_no_settings) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  char dir[] = "/tmp/mk_doors_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char prob[256], off[256], cache[256];
  snprintf(prob, sizeof prob, "%s/problem.py", dir);
  snprintf(off, sizeof off, "%s/off_by_1e3.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  MK_REQUIRE(mk_write_file(prob, PROBLEM, strlen(PROBLEM)) == 0);
  /* 1e-3 off: outside the default 1e-4 + 1e-4 * |e|, inside 1e-2 (the
   * editor's old default, which passed what `check` rejects). */
  write_candidate(off, "1e-3");

  mk_lsp_engine_config lc;
  mk_session_config editor, evolve;
  char *llm = NULL;
  editor_config(&lc, NULL, &editor, &llm);
  editor.cache_dir = cache;
  mk_session_config_defaults(&evolve); /* `mkevolve evolve` with no options */
  evolve.device = "cpu";
  evolve.cache_dir = cache;
  char v_editor[128], v_evolve[128];
  session_verdict(&editor, off, prob, v_editor, sizeof v_editor);
  session_verdict(&evolve, off, prob, v_evolve, sizeof v_evolve);
  bool correct = true;
  int st = cli_check(dir, off, prob, "", &correct);
  MK_CHECK_STR(v_editor, "mismatch");
  MK_CHECK_STR(v_evolve, "mismatch");
  MK_CHECK_INT(st, ==, 1);
  MK_CHECK(!correct);
  free(llm);

  /* The tolerance decides: with the editor's tolerance at 1e-2 it passes. */
  editor_config(&lc, "{\"tolerance\": 1e-2}", &editor, &llm);
  editor.cache_dir = cache;
  session_verdict(&editor, off, prob, v_editor, sizeof v_editor);
  MK_CHECK_STR(v_editor, "ok");
  st = cli_check(dir, off, prob, "--atol 1e-2 --rtol 1e-2", &correct);
  MK_CHECK_INT(st, ==, 0);
  MK_CHECK(correct);
  free(llm);

  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK(system(mk_buf_cstr(&rm)) == 0);
  mk_buf_free(&rm);
}

MK_TEST(doors, explicit_zero_tolerance_is_honoured) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  char dir[] = "/tmp/mk_doors_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char prob[256], tiny[256], exact[256], cache[256];
  snprintf(prob, sizeof prob, "%s/problem.py", dir);
  snprintf(tiny, sizeof tiny, "%s/off_by_1e6.py", dir);
  snprintf(exact, sizeof exact, "%s/exact.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  MK_REQUIRE(mk_write_file(prob, PROBLEM, strlen(PROBLEM)) == 0);
  write_candidate(tiny, "1e-6");
  write_candidate(exact, "0.0");

  /* 1e-6 off passes the defaults ... */
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  cfg.device = "cpu";
  cfg.cache_dir = cache;
  char v[128];
  session_verdict(&cfg, tiny, prob, v, sizeof v);
  MK_CHECK_STR(v, "ok");
  /* ... and not atol = rtol = 0 (a `> 0 ?` fallback made that 1e-4) ... */
  cfg.verify.atol = cfg.verify.rtol = 0;
  session_verdict(&cfg, tiny, prob, v, sizeof v);
  MK_CHECK_STR(v, "mismatch");
  /* ... which an exact candidate still passes. */
  session_verdict(&cfg, exact, prob, v, sizeof v);
  MK_CHECK_STR(v, "ok");
  /* The editor's explicit 0 reaches the session the same way. */
  mk_lsp_engine_config lc;
  char *llm = NULL;
  editor_config(&lc, "{\"mkevolve\": {\"tolerance\": 0}}", &cfg, &llm);
  cfg.cache_dir = cache;
  session_verdict(&cfg, tiny, prob, v, sizeof v);
  MK_CHECK_STR(v, "mismatch");
  free(llm);
  bool correct = true;
  MK_CHECK_INT(cli_check(dir, tiny, prob, "--atol 0 --rtol 0", &correct), ==, 1);
  MK_CHECK(!correct);

  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK(system(mk_buf_cstr(&rm)) == 0);
  mk_buf_free(&rm);
}
