/* test_ir.c — the capture-graph IR: parsing, validation, printing, op table. */
#include "mk_buf.h"
#include "mk_ir.h"
#include "mk_test.h"
#include "support.h"

#include <stdlib.h>

static char *load_fixture(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/ir/%s", mk_test_repo_dir(), name);
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(path, 1 << 24, &text, &len) != 0) return NULL;
  return text;
}

static mk_graph *load_graph(const char *name) {
  char *text = load_fixture(name);
  if (text == NULL) return NULL;
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  int rc = mk_graph_from_json(text, strlen(text), &g, &err);
  if (rc) fprintf(stderr, "    %s: %s\n", name, err.text);
  free(text);
  return g;
}

static const char *const fixtures[] = {"conv_min_tanh.json", "gemm_groupnorm_hardtanh.json",
                                       "matmul_scale_residual.json", "bn_relu_sum.json",
                                       "branches.json", "lead_softmax.json"};

MK_TEST(ir, every_fixture_parses_with_consistent_users) {
  for (size_t f = 0; f < sizeof fixtures / sizeof fixtures[0]; f++) {
    mk_graph *g = load_graph(fixtures[f]);
    MK_REQUIRE(g != NULL);
    MK_CHECK(g->nnodes > 0);
    MK_CHECK(g->noutput_values > 0);
    /* users[] lists exactly the nodes whose inputs contain the value */
    for (int v = 0; v < g->nvalues; v++) {
      int expect = 0;
      for (int i = 0; i < g->nnodes; i++)
        for (int k = 0; k < g->nodes[i].ninputs; k++)
          if (g->nodes[i].inputs[k] == v) {
            expect++;
            break;
          }
      MK_CHECK_INT(g->values[v].nusers, ==, expect);
      for (int u = 1; u < g->values[v].nusers; u++)
        MK_CHECK(g->values[v].users[u - 1] < g->values[v].users[u]);
    }
    mk_graph_free(g);
  }
}

MK_TEST(ir, conv_fixture_fields) {
  mk_graph *g = load_graph("conv_min_tanh.json");
  MK_REQUIRE(g != NULL);
  MK_CHECK_INT(g->nnodes, ==, 4);
  MK_CHECK_INT(g->nvalues, ==, 8);
  MK_CHECK_STR(g->class_name, "Model");
  MK_CHECK_INT(g->batch, ==, 0);
  MK_CHECK_INT(g->forward_line, ==, 12);
  MK_CHECK_INT(g->forward_end_line, ==, 17);
  MK_CHECK(g->capture_ms > 12.0 && g->capture_ms < 13.0);
  const mk_node *conv = &g->nodes[0];
  MK_CHECK_STR(conv->short_name, "conv2d");
  MK_CHECK_INT(conv->category, ==, MK_OP_CONV);
  MK_CHECK_STR(conv->module, "conv");
  MK_CHECK_STR(conv->module_type, "Conv2d");
  MK_CHECK_INT(conv->span.line, ==, 13);
  MK_CHECK(conv->replayable);
  MK_CHECK_INT(cJSON_GetArraySize(conv->args), ==, 7);
  MK_CHECK_INT(g->values[1].kind, ==, MK_VALUE_PARAM);
  MK_CHECK_STR(g->values[1].name, "conv.weight");
  MK_CHECK_INT(g->values[0].index, ==, 0);
  MK_CHECK_INT(g->values[3].producer, ==, 0);
  MK_CHECK_INT(g->values[3].rank, ==, 4);
  MK_CHECK_INT(g->values[3].shape[1], ==, 64);
  MK_CHECK_INT(g->nodes[1].category, ==, MK_OP_REDUCTION); /* torch.min(x, dim=1) */
  MK_CHECK_INT(g->nodes[1].noutputs, ==, 2);
  MK_CHECK_INT(g->values[5].dtype, ==, MK_DTYPE_I64);
  MK_CHECK_INT(g->output_values[0], ==, 7);
  MK_CHECK(g->values[7].is_graph_output);
  MK_CHECK(!g->values[6].is_graph_output);
  MK_CHECK_INT(g->nstatements, ==, 4);
  mk_graph_free(g);
}

MK_TEST(ir, print_lines) {
  mk_graph *g = load_graph("conv_min_tanh.json");
  MK_REQUIRE(g != NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_graph_print(g, &b), ==, 0);
  const char *expect =
      "%3 = conv2d(%0, conv.weight, conv.bias) [128,64,254,254] f32   line 13  (conv)\n"
      "%4, %5 = min(%3) [128,1,254,254] f32, [128,1,254,254] i64   line 14\n"
      "%6 = tanh(%4) [128,1,254,254] f32   line 15\n"
      "%7 = tanh(%6) [128,1,254,254] f32   line 16\n"
      "return %7\n";
  MK_CHECK_STR(mk_buf_cstr(&b), expect);
  mk_buf_free(&b);
  mk_graph_free(g);
}

MK_TEST(ir, print_mutations_and_opaque) {
  mk_graph *g = load_graph("bn_relu_sum.json");
  MK_REQUIRE(g != NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_graph_print(g, &b), ==, 0);
  MK_CHECK(strstr(mk_buf_cstr(&b), "mutates bn.running_mean, bn.running_var   line 11  (bn)") != NULL);
  MK_CHECK(strstr(mk_buf_cstr(&b), "%13 = relu(%10) [32,16,16,16] f32  mutates %10   line 12\n") != NULL);
  mk_buf_free(&b);
  mk_graph_free(g);
  g = load_graph("branches.json");
  MK_REQUIRE(g != NULL);
  mk_buf_init(&b, 0);
  mk_graph_print(g, &b);
  MK_CHECK(strstr(mk_buf_cstr(&b), "%12 = rfft(%11) [4,16,32,17] f32   line 27  [opaque]\n") != NULL);
  /* returned twice, listed once */
  MK_CHECK(strstr(mk_buf_cstr(&b), "return %16, %18\n") != NULL);
  mk_buf_free(&b);
  /* a tiny cap fails cleanly */
  mk_buf_init(&b, 16);
  MK_CHECK_INT(mk_graph_print(g, &b), ==, MK_ERANGE);
  mk_buf_free(&b);
  mk_graph_free(g);
}

