/* batch.c — sizes that follow the batch, read from a capture graph.
 *
 * The worker runs forward at two more batches and marks each integer argument
 * that moves with them as a size of one of its node's tensor arguments
 * (`batch_ints`), and says whether that explains every change (`batch_free`);
 * docs/protocol.md has the schema, docs/capture.md why. This file checks both
 * against the graph it belongs to: a size must point at a number in the
 * node's arguments, follow a tensor the node reads, and give the captured
 * number back at the captured shapes. A graph from an older worker has
 * neither and is simply not batch-free. */
#include "ir_internal.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Coefficients stay far inside int64 so num * size cannot overflow. */
#define BATCH_COEF_MAX 1099511627776.0 /* 2**40 */

/* Python's floor division, which the emitted expression uses. */
static int64_t floor_div(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static bool json_int64(const cJSON *x, double lim, int64_t *out) {
  if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || fabs(x->valuedouble) > lim)
    return false;
  *out = (int64_t)x->valuedouble;
  return true;
}

/* The items of a container encoding ({"tuple": [...]}, a dict's pairs) or of
 * a bare array (an args list, one dict pair); NULL for anything else. */
static const cJSON *container_items(const cJSON *x) {
  static const char *const tags[] = {"tuple", "list", "size", "slice", "dict"};
  if (cJSON_IsArray(x)) return x;
  if (!cJSON_IsObject(x) || x->child == NULL || x->child->next != NULL || !cJSON_IsArray(x->child))
    return NULL;
  for (size_t i = 0; i < sizeof tags / sizeof tags[0]; i++)
    if (strcmp(x->child->string, tags[i]) == 0) return x->child;
  return NULL;
}

/* Follows "at" ([argument index or keyword, then positions inside containers])
 * to the number it names, or NULL. */
static const cJSON *leaf_at(const mk_node *n, const cJSON *at) {
  const cJSON *step = at ? at->child : NULL;
  if (step == NULL) return NULL;
  const cJSON *cur;
  if (cJSON_IsString(step)) cur = cJSON_GetObjectItemCaseSensitive(n->kwargs, step->valuestring);
  else if (cJSON_IsNumber(step) && step->valuedouble >= 0 && step->valuedouble == floor(step->valuedouble))
    cur = cJSON_GetArrayItem(n->args, (int)step->valuedouble);
  else return NULL;
  for (step = step->next; step && cur; step = step->next) {
    const cJSON *items = container_items(cur);
    if (items == NULL || !cJSON_IsNumber(step) || step->valuedouble < 0 ||
        step->valuedouble != floor(step->valuedouble) || step->valuedouble > INT_MAX)
      return NULL;
    cur = cJSON_GetArrayItem(items, (int)step->valuedouble);
  }
  return cJSON_IsNumber(cur) ? cur : NULL;
}

static int parse_one(const mk_graph *g, const mk_node *n, const cJSON *js, mk_batch_int *b,
                     mk_errmsg *err) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(js, "t");
  const cJSON *dim = cJSON_GetObjectItemCaseSensitive(js, "dim");
  int64_t vid, d;
  if (!cJSON_IsObject(js) || !json_int64(t, INT_MAX, &vid) || !json_int64(dim, INT_MAX, &d) ||
      !json_int64(cJSON_GetObjectItemCaseSensitive(js, "num"), BATCH_COEF_MAX, &b->num) ||
      !json_int64(cJSON_GetObjectItemCaseSensitive(js, "den"), BATCH_COEF_MAX, &b->den) ||
      !json_int64(cJSON_GetObjectItemCaseSensitive(js, "off"), BATCH_COEF_MAX, &b->off) || b->den < 1)
    return mk_errf(err, MK_EINVAL, "capture graph: node %d: a batch size is malformed", n->id);
  /* a tensor the node reads, or (a factory's size) a forward input */
  if (vid < 0 || vid >= g->nvalues || (!mk_ir_int_in(n->inputs, n->ninputs, (int)vid) && g->values[vid].kind != MK_VALUE_INPUT))
    return mk_errf(err, MK_EINVAL,
                   "capture graph: node %d: a batch size follows value %lld, which it does not read and "
                   "which is no forward input",
                   n->id, (long long)vid);
  const mk_value *v = &g->values[vid];
  if (d < 0 || d >= v->rank)
    return mk_errf(err, MK_EINVAL, "capture graph: node %d: a batch size follows dim %lld of a rank-%d value",
                   n->id, (long long)d, v->rank);
  if (v->shape[d] < 0 || v->shape[d] > INT64_MAX / ((b->num < 0 ? -b->num : b->num) + 1))
    return mk_errf(err, MK_EINVAL, "capture graph: node %d: a batch size overflows", n->id);
  b->vid = (int)vid;
  b->dim = (int)d;
  b->leaf = leaf_at(n, cJSON_GetObjectItemCaseSensitive(js, "at"));
  if (b->leaf == NULL)
    return mk_errf(err, MK_EINVAL, "capture graph: node %d: a batch size's \"at\" names no number in its arguments",
                   n->id);
  if (floor_div(b->num * v->shape[d], b->den) + b->off != (int64_t)b->leaf->valuedouble)
    return mk_errf(err, MK_EINVAL,
                   "capture graph: node %d: a batch size gives %lld at the captured shapes, not %.0f",
                   n->id, (long long)(floor_div(b->num * v->shape[d], b->den) + b->off),
                   b->leaf->valuedouble);
  return 0;
}

