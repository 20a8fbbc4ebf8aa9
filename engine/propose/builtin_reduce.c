/* builtin_reduce.c — reductions (sum, mean, max, min, amax, amin,
 * logsumexp, the 1- and 2-norms, argmax, argmin) over any run of consecutive
 * dims, and the ops whose output has the input's shape along one dim:
 * softmax / log_softmax and the scans cumsum / cumprod (a tile's scan plus
 * the carry of the tiles before it).
 *
 * The input is seen as [OUTER, R, INNER] (R = the reduced dims, contiguous
 * layout): one program per (outer index, block of INNER columns) walks R in
 * tiles of [BLOCK_R, BLOCK_I] and reduces along axis 0. With the reduced dims
 * last (INNER = 1) the same kernel is a row reduction whose columns are rows,
 * R apart: one program per BLOCK_I rows, the launcher packing rows shorter
 * than the configuration's BLOCK next_pow2(R) wide, BLOCK / next_pow2(R) to a
 * program (a 256-lane program per row of a softmax over 32 elements wasted
 * 7/8 of its lanes). Row offsets are written without INNER, so that Triton
 * sees them contiguous along R (axis 0) and coalesces the loads there. The
 * elementwise run before the op (prologue) is computed while loading; the
 * run after it (epilogue) on the result before its single store. */
#include "builtin_internal.h"

#include <stdio.h>
#include <string.h>

/* The order of torch.norm's p / vector_norm's ord as ri->op: "norm2" (the
 * default, 2 and "fro", which over a vector or all elements is the same sum
 * of squares) or "norm1"; other orders stay PyTorch's. */
static int norm_order(const mk_node *n, const char *s, char *op, size_t size, mk_errmsg *err) {
  const cJSON *p = bi_arg(n, 1, strcmp(s, "norm") == 0 ? "p" : "ord");
  const char *str = bi_arg_str(p);
  double v = 0;
  if (bi_arg_none(p) || (str && strcmp(str, "fro") == 0) || (bi_arg_number(p, &v) && v == 2)) {
    snprintf(op, size, "norm2");
    return 0;
  }
  if (!str && bi_arg_number(p, &v) && v == 1) {
    snprintf(op, size, "norm1");
    return 0;
  }
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of an order other than 1, 2 or \"fro\"",
                 n->span.line, s);
}

/* A loss of input and target (same shape, float) reduced over every element:
 * mse_loss / l1_loss / smooth_l1_loss(input, target, size_average, reduce,
 * reduction, beta), huber_loss(input, target, reduction, delta), kl_div(input,
 * target, size_average, reduce, reduction, log_target). reduction "none" is
 * elementwise and stays PyTorch's, as do the legacy size_average / reduce. */
static int loss_parse(const mk_graph *g, const mk_node *n, const char *s, int in, bi_reduce_info *ri,
                      mk_errmsg *err) {
  bool huber = strcmp(s, "huber_loss") == 0, kl = strcmp(s, "kl_div") == 0;
  ri->target = bi_arg_tensor(bi_arg(n, 1, "target"));
  if (ri->target < 0 || ri->target >= g->nvalues)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without a tensor target", n->span.line, s);
  const mk_value *iv = &g->values[in], *tv = &g->values[ri->target];
  bool same = iv->rank == tv->rank && iv->dtype == tv->dtype;
  for (int d = 0; same && d < iv->rank; d++) same = iv->shape[d] == tv->shape[d];
  if (!same) return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a target that broadcasts", n->span.line, s);
  if (!huber && (!bi_arg_none(bi_arg(n, 2, "size_average")) || !bi_arg_none(bi_arg(n, 3, "reduce"))))
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with size_average / reduce", n->span.line, s);
  const char *red = bi_arg_str(bi_arg(n, huber ? 2 : 4, "reduction"));
  if (red == NULL || strcmp(red, "mean") == 0) ri->divide = 1;
  else if (strcmp(red, "sum") == 0) ri->divide = 0;
  else if (kl && strcmp(red, "batchmean") == 0) ri->divide = 2;
  else return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with reduction \"%s\"", n->span.line, s, red);
  ri->param = 1.0;
  if (kl) ri->param = bi_arg_bool(bi_arg(n, 5, "log_target"), false, NULL) ? 1.0 : 0.0;
  else if (huber) bi_arg_number(bi_arg(n, 3, "delta"), &ri->param);
  else if (strcmp(s, "smooth_l1_loss") == 0) bi_arg_number(bi_arg(n, 5, "beta"), &ri->param);
  if (!kl && ri->param <= 0)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a threshold of %g", n->span.line, s, ri->param);
  ri->lo = 0;
  ri->hi = iv->rank - 1;
  ri->keepdim = false;
  return 0;
}

