/* builtin_pool.c — max/avg pooling 1-3d and adaptive avg/max pooling.
 *
 * One program per BLOCK output elements (flat over the output, so leading
 * batch/channel dims of any count are one index). Each element walks its
 * window: fixed windows (kernel, stride, padding, dilation, ceil_mode) are
 * unrolled at compile time when small; adaptive windows
 * [floor(o*I/O), ceil((o+1)*I/O)) loop up to the largest window size. Out
 * of range taps are masked: -inf for max (NaN propagates, as in torch), 0
 * for avg, whose divisor follows torch exactly (count_include_pad counts the
 * padding inside the clipped window; divisor_override replaces it). Output
 * sizes are computed in the launcher with torch's formula, from the input
 * shape at run time. The elementwise run before the pool is recomputed for
 * each tap (prologue); the one after it runs on the result before the store
 * (epilogue). */
#include "builtin_internal.h"

#include <stdio.h>
#include <string.h>

/* An int or a tuple of nd ints, expanded to nd values. */
static bool ints_arg(const cJSON *a, int nd, long long *out, long long def, bool none_ok) {
  if (bi_arg_none(a)) {
    if (!none_ok) return false;
    for (int i = 0; i < nd; i++) out[i] = def;
    return true;
  }
  long long v[3];
  int n = bi_arg_ints(a, v, 3);
  if (n == 0 && none_ok) { /* stride=[] means "the kernel size" in torch */
    for (int i = 0; i < nd; i++) out[i] = def;
    return true;
  }
  if (n == 1) {
    for (int i = 0; i < nd; i++) out[i] = v[0];
    return true;
  }
  if (n != nd) return false;
  for (int i = 0; i < nd; i++) out[i] = v[i];
  return true;
}

/* Adaptive output_size: an int, or a tuple whose entries may be None. */
static bool osize_arg(const cJSON *a, int nd, long long *out) {
  long long v;
  if (bi_arg_int(a, &v)) {
    for (int i = 0; i < nd; i++) out[i] = v;
    return true;
  }
  if (a == NULL || !cJSON_IsObject(a)) return false;
  const cJSON *seq = cJSON_GetObjectItemCaseSensitive(a, "tuple");
  if (!seq) seq = cJSON_GetObjectItemCaseSensitive(a, "list");
  if (!seq) seq = cJSON_GetObjectItemCaseSensitive(a, "size");
  if (!seq || !cJSON_IsArray(seq) || cJSON_GetArraySize(seq) != nd) return false;
  int i = 0;
  for (const cJSON *it = seq->child; it; it = it->next, i++) {
    if (cJSON_IsNull(it)) out[i] = -1;
    else if (!bi_arg_int(it, &out[i]) || out[i] < 1) return false;
  }
  return true;
}

