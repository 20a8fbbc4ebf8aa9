/* builtin_norm.c — layer/group/instance/batch/RMS normalisation, and
 * F.normalize over the last dim (an RMS row whose scale is
 * 1 / max(||x||_2, eps), no weight).
 *
 * Every norm is "statistics over a set of elements, then an affine map per
 * element". The sets ("rows") are:
 *   layer / rms : the trailing normalized dims       rows = numel / M
 *   group       : C/G channels x spatial of one (n, g) rows = N * G
 *   instance    : the spatial dims of one (n, c)       rows = N * C
 *   batch       : every (n, spatial) of one channel    rows = C  (strided rows)
 * The first three are contiguous slices (address row * M + r); batch norm's
 * rows are N slices of S elements, C * S apart.
 *
 * Statistics use a per-lane Welford update (each of the BLOCK lanes keeps its
 * count, mean and M2, combined exactly at the end): one read of the input,
 * accurate when the mean is large compared with the spread, where
 * E[x^2] - E[x]^2 cancels. The normalisation pass reads the input again and
 * applies weight, bias and the fused epilogue before the single store. A
 * prologue (the elementwise run that makes the input) is recomputed on each
 * read instead of being stored.
 *
 * Layouts of the work, separate candidates:
 *   - one program per row (two passes over the row): best with many rows;
 *   - split rows (SPLIT programs per row: a partial-statistics kernel, then a
 *     kernel that combines the SPLIT partials and normalises its chunk): keeps
 *     the GPU busy when rows are few and long (batch norm: rows = channels);
 *   - (also rows in registers, below, and) channel tiles: a batch norm of a
 *     channels_last value on [pixels x channels] tiles, loads along the
 *     channels ("channel tiles", below).
 * Batch norm in training mode updates running_mean / running_var in place
 * exactly as PyTorch does (momentum, unbiased variance for running_var); in
 * eval mode (or instance norm without input statistics) the running
 * statistics are read and the kernel is purely elementwise. */
#include "builtin_internal.h"

#include "mk_layout.h"

#include <stdio.h>
#include <string.h>

typedef enum norm_kind { N_LAYER, N_RMS, N_GROUP, N_INSTANCE, N_BATCH } norm_kind;

typedef struct norm_info {
  norm_kind kind;
  int in, weight, bias, rmean, rvar; /* value ids, -1 if absent */
  double eps, momentum;
  bool batch_stats; /* statistics from the input (else from running stats) */
  long long groups;
  int nnorm; /* layer / rms: number of normalized trailing dims */
  bool l2;   /* F.normalize(p=2): rstd = 1 / max(sqrt(sum of squares), eps) */
  int rank;
} norm_info;

static bool is_functional(const mk_node *n) {
  return n->op && strncmp(n->op, "torch.nn.functional.", 20) == 0;
}

static int opt_tensor(const mk_node *n, int pos, const char *kw) {
  return bi_arg_tensor(bi_arg(n, pos, kw));
}

static double num_arg(const mk_node *n, int pos, const char *kw, double def) {
  double d;
  return bi_arg_number(bi_arg(n, pos, kw), &d) ? d : def;
}

/* A tensor argument that is present but not a recorded tensor (a number as
 * weight) cannot be loaded by a kernel. */
static bool bad_tensor_arg(const mk_node *n, int pos, const char *kw) {
  const cJSON *a = bi_arg(n, pos, kw);
  return !bi_arg_none(a) && bi_arg_tensor(a) < 0;
}

static int parse(const mk_graph *g, const mk_node *n, norm_info *ni, mk_errmsg *err) {
  char s[64];
  bi_short(n, s, sizeof s);
  *ni = (norm_info){.in = -1, .weight = -1, .bias = -1, .rmean = -1, .rvar = -1, .eps = 1e-5,
                    .momentum = 0.1, .batch_stats = true};
  bool fn = is_functional(n);
  ni->in = opt_tensor(n, 0, "input");
  if (ni->in < 0 || ni->in >= g->nvalues)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without a tensor input", n->span.line, s);
  const mk_value *iv = &g->values[ni->in];
  ni->rank = iv->rank;
  if (iv->dtype != MK_DTYPE_F32 && iv->dtype != MK_DTYPE_F16 && iv->dtype != MK_DTYPE_BF16)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a non-float tensor", n->span.line, s);
  bool bad = false;
  if (strcmp(s, "layer_norm") == 0 || strcmp(s, "rms_norm") == 0) {
    bool rms = s[0] == 'r';
    ni->kind = rms ? N_RMS : N_LAYER;
    long long dims[MK_IR_MAX_RANK];
    int nd = bi_arg_ints(bi_arg(n, 1, "normalized_shape"), dims, MK_IR_MAX_RANK);
    if (nd < 1 || nd > iv->rank)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a normalized_shape that is not a tuple of ints",
                     n->span.line, s);
    for (int i = 0; i < nd; i++)
      if (dims[i] != iv->shape[iv->rank - nd + i])
        return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s normalized_shape does not match the input",
                       n->span.line, s);
    ni->nnorm = nd;
    ni->weight = opt_tensor(n, 2, "weight");
    bad |= bad_tensor_arg(n, 2, "weight");
    if (rms) {
      /* eps=None: torch uses the dtype's machine epsilon. */
      const cJSON *e = bi_arg(n, 3, "eps");
      ni->eps = bi_arg_none(e) ? (iv->dtype == MK_DTYPE_F32 ? 1.1920928955078125e-07
                                  : iv->dtype == MK_DTYPE_F16 ? 0.0009765625 : 0.0078125)
                               : num_arg(n, 3, "eps", 1e-5);
    } else {
      ni->bias = opt_tensor(n, 3, "bias");
      bad |= bad_tensor_arg(n, 3, "bias");
      ni->eps = num_arg(n, 4, "eps", 1e-5);
    }
  } else if (strcmp(s, "normalize") == 0) {
    /* F.normalize(input, p=2.0, dim=1, eps=1e-12): rows along a trailing dim only */
    ni->kind = N_RMS;
    ni->l2 = true;
    ni->nnorm = 1;
    double pnorm = num_arg(n, 1, "p", 2.0);
    long long dim = 1;
    const cJSON *da = bi_arg(n, 2, "dim");
    if (da && !bi_arg_int(da, &dim))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: normalize over several dims", n->span.line);
    if (pnorm != 2.0)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: normalize with p=%g (only p=2)", n->span.line, pnorm);
    if (dim != -1 && dim != iv->rank - 1)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: normalize over dim %lld, not the last",
                     n->span.line, dim);
    ni->eps = num_arg(n, 3, "eps", 1e-12);
    if (bi_arg(n, 4, "out") && !bi_arg_none(bi_arg(n, 4, "out")))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: normalize with out=", n->span.line);
  } else if (strcmp(s, "group_norm") == 0) {
    ni->kind = N_GROUP;
    if (!bi_arg_int(bi_arg(n, 1, "num_groups"), &ni->groups) || ni->groups < 1)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: group_norm without an integer num_groups",
                     n->span.line);
    if (iv->rank < 2 || iv->shape[1] % ni->groups != 0)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: group_norm: channels do not divide into groups",
                     n->span.line);
    ni->weight = opt_tensor(n, 2, "weight");
    ni->bias = opt_tensor(n, 3, "bias");
    bad |= bad_tensor_arg(n, 2, "weight") || bad_tensor_arg(n, 3, "bias");
    ni->eps = num_arg(n, 4, "eps", 1e-5);
  } else if (strcmp(s, "batch_norm") == 0 || strcmp(s, "instance_norm") == 0) {
    bool inst = s[0] == 'i';
    ni->kind = inst ? N_INSTANCE : N_BATCH;
    /* F.batch_norm(input, running_mean, running_var, weight, bias, training, momentum, eps)
     * torch.batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps, cudnn)
     * F.instance_norm(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
     * torch.instance_norm(input, weight, bias, running_mean, running_var, use_input_stats, momentum, eps, cudnn) */
    int prm = fn ? 1 : 3, prv = fn ? 2 : 4, pw = fn ? 3 : 1, pb = fn ? 4 : 2;
    ni->rmean = opt_tensor(n, prm, "running_mean");
    ni->rvar = opt_tensor(n, prv, "running_var");
    ni->weight = opt_tensor(n, pw, "weight");
    ni->bias = opt_tensor(n, pb, "bias");
    bad |= bad_tensor_arg(n, prm, "running_mean") || bad_tensor_arg(n, prv, "running_var") ||
           bad_tensor_arg(n, pw, "weight") || bad_tensor_arg(n, pb, "bias");
    const char *flag = inst ? "use_input_stats" : "training";
    bool ok = true;
    ni->batch_stats = bi_arg_bool(bi_arg(n, 5, flag), inst, &ok);
    if (!ok)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a non-constant %s", n->span.line, s, flag);
    const cJSON *mo = bi_arg(n, 6, "momentum");
    if (bi_arg_none(mo) && ni->batch_stats && ni->rmean >= 0)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with momentum=None", n->span.line, s);
    ni->momentum = num_arg(n, 6, "momentum", 0.1);
    ni->eps = num_arg(n, 7, "eps", 1e-5);
    if (iv->rank < 2 || (inst && iv->rank < 3))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s of a rank-%d tensor", n->span.line, s, iv->rank);
    if ((ni->rmean >= 0) != (ni->rvar >= 0))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with only one running statistic",
                     n->span.line, s);
    if (!ni->batch_stats && ni->rmean < 0)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s without statistics", n->span.line, s);
    if (inst && ni->batch_stats && ni->rmean >= 0)
      return mk_errf(err, MK_EUNSUPPORTED,
                     "line %d: instance_norm updating running statistics (track_running_stats=True) "
                     "is not generated yet", n->span.line);
  } else {
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: no norm kernel for %s", n->span.line, n->op);
  }
  if (bad)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a weight or statistic that is not a tensor",
                   n->span.line, s);
  const int ids[4] = {ni->weight, ni->bias, ni->rmean, ni->rvar};
  for (int i = 0; i < 4; i++) {
    if (ids[i] < 0) continue;
    if (ids[i] >= g->nvalues || g->values[ids[i]].dtype != MK_DTYPE_F32)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with non-fp32 parameters", n->span.line, s);
  }
  return 0;
}

int bi_norm_check(const mk_graph *g, const mk_node *n, mk_errmsg *err) {
  norm_info ni;
  return parse(g, n, &ni, err);
}

/* Whether value v is one of the fresh versions of the running statistics a
 * batch norm node outputs (not the normalised tensor). */
bool bi_norm_state_output(const mk_node *n, int v) {
  for (int o = 1; o < n->noutputs; o++)
    if (n->outputs[o] == v && n->nmutates > 0) return true;
  return false;
}

