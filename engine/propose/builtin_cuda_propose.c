/* builtin_cuda_propose.c — mk_builtin_cuda_propose: the builtin generator's
 * CUDA C++ candidates. Plans the subkernel with bi_plan (the Triton
 * emitters' plan), writes each stage in order — elementwise runs,
 * reductions / softmax, norms, pools and GEMMs (with their fused epilogue)
 * as CUDA kernels, views and convolutions as the recorded torch calls — and
 * assembles one module per configuration (threads per block; split norm
 * rows where rows are long; GEMM tiles and precision where the subkernel has
 * a GEMM), default first. Module format: docs/candidates.md. */
#include "builtin_cuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Configurations, in the order proposed; index 0 is the default. Threads
 * per block are multiples of 32 (warp shuffles). The split-rows variant
 * (norms with input statistics: BC_NORM_SPLIT blocks per row) is proposed
 * only where a norm's rows are long (bc_norm_splits): few long rows (batch
 * norm: one row per channel) leave most SMs idle with one block per row. */
typedef struct bc_config {
  const char *name;
  int threads, split;
  bc_gemm_cfg gemm; /* bm == 0: a configuration for subkernels without a GEMM */
} bc_config;

/* A subkernel with a GEMM gets the GEMM configurations only (the other
 * kernels of it with 256 threads): 3xTF32 first (float32-accurate), the
 * small tile for small or skinny products, plain TF32 last (faster, about
 * 1e-3 relative: the verifier's comparison decides, docs/verify.md). One
 * without a GEMM gets the others. */
static const bc_config config_table[] = {
    {"cuda_t256", 256, 0, {0}},
    {"cuda_t256_split32", 256, BC_NORM_SPLIT, {0}},
    {"cuda_t128", 128, 0, {0}},
    {"cuda_t512", 512, 0, {0}},
    {"cuda_gemm128x128_3xtf32", 256, 0, {128, 128, 32, 64, 32, true}},
    {"cuda_gemm64x64_3xtf32", 256, 0, {64, 64, 32, 32, 32, true}},
    {"cuda_gemm128x128_tf32", 256, 0, {128, 128, 32, 64, 32, false}},
};
#define BC_NCONFIGS ((int)(sizeof config_table / sizeof config_table[0]))

/* Whether configuration c makes a candidate distinct from the others for plan p. */
static bool config_applies(const bc_config *c, const bi_plan *p) {
  if ((c->gemm.bm > 0) != bc_plan_has_gemm(p)) return false;
  return c->split == 0 || bc_norm_splits(p);
}

static const char prelude[] =
    "#define MK_INF __int_as_float(0x7f800000)\n"
    "// NaN-propagating max/min, as torch.maximum / torch.minimum / torch.clamp.\n"
    "__device__ __forceinline__ float mk_add(float a, float b) { return a + b; }\n"
    "__device__ __forceinline__ float mk_max(float a, float b) { return (a > b || a != a) ? a : b; }\n"
    "__device__ __forceinline__ float mk_min(float a, float b) { return (a < b || a != a) ? a : b; }\n"
    "__device__ __forceinline__ float mk_relu(float a) { return (a > 0.0f || a != a) ? a : 0.0f; }\n"
    "__device__ __forceinline__ float mk_sigmoid(float a) { return 1.0f / (1.0f + expf(-a)); }\n"
    "__device__ __forceinline__ float mk_sign(float a) { return a > 0.0f ? 1.0f : (a < 0.0f ? -1.0f : 0.0f); }\n"
    "__device__ __forceinline__ float mk_softplus(float a, float beta, float threshold) {\n"
    "  return a * beta > threshold ? a : log1pf(expf(a * beta)) / beta;\n"
    "}\n"
    "// Block-wide reduction: warp shuffles, then every warp combines the warps'\n"
    "// partials, so every thread returns the result. blockDim.x % 32 == 0.\n"
    "template <float (*OP)(float, float)>\n"
    "__device__ float mk_block_reduce(float v, float identity) {\n"
    "  __shared__ float part[32];\n"
    "  for (int k = 16; k > 0; k >>= 1) v = OP(v, __shfl_xor_sync(0xffffffffu, v, k));\n"
    "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
    "  __syncthreads();  // part[] may still be read by a previous call\n"
    "  if (lane == 0) part[warp] = v;\n"
    "  __syncthreads();\n"
    "  v = lane < (int)((blockDim.x + 31) >> 5) ? part[lane] : identity;\n"
    "  for (int k = 16; k > 0; k >>= 1) v = OP(v, __shfl_xor_sync(0xffffffffu, v, k));\n"
    "  return v;\n"
    "}\n";

