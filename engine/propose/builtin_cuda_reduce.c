/* builtin_cuda_reduce.c — reductions (sum, mean, max, min, amax, amin,
 * the 1- and 2-norms, logsumexp) and softmax / log_softmax over a run of consecutive dims, as
 * CUDA C++.
 *
 * The input (made contiguous by the launcher) is seen as [OUTER, R, INNER];
 * one block per output element (o, i) strides over R with its threads and
 * combines them with warp shuffles and one shared-memory step
 * (mk_block_reduce in the prelude). With the reduced dims last (INNER = 1,
 * a row reduction) a block reads its row coalesced; over inner dims the
 * reads are strided by INNER (correct, slower: the Triton column tiles are
 * the fast variant there). Softmax makes three passes over its row: max,
 * sum of exponentials, then the normalised store. */
#include "builtin_cuda.h"

#include <stdio.h>
#include <string.h>

typedef struct cred {
  char op[64]; /* sum, mean, max, min, norm1, norm2, logsumexp, softmax, log_softmax */
  int lo, hi;  /* reduced dims, inclusive; hi < lo for a 0-d input */
  bool keepdim;
  int in;      /* input value */
} cred;

/* The plan already accepted the node (bi_reduce_check): its op and dims as
 * the Triton family reads them (bi_reduce_parse), the ops this file writes. */
static int parse(const mk_graph *g, const mk_node *n, cred *r, mk_errmsg *err) {
  *r = (cred){.in = bi_arg_tensor(bi_arg(n, 0, "input"))};
  if (r->in < 0) r->in = bi_arg_tensor(bi_arg(n, 0, "self"));
  if (r->in < 0 || r->in >= g->nvalues) return mk_errf(err, MK_EUNSUPPORTED, "line %d: no input", n->span.line);
  const mk_value *iv = &g->values[r->in];
  if (iv->dtype != MK_DTYPE_F32)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator writes float32 kernels only (%s)",
                   n->span.line, n->op);
  bi_reduce_info ri;
  int rc = bi_reduce_parse(g, n, &ri, err);
  if (rc) return rc;
  /* The Triton family covers more (argmax, scans): only these here. */
  static const char *const known[] = {"sum",       "mean",    "max",         "min",   "norm1",
                                      "norm2",     "logsumexp", "softmax", "log_softmax"};
  bool ok = false;
  for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= !strcmp(ri.op, known[i]);
  if (!ok)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator has no kernel for %s", n->span.line, n->op);
  snprintf(r->op, sizeof r->op, "%s", ri.op);
  r->lo = ri.rank == 0 ? 0 : ri.lo;
  r->hi = ri.hi;
  r->keepdim = ri.keepdim;
  return 0;
}

static bool is_softmax(const cred *r) { return !strcmp(r->op, "softmax") || !strcmp(r->op, "log_softmax"); }