/* Row length at capture (dims other than the batch do not change). */
static long long captured_m(const mk_graph *g, const norm_info *ni) {
  const mk_value *v = &g->values[ni->in];
  long long m = 1;
  switch (ni->kind) {
  case N_LAYER:
  case N_RMS:
    for (int d = v->rank - ni->nnorm; d < v->rank; d++) m *= v->shape[d];
    return m;
  case N_GROUP:
    for (int d = 2; d < v->rank; d++) m *= v->shape[d];
    return m * (v->shape[1] / (ni->groups > 0 ? ni->groups : 1));
  case N_INSTANCE:
    for (int d = 2; d < v->rank; d++) m *= v->shape[d];
    return m;
  case N_BATCH:
    for (int d = 0; d < v->rank; d++) m *= d == 1 ? 1 : v->shape[d];
    return m;
  }
  return m;
}

/* Shortest row worth splitting over several programs (shorter rows leave
 * most of the SPLIT programs without work). */
#define BI_NORM_SPLIT_ROW 4096

/* Longest row held whole in registers by the "rows" variant. */
#define BI_NORM_REG_ROW 8192

/* Whether the rows-in-registers variant applies: contiguous rows of input
 * statistics, short enough for one register tile. */
static bool regs_ok(const mk_graph *g, const norm_info *ni) {
  return ni->batch_stats && ni->kind != N_BATCH && captured_m(g, ni) <= BI_NORM_REG_ROW;
}

int bi_norm_modes(const bi_plan *p) {
  int modes = 1;
  for (int s = 0; s < p->nst; s++) {
    if (p->st[s].kind != BI_NORM) continue;
    norm_info ni;
    if (parse(p->g, &p->g->nodes[p->st[s].nodes[0]], &ni, NULL)) continue;
    if (ni.batch_stats && captured_m(p->g, &ni) >= BI_NORM_SPLIT_ROW) modes |= 2;
    if (regs_ok(p->g, &ni)) modes |= 4;
    if (ni.kind == N_BATCH && ni.batch_stats && (ni.rank == 4 || ni.rank == 5) && p->st[s].pro < 0 &&
        p->st[s].pro_norm < 0)
      modes |= 8;
  }
  return modes;
}

/* Longest row for which the rows-in-registers layout comes first: a quarter
 * of the default elementwise block (1024 lanes on a GPU), so the row loop's
 * one program per row would leave three quarters of its lanes idle. */
#define BI_NORM_SHORT_ROW 256

bool bi_norm_short_rows(const bi_plan *p) {
  int norms = 0;
  for (int s = 0; s < p->nst; s++) {
    if (p->st[s].kind != BI_NORM) continue;
    norm_info ni;
    if (parse(p->g, &p->g->nodes[p->st[s].nodes[0]], &ni, NULL) || !regs_ok(p->g, &ni) ||
        captured_m(p->g, &ni) > BI_NORM_SHORT_ROW)
      return false;
    norms++;
  }
  return norms > 0;
}

/* ---- kernel text ---------------------------------------------------------- */

/* Element address of lane `r` in row `row`, and the channel of the affine
 * parameters at that element. */
static void addr_expr(const norm_info *ni, mk_buf *k) {
  if (ni->kind == N_BATCH) mk_buf_puts(k, "(r // S) * CS + row * S + r % S");
  else mk_buf_puts(k, "row * M + r");
}

static void chan_expr(const norm_info *ni, mk_buf *k) {
  switch (ni->kind) {
  case N_LAYER:
  case N_RMS: mk_buf_puts(k, "r"); break;
  case N_GROUP: mk_buf_puts(k, "(row % G) * CG + r // S"); break;
  case N_INSTANCE: mk_buf_puts(k, "row % C"); break;
  case N_BATCH: mk_buf_puts(k, "row"); break;
  }
}

static const char *kind_name(norm_kind k) {
  switch (k) {
  case N_LAYER: return "layer_norm";
  case N_RMS: return "rms_norm (or normalize)";
  case N_GROUP: return "group_norm";
  case N_INSTANCE: return "instance_norm";
  case N_BATCH: return "batch_norm";
  }
  return "norm";
}

/* Loop over lanes [LO, HI) of the row: sets r, mask, offs and loads x. */
static int loop_head(bi_emit *e, int s, const norm_info *ni, const char *lo, const char *hi,
                     mk_buf *k, mk_errmsg *err) {
  mk_buf_printf(k, "    for r0 in range(%s, %s, BLOCK):\n"
                   "        r = r0 + lanes\n"
                   "        mask = r < %s\n"
                   "        offs = ", lo, hi, hi);
  addr_expr(ni, k);
  mk_buf_puts(k, "\n");
  return bi_pro_load(e, s, ni->in, "x", "offs", "mask", "0.0", 8, k, err);
}

/* Per-lane statistics over the lanes [lo, hi) of the row. */
static int stats_loop(bi_emit *e, int s, const norm_info *ni, const char *lo, const char *hi,
                      mk_buf *k, mk_errmsg *err) {
  mk_buf_puts(k, "    cnt = tl.zeros([BLOCK], dtype=tl.float32)\n"
                 "    mean = tl.zeros([BLOCK], dtype=tl.float32)\n"
                 "    m2 = tl.zeros([BLOCK], dtype=tl.float32)\n");
  int rc = loop_head(e, s, ni, lo, hi, k, err);
  if (rc) return rc;
  mk_buf_puts(k, "        cnt += tl.where(mask, 1.0, 0.0)\n");
  if (ni->kind == N_RMS) {
    /* RMS: the "M2" is the sum of squares around 0; mean stays 0. */
    return mk_buf_puts(k, "        m2 += tl.where(mask, x * x, 0.0)\n");
  }
  return mk_buf_puts(k, "        delta = tl.where(mask, x - mean, 0.0)\n"
                        "        mean += delta / tl.maximum(cnt, 1.0)\n"
                        "        m2 += delta * tl.where(mask, x - mean, 0.0)\n");
}

/* rstd from `var` over `count` elements: 1 / sqrt(var + eps), or for
 * F.normalize 1 / max(sqrt(var * count), eps) (the L2 norm of the row). */
static void rstd_line(const norm_info *ni, const char *count, int indent, mk_buf *k) {
  mk_buf_indent(k, indent);
  if (ni->l2) {
    mk_buf_printf(k, "rstd = 1.0 / tl.maximum(tl.sqrt(var * %s), ", count);
    bi_tl_float(ni->eps, k);
    mk_buf_puts(k, ")\n");
    return;
  }
  mk_buf_puts(k, "rstd = 1.0 / tl.sqrt(var + ");
  bi_tl_float(ni->eps, k);
  mk_buf_puts(k, ")\n");
}

/* Lines after the stats: mean, var, rstd, and the running statistics. `cnt`,
 * `mean`, `m2` are per-lane (or per-partial) vectors. */

/* Batch norm's running statistics updated in place, as torch does:
 * running = (1 - momentum) * running + momentum * batch, with the unbiased
 * variance for running_var; `gmean`, `var` and `tot` are in scope. Rows
 * `idx` of the buffers, under `mask` when given. */
static void running_update_lines(const norm_info *ni, const char *idx, const char *mask, int indent,
                                 mk_buf *k) {
  char m[64] = "", lm[80] = "";
  if (mask) {
    snprintf(m, sizeof m, ", mask=%s", mask);
    snprintf(lm, sizeof lm, ", mask=%s, other=0.0", mask);
  }
  const char *stat[2] = {"gmean", "(var * tot / tl.maximum(tot - 1.0, 1.0))"};
  const char *buf[2] = {"rm", "rv"};
  for (int i = 0; i < 2; i++) {
    mk_buf_indent(k, indent);
    mk_buf_printf(k, "%s = tl.load(%s_ptr + %s%s)\n", buf[i], buf[i], idx, lm);
  }
  for (int i = 0; i < 2; i++) {
    mk_buf_indent(k, indent);
    mk_buf_printf(k, "tl.store(%s_ptr + %s, (1.0 - ", buf[i], idx);
    bi_tl_float(ni->momentum, k);
    mk_buf_printf(k, ") * %s + ", buf[i]);
    bi_tl_float(ni->momentum, k);
    mk_buf_printf(k, " * %s%s)\n", stat[i], m);
  }
}

static void combine(bi_emit *e, const norm_info *ni, const char *update_if, mk_buf *k) {
  mk_buf_puts(k, "    tot = tl.sum(cnt, axis=0)\n"
                 "    gmean = tl.sum(cnt * mean, axis=0) / tot\n"
                 "    dm = tl.where(cnt > 0, mean - gmean, 0.0)\n"
                 "    var = tl.sum(m2 + cnt * dm * dm, axis=0) / tot\n");
  rstd_line(ni, "tot", 4, k);
  if (ni->kind == N_BATCH && ni->rmean >= 0) {
    /* In place, as torch: running = (1 - momentum) * running + momentum * batch,
     * with the unbiased variance for running_var. */
    mk_buf_printf(k, "    %s\n", update_if);
    running_update_lines(ni, "row", NULL, 8, k);
  }
  (void)e;
}

/* Instance and batch norm rows lie in one channel each. */
static bool per_row_channel(const norm_info *ni) {
  return ni->kind == N_INSTANCE || ni->kind == N_BATCH;
}

/* The normalisation pass over lanes [lo, hi): affine, epilogue, store. */
static int apply_loop(bi_emit *e, int s, const norm_info *ni, const char *lo, const char *hi,
                      mk_buf *k, mk_errmsg *err) {
  if (per_row_channel(ni) && (ni->weight >= 0 || ni->bias >= 0)) {
    mk_buf_puts(k, "    ch = ");
    chan_expr(ni, k);
    mk_buf_puts(k, "\n");
    if (ni->weight >= 0) mk_buf_puts(k, "    wv = tl.load(w_ptr + ch)\n");
    if (ni->bias >= 0) mk_buf_puts(k, "    bv = tl.load(b_ptr + ch)\n");
  }
  int rc = loop_head(e, s, ni, lo, hi, k, err);
  if (rc) return rc;
  mk_buf_puts(k, ni->kind == N_RMS ? "        y = x * rstd\n" : "        y = (x - gmean) * rstd\n");
  if (per_row_channel(ni)) {
    /* One channel per row: its weight and bias were loaded once (wv, bv). */
    if (ni->weight >= 0) mk_buf_puts(k, "        y = y * wv\n");
    if (ni->bias >= 0) mk_buf_puts(k, "        y = y + bv\n");
  } else {
    if (ni->weight >= 0 || ni->bias >= 0) {
      mk_buf_puts(k, "        ch = ");
      chan_expr(ni, k);
      mk_buf_puts(k, "\n");
    }
    if (ni->weight >= 0) mk_buf_puts(k, "        y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)\n");
    if (ni->bias >= 0) mk_buf_puts(k, "        y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)\n");
  }
  return bi_epi_body(e, s, "y", "offs", "mask", 8, k, err);
}

/* Kernel parameters after the input/prologue ones: affine and statistics. */
static void param_sig(const norm_info *ni, mk_buf *sig) {
  if (ni->weight >= 0) mk_buf_puts(sig, "w_ptr, ");
  if (ni->bias >= 0) mk_buf_puts(sig, "b_ptr, ");
  if (ni->rmean >= 0) mk_buf_puts(sig, "rm_ptr, rv_ptr, ");
}

