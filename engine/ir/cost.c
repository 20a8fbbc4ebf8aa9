/* cost.c — what a graph must cost at least: FLOPs and bytes.
 *
 * A roofline estimate: the FLOPs of the matrix work (matmul family,
 * convolutions, attention, recurrent layers; elementwise work counts one
 * FLOP per output element and is negligible beside it; views, data
 * movement and factories count none), and the minimum
 * bytes any implementation moves: every forward input, parameter and
 * buffer read once, every returned tensor written once. The time a device
 * needs at least is max(FLOPs / peak FLOP/s, bytes / peak bandwidth); the
 * bench divides it by the measured time to say how close a program is to
 * the device's limit. Ops whose cost is not modelled (einsum, cdist, ...)
 * count their output elements only, so the estimate stays a lower bound. */
#include "mk_ir.h"

#include <string.h>

/* The tensor at args[pos] (or kwargs[name]), or NULL. */
static const mk_value *arg_tensor(const mk_graph *g, const mk_node *n, int pos, const char *name) {
  const cJSON *a = cJSON_GetArrayItem(n->args, pos);
  if (a == NULL && name) a = cJSON_GetObjectItemCaseSensitive(n->kwargs, name);
  const cJSON *t = cJSON_IsObject(a) ? cJSON_GetObjectItemCaseSensitive(a, "t") : NULL;
  if (!cJSON_IsNumber(t) || t->valueint < 0 || t->valueint >= g->nvalues) return NULL;
  return &g->values[t->valueint];
}

static const mk_value *first_output(const mk_graph *g, const mk_node *n) {
  if (n->noutputs < 1 || n->outputs[0] < 0 || n->outputs[0] >= g->nvalues) return NULL;
  return &g->values[n->outputs[0]];
}

static double dim_from_end(const mk_value *v, int k) {
  return v && v->rank >= k ? (double)v->shape[v->rank - k] : 0.0;
}

/* Product of a weight's dims after the first: (C_in/groups) * kernel size for
 * a convolution, (C_out/groups) * kernel size for a transposed one. */
static double weight_fan(const mk_value *w) {
  double f = 1;
  for (int d = 1; w && d < w->rank; d++) f *= (double)w->shape[d];
  return w ? f : 0.0;
}

static bool is_true(const cJSON *a) { return cJSON_IsTrue(a) || (cJSON_IsNumber(a) && a->valueint); }

static double conv_flops(const mk_graph *g, const mk_node *n, const mk_value *out) {
  const mk_value *x = arg_tensor(g, n, 0, "input"), *w = arg_tensor(g, n, 1, "weight");
  bool transposed = strncmp(n->short_name, "conv_transpose", 14) == 0;
  if (strcmp(n->short_name, "convolution") == 0 || strcmp(n->short_name, "_convolution") == 0)
    transposed = is_true(cJSON_GetArrayItem(n->args, 6));
  if (x == NULL || w == NULL) return 0;
  /* each output (input, when transposed) element meets every weight of its group once */
  return 2.0 * (double)mk_value_numel(transposed ? x : out) * weight_fan(w);
}

/* Recurrent layers: every weight matrix is applied once per time step and
 * batch element, whatever the cell (LSTM 4 gates, GRU 3, RNN 1). */
static double rnn_flops(const mk_graph *g, const mk_node *n) {
  const mk_value *x = arg_tensor(g, n, 0, "input");
  double rows = x && x->rank >= 1 && x->shape[x->rank - 1] > 0
                    ? (double)mk_value_numel(x) / (double)x->shape[x->rank - 1] : 0;
  double weights = 0;
  if (strstr(n->short_name, "_cell")) {
    for (int pos = 2; pos <= 3; pos++) {
      const mk_value *w = arg_tensor(g, n, pos, NULL);
      if (w && w->rank == 2) weights += (double)mk_value_numel(w);
    }
  } else {
    const cJSON *params = cJSON_GetArrayItem(n->args, 2);
    const cJSON *list = cJSON_IsObject(params) ? params->child : NULL; /* {"list"|"tuple": [...]} */
    for (const cJSON *it = list ? list->child : NULL; it; it = it->next) {
      const cJSON *t = cJSON_GetObjectItemCaseSensitive(it, "t");
      if (!cJSON_IsNumber(t) || t->valueint < 0 || t->valueint >= g->nvalues) continue;
      const mk_value *w = &g->values[t->valueint];
      if (w->rank == 2) weights += (double)mk_value_numel(w);
    }
  }
  return 2.0 * rows * weights;
}