/* Kernel text for the op: `x` is the element at r, `base[r * INNER]`. */
static void kernel_body(const cred *r, mk_buf *k) {
  const char *loop = "  for (long long r = threadIdx.x; r < R; r += blockDim.x) {\n"
                     "    const float x = base[r * INNER];\n";
  if (!strcmp(r->op, "sum") || !strcmp(r->op, "mean")) {
    mk_buf_printf(k, "  float acc = 0.0f;\n%s    acc += x;\n  }\n", loop);
    mk_buf_puts(k, "  acc = mk_block_reduce<mk_add>(acc, 0.0f);\n");
    if (!strcmp(r->op, "mean")) mk_buf_puts(k, "  acc = acc / (float)R;\n");
    mk_buf_puts(k, "  if (threadIdx.x == 0) out[o] = acc;\n");
    return;
  }
  if (!strcmp(r->op, "norm2") || !strcmp(r->op, "norm1")) {
    bool two = !strcmp(r->op, "norm2");
    mk_buf_printf(k, "  float acc = 0.0f;\n%s    acc += %s;\n  }\n", loop, two ? "x * x" : "fabsf(x)");
    mk_buf_puts(k, "  acc = mk_block_reduce<mk_add>(acc, 0.0f);\n");
    if (two) mk_buf_puts(k, "  acc = sqrtf(acc);\n");
    mk_buf_puts(k, "  if (threadIdx.x == 0) out[o] = acc;\n");
    return;
  }
  if (!strcmp(r->op, "max") || !strcmp(r->op, "min")) {
    bool mx = !strcmp(r->op, "max");
    mk_buf_printf(k, "  float acc = %s;\n%s    acc = mk_%s(acc, x);\n  }\n",
                  mx ? "-MK_INF" : "MK_INF", loop, mx ? "max" : "min");
    mk_buf_printf(k, "  acc = mk_block_reduce<mk_%s>(acc, %s);\n", mx ? "max" : "min", mx ? "-MK_INF" : "MK_INF");
    mk_buf_puts(k, "  if (threadIdx.x == 0) out[o] = acc;\n");
    return;
  }
  /* logsumexp and softmax: the maximum, then the sum of exp(x - max). */
  mk_buf_printf(k, "  float m = -MK_INF;\n%s    m = mk_max(m, x);\n  }\n", loop);
  mk_buf_puts(k, "  m = mk_block_reduce<mk_max>(m, -MK_INF);\n"
                 "  /* All -inf (or +inf present): exp(x - m) would be NaN; shift by 0 instead. */\n"
                 "  const float shift = isinf(m) ? 0.0f : m;\n"
                 "  float s = 0.0f;\n");
  mk_buf_printf(k, "%s    s += expf(x - shift);\n  }\n", loop);
  mk_buf_puts(k, "  s = mk_block_reduce<mk_add>(s, 0.0f);\n");
  if (!strcmp(r->op, "logsumexp")) {
    mk_buf_puts(k, "  if (threadIdx.x == 0) out[o] = shift + logf(s);\n");
    return;
  }
  mk_buf_printf(k, "  float *dst = out + (o / INNER) * R * INNER + (o %% INNER);\n%s", loop);
  if (!strcmp(r->op, "softmax")) mk_buf_puts(k, "    dst[r * INNER] = expf(x - shift) / s;\n  }\n");
  else mk_buf_puts(k, "    dst[r * INNER] = (x - shift) - logf(s);\n  }\n");
}

static void launcher(bc_emit *e, int s, const cred *r, int res, const char *kname) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  bi_stage_comment(p, s, 4, b);
  mk_buf_printf(b, "    in%d = ", res);
  bi_run_name(p, r->in, b);
  mk_buf_puts(b, ".contiguous()\n");
  int lo = r->lo, hi = r->hi;
  if (hi < lo) lo = hi = 0; /* 0-d input: R = 1 */
  mk_buf_printf(b, "    sh%d = tuple(in%d.shape)\n", res, res);
  mk_buf_printf(b, "    r%d = math.prod(sh%d[%d:%d])\n", res, res, lo, r->hi < r->lo ? lo : hi + 1);
  mk_buf_printf(b, "    inner%d = math.prod(sh%d[%d:])\n", res, res, r->hi < r->lo ? 0 : hi + 1);
  mk_buf_printf(b, "    nout%d = math.prod(sh%d[:%d]) * inner%d\n", res, res, lo, res);
  if (is_softmax(r)) mk_buf_printf(b, "    out%d = sh%d\n", res, res);
  else if (r->keepdim)
    mk_buf_printf(b, "    out%d = sh%d[:%d] + (1,) * %d + sh%d[%d:]\n", res, res, lo, hi - lo + 1, res, hi + 1);
  else if (r->hi < r->lo) mk_buf_printf(b, "    out%d = ()\n", res);
  else mk_buf_printf(b, "    out%d = sh%d[:%d] + sh%d[%d:]\n", res, res, lo, res, hi + 1);
  mk_buf_indent(b, 4);
  bi_run_name(p, res, b);
  mk_buf_printf(b, " = torch.empty(out%d, device=in%d.device, dtype=torch.float32)\n", res, res);
  mk_buf_printf(b, "    if nout%d > 0:\n", res);
  mk_buf_printf(b, "        _mk_cuda.launch(\"%s\", (nout%d,), (%d,), (in%d, ", kname, res, e->threads, res);
  bi_run_name(p, res, b);
  mk_buf_printf(b, ", r%d, inner%d))\n", res, res);
}

