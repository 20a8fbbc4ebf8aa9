/* test_export.c — the C++ export (engine/export, docs/export.md): reading a
 * composed ModelNew, ATen C++ for recorded calls, the generated project.
 * Building the project against libtorch and running its test against the
 * PyTorch Model is tests/suites/65-export.sh (slow: one libtorch build). */
#include "export_internal.h"
#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_decompose.h"
#include "mk_export.h"
#include "mk_test.h"
#include "support.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>


static const char *TRITON_CAND =
    "import torch\nimport triton\nimport triton.language as tl\n\n"
    "@triton.jit\ndef _k(x_ptr, n, BLOCK: tl.constexpr):\n    pass\n\n"
    "def run(x):\n    return torch.relu(x)\n";

static const char *CUDA_CAND =
    "import torch\n\nMK_BACKEND = \"cuda\"\nMK_CUDA_SOURCE = r\"\"\"\n"
    "extern \"C\" __global__ void _k1_ew(const float *__restrict__ p_x0, float *__restrict__ p_v3, long long numel) {\n"
    "  const long long offs = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  if (offs >= numel) return;\n  p_v3[offs] = fmaxf(p_x0[offs], 0.0f);\n}\n\"\"\"\n"
    "MK_CUDA_KERNELS = {\"_k1_ew\": \"ffq\"}\n\n\n"
    "def run(x0):\n    v3 = torch.empty_like(x0)\n    n = v3.numel()\n"
    "    _mk_cuda.launch(\"_k1_ew\", ((n + 255) // 256,), (256,), (x0.contiguous(), v3, n))\n    return v3\n";

/* Composes mk_test_small_graph_json with `cand` (may be NULL) for the first subkernel. */
static char *compose_with(const mk_candidate *cand) {
  mk_errmsg err;
  mk_graph *g = NULL;
  mk_partition p = {0};
  if (mk_graph_from_json(mk_test_small_graph_json, strlen(mk_test_small_graph_json), &g, &err) ||
      mk_decompose_initial(g, &p, &err))
    return NULL;
  const mk_candidate **chosen = calloc((size_t)p.nsubkernels + 1, sizeof *chosen);
  chosen[0] = cand;
  mk_buf out;
  mk_buf_init(&out, 0);
  mk_compose_options opt = {.module_source = mk_test_small_source, .source_path = "some dir/level2/1_Small (v2).py"};
  int rc = mk_compose_modelnew(g, &p, chosen, &opt, &out, &err);
  free(chosen);
  mk_partition_free(&p);
  mk_graph_free(g);
  return rc ? (mk_buf_free(&out), NULL) : mk_buf_steal(&out, NULL);
}

MK_TEST(export, reads_a_pytorch_composition) {
  char *text = compose_with(NULL);
  MK_REQUIRE(text != NULL);
  mk_export_modelnew m;
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_export_read_modelnew(text, &m, &err), ==, 0);
  MK_CHECK_STR(m.class_name, "Model");
  MK_CHECK_STR(m.source_path, "some dir/level2/1_Small (v2).py");
  MK_CHECK_STR(m.module_source, mk_test_small_source);
  MK_CHECK(m.nsubkernels >= 1);
  for (int i = 0; i < m.nsubkernels; i++) {
    MK_CHECK_INT(m.subkernels[i].backend, ==, MK_EXPORT_PYTORCH);
    MK_CHECK_STR(m.subkernels[i].variant, "reference");
    MK_CHECK_INT(m.subkernels[i].section, ==, -1);
  }
  MK_CHECK(!m.plain);
  mk_export_modelnew_free(&m);
  free(text);
}

MK_TEST(export, tells_triton_and_cuda_sections) {
  mk_candidate triton = {.name = "triton_relu", .origin = "builtin", .source = (char *)TRITON_CAND};
  mk_candidate cuda = {.name = "cuda_t256", .origin = "builtin", .source = (char *)CUDA_CAND};
  const mk_candidate *cands[] = {&triton, &cuda};
  const mk_export_backend want[] = {MK_EXPORT_TRITON, MK_EXPORT_CUDA};
  for (int c = 0; c < 2; c++) {
    char *text = compose_with(cands[c]);
    MK_REQUIRE(text != NULL);
    mk_export_modelnew m;
    mk_errmsg err = {{0}};
    MK_CHECK_INT(mk_export_read_modelnew(text, &m, &err), ==, 0);
    MK_REQUIRE(m.nsubkernels >= 1);
    MK_CHECK_INT(m.subkernels[0].backend, ==, want[c]);
    MK_CHECK_STR(m.subkernels[0].variant, cands[c]->name);
    MK_CHECK_INT(m.subkernels[0].section, ==, 0);
    /* the module ends where the kernels begin, whatever precedes them */
    MK_CHECK_STR(m.module_source, mk_test_small_source);
    for (int i = 1; i < m.nsubkernels; i++) MK_CHECK_INT(m.subkernels[i].backend, ==, MK_EXPORT_PYTORCH);
    mk_export_modelnew_free(&m);
    free(text);
  }
}

