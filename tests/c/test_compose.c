/* test_compose.c — Python emission of recorded calls and ModelNew files.
 * The composed file is also run by the project's Python (when set up) and
 * compared against the original Model. */
#include "mk_buf.h"
#include "mk_compose.h"
#include "mk_decompose.h"
#include "mk_propose.h"
#include "mk_test.h"
#include "support.h"

#include "compose_internal.h"

#include <stdlib.h>
#include <unistd.h>


static int plain_namer(void *ctx, int vid, mk_buf *out) { return mk_buf_printf(out, "v%d", vid); }

static cJSON *parse(const char *s) { return cJSON_Parse(s); }

MK_TEST(compose, emits_every_argument_kind) {
  const char *cases[][2] = {
      {"null", "None"},
      {"true", "True"},
      {"3", "3"},
      {"0.5", "0.5"},
      {"{\"float\":2.0}", "2.0"},
      {"{\"float\":\"-inf\"}", "float('-inf')"},
      {"{\"t\":4}", "v4"},
      {"{\"tuple\":[1]}", "(1,)"},
      {"{\"tuple\":[1,2]}", "(1, 2)"},
      {"{\"list\":[{\"t\":1},{\"t\":2}]}", "[v1, v2]"},
      {"{\"slice\":[null,4,null]}", "slice(None, 4, None)"},
      {"{\"ellipsis\":true}", "..."},
      {"{\"dtype\":\"float16\"}", "torch.float16"},
      {"{\"pytype\":\"bool\"}", "bool"},
      {"{\"memory_format\":\"channels_last\"}", "torch.channels_last"},
      {"{\"size\":[2,3]}", "torch.Size([2, 3])"},
      {"\"mean\"", "\"mean\""},
      {"1e-05", "1e-05"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *a = parse(cases[i][0]);
    MK_REQUIRE(a != NULL);
    mk_buf b;
    mk_buf_init(&b, 0);
    mk_errmsg err = {{0}};
    MK_CHECK_INT(mk_pyemit_arg(a, plain_namer, NULL, &b, &err), ==, 0);
    MK_CHECK_STR(mk_buf_cstr(&b), cases[i][1]);
    mk_buf_free(&b);
    cJSON_Delete(a);
  }
}

MK_TEST(compose, refuses_opaque_and_injection) {
  const char *bad[] = {"{\"opaque\":\"<object>\"}", "{\"dtype\":\"float32); import os\"}",
                       "{\"pytype\":\"os\"}"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cJSON *a = parse(bad[i]);
    mk_buf b;
    mk_buf_init(&b, 0);
    mk_errmsg err = {{0}};
    MK_CHECK(mk_pyemit_arg(a, plain_namer, NULL, &b, &err) != 0);
    MK_CHECK(err.text[0] != '\0');
    mk_buf_free(&b);
    cJSON_Delete(a);
  }
}

MK_TEST(compose, self_paths) {
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_pyemit_self_path("layers.0.conv.weight", &b);
  MK_CHECK_STR(mk_buf_cstr(&b), "self.layers[0].conv.weight");
  mk_buf_free(&b);
}

MK_TEST(compose, prefixes_candidate_names_and_hoists_imports) {
  const char *src =
      "import torch\nfrom triton import (\n    cdiv,\n)\n@triton.jit\ndef _k(x, BLOCK: tl.constexpr):\n"
      "    pass\n\ndef run(x):\n    _k[(1,)](x, BLOCK=4)\n    return torch.relu(x).run\n";
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_compose_prefix_candidate(src, "sk1_", &b, &err), ==, 0);
  const char *s = mk_buf_cstr(&b);
  MK_CHECK(strstr(s, "def sk1__k(x, BLOCK") != NULL);
  MK_CHECK(strstr(s, "def sk1_run(x)") != NULL);
  MK_CHECK(strstr(s, "sk1__k[(1,)](x, BLOCK=4)") != NULL);
  MK_CHECK(strstr(s, ").run") != NULL); /* attributes are not renamed */
  MK_CHECK(strstr(s, "import") == NULL);
  MK_CHECK(strstr(s, "cdiv") == NULL);
  mk_buf_free(&b);
  /* names inside strings, docstrings and comments are text, not code */
  const char *src2 = "def run(x):\n    \"\"\"call run\n    run again\"\"\"\n"
                     "    s = 'run' + \"run\"  # run\n    return run\n";
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_compose_prefix_candidate(src2, "p_", &b, &err), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&b), "def p_run(x):\n    \"\"\"call run\n    run again\"\"\"\n"
                                "    s = 'run' + \"run\"  # run\n    return p_run\n");
  mk_buf_free(&b);
}

/* Composes with every subkernel on the reference and with one candidate,
 * then (when the Python environment exists) runs Model vs ModelNew. */
