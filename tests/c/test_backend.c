/* test_backend.c — the CUDA C++ backend: NVRTC loading and its absence,
 * compiles to sm_90 cubins, diagnostics mapped to candidate lines, the
 * cubin cache, the candidate format, base64. Tests that need NVRTC skip
 * with the backend's reason when it is absent (no GPU is ever needed). */
#include "mk_backend.h"
#include "mk_buf.h"
#include "mk_cache.h"
#include "mk_test.h"
#include "mk_verify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* libnvrtc keeps allocations for the life of the process (its builtins and
 * per-thread state): they are NVRTC's, not leaks of ours. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:libnvrtc\n"; }

static mk_backend *open_or_skip(void) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  int rc = mk_backend_open(NULL, &b, &err);
  if (rc == MK_EUNSUPPORTED) {
    mk_test_skip(err.text);
    return NULL;
  }
  MK_CHECK_INT(rc, ==, 0);
  return b;
}

static const char good_kernel[] =
    "extern \"C\" __global__ void scale(const float *x, float *y, long long n, float a) {\n"
    "  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (i < n) y[i] = a * x[i];\n"
    "}\n";

/* A candidate module whose CUDA text has an error on module line 9, column 3. */
static const char bad_module[] =
    "\"\"\"A CUDA candidate with a typo.\"\"\"\n"      /* 1 */
    "import torch\n"                                    /* 2 */
    "\n"                                                /* 3 */
    "MK_BACKEND = \"cuda\"\n"                           /* 4 */
    "MK_CUDA_SOURCE = r\"\"\"\n"                        /* 5 */
    "extern \"C\" __global__ void k(float *y, long long n) {\n" /* 6: CUDA line 1 */
    "  long long i = threadIdx.x;\n"                    /* 7 */
    "  if (i < n)\n"                                    /* 8 */
    "  y[i] = undefined_name;\n"                        /* 9: CUDA line 4 */
    "}\n"                                               /* 10 */
    "\"\"\"\n"                                          /* 11 */
    "\n"
    "def run(x):\n"
    "    return x\n";

MK_TEST(backend, unavailable_library_is_reported_with_the_reason) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_backend_open("/nonexistent/libnvrtc.so.99", &b, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(b == NULL);
  MK_CHECK(strstr(err.text, "unavailable") != NULL);
  MK_CHECK(strstr(err.text, "/nonexistent/libnvrtc.so.99") != NULL);
  /* The environment override is the only place tried when set. */
  const char *old = getenv("MK_NVRTC_LIBRARY");
  char *saved = old ? mk_strdup(old) : NULL;
  setenv("MK_NVRTC_LIBRARY", "/nonexistent/from-env/libnvrtc.so", 1);
  err.text[0] = '\0';
  MK_CHECK_INT(mk_backend_open(NULL, &b, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "/nonexistent/from-env/libnvrtc.so") != NULL);
  if (saved) setenv("MK_NVRTC_LIBRARY", saved, 1);
  else unsetenv("MK_NVRTC_LIBRARY");
  free(saved);
}

MK_TEST(backend, compiles_a_kernel_to_an_sm90_cubin) {
  mk_backend *b = open_or_skip();
  if (b == NULL) return;
  MK_CHECK(strchr(mk_backend_version(b), '.') != NULL);
  mk_backend_result r;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_backend_compile(b, good_kernel, "good.cu", NULL, 0, &r, &err) == 0);
  MK_CHECK(r.ok);
  MK_REQUIRE(r.image_len > 16);
  MK_CHECK(memcmp(r.image, "\x7f" "ELF", 4) == 0); /* a cubin is an ELF image */
  MK_CHECK(r.compile_ms > 0);
  MK_CHECK(!r.cached);
  MK_CHECK_INT(r.ndiags, ==, 0);
  mk_backend_result_free(&r);
  /* Another architecture is another cubin; a PTX target is refused. */
  mk_backend_options o = {.arch = "sm_80"};
  MK_REQUIRE(mk_backend_compile(b, good_kernel, "good.cu", &o, 0, &r, &err) == 0);
  MK_CHECK(r.ok);
  mk_backend_result_free(&r);
  o.arch = "compute_90";
  MK_CHECK_INT(mk_backend_compile(b, good_kernel, "good.cu", &o, 0, &r, &err), ==, MK_EINVAL);
  mk_backend_close(b);
}