MK_TEST(export, a_kernel_section_is_never_missed) {
  /* a header line that cannot be read (a name past the reader's bound):
   * the section is still found, and its language told */
  mk_candidate triton = {.name = "triton_relu", .origin = "builtin", .source = (char *)TRITON_CAND};
  char *text = compose_with(&triton);
  MK_REQUIRE(text != NULL);
  char *line = strstr(text, "#   sk0 ");
  MK_REQUIRE(line != NULL);
  line[4] = 'X'; /* "#   Xk0 ...": no longer a subkernel line */
  mk_export_modelnew m;
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_export_read_modelnew(text, &m, &err), ==, 0);
  bool found = false;
  for (int i = 0; i < m.nsubkernels; i++)
    found |= m.subkernels[i].section == 0 && m.subkernels[i].backend == MK_EXPORT_TRITON;
  MK_CHECK(found);
  mk_export_modelnew_free(&m);
  free(text);
}

MK_TEST(export, reads_the_plain_fallback_and_refuses_other_files) {
  char *plain = mk_strdup_printf("# ModelNew composed by MKEvolve: no subkernel could be replaced.\n%s"
                                 "\n\nclass ModelNew(Model):\n    pass\n", mk_test_small_source);
  mk_export_modelnew m;
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_export_read_modelnew(plain, &m, &err), ==, 0);
  MK_CHECK(m.plain);
  MK_CHECK_STR(m.class_name, "Model");
  MK_CHECK(m.module_source && strncmp(m.module_source, mk_test_small_source, strlen(mk_test_small_source)) == 0);
  MK_CHECK_INT(m.nsubkernels, ==, 0);
  mk_export_modelnew_free(&m);
  free(plain);
  MK_CHECK_INT(mk_export_read_modelnew("import torch\nclass ModelNew: pass\n", &m, &err), ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "not a ModelNew composed by MKEvolve") != NULL);
  mk_export_modelnew_free(&m);
  MK_CHECK_INT(mk_export_read_modelnew("# ModelNew composed by MKEvolve 0.1.0 from a.py (class Model).\n", &m, &err),
               ==, MK_EPARSE);
  mk_export_modelnew_free(&m);
}

/* The C++ of one recorded call, from the node's JSON (op, args, kwargs). */
static char *call_of(const char *op, const char *args, const char *kwargs, int rc_want, mk_errmsg *err) {
  char *json = mk_strdup_printf(
      "{\"schema\":1,\"file\":\"/tmp/m.py\",\"class\":\"Model\",\"source_sha256\":\"0\",\"batch\":null,"
      "\"values\":[{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[2,4,6,6],\"dtype\":\"float32\"},"
      "{\"id\":1,\"kind\":\"input\",\"index\":1,\"shape\":[2,4,6,6],\"dtype\":\"float32\"},"
      "{\"id\":2,\"kind\":\"node\",\"producer\":0,\"shape\":[2,4,6,6],\"dtype\":\"float32\"}],"
      "\"nodes\":[{\"id\":0,\"op\":\"%s\",\"args\":%s,\"kwargs\":%s,\"inputs\":%s,\"outputs\":[2],"
      "\"out\":{\"t\":2},\"mutates\":[],\"span\":{\"line\":7,\"col\":0,\"end_line\":7,\"end_col\":9}}],"
      "\"outputs\":{\"t\":2},\"forward\":{\"line\":6,\"end_line\":7},\"statements\":[],\"stats\":{}}",
      op, args, kwargs, strstr(args, "{\"t\":1}") || strstr(kwargs, "{\"t\":1}") ? "[0,1]" : "[0]");
  mk_graph *g = NULL;
  char *out = NULL;
  if (mk_graph_from_json(json, strlen(json), &g, err) == 0) {
    mk_buf b;
    mk_buf_init(&b, 0);
    int rc = mk_export_call_cpp(g, &g->nodes[0], &b, err);
    if (rc == rc_want) out = rc ? mk_strdup(err->text) : mk_buf_steal(&b, NULL);
    mk_buf_free(&b);
  }
  mk_graph_free(g);
  free(json);
  return out;
}