/* Loads the module text `py` as `m` in the project's Python, builds a = m.Model()
 * and b = m.ModelNew() with b holding a's state and x = torch.randn(4, 8), then
 * runs `checks` (Python statements separated by ';'); skipped without .venv. */
static void check_module_in_python(const char *py, size_t len, const char *checks) {
  char path[] = "/tmp/mk_compose_XXXXXX.py";
  int fd = mkstemps(path, 3);
  MK_REQUIRE(fd >= 0);
  close(fd);
  MK_REQUIRE(mk_write_file(path, py, len) == 0);
  char python[4096];
  snprintf(python, sizeof python, "%s/.venv/bin/python", mk_test_repo_dir());
  if (access(python, X_OK) != 0) {
    mk_test_skip("no .venv: run scripts/setup.sh");
  } else {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "%s -c \"import importlib.util,torch;s=importlib.util.spec_from_file_location('m','%s');"
             "m=importlib.util.module_from_spec(s);s.loader.exec_module(m);torch.manual_seed(0);"
             "a=m.Model();b=m.ModelNew();b.load_state_dict(a.state_dict());x=torch.randn(4,8);"
             "%s\"",
             python, path, checks);
    MK_CHECK_INT(system(cmd), ==, 0);
  }
  remove(path);
}

MK_TEST(compose, modelnew_runs_and_matches) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(mk_test_small_graph_json, strlen(mk_test_small_graph_json), &g, &err) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  MK_REQUIRE(p.nsubkernels >= 1);
  mk_candidate cand = {.name = "relu_python", .origin = "test",
                       .source = "import torch\n\ndef run(x):\n    return x.clamp_min(0.0)\n"};
  const mk_candidate **chosen = calloc((size_t)p.nsubkernels, sizeof *chosen);
  /* the subkernel holding node 0 (relu) takes the candidate if it is alone */
  if (p.subkernels[0].nnodes == 1) chosen[0] = &cand;
  mk_buf out;
  mk_buf_init(&out, 0);
  mk_compose_options opt = {.module_source = mk_test_small_source, .source_path = "m.py"};
  MK_CHECK_INT(mk_compose_modelnew(g, &p, chosen, &opt, &out, &err), ==, 0);
  const char *py = mk_buf_cstr(&out);
  MK_CHECK(strstr(py, "class ModelNew(Model):") != NULL);
  MK_CHECK(strstr(py, "F.linear(v3, self.fc.weight, self.fc.bias)") != NULL);
  MK_CHECK(strstr(py, "(2.0 * v4)") != NULL);
  MK_CHECK(strstr(py, "return (v6, v3)") != NULL);
  check_module_in_python(py, out.len,
                         "ra=a(x);rb=b(x);assert all(torch.equal(p,q) for p,q in zip(ra,rb))");
  mk_buf_free(&out);
  free(chosen);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* The CUDA-graph variant: the composed file unchanged, then a subclass of the
 * same name; on the CPU (no graph possible) it runs the plain forward. */
