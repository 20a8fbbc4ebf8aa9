/* support.c — what several C test areas share (support.h). */
#include "support.h"

#include "mk_test.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool mk_test_python_ready(void) {
  mk_buf cmd;
  mk_buf_init(&cmd, 4096);
  mk_buf_printf(&cmd, "'%s' -c 'import torch, triton' >/dev/null 2>&1", MK_DEFAULT_PYTHON);
  int rc = system(mk_buf_cstr(&cmd));
  mk_buf_free(&cmd);
  return rc == 0;
}

mk_graph *mk_test_load_graph(const char *dir, const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/%s/%s", mk_test_repo_dir(), dir, name);
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(path, 1 << 24, &text, &len) != 0) return NULL;
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  if (mk_graph_from_json(text, len, &g, &err)) fprintf(stderr, "    %s: %s\n", name, err.text);
  free(text);
  return g;
}

const char *const mk_test_small_graph_json =
    "{\"schema\":1,\"file\":\"/tmp/m.py\",\"class\":\"Model\",\"source_sha256\":\"0\",\"batch\":null,"
    "\"values\":["
    "{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":1,\"kind\":\"param\",\"name\":\"fc.weight\",\"shape\":[8,8],\"dtype\":\"float32\"},"
    "{\"id\":2,\"kind\":\"param\",\"name\":\"fc.bias\",\"shape\":[8],\"dtype\":\"float32\"},"
    "{\"id\":3,\"kind\":\"node\",\"producer\":0,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":4,\"kind\":\"node\",\"producer\":1,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":5,\"kind\":\"node\",\"producer\":2,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":6,\"kind\":\"node\",\"producer\":3,\"shape\":[4],\"dtype\":\"float32\"}],"
    "\"nodes\":["
    "{\"id\":0,\"op\":\"torch.relu\",\"args\":[{\"t\":0}],\"kwargs\":{},\"inputs\":[0],\"outputs\":[3],"
    "\"out\":{\"t\":3},\"mutates\":[],\"span\":{\"line\":8,\"col\":12,\"end_line\":8,\"end_col\":25}},"
    "{\"id\":1,\"op\":\"torch.nn.functional.linear\",\"args\":[{\"t\":3},{\"t\":1},{\"t\":2}],\"kwargs\":{},"
    "\"inputs\":[3,1,2],\"outputs\":[4],\"out\":{\"t\":4},\"mutates\":[],\"module\":\"fc\",\"module_type\":\"Linear\","
    "\"span\":{\"line\":9,\"col\":12,\"end_line\":9,\"end_col\":22}},"
    "{\"id\":2,\"op\":\"torch.Tensor.__rmul__\",\"args\":[{\"t\":4},{\"float\":2.0}],\"kwargs\":{},\"inputs\":[4],"
    "\"outputs\":[5],\"out\":{\"t\":5},\"mutates\":[],\"span\":{\"line\":10,\"col\":12,\"end_line\":10,\"end_col\":19}},"
    "{\"id\":3,\"op\":\"torch.sum\",\"args\":[{\"t\":5}],\"kwargs\":{\"dim\":1},\"inputs\":[5],\"outputs\":[6],"
    "\"out\":{\"t\":6},\"mutates\":[],\"span\":{\"line\":11,\"col\":15,\"end_line\":11,\"end_col\":33}}],"
    "\"outputs\":{\"tuple\":[{\"t\":6},{\"t\":3}]},\"forward\":{\"line\":7,\"end_line\":11},"
    "\"statements\":[],\"stats\":{\"capture_ms\":1.0,\"nodes\":4}}";

