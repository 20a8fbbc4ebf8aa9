/* test_propose_cuda.c — the builtin CUDA C++ generator: every candidate it
 * writes for the proposer fixtures and the IR fixtures compiles with NVRTC
 * to an sm_90 cubin (no GPU needed), its MK_CUDA_KERNELS signatures match
 * the kernels' parameter lists, and unsupported stages come with a reason.
 * Running the kernels needs a GPU: tests/python/test_cuda_candidates.py. */
#include "mk_backend.h"
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static mk_graph *load(const char *dir, const char *name) { return mk_test_load_graph(dir, name); }

/* Number of parameters of `extern "C" __global__ void name(...)` in src, or -1. */
static int kernel_params(const char *src, const char *name) {
  char head[256];
  snprintf(head, sizeof head, "__global__ void %s(", name);
  const char *p = strstr(src, head);
  if (p == NULL) return -1;
  p += strlen(head);
  int n = 1;
  for (; *p && *p != ')'; p++) n += *p == ',';
  return n;
}

/* Every "name": "sig" entry of MK_CUDA_KERNELS names a kernel with that many parameters. */
static int check_signatures(const char *module, const char *cuda) {
  const char *k = strstr(module, "MK_CUDA_KERNELS = {\n");
  if (k == NULL) return -1;
  int count = 0;
  for (const char *line = strchr(k, '\n') + 1; strncmp(line, "    \"", 5) == 0; line = strchr(line, '\n') + 1) {
    char name[128], sig[128];
    if (sscanf(line, "    \"%127[^\"]\": \"%127[^\"]\"", name, sig) != 2) return -1;
    if (kernel_params(cuda, name) != (int)strlen(sig)) {
      fprintf(stderr, "    %s: %d parameters, signature %s\n", name, kernel_params(cuda, name), sig);
      return -1;
    }
    count++;
  }
  return count;
}

typedef struct tally {
  int subkernels, covered, candidates, compiled, planned;
} tally;

/* The MK_CUDA_PLAN of a module (docs/candidates.md), parsed, or NULL when it has none. */
static cJSON *plan_of(const char *module) {
  const char *head = "\nMK_CUDA_PLAN = r\"\"\"\n";
  const char *p = strstr(module, head);
  if (p == NULL) return NULL;
  p += strlen(head);
  const char *end = strstr(p, "\n\"\"\"\n");
  if (end == NULL) return NULL;
  char *text = mk_strndup(p, (size_t)(end - p));
  cJSON *j = cJSON_Parse(text);
  free(text);
  return j;
}

static bool defined(const cJSON *names, const char *name) {
  for (const cJSON *n = names->child; n; n = n->next)
    if (strcmp(n->valuestring, name) == 0) return true;
  return false;
}

static void define(cJSON *names, const char *name) { cJSON_AddItemToArray(names, cJSON_CreateString(name)); }

/* Names an INT or pointer argument reads must be defined by then. */
static bool reads_defined(const cJSON *a, const cJSON *names) {
  if (cJSON_IsString(a)) return defined(names, a->valuestring);
  if (cJSON_IsNumber(a) || cJSON_IsNull(a) || cJSON_IsBool(a)) return true;
  for (const cJSON *c = a ? a->child : NULL; c; c = c->next)
    if (!reads_defined(c, names)) return false;
  return true;
}

/* A plan is consistent with its module: the same kernels and signatures as
 * MK_CUDA_KERNELS, run()'s inputs, launches that pass a pointer for each f / b
 * and an int for each q, names defined before they are read, outputs made. */
