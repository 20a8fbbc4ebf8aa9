/* test_propose.c — the builtin proposer and the reference candidate without
 * running Python: generated text, configurations, determinism, reasons for
 * unsupported subkernels. (Running the candidates: test_propose_e2e.c.) */
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

static mk_graph *load(const char *dir, const char *name) { return mk_test_load_graph(dir, name); }

/* The subkernel of the initial partition whose name starts with `prefix`. */
static const mk_subkernel *find_sk(const mk_partition *p, const char *prefix) {
  for (int i = 0; i < p->nsubkernels; i++)
    if (strncmp(p->subkernels[i].name, prefix, strlen(prefix)) == 0) return &p->subkernels[i];
  return NULL;
}

static char *first_candidate(const mk_graph *g, const int *nodes, int nnodes, char **name);

MK_TEST(propose, reference_replays_recorded_calls) {
  mk_graph *g = load("ir", "conv_min_tanh.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_candidate c = {0};
  MK_CHECK_INT(mk_reference_candidate(g, &p.subkernels[0], &c, &err), ==, 0);
  MK_CHECK_STR(c.origin, "reference");
  MK_CHECK(strstr(c.source, "def run(x0, conv_weight, conv_bias):") != NULL);
  MK_CHECK(strstr(c.source, "F.conv2d(x0, conv_weight, conv_bias, (1, 1), (0, 0), "
                            "(1, 1), 1)") != NULL);
  MK_CHECK(strstr(c.source, "    return v") != NULL);
  MK_CHECK(strstr(c.source, "_mk_dev") == NULL); /* no device constant: nothing bound */
  mk_candidate_free(&c);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* A reference that makes or moves tensors with a recorded device binds the
 * device run() is given its tensors on (the capture's "cpu" is the program's
 * device); one with no device constant binds nothing (see above). */
MK_TEST(propose, reference_binds_the_run_device) {
  mk_graph *g = load("propose", "device_constants.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int with = 0, without = 0;
  for (int s = 0; s < p.nsubkernels; s++) {
    mk_candidate c = {0};
    MK_REQUIRE(mk_reference_candidate(g, &p.subkernels[s], &c, &err) == 0);
    /* no recorded "cpu"; with no tensor to take it from, the current GPU or the CPU */
    MK_CHECK(strstr(c.source, "torch.device('cpu')") == NULL || p.subkernels[s].ninputs == 0);
    if (p.subkernels[s].ninputs == 0)
      MK_CHECK(strstr(c.source, "    _mk_dev = torch.device('cuda', torch.cuda.current_device()) "
                                "if torch.cuda.is_available() else torch.device('cpu')\n") != NULL);
    if (strstr(c.source, "device=_mk_dev") || strstr(c.source, ".to(_mk_dev)")) {
      with++;
      if (p.subkernels[s].ninputs > 0) MK_CHECK(strstr(c.source, "    _mk_dev = ") != NULL);
    } else {
      without++;
      MK_CHECK(strstr(c.source, "_mk_dev") == NULL);
    }
    mk_candidate_free(&c);
  }
  MK_CHECK_INT(with, ==, p.nsubkernels); /* each of its subkernels makes or moves a tensor */
  MK_CHECK_INT(without, ==, 0);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose, configurations_are_distinct_deterministic_and_bounded) {
  mk_graph *g = load("propose", "linear_epilogue.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[0], .mode = MK_PROPOSE_NEW};
  mk_candidate_list a = {0}, b = {0};
  MK_CHECK_INT(mk_builtin_propose(&req, &a, &err), ==, 0);
  MK_CHECK_INT(mk_builtin_propose(&req, &b, &err), ==, 0);
  MK_REQUIRE(a.n == b.n && a.n > 8);
  for (int i = 0; i < a.n; i++) {
    /* no two with the same code: a configuration the subkernel does not use
     * (the elementwise block when the GEMM carries the epilogue) is not repeated */
    for (int k = 0; k < i; k++) {
      const char *x = strstr(a.items[i].source, "\n\"\"\"\n"), *y = strstr(a.items[k].source, "\n\"\"\"\n");
      MK_CHECK(x && y && strcmp(x, y) != 0);
    }
    MK_CHECK_STR(a.items[i].name, b.items[i].name);
    MK_CHECK(strcmp(a.items[i].source, b.items[i].source) == 0);
    MK_CHECK_STR(a.items[i].origin, "builtin");
    for (int k = 0; k < i; k++) MK_CHECK(strcmp(a.items[i].name, a.items[k].name) != 0);
    /* fp32 accuracy: plain TF32 is never proposed. */
    MK_CHECK(strstr(a.items[i].source, "input_precision=\"tf32\"") == NULL);
    MK_CHECK(strstr(a.items[i].source, "def run(x0, fc_weight, fc_bias, shift):") != NULL);
  }
  /* Both precisions and the cuBLAS + epilogue variant are offered. */
  bool x3 = false, ieee = false, cublas = false;
  for (int i = 0; i < a.n; i++) {
    x3 |= strstr(a.items[i].source, "input_precision=\"tf32x3\"") != NULL;
    ieee |= strstr(a.items[i].source, "input_precision=\"ieee\"") != NULL;
    cublas |= strstr(a.items[i].source, "MK_USES_TORCH = (\"linear\", )") != NULL;
  }
  MK_CHECK(x3 && ieee && cublas);
  /* The default (first) fuses bias and epilogue into the GEMM kernel. */
  MK_CHECK(strstr(a.items[0].source, "acc += tl.dot(") != NULL);
  MK_CHECK(strstr(a.items[0].source, "# fused epilogue") != NULL);

  mk_candidate_list c = {0};
  req.max_candidates = 3;
  MK_CHECK_INT(mk_builtin_propose(&req, &c, &err), ==, 0);
  MK_CHECK_INT(c.n, ==, 3);
  /* Optimise from a parent: the parent itself is not proposed again. */
  mk_candidate_list d = {0};
  req.mode = MK_PROPOSE_OPTIMISE;
  req.parent = &a.items[0];
  req.max_candidates = 0;
  MK_CHECK_INT(mk_builtin_propose(&req, &d, &err), ==, 0);
  MK_CHECK_INT(d.n, ==, a.n - 1);
  for (int i = 0; i < d.n; i++) MK_CHECK(strcmp(d.items[i].name, a.items[0].name) != 0);
  mk_candidate_list_free(&a);
  mk_candidate_list_free(&b);
  mk_candidate_list_free(&c);
  mk_candidate_list_free(&d);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Split rows only for long rows (>= 4096 at capture): the fixture's batch
 * norm over [2, 3, 32, 128] and layer norm over (32, 128) get them, the short
 * norms do not. */
MK_TEST(propose, split_norms_only_for_long_rows) {
  mk_graph *g = load("propose", "norms.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int with_split = 0, norms = 0;
  for (int i = 0; i < p.nsubkernels; i++) {
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i], .device = "cuda"};
    if (mk_builtin_propose(&req, &l, &err) == 0 && strstr(p.subkernels[i].name, "norm")) {
      norms++;
      bool split = false;
      for (int c = 0; c < l.n; c++) split |= strstr(l.items[c].name, "_split32") != NULL;
      with_split += split;
    }
    mk_candidate_list_free(&l);
  }
  MK_CHECK_INT(with_split, ==, 2);
  MK_CHECK(norms > with_split);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Short rows (<= 256 at capture, bi_norm_short_rows): the rows-in-registers
 * layout comes first, where the row loop's one program per row would leave
 * most lanes idle (and the interpreter runs one program per row slowly);
 * long rows keep the row loop first. The fixture's norms over 7 and 42
 * elements are short, the layer norm over (32, 128) is not. */
MK_TEST(propose, short_norm_rows_try_registers_first) {
  mk_graph *g = load("propose", "norms.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const char *devices[] = {"cuda", "cpu"};
  for (int d = 0; d < 2; d++) {
    int short_first = 0, long_loop_first = 0;
    for (int i = 0; i < p.nsubkernels; i++) {
      const mk_subkernel *sk = &p.subkernels[i];
      bool layer = false, big = false;
      for (int k = 0; k < sk->nnodes; k++) {
        const mk_node *n = &g->nodes[sk->nodes[k]];
        if (strstr(n->op, "layer_norm") == NULL) continue;
        layer = true;
        big |= g->values[n->outputs[0]].rank == 4 && g->values[n->outputs[0]].shape[3] == 128;
      }
      if (!layer) continue;
      mk_candidate_list l = {0};
      mk_propose_request req = {.graph = g, .subkernel = sk, .device = devices[d]};
      MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, 0);
      MK_REQUIRE(l.n > 0);
      bool rows_first = strstr(l.items[0].name, "_rows") != NULL;
      bool loop_later = false;
      for (int c = 1; c < l.n; c++)
        loop_later |= strstr(l.items[c].name, "_rows") == NULL && strstr(l.items[c].name, "_split") == NULL;
      if (big) long_loop_first += !rows_first;
      else short_first += rows_first && loop_later;
      mk_candidate_list_free(&l);
    }
    MK_CHECK_INT(short_first, ==, 2); /* ln over 7, ln2 over (6, 7) */
    MK_CHECK_INT(long_loop_first, ==, 1);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose, unsupported_says_why) {
  mk_graph *g = load("ir", "gemm_groupnorm_hardtanh.json");
  MK_REQUIRE(g != NULL);
  /* Group norm is generated now: make it an op the generator has no kernel
   * for (cumsum), and give another node a tensor exponent. */
  for (int i = 0; i < g->nnodes; i++) {
    mk_node *n = &g->nodes[i];
    if (strstr(n->op, "group_norm")) {
      free(n->op);
      n->op = mk_strdup("torch.cumsum");
    }
  }
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  bool saw_unsupported = false;
  for (int i = 0; i < p.nsubkernels; i++) {
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i]};
    err.text[0] = '\0';
    int rc = mk_builtin_propose(&req, &l, &err);
    if (rc) {
      MK_CHECK_INT(rc, ==, MK_EUNSUPPORTED);
      /* The reason names the op and its source line. */
      MK_CHECK(strstr(err.text, "line ") != NULL);
      MK_CHECK(strstr(err.text, "cumsum") != NULL);
      saw_unsupported = true;
    } else {
      MK_CHECK(l.n > 0);
    }
    mk_candidate_list_free(&l);
    /* The reference always exists. */
    mk_candidate ref = {0};
    MK_CHECK_INT(mk_reference_candidate(g, &p.subkernels[i], &ref, &err), ==, 0);
    mk_candidate_free(&ref);
  }
  MK_CHECK(saw_unsupported);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose, norms_generate_with_configs) {
  mk_graph *g = load("ir", "gemm_groupnorm_hardtanh.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int seen = 0;
  for (int i = 0; i < p.nsubkernels; i++) {
    bool norm = false;
    for (int k = 0; k < p.subkernels[i].nnodes; k++)
      norm |= strstr(g->nodes[p.subkernels[i].nodes[k]].op, "group_norm") != NULL;
    if (!norm) continue;
    seen++;
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i]};
    MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, 0);
    bool loop = false, split = false, rows = false;
    for (int c = 0; c < l.n; c++) {
      const char *src = l.items[c].source;
      MK_CHECK(strstr(src, "IDX64: tl.constexpr") != NULL);
      if (strstr(l.items[c].name, "_split")) {
        split = true;
        /* Partial statistics, then combine + normalise. */
        MK_CHECK(strstr(src, "_norm_stats_") != NULL);
        MK_CHECK(strstr(src, "parts = row * SPLIT + tl.arange(0, SPLIT)") != NULL);
      } else if (strstr(l.items[c].name, "_rows")) {
        /* Rows of 512 at capture: whole rows in registers, read once. */
        rows = true;
        MK_CHECK(strstr(src, "gmean = tl.sum(x, axis=1) / M") != NULL);
        MK_CHECK(strstr(src, "RB=rb") != NULL);
      } else {
        loop = true;
        MK_CHECK(strstr(src, "mean += delta / tl.maximum(cnt, 1.0)") != NULL);
      }
      /* The hardtanh after it is fused into the store. */
      MK_CHECK(strstr(src, "# fused epilogue") != NULL);
    }
    /* Rows of 512: looped or in registers; too short to split. */
    MK_CHECK(loop && rows && !split);
    mk_candidate_list_free(&l);
  }
  MK_CHECK_INT(seen, ==, 1);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose, elementwise_broadcast_loads_by_pattern) {
  mk_graph *g = load("propose", "conv_chain.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const mk_subkernel *sk = find_sk(&p, "conv2d");
  MK_REQUIRE(sk != NULL);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = sk};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  /* The implicit-GEMM convolution comes first (TF32 rounded to nearest, as
   * cuDNN rounds the reference's, once before the loop), then the
   * channels_last cuDNN variant, then the default layout. */
  MK_REQUIRE(l.n >= 3);
  MK_CHECK(strncmp(l.items[0].name, "triton_igemm128x64x32_w4_s3_tf32p_", 34) == 0);
  MK_CHECK(strncmp(l.items[1].name, "triton_convcl_", 14) == 0);
  MK_CHECK(strncmp(l.items[2].name, "triton_conv_", 12) == 0);
  MK_CHECK(strstr(l.items[0].source, "ROUND=3 if tf32_6 else 0") != NULL);
  const char *src = l.items[2].source;
  /* The [8, 1, 1] bias is read per channel: ((offs // (D2 * D3)) % (D1)) * stride. */
  MK_CHECK(strstr(src, "bias = tl.load(bias_ptr + ((offs // (D2 * D3)) % (D1)) * bias_stride1") != NULL);
  /* ... with the dims it divides by as compile-time constants (a multiply and
   * a shift), the batch a runtime value. */
  MK_CHECK(strstr(src, "D0, D1: tl.constexpr, D2: tl.constexpr, D3: tl.constexpr, ") != NULL);
  MK_CHECK(strstr(src, "MK_USES_TORCH = (\"conv2d\", )") != NULL);
  /* The conv runs without its bias, which the elementwise kernel adds on load;
   * the NCHW variant makes the input (channels_last by the layout plan) contiguous. */
  MK_CHECK(strstr(src, "(x0.contiguous(), conv_weight, None, ") != NULL);
  MK_CHECK(strstr(src, "v6 += tl.load(v6_bias_ptr + ((offs // (D2 * D3)) % D1)") != NULL);
  /* channels_last: the output feeds the next subkernel (a transposed conv),
   * which the layout plan gives it in channels_last, so the tail runs in the
   * conv output's memory order (channel innermost: the bias is offs % C) and
   * writes channels_last; the weight is one ModelNew keeps channels_last. */
  const char *cl = l.items[1].source;
  MK_CHECK(strstr(cl, "(x0_cl, conv_weight_cl, None, ") != NULL);
  MK_CHECK(strstr(cl, "v6 += tl.load(v6_bias_ptr + ((offs) % D3)") != NULL);
  MK_CHECK(strstr(cl, "v9 = torch.empty(shape9, device=v6.device, dtype=torch.float32, "
                      "memory_format=torch.channels_last)\n") != NULL);
  MK_CHECK(strstr(cl, "v9 = v9.contiguous()") == NULL);
  MK_CHECK(strstr(cl, "MK_CHANNELS_LAST = (\"conv.weight\", )") != NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* A 4-d matmul (attention's heads) reads both operands through their strides,
 * its second batch dim passed as B1; leading dims that broadcast are refused
 * with the reason (PyTorch keeps them). */
MK_TEST(propose, four_d_matmuls_run_over_two_batch_dims) {
  mk_graph *g = load("propose", "attention_4d.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const mk_subkernel *sk = find_sk(&p, "matmul_mul");
  MK_REQUIRE(sk != NULL);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = sk, .max_candidates = 1};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  const char *src = l.items[0].source;
  MK_CHECK(strstr(src, "b0 = batch // B1") != NULL);
  MK_CHECK(strstr(src, "a_base = a_ptr + b0 * stride_ab + b1 * stride_ab1") != NULL);
  MK_CHECK(strstr(src, ".contiguous()") == NULL); /* the head views are read in place */
  MK_CHECK(strstr(src, "untyped_storage().nbytes()") != NULL); /* views reach past numel */
  mk_candidate_list_free(&l);
  /* heads of 1 on one side: a broadcast, refused */
  const mk_node *mm = NULL;
  for (int i = 0; i < sk->nnodes && !mm; i++)
    if (strstr(g->nodes[sk->nodes[i]].op, "matmul")) mm = &g->nodes[sk->nodes[i]];
  MK_REQUIRE(mm != NULL);
  /* merged with the mask and ReLU after it (a slice of a buffer, taken first):
   * one kernel, the mask read in its epilogue */
  char *name = NULL;
  char *merged = first_candidate(g, (int[]){9, 10, 11, 12, 13, 14}, 6, &name);
  MK_REQUIRE(merged != NULL);
  MK_CHECK(strstr(merged, "# fused epilogue") != NULL);
  const char *jit = strstr(merged, "@triton.jit");
  MK_CHECK(jit != NULL && strstr(jit + 1, "@triton.jit") == NULL);
  MK_CHECK(strstr(merged, "tl.where(") != NULL);
  free(merged);
  free(name);
  g->values[mm->inputs[0]].shape[1] = 1;
  MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "leading dims broadcast") != NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose, view_only_subkernel_is_unsupported) {
  mk_graph *g = load("propose", "matmul_bmm.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const mk_subkernel *sk = find_sk(&p, "transpose");
  MK_REQUIRE(sk != NULL);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = sk};
  MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "only view") != NULL);
  MK_CHECK_INT(l.n, ==, 0);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Every subkernel of the IR fixtures (KernelBench-derived, full shapes) gets
 * candidates or a reason; never a crash or another error. */
MK_TEST(propose, ir_fixtures_generate_or_explain) {
  static const char *const names[] = {"conv_min_tanh.json", "gemm_groupnorm_hardtanh.json",
                                      "matmul_scale_residual.json", "bn_relu_sum.json",
                                      "branches.json", "lead_softmax.json"};
  int covered = 0, total = 0;
  for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) {
    mk_graph *g = load("ir", names[f]);
    MK_CHECK(g != NULL);
    if (g == NULL) continue;
    mk_partition p = {0};
    mk_errmsg err = {{0}};
    MK_CHECK_INT(mk_decompose_initial(g, &p, &err), ==, 0);
    for (int i = 0; i < p.nsubkernels; i++) {
      mk_candidate_list l = {0};
      mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i], .max_candidates = 2};
      err.text[0] = '\0';
      int rc = mk_builtin_propose(&req, &l, &err);
      total++;
      if (rc == 0) {
        covered++;
        MK_CHECK(l.n >= 1 && l.n <= 2);
        for (int k = 0; k < l.n; k++) MK_CHECK(strstr(l.items[k].source, "\ndef run(") != NULL);
      } else {
        MK_CHECK_INT(rc, ==, MK_EUNSUPPORTED);
        MK_CHECK(err.text[0] != '\0');
      }
      mk_candidate_list_free(&l);
    }
    mk_partition_free(&p);
    mk_graph_free(g);
  }
  fprintf(stderr, "    %d/%d subkernels with builtin candidates\n", covered, total);
  MK_CHECK(covered > 0);
}

