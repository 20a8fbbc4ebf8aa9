/* builtin_cuda_pool.c — max / avg pooling 1-3d and adaptive avg / max
 * pooling as CUDA C++: the pool stages of bi_plan, with the Triton emitter's
 * semantics (builtin_pool.c: torch's windows, NaN propagation, divisors).
 *
 * One thread per output element. The input is read through its strides
 * ([N, C, *spatial]; an input without a batch dim is unsqueezed), so NCHW and
 * channels_last inputs need no copy; the thread order follows the input's
 * memory order (CL: channels innermost, so neighbouring threads read
 * neighbouring channels of one pixel; else pixels innermost). The output is
 * written through its strides too, in the layout the program's plan gives the
 * value. Fixed windows are unrolled up to 64 taps (loops beyond); adaptive
 * windows [floor(o*I/O), ceil((o+1)*I/O)) loop over their own size. Out of
 * range taps are skipped: max starts at -inf and keeps NaN once seen (as
 * torch), avg divides as torch does (count_include_pad counts the padding
 * inside the clipped window; divisor_override replaces it). Output sizes come
 * from torch's formula in the launcher (_pool_out_size, builtin_pool.c). The
 * [pixels x channels] tiles of the Triton emitter (coalesced loads and stores
 * across layouts) are not generated: with a channels_last input and a
 * contiguous output the stores are strided. */
#include "builtin_cuda.h"

#include "mk_layout.h"

#include <stdio.h>
#include <string.h>

/* The output is allocated channels_last when the plan makes it so (4-d / 5-d). */
static bool out_channels_last(const bi_plan *p, const bi_pool_info *pi, int res) {
  return (pi->rank == 4 || pi->rank == 5) && pi->rank == pi->nd + 2 && p->layout && p->is_output[res] &&
         p->layout[res] == MK_LAYOUT_CHANNELS_LAST;
}

static void kernel_params(const bi_pool_info *pi, mk_buf *sig, mk_buf *types) {
  int nd = pi->nd;
  mk_buf_puts(sig, "const float *__restrict__ x, float *__restrict__ y, long long N, long long C");
  mk_buf_puts(types, "ffqq");
  for (int d = 0; d < nd; d++) mk_buf_printf(sig, ", long long I%d", d);
  for (int d = 0; d < nd; d++) mk_buf_printf(sig, ", long long O%d", d);
  mk_buf_puts(sig, ", long long sN, long long sC");
  for (int d = 0; d < nd; d++) mk_buf_printf(sig, ", long long s%d", d);
  mk_buf_puts(sig, ", long long tN, long long tC");
  for (int d = 0; d < nd; d++) mk_buf_printf(sig, ", long long t%d", d);
  mk_buf_puts(sig, ", long long CL");
  for (int i = 0; i < 4 * nd + 5; i++) mk_buf_putc(types, BC_ARG_I64);
}

/* The output element's (n, c, o0..) from the thread's offset, in the input's order. */
static void index_lines(const bi_pool_info *pi, mk_buf *k) {
  int nd = pi->nd;
  mk_buf_puts(k, "  const long long offs = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
                 "  if (offs >= N * C");
  for (int d = 0; d < nd; d++) mk_buf_printf(k, " * O%d", d);
  mk_buf_puts(k, ") return;\n  long long t = offs, n, c");
  for (int d = 0; d < nd; d++) mk_buf_printf(k, ", o%d", d);
  mk_buf_puts(k, ";\n  if (CL) {  // channels innermost, as a channels_last input\n    c = t % C;\n    t /= C;\n");
  for (int d = nd - 1; d >= 0; d--) mk_buf_printf(k, "    o%d = t %% O%d;\n    t /= O%d;\n", d, d, d);
  mk_buf_puts(k, "    n = t;\n  } else {\n");
  for (int d = nd - 1; d >= 0; d--) mk_buf_printf(k, "    o%d = t %% O%d;\n    t /= O%d;\n", d, d, d);
  mk_buf_puts(k, "    c = t % C;\n    n = t / C;\n  }\n"
                 "  const float *xb = x + n * sN + c * sC;\n");
}

