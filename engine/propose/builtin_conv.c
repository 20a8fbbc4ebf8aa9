/* builtin_conv.c — 2-d convolutions as Triton implicit GEMMs, with the
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
 * conv_transpose2d with stride 1 (no output padding) is the convolution of
 * the flipped, transposed weight with padding dil*(k-1) - pad: the kernel
 * reads the weight in that order, nothing is copied.
 *
 * The products run on tensor cores in TF32 (the reference's convolutions
 * run cuDNN with TF32 allowed, PyTorch's default; docs/verify.md) or in
 * 3xTF32 for float32 accuracy; the verifier decides which variant stands.
 * See docs/builtin-proposer.md, "Convolutions as implicit GEMMs". */
#include "builtin_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct conv_info {
  bool transposed;
  long long st[2], pad[2], dil[2];
  int in, w, bias, out;
} conv_info;

/* An int or a pair of ints. */
static bool pair_arg(const cJSON *a, long long def, long long *out) {
  if (bi_arg_none(a)) {
    out[0] = out[1] = def;
    return true;
  }
  long long v[2];
  int n = bi_arg_ints(a, v, 2);
  if (n == 1) v[1] = v[0];
  else if (n != 2) return false;
  out[0] = v[0];
  out[1] = v[1];
  return true;
}

/* Fills ci when node n is a convolution this kernel computes: conv2d, or
 * conv_transpose2d with stride 1 and no output padding; groups 1, float32,
 * constant int geometry. */
static bool conv_parse(const mk_graph *g, const mk_node *n, conv_info *ci) {
  char sn[64];
  bi_short(n, sn, sizeof sn);
  bool tr = strcmp(sn, "conv_transpose2d") == 0;
  if (!tr && strcmp(sn, "conv2d") != 0) return false;
  *ci = (conv_info){.transposed = tr, .out = n->noutputs == 1 ? n->outputs[0] : -1};
  ci->in = bi_arg_tensor(bi_arg(n, 0, "input"));
  ci->w = bi_arg_tensor(bi_arg(n, 1, "weight"));
  ci->bias = bi_arg_tensor(bi_arg(n, 2, "bias"));
  if (ci->in < 0 || ci->w < 0 || ci->out < 0 || ci->in >= g->nvalues || ci->w >= g->nvalues)
    return false;
  if (!bi_arg_none(bi_arg(n, 2, "bias")) && ci->bias < 0) return false;
  const mk_value *x = &g->values[ci->in], *w = &g->values[ci->w];
  if (x->rank != 4 || w->rank != 4 || x->dtype != MK_DTYPE_F32 || w->dtype != MK_DTYPE_F32)
    return false;
  long long groups = 1, opad[2] = {0, 0};
  bool ok = pair_arg(bi_arg(n, 3, "stride"), 1, ci->st) && pair_arg(bi_arg(n, 4, "padding"), 0, ci->pad);
  if (tr) {
    ok = ok && pair_arg(bi_arg(n, 5, "output_padding"), 0, opad) &&
         pair_arg(bi_arg(n, 7, "dilation"), 1, ci->dil);
    const cJSON *ga = bi_arg(n, 6, "groups");
    ok = ok && (bi_arg_none(ga) || bi_arg_int(ga, &groups));
    ok = ok && ci->st[0] == 1 && ci->st[1] == 1 && opad[0] == 0 && opad[1] == 0;
  } else {
    ok = ok && pair_arg(bi_arg(n, 5, "dilation"), 1, ci->dil);
    const cJSON *ga = bi_arg(n, 6, "groups");
    ok = ok && (bi_arg_none(ga) || bi_arg_int(ga, &groups));
  }
  for (int d = 0; ok && d < 2; d++) ok = ci->st[d] >= 1 && ci->pad[d] >= 0 && ci->dil[d] >= 1;
  return ok && groups == 1;
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
  bool reduce;  /* anchor is a channel reduction, else a pool */
  bi_reduce_info ri;
  bi_pool_info pi;
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
    return known && c->ri.rank == 4 && c->ri.lo == 1 && c->ri.hi == 1;
  }
  if (st->kind == BI_POOL) {
    if (bi_pool_parse(p->g, n, &c->pi, &ignored)) return false;
    const bi_pool_info *pi = &c->pi;
    if (pi->adaptive || pi->nd != 2 || pi->rank != 4 || pi->ceil_mode || pi->divisor) return false;
    long long taps = pi->k[0] * pi->k[1];
    for (int d = 0; d < 2; d++)
      if (pi->k[d] != pi->st[d] || pi->pad[d] != 0 || pi->dil[d] != 1) return false;
    c->reduce = false;
    return taps >= 2 && taps <= 64 && (taps & (taps - 1)) == 0; /* a power of two: reshapes */
  }
  return false;
}

