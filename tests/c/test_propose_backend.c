/* test_propose_backend.c — `--backend triton|cuda|auto` in the builtin
 * generator (engine/propose/propose_backend.c): names, what a candidate runs
 * on, and which generator writes what for each choice. */
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static mk_graph *load(const char *name) { return mk_test_load_graph("propose", name); }

MK_TEST(propose_backend, names_round_trip_and_bad_names_are_refused) {
  mk_kernel_backend b = MK_KBACKEND_AUTO;
  MK_CHECK_INT(mk_kernel_backend_parse("triton", &b), ==, 0);
  MK_CHECK_INT(b, ==, MK_KBACKEND_TRITON);
  MK_CHECK_INT(mk_kernel_backend_parse("cuda", &b), ==, 0);
  MK_CHECK_INT(b, ==, MK_KBACKEND_CUDA);
  MK_CHECK_INT(mk_kernel_backend_parse("auto", &b), ==, 0);
  MK_CHECK_INT(b, ==, MK_KBACKEND_AUTO);
  MK_CHECK_INT(mk_kernel_backend_parse("CUDA", &b), ==, MK_EINVAL);
  MK_CHECK_INT(mk_kernel_backend_parse(NULL, &b), ==, MK_EINVAL);
  MK_CHECK_INT(b, ==, MK_KBACKEND_AUTO); /* untouched on refusal */
  for (int i = 0; i < 3; i++) {
    mk_kernel_backend back;
    MK_CHECK_INT(mk_kernel_backend_parse(mk_kernel_backend_name((mk_kernel_backend)i), &back), ==, 0);
    MK_CHECK_INT(back, ==, i);
  }
}

MK_TEST(propose_backend, candidate_backend_reads_the_text) {
  mk_candidate ref = {.source = "def run(x):\n    return x\n", .origin = "reference"};
  mk_candidate cuda = {.source = "import torch\n\nMK_BACKEND = \"cuda\"\nMK_CUDA_SOURCE = r\"\"\"\"\"\"\n",
                       .origin = "builtin"};
  mk_candidate tri = {.source = "import triton\n\n@triton.jit\ndef k(x):\n    pass\n", .origin = "builtin"};
  mk_candidate torch_only = {.source = "import torch\n\ndef run(a, b):\n    return torch.mm(a, b)\n",
                             .origin = "llm:m"};
  /* The marker only counts at the start of a line (not in a comment or a string). */
  mk_candidate quoted = {.source = "# MK_BACKEND = \"cuda\"\n@triton.jit\ndef k():\n    pass\n",
                         .origin = "builtin"};
  MK_CHECK_STR(mk_candidate_backend(NULL), "pytorch");
  MK_CHECK_STR(mk_candidate_backend(&ref), "pytorch");
  MK_CHECK_STR(mk_candidate_backend(&cuda), "cuda");
  MK_CHECK_STR(mk_candidate_backend(&tri), "triton");
  MK_CHECK_STR(mk_candidate_backend(&torch_only), "pytorch");
  MK_CHECK_STR(mk_candidate_backend(&quoted), "triton");
}

static int count_backend(const mk_candidate_list *l, const char *b) {
  int n = 0;
  for (int i = 0; i < l->n; i++) n += strcmp(mk_candidate_backend(&l->items[i]), b) == 0;
  return n;
}

