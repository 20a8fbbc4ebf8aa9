/* decompose.c — subkernels, partitions and the initial decomposition.
 *
 * The initial decomposition is a single pass over the nodes in execution
 * order that assigns each node to a fusion group (rules in
 * mk_decompose.h, reasons in docs/ir.md). A node may only join a group if
 * the group graph stays acyclic: joining group G while reading from group
 * H requires that H is not reachable from G. An acyclic group graph has a
 * topological order, which is the partition's order, and makes every group
 * convex, so no separate convexity pass is needed there;
 * mk_subkernel_from_nodes still checks convexity for sets that come from
 * outside (split, merge, user edits). */
#include "mk_decompose.h"

#include "mk_buf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MK_NAME_MAX 64
#define MK_NAME_PARTS 4

/* ---- small int vectors ---------------------------------------------------- */

typedef struct ivec {
  int *v;
  int n, cap;
} ivec;

static int ivec_push(ivec *a, int x) {
  if (a->n == a->cap) {
    int cap = a->cap ? a->cap * 2 : 8;
    int *v = realloc(a->v, (size_t)cap * sizeof *v);
    if (v == NULL) return MK_ENOMEM;
    a->v = v;
    a->cap = cap;
  }
  a->v[a->n++] = x;
  return 0;
}

static bool ivec_has(const ivec *a, int x) {
  for (int i = 0; i < a->n; i++)
    if (a->v[i] == x) return true;
  return false;
}

static int ivec_push_unique(ivec *a, int x) { return ivec_has(a, x) ? 0 : ivec_push(a, x); }

static int cmp_int(const void *a, const void *b) {
  int x = *(const int *)a, y = *(const int *)b;
  return (x > y) - (x < y);
}

/* ---- naming ----------------------------------------------------------------- */

/* Arithmetic dunders and in-place/reflected spellings read as their plain op
 * in names: "conv2d_sub_tanh", not "conv2d_isub_tanh". */
static const char *canonical_part(const char *s) {
  static const char *const map[][2] = {
      {"iadd", "add"},          {"radd", "add"},     {"isub", "sub"},   {"imul", "mul"},
      {"rmul", "mul"},          {"truediv", "div"},  {"itruediv", "div"}, {"idiv", "div"},
      {"rtruediv", "rdiv"},     {"ifloordiv", "floordiv"}, {"ipow", "pow"}, {"imod", "mod"},
      {"getitem", "index"},     {"setitem", "index_put"},  {"matmul", "matmul"},
      {"true_divide", "div"},   {"multiply", "mul"}, {"subtract", "sub"}, {"divide", "div"},
  };
  for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
    if (strcmp(s, map[i][0]) == 0) return map[i][1];
  return s;
}

/* Appends one name part as a lowercase identifier fragment. */
static void put_part(mk_buf *b, const char *part) {
  if (b->len > 0) mk_buf_putc(b, '_');
  for (const char *c = part; *c; c++) {
    char ch = (char)tolower((unsigned char)*c);
    mk_buf_putc(b, isalnum((unsigned char)ch) ? ch : '_');
  }
}

/* Views carry no computation: they are left out of a name unless the
 * subkernel is nothing but views. Consecutive repeats collapse. */
static void build_name(const mk_graph *g, const int *nodes, int nnodes, char *out) {
  bool only_views = true;
  for (int i = 0; i < nnodes; i++) only_views &= g->nodes[nodes[i]].category == MK_OP_VIEW;
  mk_buf b;
  mk_buf_init(&b, 4096);
  const char *prev = NULL;
  int parts = 0;
  for (int i = 0; i < nnodes && parts < MK_NAME_PARTS; i++) {
    const mk_node *n = &g->nodes[nodes[i]];
    if (n->category == MK_OP_VIEW && !only_views) continue;
    const char *part = canonical_part(n->short_name);
    if (prev && strcmp(prev, part) == 0) continue;
    put_part(&b, part);
    prev = part;
    parts++;
  }
  const char *s = b.err || b.len == 0 ? "subkernel" : mk_buf_cstr(&b);
  /* an identifier cannot start with a digit or be all underscores */
  snprintf(out, MK_NAME_MAX, "%s%s", isdigit((unsigned char)s[0]) || s[0] == '_' ? "k" : "", s);
  size_t len = strlen(out);
  while (len > 1 && out[len - 1] == '_') out[--len] = '\0';
  mk_buf_free(&b);
}