int bi_pool_parse(const mk_graph *g, const mk_node *n, bi_pool_info *pi, mk_errmsg *err) {
  char s[64];
  bi_short(n, s, sizeof s);
  *pi = (bi_pool_info){.in = -1, .count_include_pad = true};
  pi->adaptive = strncmp(s, "adaptive_", 9) == 0;
  const char *base = pi->adaptive ? s + 9 : s;
  pi->is_max = strncmp(base, "max_pool", 8) == 0;
  const char *nd_at = base + 8; /* "max_pool2d..." / "avg_pool2d..." */
  if (strlen(base) < 10 || nd_at[1] != 'd' || nd_at[0] < '1' || nd_at[0] > '3')
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: no pooling kernel for %s", n->span.line, n->op);
  pi->nd = nd_at[0] - '0';
  pi->in = bi_arg_tensor(bi_arg(n, 0, "input"));
  if (pi->in < 0) pi->in = bi_arg_tensor(bi_arg(n, 0, "self"));
  if (pi->in < 0 || pi->in >= g->nvalues)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without a tensor input", n->span.line, s);
  const mk_value *iv = &g->values[pi->in];
  pi->rank = iv->rank;
  if (iv->dtype != MK_DTYPE_F32 && iv->dtype != MK_DTYPE_F16 && iv->dtype != MK_DTYPE_BF16)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a non-float tensor", n->span.line, s);
  if (iv->rank != pi->nd + 1 && iv->rank != pi->nd + 2)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a rank-%d tensor", n->span.line, s, iv->rank);
  int nd = pi->nd;
  bool ok = true;
  if (pi->adaptive) {
    ok = osize_arg(bi_arg(n, 1, "output_size"), nd, pi->osz);
  } else {
    ok = ints_arg(bi_arg(n, 1, "kernel_size"), nd, pi->k, 0, false);
    ok = ok && ints_arg(bi_arg(n, 2, "stride"), nd, pi->st, 0, true);
    for (int i = 0; ok && i < nd; i++)
      if (pi->st[i] == 0) pi->st[i] = pi->k[i];
    ok = ok && ints_arg(bi_arg(n, 3, "padding"), nd, pi->pad, 0, true);
    if (pi->is_max) {
      ok = ok && ints_arg(bi_arg(n, 4, "dilation"), nd, pi->dil, 1, true);
      pi->ceil_mode = bi_arg_bool(bi_arg(n, 5, "ceil_mode"), false, &ok) && ok;
    } else {
      for (int i = 0; i < nd; i++) pi->dil[i] = 1;
      bool ok2 = true, ok3 = true;
      pi->ceil_mode = bi_arg_bool(bi_arg(n, 4, "ceil_mode"), false, &ok2);
      pi->count_include_pad = bi_arg_bool(bi_arg(n, 5, "count_include_pad"), true, &ok3);
      ok = ok && ok2 && ok3;
      const cJSON *dv = bi_arg(n, nd == 1 ? -1 : 6, "divisor_override");
      if (!bi_arg_none(dv) && (!bi_arg_int(dv, &pi->divisor) || pi->divisor == 0)) ok = false;
    }
    for (int i = 0; ok && i < nd; i++)
      ok = pi->k[i] >= 1 && pi->st[i] >= 1 && pi->pad[i] >= 0 && pi->dil[i] >= 1;
  }
  if (!ok)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with arguments that are not constant ints",
                   n->span.line, s);
  for (int o = 1; o < n->noutputs; o++)
    if (n->outputs[o] >= 0 && g->values[n->outputs[o]].nusers > 0)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: the indices of %s are used", n->span.line, s);
  return 0;
}

int bi_pool_check(const mk_graph *g, const mk_node *n, mk_errmsg *err) {
  bi_pool_info pi;
  return bi_pool_parse(g, n, &pi, err);
}

static const char pool_helper[] =
    "\n\ndef _pool_out_size(size, k, s, p, d, ceil_mode):\n"
    "    \"\"\"Output length of a pooling window over `size` (torch's pooling_output_shape).\"\"\"\n"
    "    out = (size + 2 * p - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1\n"
    "    if ceil_mode and (out - 1) * s >= size + p:\n"
    "        out -= 1\n"
    "    if out < 1:\n"
    "        raise ValueError(\"pooling window larger than the padded input\")\n"
    "    return out\n";