/* The stages after conv stage s that its kernel computes too. */
static void find_chain(const bi_plan *p, int s, const conv_info *ci, conv_chain *c) {
  *c = (conv_chain){.ew = -1, .anchor = -1, .last = s, .value = ci->out};
  int next = s + 1;
  if (next < p->nst && ew_fits(p, next, ci->out)) {
    c->ew = next;
    c->last = next;
    c->value = bi_stage_result(p, next);
    next++;
  }
  if (next < p->nst && c->value >= 0 && anchor_fits(p, next, c->value, c)) {
    c->anchor = next;
    c->last = p->st[next].epi >= 0 ? p->st[next].epi : next;
  }
  /* The pooled enumeration never computes the rows a floor-mode pool drops:
   * nothing full-size may be stored from it. */
  if (c->anchor >= 0 && !c->reduce) {
    int stored[8];
    bool full_store = read_outside(p, ci->out, s, c->last) ||
                      (c->ew >= 0 && bi_stage_stored(p, c->ew, stored, 8) > 0 &&
                       p->st[c->ew].fused_into != c->anchor);
    if (full_store) {
      c->anchor = -1;
      c->last = c->ew >= 0 ? c->ew : s;
      c->value = c->ew >= 0 ? bi_stage_result(p, c->ew) : ci->out;
    }
  }
}

/* ---- emission ------------------------------------------------------------------ */

/* `name = torch.empty(shape, device, dtype)` for a value the chain stores. */
static void alloc_line(bi_emit *e, int v, const char *shape, const char *dev) {
  mk_buf *b = e->body;
  mk_buf_indent(b, 4);
  bi_run_name(e->p, v, b);
  mk_buf_printf(b, " = torch.empty(%s, device=%s, dtype=torch.float32)\n", shape, dev);
}

/* Kernel lines enumerating the tile's output pixels: plain rows, or rows
 * grouped by pool window with the window's taps innermost. */
static void pixel_lines(const conv_chain *c, mk_buf *k) {
  mk_buf_puts(k, "    rm = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)\n");
  if (c->anchor >= 0 && !c->reduce) {
    mk_buf_puts(k, "    m_mask = rm < NB * QH * QW * PKH * PKW\n"
                   "    q = rm // (PKH * PKW)\n"
                   "    tap = rm % (PKH * PKW)\n"
                   "    n = q // (QH * QW)\n"
                   "    qhw = q % (QH * QW)\n"
                   "    oh = (qhw // QW) * PKH + tap // PKW\n"
                   "    ow = (qhw % QW) * PKW + tap % PKW\n");
  } else {
    mk_buf_puts(k, "    m_mask = rm < NB * OH * OW\n"
                   "    n = rm // (OH * OW)\n"
                   "    oh = (rm % (OH * OW)) // OW\n"
                   "    ow = rm % OW\n");
  }
}

/* The implicit GEMM main loop: acc[BLOCK_M, BLOCK_N] = the convolution. */
static void gemm_lines(const conv_info *ci, mk_buf *k) {
  mk_buf_puts(k, "    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)\n"
                 "    n_mask = rn < OC\n"
                 "    ih0 = oh * SH - PH\n"
                 "    iw0 = ow * SW - PW\n"
                 "    xbase = n * sxn + ih0 * sxh + iw0 * sxw\n"
                 "    KTOT = C * KH * KW\n"
                 "    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)\n"
                 "    for k0 in range(0, KTOT, BLOCK_K):\n"
                 "        rk = k0 + tl.arange(0, BLOCK_K)\n"
                 "        k_mask = rk < KTOT\n"
                 "        c = rk % C\n"
                 "        kw = (rk // C) % KW\n"
                 "        kh = rk // (C * KW)\n"
                 "        dh = kh * DH\n"
                 "        dw = kw * DW\n"
                 "        ih = ih0[:, None] + dh[None, :]\n"
                 "        iw = iw0[:, None] + dw[None, :]\n"
                 "        a_mask = m_mask[:, None] & k_mask[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)\n"
                 "        a = tl.load(x_ptr + xbase[:, None] + (c * sxc + dh * sxh + dw * sxw)[None, :],\n"
                 "                    mask=a_mask, other=0.0)\n");
  if (ci->transposed)
    mk_buf_puts(k, "        # conv_transpose2d, stride 1: the weight (C, OC, KH, KW) flipped\n"
                   "        koff = c * swc + (KH - 1 - kh) * swh + (KW - 1 - kw) * sww\n");
  else
    mk_buf_puts(k, "        koff = c * swc + kh * swh + kw * sww\n");
  mk_buf_puts(k, "        b = tl.load(w_ptr + rn[None, :] * swo + koff[:, None],\n"
                 "                    mask=k_mask[:, None] & n_mask[None, :], other=0.0)\n"
                 "        acc = tl.dot(a, b, acc, input_precision=PREC)\n");
}

