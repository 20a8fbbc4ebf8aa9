/* test_decompose.c — fusion groups, subkernels, split/merge: fixed cases and
 * property tests over the fixtures and random graphs. */
#include "mk_buf.h"
#include "mk_decompose.h"
#include "mk_test.h"
#include "support.h"

#include <stdlib.h>
#include <string.h>

/* A graph fixture from tests/fixtures/<dir>/<name>. */
static mk_graph *load_fixture_graph(const char *dir, const char *name) { return mk_test_load_graph(dir, name); }

static mk_graph *load_graph(const char *name) { return load_fixture_graph("ir", name); }

static const char *const fixtures[] = {"conv_min_tanh.json", "gemm_groupnorm_hardtanh.json",
                                       "matmul_scale_residual.json", "bn_relu_sum.json",
                                       "branches.json", "lead_softmax.json"};
#define NFIXTURES (int)(sizeof fixtures / sizeof fixtures[0])

/* "name:n0,n1|name:..." — a compact picture of a partition. */
static const char *describe(const mk_partition *p, mk_buf *b) {
  mk_buf_reset(b);
  for (int i = 0; i < p->nsubkernels; i++) {
    const mk_subkernel *s = &p->subkernels[i];
    mk_buf_printf(b, "%s%s:", i ? "|" : "", s->name);
    for (int k = 0; k < s->nnodes; k++) mk_buf_printf(b, "%s%d", k ? "," : "", s->nodes[k]);
  }
  return mk_buf_cstr(b);
}