/* Opens one loop per spatial dim over the window taps; returns the indent. */
static int open_loops(const bi_pool_info *pi, bool unroll, mk_buf *k) {
  int ind = 4;
  for (int d = 0; d < pi->nd; d++) {
    mk_buf_indent(k, ind);
    if (pi->adaptive) {
      mk_buf_printf(k, "for k%d in %s(KMAX%d):\n", d, unroll ? "tl.static_range" : "range", d);
      mk_buf_indent(k, ind + 4);
      mk_buf_printf(k, "i%d = lo%d + k%d\n", d, d, d);
      mk_buf_indent(k, ind + 4);
      if (d == 0) mk_buf_printf(k, "ok0 = mask & (i0 < hi0)\n");
      else mk_buf_printf(k, "ok%d = ok%d & (i%d < hi%d)\n", d, d - 1, d, d);
    } else {
      mk_buf_printf(k, "for k%d in %s(%lld):\n", d, unroll ? "tl.static_range" : "range", pi->k[d]);
      mk_buf_indent(k, ind + 4);
      mk_buf_printf(k, "i%d = o%d * %lld - %lld + k%d * %lld\n", d, d, pi->st[d], pi->pad[d], d,
                    pi->dil[d]);
      mk_buf_indent(k, ind + 4);
      if (d == 0) mk_buf_printf(k, "ok%d = mask & (i%d >= 0) & (i%d < I%d)\n", d, d, d, d);
      else mk_buf_printf(k, "ok%d = ok%d & (i%d >= 0) & (i%d < I%d)\n", d, d - 1, d, d, d);
    }
    ind += 4;
  }
  return ind;
}

/* A pool reading a channels_last tensor directly (one this module made in
 * that layout, e.g. a cuDNN channels_last convolution's output) runs on
 * [pixels x channels] tiles: its loads run along the channels, contiguous
 * in that layout, and its stores along the pixels, contiguous in the NCHW
 * output (flat over the output, lanes on neighbouring pixels loaded
 * addresses C apart, and every tap split its flat offset into four indices).
 * The (sample, channel) part of the address and the folded conv bias are
 * the same for all taps of an output, so they are computed once. The output
 * indices o<d> and the sample t are [BLOCK, 1] columns, broadcast against
 * the channels. The launcher passes the input's dims and strides
 * (direct_input_params). */
static void tiled_head_lines(bi_emit *e, const bi_pool_info *pi, mk_buf *k) {
  mk_buf name;
  mk_buf_init(&name, 64);
  bi_run_name(e->p, pi->in, &name);
  const char *v = mk_buf_cstr(&name);
  int nd = pi->nd;
  mk_buf_puts(k, "    # [pixels x channels] tiles: loads along the channels (channels_last input),\n"
                 "    # stores along the pixels (NCHW output)\n"
                 "    pid = tl.program_id(0)\n"
                 "    lanes = tl.arange(0, BLOCK)\n"
                 "    cc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)\n"
                 "    if IDX64:  # more than 2**31 elements: 64-bit addresses\n"
                 "        pid = pid.to(tl.int64)\n"
                 "        lanes = lanes.to(tl.int64)\n"
                 "        cc = cc.to(tl.int64)\n"
                 "    pix = pid * BLOCK + lanes  # (sample, *output pixel): numel of them\n");
  mk_buf_printf(k, "    c_ok = cc < %s_D1\n"
                   "    mask = (pix < numel)[:, None] & c_ok[None, :]\n"
                   "    t = pix\n", v);
  for (int d = nd - 1; d >= 0; d--)
    mk_buf_printf(k, "    o%d = (t %% O%d)[:, None]\n    t = t // O%d\n", d, d, d);
  mk_buf_printf(k, "    t = t[:, None]  # the sample\n    offs = (t * %s_D1 + cc[None, :]) * (", v);
  for (int d = 0; d < nd; d++) mk_buf_printf(k, "%sO%d", d ? " * " : "", d);
  mk_buf_puts(k, ") + ");
  for (int d = 0; d < nd; d++) {
    mk_buf_printf(k, "%so%d", d ? " + " : "", d);
    for (int d2 = d + 1; d2 < nd; d2++) mk_buf_printf(k, " * O%d", d2);
  }
  mk_buf_puts(k, "  # in the NCHW output\n");
  mk_buf_printf(k, "    xb = t * %s_S0 + (cc * %s_S1)[None, :]  # the (sample, channel) part of the address\n",
                v, v);
  if (bi_folded_bias(e, pi->in) >= 0)
    mk_buf_printf(k, "    xbias = tl.load(%s_bias_ptr + cc, mask=c_ok, other=0)[None, :]  # conv bias, folded\n", v);
  mk_buf_free(&name);
}