/* Each choice on an elementwise subkernel both generators can write. */
MK_TEST(propose_backend, each_choice_gives_its_generators_candidates) {
  mk_graph *g = load("ew_broadcast.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[0], .device = "cuda",
                            .max_candidates = 8};
  mk_candidate_list t = {0}, c = {0}, a = {0}, small = {0};
  req.backend = MK_KBACKEND_TRITON;
  MK_REQUIRE(mk_builtin_propose_backend(&req, &t, &err) == 0);
  req.backend = MK_KBACKEND_CUDA;
  MK_REQUIRE(mk_builtin_propose_backend(&req, &c, &err) == 0);
  req.backend = MK_KBACKEND_AUTO;
  MK_REQUIRE(mk_builtin_propose_backend(&req, &a, &err) == 0);
  MK_CHECK(t.n > 0 && count_backend(&t, "triton") == t.n);
  MK_CHECK(c.n > 0 && count_backend(&c, "cuda") == c.n);
  /* auto: both, interleaved from each generator's default on */
  MK_CHECK(count_backend(&a, "triton") > 0 && count_backend(&a, "cuda") > 0);
  MK_CHECK(a.n <= 8);
  MK_REQUIRE(a.n >= 2);
  MK_CHECK_STR(a.items[0].source, t.items[0].source);
  MK_CHECK_STR(a.items[1].source, c.items[0].source);
  /* the bound holds across both */
  req.max_candidates = 3;
  MK_REQUIRE(mk_builtin_propose_backend(&req, &small, &err) == 0);
  MK_CHECK_INT(small.n, ==, 3);
  MK_CHECK_INT(count_backend(&small, "triton"), ==, 2);
  mk_candidate_list_free(&t);
  mk_candidate_list_free(&c);
  mk_candidate_list_free(&a);
  mk_candidate_list_free(&small);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* auto: a repair or an optimisation stays in its parent's language. */
MK_TEST(propose_backend, auto_keeps_the_parents_language) {
  mk_graph *g = load("ew_broadcast.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[0], .device = "cuda",
                            .backend = MK_KBACKEND_CUDA};
  mk_candidate_list first = {0}, opt = {0};
  MK_REQUIRE(mk_builtin_propose_backend(&req, &first, &err) == 0);
  MK_REQUIRE(first.n > 1);
  req.backend = MK_KBACKEND_AUTO;
  req.mode = MK_PROPOSE_OPTIMISE;
  req.parent = &first.items[0];
  MK_REQUIRE(mk_builtin_propose_backend(&req, &opt, &err) == 0);
  MK_CHECK(opt.n > 0);
  MK_CHECK_INT(count_backend(&opt, "cuda"), ==, opt.n);
  mk_candidate_list_free(&first);
  mk_candidate_list_free(&opt);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* cuda on the norm and pool subkernels (batch norm is what level-3 nets are
 * full of): CUDA candidates, not the reference. */
MK_TEST(propose_backend, cuda_writes_norms_and_pools) {
  static const char *const fixtures[] = {"norms.json", "pools.json"};
  static const char *const kinds[] = {"batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm",
                                      "max_pool", "avg_pool", "adaptive_"};
  int anchored = 0;
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    mk_graph *g = load(fixtures[f]);
    MK_REQUIRE(g != NULL);
    mk_partition p = {0};
    mk_errmsg err = {{0}};
    MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
    for (int i = 0; i < p.nsubkernels; i++) {
      bool anchor = false;
      for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
        anchor |= strncmp(p.subkernels[i].name, kinds[k], strlen(kinds[k])) == 0;
      if (!anchor) continue;
      anchored++;
      mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i], .device = "cuda",
                                .backend = MK_KBACKEND_CUDA};
      mk_candidate_list c = {0};
      err.text[0] = '\0';
      int rc = mk_builtin_propose_backend(&req, &c, &err);
      if (rc) fprintf(stderr, "    %s: %s\n", p.subkernels[i].name, err.text);
      MK_CHECK_INT(rc, ==, 0);
      MK_CHECK(c.n > 0 && count_backend(&c, "cuda") == c.n);
      mk_candidate_list_free(&c);
    }
    mk_partition_free(&p);
    mk_graph_free(g);
  }
  MK_CHECK(anchored >= 20);
}

/* cuda where the CUDA generator has no kernel (a subkernel of one convolution:
 * the CUDA side would only replay it; GEMMs, norms and pools have CUDA kernels
 * now) and on the CPU: no candidates, a reason, and the search keeps the
 * PyTorch reference; auto there is Triton's (its implicit-GEMM convolution). */
MK_TEST(propose_backend, cuda_without_a_kernel_leaves_the_reference) {
  mk_graph *g = load("repeated_blocks.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int conv = -1;
  for (int i = 0; i < p.nsubkernels && conv < 0; i++)
    if (strcmp(p.subkernels[i].name, "conv2d") == 0) conv = i;
  MK_REQUIRE(conv >= 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[conv], .device = "cuda",
                            .backend = MK_KBACKEND_CUDA, .max_candidates = 8};
  mk_candidate_list c = {0}, a = {0}, cpu = {0};
  MK_CHECK_INT(mk_builtin_propose_backend(&req, &c, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK_INT(c.n, ==, 0);
  MK_CHECK(strstr(err.text, "nothing for a CUDA kernel to do") != NULL);
  req.backend = MK_KBACKEND_AUTO;
  err.text[0] = '\0';
  int rc = mk_builtin_propose_backend(&req, &a, &err);
  MK_CHECK(rc == 0 || (rc == MK_EUNSUPPORTED && a.n > 0));
  MK_CHECK(a.n > 0 && count_backend(&a, "cuda") == 0);
  req.device = "cpu";
  req.backend = MK_KBACKEND_CUDA;
  MK_CHECK_INT(mk_builtin_propose_backend(&req, &cpu, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "need a GPU") != NULL);
  mk_candidate_list_free(&c);
  mk_candidate_list_free(&a);
  mk_candidate_list_free(&cpu);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* cuda on a GEMM (linear + bias + epilogue): the CUDA GEMM variants, 3xTF32
 * first; auto interleaves them with Triton's. */
MK_TEST(propose_backend, cuda_writes_gemms) {
  mk_graph *g = load("linear_epilogue.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[0], .device = "cuda",
                            .backend = MK_KBACKEND_CUDA, .max_candidates = 8};
  mk_candidate_list c = {0}, a = {0};
  MK_CHECK_INT(mk_builtin_propose_backend(&req, &c, &err), ==, 0);
  MK_CHECK_INT(c.n, ==, 3);
  MK_CHECK_INT(count_backend(&c, "cuda"), ==, 3);
  if (c.n > 0) MK_CHECK_STR(c.items[0].name, "cuda_gemm128x128_3xtf32");
  req.backend = MK_KBACKEND_AUTO;
  MK_CHECK_INT(mk_builtin_propose_backend(&req, &a, &err), ==, 0);
  MK_CHECK(count_backend(&a, "cuda") > 0 && count_backend(&a, "triton") > 0);
  mk_candidate_list_free(&c);
  mk_candidate_list_free(&a);
  mk_partition_free(&p);
  mk_graph_free(g);
}