static int parse_node_sizes(const mk_graph *g, mk_node *n, const cJSON *jn, mk_errmsg *err) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(jn, "batch_ints");
  if (a == NULL || cJSON_IsNull(a)) return 0;
  int len = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
  if (len < 0 || len > MK_IR_MAX_ITEMS)
    return mk_errf(err, MK_EINVAL, "capture graph: node %d: \"batch_ints\" must be an array", n->id);
  if (len == 0) return 0;
  n->batch_ints = calloc((size_t)len, sizeof *n->batch_ints);
  if (n->batch_ints == NULL) return MK_ENOMEM;
  const cJSON *it;
  cJSON_ArrayForEach(it, a) {
    int rc = parse_one(g, n, it, &n->batch_ints[n->nbatch_ints], err);
    if (rc) return rc;
    n->nbatch_ints++;
  }
  return 0;
}

/* "batch_free": {"ok": bool, "why": str|null, "inputs": [vid, ...]}. */
static int parse_free(mk_graph *g, const cJSON *bf, mk_errmsg *err) {
  const cJSON *why = cJSON_GetObjectItemCaseSensitive(bf, "why");
  g->batch_free_why = cJSON_IsString(why) ? why->valuestring : "the capture did not say";
  if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(bf, "ok"))) return 0;
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(bf, "inputs");
  int len = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : 0;
  if (len == 0 || len > g->nvalues)
    return mk_errf(err, MK_EINVAL, "capture graph: \"batch_free\" lists no batched input");
  g->batch_inputs = calloc((size_t)len, sizeof *g->batch_inputs);
  if (g->batch_inputs == NULL) return MK_ENOMEM;
  const cJSON *it;
  cJSON_ArrayForEach(it, in) {
    int64_t vid;
    if (!json_int64(it, INT_MAX, &vid) || vid < 0 || vid >= g->nvalues ||
        g->values[vid].kind != MK_VALUE_INPUT || g->values[vid].rank < 1)
      return mk_errf(err, MK_EINVAL, "capture graph: \"batch_free\" lists a batched input that is not a tensor input");
    g->batch_inputs[g->nbatch_inputs++] = (int)vid;
  }
  g->batch_free = true;
  g->batch_free_why = NULL;
  return 0;
}

int mk_ir_parse_batch(mk_graph *g, const cJSON *root, mk_errmsg *err) {
  const cJSON *bf = cJSON_GetObjectItemCaseSensitive(root, "batch_free");
  g->batch_free = false;
  g->batch_free_why = "captured by a worker that did not look at other batches";
  if (cJSON_IsObject(bf)) {
    int rc = parse_free(g, bf, err);
    if (rc) return rc;
  } else if (bf != NULL && !cJSON_IsNull(bf)) {
    return mk_errf(err, MK_EINVAL, "capture graph: \"batch_free\" must be an object");
  }
  int i = 0;
  const cJSON *jn;
  cJSON_ArrayForEach(jn, cJSON_GetObjectItemCaseSensitive(root, "nodes")) {
    if (i >= g->nnodes) break;
    int rc = parse_node_sizes(g, &g->nodes[i++], jn, err);
    if (rc) return rc;
  }
  return 0;
}

void mk_ir_free_batch(mk_graph *g) {
  for (int i = 0; i < g->nnodes && g->nodes; i++) free(g->nodes[i].batch_ints);
  free(g->batch_inputs);
}

const mk_batch_int *mk_node_batch_int(const mk_node *n, const cJSON *leaf) {
  for (int k = 0; n && k < n->nbatch_ints; k++)
    if (n->batch_ints[k].leaf == leaf) return &n->batch_ints[k];
  return NULL;
}