static void check_plan(const mk_candidate *c, const cJSON *plan) {
  MK_CHECK_INT(cJSON_GetObjectItem(plan, "version")->valueint, ==, 1);
  const cJSON *kernels = cJSON_GetObjectItem(plan, "kernels");
  int nk = 0;
  for (const cJSON *k = kernels->child; k; k = k->next, nk++) {
    char entry[300];
    snprintf(entry, sizeof entry, "    \"%s\": \"%s\",\n", k->string, k->valuestring);
    MK_CHECK(strstr(c->source, entry) != NULL);
  }
  const char *kk = strstr(c->source, "MK_CUDA_KERNELS = {\n");
  int lines = 0;
  for (const char *line = strchr(kk, '\n') + 1; strncmp(line, "    \"", 5) == 0; line = strchr(line, '\n') + 1) lines++;
  MK_CHECK_INT(nk, ==, lines);
  cJSON *names = cJSON_CreateArray();
  const cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(plan, "inputs")) define(names, it->valuestring);
  const char *run = strstr(c->source, "\ndef run(");
  int params = 1;
  for (const char *q = run; *q && *q != ')'; q++) params += *q == ',';
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(plan, "inputs")), ==, params);
  int launches = 0;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(plan, "steps")) {
    const char *op = cJSON_GetObjectItem(it, "op")->valuestring;
    if (strcmp(op, "node") == 0) {
      const cJSON *form = cJSON_GetObjectItem(it, "form"), *v;
      MK_CHECK(strncmp(cJSON_GetObjectItem(cJSON_GetObjectItem(form, "call"), "op")->valuestring, "aten::", 6) == 0);
      cJSON_ArrayForEach(v, cJSON_GetObjectItem(form, "outputs")) {
        char name[32];
        snprintf(name, sizeof name, "v%d", v->valueint);
        define(names, name);
      }
      continue;
    }
    if (strcmp(op, "launch") == 0) {
      launches++;
      const cJSON *sig = cJSON_GetObjectItem(kernels, cJSON_GetObjectItem(it, "kernel")->valuestring);
      MK_REQUIRE(cJSON_IsString(sig));
      const cJSON *args = cJSON_GetObjectItem(it, "args");
      MK_CHECK_INT(cJSON_GetArraySize(args), ==, (int)strlen(sig->valuestring));
      int i = 0;
      const cJSON *a;
      cJSON_ArrayForEach(a, args) {
        char want = sig->valuestring[i++];
        MK_CHECK(cJSON_GetObjectItem(a, want == 'q' ? "int" : "ptr") != NULL);
        MK_CHECK(reads_defined(a->child, names));
      }
      MK_CHECK(reads_defined(cJSON_GetObjectItem(it, "grid"), names));
      continue;
    }
    const cJSON *args = cJSON_GetObjectItem(it, "args");
    if (strncmp(op, "require_", 8) == 0) { /* INT, INT, the refusal's message; defines nothing */
      MK_CHECK(reads_defined(cJSON_GetArrayItem(args, 0), names) && reads_defined(cJSON_GetArrayItem(args, 1), names) &&
               cJSON_IsString(cJSON_GetArrayItem(args, 2)));
      continue;
    }
    if (strcmp(op, "empty") == 0) { /* shape, like, dtype[, memory format] */
      const char *dt = cJSON_GetArrayItem(args, 2)->valuestring;
      MK_CHECK(strcmp(dt, "float32") == 0 || strcmp(dt, "bool") == 0);
      MK_CHECK(reads_defined(cJSON_GetArrayItem(args, 0), names) && reads_defined(cJSON_GetArrayItem(args, 1), names));
    } else {
      MK_CHECK(reads_defined(args, names));
    }
    define(names, cJSON_GetObjectItem(it, "out")->valuestring);
  }
  MK_CHECK_INT(launches, >=, nk);
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(plan, "outputs")) MK_CHECK(defined(names, it->valuestring));
  cJSON_Delete(names);
}

static void check_candidate(mk_backend *b, const mk_candidate *c, tally *t) {
  const char *src = NULL;
  size_t len = 0;
  int first = 0;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_backend_candidate_source(c->source, &src, &len, &first, &err) == 0);
  char *cuda = mk_strndup(src, len);
  MK_CHECK(strstr(c->source, "\nMK_BACKEND = \"cuda\"\n") != NULL);
  MK_CHECK(strstr(c->source, "\ndef run(") != NULL);
  MK_CHECK(strstr(c->source, "import triton") == NULL);
  MK_CHECK(check_signatures(c->source, cuda) >= 1);
  /* The contract an LLM's CUDA candidate is held to (mk_llm_parse_candidates)
   * refuses none of the builtin generator's. */
  if (mk_backend_check_candidate(c->source, &err)) fprintf(stderr, "    %s: %s\n", c->name, err.text);
  MK_CHECK_INT(mk_backend_check_candidate(c->source, &err), ==, 0);
  /* every stage kind has a plan form, every torch stage of the fixtures an
   * ATen form: every candidate has a plan, consistent with its module */
  cJSON *plan = plan_of(c->source);
  if (plan) check_plan(c, plan);
  else fprintf(stderr, "    %s has no launch plan:\n%s\n", c->name, c->source);
  t->planned += plan != NULL;
  if (plan && getenv("MK_TEST_VERBOSE")) fprintf(stderr, "%s\n", c->source);
  cJSON_Delete(plan);
  t->candidates++;
  if (b) {
    mk_backend_result r;
    MK_REQUIRE(mk_backend_compile(b, cuda, "candidate.cu", NULL, first - 1, &r, &err) == 0);
    if (!r.ok) fprintf(stderr, "    %s does not compile:\n%s\n%s\n", c->name, r.log, c->source);
    MK_CHECK(r.ok);
    t->compiled += r.ok;
    mk_backend_result_free(&r);
  }
  free(cuda);
}