static void check_initial(const char *fixture, const char *expect) {
  mk_graph *g = load_graph(fixture);
  MK_REQUIRE(g != NULL);
  mk_partition p;
  mk_errmsg err = {{0}};
  int rc = mk_decompose_initial(g, &p, &err);
  if (rc) fprintf(stderr, "    %s: %s\n", fixture, err.text);
  MK_CHECK_INT(rc, ==, 0);
  mk_buf b;
  mk_buf_init(&b, 0);
  if (!rc) MK_CHECK_STR(describe(&p, &b), expect);
  mk_buf_free(&b);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(decompose, initial_groups_of_fixtures) {
  /* the reduction ends the conv chain; the tanh chain after it is its own group */
  check_initial("conv_min_tanh.json", "conv2d_min:0,1|tanh:2,3");
  /* a norm is heavy: it starts the next group */
  check_initial("gemm_groupnorm_hardtanh.json", "linear:0|group_norm_hardtanh:1,2");
  /* every reader of the gemm output joins, so the residual fuses */
  check_initial("matmul_scale_residual.json", "linear_clone_mul_add:0,1,2,3,4");
  /* the buffer counter update has no producer group: a chain of its own */
  check_initial("bn_relu_sum.json", "conv2d:0|add:1|batch_norm_relu_sum:2,3,4|mul:5,6");
  /* branches each keep their epilogue; cat joins the latest one; opaque alone */
  check_initial("branches.json",
                "mul:0|conv2d_relu:1,3|conv2d_sigmoid_cat:2,4,5|rfft:6|zeros_add:7,8,9,10|softmax_max:11,12");
  check_initial("lead_softmax.json", "sub_exp_softmax:0,1,2|rsub_logsumexp:3,4|div:5");
}

MK_TEST(decompose, subkernel_fields) {
  mk_graph *g = load_graph("bn_relu_sum.json");
  MK_REQUIRE(g != NULL);
  mk_partition p;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  const mk_subkernel *bn = &p.subkernels[2];
  MK_CHECK_INT(bn->id, ==, 2);
  MK_CHECK_INT(bn->anchor, ==, 2);
  MK_CHECK_INT(bn->first_line, ==, 11);
  MK_CHECK_INT(bn->last_line, ==, 13);
  /* inputs in first-use order: the conv output, then the batch_norm params/buffers */
  static const int want_in[] = {8, 5, 6, 3, 4};
  MK_CHECK_INT(bn->ninputs, ==, 5);
  for (int i = 0; i < bn->ninputs && i < 5; i++) MK_CHECK_INT(bn->inputs[i], ==, want_in[i]);
  MK_CHECK_INT(bn->noutputs, ==, 1);
  MK_CHECK_INT(bn->outputs[0], ==, 14); /* the sum */
  MK_CHECK_INT(p.subkernels[3].anchor, ==, -1);
  MK_CHECK_INT(p.subkernels[3].noutputs, ==, 1);
  MK_CHECK_INT(p.subkernels[3].outputs[0], ==, 16); /* the graph output */
  MK_CHECK_INT(mk_partition_find(&p, 4), ==, 2);
  MK_CHECK_INT(mk_partition_find(&p, 99), ==, -1);
  mk_partition_free(&p);
  mk_partition_free(&p); /* idempotent */
  mk_graph_free(g);
}

MK_TEST(decompose, subkernel_from_nodes_errors) {
  mk_graph *g = load_graph("branches.json");
  MK_REQUIRE(g != NULL);
  mk_subkernel s;
  mk_errmsg err = {{0}};
  /* mul(0) and cat(5) without the convs in between: conv 1 depends on 0, 5 on it */
  int bad[] = {5, 0};
  MK_CHECK_INT(mk_subkernel_from_nodes(g, bad, 2, &s, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "cannot form one subkernel: node 4 (sigmoid, line 25) depends on them") != NULL);
  int dup[] = {3, 3};
  MK_CHECK_INT(mk_subkernel_from_nodes(g, dup, 2, &s, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "listed twice") != NULL);
  int range[] = {3, 40};
  MK_CHECK_INT(mk_subkernel_from_nodes(g, range, 2, &s, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "node 40 does not exist") != NULL);
  MK_CHECK_INT(mk_subkernel_from_nodes(g, range, 0, &s, &err), ==, MK_EINVAL);
  /* two independent branches form a (disconnected) convex set */
  int horiz[] = {4, 3};
  MK_REQUIRE(mk_subkernel_from_nodes(g, horiz, 2, &s, &err) == 0);
  MK_CHECK_INT(s.nodes[0], ==, 3);
  MK_CHECK_STR(s.name, "relu_sigmoid");
  MK_CHECK_INT(s.ninputs, ==, 2);
  MK_CHECK_INT(s.noutputs, ==, 2);
  MK_CHECK_INT(s.anchor, ==, -1);
  mk_subkernel c;
  MK_REQUIRE(mk_subkernel_copy(&s, &c) == 0);
  MK_CHECK_STR(c.name, s.name);
  MK_CHECK(c.nodes != s.nodes && c.nodes[1] == 4);
  mk_subkernel_free(&c);
  mk_subkernel_free(&s);
  /* a view-only subkernel is named by its views; a const reader keeps the const as input */
  int views[] = {9};
  MK_REQUIRE(mk_subkernel_from_nodes(g, views, 1, &s, &err) == 0);
  MK_CHECK_STR(s.name, "index");
  mk_subkernel_free(&s);
  int withconst[] = {10};
  MK_REQUIRE(mk_subkernel_from_nodes(g, withconst, 1, &s, &err) == 0);
  MK_CHECK_INT(s.ninputs, ==, 2);
  MK_CHECK_INT(s.inputs[1], ==, 5);
  mk_subkernel_free(&s);
  mk_graph_free(g);
}

MK_TEST(decompose, split_merge_and_names) {
  mk_graph *g = load_graph("matmul_scale_residual.json");
  MK_REQUIRE(g != NULL);
  mk_partition p;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_INT(mk_partition_split(g, &p, 0, 3, &err), ==, 0);
  MK_CHECK_STR(describe(&p, &b), "linear_clone:0,1,2|mul_add:3,4");
  MK_CHECK_INT(p.subkernels[1].id, ==, 1);
  /* the linear output escapes to mul, the detached clone to add */
  MK_CHECK_INT(p.subkernels[0].noutputs, ==, 2);
  MK_CHECK_INT(mk_partition_split(g, &p, 1, 4, &err), ==, 0);
  MK_CHECK_INT(mk_partition_split(g, &p, 0, 1, &err), ==, 0);
  MK_CHECK_STR(describe(&p, &b), "linear:0|clone:1,2|mul:3|add:4");
  MK_CHECK_INT(mk_partition_split(g, &p, 0, 0, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "one side empty") != NULL);
  MK_CHECK_INT(mk_partition_split(g, &p, 9, 1, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_partition_merge(g, &p, 3, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_partition_merge(g, &p, -1, &err), ==, MK_EINVAL);
  MK_CHECK_INT(mk_partition_merge(g, &p, 1, &err), ==, 0);
  MK_CHECK_STR(describe(&p, &b), "linear:0|clone_mul:1,2,3|add:4");
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, 0);
  mk_partition_free(&p);
  mk_graph_free(g);

  /* equal names get suffixes, and a split never renames the others */
  g = load_graph("conv_min_tanh.json");
  MK_REQUIRE(g != NULL);
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  MK_CHECK_INT(mk_partition_split(g, &p, 1, 3, &err), ==, 0);
  MK_CHECK_STR(describe(&p, &b), "conv2d_min:0,1|tanh:2|tanh_2:3");
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, 0);
  mk_buf_free(&b);
  mk_partition_free(&p);
  mk_graph_free(g);
}

MK_TEST(decompose, validate_catches_broken_partitions) {
  mk_graph *g = load_graph("lead_softmax.json");
  MK_REQUIRE(g != NULL);
  mk_partition p;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
  MK_REQUIRE(p.nsubkernels == 3);
  /* swap the order: the second group reads the first */
  mk_subkernel t = p.subkernels[0];
  p.subkernels[0] = p.subkernels[1];
  p.subkernels[1] = t;
  p.subkernels[0].id = 0;
  p.subkernels[1].id = 1;
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "runs after it") != NULL);
  p.subkernels[1] = p.subkernels[0];
  p.subkernels[0] = t;
  p.subkernels[0].id = 0;
  p.subkernels[1].id = 1;
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, 0);
  p.subkernels[2].outputs[0] = 1;
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "outputs are stale") != NULL);
  p.subkernels[2].outputs[0] = 7;
  p.subkernels[2].nnodes = 0; /* node 5 in no subkernel */
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, MK_EINVAL);
  p.subkernels[2].nnodes = 1;
  free(p.subkernels[2].name);
  p.subkernels[2].name = mk_strdup("tanh");
  free(p.subkernels[1].name);
  p.subkernels[1].name = mk_strdup("tanh");
  MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, MK_EINVAL);
  MK_CHECK(strstr(err.text, "used twice") != NULL);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* ---- property tests ------------------------------------------------------------ */