MK_TEST(ir, mutation_and_replayability) {
  mk_graph *g = load_graph("bn_relu_sum.json");
  MK_REQUIRE(g != NULL);
  const mk_node *bn = &g->nodes[2];
  MK_CHECK_INT(bn->category, ==, MK_OP_NORM);
  MK_CHECK_INT(bn->nmutates, ==, 2);
  MK_CHECK_INT(bn->noutputs, ==, 3); /* result + fresh running stats, in mutates order */
  MK_CHECK_INT(g->nodes[1].category, ==, MK_OP_ELEMENTWISE); /* num_batches_tracked.add_ */
  MK_CHECK(mk_op_is_inplace(g->nodes[1].op));
  MK_CHECK_STR(g->nodes[1].short_name, "add");
  mk_graph_free(g);
  g = load_graph("branches.json");
  MK_REQUIRE(g != NULL);
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    bool reads_const = false;
    for (int k = 0; k < n->ninputs; k++) reads_const |= g->values[n->inputs[k]].kind == MK_VALUE_CONST;
    MK_CHECK(n->replayable == !reads_const);
  }
  MK_CHECK_INT(g->nodes[6].category, ==, MK_OP_OPAQUE);  /* torch.fft.rfft */
  MK_CHECK_INT(g->nodes[7].category, ==, MK_OP_FACTORY); /* torch.zeros */
  MK_CHECK_INT(g->nodes[9].category, ==, MK_OP_VIEW);    /* x[:, ..., 0:8] */
  MK_CHECK_INT(g->nodes[12].category, ==, MK_OP_ELEMENTWISE); /* torch.max(a, b) */
  MK_CHECK_INT(g->noutput_values, ==, 2);
  mk_graph_free(g);
}

/* ---- validation: every broken graph is refused with a message naming what is wrong */

typedef void (*mutator)(cJSON *root);

static cJSON *node_at(cJSON *root, int i) { return cJSON_GetArrayItem(cJSON_GetObjectItem(root, "nodes"), i); }
static cJSON *value_at(cJSON *root, int i) { return cJSON_GetArrayItem(cJSON_GetObjectItem(root, "values"), i); }
static void set_num(cJSON *o, const char *key, double v) {
  cJSON_DeleteItemFromObject(o, key);
  cJSON_AddNumberToObject(o, key, v);
}

static void m_value_id(cJSON *r) { set_num(value_at(r, 2), "id", 7); }
static void m_node_id(cJSON *r) { set_num(node_at(r, 1), "id", 0); }
static void m_input_range(cJSON *r) { cJSON_ReplaceItemInArray(cJSON_GetObjectItem(node_at(r, 2), "inputs"), 0, cJSON_CreateNumber(99)); }
static void m_read_before(cJSON *r) {
  /* tanh (node 2) reads %7, which node 3 makes */
  cJSON *n = node_at(r, 2);
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(n, "inputs"), 0, cJSON_CreateNumber(7));
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(n, "args"), 0, cJSON_Parse("{\"t\": 7}"));
}
static void m_arg_not_input(cJSON *r) {
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(node_at(r, 3), "args"), 0, cJSON_Parse("{\"t\": 0}"));
}
static void m_producer(cJSON *r) { set_num(value_at(r, 6), "producer", 3); }
static void m_output_twice(cJSON *r) { cJSON_AddItemToArray(cJSON_GetObjectItem(node_at(r, 3), "outputs"), cJSON_CreateNumber(7)); }
static void m_rank(cJSON *r) {
  cJSON_ReplaceItemInObject(value_at(r, 0), "shape", cJSON_Parse("[1,1,1,1,1,1,1,1,1]"));
}
static void m_negative_dim(cJSON *r) { cJSON_ReplaceItemInObject(value_at(r, 0), "shape", cJSON_Parse("[2,-1]")); }
static void m_fraction_dim(cJSON *r) { cJSON_ReplaceItemInObject(value_at(r, 0), "shape", cJSON_Parse("[2,1.5]")); }
static void m_schema(cJSON *r) { set_num(r, "schema", 2); }
static void m_kind(cJSON *r) { cJSON_ReplaceItemInObject(value_at(r, 1), "kind", cJSON_CreateString("weight")); }
static void m_param_name(cJSON *r) { cJSON_DeleteItemFromObject(value_at(r, 1), "name"); }
static void m_mutates(cJSON *r) { cJSON_AddItemToArray(cJSON_GetObjectItem(node_at(r, 3), "mutates"), cJSON_CreateNumber(0)); }
static void m_unreferenced(cJSON *r) { cJSON_AddItemToArray(cJSON_GetObjectItem(node_at(r, 3), "inputs"), cJSON_CreateNumber(0)); }
static void m_span(cJSON *r) { set_num(cJSON_GetObjectItem(node_at(r, 3), "span"), "end_line", 2); }
static void m_args_type(cJSON *r) { cJSON_ReplaceItemInObject(node_at(r, 3), "args", cJSON_CreateString("x")); }
static void m_bad_encoding(cJSON *r) {
  cJSON_ReplaceItemInArray(cJSON_GetObjectItem(node_at(r, 0), "args"), 3, cJSON_Parse("{\"tuple\": 5}"));
}
static void m_out_ref(cJSON *r) { cJSON_ReplaceItemInObject(node_at(r, 3), "out", cJSON_Parse("{\"t\": 1}")); }
static void m_graph_out(cJSON *r) { cJSON_ReplaceItemInObject(r, "outputs", cJSON_Parse("{\"t\": 70}")); }
static void m_stmt(cJSON *r) {
  cJSON_ReplaceItemInObject(cJSON_GetArrayItem(cJSON_GetObjectItem(r, "statements"), 0), "nodes", cJSON_Parse("[9]"));
}
static void m_no_nodes(cJSON *r) { cJSON_DeleteItemFromObject(r, "nodes"); }
static void m_op_empty(cJSON *r) { cJSON_ReplaceItemInObject(node_at(r, 2), "op", cJSON_CreateString("")); }

