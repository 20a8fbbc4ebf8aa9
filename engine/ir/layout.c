/* layout.c — the program's layout plan (mk_layout.h says what and why).
 *
 * Islands first (values joined by layout-keeping ops, each weighed: what its
 * convolutions gain in channels_last against the copies around it), then one
 * pass over the nodes in execution order: a value's layout depends on its
 * producer (decided before it), on the ops that read it (known from the
 * graph's use lists) and on its island. */
#include "mk_layout.h"

#include "mk_err.h"

#include <stdlib.h>
#include <string.h>

static bool is_float(mk_dtype d) {
  return d == MK_DTYPE_F32 || d == MK_DTYPE_F16 || d == MK_DTYPE_BF16 || d == MK_DTYPE_F64;
}

/* A 4-d/5-d float tensor computed by the program (or given to it). */
static bool is_activation(const mk_value *v) {
  return (v->kind == MK_VALUE_INPUT || v->kind == MK_VALUE_NODE) && (v->rank == 4 || v->rank == 5) &&
         is_float(v->dtype);
}

/* A convolution over at most this many input channels stays in PyTorch's
 * layout: cuDNN's channels_last kernels pad so few channels, and on an H100
 * problem 85's 8-channel conv + group norm chain ran 1.77 ms in NCHW against
 * 2.93 ms for its fastest channels_last variant and 3.98 ms for the
 * channels_last reference, while problem 25's 16-channel conv still ran 1.4x
 * faster in channels_last (docs/bench/conv-fused-h100); on the H200 the 3- and
 * 8-channel problems 50, 60 and 90 chose their NCHW cuDNN variant
 * (docs/bench/conv-layout-h200). */
#define FEW_CHANNELS 8

bool mk_layout_few_channels(const mk_graph *g, const mk_node *n) {
  if (n->category != MK_OP_CONV || n->ninputs < 1 || n->inputs[0] < 0 || n->inputs[0] >= g->nvalues)
    return false;
  const mk_value *val = &g->values[n->inputs[0]];
  return (val->rank == 4 || val->rank == 5) && val->shape[1] <= FEW_CHANNELS;
}

/* A 2-d/3-d convolution (plain or transposed) whose activation is v, with
 * more than FEW_CHANNELS input channels (known at capture). */
static bool is_conv_reading(const mk_graph *g, const mk_node *n, int v) {
  if (n->category != MK_OP_CONV || n->ninputs < 1 || n->inputs[0] != v) return false;
  const mk_value *val = &g->values[v];
  return (val->rank == 4 || val->rank == 5) && !mk_layout_few_channels(g, n);
}

/* A 2-d/3-d convolution (its output is the convolution's). */
static bool is_conv_producing(const mk_graph *g, const mk_node *n) {
  return n->ninputs >= 1 && n->inputs[0] >= 0 && n->inputs[0] < g->nvalues &&
         is_conv_reading(g, n, n->inputs[0]);
}

/* The dim argument of a cat (args[1] or kwargs "dim"; 0 when absent). */
static int cat_dim(const mk_node *n) {
  const cJSON *d = cJSON_GetArrayItem(n->args, 1);
  if (!cJSON_IsNumber(d)) d = cJSON_GetObjectItemCaseSensitive(n->kwargs, "dim");
  return cJSON_IsNumber(d) ? d->valueint : 0;
}

/* The only reader of value v, or NULL when it has none or several. */
static const mk_node *sole_reader(const mk_graph *g, int v) {
  const mk_value *val = &g->values[v];
  if (val->nusers != 1 || val->users[0] < 0 || val->users[0] >= g->nnodes) return NULL;
  return &g->nodes[val->users[0]];
}

static bool named(const mk_node *n, const char *name) {
  return n->short_name && strcmp(n->short_name, name) == 0;
}

/* True if view n splits the channel dim of v ([N, C, *S] -> [N, c1, ..., ck,
 * *S], c1 * ... * ck = C, k >= 2): valid on channels_last strides too, where
 * the channels are one run of stride 1. */
static bool splits_channels(const mk_graph *g, const mk_node *n, int v) {
  if (n->category != MK_OP_VIEW || n->ninputs < 1 || n->inputs[0] != v || n->noutputs != 1 ||
      n->nmutates > 0 || !(named(n, "view") || named(n, "reshape") || named(n, "unflatten")))
    return false;
  const mk_value *in = &g->values[v], *out = &g->values[n->outputs[0]];
  int extra = out->rank - in->rank, spatial = in->rank - 2;
  if (extra < 1 || out->shape[0] != in->shape[0]) return false;
  for (int d = 0; d < spatial; d++)
    if (out->shape[out->rank - spatial + d] != in->shape[2 + d]) return false;
  int64_t c = 1;
  for (int d = 1; d <= extra + 1; d++) c *= out->shape[d];
  return c == in->shape[1];
}