double mk_node_flops(const mk_graph *g, const mk_node *n) {
  const mk_value *out = first_output(g, n);
  if (g == NULL || n == NULL || out == NULL) return 0;
  double numel = (double)mk_value_numel(out);
  const char *op = n->short_name ? n->short_name : "";
  switch (n->category) {
  case MK_OP_CONV:
    return conv_flops(g, n, out);
  case MK_OP_RNN:
    return rnn_flops(g, n);
  case MK_OP_ATTENTION:
    if (strcmp(op, "scaled_dot_product_attention") == 0) {
      const mk_value *q = arg_tensor(g, n, 0, "query"), *k = arg_tensor(g, n, 1, "key");
      /* Q·Kᵀ and P·V: 2 FLOPs per multiply-add, each L x S x D */
      return q && k ? 4.0 * (double)mk_value_numel(q) * dim_from_end(k, 2) : 0;
    }
    return numel;
  case MK_OP_MATMUL:
    if (strcmp(op, "linear") == 0) return 2.0 * numel * dim_from_end(arg_tensor(g, n, 1, "weight"), 1);
    if (strcmp(op, "rmatmul") == 0) return 2.0 * numel * dim_from_end(arg_tensor(g, n, 1, NULL), 1);
    if (strcmp(op, "addmm") == 0 || strcmp(op, "baddbmm") == 0 || strcmp(op, "addmv") == 0)
      return 2.0 * numel * dim_from_end(arg_tensor(g, n, 1, NULL), 1);
    if (strcmp(op, "addbmm") == 0) { /* sums the batch of products into one matrix */
      const mk_value *b1 = arg_tensor(g, n, 1, NULL);
      return 2.0 * numel * dim_from_end(b1, 1) * dim_from_end(b1, 3);
    }
    if (strcmp(op, "matmul") == 0 || strcmp(op, "imatmul") == 0 || strcmp(op, "mm") == 0 ||
        strcmp(op, "bmm") == 0 || strcmp(op, "mv") == 0 || strcmp(op, "dot") == 0 ||
        strcmp(op, "vdot") == 0 || strcmp(op, "inner") == 0)
      return 2.0 * numel * dim_from_end(arg_tensor(g, n, 0, NULL), 1);
    return numel; /* einsum, cdist, kron, ...: not modelled */
  case MK_OP_VIEW:
  case MK_OP_DATA:
  case MK_OP_FACTORY:
    return 0; /* data movement: its cost is in the bytes */
  default:
    return numel;
  }
}

static double value_bytes(const mk_value *v) {
  return (double)mk_value_numel(v) * (double)mk_dtype_size(v->dtype);
}

int mk_graph_cost(const mk_graph *g, mk_graph_cost_t *out) {
  if (g == NULL || out == NULL) return MK_EINVAL;
  *out = (mk_graph_cost_t){0};
  for (int i = 0; i < g->nnodes; i++) out->flops += mk_node_flops(g, &g->nodes[i]);
  for (int i = 0; i < g->nvalues; i++) {
    const mk_value *v = &g->values[i];
    bool read = v->kind == MK_VALUE_INPUT || v->kind == MK_VALUE_PARAM ||
                v->kind == MK_VALUE_BUFFER || v->kind == MK_VALUE_ATTR || v->kind == MK_VALUE_CONST;
    if (read && v->nusers > 0) out->bytes += value_bytes(v);
  }
  for (int i = 0; i < g->noutput_values; i++) {
    int vid = g->output_values[i];
    bool dup = false; /* a tensor returned twice is written once */
    for (int k = 0; k < i && !dup; k++) dup = g->output_values[k] == vid;
    if (!dup && vid >= 0 && vid < g->nvalues && g->values[vid].kind == MK_VALUE_NODE)
      out->bytes += value_bytes(&g->values[vid]);
  }
  return 0;
}

double mk_roofline_fraction(const mk_graph_cost_t *cost, double flops_per_s, double bytes_per_s,
                            double measured_ms) {
  if (cost == NULL || measured_ms <= 0 || flops_per_s <= 0 || bytes_per_s <= 0) return -1;
  double t_flops = cost->flops / flops_per_s, t_bytes = cost->bytes / bytes_per_s;
  double bound_s = t_flops > t_bytes ? t_flops : t_bytes;
  return bound_s / (measured_ms / 1e3);
}