static void param_call(const bi_plan *p, const norm_info *ni, mk_buf *call) {
  const int ids[4] = {ni->weight, ni->bias, ni->rmean, ni->rvar};
  for (int i = 0; i < 4; i++) {
    if (ids[i] < 0) continue;
    bi_run_name(p, ids[i], call);
    /* Running statistics are updated in place: pass the tensor itself. */
    mk_buf_puts(call, i >= 2 ? ", " : ".contiguous(), ");
  }
}

static void index64_lines(mk_buf *k) {
  mk_buf_puts(k, "    lanes = tl.arange(0, BLOCK)\n"
                 "    if IDX64:  # more than 2**31 elements: 64-bit addresses\n"
                 "        pid = pid.to(tl.int64)\n"
                 "        lanes = lanes.to(tl.int64)\n");
}

static const char *layout_sig(const norm_info *ni) {
  switch (ni->kind) {
  case N_GROUP: return "G, CG, S, ";
  case N_INSTANCE: return "C, ";
  case N_BATCH: return "S, CS, ";
  default: return "";
  }
}

/* Rows in registers: RB rows of MB (>= M) lanes per program, each row read
 * once; exact two-pass statistics on the registers. */
static int emit_regs_kernel(bi_emit *e, int s, const norm_info *ni, const char *kname,
                            const char *sig, mk_errmsg *err) {
  mk_buf *k = e->kernels;
  mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%sROWS, M, %sRB: tl.constexpr, MB: tl.constexpr,\n"
                   "        IDX64: tl.constexpr):\n", kname, sig, layout_sig(ni));
  bi_stage_comment(e->p, s, 4, k);
  mk_buf_printf(k, "    # %s: RB whole rows per program in registers, one read of the input\n"
                   "    pid = tl.program_id(0)\n"
                   "    rr = tl.arange(0, RB)\n"
                   "    cc = tl.arange(0, MB)\n"
                   "    if IDX64:  # more than 2**31 elements: 64-bit addresses\n"
                   "        pid = pid.to(tl.int64)\n"
                   "        rr = rr.to(tl.int64)\n"
                   "        cc = cc.to(tl.int64)\n"
                   "    row = (pid * RB + rr)[:, None]\n"
                   "    r = cc[None, :]\n"
                   "    mask = (row < ROWS) & (r < M)\n"
                   "    offs = row * M + r\n", kind_name(ni->kind));
  int rc = bi_pro_load(e, s, ni->in, "x", "offs", "mask", "0.0", 4, k, err);
  if (rc) return rc;
  if (ni->kind == N_RMS) {
    mk_buf_puts(k, "    x = tl.where(mask, x, 0.0)\n"
                   "    var = tl.sum(x * x, axis=1) / M\n"
                   "    d = x\n");
  } else {
    mk_buf_puts(k, "    x = tl.where(mask, x, 0.0)\n"
                   "    gmean = tl.sum(x, axis=1) / M\n"
                   "    d = tl.where(mask, x - gmean[:, None], 0.0)\n"
                   "    var = tl.sum(d * d, axis=1) / M\n");
  }
  rstd_line(ni, "M", 4, k);
  mk_buf_puts(k, "    y = d * rstd[:, None]\n");
  if (ni->weight >= 0 || ni->bias >= 0) {
    mk_buf_puts(k, "    ch = ");
    chan_expr(ni, k);
    mk_buf_puts(k, per_row_channel(ni) ? " + r * 0\n" : "\n");
  }
  if (ni->weight >= 0) mk_buf_puts(k, "    y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)\n");
  if (ni->bias >= 0) mk_buf_puts(k, "    y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)\n");
  return bi_epi_body(e, s, "y", "offs", "mask", 4, k, err);
}

/* Elementwise form: statistics come from running_mean / running_var. */
static int emit_running_kernel(bi_emit *e, int s, const norm_info *ni, const char *kname,
                               const char *sig, mk_errmsg *err) {
  mk_buf *k = e->kernels;
  mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%s%snumel, C, S, BLOCK: tl.constexpr, IDX64: tl.constexpr):\n",
                kname, sig, "");
  bi_stage_comment(e->p, s, 4, k);
  mk_buf_puts(k, "    # statistics from running_mean / running_var (eval mode)\n"
                 "    pid = tl.program_id(0)\n");
  index64_lines(k);
  mk_buf_puts(k, "    offs = pid * BLOCK + lanes\n"
                 "    mask = offs < numel\n"
                 "    ch = (offs // S) % C\n");
  int rc = bi_pro_load(e, s, ni->in, "x", "offs", "mask", "0.0", 4, k, err);
  if (rc) return rc;
  mk_buf_puts(k, "    rm = tl.load(rm_ptr + ch, mask=mask, other=0.0)\n"
                 "    rv = tl.load(rv_ptr + ch, mask=mask, other=1.0)\n"
                 "    y = (x - rm) / tl.sqrt(rv + ");
  bi_tl_float(ni->eps, k);
  mk_buf_puts(k, ")\n");
  if (ni->weight >= 0) mk_buf_puts(k, "    y = y * tl.load(w_ptr + ch, mask=mask, other=1.0)\n");
  if (ni->bias >= 0) mk_buf_puts(k, "    y = y + tl.load(b_ptr + ch, mask=mask, other=0.0)\n");
  return bi_epi_body(e, s, "y", "offs", "mask", 4, k, err);
}

/* Launcher: rows, row length and layout numbers from the input shape. */
static void shape_lines(const norm_info *ni, int res, mk_buf *b) {
  const char *in = "in";
  mk_buf_printf(b, "    numel%d = math.prod(%s%d)\n", res, in, res);
  switch (ni->kind) {
  case N_LAYER:
  case N_RMS:
    mk_buf_printf(b, "    m%d = math.prod(%s%d[%d:])\n", res, in, res, ni->rank - ni->nnorm);
    mk_buf_printf(b, "    rows%d = numel%d // max(m%d, 1)\n", res, res, res);
    mk_buf_printf(b, "    lay%d = ()\n", res);
    break;
  case N_GROUP:
    mk_buf_printf(b, "    c%d, s%d = %s%d[1], math.prod(%s%d[2:])\n", res, res, in, res, in, res);
    mk_buf_printf(b, "    if c%d %% %lld:\n        raise ValueError(\"channels do not divide into groups\")\n",
                  res, ni->groups);
    mk_buf_printf(b, "    m%d = c%d // %lld * s%d\n", res, res, ni->groups, res);
    mk_buf_printf(b, "    rows%d = %s%d[0] * %lld\n", res, in, res, ni->groups);
    mk_buf_printf(b, "    lay%d = (%lld, c%d // %lld, s%d)\n", res, ni->groups, res, ni->groups, res);
    break;
  case N_INSTANCE:
    mk_buf_printf(b, "    c%d, s%d = %s%d[1], math.prod(%s%d[2:])\n", res, res, in, res, in, res);
    mk_buf_printf(b, "    m%d = s%d\n", res, res);
    mk_buf_printf(b, "    rows%d = %s%d[0] * c%d\n", res, in, res, res);
    mk_buf_printf(b, "    lay%d = (c%d,)\n", res, res);
    break;
  case N_BATCH:
    mk_buf_printf(b, "    c%d, s%d = %s%d[1], math.prod(%s%d[2:])\n", res, res, in, res, in, res);
    mk_buf_printf(b, "    m%d = %s%d[0] * s%d\n", res, in, res, res);
    mk_buf_printf(b, "    rows%d = c%d\n", res, res);
    mk_buf_printf(b, "    lay%d = (s%d, c%d * s%d)\n", res, res, res, res);
    break;
  }
}

/* The split rows' first kernel: partial statistics (count, mean, M2) of one
 * CHUNK of a row per program, into part[3, NPART]. */
static int emit_partials_kernel(bi_emit *e, int s, const norm_info *ni, const char *kname,
                                const char *psig, mk_errmsg *err) {
  mk_buf *k = e->kernels;
  mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%spart_ptr, NPART, M, CHUNK, %sSPLIT: tl.constexpr,\n"
                   "        BLOCK: tl.constexpr, IDX64: tl.constexpr):\n",
                kname, psig, layout_sig(ni));
  bi_stage_comment(e->p, s, 4, k);
  mk_buf_printf(k, "    # partial %s statistics of one chunk of a row (count, mean, M2)\n"
                   "    pid = tl.program_id(0)\n", kind_name(ni->kind));
  index64_lines(k);
  mk_buf_puts(k, "    row = pid // SPLIT\n"
                 "    lo = (pid % SPLIT) * CHUNK\n"
                 "    hi = tl.minimum(lo + CHUNK, M)\n");
  int rc = stats_loop(e, s, ni, "lo", "hi", k, err);
  if (rc) return rc;
  return mk_buf_puts(k, "    tot = tl.sum(cnt, axis=0)\n"
                        "    pmean = tl.sum(cnt * mean, axis=0) / tl.maximum(tot, 1.0)\n"
                        "    dm = tl.where(cnt > 0, mean - pmean, 0.0)\n"
                        "    tl.store(part_ptr + pid, tot)\n"
                        "    tl.store(part_ptr + NPART + pid, pmean)\n"
                        "    tl.store(part_ptr + 2 * NPART + pid, tl.sum(m2 + cnt * dm * dm, axis=0))\n");
}

/* ---- a norm applied by the kernel that reads it ------------------------------ */

bool bi_norm_applies_on_load(const mk_graph *g, const mk_node *n) {
  norm_info ni;
  if (parse(g, n, &ni, NULL)) return false;
  return (ni.kind == N_GROUP || ni.kind == N_INSTANCE || ni.kind == N_BATCH) && ni.rank >= 3;
}

bool bi_norm_on_channel_tiles(const mk_graph *g, const mk_node *n) {
  norm_info ni;
  if (parse(g, n, &ni, NULL)) return false;
  return ni.kind == N_BATCH && ni.batch_stats && (ni.rank == 4 || ni.rank == 5);
}

/* The conv bias folded into the loads of a norm's input, when that norm is
 * applied on load and reads its input directly: the affine kernel adds it to
 * the shift ((x + b) * sc + sh = x * sc + (sh + b * sc)), so the applying
 * kernel loads the input as it is. -1: none. */
static int bias_in_shift(const bi_emit *e, int s, const norm_info *ni) {
  return e->p->st[s].pro < 0 ? bi_folded_bias(e, ni->in) : -1;
}

/* The second kernel of a norm applied on load: one program per row turns the
 * row's statistics (its partials combined, or the running statistics) into
 * a scale and shift for each (sample, channel) the row covers, y = x * sc +
 * sh (running statistics updated as torch does). */