/* Kernel lines after the GEMM: bias, stores of what escapes, the elementwise
 * stage, the anchor and its epilogue. */
static int tail_lines(bi_emit *e, const conv_info *ci, const conv_chain *c, bool store_conv,
                      mk_buf *k, mk_errmsg *err) {
  const bi_plan *p = e->p;
  if (ci->bias >= 0)
    mk_buf_puts(k, "    acc += tl.load(bias_ptr + rn, mask=n_mask, other=0.0)[None, :]\n");
  mk_buf_puts(k, "    mask2 = m_mask[:, None] & n_mask[None, :]\n"
                 "    # flat offsets in the (N, OC, OH, OW) output\n"
                 "    offs = (n * OC * OH * OW + oh * OW + ow)[:, None] + (rn * OH * OW)[None, :]\n");
  if (store_conv) mk_buf_puts(k, "    tl.store(conv_out_ptr + offs, acc, mask=mask2)\n");
  const char *val = "acc";
  char vname[32];
  if (c->ew >= 0) {
    mk_buf_puts(k, "    # fused elementwise stage\n");
    bi_ew_bind bind = {.value = ci->out, .var = "acc"};
    int rc = bi_ew_body(e, c->ew, "ew_", "offs", "mask2", bind, true, 4, k, err);
    if (rc) return rc;
    snprintf(vname, sizeof vname, "v%d", bi_stage_result(p, c->ew));
    val = vname;
  }
  if (c->anchor < 0) return k->err;
  if (c->reduce) {
    const char *op = c->ri.op;
    bool is_max = !strcmp(op, "max"), is_min = !strcmp(op, "min");
    const char *ident = is_max ? "float(\"-inf\")" : is_min ? "float(\"inf\")" : "0.0";
    mk_buf_printf(k, "    # the reduction over channels: the tile holds every channel\n"
                     "    red = tl.where(mask2, %s, %s)\n", val, ident);
    mk_buf_printf(k, "    red = tl.%s(red, axis=1)\n", is_max ? "max" : is_min ? "min" : "sum");
    if (!strcmp(op, "mean")) mk_buf_puts(k, "    red = red / OC\n");
    return bi_epi_body(e, c->anchor, "red", "rm", "m_mask", 4, k, err);
  }
  mk_buf_printf(k, "    # the pool: each group of PKH * PKW rows is one window\n"
                   "    win = tl.reshape(%s, (BLOCK_M // (PKH * PKW), PKH * PKW, BLOCK_N))\n", val);
  if (c->pi.is_max) mk_buf_puts(k, "    pooled = tl.max(win, axis=1)\n");
  else mk_buf_puts(k, "    pooled = tl.sum(win, axis=1) / (PKH * PKW)\n");
  mk_buf_puts(k, "    rq = tl.program_id(0).to(tl.int64) * (BLOCK_M // (PKH * PKW)) + "
                 "tl.arange(0, BLOCK_M // (PKH * PKW))\n"
                 "    pmask = (rq < NB * QH * QW)[:, None] & n_mask[None, :]\n"
                 "    poffs = ((rq // (QH * QW)) * OC * QH * QW + rq % (QH * QW))[:, None] + "
                 "(rn * QH * QW)[None, :]\n");
  return bi_epi_body(e, c->anchor, "pooled", "poffs", "pmask", 4, k, err);
}

/* Launcher lines: geometry, output shapes, allocations. Sets `out_shape`
 * (the anchor's output shape variable) and `M` / grid variables. */
