/* builtin_cuda_gemm.c — GEMMs (linear, matmul, mm, bmm, addmm) as CUDA C++ on
 * tensor cores, with bias and the following elementwise run fused.
 *
 * The operands are read as the Triton emitter reads them (bi_gemm_parse,
 * builtin_gemm.c): through their strides (linear's [N, K] weight, x @ w.t(),
 * transposed bmm operands and attention's (batch, heads) views need no
 * copies), one batch dim (bmm, 3-d matmul) or two (4-d matmul); leading dims
 * that broadcast are refused (PyTorch's). A 2-d weight multiplies an input of
 * any rank >= 2, its leading dims flattened into M (reshape: a view where the
 * strides allow).
 *
 * One block computes a BM x BN tile of C (grouped program order, batches on
 * the same grid axis); its warps a WM x WN tile each, with
 * mma.sync.m16n8k8 TF32 instructions written as inline PTX (NVRTC here has
 * no <mma.h>, so nvcuda::wmma is unavailable; the PTX needs no header, so
 * compose's load_inline and the export compile it unchanged). A and B tiles
 * go through shared memory, BK deep, zero-filled past M, N and K (any sizes);
 * the next tile's global loads are issued before the current tile's MMAs.
 * Precision (the configuration's):
 *   - 3xTF32: every operand x is split into hi = tf32(x) and
 *     lo = tf32(x - hi) (round to nearest), and the accumulator gets
 *     lo*hi + hi*lo + hi*hi: products to about float32 accuracy, the sums
 *     float32;
 *   - TF32: one product of the operands rounded to TF32 (faster, about 1e-3
 *     relative; the verifier decides whether it passes, docs/verify.md).
 * The epilogue runs from the accumulator registers: bias (per column),
 * the GEMM's own value stored if it is read elsewhere, then the elementwise
 * stage the plan fuses after it (bc_epi_*, builtin_cuda_ew.c) at the element's
 * flat offset in the contiguous output, one store per value. */
#include "builtin_cuda.h"

#include <stdio.h>
#include <string.h>