static int emit_affine_kernel(bi_emit *e, int s, const norm_info *ni, const char *kname,
                              mk_errmsg *err) {
  mk_buf *k = e->kernels;
  mk_buf sig;
  mk_buf_init(&sig, 256);
  param_sig(ni, &sig);
  if (bias_in_shift(e, s, ni) >= 0) mk_buf_puts(&sig, "cb_ptr, ");
  mk_buf_printf(k, "\n\n@triton.jit\ndef %s(part_ptr, %ssc_ptr, sh_ptr, NPART, NB, NC, CG,\n"
                   "        SPLIT: tl.constexpr, BLOCK: tl.constexpr):\n", kname, mk_buf_cstr(&sig));
  mk_buf_free(&sig);
  bi_stage_comment(e->p, s, 4, k);
  mk_buf_printf(k, "    # the %s row's statistics as a scale and shift per (sample, channel)\n"
                   "    row = tl.program_id(0)\n"
                   "    lanes = tl.arange(0, BLOCK)\n", kind_name(ni->kind));
  if (ni->batch_stats) {
    mk_buf_puts(k, "    parts = row * SPLIT + tl.arange(0, SPLIT)\n"
                   "    cnt = tl.load(part_ptr + parts)\n"
                   "    mean = tl.load(part_ptr + NPART + parts)\n"
                   "    m2 = tl.load(part_ptr + 2 * NPART + parts)\n");
    combine(e, ni, "if True:", k);
  } else {
    mk_buf_printf(k, "    ch = %s\n    gmean = tl.load(rm_ptr + ch)\n    rstd = 1.0 / tl.sqrt(tl.load(rv_ptr + ch) + ",
                  ni->kind == N_INSTANCE ? "row % NC" : "row");
    bi_tl_float(ni->eps, k);
    mk_buf_puts(k, ")\n");
  }
  /* The (sample, channel) pairs of the row, BLOCK at a time. */
  switch (ni->kind) {
  case N_GROUP:
    mk_buf_puts(k, "    n = row // (NC // CG)\n"
                   "    for j0 in range(0, CG, BLOCK):\n"
                   "        ok = j0 + lanes < CG\n"
                   "        c = (row % (NC // CG)) * CG + j0 + lanes\n");
    break;
  case N_INSTANCE:
    mk_buf_puts(k, "    n = row // NC\n"
                   "    for j0 in range(0, 1, BLOCK):\n"
                   "        ok = j0 + lanes < 1\n"
                   "        c = row % NC + j0 + lanes\n");
    break;
  default: /* batch: one channel, every sample */
    mk_buf_puts(k, "    for j0 in range(0, NB, BLOCK):\n"
                   "        n = j0 + lanes\n"
                   "        ok = n < NB\n"
                   "        c = row + 0 * lanes\n");
    break;
  }
  mk_buf_puts(k, "        sc = rstd + tl.zeros([BLOCK], dtype=tl.float32)\n");
  if (ni->weight >= 0) mk_buf_puts(k, "        sc = sc * tl.load(w_ptr + c, mask=ok, other=1.0)\n");
  mk_buf_puts(k, "        sh = -gmean * sc\n");
  if (ni->bias >= 0) mk_buf_puts(k, "        sh = sh + tl.load(b_ptr + c, mask=ok, other=0.0)\n");
  if (bias_in_shift(e, s, ni) >= 0)
    mk_buf_puts(k, "        sh = sh + tl.load(cb_ptr + c, mask=ok, other=0.0) * sc  # the conv bias\n");
  mk_buf_puts(k, "        tl.store(sc_ptr + n * NC + c, sc, mask=ok)\n"
                 "        tl.store(sh_ptr + n * NC + c, sh, mask=ok)\n");
  (void)err;
  return k->err;
}

/* Launcher lines every layout of a norm starts with: what the stage
 * replaces (with its prologue and epilogue), `note` when given, the input's
 * shape and device (in<res>, in<res>_device) and the row layout numbers. */
static int launcher_head(bi_emit *e, int s, const norm_info *ni, int res, const char *note,
                         mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  mk_buf *b = e->body;
  char in_shape[32];
  snprintf(in_shape, sizeof in_shape, "in%d", res);
  bi_stage_comment(p, s, 4, b);
  if (st->pro >= 0) bi_stage_comment(p, st->pro, 4, b);
  if (st->epi >= 0) bi_stage_comment(p, st->epi, 4, b);
  if (note) mk_buf_puts(b, note);
  int rc = bi_anchor_input_shape(e, s, ni->in, in_shape, b, err);
  if (!rc) shape_lines(ni, res, b);
  return rc ? rc : b->err;
}

/* A norm whose reader applies it (apply_into): its statistics alone, as
 * nsc<res> / nsh<res>, the (N, C) scale and shift the reader loads. */
static int emit_stats_only(bi_emit *e, int s, const norm_info *ni, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  int res = p->g->nodes[st->nodes[0]].outputs[0];
  int nsplit = e->cfg->norm_split > 0 ? e->cfg->norm_split : 1;
  char in_shape[32], dev[48];
  snprintf(in_shape, sizeof in_shape, "in%d", res);
  snprintf(dev, sizeof dev, "in%d_device", res);
  mk_buf kstats, kaff, psig, pcall;
  mk_buf_init(&kstats, 256);
  mk_buf_init(&kaff, 256);
  mk_buf_init(&psig, 0);
  mk_buf_init(&pcall, 0);
  int rc = 0;
  if (ni->batch_stats) {
    e->kcount++;
    bi_kernel_name(e, s, "norm_stats", &kstats);
    rc = bi_pro_params(e, s, ni->in, in_shape, &psig, &pcall, err);
    if (!rc) rc = emit_partials_kernel(e, s, ni, mk_buf_cstr(&kstats), mk_buf_cstr(&psig), err);
  }
  e->kcount++;
  bi_kernel_name(e, s, "norm_affine", &kaff);
  if (!rc) rc = emit_affine_kernel(e, s, ni, mk_buf_cstr(&kaff), err);
  mk_buf *b = e->body;
  if (!rc) {
    char note[128];
    snprintf(note, sizeof note, "    # statistics only: the kernel of line %d applies the norm while it loads\n",
             p->g->nodes[p->st[st->apply_into].nodes[0]].span.line);
    rc = launcher_head(e, s, ni, res, note, err);
  }
  if (!rc) {
    mk_buf_printf(b, "    nsc%d = torch.empty((%s[0], %s[1]), device=%s, dtype=torch.float32)\n"
                     "    nsh%d = torch.empty((%s[0], %s[1]), device=%s, dtype=torch.float32)\n",
                  res, in_shape, in_shape, dev, res, in_shape, in_shape, dev);
    mk_buf call;
    mk_buf_init(&call, 256);
    param_call(p, ni, &call);
    int cb = bias_in_shift(e, s, ni);
    if (cb >= 0) {
      bi_run_name(p, cb, &call);
      mk_buf_puts(&call, ".contiguous(), ");
    }
    const char *cg = ni->kind == N_GROUP ? "c%d // %lld" : "1";
    char cgv[64];
    snprintf(cgv, sizeof cgv, cg, res, ni->groups);
    if (ni->batch_stats)
      mk_buf_printf(b,
                    "    if rows%d * m%d > 0:\n"
                    "        chunk%d = triton.cdiv(triton.cdiv(m%d, %d), %d) * %d\n"
                    "        npart%d = rows%d * %d\n"
                    "        part%d = torch.empty((3, npart%d), device=%s, dtype=torch.float32)\n"
                    "        %s[(npart%d,)](\n"
                    "            %spart%d, npart%d, m%d, chunk%d, *lay%d, SPLIT=%d, BLOCK=%d,\n"
                    "            IDX64=numel%d >= 2**31, num_warps=%d)\n"
                    "        %s[(rows%d,)](\n"
                    "            part%d, %snsc%d, nsh%d, npart%d, %s[0], %s[1], %s, SPLIT=%d, BLOCK=128)\n",
                    res, res, res, res, nsplit, e->cfg->block, e->cfg->block, res, res, nsplit, res,
                    res, dev, mk_buf_cstr(&kstats), res, mk_buf_cstr(&pcall), res, res, res, res, res,
                    nsplit, e->cfg->block, res, e->cfg->warps, mk_buf_cstr(&kaff), res, res,
                    mk_buf_cstr(&call), res, res, res, in_shape, in_shape, cgv, nsplit);
    else
      mk_buf_printf(b,
                    "    if rows%d > 0:\n"
                    "        %s[(rows%d,)](\n"
                    "            nsc%d, %snsc%d, nsh%d, 0, %s[0], %s[1], 1, SPLIT=1, BLOCK=128)\n",
                    res, mk_buf_cstr(&kaff), res, res, mk_buf_cstr(&call), res, res, in_shape,
                    in_shape);
    mk_buf_free(&call);
  }
  mk_buf_free(&kstats);
  mk_buf_free(&kaff);
  mk_buf_free(&psig);
  mk_buf_free(&pcall);
  return rc ? rc : b->err;
}

int bi_norm_load_params(bi_emit *e, int norm, const char *in_shape_var, mk_buf *sig, mk_buf *call,
                        mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[norm];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  norm_info ni;
  int rc = parse(p->g, n, &ni, err);
  if (!rc) rc = bi_pro_params(e, norm, ni.in, in_shape_var, sig, call, err);
  if (rc) return rc;
  mk_buf_puts(sig, "nrm_sc_ptr, nrm_sh_ptr, ");
  mk_buf_printf(call, "nsc%d, nsh%d, ", n->outputs[0], n->outputs[0]);
  if (st->epi < 0) return sig->err ? sig->err : call->err;
  bi_ew_bind bind = {.value = n->outputs[0], .var = "yn"};
  return bi_ew_params(e, st->epi, "nepi_", in_shape_var, bind, sig, call, err);
}

int bi_norm_load_once(bi_emit *e, const char *mask, int indent, mk_buf *out) {
  if (e->nc_index == NULL) return out->err;
  mk_buf_indent(out, indent);
  mk_buf_printf(out, "nrm_sc = tl.load(nrm_sc_ptr + %s, mask=%s, other=0.0)\n", e->nc_index, mask);
  mk_buf_indent(out, indent);
  return mk_buf_printf(out, "nrm_sh = tl.load(nrm_sh_ptr + %s, mask=%s, other=0.0)\n", e->nc_index, mask);
}

int bi_norm_load(bi_emit *e, int norm, const char *var, const char *offs, const char *mask,
                 const char *other, int indent, mk_buf *out, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[norm];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  norm_info ni;
  int rc = parse(p->g, n, &ni, err);
  if (rc) return rc;
  if (e->nc_index == NULL) /* the applying kernel's bi_norm_load_once comes first */
    return mk_errf(err, MK_EINVAL, "line %d: a norm applied on load needs its reader's "
                   "(sample, channel) index", n->span.line);
  mk_buf_indent(out, indent);
  mk_buf_printf(out, "# %s (line %d) applied while loading: scale and shift per (sample, channel)\n",
                kind_name(ni.kind), n->span.line);
  if (bias_in_shift(e, norm, &ni) >= 0)
    rc = bi_input_load_unbiased(e, ni.in, "xn", offs, mask, "0.0", indent, out);
  else
    rc = bi_pro_load(e, norm, ni.in, "xn", offs, mask, "0.0", indent, out, err);
  if (rc) return rc;
  mk_buf_indent(out, indent);
  mk_buf_printf(out, "yn = xn * nrm_sc + nrm_sh  # loaded once per output\n");
  char rv[32] = "yn";
  if (st->epi >= 0) {
    mk_buf_indent(out, indent);
    mk_buf_puts(out, "# the norm's epilogue\n");
    bi_ew_bind bind = {.value = n->outputs[0], .var = "yn"};
    rc = bi_ew_body(e, st->epi, "nepi_", offs, mask, bind, false, indent, out, err);
    if (rc) return rc;
    snprintf(rv, sizeof rv, "v%d", bi_stage_result(p, st->epi));
  }
  mk_buf_indent(out, indent);
  return mk_buf_printf(out, "%s = tl.where(%s, %s, %s).to(tl.float32)\n", var, mask, rv, other);
}


