/* builtin_cuda_norm.c — layer / RMS / group / instance / batch norms and
 * F.normalize (p=2, last dim) as CUDA C++: the norm stages of bi_plan, with
 * the Triton emitter's numerics (builtin_norm.c).
 *
 * Every norm is seen as an [N, C, S] tensor (the launcher's reshape: a view
 * for NCHW, channels_last and any layout whose spatial dims are dense among
 * themselves, a copy otherwise) read and written through its three strides,
 * so a channels_last input needs no contiguous copy. Layer and RMS norms are
 * [rows, 1, M]. The statistics' rows are:
 *   layer / rms : (n)        elements s             M = S
 *   group       : (n, g)     elements (c in g, s)   M = C / G * S
 *   instance    : (n, c)     elements s             M = S
 *   batch       : (c)        elements (n, s)        M = N * S
 * Statistics: each thread a Welford update over its elements (one read, no
 * E[x^2] - E[x]^2 cancellation), the block's partials combined exactly as
 * the Triton kernels do (count, count-weighted mean, M2 plus the spread of
 * the means: three block reductions), then a second read normalises, applies
 * weight and bias and stores. Work layouts: one block per row (every
 * variant), or split rows (`_split32`: 32 blocks per row write partial
 * statistics, a second kernel combines a row's 32 partials and normalises
 * its chunk) for few long rows, as Triton's `_split32`. Batch norm in
 * training updates running_mean / running_var in place as torch does;
 * running statistics (eval, or instance norm without input statistics) make
 * the norm elementwise. The output has the layout the program's plan gives
 * the value (channels_last or contiguous). Elementwise neighbours are not
 * fused (builtin_cuda.h): they are kernels of their own. */
#include "builtin_cuda.h"

#include "mk_layout.h"

#include <stdio.h>
#include <string.h>

typedef struct cnorm {
  bi_norm_info ni;
  const mk_node *n;
  int res;     /* the normalised value */
  bool out_cl; /* the output is allocated channels_last (the layout plan's) */
} cnorm;

static bool per_row_channel(const bi_norm_info *ni) {
  return ni->kind == BI_NK_INSTANCE || ni->kind == BI_NK_BATCH;
}

/* Row length at capture (for the split variant's choice: builtin_norm.c's rule). */
static long long captured_m(const mk_graph *g, const bi_norm_info *ni) {
  const mk_value *v = &g->values[ni->in];
  long long m = 1;
  switch (ni->kind) {
  case BI_NK_LAYER:
  case BI_NK_RMS:
    for (int d = v->rank - ni->nnorm; d < v->rank; d++) m *= v->shape[d];
    return m;
  case BI_NK_GROUP:
    for (int d = 2; d < v->rank; d++) m *= v->shape[d];
    return m * (v->shape[1] / (ni->groups > 0 ? ni->groups : 1));
  case BI_NK_INSTANCE:
    for (int d = 2; d < v->rank; d++) m *= v->shape[d];
    return m;
  case BI_NK_BATCH:
    for (int d = 0; d < v->rank; d++) m *= d == 1 ? 1 : v->shape[d];
    return m;
  }
  return m;
}

bool bc_norm_splits(const bi_plan *p) {
  for (int s = 0; s < p->nst; s++) {
    if (p->st[s].kind != BI_NORM) continue;
    bi_norm_info ni;
    if (bi_norm_parse(p->g, &p->g->nodes[p->st[s].nodes[0]], &ni, NULL)) continue;
    if (ni.batch_stats && captured_m(p->g, &ni) >= BC_NORM_SPLIT_ROW) return true;
  }
  return false;
}

static int parse(const bi_plan *p, int s, cnorm *cn, mk_errmsg *err) {
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  int rc = bi_norm_parse(p->g, n, &cn->ni, err);
  if (rc) return rc;
  if (p->g->values[cn->ni.in].dtype != MK_DTYPE_F32)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator writes float32 kernels only (%s)",
                   n->span.line, n->op);
  cn->n = n;
  cn->res = n->outputs[0];
  int r = cn->ni.rank;
  /* Norms over channels keep the layout the plan gives their output; a
   * layer / RMS norm's rows are its last dims, stored contiguous. */
  cn->out_cl = cn->ni.kind != BI_NK_LAYER && cn->ni.kind != BI_NK_RMS && (r == 4 || r == 5) && p->layout &&
               p->is_output[cn->res] && p->layout[cn->res] == MK_LAYOUT_CHANNELS_LAST;
  return 0;
}

/* ---- kernel text ------------------------------------------------------------ */

/* Lines defining M (the row's length) and ROWS (rows of the launch). */
static void row_consts(const bi_norm_info *ni, mk_buf *k) {
  if (ni->kind == BI_NK_GROUP) mk_buf_printf(k, "  const long long G = %lld, CG = C / G;\n", ni->groups);
  switch (ni->kind) {
  case BI_NK_LAYER:
  case BI_NK_RMS: mk_buf_puts(k, "  const long long M = S, ROWS = N;\n"); break;
  case BI_NK_GROUP: mk_buf_puts(k, "  const long long M = CG * S, ROWS = N * G;\n"); break;
  case BI_NK_INSTANCE: mk_buf_puts(k, "  const long long M = S, ROWS = N * C;\n"); break;
  case BI_NK_BATCH: mk_buf_puts(k, "  const long long M = N * S, ROWS = C;\n"); break;
  }
}

/* (n, c, s) of element r of row `row`; with `ch`, also the index of its
 * weight and bias (layer / RMS: r; group: c). */
