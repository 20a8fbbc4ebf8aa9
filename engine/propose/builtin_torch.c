/* builtin_torch.c — anchors delegated to PyTorch: convolutions (cuDNN) and,
 * as a variant, GEMMs (cuBLAS), each followed by the subkernel's elementwise
 * run as one Triton kernel. The candidate declares the delegated ops in
 * MK_USES_TORCH (docs/candidates.md).
 *
 * Convolutions are called without their bias whenever something else can add
 * it: the elementwise stage that is the output's only reader adds it while
 * loading (one pass fewer than eager, whose cuDNN path adds it separately).
 *
 * channels_last variant: input and weight in channels_last (the weight kept
 * so by ModelNew through MK_CHANNELS_LAST, so converted once), the bias never
 * inside the call, the output left channels_last for the elementwise stages
 * and anchors after it in the subkernel (which then run in that memory order
 * or load through strides, builtin_ew.c); views, GEMMs and later subkernels
 * get a contiguous copy (bi_feeds_other_subkernel). See docs/builtin-proposer.md, "Layouts". */
#include "builtin_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct cl_namer {
  const mk_graph *g;
  int in, weight;   /* value ids renamed to their channels_last copies */
  int contig_in;    /* value id passed as .contiguous() (NCHW conv of a channels_last input), or -1 */
  int bias;         /* value id spelled None (added elsewhere), or -1 */
} cl_namer;

static int cl_name(void *ctx, int vid, mk_buf *out) {
  cl_namer *c = ctx;
  if (vid == c->bias) return mk_buf_puts(out, "None");
  bi_value_name(c->g, vid, out);
  if (vid == c->in || vid == c->weight) mk_buf_puts(out, "_cl");
  if (vid == c->contig_in) mk_buf_puts(out, ".contiguous()");
  return out->err;
}

static bool is_conv_nd(const char *s, int *nd) {
  if (strncmp(s, "conv", 4) != 0) return false;
  size_t len = strlen(s);
  if (len < 2 || s[len - 1] != 'd') return false;
  *nd = s[len - 2] - '0';
  return *nd >= 1 && *nd <= 3;
}

/* True if stage us is an anchor that loads value v as its input itself (no
 * prologue; builtin_ew.c's direct input load): it reads any layout through
 * strides and can add a folded bias while loading. */
static bool anchor_loads(const bi_plan *p, int us, int v) {
  const bi_stage *st = &p->st[us];
  bool family = st->kind == BI_REDUCE || st->kind == BI_SOFTMAX || st->kind == BI_NORM ||
                st->kind == BI_POOL;
  if (!family || st->pro >= 0) return false;
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  int in = bi_arg_tensor(bi_arg(n, 0, "input"));
  if (in < 0) in = bi_arg_tensor(bi_arg(n, 0, "self"));
  int uses = 0;
  for (int k = 0; k < n->ninputs; k++) uses += n->inputs[k] == v;
  return in == v && uses == 1;
}

/* True if configuration cfg hands convolution n (conv1d/2d/3d) to cuDNN in
 * channels_last (bi_emit_torch_stage: not an implicit GEMM; input and weight
 * made channels_last). *nd: its spatial dims. */
static bool conv_runs_channels_last(const mk_graph *g, const bi_config *cfg, const mk_node *n, int *nd) {
  char sn[64];
  bi_short(n, sn, sizeof sn);
  if (!is_conv_nd(sn, nd) || cfg == NULL || !cfg->channels_last) return false;
  if (cfg->conv_igemm && bi_conv_igemm_supported(g, n)) return false;
  int in = bi_arg_tensor(bi_arg(n, 0, "input")), w = bi_arg_tensor(bi_arg(n, 1, "weight"));
  return *nd >= 2 && in >= 0 && w >= 0 && g->values[in].rank == *nd + 2 && n->noutputs == 1;
}

/* True if stage us is such a convolution reading v as its input and nothing
 * else: it makes its input channels_last itself, so a channels_last v is what
 * it wants, and a contiguous one costs a conversion pass (ShuffleNet's
 * shuffled batch norm output, 241 MB, stored NCHW and converted back for the
 * next 1x1 convolution). */
static bool cl_conv_reads(const bi_plan *p, const bi_config *cfg, int us, int v) {
  if (p->st[us].kind != BI_TORCH) return false;
  const mk_node *n = &p->g->nodes[p->st[us].nodes[0]];
  int nd = 0;
  if (!conv_runs_channels_last(p->g, cfg, n, &nd) || bi_arg_tensor(bi_arg(n, 0, "input")) != v) return false;
  int uses = 0;
  for (int k = 0; k < n->ninputs; k++) uses += n->inputs[k] == v;
  return uses == 1;
}