/* ---- channel tiles: batch norms of channels_last values ---------------------
 *
 * A batch-norm row is one channel over every (sample, pixel); in a
 * channels_last tensor its elements lie C apart, so the row layouts above,
 * whose lanes walk a row, read one float per C. On channel tiles the lanes
 * run over [BLOCK_P pixels x BLOCK_C channels] tiles instead, loads
 * contiguous along the channels (as the pools' tiles, builtin_pool.c):
 *   1. partials, grid (SPLIT, channel blocks): each program's chunk of the
 *      P = N * spatial pixels, per-lane Welford, reduced over the pixels into
 *      (count, mean, M2) per channel, stored as part[3, C * SPLIT] (row =
 *      channel, SPLIT partials per row, as the split rows);
 *   2. finalize, one program per channel block: the SPLIT partials combined
 *      exactly, mean and scale (rstd * weight) and shift (bias) per channel,
 *      the running statistics updated as torch does;
 *   3. apply, grid (pixel blocks, channel blocks): (x - mean) * scale +
 *      shift, the fused epilogue, and the stores: at the channels_last
 *      address p * C + c (outputs allocated channels_last) when every value
 *      stored may leave so (bi_cl_output_ok), else at the NCHW address.
 * The input is addressed through its strides (any layout reads correctly);
 * the epilogue's operands at the logical offsets, through their strides. */

/* A channel shuffle of the norm's result folded into its store: ShuffleNet's
 * `view(N, c_1, ..., c_k, *S)` -> transposes of the split dims ->
 * `contiguous()` -> `view(N, C, *S)`, the plan's next stages, each a view
 * whose value only the next one reads. Storing channel c at its place in the
 * shuffled order writes the shuffled tensor in the norm's one pass, where
 * PyTorch reads and writes it again (and a channels_last one, twice). */
typedef struct shuffle_fold {
  mk_channel_shuffle cs; /* the split, its shuffled order, the shuffled value (mk_layout.h) */
  int last;              /* the last stage of the shuffle (the merge view) */
  int value;             /* the shuffled value it makes */
} shuffle_fold;

/* Fills f when the stages after norm stage s shuffle its result res: the
 * shuffle's ops (mk_channel_shuffle_at) are the plan's next stages, one view
 * each, and only the shuffled value may leave the subkernel. */
static bool shuffle_after(const bi_plan *p, int s, int res, shuffle_fold *f) {
  const mk_value *rv = &p->g->values[res];
  if (p->is_output[res] || rv->nusers != 1 || rv->users[0] < 0 || rv->users[0] >= p->g->nnodes ||
      !mk_channel_shuffle_at(p->g, &p->g->nodes[rv->users[0]], res, &f->cs) || f->cs.value < 0)
    return false;
  for (int i = 0; i < f->cs.nnodes; i++) {
    int t = s + 1 + i;
    if (t >= p->nst || p->st[t].kind != BI_VIEW || p->st[t].nnodes != 1 ||
        p->st[t].nodes[0] != f->cs.nodes[i])
      return false;
    int out = p->g->nodes[f->cs.nodes[i]].outputs[0];
    if (i + 1 < f->cs.nnodes && p->is_output[out]) return false;
  }
  f->last = s + f->cs.nnodes;
  f->value = f->cs.value;
  return true;
}

/* Kernel lines: `cs`, where channel `cc` of the norm's result lands in the
 * shuffled value (row-major over the split sizes, read in shuffled order). */
static void shuffle_channel_lines(const shuffle_fold *f, mk_buf *k) {
  const mk_channel_shuffle *cs = &f->cs;
  mk_buf_puts(k, "    # the channel shuffle folded into the store: channel cc lands at cs\n"
                 "    t = cc\n");
  for (int d = cs->k - 1; d > 0; d--)
    mk_buf_printf(k, "    j%d = t %% %lld\n    t = t // %lld\n", d, cs->split[d], cs->split[d]);
  mk_buf_printf(k, "    j0 = t\n    cs = j%d", cs->order[0]);
  for (int d = 1; d < cs->k; d++)
    mk_buf_printf(k, " * %lld + j%d", cs->split[cs->order[d]], cs->order[d]);
  mk_buf_puts(k, "\n");
}

/* True if stage s is a norm applied by another norm's epilogue (epi_norm). */
static bool applied_by_epilogue(const bi_plan *p, int s) {
  int a = p->st[s].apply_into;
  return a >= 0 && p->st[a].kind == BI_EW;
}

/* The value of norm stage a (its epilogue's, if it has one): what the epilogue
 * of the norm reading it (epi_norm) reads. */
static int applied_value(const bi_plan *p, int a) {
  return bi_stage_result(p, p->st[a].epi >= 0 ? p->st[a].epi : a);
}

static bool ctile_input_ok(bi_emit *e, int s, const norm_info *ni, char *why, size_t why_size) {
  const bi_stage *st = &e->p->st[s];
  const char *r = NULL;
  if (ni->kind != N_BATCH || !ni->batch_stats) r = "not a batch norm with batch statistics";
  else if (ni->rank != 4 && ni->rank != 5) r = "not over a 4-d/5-d tensor";
  else if (st->pro >= 0 || st->pro_norm >= 0) r = "its input is computed by a fused prologue";
  else if (st->apply_into >= 0 && !applied_by_epilogue(e->p, s)) r = "its reader applies it while loading";
  else if (!bi_is_cl_value(e, ni->in)) r = "its input is not a channels_last value of this module";
  if (r) snprintf(why, why_size, "%s", r);
  return r == NULL;
}

/* True if stage s runs on channel tiles; else false, the reason in why. A
 * norm its epilogue applies (epi_norm) must run on them too, its input read
 * at the tile's offsets without a folded bias, its epilogue's leaves as
 * the tile allows. */
static bool ctile_ok(bi_emit *e, int s, const norm_info *ni, char *why, size_t why_size) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  int res = p->g->nodes[st->nodes[0]].outputs[0];
  if (!ctile_input_ok(e, s, ni, why, why_size)) return false;
  int a = st->epi_norm;
  if (st->epi >= 0 && !bi_ew_tile_leaves_ok(e, st->epi, res, a >= 0 ? applied_value(p, a) : -1, why, why_size))
    return false;
  if (a < 0) return true;
  const mk_node *an = &p->g->nodes[p->st[a].nodes[0]];
  norm_info na;
  if (parse(p->g, an, &na, NULL) || !ctile_input_ok(e, a, &na, why, why_size)) return false;
  if (bi_folded_bias(e, na.in) >= 0) {
    snprintf(why, why_size, "the norm its epilogue applies reads a convolution whose bias is folded");
    return false;
  }
  return p->st[a].epi < 0 || bi_ew_tile_leaves_ok(e, p->st[a].epi, an->outputs[0], -1, why, why_size);
}

/* True if every value the stage stores may leave in channels_last (with a
 * shuffle folded in, judged by the shuffled value's readers). */
static bool ctile_cl_store(bi_emit *e, int s, const shuffle_fold *fold) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  if (fold) return bi_cl_output_ok(p, e->cfg, s, fold->last, fold->value);
  int res = p->g->nodes[st->nodes[0]].outputs[0];
  int hi = st->epi >= 0 ? st->epi : s;
  if (bi_value_escapes(p, s, res) && !bi_cl_output_ok(p, e->cfg, s, hi, res)) return false;
  if (st->epi < 0) return true;
  int stored[64];
  int ns = bi_stage_stored(p, st->epi, stored, 64);
  for (int i = 0; i < ns; i++)
    if (!bi_cl_output_ok(p, e->cfg, s, hi, stored[i])) return false;
  return true;
}

/* Kernel lines: the pixel index `pix` ([BLOCK_P]) and channels `cc`
 * ([BLOCK_C]) to the input's address `xoff` ([BLOCK_P, BLOCK_C], through
 * its strides), the sample `nn` and pixel-in-sample `ss` ([BLOCK_P]); the
 * loaded x (conv bias folded). */
static void ctile_load(bi_emit *e, const norm_info *ni, int indent, mk_buf *k) {
  mk_buf name;
  mk_buf_init(&name, 64);
  bi_run_name(e->p, ni->in, &name);
  const char *v = mk_buf_cstr(&name);
  int R = ni->rank;
  mk_buf_indent(k, indent);
  mk_buf_puts(k, "t = pix\n");
  for (int d = R - 1; d >= 2; d--) {
    mk_buf_indent(k, indent);
    mk_buf_printf(k, "i%d = t %% %s_D%d\n", d, v, d);
    mk_buf_indent(k, indent);
    mk_buf_printf(k, "t = t // %s_D%d\n", v, d);
  }
  mk_buf_indent(k, indent);
  mk_buf_printf(k, "nn = t  # the sample\n");
  mk_buf_indent(k, indent);
  mk_buf_printf(k, "xoff = (nn * %s_S0", v);
  for (int d = 2; d < R; d++) mk_buf_printf(k, " + i%d * %s_S%d", d, v, d);
  mk_buf_printf(k, ")[:, None] + (cc * %s_S1)[None, :]  # along the channels: contiguous\n", v);
  mk_buf_indent(k, indent);
  mk_buf_printf(k, "x = tl.load(%s_ptr + xoff, mask=mask, other=0.0).to(tl.float32)\n", v);
  if (bi_folded_bias(e, ni->in) >= 0) {
    mk_buf_indent(k, indent);
    mk_buf_puts(k, "x = tl.where(mask, x + xbias, 0.0)  # conv bias, folded\n");
  }
  mk_buf_free(&name);
}

/* Kernel lines before the tiles: program ids, channels, 64-bit indices, the
 * folded conv bias per channel. */