static void elem_index(const bi_norm_info *ni, bool ch, mk_buf *k) {
  switch (ni->kind) {
  case BI_NK_LAYER:
  case BI_NK_RMS: mk_buf_printf(k, "    const long long n = row, c = 0, s = r%s;\n", ch ? ", ch = r" : ""); break;
  case BI_NK_GROUP:
    mk_buf_printf(k, "    const long long n = row / G, c = (row %% G) * CG + r / S, s = r %% S%s;\n", ch ? ", ch = c" : "");
    break;
  case BI_NK_INSTANCE: mk_buf_puts(k, "    const long long n = row / C, c = row % C, s = r;\n"); break;
  case BI_NK_BATCH: mk_buf_puts(k, "    const long long n = r / S, c = row, s = r % S;\n"); break;
  }
}

/* Per-thread statistics over elements [lo, hi) of the row. */
static void stats_loop(const bi_norm_info *ni, const char *lo, const char *hi, mk_buf *k) {
  mk_buf_printf(k, "  float cnt = 0.0f, mean = 0.0f, m2 = 0.0f;\n"
                   "  for (long long r = %s + threadIdx.x; r < %s; r += blockDim.x) {\n", lo, hi);
  elem_index(ni, false, k);
  mk_buf_puts(k, "    const float v = x[n * sN + c * sC + s * sS];\n"
                 "    cnt += 1.0f;\n");
  if (ni->kind == BI_NK_RMS) /* RMS: "M2" is the sum of squares around 0; mean stays 0 */
    mk_buf_puts(k, "    m2 += v * v;\n");
  else
    mk_buf_puts(k, "    const float d = v - mean;\n"
                   "    mean += d / cnt;\n"
                   "    m2 += d * (v - mean);\n");
  mk_buf_puts(k, "  }\n");
}

/* The block's (or the row's partials') statistics, as Triton's combine:
 * tot = sum(cnt), gmean = sum(cnt * mean) / tot, var = sum(m2 + cnt * (mean
 * - gmean)^2) / tot. Every thread gets the same values (the reductions'
 * additions are commutative, so the butterflies agree bit for bit). */
static void combine_lines(const bi_norm_info *ni, const char *c, const char *m, const char *q, mk_buf *k) {
  mk_buf_printf(k, "  const float tot = mk_block_reduce<mk_add>(%s, 0.0f);\n"
                   "  const float gmean = mk_block_reduce<mk_add>(%s * %s, 0.0f) / tot;\n"
                   "  const float dm = %s > 0.0f ? %s - gmean : 0.0f;\n"
                   "  const float var = mk_block_reduce<mk_add>(%s + %s * dm * dm, 0.0f) / tot;\n",
                c, c, m, c, m, q, c);
  if (ni->l2) {
    mk_buf_puts(k, "  const float rstd = 1.0f / fmaxf(sqrtf(var * tot), ");
    bc_float(ni->eps, k);
    mk_buf_puts(k, ");  // F.normalize: 1 / max(||row||_2, eps)\n");
  } else {
    mk_buf_puts(k, "  const float rstd = 1.0f / sqrtf(var + ");
    bc_float(ni->eps, k);
    mk_buf_puts(k, ");\n");
  }
}

/* Running statistics updated in place as torch: (1 - momentum) * running +
 * momentum * batch, the unbiased variance for running_var. */
static void update_lines(const bi_norm_info *ni, const char *cond, mk_buf *k) {
  if (ni->kind != BI_NK_BATCH || ni->rmean < 0) return;
  mk_buf_printf(k, "  if (%s) {\n    rm[row] = (1.0f - ", cond);
  bc_float(ni->momentum, k);
  mk_buf_puts(k, ") * rm[row] + ");
  bc_float(ni->momentum, k);
  mk_buf_puts(k, " * gmean;\n    rv[row] = (1.0f - ");
  bc_float(ni->momentum, k);
  mk_buf_puts(k, ") * rv[row] + ");
  bc_float(ni->momentum, k);
  mk_buf_puts(k, " * (var * tot / fmaxf(tot - 1.0f, 1.0f));\n  }\n");
}

/* The normalising pass over elements [lo, hi): affine, store. */
static void apply_loop(const bi_norm_info *ni, const char *lo, const char *hi, mk_buf *k) {
  bool prc = per_row_channel(ni);
  if (prc && (ni->weight >= 0 || ni->bias >= 0)) {
    /* One channel per row: its weight and bias are loaded once. */
    mk_buf_printf(k, "  const long long rch = %s;\n", ni->kind == BI_NK_INSTANCE ? "row % C" : "row");
    if (ni->weight >= 0) mk_buf_puts(k, "  const float wv = w[rch];\n");
    if (ni->bias >= 0) mk_buf_puts(k, "  const float bv = b[rch];\n");
  }
  mk_buf_printf(k, "  for (long long r = %s + threadIdx.x; r < %s; r += blockDim.x) {\n", lo, hi);
  elem_index(ni, !prc && (ni->weight >= 0 || ni->bias >= 0), k);
  mk_buf_puts(k, "    const float v = x[n * sN + c * sC + s * sS];\n");
  mk_buf_puts(k, ni->kind == BI_NK_RMS ? "    float o = v * rstd;\n" : "    float o = (v - gmean) * rstd;\n");
  if (ni->weight >= 0) mk_buf_puts(k, prc ? "    o = o * wv;\n" : "    o = o * w[ch];\n");
  if (ni->bias >= 0) mk_buf_puts(k, prc ? "    o = o + bv;\n" : "    o = o + b[ch];\n");
  mk_buf_puts(k, "    y[n * oN + c * oC + s * oS] = o;\n  }\n");
}