static unsigned rng_next(unsigned *s) {
  *s ^= *s << 13;
  *s ^= *s >> 17;
  *s ^= *s << 5;
  return *s;
}

static const char *const random_ops[] = {
    "torch.nn.functional.conv2d", "torch.nn.functional.linear", "torch.relu", "torch.Tensor.__add__",
    "torch.Tensor.__mul__", "torch.tanh", "torch.sum", "torch.softmax", "torch.Tensor.view",
    "torch.cat", "torch.zeros", "torch.fft.rfft", "torch.nn.functional.layer_norm", "torch.max",
    "torch.cumsum", "torch.Tensor.add_", "torch.sigmoid", "torch.nn.functional.max_pool2d",
};
#define NRANDOM_OPS (int)(sizeof random_ops / sizeof random_ops[0])

/* A random valid capture graph: nnodes calls reading 0-3 earlier values. */
static mk_graph *random_graph(unsigned *seed, int nnodes) {
  cJSON *root = cJSON_CreateObject(), *values = cJSON_AddArrayToObject(root, "values"),
        *nodes = cJSON_AddArrayToObject(root, "nodes");
  int nvalues = 0;
  for (int i = 0; i < 3; i++, nvalues++) {
    cJSON *v = cJSON_CreateObject();
    cJSON_AddNumberToObject(v, "id", nvalues);
    cJSON_AddStringToObject(v, "kind", i == 0 ? "input" : "param");
    if (i == 0) cJSON_AddNumberToObject(v, "index", 0);
    else cJSON_AddStringToObject(v, "name", i == 1 ? "w" : "b");
    cJSON_AddItemToObject(v, "shape", cJSON_Parse("[4]"));
    cJSON_AddStringToObject(v, "dtype", "float32");
    cJSON_AddItemToArray(values, v);
  }
  for (int n = 0; n < nnodes; n++) {
    const char *op = random_ops[rng_next(seed) % NRANDOM_OPS];
    int nin = strcmp(op, "torch.zeros") == 0 ? 0 : 1 + (int)(rng_next(seed) % 3);
    cJSON *node = cJSON_CreateObject(), *args = cJSON_CreateArray(), *ins = cJSON_CreateArray();
    int picked[3], npicked = 0;
    for (int k = 0; k < nin; k++) {
      /* prefer recent values so chains form */
      int span = nvalues < 6 ? nvalues : 6;
      int v = rng_next(seed) % 4 == 0 ? (int)(rng_next(seed) % (unsigned)nvalues)
                                      : nvalues - 1 - (int)(rng_next(seed) % (unsigned)span);
      bool dup = false;
      for (int j = 0; j < npicked; j++) dup |= picked[j] == v;
      if (dup) continue;
      picked[npicked++] = v;
      cJSON *t = cJSON_CreateObject();
      cJSON_AddNumberToObject(t, "t", v);
      cJSON_AddItemToArray(args, t);
      cJSON_AddItemToArray(ins, cJSON_CreateNumber(v));
    }
    int nout = 1 + (rng_next(seed) % 5 == 0);
    cJSON *outs = cJSON_CreateArray();
    for (int k = 0; k < nout; k++, nvalues++) {
      cJSON *v = cJSON_CreateObject();
      cJSON_AddNumberToObject(v, "id", nvalues);
      cJSON_AddStringToObject(v, "kind", "node");
      cJSON_AddNumberToObject(v, "producer", n);
      cJSON_AddItemToObject(v, "shape", cJSON_Parse("[4]"));
      cJSON_AddStringToObject(v, "dtype", "float32");
      cJSON_AddItemToArray(values, v);
      cJSON_AddItemToArray(outs, cJSON_CreateNumber(nvalues));
    }
    cJSON_AddNumberToObject(node, "id", n);
    cJSON_AddStringToObject(node, "op", op);
    cJSON_AddItemToObject(node, "args", args);
    cJSON_AddItemToObject(node, "inputs", ins);
    cJSON_AddItemToObject(node, "outputs", outs);
    cJSON *span = cJSON_AddObjectToObject(node, "span");
    cJSON_AddNumberToObject(span, "line", 10 + n);
    cJSON_AddItemToArray(nodes, node);
  }
  cJSON *out = cJSON_CreateObject(), *tup = cJSON_AddArrayToObject(out, "tuple");
  for (int k = 0; k < 2; k++) {
    cJSON *t = cJSON_CreateObject();
    cJSON_AddNumberToObject(t, "t", nvalues - 1 - (int)(rng_next(seed) % (unsigned)(nvalues / 2)));
    cJSON_AddItemToArray(tup, t);
  }
  cJSON_AddItemToObject(root, "outputs", out);
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  if (mk_graph_from_cjson(root, &g, &err)) fprintf(stderr, "    random graph: %s\n", err.text);
  return g;
}