static bool is_scan(const char *op) { return strcmp(op, "cumsum") == 0 || strcmp(op, "cumprod") == 0; }
static bool is_tri(const char *op) { return strcmp(op, "tril") == 0 || strcmp(op, "triu") == 0; }
/* The op's output has its input's shape (along one dim; tril / triu over the
 * last two). */
static bool is_full_shape(const char *op) {
  return strcmp(op, "softmax") == 0 || strcmp(op, "log_softmax") == 0 || is_scan(op) || is_tri(op);
}

static bool is_loss(const char *s) {
  return strcmp(s, "mse_loss") == 0 || strcmp(s, "l1_loss") == 0 || strcmp(s, "smooth_l1_loss") == 0 ||
         strcmp(s, "huber_loss") == 0 || strcmp(s, "kl_div") == 0;
}

int bi_reduce_parse(const mk_graph *g, const mk_node *n, bi_reduce_info *ri, mk_errmsg *err) {
  char s[64];
  bi_short(n, s, sizeof s);
  int in = bi_arg_tensor(bi_arg(n, 0, "input"));
  if (in < 0) in = bi_arg_tensor(bi_arg(n, 0, "self"));
  if (in < 0 || in >= g->nvalues)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without a tensor input", n->span.line, n->op);
  const mk_value *iv = &g->values[in];
  *ri = (bi_reduce_info){.rank = iv->rank, .target = -1};
  if (strcmp(s, "amax") == 0) snprintf(ri->op, sizeof ri->op, "max");
  else if (strcmp(s, "amin") == 0) snprintf(ri->op, sizeof ri->op, "min");
  else snprintf(ri->op, sizeof ri->op, "%s", s);
  /* along one dim, the output the input's shape: softmax's dtype is its 4th
   * argument, a scan's keyword-only */
  bool scan = is_scan(s), softmax = is_full_shape(s);
  /* torch.norm(x, p, dim, keepdim) / linalg.vector_norm(x, ord, dim, keepdim) */
  bool norm = strcmp(s, "norm") == 0 || strcmp(s, "vector_norm") == 0;
  if (norm) {
    int prc = norm_order(n, s, ri->op, sizeof ri->op, err);
    if (prc) return prc;
  }
  if (iv->dtype != MK_DTYPE_F32 && iv->dtype != MK_DTYPE_F16 && iv->dtype != MK_DTYPE_BF16)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a non-float tensor", n->span.line, s);
  /* tril / triu keep the lower / upper triangle of the last two dims: a pass
   * over [rows, cols] tiles (rows as R, cols as INNER) with both indices */
  if (is_tri(s)) {
    if (iv->rank < 2)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a tensor of rank %d", n->span.line, s, iv->rank);
    const cJSON *d = bi_arg(n, 1, "diagonal");
    double dv = 0;
    if (!bi_arg_none(d) && (!bi_arg_number(d, &dv) || dv != (double)(long long)dv))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a diagonal that is not an int", n->span.line, s);
    ri->diag = (long long)dv;
    ri->keepdim = true;
    ri->lo = ri->hi = iv->rank - 2;
    return 0;
  }
  if (is_loss(s)) return loss_parse(g, n, s, in, ri, err);
  const cJSON *dt = bi_arg(n, softmax && !scan ? 3 : norm ? 5 : -1, "dtype");
  if (!bi_arg_none(dt))
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with an explicit dtype", n->span.line, s);
  long long dims[MK_IR_MAX_RANK];
  const cJSON *da = bi_arg(n, norm ? 2 : 1, "dim");
  int nd = bi_arg_none(da) ? 0 : bi_arg_ints(da, dims, MK_IR_MAX_RANK);
  if (nd < 0)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s over dims given as names", n->span.line, s);
  ri->keepdim = bi_arg_bool(bi_arg(n, norm ? 3 : 2, "keepdim"), false, NULL);
  if (softmax) {
    ri->keepdim = true;
    if (nd != 1)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without an explicit dim", n->span.line, s);
  }
  if (nd == 0) { /* all dims */
    if ((strcmp(s, "max") == 0 || strcmp(s, "min") == 0) && !bi_arg_none(da))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s", n->span.line, s);
    ri->lo = 0;
    ri->hi = iv->rank - 1;
    if (iv->rank == 0) ri->hi = -1;
    return 0;
  }
  bool seen[MK_IR_MAX_RANK] = {false};
  for (int i = 0; i < nd; i++) {
    long long d = dims[i] < 0 ? dims[i] + iv->rank : dims[i];
    if (d < 0 || d >= iv->rank)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s dim out of range", n->span.line, s);
    seen[d] = true;
  }
  ri->lo = -1;
  for (int d = 0; d < iv->rank; d++) {
    if (!seen[d]) continue;
    if (ri->lo < 0) ri->lo = d;
    else if (ri->hi != d - 1)
      return mk_errf(err, MK_EUNSUPPORTED,
                     "line %d: %s over dims that are not next to each other", n->span.line, s);
    ri->hi = d;
  }
  return 0;
}