/* A subkernel that is only a 2-d convolution gets the implicit-GEMM kernels
 * (bias in the epilogue, the output stored once), the same cuDNN call in
 * channels_last, and the default layout with the bias added by a kernel. */
MK_TEST(propose, lone_conv_gets_channels_last_variant) {
  mk_graph *g = load("propose", "conv_chain.json");
  MK_REQUIRE(g != NULL);
  int conv = -1;
  for (int i = 0; i < g->nnodes && conv < 0; i++)
    if (strstr(g->nodes[i].op, "conv2d")) conv = i;
  MK_REQUIRE(conv >= 0);
  const mk_node *n = &g->nodes[conv];
  int nodes[1] = {conv}, outs[1] = {n->outputs[0]};
  mk_subkernel sk = {.name = "conv2d", .nodes = nodes, .nnodes = 1, .inputs = n->inputs,
                     .ninputs = n->ninputs, .outputs = outs, .noutputs = 1, .anchor = conv};
  mk_candidate_list l = {0};
  mk_errmsg err = {{0}};
  mk_propose_request req = {.graph = g, .subkernel = &sk};
  MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, 0);
  /* the implicit GEMM rounding its operands once in the launcher ("tf32p")
   * first, channels_last next; then, since it has a bias, the default layout
   * with the bias added by its own kernel (the eager numerics, without
   * cuDNN's pass); then the other implicit-GEMM tiles and roundings */
  MK_CHECK_INT(l.n, ==, 11);
  if (l.n == 11) {
    const char *pre = l.items[0].source;
    MK_CHECK_STR(l.items[0].name, "triton_igemm128x64x32_w4_s3_tf32p");
    MK_CHECK(strstr(pre, "MK_USES_TORCH") == NULL);
    MK_CHECK(strstr(pre, "acc += tl.load(bias_ptr + rn, mask=n_mask, other=0.0)") != NULL);
    /* its output feeds the next subkernel, planned channels_last: written so */
    MK_CHECK(strstr(pre, "tl.store(conv_out_ptr + soffs, acc, mask=mask2)") != NULL);
    MK_CHECK(strstr(pre, "soffs = (pix * OC)[:, None] + rn[None, :]") != NULL);
    MK_CHECK(strstr(pre, "device=x6.device, dtype=torch.float32, memory_format=torch.channels_last)") != NULL);
    /* rounded once, on the GPU only (float32 on the CPU), in the pass that
     * makes the channels_last copy, and not again in the loop */
    char pw[256];
    int x = n->outputs[0];
    snprintf(pw, sizeof pw, "    x%d = _mk_tf32_round(x0, torch.channels_last) if tf32_%d else "
             "x0.contiguous(memory_format=torch.channels_last)\n", x, x);
    MK_CHECK(strstr(pre, pw) != NULL);
    snprintf(pw, sizeof pw, "ROUND=3 if tf32_%d else 0", x);
    MK_CHECK(strstr(pre, pw) != NULL);
    MK_CHECK(strstr(pre, "def _mk_tf32_round_kernel(") != NULL);
    /* 32-bit offsets unless a tensor nears 2**31 elements */
    snprintf(pw, sizeof pw, "big%d = max(x%d.numel(), math.prod(cshape%d)) >= 2**31 - 2**20", x, x, x);
    MK_CHECK(strstr(pre, pw) != NULL);
    MK_CHECK(strstr(pre, "    if IDX64:  # offsets past 2**31 elements\n        pm = pm.to(tl.int64)\n") != NULL);
    const char *in_loop = NULL;
    for (int i = 0; i < l.n; i++)
      if (l.items[i].name && strcmp(l.items[i].name, "triton_igemm128x64x32_w4_s3_tf32r") == 0)
        in_loop = l.items[i].source;
    MK_REQUIRE(in_loop != NULL);
    MK_CHECK(strstr(in_loop, "_mk_tf32_round") == NULL);
    /* 9 input channels: a channel block of 16 is 7/16 padding, so the
     * variant packing taps into its K blocks is tried too, late (it lost
     * wherever it was measured) */
    MK_CHECK_STR(l.items[6].name, "triton_igemm128x64x32_w4_s3_tf32p_packed");
    MK_CHECK(strstr(l.items[6].source, "pack6 = C6 < 16") != NULL);
    MK_CHECK(strstr(l.items[0].source, "pack6 = False") != NULL);
    MK_CHECK_STR(l.items[8].name, "triton_igemm128x64x32_w4_s3_tf32x3p");
    MK_CHECK_STR(l.items[9].name, "triton_igemm128x64x32_w4_s3_tf32x3");
    MK_CHECK_STR(l.items[10].name, "triton_igemm128x64x32_w4_s3_tf32");
    /* 3xTF32 from operands split once (high and low parts, channels_last) */
    const char *x3p = l.items[8].source;
    MK_CHECK(strstr(x3p, "x6, xl6 = _mk_tf32_split(x0, torch.channels_last) if tf32_6 else "
                         "(x0.contiguous(memory_format=torch.channels_last),) * 2") != NULL);
    MK_CHECK(strstr(x3p, "acc = tl.dot(tl.load(xl_ptr + aoff, mask=amask, other=0.0), b, acc") != NULL);
    MK_CHECK(strstr(x3p, "ROUND=4 if tf32_6 else 0") != NULL);
    MK_CHECK(strstr(l.items[0].source, "xl_ptr") == NULL);
    mk_candidate_free(&l.items[0]);
    l.items[0] = l.items[1]; /* the cuDNN ones at 0 and 1 below */
    l.items[1] = l.items[2];
    l.items[2] = (mk_candidate){0};
    MK_CHECK_STR(l.items[1].name, "triton_conv");
    MK_CHECK(strstr(l.items[1].source, "F.conv2d(x0.contiguous(), conv_weight, None, ") != NULL);
    MK_CHECK(strstr(l.items[1].source, "_mk_add_channel_bias(") != NULL);
    MK_CHECK(strstr(l.items[1].source, ".contiguous(memory_format=torch.channels_last)") == NULL);
    MK_CHECK_STR(l.items[0].name, "triton_convcl");
    MK_CHECK(strstr(l.items[0].source, ".contiguous(memory_format=torch.channels_last)") != NULL);
    MK_CHECK(strstr(l.items[0].source, "MK_USES_TORCH = (\"conv2d\", )") != NULL);
    /* The bias leaves the cuDNN call (which then picks faster kernels) and
     * is added in place. */
    char want[128];
    snprintf(want, sizeof want, "v%d = _mk_add_channel_bias(v%d, conv_bias)", outs[0], outs[0]);
    MK_CHECK(strstr(l.items[0].source, want) != NULL);
    MK_CHECK(strstr(l.items[0].source, "conv_weight_cl, None, ") != NULL);
    /* Later subkernels read it in channels_last (the layout plan): it leaves so. */
    snprintf(want, sizeof want, "v%d = v%d.contiguous()", outs[0], outs[0]);
    MK_CHECK(strstr(l.items[0].source, want) == NULL);
    MK_CHECK(strstr(l.items[0].source, "MK_CHANNELS_LAST = (\"conv.weight\", )") != NULL);
  }
  mk_candidate_list_free(&l);
  mk_graph_free(g);
}

