/* test_export_cuda.c — CUDA C++ subkernels compiled into the C++ export
 * (engine/export/export_cuda.c, docs/export.md): a ModelNew composed of the
 * builtin CUDA generator's candidates is planned (nodes recovered from its
 * forward, kernels regenerated and matched byte for byte), its launchers are
 * C++ over ATen, and the project gets the .cu and header. The refusals: a
 * kernel text the generator no longer writes, a variant it does not make, a
 * candidate of another origin. Compiling the project: tests/suites/65-export.sh
 * (MK_EXPORT_CUDA_DIR keeps the project this test writes). */
#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_decompose.h"
#include "mk_export.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef mk_test_composed composed;

/* Fixture `name` composed with each subkernel's first CUDA candidate. */
static int compose_cuda(const char *name, composed *c, mk_errmsg *err) {
  return mk_test_compose_cuda(name, false, c, err);
}

static void composed_free(composed *c) { mk_test_composed_free(c); }

/* Plans `text` (a ModelNew of c's graph): 0 or the error. */
static int plan_text(const composed *c, const char *text, mk_export_cuda *cuda, mk_errmsg *err) {
  mk_export_modelnew m;
  int rc = mk_export_read_modelnew(text, &m, err);
  if (!rc) rc = mk_export_cuda_plan(c->g, &m, cuda, err);
  mk_export_modelnew_free(&m);
  return rc;
}

/* Fixture `name` composed of CUDA candidates, planned, its launchers checked,
 * and its project written: into $<keep_env> when set (kept for
 * tests/suites/65-export.sh to compile), else into a temporary folder. */
static void export_fixture(const char *name, const char *ns, const char *keep_env) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_cuda(name, &c, &err) == 0);
  MK_REQUIRE(c.ncuda > 0);
  mk_export_cuda cuda;
  int rc = plan_text(&c, mk_buf_cstr(&c.out), &cuda, &err);
  if (rc) fprintf(stderr, "plan: %s\n", err.text);
  MK_CHECK(rc == 0);
  MK_CHECK(cuda.n == c.ncuda);
  for (int i = 0; i < cuda.n; i++) {
    const mk_export_cuda_sk *x = &cuda.sks[i];
    const mk_subkernel *orig = &c.p.subkernels[x->index];
    /* the recovered nodes are the partition's */
    MK_CHECK(x->sk.nnodes == orig->nnodes);
    for (int k = 0; k < orig->nnodes && k < x->sk.nnodes; k++) MK_CHECK(x->sk.nodes[k] == orig->nodes[k]);
    const char *l = mk_buf_cstr(&cuda.sks[i].code.launcher);
    char want[64];
    snprintf(want, sizeof want, "sk%d::launch::_k1_", x->section);
    MK_CHECK(strstr(l, want) != NULL);
    MK_CHECK(strstr(l, "mk_launch(\"_k1_") != NULL);
    MK_CHECK(strstr(l, "mk_stream(") != NULL);
    MK_CHECK(strstr(l, "c10::cuda::CUDAGuard") != NULL);
    /* every output is declared by the launcher or by an ATen statement in it */
    for (int o = 0; o < x->sk.noutputs; o++) {
      snprintf(want, sizeof want, "at::Tensor v%d = ", x->sk.outputs[o]);
      MK_CHECK(strstr(l, want) != NULL);
    }
    /* the kernels are the candidate's own text */
    MK_CHECK(strstr(mk_buf_cstr(&c.out), "__global__ void _k1_") != NULL);
    MK_CHECK(strstr(mk_buf_cstr(&cuda.sks[i].code.cuda), "extern \"C\" __global__ void _k1_") != NULL);
  }
  /* the forward launches them and keeps ATen for the rest */
  mk_buf fwd;
  mk_buf_init(&fwd, 0);
  MK_CHECK(mk_export_forward_cpp_cuda(c.g, &cuda, &fwd, &err) == 0);
  MK_CHECK(strstr(mk_buf_cstr(&fwd), "CUDA C++ kernels (namespace sk") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&fwd), "return {") != NULL);
  mk_buf_free(&fwd);
  /* the project */
  const char *keep = getenv(keep_env);
  char dir[1024];
  if (keep && *keep) snprintf(dir, sizeof dir, "%s", keep);
  else snprintf(dir, sizeof dir, "/tmp/mk_test_export_cuda.%d", (int)getpid());
  mk_export_modelnew m;
  MK_REQUIRE(mk_export_read_modelnew(mk_buf_cstr(&c.out), &m, &err) == 0);
  char from[128];
  snprintf(from, sizeof from, "%s_modelnew.py", name);
  mk_export_project p = {.dir = dir, .ns = ns, .problem_file = "problem.py", .class_name = "Model",
                         .composed_from = from, .g = c.g, .m = &m, .cuda = &cuda,
                         .device = "cuda", .atol = 1e-4, .rtol = 1e-4};
  rc = mk_export_write_project(&p, &err);
  if (rc) fprintf(stderr, "project: %s\n", err.text);
  MK_CHECK(rc == 0);
  char path[1200], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/%s_kernels.cu", dir, ns);
  MK_CHECK(mk_read_file(path, 1 << 24, &text, &len) == 0);
  MK_CHECK(text && strstr(text, "namespace launch {") && !strstr(text, "extern \"C\" __global__") &&
           strstr(text, "<<<dim3((unsigned)grid)"));
  free(text);
  snprintf(path, sizeof path, "%s/CMakeLists.txt", dir);
  MK_CHECK(mk_read_file(path, 1 << 20, &text, &len) == 0);
  char kfile[160];
  snprintf(kfile, sizeof kfile, "%s_kernels.cu", ns);
  MK_CHECK(text && strstr(text, "LANGUAGES CXX CUDA") && strstr(text, kfile));
  free(text);
  snprintf(path, sizeof path, "%s/export.json", dir);
  MK_CHECK(mk_read_file(path, 1 << 20, &text, &len) == 0);
  MK_CHECK(text && strstr(text, "\"exported_as\":\t\"cuda\""));
  free(text);
  mk_export_modelnew_free(&m);
  mk_export_cuda_free(&cuda);
  if (!(keep && *keep)) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    MK_CHECK(system(cmd) == 0);
  }
  composed_free(&c);
}