MK_TEST(export, writes_recorded_calls_as_aten) {
  static const char *const cases[][4] = {
      {"torch.nn.functional.conv2d", "[{\"t\":0},{\"t\":1}]", "{\"padding\":1,\"groups\":2}",
       "at::conv2d(v0, v1, ::std::optional<at::Tensor>(), std::vector<int64_t>{int64_t(1), int64_t(1)}, "
       "std::vector<int64_t>{int64_t(1), int64_t(1)}, std::vector<int64_t>{int64_t(1), int64_t(1)}, int64_t(2))"},
      {"torch.Tensor.__rmul__", "[{\"t\":0},{\"float\":2.0}]", "{}", "at::mul(v0, at::Scalar(2.0))"},
      {"torch.Tensor.__rsub__", "[{\"t\":0},1]", "{}", "at::rsub(v0, at::Scalar(int64_t(1)))"},
      {"torch.Tensor.__rtruediv__", "[{\"t\":0},0.5]", "{}", "at::mul(at::reciprocal(v0), at::Scalar(0.5))"},
      {"torch.sum", "[{\"t\":0}]", "{\"dim\":{\"tuple\":[1,2]},\"keepdim\":true}",
       "at::sum(v0, std::vector<int64_t>{int64_t(1), int64_t(2)}, true, ::std::nullopt)"},
      {"torch.Tensor.view", "[{\"t\":0},2,-1]", "{}", "v0.view(std::vector<int64_t>{int64_t(2), int64_t(-1)})"},
      {"torch.Tensor.view", "[{\"t\":0},{\"size\":[2,144]}]", "{}", "v0.view(std::vector<int64_t>{int64_t(2), int64_t(144)})"},
      {"torch.nn.functional.batch_norm", "[{\"t\":0},{\"t\":1},{\"t\":1},null,null,true,0.1,1e-05]", "{}",
       "at::batch_norm(v0, ::std::optional<at::Tensor>(), ::std::optional<at::Tensor>(), v1, v1, true, 0.10000000000000001, "
       "1.0000000000000001e-05, true)"},
      {"torch.nn.functional.max_pool2d", "[{\"t\":0},2]", "{}",
       "at::max_pool2d(v0, std::vector<int64_t>{int64_t(2), int64_t(2)}, at::IntArrayRef{}, "
       "std::vector<int64_t>{int64_t(0), int64_t(0)}, std::vector<int64_t>{int64_t(1), int64_t(1)}, false)"},
      {"torch.nn.functional.gelu", "[{\"t\":0}]", "{\"approximate\":\"tanh\"}", "at::gelu(v0, \"tanh\")"},
      {"torch.clamp", "[{\"t\":0}]", "{\"max\":{\"float\":2.0}}",
       "at::clamp(v0, ::std::optional<at::Scalar>(), at::Scalar(2.0))"},
      {"torch.nn.functional.softmax", "[{\"t\":0},1,3]", "{}", "at::softmax(v0, int64_t(1), ::std::nullopt)"},
      {"torch.cat", "[{\"list\":[{\"t\":0},{\"t\":1}]}]", "{\"dim\":1}",
       "at::cat(std::vector<at::Tensor>{v0, v1}, int64_t(1))"},
      {"torch.Tensor.__getitem__", "[{\"t\":0},{\"tuple\":[{\"slice\":[null,1,null]},0,null,{\"ellipsis\":null}]}]", "{}",
       "v0.index({at::indexing::Slice(at::indexing::None, int64_t(1), at::indexing::None), int64_t(0), "
       "at::indexing::None, at::indexing::Ellipsis})"},
      {"torch.max", "[{\"t\":0},{\"t\":1}]", "{}", "at::maximum(v0, v1)"},
      {"torch.Tensor.add_", "[{\"t\":0},{\"t\":1}]", "{}", "at::add(v0, v1, at::Scalar(int64_t(1)))"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mk_errmsg err = {{0}};
    char *got = call_of(cases[i][0], cases[i][1], cases[i][2], 0, &err);
    MK_CHECK_STR(got, cases[i][3]);
    if (got == NULL) fprintf(stderr, "  %s: %s\n", cases[i][0], err.text);
    free(got);
  }
}

MK_TEST(export, names_what_it_cannot_write) {
  static const char *const cases[][4] = {
      {"torch.fft.rfft", "[{\"t\":0}]", "{}", "torch.fft.rfft (line 7) has no C++ (ATen) form"},
      {"torch.nn.functional.max_pool2d", "[{\"t\":0},2]", "{\"return_indices\":true}", "return_indices=True"},
      {"torch.nn.functional.conv2d", "[{\"t\":0},{\"t\":1}]", "{\"padding\":\"same\"}", "argument padding"},
      {"torch.relu", "[{\"t\":0}]", "{\"bogus\":1}", "keyword argument 'bogus'"},
      {"builtins.print", "[{\"t\":0}]", "{}", "builtins.print"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mk_errmsg err = {{0}};
    char *got = call_of(cases[i][0], cases[i][1], cases[i][2], MK_EUNSUPPORTED, &err);
    MK_CHECK(got != NULL && strstr(got, cases[i][3]) != NULL);
    if (got == NULL || strstr(got, cases[i][3]) == NULL) fprintf(stderr, "  %s: %s\n", cases[i][0], err.text);
    free(got);
  }
}

MK_TEST(export, every_table_row_is_consistent) {
  /* every $name of a template is a parameter of its row, and every row's
   * parameters parse: a call with only the required tensors must emit */
  for (int i = 0; i < export_op_count(); i++) {
    const export_op *op = export_op_at(i);
    MK_REQUIRE(op != NULL);
    for (const char *p = strchr(op->tmpl, '$'); p; p = strchr(p + 1, '$')) {
      char name[64];
      size_t n = strspn(p + 1, "abcdefghijklmnopqrstuvwxyz0123456789_");
      snprintf(name, sizeof name, "%.*s:", (int)n, p + 1);
      bool found = strncmp(op->params, name, strlen(name)) == 0;
      char spaced[70];
      snprintf(spaced, sizeof spaced, " %s", name);
      found = found || strstr(op->params, spaced) != NULL;
      MK_CHECK(found);
      if (!found) fprintf(stderr, "  row %s: $%s\n", op->name, name);
    }
  }
}

MK_TEST(export, forward_and_project) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(mk_test_small_graph_json, strlen(mk_test_small_graph_json), &g, &err) == 0);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_export_forward_cpp(g, &b, &err), ==, 0);
  const char *cpp = mk_buf_cstr(&b);
  MK_CHECK(strstr(cpp, "at::Tensor v0 = inputs.at(0);") != NULL);
  MK_CHECK(strstr(cpp, "at::Tensor v1 = w.at(\"fc.weight\");") != NULL);
  MK_CHECK(strstr(cpp, "at::Tensor v4 = at::linear(v3, v1, v2);") != NULL);
  MK_CHECK(strstr(cpp, "return {v6, v3};") != NULL);
  mk_buf_free(&b);

  char dir[] = "/tmp/mk_export_testXXXXXX";
  MK_REQUIRE(mkdtemp(dir) != NULL);
  char *text = compose_with(NULL);
  mk_export_modelnew m;
  MK_REQUIRE(text && mk_export_read_modelnew(text, &m, &err) == 0);
  mk_export_project p = {.dir = dir, .ns = "mk_small", .problem_file = "problem.py", .class_name = "Model",
                         .composed_from = "/x/ModelNew.py", .g = g, .m = &m, .device = "cpu",
                         .atol = 1e-4, .rtol = 1e-4, .seed = 3};
  MK_CHECK_INT(mk_export_write_project(&p, &err), ==, 0);
  static const char *const files[] = {"CMakeLists.txt", "mk_small.h", "mk_small.cpp", "mk_small_test.cpp",
                                      "export.json", "README.md", "data"};
  for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, files[i]);
    MK_CHECK(access(path, F_OK) == 0);
  }
  char path[512], *manifest = NULL;
  snprintf(path, sizeof path, "%s/export.json", dir);
  MK_REQUIRE(mk_read_file(path, 1 << 20, &manifest, NULL) == 0);
  cJSON *j = cJSON_Parse(manifest);
  MK_CHECK_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tensors")), ==, 2);
  MK_CHECK_INT(cJSON_GetObjectItem(j, "inputs")->valueint, ==, 1);
  MK_CHECK_INT(cJSON_GetObjectItem(j, "seed")->valueint, ==, 3);
  MK_CHECK_STR(cJSON_GetObjectItem(j, "problem")->valuestring, "problem.py");
  cJSON_Delete(j);
  free(manifest);
  static const char *const all[] = {"CMakeLists.txt", "mk_small.h", "mk_small.cpp", "mk_small_test.cpp",
                                    "export.json", "README.md"};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, all[i]);
    unlink(path);
  }
  snprintf(path, sizeof path, "%s/data", dir);
  rmdir(path);
  rmdir(dir);
  mk_export_modelnew_free(&m);
  free(text);
  mk_graph_free(g);
}