MK_TEST(backend, errors_map_to_candidate_lines_and_columns) {
  mk_backend *b = open_or_skip();
  if (b == NULL) return;
  const char *src = NULL;
  size_t len = 0;
  int first = 0;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_backend_candidate_source(bad_module, &src, &len, &first, &err) == 0);
  MK_CHECK_INT(first, ==, 6);
  char *cuda = mk_strndup(src, len);
  mk_backend_result r;
  MK_REQUIRE(mk_backend_compile(b, cuda, "candidate.cu", NULL, first - 1, &r, &err) == 0);
  MK_CHECK(!r.ok);
  MK_CHECK(r.image == NULL);
  MK_REQUIRE(r.ndiags >= 1);
  MK_CHECK_INT(r.diags[0].line, ==, 9);
  MK_CHECK_INT(r.diags[0].column, ==, 10); /* the caret under undefined_name */
  MK_CHECK(r.diags[0].severity == MK_BACKEND_ERROR);
  MK_CHECK(strstr(r.diags[0].message, "undefined_name") != NULL);
  MK_CHECK(strstr(r.log, "undefined_name") != NULL);
  /* The report is a verifier result: the session and the editor read it as one. */
  cJSON *rep = mk_backend_report(&r);
  MK_REQUIRE(rep != NULL);
  mk_verify_result vr;
  mk_verify_parse_result(rep, &vr);
  MK_CHECK(vr.status == MK_VERIFY_COMPILE_ERROR);
  MK_CHECK_INT(vr.line, ==, 9);
  MK_CHECK(strstr(vr.reason, "line 9:10") != NULL);
  const cJSON *diags = cJSON_GetObjectItemCaseSensitive(rep, "diagnostics");
  MK_CHECK_INT(cJSON_GetArraySize(diags), ==, r.ndiags);
  cJSON_Delete(rep);
  mk_backend_result_free(&r);
  free(cuda);
  mk_backend_close(b);
}

static void tmp_cache(char *buf, size_t n) {
  snprintf(buf, n, "/tmp/mk_test_backend.%d/cache.sqlite", (int)getpid());
}

MK_TEST(backend, cubins_are_cached_by_source_options_and_version) {
  mk_backend *b = open_or_skip();
  if (b == NULL) return;
  char path[256];
  tmp_cache(path, sizeof path);
  mk_cache *c = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_cache_open(path, 0, &c, &err) == 0);
  mk_backend_result a, a2, s80, bad1, bad2;
  MK_REQUIRE(mk_backend_compile_cached(b, c, good_kernel, "k.cu", NULL, 0, &a, &err) == 0);
  MK_REQUIRE(mk_backend_compile_cached(b, c, good_kernel, "k.cu", NULL, 0, &a2, &err) == 0);
  MK_CHECK(!a.cached && a2.cached);
  MK_CHECK(a2.compile_ms == 0);
  MK_CHECK_STR(a.key, a2.key);
  MK_CHECK(a.image_len == a2.image_len && memcmp(a.image, a2.image, a.image_len) == 0);
  mk_backend_options o = {.arch = "sm_80"};
  MK_REQUIRE(mk_backend_compile_cached(b, c, good_kernel, "k.cu", &o, 0, &s80, &err) == 0);
  MK_CHECK(!s80.cached);
  MK_CHECK(strcmp(s80.key, a.key) != 0);
  /* A failed compile is cached too, its lines mapped for each caller. */
  const char *broken = "extern \"C\" __global__ void k() {\n  nope();\n}\n";
  MK_REQUIRE(mk_backend_compile_cached(b, c, broken, "k.cu", NULL, 0, &bad1, &err) == 0);
  MK_REQUIRE(mk_backend_compile_cached(b, c, broken, "k.cu", NULL, 40, &bad2, &err) == 0);
  MK_CHECK(!bad1.ok && !bad2.ok && bad2.cached);
  MK_REQUIRE(bad1.ndiags >= 1 && bad2.ndiags >= 1);
  MK_CHECK_INT(bad1.diags[0].line, ==, 2);
  MK_CHECK_INT(bad2.diags[0].line, ==, 42);
  MK_CHECK_INT(mk_cache_count(c, "cuda_cubin"), ==, 3);
  mk_backend_result_free(&a);
  mk_backend_result_free(&a2);
  mk_backend_result_free(&s80);
  mk_backend_result_free(&bad1);
  mk_backend_result_free(&bad2);
  mk_cache_close(c);
  unlink(path);
  char wal[300];
  snprintf(wal, sizeof wal, "%s-wal", path);
  unlink(wal);
  snprintf(wal, sizeof wal, "%s-shm", path);
  unlink(wal);
  mk_backend_close(b);
}

/* The parser on logs written out (no NVRTC needed): headers with and
 * without diagnostic numbers, carets, catastrophic errors, noise. */