/* The interpreter pays per program: on "cpu" the configurations are large
 * blocks (correctness runs); on a GPU the tuned tables, never the CPU ones. */
MK_TEST(propose, device_picks_configuration_table) {
  mk_graph *g = load("propose", "linear_epilogue.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const mk_subkernel *sk = find_sk(&p, "linear");
  MK_REQUIRE(sk != NULL);
  const char *devices[] = {"cpu", "cuda", "NVIDIA H200", NULL};
  for (int d = 0; d < 4; d++) {
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = sk, .device = devices[d]};
    MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, 0);
    bool cpu = d == 0;
    bool big = false, gpu_default = false;
    for (int i = 0; i < l.n; i++) {
      big |= strstr(l.items[i].source, "BLOCK=16384") != NULL;
      gpu_default |= strstr(l.items[i].name, "gemm64x64x32_w4_s3_tf32x3") != NULL;
    }
    MK_CHECK(big == cpu);
    MK_CHECK(gpu_default == !cpu);
    if (l.n > 0 && cpu) MK_CHECK(strstr(l.items[0].name, "_b16384_w4") != NULL);
    mk_candidate_list_free(&l);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* A tail whose result only the program returns runs in channels_last memory
 * order (channel innermost) and writes channels_last; a conv3d's too. */
MK_TEST(propose, channels_last_tail_runs_in_memory_order) {
  mk_graph *g = load("propose", "conv_layouts.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const mk_subkernel *sk = find_sk(&p, "conv3d");
  MK_REQUIRE(sk != NULL);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = sk};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  MK_REQUIRE(l.n >= 3);
  /* The implicit GEMM (3-d too) first, its tail in registers; then cuDNN in channels_last. */
  MK_CHECK(strncmp(l.items[0].name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(l.items[0].source, "wtap = 0 + k0 * sw0 + k1 * sw1 + k2 * sw2") != NULL);
  MK_CHECK(strncmp(l.items[1].name, "triton_convcl", 13) == 0);
  const char *cl = l.items[1].source;
  MK_CHECK(strstr(cl, "channels_last_3d)\n") != NULL);
  /* channel innermost: the folded bias is indexed by offs % D4 */
  MK_CHECK(strstr(cl, "+= tl.load(v27_bias_ptr + ((offs) % D4), mask=mask, other=0)") != NULL);
  MK_CHECK(strstr(cl, "shape29[0], shape29[2], shape29[3], shape29[4], shape29[1]") != NULL);
  MK_CHECK(strstr(cl, "memory_format=torch.channels_last_3d)\n    n") != NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* The subkernel's "tf32p" implicit GEMM where it has one (the first over 8
 * or more input channels; over fewer the 3xTF32 ones and cuDNN's variants
 * come before it: few_channel_convolutions_try_3xtf32_early), else its
 * first GPU candidate that is not a few-channel stem loop (those have their
 * own tests). Caller frees. */
static char *first_candidate(const mk_graph *g, const int *nodes, int nnodes, char **name) {
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  if (mk_subkernel_from_nodes(g, nodes, nnodes, &sk, &err)) return NULL;
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  char *src = NULL;
  if (mk_builtin_propose(&req, &l, &err) == 0) {
    int pick = -1;
    for (int i = 0; i < l.n && pick < 0; i++)
      if (strncmp(l.items[i].name, "triton_igemm", 12) == 0 && strstr(l.items[i].name, "_tf32p_")) pick = i;
    for (int i = 0; i < l.n && pick < 0; i++)
      if (strstr(l.items[i].name, "_stem") == NULL) pick = i;
    if (pick >= 0) {
      src = l.items[pick].source;
      *name = l.items[pick].name;
      l.items[pick].source = NULL;
      l.items[pick].name = NULL;
    }
  }
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  return src;
}

/* The name of the first candidate the proposer lists for the subkernel made
 * of `nodes`, or NULL. Caller frees. */
static char *first_listed(const mk_graph *g, const int *nodes, int nnodes) {
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  if (mk_subkernel_from_nodes(g, nodes, nnodes, &sk, &err)) return NULL;
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .max_candidates = 1, .device = "cuda"};
  char *name = NULL;
  if (mk_builtin_propose(&req, &l, &err) == 0 && l.n > 0) {
    name = l.items[0].name;
    l.items[0].name = NULL;
  }
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  return name;
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
  return n;
}

/* Convolutions as implicit GEMMs carry the tail after them: a channel
 * reduction stores one value per pixel, a pool whose window is its stride
 * reduces its windows in registers (a stride-1 transposed conv too), and
 * nothing full-size is stored that no one reads. A pool is not fused when the
 * conv output is also read elsewhere (the pooled enumeration skips the rows
 * a floor-mode pool drops) or when its window is not a power of two. */
MK_TEST(propose, implicit_gemm_conv_fuses_its_tail) {
  mk_graph *g = load("propose", "conv_tails.json");
  MK_REQUIRE(g != NULL);
  char *name = NULL, *src;
  /* conv -> min(dim=1) -> tanh */
  src = first_candidate(g, (int[]){0, 1, 2}, 3, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm128x64x32_w4_s3_tf32p", 33) == 0);
  MK_CHECK(strstr(src, "red = tl.min(red, axis=1)") != NULL);
  MK_CHECK(strstr(src, "tl.tanh") != NULL || strstr(src, "tanh") != NULL);
  MK_CHECK_INT(count_of(src, "tl.store("), ==, 3); /* the reduced result; the rounding pass's two */
  MK_CHECK(strstr(src, "+ pix, v18, mask=m_mask)") != NULL);
  MK_CHECK(strstr(src, "BN15 = max(16, triton.next_power_of_2(OC15))") != NULL);
  MK_CHECK(strstr(src, "MK_USES_TORCH") == NULL);
  /* channels innermost for the loads; ModelNew keeps the weight so */
  MK_CHECK(strstr(src, "w15 = _mk_tf32_round(c_min_weight, torch.channels_last) if tf32_15 else "
                       "c_min_weight.contiguous(memory_format=torch.channels_last)") != NULL);
  MK_CHECK(strstr(src, "MK_CHANNELS_LAST = (\"c_min.weight\", )") != NULL);
  free(src);
  free(name);
  /* conv -> sub -> avg_pool2d(2) -> sigmoid: one store, of the pooled result */
  src = first_candidate(g, (int[]){9, 10, 11, 12}, 4, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "pooled = tl.sum(win, axis=1) / TAPS") != NULL);
  MK_CHECK(strstr(src, "PK0=2, K1=K25[1], PK1=2") != NULL);
  MK_CHECK_INT(count_of(src, "tl.store("), ==, 3); /* and the rounding pass's two */
  MK_CHECK(strstr(src, "+ poffs, v28, mask=pmask)") != NULL);
  free(src);
  free(name);
  /* conv_transpose2d (stride 1) -> max_pool2d -> hardtanh -> mean */
  src = first_candidate(g, (int[]){13, 14, 15, 16}, 4, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "wtap = 0 + (K0 - 1 - k0) * sw0 + (K1 - 1 - k1) * sw1") != NULL);
  MK_CHECK(strstr(src, "pooled = tl.max(win, axis=1)") != NULL);
  MK_CHECK(strstr(src, "ws29 = (w29.stride(1), w29.stride(0), *w29.stride()[2:])") != NULL);
  MK_CHECK(strstr(src, "P29 = (1 * (K29[0] - 1) - 1, 1 * (K29[1] - 1) - 1, )") != NULL);
  /* ... and the spatial mean after them: tiles of one image, a partial per
   * tile and channel, a finishing kernel; nothing but the mean is stored */
  MK_CHECK(strstr(src, "n = tl.zeros_like(rm) + pz") != NULL);
  MK_CHECK(strstr(src, "red = tl.where((rq < QS)[:, None] & n_mask[None, :], v31, 0.0)") != NULL);
  MK_CHECK(strstr(src, "tl.store(part_ptr + at, red, mask=n_mask)") != NULL);
  MK_CHECK(strstr(src, "acc = acc / COUNT") != NULL);
  MK_CHECK(strstr(src, "[(G0_29, G1_29, NB29)]") != NULL);
  MK_CHECK(strstr(src, "rshape29 = (NB29, OC29, 1, 1, )") != NULL);
  MK_CHECK_INT(count_of(src, "tl.store("), ==, 4); /* the partial, the mean, the rounding pass's two */
  free(src);
  free(name);
  /* the conv output is returned too: stored, and the pool is its own kernel */
  src = first_candidate(g, (int[]){17, 18, 19}, 3, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "tl.store(conv_out_ptr + soffs, acc, mask=mask2)") != NULL);
  MK_CHECK(strstr(src, "pooled") == NULL);
  MK_CHECK(strstr(src, "_pool_max_pool2d") != NULL);
  free(src);
  free(name);
  /* the conv alone, its output read by another subkernel in the default
   * layout (5 input channels: the plan keeps NCHW): stored NCHW */
  src = first_candidate(g, (int[]){17}, 1, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "tl.store(conv_out_ptr + offs, acc, mask=mask2)") != NULL);
  MK_CHECK(strstr(src, "soffs") == NULL);
  free(src);
  free(name);
  /* a 3x3 pool window: not fused */
  src = first_candidate(g, (int[]){20, 21}, 2, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "pooled") == NULL);
  MK_CHECK(strstr(src, "tl.store(conv_out_ptr + soffs, acc, mask=mask2)") != NULL);
  free(src);
  free(name);
  mk_graph_free(g);
}