int bi_reduce_check(const mk_graph *g, const mk_node *n, mk_errmsg *err) {
  bi_reduce_info ri;
  return bi_reduce_parse(g, n, &ri, err);
}

/* Launcher: OUTER, R, INNER and the output shape from the input shape. */
static void shape_lines(mk_buf *b, const bi_reduce_info *ri, int res, bool softmax) {
  mk_buf_printf(b, "    outer%d = math.prod(in%d[:%d])\n", res, res, ri->lo);
  mk_buf_printf(b, "    r%d = math.prod(in%d[%d:%d])\n", res, res, ri->lo, ri->hi + 1);
  mk_buf_printf(b, "    inner%d = math.prod(in%d[%d:])\n", res, res, ri->hi + 1);
  if (softmax) {
    mk_buf_printf(b, "    out%d = tuple(in%d)\n", res, res);
  } else if (ri->keepdim) {
    mk_buf_printf(b, "    out%d = tuple(in%d[:%d]) + (1,) * %d + tuple(in%d[%d:])\n", res, res, ri->lo,
                  ri->hi - ri->lo + 1, res, ri->hi + 1);
  } else {
    mk_buf_printf(b, "    out%d = tuple(in%d[:%d]) + tuple(in%d[%d:])\n", res, res, ri->lo, res,
                  ri->hi + 1);
  }
}

/* The loop over R in [BLOCK_R, BLOCK_I] tiles, each tile's rows, offsets
 * and mask: the head of every pass below. Row-wise (INNER = 1) the columns
 * are whole rows, `base` each one's start. */
static void tile_loop(mk_buf *k, bool rowwise) {
  mk_buf_puts(k, "    for r0 in range(0, R, BLOCK_R):\n"
                 "        rows = r0 + rlanes\n");
  if (rowwise)
    mk_buf_puts(k, "        offs = base[None, :] + rows[:, None]\n"
                   "        mask = (rows[:, None] < R) & (cols[None, :] < NROW)\n");
  else
    mk_buf_puts(k, "        offs = base + rows[:, None] * INNER + cols[None, :]\n"
                   "        mask = (rows[:, None] < R) & (cols[None, :] < INNER)\n");
}

/* One pass over R, combining tiles into `acc` with `combine`. */
static void pass(bi_emit *e, int s, int in_vid, bool rowwise, mk_buf *k, const char *other,
                 const char *combine, mk_errmsg *err, int *rc) {
  if (*rc) return;
  tile_loop(k, rowwise);
  *rc = bi_pro_load(e, s, in_vid, "x", "offs", "mask", other, 8, k, err);
  if (*rc) return;
  mk_buf_printf(k, "        %s\n", combine);
}

