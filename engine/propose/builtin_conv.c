/* builtin_conv.c — 2-d and 3-d convolutions as Triton implicit GEMMs, with the
 * subkernel's tail fused onto the tile the GEMM leaves in registers.
 *
 * Why: on the conv-led problems the convolution's output is the largest
 * tensor of the program (problem 25's is 33x its input), and both eager and
 * torch.compile write it to memory and read it back for the tail. Here one
 * kernel computes a [BLOCK_M pixels x BLOCK_N channels] tile of the
 * convolution (K = C*KH*KW walked in BLOCK_K steps, c fastest, so a
 * channels_last input is read in contiguous runs of KW*C), adds the bias,
 * runs the elementwise stage after it, and then, when the chain has one,
 * reduces the tile:
 *   - a reduction over the channel dim (sum, mean, max, min): BLOCK_N covers
 *     every output channel, so the tile holds whole rows;
 *   - a max/avg pool whose window equals its stride, without padding or
 *     dilation: the M index enumerates pool windows (the window's taps
 *     innermost), so a reshape to [BLOCK_M / taps, taps, BLOCK_N] reduces
 *     each window in registers;
 * followed by that anchor's own epilogue. Only what escapes the chain is
 * stored: problem 25 writes one value per pixel instead of 64.
 *
 * A transposed convolution with stride 1 (no output padding) is the
 * convolution of the flipped, transposed weight with padding dil*(k-1) - pad: the kernel
 * reads the weight in that order, nothing is copied. With a larger stride it
 * runs by output phases ((o + pad) mod stride): each phase uses a fixed subset
 * of the taps, so each program's GEMM stays dense.
 *
 * A group or batch norm in the chain takes two passes: per-tile statistics
 * (combined in float64 by the launcher into a per-(sample, channel) scale and
 * shift), then the convolution again with the norm applied.
 *
 * The products run on tensor cores in TF32 (the reference's convolutions
 * run cuDNN with TF32 allowed, PyTorch's default; docs/verify.md) or in
 * 3xTF32 for float32 accuracy; the verifier decides which variant stands.
 * See docs/builtin-proposer.md, "Convolutions as implicit GEMMs". */
#include "builtin_internal.h"
#include "mk_layout.h"

#include <stdio.h>
#include <string.h>

typedef struct conv_info {
  bool transposed;
  /* A transposed convolution with a stride > 1: each program computes one
   * output phase (o + pad) mod stride, whose taps are a fixed subset, so the
   * GEMM stays dense (the other taps would contribute zeros). */
  bool phased;
  int nd; /* spatial dims: 2 or 3 */
  long long st[3], pad[3], dil[3], opad[3];
  /* Groups (plain convolutions only): each group's GEMM reads its cg input
   * channels and writes its oc / groups output channels; a program's tile
   * stays inside one group (docs/builtin-proposer.md). */
  long long groups, cg;
  int in, w, bias, out;
} conv_info;

/* An int or a tuple of nd ints, expanded to nd values. */
static bool dims_arg(const cJSON *a, int nd, long long def, long long *out) {
  if (bi_arg_none(a)) {
    for (int d = 0; d < nd; d++) out[d] = def;
    return true;
  }
  long long v[3];
  int n = bi_arg_ints(a, v, 3);
  if (n == 1)
    for (int d = 1; d < nd; d++) v[d] = v[0];
  else if (n != nd) return false;
  for (int d = 0; d < nd; d++) out[d] = v[d];
  return true;
}

/* A group's channels must fill a dot's K (a packed block below 16) and a
 * tile's N: fewer (depthwise convolutions, 1 channel per group) would be
 * mostly padding, where cuDNN's depthwise kernels stand. */
#define GROUP_MIN_CHANNELS 4
#define GROUP_MIN_OUT 16

/* Fills ci when node n is a convolution this kernel computes: conv2d/3d
 * (grouped too, with at least GROUP_MIN_CHANNELS input and GROUP_MIN_OUT
 * output channels per group), or conv_transpose2d/3d (groups 1); float32,
 * constant int geometry. */
static bool conv_parse(const mk_graph *g, const mk_node *n, conv_info *ci) {
  char sn[64];
  bi_short(n, sn, sizeof sn);
  bool tr = strncmp(sn, "conv_transpose", 14) == 0;
  const char *dims = tr ? sn + 14 : strncmp(sn, "conv", 4) == 0 ? sn + 4 : "";
  int nd = strcmp(dims, "2d") == 0 ? 2 : strcmp(dims, "3d") == 0 ? 3 : 0;
  if (nd == 0) return false;
  *ci = (conv_info){.transposed = tr, .nd = nd, .out = n->noutputs == 1 ? n->outputs[0] : -1};
  ci->in = bi_arg_tensor(bi_arg(n, 0, "input"));
  ci->w = bi_arg_tensor(bi_arg(n, 1, "weight"));
  ci->bias = bi_arg_tensor(bi_arg(n, 2, "bias"));
  if (ci->in < 0 || ci->w < 0 || ci->out < 0 || ci->in >= g->nvalues || ci->w >= g->nvalues)
    return false;
  if (!bi_arg_none(bi_arg(n, 2, "bias")) && ci->bias < 0) return false;
  const mk_value *x = &g->values[ci->in], *w = &g->values[ci->w];
  if (x->rank != nd + 2 || w->rank != nd + 2 || x->dtype != MK_DTYPE_F32 || w->dtype != MK_DTYPE_F32)
    return false;
  long long groups = 1, *opad = ci->opad;
  bool ok = dims_arg(bi_arg(n, 3, "stride"), nd, 1, ci->st) &&
            dims_arg(bi_arg(n, 4, "padding"), nd, 0, ci->pad);
  const cJSON *ga = bi_arg(n, tr ? 6 : 6, "groups");
  ok = ok && (bi_arg_none(ga) || bi_arg_int(ga, &groups));
  if (tr) {
    ok = ok && dims_arg(bi_arg(n, 5, "output_padding"), nd, 0, opad) &&
         dims_arg(bi_arg(n, 7, "dilation"), nd, 1, ci->dil);
    /* Stride 1: the convolution of the flipped weight. A larger stride: by
     * phases, with dilation 1. */
    for (int d = 0; ok && d < nd; d++) ci->phased |= ci->st[d] > 1;
    for (int d = 0; ok && d < nd; d++)
      ok = ci->phased ? ci->dil[d] == 1 && opad[d] >= 0 && opad[d] < ci->st[d] : opad[d] == 0;
  } else {
    ok = ok && dims_arg(bi_arg(n, 5, "dilation"), nd, 1, ci->dil);
  }
  for (int d = 0; ok && d < nd; d++) ok = ci->st[d] >= 1 && ci->pad[d] >= 0 && ci->dil[d] >= 1;
  if (!ok || groups < 1) return false;
  ci->groups = groups;
  ci->cg = tr ? x->shape[1] : w->shape[1];
  if (groups == 1) return true;
  long long oc = w->shape[0];
  return !tr && x->shape[1] == ci->cg * groups && oc % groups == 0 && ci->cg >= GROUP_MIN_CHANNELS &&
         oc / groups >= GROUP_MIN_OUT;
}

bool bi_conv_narrow(const mk_graph *g, const mk_node *n) {
  conv_info ci;
  return conv_parse(g, n, &ci) && ci.cg < 16;
}

/* The widest K block of the stem loop: one kernel row of (tap, channel) pairs. */
#define STEM_MAX_RUN 64

bool bi_conv_stem_ok(const mk_graph *g, const mk_node *n) {
  conv_info ci;
  if (!conv_parse(g, n, &ci) || ci.nd != 2 || ci.transposed || ci.groups != 1 ||
      !mk_layout_few_channels(g, n))
    return false;
  const mk_value *w = &g->values[ci.w];
  long long cp = (ci.cg + 3) / 4 * 4;
  return ci.dil[0] == 1 && ci.dil[1] == 1 && w->shape[3] * cp <= STEM_MAX_RUN;
}

/* True if this configuration computes the convolution with the stem loop. */
static bool use_stem(const bi_emit *e, const bi_plan *p, int s) {
  return e->cfg->conv_stem && bi_conv_stem_ok(p->g, &p->g->nodes[p->st[s].nodes[0]]);
}

bool bi_conv_igemm_supported(const mk_graph *g, const mk_node *n) {
  conv_info ci;
  return conv_parse(g, n, &ci);
}

/* ---- the chain fused after the convolution --------------------------------- */

typedef struct conv_chain {
  int ew;       /* elementwise stage right after the conv, or -1 */
  int anchor;   /* channel reduction or pool stage after that, or -1 */
  int last;     /* last stage the kernel covers */
  int value;    /* value the anchor reads (conv output or ew result) */
  int nd;       /* the convolution's spatial dims */
  bool phased;  /* the convolution is computed by output phases (conv_info) */
  int norm;     /* group_norm stage after the ew stage, or -1 */
  int norm_epi; /* that norm's epilogue (an elementwise stage), or -1 */
  bi_gn_info gn;
  /* Elementwise stages inside the chain's range that neither read nor feed
   * it (a batch norm's num_batches_tracked += 1 between the conv and the
   * norm): emitted on their own before the chain's kernels. */
  int indep[4];
  int nindep;
  bool reduce;  /* anchor is a channel reduction, else a pool */
  bi_reduce_info ri;
  bi_pool_info pi;
  /* A reduction over every spatial dim (and the channels, when sred_lo is
   * 1) of what the chain computed last (after a pool anchor and its
   * epilogue, or the elementwise / norm stages): each program reduces its
   * tile (tiles hold one image) into a partial, a small kernel finishes
   * them and runs the reduction's epilogue. -1: none. */
  int sred;
  bi_reduce_info si;
  /* The full-size values the chain stores are written in channels_last
   * (chain_stores_cl): rows of whole channels, coalesced even where a
   * phased convolution's rows are strided pixels, and no conversion after. */
  bool cl_out;
  /* The convolution runs the stem loop (use_stem): decided once, when the
   * chain's kernel is written, for its kernels and launcher alike. */
  bool stem;
} conv_chain;

/* True if a node of the subkernel outside stages [first, last] reads v, or v
 * is a subkernel output: the chain must store it. */
static bool read_outside(const bi_plan *p, int v, int first, int last) {
  if (p->is_output[v]) return true;
  const mk_value *val = &p->g->values[v];
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid < 0 || nid >= p->g->nnodes || p->stage_of[nid] < 0) continue;
    if (p->stage_of[nid] < first || p->stage_of[nid] > last) return true;
  }
  return false;
}

static bool stage_reads(const bi_plan *p, int s, int v) {
  const bi_stage *st = &p->st[s];
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    for (int k = 0; k < n->ninputs; k++)
      if (n->inputs[k] == v) return true;
  }
  return false;
}