/* Device helpers of every module with a GEMM, once per module. */
static const char gemm_core[] =
    "\n// ---- GEMM on tensor cores: mma.sync.m16n8k8 TF32 (sm_80+), float32 accumulation ----\n"
    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800\n"
    "// Before sm_80 (no TF32 tensor cores; an export built for sm_70 too): the same\n"
    "// fragments (layout below) multiplied in float32 on the CUDA cores through warp\n"
    "// shuffles, operands not rounded (the 3xTF32 remainders are then 0).\n"
    "__device__ __forceinline__ unsigned mk_tf32(float x) { return __float_as_uint(x); }\n"
    "__device__ __forceinline__ void mk_mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {\n"
    "  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;\n"
    "#pragma unroll 1\n"
    "  for (int k = 0; k < 8; k++) {  // a loop: compact code for a path kept for portability\n"
    "    const int h = k >> 2, src = g * 4 + (k & 3);\n"
    "    const float a0 = __uint_as_float(__shfl_sync(0xffffffffu, a[h * 2], src));\n"
    "    const float a1 = __uint_as_float(__shfl_sync(0xffffffffu, a[h * 2 + 1], src));\n"
    "    const float b0 = __uint_as_float(__shfl_sync(0xffffffffu, b[h], 8 * t + (k & 3)));\n"
    "    const float b1 = __uint_as_float(__shfl_sync(0xffffffffu, b[h], 8 * t + 4 + (k & 3)));\n"
    "    d[0] = fmaf(a0, b0, d[0]);\n"
    "    d[1] = fmaf(a0, b1, d[1]);\n"
    "    d[2] = fmaf(a1, b0, d[2]);\n"
    "    d[3] = fmaf(a1, b1, d[3]);\n"
    "  }\n"
    "}\n"
    "#else\n"
    "// x rounded to TF32 (to nearest, ties away): the top 19 bits of a float.\n"
    "__device__ __forceinline__ unsigned mk_tf32(float x) {\n"
    "  unsigned r;\n"
    "  asm(\"cvt.rna.tf32.f32 %0, %1;\" : \"=r\"(r) : \"f\"(x));\n"
    "  return r;\n"
    "}\n"
    "// d += a * b for one 16x8x8 tile: a row-major 16x8, b 8x8 (k by n), d 16x8.\n"
    "// Fragments (PTX ISA, mma.m16n8k8 .tf32), g = lane / 4, t = lane % 4:\n"
    "// a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4); b0 (k t, n g),\n"
    "// b1 (k t + 4, n g); d0 (g, 2t), d1 (g, 2t + 1), d2 (g + 8, 2t), d3 (g + 8, 2t + 1).\n"
    "__device__ __forceinline__ void mk_mma_tf32(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {\n"
    "  asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, \"\n"
    "               \"{%8,%9}, {%0,%1,%2,%3};\"\n"
    "               : \"+f\"(d[0]), \"+f\"(d[1]), \"+f\"(d[2]), \"+f\"(d[3])\n"
    "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n"
    "}\n"
    "#endif\n"
    "// The BM x BN tile of C = A @ B that block blockIdx.x owns, into acc: warp w\n"
    "// holds rows m0 + (w / (BN / WN)) * WM + [0, WM) and columns\n"
    "// n0 + (w % (BN / WN)) * WN + [0, WN); acc[i][j] is the 16x8 tile (i, j) of\n"
    "// the warp's in the d layout above. A [batch][M][K] and B [batch][K][N] by\n"
    "// their strides; batch = b0 * B1 + b1 (4-d: batch, heads). SPLIT: 3xTF32.\n"
    "template <int BM, int BN, int BK, int WM, int WN, bool SPLIT>\n"
    "__device__ __forceinline__ void mk_gemm_tile(const float *__restrict__ A, const float *__restrict__ B,\n"
    "                                             long long M, long long N, long long K, long long sAb,\n"
    "                                             long long sAb1, long long sAm, long long sAk, long long sBb,\n"
    "                                             long long sBb1, long long sBk, long long sBn, long long B1,\n"
    "                                             float (&acc)[WM / 16][WN / 8][4], long long &bat,\n"
    "                                             long long &m0, long long &n0) {\n"
    "  constexpr int NT = (BM / WM) * (BN / WN) * 32, MI = WM / 16, NI = WN / 8;\n"
    "  constexpr int AL = BM * BK / NT, BL = BK * BN / NT;  // elements each thread loads\n"
    "  static_assert(BM * BK % NT == 0 && BK * BN % NT == 0 && NT % BM == 0 && NT % BN == 0 && NT % BK == 0 &&\n"
    "                BK % 8 == 0, \"tile shape\");\n"
    "  // Padded rows: the fragment reads below hit 32 distinct banks.\n"
    "  __shared__ float As[BM][BK + 4];\n"
    "  __shared__ float Bs[BK][BN + 8];\n"
    "  // Grouped program order: 8 row tiles share each column tile while it is in L2.\n"
    "  const long long tm = (M + BM - 1) / BM, tn = (N + BN - 1) / BN;\n"
    "  long long pid = blockIdx.x;\n"
    "  bat = pid / (tm * tn);\n"
    "  pid -= bat * tm * tn;\n"
    "  const long long first = pid / (8 * tn) * 8;\n"
    "  const long long gsize = tm - first < 8 ? tm - first : 8;\n"
    "  m0 = (first + pid % gsize) * BM;\n"
    "  n0 = (pid % (8 * tn)) / gsize * BN;\n"
    "  A += bat / B1 * sAb + bat % B1 * sAb1;\n"
    "  B += bat / B1 * sBb + bat % B1 * sBb1;\n"
    "  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;\n"
    "  const int wm = warp / (BN / WN) * WM, wn = warp % (BN / WN) * WN;\n"
    "  const int g = lane >> 2, t = lane & 3;\n"
    "#pragma unroll\n"
    "  for (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "    for (int j = 0; j < NI; j++)\n"
    "#pragma unroll\n"
    "      for (int q = 0; q < 4; q++) acc[i][j][q] = 0.0f;\n"
    "  // Neighbouring threads load along the operand's unit-stride dim (coalesced),\n"
    "  // whichever that is (k for A unless A is transposed; n for B unless B is).\n"
    "  // Element l of a thread is (r0 + l * dr, c0 + l * dc) of the tile: one\n"
    "  // pointer per operand, moved by a fixed step.\n"
    "  const bool a_kfast = sAk == 1 || sAm != 1, b_nfast = sBn == 1 || sBk != 1;\n"
    "  const int ar0 = a_kfast ? tid / BK : tid % BM, ac0 = a_kfast ? tid % BK : tid / BM;\n"
    "  const int adr = a_kfast ? NT / BK : 0, adc = a_kfast ? 0 : NT / BM;\n"
    "  const int br0 = b_nfast ? tid / BN : tid % BK, bc0 = b_nfast ? tid % BN : tid / BK;\n"
    "  const int bdr = b_nfast ? NT / BN : 0, bdc = b_nfast ? 0 : NT / BK;\n"
    "  const float *pa = A + (m0 + ar0) * sAm + ac0 * sAk, *pb = B + br0 * sBk + (n0 + bc0) * sBn;\n"
    "  const long long astep = adr * sAm + adc * sAk, bstep = bdr * sBk + bdc * sBn;\n"
    "  const long long am = M - m0 - ar0, bn = N - n0 - bc0;  // rows / columns left\n"
    "  float ra[AL], rb[BL];\n"
    "  auto load = [&](long long k0) {\n"
    "    const long long ak = K - k0 - ac0, bk = K - k0 - br0;\n"
    "#pragma unroll\n"
    "    for (int l = 0; l < AL; l++)\n"
    "      ra[l] = l * adr < am && l * adc < ak ? pa[k0 * sAk + l * astep] : 0.0f;\n"
    "#pragma unroll\n"
    "    for (int l = 0; l < BL; l++)\n"
    "      rb[l] = l * bdc < bn && l * bdr < bk ? pb[k0 * sBk + l * bstep] : 0.0f;\n"
    "  };\n"
    "  load(0);\n"
    "  for (long long k0 = 0; k0 < K; k0 += BK) {\n"
    "    __syncthreads();  // every warp is done with the previous tile\n"
    "#pragma unroll\n"
    "    for (int l = 0; l < AL; l++) As[ar0 + l * adr][ac0 + l * adc] = ra[l];\n"
    "#pragma unroll\n"
    "    for (int l = 0; l < BL; l++) Bs[br0 + l * bdr][bc0 + l * bdc] = rb[l];\n"
    "    __syncthreads();\n"
    "    if (k0 + BK < K) load(k0 + BK);  // in flight during this tile's MMAs\n"
    "#pragma unroll\n"
    "    for (int kk = 0; kk < BK; kk += 8) {\n"
    "      unsigned ah[MI][4], al[MI][4], bh[NI][2], bl[NI][2];\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < MI; i++) {\n"
    "        const float x[4] = {As[wm + i * 16 + g][kk + t], As[wm + i * 16 + g + 8][kk + t],\n"
    "                            As[wm + i * 16 + g][kk + t + 4], As[wm + i * 16 + g + 8][kk + t + 4]};\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < 4; r++) {\n"
    "          ah[i][r] = mk_tf32(x[r]);\n"
    "          if constexpr (SPLIT) al[i][r] = mk_tf32(x[r] - __uint_as_float(ah[i][r]));  // the remainder\n"
    "        }\n"
    "      }\n"
    "#pragma unroll\n"
    "      for (int j = 0; j < NI; j++) {\n"
    "        const float y[2] = {Bs[kk + t][wn + j * 8 + g], Bs[kk + t + 4][wn + j * 8 + g]};\n"
    "#pragma unroll\n"
    "        for (int r = 0; r < 2; r++) {\n"
    "          bh[j][r] = mk_tf32(y[r]);\n"
    "          if constexpr (SPLIT) bl[j][r] = mk_tf32(y[r] - __uint_as_float(bh[j][r]));\n"
    "        }\n"
    "      }\n"
    "#pragma unroll\n"
    "      for (int i = 0; i < MI; i++)\n"
    "#pragma unroll\n"
    "        for (int j = 0; j < NI; j++) {\n"
    "          if constexpr (SPLIT) {  // the small products first, then hi * hi\n"
    "            mk_mma_tf32(acc[i][j], al[i], bh[j]);\n"
    "            mk_mma_tf32(acc[i][j], ah[i], bl[j]);\n"
    "          }\n"
    "          mk_mma_tf32(acc[i][j], ah[i], bh[j]);\n"
    "        }\n"
    "    }\n"
    "  }\n"
    "}\n";