const char *bc_prelude(void) { return prelude; }

static const char py_helpers[] =
    "\n\ndef _mk_full(t, shape):\n"
    "    \"\"\"A leaf read at the flat offset: it must have the run's shape, as at capture.\"\"\"\n"
    "    if tuple(t.shape) != tuple(shape):\n"
    "        raise ValueError(\"operand shape differs from the captured one\")\n"
    "    return t.contiguous()\n"
    "\n\ndef _mk_inplace(t, shape):\n"
    "    \"\"\"A leaf written in place: the run's shape and contiguous, so the kernel writes it.\"\"\"\n"
    "    if tuple(t.shape) != tuple(shape) or not t.is_contiguous():\n"
    "        raise ValueError(\"an in-place operand must be contiguous with the run's shape\")\n"
    "    return t\n"
    "\n\ndef _mk_bstrides(t, shape):\n"
    "    \"\"\"Strides of t broadcast to shape (0 on broadcast dims), whatever its layout.\"\"\"\n"
    "    return torch.broadcast_to(t, shape).stride()\n";

const char *bc_py_helpers(void) { return py_helpers; }

int bc_kernel_name(bc_emit *e, int s, const char *what, mk_buf *out) {
  e->kcount++;
  mk_buf_printf(out, "_k%d_%s_", e->kcount, what);
  return bi_stage_label(e->p, s, out);
}

int bc_register_kernel(bc_emit *e, const char *name, const char *sig) {
  return mk_buf_printf(e->sigs, "    \"%s\": \"%s\",\n", name, sig);
}

static int add_uses_torch(bc_emit *e, const mk_node *n) {
  char sn[64], quoted[80];
  snprintf(quoted, sizeof quoted, "\"%s\", ", bi_short(n, sn, sizeof sn));
  if (strstr(mk_buf_cstr(e->uses_torch), quoted)) return 0;
  return mk_buf_puts(e->uses_torch, quoted);
}

void bc_cpp_comment(const bc_emit *e, int s) {
  const bi_stage *st = &e->p->st[s];
  mk_buf_puts(e->cpp, "  // replaces:");
  for (int i = 0; i < st->nnodes; i++) {
    const mk_node *n = &e->p->g->nodes[st->nodes[i]];
    mk_buf_printf(e->cpp, "%s %s (line %d)", i ? "," : "", n->op, n->span.line);
  }
  mk_buf_putc(e->cpp, '\n');
}

/* A torch or view stage: the recorded call, Python for run() and, when
 * exporting, the caller's C++ for it. */
static int emit_torch_stage(bc_emit *e, int s, const mk_node *n, mk_errmsg *err) {
  bi_stage_comment(e->p, s, 4, e->body);
  int rc = mk_pyemit_node(e->p->g, n, bi_graph_namer, (void *)e->p->g, 4, e->body, err);
  if (rc == 0 && e->cpp) rc = e->cpp_node(e->cpp_node_ctx, e->p->g, n, e->cpp, err);
  if (rc == 0) rc = bc_plan_node(e, n);
  return rc;
}

static int emit_stage(bc_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  switch (st->kind) {
  case BI_EW:
    if (st->fused_into >= 0) return 0; /* a GEMM's epilogue: written by its kernel */
    return bc_emit_ew_stage(e, s, err);
  case BI_REDUCE:
  case BI_SOFTMAX: return bc_emit_reduce_stage(e, s, err);
  case BI_REPLAY: /* a data op no kernel writes: declared, then replayed like a delegated op */
  case BI_TORCH:
    add_uses_torch(e, n); /* then the recorded call, as the reference makes it */
    __attribute__((fallthrough));
  case BI_VIEW: return emit_torch_stage(e, s, n, err);
  case BI_NORM: return bc_emit_norm_stage(e, s, err);
  case BI_POOL: return bc_emit_pool_stage(e, s, err);
  case BI_GEMM: return bc_emit_gemm_stage(e, s, err);
  }
  return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator has no kernel for %s yet",
                 n->span.line, n->op);
}

