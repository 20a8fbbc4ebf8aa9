/* test_propose_e2e.c — every builtin candidate of every subkernel, run
 * against the PyTorch reference.
 *
 * For each capture fixture: parse, decompose, generate the reference and the
 * builtin candidates of each subkernel, write them with a manifest to a
 * temporary directory, and run tests/python/propose_harness.py on them
 * (Triton interpreter on CPU; rtol = atol = 1e-4). Every candidate must match
 * the reference, outputs and in-place updates alike. Coverage (which
 * subkernels got Triton candidates, and why others did not) is printed.
 * CI cost: small shapes, one configuration per subkernel except for the
 * fixtures listed with all configurations. Skips when Python or Triton is
 * missing. */
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include "mk_layout.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static mk_graph *load_fixture(const char *name) { return mk_test_load_graph("propose", name); }

static int write_text(const char *dir, const char *name, const char *text) {
  mk_buf path;
  mk_buf_init(&path, 8192);
  mk_buf_printf(&path, "%s/%s", dir, name);
  int rc = path.err ? path.err : mk_write_file(mk_buf_cstr(&path), text, strlen(text));
  mk_buf_free(&path);
  return rc;
}

typedef struct tally {
  int subkernels, covered, candidates, passed;
} tally;

/* Writes the candidates of every subkernel; returns the manifest (cJSON). */
/* Inputs in which layout: the program's plan, or every 4-d/5-d float one in
 * channels_last (what a kernel must read correctly whatever the plan says). */
typedef enum { INPUTS_PLANNED, INPUTS_ALL_CL } input_layouts;

static bool is_cl_able(const mk_value *v) {
  return (v->rank == 4 || v->rank == 5) && (v->dtype == MK_DTYPE_F32 || v->dtype == MK_DTYPE_F64 ||
                                            v->dtype == MK_DTYPE_F16 || v->dtype == MK_DTYPE_BF16);
}

static cJSON *write_candidates(const mk_graph *g, const mk_partition *p, const char *dir, int max,
                               input_layouts inputs, tally *t) {
  cJSON *man = cJSON_CreateObject();
  /* Inputs go in the layout the program's plan gives them (mk_layout.h). */
  unsigned char *layout = calloc((size_t)g->nvalues + 1, 1);
  if (layout) mk_layout_plan(g, layout, NULL);
  cJSON *sks = cJSON_AddArrayToObject(man, "subkernels");
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_subkernel *sk = &p->subkernels[s];
    t->subkernels++;
    char skdir[2048];
    snprintf(skdir, sizeof skdir, "%s/sk%d", dir, s);
    mkdir(skdir, 0700);
    mk_candidate ref = {0};
    mk_errmsg err = {{0}};
    int rc = mk_reference_candidate(g, sk, &ref, &err);
    MK_CHECK_INT(rc, ==, 0);
    if (rc) {
      fprintf(stderr, "    reference of %s: %s\n", sk->name, err.text);
      continue;
    }
    write_text(skdir, "reference.py", ref.source);
    mk_candidate_free(&ref);
    mk_candidate_list list = {0};
    mk_propose_request req = {.graph = g, .subkernel = sk, .mode = MK_PROPOSE_NEW,
                              .max_candidates = max, .device = "cuda"};  /* the GPU configurations */
    err.text[0] = '\0';
    rc = mk_builtin_propose(&req, &list, &err);
    if (rc) {
      /* Unsupported is an answer (the reference stays); anything else is a bug. */
      MK_CHECK_INT(rc, ==, MK_EUNSUPPORTED);
      MK_CHECK(err.text[0] != '\0');
      fprintf(stderr, "    %-28s reference only: %s\n", sk->name, err.text);
      mk_candidate_list_free(&list);
      continue;
    }
    t->covered++;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sk->name);
    char rel[64];
    snprintf(rel, sizeof rel, "sk%d", s);
    cJSON_AddStringToObject(o, "dir", rel);
    cJSON *ins = cJSON_AddArrayToObject(o, "inputs");
    for (int i = 0; i < sk->ninputs; i++) {
      const mk_value *v = &g->values[sk->inputs[i]];
      cJSON *in = cJSON_CreateObject();
      cJSON *shape = cJSON_AddArrayToObject(in, "shape");
      for (int d = 0; d < v->rank; d++) cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)v->shape[d]));
      cJSON_AddStringToObject(in, "dtype", mk_dtype_name(v->dtype));
      /* Variances must be positive for normalising with them to mean anything. */
      size_t nl = v->name ? strlen(v->name) : 0;
      if (nl >= 3 && (strcmp(v->name + nl - 3, "var") == 0 || strcmp(v->name + nl - 3, "rv2") == 0))
        cJSON_AddTrueToObject(in, "positive");
      bool cl = inputs == INPUTS_ALL_CL ? is_cl_able(v)
                                        : layout && layout[sk->inputs[i]] == MK_LAYOUT_CHANNELS_LAST;
      if (cl) cJSON_AddTrueToObject(in, "channels_last");
      cJSON_AddItemToArray(ins, in);
    }
    cJSON *cands = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 0; i < list.n; i++) {
      char file[300];
      snprintf(file, sizeof file, "%s.py", list.items[i].name);
      write_text(skdir, file, list.items[i].source);
      cJSON_AddItemToArray(cands, cJSON_CreateString(file));
      t->candidates++;
    }
    cJSON_AddItemToArray(sks, o);
    fprintf(stderr, "    %-28s %d builtin candidate(s)\n", sk->name, list.n);
    mk_candidate_list_free(&list);
  }
  free(layout);
  return man;
}

