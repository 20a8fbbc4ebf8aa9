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