static void propose_all(mk_backend *b, const char *dir, const char *name, int max, tally *t) {
  mk_graph *g = load(dir, name);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  for (int i = 0; i < p.nsubkernels; i++) {
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i], .max_candidates = max,
                              .device = "NVIDIA H200"};
    err.text[0] = '\0';
    int rc = mk_builtin_cuda_propose(&req, &l, &err);
    t->subkernels++;
    if (rc == 0) {
      t->covered++;
      MK_CHECK(l.n >= 1 && (max == 0 || l.n <= max));
      for (int k = 0; k < l.n; k++) check_candidate(b, &l.items[k], t);
    } else {
      MK_CHECK_INT(rc, ==, MK_EUNSUPPORTED);
      MK_CHECK(err.text[0] != '\0');
      if (getenv("MK_TEST_VERBOSE")) fprintf(stderr, "    %s %s: %s\n", name, p.subkernels[i].name, err.text);
    }
    mk_candidate_list_free(&l);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
}

static mk_backend *backend_or_note(void) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &b, &err)) {
    fprintf(stderr, "    not compiling (%s)\n", err.text);
    return NULL;
  }
  return b;
}

/* The proposer fixtures: every candidate of every variant compiles. */
MK_TEST(propose_cuda, every_fixture_candidate_compiles_with_nvrtc) {
  mk_backend *b = backend_or_note();
  static const char *const names[] = {"ew_broadcast.json", "reductions.json", "conv_chain.json",
                                      "cost_ops.json", "norms.json", "pools.json",
                                      "linear_epilogue.json", "repeated_blocks.json", "vector_norms.json"};
  tally t = {0};
  for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) propose_all(b, "propose", names[f], 0, &t);
  fprintf(stderr, "    %d/%d subkernels with CUDA candidates, %d candidates, %d compiled, %d with a launch plan\n",
          t.covered, t.subkernels, t.candidates, t.compiled, t.planned);
  /* 55 of 79 with the vector norms (vector_norms.json: its 1- and 2-norms;
   * its argmaxes, argmins and 3-norm are refused); 52 of 70 since GEMMs have
   * CUDA kernels (50 with norms and pools, 21 before): linear_epilogue's and
   * cost_ops' GEMMs get the three GEMM variants. What is left is ops the
   * builtin generator has no kernel for, subkernels of views or delegated
   * calls only, and in-place counter updates. */
  MK_CHECK_INT(t.subkernels, ==, 79);
  MK_CHECK_INT(t.covered, ==, 55);
  MK_CHECK_INT(t.candidates, ==, 167);
  MK_CHECK_INT(t.planned, ==, t.candidates);
  if (b) MK_CHECK_INT(t.compiled, ==, t.candidates);
  mk_backend_close(b);
  if (b == NULL) mk_test_skip("NVRTC unavailable: generated, not compiled");
}

/* KernelBench-derived IR fixtures (full shapes): candidates or a reason. */
MK_TEST(propose_cuda, ir_fixtures_generate_compile_or_explain) {
  mk_backend *b = backend_or_note();
  static const char *const names[] = {"conv_min_tanh.json", "gemm_groupnorm_hardtanh.json",
                                      "matmul_scale_residual.json", "bn_relu_sum.json",
                                      "branches.json", "lead_softmax.json"};
  tally t = {0};
  for (size_t f = 0; f < sizeof names / sizeof names[0]; f++) propose_all(b, "ir", names[f], 1, &t);
  fprintf(stderr, "    %d/%d subkernels with CUDA candidates, %d compiled\n", t.covered, t.subkernels,
          t.compiled);
  /* 14 of 18: gemm_groupnorm_hardtanh's and matmul_scale_residual's GEMMs, bn_relu_sum's
   * batch norm and the group norm (9 before them), and branches' conv + sigmoid + cat, its
   * cat replayed as recorded (BI_REPLAY). */
  MK_CHECK_INT(t.covered, ==, 14);
  if (b) MK_CHECK_INT(t.compiled, ==, t.candidates);
  mk_backend_close(b);
  if (b == NULL) mk_test_skip("NVRTC unavailable: generated, not compiled");
}

/* The candidate of norms.json's subkernel `name`, variant `variant` (NULL: none). */
static char *norm_candidate(mk_graph *g, const mk_partition *p, const char *name, const char *variant) {
  for (int i = 0; i < p->nsubkernels; i++) {
    if (strcmp(p->subkernels[i].name, name) != 0) continue;
    mk_candidate_list l = {0};
    mk_errmsg err = {{0}};
    mk_propose_request req = {.graph = g, .subkernel = &p->subkernels[i], .device = "cuda"};
    char *src = NULL;
    if (mk_builtin_cuda_propose(&req, &l, &err) == 0)
      for (int k = 0; k < l.n && src == NULL; k++)
        if (strcmp(l.items[k].name, variant) == 0) src = mk_strdup(l.items[k].source);
    mk_candidate_list_free(&l);
    return src;
  }
  return NULL;
}

