/* test_session.c — the session facade on a real worker: unsaved editor
 * text is captured from a private copy (same file name, so line numbers
 * stay), the module stays keyed by its real path, composing uses the
 * captured text, and errors name the user's file. Skipped without a
 * Python that has torch and triton. */
#include "mk_buf.h"
#include "mk_session.h"
#include "mk_test.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool python_ready(void) {
  mk_buf cmd;
  mk_buf_init(&cmd, 4096);
  mk_buf_printf(&cmd, "'%s' -c 'import torch, triton' >/dev/null 2>&1", MK_DEFAULT_PYTHON);
  int rc = system(mk_buf_cstr(&cmd));
  mk_buf_free(&cmd);
  return rc == 0;
}

typedef struct result {
  bool called;
  int calls;
  int status;
  int first_line, nsubkernels;
  char path[512];
  char error[1024];
} result;

static void on_done(void *data, int status, const mk_session_module *m, const char *error) {
  result *r = data;
  r->called = true;
  r->calls++;
  r->status = status;
  if (m) {
    snprintf(r->path, sizeof r->path, "%s", m->path);
    r->nsubkernels = m->nsubkernels;
    r->first_line = m->nsubkernels ? m->subkernels[0].first_line : 0;
  }
  snprintf(r->error, sizeof r->error, "%s", error ? error : "");
}

static int analyze(uv_loop_t *loop, mk_session *s, const char *path, const char *text, result *r) {
  memset(r, 0, sizeof *r);
  mk_errmsg err = {{0}};
  int rc = mk_session_analyze(s, path, text, on_done, r, &err);
  if (rc) return rc;
  /* NOWAIT: UV_RUN_ONCE may run the delivery timer and then block in poll
   * (the workers' pipes keep the loop alive). */
  while (!r->called) {
    uv_run(loop, UV_RUN_NOWAIT);
    if (!r->called) usleep(1000);
  }
  return 0;
}

/* Number of unsaved-* folders in dir. */
static int unsaved_copies(const char *dir) {
  DIR *d = opendir(dir);
  if (d == NULL) return 0;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += strncmp(e->d_name, "unsaved-", 8) == 0;
  closedir(d);
  return n;
}

static const char *TINY =
    "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n"
    "    def __init__(self):\n        super().__init__()\n\n"
    "    def forward(self, x):\n        y = torch.relu(x * 2.0)\n        return y + 1.0\n\n\n"
    "def get_inputs():\n    return [torch.randn(4, 64)]\n\n\n"
    "def get_init_inputs():\n    return []\n";

static void closed(void *data) { *(bool *)data = true; }

MK_TEST(session, unsaved_text_is_captured) {
  if (!python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  char dir[] = "/tmp/mk_session_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char file[256], cache[256], work[300];
  snprintf(file, sizeof file, "%s/tiny.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
  snprintf(work, sizeof work, "%s/.mkevolve/tiny", dir);
  MK_REQUIRE(mk_write_file(file, TINY, strlen(TINY)) == 0);
  uv_loop_t loop;
  uv_loop_init(&loop);
  mk_session_config cfg;
  mk_session_config_defaults(&cfg);
  cfg.device = "cpu";
  cfg.cache_dir = cache;
  mk_session *s = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_session_new(&loop, &cfg, &s, &err) == 0);

  /* The saved file. */
  result r;
  MK_REQUIRE(analyze(&loop, s, file, NULL, &r) == 0);
  MK_CHECK_INT(r.status, ==, 0);
  MK_REQUIRE(r.nsubkernels > 0);
  MK_CHECK_INT(r.first_line, ==, 10);
  MK_CHECK_INT(unsaved_copies(work), ==, 0);

  /* Unsaved text: three lines more at the top and a changed constant. */
  mk_buf dirty;
  mk_buf_init(&dirty, 1 << 16);
  mk_buf_puts(&dirty, "# unsaved line 1\n# unsaved line 2\n# unsaved line 3\n");
  mk_buf_puts(&dirty, TINY);
  MK_REQUIRE(analyze(&loop, s, file, mk_buf_cstr(&dirty), &r) == 0);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK_STR(r.path, file);          /* keyed by the real path */
  MK_CHECK_INT(r.first_line, ==, 13);      /* the editor's line numbers */
  MK_CHECK_INT(unsaved_copies(work), ==, 1); /* held while the module uses it */
  char *disk = NULL;
  size_t len = 0;
  MK_REQUIRE(mk_read_file(file, 1 << 20, &disk, &len) == 0);
  MK_CHECK_STR(disk, TINY);            /* the user's file is untouched */
  free(disk);
  MK_CHECK(mk_session_get(s, file) != NULL);

  /* Composing uses the captured (unsaved) text and names the real file. */
  char *written = NULL;
  MK_REQUIRE(mk_session_compose(s, file, NULL, &written, &err) == 0);
  char *composed = NULL;
  MK_REQUIRE(mk_read_file(written, 1 << 22, &composed, &len) == 0);
  MK_CHECK(strstr(composed, "# unsaved line 2") != NULL);
  MK_CHECK(strstr(composed, "unsaved-") == NULL);
  free(composed);
  free(written);

  /* A capture error on unsaved text names the user's file, on its line;
   * the private copy goes, the previous state stays. */
  mk_buf bad;
  mk_buf_init(&bad, 1 << 16);
  mk_buf_puts(&bad, TINY);
  mk_buf_puts(&bad, "\nraise RuntimeError('boom at import')\n");
  MK_REQUIRE(analyze(&loop, s, file, mk_buf_cstr(&bad), &r) == 0);
  MK_CHECK(r.status != 0);
  MK_CHECK(strstr(r.error, "unsaved-") == NULL);
  MK_CHECK(strstr(r.error, "boom") != NULL);
  MK_CHECK_INT(unsaved_copies(work), ==, 1); /* only the adopted copy remains */
  MK_CHECK_INT(mk_session_get(s, file)->subkernels[0].first_line, ==, 13);

  /* Text equal to the file: captured from the file, the copy goes. */
  MK_REQUIRE(analyze(&loop, s, file, TINY, &r) == 0);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK_INT(r.first_line, ==, 10);
  MK_CHECK_INT(unsaved_copies(work), ==, 0);

  /* A file that does not exist yet (new buffer): its text is captured. */
  char fresh[300];
  snprintf(fresh, sizeof fresh, "%s/never_saved.py", dir);
  MK_REQUIRE(analyze(&loop, s, fresh, TINY, &r) == 0);
  MK_CHECK_INT(r.status, ==, 0);
  MK_CHECK_STR(r.path, fresh);
  mk_session_forget(s, fresh);
  char fresh_work[320];
  snprintf(fresh_work, sizeof fresh_work, "%s/.mkevolve/never_saved", dir);
  MK_CHECK_INT(unsaved_copies(fresh_work), ==, 0); /* forgetting removes the copy */

  bool done = false;
  mk_session_close(s, closed, &done);
  while (!done) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (!done) usleep(1000);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK(uv_loop_close(&loop) == 0);
  mk_buf_free(&dirty);
  mk_buf_free(&bad);
  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK(system(mk_buf_cstr(&rm)) == 0);
  mk_buf_free(&rm);
}