typedef struct bc_bufs {
  mk_buf cuda, sigs, body, uses, mod;
} bc_bufs;

static void bufs_init(bc_bufs *b) {
  mk_buf_init(&b->cuda, 0);
  mk_buf_init(&b->sigs, 0);
  mk_buf_init(&b->body, 0);
  mk_buf_init(&b->uses, 4096);
  mk_buf_init(&b->mod, 0);
}

static void bufs_free(bc_bufs *b) {
  mk_buf_free(&b->cuda);
  mk_buf_free(&b->sigs);
  mk_buf_free(&b->body);
  mk_buf_free(&b->uses);
  mk_buf_free(&b->mod);
}

static void assemble(const bi_plan *p, const bc_emit *e, bc_bufs *b, const char *vname) {
  const mk_subkernel *sk = p->sk;
  mk_buf *m = &b->mod;
  mk_buf_printf(m, "\"\"\"Subkernel %s (lines %d-%d), builtin CUDA C++ variant %s.\n\nGenerated by "
                   "MKEvolve's builtin proposer; sizes are read from the tensors at run time.\n"
                   "The engine compiles MK_CUDA_SOURCE with NVRTC; the worker loads the cubin and\n"
                   "binds `_mk_cuda`, the launcher run() calls (docs/candidates.md).\n\"\"\"\n",
                sk->name ? sk->name : "?", sk->first_line, sk->last_line, vname);
  const char *bt = mk_buf_cstr(&b->body);
  bool uses_f = strstr(bt, " F.") != NULL || strstr(bt, "(F.") != NULL;
  mk_buf_printf(m, "import math\n\nimport torch\n%s", uses_f ? "import torch.nn.functional as F\n" : "");
  mk_buf_puts(m, "\nMK_BACKEND = \"cuda\"\n");
  if (b->uses.len) mk_buf_printf(m, "MK_USES_TORCH = (%s)\n", mk_buf_cstr(&b->uses));
  mk_buf_printf(m, "MK_CUDA_SOURCE = r\"\"\"\n%s%s\"\"\"\n", prelude, mk_buf_cstr(&b->cuda));
  mk_buf_printf(m, "# Kernel parameters: f float32 tensor, b bool tensor, q int64.\nMK_CUDA_KERNELS = {\n%s}\n",
                mk_buf_cstr(&b->sigs));
  if (bc_plan_module(e, sk, mk_buf_cstr(&b->sigs), m)) m->err = MK_ENOMEM;
  mk_buf_puts(m, py_helpers);
  if (e->need_pool) mk_buf_puts(m, bi_pool_helper());
  mk_buf_puts(m, "\n\n");
  bi_emit_run_signature(p->g, sk, m);
  mk_buf_puts(m, bt);
  bi_emit_return(p->g, sk, m);
}

/* Every stage in order into e's buffers (and e->cpp when exporting). */
static int emit_stages(bc_emit *e, mk_errmsg *err) {
  int rc = 0;
  for (int s = 0; s < e->p->nst && rc == 0; s++) rc = emit_stage(e, s, err);
  if (rc == 0 && e->kcount == 0)
    rc = mk_errf(err, MK_EUNSUPPORTED, "subkernel %s has only view or delegated ops: nothing for a CUDA kernel to do",
                 e->p->sk->name ? e->p->sk->name : "?");
  return rc;
}