/* Norms read their input as [N, C, S] through its strides (no copy for
 * channels_last), batch norm in training updates the running statistics in
 * place and hands their fresh versions on, eval mode is elementwise over the
 * running statistics, and long rows get the split-rows variant. */
MK_TEST(propose_cuda, norms_read_strides_and_update_running_statistics) {
  mk_graph *g = load("propose", "norms.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  char *bn = norm_candidate(g, &p, "batch_norm", "cuda_t256");
  MK_REQUIRE(bn != NULL);
  MK_CHECK(strstr(bn, ".reshape(ncs") != NULL);
  MK_CHECK(strstr(bn, "*xn") != NULL && strstr(bn, ".stride()") != NULL);
  MK_CHECK(strstr(bn, "rm[row] = (1.0f - 0.2f) * rm[row] + 0.2f * gmean;") != NULL); /* momentum=0.2 */
  MK_CHECK(strstr(bn, "var * tot / fmaxf(tot - 1.0f, 1.0f)") != NULL);            /* unbiased */
  MK_CHECK(strstr(bn, " = bn_running_mean\n") != NULL);
  free(bn);
  /* short rows: no split variant */
  MK_CHECK(norm_candidate(g, &p, "batch_norm", "cuda_t256_split32") == NULL);
  char *split = norm_candidate(g, &p, "batch_norm_2", "cuda_t256_split32");
  MK_REQUIRE(split != NULL);
  MK_CHECK(strstr(split, "_norm_stats_") != NULL && strstr(split, "_norm_apply_") != NULL);
  MK_CHECK(strstr(split, "if (chunk == 0 && threadIdx.x == 0) {") != NULL);
  free(split);
  char *ev = norm_candidate(g, &p, "batch_norm_mul", "cuda_t256");
  MK_REQUIRE(ev != NULL);
  MK_CHECK(strstr(ev, "_norm_eval_batch_norm") != NULL && strstr(ev, "sqrtf(rv[c] + 0.001f)") != NULL);
  free(ev);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose_cuda, variants_are_deterministic_and_cpu_is_refused) {
  mk_graph *g = load("propose", "ew_broadcast.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[0]};
  mk_candidate_list a = {0}, b = {0}, cpu = {0};
  MK_REQUIRE(mk_builtin_cuda_propose(&req, &a, &err) == 0);
  MK_REQUIRE(mk_builtin_cuda_propose(&req, &b, &err) == 0);
  MK_REQUIRE(a.n == 3 && b.n == 3);
  MK_CHECK_STR(a.items[0].name, "cuda_t256");
  for (int i = 0; i < a.n; i++) MK_CHECK_STR(a.items[i].source, b.items[i].source);
  MK_CHECK(strcmp(a.items[0].source, a.items[1].source) != 0);
  /* Broadcast leaves ([C, 1, 1] bias, [H, W] y) are read through their strides. */
  MK_CHECK(strstr(a.items[0].source, "_mk_bstrides(bias, ") != NULL);
  MK_CHECK(strstr(a.items[0].source, "_mk_full(x0, ") != NULL);
  /* Optimise: the parent's configuration is not proposed again. */
  mk_candidate_list o = {0};
  mk_propose_request opt = req;
  opt.mode = MK_PROPOSE_OPTIMISE;
  opt.parent = &a.items[0];
  MK_REQUIRE(mk_builtin_cuda_propose(&opt, &o, &err) == 0);
  MK_CHECK_INT(o.n, ==, 2);
  for (int i = 0; i < o.n; i++) MK_CHECK(strcmp(o.items[i].name, "cuda_t256") != 0);
  req.device = "cpu";
  MK_CHECK_INT(mk_builtin_cuda_propose(&req, &cpu, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "need a GPU") != NULL);
  mk_candidate_list_free(&a);
  mk_candidate_list_free(&b);
  mk_candidate_list_free(&o);
  mk_candidate_list_free(&cpu);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Stages without a CUDA kernel are refused with the op and its line. */
MK_TEST(propose_cuda, unsupported_stages_name_op_and_line) {
  mk_graph *g = load("propose", "cost_ops.json");
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int lstm = -1;
  for (int i = 0; i < p.nsubkernels; i++)
    if (strcmp(p.subkernels[i].name, "lstm") == 0) lstm = i;
  MK_REQUIRE(lstm >= 0);
  mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[lstm]};
  mk_candidate_list l = {0};
  MK_CHECK_INT(mk_builtin_cuda_propose(&req, &l, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "line ") != NULL);
  MK_CHECK(strstr(err.text, "no kernel for") != NULL);
  MK_CHECK_INT(l.n, ==, 0);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Reductions the Triton family writes but the CUDA one does not (argmax /
 * argmin, the scans, a 3-norm): refused by name, never emitted as another
 * reduction; the 1- and 2-norms it writes. */
static void check_cuda_reductions(const char *fixture, const char *const *refused_names, int nrefused,
                                  int expect_ok) {
  mk_graph *g = load("propose", fixture);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  int refused = 0, ok = 0;
  for (int i = 0; i < p.nsubkernels; i++) {
    const char *name = p.subkernels[i].name;
    bool refuse = false;
    for (int k = 0; k < nrefused; k++) refuse |= strcmp(name, refused_names[k]) == 0;
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[i], .device = "cuda"};
    mk_candidate_list l = {0};
    err.text[0] = '\0';
    int rc = mk_builtin_cuda_propose(&req, &l, &err);
    if (refuse) {
      MK_CHECK_INT(rc, ==, MK_EUNSUPPORTED);
      MK_CHECK_INT(l.n, ==, 0);
      if (strstr(err.text, "no kernel for torch.") || strstr(err.text, "order other than")) refused++;
      else fprintf(stderr, "    %s: %s\n", name, err.text);
    } else if (rc == 0 && l.n > 0) {
      ok++;
    }
    mk_candidate_list_free(&l);
  }
  MK_CHECK_INT(refused, ==, nrefused);
  MK_CHECK_INT(ok, ==, expect_ok);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(propose_cuda, reductions_it_has_no_kernel_for_are_refused) {
  static const char *const norms[] = {"argmax", "argmin", "argmax_2", "norm_2", "clamp_argmax", "clamp_argmin"};
  check_cuda_reductions("vector_norms.json", norms, 6, 3); /* norm_div, norm, vector_norm */
  static const char *const scans[] = {"mul_cumsum", "cumsum", "mul_cumprod", "mul_cumsum_2", "flip_cumsum"};
  check_cuda_reductions("scans.json", scans, 5, 1); /* the lone add */
  /* einsums: their permuted, merged operands are the Triton emitter's only */
  static const char *const einsums[] = {"einsum_relu", "einsum", "einsum_2", "einsum_3", "einsum_4"};
  check_cuda_reductions("einsum.json", einsums, 5, 0);
  static const char *const triangles[] = {"tril", "triu", "mul_tril_add", "matmul_triu"};
  check_cuda_reductions("triangles.json", triangles, 4, 0);
  static const char *const losses[] = {"mse_loss",   "mul_l1_loss", "smooth_l1_loss",
                                       "huber_loss", "log_kl_div",  "kl_div"};
  check_cuda_reductions("losses.json", losses, 6, 1); /* the lone add */
}

/* The CUDA candidates of fixture `fixture`'s subkernel `name` (list freed by the caller). */
static void gemm_candidates(const char *fixture, const char *name, mk_graph **g, mk_partition *p,
                            mk_candidate_list *l) {
  *g = load("propose", fixture);
  MK_REQUIRE(*g != NULL);
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(*g, p, &err) == 0);
  int at = -1;
  for (int i = 0; i < p->nsubkernels; i++)
    if (strcmp(p->subkernels[i].name, name) == 0) at = i;
  MK_REQUIRE(at >= 0);
  mk_propose_request req = {.graph = *g, .subkernel = &p->subkernels[at], .device = "cuda"};
  if (mk_builtin_cuda_propose(&req, l, &err) != 0) fprintf(stderr, "    %s: %s\n", name, err.text);
  MK_REQUIRE(l->n == 3);
}

/* A GEMM subkernel: three variants, 3xTF32 first; one kernel (tensor cores,
 * the split into TF32 high and low parts, bias and the elementwise epilogue
 * applied from the accumulators); operands read through their strides. */
MK_TEST(propose_cuda, gemm_variants_split_and_fuse_the_epilogue) {
  mk_graph *g = NULL;
  mk_partition p = {0};
  mk_candidate_list l = {0};
  gemm_candidates("linear_epilogue.json", "linear_sigmoid_mul_add", &g, &p, &l);
  MK_CHECK_STR(l.items[0].name, "cuda_gemm128x128_3xtf32");
  MK_CHECK_STR(l.items[1].name, "cuda_gemm64x64_3xtf32");
  MK_CHECK_STR(l.items[2].name, "cuda_gemm128x128_tf32");
  for (int i = 0; i < l.n; i++) {
    const char *src = l.items[i].source;
    MK_CHECK(strstr(src, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") != NULL);
    MK_CHECK(strstr(src, "cvt.rna.tf32.f32") != NULL);
    /* one kernel: the linear, its bias and the epilogue (no elementwise kernel of its own) */
    MK_CHECK(strstr(src, "\"_k1_gemm_linear\": ") != NULL);
    MK_CHECK(strstr(src, "\"_k2_") == NULL);
    MK_CHECK(strstr(src, "const float acc_v = acc[i][j][q] + bias[gn * sbias];") != NULL);
    MK_CHECK(strstr(src, "const float r_v4 = acc_v;") != NULL);
    MK_CHECK(strstr(src, "mk_sigmoid(r_v4)") != NULL);
    MK_CHECK(strstr(src, "mk_relu(v7)") != NULL);
    /* linear's [N, K] weight by its strides */
    MK_CHECK(strstr(src, "sbk4, sbn4 = b4.stride(1), b4.stride(0)") != NULL);
  }
  /* 3xTF32: the remainder of each operand, and lo*hi + hi*lo before hi*hi */
  MK_CHECK(strstr(l.items[0].source, "mk_gemm_tile<128, 128, 32, 64, 32, true>") != NULL);
  MK_CHECK(strstr(l.items[0].source, "al[i][r] = mk_tf32(x[r] - __uint_as_float(ah[i][r]))") != NULL);
  MK_CHECK(strstr(l.items[0].source, "bl[j][r] = mk_tf32(y[r] - __uint_as_float(bh[j][r]))") != NULL);
  MK_CHECK(strstr(l.items[0].source, "mk_mma_tf32(acc[i][j], al[i], bh[j]);\n"
                                     "            mk_mma_tf32(acc[i][j], ah[i], bl[j]);") != NULL);
  MK_CHECK(strstr(l.items[1].source, "mk_gemm_tile<64, 64, 32, 32, 32, true>") != NULL);
  MK_CHECK(strstr(l.items[1].source, "(128,)") != NULL); /* 4 warps */
  MK_CHECK(strstr(l.items[2].source, "mk_gemm_tile<128, 128, 32, 64, 32, false>") != NULL);
  MK_CHECK(strstr(l.items[0].notes, "3xTF32") != NULL);
  MK_CHECK(strstr(l.items[2].notes, "TF32") != NULL && strstr(l.items[2].notes, "3xTF32") == NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);

  /* bmm of b and b.transpose(1, 2): both by their strides, no copy; the
   * epilogue (- 1.0) fused. */
  gemm_candidates("matmul_bmm.json", "bmm_sub", &g, &p, &l);
  MK_CHECK(strstr(l.items[0].source, "sbb7, sbk7, sbn7 = b7.stride()") != NULL);
  MK_CHECK(strstr(l.items[0].source, ".contiguous()\n    b7") == NULL);
  MK_CHECK(strstr(l.items[0].source, "(r_v7 - 1.0f)") != NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);

  /* attention's 4-d matmul over (batch, heads) views: two batch dims; a GEMM
   * value read elsewhere (the split projection) is stored by the kernel. */
  gemm_candidates("attention_4d.json", "matmul_mul", &g, &p, &l);
  MK_CHECK(strstr(l.items[0].source, "bat15, b1_15, m15, k15 = a15.shape") != NULL);
  MK_CHECK(strstr(l.items[0].source, "(r_v15 * 0.288675135f)") != NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);
  gemm_candidates("attention_4d.json", "linear_split", &g, &p, &l);
  MK_CHECK(strstr(l.items[0].source, "p_v4[offs] = acc_v;") != NULL);
  mk_candidate_list_free(&l);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* ---- on a GPU: every CUDA candidate against the PyTorch reference -------- */

static bool gpu_python_ready(void) {
  mk_buf cmd;
  mk_buf_init(&cmd, 4096);
  mk_buf_printf(&cmd, "'%s' -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' "
                      ">/dev/null 2>&1", MK_DEFAULT_PYTHON);
  int rc = system(mk_buf_cstr(&cmd));
  mk_buf_free(&cmd);
  return rc == 0;
}

static void write_file(const char *dir, const char *name, const void *data, size_t len) {
  mk_buf path;
  mk_buf_init(&path, 8192);
  mk_buf_printf(&path, "%s/%s", dir, name);
  MK_CHECK(path.err == 0 && mk_write_file(mk_buf_cstr(&path), data, len) == 0);
  mk_buf_free(&path);
}

/* Writes reference, candidates and their cubins of every subkernel of a
 * fixture under dir; appends the subkernels to the harness manifest. */
static void write_gpu_cases(mk_backend *b, const char *fixture, const char *dir, cJSON *sks, int *ncand) {
  mk_graph *g = load("propose", fixture);
  MK_REQUIRE(g != NULL);
  mk_partition p = {0};
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  for (int s = 0; s < p.nsubkernels; s++) {
    const mk_subkernel *sk = &p.subkernels[s];
    mk_candidate_list l = {0};
    mk_propose_request req = {.graph = g, .subkernel = sk, .device = "cuda"};
    if (mk_builtin_cuda_propose(&req, &l, &err) != 0) continue;
    char rel[300], skdir[2400];
    snprintf(rel, sizeof rel, "%.200s_sk%d", fixture, s);
    snprintf(skdir, sizeof skdir, "%s/%s", dir, rel);
    mkdir(skdir, 0700);
    mk_candidate ref = {0};
    MK_REQUIRE(mk_reference_candidate(g, sk, &ref, &err) == 0);
    write_file(skdir, "reference.py", ref.source, strlen(ref.source));
    mk_candidate_free(&ref);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", sk->name);
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
      cJSON_AddItemToArray(ins, in);
    }
    cJSON *cands = cJSON_AddArrayToObject(o, "candidates");
    for (int i = 0; i < l.n; i++) {
      const char *src;
      size_t len;
      int first;
      MK_REQUIRE(mk_backend_candidate_source(l.items[i].source, &src, &len, &first, &err) == 0);
      char *cuda = mk_strndup(src, len);
      mk_backend_result r;
      MK_REQUIRE(mk_backend_compile(b, cuda, "candidate.cu", NULL, first - 1, &r, &err) == 0);
      free(cuda);
      MK_CHECK(r.ok);
      char file[300];
      snprintf(file, sizeof file, "%s.py", l.items[i].name);
      write_file(skdir, file, l.items[i].source, strlen(l.items[i].source));
      snprintf(file, sizeof file, "%s.cubin", l.items[i].name);
      write_file(skdir, file, r.image, r.image_len);
      snprintf(file, sizeof file, "%s.py", l.items[i].name);
      cJSON_AddItemToArray(cands, cJSON_CreateString(file));
      (*ncand)++;
      mk_backend_result_free(&r);
    }
    cJSON_AddItemToArray(sks, o);
    mk_candidate_list_free(&l);
  }
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Writes the cases of `names` under dir (created): manifest.json, and per
 * subkernel with CUDA candidates its reference, candidates and cubins.
 * Returns the number of candidates written. */
static int write_case_dir(mk_backend *b, const char *dir, const char *const *names, size_t nnames) {
  mkdir(dir, 0700);
  cJSON *man = cJSON_CreateObject();
  cJSON *sks = cJSON_AddArrayToObject(man, "subkernels");
  int ncand = 0;
  for (size_t f = 0; f < nnames; f++) write_gpu_cases(b, names[f], dir, sks, &ncand);
  char *text = cJSON_PrintUnformatted(man);
  write_file(dir, "manifest.json", text, strlen(text));
  free(text);
  cJSON_Delete(man);
  return ncand;
}

/* The fixtures with norms and pools (tests/python/test_cuda_norm_pool.py runs their
 * CUDA candidates on a GPU, in NCHW and channels_last). */
static const char *const norm_pool_fixtures[] = {"norms.json", "pools.json", "norm_pools.json",
                                                 "normalize_rows.json", "conv_bn_tails.json",
                                                 "conv_norm_tails.json"};

/* Runs on the device (skips here): tests/python/propose_harness.py compares
 * every CUDA candidate's outputs and in-place updates with the reference. */
MK_TEST(propose_cuda, gpu_candidates_match_the_reference) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &b, &err)) {
    mk_test_skip(err.text);
    return;
  }
  if (!gpu_python_ready()) {
    mk_backend_close(b);
    mk_test_skip("CUDA candidates need a GPU (torch sees none)");
    return;
  }
  char dir[256];
  snprintf(dir, sizeof dir, "/tmp/mk_test_propose_cuda.%d", (int)getpid());
  static const char *const names[] = {"ew_broadcast.json", "reductions.json", "conv_chain.json",
                                      "cost_ops.json", "repeated_blocks.json", "norms.json",
                                      "pools.json", "norm_pools.json", "normalize_rows.json",
                                      "vector_norms.json"};
  int ncand = write_case_dir(b, dir, names, sizeof names / sizeof names[0]);
  mk_buf cmd;
  mk_buf_init(&cmd, 8192);
  mk_buf_printf(&cmd, "PYTHONPATH='%s/engine/worker/python' '%s' '%s/tests/python/propose_harness.py' '%s' 2>&1",
                mk_test_repo_dir(), MK_DEFAULT_PYTHON, mk_test_repo_dir(), dir);
  FILE *pipe = popen(mk_buf_cstr(&cmd), "r");
  MK_REQUIRE(pipe != NULL);
  char line[16384];
  int ok = 0, bad = 0;
  while (fgets(line, sizeof line, pipe)) {
    if (strstr(line, "\"ok\": true")) ok++;
    else {
      bad++;
      fprintf(stderr, "    %s", line);
    }
  }
  MK_CHECK(pclose(pipe) == 0);
  fprintf(stderr, "    %d/%d CUDA candidates match the reference on the GPU\n", ok, ncand);
  MK_CHECK_INT(ok, ==, ncand);
  MK_CHECK_INT(bad, ==, 0);
  mk_buf_free(&cmd);
  mk_backend_close(b);
}

/* The CUDA norm and pool candidates of the fixtures, written for the GPU test
 * (tests/python/test_cuda_norm_pool.py): into $MK_CUDA_NORM_POOL_OUT when set
 * (the test runs this binary so), else into a temporary folder that is
 * removed. Needs NVRTC (the cubins), not a GPU. Checks that every norm and
 * pool kind of the fixtures made CUDA candidates, so the GPU test has them. */
MK_TEST(propose_cuda, norm_pool_cases_for_the_gpu) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &b, &err)) {
    mk_test_skip(err.text);
    return;
  }
  const char *keep = getenv("MK_CUDA_NORM_POOL_OUT");
  char dir[1024];
  if (keep && *keep) snprintf(dir, sizeof dir, "%s", keep);
  else snprintf(dir, sizeof dir, "/tmp/mk_test_cuda_norm_pool.%d", (int)getpid());
  int ncand = write_case_dir(b, dir, norm_pool_fixtures, sizeof norm_pool_fixtures / sizeof norm_pool_fixtures[0]);
  char path[1200], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &len) == 0);
  /* Every kind has its subkernel: the subkernel names are the ops'. */
  static const char *const kinds[] = {"\"batch_norm", "\"layer_norm", "\"group_norm", "\"instance_norm",
                                      "\"rms_norm", "\"normalize", "\"max_pool2d", "\"max_pool3d",
                                      "\"avg_pool2d", "\"avg_pool3d", "\"adaptive_avg_pool2d",
                                      "\"adaptive_max_pool2d", "\"max_pool1d", "\"adaptive_avg_pool3d"};
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
    if (!strstr(text, kinds[i])) fprintf(stderr, "    no CUDA case for %s\n", kinds[i] + 1);
    MK_CHECK(strstr(text, kinds[i]) != NULL);
  }
  /* Long rows: the split-rows variant is among them. */
  MK_CHECK(strstr(text, "cuda_t256_split32.py") != NULL);
  free(text);
  fprintf(stderr, "    %d CUDA norm / pool candidates written to %s\n", ncand, dir);
  MK_CHECK(ncand >= 100);
  if (!(keep && *keep)) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    MK_CHECK(system(cmd) == 0);
  }
  mk_backend_close(b);
}