MK_TEST(compose, cuda_graph_variant_wraps_and_falls_back_on_cpu) {
  mk_errmsg err = {{0}};
  const char *src = "import torch\nimport torch.nn as nn\n\n"
                    "class Model(nn.Module):\n"
                    "    def __init__(self):\n        super().__init__()\n"
                    "        self.fc = nn.Linear(8, 4)\n"
                    "        self.register_buffer('calls', torch.zeros(()))\n"
                    "    def forward(self, x):\n        self.calls += 1\n"
                    "        return torch.relu(self.fc(x))\n\n"
                    "class ModelNew(Model):\n    pass\n";
  mk_buf out;
  mk_buf_init(&out, 0);
  MK_CHECK_INT(mk_compose_cuda_graph(src, NULL, &out, &err), ==, 0);
  const char *py = mk_buf_cstr(&out);
  MK_CHECK(strstr(py, "class ModelNew(ModelNew):") != NULL);
  MK_CHECK(strstr(py, "_mk_graph_call(self, super().forward, args)") != NULL);
  mk_buf again;
  mk_buf_init(&again, 0);
  MK_CHECK_INT(mk_compose_cuda_graph(py, NULL, &again, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_compose_cuda_graph("x = 1\n", NULL, &again, &err), ==, MK_EINVAL);
  mk_buf_free(&again);
  /* CPU tensors: no graph, the plain forward, state advanced once per call. */
  check_module_in_python(py, out.len,
                         "assert torch.equal(a(x),b(x));assert torch.equal(a(x),b(x));"
                         "assert float(b.calls)==2.0;assert b._mk_graphs.entries=={};"
                         /* the state the key reads is live: a replaced parameter is in it */
                         "g=b._mk_graphs;w2=torch.nn.Parameter(torch.zeros(4,8));b.fc.weight=w2;"
                         "assert any(t is w2 for t in g.state()) and len(g.state())==3;"
                         /* replayed outputs while autograd records: a backward that
                          * says why there is none, never gradients silently missing */
                         "w=b.fc.weight;o=m._mk_fresh((torch.ones(2),),w)[0];assert o.requires_grad;"
                         "assert not m._mk_fresh(torch.ones(2),None).requires_grad;"
                         "assert not m._mk_fresh(torch.ones(2,dtype=torch.long),w).requires_grad;"
                         "k='for inference';exec('try:\\n o.sum().backward()\\n"
                         "except RuntimeError as e:\\n assert k in str(e)\\nelse:\\n raise SystemExit(1)')");
  mk_buf_free(&out);
}

/* A ModelNew with a kernel says how to run it without a GPU; one made of
 * PyTorch calls only needs no such line. */
MK_TEST(compose, header_says_how_to_run_without_a_gpu) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(mk_test_small_graph_json, strlen(mk_test_small_graph_json), &g, &err) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_candidate cand = {.name = "k", .origin = "builtin",
                       .source = "import torch\n\ndef run(*xs):\n    return xs[0]\n"};
  const mk_candidate **chosen = calloc((size_t)p.nsubkernels, sizeof *chosen);
  mk_compose_options opt = {.module_source = mk_test_small_source, .source_path = "m.py"};
  for (int with_kernel = 0; with_kernel < 2; with_kernel++) {
    chosen[0] = with_kernel ? &cand : NULL;
    mk_buf out;
    mk_buf_init(&out, 0);
    MK_CHECK_INT(mk_compose_modelnew(g, &p, chosen, &opt, &out, &err), ==, 0);
    const char *py = mk_buf_cstr(&out);
    const char *line = strstr(py, "TRITON_INTERPRET=1");
    const char *first_code = strstr(py, "\nimport");
    MK_CHECK((line != NULL) == (with_kernel == 1));
    if (line && first_code) MK_CHECK(line < first_code); /* in the header comment */
    mk_buf_free(&out);
  }
  free(chosen);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Builtin channels_last conv kernels name their weights in MK_CHANNELS_LAST:
 * ModelNew converts them once in __init__, and the composition (Triton
 * interpreter on the CPU) still matches the Model. */
/* A propose fixture composed: every subkernel PyTorch, or the builtin's first
 * variant of each (builtin), or its first variant whose name starts with
 * `prefer` where there is one. *py receives the ModelNew text (caller frees);
 * returns 0 when it composed. */
static int compose_fixture(const char *name, bool builtin, const char *prefer, char **py) {
  char path[1024], json_path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/%s.py", mk_test_repo_dir(), name);
  snprintf(json_path, sizeof json_path, "%s/tests/fixtures/propose/%s.json", mk_test_repo_dir(), name);
  char *json = NULL, *src = NULL;
  size_t jl = 0, sl = 0;
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  mk_partition p = {0};
  int rc = mk_read_file(json_path, 1 << 24, &json, &jl);
  if (!rc) rc = mk_read_file(path, 1 << 20, &src, &sl);
  if (!rc) rc = mk_graph_from_json(json, jl, &g, &err);
  if (!rc) rc = mk_decompose_initial(g, &p, &err);
  mk_candidate_list *lists = rc ? NULL : calloc((size_t)p.nsubkernels + 1, sizeof *lists);
  const mk_candidate **chosen = rc ? NULL : calloc((size_t)p.nsubkernels + 1, sizeof *chosen);
  if (!rc && (!lists || !chosen)) rc = MK_ENOMEM;
  for (int s = 0; !rc && builtin && s < p.nsubkernels; s++) {
    mk_propose_request req = {.graph = g, .subkernel = &p.subkernels[s], .device = "cpu"};
    if (mk_builtin_propose(&req, &lists[s], &err) == 0 && lists[s].n > 0)
      chosen[s] = &lists[s].items[0]; /* the channels_last variant comes first */
    for (int i = 0; prefer && chosen[s] && i < lists[s].n; i++)
      if (strncmp(lists[s].items[i].name, prefer, strlen(prefer)) == 0) {
        chosen[s] = &lists[s].items[i];
        break;
      }
  }
  mk_buf out;
  mk_buf_init(&out, 0);
  mk_compose_options opt = {.module_source = src, .source_path = name};
  if (!rc) rc = mk_compose_modelnew(g, &p, chosen, &opt, &out, &err);
  *py = rc ? NULL : mk_buf_steal(&out, NULL);
  mk_buf_free(&out);
  for (int s = 0; lists && s < p.nsubkernels; s++) mk_candidate_list_free(&lists[s]);
  free(lists);
  free(chosen);
  mk_partition_free(&p);
  mk_graph_free(g);
  free(json);
  free(src);
  return rc;
}

/* Runs `checks` (Python statements, `m` the loaded ModelNew file, `a` the Model,
 * `b` ModelNew with a's state, `x` the inputs) under the interpreter. */
static void run_composed(const char *py, const char *checks) {
  char file[] = "/tmp/mk_compose_XXXXXX.py";
  int fd = mkstemps(file, 3);
  MK_REQUIRE(fd >= 0);
  close(fd);
  MK_REQUIRE(mk_write_file(file, py, strlen(py)) == 0);
  char python[4096];
  snprintf(python, sizeof python, "%s/.venv/bin/python", mk_test_repo_dir());
  if (access(python, X_OK) != 0) {
    mk_test_skip("no .venv: run scripts/setup.sh");
  } else {
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "TRITON_INTERPRET=1 %s -c \"import importlib.util,torch;"
             "s=importlib.util.spec_from_file_location('m','%s');"
             "m=importlib.util.module_from_spec(s);s.loader.exec_module(m);torch.manual_seed(0);"
             "a=m.Model();b=m.ModelNew();b.load_state_dict(a.state_dict());x=m.get_inputs();%s\"",
             python, file, checks);
    MK_CHECK_INT(system(cmd), ==, 0);
  }
  remove(file);
}