/* The launcher above as C++ (mkevolve export): the same slices of the
 * input's shape (mk_prod clamps as Python's slices do), the same grid. */
static void cpp_launcher(bc_emit *e, int s, const cred *r, int res, const char *kname) {
  mk_buf *b = e->cpp;
  bc_cpp_comment(e, s);
  int lo = r->lo, hi = r->hi;
  bool zero_d = r->hi < r->lo;
  if (zero_d) lo = hi = 0; /* 0-d input: R = 1 */
  mk_buf_printf(b, "  const at::Tensor in%d = v%d.contiguous();\n", res, r->in);
  mk_buf_printf(b, "  const std::vector<int64_t> sh%d = in%d.sizes().vec();\n", res, res);
  mk_buf_printf(b, "  const int64_t r%d = mk_prod(sh%d, %d, %d);\n", res, res, lo, zero_d ? lo : hi + 1);
  mk_buf_printf(b, "  const int64_t inner%d = mk_prod(sh%d, %d, sh%d.size());\n", res, res, zero_d ? 0 : hi + 1, res);
  mk_buf_printf(b, "  const int64_t nout%d = mk_prod(sh%d, 0, %d) * inner%d;\n", res, res, lo, res);
  mk_buf_printf(b, "  at::Tensor v%d = at::empty(", res);
  if (is_softmax(r)) mk_buf_printf(b, "sh%d", res);
  else if (zero_d && !r->keepdim) mk_buf_puts(b, "std::vector<int64_t>{}");
  else mk_buf_printf(b, "mk_reduced_shape(sh%d, %d, %d, %s)", res, lo, hi, r->keepdim ? "true" : "false");
  mk_buf_printf(b, ", at::TensorOptions().device(in%d.device()).dtype(at::kFloat));\n", res);
  mk_buf_printf(b, "  if (nout%d > 0) {\n    const c10::cuda::CUDAGuard guard(in%d.device());\n", res, res);
  mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s(nout%d, %d, mk_stream(in%d), mk_ptr<float>(in%d), mk_ptr<float>(v%d), "
                   "r%d, inner%d));\n  }\n",
                kname, e->cpp_ns, kname, res, e->threads, res, res, res, res, res);
}