/* The proposer's fusion hint (mk_proposer.fuses): a convolution whose
 * implicit GEMM carries every later stage of the subkernel, and nothing else. */
MK_TEST(propose, builtin_fuses_whole_convolution_chains) {
  mk_graph *g = load("propose", "conv_pixel_reductions.json");
  MK_REQUIRE(g != NULL);
  struct { int nodes[4], n; bool fused; } cases[] = {
      {{0, 1, 2, 3}, 4, true},   /* conv -> avg pool -> sigmoid -> sum over channels and pixels */
      {{4, 5, 6}, 3, true},      /* conv -> relu -> spatial mean */
      {{7, 8, 9}, 3, true},      /* conv -> amax (keepdim) -> tanh */
      {{10, 11}, 2, true},       /* conv3d -> mean over three dims */
      {{12, 13, 14}, 3, true},   /* conv -> pool (returned too) -> mean */
      {{0}, 1, false},           /* a lone convolution: nothing to fuse */
      {{13, 14}, 2, false},      /* no convolution */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mk_subkernel sk;
    mk_errmsg err = {{0}};
    MK_REQUIRE(mk_subkernel_from_nodes(g, cases[i].nodes, cases[i].n, &sk, &err) == 0);
    if (mk_builtin_fuses(g, &sk) != cases[i].fused) fprintf(stderr, "    case %zu\n", i);
    MK_CHECK(mk_builtin_fuses(g, &sk) == cases[i].fused);
    mk_subkernel_free(&sk);
  }
  mk_graph_free(g);
  /* the conv output returned beside its pool: the pool is its own kernel */
  g = load("propose", "conv_tails.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){17, 18, 19}, 3, &sk, &err) == 0);
  MK_CHECK(!mk_builtin_fuses(g, &sk));
  mk_subkernel_free(&sk);
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){13, 14, 15, 16}, 4, &sk, &err) == 0);
  MK_CHECK(mk_builtin_fuses(g, &sk));
  mk_subkernel_free(&sk);
  mk_graph_free(g);
  /* a GEMM whose epilogue carries the rest (views aside); not two GEMMs, nor a
   * GEMM alone or with only a view after it */
  g = load("propose", "attention_4d.json");
  MK_REQUIRE(g != NULL);
  struct { int nodes[8], n; bool fused; } gemm_cases[] = {
      {{9, 10, 11, 12, 13, 14}, 6, true}, /* q @ k^T -> * scale -> mask from a slice -> relu */
      {{9, 10}, 2, true},                 /* q @ k^T -> * scale */
      {{9, 10, 11, 12, 13, 14, 15}, 7, false}, /* ... then @ v: a second GEMM */
      {{15}, 1, false},                   /* a lone GEMM */
      {{0, 1}, 2, false},                 /* linear -> split: nothing computes after it */
  };
  for (size_t i = 0; i < sizeof gemm_cases / sizeof gemm_cases[0]; i++) {
    MK_REQUIRE(mk_subkernel_from_nodes(g, gemm_cases[i].nodes, gemm_cases[i].n, &sk, &err) == 0);
    if (mk_builtin_fuses(g, &sk) != gemm_cases[i].fused) fprintf(stderr, "    gemm case %zu\n", i);
    MK_CHECK(mk_builtin_fuses(g, &sk) == gemm_cases[i].fused);
    mk_subkernel_free(&sk);
  }
  mk_graph_free(g);
}