/* A scan along R (cumsum / cumprod), one pass: each [BLOCK_R, BLOCK_I] tile
 * scanned along axis 0 and combined with the carry of the tiles before it,
 * stored with the epilogue; the carry is the tile's last row (masked rows
 * load the identity, so it is the scan through the last valid row). */
static int scan_pass(bi_emit *e, int s, int in_vid, bool rowwise, bool prod, mk_buf *k, mk_errmsg *err) {
  mk_buf_printf(k, "    carry = tl.full([BLOCK_I], %s, dtype=tl.float32)\n", prod ? "1.0" : "0.0");
  tile_loop(k, rowwise);
  int rc = bi_pro_load(e, s, in_vid, "x", "offs", "mask", prod ? "1.0" : "0.0", 8, k, err);
  if (rc) return rc;
  mk_buf_puts(k, prod ? "        y = tl.cumprod(x, axis=0) * carry[None, :]\n"
                      : "        y = tl.cumsum(x, axis=0) + carry[None, :]\n");
  mk_buf_puts(k, "        carry = tl.sum(tl.where(rlanes[:, None] == BLOCK_R - 1, y, 0.0), axis=0)\n");
  return bi_epi_body(e, s, "y", "offs", "mask", 8, k, err);
}

/* tril / triu over [rows, cols] tiles (rows as R, cols as INNER): an element
 * is kept where col - row <= diag (tril) / >= diag (triu), else 0, and
 * stored with the epilogue. */
static int tri_pass(bi_emit *e, int s, int in_vid, bool lower, long long diag, mk_buf *k, mk_errmsg *err) {
  tile_loop(k, false); /* never row-wise: rows as R, columns as INNER */
  int rc = bi_pro_load(e, s, in_vid, "x", "offs", "mask", "0.0", 8, k, err);
  if (rc) return rc;
  mk_buf_printf(k, "        y = tl.where(cols[None, :] - rows[:, None] %s %lld, x, 0.0)\n", lower ? "<=" : ">=",
                diag);
  return bi_epi_body(e, s, "y", "offs", "mask", 8, k, err);
}

/* The lines that add a tile of a loss to `acc` (x: input, t: target, both 0
 * where masked, where every loss is 0). kl_div is xlogy(t, t) - t * x as
 * torch (0 where t is 0, NaN where it is negative), or exp(t) * (t - x) with
 * log_target. */
static void loss_combine(const bi_reduce_info *ri, char *buf, size_t size) {
  const char *load = "t = tl.load(tgt_ptr + offs, mask=mask, other=0.0).to(tl.float32)\n        ";
  const char *op = ri->op;
  if (strcmp(op, "mse_loss") == 0)
    snprintf(buf, size, "%sd = x - t\n        acc = acc + tl.sum(d * d, axis=0)", load);
  else if (strcmp(op, "l1_loss") == 0)
    snprintf(buf, size, "%sacc = acc + tl.sum(tl.abs(x - t), axis=0)", load);
  else if (strcmp(op, "smooth_l1_loss") == 0)
    snprintf(buf, size,
             "%sd = tl.abs(x - t)\n        acc = acc + tl.sum(tl.where(d < %.17g, 0.5 * d * d / %.17g, d - %.17g), axis=0)",
             load, ri->param, ri->param, 0.5 * ri->param);
  else if (strcmp(op, "huber_loss") == 0)
    snprintf(buf, size,
             "%sd = tl.abs(x - t)\n        acc = acc + tl.sum(tl.where(d < %.17g, 0.5 * d * d, %.17g * (d - %.17g)), axis=0)",
             load, ri->param, ri->param, 0.5 * ri->param);
  else if (ri->param != 0) /* kl_div, log_target */
    snprintf(buf, size, "%sacc = acc + tl.sum(tl.exp(t) * (t - x), axis=0)", load);
  else
    snprintf(buf, size, "%sacc = acc + tl.sum(tl.where(t == 0, 0.0, t * tl.log(t)) - t * x, axis=0)", load);
}

/* Launcher. Over kept columns: one program per outer index and BLOCK_I of
 * them. Row-wise: the tile's width from the row's length at run time, rows
 * at least the configuration's BLOCK long one to a program, shorter ones
 * next_pow2(R) wide and BLOCK / next_pow2(R) to a program (the same lanes,
 * fewer programs). */