/* An elementwise stage the conv's tile can carry: it reads the conv output,
 * has its shape and writes nothing in place (an in-place write needs the
 * tensor it writes into, which the chain never makes). */
static bool ew_fits(const bi_plan *p, int s, int out) {
  const bi_stage *st = &p->st[s];
  const mk_value *ov = &p->g->values[out];
  if (st->kind != BI_EW || !stage_reads(p, s, out)) return false;
  if (!bi_same_shape(ov->rank, ov->shape, st->rank, st->shape)) return false;
  for (int i = 0; i < st->nnodes; i++)
    if (p->g->nodes[st->nodes[i]].nmutates > 0) return false;
  return true;
}

/* A channel reduction or a pool over windows the tile can hold, reading v. */
static bool anchor_fits(const bi_plan *p, int s, int v, conv_chain *c) {
  const bi_stage *st = &p->st[s];
  if (st->bcast_epi >= 0) return false; /* its own kernel runs its broadcast epilogue */
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  mk_errmsg ignored = {{0}};
  int in = bi_arg_tensor(bi_arg(n, 0, "input"));
  if (in < 0) in = bi_arg_tensor(bi_arg(n, 0, "self"));
  if (in != v) return false;
  for (int k = 0; k < n->ninputs; k++)
    if (n->inputs[k] != v) return false; /* reads nothing else (no weights) */
  for (int o = 1; o < n->noutputs; o++)
    if (n->outputs[o] >= 0 && p->g->values[n->outputs[o]].nusers > 0) return false; /* indices */
  if (st->kind == BI_REDUCE) {
    if (bi_reduce_parse(p->g, n, &c->ri, &ignored)) return false;
    const char *op = c->ri.op;
    bool known = !strcmp(op, "sum") || !strcmp(op, "mean") || !strcmp(op, "max") || !strcmp(op, "min");
    c->reduce = true;
    return known && c->ri.rank == c->nd + 2 && c->ri.lo == 1 && c->ri.hi == 1;
  }
  if (st->kind == BI_POOL) {
    if (bi_pool_parse(p->g, n, &c->pi, &ignored)) return false;
    const bi_pool_info *pi = &c->pi;
    /* A window spans several output phases: not pooled in registers. */
    if (c->phased || pi->adaptive || pi->nd != c->nd || pi->rank != c->nd + 2 || pi->ceil_mode ||
        pi->divisor)
      return false;
    long long taps = 1;
    for (int d = 0; d < c->nd; d++) taps *= pi->k[d];
    for (int d = 0; d < c->nd; d++)
      if (pi->k[d] != pi->st[d] || pi->pad[d] != 0 || pi->dil[d] != 1) return false;
    c->reduce = false;
    return taps >= 2 && taps <= 64 && (taps & (taps - 1)) == 0; /* a power of two: reshapes */
  }
  return false;
}

/* A sum/mean/max/min over all spatial dims (and maybe the channels, never
 * the batch) of v, reading nothing else and keeping no indices. */
static bool sred_fits(const bi_plan *p, int s, int v, conv_chain *c) {
  const bi_stage *st = &p->st[s];
  if (st->kind != BI_REDUCE || st->bcast_epi >= 0) return false;
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  mk_errmsg ignored = {{0}};
  for (int k = 0; k < n->ninputs; k++)
    if (n->inputs[k] != v) return false;
  for (int o = 1; o < n->noutputs; o++)
    if (n->outputs[o] >= 0 && p->g->values[n->outputs[o]].nusers > 0) return false; /* indices */
  if (bi_reduce_parse(p->g, n, &c->si, &ignored)) return false;
  const char *op = c->si.op;
  bool known = !strcmp(op, "sum") || !strcmp(op, "mean") || !strcmp(op, "max") || !strcmp(op, "min");
  return known && c->si.rank == c->nd + 2 && c->si.hi == c->nd + 1 && (c->si.lo == 1 || c->si.lo == 2);
}

/* A group norm of v whose statistics a first pass over the convolution can
 * gather (its weight and bias are tensors of the subkernel's inputs). */
static bool norm_fits(const bi_plan *p, int s, int v, conv_chain *c) {
  const bi_stage *st = &p->st[s];
  if (st->kind != BI_NORM) return false;
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  if (!bi_group_norm_info(p->g, n, &c->gn) || c->gn.in != v) return false;
  if (p->g->values[v].rank != c->nd + 2) return false;
  for (int k = 0; k < n->ninputs; k++) {
    int in = n->inputs[k];
    if (in != v && in != c->gn.weight && in != c->gn.bias && in != c->gn.rmean && in != c->gn.rvar)
      return false;
  }
  /* A batch norm's fresh running statistics are updated in place; a later
   * reader of those versions would need them bound: not carried. */
  for (int o = 1; o < n->noutputs; o++)
    if (n->outputs[o] >= 0 && (p->g->values[n->outputs[o]].nusers > 0 || p->is_output[n->outputs[o]]))
      return false;
  if (st->epi >= 0)
    for (int i = 0; i < p->st[st->epi].nnodes; i++)
      if (p->g->nodes[p->st[st->epi].nodes[i]].nmutates > 0) return false;
  return true;
}

/* True if the chain stores a full-size value: something it computes before
 * its anchor is read outside it. */
static bool stores_full_size(bi_plan *p, int s, const conv_info *ci, const conv_chain *c) {
  int stored[8];
  p->chain_lo = s;
  p->chain_hi = c->last;
  bool full = read_outside(p, ci->out, s, c->last) ||
              (c->ew >= 0 && bi_stage_stored(p, c->ew, stored, 8) > 0) ||
              (c->norm >= 0 && bi_value_escapes(p, c->norm, bi_stage_result(p, c->norm))) ||
              (c->norm_epi >= 0 && bi_stage_stored(p, c->norm_epi, stored, 8) > 0);
  p->chain_lo = p->chain_hi = -1;
  return full;
}

/* True if elementwise stage t neither reads a value made in stages [s, t)
 * nor makes one that a stage after it reads: it can run before the chain. */
static bool independent(const bi_plan *p, int s, int t) {
  const bi_stage *st = &p->st[t];
  if (st->kind != BI_EW || st->fused_into >= 0) return false;
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &p->g->nodes[st->nodes[i]];
    for (int k = 0; k < n->ninputs; k++) {
      const mk_value *v = &p->g->values[n->inputs[k]];
      if (v->kind == MK_VALUE_NODE && v->producer >= 0 && p->stage_of[v->producer] >= s &&
          p->stage_of[v->producer] < t)
        return false;
    }
    for (int o = 0; o < n->noutputs; o++) {
      const mk_value *v = &p->g->values[n->outputs[o]];
      for (int u = 0; u < v->nusers; u++) {
        int nid = v->users[u];
        if (nid >= 0 && nid < p->g->nnodes && p->stage_of[nid] > t) return false;
      }
    }
  }
  return true;
}

/* Skips independent stages from `next`, recording them; returns the next other stage. */
static int skip_independent(const bi_plan *p, int s, int next, conv_chain *c) {
  while (next < p->nst && c->nindep < (int)(sizeof c->indep / sizeof c->indep[0]) &&
         independent(p, s, next))
    c->indep[c->nindep++] = next++;
  return next;
}

/* The stages after conv stage s that its kernel computes too: an elementwise
 * stage, a group or batch norm (and its epilogue), then a channel reduction
 * or pool (and its epilogue). */
static void find_chain(bi_plan *p, int s, const conv_info *ci, conv_chain *c) {
  *c = (conv_chain){.ew = -1, .anchor = -1, .last = s, .value = ci->out, .nd = ci->nd,
                    .phased = ci->phased, .norm = -1, .norm_epi = -1};
  int next = s + 1;
  if (next < p->nst && ew_fits(p, next, ci->out)) {
    c->ew = next;
    c->last = next;
    c->value = bi_stage_result(p, next);
    next++;
  }
  int nindep = c->nindep, after = skip_independent(p, s, next, c);
  if (after < p->nst && c->value >= 0 && norm_fits(p, after, c->value, c)) {
    next = after;
    c->norm = next;
    c->last = next;
    c->value = bi_stage_result(p, next);
    if (p->st[next].epi >= 0) {
      c->norm_epi = c->last = p->st[next].epi;
      c->value = bi_stage_result(p, c->norm_epi);
    }
    next = c->last + 1;
  } else {
    c->nindep = nindep; /* nothing joined after them: they stay where they are */
  }
  int before_anchor = c->last, value = c->value;
  /* A channel reduction needs every output channel in one tile, which a
   * grouped convolution's tiles (one group each) never hold. */
  if (next < p->nst && c->value >= 0 && anchor_fits(p, next, c->value, c) &&
      !(ci->groups > 1 && c->reduce)) {
    c->anchor = next;
    c->last = p->st[next].epi >= 0 ? p->st[next].epi : next;
  }
  /* The pooled enumeration never computes the rows a floor-mode pool drops:
   * nothing full-size may be stored from it. */
  if (c->anchor >= 0 && !c->reduce && stores_full_size(p, s, ci, c)) {
    c->anchor = -1;
    c->last = before_anchor;
    c->value = value;
  }
  /* Then a reduction over the pixels (not after a channel reduction, and not
   * by phases: its tiles would span phases). */
  c->sred = -1;
  int at = c->last + 1, reads = bi_stage_result(p, c->last);
  if (c->last == s) reads = ci->out;
  if (!ci->phased && !(c->anchor >= 0 && c->reduce) && at < p->nst && reads >= 0 &&
      sred_fits(p, at, reads, c) && (ci->groups == 1 || c->si.lo != 1)) {
    c->sred = at;
    c->last = p->st[at].epi >= 0 ? p->st[at].epi : at;
  }
  /* An elementwise stage the plan fused into a later stage as its prologue
   * (a pool's kernel recomputes it from the conv output) belongs to that
   * stage: unless the chain takes that stage too, it is the conv alone,
   * whose output the other kernel then reads. */
  int into = c->ew >= 0 ? p->st[c->ew].fused_into : -1;
  /* Likewise a norm the plan lets a later anchor apply while it loads
   * (apply_into): its normalised value is never stored, so the chain takes
   * that anchor too or leaves the norm to it. */
  int applier = c->norm >= 0 ? p->st[c->norm].apply_into : -1;
  if ((into >= 0 && into != c->anchor && into != c->norm && into != c->sred) ||
      (applier >= 0 && applier != c->anchor)) {
    *c = (conv_chain){.ew = -1, .anchor = -1, .last = s, .value = ci->out, .nd = ci->nd,
                      .phased = ci->phased, .norm = -1, .norm_epi = -1, .sred = -1};
  }
}

/* ---- emission ------------------------------------------------------------------ */