static bool name_taken(const mk_partition *p, int skip, const char *name) {
  for (int i = 0; i < p->nsubkernels; i++)
    if (i != skip && p->subkernels[i].name && strcmp(p->subkernels[i].name, name) == 0) return true;
  return false;
}

/* Makes subkernel `index`'s name unique in p by appending _2, _3, ... */
static int uniquify_name(mk_partition *p, int index) {
  mk_subkernel *s = &p->subkernels[index];
  if (!name_taken(p, index, s->name)) return 0;
  char base[MK_NAME_MAX], cand[MK_NAME_MAX + 16];
  mk_strlcpy(base, s->name, sizeof base);
  for (int k = 2;; k++) {
    snprintf(cand, sizeof cand, "%s_%d", base, k);
    if (!name_taken(p, index, cand)) break;
  }
  char *name = mk_strdup(cand);
  if (name == NULL) return MK_ENOMEM;
  free(s->name);
  s->name = name;
  return 0;
}

/* ---- subkernels ----------------------------------------------------------------- */

void mk_subkernel_free(mk_subkernel *s) {
  if (s == NULL) return;
  free(s->name);
  free(s->nodes);
  free(s->inputs);
  free(s->outputs);
  memset(s, 0, sizeof *s);
  s->anchor = -1;
}

/* Does value v come from outside the set `in` (a node-membership map)? */
static bool from_outside(const mk_graph *g, const unsigned char *in, int v) {
  const mk_value *val = &g->values[v];
  return val->kind != MK_VALUE_NODE || !in[val->producer];
}

static bool escapes(const mk_graph *g, const unsigned char *in, int v) {
  const mk_value *val = &g->values[v];
  if (val->is_graph_output) return true;
  for (int u = 0; u < val->nusers; u++)
    if (!in[val->users[u]]) return true;
  return false;
}

/* Returns a node outside the set that lies on a path leaving and
 * re-entering it (the witness for the error message), or -1 if convex.
 * Only nodes between the set's first and last can be on such a path. */
static int convexity_witness(const mk_graph *g, const unsigned char *in, int lo, int hi) {
  unsigned char *tainted = calloc((size_t)(hi - lo + 1), 1); /* reachable from the set, outside it */
  if (tainted == NULL) return -2;
  int witness = -1;
  for (int i = lo; i <= hi && witness < 0; i++) {
    const mk_node *n = &g->nodes[i];
    bool from_set = false, from_tainted = false;
    for (int k = 0; k < n->ninputs; k++) {
      const mk_value *v = &g->values[n->inputs[k]];
      if (v->kind != MK_VALUE_NODE || v->producer < lo) continue;
      if (in[v->producer]) from_set = true;
      else if (tainted[v->producer - lo]) {
        from_tainted = true;
        if (in[i]) witness = v->producer;
      }
    }
    if (!in[i] && (from_set || from_tainted)) tainted[i - lo] = 1;
  }
  free(tainted);
  return witness;
}

/* Anchor: the first heavy op; else the first reduction/softmax/scan/opaque
 * node; -1 for a pure elementwise/view/data chain. */
static int find_anchor(const mk_graph *g, const int *nodes, int n) {
  for (int i = 0; i < n; i++)
    if (mk_op_is_heavy(g->nodes[nodes[i]].category)) return nodes[i];
  for (int i = 0; i < n; i++) {
    mk_op_category c = g->nodes[nodes[i]].category;
    if (c == MK_OP_REDUCTION || c == MK_OP_SOFTMAX || c == MK_OP_SCAN || c == MK_OP_OPAQUE) return nodes[i];
  }
  return -1;
}