/* Kernel parameters: what reads and writes the norm, then the layout. */
typedef enum kpart { KP_STATS, KP_NORM, KP_APPLY, KP_EVAL } kpart;

static void params(const bi_norm_info *ni, kpart part, mk_buf *sig, mk_buf *types) {
  mk_buf_puts(sig, "const float *__restrict__ x, ");
  mk_buf_putc(types, BC_ARG_F32);
  if (part == KP_STATS) {
    mk_buf_puts(sig, "float *__restrict__ part, ");
    mk_buf_putc(types, BC_ARG_F32);
  } else {
    mk_buf_puts(sig, "float *__restrict__ y, ");
    mk_buf_putc(types, BC_ARG_F32);
    if (ni->weight >= 0) mk_buf_puts(sig, "const float *__restrict__ w, ");
    if (ni->bias >= 0) mk_buf_puts(sig, "const float *__restrict__ b, ");
    /* Updated in place (training) or read (eval): neither const nor restrict
     * where the kernel writes them. */
    if (ni->rmean >= 0) mk_buf_puts(sig, part == KP_EVAL ? "const float *__restrict__ rm, const float *__restrict__ rv, "
                                                         : "float *rm, float *rv, ");
    for (int i = 0; i < (ni->weight >= 0) + (ni->bias >= 0) + 2 * (ni->rmean >= 0); i++)
      mk_buf_putc(types, BC_ARG_F32);
    if (part == KP_APPLY) {
      mk_buf_puts(sig, "const float *__restrict__ part, ");
      mk_buf_putc(types, BC_ARG_F32);
    }
  }
  mk_buf_puts(sig, "long long N, long long C, long long S, long long sN, long long sC, long long sS");
  for (int i = 0; i < 6; i++) mk_buf_putc(types, BC_ARG_I64);
  if (part != KP_STATS) {
    mk_buf_puts(sig, ", long long oN, long long oC, long long oS");
    for (int i = 0; i < 3; i++) mk_buf_putc(types, BC_ARG_I64);
  }
  if (part == KP_STATS || part == KP_APPLY) {
    mk_buf_puts(sig, ", long long CHUNK");
    mk_buf_putc(types, BC_ARG_I64);
  }
  if (part == KP_EVAL) {
    mk_buf_puts(sig, ", long long CL");
    mk_buf_putc(types, BC_ARG_I64);
  }
}

static void kernel_head(bc_emit *e, const cnorm *cn, const char *kname, kpart part, const char *what,
                        mk_buf *types) {
  mk_buf *k = e->cuda;
  mk_buf sig;
  mk_buf_init(&sig, 4096);
  params(&cn->ni, part, &sig, types);
  mk_buf_printf(k, "\n// replaces: %s (line %d): %s\n", cn->n->op, cn->n->span.line, what);
  mk_buf_printf(k, "extern \"C\" __global__ void %s(%s) {\n", kname, mk_buf_cstr(&sig));
  if (sig.err) k->err = sig.err;
  mk_buf_free(&sig);
}

/* One block per row: statistics, then normalise the row. */
static void emit_row_kernel(bc_emit *e, const cnorm *cn, const char *kname, mk_buf *types) {
  mk_buf *k = e->cuda;
  kernel_head(e, cn, kname, KP_NORM, "one block per row, statistics then normalise", types);
  mk_buf_puts(k, "  const long long row = blockIdx.x;\n");
  row_consts(&cn->ni, k);
  mk_buf_puts(k, "  (void)ROWS;\n");
  stats_loop(&cn->ni, "0", "M", k);
  combine_lines(&cn->ni, "cnt", "mean", "m2", k);
  update_lines(&cn->ni, "threadIdx.x == 0", k);
  apply_loop(&cn->ni, "0", "M", k);
  mk_buf_puts(k, "}\n");
}

/* Split rows, first kernel: the partial statistics of one chunk of a row,
 * into part[3][ROWS * SPLIT] (count, mean, M2). */
static void emit_stats_kernel(bc_emit *e, const cnorm *cn, const char *kname, mk_buf *types) {
  mk_buf *k = e->cuda;
  kernel_head(e, cn, kname, KP_STATS, "partial statistics of one chunk of a row", types);
  mk_buf_printf(k, "  const long long SPLIT = %d, row = blockIdx.x / SPLIT, chunk = blockIdx.x %% SPLIT;\n",
                e->split);
  row_consts(&cn->ni, k);
  mk_buf_puts(k, "  const long long lo = chunk * CHUNK, hi = lo + CHUNK < M ? lo + CHUNK : M;\n");
  stats_loop(&cn->ni, "lo", "hi", k);
  mk_buf_puts(k, "  const float tot = mk_block_reduce<mk_add>(cnt, 0.0f);\n"
                 "  const float pmean = mk_block_reduce<mk_add>(cnt * mean, 0.0f) / fmaxf(tot, 1.0f);\n"
                 "  const float dm = cnt > 0.0f ? mean - pmean : 0.0f;\n"
                 "  const float pm2 = mk_block_reduce<mk_add>(m2 + cnt * dm * dm, 0.0f);\n"
                 "  if (threadIdx.x == 0) {\n"
                 "    const long long NPART = ROWS * SPLIT;\n"
                 "    part[blockIdx.x] = tot;\n"
                 "    part[NPART + blockIdx.x] = pmean;\n"
                 "    part[2 * NPART + blockIdx.x] = pm2;\n"
                 "  }\n}\n");
}

/* Split rows, second kernel: the row's SPLIT partials combined (the first
 * chunk's block updates the running statistics), then this chunk normalised. */