MK_TEST(ir, broken_graphs_are_refused_with_a_named_cause) {
  static const struct {
    mutator m;
    int code;
    const char *needle;
  } cases[] = {
      {m_value_id, MK_EINVAL, "values[2] has id 7"},
      {m_node_id, MK_EINVAL, "nodes[1] has id 0"},
      {m_input_range, MK_EINVAL, "node 2 (torch.tanh, line 15): \"inputs\" names value 99, which does not exist"},
      {m_read_before, MK_EINVAL, "node 2 (torch.tanh, line 15) reads value 7 before node 3 produces it"},
      {m_arg_not_input, MK_EINVAL, "node 3 (torch.tanh, line 16): an argument refers to value 0, which is not listed"},
      {m_producer, MK_EINVAL, "node 2 (torch.tanh, line 15) lists value 6 as an output, but"},
      {m_output_twice, MK_EINVAL, "lists value 7 as an output twice"},
      {m_rank, MK_EUNSUPPORTED, "value 0 has rank 9"},
      {m_negative_dim, MK_EINVAL, "value 0: shape entries must be integers >= 0"},
      {m_fraction_dim, MK_EINVAL, "value 0: shape entries"},
      {m_schema, MK_EUNSUPPORTED, "schema 2 is not supported"},
      {m_kind, MK_EINVAL, "value 1: unknown kind \"weight\""},
      {m_param_name, MK_EINVAL, "value 1 has no \"name\""},
      {m_mutates, MK_EINVAL, "node 3 (torch.tanh, line 16) mutates value 0, which it does not read"},
      {m_unreferenced, MK_EINVAL, "lists value 0 as an input, but no argument passes it"},
      {m_span, MK_EINVAL, "span ends before it starts"},
      {m_args_type, MK_EINVAL, "\"args\" must be an array"},
      {m_bad_encoding, MK_EINVAL, "node 0 (torch.nn.functional.conv2d, line 13): malformed argument"},
      {m_out_ref, MK_EINVAL, "the return structure refers to value 1"},
      {m_graph_out, MK_EINVAL, "\"outputs\" refers to value 70"},
      {m_stmt, MK_EINVAL, "statement 0 (line 13) names a node that does not exist"},
      {m_no_nodes, MK_EINVAL, "\"nodes\" must be an array"},
      {m_op_empty, MK_EINVAL, "node 2: \"op\" must be a non-empty string"},
  };
  char *text = load_fixture("conv_min_tanh.json");
  MK_REQUIRE(text != NULL);
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *root = cJSON_Parse(text);
    MK_REQUIRE(root != NULL);
    cases[i].m(root);
    mk_graph *g = (mk_graph *)1;
    mk_errmsg err = {{0}};
    int rc = mk_graph_from_cjson(root, &g, &err); /* takes root, also on failure */
    if (rc != cases[i].code || strstr(err.text, cases[i].needle) == NULL)
      fprintf(stderr, "    case %zu: rc %d, message: %s\n", i, rc, err.text);
    MK_CHECK_INT(rc, ==, cases[i].code);
    MK_CHECK(strstr(err.text, cases[i].needle) != NULL);
    MK_CHECK(g == NULL);
  }
  free(text);
}

MK_TEST(ir, invalid_json_and_odd_roots) {
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  MK_CHECK_INT(mk_graph_from_json("{\"values\": [", 12, &g, &err), ==, MK_EPARSE);
  MK_CHECK(strstr(err.text, "invalid JSON") != NULL);
  MK_CHECK_INT(mk_graph_from_json("[1,2]", 5, &g, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_graph_from_json("", 0, &g, &err), ==, MK_EPARSE);
  /* the smallest valid graph: nothing in, nothing out */
  const char *empty = "{\"values\": [], \"nodes\": []}";
  MK_CHECK_INT(mk_graph_from_json(empty, strlen(empty), &g, &err), ==, 0);
  MK_REQUIRE(g != NULL);
  MK_CHECK_INT(g->nnodes, ==, 0);
  MK_CHECK(cJSON_IsNull(g->outputs));
  mk_graph_free(g);
  /* a length shorter than the string is honoured */
  const char *two = "{\"values\": [], \"nodes\": []}GARBAGE";
  MK_CHECK_INT(mk_graph_from_json(two, strlen(empty), &g, &err), ==, 0);
  mk_graph_free(g);
  mk_graph_free(NULL);
}

MK_TEST(ir, missing_optional_members_are_normalised) {
  const char *j =
      "{\"values\": [{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[3],\"dtype\":\"float32\"},"
      "{\"id\":1,\"kind\":\"node\",\"producer\":0,\"shape\":[3],\"dtype\":\"complex64\",\"new\":1}],"
      "\"nodes\": [{\"id\":0,\"op\":\"torch.Tensor.neg\",\"args\":[{\"t\":0}],\"inputs\":[0],\"outputs\":[1],"
      "\"out\":{\"t\":1},\"extra\":[1,2]}], \"outputs\": {\"t\": 1}}";
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_graph_from_json(j, strlen(j), &g, &err) == 0);
  MK_CHECK(cJSON_IsObject(g->nodes[0].kwargs));
  MK_CHECK_INT(g->nodes[0].span.line, ==, 0);
  MK_CHECK_INT(g->values[1].dtype, ==, MK_DTYPE_UNKNOWN);
  MK_CHECK(g->nodes[0].module == NULL);
  mk_buf b;
  mk_buf_init(&b, 0);
  mk_graph_print(g, &b);
  MK_CHECK_STR(mk_buf_cstr(&b), "%1 = neg(%0) [3] ?\nreturn %1\n");
  mk_buf_free(&b);
  mk_graph_free(g);
}