static void ctile_head(bi_emit *e, const norm_info *ni, const char *pid_name, mk_buf *k) {
  mk_buf name;
  mk_buf_init(&name, 64);
  bi_run_name(e->p, ni->in, &name);
  const char *v = mk_buf_cstr(&name);
  mk_buf_printf(k, "    %s = tl.program_id(0)\n"
                   "    cc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)\n"
                   "    lanes = tl.arange(0, BLOCK_P)\n"
                   "    if IDX64:  # more than 2**31 elements: 64-bit addresses\n"
                   "        %s = %s.to(tl.int64)\n"
                   "        cc = cc.to(tl.int64)\n"
                   "        lanes = lanes.to(tl.int64)\n"
                   "    c_ok = cc < %s_D1\n", pid_name, pid_name, pid_name, v);
  if (bi_folded_bias(e, ni->in) >= 0)
    mk_buf_printf(k, "    xbias = tl.load(%s_bias_ptr + cc, mask=c_ok, other=0)[None, :]  # conv bias, folded\n", v);
  mk_buf_free(&name);
}

/* Apply-kernel parameters of norm stage a, which the epilogue applies while
 * loading (epi_norm): its input through its strides, its mean, scale and
 * shift per channel (nm<a's value>, its finalize kernel's), its epilogue's. */
static int applied_params(bi_emit *e, int a, mk_buf *sig, mk_buf *call, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const mk_node *an = &p->g->nodes[p->st[a].nodes[0]];
  norm_info na;
  int rc = parse(p->g, an, &na, err);
  int ra = an->outputs[0];
  char shape[32];
  snprintf(shape, sizeof shape, "in%d", ra);
  if (!rc) rc = bi_pro_params(e, a, na.in, shape, sig, call, err);
  if (rc) return rc;
  mk_buf_puts(sig, "nma_ptr, ");
  mk_buf_printf(call, "nm%d, ", ra);
  if (p->st[a].epi < 0) return sig->err ? sig->err : call->err;
  bi_ew_bind bind = {.value = ra, .var = "ya", .cl_offs = "soffs"};
  return bi_ew_params(e, p->st[a].epi, "aepi_", shape, bind, sig, call, err);
}

/* Apply-kernel lines computing norm stage a's value (its epilogue's) at the
 * tile's elements (nn, i<d>, cc: the same shape as the tile's input); its
 * variable's name into var. */
static int applied_lines(bi_emit *e, int a, mk_buf *k, char *var, size_t var_size, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const mk_node *an = &p->g->nodes[p->st[a].nodes[0]];
  norm_info na;
  int rc = parse(p->g, an, &na, err);
  if (rc) return rc;
  mk_buf name;
  mk_buf_init(&name, 64);
  bi_run_name(p, na.in, &name);
  const char *v = mk_buf_cstr(&name);
  mk_buf_printf(k, "    # %s (line %d) applied while loading, for the epilogue that reads its value:\n"
                   "    # its input through its strides, its mean, scale and shift per channel\n"
                   "    xa = tl.load(%s_ptr + (nn * %s_S0",
                kind_name(na.kind), an->span.line, v, v);
  for (int d = 2; d < na.rank; d++) mk_buf_printf(k, " + i%d * %s_S%d", d, v, d);
  mk_buf_printf(k, ")[:, None] + (cc * %s_S1)[None, :], mask=mask, other=0.0).to(tl.float32)\n", v);
  mk_buf_printf(k, "    ya = (xa - tl.load(nma_ptr + cc, mask=c_ok, other=0.0)[None, :]) * "
                   "tl.load(nma_ptr + %s_D1 + cc, mask=c_ok, other=0.0)[None, :]\n"
                   "    ya = ya + tl.load(nma_ptr + 2 * %s_D1 + cc, mask=c_ok, other=0.0)[None, :]\n",
                v, v);
  mk_buf_free(&name);
  snprintf(var, var_size, "ya");
  if (p->st[a].epi < 0) return k->err;
  mk_buf_puts(k, "    # its epilogue\n");
  bi_ew_bind bind = {.value = an->outputs[0], .var = "ya", .cl_offs = "soffs"};
  rc = bi_ew_body(e, p->st[a].epi, "aepi_", "offs", "mask", bind, false, 4, k, err);
  snprintf(var, var_size, "v%d", applied_value(p, a));
  return rc;
}

/* A batch norm on channel tiles: statistics, finalize, and the apply kernel
 * (none for a norm another norm's epilogue applies: its statistics alone,
 * nm<value> for that kernel). */