/* Spatial dims are numbered 0..nd-1 (d, h, w for 3-d; h, w for 2-d). Kernel
 * parameters: I<d> input sizes, O<d> output sizes, sx<d> / sw<d> strides,
 * S<d> stride, P<d> padding, DL<d> dilation, Q<d> pooled sizes, constexprs
 * K<d> kernel and PK<d> pool window. */

/* `name = torch.empty(shape, device, dtype)` for a full-size value the chain
 * stores, in channels_last when the chain writes that layout. */
static void alloc_line(bi_emit *e, const conv_chain *c, int v, const char *shape, const char *dev) {
  mk_buf *b = e->body;
  mk_buf_indent(b, 4);
  bi_run_name(e->p, v, b);
  mk_buf_printf(b, " = torch.empty(%s, device=%s, dtype=torch.float32", shape, dev);
  if (c->cl_out) {
    mk_buf_printf(b, ", memory_format=%s", c->nd == 3 ? "torch.channels_last_3d" : "torch.channels_last");
    bi_add_cl_value(e, v); /* later stages of the module read it so */
  }
  mk_buf_puts(b, ")\n");
}

/* "X0 * X1 * X2" over dims lo..nd-1 ("1" when empty). */
static void prod(mk_buf *k, const char *x, int lo, int nd) {
  if (lo >= nd) mk_buf_puts(k, "1");
  for (int d = lo; d < nd; d++) mk_buf_printf(k, "%s%s%d", d > lo ? " * " : "", x, d);
}

/* Kernel lines splitting index `idx` into per-dim variables <var><d> of
 * sizes <size><d> (last dim fastest; what is above dim 0 is ignored). */
static void split_index(mk_buf *k, const char *idx, const char *var, const char *size, int nd) {
  for (int d = 0; d < nd; d++) {
    mk_buf_printf(k, "    %s%d = (%s", var, d, idx);
    if (d < nd - 1) {
      mk_buf_puts(k, " // (");
      prod(k, size, d + 1, nd);
      mk_buf_puts(k, ")");
    }
    mk_buf_printf(k, ") %% %s%d\n", size, d); /* dim 0 too: the batch index is above it */
  }
}

/* Kernel lines enumerating the tile's output pixels o<d> and batch index n:
 * plain rows, or rows grouped by pool window with the window's taps innermost. */
/* Kernel lines of output phase `ph`: r<d> = (o + P) mod S per dim, the first
 * output of the phase base<d>, and its length U<d>. */
static void phase_lines(const char *ph, int nd, mk_buf *k) {
  mk_buf_printf(k, "    pt = %s\n", ph);
  for (int d = nd - 1; d >= 0; d--) {
    if (d > 0) mk_buf_printf(k, "    r%d = pt %% S%d\n    pt = pt // S%d\n", d, d, d);
    else mk_buf_printf(k, "    r%d = pt\n", d);
  }
  for (int d = 0; d < nd; d++)
    mk_buf_printf(k, "    base%d = ((r%d - P%d) %% S%d + S%d) %% S%d\n"
                     "    U%d = (O%d - base%d + S%d - 1) // S%d\n", d, d, d, d, d, d, d, d, d, d, d);
}

/* Kernel lines giving the phase's pixels `idx` (below `bound` rows) their
 * batch index n (unless per_image) and output coordinates o<d>. */
static void phase_pixels(const char *idx, bool per_image, int nd, mk_buf *k) {
  if (per_image) {
    mk_buf_printf(k, "    m_mask = %s < ", idx);
    prod(k, "U", 0, nd);
    mk_buf_puts(k, "\n");
  } else { /* by image: no 32-bit row count (pixel_lines); a phase can be empty */
    mk_buf_puts(k, "    UP = ");
    prod(k, "U", 0, nd);
    mk_buf_printf(k, "\n    n = %s // tl.maximum(UP, 1)\n    m_mask = n < NB * tl.minimum(UP, 1)\n", idx);
  }
  split_index(k, idx, "u", "U", nd);
  for (int d = 0; d < nd; d++) mk_buf_printf(k, "    o%d = u%d * S%d + base%d\n", d, d, d, d);
}

/* Kernel lines: the program ids pm, pn, pz and the tile's rows `rows`.
 * Offsets are 32-bit unless a tensor the kernel indexes passes 2**31
 * elements (IDX64, set by the launcher): on an H100 64-bit row math cost
 * problem 35's pooled GEMM 20% and problem 65's 30%
 * (scripts/device/igemm_probe.py). */
static void index_lines(const char *rows, mk_buf *k) {
  mk_buf_printf(k, "    pm = tl.program_id(0)\n"
                   "    pn = tl.program_id(1)\n"
                   "    pz = tl.program_id(2)\n"
                   "    if IDX64:  # offsets past 2**31 elements\n"
                   "        pm = pm.to(tl.int64)\n"
                   "        pn = pn.to(tl.int64)\n"
                   "        pz = pz.to(tl.int64)\n"
                   "    %s = pm * BLOCK_M + tl.arange(0, BLOCK_M)\n", rows);
}

/* With a pixel reduction after the chain each program's rows are pixels of
 * one image, program_id(2) (n is still a vector: the norm's affine indexes by it). */
static void pixel_lines(const conv_chain *c, int nd, mk_buf *k) {
  bool per_image = c->sred >= 0;
  index_lines("rm", k);
  if (c->phased) {
    phase_lines("pz", nd, k);
    phase_pixels("rm", false, nd, k);
    return;
  }
  bool pooled = c->anchor >= 0 && !c->reduce;
  const char *sz = pooled ? "Q" : "O";
  if (pooled) mk_buf_puts(k, "    q = rm // TAPS\n    tap = rm % TAPS\n");
  if (per_image) {
    mk_buf_puts(k, "    m_mask = rm < ");
    prod(k, sz, 0, nd);
    mk_buf_puts(k, pooled ? " * TAPS\n" : "\n");
    mk_buf_puts(k, "    n = tl.zeros_like(rm) + pz\n");
  } else {
    mk_buf_printf(k, "    n = %s // (", pooled ? "q" : "rm");
    prod(k, sz, 0, nd);
    /* Rows past the last image: compared by image, so no row count (which
     * can pass 2**31 where IDX64 is on) is computed in 32 bits. */
    mk_buf_puts(k, ")\n    m_mask = n < NB\n");
  }
  if (pooled) {
    split_index(k, "q", "q", "Q", nd);
    split_index(k, "tap", "t", "PK", nd);
    for (int d = 0; d < nd; d++) mk_buf_printf(k, "    o%d = q%d * PK%d + t%d\n", d, d, d, d);
  } else {
    split_index(k, "rm", "o", "O", nd);
  }
}

/* The loop body's end: the inputs rounded to TF32 as the reference rounds
 * them (ROUND), then the product. `split`: 3xTF32 from operands split into
 * TF32 high and low parts before the launch (ROUND 4, "tf32x3p"): the two
 * small products, then the large one, each straight from memory (Triton's
 * own "tf32x3" splits inside the loop). */
static void round_dot_lines(mk_buf *k, bool split) {
  if (split)
    mk_buf_puts(k, "        if ROUND == 4:  # 3xTF32, split before the launch: small products first\n"
                   "            acc = tl.dot(tl.load(xl_ptr + aoff, mask=amask, other=0.0), b, acc, input_precision=PREC)\n"
                   "            acc = tl.dot(a, tl.load(wl_ptr + boff, mask=bmask, other=0.0), acc, input_precision=PREC)\n");
  mk_buf_puts(k, "        if ROUND == 1:  # TF32 by truncation: the reference's products\n"
                 "            a = (a.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n"
                 "            b = (b.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)\n"
                 "        if ROUND == 2:  # TF32 to nearest (ties away): the reference's products\n"
                 "            a = ((a.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)\n"
                 "            b = ((b.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)\n"
                 "        acc = tl.dot(a, b, acc, input_precision=PREC)\n");
}

/* Appends `text` with `extra` more spaces before each of its lines. */
static void append_indented(mk_buf *k, const char *text, int extra) {
  for (const char *p = text; *p;) {
    const char *e = strchr(p, '\n');
    size_t n = e ? (size_t)(e - p) + 1 : strlen(p);
    if (n > 1) mk_buf_indent(k, extra);
    mk_buf_append(k, p, n);
    p += n;
  }
}

/* Kernel lines splitting the tap index kt (a scalar, or a [BLOCK_K] vector
 * when packed) into per-dim tap indices <var><d> of sizes <size><d>, the
 * last dim fastest. */
static void split_taps(const char *var, const char *size, int nd, mk_buf *k) {
  for (int d = nd - 1; d >= 0; d--) {
    if (d > 0) mk_buf_printf(k, "        %s%d = kt %% %s%d\n        kt = kt // %s%d\n", var, d, size, d, size, d);
    else mk_buf_printf(k, "        %s%d = kt\n", var, d);
  }
}

/* The weight's tap offset wtap (a stride-1 transposed convolution reads the
 * weight (C, OC, *K) flipped). */
static void wtap_line(const conv_info *ci, mk_buf *k) {
  int nd = ci->nd;
  if (ci->transposed && !ci->phased) {
    mk_buf_puts(k, "        # a stride-1 transposed convolution: the weight (C, OC, *K) flipped\n"
                   "        wtap = 0");
    for (int d = 0; d < nd; d++) mk_buf_printf(k, " + (K%d - 1 - k%d) * sw%d", d, d, d);
  } else {
    mk_buf_puts(k, "        wtap = 0");
    for (int d = 0; d < nd; d++) mk_buf_printf(k, " + k%d * sw%d", d, d);
  }
  mk_buf_puts(k, "\n");
}

/* Kernel lines of spatial dim d of one tap: the input coordinate i<d>, its
 * bounds folded into the mask, the tap's offset added to the load offsets.
 * Per row for a channel block (row_ok, xrow); packed, rows run down and taps
 * across ([BLOCK_M, BLOCK_K]: ok, kofs). */
static void tap_dim_lines(const conv_info *ci, int d, bool packed, mk_buf *k) {
  const char *ok = packed ? "ok" : "row_ok", *ofs = packed ? "kofs" : "xrow";
  if (ci->phased)
    mk_buf_printf(k, "        k%d = r%d + j%d * S%d\n        i%d = v%d%s - j%d%s\n", d, d, d, d, d, d,
                  packed ? "[:, None]" : "", d, packed ? "[None, :]" : "");
  else if (packed) mk_buf_printf(k, "        i%d = i%d0[:, None] + (k%d * DL%d)[None, :]\n", d, d, d, d);
  else mk_buf_printf(k, "        i%d = i%d0 + k%d * DL%d\n", d, d, d, d);
  mk_buf_printf(k, "        %s = %s & (i%d >= 0) & (i%d < I%d)\n", ok, ok, d, d, d);
  if (ci->phased) mk_buf_printf(k, "        %s = %s - j%d * sx%d\n", ofs, ofs, d, d);
  else mk_buf_printf(k, "        %s = %s + k%d * DL%d * sx%d\n", ofs, ofs, d, d, d);
}