/* One subkernel holding every node of the graph (what the search's merges
 * build): elementwise runs before a pool or norm become its prologue there,
 * which the initial decomposition never does. */
static int whole_graph_partition(const mk_graph *g, mk_partition *p) {
  mk_subkernel *sk = calloc(1, sizeof *sk);
  if (sk == NULL) return MK_ENOMEM;
  sk->name = mk_strdup("whole");
  sk->nodes = malloc((size_t)g->nnodes * sizeof *sk->nodes);
  sk->inputs = malloc((size_t)g->nvalues * sizeof *sk->inputs);
  sk->outputs = malloc((size_t)(g->noutput_values + 1) * sizeof *sk->outputs);
  if (!sk->name || !sk->nodes || !sk->inputs || !sk->outputs) {
    p->subkernels = sk;
    p->nsubkernels = 1;
    return MK_ENOMEM;
  }
  for (int i = 0; i < g->nnodes; i++) {
    sk->nodes[sk->nnodes++] = i;
    for (int k = 0; k < g->nodes[i].ninputs; k++) {
      int v = g->nodes[i].inputs[k];
      bool seen = g->values[v].kind == MK_VALUE_NODE;
      for (int j = 0; j < sk->ninputs && !seen; j++) seen = sk->inputs[j] == v;
      if (!seen) sk->inputs[sk->ninputs++] = v;
    }
  }
  for (int i = 0; i < g->noutput_values; i++) {
    bool seen = false;
    for (int j = 0; j < sk->noutputs && !seen; j++) seen = sk->outputs[j] == g->output_values[i];
    if (!seen) sk->outputs[sk->noutputs++] = g->output_values[i];
  }
  sk->anchor = -1;
  sk->first_line = g->forward_line;
  sk->last_line = g->forward_end_line;
  p->subkernels = sk;
  p->nsubkernels = 1;
  return 0;
}

/* Environment the harness runs in (MK_HARNESS_SPLIT_ON_CPU=1: see
 * split_3xtf32_matches_reference_on_its_gpu_path). */
static const char *harness_env = "";