/* True if the plan has a GEMM stage (the GEMM configurations apply). */
bool bc_plan_has_gemm(const bi_plan *p) {
  for (int s = 0; s < p->nst; s++)
    if (p->st[s].kind == BI_GEMM) return true;
  return false;
}

static void stage_ops(const bi_plan *p, int s, mk_buf *out) {
  for (int i = 0; i < p->st[s].nnodes; i++) {
    const mk_node *n = &p->g->nodes[p->st[s].nodes[i]];
    mk_buf_printf(out, "%s %s (line %d)", i ? "," : "", n->op, n->span.line);
  }
}

/* The kernel: parameters, the tile, the epilogue from the accumulators. */
static int emit_kernel(bc_emit *e, int s, const bi_gemm_info *gi, int res, bool store_res, const char *kname,
                       const char *epi_sig, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bc_gemm_cfg *c = e->gemm;
  int epi = p->st[s].epi;
  mk_buf *k = e->cuda;
  if (!e->gemm_core) mk_buf_puts(k, gemm_core);
  e->gemm_core = true;
  mk_buf_puts(k, "\n// replaces:");
  stage_ops(p, s, k);
  if (epi >= 0) {
    mk_buf_puts(k, "; fused epilogue:");
    stage_ops(p, epi, k);
  }
  mk_buf_printf(k, "\n// %s, %dx%d block tile, %dx%d warp tiles\n", c->split ? "3xTF32" : "TF32", c->bm, c->bn,
                c->wm, c->wn);
  mk_buf_printf(k, "extern \"C\" __global__ void %s(const float *__restrict__ A, const float *__restrict__ B, ",
                kname);
  if (gi->bias >= 0) mk_buf_puts(k, "const float *__restrict__ bias, long long sbias, ");
  if (store_res) {
    mk_buf_puts(k, "float *__restrict__ p_");
    bi_run_name(p, res, k);
    mk_buf_puts(k, ", ");
  }
  mk_buf_printf(k, "%slong long M, long long N, long long K, long long sAb, long long sAb1, long long sAm, "
                   "long long sAk, long long sBb, long long sBb1, long long sBk, long long sBn, long long B1) {\n",
                epi_sig);
  int mi = c->wm / 16, ni = c->wn / 8, wcols = c->bn / c->wn;
  mk_buf_printf(k, "  float acc[%d][%d][4];\n  long long bat, m0, n0;\n", mi, ni);
  mk_buf_printf(k, "  mk_gemm_tile<%d, %d, %d, %d, %d, %s>(A, B, M, N, K, sAb, sAb1, sAm, sAk, sBb, sBb1, sBk, sBn,\n"
                   "                                    B1, acc, bat, m0, n0);\n",
                c->bm, c->bn, c->bk, c->wm, c->wn, c->split ? "true" : "false");
  mk_buf_printf(k, "  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;\n"
                   "  const long long wm0 = m0 + warp / %d * %d + (lane >> 2), wn0 = n0 + warp %% %d * %d + (lane & 3) * 2;\n",
                wcols, c->wm, wcols, c->wn);
  mk_buf_printf(k, "  // the epilogue, from the accumulators: element (gm, gn) of batch bat\n"
                   "#pragma unroll\n  for (int i = 0; i < %d; i++)\n#pragma unroll\n    for (int j = 0; j < %d; j++)\n"
                   "#pragma unroll\n      for (int q = 0; q < 4; q++) {\n",
                mi, ni);
  mk_buf_puts(k, "        const long long gm = wm0 + i * 16 + (q >> 1) * 8, gn = wn0 + j * 8 + (q & 1);\n"
                 "        if (gm >= M || gn >= N) continue;\n"
                 "        const long long offs = (bat * M + gm) * N + gn;\n");
  mk_buf_printf(k, "        const float acc_v = acc[i][j][q]%s;\n", gi->bias >= 0 ? " + bias[gn * sbias]" : "");
  if (store_res) {
    mk_buf_puts(k, "        p_");
    bi_run_name(p, res, k);
    mk_buf_puts(k, "[offs] = acc_v;\n");
  }
  int rc = 0;
  if (epi >= 0) {
    mk_buf_puts(k, "        {\n");
    rc = bc_epi_body(e, epi, res, "acc_v", 10, k, err);
    mk_buf_puts(k, "        }\n");
  }
  mk_buf_puts(k, "      }\n}\n");
  return rc;
}