/* One iteration over a (tap, channel block) pair: the tap's offsets are per
 * row and the loads run along the channels. The phased loop walks only the
 * taps k = r + j * S of the program's phase, each reading input
 * (o + P - k) / S = v - j (exact in the phase). */
static void block_body(const conv_info *ci, mk_buf *k) {
  int nd = ci->nd;
  mk_buf_puts(k, "        kt = it // NCB\n"
                 "        cs = (it % NCB) * BLOCK_K + tl.arange(0, BLOCK_K)\n"
                 "        c_ok = cs < C\n");
  split_taps(ci->phased ? "j" : "k", ci->phased ? "nk" : "K", nd, k);
  mk_buf_puts(k, "        row_ok = m_mask\n        xrow = xbase\n");
  for (int d = 0; d < nd; d++) tap_dim_lines(ci, d, false, k);
  mk_buf_puts(k, "        aoff = xrow[:, None] + (cs * sxc)[None, :]\n"
                 "        amask = row_ok[:, None] & c_ok[None, :]\n"
                 "        a = tl.load(x_ptr + aoff, mask=amask, other=0.0)\n");
  wtap_line(ci, k);
}

/* One iteration over BLOCK_K / CP taps of CP channels each (CP: the
 * channels rounded up to a power of two), the channel fastest: for fewer
 * input channels than a dot's K (PACK), where a channel block would be mostly
 * padding (3 channels: 13 of 16 products wasted). Offsets along K are a
 * [BLOCK_K] vector added to the row's base, contiguous over each tap's CP
 * channels (so the loads stay vectorised: packing C channels exactly ran
 * problem 65 at 11.3 ms against 6.3 unpacked on an H100); the bounds are per
 * element. */
static void packed_body(const conv_info *ci, mk_buf *k) {
  int nd = ci->nd;
  mk_buf_puts(k, "        kk = it * BLOCK_K + tl.arange(0, BLOCK_K)\n"
                 "        cs = kk % CP\n"
                 "        kt = kk // CP\n"
                 "        c_ok = (cs < C) & (kt < NTAP)\n");
  split_taps(ci->phased ? "j" : "k", ci->phased ? "nk" : "K", nd, k);
  mk_buf_puts(k, "        ok = m_mask[:, None] & c_ok[None, :]\n        kofs = cs * sxc\n");
  for (int d = 0; d < nd; d++) tap_dim_lines(ci, d, true, k);
  mk_buf_puts(k, "        aoff = xbase[:, None] + kofs[None, :]\n"
                 "        amask = ok\n"
                 "        a = tl.load(x_ptr + aoff, mask=amask, other=0.0)\n");
  wtap_line(ci, k);
}

/* The implicit GEMM main loop: acc[BLOCK_M, BLOCK_N] = the convolution, in
 * one loop (so Triton pipelines it even when the channels fit one block)
 * over (tap, channel block) pairs, or over packed (tap, channel) pairs when
 * the launcher says PACK. */
/* The stem loop (use_stem): the input is a zero-padded copy, channels fastest
 * and rounded up to CP (a multiple of 4), so a kernel row's (tap, channel)
 * pairs are one contiguous run of K1 * CP floats from the row's first pixel,
 * in bounds without a test; the weight is laid out [K0, BLOCK_K, OC] in the
 * same order, zeros past the run. One K block per kernel row: the loads are
 * an arange from a base, which Triton vectorises and pipelines, where the
 * packed loop gathered every (tap, channel) with its own bounds. */
static void stem_loop_lines(mk_buf *k) {
  mk_buf_puts(k, "    # a few-channel stem: one contiguous kernel row per K block, from a padded copy\n"
                 "    # (every run starts at a multiple of CP, itself a multiple of 4: 16-byte loads)\n"
                 "    xbase = tl.multiple_of(xbase, 4)\n"
                 "    jj = tl.arange(0, BLOCK_K)\n"
                 "    j_ok = jj < K1 * CP\n"
                 "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                 "    for kh in range(0, K0):\n"
                 "        rowoff = tl.multiple_of(kh * sx0, 4)\n"
                 "        aoff = xbase[:, None] + (rowoff + jj)[None, :]\n"
                 "        amask = m_mask[:, None] & j_ok[None, :]\n"
                 "        a = tl.load(x_ptr + aoff, mask=amask, other=0.0)\n"
                 "        boff = (kh * BLOCK_K + jj)[:, None] * OC + rn[None, :]\n"
                 "        bmask = j_ok[:, None] & n_mask[None, :]\n"
                 "        b = tl.load(w_ptr + boff, mask=bmask, other=0.0)\n");
  round_dot_lines(k, false);
}

static void gemm_lines(const conv_info *ci, const conv_chain *c, bool split, mk_buf *k) {
  int nd = ci->nd;
  /* The program's group (0 without groups) and its block of that group's
   * OCG output channels: rn is the channel in the output and the weight. */
  mk_buf_puts(k, "    NBG = tl.cdiv(OCG, BLOCK_N)  # channel blocks per group\n"
                 "    grp = pn // NBG\n"
                 "    rl = (pn - grp * NBG) * BLOCK_N + tl.arange(0, BLOCK_N)\n"
                 "    rn = grp * OCG + rl\n"
                 "    n_mask = rl < OCG\n");
  if (ci->phased) {
    for (int d = 0; d < nd; d++)
      mk_buf_printf(k, "    nk%d = tl.maximum((K%d - r%d + S%d - 1) // S%d, 0)\n"
                       "    v%d = (o%d + P%d - r%d) // S%d  # the input of tap r (exact in the phase)\n",
                    d, d, d, d, d, d, d, d, d, d);
    mk_buf_puts(k, "    NTAP = ");
    prod(k, "nk", 0, nd);
    mk_buf_puts(k, "\n    xbase = n * sxn");
    for (int d = 0; d < nd; d++) mk_buf_printf(k, " + v%d * sx%d", d, d);
    mk_buf_puts(k, " + grp * C * sxc");
  } else {
    for (int d = 0; d < nd; d++) mk_buf_printf(k, "    i%d0 = o%d * S%d - P%d\n", d, d, d, d);
    mk_buf_puts(k, "    NTAP = KT\n    xbase = n * sxn");
    for (int d = 0; d < nd; d++) mk_buf_printf(k, " + i%d0 * sx%d", d, d);
    mk_buf_puts(k, " + grp * C * sxc  # the group's first input channel");
  }
  if (c->stem) {
    mk_buf_puts(k, "\n");
    stem_loop_lines(k);
    return;
  }
  mk_buf_puts(k, "\n    NCB = tl.cdiv(C, BLOCK_K)\n"
                 "    if PACK:\n"
                 "        NIT = tl.cdiv(NTAP * CP, BLOCK_K)\n"
                 "    else:\n"
                 "        NIT = NTAP * NCB\n"
                 "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                 "    for it in range(0, NIT):\n"
                 "        if PACK:\n");
  mk_buf body;
  mk_buf_init(&body, 0);
  packed_body(ci, &body);
  append_indented(k, mk_buf_cstr(&body), 4);
  mk_buf_reset(&body);
  mk_buf_puts(k, "        else:\n");
  block_body(ci, &body);
  append_indented(k, mk_buf_cstr(&body), 4);
  if (body.err) k->err = body.err;
  mk_buf_free(&body);
  mk_buf_puts(k, "        boff = rn[None, :] * swo + (cs * swc + wtap)[:, None]\n"
                 "        bmask = c_ok[:, None] & n_mask[None, :]\n"
                 "        b = tl.load(w_ptr + boff, mask=bmask, other=0.0)\n");
  round_dot_lines(k, split);
}

/* Kernel lines after the GEMM: the bias, the tile's mask and its flat
 * offsets in the (N, OC, *O) output, and the conv output's store when it
 * escapes. */
static void offs_lines(const conv_info *ci, bool cl_out, bool store_conv, mk_buf *k) {
  int nd = ci->nd;
  if (ci->bias >= 0)
    mk_buf_puts(k, "    acc += tl.load(bias_ptr + rn, mask=n_mask, other=0.0)[None, :]\n");
  mk_buf_puts(k, "    mask2 = m_mask[:, None] & n_mask[None, :]\n"
                 "    # flat offsets in the (N, OC, *O) output\n"
                 "    SP = ");
  prod(k, "O", 0, nd);
  /* pix: the row's flat pixel index (n, *o) in (N, *O), whatever the rows enumerate */
  mk_buf_puts(k, "\n    pix = n * SP + ");
  for (int d = 0; d < nd; d++) {
    mk_buf_printf(k, "%so%d", d ? " + " : "", d);
    if (d < nd - 1) {
      mk_buf_puts(k, " * (");
      prod(k, "O", d + 1, nd);
      mk_buf_puts(k, ")");
    }
  }
  mk_buf_puts(k, "\n    offs = (pix + n * (OC - 1) * SP)[:, None] + (rn * SP)[None, :]\n");
  if (cl_out) mk_buf_puts(k, "    soffs = (pix * OC)[:, None] + rn[None, :]  # where the stores go: channels_last\n");
  if (store_conv)
    mk_buf_printf(k, "    tl.store(conv_out_ptr + %s, acc, mask=mask2)\n", cl_out ? "soffs" : "offs");
}

/* A sum/mean/max/min's identity, its tl reduction ("sum", "max", "min") and
 * how two partials combine. */
typedef struct reduce_text {
  const char *ident, *fn, *combine;
} reduce_text;

static reduce_text reduce_text_of(const char *op) {
  if (!strcmp(op, "max")) return (reduce_text){"float(\"-inf\")", "max", "tl.maximum(acc, v)"};
  if (!strcmp(op, "min")) return (reduce_text){"float(\"inf\")", "min", "tl.minimum(acc, v)"};
  return (reduce_text){"0.0", "sum", "acc + v"};
}

/* The pixel reduction's partial: the tile's valid rows (and, when the
 * channels are reduced too, its channels) reduced, stored at
 * part[n, program_id(0), channel] or part[n, program_id(0) * num_programs(1) + program_id(1)]. */
static void sred_partial_lines(const conv_chain *c, const char *val, const char *rmask, mk_buf *k) {
  reduce_text r = reduce_text_of(c->si.op);
  mk_buf_printf(k, "    # the reduction over the pixels%s: this tile's partial, finished by the next kernel\n"
                   "    red = tl.where(%s[:, None] & n_mask[None, :], %s, %s)\n"
                   "    red = tl.%s(red, axis=0)\n",
                c->si.lo == 1 ? " and channels" : "", rmask, val, r.ident, r.fn);
  if (c->si.lo == 1)
    mk_buf_printf(k, "    red = tl.%s(red, axis=0)\n"
                     "    at = (tl.program_id(2).to(tl.int64) * tl.num_programs(0) + tl.program_id(0)) * "
                     "tl.num_programs(1) + tl.program_id(1)\n"
                     "    tl.store(part_ptr + at, red)\n", r.fn);
  else
    mk_buf_puts(k, "    at = (tl.program_id(2).to(tl.int64) * tl.num_programs(0) + tl.program_id(0)) * OC + rn\n"
                   "    tl.store(part_ptr + at, red, mask=n_mask)\n");
}