/* A reduction with keepdim whose value only the next run reads, that run over
 * the reduction's input shape: one kernel reduces and runs it on the same tiles
 * (the broadcast epilogue), the two kernels are the `_apart` variant, and the
 * fusion hint merges them before the search; a reduction also returned, or
 * without keepdim, stays as it was. With one outer index (a 2-norm over dim 0)
 * the fused kernel would run on few programs: `_apart` first. */
MK_TEST(propose, reductions_run_the_broadcast_after_them) {
  mk_graph *g = load("propose", "reduce_broadcast.json");
  MK_REQUIRE(g != NULL);
  struct {
    int nodes[6], n;
    bool fused;
    int kernels;       /* @triton.jit in the first candidate */
    bool apart_first;  /* the first candidate is the two-kernel one */
    bool has_apart;    /* an `_apart` variant is listed */
  } cases[] = {
      /* wide * rsqrt(wide.pow(2).mean(1, keepdim) + eps) over [2, 4, 132, 256]:
       * 2 x 132 blocks of 256 kept columns, enough programs to come first */
      {{21, 22, 23, 24, 25}, 5, true, 1, false, true},
      /* the same written with sqrt and a divide over [3, 5, 6, 7]: 3 programs */
      {{0, 1, 2, 3, 4}, 5, true, 2, true, true},
      {{5, 6, 7, 8, 9}, 5, true, 4, true, true},   /* softmax written out: amax, then sum */
      {{10, 11, 12}, 3, true, 2, true, true},      /* (x - x.mean((2, 3), keepdim)) * 2 */
      {{13, 14}, 2, true, 2, true, true},          /* x - logsumexp(x, 1, keepdim) */
      {{16, 17}, 2, true, 2, true, true},          /* relu(x) / norm(x, 2, dim=0, keepdim): 1 outer */
      {{18, 19}, 2, false, 2, false, false},       /* the sum is returned too */
      {{20, 26}, 2, false, 1, false, false},       /* no keepdim: the mul is a plain epilogue */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mk_subkernel sk;
    mk_errmsg err = {{0}};
    MK_REQUIRE(mk_subkernel_from_nodes(g, cases[i].nodes, cases[i].n, &sk, &err) == 0);
    if (mk_builtin_fuses(g, &sk) != cases[i].fused) fprintf(stderr, "    case %zu fuses\n", i);
    MK_CHECK(mk_builtin_fuses(g, &sk) == cases[i].fused);
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
    MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, 0);
    MK_REQUIRE(l.n > 0);
    bool apart = false;
    for (int k = 0; k < l.n; k++) apart |= strstr(l.items[k].name, "_apart") != NULL;
    if (count_of(l.items[0].source, "@triton.jit") != cases[i].kernels ||
        (strstr(l.items[0].name, "_apart") != NULL) != cases[i].apart_first || apart != cases[i].has_apart)
      fprintf(stderr, "    case %zu: first %s, %d kernels\n", i, l.items[0].name,
              count_of(l.items[0].source, "@triton.jit"));
    MK_CHECK_INT(count_of(l.items[0].source, "@triton.jit"), ==, cases[i].kernels);
    MK_CHECK((strstr(l.items[0].name, "_apart") != NULL) == cases[i].apart_first);
    MK_CHECK(apart == cases[i].has_apart);
    for (int k = 0; k < l.n; k++) /* the fused form says so; the apart form stores the reduction */
      MK_CHECK((strstr(l.items[k].source, "fused broadcast epilogue") != NULL) ==
               (cases[i].has_apart && strstr(l.items[k].name, "_apart") == NULL));
    mk_candidate_list_free(&l);
    mk_subkernel_free(&sk);
  }
  mk_graph_free(g);
}

/* Reductions over the last dims (rows) take their tile's width from the
 * row's length at run time and pack short rows several to a program, with
 * offsets contiguous along the row (no INNER stride, so Triton coalesces
 * there); over other dims a program takes one outer index and a tile of kept
 * columns, as before. The fixture's max over 7 and log_softmax over 7
 * elements are row reductions, its softmax over dim 1 and min over dim 0 are
 * not. */
MK_TEST(propose, row_reductions_pack_short_rows) {
  mk_graph *g = load("propose", "reductions.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int rows = 0, columns = 0;
  for (int i = 0; i < p.nsubkernels; i++) {
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i], .device = "cuda"};
    if (mk_builtin_propose(&req, &l, &err) == 0)
      for (int c = 0; c < l.n; c++) {
        const char *src = l.items[c].source;
        if (strncmp(l.items[c].name, "triton_", 7) != 0) continue;
        int r = count_of(src, "R, INNER, NROW,"), k = count_of(src, "R, INNER, NCB,");
        rows += r;
        columns += k;
        /* each row-wise kernel: packed by its launcher, offsets along the row */
        MK_CHECK_INT(count_of(src, "triton.next_power_of_2(max(r"), ==, r);
        MK_CHECK_INT(count_of(src, "[(triton.cdiv(outer"), ==, r);
        MK_CHECK(r == 0 || strstr(src, "offs = base[None, :] + rows[:, None]\n") != NULL);
        MK_CHECK_INT(count_of(src, "offs = base + rows[:, None] * INNER + cols[None, :]"), >=, k);
      }
    mk_candidate_list_free(&l);
  }
  MK_CHECK(rows > 0);
  MK_CHECK(columns > 0);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* A group norm after the convolution: a first pass gathers per-tile
 * statistics, the launcher combines them (float64) into a per-(sample,
 * channel) scale and shift, and the second pass applies them with the rest of
 * the chain: conv -> group norm -> * scale -> max pool -> clamp stores only the
 * pooled result. */
MK_TEST(propose, implicit_gemm_conv_carries_a_group_norm) {
  mk_graph *g = load("propose", "conv_norm_tails.json");
  MK_REQUIRE(g != NULL);
  char *name = NULL;
  char *src = first_candidate(g, (int[]){0, 1, 2, 3, 4}, 5, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  /* statistics, their combination (float64, in Triton: no torch ops), the
   * conv again; and the TF32 rounding of its operands */
  MK_CHECK_INT(count_of(src, "@triton.jit"), ==, 4);
  MK_CHECK(strstr(src, "def _gnstats_conv2d_kernel1(") != NULL);
  MK_CHECK(strstr(src, "def _mk_gn_affine_kernel(") != NULL);
  MK_CHECK(strstr(src, "gn_scale13, gn_shift13 = _mk_gn_affine(part13, 4, 1e-05, gn1_weight, gn1_bias)") != NULL);
  MK_CHECK(strstr(src, "pooled = tl.max(win, axis=1)") != NULL);
  /* three partials per tile and channel, a scale and shift per (sample,
   * channel), then the pooled, clamped output: nothing full-size */
  MK_CHECK_INT(count_of(src, "tl.store("), ==, 8); /* and the rounding pass's two */
  MK_CHECK(strstr(src, "+ poffs, v17, mask=pmask)") != NULL);
  free(src);
  free(name);
  /* conv -> relu -> group norm -> tanh, the norm's output returned too: stored */
  src = first_candidate(g, (int[]){5, 6, 7, 8}, 4, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "tl.store(gn_out_ptr + soffs, vn, mask=mask2)") != NULL);
  MK_CHECK(strstr(src, "_mk_gn_affine(part18, 2, 1e-05, None, None)") != NULL);
  free(src);
  free(name);
  mk_graph_free(g);
}

/* A batch norm after the convolution: in training, the same two passes with
 * per-channel statistics over the batch, the running statistics updated in
 * place by the launcher, and num_batches_tracked += 1 (a stage between the
 * conv and the norm that touches neither) emitted on its own first; with the
 * running statistics (training=False) one pass, no statistics kernel. */
MK_TEST(propose, implicit_gemm_conv_carries_a_batch_norm) {
  mk_graph *g = load("propose", "conv_bn_tails.json");
  MK_REQUIRE(g != NULL);
  char *name = NULL;
  char *src = first_candidate(g, (int[]){0, 1, 2, 3}, 4, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(src, "def _ew_add_kernel1(") != NULL);
  MK_CHECK(strstr(src, "def _gnstats_conv2d_kernel2(") != NULL);
  MK_CHECK(strstr(src, "_mk_bn_affine(part25, NB25, 1e-05, bn1_weight, bn1_bias, bn1_running_mean, "
                       "bn1_running_var, 0.1)") != NULL);
  free(src);
  free(name);
  /* conv -> batch norm (momentum 0.3) -> max pool -> sigmoid: the pooled result only */
  src = first_candidate(g, (int[]){4, 5, 6, 7, 8}, 5, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "pooled = tl.max(win, axis=1)") != NULL);
  MK_CHECK(strstr(src, ", 0.3)") != NULL);
  free(src);
  free(name);
  /* the running statistics: no first pass */
  src = first_candidate(g, (int[]){12, 13}, 2, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "_gnstats") == NULL);
  MK_CHECK(strstr(src, "part41 = None") != NULL);
  /* the affine from the running statistics, the conv, the rounding of its operands */
  MK_CHECK_INT(count_of(src, "@triton.jit"), ==, 3);
  free(src);
  free(name);
  mk_graph_free(g);
}

/* Over few input channels (6 here) cuDNN's reference convolution is float32,
 * not TF32: the 3xTF32 stem loop comes first, then the 3xTF32 implicit GEMMs
 * (split before the loop, then inside it), cuDNN's NCHW variant (with its
 * norm layouts), and only then the TF32 stems, the TF32 implicit GEMMs and
 * cuDNN's channels_last variant; over more channels (conv_chain's 9) there is
 * no stem, the first implicit GEMM is tf32p and the 3xTF32 ones come after the
 * other TF32 tiles. */