/* True if anchor stage us, loading a channels_last input through its
 * strides, walks it well: norms and pools tile the channels; a reduction,
 * softmax or scan only when its dims include the channels (dim 1), which
 * channels_last makes contiguous. Over the width or the pixels (UNet's
 * softmax over the last dim, a mean over (2, 3)) the elements it walks lie C
 * apart in channels_last and contiguous in the default layout. */
static bool anchor_walks_channels_last(const bi_plan *p, int us) {
  const bi_stage *st = &p->st[us];
  if (st->kind != BI_REDUCE && st->kind != BI_SOFTMAX) return true;
  bi_reduce_info ri;
  mk_errmsg ignored = {{0}};
  if (bi_reduce_parse(p->g, &p->g->nodes[st->nodes[0]], &ri, &ignored)) return false;
  return ri.rank < 3 || (ri.lo <= 1 && ri.hi >= 1);
}

bool bi_cl_output_ok(const bi_plan *p, const bi_config *cfg, int lo, int hi, int v) {
  if (bi_feeds_other_subkernel(p, v)) return false;
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid < 0 || nid >= p->g->nnodes || p->stage_of[nid] < 0) continue;
    int us = p->stage_of[nid];
    if ((us < lo || us > hi) && p->st[us].kind != BI_EW &&
        !(anchor_loads(p, us, v) && anchor_walks_channels_last(p, us)) && !cl_conv_reads(p, cfg, us, v))
      return false;
  }
  return true;
}

/* True if a reader of v needs it contiguous: views, GEMMs, delegated ops and
 * other subkernels (elementwise runs, loading anchors and channels_last
 * convolutions read channels_last). */
static bool needs_contiguous(const bi_emit *e, int s, int v) { return !bi_cl_output_ok(e->p, e->cfg, s, s, v); }

/* The stage that can add the conv's bias while it loads the conv output, or
 * -1: it must be the output's only reader (the output without bias is never
 * seen elsewhere) and either an elementwise stage of the output's shape (the
 * channel index comes from its iteration) or an anchor loading it directly. */
static int bias_fold_stage(const bi_plan *p, int out) {
  if (p->is_output[out]) return -1;
  const mk_value *v = &p->g->values[out];
  int target = -1;
  for (int u = 0; u < v->nusers; u++) {
    int nid = v->users[u];
    if (nid < 0 || nid >= p->g->nnodes || p->stage_of[nid] < 0) return -1;
    int us = p->stage_of[nid];
    if (target >= 0 && target != us) return -1;
    target = us;
  }
  if (target < 0) return -1;
  const bi_stage *st = &p->st[target];
  if (anchor_loads(p, target, out)) return target;
  if (st->kind != BI_EW || !bi_same_shape(v->rank, v->shape, st->rank, st->shape)) return -1;
  return target;
}

/* True if the subkernel has a stage of its own (not only delegated calls and views). */
static bool plan_has_kernel(const bi_plan *p) {
  for (int s = 0; s < p->nst; s++)
    if (p->st[s].kind != BI_TORCH && p->st[s].kind != BI_VIEW && p->st[s].kind != BI_REPLAY) return true;
  return false;
}

int bi_declare_torch_op(bi_emit *e, const char *name) {
  char quoted[80];
  snprintf(quoted, sizeof quoted, "\"%s\", ", name);
  if (strstr(mk_buf_cstr(e->uses_torch), quoted)) return 0;
  return mk_buf_puts(e->uses_torch, quoted);
}

void bi_want_cl_param(bi_emit *e, int w) {
  const mk_value *v = &e->p->g->values[w];
  if (v->kind != MK_VALUE_PARAM || v->name == NULL || e->cl_params == NULL) return;
  for (const char *c = v->name; *c; c++)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
          *c == '_' || *c == '.'))
      return;
  char quoted[512];
  snprintf(quoted, sizeof quoted, "\"%s\", ", v->name);
  if (strstr(mk_buf_cstr(e->cl_params), quoted) == NULL) mk_buf_puts(e->cl_params, quoted);
}