static void emit_apply_kernel(bc_emit *e, const cnorm *cn, const char *kname, mk_buf *types) {
  mk_buf *k = e->cuda;
  kernel_head(e, cn, kname, KP_APPLY, "combine the row's partials, normalise one chunk", types);
  mk_buf_printf(k, "  const long long SPLIT = %d, row = blockIdx.x / SPLIT, chunk = blockIdx.x %% SPLIT;\n",
                e->split);
  row_consts(&cn->ni, k);
  mk_buf_puts(k, "  const long long lo = chunk * CHUNK, hi = lo + CHUNK < M ? lo + CHUNK : M;\n"
                 "  const long long NPART = ROWS * SPLIT;\n"
                 "  float pc = 0.0f, pm = 0.0f, pq = 0.0f;\n"
                 "  if (threadIdx.x < SPLIT) {  // blockDim.x >= SPLIT\n"
                 "    const long long q = row * SPLIT + threadIdx.x;\n"
                 "    pc = part[q];\n"
                 "    pm = part[NPART + q];\n"
                 "    pq = part[2 * NPART + q];\n"
                 "  }\n");
  combine_lines(&cn->ni, "pc", "pm", "pq", k);
  update_lines(&cn->ni, "chunk == 0 && threadIdx.x == 0", k);
  apply_loop(&cn->ni, "lo", "hi", k);
  mk_buf_puts(k, "}\n");
}

/* Running statistics: elementwise, one thread per element in the input's
 * memory order (CL: channels innermost), so neighbouring threads read
 * neighbouring addresses in either layout. */
static void emit_eval_kernel(bc_emit *e, const cnorm *cn, const char *kname, mk_buf *types) {
  mk_buf *k = e->cuda;
  const bi_norm_info *ni = &cn->ni;
  kernel_head(e, cn, kname, KP_EVAL, "statistics from running_mean / running_var", types);
  mk_buf_puts(k, "  const long long offs = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "  if (offs >= N * C * S) return;\n"
                 "  long long n, c, s;\n"
                 "  if (CL) {\n"
                 "    c = offs % C;\n    s = (offs / C) % S;\n    n = offs / (C * S);\n"
                 "  } else {\n"
                 "    s = offs % S;\n    c = (offs / S) % C;\n    n = offs / (S * C);\n"
                 "  }\n"
                 "  float o = (x[n * sN + c * sC + s * sS] - rm[c]) / sqrtf(rv[c] + ");
  bc_float(ni->eps, k);
  mk_buf_puts(k, ");\n");
  if (ni->weight >= 0) mk_buf_puts(k, "  o = o * w[c];\n");
  if (ni->bias >= 0) mk_buf_puts(k, "  o = o + b[c];\n");
  mk_buf_puts(k, "  y[n * oN + c * oC + s * oS] = o;\n}\n");
}

/* ---- launchers -------------------------------------------------------------- */

/* Weight, bias and running statistics as launch arguments (Python). */
static void py_param_args(const bc_emit *e, const bi_norm_info *ni, mk_buf *b) {
  const int ids[4] = {ni->weight, ni->bias, ni->rmean, ni->rvar};
  for (int i = 0; i < 4; i++) {
    if (ids[i] < 0) continue;
    bi_run_name(e->p, ids[i], b);
    /* Running statistics are updated in place: the tensor itself. */
    mk_buf_puts(b, i >= 2 ? ", " : ".contiguous(), ");
  }
}

/* The number of rows, from the [N, C, S] dims ncs<res>. */
static void rows_expr(const bi_norm_info *ni, int res, mk_buf *b) {
  switch (ni->kind) {
  case BI_NK_GROUP: mk_buf_printf(b, "ncs%d[0] * %lld", res, ni->groups); break;
  case BI_NK_INSTANCE: mk_buf_printf(b, "ncs%d[0] * ncs%d[1]", res, res); break;
  case BI_NK_BATCH: mk_buf_printf(b, "ncs%d[1]", res); break;
  default: mk_buf_printf(b, "ncs%d[0]", res); break;
  }
}