/* The fixtures with GEMMs (tests/python/test_cuda_gemm.py runs their CUDA
 * candidates on a GPU): linear with bias and a fused epilogue, matmul of a
 * transposed weight, bmm of a transposed operand, attention's 4-d matmuls. */
static const char *const gemm_fixtures[] = {"linear_epilogue.json", "matmul_bmm.json", "attention_4d.json"};

/* The CUDA GEMM candidates of the fixtures, written for the GPU test
 * (tests/python/test_cuda_gemm.py): into $MK_CUDA_GEMM_OUT when set, else
 * into a temporary folder that is removed. Needs NVRTC (the cubins), not a
 * GPU. Every GEMM subkernel gets the three GEMM variants, 3xTF32 first. */
MK_TEST(propose_cuda, gemm_cases_for_the_gpu) {
  mk_backend *b = NULL;
  mk_errmsg err = {{0}};
  if (mk_backend_open(NULL, &b, &err)) {
    mk_test_skip(err.text);
    return;
  }
  const char *keep = getenv("MK_CUDA_GEMM_OUT");
  char dir[1024];
  if (keep && *keep) snprintf(dir, sizeof dir, "%s", keep);
  else snprintf(dir, sizeof dir, "/tmp/mk_test_cuda_gemm.%d", (int)getpid());
  int ncand = write_case_dir(b, dir, gemm_fixtures, sizeof gemm_fixtures / sizeof gemm_fixtures[0]);
  char path[1200], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  MK_REQUIRE(mk_read_file(path, 1 << 24, &text, &len) == 0);
  MK_CHECK(strstr(text, "\"candidates\":[\"cuda_gemm128x128_3xtf32.py\",\"cuda_gemm64x64_3xtf32.py\","
                        "\"cuda_gemm128x128_tf32.py\"]") != NULL);
  free(text);
  fprintf(stderr, "    %d CUDA GEMM candidates written to %s\n", ncand, dir);
  MK_CHECK(ncand >= 9);
  if (!(keep && *keep)) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    MK_CHECK(system(cmd) == 0);
  }
  mk_backend_close(b);
}