static int emit_ctile_stage(bi_emit *e, int s, const norm_info *ni, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  int res = n->outputs[0];
  bool stats_only = applied_by_epilogue(p, s);
  int applied = stats_only ? -1 : st->epi_norm; /* a norm this one's epilogue applies */
  char applied_var[32] = "";
  shuffle_fold fold;
  bool folded = !stats_only && st->epi < 0 && shuffle_after(p, s, res, &fold);
  bool cl_store = ctile_cl_store(e, s, folded ? &fold : NULL);
  /* The epilogue's binding: the norm's value y, and the applied norm's value
   * (applied_lines names its variable before the body is written). */
  bi_ew_bind epi_bind = {.value = res, .var = "y", .store_offs = cl_store ? "soffs" : NULL, .cl_offs = "soffs"};
  if (applied >= 0) {
    epi_bind.applied.on = true;
    epi_bind.applied.value = applied_value(p, applied);
    epi_bind.applied.var = applied_var;
  }
  char in_shape[32], out_shape[32], dev[48];
  snprintf(in_shape, sizeof in_shape, "in%d", res);
  snprintf(out_shape, sizeof out_shape, "out%d", res);
  snprintf(dev, sizeof dev, "in%d_device", res);
  mk_buf kst, kfin, kap, psig, pcall, asig, acall, fsig, fcall, name;
  mk_buf_init(&kst, 256);
  mk_buf_init(&kfin, 256);
  mk_buf_init(&kap, 256);
  mk_buf_init(&psig, 0);
  mk_buf_init(&pcall, 0);
  mk_buf_init(&asig, 0);
  mk_buf_init(&acall, 0);
  mk_buf_init(&fsig, 0);
  mk_buf_init(&fcall, 0);
  mk_buf_init(&name, 64);
  bi_run_name(p, ni->in, &name);
  const char *v = mk_buf_cstr(&name);
  mk_buf *k = e->kernels;
  int R = ni->rank;
  e->kcount++;
  bi_kernel_name(e, s, "norm_ctstats", &kst);
  e->kcount++;
  bi_kernel_name(e, s, "norm_ctfinal", &kfin);
  e->kcount++;
  bi_kernel_name(e, s, "norm_ctapply", &kap);
  int rc = bi_pro_params(e, s, ni->in, in_shape, &psig, &pcall, err);
  if (!rc && !stats_only) rc = bi_pro_params(e, s, ni->in, in_shape, &asig, &acall, err);
  if (!rc && !stats_only) {
    mk_buf_puts(&asig, "nm_ptr, ");
    mk_buf_printf(&acall, "nm%d, ", res);
    /* bi_epi_params with the epilogue's channels_last operands at soffs */
    if (bi_value_escapes(p, s, res)) {
      bi_run_name(p, res, &asig);
      mk_buf_puts(&asig, "_ptr, ");
      bi_run_name(p, res, &acall);
      mk_buf_puts(&acall, ", ");
    }
    if (applied >= 0) rc = applied_params(e, applied, &asig, &acall, err);
    if (!rc && st->epi >= 0) rc = bi_ew_params(e, st->epi, "epi_", out_shape, epi_bind, &asig, &acall, err);
  }
  /* 1. partial statistics */
  if (!rc) {
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%spart_ptr, NPART, P, CHUNK, SPLIT, BLOCK_P: tl.constexpr,\n"
                     "        BLOCK_C: tl.constexpr, IDX64: tl.constexpr):\n",
                  mk_buf_cstr(&kst), mk_buf_cstr(&psig));
    bi_stage_comment(p, s, 4, k);
    mk_buf_puts(k, "    # partial batch_norm statistics (count, mean, M2) of a chunk of pixels x BLOCK_C\n"
                   "    # channels, on [pixels x channels] tiles of a channels_last input\n");
    ctile_head(e, ni, "sp", k);
    mk_buf_puts(k, "    lo = sp * CHUNK\n"
                   "    hi = tl.minimum(lo + CHUNK, P)\n"
                   "    cnt = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)\n"
                   "    mean = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)\n"
                   "    m2 = tl.zeros([BLOCK_P, BLOCK_C], dtype=tl.float32)\n"
                   "    for p0 in range(lo, hi, BLOCK_P):\n"
                   "        pix = p0 + lanes\n"
                   "        mask = (pix < hi)[:, None] & c_ok[None, :]\n");
    ctile_load(e, ni, 8, k);
    mk_buf_puts(k, "        cnt += tl.where(mask, 1.0, 0.0)\n"
                   "        delta = tl.where(mask, x - mean, 0.0)\n"
                   "        mean += delta / tl.maximum(cnt, 1.0)\n"
                   "        m2 += delta * tl.where(mask, x - mean, 0.0)\n"
                   "    tot = tl.sum(cnt, axis=0)\n"
                   "    pmean = tl.sum(cnt * mean, axis=0) / tl.maximum(tot, 1.0)\n"
                   "    dm = tl.where(cnt > 0, mean - pmean[None, :], 0.0)\n"
                   "    pidx = cc * SPLIT + sp  # row = channel, SPLIT partials per row\n"
                   "    tl.store(part_ptr + pidx, tot, mask=c_ok)\n"
                   "    tl.store(part_ptr + NPART + pidx, pmean, mask=c_ok)\n"
                   "    tl.store(part_ptr + 2 * NPART + pidx, tl.sum(m2 + cnt * dm * dm, axis=0), mask=c_ok)\n");
  }
  /* 2. combine the partials per channel */
  if (!rc) {
    param_sig(ni, &fsig);
    param_call(p, ni, &fcall);
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(part_ptr, %snm_ptr, C, NPART, SPLIT, SB: tl.constexpr,\n"
                     "        BLOCK_C: tl.constexpr):\n", mk_buf_cstr(&kfin), mk_buf_cstr(&fsig));
    bi_stage_comment(p, s, 4, k);
    mk_buf_puts(k, "    # each channel's SPLIT partials combined exactly: mean, scale and shift per channel\n"
                   "    cc = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)\n"
                   "    c_ok = cc < C\n"
                   "    jj = tl.arange(0, SB)\n"
                   "    tot = tl.zeros([BLOCK_C], dtype=tl.float32)\n"
                   "    sm = tl.zeros([BLOCK_C], dtype=tl.float32)\n"
                   "    for j0 in range(0, SPLIT, SB):\n"
                   "        ok = ((j0 + jj) < SPLIT)[:, None] & c_ok[None, :]\n"
                   "        idx = cc[None, :] * SPLIT + (j0 + jj)[:, None]\n"
                   "        cnt = tl.load(part_ptr + idx, mask=ok, other=0.0)\n"
                   "        tot += tl.sum(cnt, axis=0)\n"
                   "        sm += tl.sum(cnt * tl.load(part_ptr + NPART + idx, mask=ok, other=0.0), axis=0)\n"
                   "    gmean = sm / tl.maximum(tot, 1.0)\n"
                   "    acc = tl.zeros([BLOCK_C], dtype=tl.float32)\n"
                   "    for j0 in range(0, SPLIT, SB):\n"
                   "        ok = ((j0 + jj) < SPLIT)[:, None] & c_ok[None, :]\n"
                   "        idx = cc[None, :] * SPLIT + (j0 + jj)[:, None]\n"
                   "        cnt = tl.load(part_ptr + idx, mask=ok, other=0.0)\n"
                   "        dm = tl.where(cnt > 0, tl.load(part_ptr + NPART + idx, mask=ok, other=0.0) - gmean[None, :], 0.0)\n"
                   "        acc += tl.sum(tl.load(part_ptr + 2 * NPART + idx, mask=ok, other=0.0) + cnt * dm * dm, axis=0)\n"
                   "    var = acc / tl.maximum(tot, 1.0)\n");
    rstd_line(ni, "tot", 4, k);
    if (ni->rmean >= 0) {
      mk_buf_puts(k, "    # running statistics in place, as torch (unbiased variance for running_var)\n");
      running_update_lines(ni, "cc", "c_ok", 4, k);
    }
    mk_buf_puts(k, "    sc = rstd\n");
    if (ni->weight >= 0) mk_buf_puts(k, "    sc = sc * tl.load(w_ptr + cc, mask=c_ok, other=1.0)\n");
    if (ni->bias >= 0) mk_buf_puts(k, "    sh = tl.load(b_ptr + cc, mask=c_ok, other=0.0)\n");
    else mk_buf_puts(k, "    sh = tl.zeros([BLOCK_C], dtype=tl.float32)\n");
    mk_buf_puts(k, "    tl.store(nm_ptr + cc, gmean, mask=c_ok)\n"
                   "    tl.store(nm_ptr + C + cc, sc, mask=c_ok)\n"
                   "    tl.store(nm_ptr + 2 * C + cc, sh, mask=c_ok)\n");
  }
  /* 3. normalise, epilogue, store */
  if (!rc && !stats_only) {
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%sP, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,\n"
                     "        IDX64: tl.constexpr):\n", mk_buf_cstr(&kap), mk_buf_cstr(&asig));
    bi_stage_comment(p, s, 4, k);
    if (st->epi >= 0) bi_stage_comment(p, st->epi, 4, k);
    mk_buf_printf(k, "    # normalise [pixels x channels] tiles (loads along the channels), stores in %s order\n",
                  cl_store ? "channels_last" : "NCHW");
    ctile_head(e, ni, "pid", k);
    mk_buf_puts(k, "    pix = pid * BLOCK_P + lanes\n"
                   "    mask = (pix < P)[:, None] & c_ok[None, :]\n");
    ctile_load(e, ni, 4, k);
    mk_buf_printf(k, "    gm = tl.load(nm_ptr + cc, mask=c_ok, other=0.0)[None, :]\n"
                     "    sc = tl.load(nm_ptr + %s_D1 + cc, mask=c_ok, other=0.0)[None, :]\n"
                     "    sh = tl.load(nm_ptr + 2 * %s_D1 + cc, mask=c_ok, other=0.0)[None, :]\n"
                     "    y = (x - gm) * sc + sh\n", v, v);
    mk_buf_printf(k, "    soffs = pix[:, None] * %s_D1 + cc[None, :]  # channels_last offsets\n", v);
    mk_buf_puts(k, "    ss = pix - nn * (");
    for (int d = 2; d < R; d++) mk_buf_printf(k, "%s%s_D%d", d > 2 ? " * " : "", v, d);
    mk_buf_printf(k, ")  # pixel within its sample\n"
                     "    offs = (nn[:, None] * %s_D1 + cc[None, :]) * (", v);
    for (int d = 2; d < R; d++) mk_buf_printf(k, "%s%s_D%d", d > 2 ? " * " : "", v, d);
    mk_buf_printf(k, ") + ss[:, None]  # NCHW offsets\n");
    const char *so = cl_store ? "soffs" : "offs";
    if (folded) {
      shuffle_channel_lines(&fold, k);
      if (cl_store) mk_buf_printf(k, "    doffs = pix[:, None] * %s_D1 + cs[None, :]\n", v);
      else {
        mk_buf_printf(k, "    doffs = (nn[:, None] * %s_D1 + cs[None, :]) * (", v);
        for (int d = 2; d < R; d++) mk_buf_printf(k, "%s%s_D%d", d > 2 ? " * " : "", v, d);
        mk_buf_puts(k, ") + ss[:, None]\n");
      }
      so = "doffs";
    }
    if (bi_value_escapes(p, s, res)) {
      mk_buf_puts(k, "    tl.store(");
      bi_run_name(p, res, k);
      mk_buf_printf(k, "_ptr + %s, y, mask=mask)\n", so);
    }
    if (applied >= 0) rc = applied_lines(e, applied, k, applied_var, sizeof applied_var, err);
    if (!rc && st->epi >= 0) {
      mk_buf_puts(k, "    # fused epilogue (channels_last operands at soffs, others at the NCHW offsets)\n");
      rc = bi_ew_body(e, st->epi, "epi_", "offs", "mask", epi_bind, true, 4, k, err);
    }
  }
  /* launcher */
  if (!rc) {
    char note[160];
    if (stats_only)
      snprintf(note, sizeof note, "    # statistics only, on [pixels x channels] tiles: the kernel of line %d applies "
               "the norm while it loads\n", p->g->nodes[p->st[st->apply_into].nodes[0]].span.line);
    else
      snprintf(note, sizeof note, "    # on [pixels x channels] tiles of a channels_last input; stored %s\n",
               cl_store ? "channels_last" : "in the default layout");
    rc = launcher_head(e, s, ni, res, note, err);
  }
  mk_buf *b = e->body;
  if (!rc && !stats_only) {
    mk_buf_printf(b, "    %s = tuple(%s)\n", out_shape, in_shape);
    e->alloc_cl = cl_store;
    rc = bi_epi_alloc(e, s, out_shape, dev, b, err);
    e->alloc_cl = false;
  }
  if (!rc) {
    int blk = e->cfg->block, r = res;
    mk_buf_printf(b, "    if numel%d > 0:\n", r);
    mk_buf_printf(b, "        p%d = %s[0] * s%d  # pixels\n", r, in_shape, r);
    mk_buf_printf(b, "        bc%d = min(64, triton.next_power_of_2(c%d))\n", r, r);
    mk_buf_printf(b, "        bp%d = max(16, %d // bc%d)\n", r, blk, r);
    mk_buf_printf(b, "        ncb%d = triton.cdiv(c%d, bc%d)\n", r, r, r);
    mk_buf_printf(b, "        split%d = max(1, min(triton.cdiv(p%d, bp%d), 1024 // ncb%d))\n", r, r, r, r);
    mk_buf_printf(b, "        chunk%d = triton.cdiv(triton.cdiv(p%d, split%d), bp%d) * bp%d\n", r, r, r, r, r);
    mk_buf_printf(b, "        split%d = triton.cdiv(p%d, chunk%d)\n", r, r, r);
    mk_buf_printf(b, "        part%d = torch.empty((3, c%d * split%d), device=%s, dtype=torch.float32)\n", r, r,
                  r, dev);
    mk_buf_printf(b, "        nm%d = torch.empty((3, c%d), device=%s, dtype=torch.float32)  # mean, scale, shift\n",
                  r, r, dev);
    mk_buf_printf(b, "        idx64 = numel%d >= 2**31\n", r);
    mk_buf_printf(b, "        %s[(split%d, ncb%d)](\n", mk_buf_cstr(&kst), r, r);
    mk_buf_printf(b, "            %spart%d, c%d * split%d, p%d, chunk%d, split%d,\n", mk_buf_cstr(&pcall), r, r,
                  r, r, r, r);
    mk_buf_printf(b, "            BLOCK_P=bp%d, BLOCK_C=bc%d, IDX64=idx64, num_warps=%d)\n", r, r,
                  e->cfg->warps);
    mk_buf_printf(b, "        %s[(ncb%d,)](\n", mk_buf_cstr(&kfin), r);
    mk_buf_printf(b, "            part%d, %snm%d, c%d, c%d * split%d, split%d, SB=32, BLOCK_C=bc%d)\n", r,
                  mk_buf_cstr(&fcall), r, r, r, r, r, r);
    if (!stats_only) {
      mk_buf_printf(b, "        %s[(triton.cdiv(p%d, bp%d), ncb%d)](\n", mk_buf_cstr(&kap), r, r, r);
      mk_buf_printf(b, "            %sp%d, BLOCK_P=bp%d, BLOCK_C=bc%d, IDX64=idx64, num_warps=%d)\n",
                    mk_buf_cstr(&acall), r, r, r, e->cfg->warps);
    }
  }
  if (!rc && folded) {
    /* The stored tensor is the shuffled value: its views are not replayed. */
    mk_buf_puts(b, "    ");
    bi_run_name(p, fold.value, b);
    mk_buf_puts(b, " = ");
    bi_run_name(p, res, b);
    mk_buf_puts(b, "  # the channel shuffle, stored shuffled by the norm\n");
    e->chain_end = fold.last;
    if (cl_store) bi_add_cl_value(e, fold.value);
  }
  if (!rc && cl_store && !stats_only) {
    /* Later stages of the module read them in that memory order. */
    if (bi_value_escapes(p, s, res)) bi_add_cl_value(e, res);
    if (st->epi >= 0) {
      int stored[64];
      int ns = bi_stage_stored(p, st->epi, stored, 64);
      for (int i = 0; i < ns; i++) bi_add_cl_value(e, stored[i]);
    }
  }
  if (!rc) e->ctile_used++;
  mk_buf_free(&kst);
  mk_buf_free(&kfin);
  mk_buf_free(&kap);
  mk_buf_free(&psig);
  mk_buf_free(&pcall);
  mk_buf_free(&asig);
  mk_buf_free(&acall);
  mk_buf_free(&fsig);
  mk_buf_free(&fcall);
  mk_buf_free(&name);
  return rc;
}