static void py_launcher(bc_emit *e, int s, const cnorm *cn, const char *k1, const char *k2) {
  const bi_norm_info *ni = &cn->ni;
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  int res = cn->res, T = e->threads;
  bool layer = ni->kind == BI_NK_LAYER || ni->kind == BI_NK_RMS;
  bi_stage_comment(p, s, 4, b);
  mk_buf_printf(b, "    sh%d = tuple(", res);
  bi_run_name(p, ni->in, b);
  mk_buf_puts(b, ".shape)\n");
  if (layer)
    mk_buf_printf(b, "    ncs%d = (math.prod(sh%d[:%d]), 1, math.prod(sh%d[%d:]))\n", res, res,
                  ni->rank - ni->nnorm, res, ni->rank - ni->nnorm);
  else
    mk_buf_printf(b, "    ncs%d = (sh%d[0], sh%d[1], math.prod(sh%d[2:]))\n", res, res, res, res);
  if (ni->kind == BI_NK_GROUP)
    mk_buf_printf(b, "    if ncs%d[1] %% %lld:\n        raise ValueError(\"channels do not divide into groups\")\n",
                  res, ni->groups);
  mk_buf_printf(b, "    xn%d = ", res);
  bi_run_name(p, ni->in, b);
  mk_buf_printf(b, ".reshape(ncs%d)  # [N, C, S] through strides: a view for NCHW and channels_last\n", res);
  mk_buf_indent(b, 4);
  bi_run_name(p, res, b);
  mk_buf_printf(b, " = torch.empty(sh%d, device=xn%d.device, dtype=torch.float32%s)\n", res, res,
                cn->out_cl ? (ni->rank == 4 ? ", memory_format=torch.channels_last"
                                            : ", memory_format=torch.channels_last_3d")
                           : "");
  mk_buf_printf(b, "    yn%d = ", res);
  bi_run_name(p, res, b);
  mk_buf_printf(b, ".reshape(ncs%d)\n", res);
  mk_buf args;
  mk_buf_init(&args, 1 << 16);
  mk_buf_printf(&args, "xn%d, yn%d, ", res, res);
  py_param_args(e, ni, &args);
  if (!ni->batch_stats) {
    mk_buf_printf(b, "    n%d = math.prod(ncs%d)\n", res, res);
    mk_buf_printf(b, "    cl%d = 1 if xn%d.stride(1) == 1 and ncs%d[1] > 1 else 0\n", res, res, res);
    mk_buf_printf(b, "    if n%d > 0:\n        _mk_cuda.launch(\"%s\", ((n%d + %d) // %d,), (%d,),\n"
                     "                        (%s*ncs%d, *xn%d.stride(), *yn%d.stride(), cl%d))\n",
                  res, k1, res, T - 1, T, T, mk_buf_cstr(&args), res, res, res, res);
  } else {
    mk_buf_printf(b, "    rows%d = ", res);
    rows_expr(ni, res, b);
    mk_buf_printf(b, "\n    m%d = math.prod(ncs%d) // max(rows%d, 1)\n", res, res, res);
    if (e->split == 0) {
      mk_buf_printf(b, "    if rows%d * m%d > 0:\n        _mk_cuda.launch(\"%s\", (rows%d,), (%d,),\n"
                       "                        (%s*ncs%d, *xn%d.stride(), *yn%d.stride()))\n",
                    res, res, k1, res, T, mk_buf_cstr(&args), res, res, res);
    } else {
      int S = e->split;
      mk_buf_printf(b, "    if rows%d * m%d > 0:\n"
                       "        chunk%d = ((m%d + %d) // %d + %d) // %d * %d\n"
                       "        part%d = torch.empty((3, rows%d * %d), device=xn%d.device, dtype=torch.float32)\n"
                       "        _mk_cuda.launch(\"%s\", (rows%d * %d,), (%d,),\n"
                       "                        (xn%d, part%d, *ncs%d, *xn%d.stride(), chunk%d))\n"
                       "        _mk_cuda.launch(\"%s\", (rows%d * %d,), (%d,),\n"
                       "                        (%spart%d, *ncs%d, *xn%d.stride(), *yn%d.stride(), chunk%d))\n",
                    res, res, res, res, S - 1, S, T - 1, T, T, res, res, S, res, k1, res, S, T, res, res, res,
                    res, res, k2, res, S, T, mk_buf_cstr(&args), res, res, res, res, res);
    }
  }
  if (args.err) b->err = args.err;
  mk_buf_free(&args);
}

/* Whether `vid` is one of the values a call returns (its recorded `out`). */
static bool returned(const cJSON *out, int vid) {
  if (out == NULL) return false;
  const cJSON *t = cJSON_IsObject(out) ? cJSON_GetObjectItemCaseSensitive(out, "t") : NULL;
  if (t && cJSON_IsNumber(t)) return t->valueint == vid;
  for (const cJSON *c = out->child; c; c = c->next)
    if (returned(c, vid)) return true;
  return false;
}

/* The launcher above as C++ (mkevolve export): the same shapes, views,
 * allocations, grids and arguments. */