static int emit_module(const bi_plan *p, const bc_config *c, char **out, mk_errmsg *err) {
  bc_bufs b;
  bufs_init(&b);
  bc_emit e = {.p = p, .threads = c->threads, .split = c->split, .gemm = c->gemm.bm ? &c->gemm : NULL,
               .cuda = &b.cuda, .sigs = &b.sigs, .body = &b.body, .uses_torch = &b.uses,
               .plan = cJSON_CreateArray()};
  int rc = e.plan ? emit_stages(&e, err) : mk_errf(err, MK_ENOMEM, "out of memory");
  if (rc == 0) assemble(p, &e, &b, c->name);
  if (rc == 0 && (b.mod.err || b.cuda.err || b.body.err || b.sigs.err))
    rc = mk_errf(err, MK_ERANGE, "generated module too large");
  if (rc == 0 && (*out = mk_buf_steal(&b.mod, NULL)) == NULL) rc = mk_errf(err, MK_ENOMEM, "out of memory");
  cJSON_Delete(e.plan);
  bufs_free(&b);
  return rc;
}

/* The CUDA emitters write each elementwise run as its own kernel, except a
 * GEMM's epilogue, which the GEMM kernel applies from its accumulators: the
 * Triton plan's other prologue/epilogue decisions are dropped, so every value
 * those fused runs would have kept in registers is stored and read back. */
static void unfuse(bi_plan *p) {
  for (int s = 0; s < p->nst; s++) {
    bi_stage *st = &p->st[s];
    bool gemm_epi = st->kind == BI_GEMM && st->epi >= 0;
    bool epi_of_gemm = st->kind == BI_EW && st->fused_into >= 0 && p->st[st->fused_into].kind == BI_GEMM &&
                       p->st[st->fused_into].epi == s;
    st->pro = st->apply_into = st->pro_norm = st->epi_norm = -1;
    if (!gemm_epi) st->epi = -1;
    if (!epi_of_gemm) st->fused_into = -1;
  }
}