static void find_lines(const mk_graph *g, mk_subkernel *s) {
  s->first_line = s->last_line = 0;
  for (int i = 0; i < s->nnodes; i++) {
    const mk_span *sp = &g->nodes[s->nodes[i]].span;
    if (sp->line <= 0) continue;
    if (s->first_line == 0 || sp->line < s->first_line) s->first_line = sp->line;
    int end = sp->end_line > 0 ? sp->end_line : sp->line;
    if (end > s->last_line) s->last_line = end;
  }
}

static int collect_io(const mk_graph *g, const unsigned char *in, mk_subkernel *s) {
  ivec ins = {0}, outs = {0};
  int rc = 0;
  for (int i = 0; i < s->nnodes && !rc; i++) {
    const mk_node *n = &g->nodes[s->nodes[i]];
    for (int k = 0; k < n->ninputs && !rc; k++)
      if (from_outside(g, in, n->inputs[k])) rc = ivec_push_unique(&ins, n->inputs[k]);
    /* a factory's size written from a forward input's shape needs that input */
    for (int k = 0; k < n->nbatch_ints && !rc; k++)
      if (from_outside(g, in, n->batch_ints[k].vid)) rc = ivec_push_unique(&ins, n->batch_ints[k].vid);
    for (int k = 0; k < n->noutputs && !rc; k++)
      if (escapes(g, in, n->outputs[k])) rc = ivec_push(&outs, n->outputs[k]);
  }
  s->inputs = ins.v;
  s->ninputs = ins.n;
  s->outputs = outs.v;
  s->noutputs = outs.n;
  return rc;
}

static void node_where(const mk_graph *g, int id, char *buf, size_t size) {
  const mk_node *n = &g->nodes[id];
  if (n->span.line > 0)
    snprintf(buf, size, "node %d (%.80s, line %d)", id, n->short_name, n->span.line);
  else
    snprintf(buf, size, "node %d (%.80s)", id, n->short_name);
}

/* Sorted copy of the node list, checked for range and duplicates. */
static int sorted_nodes(const mk_graph *g, const int *nodes, int nnodes, int **out, mk_errmsg *err) {
  *out = NULL;
  if (nnodes <= 0 || nodes == NULL) return mk_errf(err, MK_EINVAL, "a subkernel needs at least one node");
  int *v = malloc((size_t)nnodes * sizeof *v);
  if (v == NULL) return MK_ENOMEM;
  memcpy(v, nodes, (size_t)nnodes * sizeof *v);
  qsort(v, (size_t)nnodes, sizeof *v, cmp_int);
  int rc = 0;
  if (v[0] < 0 || v[nnodes - 1] >= g->nnodes)
    rc = mk_errf(err, MK_EINVAL, "node %d does not exist (the graph has %d nodes)", v[0] < 0 ? v[0] : v[nnodes - 1],
                 g->nnodes);
  for (int i = 1; i < nnodes && !rc; i++)
    if (v[i] == v[i - 1]) rc = mk_errf(err, MK_EINVAL, "node %d is listed twice", v[i]);
  if (rc) free(v);
  else *out = v;
  return rc;
}

static int fill_subkernel(const mk_graph *g, const unsigned char *in, int *sorted, int nnodes, mk_subkernel *out) {
  out->nodes = sorted;
  out->nnodes = nnodes;
  out->anchor = find_anchor(g, sorted, nnodes);
  find_lines(g, out);
  char name[MK_NAME_MAX];
  build_name(g, sorted, nnodes, name);
  out->name = mk_strdup(name);
  if (out->name == NULL) return MK_ENOMEM;
  return collect_io(g, in, out);
}

int mk_subkernel_from_nodes(const mk_graph *g, const int *nodes, int nnodes, mk_subkernel *out,
                            mk_errmsg *err) {
  memset(out, 0, sizeof *out);
  out->anchor = -1;
  int *sorted;
  int rc = sorted_nodes(g, nodes, nnodes, &sorted, err);
  if (rc) return rc;
  unsigned char *in = calloc((size_t)g->nnodes, 1);
  if (in == NULL) {
    free(sorted);
    return mk_errf(err, MK_ENOMEM, "out of memory building a subkernel");
  }
  for (int i = 0; i < nnodes; i++) in[sorted[i]] = 1;
  int w = convexity_witness(g, in, sorted[0], sorted[nnodes - 1]);
  if (w == -2) rc = MK_ENOMEM;
  if (w >= 0) {
    char where[160];
    node_where(g, w, where, sizeof where);
    rc = mk_errf(err, MK_EINVAL, "these nodes cannot form one subkernel: %s depends on them and they depend on it",
                 where);
  }
  if (rc) {
    free(sorted);
  } else if ((rc = fill_subkernel(g, in, sorted, nnodes, out))) {
    mk_subkernel_free(out);
  }
  free(in);
  if (rc == MK_ENOMEM) mk_errf(err, rc, "out of memory building a subkernel");
  return rc;
}