MK_TEST(compose, channels_last_weights_converted_once) {
  char *py = NULL;
  MK_REQUIRE(compose_fixture("conv_chain", true, NULL, &py) == 0);
  MK_CHECK(strstr(py, "_mk_keep_channels_last(self, (\"conv.weight\", \"convt.weight\", ))") != NULL);
  MK_CHECK(strstr(py, "def _mk_keep_channels_last(module, names):") != NULL);
  run_composed(py, "cl=torch.channels_last;"
                   "assert b.conv.weight.is_contiguous(memory_format=cl) and not b.conv.weight.is_contiguous();"
                   "assert a.conv.weight.is_contiguous();"
                   "ra=a(*x);rb=b(*x);"
                   "assert torch.allclose(ra,rb,rtol=1e-4,atol=1e-4),(ra-rb).abs().max()");
  free(py);
}

/* The layout plan in a composition of a small conv net (tests/fixtures/propose/conv_net.py):
 * the input converted once at entry, the value a view reads made contiguous, the weights of
 * planned convolutions kept channels_last; with every subkernel PyTorch, and with the
 * builtin's first variant of each; both run under the interpreter and match the Model. */
static void check_planned_composition(bool builtin) {
  char *py = NULL;
  MK_REQUIRE(compose_fixture("conv_net", builtin, NULL, &py) == 0);
  MK_CHECK(strstr(py, "        x0 = _mk_convert(x0, torch.channels_last)\n") != NULL);
  MK_CHECK(strstr(py, "\ndef _mk_convert(x, fmt):\n") != NULL);
  if (!builtin) {
    MK_CHECK(strstr(py, ", torch.contiguous_format)\n") != NULL); /* before the view */
    /* PyTorch keeps channels_last through every planned op: only the entry converts. */
    int n = 0;
    for (const char *q = py; (q = strstr(q, ", torch.channels_last)\n")); q++) n++;
    MK_CHECK_INT(n, ==, 1);
  }
  MK_CHECK(strstr(py, "\"stem.weight\", ") != NULL && strstr(py, "\"conv1.weight\", ") != NULL &&
           strstr(py, "\"branch.weight\", ") != NULL);
  run_composed(py, "assert b.stem.weight.is_contiguous(memory_format=torch.channels_last);"
                   "ra=a(*x);rb=b(*x);"
                   "assert torch.allclose(ra,rb,rtol=1e-4,atol=1e-4),(ra-rb).abs().max();"
                   "assert torch.allclose(a.bn1.running_mean,b.bn1.running_mean)");
  free(py);
}

MK_TEST(compose, layout_plan_with_pytorch_subkernels) { check_planned_composition(false); }

MK_TEST(compose, layout_plan_with_builtin_subkernels) { check_planned_composition(true); }

/* An implicit-GEMM convolution makes its own channels_last copy of its input
 * (MK_ANY_LAYOUT_INPUTS): the program's entry does not convert that input
 * first, and the composition still matches the Model. */
MK_TEST(compose, inputs_a_kernel_converts_itself_are_not_converted_first) {
  char *py = NULL;
  MK_REQUIRE(compose_fixture("conv_chain", true, "triton_igemm", &py) == 0);
  MK_CHECK(strstr(py, "MK_ANY_LAYOUT_INPUTS = (0, )") != NULL);
  MK_CHECK(strstr(py, "        x0 = _mk_convert(x0, torch.channels_last)\n") == NULL);
  run_composed(py, "ra=a(*x);rb=b(*x);"
                   "assert torch.allclose(ra,rb,rtol=1e-4,atol=1e-4),(ra-rb).abs().max()");
  free(py);
  /* with the cuDNN variant, which declares nothing, the entry converts */
  MK_REQUIRE(compose_fixture("conv_chain", true, "triton_conv", &py) == 0);
  MK_CHECK(strstr(py, "MK_ANY_LAYOUT_INPUTS") == NULL);
  MK_CHECK(strstr(py, "        x0 = _mk_convert(x0, torch.channels_last)\n") != NULL);
  free(py);
}