/* run(...) lines up to the allocations: the operands, sizes, strides and
 * the output shape out<res>, as the Triton launcher (builtin_gemm.c), A by
 * its strides too. */
static void py_operands(bc_emit *e, const bi_gemm_info *gi, int r) {
  const bi_plan *p = e->p;
  mk_buf *b = e->body;
  mk_buf_printf(b, "    a%d = ", r);
  bi_run_name(p, gi->a, b);
  mk_buf_printf(b, "\n    b%d = ", r);
  bi_run_name(p, gi->b, b);
  mk_buf_puts(b, "\n");
  if (gi->batch_dims == 2) {
    mk_buf_printf(b, "    bat%d, b1_%d, m%d, k%d = a%d.shape\n", r, r, r, r, r);
    mk_buf_printf(b, "    if tuple(b%d.shape[:2]) != (bat%d, b1_%d):\n"
                     "        raise ValueError(\"batch dims do not match\")\n", r, r, r);
    mk_buf_printf(b, "    n%d = b%d.shape[3]\n    batch%d = bat%d * b1_%d\n", r, r, r, r, r);
    mk_buf_printf(b, "    sab%d, sab1_%d, sam%d, sak%d = a%d.stride()\n", r, r, r, r, r);
    mk_buf_printf(b, "    sbb%d, sbb1_%d, sbk%d, sbn%d = b%d.stride()\n", r, r, r, r, r);
    mk_buf_printf(b, "    out%d = (bat%d, b1_%d, m%d, n%d)\n", r, r, r, r, r);
  } else if (gi->batch_dims == 1) {
    mk_buf_printf(b, "    batch%d, m%d, k%d = a%d.shape\n", r, r, r, r);
    mk_buf_printf(b, "    if b%d.shape[0] != batch%d:\n        raise ValueError(\"batch dims do not match\")\n", r, r);
    mk_buf_printf(b, "    n%d = b%d.shape[2]\n", r, r);
    mk_buf_printf(b, "    sab%d, sam%d, sak%d = a%d.stride()\n", r, r, r, r);
    mk_buf_printf(b, "    sbb%d, sbk%d, sbn%d = b%d.stride()\n", r, r, r, r);
    mk_buf_printf(b, "    b1_%d, sab1_%d, sbb1_%d = 1, 0, 0\n", r, r, r);
    mk_buf_printf(b, "    out%d = (batch%d, m%d, n%d)\n", r, r, r, r);
  } else {
    mk_buf_printf(b, "    k%d = a%d.shape[-1]\n", r, r);
    mk_buf_printf(b, "    n%d = b%d.shape[%d]\n", r, r, gi->weight_nk ? 0 : 1);
    mk_buf_printf(b, "    out%d = tuple(a%d.shape[:-1]) + (n%d,)\n", r, r, r);
    mk_buf_printf(b, "    if a%d.dim() != 2:  # leading dims flattened into M (a view where strides allow)\n"
                     "        a%d = a%d.reshape(math.prod(a%d.shape[:-1]), k%d)\n",
                  r, r, r, r, r);
    mk_buf_printf(b, "    m%d = a%d.shape[0]\n    sam%d, sak%d = a%d.stride()\n", r, r, r, r, r);
    if (gi->weight_nk) mk_buf_printf(b, "    sbk%d, sbn%d = b%d.stride(1), b%d.stride(0)\n", r, r, r, r);
    else mk_buf_printf(b, "    sbk%d, sbn%d = b%d.stride()\n", r, r, r);
    mk_buf_printf(b, "    batch%d, sab%d, sbb%d, b1_%d, sab1_%d, sbb1_%d = 1, 0, 0, 1, 0, 0\n", r, r, r, r, r, r);
  }
  mk_buf_printf(b, "    if k%d != b%d.shape[%s]:\n        raise ValueError(\"matrix shapes do not match\")\n", r, r,
                gi->weight_nk ? "1" : "-2");
  if (gi->bias >= 0) {
    mk_buf_printf(b, "    bias%d = ", r);
    bi_run_name(p, gi->bias, b);
    mk_buf_printf(b, "\n    sbias%d = _mk_bstrides(bias%d, (n%d,))[0]  # 0 for a bias of one element\n", r, r, r);
  }
}

