/* test_export_aten.c — recorded calls in ATen form (export_aten.c), the
 * form the native worker's interpreter runs: the same op table and binding
 * as the C++ export, so every node of every fixture that the C++ export
 * writes has an ATen form and every node it refuses is refused with a
 * reason; the argument normalisation (keywords, defaults, repeated ints,
 * tagged floats, batch norm's order), nested templates, method templates,
 * the special forms and in-place binding. */
#include "mk_test.h"

#include "export_internal.h"
#include "mk_export.h"
#include "support.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>

static char *print(const cJSON *j) { return cJSON_PrintUnformatted(j); }

/* Node `op` of a fixture: its ATen form as text (caller frees), NULL if none. */
static char *form_text(const mk_graph *g, const char *op, int nth) {
  for (int i = 0; i < g->nnodes; i++) {
    if (strcmp(g->nodes[i].op, op) != 0 || nth-- > 0) continue;
    cJSON *f = NULL;
    mk_errmsg err = {{0}};
    if (mk_export_node_aten(g, &g->nodes[i], &f, &err)) {
      fprintf(stderr, "    %s: %s\n", op, err.text);
      return NULL;
    }
    char *s = print(f);
    cJSON_Delete(f);
    return s;
  }
  return NULL;
}

MK_TEST(export_aten, every_node_the_cpp_export_writes_has_an_aten_form) {
  static const char *const dirs[] = {"propose", "ir"};
  int nodes = 0, both = 0, neither = 0;
  for (size_t d = 0; d < sizeof dirs / sizeof dirs[0]; d++) {
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", mk_test_repo_dir(), dirs[d]);
    DIR *dir = opendir(path);
    MK_REQUIRE(dir != NULL);
    for (struct dirent *de; (de = readdir(dir)) != NULL;) {
      size_t n = strlen(de->d_name);
      if (n < 6 || strcmp(de->d_name + n - 5, ".json") != 0) continue;
      mk_graph *g = mk_test_load_graph(dirs[d], de->d_name);
      MK_REQUIRE(g != NULL);
      for (int i = 0; i < g->nnodes; i++, nodes++) {
        mk_buf cpp;
        mk_buf_init(&cpp, 1 << 22);
        mk_errmsg e1 = {{0}}, e2 = {{0}};
        cJSON *form = NULL;
        int rc_cpp = export_emit_node(g, &g->nodes[i], &cpp, &e1);
        int rc_aten = mk_export_node_aten(g, &g->nodes[i], &form, &e2);
        if ((rc_cpp == 0) != (rc_aten == 0))
          fprintf(stderr, "    %s node %d %s: C++ %d (%s), ATen %d (%s)\n", de->d_name, i, g->nodes[i].op, rc_cpp,
                  e1.text, rc_aten, e2.text);
        MK_CHECK((rc_cpp == 0) == (rc_aten == 0));
        if (rc_aten) {
          MK_CHECK_INT(rc_aten, ==, MK_EUNSUPPORTED);
          MK_CHECK(strstr(e2.text, g->nodes[i].op) != NULL); /* the reason names the op */
          neither++;
        } else {
          both++;
          const cJSON *call = cJSON_GetObjectItem(form, "call");
          const cJSON *op = cJSON_GetObjectItem(call, "op");
          MK_CHECK(cJSON_IsString(op) && (strncmp(op->valuestring, "aten::", 6) == 0 ||
                                          strcmp(op->valuestring, "mk::index") == 0));
          MK_CHECK_INT(cJSON_GetObjectItem(form, "node")->valueint, ==, i);
        }
        cJSON_Delete(form);
        mk_buf_free(&cpp);
      }
      mk_graph_free(g);
    }
    closedir(dir);
  }
  fprintf(stderr, "    %d nodes: %d with an ATen form, %d refused by both\n", nodes, both, neither);
  MK_CHECK(both > 100);
}

MK_TEST(export_aten, arguments_are_normalised_to_the_rows_kinds) {
  mk_graph *g = mk_test_load_graph("propose", "norm_pools.json");
  MK_REQUIRE(g != NULL);
  /* F.conv2d(x, w, b, (1, 1), (0, 0), (1, 1), 1): ints as lists, in ATen's order */
  char *s = form_text(g, "torch.nn.functional.conv2d", 0);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"aten::conv2d\"") != NULL);
  MK_CHECK(strstr(s, "{\"list\":[1,1]},{\"list\":[0,0]},{\"list\":[1,1]},1]") != NULL);
  free(s);
  /* F.max_pool2d(y, 2): kernel [2, 2], stride None -> [], the defaults filled in */
  s = form_text(g, "torch.nn.functional.max_pool2d", 0);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"aten::max_pool2d\"") != NULL);
  MK_CHECK(strstr(s, "{\"list\":[2,2]},{\"list\":[]},{\"list\":[0,0]},{\"list\":[1,1]},false]") != NULL);
  free(s);
  /* F.batch_norm(x, mean, var, w, b, training, momentum, eps): ATen's order, floats tagged,
   * the running statistics' fresh ids bound to the tensors ATen updates */
  s = form_text(g, "torch.nn.functional.batch_norm", 0);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"aten::batch_norm\"") != NULL);
  MK_CHECK(strstr(s, "{\"float\":0.1},{\"float\":1e-05},true]") != NULL);
  MK_CHECK(strstr(s, "\"alias\":[[") != NULL);
  free(s);
  /* torch.clamp(x, -0.5, 0.5): Python floats stay floats */
  s = form_text(g, "torch.clamp", 0);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "{\"float\":-0.5},{\"float\":0.5}]") != NULL);
  free(s);
  mk_graph_free(g);
}

/* Hand-made nodes for the shapes no fixture has: a nested template, a
 * method template with a dtype constant, TensorOptions, std::get, an
 * in-place call, indexing, max's forms, a refused argument. */