MK_TEST(propose, few_channel_convolutions_try_3xtf32_early) {
  const struct { const char *fixture; int nodes[5], n, x3p_at, x3_at, stems, conv_at, convcl_at; } cases[] = {
      {"conv_norm_tails.json", {0, 1, 2, 3, 4}, 5, 0, 1, 3, 3, 8}, /* conv's norm layouts (short rows) */
      {"conv_chain.json", {0}, 1, 6, 7, 0, -2, -2}, /* after 64x128, 128x128, tf32r, packed, 64-wide */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    mk_graph *g = load("propose", cases[c].fixture);
    MK_REQUIRE(g != NULL);
    mk_subkernel sk;
    mk_errmsg err = {{0}};
    MK_REQUIRE(mk_subkernel_from_nodes(g, cases[c].nodes, cases[c].n, &sk, &err) == 0);
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
    MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
    int igemm = 0, x3p_at = -1, x3_at = -1, stems = 0, conv_at = -1, convcl_at = -1;
    for (int i = 0; i < l.n; i++) {
      const char *name = l.items[i].name; if (c == 0) fprintf(stderr, "  %d %s\n", i, name);
      if (conv_at < 0 && strncmp(name, "triton_conv_", 12) == 0) conv_at = i;
      if (convcl_at < 0 && strncmp(name, "triton_convcl_", 14) == 0) convcl_at = i;
      if (strncmp(name, "triton_igemm", 12) != 0) continue;
      if (strstr(name, "_stem")) { /* the 3xTF32 one first, the TF32 ones after cuDNN's NCHW variant */
        if (stems == 0) MK_CHECK_INT(i, ==, 0);
        if (stems == 0) MK_CHECK(strstr(name, "128x64x64_w4_s3_tf32x3_stem") != NULL);
        if (stems > 0) MK_CHECK(conv_at >= 0 && strstr(name, "_tf32_stem") != NULL);
        stems++;
        continue;
      }
      if (igemm == 0 && !cases[c].stems) MK_CHECK(strstr(name, "_tf32p") != NULL);
      if (strstr(name, "_tf32x3p")) x3p_at = igemm;
      else if (strstr(name, "_tf32x3")) x3_at = igemm;
      igemm++;
    }
    if (x3_at != cases[c].x3_at || x3p_at != cases[c].x3p_at)
      fprintf(stderr, "    %s: 3xTF32 is implicit GEMM %d (split first: %d)\n", cases[c].fixture, x3_at, x3p_at);
    MK_CHECK_INT(x3p_at, ==, cases[c].x3p_at);
    MK_CHECK_INT(x3_at, ==, cases[c].x3_at);
    MK_CHECK_INT(stems, ==, cases[c].stems);
    if (cases[c].conv_at >= 0) { /* over few channels, cuDNN's NCHW variant before channels_last */
      MK_CHECK_INT(conv_at, ==, cases[c].conv_at);
      MK_CHECK_INT(convcl_at, ==, cases[c].convcl_at);
    }
    mk_candidate_list_free(&l);
    mk_subkernel_free(&sk);
    mk_graph_free(g);
  }
}

/* A transposed convolution with a stride runs by output phases (the grid's
 * third axis): each phase's taps only, input (o + pad - k) / stride, the
 * weight not flipped; its group norm's statistics pass enumerates the phases
 * too; a pool after it is not fused (its windows span phases). */
MK_TEST(propose, strided_transposed_conv_runs_by_phases) {
  mk_graph *g = load("propose", "convt_tails.json");
  MK_REQUIRE(g != NULL);
  char *name = NULL;
  char *src = first_candidate(g, (int[]){0, 1, 2}, 3, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(src, "v0 = (o0 + P0 - r0) // S0") != NULL); /* input (o + P - k) / S = v - j */
  MK_CHECK(strstr(src, "i0 = v0 - j0") != NULL);
  MK_CHECK(strstr(src, "i0 = v0[:, None] - j0[None, :]") != NULL); /* packed (tap, channel) pairs */
  MK_CHECK(strstr(src, "(K0 - 1 - k0)") == NULL);
  MK_CHECK(strstr(src, "NBN23, math.prod(S23))") != NULL);
  /* torch's transposed output size, output padding included */
  MK_CHECK(strstr(src, "(I23[0] - 1) * 2 - 2 * 1 + 1 * (K23[0] - 1) + 1 + 1") != NULL);
  free(src);
  free(name);
  src = first_candidate(g, (int[]){3, 4, 5, 6, 7}, 5, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "phase_lines") == NULL);
  MK_CHECK(strstr(src, "n = pz // PH") != NULL);
  MK_CHECK(strstr(src, "_mk_gn_affine(part26, 2, 1e-05, gn_weight, gn_bias)") != NULL);
  free(src);
  free(name);
  src = first_candidate(g, (int[]){15, 16}, 2, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "pooled") == NULL);
  MK_CHECK(strstr(src, "tl.store(conv_out_ptr + soffs, acc, mask=mask2)") != NULL);
  free(src);
  free(name);
  /* convT3d -> * scale -> avg pool: the product is the pool kernel's prologue
   * (it reads the conv output), so the conv stores its output and does not
   * take the product (an H100 run raised NameError on problem 50 when both did) */
  src = first_candidate(g, (int[]){17, 18, 19}, 3, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strstr(src, "tl.store(conv_out_ptr + soffs, acc, mask=mask2)") != NULL);
  MK_CHECK(strstr(src, "# fused elementwise stage") == NULL);
  free(src);
  free(name);
  mk_graph_free(g);
}

/* Over many input channels (C*K*K = 576) with only an elementwise tail,
 * cuDNN's variants come first and the implicit GEMMs after them; with a
 * channel reduction to fuse, the implicit GEMM comes first again. */
MK_TEST(propose, implicit_gemm_first_only_where_it_is_likely_to_win) {
  mk_graph *g = load("propose", "conv_wide.json");
  MK_REQUIRE(g != NULL);
  char *name = first_listed(g, (int[]){0, 1}, 2);
  MK_REQUIRE(name != NULL);
  MK_CHECK(strncmp(name, "triton_convcl", 13) == 0);
  free(name);
  name = first_listed(g, (int[]){2, 3}, 2);
  MK_REQUIRE(name != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  free(name);
  mk_graph_free(g);
}

/* A norm whose normalised value only a pool reads is applied by the pool
 * while it loads: the norm's stage computes statistics alone (partials, then
 * a scale and shift per sample and channel) and nothing full-size is
 * stored between them, in every configuration; a norm also returned is
 * stored and its pool reads it. */
MK_TEST(propose, pools_apply_the_norm_they_read) {
  mk_graph *g = load("propose", "norm_pools.json");
  MK_REQUIRE(g != NULL);
  const struct { int nodes[4], n; bool fused, running; } cases[] = {
      {{1, 2, 3, 4}, 4, true, false},  /* group norm -> * scale -> max pool -> clamp */
      {{6, 7, 8, 9}, 4, true, false},  /* batch norm (training) -> relu -> padded max pool */
      {{10, 11, 12}, 3, true, false},  /* tanh -> group norm -> avg pool */
      {{13, 14}, 2, true, true},       /* eval-mode batch norm -> avg pool */
      {{21, 22}, 2, false, false},     /* the group norm's value is returned too */
  };
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    mk_subkernel sk;
    mk_errmsg err = {{0}};
    MK_REQUIRE(mk_subkernel_from_nodes(g, cases[c].nodes, cases[c].n, &sk, &err) == 0);
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
    MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
    MK_CHECK(l.n >= 2);
    int applying = 0, stored = 0;
    for (int i = 0; i < l.n; i++) {
      const char *src = l.items[i].source;
      bool applied = strstr(src, "applied while loading") != NULL;
      /* Each applying configuration has a twin right after it that stores the norm. */
      bool twin = strstr(l.items[i].name, "_normst") != NULL;
      MK_CHECK(applied == (cases[c].fused && !twin));
      if (!applied) continue;
      applying++;
      const char *next = i + 1 < l.n ? l.items[i + 1].name : "";
      const char *mark = strstr(next, "_normst");
      char untwinned[256];
      snprintf(untwinned, sizeof untwinned, "%.*s%s", (int)(mark ? mark - next : 0), next,
               mark ? mark + 7 : "");
      stored += mark && strcmp(untwinned, l.items[i].name) == 0;
      /* The scale and shift are loaded once per output, not per tap. */
      MK_CHECK(strstr(src, "nrm_sc = tl.load(nrm_sc_ptr + t, mask=mask") != NULL);
      MK_CHECK(strstr(src, "// nrm_S") == NULL);
      MK_CHECK(strstr(src, "_norm_affine_") != NULL);
      MK_CHECK((strstr(src, "_norm_stats_") != NULL) == !cases[c].running);
      /* Only the pool's output, the norm's scale and shift and its partial
       * statistics are allocated. */
      MK_CHECK_INT(count_of(src, "= torch.empty("), ==, cases[c].running ? 3 : 4);
      MK_CHECK(strstr(src, "def _norm_kernel") == NULL && strstr(src, "_norm_apply") == NULL);
    }
    MK_CHECK_INT(applying, ==, stored);
    /* The search merges such a norm and its pool before its beams. */
    MK_CHECK(mk_builtin_fuses(g, &sk) == cases[c].fused);
    mk_candidate_list_free(&l);
    mk_subkernel_free(&sk);
  }
  /* Not a second norm and pool onto one that has its pair already. */
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){1, 2, 3, 4, 5, 6, 7, 8, 9}, 9, &sk, &err) == 0);
  MK_CHECK(!mk_builtin_fuses(g, &sk));
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* A pool reading a channels_last convolution output of its module runs on
 * [pixels x channels] tiles (loads along the channels, the conv bias and the
 * (sample, channel) address once per output); after an NCHW convolution it
 * stays flat over the output. */