MK_TEST(export, namespace_from_path) {
  char ns[80];
  mk_export_namespace_for("../shared/kernelbench/level2/40_Matmul_Scaling.py", ns, sizeof ns);
  MK_CHECK_STR(ns, "mk_40_Matmul_Scaling");
  mk_export_namespace_for("a/b c-d.py", ns, sizeof ns);
  MK_CHECK_STR(ns, "mk_b_c_d");
  mk_export_namespace_for("", ns, sizeof ns);
  MK_CHECK_STR(ns, "mk_model");
}

/* ---- Triton subkernels compiled in (export_triton.c) ------------------------------------ */

/* A plan as mkworker.export_triton writes it for subkernel 0 of `sk` (which
 * reads nin tensors and returns nout): an at::empty, an add, one launch of
 * kernel 0 (grid gy on y), the sum returned for every output. */
static char *triton_plan(const mk_subkernel *sk, const char *cubin_b64, int gy, int index) {
  int nin = sk->ninputs;
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_buf_puts(&b, "{\"schema\": \"mkevolve.export-triton/1\", \"arch\": 90, \"triton\": \"3.9.0\", \"device\": \"cpu\",\n"
                  " \"subkernels\": [{\"index\": ");
  mk_buf_printf(&b, "%d, \"name\": \"x\", \"inputs\": [", index);
  for (int i = 0; i < nin; i++)
    mk_buf_printf(&b, "%s{\"pos\": %d, \"tensor\": true, \"var\": %d, \"sizes\": [2, 3], \"strides\": [3, 1], "
                      "\"dtype\": \"float32\"}", i ? ", " : "", i, i);
  mk_buf_printf(&b, "], \"steps\": [\n"
                    "  {\"op\": \"empty\", \"overload\": \"memory_format\", \"args\": [[\"symints\", [2, 3]], "
                    "[\"dtype?\", \"float32\"], [\"layout?\", null], [\"device?\", \"device\"], [\"bool?\", null], "
                    "[\"memfmt?\", null]], \"result\": \"tensor\", \"out\": [%d]},\n"
                    "  {\"op\": \"add\", \"overload\": \"Tensor\", \"args\": [[\"tensor\", 0], [\"tensor\", %d], "
                    "[\"scalar\", {\"f\": 0.5}]], \"result\": \"tensor\", \"out\": [%d]},\n"
                    "  {\"launch\": {\"name\": \"k0\", \"qualname\": \"k0\"}, \"kernel\": 0, \"grid\": [3, %d, 1], "
                    "\"options\": {\"num_warps\": 4}, \"args\": [{\"name\": \"x_ptr\", \"t\": %d, \"dtype\": \"float32\", "
                    "\"align16\": true}, {\"name\": \"n\", \"v\": 12}, {\"name\": \"one\", \"v\": 1}, "
                    "{\"name\": \"BLOCK\", \"v\": 1024}]}],\n  \"outputs\": [",
                nin, nin, nin + 1, gy, nin + 1);
  for (int i = 0; i < sk->noutputs; i++) mk_buf_printf(&b, "%s%d", i ? ", " : "", nin + 1);
  mk_buf_printf(&b, "]}],\n \"kernels\": [{\"name\": \"k0\", \"cubin\": \"%s\", \"shared\": 0, \"num_warps\": 4, "
                    "\"arch\": 90, \"scratch\": 2, \"params\": [{\"name\": \"x_ptr\", \"type\": \"*fp32\", "
                    "\"ptx\": \"u64\", \"t\": %d, \"align16\": true}, {\"name\": \"n\", \"type\": \"i32\", "
                    "\"ptx\": \"u32\", \"v\": 12}]}]}\n",
                cubin_b64, nin + 1);
  return mk_buf_steal(&b, NULL);
}