/* Kernel lines after the GEMM: bias, stores of what escapes, the elementwise
 * stage, the anchor and its epilogue. */
static int tail_lines(bi_emit *e, const conv_info *ci, const conv_chain *c, bool store_conv,
                      mk_buf *k, mk_errmsg *err) {
  const bi_plan *p = e->p;
  offs_lines(ci, c->cl_out, store_conv, k);
  const char *val = "acc";
  char vname[32];
  const char *soffs = c->cl_out ? "soffs" : NULL;
  if (c->ew >= 0) {
    mk_buf_puts(k, "    # fused elementwise stage\n");
    bi_ew_bind bind = {.value = ci->out, .var = "acc", .store_offs = soffs};
    int rc = bi_ew_body(e, c->ew, "ew_", "offs", "mask2", bind, true, 4, k, err);
    if (rc) return rc;
    snprintf(vname, sizeof vname, "v%d", bi_stage_result(p, c->ew));
    val = vname;
  }
  if (c->norm >= 0) {
    int gout = bi_stage_result(p, c->norm);
    mk_buf_printf(k, "    # group norm: the (sample, channel) scale and shift from the first pass's statistics\n"
                     "    aff = n[:, None] * OC + rn[None, :]\n"
                     "    vn = %s * tl.load(gn_scale_ptr + aff, mask=mask2, other=0.0) + "
                     "tl.load(gn_shift_ptr + aff, mask=mask2, other=0.0)\n", val);
    if (bi_value_escapes(p, c->norm, gout))
      mk_buf_printf(k, "    tl.store(gn_out_ptr + %s, vn, mask=mask2)\n", soffs ? soffs : "offs");
    val = "vn";
    if (c->norm_epi >= 0) {
      mk_buf_puts(k, "    # the norm's elementwise epilogue\n");
      bi_ew_bind nb = {.value = gout, .var = "vn", .store_offs = soffs};
      int rc = bi_ew_body(e, c->norm_epi, "nepi_", "offs", "mask2", nb, true, 4, k, err);
      if (rc) return rc;
      snprintf(vname, sizeof vname, "v%d", bi_stage_result(p, c->norm_epi));
      val = vname;
    }
  }
  if (c->anchor < 0) {
    if (c->sred >= 0) sred_partial_lines(c, val, "m_mask", k);
    return k->err;
  }
  if (c->reduce) {
    reduce_text r = reduce_text_of(c->ri.op);
    mk_buf_printf(k, "    # the reduction over channels: the tile holds every channel\n"
                     "    red = tl.where(mask2, %s, %s)\n", val, r.ident);
    mk_buf_printf(k, "    red = tl.%s(red, axis=1)\n", r.fn);
    if (!strcmp(c->ri.op, "mean")) mk_buf_puts(k, "    red = red / OC\n");
    /* The reduced output (N, 1, *O) or (N, *O) is flat in the pixel index. */
    return bi_epi_body(e, c->anchor, "red", "pix", "m_mask", 4, k, err);
  }
  mk_buf_printf(k, "    # the pool: each group of TAPS rows is one window\n"
                   "    win = tl.reshape(%s, (BLOCK_M // TAPS, TAPS, BLOCK_N))\n", val);
  if (c->pi.is_max) mk_buf_puts(k, "    pooled = tl.max(win, axis=1)\n");
  else mk_buf_puts(k, "    pooled = tl.sum(win, axis=1) / TAPS\n");
  mk_buf_puts(k, "    rq = pm * (BLOCK_M // TAPS) + tl.arange(0, BLOCK_M // TAPS)\n"
                 "    QS = ");
  prod(k, "Q", 0, ci->nd);
  if (c->sred >= 0) /* rows of one image */
    mk_buf_puts(k, "\n    pmask = (rq < QS)[:, None] & n_mask[None, :]\n"
                   "    poffs = (pz * OC * QS + rq)[:, None] + (rn * QS)[None, :]\n");
  else
    mk_buf_puts(k, "\n    pmask = (rq // QS < NB)[:, None] & n_mask[None, :]\n"
                   "    poffs = ((rq // QS) * OC * QS + rq % QS)[:, None] + (rn * QS)[None, :]\n");
  int rc = bi_epi_body(e, c->anchor, "pooled", "poffs", "pmask", 4, k, err);
  if (rc || c->sred < 0) return rc;
  int epi = p->st[c->anchor].epi;
  char pv[32];
  snprintf(pv, sizeof pv, "v%d", bi_stage_result(p, epi >= 0 ? epi : c->anchor));
  sred_partial_lines(c, epi >= 0 ? pv : "pooled", "(rq < QS)", k);
  return k->err;
}

/* Launcher lines: sizes, output shapes and the row count M<res>. */
/* Launcher lines of the stem loop (use_stem), after the geometry of the
 * original input: x<res> becomes a zero-padded copy [NB, I0 + 2 P0, I1 + 2 P1,
 * CP] seen as (NB, CP, H, W) (channels fastest, CP the channels rounded up
 * to 4), the weight w<res> a [K0, BK, OC] copy in the same (tap, channel)
 * order, zeros past each row's run; the kernel is launched on the padded
 * sizes with no padding. Both copies are made per call: the weight is small,
 * and the input's copy replaces the channels_last copy (and its rounding)
 * the other loops read. */
static void stem_geometry_lines(bi_emit *e, int res) {
  mk_buf *b = e->body;
  mk_buf_printf(b, "    cps%d = (C%d + 3) // 4 * 4  # channels rounded up: 16-byte runs\n", res, res);
  mk_buf_printf(b, "    xp%d = torch.zeros((NB%d, I%d[0] + 2 * P%d[0], I%d[1] + 2 * P%d[1], cps%d), "
                   "device=x%d.device, dtype=x%d.dtype)\n",
                res, res, res, res, res, res, res, res, res);
  mk_buf_printf(b, "    xp%d[:, P%d[0]:P%d[0] + I%d[0], P%d[1]:P%d[1] + I%d[1], :C%d] = x%d.permute(0, 2, 3, 1)\n",
                res, res, res, res, res, res, res, res, res);
  mk_buf_printf(b, "    x%d = xp%d.permute(0, 3, 1, 2)\n", res, res);
  mk_buf_printf(b, "    run%d = K%d[1] * cps%d\n", res, res, res);
  mk_buf_printf(b, "    bks%d = max(16, triton.next_power_of_2(run%d))\n", res, res);
  mk_buf_printf(b, "    wr%d = torch.zeros((K%d[0], K%d[1], cps%d, OC%d), device=w%d.device, dtype=w%d.dtype)\n",
                res, res, res, res, res, res, res);
  mk_buf_printf(b, "    wr%d[:, :, :C%d, :] = w%d.permute(2, 3, 1, 0)\n", res, res, res);
  mk_buf_printf(b, "    w%d = torch.zeros((K%d[0], bks%d, OC%d), device=w%d.device, dtype=w%d.dtype)\n",
                res, res, res, res, res, res);
  mk_buf_printf(b, "    w%d[:, :run%d, :] = wr%d.reshape(K%d[0], run%d, OC%d)\n", res, res, res, res, res, res);
  mk_buf_printf(b, "    I%d = tuple(x%d.shape[2:])\n", res, res);
  mk_buf_printf(b, "    P%d = (0, 0)\n", res);
  mk_buf_printf(b, "    ws%d = (0, 0, 0, 0)  # the stem loop indexes its own weight copy\n", res);
}