MK_TEST(propose, pools_over_channels_last_values_run_on_channel_tiles) {
  mk_graph *g = load("propose", "conv_layouts.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){5, 6, 7}, 3, &sk, &err) == 0); /* conv -> max pool -> sigmoid */
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  int cl = 0, nchw = 0;
  for (int i = 0; i < l.n; i++) {
    const char *src = l.items[i].source;
    bool tiles = strstr(src, "[pixels x channels] tiles") != NULL;
    if (strncmp(l.items[i].name, "triton_convcl", 13) == 0) {
      cl++;
      MK_CHECK(tiles);
      MK_CHECK(strstr(src, "BLOCK_C=bc") != NULL);
      MK_CHECK(strstr(src, "xbias = tl.load(") != NULL);
    } else if (strncmp(l.items[i].name, "triton_conv_", 12) == 0) {
      nchw++;
      MK_CHECK(!tiles);
    }
  }
  MK_CHECK(cl > 0 && nchw > 0);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* A batch norm (training) reading a channels_last value runs on [pixels x
 * channels] tiles ("_ctile", first): in conv_net.json its input is planned
 * channels_last between subkernels; stored channels_last where the readers
 * allow, a channels_last residual loaded at the channels_last offsets. Not
 * offered where no norm reads such a value: after an NCHW convolution (the
 * whole graph of bn_channels_last.json: the convcl variants only), or with
 * an epilogue reading a default-layout tensor (bn7 * y), which keeps the
 * split rows and says why in the notes. */
MK_TEST(propose, batch_norms_of_channels_last_values_run_on_channel_tiles) {
  mk_graph *g = load("propose", "conv_net.json");
  MK_REQUIRE(g != NULL);
  mk_partition part = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &part, &err) == 0);
  const char *names[] = {"batch_norm_relu", "batch_norm_add_relu"};
  for (int c = 0; c < 2; c++) {
    const mk_subkernel *sk = NULL;
    for (int i = 0; i < part.nsubkernels; i++)
      if (strcmp(part.subkernels[i].name, names[c]) == 0) sk = &part.subkernels[i];
    MK_REQUIRE(sk != NULL);
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = sk, .device = "cuda"};
    MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
    MK_REQUIRE(l.n > 0);
    MK_CHECK(strncmp(l.items[0].name, "triton_ctile_", 13) == 0); /* first */
    int tiled = 0;
    for (int i = 0; i < l.n; i++) {
      const char *src = l.items[i].source;
      bool ct = strstr(l.items[i].name, "_ctile") != NULL;
      tiled += ct;
      MK_CHECK((strstr(src, "_norm_ctstats_") != NULL) == ct);
      if (!ct) continue;
      MK_CHECK(strstr(src, "stored channels_last") != NULL);
      MK_CHECK(strstr(src, "memory_format=torch.channels_last)") != NULL);
      MK_CHECK(strstr(src, "(cc * v") != NULL); /* the input's channel stride */
      MK_CHECK(strstr(src, "_ptr + soffs, ") != NULL);
      MK_CHECK(strstr(src, "rm_ptr + cc, ") != NULL); /* running statistics per channel */
      if (c == 1) /* the channels_last residual at the channels_last offsets */
        MK_CHECK(strstr(src, "memory_format=torch.channels_last), v") != NULL ||
                 strstr(src, ".contiguous(memory_format=torch.channels_last), ") != NULL);
    }
    MK_CHECK_INT(tiled, ==, 4); /* one per elementwise block */
    mk_candidate_list_free(&l);
  }
  mk_partition_free(&part);
  mk_graph_free(g);

  g = load("propose", "bn_channels_last.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel whole;
  int nodes[64], nn = 0;
  for (int i = 0; i < g->nnodes && nn < 64; i++) nodes[nn++] = i;
  MK_REQUIRE(mk_subkernel_from_nodes(g, nodes, nn, &whole, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &whole, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  int tiled = 0, nchw = 0;
  for (int i = 0; i < l.n; i++) {
    const char *nm = l.items[i].name, *src = l.items[i].source;
    if (strstr(nm, "_ctile")) {
      tiled++;
      MK_CHECK(strncmp(nm, "triton_convcl_ctile", 19) == 0);
      /* six of the seven batch norms; bn7 * y (a default-layout input) splits its rows */
      MK_CHECK_INT(count_of(src, "def _norm_ctstats_"), ==, 6);
      MK_CHECK_INT(count_of(src, "def _norm_stats_"), ==, 1);
      MK_CHECK(strstr(src, "memory_format=torch.channels_last_3d)\n") != NULL); /* the 3-d one */
    }
    if (strncmp(nm, "triton_conv_", 12) == 0) {
      nchw++;
      MK_CHECK(strstr(src, "_norm_ctstats_") == NULL);
      MK_CHECK(strstr(l.items[i].notes, "not on channel tiles") != NULL);
    }
  }
  MK_CHECK_INT(tiled, ==, 4);
  MK_CHECK(nchw > 0);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&whole);
  /* One batch norm with the default-layout epilogue, alone with its conv: declined, with the reason. */
  mk_subkernel sk;
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){23, 25, 26}, 3, &sk, &err) == 0);
  mk_candidate_list l2 = {0};
  req.subkernel = &sk;
  MK_REQUIRE(mk_builtin_propose(&req, &l2, &err) == 0);
  MK_REQUIRE(l2.n > 0);
  for (int i = 0; i < l2.n; i++) {
    MK_CHECK(strstr(l2.items[i].name, "_ctile") == NULL);
    MK_CHECK(strstr(l2.items[i].notes, "neither a number, per channel, nor a channels_last value") != NULL);
  }
  mk_candidate_list_free(&l2);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* Grouped convolutions run as implicit GEMMs with a group per tile: the
 * kernel's C is a group's input channels, OCG its output channels, and the
 * grid's channel axis runs every group's blocks. The chain after the conv
 * is fused as without groups (batch norm in two passes, a pool, a pixel
 * mean), except a reduction over the channels, which a tile of one group
 * cannot hold: it runs as its own kernel. A depthwise conv (one channel per
 * group) has no implicit GEMM: cuDNN's depthwise kernels stand. */
MK_TEST(propose, implicit_gemm_runs_grouped_convolutions_a_group_per_tile) {
  mk_graph *g = load("propose", "conv_groups.json");
  MK_REQUIRE(g != NULL);
  char *name = NULL;
  /* conv 1x1 (groups 2) -> num_batches_tracked += 1 -> batch norm -> relu */
  char *src = first_candidate(g, (int[]){0, 1, 2, 3}, 4, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(src, "    C19 = w19.shape[1]  # input channels per group\n") != NULL);
  MK_CHECK(strstr(src, "    OCG19 = OC19 // 2  # output channels per group\n") != NULL);
  MK_CHECK(strstr(src, "NBN19 = (OC19 // OCG19) * triton.cdiv(OCG19, BN19)") != NULL);
  MK_CHECK(strstr(src, "xbase = n * sxn + i00 * sx0 + i10 * sx1 + grp * C * sxc") != NULL);
  MK_CHECK(strstr(src, "_mk_bn_affine(part19, NB19, ") != NULL);
  free(src);
  free(name);
  /* conv 3x3 (groups 4, 4 channels each) -> max pool -> sigmoid: pooled on the tile */
  src = first_candidate(g, (int[]){4, 5, 6}, 3, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(src, "OCG25 = OC25 // 4") != NULL);
  MK_CHECK(strstr(src, "pooled = tl.max(win, axis=1)") != NULL);
  free(src);
  free(name);
  /* conv (groups 2) -> * 2 -> sum over the channels: the sum is its own kernel */
  src = first_candidate(g, (int[]){7, 8, 9}, 3, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(src, "def _reduce_sum_kernel2(") != NULL);
  free(src);
  free(name);
  /* conv (groups 2) -> mean over the pixels: partials per tile, then a finishing kernel */
  src = first_candidate(g, (int[]){14, 15}, 2, &name);
  MK_REQUIRE(src != NULL);
  MK_CHECK(strncmp(name, "triton_igemm", 12) == 0);
  MK_CHECK(strstr(src, "def _finish_mean_kernel2(") != NULL);
  free(src);
  free(name);
  /* depthwise: every candidate, none an implicit GEMM */
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){10}, 1, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  MK_CHECK(l.n > 0);
  for (int i = 0; i < l.n; i++) MK_CHECK(strstr(l.items[i].name, "igemm") == NULL);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* A channel shuffle after a batch norm on channel tiles (conv_shuffle: bn ->
 * view(n, 3, 4, h, w) -> transpose(1, 2) -> contiguous -> view(n, 12, h, w))
 * is folded into the norm's store: channel c = 4 * j0 + j1 lands at
 * 3 * j1 + j0, channels_last (the plan converts the shuffled value for the
 * next conv), and the views are not replayed. The row variants replay them. */