static void geometry_lines(bi_emit *e, const conv_info *ci, const conv_chain *c, int res,
                           const char *dev) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  mk_buf_printf(b, "    x%d = ", res);
  bi_run_name(p, ci->in, b);
  mk_buf_printf(b, "\n    w%d = ", res);
  bi_run_name(p, ci->w, b);
  mk_buf_printf(b, "\n    NB%d, C%d, H%d, W%d = x%d.shape\n", res, res, res, res, res);
  mk_buf_printf(b, "    OC%d = w%d.shape[%d]\n", res, res, ci->transposed ? 1 : 0);
  mk_buf_printf(b, "    KH%d, KW%d = w%d.shape[2], w%d.shape[3]\n", res, res, res, res);
  if (ci->transposed) {
    /* Stride 1: the convolution of the flipped weight, padding dil*(k-1) - pad. */
    mk_buf_printf(b, "    PH%d, PW%d = %lld * (KH%d - 1) - %lld, %lld * (KW%d - 1) - %lld\n", res, res,
                  ci->dil[0], res, ci->pad[0], ci->dil[1], res, ci->pad[1]);
    mk_buf_printf(b, "    OH%d = H%d - 1 - 2 * %lld + %lld * (KH%d - 1) + 1\n", res, res, ci->pad[0],
                  ci->dil[0], res);
    mk_buf_printf(b, "    OW%d = W%d - 1 - 2 * %lld + %lld * (KW%d - 1) + 1\n", res, res, ci->pad[1],
                  ci->dil[1], res);
    mk_buf_printf(b, "    ws%d = (w%d.stride(1), w%d.stride(0), w%d.stride(2), w%d.stride(3))\n", res,
                  res, res, res, res);
  } else {
    mk_buf_printf(b, "    PH%d, PW%d = %lld, %lld\n", res, res, ci->pad[0], ci->pad[1]);
    mk_buf_printf(b, "    OH%d = (H%d + 2 * %lld - %lld * (KH%d - 1) - 1) // %lld + 1\n", res, res,
                  ci->pad[0], ci->dil[0], res, ci->st[0]);
    mk_buf_printf(b, "    OW%d = (W%d + 2 * %lld - %lld * (KW%d - 1) - 1) // %lld + 1\n", res, res,
                  ci->pad[1], ci->dil[1], res, ci->st[1]);
    mk_buf_printf(b, "    ws%d = w%d.stride()\n", res, res);
  }
  mk_buf_printf(b, "    if OH%d < 1 or OW%d < 1:\n"
                   "        raise ValueError(\"convolution output is empty\")\n", res, res);
  mk_buf_printf(b, "    cshape%d = (NB%d, OC%d, OH%d, OW%d)\n", res, res, res, res, res);
  if (c->anchor >= 0 && !c->reduce) {
    mk_buf_printf(b, "    QH%d, QW%d = OH%d // %lld, OW%d // %lld\n", res, res, res, c->pi.k[0], res,
                  c->pi.k[1]);
    mk_buf_printf(b, "    if QH%d < 1 or QW%d < 1:\n"
                     "        raise ValueError(\"pooling window larger than the input\")\n", res, res);
    mk_buf_printf(b, "    oshape%d = (NB%d, OC%d, QH%d, QW%d)\n", res, res, res, res, res);
    mk_buf_printf(b, "    M%d = NB%d * QH%d * QW%d * %lld\n", res, res, res, res, c->pi.k[0] * c->pi.k[1]);
  } else if (c->anchor >= 0) {
    mk_buf_printf(b, "    oshape%d = (NB%d, 1, OH%d, OW%d)\n", res, res, res, res);
    if (!c->ri.keepdim) mk_buf_printf(b, "    oshape%d = (NB%d, OH%d, OW%d)\n", res, res, res, res);
    mk_buf_printf(b, "    M%d = NB%d * OH%d * OW%d\n", res, res, res, res);
  } else {
    mk_buf_printf(b, "    M%d = NB%d * OH%d * OW%d\n", res, res, res, res);
  }
  (void)dev;
}