/* mk_layout.h says what a channel shuffle is. */
int mk_channel_shuffle_at(const mk_graph *g, const mk_node *n, int v, mk_channel_shuffle *cs) {
  if (g == NULL || n == NULL || cs == NULL || !splits_channels(g, n, v)) return 0;
  const mk_value *sv = &g->values[n->outputs[0]];
  int k = sv->rank - g->values[v].rank + 1;
  if (k > MK_SHUFFLE_MAX_SPLIT) return 0;
  *cs = (mk_channel_shuffle){.k = k, .copy = -1, .value = -1};
  for (int d = 0; d < k; d++) {
    cs->split[d] = sv->shape[1 + d];
    cs->order[d] = d;
  }
  cs->nodes[cs->nnodes++] = n->id;
  int cur = n->outputs[0];
  for (int hops = 0; hops < MK_SHUFFLE_MAX_NODES - 3; hops++) {
    const mk_node *r = sole_reader(g, cur);
    if (r == NULL || r->nmutates > 0 || r->noutputs != 1 || r->ninputs < 1 || r->inputs[0] != cur)
      return 0;
    cs->nodes[cs->nnodes++] = r->id;
    if (named(r, "contiguous")) {
      cs->copy = r->outputs[0];
      const mk_node *m = sole_reader(g, cs->copy);
      const mk_value *in = &g->values[v];
      if (m && m->nmutates == 0 && m->noutputs == 1 && m->ninputs >= 1 && m->inputs[0] == cs->copy &&
          (named(m, "view") || named(m, "reshape") || named(m, "flatten"))) {
        const mk_value *mv = &g->values[m->outputs[0]];
        bool same = mv->rank == in->rank && mv->dtype == in->dtype;
        for (int d = 0; same && d < in->rank; d++) same = mv->shape[d] == in->shape[d];
        if (same) {
          cs->nodes[cs->nnodes++] = m->id;
          cs->value = m->outputs[0];
        }
      }
      return 1;
    }
    if (!(named(r, "transpose") || named(r, "swapaxes"))) return 0;
    /* both dims among the split channel dims 1..k: the shuffled order */
    const cJSON *a0 = cJSON_GetArrayItem(r->args, 1), *a1 = cJSON_GetArrayItem(r->args, 2);
    if (!cJSON_IsNumber(a0) || !cJSON_IsNumber(a1)) return 0;
    int d0 = a0->valueint < 0 ? a0->valueint + sv->rank : a0->valueint;
    int d1 = a1->valueint < 0 ? a1->valueint + sv->rank : a1->valueint;
    if (d0 < 1 || d0 > k || d1 < 1 || d1 > k) return 0;
    int t = cs->order[d0 - 1];
    cs->order[d0 - 1] = cs->order[d1 - 1];
    cs->order[d1 - 1] = t;
    cur = r->outputs[0];
  }
  return 0;
}

/* True if v is the merge of a channel shuffle back to [N, C, *S] (the view
 * of the copy contiguous() made, read only by it): a fresh tensor nothing
 * else aliases, so converting it is one more copy and nothing else. */
static bool channel_shuffle_result(const mk_graph *g, int v, const unsigned char *layout) {
  /* walk back through the shuffle's views to the split's input */
  int cur = v;
  for (int hops = 0; hops < MK_SHUFFLE_MAX_NODES; hops++) {
    const mk_value *cv = &g->values[cur];
    if (cv->kind != MK_VALUE_NODE || cv->producer < 0 || cv->producer >= g->nnodes) return false;
    const mk_node *p = &g->nodes[cv->producer];
    if (p->category != MK_OP_VIEW || p->ninputs < 1 || p->inputs[0] < 0 || p->inputs[0] >= g->nvalues)
      return false;
    int in = p->inputs[0];
    mk_channel_shuffle cs;
    if (layout[in] == MK_LAYOUT_CHANNELS_LAST && mk_channel_shuffle_at(g, p, in, &cs))
      return cs.value == v;
    cur = in;
  }
  return false;
}

/* True if op n computes the same values whatever the memory layout of its
 * input v, and runs well on channels_last (PyTorch keeps that layout through
 * it): what lets a channels_last value flow into it without a conversion. */