int mk_subkernel_copy(const mk_subkernel *src, mk_subkernel *dst) {
  *dst = *src;
  dst->name = mk_strdup(src->name);
  dst->nodes = malloc((size_t)(src->nnodes ? src->nnodes : 1) * sizeof(int));
  dst->inputs = malloc((size_t)(src->ninputs ? src->ninputs : 1) * sizeof(int));
  dst->outputs = malloc((size_t)(src->noutputs ? src->noutputs : 1) * sizeof(int));
  if ((src->name && !dst->name) || !dst->nodes || !dst->inputs || !dst->outputs) {
    mk_subkernel_free(dst);
    return MK_ENOMEM;
  }
  if (src->nnodes) memcpy(dst->nodes, src->nodes, (size_t)src->nnodes * sizeof(int));
  if (src->ninputs) memcpy(dst->inputs, src->inputs, (size_t)src->ninputs * sizeof(int));
  if (src->noutputs) memcpy(dst->outputs, src->outputs, (size_t)src->noutputs * sizeof(int));
  return 0;
}

/* ---- partitions ------------------------------------------------------------------- */

void mk_partition_free(mk_partition *p) {
  if (p == NULL) return;
  for (int i = 0; i < p->nsubkernels; i++) mk_subkernel_free(&p->subkernels[i]);
  free(p->subkernels);
  p->subkernels = NULL;
  p->nsubkernels = 0;
}

int mk_partition_copy(const mk_partition *src, mk_partition *dst) {
  dst->subkernels = calloc((size_t)(src->nsubkernels ? src->nsubkernels : 1), sizeof *dst->subkernels);
  dst->nsubkernels = 0;
  if (dst->subkernels == NULL) return MK_ENOMEM;
  for (int i = 0; i < src->nsubkernels; i++) {
    if (mk_subkernel_copy(&src->subkernels[i], &dst->subkernels[i])) {
      mk_partition_free(dst);
      return MK_ENOMEM;
    }
    dst->nsubkernels++;
  }
  return 0;
}

int mk_partition_find(const mk_partition *p, int node) {
  for (int i = 0; i < p->nsubkernels; i++)
    if (bsearch(&node, p->subkernels[i].nodes, (size_t)p->subkernels[i].nnodes, sizeof(int), cmp_int)) return i;
  return -1;
}

static bool same_ints(const int *a, int na, const int *b, int nb) {
  return na == nb && (na == 0 || memcmp(a, b, (size_t)na * sizeof(int)) == 0);
}

/* Recomputes subkernel i and compares every derived field. */
static int validate_derived(const mk_graph *g, const mk_subkernel *s, mk_errmsg *err) {
  mk_subkernel r;
  int rc = mk_subkernel_from_nodes(g, s->nodes, s->nnodes, &r, err);
  if (rc) return rc;
  if (!same_ints(r.nodes, r.nnodes, s->nodes, s->nnodes))
    rc = mk_errf(err, MK_EINVAL, "subkernel %d (%s): nodes are not ascending", s->id, s->name);
  else if (!same_ints(r.inputs, r.ninputs, s->inputs, s->ninputs))
    rc = mk_errf(err, MK_EINVAL, "subkernel %d (%s): inputs are stale", s->id, s->name);
  else if (!same_ints(r.outputs, r.noutputs, s->outputs, s->noutputs))
    rc = mk_errf(err, MK_EINVAL, "subkernel %d (%s): outputs are stale", s->id, s->name);
  else if (r.anchor != s->anchor || r.first_line != s->first_line || r.last_line != s->last_line)
    rc = mk_errf(err, MK_EINVAL, "subkernel %d (%s): anchor or lines are stale", s->id, s->name);
  mk_subkernel_free(&r);
  return rc;
}