static mk_graph *one_node_graph(const char *op, const char *args, const char *kwargs, const char *out,
                                const char *mutates, const char *outputs) {
  char json[4096];
  snprintf(json, sizeof json,
           "{\"schema\":1,\"file\":\"/tmp/m.py\",\"class\":\"Model\",\"source_sha256\":\"0\",\"batch\":null,"
           "\"values\":[{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[2,3,4,4],\"dtype\":\"float32\"},"
           "{\"id\":1,\"kind\":\"node\",\"producer\":0,\"shape\":[2,3,4,4],\"dtype\":\"float32\"},"
           "{\"id\":2,\"kind\":\"node\",\"producer\":0,\"shape\":[2,3,4,4],\"dtype\":\"int64\"}],"
           "\"nodes\":[{\"id\":0,\"op\":\"%s\",\"args\":%s,\"kwargs\":%s,\"inputs\":[0],\"outputs\":%s,"
           "\"out\":%s,\"mutates\":%s,\"span\":{\"line\":7,\"col\":0,\"end_line\":7,\"end_col\":1}}],"
           "\"outputs\":{\"t\":1},\"forward\":{\"line\":1,\"end_line\":9},\"statements\":[]}",
           op, args, kwargs, outputs, out, mutates);
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  if (mk_graph_from_json(json, strlen(json), &g, &err)) fprintf(stderr, "    %s\n", err.text);
  return g;
}

static char *one_form(const char *op, const char *args, const char *kwargs, const char *out, const char *mutates,
                      const char *outputs, mk_errmsg *err) {
  mk_graph *g = one_node_graph(op, args, kwargs, out, mutates, outputs);
  if (g == NULL) return NULL;
  cJSON *f = NULL;
  char *s = mk_export_node_aten(g, &g->nodes[0], &f, err) ? NULL : print(f);
  cJSON_Delete(f);
  mk_graph_free(g);
  return s;
}

MK_TEST(export_aten, templates_read_as_calls) {
  mk_errmsg err = {{0}};
  /* 2.0 / x: Python's reciprocal times other, a nested call */
  char *s = one_form("torch.Tensor.__rtruediv__", "[{\"t\":0},{\"float\":2.0}]", "{}", "{\"t\":1}", "[]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"call\":{\"op\":\"aten::mul\",\"args\":[{\"call\":{\"op\":\"aten::reciprocal\",\"args\":[{\"t\":0}]") != NULL);
  MK_CHECK(strstr(s, "{\"float\":2}]") != NULL);
  free(s);
  /* x.float(): a method template with a dtype constant */
  s = one_form("torch.Tensor.float", "[{\"t\":0}]", "{}", "{\"t\":1}", "[]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"aten::to\",\"args\":[{\"t\":0},{\"dtype\":\"float32\"}]") != NULL);
  free(s);
  /* torch.zeros_like(x, dtype=torch.int64): TensorOptions as a keyword */
  s = one_form("torch.zeros_like", "[{\"t\":0}]", "{\"dtype\":{\"dtype\":\"int64\"}}", "{\"t\":2}", "[]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"args\":[{\"t\":0}],\"kwargs\":{\"dtype\":{\"dtype\":\"int64\"}}") != NULL);
  free(s);
  /* F.adaptive_max_pool2d: std::get<0> */
  s = one_form("torch.nn.functional.adaptive_max_pool2d", "[{\"t\":0},2]", "{}", "{\"t\":1}", "[]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"select\":0") != NULL && strstr(s, "{\"list\":[2,2]}") != NULL);
  free(s);
  /* x.add_(1.5): out of place, copied into the mutated tensor */
  s = one_form("torch.Tensor.add_", "[{\"t\":0},1.5]", "{}", "{\"t\":1}", "[0]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"aten::add\"") != NULL && strstr(s, "\"copy_into\":0") != NULL);
  MK_CHECK(strstr(s, "\"out\"") == NULL);
  free(s);
  /* x[:, 1:, None, ...] */
  s = one_form("torch.Tensor.__getitem__",
               "[{\"t\":0},{\"tuple\":[{\"slice\":[null,null,null]},{\"slice\":[1,null,null]},null,{\"ellipsis\":true}]}]",
               "{}", "{\"t\":1}", "[]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"mk::index\"") != NULL && strstr(s, "{\"slice\":[1,null,null]},null,{\"ellipsis\":true}") != NULL);
  free(s);
  /* torch.max(x, 1): values and indices */
  s = one_form("torch.max", "[{\"t\":0},1]", "{}", "{\"tuple\":[{\"t\":1},{\"t\":2}]}", "[]", "[1,2]", &err);
  MK_REQUIRE(s != NULL);
  MK_CHECK(strstr(s, "\"op\":\"aten::max\",\"args\":[{\"t\":0},1,false]") != NULL);
  free(s);
  /* refused: an argument the row cannot read, random numbers */
  s = one_form("torch.nn.functional.gelu", "[{\"t\":0}]", "{\"approximate\":{\"opaque\":\"x\"}}", "{\"t\":1}", "[]",
               "[1,2]", &err);
  MK_CHECK(s == NULL && strstr(err.text, "approximate") != NULL && strstr(err.text, "line 7") != NULL);
  s = one_form("torch.nn.functional.dropout", "[{\"t\":0},0.5,true]", "{}", "{\"t\":1}", "[]", "[1,2]", &err);
  MK_CHECK(s == NULL && strstr(err.text, "random") != NULL);
  s = one_form("torch.gru", "[{\"t\":0}]", "{}", "{\"t\":1}", "[]", "[1,2]", &err);
  MK_CHECK(s == NULL && strstr(err.text, "torch.gru (line 7) has no ATen form") != NULL);
}