/* The same as C++ (mkevolve export), values named v<id>. */
static void cpp_operands(bc_emit *e, const bi_gemm_info *gi, int r) {
  mk_buf *b = e->cpp;
  mk_buf_printf(b, "  at::Tensor a%d = v%d;\n  const at::Tensor b%d = v%d;\n", r, gi->a, r, gi->b);
  if (gi->batch_dims == 2) {
    mk_buf_printf(b, "  TORCH_CHECK(a%d.dim() == 4 && b%d.dim() == 4 && b%d.size(0) == a%d.size(0) && "
                     "b%d.size(1) == a%d.size(1), \"batch dims do not match\");\n", r, r, r, r, r, r);
    mk_buf_printf(b, "  const int64_t b1_%d = a%d.size(1), m%d = a%d.size(2), k%d = a%d.size(3), n%d = b%d.size(3);\n",
                  r, r, r, r, r, r, r, r);
    mk_buf_printf(b, "  const int64_t batch%d = a%d.size(0) * b1_%d;\n", r, r, r);
    mk_buf_printf(b, "  const int64_t sab%d = a%d.stride(0), sab1_%d = a%d.stride(1), sam%d = a%d.stride(2), "
                     "sak%d = a%d.stride(3);\n", r, r, r, r, r, r, r, r);
    mk_buf_printf(b, "  const int64_t sbb%d = b%d.stride(0), sbb1_%d = b%d.stride(1), sbk%d = b%d.stride(2), "
                     "sbn%d = b%d.stride(3);\n", r, r, r, r, r, r, r, r);
    mk_buf_printf(b, "  const std::vector<int64_t> out%d = {a%d.size(0), b1_%d, m%d, n%d};\n", r, r, r, r, r);
  } else if (gi->batch_dims == 1) {
    mk_buf_printf(b, "  TORCH_CHECK(a%d.dim() == 3 && b%d.dim() == 3 && b%d.size(0) == a%d.size(0), "
                     "\"batch dims do not match\");\n", r, r, r, r);
    mk_buf_printf(b, "  const int64_t batch%d = a%d.size(0), m%d = a%d.size(1), k%d = a%d.size(2), n%d = b%d.size(2);\n",
                  r, r, r, r, r, r, r, r);
    mk_buf_printf(b, "  const int64_t sab%d = a%d.stride(0), sam%d = a%d.stride(1), sak%d = a%d.stride(2);\n", r, r, r,
                  r, r, r);
    mk_buf_printf(b, "  const int64_t sbb%d = b%d.stride(0), sbk%d = b%d.stride(1), sbn%d = b%d.stride(2);\n", r, r, r,
                  r, r, r);
    mk_buf_printf(b, "  const int64_t b1_%d = 1, sab1_%d = 0, sbb1_%d = 0;\n", r, r, r);
    mk_buf_printf(b, "  const std::vector<int64_t> out%d = {batch%d, m%d, n%d};\n", r, r, r, r);
  } else {
    mk_buf_printf(b, "  TORCH_CHECK(a%d.dim() >= 2 && b%d.dim() == 2, \"matrix shapes do not match\");\n", r, r);
    mk_buf_printf(b, "  const int64_t k%d = a%d.size(-1), n%d = b%d.size(%d);\n", r, r, r, r, gi->weight_nk ? 0 : 1);
    mk_buf_printf(b, "  std::vector<int64_t> out%d = a%d.sizes().vec();\n  out%d.back() = n%d;\n", r, r, r, r);
    mk_buf_printf(b, "  if (a%d.dim() != 2) a%d = a%d.reshape({mk_prod(out%d, 0, out%d.size() - 1), k%d});\n", r, r,
                  r, r, r, r);
    mk_buf_printf(b, "  const int64_t m%d = a%d.size(0), sam%d = a%d.stride(0), sak%d = a%d.stride(1);\n", r, r, r, r,
                  r, r);
    mk_buf_printf(b, "  const int64_t sbk%d = b%d.stride(%d), sbn%d = b%d.stride(%d);\n", r, r, gi->weight_nk ? 1 : 0,
                  r, r, gi->weight_nk ? 0 : 1);
    mk_buf_printf(b, "  const int64_t batch%d = 1, sab%d = 0, sbb%d = 0, b1_%d = 1, sab1_%d = 0, sbb1_%d = 0;\n", r, r,
                  r, r, r, r);
  }
  mk_buf_printf(b, "  TORCH_CHECK(k%d == b%d.size(%s), \"matrix shapes do not match\");\n", r, r,
                gi->weight_nk ? "1" : "-2");
  if (gi->bias >= 0) {
    mk_buf_printf(b, "  const at::Tensor bias%d = v%d;\n", r, gi->bias);
    mk_buf_printf(b, "  const int64_t sbias%d = mk_bstrides(bias%d, std::vector<int64_t>{n%d})[0];\n", r, r, r);
  }
}