MK_TEST(ir, unknown_encoding_makes_node_not_replayable) {
  const char *j =
      "{\"values\": [{\"id\":0,\"kind\":\"input\",\"index\":0,\"shape\":[3],\"dtype\":\"float32\"},"
      "{\"id\":1,\"kind\":\"node\",\"producer\":0,\"shape\":[3],\"dtype\":\"float32\"}],"
      "\"nodes\": [{\"id\":0,\"op\":\"torch.my_op\",\"args\":[{\"t\":0},{\"generator\":\"g\"}],"
      "\"kwargs\":{\"x\":{\"opaque\":\"<obj>\"}},\"inputs\":[0],\"outputs\":[1],\"out\":{\"t\":1}}],"
      "\"outputs\": {\"tuple\": [{\"t\": 1}, {\"t\": 0}]}}";
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_graph_from_json(j, strlen(j), &g, &err) == 0);
  MK_CHECK(!g->nodes[0].replayable);
  MK_CHECK_INT(g->nodes[0].category, ==, MK_OP_OPAQUE);
  MK_CHECK_INT(g->noutput_values, ==, 2);
  MK_CHECK(g->values[0].is_graph_output); /* an input returned as is */
  mk_graph_free(g);
}

/* ---- op table ---------------------------------------------------------------------- */

MK_TEST(ir, op_table_is_sorted_and_unique) {
  int n = mk_op_table_size();
  MK_CHECK(n > 400);
  for (int i = 1; i < n; i++) {
    const char *a = mk_op_table_name(i - 1, NULL), *b = mk_op_table_name(i, NULL);
    if (strcmp(a, b) >= 0) fprintf(stderr, "    out of order: %s, %s\n", a, b);
    MK_CHECK(strcmp(a, b) < 0);
  }
  /* every entry is found by its own name under torch. */
  for (int i = 0; i < n; i++) {
    mk_op_category c;
    const char *name = mk_op_table_name(i, &c);
    char op[160];
    snprintf(op, sizeof op, "torch.Tensor.%s", name);
    MK_CHECK_INT(mk_op_category_of(op), ==, c);
    MK_CHECK(strcmp(mk_op_category_name(c), "invalid") != 0);
  }
  MK_CHECK(mk_op_table_name(n, NULL) == NULL);
  MK_CHECK(mk_op_table_name(-1, NULL) == NULL);
}