static const char ELF_B64[] = "f0VMRgIBAQAAAAAA"; /* "\x7f" "ELF" 2 1 1 0 ... */

/* conv_chain with subkernel 0 Triton (the rest CUDA C++): its ModelNew, graph, and a plan for sk0. */
MK_TEST(export, triton_subkernels_are_replayed_from_their_plan) {
  mk_test_composed c;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_test_compose_cuda("conv_chain", true, &c, &err) == 0);
  mk_export_modelnew m;
  MK_REQUIRE(mk_export_read_modelnew(mk_buf_cstr(&c.out), &m, &err) == 0);
  MK_REQUIRE(m.subkernels[0].backend == MK_EXPORT_TRITON);
  const mk_subkernel *sk0 = &c.p.subkernels[0];
  char *plan = triton_plan(sk0, ELF_B64, 1, 0);
  mk_export_cuda cuda;
  int rc = mk_export_cuda_plan(c.g, &m, &cuda, &err);
  if (!rc) rc = mk_export_triton_plan(c.g, &m, plan, &cuda, &err);
  if (rc) fprintf(stderr, "plan: %s\n", err.text);
  MK_CHECK(rc == 0);
  MK_CHECK(mk_export_cuda_count(&cuda, MK_EXPORT_TRITON) == 1);
  MK_CHECK(cuda.nkernels == 1 && cuda.arch == 90 && cuda.kernels[0].size == 12);
  const mk_export_cuda_sk *t = NULL;
  for (int i = 0; i < cuda.n; i++)
    if (cuda.sks[i].backend == MK_EXPORT_TRITON) t = &cuda.sks[i];
  MK_REQUIRE(t != NULL);
  MK_CHECK(t->index == 0 && t->sk.nnodes == sk0->nnodes);
  const char *l = t->code.launcher.data ? t->code.launcher.data : "";
  char want[400];
  int nin = sk0->ninputs;
  snprintf(want, sizeof want, "at::Tensor t0 = mk_tr_input(v%d, {2, 3}, {3, 1}, at::ScalarType::Float, ", sk0->inputs[0]);
  MK_CHECK(strstr(l, want) != NULL);
  snprintf(want, sizeof want, "at::Tensor t%d = at::_ops::empty_memory_format::call(c10::fromIntArrayRefSlow("
                              "std::vector<int64_t>{2, 3}), at::ScalarType::Float, ::std::nullopt, dev, ::std::nullopt, "
                              "::std::nullopt);", nin);
  MK_CHECK(strstr(l, want) != NULL);
  snprintf(want, sizeof want, "at::Tensor t%d = at::_ops::add_Tensor::call(t0, t%d, at::Scalar(double(0.5)));", nin + 1,
           nin);
  MK_CHECK(strstr(l, want) != NULL);
  snprintf(want, sizeof want, "uint64_t a0 = mk_tr_ptr(t%d, true, 0, \"x_ptr\");", nin + 1);
  MK_CHECK(strstr(l, want) != NULL);
  MK_CHECK(strstr(l, "int32_t a1 = static_cast<int32_t>(12LL);") != NULL);
  MK_CHECK(strstr(l, "uint64_t a2 = 0;") && strstr(l, "uint64_t a3 = 0;") && !strstr(l, "a4"));
  MK_CHECK(strstr(l, "void *args[] = {&a0, &a1, &a2, &a3};") != NULL);
  MK_CHECK(strstr(l, "mk_tr_launch(0, dev, 3u, 1u, 1u, args);") != NULL);
  MK_CHECK(strstr(l, "const c10::cuda::CUDAGuard guard(dev);") != NULL);
  snprintf(want, sizeof want, "v%d = t%d;", sk0->outputs[0], nin + 1);
  MK_CHECK(strstr(l, want) != NULL);
  /* the forward replays it at its place; the project embeds the cubin */
  mk_buf fwd;
  mk_buf_init(&fwd, 0);
  MK_CHECK(mk_export_forward_cpp_cuda(c.g, &cuda, &fwd, &err) == 0);
  MK_CHECK(strstr(mk_buf_cstr(&fwd), "---- sk0 ") && strstr(mk_buf_cstr(&fwd), "Triton kernels"));
  mk_buf_free(&fwd);
  const char *keep = getenv("MK_EXPORT_TRITON_DIR");
  char dir[1024];
  if (keep && *keep) snprintf(dir, sizeof dir, "%s", keep);
  else snprintf(dir, sizeof dir, "/tmp/mk_test_export_triton.%d", (int)getpid());
  mk_export_project p = {.dir = dir, .ns = "mk_mixed", .problem_file = "problem.py", .class_name = "Model",
                         .composed_from = "conv_chain_modelnew.py", .g = c.g, .m = &m, .cuda = &cuda,
                         .device = "cuda", .atol = 1e-4, .rtol = 1e-4};
  rc = mk_export_write_project(&p, &err);
  if (rc) fprintf(stderr, "project: %s\n", err.text);
  MK_CHECK(rc == 0);
  char path[1200], *text = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/mk_mixed_triton.cpp", dir);
  MK_CHECK(mk_read_file(path, 1 << 24, &text, &len) == 0);
  MK_CHECK(text && strstr(text, "alignas(16) const unsigned char cubin0[] = {\n127,69,76,70,2,1,1,0,") &&
           strstr(text, "{\"k0\", cubin0, sizeof cubin0, 0, 4, 90},") && strstr(text, "extern const int nkernels = 1;"));
  free(text);
  snprintf(path, sizeof path, "%s/mk_mixed.cpp", dir);
  MK_CHECK(mk_read_file(path, 1 << 24, &text, &len) == 0);
  MK_CHECK(text && strstr(text, "#include <cuda.h>") && strstr(text, "#include \"mk_mixed_triton.h\"") &&
           strstr(text, "cuModuleLoadData(&mod, kd.cubin)") && strstr(text, "was compiled for sm_") &&
           strstr(text, "#include \"mk_mixed_kernels.h\""));
  free(text);
  snprintf(path, sizeof path, "%s/CMakeLists.txt", dir);
  MK_CHECK(mk_read_file(path, 1 << 20, &text, &len) == 0);
  MK_CHECK(text && strstr(text, "find_package(CUDAToolkit REQUIRED)") && strstr(text, "CUDA::cuda_driver") &&
           strstr(text, "mk_mixed.cpp mk_mixed_kernels.cu mk_mixed_triton.cpp"));
  free(text);
  snprintf(path, sizeof path, "%s/export.json", dir);
  MK_CHECK(mk_read_file(path, 1 << 20, &text, &len) == 0);
  MK_CHECK(text && strstr(text, "\"exported_as\":\t\"triton\"") && strstr(text, "\"arch\":\t90"));
  free(text);
  if (!(keep && *keep)) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    MK_CHECK(system(cmd) == 0);
  }
  mk_export_cuda_free(&cuda);
  free(plan);
  /* refusals: each names what it cannot do */
  struct {
    const char *cubin;
    int gy, index, rc;
    const char *says;
  } bad[] = {
      {"AAAAAAAA", 1, 0, MK_EPARSE, "its cubin is not an ELF file"},
      {ELF_B64, 70000, 0, MK_EUNSUPPORTED, "grid dimension 1 is 70000, beyond CUDA's limit"},
      {ELF_B64, 1, 5, MK_EPARSE, "the Triton plan has no recording of it"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    char *bp = triton_plan(sk0, bad[i].cubin, bad[i].gy, bad[i].index);
    memset(&cuda, 0, sizeof cuda);
    MK_CHECK_INT(mk_export_triton_plan(c.g, &m, bp, &cuda, &err), ==, bad[i].rc);
    if (!strstr(err.text, bad[i].says)) fprintf(stderr, "got: %s\n", err.text);
    MK_CHECK(strstr(err.text, bad[i].says) != NULL);
    mk_export_cuda_free(&cuda);
    free(bp);
  }
  memset(&cuda, 0, sizeof cuda);
  MK_CHECK_INT(mk_export_triton_plan(c.g, &m, "{\"schema\": \"other\"}", &cuda, &err), ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "not a plan of mkworker.export_triton") != NULL);
  mk_export_cuda_free(&cuda);
  mk_export_modelnew_free(&m);
  mk_test_composed_free(&c);
}