static void geometry_lines(bi_emit *e, const conv_info *ci, const conv_chain *c, int res) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  int nd = ci->nd;
  /* Channels innermost in memory for both: the loads run along them. A no-op
   * for inputs the layout plan gives channels_last and for the weight, which
   * ModelNew keeps channels_last (MK_CHANNELS_LAST). */
  const char *fmt = nd == 3 ? "torch.channels_last_3d" : "torch.channels_last";
  if (e->cfg->conv_round) {
    /* On a GPU the reference's convolution runs cuDNN with TF32 (PyTorch's
     * default; with TF32 turned off this variant fails the plain comparison
     * and another stands). Candidates may not read torch.backends (audit). */
    mk_buf_printf(b, "    tf32_%d = ", res);
    bi_run_name(p, ci->in, b);
    mk_buf_puts(b, ".is_cuda\n");
  }
  const int vals[2] = {ci->in, ci->w};
  for (int i = 0; i < 2; i++) {
    if (e->cfg->conv_round == 4) {
      /* 3xTF32: high and low TF32 parts, split once, in the pass that makes
       * the channels_last copies (the low part unused on the CPU). */
      mk_buf_printf(b, "    %c%d, %cl%d = _mk_tf32_split(", i ? 'w' : 'x', res, i ? 'w' : 'x', res);
      bi_run_name(p, vals[i], b);
      mk_buf_printf(b, ", %s) if tf32_%d else (", fmt, res);
      bi_run_name(p, vals[i], b);
      mk_buf_printf(b, ".contiguous(memory_format=%s),) * 2\n", fmt);
      e->need_tf32_round = true;
      continue;
    }
    mk_buf_printf(b, "    %c%d = ", i ? 'w' : 'x', res);
    if (c->stem && i == 0 && e->cfg->conv_round != 3) {
      /* the stem's padded copy reads any layout: no channels_last copy first */
      bi_run_name(p, vals[i], b);
      mk_buf_puts(b, "\n");
      continue;
    }
    if (e->cfg->conv_round == 3) {
      /* Rounded once, in the pass that makes the channels_last copy, so the
       * loop feeds its loads straight to the tensor cores. */
      mk_buf_puts(b, "_mk_tf32_round(");
      bi_run_name(p, vals[i], b);
      mk_buf_printf(b, ", %s) if tf32_%d else ", fmt, res);
      e->need_tf32_round = true;
    }
    bi_run_name(p, vals[i], b);
    mk_buf_printf(b, ".contiguous(memory_format=%s)\n", fmt);
  }
  bi_want_cl_param(e, ci->w);
  mk_buf_printf(b, "    NB%d, C%d = x%d.shape[:2]\n", res, res, res);
  mk_buf_printf(b, "    I%d = x%d.shape[2:]\n", res, res);
  mk_buf_printf(b, "    K%d = w%d.shape[2:]\n", res, res);
  mk_buf_printf(b, "    OC%d = w%d.shape[%d]\n", res, res, ci->transposed ? 1 : 0);
  if (ci->groups > 1) {
    /* The kernel's C is a group's input channels; its tiles stay in a group. */
    mk_buf_printf(b, "    if C%d != w%d.shape[1] * %lld:\n"
                     "        raise ValueError(\"input channels do not match the groups\")\n"
                     "    C%d = w%d.shape[1]  # input channels per group\n"
                     "    OCG%d = OC%d // %lld  # output channels per group\n",
                  res, res, ci->groups, res, res, res, res, ci->groups);
  } else {
    mk_buf_printf(b, "    OCG%d = OC%d\n", res, res);
  }
  mk_buf_printf(b, "    P%d = (", res);
  for (int d = 0; d < nd; d++) {
    /* Stride 1 transposed: the convolution of the flipped weight, padding dil*(k-1) - pad. */
    if (ci->transposed && !ci->phased)
      mk_buf_printf(b, "%lld * (K%d[%d] - 1) - %lld, ", ci->dil[d], res, d, ci->pad[d]);
    else mk_buf_printf(b, "%lld, ", ci->pad[d]);
  }
  mk_buf_printf(b, ")\n    O%d = (", res);
  for (int d = 0; d < nd; d++) {
    if (ci->phased) /* torch's transposed output size */
      mk_buf_printf(b, "(I%d[%d] - 1) * %lld - 2 * %lld + %lld * (K%d[%d] - 1) + %lld + 1, ", res, d,
                    ci->st[d], ci->pad[d], ci->dil[d], res, d, ci->opad[d]);
    else
      mk_buf_printf(b, "(I%d[%d] + 2 * P%d[%d] - %lld * (K%d[%d] - 1) - 1) // %lld + 1, ", res, d, res,
                    d, ci->dil[d], res, d, ci->st[d]);
  }
  mk_buf_puts(b, ")\n");
  if (ci->transposed) {
    mk_buf_printf(b, "    ws%d = (w%d.stride(1), w%d.stride(0), *w%d.stride()[2:])\n", res, res, res, res);
  } else {
    mk_buf_printf(b, "    ws%d = w%d.stride()\n", res, res);
  }
  mk_buf_printf(b, "    if min(O%d) < 1:\n"
                   "        raise ValueError(\"convolution output is empty\")\n", res);
  if (c->stem) stem_geometry_lines(e, res);
  mk_buf_printf(b, "    cshape%d = (NB%d, OC%d, *O%d)\n", res, res, res, res);
  /* 64-bit offsets only where a tensor the kernel indexes (none is larger
   * than the input or the full-size output) nears 2**31 elements. */
  mk_buf_printf(b, "    big%d = max(x%d.numel(), math.prod(cshape%d)) >= 2**31 - 2**20\n", res, res, res);
  if (c->anchor >= 0 && !c->reduce) {
    mk_buf_printf(b, "    Q%d = (", res);
    for (int d = 0; d < nd; d++) mk_buf_printf(b, "O%d[%d] // %lld, ", res, d, c->pi.k[d]);
    mk_buf_puts(b, ")\n");
    mk_buf_printf(b, "    if min(Q%d) < 1:\n"
                     "        raise ValueError(\"pooling window larger than the input\")\n", res);
    mk_buf_printf(b, "    oshape%d = (NB%d, OC%d, *Q%d)\n", res, res, res, res);
    long long taps = 1;
    for (int d = 0; d < nd; d++) taps *= c->pi.k[d];
    mk_buf_printf(b, "    M%d = NB%d * math.prod(Q%d) * %lld\n", res, res, res, taps);
    if (c->sred >= 0) mk_buf_printf(b, "    MI%d = math.prod(Q%d) * %lld\n", res, res, taps);
  } else {
    if (c->anchor >= 0)
      mk_buf_printf(b, "    oshape%d = (NB%d, %s*O%d)\n", res, res, c->ri.keepdim ? "1, " : "", res);
    if (ci->phased) {
      /* Rows of the longest phase: the grid's third axis runs the phases. */
      mk_buf_printf(b, "    S%d = (", res);
      for (int d = 0; d < nd; d++) mk_buf_printf(b, "%lld, ", ci->st[d]);
      mk_buf_printf(b, ")\n    MP%d = math.prod((o + s - 1) // s for o, s in zip(O%d, S%d))\n", res, res, res);
      mk_buf_printf(b, "    M%d = NB%d * MP%d\n", res, res, res);
    } else {
      mk_buf_printf(b, "    M%d = NB%d * math.prod(O%d)\n", res, res, res);
      if (c->sred >= 0) mk_buf_printf(b, "    MI%d = math.prod(O%d)\n", res, res);
    }
  }
}

/* The kernel's signature (conv geometry after the chain's own parameters). */
static void signature(const char *kname, const char *sig, int nd, mk_buf *k) {
  /* C: input channels per group; OCG: output channels per group. */
  mk_buf_printf(k, "\n\n@triton.jit\ndef %s(x_ptr, w_ptr, %sNB, C, OC, OCG, ", kname, sig);
  const char *const names[] = {"I", "O", "Q", "sx", "sw", "S", "P", "DL"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    for (int d = 0; d < nd; d++) mk_buf_printf(k, "%s%d, ", names[i], d);
    if (i == 2) mk_buf_puts(k, "sxn, sxc, ");
    if (i == 3) mk_buf_puts(k, "swo, swc, ");
    if (i == 4) mk_buf_puts(k, "\n        ");
  }
  for (int d = 0; d < nd; d++) mk_buf_printf(k, "K%d: tl.constexpr, PK%d: tl.constexpr, ", d, d);
  /* TAPS = PK0 * PK1 (* PK2), given as a constexpr: shapes need one. */
  mk_buf_puts(k, "KT: tl.constexpr, TAPS: tl.constexpr,\n        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, "
                 "PREC: tl.constexpr, ROUND: tl.constexpr,\n        IDX64: tl.constexpr, PACK: tl.constexpr, CP: tl.constexpr):\n");
}

/* Launcher lines choosing the tile's channel sizes and the precision flag. */
static void tile_lines(bi_emit *e, const conv_chain *c, int res) {
  mk_buf *b = e->body;
  const bi_config *cfg = e->cfg;
  /* A channel reduction needs every channel in one tile. */
  if (c->anchor >= 0 && c->reduce) {
    mk_buf_printf(b, "    if OC%d > 256:\n"
                     "        raise ValueError(\"more than 256 channels for one tile\")\n", res);
    mk_buf_printf(b, "    BN%d = max(16, triton.next_power_of_2(OC%d))\n", res, res);
  } else {
    mk_buf_printf(b, "    BN%d = max(16, min(%d, triton.next_power_of_2(OCG%d)))\n", res, cfg->conv_bn, res);
  }
  /* The grid's channel axis: every group's blocks (a tile stays in one group). */
  mk_buf_printf(b, "    NBN%d = (OC%d // OCG%d) * triton.cdiv(OCG%d, BN%d)\n", res, res, res, res, res);
  /* The channel block: a dot needs K >= 16. The packed variant, with fewer
   * channels than that, runs over several taps' channels per block instead. */
  if (c->stem) { /* the stem loop: one kernel row per K block (stem_geometry_lines) */
    mk_buf_printf(b, "    pack%d = False\n    cp%d = cps%d\n    BK%d = bks%d\n", res, res, res, res, res);
    return;
  }
  if (cfg->conv_pack)
    mk_buf_printf(b, "    pack%d = C%d < 16\n", res, res);
  else
    mk_buf_printf(b, "    pack%d = False\n", res);
  mk_buf_printf(b, "    cp%d = triton.next_power_of_2(C%d) if pack%d else 1\n"
                   "    BK%d = %d if pack%d else max(16, min(%d, triton.next_power_of_2(C%d)))\n",
                res, res, res, res, cfg->conv_bk, res, cfg->conv_bk, res);
}

/* One launch: `grid` and the chain's arguments, then the geometry in
 * signature order. `pool`: the pooled enumeration's sizes and window. */
static void launch_call(bi_emit *e, const conv_info *ci, const conv_chain *c, int res, bool pool,
                        const char *kname, const char *grid, const char *call) {
  mk_buf *b = e->body;
  const bi_config *cfg = e->cfg;
  int nd = ci->nd;
  mk_buf_printf(b, "        %s[%s](\n", kname, grid);
  mk_buf_printf(b, "            x%d, w%d, %sNB%d, C%d, OC%d, OCG%d, *I%d, *O%d, *%s%d, ", res, res, call, res,
                res, res, res, res, res, pool ? "Q" : "(1,) * ", pool ? res : nd);
  mk_buf_printf(b, "*x%d.stride(), *ws%d,\n            ", res, res);
  mk_buf_puts(b, "*((");
  for (int d = 0; d < nd; d++) mk_buf_printf(b, "%lld, ", ci->st[d]);
  mk_buf_printf(b, ") + P%d + (", res);
  for (int d = 0; d < nd; d++) mk_buf_printf(b, "%lld, ", ci->dil[d]);
  mk_buf_puts(b, ")),\n            ");
  for (int d = 0; d < nd; d++)
    mk_buf_printf(b, "K%d=K%d[%d], PK%d=%lld, ", d, res, d, d, pool ? c->pi.k[d] : 1LL);
  long long taps = 1;
  for (int d = 0; pool && d < nd; d++) taps *= c->pi.k[d];
  mk_buf_printf(b, "KT=math.prod(K%d), TAPS=%lld, ", res, taps);
  if (cfg->conv_round)
    /* The reference's precision: TF32 (rounded as it rounds) on a GPU, float32 on the CPU. */
    mk_buf_printf(b, "BLOCK_M=%d, BLOCK_N=BN%d, BLOCK_K=BK%d,\n"
                     "            PREC=\"tf32\" if tf32_%d else \"ieee\", ROUND=%d if tf32_%d else 0, ",
                  cfg->conv_bm, res, res, res, cfg->conv_round, res);
  else
    mk_buf_printf(b, "BLOCK_M=%d, BLOCK_N=BN%d, BLOCK_K=BK%d,\n            PREC=\"%s\", ROUND=0, ",
                  cfg->conv_bm, res, res, cfg->conv_precision);
  mk_buf_printf(b, "IDX64=big%d, PACK=pack%d, CP=cp%d, num_warps=%d, num_stages=%d)\n", res, res, res,
                cfg->conv_warps, cfg->conv_stages);
}

static void launch_lines(bi_emit *e, const conv_info *ci, const conv_chain *c, int res,
                         const char *kname, const char *call) {
  char grid[160];
  if (ci->phased)
    snprintf(grid, sizeof grid, "(triton.cdiv(M%d, %d), NBN%d, math.prod(S%d))", res, e->cfg->conv_bm,
             res, res);
  else if (c->sred >= 0) /* tiles of one image each */
    snprintf(grid, sizeof grid, "(G0_%d, G1_%d, NB%d)", res, res, res);
  else
    snprintf(grid, sizeof grid, "(triton.cdiv(M%d, %d), NBN%d)", res, e->cfg->conv_bm, res);
  mk_buf_printf(e->body, "    if M%d > 0:\n", res);
  launch_call(e, ci, c, res, c->anchor >= 0 && !c->reduce, kname, grid, call);
}