/* Devices recorded by the capture ("cpu": `device=x.device`, `.to(x.device)`)
 * are the program's device in the composition, as replay reads them: on a
 * device other than the capture's, nothing is left on the CPU. The meta
 * device stands in for a GPU (tests/fixtures/propose/device_constants.py). */
static void check_device_constants(bool builtin) {
  char *py = NULL;
  MK_REQUIRE(compose_fixture("device_constants", builtin, NULL, &py) == 0);
  MK_CHECK(strstr(py, "torch.device('cpu')") == NULL);
  if (!builtin) MK_CHECK(strstr(py, "        _mk_dev = x0.device\n") != NULL);
  MK_CHECK(strstr(py, "device=_mk_dev") != NULL);
  /* the scalar made per call is made once per device (no host-to-device copy
   * per call, capturable as a CUDA graph) where the forward writes it inline */
  if (!builtin)
    MK_CHECK(strstr(py, "torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))") != NULL);
  /* Triton kernels do not run on meta tensors: the builtin form runs on the CPU only
   * (its kernels' exp may differ from torch's in the last bit). */
  run_composed(py, builtin ? "ra=a(*x);rb=b(*x);assert torch.allclose(ra,rb,rtol=1e-6,atol=1e-6)"
                           : "ra=a(*x);rb=b(*x);assert torch.equal(ra,rb);"
                             "b=b.to('meta');r=b(torch.randn(3,2,5,8,device='meta'));"
                             "assert r.device.type=='meta' and r.shape==ra.shape,r.device");
  free(py);
}

MK_TEST(compose, recorded_devices_are_the_programs_with_pytorch_subkernels) {
  check_device_constants(false);
}

MK_TEST(compose, recorded_devices_are_the_programs_with_builtin_subkernels) {
  check_device_constants(true);
}

/* A subkernel whose results nothing reads (dead_branch: a softmax's mean,
 * what `out, _ = attn(x, x, x)` leaves of the averaged attention weights) is
 * not run by the forward; a random draw nothing reads still is (the random
 * stream after it must not shift), and so is an in-place buffer update. */
MK_TEST(compose, dead_subkernels_are_not_run) {
  for (int builtin = 0; builtin <= 1; builtin++) {
    char *py = NULL;
    MK_REQUIRE(compose_fixture("dead_branch", builtin, NULL, &py) == 0);
    const char *fwd = strstr(py, "class ModelNew(");
    MK_REQUIRE(fwd != NULL);
    MK_CHECK(strstr(fwd, "# softmax_mean — lines 17-18 — not run: nothing reads what it computes\n") != NULL);
    MK_CHECK(strstr(fwd, "softmax(") == NULL);
    MK_CHECK(strstr(fwd, "# rand_like — lines 19-19 — PyTorch reference\n") != NULL);
    MK_CHECK(strstr(fwd, "# add — lines 20-20 — PyTorch reference\n") != NULL);
    run_composed(py, "torch.manual_seed(1);ra=a(*x);sa=torch.rand(3);"
                     "torch.manual_seed(1);rb=b(*x);sb=torch.rand(3);"
                     "assert torch.allclose(ra,rb,rtol=1e-6,atol=1e-6);"
                     "assert torch.equal(sa,sb),'the random stream shifted';"
                     "assert torch.equal(a.steps,b.steps)");
    free(py);
  }
}

/* conv_softmax (UNet's double conv, left in PyTorch's layout by the plan: its
 * narrow convolutions do not pay for the copies) and conv_softmax_wide (a wide
 * convolution's island channels_last, the softmax's input in the default
 * layout): PyTorch's ops and the builtin's first variants both compose, run
 * under the interpreter and match the Model, running statistics included. */
MK_TEST(compose, planned_composition_around_a_softmax) {
  const char *fixtures[] = {"conv_softmax", "conv_softmax_wide"};
  const char *bn[] = {"bn2", "bn"};
  for (int f = 0; f < 2; f++)
    for (int builtin = 0; builtin <= 1; builtin++) {
      char *py = NULL;
      MK_REQUIRE(compose_fixture(fixtures[f], builtin, NULL, &py) == 0);
      MK_CHECK((strstr(py, ", torch.channels_last)\n") != NULL) == (f == 1));
      char check[512];
      snprintf(check, sizeof check,
               "ra=a(*x);rb=b(*x);"
               "assert torch.allclose(ra,rb,rtol=1e-4,atol=1e-4),(ra-rb).abs().max();"
               "assert torch.allclose(a.%s.running_var,b.%s.running_var,rtol=1e-4,atol=1e-5)",
               bn[f], bn[f]);
      run_composed(py, check);
      free(py);
    }
}