static bool is_identifier(const char *s) {
  if (s == NULL || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
  for (; *s; s++)
    if (!isalnum((unsigned char)*s) && *s != '_') return false;
  return true;
}

/* owner[node] = subkernel index; checks the cover. */
static int validate_cover(const mk_graph *g, const mk_partition *p, int *owner, mk_errmsg *err) {
  for (int i = 0; i < g->nnodes; i++) owner[i] = -1;
  for (int s = 0; s < p->nsubkernels; s++) {
    const mk_subkernel *k = &p->subkernels[s];
    if (k->id != s) return mk_errf(err, MK_EINVAL, "subkernel at position %d has id %d", s, k->id);
    if (!is_identifier(k->name)) return mk_errf(err, MK_EINVAL, "subkernel %d has no valid name", s);
    if (name_taken(p, s, k->name)) return mk_errf(err, MK_EINVAL, "subkernel name %s is used twice", k->name);
    if (k->nnodes <= 0) return mk_errf(err, MK_EINVAL, "subkernel %d (%s) is empty", s, k->name);
    for (int i = 0; i < k->nnodes; i++) {
      int n = k->nodes[i];
      if (n < 0 || n >= g->nnodes) return mk_errf(err, MK_EINVAL, "subkernel %d (%s) names node %d, which does not exist", s, k->name, n);
      if (owner[n] >= 0) return mk_errf(err, MK_EINVAL, "node %d is in subkernels %d and %d", n, owner[n], s);
      owner[n] = s;
    }
  }
  for (int i = 0; i < g->nnodes; i++)
    if (owner[i] < 0) return mk_errf(err, MK_EINVAL, "node %d is in no subkernel", i);
  return 0;
}

/* Every node reads only values made in its own or an earlier subkernel. */
static int validate_order(const mk_graph *g, const int *owner, mk_errmsg *err) {
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    for (int k = 0; k < n->ninputs; k++) {
      const mk_value *v = &g->values[n->inputs[k]];
      if (v->kind == MK_VALUE_NODE && owner[v->producer] > owner[i])
        return mk_errf(err, MK_EINVAL, "subkernel %d needs a value from subkernel %d, which runs after it", owner[i],
                       owner[v->producer]);
    }
  }
  return 0;
}

int mk_partition_validate(const mk_graph *g, const mk_partition *p, mk_errmsg *err) {
  int *owner = malloc((size_t)(g->nnodes ? g->nnodes : 1) * sizeof *owner);
  if (owner == NULL) return mk_errf(err, MK_ENOMEM, "out of memory validating a partition");
  int rc = validate_cover(g, p, owner, err);
  if (!rc) rc = validate_order(g, owner, err);
  free(owner);
  for (int s = 0; s < p->nsubkernels && !rc; s++) rc = validate_derived(g, &p->subkernels[s], err);
  return rc;
}

/* Inserts `s` at position `at`, shifting later subkernels and fixing ids. */
static int insert_subkernel(mk_partition *p, int at, const mk_subkernel *s) {
  mk_subkernel *v = realloc(p->subkernels, (size_t)(p->nsubkernels + 1) * sizeof *v);
  if (v == NULL) return MK_ENOMEM;
  p->subkernels = v;
  memmove(&v[at + 1], &v[at], (size_t)(p->nsubkernels - at) * sizeof *v);
  v[at] = *s;
  p->nsubkernels++;
  for (int i = 0; i < p->nsubkernels; i++) v[i].id = i;
  return 0;
}

static void remove_subkernel(mk_partition *p, int at) {
  mk_subkernel_free(&p->subkernels[at]);
  memmove(&p->subkernels[at], &p->subkernels[at + 1], (size_t)(p->nsubkernels - at - 1) * sizeof *p->subkernels);
  p->nsubkernels--;
  for (int i = 0; i < p->nsubkernels; i++) p->subkernels[i].id = i;
}