MK_TEST(backend, parses_nvrtc_logs) {
  const char *log =
      "k.cu(3): warning #177-D: variable \"t\" was declared but never referenced\n"
      "      int t;\n"
      "          ^\n"
      "\n"
      "Remark: The warnings can be suppressed with \"-diag-suppress <warning-number>\"\n"
      "\n"
      "k.cu(7): error: expected a \";\"\n"
      "    y[i] = 1\n"
      "            ^\n"
      "\n"
      "k.cu(1): catastrophic error: cannot open source file \"nope.h\"\n"
      "2 errors detected in the compilation of \"k.cu\".\n";
  mk_backend_diag *d = NULL;
  int n = 0;
  MK_REQUIRE(mk_backend_parse_log(log, 100, &d, &n) == 0);
  MK_REQUIRE(n == 3);
  MK_CHECK(d[0].severity == MK_BACKEND_WARNING);
  MK_CHECK_INT(d[0].line, ==, 103);
  MK_CHECK_INT(d[0].column, ==, 9);
  MK_CHECK(strncmp(d[0].message, "variable \"t\"", 12) == 0);
  MK_CHECK(d[1].severity == MK_BACKEND_ERROR);
  MK_CHECK_INT(d[1].line, ==, 107);
  MK_CHECK_INT(d[1].column, ==, 11);
  MK_CHECK_STR(d[1].message, "expected a \";\"");
  MK_CHECK(d[2].severity == MK_BACKEND_ERROR);
  MK_CHECK_INT(d[2].column, ==, 0); /* no caret */
  free(d);
  MK_REQUIRE(mk_backend_parse_log("", 0, &d, &n) == 0);
  MK_CHECK_INT(n, ==, 0);
  free(d);
}

MK_TEST(backend, finds_the_cuda_source_in_a_candidate) {
  const char *src;
  size_t len;
  int first;
  mk_errmsg err = {{0}};
  MK_CHECK(mk_backend_is_cuda_candidate(bad_module));
  MK_CHECK(!mk_backend_is_cuda_candidate("import triton\n\ndef run(x):\n    return x\n"));
  /* Only at the start of a line: a mention in a docstring is not the source. */
  MK_CHECK(!mk_backend_is_cuda_candidate("\"\"\" see MK_CUDA_SOURCE = r\"\"\"x\"\"\" \"\"\"\n"));
  MK_CHECK_INT(mk_backend_candidate_source("def run(x):\n    return x\n", &src, &len, &first, &err),
               ==, MK_ENOENT);
  MK_CHECK_INT(mk_backend_candidate_source("MK_CUDA_SOURCE = r\"\"\"\nint x;\n", &src, &len, &first,
                                           &err),
               ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "line 1") != NULL);
  MK_REQUIRE(mk_backend_candidate_source("a = 1\nMK_CUDA_SOURCE = r\"\"\"int x;\"\"\"\n", &src, &len,
                                         &first, &err) == 0);
  MK_CHECK_INT(first, ==, 2);
  MK_CHECK_INT(len, ==, 6);
  MK_CHECK(strncmp(src, "int x;", 6) == 0);
}

MK_TEST(backend, base64_round_trips) {
  uint8_t data[256];
  for (int i = 0; i < 256; i++) data[i] = (uint8_t)(255 - i);
  for (size_t n = 0; n <= 7; n++) {
    mk_buf t;
    mk_buf_init(&t, 0);
    MK_REQUIRE(mk_backend_base64_encode(data, n, &t) == 0);
    MK_CHECK_INT(t.len, ==, (n + 2) / 3 * 4);
    uint8_t *back = NULL;
    size_t blen = 0;
    MK_REQUIRE(mk_backend_base64_decode(t.data ? t.data : "", t.len, &back, &blen) == 0);
    MK_CHECK_INT(blen, ==, n);
    MK_CHECK(n == 0 || memcmp(back, data, n) == 0);
    free(back);
    mk_buf_free(&t);
  }
  mk_buf t;
  mk_buf_init(&t, 0);
  mk_backend_base64_encode((const uint8_t *)"Man", 3, &t);
  MK_CHECK_STR(mk_buf_cstr(&t), "TWFu");
  mk_buf_free(&t);
  uint8_t *back = NULL;
  size_t blen = 0;
  MK_CHECK_INT(mk_backend_base64_decode("TW=u", 4, &back, &blen), ==, MK_EPARSE);
  MK_CHECK_INT(mk_backend_base64_decode("TWF", 3, &back, &blen), ==, MK_EPARSE);
  MK_CHECK_INT(mk_backend_base64_decode("T!Fu", 4, &back, &blen), ==, MK_EPARSE);
  MK_CHECK(back == NULL);
}