static bool keeps_layout(const mk_graph *g, const mk_node *n, int v) {
  const char *s = n->short_name ? n->short_name : "";
  int rank = g->values[v].rank;
  switch (n->category) {
  case MK_OP_CONV:
    return is_conv_reading(g, n, v);
  case MK_OP_ELEMENTWISE:
  case MK_OP_POOL:
  case MK_OP_REDUCTION:
    return true;
  case MK_OP_SOFTMAX:
    /* PyTorch's softmax makes its input contiguous and returns a contiguous
     * tensor whatever the input's layout: a channels_last value read by it
     * costs a copy, and a softmax over the last dim (UNet's) reads rows C
     * apart in a kernel that takes the input through its strides. */
    return false;
  case MK_OP_NORM: /* over channels or groups of them; layer norm normalises the last dims */
    return strcmp(s, "batch_norm") == 0 || strcmp(s, "group_norm") == 0 ||
           strcmp(s, "instance_norm") == 0;
  case MK_OP_DATA: {
    int d = cat_dim(n);
    return strcmp(s, "cat") == 0 && (d == 1 || d == 1 - rank);
  }
  case MK_OP_VIEW:
  {
    mk_channel_shuffle cs;
    return mk_channel_shuffle_at(g, n, v, &cs) != 0;
  }
  default:
    return false;
  }
}

static bool all_readers_keep_layout(const mk_graph *g, int v) {
  const mk_value *val = &g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid < 0 || nid >= g->nnodes || !keeps_layout(g, &g->nodes[nid], v)) return false;
  }
  return true;
}

static bool read_by_conv(const mk_graph *g, int v) {
  const mk_value *val = &g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid >= 0 && nid < g->nnodes && is_conv_reading(g, &g->nodes[nid], v)) return true;
  }
  return false;
}

static bool read_by_view(const mk_graph *g, int v) {
  const mk_value *val = &g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid >= 0 && nid < g->nnodes && g->nodes[nid].category == MK_OP_VIEW) return true;
  }
  return false;
}

/* True if a tensor input of n is planned channels_last. */
static bool reads_channels_last(const mk_node *n, const unsigned char *layout, int nvalues) {
  for (int k = 0; k < n->ninputs; k++)
    if (n->inputs[k] >= 0 && n->inputs[k] < nvalues && layout[n->inputs[k]] == MK_LAYOUT_CHANNELS_LAST)
      return true;
  return false;
}

/* True if n modifies its main input in place (relu_, add_): its activation
 * outputs are new versions of that tensor. Batch norm mutates its running
 * statistics, not its input, so its output is a fresh tensor. */
static bool in_place_on_input(const mk_node *n) {
  if (n->ninputs < 1) return false;
  for (int k = 0; k < n->nmutates; k++)
    if (n->mutates[k] == n->inputs[0]) return true;
  return false;
}

/* Views and in-place ops return (a version of) a tensor they were given:
 * converting their output would copy it and break that aliasing. */
static bool may_convert(const mk_graph *g, const mk_value *v) {
  if (v->kind == MK_VALUE_INPUT) return true;
  const mk_node *p = &g->nodes[v->producer];
  return p->category != MK_OP_VIEW && !in_place_on_input(p);
}

/* ---- islands: is channels_last worth its copies? -------------------------------
 *
 * Values joined by ops that keep layouts (an op's input and its outputs) form an
 * island that can live in channels_last as a whole. What it gains is its
 * convolutions' speed-up; what it costs is a copy of every value that enters it from
 * an op that does not keep layouts (a conversion) and of every value an op outside it
 * reads (softmax makes a channels_last input contiguous first). On a UNet block
 * (conv -> batch norm -> softmax over the width, [8, 64, 64, 512]) the two copies per
 * convolution cost about three times what the convolution gains: the composition with
 * this plan ran 6.21 ms against eager's 5.00 on an H100 (docs/bench/l3-devsplit-h100).
 * Islands whose only exits are views (a CNN's flatten before its classifier) and the
 * program's outputs are planned as before; the estimate decides the others. */

/* The H200's TF32 dense rate (PERF-NOTES), at half of it for cuDNN's convolutions;
 * the time channels_last saves on one: 1.32x-1.65x faster (PERF-NOTES), the low end;
 * and its copy bandwidth: a copy reads and writes the value. */
#define CONV_FLOPS_PER_S (0.5 * 495e12)
#define CL_CONV_SAVING (1.0 - 1.0 / 1.32)
#define COPY_BYTES_PER_S 4.3e12

static int island_root(int *parent, int v) {
  while (parent[v] != v) {
    parent[v] = parent[parent[v]];
    v = parent[v];
  }
  return v;
}