static void cpp_launcher(bc_emit *e, int s, const cnorm *cn, const char *k1, const char *k2) {
  const bi_norm_info *ni = &cn->ni;
  mk_buf *b = e->cpp;
  int res = cn->res, T = e->threads, in = ni->in;
  bool layer = ni->kind == BI_NK_LAYER || ni->kind == BI_NK_RMS;
  bc_cpp_comment(e, s);
  mk_buf_printf(b, "  const std::vector<int64_t> sh%d = v%d.sizes().vec();\n", res, in);
  if (layer)
    mk_buf_printf(b, "  const std::vector<int64_t> ncs%d = {mk_prod(sh%d, 0, %d), 1, mk_prod(sh%d, %d, sh%d.size())};\n",
                  res, res, ni->rank - ni->nnorm, res, ni->rank - ni->nnorm, res);
  else
    mk_buf_printf(b, "  const std::vector<int64_t> ncs%d = {sh%d[0], sh%d[1], mk_prod(sh%d, 2, sh%d.size())};\n",
                  res, res, res, res, res);
  if (ni->kind == BI_NK_GROUP)
    mk_buf_printf(b, "  TORCH_CHECK(ncs%d[1] %% %lld == 0, \"channels do not divide into groups\");\n", res,
                  ni->groups);
  mk_buf_printf(b, "  const at::Tensor xn%d = v%d.reshape(ncs%d);\n", res, in, res);
  mk_buf_printf(b, "  at::Tensor v%d = at::empty(sh%d, at::TensorOptions().device(v%d.device()).dtype(at::kFloat)%s);\n",
                res, res, in,
                cn->out_cl ? (ni->rank == 4 ? ".memory_format(at::MemoryFormat::ChannelsLast)"
                                            : ".memory_format(at::MemoryFormat::ChannelsLast3d)")
                           : "");
  mk_buf_printf(b, "  const at::Tensor yn%d = v%d.reshape(ncs%d);\n", res, res, res);
  mk_buf args, lay;
  mk_buf_init(&args, 1 << 16);
  mk_buf_init(&lay, 4096);
  const int ids[4] = {ni->weight, ni->bias, ni->rmean, ni->rvar};
  for (int i = 0; i < 4; i++)
    if (ids[i] >= 0) mk_buf_printf(&args, ", mk_ptr<float>(v%d%s)", ids[i], i < 2 ? ".contiguous()" : "");
  mk_buf_printf(&lay, ", ncs%d[0], ncs%d[1], ncs%d[2], xn%d.stride(0), xn%d.stride(1), xn%d.stride(2)", res, res,
                res, res, res, res);
  const char *ostr = "%s, yn%d.stride(0), yn%d.stride(1), yn%d.stride(2)";
  if (!ni->batch_stats) {
    mk_buf_printf(b, "  const int64_t n%d = ncs%d[0] * ncs%d[1] * ncs%d[2];\n", res, res, res, res);
    mk_buf_printf(b, "  const int64_t cl%d = xn%d.stride(1) == 1 && ncs%d[1] > 1 ? 1 : 0;\n", res, res, res);
    mk_buf_printf(b, "  if (n%d > 0) {\n    const c10::cuda::CUDAGuard guard(v%d.device());\n", res, in);
    mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s((n%d + %d) / %d, %d, mk_stream(v%d), mk_ptr<float>(xn%d), "
                     "mk_ptr<float>(v%d)%s",
                  k1, e->cpp_ns, k1, res, T - 1, T, T, in, res, res, mk_buf_cstr(&args));
    mk_buf_printf(b, ostr, mk_buf_cstr(&lay), res, res, res);
    mk_buf_printf(b, ", cl%d));\n  }\n", res);
  } else {
    mk_buf_printf(b, "  const int64_t rows%d = ", res);
    rows_expr(ni, res, b);
    mk_buf_printf(b, ";\n  const int64_t m%d = ncs%d[0] * ncs%d[1] * ncs%d[2] / std::max<int64_t>(rows%d, 1);\n", res,
                  res, res, res, res);
    mk_buf_printf(b, "  if (rows%d * m%d > 0) {\n    const c10::cuda::CUDAGuard guard(v%d.device());\n", res, res, in);
    if (e->split == 0) {
      mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s(rows%d, %d, mk_stream(v%d), mk_ptr<float>(xn%d), mk_ptr<float>(v%d)%s",
                    k1, e->cpp_ns, k1, res, T, in, res, res, mk_buf_cstr(&args));
      mk_buf_printf(b, ostr, mk_buf_cstr(&lay), res, res, res);
      mk_buf_puts(b, "));\n  }\n");
    } else {
      int S = e->split;
      mk_buf_printf(b, "    const int64_t chunk%d = ((m%d + %d) / %d + %d) / %d * %d;\n", res, res, S - 1, S, T - 1, T,
                    T);
      mk_buf_printf(b, "    at::Tensor part%d = at::empty({3, rows%d * %d}, at::TensorOptions().device(v%d.device())"
                       ".dtype(at::kFloat));\n", res, res, S, in);
      mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s(rows%d * %d, %d, mk_stream(v%d), mk_ptr<float>(xn%d), "
                       "mk_ptr<float>(part%d)%s, chunk%d));\n",
                    k1, e->cpp_ns, k1, res, S, T, in, res, res, mk_buf_cstr(&lay), res);
      mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s(rows%d * %d, %d, mk_stream(v%d), mk_ptr<float>(xn%d), "
                       "mk_ptr<float>(v%d)%s, mk_ptr<float>(part%d)",
                    k2, e->cpp_ns, k2, res, S, T, in, res, res, mk_buf_cstr(&args), res);
      mk_buf_printf(b, ostr, mk_buf_cstr(&lay), res, res, res);
      mk_buf_printf(b, ", chunk%d));\n  }\n", res);
    }
  }
  /* The fresh versions of the running statistics are the same tensors. */
  const mk_node *n = cn->n;
  for (int k = 0, m = 0; k < n->noutputs && m < n->nmutates; k++)
    if (!returned(n->out, n->outputs[k])) mk_buf_printf(b, "  at::Tensor v%d = v%d;\n", n->outputs[k], n->mutates[m++]);
  if (args.err || lay.err) b->err = MK_ERANGE;
  mk_buf_free(&args);
  mk_buf_free(&lay);
}

/* ---- the launcher as launch-plan steps (builtin_cuda_plan.c) --------------------- */

static cJSON *named(const char *fmt, int res) { return bc_plan_name(fmt, res); }

/* {op: [a, b]} of two INTs (taken). */
static cJSON *int2(const char *op, cJSON *a, cJSON *b) {
  cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, op);
  cJSON_AddItemToArray(arr, a);
  cJSON_AddItemToArray(arr, b);
  return o;
}

static cJSON *item(const char *fmt, int res, int d) {
  char list[32];
  snprintf(list, sizeof list, fmt, res);
  return bc_plan_item(list, d);
}

static cJSON *tensor_int(const char *what, const char *fmt, int res, int d) {
  char t[32];
  snprintf(t, sizeof t, fmt, res);
  cJSON *o = bc_plan_item(t, d);
  cJSON *a = cJSON_DetachItemFromObject(o, "item");
  cJSON_AddItemToObject(o, what, a);
  return o;
}

static void plan_ptr(cJSON *st, cJSON *name) { bc_plan_arg(st, bc_plan_tagged("ptr", name)); }
static void plan_int(cJSON *st, cJSON *v) { bc_plan_arg(st, bc_plan_tagged("int", v)); }

static void plan_layout_args(cJSON *st, int res, bool out) {
  for (int d = 0; d < 3; d++) plan_int(st, item("ncs%d", res, d));
  for (int d = 0; d < 3; d++) plan_int(st, tensor_int("stride", "xn%d", res, d));
  for (int d = 0; out && d < 3; d++) plan_int(st, tensor_int("stride", "yn%d", res, d));
}