static int push(mk_candidate_list *out, char *name, char *src, int nst, const bc_config *cfg, mk_errmsg *err) {
  char notes[200];
  if (cfg->gemm.bm)
    snprintf(notes, sizeof notes, "%d stage(s), CUDA C++ (NVRTC), GEMM on tensor cores (%s, %dx%d tiles)", nst,
             cfg->gemm.split ? "3xTF32" : "TF32", cfg->gemm.bm, cfg->gemm.bn);
  else
    snprintf(notes, sizeof notes, "%d stage(s), CUDA C++ (NVRTC), %d threads per block%s", nst, cfg->threads,
             cfg->split ? ", norm rows split over 32 blocks" : "");
  mk_candidate c = {.name = name, .source = src, .origin = mk_strdup("builtin"), .notes = mk_strdup(notes)};
  if (!c.origin || !c.notes) {
    mk_candidate_free(&c);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  int rc = mk_candidate_list_push(out, c);
  return rc ? mk_errf(err, rc, "out of memory") : 0;
}

int mk_builtin_cuda_propose(const mk_propose_request *req, mk_candidate_list *out, mk_errmsg *err) {
  if (req == NULL || req->graph == NULL || req->subkernel == NULL || out == NULL)
    return mk_errf(err, MK_EINVAL, "no subkernel given");
  if (req->device && strncmp(req->device, "cpu", 3) == 0)
    return mk_errf(err, MK_EUNSUPPORTED, "CUDA candidates need a GPU (device is %s)", req->device);
  if (req->subkernel->noutputs == 0)
    return mk_errf(err, MK_EUNSUPPORTED, "subkernel %s has no outputs (only in-place updates): the reference stays",
                   req->subkernel->name ? req->subkernel->name : "?");
  bi_plan p;
  int rc = bi_plan_build(req->graph, req->subkernel, &p, err);
  if (rc) return rc;
  unfuse(&p);
  int max = req->max_candidates > 0 ? req->max_candidates : BC_NCONFIGS;
  int added = 0;
  for (int i = 0; i < BC_NCONFIGS && added < max && rc == 0; i++) {
    const bc_config *cfg = &config_table[i];
    if (!config_applies(cfg, &p)) continue;
    /* Repair / optimise: the other configurations, not the parent again. */
    if (req->parent && req->parent->name && strcmp(req->parent->name, cfg->name) == 0) continue;
    char *src = NULL;
    rc = emit_module(&p, cfg, &src, err);
    char *name = rc == 0 ? mk_strdup(cfg->name) : NULL;
    if (rc == 0 && name == NULL) {
      free(src);
      rc = mk_errf(err, MK_ENOMEM, "out of memory");
    }
    if (rc == 0) rc = push(out, name, src, p.nst, cfg, err);
    if (rc == 0) added++;
  }
  bi_plan_free(&p);
  return rc;
}

/* ---- mkevolve export ---------------------------------------------------------- */

void mk_builtin_cuda_cpp_free(mk_builtin_cuda_cpp *c) {
  if (c == NULL) return;
  mk_buf_free(&c->cuda);
  mk_buf_free(&c->kernels);
  mk_buf_free(&c->launcher);
}

/* The configuration named `variant` ("cuda_t256"), or NULL. */
static const bc_config *variant_config(const char *variant) {
  for (int i = 0; i < BC_NCONFIGS; i++)
    if (strcmp(config_table[i].name, variant) == 0) return &config_table[i];
  return NULL;
}

/* MK_CUDA_KERNELS entries ("    \"name\": \"sig\",\n") as "name sig\n" lines. */
static void kernel_lines(const char *sigs, mk_buf *out) {
  for (const char *p = strchr(sigs, '"'); p; p = strchr(p, '"')) {
    const char *ne = strchr(p + 1, '"');
    const char *ss = ne ? strchr(ne + 1, '"') : NULL;
    const char *se = ss ? strchr(ss + 1, '"') : NULL;
    if (se == NULL) break;
    mk_buf_printf(out, "%.*s %.*s\n", (int)(ne - p - 1), p + 1, (int)(se - ss - 1), ss + 1);
    p = se + 1;
  }
}

int mk_builtin_cuda_cpp_for(const mk_graph *g, const mk_subkernel *sk, const char *variant,
                            const char *kernel_ns, mk_builtin_cuda_node_fn node, void *node_ctx,
                            mk_builtin_cuda_cpp *out, mk_errmsg *err) {
  mk_buf_init(&out->cuda, 0);
  mk_buf_init(&out->kernels, 0);
  mk_buf_init(&out->launcher, 0);
  if (g == NULL || sk == NULL || variant == NULL || kernel_ns == NULL || node == NULL)
    return mk_errf(err, MK_EINVAL, "graph, subkernel, variant, namespace and node writer are required");
  const bc_config *cfg = variant_config(variant);
  if (cfg == NULL)
    return mk_errf(err, MK_EUNSUPPORTED, "%s is not a variant of the builtin CUDA generator", variant);
  if (sk->noutputs == 0)
    return mk_errf(err, MK_EUNSUPPORTED, "subkernel %s has no outputs", sk->name ? sk->name : "?");
  bi_plan p;
  int rc = bi_plan_build(g, sk, &p, err);
  if (rc) return rc;
  unfuse(&p); /* as mk_builtin_cuda_propose: the same kernels */
  if (!config_applies(cfg, &p)) {
    bi_plan_free(&p);
    return mk_errf(err, MK_EUNSUPPORTED, "the builtin CUDA generator makes no %s variant of subkernel %s", variant,
                   sk->name ? sk->name : "?");
  }
  bc_bufs b;
  bufs_init(&b);
  bc_emit e = {.p = &p, .threads = cfg->threads, .split = cfg->split, .gemm = cfg->gemm.bm ? &cfg->gemm : NULL,
               .cuda = &b.cuda, .sigs = &b.sigs, .body = &b.body,
               .uses_torch = &b.uses, .cpp = &out->launcher, .cpp_ns = kernel_ns, .cpp_node = node,
               .cpp_node_ctx = node_ctx};
  rc = emit_stages(&e, err);
  if (rc == 0) {
    mk_buf_printf(&out->cuda, "%s%s", prelude, mk_buf_cstr(&b.cuda));
    kernel_lines(mk_buf_cstr(&b.sigs), &out->kernels);
  }
  if (rc == 0 && (out->cuda.err || out->kernels.err || out->launcher.err || b.cuda.err || b.sigs.err))
    rc = mk_errf(err, MK_ERANGE, "generated code too large");
  bufs_free(&b);
  bi_plan_free(&p);
  return rc;
}