int mk_partition_split(const mk_graph *g, mk_partition *p, int index, int at, mk_errmsg *err) {
  if (index < 0 || index >= p->nsubkernels)
    return mk_errf(err, MK_EINVAL, "there is no subkernel %d (the partition has %d)", index, p->nsubkernels);
  const mk_subkernel *s = &p->subkernels[index];
  int k = 0;
  while (k < s->nnodes && s->nodes[k] < at) k++;
  if (k == 0 || k == s->nnodes)
    return mk_errf(err, MK_EINVAL, "splitting %s at node %d would leave one side empty", s->name, at);
  mk_subkernel a, b;
  int rc = mk_subkernel_from_nodes(g, s->nodes, k, &a, err);
  if (rc) return rc;
  if ((rc = mk_subkernel_from_nodes(g, s->nodes + k, s->nnodes - k, &b, err))) {
    mk_subkernel_free(&a);
    return rc;
  }
  if ((rc = insert_subkernel(p, index + 1, &b))) {
    mk_subkernel_free(&a);
    mk_subkernel_free(&b);
    return mk_errf(err, rc, "out of memory splitting a subkernel");
  }
  mk_subkernel_free(&p->subkernels[index]);
  a.id = index;
  p->subkernels[index] = a;
  /* the halves are new: give them unique names, leave the others alone */
  if ((rc = uniquify_name(p, index + 1)) || (rc = uniquify_name(p, index)))
    return mk_errf(err, rc, "out of memory naming a subkernel");
  return 0;
}

int mk_partition_merge(const mk_graph *g, mk_partition *p, int index, mk_errmsg *err) {
  if (index < 0 || index + 1 >= p->nsubkernels)
    return mk_errf(err, MK_EINVAL, "cannot merge subkernel %d with the next one (the partition has %d)", index,
                   p->nsubkernels);
  const mk_subkernel *a = &p->subkernels[index], *b = &p->subkernels[index + 1];
  int n = a->nnodes + b->nnodes;
  int *nodes = malloc((size_t)n * sizeof *nodes);
  if (nodes == NULL) return mk_errf(err, MK_ENOMEM, "out of memory merging subkernels");
  memcpy(nodes, a->nodes, (size_t)a->nnodes * sizeof *nodes);
  memcpy(nodes + a->nnodes, b->nodes, (size_t)b->nnodes * sizeof *nodes);
  mk_subkernel m;
  int rc = mk_subkernel_from_nodes(g, nodes, n, &m, err);
  free(nodes);
  if (rc) return rc;
  m.id = index;
  remove_subkernel(p, index + 1);
  mk_subkernel_free(&p->subkernels[index]);
  p->subkernels[index] = m;
  if ((rc = uniquify_name(p, index))) return mk_errf(err, rc, "out of memory naming a subkernel");
  return 0;
}

/* ---- initial decomposition ---------------------------------------------------------- */

/* Group state during the pass. succ: groups reading from this one. */
typedef struct group {
  ivec nodes;
  ivec succ;
  bool open;
} group;

typedef struct grouping {
  const mk_graph *g;
  group *groups;
  int ngroups, cap;
  int *group_of; /* per node, -1 until assigned */
  int *mark;     /* per group, BFS scratch (compared with stamp) */
  int stamp;
  ivec queue;
} grouping;

static bool ends_chain(mk_op_category c) {
  return c == MK_OP_REDUCTION || c == MK_OP_SOFTMAX || c == MK_OP_SCAN;
}

static int producer_group(const grouping *gr, int vid) {
  const mk_value *v = &gr->g->values[vid];
  return v->kind == MK_VALUE_NODE ? gr->group_of[v->producer] : -1;
}

/* Records n in group gi and the group edges its inputs create. */
static int assign(grouping *gr, int n, int gi) {
  gr->group_of[n] = gi;
  int rc = ivec_push(&gr->groups[gi].nodes, n);
  const mk_node *node = &gr->g->nodes[n];
  for (int k = 0; k < node->ninputs && !rc; k++) {
    int h = producer_group(gr, node->inputs[k]);
    if (h >= 0 && h != gi) rc = ivec_push_unique(&gr->groups[h].succ, gi);
  }
  return rc;
}