static void run_fixture_in(const char *fixture, int max, bool whole, input_layouts inputs) {
  mk_graph *g = load_fixture(fixture);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  int rc = whole ? whole_graph_partition(g, &p) : mk_decompose_initial(g, &p, &err);
  MK_CHECK_INT(rc, ==, 0);
  if (rc) {
    mk_partition_free(&p);
    mk_graph_free(g);
    return;
  }
  char dir[] = "/tmp/mk_propose_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  fprintf(stderr, "  %s -> %s\n", fixture, dir);
  tally t = {0};
  cJSON *man = write_candidates(g, &p, dir, max, inputs, &t);
  char *text = cJSON_Print(man);
  write_text(dir, "manifest.json", text);
  free(text);
  cJSON_Delete(man);

  mk_buf cmd;
  mk_buf_init(&cmd, 8192);
  mk_buf_printf(&cmd, "%s TRITON_INTERPRET=1 '%s' '%s/tests/python/propose_harness.py' '%s' 2>&1",
                harness_env, MK_DEFAULT_PYTHON, mk_test_repo_dir(), dir);
  FILE *f = popen(mk_buf_cstr(&cmd), "r");
  MK_REQUIRE(f != NULL);
  static char line[1 << 16];
  int seen = 0;
  while (fgets(line, sizeof line, f)) {
    cJSON *r = cJSON_Parse(line);
    if (r == NULL) {
      fprintf(stderr, "    | %s", line);
      continue;
    }
    seen++;
    const cJSON *ok = cJSON_GetObjectItem(r, "ok");
    if (cJSON_IsTrue(ok)) {
      t.passed++;
    } else {
      const cJSON *e = cJSON_GetObjectItem(r, "error");
      fprintf(stderr, "    FAIL %s/%s: %s\n", cJSON_GetObjectItem(r, "subkernel")->valuestring,
              cJSON_GetObjectItem(r, "candidate")->valuestring,
              cJSON_IsString(e) ? e->valuestring : "?");
    }
    cJSON_Delete(r);
  }
  int status = pclose(f);
  MK_CHECK_INT(status, ==, 0);
  MK_CHECK_INT(seen, ==, t.candidates);
  MK_CHECK_INT(t.passed, ==, t.candidates);
  fprintf(stderr, "    %d/%d subkernels with builtin candidates, %d/%d candidates match\n", t.covered,
          t.subkernels, t.passed, t.candidates);
  if (t.passed == t.candidates && getenv("MK_KEEP_TMP") == NULL) {
    mk_buf rm;
    mk_buf_init(&rm, 4096);
    mk_buf_printf(&rm, "rm -rf '%s'", dir);
    if (system(mk_buf_cstr(&rm)) != 0) fprintf(stderr, "    could not remove %s\n", dir);
    mk_buf_free(&rm);
  }
  mk_buf_free(&cmd);
  mk_partition_free(&p);
  mk_graph_free(g);
}

static void run_fixture_as(const char *fixture, int max, bool whole) {
  run_fixture_in(fixture, max, whole, INPUTS_PLANNED);
}

static void run_fixture(const char *fixture, int max) { run_fixture_as(fixture, max, false); }