static bool same_partition(const mk_partition *a, const mk_partition *b) {
  if (a->nsubkernels != b->nsubkernels) return false;
  for (int i = 0; i < a->nsubkernels; i++) {
    const mk_subkernel *x = &a->subkernels[i], *y = &b->subkernels[i];
    if (x->nnodes != y->nnodes || memcmp(x->nodes, y->nodes, (size_t)x->nnodes * sizeof(int)) != 0 ||
        strcmp(x->name, y->name) != 0)
      return false;
  }
  return true;
}

/* The initial groups obey their rules: at most one heavy op, opaque alone,
 * a reduction is never followed by more nodes of its group unless it anchors it. */
static void check_group_rules(const mk_graph *g, const mk_partition *p) {
  for (int i = 0; i < p->nsubkernels; i++) {
    const mk_subkernel *s = &p->subkernels[i];
    int heavy = 0, opaque = 0;
    for (int k = 0; k < s->nnodes; k++) {
      mk_op_category c = g->nodes[s->nodes[k]].category;
      heavy += mk_op_is_heavy(c);
      opaque += c == MK_OP_OPAQUE;
      bool ends = c == MK_OP_REDUCTION || c == MK_OP_SOFTMAX || c == MK_OP_SCAN;
      if (ends && k > 0) MK_CHECK_INT(k, ==, s->nnodes - 1);
    }
    MK_CHECK(heavy <= 1);
    MK_CHECK(opaque == 0 || s->nnodes == 1);
  }
}