static int new_group(grouping *gr, int n, bool open) {
  if (gr->ngroups == gr->cap) {
    int cap = gr->cap ? gr->cap * 2 : 16;
    group *v = realloc(gr->groups, (size_t)cap * sizeof *v);
    int *m = realloc(gr->mark, (size_t)cap * sizeof *m);
    if (v) gr->groups = v;
    if (m) gr->mark = m;
    if (v == NULL || m == NULL) return MK_ENOMEM;
    gr->cap = cap;
  }
  int gi = gr->ngroups++;
  gr->groups[gi] = (group){{0}, {0}, open};
  gr->mark[gi] = 0;
  return assign(gr, n, gi);
}

/* Is any group n reads from (other than gi) reachable from gi? Joining
 * would then close a cycle in the group graph. BFS over group edges. */
static int would_cycle(grouping *gr, int n, int gi, bool *cycle) {
  *cycle = false;
  gr->stamp++;
  gr->queue.n = 0;
  int rc = ivec_push(&gr->queue, gi);
  gr->mark[gi] = gr->stamp;
  for (int q = 0; q < gr->queue.n && !rc; q++) {
    const ivec *succ = &gr->groups[gr->queue.v[q]].succ;
    for (int k = 0; k < succ->n && !rc; k++) {
      if (gr->mark[succ->v[k]] == gr->stamp) continue;
      gr->mark[succ->v[k]] = gr->stamp;
      rc = ivec_push(&gr->queue, succ->v[k]);
    }
  }
  const mk_node *node = &gr->g->nodes[n];
  for (int k = 0; k < node->ninputs && !rc; k++) {
    int h = producer_group(gr, node->inputs[k]);
    if (h >= 0 && h != gi && gr->mark[h] == gr->stamp) *cycle = true;
  }
  return rc;
}

/* A chain stops at a value it reads from the group when that value is
 * returned, or read by a heavy/opaque op, or by an earlier node outside
 * the group: it must be materialised anyway, and fusing past it would
 * make the group compute for two masters. */
static bool chain_blocked(const grouping *gr, int n, int gi) {
  const mk_graph *g = gr->g;
  const mk_node *node = &g->nodes[n];
  for (int k = 0; k < node->ninputs; k++) {
    const mk_value *v = &g->values[node->inputs[k]];
    if (producer_group(gr, v->id) != gi) continue;
    if (v->is_graph_output) return true;
    for (int u = 0; u < v->nusers; u++) {
      int user = v->users[u];
      if (user == n) continue;
      mk_op_category c = g->nodes[user].category;
      if (user < n ? gr->group_of[user] != gi : (mk_op_is_heavy(c) || c == MK_OP_OPAQUE)) return true;
    }
  }
  return false;
}

/* The open group n should join, or -1: groups of n's producers, latest
 * producer first, the first that is open, unblocked and acyclic. */
static int pick_group(grouping *gr, int n, int *out) {
  const mk_node *node = &gr->g->nodes[n];
  *out = -1;
  int tried[16], ntried = 0;
  for (;;) {
    int best = -1, best_producer = -1;
    for (int k = 0; k < node->ninputs; k++) {
      const mk_value *v = &gr->g->values[node->inputs[k]];
      int h = producer_group(gr, v->id);
      bool seen = false;
      for (int t = 0; t < ntried; t++) seen |= tried[t] == h;
      if (h >= 0 && !seen && gr->groups[h].open && v->producer > best_producer) {
        best = h;
        best_producer = v->producer;
      }
    }
    if (best < 0 || ntried == (int)(sizeof tried / sizeof tried[0])) return 0;
    tried[ntried++] = best;
    bool cycle;
    int rc = would_cycle(gr, n, best, &cycle);
    if (rc) return rc;
    if (!cycle && !chain_blocked(gr, n, best)) {
      *out = best;
      return 0;
    }
  }
}