MK_TEST(ir, op_categories) {
  static const struct {
    const char *op;
    mk_op_category c;
  } cases[] = {
      {"torch.nn.functional.conv2d", MK_OP_CONV},
      {"torch.conv_transpose3d", MK_OP_CONV},
      {"torch.nn.functional.conv_transpose1d", MK_OP_CONV},
      {"torch.nn.functional.linear", MK_OP_MATMUL},
      {"torch.matmul", MK_OP_MATMUL},
      {"torch.Tensor.__matmul__", MK_OP_MATMUL},
      {"torch.bmm", MK_OP_MATMUL},
      {"torch.baddbmm", MK_OP_MATMUL},
      {"torch.einsum", MK_OP_MATMUL},
      {"torch.relu", MK_OP_ELEMENTWISE},
      {"torch.Tensor.relu_", MK_OP_ELEMENTWISE},
      {"torch.nn.functional.gelu", MK_OP_ELEMENTWISE},
      {"torch._C._nn.gelu", MK_OP_ELEMENTWISE},
      {"torch.Tensor.__iadd__", MK_OP_ELEMENTWISE},
      {"torch.Tensor.__rsub__", MK_OP_ELEMENTWISE},
      {"torch.Tensor.__rtruediv__", MK_OP_ELEMENTWISE},
      {"torch.Tensor.__rand__", MK_OP_ELEMENTWISE}, /* reflected and, not torch.rand */
      {"torch.rand", MK_OP_FACTORY},
      {"torch.randn_like", MK_OP_FACTORY},
      {"torch.Tensor.new_zeros", MK_OP_FACTORY},
      {"torch.clamp", MK_OP_ELEMENTWISE},
      {"torch.Tensor.clamp_min_", MK_OP_ELEMENTWISE},
      {"torch.nn.functional.hardtanh", MK_OP_ELEMENTWISE},
      {"torch.special.expit", MK_OP_ELEMENTWISE},
      {"torch.where", MK_OP_ELEMENTWISE},
      {"torch.sum", MK_OP_REDUCTION},
      {"torch.Tensor.mean", MK_OP_REDUCTION},
      {"torch.amax", MK_OP_REDUCTION},
      {"torch.logsumexp", MK_OP_REDUCTION},
      {"torch.Tensor.argmax", MK_OP_REDUCTION},
      {"torch.nn.functional.mse_loss", MK_OP_REDUCTION},
      {"torch.linalg.vector_norm", MK_OP_REDUCTION},
      {"torch.cumsum", MK_OP_SCAN},
      {"torch.nn.functional.softmax", MK_OP_SOFTMAX},
      {"torch.Tensor.log_softmax", MK_OP_SOFTMAX},
      {"torch.nn.functional.batch_norm", MK_OP_NORM},
      {"torch.nn.functional.layer_norm", MK_OP_NORM},
      {"torch.nn.functional.group_norm", MK_OP_NORM},
      {"torch.nn.functional.instance_norm", MK_OP_NORM},
      {"torch.nn.functional.rms_norm", MK_OP_NORM},
      {"torch.nn.functional.max_pool3d", MK_OP_POOL},
      {"torch.nn.functional.adaptive_avg_pool2d", MK_OP_POOL},
      {"torch.nn.functional.avg_pool1d", MK_OP_POOL},
      {"torch.Tensor.view", MK_OP_VIEW},
      {"torch.flatten", MK_OP_VIEW},
      {"torch.Tensor.permute", MK_OP_VIEW},
      {"torch.Tensor.T.__get__", MK_OP_VIEW},
      {"torch.cat", MK_OP_DATA},
      {"torch.Tensor.chunk", MK_OP_DATA},
      {"torch.nn.functional.pad", MK_OP_DATA},
      {"torch.gather", MK_OP_DATA},
      {"torch.Tensor.__setitem__", MK_OP_DATA},
      {"torch._VF.lstm", MK_OP_RNN},
      {"torch.nn.functional.scaled_dot_product_attention", MK_OP_ATTENTION},
      {"torch.nn.functional.glu", MK_OP_OPAQUE},
      {"torch.Tensor.item", MK_OP_OPAQUE},
      {"torch.fft.rfft", MK_OP_OPAQUE},
      {"torch.totally_new_op", MK_OP_OPAQUE},
      {"numpy.add", MK_OP_OPAQUE}, /* outside torch */
      {"", MK_OP_OPAQUE},
      {"torch.", MK_OP_OPAQUE},
      {"torch.Tensor._", MK_OP_OPAQUE},
      {NULL, MK_OP_OPAQUE},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mk_op_category c = mk_op_category_of(cases[i].op);
    if (c != cases[i].c) fprintf(stderr, "    %s: %s\n", cases[i].op ? cases[i].op : "(null)", mk_op_category_name(c));
    MK_CHECK_INT(c, ==, cases[i].c);
  }
  MK_CHECK(mk_op_flags("torch.nn.functional.dropout") & MK_OPF_RANDOM);
  MK_CHECK(mk_op_flags("torch.randn") & MK_OPF_RANDOM);
  MK_CHECK(!(mk_op_flags("torch.relu") & MK_OPF_RANDOM));
  MK_CHECK(mk_op_is_heavy(MK_OP_CONV) && mk_op_is_heavy(MK_OP_NORM) && !mk_op_is_heavy(MK_OP_REDUCTION));
  MK_CHECK_STR(mk_op_category_name((mk_op_category)99), "invalid");
}

static mk_op_category call_cat(const char *op, const char *args, const char *kwargs) {
  cJSON *a = cJSON_Parse(args), *k = kwargs ? cJSON_Parse(kwargs) : NULL;
  mk_op_category c = mk_op_category_for_call(op, a, k);
  cJSON_Delete(a);
  cJSON_Delete(k);
  return c;
}

MK_TEST(ir, category_refined_by_arguments) {
  MK_CHECK_INT(call_cat("torch.max", "[{\"t\":0}]", NULL), ==, MK_OP_REDUCTION);
  MK_CHECK_INT(call_cat("torch.max", "[{\"t\":0}, 1]", "{\"keepdim\": true}"), ==, MK_OP_REDUCTION);
  MK_CHECK_INT(call_cat("torch.Tensor.max", "[{\"t\":0}]", "{\"dim\": 1}"), ==, MK_OP_REDUCTION);
  MK_CHECK_INT(call_cat("torch.max", "[{\"t\":0}, {\"t\":1}]", NULL), ==, MK_OP_ELEMENTWISE);
  MK_CHECK_INT(call_cat("torch.Tensor.min", "[{\"t\":0}]", "{\"other\": {\"t\":1}}"), ==, MK_OP_ELEMENTWISE);
  MK_CHECK_INT(call_cat("torch.Tensor.__getitem__", "[{\"t\":0}, 1]", NULL), ==, MK_OP_VIEW);
  MK_CHECK_INT(call_cat("torch.Tensor.__getitem__",
                        "[{\"t\":0}, {\"tuple\": [{\"slice\": [null, null, null]}, null, {\"ellipsis\": true}]}]", NULL),
               ==, MK_OP_VIEW);
  MK_CHECK_INT(call_cat("torch.Tensor.__getitem__", "[{\"t\":0}, {\"t\":1}]", NULL), ==, MK_OP_DATA);
  MK_CHECK_INT(call_cat("torch.Tensor.__getitem__", "[{\"t\":0}, {\"list\": [0, 2]}]", NULL), ==, MK_OP_DATA);
  MK_CHECK_INT(call_cat("torch.Tensor.__getitem__", "[{\"t\":0}, {\"tuple\": [0, {\"t\": 1}]}]", NULL), ==, MK_OP_DATA);
  MK_CHECK_INT(call_cat("torch.where", "[{\"t\":0}]", NULL), ==, MK_OP_OPAQUE);
  MK_CHECK_INT(call_cat("torch.where", "[{\"t\":0}, {\"t\":1}, 0.0]", NULL), ==, MK_OP_ELEMENTWISE);
  MK_CHECK_INT(mk_op_category_for_call("torch.max", NULL, NULL), ==, MK_OP_REDUCTION);
  MK_CHECK_INT(mk_op_category_for_call("torch.no_such", NULL, NULL), ==, MK_OP_OPAQUE);
}