/* Random splits and merges; each either succeeds and keeps the partition
 * valid, or fails and leaves it exactly as it was. */
static int moves_ok, moves_refused;

static void random_moves(const mk_graph *g, mk_partition *p, unsigned *seed, int moves) {
  mk_errmsg err = {{0}};
  for (int m = 0; m < moves; m++) {
    mk_partition before;
    MK_REQUIRE(mk_partition_copy(p, &before) == 0);
    int idx = (int)(rng_next(seed) % (unsigned)(p->nsubkernels + 1)) - (rng_next(seed) % 8 == 0);
    int rc;
    if (rng_next(seed) % 2) {
      int at = (int)(rng_next(seed) % (unsigned)(g->nnodes + 1));
      rc = mk_partition_split(g, p, idx, at, &err);
    } else {
      rc = mk_partition_merge(g, p, idx, &err);
    }
    if (rc) moves_refused++;
    else moves_ok++;
    if (rc) {
      MK_CHECK_INT(rc, ==, MK_EINVAL);
      MK_CHECK(err.text[0] != '\0');
      MK_CHECK(same_partition(p, &before));
    }
    int vrc = mk_partition_validate(g, p, &err);
    if (vrc) fprintf(stderr, "    after move %d: %s\n", m, err.text);
    MK_CHECK_INT(vrc, ==, 0);
    mk_partition_free(&before);
  }
}

MK_TEST(decompose, property_fixtures_random_moves) {
  unsigned seed = 12345;
  for (int f = 0; f < NFIXTURES; f++) {
    mk_graph *g = load_graph(fixtures[f]);
    MK_REQUIRE(g != NULL);
    mk_partition p;
    mk_errmsg err = {{0}};
    MK_REQUIRE(mk_decompose_initial(g, &p, &err) == 0);
    check_group_rules(g, &p);
    random_moves(g, &p, &seed, 200);
    mk_partition_free(&p);
    mk_graph_free(g);
  }
}

MK_TEST(decompose, property_random_graphs) {
  unsigned seed = 2463534242u;
  for (int round = 0; round < 150; round++) {
    int n = 1 + (int)(rng_next(&seed) % 60);
    mk_graph *g = random_graph(&seed, n);
    MK_REQUIRE(g != NULL);
    mk_partition p;
    mk_errmsg err = {{0}};
    int rc = mk_decompose_initial(g, &p, &err);
    if (rc) fprintf(stderr, "    round %d: %s\n", round, err.text);
    MK_REQUIRE(rc == 0);
    check_group_rules(g, &p);
    /* a copy is equal and independent */
    mk_partition c;
    MK_REQUIRE(mk_partition_copy(&p, &c) == 0);
    MK_CHECK(same_partition(&p, &c));
    mk_partition_free(&c);
    moves_ok = moves_refused = 0;
    random_moves(g, &p, &seed, 40);
    MK_CHECK(moves_ok > 0 || g->nnodes == 1); /* the moves really move */
    /* merging everything adjacent down to one subkernel always works */
    while (p.nsubkernels > 1) MK_REQUIRE(mk_partition_merge(g, &p, 0, &err) == 0);
    MK_CHECK_INT(p.subkernels[0].nnodes, ==, g->nnodes);
    MK_CHECK_INT(mk_partition_validate(g, &p, &err), ==, 0);
    mk_partition_free(&p);
    mk_graph_free(g);
  }
}