MK_TEST(propose, channel_shuffle_folds_into_the_batch_norm_store) {
  mk_graph *g = load("propose", "conv_shuffle.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){2, 3, 4, 5, 6}, 5, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  MK_REQUIRE(l.n > 1);
  const char *ct = l.items[0].source;
  MK_CHECK_STR(l.items[0].name, "triton_ctile_b1024_w4");
  MK_CHECK(strstr(ct, "    j1 = t % 4\n    t = t // 4\n    j0 = t\n    cs = j1 * 3 + j0\n") != NULL);
  MK_CHECK(strstr(ct, "tl.store(v16_ptr + doffs, y, mask=mask)") != NULL);
  MK_CHECK(strstr(ct, "memory_format=torch.channels_last)") != NULL);
  MK_CHECK(strstr(ct, "    v22 = v16  # the channel shuffle, stored shuffled by the norm\n") != NULL);
  MK_CHECK(strstr(ct, ".transpose(") == NULL);
  MK_CHECK(strstr(ct, ".contiguous()\n") == NULL);
  MK_CHECK_STR(l.items[1].name, "triton_b1024_w4");
  MK_CHECK(strstr(l.items[1].source, ".transpose(") != NULL);
  MK_CHECK(strstr(l.items[1].source, "stored shuffled") == NULL);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* The same shuffle with the convolution that reads it in the subkernel
 * (ShuffleNet's bn2 -> shuffle -> conv3 after the merge move): in the
 * channels_last configurations the norm stores the shuffled value
 * channels_last, which is what the convolution makes its input anyway (no
 * conversion pass); in the default layout it stores NCHW for the NCHW
 * convolution. */
MK_TEST(propose, a_norm_stores_channels_last_for_the_convolution_after_it) {
  mk_graph *g = load("propose", "conv_shuffle.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){1, 2, 3, 4, 5, 6, 7}, 7, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  int cl = 0, nchw = 0;
  for (int i = 0; i < l.n; i++) {
    const char *src = l.items[i].source;
    if (strstr(src, "stored shuffled by the norm") == NULL) continue;
    bool convcl = strstr(src, "v22_cl = v22.contiguous(memory_format=torch.channels_last)") != NULL;
    bool stored_cl = strstr(src, "channels_last input; stored channels_last") != NULL;
    if (convcl != stored_cl) fprintf(stderr, "    %s: conv cl %d, stored cl %d\n", l.items[i].name, convcl, stored_cl);
    MK_CHECK(convcl == stored_cl);
    cl += stored_cl;
    nchw += !stored_cl;
  }
  MK_CHECK(cl > 0);
  MK_CHECK(nchw > 0);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* A batch norm on channel tiles of a channels_last input whose reader is a
 * softmax over the last dim (UNet's, conv_softmax_wide: the plan keeps the
 * convolution's output channels_last) stores the default layout: the
 * softmax's rows lie C apart in channels_last and contiguous in NCHW. */
MK_TEST(propose, a_norm_stores_the_default_layout_for_a_softmax_over_the_width) {
  mk_graph *g = load("propose", "conv_softmax_wide.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){3, 4, 5}, 3, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  int tiled = 0;
  for (int i = 0; i < l.n; i++) {
    const char *src = l.items[i].source;
    if (strstr(src, "channels_last input; stored") == NULL) continue;
    tiled++;
    if (strstr(src, "channels_last input; stored in the default layout") == NULL)
      fprintf(stderr, "    %s stores channels_last\n", l.items[i].name);
    MK_CHECK(strstr(src, "channels_last input; stored in the default layout") != NULL);
  }
  MK_CHECK(tiled > 0);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* A configuration the generator cannot write is skipped, not the subkernel:
 * AlexNet's stem (3 channels, relu in place on the conv's output, a pool in
 * the next subkernel) had no candidate at all because the channels_last
 * variants cannot store the in-place relu; the default layout's are proposed,
 * and the skipped reason is no error. */
MK_TEST(propose, configurations_that_cannot_be_written_are_skipped) {
  mk_graph *g = load("propose", "conv_inplace_relu.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){0, 1}, 2, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_CHECK_INT(mk_builtin_propose(&req, &l, &err), ==, 0);
  MK_CHECK(l.n > 0);
  MK_CHECK_STR(err.text, "");
  int cl = 0;
  for (int i = 0; i < l.n; i++) cl += strstr(l.items[i].name, "convcl") != NULL;
  MK_CHECK_INT(cl, ==, 0);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* `out += bn(conv(x))` (residual_inplace: nodes 6-8, the batch norm, the
 * in-place add into the other branch's output, relu): the channel-tiled
 * norm stores the sum into `out` at the offsets it read it from and the
 * relu of it, in its one apply pass; no separate add kernel, no copy of the
 * target. The other configurations keep the add as its own stage. */
MK_TEST(propose, residual_added_in_place_is_the_tiled_norms_epilogue) {
  mk_graph *g = load("propose", "residual_inplace.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){6, 7, 8}, 3, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  MK_REQUIRE(l.n > 1);
  const char *ct = l.items[0].source;
  MK_CHECK_STR(l.items[0].name, "triton_ctile_b1024_w4");
  MK_CHECK(strstr(ct, "    epi_v18 = tl.load(epi_v18_ptr + soffs, mask=mask, other=0)\n") != NULL);
  MK_CHECK(strstr(ct, "    tl.store(epi_v18_ptr + soffs, v24, mask=mask)\n") != NULL);
  MK_CHECK(strstr(ct, "    tl.store(epi_v25_ptr + soffs, v25, mask=mask)\n") != NULL);
  MK_CHECK(strstr(ct, "    v24 = v18\n") != NULL);           /* the target itself, not a new tensor */
  MK_CHECK(strstr(ct, "v18.contiguous(") == NULL);           /* never a copy of the target */
  MK_CHECK(strstr(ct, "_ew_") == NULL);                      /* no separate add kernel */
  bool apart = false;
  for (int i = 1; i < l.n; i++)
    if (strstr(l.items[i].name, "_ctile") == NULL) apart |= strstr(l.items[i].source, "_ew_") != NULL;
  MK_CHECK(apart);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* ShuffleNet's tail (residual_shortcut: bn3 + relu, the shortcut's conv and
 * norm, `out += shortcut`, out returned): the first candidate, on channel
 * tiles, computes bn3's statistics alone and the shortcut norm's epilogue
 * applies bn3 and its relu while loading, so `out` is never stored; the sum,
 * written in place in the model, goes to a fresh channels_last tensor. Its
 * twin stores bn3 and writes the sum into it; configurations off the tiles
 * never apply a norm in an epilogue. */
MK_TEST(propose, norm_read_only_by_another_norms_epilogue_is_applied_there) {
  mk_graph *g = load("propose", "residual_shortcut.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){2, 3, 4, 5, 6, 7}, 6, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  MK_REQUIRE(l.n > 2);
  const char *ct = l.items[0].source;
  MK_CHECK(strstr(l.items[0].name, "_ctile_") != NULL && strstr(l.items[0].name, "_normst") == NULL);
  MK_CHECK(strstr(ct, "statistics only, on [pixels x channels] tiles: the kernel of line 20") != NULL);
  MK_CHECK(strstr(ct, "    ya = (xa - tl.load(nma_ptr + cc, mask=c_ok, other=0.0)[None, :]) * ") != NULL);
  MK_CHECK(strstr(ct, "    v18 = tl.where(ya > 0, ya, 0.0)  # relu (line 19)\n") != NULL);
  MK_CHECK(strstr(ct, "    v24 = v18 + y  # add (line 20)\n") != NULL);
  MK_CHECK(strstr(ct, "    tl.store(epi_v24_ptr + soffs, v24, mask=mask)\n") != NULL);
  MK_CHECK(strstr(ct, "    v24 = torch.empty(out21, device=in21_device, dtype=torch.float32, "
                      "memory_format=torch.channels_last)\n") != NULL);
  MK_CHECK(strstr(ct, "v18 = torch.empty") == NULL); /* bn3's value is never stored */
  MK_CHECK(strstr(ct, "v24 = v18\n") == NULL);
  int ctapply = 0;
  for (const char *q = ct; (q = strstr(q, "def _norm_ctapply")) != NULL; q++) ctapply++;
  MK_CHECK_INT(ctapply, ==, 1);
  bool twin = false;
  for (int i = 1; i < l.n; i++) {
    const char *src = l.items[i].source;
    if (strstr(l.items[i].name, "_ctile_normst"))
      twin |= strstr(src, "    v24 = v18\n") != NULL && strstr(src, "nma_ptr") == NULL;
    if (strstr(l.items[i].name, "_ctile") == NULL) MK_CHECK(strstr(src, "nma_ptr") == NULL);
  }
  MK_CHECK(twin);
  mk_candidate_list_free(&l);
  /* the proposer's fusion hint: yes to the pair (and what lies between them),
   * not to the shortcut's norm alone nor to bn3 without the norm that applies it */
  MK_CHECK(mk_builtin_fuses(g, &sk));
  mk_subkernel_free(&sk);
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){4, 5, 6, 7}, 4, &sk, &err) == 0);
  MK_CHECK(!mk_builtin_fuses(g, &sk));
  mk_subkernel_free(&sk);
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){2, 3, 4, 5}, 4, &sk, &err) == 0);
  MK_CHECK(!mk_builtin_fuses(g, &sk));
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

/* A tensor made from constants inside a candidate's run (replayed_data:
 * `torch.tensor(1. / 0.01, device=t.device)`, node 10, kept to the run) is
 * made once per device, as the composed forward does (the module defines
 * the cache); one the subkernel returns would be made per call. */
MK_TEST(propose, replayed_constant_tensors_are_made_once) {
  mk_graph *g = load("propose", "replayed_data.json");
  MK_REQUIRE(g != NULL);
  MK_REQUIRE(strcmp(g->nodes[10].op, "torch.tensor") == 0);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){10, 11, 12, 13, 14, 15, 16}, 7, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  MK_REQUIRE(l.n > 0);
  for (int i = 0; i < l.n; i++) {
    const char *src = l.items[i].source;
    MK_CHECK(strstr(src, "_mk_const((10, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(") != NULL);
    MK_CHECK(strstr(src, "\ndef _mk_const(key, make):\n") != NULL);
  }
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_subkernel only;
  MK_REQUIRE(mk_subkernel_from_nodes(g, (int[]){10}, 1, &only, &err) == 0); /* returns it */
  req.subkernel = &only;
  if (mk_builtin_propose(&req, &l, &err) == 0)
    for (int i = 0; i < l.n; i++) MK_CHECK(strstr(l.items[i].source, "_mk_const(") == NULL);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&only);
  mk_graph_free(g);
}