/* The group norm's first pass: the same convolution (and elementwise stage)
 * over tiles of one image each, storing per tile and channel the sum and the
 * sum of squares about the tile's mean; the launcher combines them in float64
 * (_mk_gn_affine) into each (sample, channel)'s scale and shift. Recomputing
 * the convolution is cheaper than storing its output and reading it twice
 * where the input is small beside the output (few input channels). */
static int stats_kernel(bi_emit *e, const conv_info *ci, const conv_chain *c, int s, const char *kname,
                        const char *sig, mk_errmsg *err) {
  const bi_plan *p = e->p;
  mk_buf *k = e->kernels;
  int nd = ci->nd;
  signature(kname, sig, nd, k);
  for (int t = s; t <= c->norm; t++) bi_stage_comment(p, t, 4, k);
  index_lines("rl", k);
  if (ci->phased) {
    /* program_id(2) = n * phases + phase */
    mk_buf_puts(k, "    PH = ");
    prod(k, "S", 0, nd);
    mk_buf_puts(k, "\n    n = pz // PH\n");
    phase_lines("pz % PH", nd, k);
    phase_pixels("rl", true, nd, k);
  } else {
    mk_buf_puts(k, "    n = pz\n"
                   "    m_mask = rl < ");
    prod(k, "O", 0, nd);
    mk_buf_puts(k, "\n");
    split_index(k, "rl", "o", "O", nd);
  }
  gemm_lines(ci, c, e->cfg->conv_round == 4, k);
  offs_lines(ci, false, false, k); /* the statistics pass stores nothing full-size */
  const char *val = "acc";
  char vname[32];
  if (c->ew >= 0) {
    bi_ew_bind bind = {.value = ci->out, .var = "acc"};
    int rc = bi_ew_body(e, c->ew, "ew_", "offs", "mask2", bind, false, 4, k, err);
    if (rc) return rc;
    snprintf(vname, sizeof vname, "v%d", bi_stage_result(p, c->ew));
    val = vname;
  }
  mk_buf_printf(k, "    cnt = tl.sum(m_mask.to(tl.float32), axis=0)\n"
                   "    s1 = tl.sum(tl.where(mask2, %s, 0.0), axis=0)\n"
                   "    dev = tl.where(mask2, %s - (s1 / tl.maximum(cnt, 1.0))[None, :], 0.0)\n"
                   "    m2 = tl.sum(dev * dev, axis=0)\n"
                   "    # part[program_id(2), program_id(0), channel] = (pixels, sum, sum of squares about their mean)\n"
                   "    at = ((tl.program_id(2).to(tl.int64) * tl.num_programs(0) + tl.program_id(0)) * OC + rn) * 3\n"
                   "    tl.store(part_ptr + at, tl.zeros_like(s1) + cnt, mask=n_mask)\n"
                   "    tl.store(part_ptr + at + 1, s1, mask=n_mask)\n"
                   "    tl.store(part_ptr + at + 2, m2, mask=n_mask)\n", val, val);
  return k->err;
}

/* Launcher lines of the group norm's first pass and the scale and shift it gives. */
static void stats_launch(bi_emit *e, const conv_info *ci, const conv_chain *c, int res,
                         const char *kname, const char *call, const char *dev) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  int bm = e->cfg->conv_bm;
  if (c->gn.batch && !c->gn.batch_stats) {
    /* Running statistics: a per-channel affine, no first pass. */
    mk_buf_printf(b, "    part%d = None\n", res);
  } else {
    mk_buf_printf(b, "    # norm statistics: a first pass over the convolution, tiles of one image%s\n",
                  ci->phased ? " and phase" : "");
    if (ci->phased)
      mk_buf_printf(b, "    NT%d = triton.cdiv(MP%d, %d)\n    PH%d = math.prod(S%d)\n", res, res, bm, res, res);
    else
      mk_buf_printf(b, "    NT%d = triton.cdiv(math.prod(O%d), %d)\n    PH%d = 1\n", res, res, bm, res);
    mk_buf_printf(b, "    part%d = torch.empty((NB%d, PH%d * NT%d, OC%d, 3), device=%s, dtype=torch.float32)\n",
                  res, res, res, res, res, dev);
    char grid[160], args[4096];
    snprintf(grid, sizeof grid, "(NT%d, NBN%d, NB%d * PH%d)", res, res, res, res);
    snprintf(args, sizeof args, "%spart%d, ", call, res);
    mk_buf_printf(b, "    if M%d > 0:\n", res);
    launch_call(e, ci, c, res, false, kname, grid, args);
  }
  if (c->gn.batch) {
    mk_buf_printf(b, "    gn_scale%d, gn_shift%d = _mk_bn_affine(part%d, NB%d, ", res, res, res, res);
  } else {
    mk_buf_printf(b, "    gn_scale%d, gn_shift%d = _mk_gn_affine(part%d, %lld, ", res, res, res,
                  c->gn.groups);
  }
  bi_tl_float(c->gn.eps, b);
  const int ids[4] = {c->gn.weight, c->gn.bias, c->gn.rmean, c->gn.rvar};
  for (int i = 0; i < (c->gn.batch ? 4 : 2); i++) {
    mk_buf_puts(b, ", ");
    if (ids[i] >= 0) bi_run_name(p, ids[i], b);
    else mk_buf_puts(b, "None");
  }
  if (c->gn.batch) {
    mk_buf_puts(b, ", ");
    bi_tl_float(c->gn.momentum, b);
  }
  mk_buf_puts(b, ")\n");
  if (c->gn.batch) e->need_bn_affine = true;
  else e->need_gn_affine = true;
}

/* The full-size values the chain stores (besides the anchor's output): the
 * conv output when read outside, then what its elementwise stage, norm and
 * norm epilogue leave for others. Returns how many (at most max). */
static int chain_stored(const bi_plan *p, const conv_info *ci, const conv_chain *c, bool store_conv,
                        int *out, int max) {
  int n = 0, stored[64];
  if (store_conv && n < max) out[n++] = ci->out;
  int ns = c->ew >= 0 ? bi_stage_stored(p, c->ew, stored, 64) : 0;
  for (int i = 0; i < ns && n < max; i++) out[n++] = stored[i];
  if (c->norm >= 0 && bi_value_escapes(p, c->norm, bi_stage_result(p, c->norm)) && n < max)
    out[n++] = bi_stage_result(p, c->norm);
  ns = c->norm_epi >= 0 ? bi_stage_stored(p, c->norm_epi, stored, 64) : 0;
  for (int i = 0; i < ns && n < max; i++) out[n++] = stored[i];
  return n;
}

/* True if the chain (stages s..c->last) may write every full-size value it
 * stores in channels_last: none feeds another subkernel in the default
 * layout, and every later stage of the module reading one reads strides. */
static bool chain_stores_cl(const bi_plan *p, int s, const conv_info *ci, const conv_chain *c,
                            bool store_conv) {
  int vals[64];
  int n = chain_stored(p, ci, c, store_conv, vals, 64);
  for (int i = 0; i < n; i++)
    if (!bi_cl_output_ok(p, NULL, s, c->last, vals[i])) return false;
  return n > 0;
}

/* Launcher lines allocating what the chain stores besides the anchor's output. */
static void chain_allocs(bi_emit *e, const conv_info *ci, const conv_chain *c, bool store_conv,
                         const char *cshape, const char *dev) {
  int vals[64];
  int n = chain_stored(e->p, ci, c, store_conv, vals, 64);
  for (int i = 0; i < n; i++) alloc_line(e, c, vals[i], cshape, dev);
}

/* Kernel parameters and launcher arguments of the chain (both kernels share
 * the first part: bias and the elementwise stage). */
static int chain_params(bi_emit *e, const conv_info *ci, const conv_chain *c, bool store_conv,
                        const char *cshape, const char *oshape, int res, mk_buf *sig0, mk_buf *call0,
                        mk_buf *sig, mk_buf *call, mk_errmsg *err) {
  const bi_plan *p = e->p;
  if (e->cfg->conv_round == 4) { /* 3xTF32's low parts */
    mk_buf_puts(sig0, "xl_ptr, wl_ptr, ");
    mk_buf_printf(call0, "xl%d, wl%d, ", res, res);
  }
  if (ci->bias >= 0) {
    mk_buf_puts(sig0, "bias_ptr, ");
    bi_run_name(p, ci->bias, call0);
    mk_buf_puts(call0, ".contiguous(), ");
  }
  bi_ew_bind bind = {.value = ci->out, .var = "acc"};
  int rc = c->ew >= 0 ? bi_ew_params(e, c->ew, "ew_", cshape, bind, sig0, call0, err) : 0;
  if (rc) return rc;
  mk_buf_puts(sig, mk_buf_cstr(sig0));
  mk_buf_puts(call, mk_buf_cstr(call0));
  if (store_conv) {
    mk_buf_puts(sig, "conv_out_ptr, ");
    bi_run_name(p, ci->out, call);
    mk_buf_puts(call, ", ");
  }
  if (c->norm >= 0) {
    int gout = bi_stage_result(p, c->norm);
    mk_buf_puts(sig, "gn_scale_ptr, gn_shift_ptr, ");
    mk_buf_printf(call, "gn_scale%d, gn_shift%d, ", res, res);
    if (bi_value_escapes(p, c->norm, gout)) {
      mk_buf_puts(sig, "gn_out_ptr, ");
      bi_run_name(p, gout, call);
      mk_buf_puts(call, ", ");
    }
    bi_ew_bind nb = {.value = gout, .var = "vn"};
    if (c->norm_epi >= 0) rc = bi_ew_params(e, c->norm_epi, "nepi_", cshape, nb, sig, call, err);
  }
  if (!rc && c->anchor >= 0) rc = bi_epi_params(e, c->anchor, oshape, sig, call, err);
  if (!rc && c->sred >= 0) {
    mk_buf_puts(sig, "part_ptr, ");
    mk_buf_printf(call, "part%d, ", res);
  }
  return rc;
}

/* The pixel reduction's finishing kernel: each output (sample, or sample and
 * channel) combines its tiles' partials in order (deterministic), divides
 * for a mean, and runs the reduction's epilogue. */