/* conv_shuffle (ShuffleNet's channel shuffle between a batch norm and a
 * conv, planned channels_last through it): PyTorch's ops and the builtin's
 * first variants compose, run under the interpreter and match the Model. */
MK_TEST(compose, planned_composition_through_a_channel_shuffle) {
  for (int builtin = 0; builtin <= 1; builtin++) {
    char *py = NULL;
    MK_REQUIRE(compose_fixture("conv_shuffle", builtin, NULL, &py) == 0);
    MK_CHECK(strstr(py, ", torch.channels_last)\n") != NULL);
    run_composed(py, "ra=a(*x);rb=b(*x);"
                     "assert all(torch.allclose(u,v,rtol=1e-4,atol=1e-4) for u,v in zip(ra,rb));"
                     "assert torch.allclose(a.bn.running_var,b.bn.running_var,rtol=1e-4,atol=1e-5)");
    free(py);
  }
}

/* Tensors made from constants (constants.py): the two nothing writes or
 * returns are made once per device and reused; the rest are made per call.
 * Two calls match the Model's, the accumulator written in place included,
 * and the cached tensors are the same objects both times. */
MK_TEST(compose, constant_tensors_are_made_once) {
  char *py = NULL;
  MK_REQUIRE(compose_fixture("constants", false, NULL, &py) == 0);
  const char *fwd = strstr(py, "class ModelNew(");
  MK_REQUIRE(fwd != NULL);
  MK_CHECK(strstr(py, "\ndef _mk_const(key, make):\n") != NULL);
  MK_CHECK(strstr(fwd, "_mk_const((0, torch.get_default_dtype(), _mk_dev), lambda: torch.tensor(1e+02, device=_mk_dev))") != NULL);
  MK_CHECK(strstr(fwd, "_mk_const((1, torch.get_default_dtype(), _mk_dev), lambda: torch.full(") != NULL);
  MK_CHECK(strstr(fwd, " = torch.zeros(4, device=_mk_dev)\n") != NULL);
  MK_CHECK(strstr(fwd, "lambda: torch.zeros(") == NULL && strstr(fwd, "lambda: torch.ones(") == NULL &&
           strstr(fwd, "lambda: torch.rand(") == NULL && strstr(fwd, "lambda: torch.arange(") == NULL);
  run_composed(py, "torch.manual_seed(3);ra=a(*x);torch.manual_seed(3);rb=b(*x);"
                   "assert all(torch.equal(u,v) for u,v in zip(ra,rb));"
                   "consts=dict(m._MK_CONSTS);assert len(consts)==2,consts;"
                   "torch.manual_seed(4);ra=a(*x);torch.manual_seed(4);rb=b(*x);"
                   "assert all(torch.equal(u,v) for u,v in zip(ra,rb));"
                   "now=m._MK_CONSTS;"
                   "assert all(now[k] is t for k,t in consts.items())");
  free(py);
}

/* The forward's layout conversions (compose_convert.c): under Triton's
 * interpreter, with the size threshold lowered so small tensors take the
 * kernel, NCHW -> channels_last and back, 4-d and 5-d, sizes that are not
 * multiples of the tile, equal PyTorch's copies exactly in values and
 * strides; tensors it leaves to PyTorch (already converted, other strides,
 * int, autograd recording) come back as PyTorch gives them. */
MK_TEST(compose, layout_conversions_match_pytorch) {
  mk_buf helper;
  mk_buf_init(&helper, 0);
  MK_REQUIRE(compose_convert_helper(&helper, true) == 0);
  /* run_composed builds a Model and a ModelNew: empty ones stand in */
  mk_buf_puts(&helper, "\n_MK_CONVERT_MIN_NUMEL = 0\n\n\nclass Model(torch.nn.Module):\n    pass\n\n\n"
                       "ModelNew = Model\n\n\ndef get_inputs():\n    return []\n");
  char *py = mk_buf_steal(&helper, NULL);
  MK_REQUIRE(py != NULL);
  char *with_torch = malloc(strlen(py) + 16);
  MK_REQUIRE(with_torch != NULL);
  strcpy(with_torch, "import torch\n");
  strcat(with_torch, py);
  free(py);
  py = with_torch;
  run_composed(py, "cl,cl3,c=torch.channels_last,torch.channels_last_3d,torch.contiguous_format;"
                   "cases=[(torch.randn(2,67,5,70),cl),(torch.randn(3,5,4,66,3),cl3),"
                   "(torch.randn(2,67,5,70).contiguous(memory_format=cl),c),"
                   "(torch.randn(1,130,2,3,9).contiguous(memory_format=cl3),c)];"
                   "outs=[(m._mk_convert(t,f),t.contiguous(memory_format=f)) for t,f in cases];"
                   "assert all(torch.equal(u,v) and u.stride()==v.stride() for u,v in outs);"
                   "t=cases[0][0].contiguous(memory_format=cl);assert m._mk_convert(t,cl) is t;"
                   "t=torch.randn(2,3,4,5).transpose(2,3);u=m._mk_convert(t,cl);"
                   "assert torch.equal(u,t) and u.is_contiguous(memory_format=cl);"
                   "t=torch.randint(0,9,(2,3,4,5));assert torch.equal(m._mk_convert(t,cl),t);"
                   "w=torch.randn(2,3,4,5,requires_grad=True);u=m._mk_convert(w,cl);"
                   "assert u.grad_fn is not None,'autograd kept'");
  free(py);
}