int bi_emit_norm_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  norm_info ni;
  int rc = parse(p->g, n, &ni, err);
  if (rc) return rc;
  /* A norm another norm's epilogue applies, and that norm: channel tiles only. */
  int tiled_pair = applied_by_epilogue(p, s) ? p->st[st->apply_into].fused_into : st->epi_norm;
  if (tiled_pair >= 0) {
    char why[200] = "not a configuration on channel tiles";
    bool ok = e->cfg->norm_ctile &&
              (applied_by_epilogue(p, s) ? ctile_input_ok(e, s, &ni, why, sizeof why)
                                         : ctile_ok(e, s, &ni, why, sizeof why));
    if (!ok)
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: a %s applied by another norm's epilogue (line %d) "
                     "is written on channel tiles only: %s", n->span.line, kind_name(ni.kind),
                     p->g->nodes[p->st[tiled_pair].nodes[0]].span.line, why);
    rc = emit_ctile_stage(e, s, &ni, err);
    if (!rc) rc = mk_pyemit_mutations(n, bi_graph_namer, (void *)p->g, 4, e->body);
    if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
    return rc;
  }
  if (st->apply_into >= 0) {
    rc = emit_stats_only(e, s, &ni, err);
    if (!rc) rc = mk_pyemit_mutations(n, bi_graph_namer, (void *)p->g, 4, e->body);
    if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
    return rc;
  }
  if (e->cfg->norm_ctile) {
    char why[200] = "";
    if (ctile_ok(e, s, &ni, why, sizeof why)) {
      rc = emit_ctile_stage(e, s, &ni, err);
      if (!rc) rc = mk_pyemit_mutations(n, bi_graph_namer, (void *)p->g, 4, e->body);
      if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
      return rc;
    }
    if (e->ctile_why[0] == '\0')
      snprintf(e->ctile_why, sizeof e->ctile_why, "line %d: %s not on channel tiles: %s", n->span.line,
               kind_name(ni.kind), why);
  }
  int res = n->outputs[0];
  bool running = !ni.batch_stats;
  bool split = e->cfg->norm_split > 0 && !running;
  bool regs = e->cfg->norm_split < 0 && regs_ok(p->g, &ni);
  int nsplit = e->cfg->norm_split;
  char in_shape[32], out_shape[32], dev[48];
  snprintf(in_shape, sizeof in_shape, "in%d", res);
  snprintf(out_shape, sizeof out_shape, "out%d", res);
  snprintf(dev, sizeof dev, "in%d_device", res);
  mk_buf kname, kname2, sig, call;
  mk_buf_init(&kname, 256);
  mk_buf_init(&kname2, 256);
  mk_buf_init(&sig, 0);
  mk_buf_init(&call, 0);
  e->kcount++;
  bi_kernel_name(e, s, running ? "norm_eval" : split ? "norm_apply" : regs ? "norm_rows" : "norm", &kname);
  rc = bi_pro_params(e, s, ni.in, in_shape, &sig, &call, err);
  if (!rc) {
    param_sig(&ni, &sig);
    param_call(p, &ni, &call);
    rc = bi_epi_params(e, s, out_shape, &sig, &call, err);
  }
  mk_buf *k = e->kernels;
  if (!rc && running) {
    rc = emit_running_kernel(e, s, &ni, mk_buf_cstr(&kname), mk_buf_cstr(&sig), err);
  } else if (!rc && regs) {
    rc = emit_regs_kernel(e, s, &ni, mk_buf_cstr(&kname), mk_buf_cstr(&sig), err);
  } else if (!rc && !split) {
    mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%sM, %sBLOCK: tl.constexpr, IDX64: tl.constexpr):\n",
                  mk_buf_cstr(&kname), mk_buf_cstr(&sig), layout_sig(&ni));
    bi_stage_comment(p, s, 4, k);
    mk_buf_printf(k, "    # one program per %s row: statistics pass, then normalise + store\n"
                     "    pid = tl.program_id(0)\n", kind_name(ni.kind));
    index64_lines(k);
    mk_buf_puts(k, "    row = pid\n");
    rc = stats_loop(e, s, &ni, "0", "M", k, err);
    if (!rc) {
      combine(e, &ni, "if True:", k);
      rc = apply_loop(e, s, &ni, "0", "M", k, err);
    }
  } else if (!rc) {
    /* Split rows: partial statistics per chunk, then combine + normalise. */
    mk_buf psig, pcall;
    mk_buf_init(&psig, 0);
    mk_buf_init(&pcall, 0);
    e->kcount++;
    bi_kernel_name(e, s, "norm_stats", &kname2);
    rc = bi_pro_params(e, s, ni.in, in_shape, &psig, &pcall, err);
    if (!rc) rc = emit_partials_kernel(e, s, &ni, mk_buf_cstr(&kname2), mk_buf_cstr(&psig), err);
    if (!rc) {
      mk_buf_printf(k, "\n\n@triton.jit\ndef %s(%spart_ptr, NPART, M, CHUNK, %sSPLIT: tl.constexpr,\n"
                       "        BLOCK: tl.constexpr, IDX64: tl.constexpr):\n",
                    mk_buf_cstr(&kname), mk_buf_cstr(&sig), layout_sig(&ni));
      bi_stage_comment(p, s, 4, k);
      mk_buf_puts(k, "    # combine the row's partial statistics, then normalise this chunk\n"
                     "    pid = tl.program_id(0)\n");
      index64_lines(k);
      mk_buf_puts(k, "    row = pid // SPLIT\n"
                     "    lo = (pid % SPLIT) * CHUNK\n"
                     "    hi = tl.minimum(lo + CHUNK, M)\n"
                     "    parts = row * SPLIT + tl.arange(0, SPLIT)\n"
                     "    cnt = tl.load(part_ptr + parts)\n"
                     "    mean = tl.load(part_ptr + NPART + parts)\n"
                     "    m2 = tl.load(part_ptr + 2 * NPART + parts)\n");
      combine(e, &ni, "if pid % SPLIT == 0:", k);
      rc = apply_loop(e, s, &ni, "lo", "hi", k, err);
    }
    if (!rc) {
      mk_buf *b = e->body;
      rc = launcher_head(e, s, &ni, res, NULL, err);
      if (!rc) {
        mk_buf_printf(b, "    %s = tuple(%s)\n", out_shape, in_shape);
        rc = bi_epi_alloc(e, s, out_shape, dev, b, err);
      }
      if (!rc) {
        mk_buf_printf(b,
                      "    if rows%d * m%d > 0:\n"
                      "        chunk%d = triton.cdiv(triton.cdiv(m%d, %d), %d) * %d\n"
                      "        npart%d = rows%d * %d\n"
                      "        part%d = torch.empty((3, npart%d), device=%s, dtype=torch.float32)\n"
                      "        idx64 = numel%d >= 2**31\n"
                      "        %s[(npart%d,)](\n"
                      "            %spart%d, npart%d, m%d, chunk%d, *lay%d, SPLIT=%d, BLOCK=%d, IDX64=idx64,\n"
                      "            num_warps=%d)\n"
                      "        %s[(npart%d,)](\n"
                      "            %spart%d, npart%d, m%d, chunk%d, *lay%d, SPLIT=%d, BLOCK=%d, IDX64=idx64,\n"
                      "            num_warps=%d)\n",
                      res, res, res, res, nsplit, e->cfg->block, e->cfg->block, res, res, nsplit, res,
                      res, dev, res, mk_buf_cstr(&kname2), res, mk_buf_cstr(&pcall), res, res, res, res,
                      res, nsplit, e->cfg->block, e->cfg->warps, mk_buf_cstr(&kname), res,
                      mk_buf_cstr(&call), res, res, res, res, res, nsplit, e->cfg->block, e->cfg->warps);
      }
    }
    mk_buf_free(&psig);
    mk_buf_free(&pcall);
  }
  if (!rc && !split) {
    mk_buf *b = e->body;
    rc = launcher_head(e, s, &ni, res, NULL, err);
    if (!rc) {
      mk_buf_printf(b, "    %s = tuple(%s)\n", out_shape, in_shape);
      rc = bi_epi_alloc(e, s, out_shape, dev, b, err);
    }
    if (!rc && running) {
      mk_buf_printf(b,
                    "    c%d, s%d = %s[1], math.prod(%s[2:])\n"
                    "    if numel%d > 0:\n"
                    "        %s[(triton.cdiv(numel%d, %d),)](\n"
                    "            %snumel%d, c%d, s%d, BLOCK=%d, IDX64=numel%d >= 2**31, num_warps=%d)\n",
                    res, res, in_shape, in_shape, res, mk_buf_cstr(&kname), res, e->cfg->block,
                    mk_buf_cstr(&call), res, res, res, e->cfg->block, res, e->cfg->warps);
    } else if (!rc && regs) {
      mk_buf_printf(b,
                    "    if rows%d * m%d > 0:\n"
                    "        mb%d = triton.next_power_of_2(m%d)\n"
                    "        if mb%d > %d:\n"
                    "            raise ValueError(\"rows longer than the register tile of this variant\")\n"
                    "        rb%d = max(1, %d // mb%d)\n"
                    "        %s[(triton.cdiv(rows%d, rb%d),)](\n"
                    "            %srows%d, m%d, *lay%d, RB=rb%d, MB=mb%d, IDX64=numel%d >= 2**31,\n"
                    "            num_warps=max(%d, min(16, rb%d * mb%d // 512)))  # <= 16 values/thread\n",
                    res, res, res, res, res, BI_NORM_REG_ROW, res, e->cfg->block, res,
                    mk_buf_cstr(&kname), res, res, mk_buf_cstr(&call), res, res, res, res, res, res,
                    e->cfg->warps, res, res);
    } else if (!rc) {
      mk_buf_printf(b,
                    "    if rows%d * m%d > 0:\n"
                    "        %s[(rows%d,)](\n"
                    "            %sm%d, *lay%d, BLOCK=%d, IDX64=numel%d >= 2**31, num_warps=%d)\n",
                    res, res, mk_buf_cstr(&kname), res, mk_buf_cstr(&call), res, res, e->cfg->block,
                    res, e->cfg->warps);
    }
  }
  if (!rc) {
    /* The fresh versions of the running statistics are the same tensors. */
    mk_buf *b = e->body;
    rc = mk_pyemit_mutations(n, bi_graph_namer, (void *)p->g, 4, b);
  }
  mk_buf_free(&kname);
  mk_buf_free(&kname2);
  mk_buf_free(&sig);
  mk_buf_free(&call);
  if (!rc && (e->kernels->err || e->body->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  return rc;
}

bool bi_group_norm_info(const mk_graph *g, const mk_node *n, bi_gn_info *out) {
  norm_info ni;
  mk_errmsg ignored = {{0}};
  if (parse(g, n, &ni, &ignored) || (ni.kind != N_GROUP && ni.kind != N_BATCH)) return false;
  *out = (bi_gn_info){.batch = ni.kind == N_BATCH, .batch_stats = ni.batch_stats, .in = ni.in,
                      .weight = ni.weight, .bias = ni.bias, .rmean = ni.rmean, .rvar = ni.rvar,
                      .groups = ni.groups, .eps = ni.eps, .momentum = ni.momentum};
  return true;
}

int bi_norm_parse(const mk_graph *g, const mk_node *n, bi_norm_info *out, mk_errmsg *err) {
  norm_info ni;
  int rc = parse(g, n, &ni, err);
  if (rc) return rc;
  static const bi_norm_kind kinds[] = {[N_LAYER] = BI_NK_LAYER, [N_RMS] = BI_NK_RMS, [N_GROUP] = BI_NK_GROUP,
                                       [N_INSTANCE] = BI_NK_INSTANCE, [N_BATCH] = BI_NK_BATCH};
  *out = (bi_norm_info){.kind = kinds[ni.kind], .in = ni.in, .weight = ni.weight, .bias = ni.bias,
                        .rmean = ni.rmean, .rvar = ni.rvar, .eps = ni.eps, .momentum = ni.momentum,
                        .batch_stats = ni.batch_stats, .l2 = ni.l2, .groups = ni.groups, .nnorm = ni.nnorm,
                        .rank = ni.rank};
  return 0;
}