static void window_loops(const bi_pool_info *pi, bool unroll, mk_buf *k) {
  int nd = pi->nd;
  for (int d = 0; d < nd; d++) {
    int ind = 2 + 2 * d;
    if (pi->adaptive) {
      mk_buf_indent(k, ind);
      mk_buf_printf(k, "for (long long i%d = lo%d; i%d < hi%d; i%d++) {\n", d, d, d, d, d);
      continue;
    }
    if (unroll) {
      mk_buf_indent(k, ind);
      mk_buf_puts(k, "#pragma unroll\n");
    }
    mk_buf_indent(k, ind);
    mk_buf_printf(k, "for (int k%d = 0; k%d < %lld; k%d++) {\n", d, d, pi->k[d], d);
    mk_buf_indent(k, ind + 2);
    mk_buf_printf(k, "const long long i%d = o%d * %lldLL - %lldLL + k%d * %lldLL;\n", d, d, pi->st[d], pi->pad[d], d,
                  pi->dil[d]);
    mk_buf_indent(k, ind + 2);
    mk_buf_printf(k, "if (i%d < 0 || i%d >= I%d) continue;\n", d, d, d);
  }
  int ind = 2 + 2 * nd;
  mk_buf_indent(k, ind);
  mk_buf_puts(k, "const float v = xb[");
  for (int d = 0; d < nd; d++) mk_buf_printf(k, "%si%d * s%d", d ? " + " : "", d, d);
  mk_buf_puts(k, "];\n");
  mk_buf_indent(k, ind);
  if (pi->is_max) mk_buf_puts(k, "acc = (v > acc || v != v) ? v : acc;  // NaN propagates\n");
  else mk_buf_puts(k, "acc += v;\n");
  for (int d = nd - 1; d >= 0; d--) {
    mk_buf_indent(k, 2 + 2 * d);
    mk_buf_puts(k, "}\n");
  }
}

/* The divisor, as torch's avg_pool / adaptive_avg_pool compute it. */
static void divisor_lines(const bi_pool_info *pi, mk_buf *k) {
  int nd = pi->nd;
  if (pi->is_max) return;
  if (pi->adaptive) {
    mk_buf_puts(k, "  acc = acc / (float)(");
    for (int d = 0; d < nd; d++) mk_buf_printf(k, "%s(hi%d - lo%d)", d ? " * " : "", d, d);
    mk_buf_puts(k, ");\n");
    return;
  }
  if (pi->divisor) {
    mk_buf_printf(k, "  acc = acc / %lld.0f;\n", pi->divisor);
    return;
  }
  for (int d = 0; d < nd; d++) {
    mk_buf_printf(k, "  long long a%d = o%d * %lldLL - %lldLL;\n", d, d, pi->st[d], pi->pad[d]);
    mk_buf_printf(k, "  long long e%d = a%d + %lldLL < I%d + %lldLL ? a%d + %lldLL : I%d + %lldLL;\n", d, d, pi->k[d], d,
                  pi->pad[d], d, pi->k[d], d, pi->pad[d]);
    if (!pi->count_include_pad)
      mk_buf_printf(k, "  a%d = a%d > 0 ? a%d : 0;\n  e%d = e%d < I%d ? e%d : I%d;\n", d, d, d, d, d, d, d, d);
  }
  mk_buf_puts(k, "  acc = acc / (float)(");
  for (int d = 0; d < nd; d++) mk_buf_printf(k, "%s(e%d - a%d)", d ? " * " : "", d, d);
  mk_buf_puts(k, ");\n");
}

static void emit_kernel(bc_emit *e, const mk_node *n, const bi_pool_info *pi, const char *kname, mk_buf *types) {
  mk_buf *k = e->cuda;
  int nd = pi->nd;
  mk_buf sig;
  mk_buf_init(&sig, 4096);
  kernel_params(pi, &sig, types);
  mk_buf_printf(k, "\n// replaces: %s (line %d)\nextern \"C\" __global__ void %s(%s) {\n", n->op, n->span.line, kname,
                mk_buf_cstr(&sig));
  if (sig.err) k->err = sig.err;
  mk_buf_free(&sig);
  index_lines(pi, k);
  if (pi->adaptive)
    for (int d = 0; d < nd; d++)
      mk_buf_printf(k, "  const long long lo%d = o%d * I%d / O%d, hi%d = ((o%d + 1) * I%d + O%d - 1) / O%d;\n", d,
                    d, d, d, d, d, d, d, d);
  mk_buf_puts(k, pi->is_max ? "  float acc = -MK_INF;\n" : "  float acc = 0.0f;\n");
  long long taps = 1;
  for (int d = 0; d < nd; d++) taps *= pi->adaptive ? 4 : pi->k[d];
  window_loops(pi, taps <= 64, k);
  divisor_lines(pi, k);
  mk_buf_puts(k, "  y[n * tN + c * tC");
  for (int d = 0; d < nd; d++) mk_buf_printf(k, " + o%d * t%d", d, d);
  mk_buf_puts(k, "] = acc;\n}\n");
}