static double value_elems(const mk_value *v) {
  double n = 1;
  for (int d = 0; d < v->rank; d++) n *= (double)v->shape[d];
  return n;
}

static double value_bytes(const mk_value *v) { return value_elems(v) * mk_dtype_size(v->dtype); }

/* Multiply-adds x 2 of convolution n (from its weight's shape), 0 when unknown. */
static double conv_flops(const mk_graph *g, const mk_node *n) {
  if (n->ninputs < 2 || n->noutputs < 1) return 0;
  int w = n->inputs[1], in = n->inputs[0], out = n->outputs[0];
  if (w < 0 || w >= g->nvalues || in < 0 || in >= g->nvalues || out < 0 || out >= g->nvalues) return 0;
  const mk_value *wv = &g->values[w];
  if (wv->rank < 3) return 0;
  double per = 1; /* input channels per group x kernel (output channels per group, transposed) */
  for (int d = 1; d < wv->rank; d++) per *= (double)wv->shape[d];
  bool transposed = n->short_name && strstr(n->short_name, "transpose") != NULL;
  return 2 * value_elems(&g->values[transposed ? in : out]) * per;
}

typedef struct island_plan {
  int *parent;
  double *gain_s, *cost_s; /* per root */
  bool *hard_exit;         /* per root: read by an op outside it that is not a view */
} island_plan;

static void join(island_plan *ip, int a, int b) {
  int ra = island_root(ip->parent, a), rb = island_root(ip->parent, b);
  if (ra != rb) ip->parent[ra] = rb;
}

/* Joins each activation an op reads keeping its layout with the op's activations. */
static void join_islands(const mk_graph *g, island_plan *ip) {
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    for (int k = 0; k < n->ninputs; k++) {
      int v = n->inputs[k];
      if (v < 0 || v >= g->nvalues || !is_activation(&g->values[v]) || !keeps_layout(g, n, v)) continue;
      for (int o = 0; o < n->noutputs; o++)
        if (n->outputs[o] >= 0 && n->outputs[o] < g->nvalues && is_activation(&g->values[n->outputs[o]]))
          join(ip, v, n->outputs[o]);
    }
  }
}

/* True if value v enters its island: a program input, or made by an op that does
 * not keep the layout of what it read (softmax, a view, a matmul). */
static bool enters_island(const mk_graph *g, int v) {
  const mk_value *val = &g->values[v];
  if (val->kind == MK_VALUE_INPUT) return true;
  if (val->producer < 0 || val->producer >= g->nnodes) return false;
  const mk_node *p = &g->nodes[val->producer];
  for (int k = 0; k < p->ninputs; k++)
    if (p->inputs[k] >= 0 && p->inputs[k] < g->nvalues && is_activation(&g->values[p->inputs[k]]) &&
        keeps_layout(g, p, p->inputs[k]))
      return false;
  return true;
}

static void weigh_islands(const mk_graph *g, island_plan *ip) {
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    if (is_conv_producing(g, n) && n->noutputs > 0 && n->outputs[0] >= 0 && n->outputs[0] < g->nvalues)
      ip->gain_s[island_root(ip->parent, n->outputs[0])] += conv_flops(g, n) / CONV_FLOPS_PER_S * CL_CONV_SAVING;
  }
  for (int v = 0; v < g->nvalues; v++) {
    const mk_value *val = &g->values[v];
    if (!is_activation(val) || val->nusers == 0) continue;
    int r = island_root(ip->parent, v);
    bool exits = false;
    for (int u = 0; u < val->nusers; u++) {
      int nid = val->users[u];
      if (nid < 0 || nid >= g->nnodes || keeps_layout(g, &g->nodes[nid], v)) continue;
      exits = true;
      ip->hard_exit[r] |= g->nodes[nid].category != MK_OP_VIEW;
    }
    double copy_s = 2 * value_bytes(val) / COPY_BYTES_PER_S;
    if (exits) ip->cost_s[r] += copy_s;
    if (enters_island(g, v)) ip->cost_s[r] += copy_s;
  }
}

/* True if the island of v may be channels_last (see above). */
static bool island_worth_it(const island_plan *ip, int v) {
  if (ip->parent == NULL) return true;
  int r = island_root(ip->parent, v);
  return !ip->hard_exit[r] || ip->gain_s[r] >= ip->cost_s[r];
}

static void island_plan_free(island_plan *ip) {
  free(ip->parent);
  free(ip->gain_s);
  free(ip->cost_s);
  free(ip->hard_exit);
}