MK_TEST(ir, short_names_and_inplace) {
  char buf[64];
  MK_CHECK_STR(mk_op_short_name("torch.Tensor.__iadd__", buf, sizeof buf), "iadd");
  MK_CHECK_STR(mk_op_short_name("torch.Tensor.add_", buf, sizeof buf), "add");
  MK_CHECK_STR(mk_op_short_name("torch.nn.functional.conv2d", buf, sizeof buf), "conv2d");
  MK_CHECK_STR(mk_op_short_name("relu", buf, sizeof buf), "relu");
  MK_CHECK_STR(mk_op_short_name("torch.Tensor.T.__get__", buf, sizeof buf), "T");
  MK_CHECK_STR(mk_op_short_name("torch.nn.functional.scaled_dot_product_attention", buf, 8), "scaled_");
  MK_CHECK(mk_op_is_inplace("torch.Tensor.__imul__"));
  MK_CHECK(mk_op_is_inplace("torch.Tensor.mul_"));
  MK_CHECK(!mk_op_is_inplace("torch.Tensor.__invert__"));
  MK_CHECK(!mk_op_is_inplace("torch.Tensor.__index__"));
  MK_CHECK(!mk_op_is_inplace("torch.mul"));
  MK_CHECK(!mk_op_is_inplace(NULL));
}

MK_TEST(ir, dtypes_and_shapes) {
  MK_CHECK_INT(mk_dtype_from_name("bfloat16"), ==, MK_DTYPE_BF16);
  MK_CHECK_INT(mk_dtype_from_name("torch.float16"), ==, MK_DTYPE_F16);
  MK_CHECK_INT(mk_dtype_from_name("complex64"), ==, MK_DTYPE_UNKNOWN);
  MK_CHECK_INT(mk_dtype_from_name(NULL), ==, MK_DTYPE_UNKNOWN);
  MK_CHECK_STR(mk_dtype_name(MK_DTYPE_I64), "int64");
  MK_CHECK_STR(mk_dtype_short_name(MK_DTYPE_BOOL), "bool");
  MK_CHECK_INT(mk_dtype_size(MK_DTYPE_F64), ==, 8);
  MK_CHECK_INT(mk_dtype_size(MK_DTYPE_UNKNOWN), ==, 0);
  mk_value v = {.rank = 4, .shape = {128, 3, 32, 32}, .id = 5, .kind = MK_VALUE_NODE};
  char buf[64];
  MK_CHECK_STR(mk_shape_str(&v, buf, sizeof buf), "[128, 3, 32, 32]");
  MK_CHECK_STR(mk_shape_str(&v, buf, 6), "[...]");
  MK_CHECK_INT(mk_value_numel(&v), ==, 128 * 3 * 32 * 32);
  MK_CHECK_STR(mk_value_label(&v, buf, sizeof buf), "%5");
  mk_value s = {.rank = 0};
  MK_CHECK_INT(mk_value_numel(&s), ==, 1);
  MK_CHECK_STR(mk_shape_str(&s, buf, sizeof buf), "[]");
  mk_value huge = {.rank = 4, .shape = {1LL << 40, 1LL << 40, 1, 1}};
  MK_CHECK_INT(mk_value_numel(&huge), ==, INT64_MAX);
}

static mk_graph *load_propose_graph(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/tests/fixtures/propose/%s", mk_test_repo_dir(), name);
  char *text = NULL;
  size_t len = 0;
  if (mk_read_file(path, 1 << 24, &text, &len) != 0) return NULL;
  mk_graph *g = NULL;
  if (mk_graph_from_json(text, len, &g, NULL)) g = NULL;
  free(text);
  return g;
}

/* FLOPs of the modelled ops, worked out by hand from the fixture's shapes. */
MK_TEST(ir, cost_of_matrix_work_and_minimum_bytes) {
  mk_graph *g = load_propose_graph("cost_ops.json");
  MK_REQUIRE(g != NULL && g->nnodes == 7);
  /* LSTM, 2 layers, 21 rows (3 x 7): weights 20x6 + 20x5 + 20x5 + 20x5 = 420 */
  MK_CHECK(mk_node_flops(g, &g->nodes[2]) == 2.0 * 21 * 420);
  /* transposed conv: every input element meets C_out/groups x 3 x 3 = 18 weights */
  MK_CHECK(mk_node_flops(g, &g->nodes[3]) == 2.0 * 200 * 18);
  /* attention: q 2x8x4 against 9 keys, twice (QK^T and PV) */
  MK_CHECK(mk_node_flops(g, &g->nodes[4]) == 4.0 * 64 * 9);
  MK_CHECK(mk_node_flops(g, &g->nodes[5]) == 0); /* a view */
  MK_CHECK(mk_node_flops(g, &g->nodes[0]) == 0); /* a factory */
  MK_CHECK(mk_node_flops(g, &g->nodes[6]) == 2.0 * 128 * 4); /* bmm 2x8x4 @ 2x4x8 */
  mk_graph_cost_t c;
  MK_REQUIRE(mk_graph_cost(g, &c) == 0);
  MK_CHECK(c.flops == 2.0 * 21 * 420 + 2.0 * 200 * 18 + 4.0 * 64 * 9 + 2.0 * 128 * 4);
  /* reads: inputs 534 + LSTM 500 + conv 74 floats; writes: 105 + 484 + 128 */
  MK_CHECK(c.bytes == 4.0 * (534 + 500 + 74 + 105 + 484 + 128));
  mk_graph_free(g);

  g = load_graph("conv_min_tanh.json"); /* conv2d 16->64, 3x3, 128x254x254 out */
  MK_REQUIRE(g != NULL);
  MK_CHECK(mk_node_flops(g, &g->nodes[0]) == 2.0 * 128 * 64 * 254 * 254 * 16 * 9);
  mk_graph_free(g);
  g = load_graph("matmul_scale_residual.json");
  MK_REQUIRE(g != NULL && g->nodes[0].category == MK_OP_MATMUL);
  const mk_value *w = &g->values[g->nodes[0].inputs[1]];
  const mk_value *y = &g->values[g->nodes[0].outputs[0]];
  MK_CHECK(mk_node_flops(g, &g->nodes[0]) == 2.0 * (double)mk_value_numel(y) * (double)w->shape[1]);
  mk_graph_free(g);
}