/* The launcher above as launch-plan steps (builtin_cuda_plan.c). */
static void plan_launcher(bc_emit *e, const cred *r, int res, const char *kname) {
  if (!bc_plan_on(e)) return;
  int lo = r->lo, hi = r->hi;
  bool zero_d = r->hi < r->lo;
  if (zero_d) lo = hi = 0; /* 0-d input: R = 1 */
  char in[32], sh[32], rr[32], inner[32], nout0[32], nout[32], os[32], out[32];
  snprintf(in, sizeof in, "in%d", res);
  snprintf(sh, sizeof sh, "sh%d", res);
  snprintf(rr, sizeof rr, "r%d", res);
  snprintf(inner, sizeof inner, "inner%d", res);
  snprintf(nout0, sizeof nout0, "outer%d", res);
  snprintf(nout, sizeof nout, "nout%d", res);
  snprintf(out, sizeof out, "v%d", res);
  bc_plan_arg_name(bc_plan_step(e, "contiguous", in), "v%d", r->in);
  bc_plan_arg_name(bc_plan_step(e, "sizes", sh), "%s", in);
  cJSON *st = bc_plan_step(e, "prod", rr);
  bc_plan_arg_name(st, "%s", sh);
  bc_plan_arg_int(st, lo);
  bc_plan_arg_int(st, zero_d ? lo : hi + 1);
  st = bc_plan_step(e, "prod", inner);
  bc_plan_arg_name(st, "%s", sh);
  bc_plan_arg_int(st, zero_d ? 0 : hi + 1);
  bc_plan_arg(st, cJSON_CreateNull());
  st = bc_plan_step(e, "prod", nout0);
  bc_plan_arg_name(st, "%s", sh);
  bc_plan_arg_int(st, 0);
  bc_plan_arg_int(st, lo);
  st = bc_plan_step(e, "mul", nout);
  bc_plan_arg_name(st, "%s", nout0);
  bc_plan_arg_name(st, "%s", inner);
  bool literal = zero_d && !r->keepdim; /* a 0-d result: the shape () */
  if (is_softmax(r)) {
    snprintf(os, sizeof os, "%s", sh);
  } else if (!literal) {
    snprintf(os, sizeof os, "os%d", res);
    st = bc_plan_step(e, "reduced_shape", os);
    bc_plan_arg_name(st, "%s", sh);
    bc_plan_arg_int(st, lo);
    bc_plan_arg_int(st, hi);
    bc_plan_arg(st, cJSON_CreateBool(r->keepdim));
  }
  st = bc_plan_step(e, "empty", out);
  if (literal) bc_plan_arg(st, cJSON_CreateArray());
  else bc_plan_arg_name(st, "%s", os);
  bc_plan_arg_name(st, "%s", in);
  bc_plan_arg_name(st, "float32");
  st = bc_plan_launch(e, kname, nout, cJSON_CreateString(nout), e->threads);
  bc_plan_arg(st, bc_plan_tagged("ptr", cJSON_CreateString(in)));
  bc_plan_arg(st, bc_plan_tagged("ptr", cJSON_CreateString(out)));
  bc_plan_arg(st, bc_plan_tagged("int", cJSON_CreateString(rr)));
  bc_plan_arg(st, bc_plan_tagged("int", cJSON_CreateString(inner)));
}

int bc_emit_reduce_stage(bc_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  cred r;
  int rc = parse(p->g, n, &r, err);
  if (rc) return rc;
  for (int o = 1; o < n->noutputs; o++)
    if (bi_value_escapes(p, s, n->outputs[o]))
      return mk_errf(err, MK_EUNSUPPORTED, "line %d: the indices of %s are used", n->span.line, n->op);
  int res = n->outputs[0];
  mk_buf kname;
  mk_buf_init(&kname, 256);
  bc_kernel_name(e, s, is_softmax(&r) ? "softmax" : "reduce", &kname);
  mk_buf *k = e->cuda;
  mk_buf_printf(k, "\n// replaces: %s (line %d)\n", n->op, n->span.line);
  mk_buf_printf(k, "extern \"C\" __global__ void %s(const float *__restrict__ in, float *__restrict__ out,\n"
                   "    long long R, long long INNER) {\n",
                mk_buf_cstr(&kname));
  mk_buf_puts(k, "  const long long o = blockIdx.x;  // output element (outer, inner)\n"
                 "  const float *base = in + (o / INNER) * R * INNER + (o % INNER);\n");
  kernel_body(&r, k);
  mk_buf_puts(k, "}\n");
  launcher(e, s, &r, res, mk_buf_cstr(&kname));
  if (e->cpp) cpp_launcher(e, s, &r, res, mk_buf_cstr(&kname));
  plan_launcher(e, &r, res, mk_buf_cstr(&kname));
  char types[8] = {BC_ARG_F32, BC_ARG_F32, BC_ARG_I64, BC_ARG_I64, 0};
  rc = bc_register_kernel(e, mk_buf_cstr(&kname), types);
  if (rc == 0 && (k->err || e->body->err || kname.err || (e->cpp && e->cpp->err))) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  mk_buf_free(&kname);
  return rc;
}