MK_TEST(propose_e2e, fixtures_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  /* All configurations on the small elementwise and GEMM fixtures, one elsewhere. */
  run_fixture("ew_broadcast.json", 0);
  run_fixture("linear_epilogue.json", 0);
  run_fixture("matmul_bmm.json", 2);
  run_fixture("reductions.json", 0);
  run_fixture("conv_chain.json", 0);
  /* Every layout situation of a conv: folded bias, channels_last tails with
   * a default-layout residual, conv3d, conv -> pool, in place on the output. */
  run_fixture("conv_layouts.json", 0);
  run_fixture_as("conv_layouts.json", 2, true);
  /* Implicit-GEMM convolutions with their tails: every subkernel's
   * candidates, and the whole graph in one subkernel (the first candidate,
   * an implicit GEMM, fuses each conv's channel reduction or pool). */
  run_fixture("conv_tails.json", 0);
  run_fixture_as("conv_tails.json", 1, true);
  run_fixture_as("conv3d_tails.json", 1, true);
  run_fixture("conv_norm_tails.json", 0);
  run_fixture_as("conv_norm_tails.json", 1, true);
  run_fixture("conv_bn_tails.json", 0);
  run_fixture_as("conv_bn_tails.json", 1, true);
  run_fixture("convt_tails.json", 0);
  run_fixture_as("convt_tails.json", 1, true);
  run_fixture("convt_empty_phase.json", 0); /* outputs smaller than the stride: empty phases */
  /* Chains ending in a reduction over the pixels (partials per tile, then a
   * finishing kernel): with and without a pool, over channels too, 2-d and 3-d. */
  run_fixture("conv_pixel_reductions.json", 0);
  run_fixture_as("conv_pixel_reductions.json", 1, true);
  /* Over 16 channels: a channel block per tap (fewer channels pack taps). */
  run_fixture("conv_wide_tails.json", 0);
  run_fixture_as("conv_wide_tails.json", 1, true);
  /* A small net under the layout plan: channels_last between subkernels. */
  run_fixture("conv_net.json", 2);
  /* AlexNet's stem: relu in place on a 3-channel conv (its channels_last
   * configurations skipped). */
  run_fixture("conv_inplace_relu.json", 0);
}

/* torch.norm (Frobenius over everything, p=2 over a dim), linalg.vector_norm's
 * 1-norm, argmax / argmin (first index of the extreme, int64, keepdim or not,
 * over all elements), the losses of input and target: every candidate; the
 * 3-norm and a reduction="none" loss stay PyTorch's. */
MK_TEST(propose_e2e, vector_norms_and_arg_reductions_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("vector_norms.json", 0);
  run_fixture("losses.json", 0); /* mse, l1, smooth_l1, huber, kl_div over every element */
}

/* Reductions whose next run broadcasts their value back over their input:
 * the fused kernel (bi_stage.bcast_epi) and the `_apart` two kernels, every
 * configuration, as the initial partition cuts them and as one subkernel of the
 * whole graph (what the premerge builds): an RMS norm and a softmax written
 * out, a mean over trailing dims taken away, logsumexp, a 2-norm over dim 0,
 * and the sums that must stay two kernels (returned too, no keepdim); with
 * the 4-d inputs in PyTorch's layout and in channels_last. */
MK_TEST(propose_e2e, reductions_with_broadcast_epilogues_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("reduce_broadcast.json", 0);
  run_fixture_in("reduce_broadcast.json", 0, false, INPUTS_ALL_CL); /* 4-d inputs channels_last */
  run_fixture_as("reduce_broadcast.json", 0, true);
  run_fixture_as("rms_written_out.json", 0, true); /* what reduce_probe.py times */
}

/* cumsum / cumprod: over an inner dim (tiles of columns), over rows longer
 * than a tile (the carry between tiles), with a prologue, a bool mask and
 * around flips; tril / triu over tiles of rows and columns, above and below
 * the diagonal, after a matmul: every candidate. */
MK_TEST(propose_e2e, scans_and_triangles_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("scans.json", 0);
  run_fixture("triangles.json", 0); /* tril / triu: the same tiles with both indices */
}

/* Two-operand einsums as bmm GEMMs (operands permuted, letter groups
 * merged): a 4-d tensor times a matrix with its relu epilogue, a bmm, the
 * attention scores over two batch letters, A @ B^T; every candidate. */
MK_TEST(propose_e2e, einsums_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("einsum.json", 0);
}

/* nan_to_num over NaN, +inf and -inf (given limits, float32's defaults), and
 * remainders with either sign convention, as runs of their own and as a
 * reduction's prologue: every candidate. */