MK_TEST(ir, roofline_fraction) {
  mk_graph_cost_t c = {.flops = 1e12, .bytes = 1e9};
  /* 1e12 FLOP at 1e14 FLOP/s = 10 ms; 1e9 B at 1e12 B/s = 1 ms: bound 10 ms */
  double f = mk_roofline_fraction(&c, 1e14, 1e12, 20.0);
  MK_CHECK(f > 0.4999 && f < 0.5001);
  MK_CHECK(mk_roofline_fraction(&c, 1e14, 1e12, 0) == -1);
  MK_CHECK(mk_roofline_fraction(&c, 0, 1e12, 5) == -1);
  MK_CHECK(mk_roofline_fraction(NULL, 1e14, 1e12, 5) == -1);
  MK_CHECK(mk_graph_cost(NULL, &c) == MK_EINVAL);
}

/* Tensors made from constants (tests/fixtures/propose/constants.py): the two
 * that nothing writes or returns may be made once; a tensor written in
 * place, one whose view is written, a random one, a returned one, one made
 * from a tensor and every other op may not. */
MK_TEST(ir, constant_tensors_are_the_ones_nothing_writes_or_returns) {
  mk_graph *g = load_propose_graph("constants.json");
  MK_REQUIRE(g != NULL);
  bool want[32] = {false};
  want[0] = true; /* torch.tensor(1.0 / 0.01, device=x.device) */
  want[1] = true; /* torch.full((4,), 0.5, device=x.device) */
  MK_REQUIRE(g->nnodes <= 32);
  for (int i = 0; i < g->nnodes; i++) {
    if (mk_graph_node_is_constant(g, i) != want[i]) fprintf(stderr, "node %d (%s)\n", i, g->nodes[i].op);
    MK_CHECK(mk_graph_node_is_constant(g, i) == want[i]);
  }
  MK_CHECK(strcmp(g->nodes[2].op, "torch.zeros") == 0);  /* acc.add_(...) */
  MK_CHECK(strcmp(g->nodes[5].op, "torch.ones") == 0);   /* base[0].mul_(2.0) */
  MK_CHECK(strcmp(g->nodes[9].op, "torch.arange") == 0); /* returned */
  MK_CHECK(!mk_graph_node_is_constant(g, -1) && !mk_graph_node_is_constant(g, g->nnodes));
  MK_CHECK(!mk_graph_node_is_constant(NULL, 0));
  mk_graph_free(g);
}

/* Forward arguments that are not tensors ("scalar_inputs", docs/protocol.md):
 * read by index with their encoded value; one holding a tensor or an opaque
 * part is opaque (no literal can stand for it); an index a tensor input or an
 * earlier scalar already has, a missing index or a malformed value is refused. */