static int emit_launchers(bc_emit *e, int s, const bi_gemm_info *gi, int res, bool store_res, const char *kname,
                          const char *epi_call, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bc_gemm_cfg *c = e->gemm;
  int epi = p->st[s].epi, r = res, nt = (c->bm / c->wm) * (c->bn / c->wn) * 32;
  mk_buf *b = e->body;
  char shape[32], like[32];
  snprintf(shape, sizeof shape, "out%d", r);
  snprintf(like, sizeof like, "a%d.device", r);
  bi_stage_comment(p, s, 4, b);
  if (epi >= 0) bi_stage_comment(p, epi, 4, b);
  py_operands(e, gi, r);
  if (store_res) {
    mk_buf_indent(b, 4);
    bi_run_name(p, res, b);
    mk_buf_printf(b, " = torch.empty(out%d, device=a%d.device, dtype=torch.float32)\n", r, r);
  }
  if (epi >= 0) bc_epi_alloc(e, epi, shape, like, b);
  mk_buf_printf(b, "    if m%d * n%d * batch%d > 0:\n", r, r, r);
  mk_buf_printf(b, "        _mk_cuda.launch(\"%s\", ((m%d + %d) // %d * ((n%d + %d) // %d) * batch%d,), (%d,),\n"
                   "                        (a%d, b%d, ",
                kname, r, c->bm - 1, c->bm, r, c->bn - 1, c->bn, r, nt, r, r);
  if (gi->bias >= 0) mk_buf_printf(b, "bias%d, sbias%d, ", r, r);
  if (store_res) {
    bi_run_name(p, res, b);
    mk_buf_puts(b, ", ");
  }
  mk_buf_printf(b, "%sm%d, n%d, k%d, sab%d, sab1_%d, sam%d, sak%d,\n"
                   "                         sbb%d, sbb1_%d, sbk%d, sbn%d, b1_%d))\n",
                epi_call, r, r, r, r, r, r, r, r, r, r, r, r);
  if (e->cpp == NULL) return b->err ? mk_errf(err, MK_ERANGE, "generated code too large") : 0;
  /* The same as C++ (mkevolve export). */
  mk_buf *x = e->cpp;
  bc_cpp_comment(e, s);
  if (epi >= 0) bc_cpp_comment(e, epi);
  cpp_operands(e, gi, r);
  if (store_res)
    mk_buf_printf(x, "  at::Tensor v%d = at::empty(out%d, at::TensorOptions().device(a%d.device()).dtype(at::kFloat));\n",
                  res, r, r);
  mk_buf prep, args;
  mk_buf_init(&prep, 0);
  mk_buf_init(&args, 0);
  char cshape[32], clike[32];
  snprintf(cshape, sizeof cshape, "out%d", r);
  snprintf(clike, sizeof clike, "a%d", r);
  int rc = epi >= 0 ? bc_epi_cpp(e, epi, res, r, cshape, clike, &prep, &args, err) : 0;
  if (rc == 0) {
    mk_buf_puts(x, mk_buf_cstr(&prep));
    mk_buf_printf(x, "  if (m%d * n%d * batch%d > 0) {\n    const c10::cuda::CUDAGuard guard(a%d.device());\n", r, r,
                  r, r);
    mk_buf_printf(x, "    mk_launch(\"%s\", %s::%s((m%d + %d) / %d * ((n%d + %d) / %d) * batch%d, %d, mk_stream(a%d), "
                     "mk_ptr<float>(a%d), mk_ptr<float>(b%d)",
                  kname, e->cpp_ns, kname, r, c->bm - 1, c->bm, r, c->bn - 1, c->bn, r, nt, r, r, r);
    if (gi->bias >= 0) mk_buf_printf(x, ", mk_ptr<float>(bias%d), sbias%d", r, r);
    if (store_res) mk_buf_printf(x, ", mk_ptr<float>(v%d)", res);
    mk_buf_printf(x, "%s, m%d, n%d, k%d, sab%d, sab1_%d, sam%d, sak%d, sbb%d, sbb1_%d, sbk%d, sbn%d, b1_%d));\n  }\n",
                  mk_buf_cstr(&args), r, r, r, r, r, r, r, r, r, r, r, r);
  }
  mk_buf_free(&prep);
  mk_buf_free(&args);
  if (rc == 0 && (b->err || x->err)) rc = mk_errf(err, MK_ERANGE, "generated code too large");
  return rc;
}

/* ---- the launcher as launch-plan steps (builtin_cuda_plan.c) --------------------- */

static cJSON *t_int(const char *what, const char *t, int d) {
  cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, what);
  cJSON_AddItemToArray(a, cJSON_CreateString(t));
  cJSON_AddItemToArray(a, cJSON_CreateNumber(d));
  return o;
}

static cJSON *op2(const char *op, cJSON *x, cJSON *y) {
  cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, op);
  cJSON_AddItemToArray(a, x);
  cJSON_AddItemToArray(a, y);
  return o;
}

/* out<name><r> = INT */
static void plan_int_step(bc_emit *e, const char *name, int r, cJSON *v) {
  char out[48];
  snprintf(out, sizeof out, "%s%d", name, r);
  bc_plan_arg(bc_plan_step(e, "int", out), v);
}

static cJSON *nm(const char *name, int r) { return bc_plan_name("%s%d", name, r); }

static void plan_require_equal(bc_emit *e, cJSON *x, cJSON *y, const char *msg) {
  cJSON *st = bc_plan_step(e, "require_equal", NULL);
  bc_plan_arg(st, x);
  bc_plan_arg(st, y);
  bc_plan_arg_name(st, "%s", msg);
}