/* A forward taking a Python scalar (`x * s`, captured with s = 2.5): ModelNew
 * keeps the user's signature and runs its kernels only for the captured value
 * (the graph read it as a constant); any other value, or another type, runs
 * the user's forward. An argument no literal can stand for is refused. */
MK_TEST(compose, scalar_arguments_are_guarded) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(mk_test_scalar_graph_json, strlen(mk_test_scalar_graph_json), &g, &err) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  MK_REQUIRE(p.nsubkernels == 1);
  /* the kernel made for s = 2.5, as the builtin generator writes it */
  mk_candidate cand = {.name = "mul_fixed", .origin = "test",
                       .source = "import torch\n\ndef run(x):\n    return x * 2.5\n"};
  const mk_candidate *chosen[1] = {&cand};
  const char *names[] = {"x", "s"};
  mk_compose_options opt = {.module_source = mk_test_scalar_source, .source_path = "s.py",
                            .input_names = names, .ninput_names = 2};
  mk_buf out;
  mk_buf_init(&out, 0);
  MK_CHECK_INT(mk_compose_modelnew(g, &p, chosen, &opt, &out, &err), ==, 0);
  const char *py = mk_buf_cstr(&out);
  MK_CHECK(strstr(py, "    def forward(self, x, s):\n") != NULL);
  MK_CHECK(strstr(py, "        if not (_mk_same(s, 2.5)):\n            return super().forward(x, s)\n") != NULL);
  MK_CHECK(strstr(py, "def _mk_same(a, b) -> bool:") != NULL);
  check_module_in_python(py, out.len,
                         "assert torch.equal(b(x,2.5),x*2.5);assert torch.equal(b(x,3.0),x*3.0);"
                         "assert torch.equal(b(x,3),x*3);assert torch.equal(b(x,s=2.5),x*2.5);"
                         "assert m._mk_same([1,(2.0,None)],[1,(2.0,None)]);assert not m._mk_same(1,True);"
                         "assert not m._mk_same(2.5,2);assert m._mk_same(float('nan'),float('nan'))");
  mk_buf_free(&out);
  /* an opaque argument (an object): no composition can be specialised to it */
  g->scalar_inputs[0].value = NULL;
  g->scalar_inputs[0].type = "Config";
  mk_buf_init(&out, 0);
  MK_CHECK_INT(mk_compose_modelnew(g, &p, chosen, &opt, &out, &err), ==, MK_EUNSUPPORTED);
  MK_CHECK(strstr(err.text, "forward argument 1 (s) is a Config") != NULL);
  mk_buf_free(&out);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* Sizes that follow the batch are written as sizes of the call's tensors, so
 * the composed forward runs at any batch (its kernels, not the user's
 * forward: Model.forward is broken before the check); another shape of the
 * other dims runs the user's forward. A graph that is not batch-free guards
 * the whole shape, with the reason, whatever the reason says. */