/* run(...) lines: the input as [N, C, *spatial], torch's output sizes, the
 * output in the plan's layout, one launch. */
static void py_launcher(bc_emit *e, int s, const bi_pool_info *pi, int res, bool out_cl, const char *kname) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  int nd = pi->nd, lead = pi->rank - nd, T = e->threads;
  bool batched = lead == 2;
  bi_stage_comment(p, s, 4, b);
  mk_buf_printf(b, "    xp%d = ", res);
  bi_run_name(p, pi->in, b);
  mk_buf_puts(b, batched ? "\n" : ".unsqueeze(0)  # no batch dim: N = 1\n");
  mk_buf_printf(b, "    sp%d = tuple(xp%d.shape[2:])\n    osz%d = (", res, res, res);
  for (int d = 0; d < nd; d++) {
    if (pi->adaptive) {
      if (pi->osz[d] < 0) mk_buf_printf(b, "sp%d[%d], ", res, d);
      else mk_buf_printf(b, "%lld, ", pi->osz[d]);
    } else {
      mk_buf_printf(b, "_pool_out_size(sp%d[%d], %lld, %lld, %lld, %lld, %s), ", res, d, pi->k[d], pi->st[d],
                    pi->pad[d], pi->dil[d], pi->ceil_mode ? "True" : "False");
    }
  }
  mk_buf_puts(b, ")\n");
  if (!pi->adaptive) e->need_pool = true;
  mk_buf_indent(b, 4);
  bi_run_name(p, res, b);
  mk_buf_printf(b, " = torch.empty(tuple(xp%d.shape[%d:2]) + osz%d, device=xp%d.device, dtype=torch.float32%s)\n", res,
                batched ? 0 : 1, res, res,
                out_cl ? (pi->rank == 4 ? ", memory_format=torch.channels_last"
                                        : ", memory_format=torch.channels_last_3d")
                       : "");
  mk_buf_printf(b, "    yp%d = ", res);
  bi_run_name(p, res, b);
  mk_buf_puts(b, batched ? "\n" : ".unsqueeze(0)\n");
  mk_buf_printf(b, "    n%d = yp%d.numel()\n", res, res);
  mk_buf_printf(b, "    cl%d = 1 if xp%d.stride(1) == 1 and xp%d.shape[1] > 1 else 0\n", res, res, res);
  mk_buf_printf(b, "    if n%d > 0:\n        _mk_cuda.launch(\"%s\", ((n%d + %d) // %d,), (%d,),\n"
                   "                        (xp%d, yp%d, xp%d.shape[0], xp%d.shape[1], *sp%d, *osz%d,\n"
                   "                         *xp%d.stride(), *yp%d.stride(), cl%d))\n",
                res, kname, res, T - 1, T, T, res, res, res, res, res, res, res, res, res);
}