MK_TEST(export_cuda, subkernels_are_planned_and_regenerated) {
  export_fixture("conv_chain", "mk_conv_chain", "MK_EXPORT_CUDA_DIR");
}

/* Appends to `all` the C++ launchers (and, with `kernels`, the CUDA text) the
 * export plans for the CUDA subkernels of `fixture`'s composition. */
static void exported_code(const char *fixture, bool kernels, mk_buf *all) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_cuda(fixture, &c, &err) == 0);
  mk_export_cuda cuda;
  mk_export_modelnew m;
  MK_REQUIRE(mk_export_read_modelnew(mk_buf_cstr(&c.out), &m, &err) == 0);
  int rc = mk_export_cuda_plan(c.g, &m, &cuda, &err);
  if (rc) fprintf(stderr, "plan: %s\n", err.text);
  MK_REQUIRE(rc == 0);
  for (int i = 0; i < cuda.n; i++) {
    mk_buf_puts(all, mk_buf_cstr(&cuda.sks[i].code.launcher));
    if (kernels) mk_buf_puts(all, mk_buf_cstr(&cuda.sks[i].code.cuda));
  }
  mk_export_cuda_free(&cuda);
  mk_export_modelnew_free(&m);
  composed_free(&c);
}

/* Norms (group, batch in training and eval, instance) and pools (max, avg,
 * adaptive, 2-d and 3-d) as CUDA subkernels: regenerated for the export like
 * the elementwise ones, their launchers C++ over ATen (the [N, C, S] views,
 * torch's pooling sizes, the running statistics' fresh versions). */
MK_TEST(export_cuda, norms_and_pools_are_exported) {
  export_fixture("norm_pools", "mk_norm_pools", "MK_EXPORT_CUDA_NORM_DIR");
  mk_buf all;
  mk_buf_init(&all, 0);
  exported_code("norm_pools", false, &all);
  const char *l = mk_buf_cstr(&all);
  MK_CHECK(strstr(l, "_norm_group_norm") != NULL);
  MK_CHECK(strstr(l, "_norm_batch_norm") != NULL);
  MK_CHECK(strstr(l, "_norm_eval_batch_norm") != NULL);
  MK_CHECK(strstr(l, "_pool_max_pool2d") != NULL);
  MK_CHECK(strstr(l, "_pool_avg_pool3d") != NULL);
  MK_CHECK(strstr(l, "mk_pool_out_size(") != NULL);
  MK_CHECK(strstr(l, ".reshape(ncs") != NULL);
  mk_buf_free(&all);
}

/* GEMMs on tensor cores as CUDA subkernels: linear with bias and its fused
 * epilogue (linear_epilogue), attention's projection (its value stored for
 * the split) and 4-d matmuls over (batch, heads) views (attention_4d). Their
 * launchers in C++: operands by their strides, the bias's broadcast stride,
 * the epilogue's leaves. */