MK_TEST(propose_e2e, nan_to_num_and_remainders_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("nan_to_num.json", 0);
  run_fixture("remainders.json", 0); /* remainder / % (divisor's sign), fmod, number % tensor */
}

/* Grouped convolutions as implicit GEMMs, a group per tile: a 1x1 conv
 * with a batch norm, packed taps (4 channels per group) into a pool, a
 * partial channel block (20 per group) before a channel sum the chain must
 * leave out, a depthwise conv (cuDNN's), a group norm and a pixel mean:
 * every candidate of every subkernel, and the whole graph in one subkernel
 * (its first two candidates: the chains fused on the tiles). */
MK_TEST(propose_e2e, grouped_convolutions_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("conv_groups.json", 0);
  run_fixture_as("conv_groups.json", 2, true);
}

/* A channel shuffle planned channels_last (conv_shuffle): every candidate
 * of every subkernel with the plan's input layouts (the batch norm's on
 * channel tiles with the shuffle folded into its store), and the whole graph;
 * every candidate of ShuffleNet's middle as one subkernel (conv_shuffle_conv). */
MK_TEST(propose_e2e, channel_shuffle_matches_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  harness_env = "MK_HARNESS_CTILE_CL=1"; /* the folded norm stores channels_last */
  run_fixture("conv_shuffle.json", 0);
  run_fixture_as("conv_shuffle.json", 2, true);
  /* the shuffled norm output stored channels_last for the convolution reading it */
  run_fixture_as("conv_shuffle_conv.json", 0, true);
  harness_env = "";
}

/* Data ops no kernel writes (cat, roll, indexing with a tensor, a tensor
 * made on the input's device, zeros_like) replayed as recorded inside
 * candidates that compute the rest: every candidate of every subkernel, and
 * the whole graph in one subkernel. */
MK_TEST(propose_e2e, replayed_data_ops_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("replayed_data.json", 0);
  run_fixture_as("replayed_data.json", 2, true);
}

/* Batch norms (training) of channels_last values on [pixels x channels]
 * tiles ("_ctile", builtin_norm.c): relu, hardtanh, a channels_last residual,
 * leaky relu * scale + per-channel bias, no affine / no running statistics,
 * 3-d; and one whose epilogue reads a default-layout tensor (not tiled).
 * Every candidate of every subkernel (the norm's input planned channels_last
 * between subkernels), and the whole graph (the convs' channels_last outputs
 * in the module): outputs and running statistics against PyTorch, and the
 * harness checks that the "_ctile" candidates' 4-d/5-d outputs are
 * channels_last wherever they are stored so (MK_HARNESS_CTILE_CL=1); every
 * candidate of conv_softmax_wide (its norm's reader a softmax over the width). */
MK_TEST(propose_e2e, batch_norms_on_channel_tiles_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  harness_env = "MK_HARNESS_CTILE_CL=1";
  run_fixture("bn_channels_last.json", 0);
  run_fixture_as("bn_channels_last.json", 4, true);
  run_fixture("conv_net.json", 0);
  /* the norm on channel tiles before a softmax over the width stores NCHW */
  run_fixture("conv_softmax_wide.json", 0);
  harness_env = "";
}

/* A residual added in place after a batch norm (residual_inplace: ResNet's
 * `out += identity`, ShuffleNet's `out += self.shortcut(x)`): the norm's
 * tiled apply stores `out + bn(...)` into `out` (its epilogue writes its
 * in-place target at the offsets it read it from). Every candidate of every
 * subkernel, the in-place target compared after the call, and the whole
 * graph, where the other norm is applied by that epilogue while it loads. */