/* `out = fn(out<arg_suffix>[, extra])`, or `out = out<arg_suffix>` when fn is "". */
static void line_assign_call(bi_emit *e, int out, const char *fn, const char *arg_suffix,
                             int extra) {
  mk_buf *b = e->body;
  mk_buf_indent(b, 4);
  bi_run_name(e->p, out, b);
  mk_buf_printf(b, " = %s%s", fn, *fn ? "(" : "");
  bi_run_name(e->p, out, b);
  mk_buf_puts(b, arg_suffix);
  if (extra >= 0) {
    mk_buf_puts(b, ", ");
    bi_run_name(e->p, extra, b);
  }
  mk_buf_puts(b, *fn ? ")\n" : "\n");
}

/* conv in channels_last: input and weight converted (the weight once, by
 * ModelNew), the bias left out of the call. cuDNN picks slower kernels when
 * it must add the bias itself (2.4x on a conv + avg-pool, H200 profiles);
 * the elementwise stage reading the output adds it while loading, or a
 * per-channel kernel does when no such stage exists. */
static int emit_conv(bi_emit *e, int s, const mk_node *n, int nd, bool cl, mk_errmsg *err) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  int in = bi_arg_tensor(bi_arg(n, 0, "input"));
  int w = bi_arg_tensor(bi_arg(n, 1, "weight"));
  int bias = bi_arg_tensor(bi_arg(n, 2, "bias"));
  int out = n->outputs[0];
  int fold = bias >= 0 ? bias_fold_stage(p, out) : -1;
  /* A lone conv in the default layout differs from the reference only by this. */
  bool drop_bias = bias >= 0 && (fold >= 0 || cl || !plan_has_kernel(p));
  /* The default-layout variant is the NCHW convolution: an input the layout
   * plan gives in channels_last is made contiguous first, so its output (which
   * the stages after it index as contiguous) is NCHW too. */
  cl_namer c = {.g = p->g, .in = cl ? in : -1, .weight = cl ? w : -1,
                .contig_in = !cl && bi_is_cl_value(e, in) ? in : -1, .bias = drop_bias ? bias : -1};
  if (cl) {
    const char *fmt = nd == 2 ? "torch.channels_last" : "torch.channels_last_3d";
    mk_buf_puts(b, "    # channels_last convolution: faster cuDNN kernels, same values\n");
    const int ids[2] = {in, w};
    for (int i = 0; i < 2; i++) {
      mk_buf_indent(b, 4);
      bi_run_name(p, ids[i], b);
      mk_buf_puts(b, "_cl = ");
      bi_run_name(p, ids[i], b);
      mk_buf_printf(b, ".contiguous(memory_format=%s)\n", fmt);
    }
    bi_want_cl_param(e, w);
  }
  if (fold >= 0)
    mk_buf_puts(b, "    # the bias is added by the kernel that reads the output, while loading\n");
  int rc = mk_pyemit_node(p->g, n, cl_name, &c, 4, b, err);
  if (rc) return rc;
  if (cl) {
    /* Views, GEMMs, delegated ops and later subkernels take contiguous
     * tensors; the other readers read channels_last. */
    if (needs_contiguous(e, s, out)) line_assign_call(e, out, "", ".contiguous()", -1);
    else bi_add_cl_value(e, out);
  }
  if (fold >= 0 && e->nfolded < (int)(sizeof e->folded / sizeof e->folded[0])) {
    e->folded[e->nfolded].value = out;
    e->folded[e->nfolded].bias = bias;
    e->nfolded++;
  } else if (drop_bias) {
    line_assign_call(e, out, "_mk_add_channel_bias", "", bias);
    e->need_channel_bias = true;
  }
  return b->err;
}

int bi_emit_torch_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  char sn[64];
  bi_short(n, sn, sizeof sn);
  if (e->cfg->conv_igemm && bi_conv_igemm_supported(p->g, n)) return bi_emit_conv_igemm(e, s, err);
  bi_declare_torch_op(e, sn);
  mk_buf *b = e->body;
  bi_stage_comment(p, s, 4, b);
  int nd = 0;
  int rc;
  if (is_conv_nd(sn, &nd)) {
    bool cl = conv_runs_channels_last(p->g, e->cfg, n, &nd);
    rc = emit_conv(e, s, n, nd, cl, err);
  } else {
    rc = mk_pyemit_node(p->g, n, bi_graph_namer, (void *)p->g, 4, b, err);
  }
  if (rc) return rc;
  /* A GEMM emitted through torch still owns its fused epilogue stage. */
  if (st->epi >= 0) return bi_emit_ew_stage(e, st->epi, err);
  return b->err ? mk_errf(err, MK_ERANGE, "generated code too large") : 0;
}