MK_TEST(compose, batch_sizes_follow_the_input_at_any_batch) {
  mk_graph *g = mk_test_load_graph("ir", "batch_view.json");
  MK_REQUIRE(g != NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_pyemit_node(g, &g->nodes[1], plain_namer, NULL, 4, &b, &err), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&b), "    v2 = v1.view(v1.shape[0], -1)\n");
  mk_buf_free(&b);
  /* the other forms: 8 * s, s // 8, s + 3, s - 3 */
  mk_batch_int *bi = &g->nodes[1].batch_ints[0];
  const struct { int64_t num, den, off; const char *want; } forms[] = {
      {8, 1, 0, "(8 * v1.shape[0])"}, {1, 8, 0, "(v1.shape[0] // 8)"},
      {1, 1, 3, "(v1.shape[0] + 3)"}, {-2, 3, -1, "(-2 * v1.shape[0] // 3 - 1)"}};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    bi->num = forms[i].num, bi->den = forms[i].den, bi->off = forms[i].off;
    mk_buf_init(&b, 0);
    MK_CHECK_INT(mk_pyemit_call(g, &g->nodes[1], plain_namer, NULL, &b, &err), ==, 0);
    MK_CHECK(strstr(mk_buf_cstr(&b), forms[i].want) != NULL);
    mk_buf_free(&b);
  }
  bi->num = 1, bi->den = 1, bi->off = 0;

  char *src = NULL;
  size_t srclen = 0;
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/ir/batch_view.py", mk_test_repo_dir());
  MK_REQUIRE(mk_read_file(path, 1 << 20, &src, &srclen) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const char *names[] = {"x"};
  mk_compose_options opt = {.module_source = src, .source_path = "batch_view.py",
                            .input_names = names, .ninput_names = 1};
  mk_buf out;
  mk_buf_init(&out, 0);
  MK_CHECK_INT(mk_compose_modelnew(g, &p, NULL, &opt, &out, &err), ==, 0);
  const char *py = mk_buf_cstr(&out);
  MK_CHECK(strstr(py, "        if x.shape[1:] != (2, 3):\n            return super().forward(x)\n") != NULL);
  MK_CHECK(strstr(py, ".view(v1.shape[0], -1)") != NULL);
  check_module_in_python(py, out.len,
                         "m.Model.forward=lambda s,*q:1/0;"
                         "xs={n:torch.randn(n,2,3) for n in (1,4,7)};"
                         "assert all(torch.equal(b(xs[n]),torch.relu(xs[n]).view(n,-1)*2.0) for n in xs);"
                         "import pytest;pytest.raises(ZeroDivisionError,b,torch.randn(4,3,2))");
  mk_buf_free(&out);
  /* not batch-free: the whole shape, and the reason on one comment line */
  g->batch_free = false;
  g->batch_free_why = "the forward fails at another batch:\nimport os";
  mk_buf_init(&out, 0);
  MK_CHECK_INT(mk_compose_modelnew(g, &p, NULL, &opt, &out, &err), ==, 0);
  py = mk_buf_cstr(&out);
  MK_CHECK(strstr(py, "        # made for the captured shapes (the forward fails at another batch: import os)\n"
                      "        if x.shape != (4, 2, 3):\n") != NULL);
  check_module_in_python(py, out.len,
                         "x=torch.randn(4,2,3);r=a(x);m.Model.forward=lambda s,*q:1/0;"
                         "assert torch.equal(b(x),r);"
                         "import pytest;pytest.raises(ZeroDivisionError,b,torch.randn(5,2,3))");
  mk_buf_free(&out);
  mk_partition_free(&p);
  free(src);
  mk_graph_free(g);
}

/* A forward with a parameter past the captured inputs (`s=2.5`, which
 * get_inputs() does not pass: the graph read its default as a constant):
 * ModelNew takes it too, and passing it, by position or keyword, runs the
 * user's forward; so does its CUDA-graph variant (keywords: the plain one). */
MK_TEST(compose, parameters_past_the_captured_inputs_run_the_users_forward) {
  mk_errmsg err = {{0}};
  cJSON *root = cJSON_Parse(mk_test_scalar_graph_json);
  MK_REQUIRE(root != NULL);
  cJSON_DeleteItemFromObjectCaseSensitive(root, "scalar_inputs");
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_cjson(root, &g, &err) == 0);
  mk_partition p = {0};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_candidate cand = {.name = "mul_fixed", .origin = "test",
                       .source = "import torch\n\ndef run(x):\n    return x * 2.5\n"};
  const mk_candidate *chosen[1] = {&cand};
  const char *names[] = {"x"};
  const char *src = "import torch\nimport torch.nn as nn\nclass Model(nn.Module):\n"
                    "    def forward(self, x, s=2.5):\n        return x * s\n"
                    "def get_inputs():\n    return [torch.randn(4, 8)]\n"
                    "def get_init_inputs():\n    return []\n";
  mk_compose_options opt = {.module_source = src, .source_path = "d.py", .input_names = names,
                            .ninput_names = 1, .forward_takes_more = true};
  mk_buf out;
  mk_buf_init(&out, 0);
  MK_CHECK_INT(mk_compose_modelnew(g, &p, chosen, &opt, &out, &err), ==, 0);
  const char *py = mk_buf_cstr(&out);
  MK_CHECK(strstr(py, "    def forward(self, x, *_mk_args, **_mk_kwargs):\n"
                      "        if _mk_args or _mk_kwargs:") != NULL);
  MK_CHECK(strstr(py, "            return super().forward(x, *_mk_args, **_mk_kwargs)\n") != NULL);
  const char *checks = "assert torch.equal(b(x),x*2.5);assert torch.equal(b(x,3.0),x*3.0);"
                       "assert torch.equal(b(x,s=4.0),x*4.0)";
  check_module_in_python(py, out.len, checks);
  mk_buf graph;
  mk_buf_init(&graph, 0);
  MK_CHECK_INT(mk_compose_cuda_graph(py, NULL, &graph, &err), ==, 0);
  check_module_in_python(mk_buf_cstr(&graph), graph.len, checks);
  mk_buf_free(&graph);
  mk_buf_free(&out);
  mk_partition_free(&p);
  mk_graph_free(g);
}