static int finish_kernel(bi_emit *e, const conv_chain *c, const char *kname, const char *sig,
                         mk_errmsg *err) {
  mk_buf *k = e->kernels;
  mk_buf_printf(k, "\n\n@triton.jit\ndef %s(part_ptr, %sNOUT, T, R, COUNT, BLOCK: tl.constexpr):\n", kname, sig);
  bi_stage_comment(e->p, c->sred, 4, k);
  mk_buf_printf(k, "    # part[n, t, r]: T partials per output (n, r)\n"
                   "    idx = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)\n"
                   "    mask = idx < NOUT\n"
                   "    base = (idx // R) * T * R + idx %% R\n"
                   "    acc = tl.load(part_ptr + base, mask=mask, other=0.0)\n"
                   "    for t in range(1, T):\n"
                   "        v = tl.load(part_ptr + base + t * R, mask=mask, other=0.0)\n"
                   "        acc = %s\n", reduce_text_of(c->si.op).combine);
  if (!strcmp(c->si.op, "mean")) mk_buf_puts(k, "    acc = acc / COUNT\n");
  return bi_epi_body(e, c->sred, "acc", "idx", "mask", 4, k, err);
}

/* Launcher lines of the pixel reduction before the main launch: the grid's
 * tile counts and the partials, T per output of R per sample. */
static void sred_part_lines(bi_emit *e, const conv_chain *c, int res, const char *dev) {
  mk_buf *b = e->body;
  mk_buf_printf(b, "    G0_%d = triton.cdiv(MI%d, %d)\n    G1_%d = NBN%d\n", res, res, e->cfg->conv_bm,
                res, res);
  if (c->si.lo == 1)
    mk_buf_printf(b, "    T%d, R%d = G0_%d * G1_%d, 1\n", res, res, res, res);
  else
    mk_buf_printf(b, "    T%d, R%d = G0_%d, OC%d\n", res, res, res, res);
  mk_buf_printf(b, "    if NB%d > 65535:  # the grid's third axis runs the samples\n"
                   "        raise ValueError(\"more than 65535 samples for one launch\")\n", res);
  mk_buf_printf(b, "    part%d = torch.empty((NB%d, T%d, R%d), device=%s, dtype=torch.float32)\n", res, res,
                res, res, dev);
}

/* Launcher lines after the main launch: the reduced output and the launch
 * of the finishing kernel. */
static int sred_finish_lines(bi_emit *e, const conv_chain *c, int res, const char *fname,
                             const char *call, const char *dev, mk_errmsg *err) {
  mk_buf *b = e->body;
  int nd = c->nd;
  bool chans = c->si.lo == 1;
  mk_buf_printf(b, "    rshape%d = (NB%d, ", res, res);
  if (!chans) mk_buf_printf(b, "OC%d, ", res);
  else if (c->si.keepdim) mk_buf_puts(b, "1, ");
  for (int d = 0; c->si.keepdim && d < nd; d++) mk_buf_puts(b, "1, ");
  mk_buf_puts(b, ")\n");
  char rshape[32];
  snprintf(rshape, sizeof rshape, "rshape%d", res);
  int rc = bi_epi_alloc(e, c->sred, rshape, dev, b, err);
  if (rc) return rc;
  /* A mean's count: every reduced pixel (pooled, when a pool came first), times the channels. */
  const char *sz = c->anchor >= 0 && !c->reduce ? "Q" : "O";
  mk_buf_printf(b, "    if NB%d * R%d > 0:\n        %s[(triton.cdiv(NB%d * R%d, 128),)](\n"
                   "            part%d, %sNB%d * R%d, T%d, R%d, ",
                res, res, fname, res, res, res, call, res, res, res, res);
  if (chans) mk_buf_printf(b, "OC%d * ", res);
  mk_buf_printf(b, "math.prod(%s%d), BLOCK=128)\n", sz, res);
  return b->err;
}


static int emit_chain(bi_emit *e, int s, const conv_info *ci, const conv_chain *c, mk_errmsg *err) {
  const bi_plan *p = e->p;
  int res = ci->out;
  bool store_conv = read_outside(p, ci->out, s, c->last);
  char cshape[32], oshape[32], dev[32];
  snprintf(cshape, sizeof cshape, "cshape%d", res);
  snprintf(oshape, sizeof oshape, "oshape%d", res);
  snprintf(dev, sizeof dev, "x%d.device", res);
  mk_buf kname, sname, fname, sig0, call0, sig, call, fsig, fcall;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sname, 256);
  mk_buf_init(&fname, 256);
  mk_buf_init(&fsig, 0);
  mk_buf_init(&fcall, 0);
  mk_buf_init(&sig0, 0);
  mk_buf_init(&call0, 0);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  int rc = chain_params(e, ci, c, store_conv, cshape, oshape, res, &sig0, &call0, &sig, &call, err);
  bool stats = c->norm >= 0 && !(c->gn.batch && !c->gn.batch_stats);
  for (int i = 0; i < c->nindep && !rc; i++) rc = bi_emit_ew_stage(e, c->indep[i], err);
  if (!rc && stats) {
    e->kcount++;
    bi_kernel_name(e, s, "gnstats", &sname);
    mk_buf_puts(&sig0, "part_ptr, ");
    rc = stats_kernel(e, ci, c, s, mk_buf_cstr(&sname), mk_buf_cstr(&sig0), err);
  }
  e->kcount++;
  bi_kernel_name(e, s, "igemm", &kname);
  mk_buf *k = e->kernels;
  if (!rc) {
    signature(mk_buf_cstr(&kname), mk_buf_cstr(&sig), ci->nd, k);
    for (int t = s; t <= c->last; t++) bi_stage_comment(p, t, 4, k);
    pixel_lines(c, ci->nd, k);
    gemm_lines(ci, c, e->cfg->conv_round == 4, k);
    rc = tail_lines(e, ci, c, store_conv, k, err);
  }
  char rshape[32];
  snprintf(rshape, sizeof rshape, "rshape%d", res);
  if (!rc && c->sred >= 0) {
    e->kcount++;
    bi_kernel_name(e, c->sred, "finish", &fname);
    rc = bi_epi_params(e, c->sred, rshape, &fsig, &fcall, err);
    if (!rc) rc = finish_kernel(e, c, mk_buf_cstr(&fname), mk_buf_cstr(&fsig), err);
  }
  if (!rc) {
    mk_buf *b = e->body;
    mk_buf_puts(b, "    # convolution as an implicit GEMM, the stages after it fused\n");
    for (int t = s; t <= c->last; t++) bi_stage_comment(p, t, 4, b);
    geometry_lines(e, ci, c, res);
    chain_allocs(e, ci, c, store_conv, cshape, dev);
    if (c->anchor >= 0) rc = bi_epi_alloc(e, c->anchor, oshape, dev, b, err);
  }
  if (!rc) {
    tile_lines(e, c, res);
    if (c->norm >= 0) stats_launch(e, ci, c, res, mk_buf_cstr(&sname), mk_buf_cstr(&call0), dev);
    if (c->sred >= 0) sred_part_lines(e, c, res, dev);
    launch_lines(e, ci, c, res, mk_buf_cstr(&kname), mk_buf_cstr(&call));
    if (c->sred >= 0)
      rc = sred_finish_lines(e, c, res, mk_buf_cstr(&fname), mk_buf_cstr(&fcall), dev, err);
  }
  mk_buf_free(&kname);
  mk_buf_free(&sname);
  mk_buf_free(&fname);
  mk_buf_free(&fsig);
  mk_buf_free(&fcall);
  mk_buf_free(&sig0);
  mk_buf_free(&call0);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  return rc;
}

/* True if conv node n is the subkernel's only reader of its input v: the
 * launcher makes its own channels_last copy of v (`.contiguous` or the
 * TF32-rounding pass) and reads only that, so v may come in any layout. */
static bool only_the_conv_reads(const bi_plan *p, const mk_node *n, int v) {
  const mk_value *val = &p->g->values[v];
  if (val->kind != MK_VALUE_INPUT && val->kind != MK_VALUE_NODE) return false;
  for (int u = 0; u < val->nusers; u++) {
    int nid = val->users[u];
    if (nid >= 0 && nid < p->g->nnodes && p->stage_of[nid] >= 0 && &p->g->nodes[nid] != n) return false;
  }
  return true;
}

int bi_emit_conv_igemm(bi_emit *e, int s, mk_errmsg *err) {
  /* The plan is the proposer's own (mk_builtin_propose): the chain's bounds
   * are set on it while its kernel is written, so that values read only
   * inside the chain count as not escaping, then cleared. */
  bi_plan *p = (bi_plan *)e->p;
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  conv_info ci;
  if (!conv_parse(p->g, n, &ci))
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: no implicit-GEMM kernel for this convolution",
                   n->span.line);
  conv_chain c;
  find_chain(p, s, &ci, &c);
  p->chain_lo = s;
  p->chain_hi = c.last;
  c.cl_out = chain_stores_cl(p, s, &ci, &c, read_outside(p, ci.out, s, c.last));
  c.stem = use_stem(e, p, s);
  int rc = emit_chain(e, s, &ci, &c, err);
  p->chain_lo = p->chain_hi = -1;
  if (!rc && only_the_conv_reads(p, n, ci.in) && e->nany_layout < (int)(sizeof e->any_layout / sizeof e->any_layout[0]))
    e->any_layout[e->nany_layout++] = ci.in;
  if (!rc) e->chain_end = c.last;
  if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  return rc;
}

/* The reduction dim of the GEMM at capture: input channels times taps. */
static long long captured_k(const bi_plan *p, const conv_info *ci) {
  const mk_value *w = &p->g->values[ci->w];
  long long k = ci->transposed ? w->shape[0] : w->shape[1];
  for (int d = 2; d < w->rank; d++) k *= w->shape[d];
  return k;
}

bool bi_conv_igemm_promising(bi_plan *p, int s) {
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  conv_info ci;
  if (!conv_parse(p->g, n, &ci)) return false;
  conv_chain c;
  find_chain(p, s, &ci, &c);
  /* A chain that keeps something full-size from memory, or a short reduction
   * dim, where cuDNN's tiles are least efficient (problem 25: C*K*K = 144). */
  return c.anchor >= 0 || c.norm >= 0 || c.sred >= 0 || captured_k(p, &ci) <= 288;
}

bool bi_conv_chain_covers(bi_plan *p, int s) {
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  conv_info ci;
  if (p->st[s].kind != BI_TORCH || !conv_parse(p->g, n, &ci)) return false;
  conv_chain c;
  find_chain(p, s, &ci, &c);
  if (c.last <= s || c.last != p->nst - 1) return false;
  /* What the chain leaves out must be stages it runs on their own before it. */
  for (int t = s + 1; t <= c.last; t++) {
    bool in_chain = t == c.ew || t == c.norm || t == c.norm_epi || t == c.anchor || t == c.sred ||
                    (c.anchor >= 0 && t == p->st[c.anchor].epi) || (c.sred >= 0 && t == p->st[c.sred].epi);
    for (int i = 0; i < c.nindep && !in_chain; i++) in_chain = t == c.indep[i];
    if (!in_chain) return false;
  }
  return true;
}