/* The launcher above as C++ (mkevolve export). */
static void cpp_launcher(bc_emit *e, int s, const bi_pool_info *pi, int res, bool out_cl, const char *kname) {
  mk_buf *b = e->cpp;
  int nd = pi->nd, lead = pi->rank - nd, T = e->threads;
  bool batched = lead == 2;
  bc_cpp_comment(e, s);
  mk_buf_printf(b, "  const at::Tensor xp%d = v%d%s;\n", res, pi->in, batched ? "" : ".unsqueeze(0)");
  mk_buf_printf(b, "  std::vector<int64_t> osz%d = {", res);
  for (int d = 0; d < nd; d++) {
    if (pi->adaptive) {
      if (pi->osz[d] < 0) mk_buf_printf(b, "%sxp%d.size(%d)", d ? ", " : "", res, d + 2);
      else mk_buf_printf(b, "%s%lld", d ? ", " : "", pi->osz[d]);
    } else {
      mk_buf_printf(b, "%smk_pool_out_size(xp%d.size(%d), %lld, %lld, %lld, %lld, %s)", d ? ", " : "", res, d + 2,
                    pi->k[d], pi->st[d], pi->pad[d], pi->dil[d], pi->ceil_mode ? "true" : "false");
    }
  }
  mk_buf_puts(b, "};\n");
  mk_buf_printf(b, "  std::vector<int64_t> osh%d = xp%d.sizes().slice(%d, %d).vec();\n", res, res, batched ? 0 : 1,
                batched ? 2 : 1);
  mk_buf_printf(b, "  osh%d.insert(osh%d.end(), osz%d.begin(), osz%d.end());\n", res, res, res, res);
  mk_buf_printf(b, "  at::Tensor v%d = at::empty(osh%d, at::TensorOptions().device(xp%d.device()).dtype(at::kFloat)%s);\n",
                res, res, res,
                out_cl ? (pi->rank == 4 ? ".memory_format(at::MemoryFormat::ChannelsLast)"
                                        : ".memory_format(at::MemoryFormat::ChannelsLast3d)")
                       : "");
  mk_buf_printf(b, "  const at::Tensor yp%d = v%d%s;\n", res, res, batched ? "" : ".unsqueeze(0)");
  mk_buf_printf(b, "  const int64_t n%d = yp%d.numel();\n", res, res);
  mk_buf_printf(b, "  const int64_t cl%d = xp%d.stride(1) == 1 && xp%d.size(1) > 1 ? 1 : 0;\n", res, res, res);
  mk_buf_printf(b, "  if (n%d > 0) {\n    const c10::cuda::CUDAGuard guard(xp%d.device());\n", res, res);
  mk_buf_printf(b, "    mk_launch(\"%s\", %s::%s((n%d + %d) / %d, %d, mk_stream(xp%d), mk_ptr<float>(xp%d), "
                   "mk_ptr<float>(yp%d), xp%d.size(0), xp%d.size(1)",
                kname, e->cpp_ns, kname, res, T - 1, T, T, res, res, res, res, res);
  for (int d = 0; d < nd; d++) mk_buf_printf(b, ", xp%d.size(%d)", res, d + 2);
  for (int d = 0; d < nd; d++) mk_buf_printf(b, ", osz%d[%d]", res, d);
  for (int d = 0; d < nd + 2; d++) mk_buf_printf(b, ", xp%d.stride(%d)", res, d);
  for (int d = 0; d < nd + 2; d++) mk_buf_printf(b, ", yp%d.stride(%d)", res, d);
  mk_buf_printf(b, ", cl%d));\n  }\n", res);
}

static cJSON *size_of(const char *t, int d) {
  cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "size");
  cJSON_AddItemToArray(a, cJSON_CreateString(t));
  cJSON_AddItemToArray(a, cJSON_CreateNumber(d));
  return o;
}

static cJSON *stride_of(const char *t, int d) {
  cJSON *o = size_of(t, d);
  cJSON *a = cJSON_DetachItemFromObject(o, "size");
  cJSON_AddItemToObject(o, "stride", a);
  return o;
}

/* `out` = t, or t.unsqueeze(0) for an input without a batch dim. */
static void plan_batched(bc_emit *e, const char *out, int vid, bool batched) {
  cJSON *st = bc_plan_step(e, batched ? "alias" : "unsqueeze", out);
  bc_plan_arg_name(st, "v%d", vid);
  if (!batched) bc_plan_arg_int(st, 0);
}