MK_TEST(export_cuda, gemms_are_exported) {
  export_fixture("linear_epilogue", "mk_linear_epilogue", "MK_EXPORT_CUDA_GEMM_DIR");
  export_fixture("attention_4d", "mk_attention_4d", "MK_EXPORT_CUDA_ATTN_DIR");
  mk_buf all;
  mk_buf_init(&all, 0);
  exported_code("linear_epilogue", true, &all);
  exported_code("attention_4d", true, &all);
  const char *l = mk_buf_cstr(&all);
  MK_CHECK(strstr(l, "_gemm_linear") != NULL);
  MK_CHECK(strstr(l, "_gemm_matmul") != NULL);
  MK_CHECK(strstr(l, "mk_bstrides(bias4, std::vector<int64_t>{n4})[0]") != NULL);
  MK_CHECK(strstr(l, "mk_gemm_tile<128, 128, 32, 64, 32, true>") != NULL); /* the default: 3xTF32 */
  MK_CHECK(strstr(l, "a4.reshape({mk_prod(out4, 0, out4.size() - 1), k4})") != NULL);
  MK_CHECK(strstr(l, "sab1_15 = a15.stride(1)") != NULL); /* 4-d: the heads' strides */
  MK_CHECK(strstr(l, "mk_bstrides(v") != NULL);           /* the epilogue's broadcast shift */
  mk_buf_free(&all);
}

static int no_node(void *ctx, const mk_graph *g, const mk_node *n, mk_buf *out, mk_errmsg *err) {
  (void)ctx;
  (void)g;
  (void)out;
  return mk_errf(err, MK_EUNSUPPORTED, "no torch stage expected here (%s)", n->op);
}

/* The split-rows variant (long rows) regenerates for the export too: its
 * partials tensor and its two launches; a variant the plan does not make
 * (split rows of short rows) is refused. */
MK_TEST(export_cuda, split_norm_rows_regenerate) {
  mk_graph *g = mk_test_load_graph("propose", "norms.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int found = 0;
  for (int i = 0; i < p.nsubkernels; i++) {
    const char *name = p.subkernels[i].name;
    bool long_rows = strcmp(name, "batch_norm_2") == 0;
    if (!long_rows && strcmp(name, "batch_norm") != 0) continue;
    found++;
    mk_builtin_cuda_cpp code;
    int rc = mk_builtin_cuda_cpp_for(g, &p.subkernels[i], "cuda_t256_split32", "sk0::launch", no_node, NULL, &code,
                                     &err);
    if (long_rows) {
      if (rc) fprintf(stderr, "    %s\n", err.text);
      MK_CHECK(rc == 0);
      const char *l = mk_buf_cstr(&code.launcher);
      MK_CHECK(strstr(l, "at::Tensor part") != NULL);
      MK_CHECK(strstr(l, "sk0::launch::_k1_norm_stats_batch_norm(rows") != NULL);
      MK_CHECK(strstr(l, "sk0::launch::_k2_norm_apply_batch_norm(rows") != NULL);
      MK_CHECK(strstr(mk_buf_cstr(&code.kernels), "_k2_norm_apply_batch_norm fffffffqqqqqqqqqq\n") != NULL);
    } else {
      MK_CHECK_INT(rc, ==, MK_EUNSUPPORTED);
      MK_CHECK(strstr(err.text, "makes no cuda_t256_split32 variant") != NULL);
    }
    mk_builtin_cuda_cpp_free(&code);
  }
  MK_CHECK_INT(found, ==, 2);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Replaces the first `from` after `after` in text (a copy). */
static char *edited(const char *text, const char *after, const char *from, const char *to) {
  const char *a = strstr(text, after);
  const char *hit = a ? strstr(a, from) : NULL;
  if (hit == NULL) return NULL;
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_append(&b, text, (size_t)(hit - text));
  mk_buf_puts(&b, to);
  mk_buf_puts(&b, hit + strlen(from));
  return mk_buf_steal(&b, NULL);
}

MK_TEST(export_cuda, refuses_what_it_cannot_match) {
  composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(compose_cuda("conv_chain", &c, &err) == 0);
  MK_REQUIRE(c.ncuda > 0);
  const char *t = mk_buf_cstr(&c.out);
  /* an edited kernel */
  char *e1 = edited(t, "_mk_cuda_source = r\"\"\"", "offs >= numel", "offs > numel");
  MK_REQUIRE(e1 != NULL);
  mk_export_cuda cuda;
  MK_CHECK(plan_text(&c, e1, &cuda, &err) == MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "no longer writes the kernels") != NULL);
  mk_export_cuda_free(&cuda);
  free(e1);
  /* a variant the generator does not make */
  char *e2 = edited(t, "# Subkernels", "cuda_t256", "cuda_t999");
  MK_REQUIRE(e2 != NULL);
  MK_CHECK(plan_text(&c, e2, &cuda, &err) == MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "cuda_t999 is not a variant") != NULL);
  mk_export_cuda_free(&cuda);
  free(e2);
  /* another origin than the builtin generator */
  char *e3 = edited(t, "# Subkernels", "cuda_t256 (builtin)", "cuda_t256 (claude)");
  MK_REQUIRE(e3 != NULL);
  MK_CHECK(plan_text(&c, e3, &cuda, &err) == MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "from claude, not from the builtin generator") != NULL);
  mk_export_cuda_free(&cuda);
  free(e3);
  composed_free(&c);
}