int bi_emit_conv_igemm(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  conv_info ci;
  if (!conv_parse(p->g, n, &ci))
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: no implicit-GEMM kernel for this convolution",
                   n->span.line);
  conv_chain c;
  find_chain(p, s, &ci, &c);
  int res = ci.out;
  bool store_conv = read_outside(p, ci.out, s, c.last);
  char cshape[32], oshape[32], dev[32];
  snprintf(cshape, sizeof cshape, "cshape%d", res);
  snprintf(oshape, sizeof oshape, "oshape%d", res);
  snprintf(dev, sizeof dev, "x%d.device", res);
  mk_buf kname, sig, call;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  e->kcount++;
  bi_kernel_name(e, s, "igemm", &kname);
  int rc = 0;
  if (ci.bias >= 0) {
    mk_buf_puts(&sig, "bias_ptr, ");
    bi_run_name(p, ci.bias, &call);
    mk_buf_puts(&call, ".contiguous(), ");
  }
  if (store_conv) {
    mk_buf_puts(&sig, "conv_out_ptr, ");
    bi_run_name(p, ci.out, &call);
    mk_buf_puts(&call, ", ");
  }
  bi_ew_bind bind = {.value = ci.out, .var = "acc"};
  if (c.ew >= 0) rc = bi_ew_params(e, c.ew, "ew_", cshape, bind, &sig, &call, err);
  if (!rc && c.anchor >= 0) rc = bi_epi_params(e, c.anchor, oshape, &sig, &call, err);
  mk_buf *k = e->kernels;
  if (!rc) {
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(x_ptr, w_ptr, %s", mk_buf_cstr(&kname), mk_buf_cstr(&sig));
    mk_buf_puts(k, "NB, C, H, W, OC, OH, OW, sxn, sxc, sxh, sxw, swo, swc, swh, sww,\n"
                   "        SH, SW, PH, PW, DH, DW, QH, QW, KH: tl.constexpr, KW: tl.constexpr,\n"
                   "        PKH: tl.constexpr, PKW: tl.constexpr, BLOCK_M: tl.constexpr,\n"
                   "        BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, PREC: tl.constexpr):\n");
    bi_stage_comment(p, s, 4, k);
    for (int t = s + 1; t <= c.last; t++) bi_stage_comment(p, t, 4, k);
    pixel_lines(&c, k);
    gemm_lines(&ci, k);
    rc = tail_lines(e, &ci, &c, store_conv, k, err);
  }
  if (!rc) {
    mk_buf *b = e->body;
    mk_buf_puts(b, "    # convolution as an implicit GEMM, the stages after it fused\n");
    for (int t = s; t <= c.last; t++) bi_stage_comment(p, t, 4, b);
    geometry_lines(e, &ci, &c, res, dev);
    if (store_conv) alloc_line(e, ci.out, cshape, dev);
    if (c.ew >= 0 && p->st[c.ew].fused_into < 0) {
      int stored[64];
      int ns = bi_stage_stored(p, c.ew, stored, 64);
      for (int i = 0; i < ns; i++) alloc_line(e, stored[i], cshape, dev);
    }
    if (c.anchor >= 0) rc = bi_epi_alloc(e, c.anchor, oshape, dev, b, err);
  }
  if (!rc) {
    mk_buf *b = e->body;
    const bi_config *cfg = e->cfg;
    /* A channel reduction needs every channel in one tile. */
    if (c.anchor >= 0 && c.reduce) {
      mk_buf_printf(b, "    if OC%d > 256:\n"
                       "        raise ValueError(\"more than 256 channels for one tile\")\n", res);
      mk_buf_printf(b, "    BN%d = max(16, triton.next_power_of_2(OC%d))\n", res, res);
    } else {
      mk_buf_printf(b, "    BN%d = max(16, min(%d, triton.next_power_of_2(OC%d)))\n", res, cfg->conv_bn, res);
    }
    mk_buf_printf(b, "    if M%d > 0:\n", res);
    mk_buf_printf(b, "        %s[(triton.cdiv(M%d, %d), triton.cdiv(OC%d, BN%d))](\n", mk_buf_cstr(&kname),
                  res, cfg->conv_bm, res, res);
    mk_buf_printf(b, "            x%d, w%d, %s", res, res, mk_buf_cstr(&call));
    mk_buf_printf(b, "NB%d, C%d, H%d, W%d, OC%d, OH%d, OW%d, *x%d.stride(), *ws%d,\n", res, res, res,
                  res, res, res, res, res, res);
    mk_buf_printf(b, "            %lld, %lld, PH%d, PW%d, %lld, %lld, ", ci.st[0], ci.st[1], res, res,
                  ci.dil[0], ci.dil[1]);
    if (c.anchor >= 0 && !c.reduce)
      mk_buf_printf(b, "QH%d, QW%d, KH=KH%d, KW=KW%d, PKH=%lld, PKW=%lld,\n", res, res, res, res,
                    c.pi.k[0], c.pi.k[1]);
    else mk_buf_printf(b, "1, 1, KH=KH%d, KW=KW%d, PKH=1, PKW=1,\n", res, res);
    mk_buf_printf(b, "            BLOCK_M=%d, BLOCK_N=BN%d, BLOCK_K=%d, PREC=\"%s\", num_warps=%d, "
                     "num_stages=%d)\n",
                  cfg->conv_bm, res, cfg->conv_bk, cfg->conv_precision, cfg->conv_warps, cfg->conv_stages);
    e->chain_end = c.last;
  }
  mk_buf_free(&kname);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  return rc;
}