MK_TEST(ir, scalar_inputs_are_read_with_their_values) {
  mk_errmsg err = {{0}};
  mk_graph *g = NULL;
  MK_REQUIRE(mk_graph_from_json(mk_test_scalar_graph_json, strlen(mk_test_scalar_graph_json), &g, &err) == 0);
  MK_CHECK_INT(g->nscalar_inputs, ==, 1);
  MK_CHECK_INT(g->scalar_inputs[0].index, ==, 1);
  MK_CHECK(cJSON_IsNumber(g->scalar_inputs[0].value) && g->scalar_inputs[0].value->valuedouble == 2.5);
  mk_graph_free(g);
  static const struct {
    const char *entries;
    int code, opaque;
    const char *needle;
  } cases[] = {
      {"[{\"index\":1,\"opaque\":true,\"type\":\"Config\"}]", 0, 1, NULL},
      {"[{\"index\":1,\"value\":{\"list\":[{\"t\":0}]}}]", 0, 1, NULL},
      {"[{\"index\":1,\"value\":{\"opaque\":\"<object>\"}}]", 0, 1, NULL},
      {"[{\"index\":1,\"value\":{\"tuple\":[1,{\"float\":2.0}]}}]", 0, 0, NULL},
      {"[{\"index\":0,\"value\":1}]", MK_EINVAL, 0, "forward argument 0 is already an input"},
      {"[{\"index\":2,\"value\":1},{\"index\":2,\"value\":3}]", MK_EINVAL, 0,
       "scalar input 1: forward argument 2 is already an input"},
      {"[{\"value\":1}]", MK_EINVAL, 0, "scalar input 0"},
      {"[{\"index\":1,\"value\":[1,2]}]", MK_EINVAL, 0, "\"value\" is not a valid encoded value"},
      {"{}", MK_EINVAL, 0, "\"scalar_inputs\" must be an array"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *root = cJSON_Parse(mk_test_scalar_graph_json);
    MK_REQUIRE(root != NULL);
    cJSON_ReplaceItemInObjectCaseSensitive(root, "scalar_inputs", cJSON_Parse(cases[i].entries));
    g = NULL;
    err.text[0] = '\0';
    int rc = mk_graph_from_cjson(root, &g, &err);
    if (rc != cases[i].code) fprintf(stderr, "    case %zu: rc %d: %s\n", i, rc, err.text);
    MK_CHECK_INT(rc, ==, cases[i].code);
    if (rc == 0) {
      MK_CHECK_INT(g->nscalar_inputs, ==, 1);
      MK_CHECK_INT(g->scalar_inputs[0].value == NULL, ==, cases[i].opaque);
      if (i == 0) MK_CHECK_STR(g->scalar_inputs[0].type, "Config");
      mk_graph_free(g);
    } else {
      MK_CHECK(strstr(err.text, cases[i].needle) != NULL);
    }
  }
}

/* Sizes that follow the batch (docs/capture.md, "Running at any batch"): a
 * batch-free graph's sizes point at the number they replace and the tensor
 * dim they follow; each is checked against the captured shapes, and a graph
 * without them (an older worker) is not batch-free and says so. */
MK_TEST(ir, batch_sizes_are_read_and_checked) {
  mk_graph *g = load_graph("batch_view.json");
  MK_REQUIRE(g != NULL);
  MK_CHECK(g->batch_free && g->batch_free_why == NULL);
  MK_CHECK_INT(g->nbatch_inputs, ==, 1);
  MK_CHECK_INT(g->batch_inputs[0], ==, 0);
  const mk_node *view = &g->nodes[1];
  MK_REQUIRE(view->nbatch_ints == 1);
  const mk_batch_int *b = &view->batch_ints[0];
  MK_CHECK(b->leaf == cJSON_GetArrayItem(view->args, 1));
  MK_CHECK(mk_node_batch_int(view, cJSON_GetArrayItem(view->args, 1)) == b);
  MK_CHECK(mk_node_batch_int(view, cJSON_GetArrayItem(view->args, 2)) == NULL); /* the -1 */
  MK_CHECK(b->vid == 1 && b->dim == 0 && b->num == 1 && b->den == 1 && b->off == 0);
  MK_CHECK_INT(g->nodes[0].nbatch_ints, ==, 0);
  mk_graph_free(g);

  char *text = load_fixture("batch_view.json");
  MK_REQUIRE(text != NULL);
  static const struct {
    const char *sizes, *free;
    int code;
    const char *needle;
  } cases[] = {
      /* 2 * 4 // 2 + 0 = 4: another formula for the same number is fine */
      {"[{\"at\":[1],\"t\":1,\"dim\":0,\"num\":2,\"den\":2,\"off\":0}]", NULL, 0, NULL},
      {"[{\"at\":[1],\"t\":1,\"dim\":0,\"num\":1,\"den\":1,\"off\":1}]", NULL, MK_EINVAL,
       "gives 5 at the captured shapes, not 4"},
      {"[{\"at\":[2],\"t\":3,\"dim\":0,\"num\":1,\"den\":1,\"off\":0}]", NULL, MK_EINVAL,
       "follows value 3, which it does not read and which is no forward input"},
      /* a forward input the node does not read: a factory's size */
      {"[{\"at\":[1],\"t\":0,\"dim\":0,\"num\":1,\"den\":1,\"off\":0}]", NULL, 0, NULL},
      {"[{\"at\":[1],\"t\":1,\"dim\":3,\"num\":1,\"den\":1,\"off\":0}]", NULL, MK_EINVAL,
       "follows dim 3 of a rank-3 value"},
      {"[{\"at\":[0],\"t\":1,\"dim\":0,\"num\":1,\"den\":1,\"off\":0}]", NULL, MK_EINVAL,
       "names no number in its arguments"},
      {"[{\"at\":[1,0],\"t\":1,\"dim\":0,\"num\":1,\"den\":1,\"off\":0}]", NULL, MK_EINVAL,
       "names no number"},
      {"[{\"at\":[\"size\"],\"t\":1,\"dim\":0,\"num\":1,\"den\":1,\"off\":0}]", NULL, MK_EINVAL,
       "names no number"},
      {"[{\"at\":[1],\"t\":1,\"dim\":0,\"num\":1,\"den\":0,\"off\":0}]", NULL, MK_EINVAL, "malformed"},
      {"{}", NULL, MK_EINVAL, "\"batch_ints\" must be an array"},
      {NULL, "{\"ok\":true,\"inputs\":[2]}", MK_EINVAL, "not a tensor input"},
      {NULL, "{\"ok\":true,\"inputs\":[]}", MK_EINVAL, "lists no batched input"},
      {NULL, "[]", MK_EINVAL, "\"batch_free\" must be an object"},
      {NULL, "{\"ok\":false,\"why\":\"the forward fails at another batch\"}", 0,
       "the forward fails at another batch"},
      {NULL, "null", 0, "did not look at other batches"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *root = cJSON_Parse(text);
    MK_REQUIRE(root != NULL);
    if (cases[i].sizes)
      cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetArrayItem(cJSON_GetObjectItem(root, "nodes"), 1),
                                             "batch_ints", cJSON_Parse(cases[i].sizes));
    if (cases[i].free)
      cJSON_ReplaceItemInObjectCaseSensitive(root, "batch_free", cJSON_Parse(cases[i].free));
    mk_errmsg err = {{0}};
    g = NULL;
    int rc = mk_graph_from_cjson(root, &g, &err);
    if (rc != cases[i].code) fprintf(stderr, "    case %zu: rc %d: %s\n", i, rc, err.text);
    MK_CHECK_INT(rc, ==, cases[i].code);
    if (rc == 0 && cases[i].needle) {
      MK_CHECK(!g->batch_free && strstr(g->batch_free_why, cases[i].needle) != NULL);
    } else if (rc != 0) {
      MK_CHECK(strstr(err.text, cases[i].needle) != NULL);
    }
    mk_graph_free(g);
  }
  free(text);
}