/* py_operands as steps: the same ints, checks and messages. */
static void plan_operands(bc_emit *e, const bi_gemm_info *gi, int r) {
  char a[32], b[32], out[32];
  snprintf(a, sizeof a, "a%d", r);
  snprintf(b, sizeof b, "b%d", r);
  snprintf(out, sizeof out, "out%d", r);
  bc_plan_arg_name(bc_plan_step(e, "alias", a), "v%d", gi->a);
  bc_plan_arg_name(bc_plan_step(e, "alias", b), "v%d", gi->b);
  cJSON *st;
  if (gi->batch_dims == 2) {
    plan_int_step(e, "bat", r, t_int("size", a, 0));
    plan_int_step(e, "b1_", r, t_int("size", a, 1));
    plan_int_step(e, "m", r, t_int("size", a, 2));
    plan_int_step(e, "k", r, t_int("size", a, 3));
    plan_require_equal(e, t_int("size", b, 0), nm("bat", r), "batch dims do not match");
    plan_require_equal(e, t_int("size", b, 1), nm("b1_", r), "batch dims do not match");
    plan_int_step(e, "n", r, t_int("size", b, 3));
    plan_int_step(e, "batch", r, op2("mul", nm("bat", r), nm("b1_", r)));
    plan_int_step(e, "sab", r, t_int("stride", a, 0));
    plan_int_step(e, "sab1_", r, t_int("stride", a, 1));
    plan_int_step(e, "sam", r, t_int("stride", a, 2));
    plan_int_step(e, "sak", r, t_int("stride", a, 3));
    plan_int_step(e, "sbb", r, t_int("stride", b, 0));
    plan_int_step(e, "sbb1_", r, t_int("stride", b, 1));
    plan_int_step(e, "sbk", r, t_int("stride", b, 2));
    plan_int_step(e, "sbn", r, t_int("stride", b, 3));
    st = bc_plan_step(e, "list", out);
    bc_plan_arg(st, nm("bat", r));
    bc_plan_arg(st, nm("b1_", r));
    bc_plan_arg(st, nm("m", r));
    bc_plan_arg(st, nm("n", r));
  } else if (gi->batch_dims == 1) {
    plan_int_step(e, "batch", r, t_int("size", a, 0));
    plan_int_step(e, "m", r, t_int("size", a, 1));
    plan_int_step(e, "k", r, t_int("size", a, 2));
    plan_require_equal(e, t_int("size", b, 0), nm("batch", r), "batch dims do not match");
    plan_int_step(e, "n", r, t_int("size", b, 2));
    plan_int_step(e, "sab", r, t_int("stride", a, 0));
    plan_int_step(e, "sam", r, t_int("stride", a, 1));
    plan_int_step(e, "sak", r, t_int("stride", a, 2));
    plan_int_step(e, "sbb", r, t_int("stride", b, 0));
    plan_int_step(e, "sbk", r, t_int("stride", b, 1));
    plan_int_step(e, "sbn", r, t_int("stride", b, 2));
    plan_int_step(e, "b1_", r, cJSON_CreateNumber(1));
    plan_int_step(e, "sab1_", r, cJSON_CreateNumber(0));
    plan_int_step(e, "sbb1_", r, cJSON_CreateNumber(0));
    st = bc_plan_step(e, "list", out);
    bc_plan_arg(st, nm("batch", r));
    bc_plan_arg(st, nm("m", r));
    bc_plan_arg(st, nm("n", r));
  } else {
    char sh[32], lead[32];
    snprintf(sh, sizeof sh, "ash%d", r);
    snprintf(lead, sizeof lead, "lead%d", r);
    plan_int_step(e, "k", r, t_int("size", a, -1));
    plan_int_step(e, "n", r, t_int("size", b, gi->weight_nk ? 0 : 1));
    bc_plan_arg_name(bc_plan_step(e, "sizes", sh), "%s", a);
    st = bc_plan_step(e, "with_last", out);
    bc_plan_arg_name(st, "%s", sh);
    bc_plan_arg(st, nm("n", r));
    /* leading dims flattened into M: for a 2-d operand the same view */
    st = bc_plan_step(e, "prod", lead);
    bc_plan_arg_name(st, "%s", sh);
    bc_plan_arg_int(st, 0);
    bc_plan_arg(st, op2("add", bc_plan_tagged("len", cJSON_CreateString(sh)), cJSON_CreateNumber(-1)));
    char mk2[32];
    snprintf(mk2, sizeof mk2, "mk2_%d", r);
    st = bc_plan_step(e, "list", mk2);
    bc_plan_arg(st, nm("lead", r));
    bc_plan_arg(st, nm("k", r));
    st = bc_plan_step(e, "reshape", a);
    bc_plan_arg_name(st, "%s", a);
    bc_plan_arg(st, nm("mk2_", r));
    plan_int_step(e, "m", r, t_int("size", a, 0));
    plan_int_step(e, "sam", r, t_int("stride", a, 0));
    plan_int_step(e, "sak", r, t_int("stride", a, 1));
    plan_int_step(e, "sbk", r, t_int("stride", b, gi->weight_nk ? 1 : 0));
    plan_int_step(e, "sbn", r, t_int("stride", b, gi->weight_nk ? 0 : 1));
    static const char *const zero[] = {"sab", "sbb", "sab1_", "sbb1_"};
    plan_int_step(e, "batch", r, cJSON_CreateNumber(1));
    plan_int_step(e, "b1_", r, cJSON_CreateNumber(1));
    for (int i = 0; i < 4; i++) plan_int_step(e, zero[i], r, cJSON_CreateNumber(0));
  }
  plan_require_equal(e, nm("k", r), t_int("size", b, gi->weight_nk ? 1 : -2), "matrix shapes do not match");
  if (gi->bias >= 0) {
    char bias[32], nl[32], sb[32];
    snprintf(bias, sizeof bias, "bias%d", r);
    snprintf(nl, sizeof nl, "nlist%d", r);
    snprintf(sb, sizeof sb, "sbs%d", r);
    bc_plan_arg_name(bc_plan_step(e, "alias", bias), "v%d", gi->bias);
    bc_plan_arg(bc_plan_step(e, "list", nl), nm("n", r));
    st = bc_plan_step(e, "bstrides", sb);
    bc_plan_arg_name(st, "%s", bias);
    bc_plan_arg_name(st, "%s", nl);
    plan_int_step(e, "sbias", r, bc_plan_item(sb, 0));
  }
}