static cJSON *rows_int(const bi_norm_info *ni, int res) {
  switch (ni->kind) {
  case BI_NK_GROUP: return int2("mul", item("ncs%d", res, 0), cJSON_CreateNumber((double)ni->groups));
  case BI_NK_INSTANCE: return int2("mul", item("ncs%d", res, 0), item("ncs%d", res, 1));
  case BI_NK_BATCH: return item("ncs%d", res, 1);
  default: return item("ncs%d", res, 0);
  }
}

/* A launch whose parameter steps (weights made contiguous) come before it. */
static cJSON *plan_norm_launch(bc_emit *e, const char *k, const char *when, cJSON *grid, int T, int res,
                               const bi_norm_info *ni, bool params) {
  if (params) { /* the contiguous copies first: a launch step's args are read as it runs */
    const int ids[2] = {ni->weight, ni->bias};
    for (int i = 0; i < 2; i++) {
      if (ids[i] < 0) continue;
      char c[48];
      snprintf(c, sizeof c, "p%d_%d", res, i);
      bc_plan_arg_name(bc_plan_step(e, "contiguous", c), "v%d", ids[i]);
    }
  }
  cJSON *st = bc_plan_launch(e, k, when, grid, T);
  plan_ptr(st, named("xn%d", res));
  return st;
}

static void plan_params_after(const bi_norm_info *ni, int res, cJSON *st) {
  const int ids[4] = {ni->weight, ni->bias, ni->rmean, ni->rvar};
  for (int i = 0; i < 4; i++) {
    if (ids[i] < 0) continue;
    if (i < 2) plan_ptr(st, bc_plan_name("p%d_%d", res, i));
    else plan_ptr(st, bc_plan_name("v%d", ids[i]));
  }
}

static void plan_launcher(bc_emit *e, const cnorm *cn, const char *k1, const char *k2) {
  if (!bc_plan_on(e)) return;
  const bi_norm_info *ni = &cn->ni;
  int res = cn->res, T = e->threads, in = ni->in;
  bool layer = ni->kind == BI_NK_LAYER || ni->kind == BI_NK_RMS;
  char sh[32], ncs[32], xn[32], yn[32], out[32], buf[48];
  snprintf(sh, sizeof sh, "sh%d", res);
  snprintf(ncs, sizeof ncs, "ncs%d", res);
  snprintf(xn, sizeof xn, "xn%d", res);
  snprintf(yn, sizeof yn, "yn%d", res);
  snprintf(out, sizeof out, "v%d", res);
  bc_plan_arg_name(bc_plan_step(e, "sizes", sh), "v%d", in);
  int lead = layer ? ni->rank - ni->nnorm : 2;
  cJSON *st;
  if (layer) {
    snprintf(buf, sizeof buf, "ncs_a%d", res);
    st = bc_plan_step(e, "prod", buf);
    bc_plan_arg_name(st, "%s", sh);
    bc_plan_arg_int(st, 0);
    bc_plan_arg_int(st, lead);
  }
  snprintf(buf, sizeof buf, "ncs_c%d", res);
  st = bc_plan_step(e, "prod", buf);
  bc_plan_arg_name(st, "%s", sh);
  bc_plan_arg_int(st, lead);
  bc_plan_arg(st, cJSON_CreateNull());
  st = bc_plan_step(e, "list", ncs);
  if (layer) {
    bc_plan_arg(st, named("ncs_a%d", res));
    bc_plan_arg(st, cJSON_CreateNumber(1));
  } else {
    bc_plan_arg(st, item("sh%d", res, 0));
    bc_plan_arg(st, item("sh%d", res, 1));
  }
  bc_plan_arg(st, named("ncs_c%d", res));
  if (ni->kind == BI_NK_GROUP) {
    st = bc_plan_step(e, "require_multiple", NULL);
    bc_plan_arg(st, item("ncs%d", res, 1));
    bc_plan_arg(st, cJSON_CreateNumber((double)ni->groups));
    bc_plan_arg_name(st, "channels do not divide into groups");
  }
  st = bc_plan_step(e, "reshape", xn);
  bc_plan_arg_name(st, "v%d", in);
  bc_plan_arg_name(st, "%s", ncs);
  st = bc_plan_step(e, "empty", out);
  bc_plan_arg_name(st, "%s", sh);
  bc_plan_arg_name(st, "v%d", in);
  bc_plan_arg_name(st, "float32");
  if (cn->out_cl) bc_plan_arg_name(st, "%s", ni->rank == 4 ? "channels_last" : "channels_last_3d");
  st = bc_plan_step(e, "reshape", yn);
  bc_plan_arg_name(st, "%s", out);
  bc_plan_arg_name(st, "%s", ncs);
  char n[32], rows[32], m[32], work[32], chunk[32], part[32], plist[32];
  snprintf(n, sizeof n, "n%d", res);
  snprintf(rows, sizeof rows, "rows%d", res);
  snprintf(m, sizeof m, "m%d", res);
  snprintf(work, sizeof work, "work%d", res);
  snprintf(chunk, sizeof chunk, "chunk%d", res);
  snprintf(part, sizeof part, "part%d", res);
  snprintf(plist, sizeof plist, "partsh%d", res);
  st = bc_plan_step(e, "prod", n);
  bc_plan_arg_name(st, "%s", ncs);
  bc_plan_arg_int(st, 0);
  bc_plan_arg(st, cJSON_CreateNull());
  if (!ni->batch_stats) {
    st = plan_norm_launch(e, k1, n, int2("cdiv", named("n%d", res), cJSON_CreateNumber(T)), T, res, ni, true);
    plan_ptr(st, named("yn%d", res));
    plan_params_after(ni, res, st);
    plan_layout_args(st, res, true);
    plan_int(st, bc_plan_tagged("innermost_channels", named("xn%d", res)));
    return;
  }
  bc_plan_arg(bc_plan_step(e, "int", rows), rows_int(ni, res));
  bc_plan_arg(bc_plan_step(e, "int", m), int2("div", named("n%d", res),
                                              int2("max", named("rows%d", res), cJSON_CreateNumber(1))));
  bc_plan_arg(bc_plan_step(e, "int", work), int2("mul", named("rows%d", res), named("m%d", res)));
  if (e->split == 0) {
    st = plan_norm_launch(e, k1, work, named("rows%d", res), T, res, ni, true);
    plan_ptr(st, named("yn%d", res));
    plan_params_after(ni, res, st);
    plan_layout_args(st, res, true);
    return;
  }
  int S = e->split;
  /* chunk = ((m + S - 1) // S + T - 1) // T * T */
  cJSON *c = int2("div", int2("add", named("m%d", res), cJSON_CreateNumber(S - 1)), cJSON_CreateNumber(S));
  c = int2("mul", int2("div", int2("add", c, cJSON_CreateNumber(T - 1)), cJSON_CreateNumber(T)), cJSON_CreateNumber(T));
  bc_plan_arg(bc_plan_step(e, "int", chunk), c);
  st = bc_plan_step(e, "list", plist);
  bc_plan_arg(st, cJSON_CreateNumber(3));
  bc_plan_arg(st, int2("mul", named("rows%d", res), cJSON_CreateNumber(S)));
  st = bc_plan_step(e, "empty", part);
  bc_plan_arg_name(st, "%s", plist);
  bc_plan_arg_name(st, "%s", xn);
  bc_plan_arg_name(st, "float32");
  cJSON *grid = int2("mul", named("rows%d", res), cJSON_CreateNumber(S));
  st = plan_norm_launch(e, k1, work, grid, T, res, ni, false);
  plan_ptr(st, named("part%d", res));
  plan_layout_args(st, res, false);
  plan_int(st, named("chunk%d", res));
  grid = int2("mul", named("rows%d", res), cJSON_CreateNumber(S));
  st = plan_norm_launch(e, k2, work, grid, T, res, ni, true);
  plan_ptr(st, named("yn%d", res));
  plan_params_after(ni, res, st);
  plan_ptr(st, named("part%d", res));
  plan_layout_args(st, res, true);
  plan_int(st, named("chunk%d", res));
}