static void tiled_tap_load(bi_emit *e, const bi_pool_info *pi, const char *ok, const char *other,
                           int ind, mk_buf *k) {
  mk_buf name;
  mk_buf_init(&name, 64);
  bi_run_name(e->p, pi->in, &name);
  const char *v = mk_buf_cstr(&name);
  mk_buf_indent(k, ind);
  mk_buf_printf(k, "x = tl.load(%s_ptr + xb", v);
  for (int d = 0; d < pi->nd; d++) mk_buf_printf(k, " + i%d * %s_S%d", d, v, d + 2);
  mk_buf_printf(k, ", mask=%s, other=%s).to(tl.float32)\n", ok, other);
  if (bi_folded_bias(e, pi->in) >= 0) {
    mk_buf_indent(k, ind);
    mk_buf_printf(k, "x = tl.where(%s, x + xbias, %s)\n", ok, other);
  }
  mk_buf_free(&name);
}

int bi_emit_pool_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  bi_pool_info pi;
  int rc = bi_pool_parse(p->g, n, &pi, err);
  if (rc) return rc;
  int nd = pi.nd, res = n->outputs[0];
  char in_shape[32], out_shape[32], dev[48];
  snprintf(in_shape, sizeof in_shape, "in%d", res);
  snprintf(out_shape, sizeof out_shape, "out%d", res);
  snprintf(dev, sizeof dev, "in%d_device", res);
  /* Unroll small fixed windows; loop otherwise (compile time). */
  long long taps = 1;
  for (int d = 0; d < nd; d++) taps *= pi.adaptive ? 4 : pi.k[d];
  bool unroll = taps <= 64;
  /* A channels_last input read directly: [pixels x channels] tiles. */
  bool tiled = st->pro < 0 && st->pro_norm < 0 && pi.rank == nd + 2 && bi_is_cl_value(e, pi.in);
  mk_buf kname, sig, call;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  e->kcount++;
  bi_kernel_name(e, s, "pool", &kname);
  rc = bi_pro_params(e, s, pi.in, in_shape, &sig, &call, err);
  if (!rc) rc = bi_epi_params(e, s, out_shape, &sig, &call, err);
  mk_buf *k = e->kernels;
  if (!rc) {
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%snumel, ", mk_buf_cstr(&kname), mk_buf_cstr(&sig));
    for (int d = 0; d < nd; d++) mk_buf_printf(k, "I%d, ", d);
    for (int d = 0; d < nd; d++) mk_buf_printf(k, "O%d, ", d);
    if (pi.adaptive)
      for (int d = 0; d < nd; d++) mk_buf_printf(k, "KMAX%d: tl.constexpr, ", d);
    mk_buf_printf(k, "BLOCK: tl.constexpr, IDX64: tl.constexpr%s):\n", tiled ? ", BLOCK_C: tl.constexpr" : "");
    bi_stage_comment(p, s, 4, k);
    if (tiled) {
      tiled_head_lines(e, &pi, k);
    } else {
      mk_buf_puts(k, "    pid = tl.program_id(0)\n"
                     "    lanes = tl.arange(0, BLOCK)\n"
                     "    if IDX64:  # more than 2**31 elements: 64-bit addresses\n"
                     "        pid = pid.to(tl.int64)\n"
                     "        lanes = lanes.to(tl.int64)\n"
                     "    offs = pid * BLOCK + lanes\n"
                     "    mask = offs < numel\n"
                     "    t = offs\n");
      for (int d = nd - 1; d >= 0; d--)
        mk_buf_printf(k, "    o%d = t %% O%d\n    t = t // O%d\n", d, d, d);
      mk_buf_puts(k, "    base = t * (");
      for (int d = 0; d < nd; d++) mk_buf_printf(k, "%sI%d", d ? " * " : "", d);
      mk_buf_puts(k, ")\n");
    }
    if (pi.adaptive)
      for (int d = 0; d < nd; d++)
        mk_buf_printf(k, "    lo%d = (o%d * I%d) // O%d\n    hi%d = ((o%d + 1) * I%d + O%d - 1) // O%d\n",
                      d, d, d, d, d, d, d, d, d);
    /* A norm applied on load: t is the output's (sample * C + channel),
     * every tap's too (the plan asks rank = spatial dims + 2). */
    if (st->pro_norm >= 0) {
      e->nc_index = "t";
      bi_norm_load_once(e, "mask", 4, k);
    }
    const char *tile = tiled ? "[BLOCK, BLOCK_C]" : "[BLOCK]";
    if (pi.is_max) mk_buf_printf(k, "    acc = tl.full(%s, float(\"-inf\"), dtype=tl.float32)\n", tile);
    else mk_buf_printf(k, "    acc = tl.zeros(%s, dtype=tl.float32)\n", tile);
    int ind = open_loops(&pi, unroll, k);
    char okv[16];
    snprintf(okv, sizeof okv, "ok%d", nd - 1);
    if (tiled) {
      tiled_tap_load(e, &pi, okv, pi.is_max ? "float(\"-inf\")" : "0.0", ind, k);
    } else {
      mk_buf_indent(k, ind);
      mk_buf_puts(k, "pin = base + ");
      for (int d = 0; d < nd; d++) {
        if (d) mk_buf_puts(k, " + ");
        mk_buf_printf(k, "i%d", d);
        for (int d2 = d + 1; d2 < nd; d2++) mk_buf_printf(k, " * I%d", d2);
      }
      mk_buf_puts(k, "\n");
      rc = bi_pro_load(e, s, pi.in, "x", "pin", okv, pi.is_max ? "float(\"-inf\")" : "0.0", ind, k, err);
    }
    e->nc_index = NULL;
  }
  if (!rc) {
    int ind = 4 + 4 * nd;
    mk_buf_indent(k, ind);
    if (pi.is_max) mk_buf_puts(k, "acc = tl.where((x > acc) | (x != x), x, acc)  # NaN propagates\n");
    else mk_buf_puts(k, "acc += x\n");
    if (!pi.is_max) {
      /* The divisor, as torch's avg_pool / adaptive_avg_pool compute it. */
      if (pi.adaptive) {
        mk_buf_puts(k, "    acc = acc / (");
        for (int d = 0; d < nd; d++) mk_buf_printf(k, "%s(hi%d - lo%d)", d ? " * " : "", d, d);
        mk_buf_puts(k, ").to(tl.float32)\n");
      } else if (pi.divisor) {
        mk_buf_printf(k, "    acc = acc / %lld.0\n", pi.divisor);
      } else {
        for (int d = 0; d < nd; d++) {
          mk_buf_printf(k, "    s%d = o%d * %lld - %lld\n", d, d, pi.st[d], pi.pad[d]);
          mk_buf_printf(k, "    e%d = tl.minimum(s%d + %lld, I%d + %lld)\n", d, d, pi.k[d], d, pi.pad[d]);
          if (!pi.count_include_pad)
            mk_buf_printf(k, "    s%d = tl.maximum(s%d, 0)\n    e%d = tl.minimum(e%d, I%d)\n", d, d,
                          d, d, d);
        }
        mk_buf_puts(k, "    acc = acc / (");
        for (int d = 0; d < nd; d++) mk_buf_printf(k, "%s(e%d - s%d)", d ? " * " : "", d, d);
        mk_buf_puts(k, ").to(tl.float32)\n");
      }
    }
    rc = bi_epi_body(e, s, "acc", "offs", "mask", 4, k, err);
  }
  if (!rc) {
    mk_buf *b = e->body;
    bi_stage_comment(p, s, 4, b);
    if (st->pro >= 0) bi_stage_comment(p, st->pro, 4, b);
    if (st->epi >= 0) bi_stage_comment(p, st->epi, 4, b);
    rc = bi_anchor_input_shape(e, s, pi.in, in_shape, b, err);
  }
  if (!rc) {
    mk_buf *b = e->body;
    int lead = pi.rank - nd;
    mk_buf_printf(b, "    sp%d = tuple(%s[%d:])\n", res, in_shape, lead);
    if (pi.adaptive) {
      mk_buf_printf(b, "    osz%d = (", res);
      for (int d = 0; d < nd; d++) {
        if (pi.osz[d] < 0) mk_buf_printf(b, "sp%d[%d], ", res, d);
        else mk_buf_printf(b, "%lld, ", pi.osz[d]);
      }
      mk_buf_puts(b, ")\n");
      /* Largest window: ceil(I / O) + 1 bounds every [floor(o*I/O), ceil((o+1)*I/O)). */
      mk_buf_printf(b, "    kmax%d = [-(-i // o) + 1 for i, o in zip(sp%d, osz%d)]\n", res, res, res);
    } else {
      mk_buf_printf(b, "    osz%d = (", res);
      for (int d = 0; d < nd; d++)
        mk_buf_printf(b, "_pool_out_size(sp%d[%d], %lld, %lld, %lld, %lld, %s), ", res, d, pi.k[d],
                      pi.st[d], pi.pad[d], pi.dil[d], pi.ceil_mode ? "True" : "False");
      mk_buf_puts(b, ")\n");
      e->need_pool = true;
    }
    mk_buf_printf(b, "    %s = tuple(%s[:%d]) + osz%d\n", out_shape, in_shape, lead, res);
    mk_buf_printf(b, "    numel%d = math.prod(%s)\n", res, out_shape);
    rc = bi_epi_alloc(e, s, out_shape, dev, b, err);
    if (!rc && tiled) {
      /* [pixels x channels] tiles of about BLOCK elements; numel counts the pixels. */
      mk_buf_printf(b, "    bc%d = min(64, triton.next_power_of_2(max(%s[1], 1)))\n"
                       "    bp%d = max(16, %d // bc%d)\n"
                       "    npix%d = numel%d // max(%s[1], 1)\n"
                       "    if numel%d > 0:\n"
                       "        %s[(triton.cdiv(npix%d, bp%d), triton.cdiv(%s[1], bc%d))](\n"
                       "            %snpix%d, *sp%d, *osz%d, BLOCK=bp%d, ",
                    res, in_shape, res, e->cfg->block, res, res, res, in_shape, res,
                    mk_buf_cstr(&kname), res, res, in_shape, res, mk_buf_cstr(&call), res, res, res, res);
      if (pi.adaptive)
        for (int d = 0; d < nd; d++) mk_buf_printf(b, "KMAX%d=kmax%d[%d], ", d, res, d);
      mk_buf_printf(b, "\n            IDX64=max(numel%d, math.prod(%s)) >= 2**31, BLOCK_C=bc%d, num_warps=%d)\n",
                    res, in_shape, res, e->cfg->warps);
    } else if (!rc) {
      mk_buf_printf(b, "    if numel%d > 0:\n        %s[(triton.cdiv(numel%d, %d),)](\n            %snumel%d, ",
                    res, mk_buf_cstr(&kname), res, e->cfg->block, mk_buf_cstr(&call), res);
      mk_buf_printf(b, "*sp%d, *osz%d, ", res, res);
      if (pi.adaptive)
        for (int d = 0; d < nd; d++) mk_buf_printf(b, "KMAX%d=kmax%d[%d], ", d, res, d);
      mk_buf_printf(b, "BLOCK=%d,\n            IDX64=max(numel%d, math.prod(%s)) >= 2**31, num_warps=%d)\n",
                    e->cfg->block, res, in_shape, e->cfg->warps);
    }
  }
  mk_buf_free(&kname);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  return rc;
}

const char *bi_pool_helper(void) { return pool_helper; }