MK_TEST(propose_e2e, residual_added_in_place_after_a_batch_norm_matches_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  harness_env = "MK_HARNESS_CTILE_CL=1";
  run_fixture("residual_inplace.json", 0);
  run_fixture_as("residual_inplace.json", 4, true);
  /* ShuffleNet's tail whole: the shortcut norm's epilogue applies bn3 while
   * loading and writes the in-place sum, the program's output, to a fresh
   * tensor (and its twin with bn3 stored, the sum in place). */
  run_fixture("residual_shortcut.json", 0);
  run_fixture_as("residual_shortcut.json", 4, true);
  harness_env = "";
}

/* 4-d matmuls of attention heads through their strides (the transposed head
 * views of a split projection), with the scale, causal mask (a sliced buffer,
 * masked_fill with -inf) and ReLU after them: every subkernel's candidates,
 * and the whole graph's first two. */
MK_TEST(propose_e2e, attention_heads_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("attention_4d.json", 0);
  run_fixture_as("attention_4d.json", 2, true);
}

/* F.normalize over the last dim as a norm row (1 / max(||x||, eps)): SwinV2's
 * cosine attention, rows of zeros (the eps clamp), long rows (split rows); one
 * over dim 1 stays PyTorch's: every configuration of every subkernel. */
MK_TEST(propose_e2e, normalize_matches_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("normalize_rows.json", 0);
}

/* Pools that apply the norm they read while loading (builtin_plan.c,
 * decide_norm_on_load): group, batch (training and eval) and instance norms,
 * with prologues and epilogues, padded windows, 2-d and 3-d: the whole graph
 * in one subkernel, its first twelve configurations (cuDNN's convolution in
 * both layouts, row loops, split rows and rows in registers, each applying
 * configuration with its twin that stores the norm). */
MK_TEST(propose_e2e, pools_applying_norms_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture_as("norm_pools.json", 12, true);
}

/* Few-channel stems computed by the stem loop (a zero-padded copy, one kernel
 * row per K block): AlexNet's 11x11 stride-4 stem, a rectangular kernel with
 * a stride per dim over one channel, a 7x7 stem over 8 channels into a batch
 * norm. The first 8 configurations of every subkernel and of the whole graph,
 * stems among them (the 3xTF32 one comes first for few channels). */
MK_TEST(propose_e2e, few_channel_stems_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  mk_graph *g = load_fixture("conv_stems.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int stems = 0, convs = 0;
  for (int s = 0; s < p.nsubkernels; s++) {
    mk_candidate_list list = {0};
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[s], .mode = MK_PROPOSE_NEW,
                              .max_candidates = 8, .device = "cuda"};
    if (mk_builtin_propose(&req, &list, &err) == 0) {
      bool conv = false;
      for (int i = 0; i < list.n; i++) {
        stems += strstr(list.items[i].name, "_stem") != NULL;
        conv |= strstr(list.items[i].name, "_igemm") != NULL;
      }
      convs += conv;
    }
    mk_candidate_list_free(&list);
  }
  MK_CHECK_INT(convs, ==, 3);
  MK_CHECK_INT(stems, >=, 6); /* each convolution's 3xTF32 stem and a TF32 one, among its first 8 */
  mk_partition_free(&p);
  mk_graph_free(g);
  run_fixture("conv_stems.json", 8);
  run_fixture_as("conv_stems.json", 8, true);
}

/* The "tf32x3p" implicit GEMMs split input and weight into TF32 high and low
 * parts on the GPU only; the harness forces that path here (the products are
 * float32-accurate, so every candidate still matches at 1e-4): every
 * configuration on a 2-d chain with a group norm, 3-d, and a strided
 * transposed convolution. */
MK_TEST(propose_e2e, split_3xtf32_matches_reference_on_its_gpu_path) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  harness_env = "MK_HARNESS_SPLIT_ON_CPU=1";
  run_fixture_as("conv_norm_tails.json", 0, true);
  run_fixture_as("convt_tails.json", 0, true);
  harness_env = "";
}

/* The "tf32p" implicit GEMM rounds input and weight once, in its launcher,
 * on the GPU only: its rounding helper, run here directly under the
 * interpreter, rounds to nearest with ties away into a channels_last copy,
 * from NCHW, channels_last, 3-d and non-dense inputs. */