static int plan_launcher(bc_emit *e, int s, const bi_gemm_info *gi, int res, bool store_res, const char *kname,
                         mk_errmsg *err) {
  if (!bc_plan_on(e)) return 0;
  const bc_gemm_cfg *c = e->gemm;
  int epi = e->p->st[s].epi, r = res, nt = (c->bm / c->wm) * (c->bn / c->wn) * 32;
  char shape[32], like[32];
  snprintf(shape, sizeof shape, "out%d", r);
  snprintf(like, sizeof like, "a%d", r);
  plan_operands(e, gi, r);
  if (store_res) {
    char out[32];
    snprintf(out, sizeof out, "v%d", res);
    cJSON *st = bc_plan_step(e, "empty", out);
    bc_plan_arg_name(st, "%s", shape);
    bc_plan_arg_name(st, "%s", like);
    bc_plan_arg_name(st, "float32");
  }
  int rc = epi >= 0 ? bc_epi_plan_prep(e, epi, res, r, shape, like, err) : 0;
  if (rc) return rc;
  plan_int_step(e, "work", r, op2("mul", op2("mul", nm("m", r), nm("n", r)), nm("batch", r)));
  cJSON *grid = op2("mul", op2("mul", op2("cdiv", nm("m", r), cJSON_CreateNumber(c->bm)),
                                      op2("cdiv", nm("n", r), cJSON_CreateNumber(c->bn))),
                    nm("batch", r));
  char when[32];
  snprintf(when, sizeof when, "work%d", r);
  cJSON *st = bc_plan_launch(e, kname, when, grid, nt);
  bc_plan_arg(st, bc_plan_tagged("ptr", nm("a", r)));
  bc_plan_arg(st, bc_plan_tagged("ptr", nm("b", r)));
  if (gi->bias >= 0) {
    bc_plan_arg(st, bc_plan_tagged("ptr", nm("bias", r)));
    bc_plan_arg(st, bc_plan_tagged("int", nm("sbias", r)));
  }
  if (store_res) bc_plan_arg(st, bc_plan_tagged("ptr", bc_plan_name("v%d", res)));
  if (epi >= 0 && (rc = bc_epi_plan_args(e, epi, res, r, shape, st, err))) return rc;
  static const char *const tail[] = {"m", "n", "k", "sab", "sab1_", "sam", "sak", "sbb", "sbb1_", "sbk", "sbn", "b1_"};
  for (size_t i = 0; i < sizeof tail / sizeof tail[0]; i++) bc_plan_arg(st, bc_plan_tagged("int", nm(tail[i], r)));
  return 0;
}

int bc_emit_gemm_stage(bc_emit *e, int s, mk_errmsg *err) {
  const bi_plan *p = e->p;
  const bi_stage *st = &p->st[s];
  const mk_node *n = &p->g->nodes[st->nodes[0]];
  if (e->gemm == NULL)
    return mk_errf(err, MK_EINVAL, "line %d: %s: a configuration without GEMM tiles", n->span.line, n->op);
  bi_gemm_info gi;
  int rc = bi_gemm_parse(p->g, n, &gi, err);
  if (rc) return rc;
  if (gi.einsum) /* its permuted, merged operands are the Triton emitter's only */
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: the CUDA generator has no kernel for %s", n->span.line, n->op);
  if (gi.bias >= 0 && p->g->values[gi.bias].dtype != MK_DTYPE_F32)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a bias that is not float32", n->span.line, n->op);
  int res = n->outputs[0];
  if (p->g->values[res].dtype != MK_DTYPE_F32)
    return mk_errf(err, MK_EUNSUPPORTED, "line %d: %s with a result that is not float32", n->span.line, n->op);
  bool store_res = bi_value_escapes(p, s, res);
  char shape[32];
  snprintf(shape, sizeof shape, "out%d", res);
  mk_buf kname, types, esig, ecall;
  mk_buf_init(&kname, 256);
  mk_buf_init(&types, 1024);
  mk_buf_init(&esig, 0);
  mk_buf_init(&ecall, 0);
  bc_kernel_name(e, s, "gemm", &kname);
  mk_buf_puts(&types, "ff");
  if (gi.bias >= 0) mk_buf_puts(&types, "fq");
  if (store_res) mk_buf_puts(&types, "f");
  if (st->epi >= 0) rc = bc_epi_params(e, st->epi, res, shape, &esig, &types, &ecall, err);
  if (rc == 0) {
    mk_buf_puts(&types, "qqqqqqqqqqqq");
    rc = emit_kernel(e, s, &gi, res, store_res, mk_buf_cstr(&kname), mk_buf_cstr(&esig), err);
  }
  if (rc == 0) rc = emit_launchers(e, s, &gi, res, store_res, mk_buf_cstr(&kname), mk_buf_cstr(&ecall), err);
  if (rc == 0) rc = plan_launcher(e, s, &gi, res, store_res, mk_buf_cstr(&kname), err);
  if (rc == 0) rc = bc_register_kernel(e, mk_buf_cstr(&kname), mk_buf_cstr(&types));
  if (rc == 0 && (kname.err || types.err || esig.err || ecall.err || e->cuda->err))
    rc = mk_errf(err, MK_ERANGE, "generated code too large");
  mk_buf_free(&kname);
  mk_buf_free(&types);
  mk_buf_free(&esig);
  mk_buf_free(&ecall);
  return rc;
}