/* The launcher above as launch-plan steps (builtin_cuda_plan.c). */
static void plan_launcher(bc_emit *e, const bi_pool_info *pi, int res, bool out_cl, const char *kname) {
  if (!bc_plan_on(e)) return;
  int nd = pi->nd, T = e->threads;
  bool batched = pi->rank - nd == 2;
  char xp[32], yp[32], osz[32], osh[32], n[32], out[32];
  snprintf(xp, sizeof xp, "xp%d", res);
  snprintf(yp, sizeof yp, "yp%d", res);
  snprintf(osz, sizeof osz, "osz%d", res);
  snprintf(osh, sizeof osh, "osh%d", res);
  snprintf(n, sizeof n, "n%d", res);
  snprintf(out, sizeof out, "v%d", res);
  plan_batched(e, xp, pi->in, batched);
  cJSON *st = bc_plan_step(e, "list", osz);
  for (int d = 0; d < nd; d++) {
    if (pi->adaptive) {
      bc_plan_arg(st, pi->osz[d] < 0 ? size_of(xp, d + 2) : cJSON_CreateNumber((double)pi->osz[d]));
      continue;
    }
    cJSON *po = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(po, "pool_out");
    cJSON_AddItemToArray(a, size_of(xp, d + 2));
    long long spec[] = {pi->k[d], pi->st[d], pi->pad[d], pi->dil[d]};
    for (int i = 0; i < 4; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)spec[i]));
    cJSON_AddItemToArray(a, cJSON_CreateBool(pi->ceil_mode));
    bc_plan_arg(st, po);
  }
  st = bc_plan_step(e, "list", osh);
  if (batched) bc_plan_arg(st, size_of(xp, 0));
  bc_plan_arg(st, size_of(xp, 1));
  for (int d = 0; d < nd; d++) bc_plan_arg(st, bc_plan_item(osz, d));
  st = bc_plan_step(e, "empty", out);
  bc_plan_arg_name(st, "%s", osh);
  bc_plan_arg_name(st, "%s", xp);
  bc_plan_arg_name(st, "float32");
  if (out_cl) bc_plan_arg_name(st, "%s", pi->rank == 4 ? "channels_last" : "channels_last_3d");
  plan_batched(e, yp, res, batched);
  bc_plan_arg_name(bc_plan_step(e, "numel", n), "%s", yp);
  cJSON *cdiv = cJSON_CreateObject(), *c = cJSON_AddArrayToObject(cdiv, "cdiv");
  cJSON_AddItemToArray(c, cJSON_CreateString(n));
  cJSON_AddItemToArray(c, cJSON_CreateNumber(T));
  st = bc_plan_launch(e, kname, n, cdiv, T);
  bc_plan_arg(st, bc_plan_tagged("ptr", cJSON_CreateString(xp)));
  bc_plan_arg(st, bc_plan_tagged("ptr", cJSON_CreateString(yp)));
  bc_plan_arg(st, bc_plan_tagged("int", size_of(xp, 0)));
  bc_plan_arg(st, bc_plan_tagged("int", size_of(xp, 1)));
  for (int d = 0; d < nd; d++) bc_plan_arg(st, bc_plan_tagged("int", size_of(xp, d + 2)));
  for (int d = 0; d < nd; d++) bc_plan_arg(st, bc_plan_tagged("int", bc_plan_item(osz, d)));
  for (int d = 0; d < nd + 2; d++) bc_plan_arg(st, bc_plan_tagged("int", stride_of(xp, d)));
  for (int d = 0; d < nd + 2; d++) bc_plan_arg(st, bc_plan_tagged("int", stride_of(yp, d)));
  bc_plan_arg(st, bc_plan_tagged("int", bc_plan_tagged("innermost_channels", cJSON_CreateString(xp))));
}

int bc_emit_pool_stage(bc_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const mk_node *n = &p->g->nodes[p->st[s].nodes[0]];
  bi_pool_info pi;
  int rc = bi_pool_parse(p->g, n, &pi, err);
  if (rc) return rc;
  if (p->g->values[pi.in].dtype != MK_DTYPE_F32)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator writes float32 kernels only (%s)",
                   n->span.line, n->op);
  int res = n->outputs[0];
  bool out_cl = out_channels_last(p, &pi, res);
  mk_buf kname, types;
  mk_buf_init(&kname, 256);
  mk_buf_init(&types, 256);
  bc_kernel_name(e, s, "pool", &kname);
  emit_kernel(e, n, &pi, mk_buf_cstr(&kname), &types);
  py_launcher(e, s, &pi, res, out_cl, mk_buf_cstr(&kname));
  if (e->cpp) cpp_launcher(e, s, &pi, res, out_cl, mk_buf_cstr(&kname));
  plan_launcher(e, &pi, res, out_cl, mk_buf_cstr(&kname));
  rc = bc_register_kernel(e, mk_buf_cstr(&kname), mk_buf_cstr(&types));
  if (rc != 0 || kname.err || types.err || e->cuda->err || e->body->err || (e->cpp && e->cpp->err))
    rc = mk_errf(err, MK_ERANGE, "generated code too large");
  mk_buf_free(&kname);
  mk_buf_free(&types);
  return rc;
}