static int island_plan_build(const mk_graph *g, island_plan *ip) {
  size_t n = (size_t)g->nvalues + 1;
  *ip = (island_plan){.parent = malloc(n * sizeof(int)), .gain_s = calloc(n, sizeof(double)),
                      .cost_s = calloc(n, sizeof(double)), .hard_exit = calloc(n, sizeof(bool))};
  if (!ip->parent || !ip->gain_s || !ip->cost_s || !ip->hard_exit) {
    island_plan_free(ip);
    return MK_ENOMEM;
  }
  for (int v = 0; v < g->nvalues; v++) ip->parent[v] = v;
  join_islands(g, ip);
  weigh_islands(g, ip);
  return 0;
}

static void plan_value(const mk_graph *g, int v, const island_plan *ip, unsigned char *layout,
                       unsigned char *conv) {
  const mk_value *val = &g->values[v];
  if (!is_activation(val) || (val->kind == MK_VALUE_NODE && (val->producer < 0 || val->producer >= g->nnodes)))
    return;
  const mk_node *p = val->kind == MK_VALUE_NODE ? &g->nodes[val->producer] : NULL;
  if (p && in_place_on_input(p)) {
    /* A new version of a tensor modified in place (relu_): the same memory,
     * so the same layout, and nothing to convert. */
    int m = p->inputs[0];
    if (m >= 0 && m < g->nvalues) layout[v] = layout[m];
    if (layout[v] == MK_LAYOUT_CHANNELS_LAST && !all_readers_keep_layout(g, v)) {
      layout[v] = MK_LAYOUT_DEFAULT;
      if (conv && read_by_view(g, v)) conv[v] = MK_LAYOUT_TO_CONTIG;
    }
    return;
  }
  bool from_cl = p && reads_channels_last(p, layout, g->nvalues);
  bool connected = read_by_conv(g, v) || (p && is_conv_producing(g, p)) ||
                   (from_cl && p->ninputs > 0 && keeps_layout(g, p, p->inputs[0]) &&
                    p->category != MK_OP_VIEW);
  bool convertible = may_convert(g, val) || channel_shuffle_result(g, v, layout);
  if (connected && convertible && all_readers_keep_layout(g, v) && island_worth_it(ip, v)) {
    layout[v] = MK_LAYOUT_CHANNELS_LAST;
    /* A value no op reads (a program output) is returned as its producer
     * made it: converting it would be a pass over the output for nothing
     * (problem 35's pooled output, 260 MB, on every call). */
    if (conv && val->nusers > 0) conv[v] = MK_LAYOUT_TO_CL;
  } else if (conv && from_cl && convertible && read_by_view(g, v)) {
    conv[v] = MK_LAYOUT_TO_CONTIG; /* `.view` fails on most channels_last strides */
  }
}

static bool has_spatial_conv(const mk_graph *g) {
  for (int i = 0; i < g->nnodes; i++)
    if (is_conv_producing(g, &g->nodes[i])) return true;
  return false;
}

int mk_layout_plan(const mk_graph *g, unsigned char *layout, unsigned char *conv) {
  if (g == NULL || layout == NULL) return MK_EINVAL;
  memset(layout, MK_LAYOUT_DEFAULT, (size_t)g->nvalues);
  if (conv) memset(conv, MK_LAYOUT_KEEP, (size_t)g->nvalues);
  if (!has_spatial_conv(g)) return 0;
  island_plan ip;
  if (island_plan_build(g, &ip)) return MK_ENOMEM;
  for (int v = 0; v < g->nvalues; v++)
    if (g->values[v].kind == MK_VALUE_INPUT) plan_value(g, v, &ip, layout, conv);
  for (int i = 0; i < g->nnodes; i++) {
    const mk_node *n = &g->nodes[i];
    for (int k = 0; k < n->noutputs; k++)
      if (n->outputs[k] >= 0 && n->outputs[k] < g->nvalues) plan_value(g, n->outputs[k], &ip, layout, conv);
  }
  island_plan_free(&ip);
  int count = 0;
  for (int v = 0; v < g->nvalues; v++) count += layout[v] == MK_LAYOUT_CHANNELS_LAST;
  return count;
}

const char *mk_layout_suffix(mk_layout_conv c, int rank) {
  if (c == MK_LAYOUT_TO_CL)
    return rank == 5 ? ".contiguous(memory_format=torch.channels_last_3d)"
                     : ".contiguous(memory_format=torch.channels_last)";
  if (c == MK_LAYOUT_TO_CONTIG) return ".contiguous()";
  return "";
}

const char *mk_layout_conv_name(mk_layout_conv c) {
  return c == MK_LAYOUT_TO_CL ? "channels_last" : c == MK_LAYOUT_TO_CONTIG ? "contiguous" : NULL;
}
