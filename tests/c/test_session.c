/* test_session.c — the session facade on a real worker: unsaved editor
 * text is captured from a private copy (same file name, so line numbers
 * stay), the module stays keyed by its real path, composing uses the
 * captured text, and errors name the user's file. Skipped without a
 * Python that has torch and triton. */
#include "mk_backend.h"
#include "mk_buf.h"
#include "mk_session.h"
#include "mk_test.h"
#include "support.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
  if (!mk_test_python_ready()) {
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

/* ---- editable variants ------------------------------------------------------------------ */

typedef struct edit_result {
  bool called;
  int calls;
  int status;
  char verdict[64], reason[1024], variant[128], backend[32], error[1024];
  int line, column, ndiags, diag_line, diag_column;
  bool added;
  int nvariants; /* of the subkernel, after */
} edit_result;

static void on_edit(void *data, int status, const mk_session_edit_result *r, const char *error) {
  edit_result *e = data;
  e->called = true;
  e->calls++;
  e->status = status;
  snprintf(e->error, sizeof e->error, "%s", error ? error : "");
  if (r == NULL) return;
  snprintf(e->verdict, sizeof e->verdict, "%s", r->status);
  snprintf(e->reason, sizeof e->reason, "%s", r->reason);
  snprintf(e->variant, sizeof e->variant, "%s", r->variant);
  snprintf(e->backend, sizeof e->backend, "%s", r->backend);
  e->line = r->line;
  e->column = r->column;
  e->ndiags = r->ndiags;
  e->diag_line = r->ndiags ? r->diags[0].line : 0;
  e->diag_column = r->ndiags ? r->diags[0].column : 0;
  e->added = r->added;
  e->nvariants = r->module->subkernels[r->subkernel].nvariants;
}

static int verify_edit(uv_loop_t *loop, mk_session *s, const char *path, const char *text,
                       edit_result *e, mk_errmsg *err) {
  memset(e, 0, sizeof *e);
  int job = 0;
  int rc = mk_session_verify_edit(s, path, text, on_edit, e, &job, err);
  if (rc) return rc;
  while (!e->called) {
    uv_run(loop, UV_RUN_NOWAIT);
    if (!e->called) usleep(1000);
  }
  /* exactly one callback: a few more turns bring no second one */
  for (int i = 0; i < 20; i++) uv_run(loop, UV_RUN_NOWAIT);
  return 0;
}

/* 1-based line of the first line of `text` containing `needle`, 0 none. */
static int line_of(const char *text, const char *needle) {
  const char *hit = strstr(text, needle);
  if (hit == NULL) return 0;
  int line = 1;
  for (const char *p = text; p < hit; p++) line += *p == '\n';
  return line;
}

static const char *TRITON_EDIT =
    "import torch\nimport triton\nimport triton.language as tl\n\n\n"
    "@triton.jit\n"
    "def _k(x_ptr, y_ptr, n, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n"
    "    m = offs < n\n"
    "    x = tl.load(x_ptr + offs, mask=m)\n"
    "    tl.store(y_ptr + offs, tl.maximum(x * 2.0, 0.0) + 1.0, mask=m)\n\n\n"
    "def run(x):\n"
    "    x = x.contiguous()\n"
    "    y = torch.empty_like(x)\n"
    "    n = x.numel()\n"
    "    _k[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)\n"
    "    return y\n";

static const char *BROKEN_EDIT =
    "import torch\n\n\n"
    "def helper(x):\n"
    "    raise RuntimeError('boom in the edit')\n\n\n"
    "def run(x):\n"
    "    return helper(x)\n";

static const char *CUDA_EDIT =
    "import torch\n\n"
    "MK_BACKEND = \"cuda\"\n"
    "MK_CUDA_SOURCE = r\"\"\"\n"
    "extern \"C\" __global__ void k(const float *x, float *y, long long n) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i >= n) return;\n"
    "  y[i] = fmaxf(x[i] * undeclared_scale, 0.0f) + 1.0f;\n"
    "}\n"
    "\"\"\"\n"
    "MK_CUDA_KERNELS = {\"k\": \"ffq\"}\n\n\n"
    "def run(x):\n"
    "    y = torch.empty_like(x)\n"
    "    n = y.numel()\n"
    "    _mk_cuda.launch(\"k\", ((n + 255) // 256,), (256,), (x.contiguous(), y, n))\n"
    "    return y\n";

/* TINY in one subkernel: relu(x * 2) + 1 (checked below). Edit files: the
 * reference written beside the module, verified as "user_reference"; a
 * Triton rewrite verified and swappable; a Python edit that raises, a
 * syntax error, a CUDA edit with an undeclared identifier (NVRTC: at its
 * line, no worker); unknown subkernel, a path outside an edit folder, a
 * module changed on disk. */
MK_TEST(session, edit_variant_and_verify_edit) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  char dir[] = "/tmp/mk_session_edit_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char file[256], cache[256];
  snprintf(file, sizeof file, "%s/tiny.py", dir);
  snprintf(cache, sizeof cache, "%s/cache", dir);
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
  result r;
  MK_REQUIRE(analyze(&loop, s, file, NULL, &r) == 0);
  MK_REQUIRE(r.status == 0);
  MK_REQUIRE(r.nsubkernels == 1);
  const mk_session_module *v = mk_session_get(s, file);
  char skname[128];
  snprintf(skname, sizeof skname, "%s", v->subkernels[0].name);

  /* Not analysed / bad arguments. */
  char *edit = NULL;
  MK_CHECK_INT(mk_session_edit_variant(s, "/nonexistent/x.py", 0, 0, &edit, &err), ==, MK_ENOENT);
  MK_CHECK_INT(mk_session_edit_variant(s, file, 5, 0, &edit, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_session_edit_variant(s, file, 0, 9, &edit, &err), ==, MK_EINVAL);

  /* The reference, written to .mkevolve/tiny/edit/<sk>.reference.py. */
  MK_REQUIRE(mk_session_edit_variant(s, file, 0, -1, &edit, &err) == 0);
  char want[512];
  snprintf(want, sizeof want, "%s/.mkevolve/tiny/edit/%s.reference.py", dir, skname);
  MK_CHECK_STR(edit, want);
  char *text = NULL;
  size_t len = 0;
  MK_REQUIRE(mk_read_file(edit, 1 << 20, &text, &len) == 0);
  MK_CHECK(strstr(text, v->subkernels[0].variants[0].name) != NULL);
  MK_CHECK(strstr(text, "def run(") != NULL);
  MK_CHECK(strstr(text, "MK_USES_TORCH") != NULL);
  MK_CHECK(strstr(text, "# mkevolve-ref: ") != NULL);
  char *module = NULL, *sk = NULL;
  MK_REQUIRE(mk_session_edit_target(s, edit, &module, &sk, &err) == 0);
  MK_CHECK_STR(module, file);
  MK_CHECK_STR(sk, skname);
  free(module);
  free(sk);
  /* A second call keeps the file (the user's edits). */
  MK_REQUIRE(mk_write_file(edit, "# mine\n", 7) == 0);
  char *again = NULL;
  MK_REQUIRE(mk_session_edit_variant(s, file, 0, 0, &again, &err) == 0);
  MK_CHECK_STR(again, edit);
  free(again);
  MK_REQUIRE(mk_write_file(edit, text, len) == 0);

  /* The reference as a user edit verifies (its ops declared) and becomes
   * variant user_reference. */
  edit_result e;
  MK_REQUIRE(verify_edit(&loop, s, edit, NULL, &e, &err) == 0);
  MK_CHECK_INT(e.calls, ==, 1);
  MK_CHECK_INT(e.status, ==, 0);
  MK_CHECK_STR(e.verdict, "ok");
  MK_CHECK_STR(e.variant, "user_reference");
  MK_CHECK(e.added);
  MK_CHECK_INT(e.nvariants, ==, 2);

  /* A Triton rewrite, verified and swappable. */
  MK_REQUIRE(verify_edit(&loop, s, edit, TRITON_EDIT, &e, &err) == 0);
  MK_CHECK_INT(e.status, ==, 0);
  MK_CHECK_STR(e.verdict, "ok");
  MK_CHECK_STR(e.backend, "triton");
  MK_CHECK(e.added);
  MK_CHECK_INT(e.nvariants, ==, 2); /* replaced user_reference */
  v = mk_session_get(s, file);
  MK_CHECK_STR(v->subkernels[0].variants[1].name, "user_reference");
  MK_CHECK_STR(v->subkernels[0].variants[1].origin, "user");
  MK_CHECK_STR(v->subkernels[0].variants[1].backend, "triton");
  MK_CHECK_INT(mk_session_swap(s, file, 0, 1, &err), ==, 0);
  MK_CHECK_INT(mk_session_get(s, file)->subkernels[0].state, ==, MK_SK_VERIFIED);

  /* An edit of that variant is named after it, not user_user_... */
  char *edit2 = NULL;
  MK_REQUIRE(mk_session_edit_variant(s, file, 0, -1, &edit2, &err) == 0);
  MK_CHECK(strstr(edit2, ".user_reference.py") != NULL);

  /* A Python edit that raises: runtime_error at the raising line; not added. */
  MK_REQUIRE(verify_edit(&loop, s, edit2, BROKEN_EDIT, &e, &err) == 0);
  MK_CHECK_INT(e.status, ==, 0);
  MK_CHECK_STR(e.verdict, "runtime_error");
  MK_CHECK(strstr(e.reason, "boom in the edit") != NULL);
  MK_CHECK_INT(e.line, ==, line_of(BROKEN_EDIT, "raise RuntimeError"));
  MK_CHECK(!e.added);
  MK_CHECK_INT(e.nvariants, ==, 2);
  /* A syntax error: compile_error at its line. */
  MK_REQUIRE(verify_edit(&loop, s, edit2, "import torch\n\ndef run(x):\n    return (x +\n", &e, &err) == 0);
  MK_CHECK_STR(e.verdict, "compile_error");
  MK_CHECK(e.line >= 4);

  /* CUDA with an undeclared identifier: NVRTC's error on the file's line. */
  mk_backend *b = NULL;
  mk_errmsg berr = {{0}};
  if (mk_backend_open(NULL, &b, &berr) == MK_EUNSUPPORTED) {
    fprintf(stderr, "  (CUDA edit case skipped: %s)\n", berr.text);
  } else {
    mk_backend_close(b);
    MK_REQUIRE(verify_edit(&loop, s, edit2, CUDA_EDIT, &e, &err) == 0);
    MK_CHECK_STR(e.verdict, "compile_error");
    MK_CHECK_STR(e.backend, "cuda");
    MK_CHECK(strstr(e.reason, "undeclared_scale") != NULL);
    MK_CHECK_INT(e.line, ==, line_of(CUDA_EDIT, "undeclared_scale"));
    MK_CHECK(e.ndiags >= 1);
    MK_CHECK_INT(e.diag_line, ==, line_of(CUDA_EDIT, "undeclared_scale"));
    MK_CHECK(e.diag_column > 1);
    MK_CHECK(!e.added);
  }

  /* Errors: an unknown subkernel, a path outside an edit folder, a stale
   * fingerprint, a module changed on disk, cancel. */
  char bad[600];
  snprintf(bad, sizeof bad, "%s/.mkevolve/tiny/edit/no_such_subkernel.reference.py", dir);
  MK_CHECK_INT(mk_session_verify_edit(s, bad, TRITON_EDIT, on_edit, &e, NULL, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "no subkernel named no_such_subkernel") != NULL);
  MK_CHECK_INT(mk_session_verify_edit(s, file, TRITON_EDIT, on_edit, &e, NULL, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "not an mkevolve edit file") != NULL);
  snprintf(bad, sizeof bad, "%s/elsewhere/edit/x.reference.py", dir);
  MK_CHECK_INT(mk_session_verify_edit(s, bad, TRITON_EDIT, on_edit, &e, NULL, &err), ==, MK_ENOENT);
  MK_CHECK_INT(mk_session_verify_edit(s, edit, "# mkevolve-ref: 0123456789abcdef\n", on_edit, &e,
                                      NULL, &err), ==, MK_ESTALE);
  MK_CHECK(strstr(err.text, "changed since") != NULL);
  mk_buf changed;
  mk_buf_init(&changed, 1 << 16);
  mk_buf_printf(&changed, "%s\n# a change on disk\n", TINY);
  MK_REQUIRE(mk_write_file(file, mk_buf_cstr(&changed), changed.len) == 0);
  MK_CHECK_INT(mk_session_verify_edit(s, edit, TRITON_EDIT, on_edit, &e, NULL, &err), ==, MK_ESTALE);
  MK_REQUIRE(mk_write_file(file, TINY, strlen(TINY)) == 0);
  mk_buf_free(&changed);
  /* Cancelled: exactly one callback, MK_ECANCELED; nothing added. */
  memset(&e, 0, sizeof e);
  int job = 0;
  MK_REQUIRE(mk_session_verify_edit(s, edit2, "import torch\n\n\ndef run(x):\n    return x * 3\n",
                                    on_edit, &e, &job, &err) == 0);
  MK_CHECK(job > 0);
  MK_CHECK_INT(mk_session_cancel(s, job), ==, 0);
  while (!e.called) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (!e.called) usleep(1000);
  }
  for (int i = 0; i < 20; i++) uv_run(&loop, UV_RUN_NOWAIT);
  MK_CHECK_INT(e.calls, ==, 1);
  MK_CHECK_INT(e.status, ==, MK_ECANCELED);
  MK_CHECK_INT(mk_session_get(s, file)->subkernels[0].nvariants, ==, 2);

  free(text);
  free(edit);
  free(edit2);
  bool done = false;
  mk_session_close(s, closed, &done);
  while (!done) {
    uv_run(&loop, UV_RUN_NOWAIT);
    if (!done) usleep(1000);
  }
  uv_run(&loop, UV_RUN_DEFAULT);
  MK_CHECK(uv_loop_close(&loop) == 0);
  mk_buf rm;
  mk_buf_init(&rm, 4096);
  mk_buf_printf(&rm, "rm -rf '%s'", dir);
  MK_CHECK(system(mk_buf_cstr(&rm)) == 0);
  mk_buf_free(&rm);
}