/* The fresh versions of the running statistics are the same tensors. */
static void plan_mutations(bc_emit *e, const mk_node *n) {
  for (int k = 0, m = 0; k < n->noutputs && m < n->nmutates; k++) {
    if (returned(n->out, n->outputs[k])) continue;
    char out[32];
    snprintf(out, sizeof out, "v%d", n->outputs[k]);
    bc_plan_arg_name(bc_plan_step(e, "alias", out), "v%d", n->mutates[m++]);
  }
}

int bc_emit_norm_stage(bc_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  cnorm cn;
  int rc = parse(p, s, &cn, err);
  if (rc) return rc;
  bool split = e->split > 0 && cn.ni.batch_stats;
  if (split && e->threads < e->split)
    return mk_errf(err, MK_EINVAL, "split rows need at least %d threads per block", e->split);
  mk_buf k1, k2, t1, t2;
  mk_buf_init(&k1, 256);
  mk_buf_init(&k2, 256);
  mk_buf_init(&t1, 256);
  mk_buf_init(&t2, 256);
  if (!cn.ni.batch_stats) {
    bc_kernel_name(e, s, "norm_eval", &k1);
    emit_eval_kernel(e, &cn, mk_buf_cstr(&k1), &t1);
  } else if (split) {
    bc_kernel_name(e, s, "norm_stats", &k1);
    emit_stats_kernel(e, &cn, mk_buf_cstr(&k1), &t1);
    bc_kernel_name(e, s, "norm_apply", &k2);
    emit_apply_kernel(e, &cn, mk_buf_cstr(&k2), &t2);
  } else {
    bc_kernel_name(e, s, "norm", &k1);
    emit_row_kernel(e, &cn, mk_buf_cstr(&k1), &t1);
  }
  py_launcher(e, s, &cn, mk_buf_cstr(&k1), mk_buf_cstr(&k2));
  /* The fresh versions of the running statistics are the same tensors. */
  rc = mk_pyemit_mutations(cn.n, bi_graph_namer, (void *)p->g, 4, e->body);
  if (rc == 0 && e->cpp) cpp_launcher(e, s, &cn, mk_buf_cstr(&k1), mk_buf_cstr(&k2));
  if (rc == 0) {
    plan_launcher(e, &cn, mk_buf_cstr(&k1), mk_buf_cstr(&k2));
    plan_mutations(e, cn.n);
  }
  if (rc == 0) rc = bc_register_kernel(e, mk_buf_cstr(&k1), mk_buf_cstr(&t1));
  if (rc == 0 && split) rc = bc_register_kernel(e, mk_buf_cstr(&k2), mk_buf_cstr(&t2));
  if (rc != 0 || k1.err || k2.err || t1.err || t2.err || e->cuda->err || e->body->err || (e->cpp && e->cpp->err))
    rc = mk_errf(err, MK_ERANGE, "generated code too large");
  mk_buf_free(&k1);
  mk_buf_free(&k2);
  mk_buf_free(&t1);
  mk_buf_free(&t2);
  return rc;
}