/* `forward(self, x, s)`: x * s, captured with s = 2.5 (a scalar input). */
const char *const mk_test_scalar_graph_json =
    "{\"schema\":1,\"file\":\"/tmp/s.py\",\"class\":\"Model\",\"source_sha256\":\"0\",\"batch\":null,"
    "\"values\":["
    "{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[4,8],\"dtype\":\"float32\"},"
    "{\"id\":1,\"kind\":\"node\",\"producer\":0,\"shape\":[4,8],\"dtype\":\"float32\"}],"
    "\"nodes\":["
    "{\"id\":0,\"op\":\"torch.Tensor.mul\",\"args\":[{\"t\":0},2.5],\"kwargs\":{},\"inputs\":[0],"
    "\"outputs\":[1],\"out\":{\"t\":1},\"mutates\":[],\"span\":{\"line\":5,\"col\":15,\"end_line\":5,"
    "\"end_col\":20}}],"
    "\"outputs\":{\"t\":1},\"scalar_inputs\":[{\"index\":1,\"value\":2.5}],"
    "\"forward\":{\"line\":4,\"end_line\":5},\"statements\":[],\"stats\":{\"capture_ms\":1.0,\"nodes\":1}}";

const char *const mk_test_scalar_source =
    "import torch\n"
    "import torch.nn as nn\n"
    "class Model(nn.Module):\n"
    "    def forward(self, x, s):\n"
    "        return x * s\n"
    "def get_inputs():\n"
    "    return [torch.randn(4, 8), 2.5]\n"
    "def get_init_inputs():\n"
    "    return []\n";

const char *const mk_test_small_source =
    "import torch\n"
    "import torch.nn as nn\n"
    "class Model(nn.Module):\n"
    "    def __init__(self):\n"
    "        super().__init__()\n"
    "        self.fc = nn.Linear(8, 8)\n"
    "    def forward(self, x):\n"
    "        x = torch.relu(x)\n"
    "        y = self.fc(x)\n"
    "        y = 2.0 * y\n"
    "        return torch.sum(y, dim=1), x\n"
    "def get_inputs():\n"
    "    return [torch.randn(4, 8)]\n"
    "def get_init_inputs():\n"
    "    return []\n";

int mk_test_compose_cuda(const char *name, bool mixed, mk_test_composed *c, mk_errmsg *err) {
  memset(c, 0, sizeof *c);
  char path[1024], json_path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/%s.py", mk_test_repo_dir(), name);
  snprintf(json_path, sizeof json_path, "%s/tests/fixtures/propose/%s.json", mk_test_repo_dir(), name);
  char *json = NULL, *src = NULL;
  size_t jl = 0, sl = 0;
  if (mk_read_file(json_path, 1 << 24, &json, &jl) || mk_read_file(path, 1 << 20, &src, &sl)) {
    free(json);
    return mk_errf(err, MK_EIO, "cannot read fixture %s", name);
  }
  int rc = mk_graph_from_json(json, jl, &c->g, err);
  free(json);
  if (!rc) rc = mk_decompose_initial(c->g, &c->p, err);
  if (!rc) {
    c->lists = calloc((size_t)c->p.nsubkernels + 1, sizeof *c->lists);
    c->chosen = calloc((size_t)c->p.nsubkernels + 1, sizeof *c->chosen);
    if (!c->lists || !c->chosen) rc = MK_ENOMEM;
  }
  for (int s = 0; !rc && s < c->p.nsubkernels; s++) {
    mk_propose_request req = {.graph = c->g, .subkernel = &c->p.subkernels[s], .device = "cuda",
                              .backend = mixed && s == 0 ? MK_KBACKEND_TRITON : MK_KBACKEND_CUDA};
    mk_errmsg perr = {{0}};
    if (mk_builtin_propose_backend(&req, &c->lists[s], &perr) == 0 && c->lists[s].n > 0) {
      c->chosen[s] = &c->lists[s].items[0];
      c->ncuda += strcmp(mk_candidate_backend(c->chosen[s]), "cuda") == 0;
    }
  }
  mk_buf_init(&c->out, 0);
  mk_compose_options opt = {.module_source = src, .source_path = path};
  if (!rc) rc = mk_compose_modelnew(c->g, &c->p, c->chosen, &opt, &c->out, err);
  free(src);
  return rc;
}

void mk_test_composed_free(mk_test_composed *c) {
  for (int s = 0; c->lists && s < c->p.nsubkernels; s++) mk_candidate_list_free(&c->lists[s]);
  free(c->lists);
  free(c->chosen);
  mk_buf_free(&c->out);
  mk_partition_free(&c->p);
  mk_graph_free(c->g);
}