MK_TEST(propose_e2e, tf32_rounding_helper_rounds_to_nearest) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  mk_graph *g = load_fixture("conv_chain.json");
  MK_REQUIRE(g != NULL);
  int conv = -1;
  for (int i = 0; i < g->nnodes && conv < 0; i++)
    if (strstr(g->nodes[i].op, "conv2d")) conv = i;
  MK_REQUIRE(conv >= 0);
  mk_subkernel sk;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_subkernel_from_nodes(g, &conv, 1, &sk, &err) == 0);
  mk_candidate_list l = {0};
  mk_propose_request req = {.graph = g, .subkernel = &sk, .device = "cuda"};
  MK_REQUIRE(mk_builtin_propose(&req, &l, &err) == 0);
  const char *src = NULL;
  for (int i = 0; i < l.n; i++)
    if (strstr(l.items[i].name, "_tf32p")) src = l.items[i].source;
  MK_REQUIRE(src != NULL);
  char dir[] = "/tmp/mk_tf32p_XXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  MK_REQUIRE(write_text(dir, "cand.py", src) == 0);
  mk_buf cmd;
  mk_buf_init(&cmd, 4096);
  mk_buf_printf(&cmd, "TRITON_INTERPRET=1 '%s' '%s/tests/python/tf32_round_check.py' '%s/cand.py' 2>&1",
                MK_DEFAULT_PYTHON, mk_test_repo_dir(), dir);
  FILE *f = popen(mk_buf_cstr(&cmd), "r");
  MK_REQUIRE(f != NULL);
  char line[4096] = "";
  char *got = fgets(line, sizeof line, f);
  int status = pclose(f);
  if (status != 0 || got == NULL || strcmp(line, "ok\n") != 0) fprintf(stderr, "    %s", line);
  MK_CHECK_INT(status, ==, 0);
  MK_CHECK_STR(line, "ok\n");
  if (status == 0) { /* kept to read on a failure */
    mk_buf_reset(&cmd);
    mk_buf_printf(&cmd, "rm -rf '%s'", dir);
    MK_CHECK(system(mk_buf_cstr(&cmd)) == 0);
  } else {
    fprintf(stderr, "    candidate and check kept in %s\n", dir);
  }
  mk_buf_free(&cmd);
  mk_candidate_list_free(&l);
  mk_subkernel_free(&sk);
  mk_graph_free(g);
}

MK_TEST(propose_e2e, norms_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  /* The three work layouts (row loop, split rows, rows in registers) at the
   * default block; the other blocks change only constexprs (all of them pass,
   * ~6 min: run with max 0 after changing the norm kernels). */
  run_fixture("norms.json", 3);
}

MK_TEST(propose_e2e, pools_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  run_fixture("pools.json", 0);
}

MK_TEST(propose_e2e, whole_graph_prologues_match_reference) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  /* Every node in one subkernel: prologues fused into pools and norms. */
  run_fixture_as("pools.json", 1, true);
  run_fixture_as("norms.json", 3, true);
}

MK_TEST(propose_e2e, kernel_families_on_channels_last_inputs) {
  if (!mk_test_python_ready()) {
    mk_test_skip("no Python with torch and triton");
    return;
  }
  /* Every 4-d/5-d input in channels_last, whatever the plan says: reductions,
   * softmax, norms, pools and elementwise runs (with their prologues, in one
   * subkernel) read any layout correctly. */
  run_fixture_in("reductions.json", 1, false, INPUTS_ALL_CL);
  run_fixture_in("norms.json", 1, false, INPUTS_ALL_CL);
  run_fixture_in("pools.json", 1, true, INPUTS_ALL_CL);
  run_fixture_in("ew_broadcast.json", 1, false, INPUTS_ALL_CL);
}