static void launch_lines(mk_buf *b, const char *kname, const char *call, int res, bool rowwise, int block_r,
                         int block_i, int warps) {
  mk_buf_printf(b, "    if outer%d * inner%d > 0:\n", res, res);
  if (rowwise)
    mk_buf_printf(b,
                  "        br%d = min(%d, triton.next_power_of_2(max(r%d, 1)))\n"
                  "        bi%d = %d // br%d\n"
                  "        %s[(triton.cdiv(outer%d, bi%d),)](\n"
                  "            %sr%d, inner%d, outer%d, BLOCK_R=br%d, BLOCK_I=bi%d,\n",
                  res, block_r, res, res, block_r, res, kname, res, res, call, res, res, res, res, res);
  else
    mk_buf_printf(b,
                  "        ncb%d = triton.cdiv(inner%d, %d)\n"
                  "        %s[(outer%d * ncb%d,)](\n"
                  "            %sr%d, inner%d, ncb%d, BLOCK_R=%d, BLOCK_I=%d,\n",
                  res, res, block_i, kname, res, res, call, res, res, res, block_r, block_i);
  mk_buf_printf(b, "            IDX64=outer%d * r%d * inner%d >= 2**31, num_warps=%d)\n", res, res, res, warps);
}

int bi_emit_reduce_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  bi_reduce_info ri;
  int rc = bi_reduce_parse(p->g, n, &ri, err);
  if (rc) return rc;
  for (int o = 1; o < n->noutputs; o++)
    if (bi_value_escapes(p, s, n->outputs[o]))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: the indices of %s are used", n->span.line, n->op);
  int in_vid = bi_arg_tensor(bi_arg(n, 0, "input"));
  if (in_vid < 0) in_vid = bi_arg_tensor(bi_arg(n, 0, "self"));
  int res = n->outputs[0];
  bool scan = is_scan(ri.op), tri = is_tri(ri.op), softmax = is_full_shape(ri.op);
  bool rowwise = ri.hi == ri.rank - 1 || ri.rank == 0;
  int block_r = rowwise ? e->cfg->block : e->cfg->block_r;
  int block_i = rowwise ? 1 : e->cfg->block_i;
  if (ri.rank == 0) { /* a 0-d input: R = 1 */
    ri.lo = 0;
    ri.hi = -1;
  }

  char in_shape[32], out_shape[32], dev[48];
  snprintf(in_shape, sizeof in_shape, "in%d", res);
  snprintf(out_shape, sizeof out_shape, "out%d", res);
  snprintf(dev, sizeof dev, "in%d_device", res);
  mk_buf kname, sig, call;
  mk_buf_init(&kname, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  e->kcount++;
  bi_kernel_name(e, s, scan ? "scan" : tri ? "tri" : softmax ? "softmax" : "reduce", &kname);
  rc = bi_pro_params(e, s, in_vid, in_shape, &sig, &call, err);
  if (!rc) rc = bi_epi_params(e, s, out_shape, &sig, &call, err);
  /* The run after the reduction over its input's shape (bi_stage.bcast_epi):
   * the reduced value is `red`, broadcast from registers. */
  int be = st->bcast_epi;
  bi_ew_bind bbind = {.value = res, .var = "red"};
  if (!rc && be >= 0) rc = bi_ew_params(e, be, "bep_", in_shape, bbind, &sig, &call, err);
  if (!rc && ri.target >= 0) { /* a loss: its target at the input's offsets, and the divisor */
    mk_buf_puts(&sig, "tgt_ptr, DIV, ");
    bi_run_name(p, ri.target, &call);
    if (ri.divide == 2) mk_buf_printf(&call, ".contiguous(), float(max(in%d[0], 1)), ", res);
    else if (ri.divide == 1) mk_buf_printf(&call, ".contiguous(), float(max(math.prod(in%d), 1)), ", res);
    else mk_buf_puts(&call, ".contiguous(), 1.0, ");
  }

  mk_buf *k = e->kernels;
  if (!rc) {
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%sR, INNER, %s, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,\n"
                     "        IDX64: tl.constexpr):\n",
                  mk_buf_cstr(&kname), mk_buf_cstr(&sig), rowwise ? "NROW" : "NCB");
    bi_stage_comment(p, s, 4, k);
    if (be >= 0) bi_stage_comment(p, be, 4, k);
    /* A 1-d grid (dim 0 allows 2**31 - 1 programs; dims 1-2 only 65535). */
    mk_buf_puts(k, "    pid = tl.program_id(0)\n"
                   "    rlanes = tl.arange(0, BLOCK_R)\n"
                   "    clanes = tl.arange(0, BLOCK_I)\n"
                   "    if IDX64:  # more than 2**31 elements: 64-bit offsets\n"
                   "        pid = pid.to(tl.int64)\n"
                   "        rlanes = rlanes.to(tl.int64)\n"
                   "        clanes = clanes.to(tl.int64)\n");
    if (rowwise) /* BLOCK_I rows, R apart */
      mk_buf_puts(k, "    cols = pid * BLOCK_I + clanes\n"
                     "    base = cols * R\n");
    else
      mk_buf_puts(k, "    o = pid // NCB\n"
                     "    cols = (pid % NCB) * BLOCK_I + clanes\n"
                     "    base = o * R * INNER\n");
    const char *op = ri.op;
    if (scan) {
      rc = scan_pass(e, s, in_vid, rowwise, strcmp(op, "cumprod") == 0, k, err);
    } else if (ri.target >= 0) {
      char combine[512];
      loss_combine(&ri, combine, sizeof combine);
      mk_buf_puts(k, "    acc = tl.zeros([BLOCK_I], dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "0.0", combine, err, &rc);
      mk_buf_puts(k, "    acc = acc / DIV\n");
    } else if (tri) {
      rc = tri_pass(e, s, in_vid, strcmp(op, "tril") == 0, ri.diag, k, err);
    } else if (strcmp(op, "sum") == 0 || strcmp(op, "mean") == 0) {
      mk_buf_puts(k, "    acc = tl.zeros([BLOCK_I], dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "0.0", "acc = acc + tl.sum(x, axis=0)", err, &rc);
      if (strcmp(op, "mean") == 0) mk_buf_puts(k, "    acc = acc / R\n");
    } else if (strcmp(op, "max") == 0) {
      mk_buf_puts(k, "    acc = tl.full([BLOCK_I], float(\"-inf\"), dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "float(\"-inf\")", "acc = tl.maximum(acc, tl.max(x, axis=0))", err, &rc);
    } else if (strcmp(op, "min") == 0) {
      mk_buf_puts(k, "    acc = tl.full([BLOCK_I], float(\"inf\"), dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "float(\"inf\")", "acc = tl.minimum(acc, tl.min(x, axis=0))", err, &rc);
    } else if (strcmp(op, "norm2") == 0 || strcmp(op, "norm1") == 0) {
      bool two = strcmp(op, "norm2") == 0;
      mk_buf_puts(k, "    acc = tl.zeros([BLOCK_I], dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "0.0", two ? "acc = acc + tl.sum(x * x, axis=0)" : "acc = acc + tl.sum(tl.abs(x), axis=0)",
           err, &rc);
      if (two) mk_buf_puts(k, "    acc = tl.sqrt(acc)\n");
    } else if (strcmp(op, "argmax") == 0 || strcmp(op, "argmin") == 0) {
      /* the first index of the extreme, as torch: the smallest row holding the
       * tile's extreme (two plain reductions: tl.argmax's tie-breaking
       * combine runs per element in Triton's CPU interpreter, minutes on a
       * level-1 problem), and a later tile wins only when strictly better */
      bool mx = strcmp(op, "argmax") == 0;
      mk_buf_printf(k, "    acc = tl.full([BLOCK_I], float(\"%s\"), dtype=tl.float32)\n"
                       "    idx = tl.zeros([BLOCK_I], dtype=tl.int64)\n",
                    mx ? "-inf" : "inf");
      pass(e, s, in_vid, rowwise, k, mx ? "float(\"-inf\")" : "float(\"inf\")",
           mx ? "tx = tl.max(x, axis=0)\n"
                "        ti = tl.min(tl.where(x == tx[None, :], rows[:, None], R), axis=0)\n"
                "        idx = tl.where(tx > acc, ti.to(tl.int64), idx)\n"
                "        acc = tl.maximum(acc, tx)"
              : "tx = tl.min(x, axis=0)\n"
                "        ti = tl.min(tl.where(x == tx[None, :], rows[:, None], R), axis=0)\n"
                "        idx = tl.where(tx < acc, ti.to(tl.int64), idx)\n"
                "        acc = tl.minimum(acc, tx)",
           err, &rc);
      mk_buf_puts(k, "    acc = idx\n");
    } else { /* logsumexp, softmax, log_softmax: max, then sum of exp(x - max) */
      mk_buf_puts(k, "    m = tl.full([BLOCK_I], float(\"-inf\"), dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "float(\"-inf\")", "m = tl.maximum(m, tl.max(x, axis=0))", err, &rc);
      /* An all -inf row: torch gives -inf (logsumexp) / nan (softmax); keep exp finite. */
      mk_buf_puts(k, "    m_safe = tl.where(m == float(\"-inf\"), 0.0, m)\n"
                     "    ssum = tl.zeros([BLOCK_I], dtype=tl.float32)\n");
      pass(e, s, in_vid, rowwise, k, "float(\"-inf\")", "ssum = ssum + tl.sum(tl.exp(x - m_safe[None, :]), axis=0)",
           err, &rc);
      if (strcmp(op, "logsumexp") == 0) mk_buf_puts(k, "    acc = m_safe + tl.log(ssum)\n");
    }
    if (!rc && (scan || tri)) {
      /* scan_pass / tri_pass stored every element */
    } else if (!rc && softmax) {
      /* Third pass writes every element (with the epilogue applied). */
      tile_loop(k, rowwise);
      rc = bi_pro_load(e, s, in_vid, "x", "offs", "mask", "0.0", 8, k, err);
      if (!rc) {
        if (strcmp(ri.op, "softmax") == 0)
          mk_buf_puts(k, "        y = tl.exp(x - m_safe[None, :]) / ssum[None, :]\n");
        else
          mk_buf_puts(k, "        y = x - m_safe[None, :] - tl.log(ssum[None, :])\n");
        rc = bi_epi_body(e, s, "y", "offs", "mask", 8, k, err);
      }
    } else if (!rc) {
      mk_buf_puts(k, rowwise ? "    out_offs = cols\n"
                               "    out_mask = cols < NROW\n"
                             : "    out_offs = o * INNER + cols\n"
                               "    out_mask = cols < INNER\n");
      rc = bi_epi_body(e, s, "acc", "out_offs", "out_mask", 4, k, err);
    }
    if (!rc && be >= 0) {
      /* Another pass over the tiles just reduced (the same program's, so
       * mostly from cache): the run on each element, stored once. */
      mk_buf_puts(k, "    # fused broadcast epilogue: the run after the reduction, on its tiles\n");
      tile_loop(k, rowwise);
      mk_buf_puts(k, "        red = tl.broadcast_to(acc[None, :], (BLOCK_R, BLOCK_I))\n");
      rc = bi_ew_body(e, be, "bep_", "offs", "mask", bbind, true, 8, k, err);
    }
  }
  if (!rc) {
    mk_buf *b = e->body;
    bi_stage_comment(p, s, 4, b);
    if (st->pro >= 0) bi_stage_comment(p, st->pro, 4, b);
    if (st->epi >= 0) bi_stage_comment(p, st->epi, 4, b);
    if (be >= 0) bi_stage_comment(p, be, 4, b);
    rc = bi_anchor_input_shape(e, s, in_vid, in_shape, b, err);
    if (!rc) {
      shape_lines(b, &ri, res, softmax);
      rc = bi_epi_alloc(e, s, out_shape, dev, b, err);
    }
    if (!rc && be >= 0) rc = bi_ew_alloc_lines(e, be, in_shape, dev, b, err);
    if (!rc) launch_lines(b, mk_buf_cstr(&kname), mk_buf_cstr(&call), res, rowwise, block_r, block_i, e->cfg->warps);
  }
  mk_buf_free(&kname);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  return rc;
}
