/* builtin_family.c — the op families of the builtin generator in one table:
 * the short op names each covers, the plan-time check that the generator can
 * write a node of it, and the emitter of its stage. builtin_plan.c classifies
 * nodes with it, builtin_propose.c emits stages with it, so a new family is
 * one row here plus its emitter's file. */
#include "builtin_internal.h"

#include <string.h>

static const char *const view_ops[] = {
    "view", "reshape", "flatten", "squeeze", "unsqueeze", "permute", "transpose", "t", "T", "mT", "expand",
    "expand_as", "contiguous", "unflatten", "view_as", "reshape_as", "movedim", "swapaxes", "split",
    "chunk", "unbind", "narrow", "select", NULL};
static const char *const reduce_ops[] = {
    "sum",    "mean",   "amax", "amin",        "logsumexp", "max",      "min",
    "argmax", "argmin", "norm", "vector_norm", "mse_loss",  "l1_loss",  "smooth_l1_loss",
    "huber_loss", "kl_div", NULL};
/* ops along one dim whose output has the input's shape (tril / triu: over the
 * last two) */
static const char *const softmax_ops[] = {"softmax", "log_softmax", "cumsum", "cumprod", "tril", "triu", NULL};
static const char *const norm_ops[] = {"layer_norm", "group_norm", "instance_norm", "batch_norm",
                                       "rms_norm", "normalize", NULL};
static const char *const pool_ops[] = {
    "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
    "adaptive_max_pool2d", "adaptive_max_pool3d", "max_pool1d_with_indices",
    "max_pool2d_with_indices", "max_pool3d_with_indices", NULL};
static const char *const gemm_ops[] = {"linear", "matmul", "mm", "bmm", "addmm", "rmatmul", "einsum", NULL};
static const char *const torch_ops[] = {"conv1d", "conv2d", "conv3d", "conv_transpose1d",
                                        "conv_transpose2d", "conv_transpose3d", NULL};

/* Elementwise: what the elementwise table writes, and torch.max(a, b) /
 * torch.min(a, b) with a tensor second operand (the reductions' names). */
static bool is_elementwise(const mk_node *n, const char *s) {
  bool binary_minmax = (strcmp(s, "max") == 0 || strcmp(s, "min") == 0) &&
                       bi_arg_tensor(bi_arg(n, 1, "other")) >= 0;
  return binary_minmax || bi_ew_supported(n, NULL);
}

static bool in_list(const char *s, const char *const *list) {
  for (; *list; list++)
    if (strcmp(s, *list) == 0) return true;
  return false;
}

/* The view ops, and indexing with slices, ints, None and Ellipsis only (a
 * view: `self.bias[:, :, :T, :T]`); indexing with tensors gathers. */
static bool is_view(const mk_node *n, const char *s) {
  return in_list(s, view_ops) || (strcmp(s, "getitem") == 0 && n->category == MK_OP_VIEW);
}

/* A view op is replayed in the launcher as recorded. */
static int emit_view_stage(bi_emit *e, int s, mk_errmsg *err) {
  const mk_graph *g = e->p->g;
  bi_stage_comment(e->p, s, 4, e->body);
  return mk_pyemit_node(g, &g->nodes[e->p->st[s].nodes[0]], bi_graph_namer, (void *)g, 4, e->body,
                        err);
}

bool bi_is_replayed(const mk_node *n) {
  return (n->category == MK_OP_DATA || n->category == MK_OP_FACTORY) && n->replayable &&
         n->nmutates == 0 && n->noutputs >= 1 && !(mk_op_flags(n->op) & MK_OPF_RANDOM);
}

static bool is_replayed(const mk_node *n, const char *s) { return bi_is_replayed(n); }

/* A data op no kernel writes: its recorded call, declared in MK_USES_TORCH
 * (the verifier rejects undeclared torch calls in a candidate). A device it
 * records is `_mk_dev`, which run() binds (bi_emit_run_signature). A tensor
 * made from constants that the run keeps to itself is made once per device
 * (mk_graph_node_is_constant), as in the composed forward: made per call it
 * is a stream-synchronising copy from host memory that a CUDA graph of the
 * program cannot capture. */
static int emit_replay_stage(bi_emit *e, int s, mk_errmsg *err) {
  const mk_graph *g = e->p->g;
  const mk_node *n = &g->nodes[e->p->st[s].nodes[0]];
  char sn[64];
  bi_short(n, sn, sizeof sn);
  bi_declare_torch_op(e, sn);
  bi_stage_comment(e->p, s, 4, e->body);
  if (mk_graph_node_is_constant(g, n->id) && !e->p->is_output[n->outputs[0]]) {
    e->need_const = true;
    return mk_pyemit_constant_node(g, n, bi_graph_namer, (void *)g, 4, e->body, err);
  }
  return mk_pyemit_node(g, n, bi_graph_namer, (void *)g, 4, e->body, err);
}

/* In classification order: elementwise first (binary max/min), then the
 * families named by their ops, then the data ops replayed as recorded. */
static const bi_family families[] = {
    {BI_EW, "elementwise", NULL, is_elementwise, NULL, bi_emit_ew_stage},
    {BI_VIEW, "view", view_ops, is_view, NULL, emit_view_stage},
    {BI_REDUCE, "reduce", reduce_ops, NULL, bi_reduce_check, bi_emit_reduce_stage},
    {BI_SOFTMAX, "softmax", softmax_ops, NULL, bi_reduce_check, bi_emit_reduce_stage},
    {BI_NORM, "norm", norm_ops, NULL, bi_norm_check, bi_emit_norm_stage},
    {BI_POOL, "pool", pool_ops, NULL, bi_pool_check, bi_emit_pool_stage},
    {BI_GEMM, "gemm", gemm_ops, NULL, bi_gemm_check, bi_emit_gemm_stage},
    {BI_TORCH, "torch", torch_ops, NULL, NULL, bi_emit_torch_stage},
    {BI_REPLAY, "replay", NULL, is_replayed, NULL, emit_replay_stage},
};
#define NFAMILIES (sizeof families / sizeof families[0])

const bi_family *bi_family_of_node(const mk_node *n) {
  char s[64];
  bi_short(n, s, sizeof s);
  for (size_t i = 0; i < NFAMILIES; i++) {
    const bi_family *f = &families[i];
    if (f->match ? f->match(n, s) : in_list(s, f->ops)) return f;
  }
  return NULL;
}

const bi_family *bi_family_of_kind(bi_kind kind) {
  for (size_t i = 0; i < NFAMILIES; i++)
    if (families[i].kind == kind) return &families[i];
  return NULL;
}
