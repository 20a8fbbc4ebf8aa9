/* test_compose_cuda.c — CUDA C++ subkernels in a composed ModelNew
 * (engine/compose/compose_cuda.c): the KernelBench load_inline format, names
 * of every section prefixed, the kernels of all sections compiling together
 * with NVRTC, and the Python passing ruff's syntax and undefined-name checks.
 * Building with nvcc and running it need a GPU:
 * tests/python/test_compose_cuda.py and scripts/device/compose-cuda.sh. */
#include "mk_backend.h"
#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_decompose.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef mk_test_composed composed;

static int compose_fixture(const char *name, bool mixed, composed *c, mk_errmsg *err) {
  return mk_test_compose_cuda(name, mixed, c, err);
}

static void composed_free(composed *c) { mk_test_composed_free(c); }

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

MK_TEST(compose_cuda, kernelbench_load_inline_format) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_fixture("conv_chain", false, &c, &err) == 0);
  MK_REQUIRE(c.ncuda >= 2); /* two sections: the namespaces must keep them apart */
  const char *py = mk_buf_cstr(&c.out);
  MK_CHECK(strstr(py, "from torch.utils.cpp_extension import load_inline\n") != NULL);
  MK_CHECK_INT(count(py, "_mk_cuda_ext = load_inline(\n    name=\"mk_cuda_"), ==, 1); /* one build */
  MK_CHECK(strstr(py, "    cuda_sources=_mk_cuda_source,\n") != NULL);
  MK_CHECK(strstr(py, "extern \"C\"") == NULL);
  MK_CHECK(strstr(py, "namespace sk0 {") != NULL && strstr(py, "namespace sk1 {") != NULL);
  /* every section's kernels: a launch function, declared, bound, launched in its namespace */
  MK_CHECK(strstr(py, "void sk0__k1_") != NULL && strstr(py, "void sk1__k1_") != NULL);
  MK_CHECK(strstr(py, "sk1::_k1_") != NULL);
  MK_CHECK(strstr(py, "functions=[\"sk0__k1_") != NULL);
  MK_CHECK(strstr(py, "c10::cuda::getCurrentCUDAStream()>>>(") != NULL);
  MK_CHECK(strstr(py, "sk0__mk_cuda = _MkCudaKernels(\"sk0_\", sk0_MK_CUDA_KERNELS)\n") != NULL);
  MK_CHECK(strstr(py, "sk1__mk_cuda.launch(\"_k1_") != NULL);
  MK_CHECK(strstr(py, " _mk_cuda.launch(") == NULL); /* every launcher is its section's */
  MK_CHECK(strstr(py, "\nMK_CUDA_SOURCE = ") == NULL); /* the CUDA text lives in the build */
  MK_CHECK_INT(count(py, "class _MkCudaKernels:"), ==, 1);
  /* optional: scripts/device/compose-cuda.sh builds and runs these on a GPU */
  const char *dir = getenv("MK_COMPOSE_CUDA_OUT");
  if (dir) {
    for (int k = 0; k < 2; k++) {
      composed w;
      MK_REQUIRE(compose_fixture("conv_chain", k == 1, &w, &err) == 0);
      char out[4096];
      snprintf(out, sizeof out, "%s/conv_chain_%s.py", dir, k ? "mixed" : "cuda");
      MK_CHECK_INT(mk_write_file(out, mk_buf_cstr(&w.out), w.out.len), ==, 0);
      composed_free(&w);
    }
  }
  /* the same composition gives the same text (the build is named by it) */
  composed again;
  MK_REQUIRE(compose_fixture("conv_chain", false, &again, &err) == 0);
  MK_CHECK_STR(mk_buf_cstr(&again.out), py);
  composed_free(&again);
  composed_free(&c);
}

/* Triton and CUDA sections in one file: only the CUDA ones go to the build. */
MK_TEST(compose_cuda, triton_and_cuda_sections_together) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_fixture("conv_chain", true, &c, &err) == 0);
  const char *py = mk_buf_cstr(&c.out);
  MK_REQUIRE(c.chosen[0] && strcmp(mk_candidate_backend(c.chosen[0]), "triton") == 0);
  MK_CHECK(strstr(py, "@triton.jit") != NULL);
  MK_CHECK(strstr(py, "namespace sk0 {") == NULL);
  MK_CHECK(strstr(py, "namespace sk1 {") != NULL);
  MK_CHECK(strstr(py, "def sk0_run(") != NULL && strstr(py, "def sk1_run(") != NULL);
  composed_free(&c);
}

/* The namespace blocks of _mk_cuda_source, as one translation unit. */
static char *namespaces_of(const char *py) {
  mk_buf out;
  mk_buf_init(&out, 0);
  for (const char *p = strstr(py, "\nnamespace sk"); p; p = strstr(p + 1, "\nnamespace sk")) {
    char ns[64];
    if (sscanf(p + 1, "namespace %63[a-z0-9] {", ns) != 1) break;
    char close[96];
    snprintf(close, sizeof close, "}  // namespace %s\n", ns);
    const char *e = strstr(p, close);
    if (e == NULL) break;
    mk_buf_append(&out, p + 1, (size_t)(e + strlen(close) - (p + 1)));
  }
  return mk_buf_steal(&out, NULL);
}

/* The kernels of every section compile together: preludes repeated per
 * namespace, kernel names repeated across sections. */