static int place_node(grouping *gr, int n) {
  mk_op_category c = gr->g->nodes[n].category;
  if (c == MK_OP_OPAQUE) return new_group(gr, n, false);
  if (mk_op_is_heavy(c)) return new_group(gr, n, true);
  int gi, rc = pick_group(gr, n, &gi);
  if (rc) return rc;
  if (gi < 0) return new_group(gr, n, true); /* a chain of its own, or a reduction anchoring one */
  if ((rc = assign(gr, n, gi))) return rc;
  if (ends_chain(c)) gr->groups[gi].open = false;
  return 0;
}

/* Topological order of the group graph, ties broken by first node so the
 * partition reads like the source. O(groups^2 + edges): groups are few. */
static int order_groups(const grouping *gr, int *order, mk_errmsg *err) {
  int ng = gr->ngroups;
  int *indeg = calloc((size_t)(ng ? ng : 1), sizeof *indeg);
  if (indeg == NULL) return mk_errf(err, MK_ENOMEM, "out of memory decomposing the graph");
  for (int i = 0; i < ng; i++)
    for (int k = 0; k < gr->groups[i].succ.n; k++) indeg[gr->groups[i].succ.v[k]]++;
  for (int done = 0; done < ng; done++) {
    int pick = -1;
    for (int i = 0; i < ng; i++)
      if (indeg[i] == 0 && (pick < 0 || gr->groups[i].nodes.v[0] < gr->groups[pick].nodes.v[0])) pick = i;
    if (pick < 0) { /* impossible: joins never close a cycle */
      free(indeg);
      return mk_errf(err, MK_EINVAL, "internal error: the fusion groups depend on each other in a cycle");
    }
    order[done] = pick;
    indeg[pick] = -1;
    for (int k = 0; k < gr->groups[pick].succ.n; k++) indeg[gr->groups[pick].succ.v[k]]--;
  }
  free(indeg);
  return 0;
}

static void grouping_free(grouping *gr) {
  for (int i = 0; i < gr->ngroups; i++) {
    free(gr->groups[i].nodes.v);
    free(gr->groups[i].succ.v);
  }
  free(gr->groups);
  free(gr->group_of);
  free(gr->mark);
  free(gr->queue.v);
}

static int build_partition(const grouping *gr, const int *order, mk_partition *out, mk_errmsg *err) {
  out->subkernels = calloc((size_t)(gr->ngroups ? gr->ngroups : 1), sizeof *out->subkernels);
  if (out->subkernels == NULL) return mk_errf(err, MK_ENOMEM, "out of memory decomposing the graph");
  for (int i = 0; i < gr->ngroups; i++) {
    const ivec *nodes = &gr->groups[order[i]].nodes;
    int rc = mk_subkernel_from_nodes(gr->g, nodes->v, nodes->n, &out->subkernels[i], err);
    if (rc) return rc;
    out->subkernels[i].id = i;
    out->nsubkernels++;
    if ((rc = uniquify_name(out, i))) return mk_errf(err, rc, "out of memory naming a subkernel");
  }
  return 0;
}

int mk_decompose_initial(const mk_graph *g, mk_partition *out, mk_errmsg *err) {
  out->subkernels = NULL;
  out->nsubkernels = 0;
  grouping gr = {.g = g};
  gr.group_of = malloc((size_t)(g->nnodes ? g->nnodes : 1) * sizeof *gr.group_of);
  int rc = gr.group_of ? 0 : MK_ENOMEM;
  for (int i = 0; i < g->nnodes && !rc; i++) gr.group_of[i] = -1;
  for (int i = 0; i < g->nnodes && !rc; i++) rc = place_node(&gr, i);
  int *order = rc ? NULL : malloc((size_t)(gr.ngroups ? gr.ngroups : 1) * sizeof *order);
  if (!rc && order == NULL) rc = MK_ENOMEM;
  if (rc) mk_errf(err, rc, "out of memory decomposing the graph");
  if (!rc) rc = order_groups(&gr, order, err);
  if (!rc) rc = build_partition(&gr, order, out, err);
  if (!rc) rc = mk_partition_validate(g, out, err); /* cheap; a failure here is an engine bug */
  free(order);
  grouping_free(&gr);
  if (rc) mk_partition_free(out);
  return rc;
}