MK_TEST(decompose, empty_graph) {
  const char *j = "{\"values\": [], \"nodes\": []}";
  mk_graph *g = NULL;
  mk_errmsg err = {{0}};
  MK_REQUIRE(mk_graph_from_json(j, strlen(j), &g, &err) == 0);
  mk_partition p;
  MK_CHECK_INT(mk_decompose_initial(g, &p, &err), ==, 0);
  MK_CHECK_INT(p.nsubkernels, ==, 0);
  mk_partition_free(&p);
  mk_graph_free(g);
}

static mk_graph *load_propose_fixture(const char *name) { return load_fixture_graph("propose", name); }

/* Blocks 1 and 2 of the fixture are the same computation on different
 * parameters: their subkernels pair up; block 3 (wider) pairs with nothing. */
MK_TEST(decompose, twins_of_repeated_blocks) {
  mk_graph *g = load_propose_fixture("repeated_blocks.json");
  MK_REQUIRE(g != NULL);
  mk_partition p;
  MK_REQUIRE(mk_decompose_initial(g, &p, NULL) == 0);
  mk_buf b;
  mk_buf_init(&b, 0);
  MK_CHECK_STR(describe(&p, &b),
               "conv2d:0|add:1|batch_norm_relu_add:2,3,4|conv2d_2:5|add_2:6|batch_norm_relu_add_2:7,8,9|"
               "conv2d_3:10|add_3:11|batch_norm_relu:12,13");
  int rep[16];
  MK_REQUIRE(mk_partition_twins(g, &p, rep) == 0);
  static const int want[] = {0, 1, 2, 0, 1, 2, 6, 1, 8};
  for (int i = 0; i < p.nsubkernels && i < 9; i++) MK_CHECK_INT(rep[i], ==, want[i]);
  /* equal signatures, different parameter names: the names are not in it */
  mk_buf s0, s3;
  mk_buf_init(&s0, 0);
  mk_buf_init(&s3, 0);
  MK_CHECK_INT(mk_subkernel_signature(g, &p.subkernels[0], &s0), ==, 0);
  MK_CHECK_INT(mk_subkernel_signature(g, &p.subkernels[3], &s3), ==, 0);
  MK_CHECK_STR(mk_buf_cstr(&s0), mk_buf_cstr(&s3));
  MK_CHECK(strstr(mk_buf_cstr(&s0), "b1.") == NULL);
  MK_CHECK(strstr(mk_buf_cstr(&s0), "param:float32[8,8,3,3]") != NULL);
  mk_buf_free(&s0);
  mk_buf_free(&s3);
  mk_buf_free(&b);
  mk_partition_free(&p);
  mk_graph_free(g);
}

/* A subkernel with a node that is not replayable has no signature: it is
 * nobody's twin, not even of an identical copy; its own twins still pair. */
MK_TEST(decompose, twins_need_a_signature) {
  mk_graph *g = load_propose_fixture("repeated_blocks.json");
  MK_REQUIRE(g != NULL);
  mk_partition p;
  MK_REQUIRE(mk_decompose_initial(g, &p, NULL) == 0);
  g->nodes[5].replayable = false; /* block 2's convolution */
  int rep[16];
  MK_REQUIRE(mk_partition_twins(g, &p, rep) == 0);
  MK_CHECK_INT(rep[3], ==, 3);
  MK_CHECK_INT(rep[4], ==, 1);
  MK_CHECK_INT(rep[5], ==, 2);
  mk_buf s;
  mk_buf_init(&s, 0);
  MK_CHECK_INT(mk_subkernel_signature(g, &p.subkernels[3], &s), ==, MK_EUNSUPPORTED);
  mk_buf_free(&s);
  MK_CHECK_INT(mk_subkernel_signature(NULL, &p.subkernels[0], &s), ==, MK_EINVAL);
  MK_CHECK_INT(mk_partition_twins(g, &p, NULL), ==, MK_EINVAL);
  mk_partition_free(&p);
  mk_graph_free(g);
}