/* Fixtures with CUDA sections: twins sharing a section (repeated_blocks),
 * reductions and softmax, broadcasting, norms left to PyTorch, GEMMs on
 * tensor cores (their device helpers repeated per section: attention's). */
static const char *const cuda_fixtures[] = {"conv_chain", "repeated_blocks", "reductions",
                                            "ew_broadcast", "norms", "linear_epilogue",
                                            "attention_4d"};
#define NFIX (int)(sizeof cuda_fixtures / sizeof cuda_fixtures[0])

MK_TEST(compose_cuda, all_sections_compile_as_one_unit) {
  mk_errmsg err = {{0}};
  mk_backend *b = NULL;
  if (mk_backend_open(NULL, &b, &err) != 0) {
    mk_test_skip("NVRTC unavailable");
    return;
  }
  int units = 0;
  for (int f = 0; f < NFIX; f++) {
    composed c;
    MK_REQUIRE(compose_fixture(cuda_fixtures[f], false, &c, &err) == 0);
    char *tu = namespaces_of(mk_buf_cstr(&c.out));
    MK_REQUIRE(tu != NULL);
    MK_CHECK(count(tu, "}  // namespace sk") <= c.ncuda); /* twins share one */
    if (c.ncuda > 0) {
      MK_CHECK(count(tu, "}  // namespace sk") > 0);
      mk_backend_result r = {0};
      MK_CHECK_INT(mk_backend_compile(b, tu, "composed.cu", NULL, 0, &r, &err), ==, 0);
      if (!r.ok) fprintf(stderr, "    %s: %s\n", cuda_fixtures[f], r.log);
      MK_CHECK(r.ok);
      units += r.ok;
      mk_backend_result_free(&r);
    }
    free(tu);
    composed_free(&c);
  }
  MK_CHECK(units >= 7); /* every fixture has CUDA sections (the GEMM ones too) */
  mk_backend_close(b);
}

/* The Python of the file: ruff finds no syntax error and no undefined name
 * (every prefixed name is defined in its section). */
MK_TEST(compose_cuda, python_passes_ruff) {
  char ruff[4096];
  snprintf(ruff, sizeof ruff, "%s/.venv/bin/ruff", mk_test_repo_dir());
  if (access(ruff, X_OK) != 0) {
    mk_test_skip("no .venv/bin/ruff: run scripts/setup.sh");
    return;
  }
  for (int k = 0; k < 2 * NFIX; k++) {
    composed c;
    mk_errmsg err = {{0}};
    MK_REQUIRE(compose_fixture(cuda_fixtures[k / 2], k % 2 == 1, &c, &err) == 0);
    char file[] = "/tmp/mk_compose_cuda_XXXXXX.py";
    int fd = mkstemps(file, 3);
    MK_REQUIRE(fd >= 0);
    close(fd);
    MK_REQUIRE(mk_write_file(file, mk_buf_cstr(&c.out), c.out.len) == 0);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' check --no-cache --isolated --select E9,F821,F823 -q '%s' 1>&2",
             ruff, file);
    MK_CHECK_INT(system(cmd), ==, 0);
    unlink(file);
    composed_free(&c);
  }
}

/* The CUDA-graph variant wraps a file with CUDA sections like any other:
 * its launches are on torch's current stream, so capture records them. */
MK_TEST(compose_cuda, cuda_graph_variant_of_a_cuda_file) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_fixture("conv_chain", false, &c, &err) == 0);
  mk_buf g;
  mk_buf_init(&g, 0);
  MK_CHECK_INT(mk_compose_cuda_graph(mk_buf_cstr(&c.out), NULL, &g, &err), ==, 0);
  const char *py = mk_buf_cstr(&g);
  MK_CHECK_INT(count(py, "_mk_cuda_ext = load_inline("), ==, 1); /* built once, not per class */
  MK_CHECK(strstr(py, "\nclass ModelNew(ModelNew):\n") != NULL);
  mk_buf_free(&g);
  composed_free(&c);
}

/* A CUDA candidate whose MK_CUDA_KERNELS cannot be read is refused with a
 * reason (the search then keeps the reference), never pasted half-done. */
MK_TEST(compose_cuda, unreadable_kernels_are_refused) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_fixture("conv_chain", false, &c, &err) == 0);
  MK_REQUIRE(c.chosen[1] != NULL);
  mk_candidate bad = *c.chosen[1];
  mk_buf src;
  mk_buf_init(&src, 0);
  const char *k = strstr(bad.source, "MK_CUDA_KERNELS = {");
  MK_REQUIRE(k != NULL);
  mk_buf_append(&src, bad.source, (size_t)(k - bad.source));
  mk_buf_puts(&src, "MK_CUDA_KERNELS = {\"bad-name\": \"fq\"}\n");
  mk_buf_puts(&src, strchr(k, '}') + 1);
  bad.source = (char *)mk_buf_cstr(&src);
  const mk_candidate *chosen[8] = {0};
  for (int s = 0; s < c.p.nsubkernels && s < 8; s++) chosen[s] = s == 1 ? &bad : c.chosen[s];
  mk_buf out;
  mk_buf_init(&out, 0);
  mk_compose_options opt = {.module_source = "class Model:\n    pass\n"};
  MK_CHECK_INT(mk_compose_modelnew(c.g, &c.p, chosen, &opt, &out, &err), ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "bad-name") != NULL);
  mk_buf_free(&out);
  mk_buf_free(&src);
  composed_free(&c);
}
