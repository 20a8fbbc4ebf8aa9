/* builtin_propose.c — mk_builtin_propose: plans a subkernel once, then emits
 * one Python module per configuration (tile sizes, warps, stages, GEMM
 * precision, GEMM through cuBLAS or Triton, channels_last convolutions).
 * Each configuration is a separate candidate so the search picks by
 * measurement. Ordering is deterministic: the default configuration first,
 * then configurations further from it. */
#include "builtin_internal.h"
#include "mk_pyemit.h"

#include "mk_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Per-family tables. Index 0 is the default. */
typedef struct ew_cfg { int block, warps, block_r, block_i; } ew_cfg;
typedef struct gemm_cfg { int bm, bn, bk, warps, stages; } gemm_cfg;

/* GPU: elementwise/row block and warps, with the column-reduction tile. */
static const ew_cfg ew_gpu[] = {{1024, 4, 32, 64}, {256, 2, 8, 128}, {4096, 8, 64, 32}, {2048, 4, 16, 256}};
static const gemm_cfg gemm_gpu[] = {
    {64, 64, 32, 4, 3}, {128, 128, 32, 8, 3}, {128, 64, 32, 4, 4}, {32, 64, 32, 4, 2}};
/* CPU (Triton interpreter, correctness only): its cost is per program and per
 * loop iteration, not per element, so large blocks and K tiles make the
 * verification of full-size subkernels tractable. Same kernel text, other
 * constexprs; never proposed for a GPU. */
static const ew_cfg ew_cpu[] = {{16384, 4, 64, 256}, {4096, 8, 64, 32}};
/* The interpreter's GEMM cost is in the elements it gathers: a short M tile
 * (reduced batches make M small) and a wide N tile gather least; 16x2048x256
 * ran a 2x4096x4096 linear in 0.56 s where 64x256x256 took 4.7 s. */
static const gemm_cfg gemm_cpu[] = {{16, 2048, 256, 4, 1}};

/* Convolutions as Triton implicit GEMMs (builtin_conv.c): tile, warps,
 * stages, the dot's precision and the distance from the default. TF32 is the
 * reference convolution's own precision (cuDNN, TF32 allowed); 3xTF32 is
 * float32 accuracy at three tensor-core products. */
typedef struct igemm_cfg {
  int bm, bn, bk, warps, stages;
  const char *prec;
  int round;  /* inputs rounded to TF32 first as the reference does: 0 no, 1 truncated
                 ("tf32t"), 2 to nearest ("tf32r") in the loop, 3 to nearest once
                 before it, by the launcher ("tf32p") */
  int dist;
  bool pack; /* below 16 input channels, several taps per K block ("_packed") */
  bool stem; /* few-channel stems: a kernel row per K block from a padded copy ("_stem") */
} igemm_cfg;
/* "tf32r" / "tf32t": the inputs rounded to TF32 (to nearest / by truncation)
 * before the products, where the reference's convolution runs cuDNN with TF32:
 * with the reference's rounding the products are the reference's, so the
 * result agrees with it to float32 accumulation order, where another rounding
 * differs by the reference's own TF32 error (5.4e-4 on problem 25, over
 * KernelBench's 1e-4). On an H100 (scripts/device/tf32_rounding_probe.py)
 * cuDNN's TF32 result was 5e-6 from round-to-nearest inputs and 2.4e-3 from
 * truncated ones, and on problems 10 and 25 "tf32r" passed the plain
 * comparison where "tf32t" needed the TF32-aware one. Truncation is what the
 * tensor cores do to float32 inputs anyway ("tf32" with ROUND 0), so tf32t
 * (ROUND 1) is not listed. "tf32p" rounds input and weight once, in the
 * launcher, in the same pass that writes the channels_last copy the GEMM
 * reads, so the loop feeds its loads straight to the tensor cores: on an
 * H100 (scripts/device/igemm_probe.py, problem 35's and 65's convolutions
 * with their pools) it ran 1.2x (35) and 1.6x (65) faster than rounding in
 * the loop, so it comes first and "tf32r" after it. A 64-wide channel block
 * was slower on both (fewer programs in flight), so it comes last. With
 * few input channels (mk_layout_few_channels) cuDNN's reference convolution
 * is not TF32 (problem 85: every TF32 variant, cuDNN's own channels_last
 * included, differed by 2e-3 after its group norm), and such a GEMM is
 * short: 3xTF32 comes right after tf32p there. The packed variant (below
 * 16 input channels, several taps per K block) lost to the unpacked loop on
 * every problem measured (H100: 65, 8 channels, 7.1 against 6.4 ms; 50 and
 * 60, 3 channels, 7.1 against 4.7 and 15.0 against 7.3), so it comes late.
 * Few-channel stems gathered tap by tap ran far from the tensor cores (H100,
 * AlexNet's conv1, 216 GFLOP: tf32p 15.4-18.8 ms, 3xTF32 30.7-58.3 ms, against
 * cuDNN's float32 8.7 ms), so the "_stem" loop (one contiguous kernel row per
 * K block from a padded copy) is listed for them, at the table's head. On an
 * H200 (scripts/device/stem_probe.py, AlexNet's conv1 at batch 1024) its TF32
 * form ran 7.65 ms but 2.2e-3 from the float32 reference, its 3xTF32 form 18.3
 * ms, cuDNN 9.0 ms in NCHW and 7.05 in channels_last; on problem 65 (3
 * channels, an average pool and a sum after it) the TF32 stem passed and won
 * (4.80 ms, cuDNN channels_last 5.36), on problem 85 (8 channels, a group
 * norm after it) no TF32 product passed and the 3xTF32 stem ran 1.90 ms, the
 * fastest implicit GEMM there, with cuDNN's NCHW variant faster still (1.48 ms
 * on an H100). Over few channels the TF32 configurations therefore come one
 * step after the 3xTF32 ones and cuDNN's NCHW variant, beside cuDNN's
 * channels_last one (the layout plan keeps such convolutions NCHW): listed
 * first, the three stems had pushed problem 85's NCHW variant out of the
 * first proposals on the H200 (0.64x of compile, 0.97x on the H100). The
 * 128-wide channel tile reads each input row once for up to 128 output
 * channels (AlexNet's 96), where the 64-wide one reads it twice. The stems'
 * TF32 products truncate (ROUND 0): over few channels the reference is float32,
 * not cuDNN's TF32, so rounding as it rounds buys nothing, and a rounding pass
 * would read and write the input once more before the padded copy. */
static const igemm_cfg igemm_gpu[] = {{128, 64, 64, 4, 3, "tf32", 0, 0, false, true},
                                      {128, 64, 64, 4, 3, "tf32x3", 0, 0, false, true},
                                      {128, 128, 64, 8, 3, "tf32", 0, 0, false, true},
                                      {128, 64, 32, 4, 3, "tf32", 3, 0, false, false},
                                      {64, 128, 32, 4, 4, "tf32", 3, 1, false, false},
                                      {128, 128, 32, 8, 3, "tf32", 3, 1, false, false},
                                      {128, 64, 32, 4, 3, "tf32", 2, 1, false, false},
                                      {128, 64, 32, 4, 3, "tf32", 3, 2, true, false},
                                      {128, 64, 64, 4, 3, "tf32", 3, 2, false, false},
                                      {128, 64, 32, 4, 3, "tf32", 4, 2, false, false},
                                      {128, 64, 32, 4, 3, "tf32x3", 0, 2, false, false},
                                      {128, 64, 32, 4, 3, "tf32", 0, 2, false, false}};
/* The interpreter: one configuration, after the cuDNN variants (its cost per
 * program makes a full-size convolution slow to verify on the CPU). */
static const igemm_cfg igemm_cpu[] = {{64, 64, 64, 4, 1, "ieee", 0, 2, false, false}};

static const char *const precisions[] = {"tf32x3", "ieee"};
/* The interpreter computes tf32x3 as three float32 dots: ieee, one dot, is the
 * same float32 result at a third of the cost, so it comes first there. */
static const char *const precisions_cpu[] = {"ieee", "tf32x3"};
/* Norms: one program loops over its row; SPLIT programs per row (few, long
 * rows); whole short rows in registers, several per program (-1); batch
 * norms of channels_last values on channel tiles (NORM_CTILE; the module's
 * other norms split their rows). */
static const int norm_splits[] = {0, 32, -1, 32};
/* A reduction with a broadcast epilogue on fewer programs than this (about
 * two per SM of an H100 / H200) puts its `_apart` variant first. */
#define BCAST_MIN_PROGRAMS 264
#define NORM_CTILE 3
/* emit_module's answer for a channel-tiled configuration no norm took. */
#define CTILE_DECLINED 1

typedef struct cfg_tables {
  const ew_cfg *ew;
  int n_ew;
  const gemm_cfg *gemm;
  int n_gemm;
  const char *const *precisions;
  const igemm_cfg *igemm;
  int n_igemm;
} cfg_tables;

static cfg_tables tables_for(const char *device) {
  if (device && strncmp(device, "cpu", 3) == 0)
    return (cfg_tables){ew_cpu, (int)(sizeof ew_cpu / sizeof ew_cpu[0]), gemm_cpu,
                        (int)(sizeof gemm_cpu / sizeof gemm_cpu[0]), precisions_cpu, igemm_cpu,
                        (int)(sizeof igemm_cpu / sizeof igemm_cpu[0])};
  return (cfg_tables){ew_gpu, (int)(sizeof ew_gpu / sizeof ew_gpu[0]), gemm_gpu,
                      (int)(sizeof gemm_gpu / sizeof gemm_gpu[0]), precisions, igemm_gpu,
                      (int)(sizeof igemm_gpu / sizeof igemm_gpu[0])};
}

typedef struct variant {
  int base;   /* ew / reduction table index */
  int gemm;   /* 0..n_gemm*2-1: tile x precision; n_gemm*2: cuBLAS + epilogue */
  int cl;     /* convolutions: 0 cuDNN, 1 cuDNN channels_last, 2 + i implicit GEMM table i */
  int split;  /* norm_splits index */
  int normst; /* 1: a norm the plan applies on load is stored by its own kernel */
  int bapart; /* 1: reductions and the runs they broadcast into as two kernels */
  int dist;   /* distance from the default, for ordering */
} variant;

static void make_config(const cfg_tables *t, const variant *v, bi_config *c) {
  *c = (bi_config){0};
  c->block = t->ew[v->base].block;
  c->warps = t->ew[v->base].warps;
  c->block_r = t->ew[v->base].block_r;
  c->block_i = t->ew[v->base].block_i;
  c->gemm_torch = v->gemm == t->n_gemm * 2;
  int g = c->gemm_torch ? 0 : v->gemm % t->n_gemm;
  c->bm = t->gemm[g].bm;
  c->bn = t->gemm[g].bn;
  c->bk = t->gemm[g].bk;
  c->stages = t->gemm[g].stages;
  c->gemm_warps = t->gemm[g].warps;
  c->precision = t->precisions[c->gemm_torch ? 0 : v->gemm / t->n_gemm];
  c->channels_last = v->cl == 1;
  c->conv_igemm = v->cl >= 2;
  if (c->conv_igemm) {
    const igemm_cfg *ic = &t->igemm[v->cl - 2];
    c->conv_bm = ic->bm;
    c->conv_bn = ic->bn;
    c->conv_bk = ic->bk;
    c->conv_warps = ic->warps;
    c->conv_stages = ic->stages;
    c->conv_precision = ic->prec;
    c->conv_round = ic->round;
    c->conv_pack = ic->pack;
    c->conv_stem = ic->stem;
  }
  c->norm_split = norm_splits[v->split];
  c->norm_stored = v->normst == 1;
  c->norm_ctile = v->split == NORM_CTILE;
}

/* The name's mark of an implicit GEMM's TF32 rounding (igemm_cfg.round). */
static const char *round_mark(int round) {
  static const char *const marks[] = {"", "t", "r", "p", "x3p"};
  return round >= 0 && round < (int)(sizeof marks / sizeof marks[0]) ? marks[round] : "";
}

static int variant_name(const cfg_tables *t, const variant *v, bool has_base, bool has_gemm,
                        bool has_conv, bool has_norm, mk_buf *out) {
  bi_config c;
  make_config(t, v, &c);
  mk_buf_puts(out, "triton");
  if (has_conv && c.conv_igemm)
    mk_buf_printf(out, "_igemm%dx%dx%d_w%d_s%d_%s%s%s", c.conv_bm, c.conv_bn, c.conv_bk, c.conv_warps,
                  c.conv_stages, c.conv_precision, round_mark(c.conv_round),
                  c.conv_stem ? "_stem" : c.conv_pack ? "_packed" : "");
  else if (has_conv) mk_buf_puts(out, c.channels_last ? "_convcl" : "_conv");
  if (has_gemm) {
    if (c.gemm_torch) mk_buf_puts(out, "_cublas");
    else mk_buf_printf(out, "_gemm%dx%dx%d_w%d_s%d_%s", c.bm, c.bn, c.bk, c.gemm_warps, c.stages,
                       c.precision);
  }
  if (has_norm && c.norm_ctile) mk_buf_puts(out, "_ctile");
  else if (has_norm && c.norm_split > 0) mk_buf_printf(out, "_split%d", c.norm_split);
  if (has_norm && c.norm_split < 0) mk_buf_puts(out, "_rows");
  if (c.norm_stored) mk_buf_puts(out, "_normst");
  if (v->bapart) mk_buf_puts(out, "_apart");
  if (has_base) mk_buf_printf(out, "_b%d_w%d", c.block, c.warps);
  return out->err;
}

static const char bcast_helper[] =
    "\n\ndef _bcast_strides(t, shape, runs):\n"
    "    \"\"\"Strides of `t` broadcast to `shape` at the last dim of each run of real dims.\n\n"
    "    The kernel was written for the broadcast pattern seen at capture: every other dim\n"
    "    must be broadcast and each run contiguous, else this is not the same computation.\n"
    "    \"\"\"\n"
    "    st = torch.broadcast_to(t, shape).stride()\n"
    "    real = set()\n"
    "    for lo, hi in runs:\n"
    "        real.update(range(lo, hi + 1))\n"
    "        for d in range(lo, hi):\n"
    "            if shape[d] != 1 and st[d] != st[d + 1] * shape[d + 1]:\n"
    "                raise ValueError(\"operand layout differs from the captured one\")\n"
    "    for d in range(len(shape)):\n"
    "        if d not in real and shape[d] != 1 and st[d] != 0:\n"
    "            raise ValueError(\"operand broadcast pattern differs from the captured one\")\n"
    "    return [st[hi] for lo, hi in runs]\n";

/* Adds a conv bias left out of the cuDNN call when no elementwise stage reads
 * the output (builtin_torch.c): in place, in the output's memory order. */
static const char channel_bias_helper[] =
    "\n\n@triton.jit\n"
    "def _mk_channel_bias_kernel(y_ptr, b_ptr, numel, C, INNER, BLOCK: tl.constexpr):\n"
    "    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)\n"
    "    mask = offs < numel\n"
    "    c = (offs // INNER) % C\n"
    "    y = tl.load(y_ptr + offs, mask=mask, other=0)\n"
    "    tl.store(y_ptr + offs, y + tl.load(b_ptr + c, mask=mask, other=0), mask=mask)\n"
    "\n\ndef _mk_add_channel_bias(y, bias):\n"
    "    \"\"\"y + bias over dim 1, in place, in y's memory order (contiguous or channels_last).\"\"\"\n"
    "    cl = {4: torch.channels_last, 5: torch.channels_last_3d}.get(y.dim())\n"
    "    if cl is not None and y.is_contiguous(memory_format=cl) and not y.is_contiguous():\n"
    "        inner = 1\n"
    "    else:\n"
    "        y = y.contiguous()\n"
    "        inner = math.prod(y.shape[2:])\n"
    "    n = y.numel()\n"
    "    if n > 0:\n"
    "        _mk_channel_bias_kernel[(triton.cdiv(n, 1024),)](\n"
    "            y, bias.contiguous(), n, y.shape[1], inner, BLOCK=1024)\n"
    "    return y\n";

/* A group norm fused after an implicit-GEMM convolution (builtin_conv.c): the
 * first pass's per-tile statistics combined into each (sample, channel)'s
 * scale and shift, in float64 (Chan et al.'s pairwise combination), by a
 * Triton kernel: a candidate may not compute through torch ops (the worker's
 * guard rejects them, as it did these helpers' first version on an H100). */
static const char gn_affine_helper[] =
    "\n\n@triton.jit\n"
    "def _mk_gn_affine_kernel(part_ptr, w_ptr, b_ptr, scale_ptr, shift_ptr, NT, OC, CG, eps,\n"
    "                         HAS_W: tl.constexpr, HAS_B: tl.constexpr, BLOCK: tl.constexpr):\n"
    "    # one program per (sample, group); part[n, t, c] = (pixels, sum, M2 about the tile's mean)\n"
    "    n = tl.program_id(0).to(tl.int64)\n"
    "    c0 = tl.program_id(1).to(tl.int64) * CG\n"
    "    tot = tl.zeros((BLOCK,), dtype=tl.float64)\n"
    "    sm = tl.zeros((BLOCK,), dtype=tl.float64)\n"
    "    for k0 in range(0, NT * CG, BLOCK):\n"
    "        k = k0 + tl.arange(0, BLOCK)\n"
    "        at = ((n * NT + k // CG) * OC + c0 + k % CG) * 3\n"
    "        ok = k < NT * CG\n"
    "        tot += tl.load(part_ptr + at, mask=ok, other=0.0).to(tl.float64)\n"
    "        sm += tl.load(part_ptr + at + 1, mask=ok, other=0.0).to(tl.float64)\n"
    "    total = tl.sum(tot, axis=0)\n"
    "    mean = tl.sum(sm, axis=0) / total\n"
    "    m2 = tl.zeros((BLOCK,), dtype=tl.float64)\n"
    "    for k0 in range(0, NT * CG, BLOCK):\n"
    "        k = k0 + tl.arange(0, BLOCK)\n"
    "        at = ((n * NT + k // CG) * OC + c0 + k % CG) * 3\n"
    "        ok = k < NT * CG\n"
    "        cnt = tl.load(part_ptr + at, mask=ok, other=0.0).to(tl.float64)\n"
    "        s = tl.load(part_ptr + at + 1, mask=ok, other=0.0).to(tl.float64)\n"
    "        dev = tl.where(cnt > 0, s / tl.maximum(cnt, 1.0) - mean, 0.0)\n"
    "        m2 += tl.load(part_ptr + at + 2, mask=ok, other=0.0).to(tl.float64) + cnt * dev * dev\n"
    "    rstd = 1.0 / tl.sqrt(tl.sum(m2, axis=0) / total + eps)\n"
    "    for j0 in range(0, CG, BLOCK):\n"
    "        c = c0 + j0 + tl.arange(0, BLOCK)\n"
    "        ok = j0 + tl.arange(0, BLOCK) < CG\n"
    "        sc = tl.zeros((BLOCK,), dtype=tl.float64) + rstd\n"
    "        sh = tl.zeros((BLOCK,), dtype=tl.float64) - mean * rstd\n"
    "        if HAS_W:\n"
    "            w = tl.load(w_ptr + c, mask=ok, other=0.0).to(tl.float64)\n"
    "            sc = sc * w\n"
    "            sh = sh * w\n"
    "        if HAS_B:\n"
    "            sh = sh + tl.load(b_ptr + c, mask=ok, other=0.0).to(tl.float64)\n"
    "        tl.store(scale_ptr + n * OC + c, sc.to(tl.float32), mask=ok)\n"
    "        tl.store(shift_ptr + n * OC + c, sh.to(tl.float32), mask=ok)\n"
    "\n\ndef _mk_gn_affine(part, groups, eps, weight, bias):\n"
    "    \"\"\"Scale and shift per (sample, channel) of a group norm from per-tile partials.\n\n"
    "    part[n, t, c] = (pixels, sum, sum of squares about their mean) of tile t of sample n.\n"
    "    \"\"\"\n"
    "    nb, nt, oc, _ = part.shape\n"
    "    if oc % groups:\n"
    "        raise ValueError(\"channels do not divide into groups\")\n"
    "    scale = torch.empty((nb, oc), device=part.device, dtype=torch.float32)\n"
    "    shift = torch.empty((nb, oc), device=part.device, dtype=torch.float32)\n"
    "    if nb > 0 and oc > 0:\n"
    "        _mk_gn_affine_kernel[(nb, groups)](\n"
    "            part, part if weight is None else weight, part if bias is None else bias, scale, shift,\n"
    "            nt, oc, oc // groups, eps, HAS_W=weight is not None, HAS_B=bias is not None, BLOCK=256)\n"
    "    return scale, shift\n";

/* A batch norm fused after an implicit-GEMM convolution (builtin_conv.c):
 * from the batch's statistics (the first pass's per-tile partials, combined in
 * float64), updating the running statistics in place as torch does (momentum,
 * unbiased variance), or from the running statistics; a Triton kernel, as above. */
static const char bn_affine_helper[] =
    "\n\n@triton.jit\n"
    "def _mk_bn_affine_kernel(part_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, scale_ptr, shift_ptr, NB, NT, OC,\n"
    "                         eps, momentum, HAS_PART: tl.constexpr, HAS_W: tl.constexpr,\n"
    "                         HAS_B: tl.constexpr, HAS_RUN: tl.constexpr, BLOCK: tl.constexpr):\n"
    "    # one program per channel; part[n, t, c] = (pixels, sum, M2 about the tile's mean)\n"
    "    c = tl.program_id(0).to(tl.int64)\n"
    "    if HAS_PART:\n"
    "        tot = tl.zeros((BLOCK,), dtype=tl.float64)\n"
    "        sm = tl.zeros((BLOCK,), dtype=tl.float64)\n"
    "        for k0 in range(0, NB * NT, BLOCK):\n"
    "            k = k0 + tl.arange(0, BLOCK)\n"
    "            ok = k < NB * NT\n"
    "            tot += tl.load(part_ptr + (k * OC + c) * 3, mask=ok, other=0.0).to(tl.float64)\n"
    "            sm += tl.load(part_ptr + (k * OC + c) * 3 + 1, mask=ok, other=0.0).to(tl.float64)\n"
    "        total = tl.sum(tot, axis=0)\n"
    "        mean = tl.sum(sm, axis=0) / total\n"
    "        m2 = tl.zeros((BLOCK,), dtype=tl.float64)\n"
    "        for k0 in range(0, NB * NT, BLOCK):\n"
    "            k = k0 + tl.arange(0, BLOCK)\n"
    "            ok = k < NB * NT\n"
    "            cnt = tl.load(part_ptr + (k * OC + c) * 3, mask=ok, other=0.0).to(tl.float64)\n"
    "            s = tl.load(part_ptr + (k * OC + c) * 3 + 1, mask=ok, other=0.0).to(tl.float64)\n"
    "            dev = tl.where(cnt > 0, s / tl.maximum(cnt, 1.0) - mean, 0.0)\n"
    "            m2 += tl.load(part_ptr + (k * OC + c) * 3 + 2, mask=ok, other=0.0).to(tl.float64) + cnt * dev * dev\n"
    "        var = tl.sum(m2, axis=0) / total\n"
    "        if HAS_RUN:  # in place, as torch updates them (unbiased variance)\n"
    "            rm = tl.load(rm_ptr + c).to(tl.float64)\n"
    "            rv = tl.load(rv_ptr + c).to(tl.float64)\n"
    "            unbiased = var * total / tl.maximum(total - 1.0, 1.0)\n"
    "            tl.store(rm_ptr + c, ((1.0 - momentum) * rm + momentum * mean).to(tl.float32))\n"
    "            tl.store(rv_ptr + c, ((1.0 - momentum) * rv + momentum * unbiased).to(tl.float32))\n"
    "    else:\n"
    "        mean = tl.load(rm_ptr + c).to(tl.float64)\n"
    "        var = tl.load(rv_ptr + c).to(tl.float64)\n"
    "    sc = 1.0 / tl.sqrt(var + eps)\n"
    "    if HAS_W:\n"
    "        sc = sc * tl.load(w_ptr + c).to(tl.float64)\n"
    "    sh = -mean * sc\n"
    "    if HAS_B:\n"
    "        sh = sh + tl.load(b_ptr + c).to(tl.float64)\n"
    "    for n0 in range(0, NB, BLOCK):\n"
    "        n = n0 + tl.arange(0, BLOCK)\n"
    "        ok = n < NB\n"
    "        tl.store(scale_ptr + n * OC + c, (tl.zeros((BLOCK,), dtype=tl.float64) + sc).to(tl.float32), mask=ok)\n"
    "        tl.store(shift_ptr + n * OC + c, (tl.zeros((BLOCK,), dtype=tl.float64) + sh).to(tl.float32), mask=ok)\n"
    "\n\ndef _mk_bn_affine(part, nb, eps, weight, bias, rm, rv, momentum):\n"
    "    \"\"\"Scale and shift per (sample, channel) of a batch norm.\n\n"
    "    part[n, t, c] = (pixels, sum, sum of squares about their mean) of tile t of sample n,\n"
    "    or None: the running statistics normalise.\n"
    "    \"\"\"\n"
    "    like = part if part is not None else rm\n"
    "    oc = like.shape[2] if part is not None else like.shape[0]\n"
    "    nt = part.shape[1] if part is not None else 1\n"
    "    scale = torch.empty((nb, oc), device=like.device, dtype=torch.float32)\n"
    "    shift = torch.empty((nb, oc), device=like.device, dtype=torch.float32)\n"
    "    if nb > 0 and oc > 0:\n"
    "        _mk_bn_affine_kernel[(oc,)](\n"
    "            like, like if weight is None else weight, like if bias is None else bias,\n"
    "            like if rm is None else rm, like if rv is None else rv, scale, shift, nb, nt, oc,\n"
    "            eps, momentum, HAS_PART=part is not None, HAS_W=weight is not None,\n"
    "            HAS_B=bias is not None, HAS_RUN=rm is not None and rv is not None, BLOCK=256)\n"
    "    return scale, shift\n";

/* The "tf32p" implicit GEMMs (builtin_conv.c): input and weight rounded to
 * TF32 once, to nearest with ties away (cuDNN's rounding of its TF32
 * inputs), so the tensor cores' truncation of the result is exact. The same
 * pass writes the channels_last copy the GEMM reads: on problem 35 (H100) a
 * separate layout conversion and rounding pass cost 0.7 ms of 3.8. Tiles of
 * [pixels x channels]: loaded along the input's own fastest dim, stored along
 * the channels. */
static const char tf32_round_helper[] =
    "\n\n@triton.jit\n"
    "def _mk_tf32_round_kernel(x_ptr, y_ptr, lo_ptr, C, P, TP, sxn, sxc, sxp,\n"
    "                          BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, SPLIT: tl.constexpr):\n"
    "    # program_id(0) = sample * TP + pixel tile\n"
    "    n = tl.program_id(0).to(tl.int64) // TP\n"
    "    rp = (tl.program_id(0).to(tl.int64) % TP) * BLOCK_P + tl.arange(0, BLOCK_P)\n"
    "    rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)\n"
    "    m = (rp < P)[:, None] & (rc < C)[None, :]\n"
    "    v = tl.load(x_ptr + n * sxn + (rp * sxp)[:, None] + (rc * sxc)[None, :], mask=m, other=0.0)\n"
    "    hi = ((v.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)\n"
    "    # y (and lo) are (N, P, C) in memory: channels_last\n"
    "    at = n * P * C + (rp * C)[:, None] + rc[None, :]\n"
    "    tl.store(y_ptr + at, hi, mask=m)\n"
    "    if SPLIT:  # what the high part misses, itself rounded to TF32 (3xTF32)\n"
    "        lo = v - hi\n"
    "        lo = ((lo.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)\n"
    "        tl.store(lo_ptr + at, lo, mask=m)\n"
    "\n\ndef _mk_tf32_parts(t, fmt, split):\n"
    "    \"\"\"t rounded to TF32 (to nearest, ties away) in memory format fmt, and the\n"
    "    rounded remainder when split (else None).\"\"\"\n"
    "    y = torch.empty_like(t, memory_format=fmt)\n"
    "    lo = torch.empty_like(t, memory_format=fmt) if split else None\n"
    "    if y.numel() == 0:\n"
    "        return y, lo\n"
    "    nb, c = t.shape[:2]\n"
    "    p = y.numel() // (nb * c)\n"
    "    try:  # (N, C, pixels): the spatial dims merge in NCHW and channels_last tensors\n"
    "        sxn, sxc, sxp = t.view(nb, c, p).stride()\n"
    "    except RuntimeError:\n"
    "        t = t.contiguous(memory_format=fmt)\n"
    "        sxn, sxc, sxp = t.view(nb, c, p).stride()\n"
    "    bc = min(64, triton.next_power_of_2(c))\n"
    "    bp = max(32, 4096 // bc)\n"
    "    tp = triton.cdiv(p, bp)\n"
    "    _mk_tf32_round_kernel[(nb * tp, triton.cdiv(c, bc))](\n"
    "        t, y, y if lo is None else lo, c, p, tp, sxn, sxc, sxp, BLOCK_P=bp, BLOCK_C=bc, SPLIT=split)\n"
    "    return y, lo\n"
    "\n\ndef _mk_tf32_round(t, fmt):\n"
    "    \"\"\"t rounded to TF32 (to nearest, ties away) into a new tensor in memory format fmt.\"\"\"\n"
    "    return _mk_tf32_parts(t, fmt, False)[0]\n"
    "\n\ndef _mk_tf32_split(t, fmt):\n"
    "    \"\"\"(hi, lo) in memory format fmt: hi = t rounded to TF32, lo = t - hi rounded to TF32\n"
    "    (3xTF32: hi*hi + hi*lo + lo*hi is t's product to about float32 accuracy).\"\"\"\n"
    "    return _mk_tf32_parts(t, fmt, True)\n";

/* Elementwise stages run in channels_last memory order (builtin_ew.c). */
static const char cl_helpers[] =
    "\n\ndef _mk_cl_order(shape):\n"
    "    \"\"\"A 4-d or 5-d shape in channels_last memory order: (N, *spatial, C).\"\"\"\n"
    "    return (shape[0], *shape[2:], shape[1])\n"
    "\n\ndef _mk_cl_view(t, rank):\n"
    "    \"\"\"`t` aligned to `rank` dims and viewed in channels_last order (no copy).\"\"\"\n"
    "    t = t[(None,) * (rank - t.dim())]\n"
    "    return t.permute(0, *range(2, rank), 1)\n";

static int emit_stage(bi_emit *e, int s, mk_errmsg *err) {
  const bi_stage *st = &e->p->st[s];
  if (st->fused_into >= 0) return 0; /* emitted by its anchor */
  if (s <= e->chain_end) return 0; /* emitted with an implicit-GEMM convolution or a norm before it */
  const bi_family *f = bi_family_of_kind(st->kind);
  return f ? f->emit(e, s, err) : mk_errf(err, MK_EINVAL, "unknown stage kind");
}

/* `MK_ANY_LAYOUT_INPUTS = (0, )`: run()'s parameters that may come in any
 * memory layout (docs/candidates.md). */
static void any_layout_line(const bi_emit *e, mk_buf *mod) {
  if (e->nany_layout == 0) return;
  mk_buf_puts(mod, "# Inputs (by position) this module reads in any memory layout: ModelNew need not convert them.\n"
                   "MK_ANY_LAYOUT_INPUTS = (");
  const mk_subkernel *sk = e->p->sk;
  for (int i = 0; i < sk->ninputs; i++)
    for (int k = 0; k < e->nany_layout; k++)
      if (sk->inputs[i] == e->any_layout[k]) {
        mk_buf_printf(mod, "%d, ", i);
        break;
      }
  mk_buf_puts(mod, ")\n");
}

/* Emits one module for configuration c. */
static int emit_module(const bi_plan *p, const bi_config *c, const char *vname, char **out,
                       char *ctile_why, size_t ctile_why_size, mk_errmsg *err) {
  mk_buf kernels, body, uses, mod, clp;
  mk_buf_init(&kernels, 0);
  mk_buf_init(&body, 0);
  mk_buf_init(&uses, 4096);
  mk_buf_init(&mod, 0);
  mk_buf_init(&clp, 8192);
  bi_emit e = {.p = p, .cfg = c, .kernels = &kernels, .body = &body, .uses_torch = &uses,
               .cl_params = &clp, .chain_end = -1};
  /* Inputs the layout plan gives in channels_last: read in that order. */
  for (int i = 0; i < p->sk->ninputs; i++) {
    int v = p->sk->inputs[i];
    if (v >= 0 && v < p->g->nvalues && p->layout[v] == MK_LAYOUT_CHANNELS_LAST) bi_add_cl_value(&e, v);
  }
  int rc = 0;
  for (int s = 0; s < p->nst && rc == 0; s++) rc = emit_stage(&e, s, err);
  /* Channel tiles that no norm stage took: the configuration is the
   * split-rows one under another name, so it is not proposed. */
  if (rc == 0 && c->norm_ctile && e.ctile_used == 0) {
    /* (a convolution's implicit GEMM carrying the norm gives no reason) */
    if (ctile_why && ctile_why_size && ctile_why[0] == '\0' && e.ctile_why[0])
      snprintf(ctile_why, ctile_why_size, "%s", e.ctile_why);
    rc = CTILE_DECLINED;
  }
  if (rc == 0) {
    const mk_subkernel *sk = p->sk;
    mk_buf_printf(&mod, "\"\"\"Subkernel %s (lines %d-%d), builtin variant %s.\n\nGenerated by "
                        "MKEvolve's builtin proposer; sizes are read from the tensors at run time.\n\"\"\"\n",
                  sk->name ? sk->name : "?", sk->first_line, sk->last_line, vname);
    /* Delegated calls (convolutions, views) are spelled F.conv2d(...) by mk_pyemit. */
    const char *bt = mk_buf_cstr(&body);
    bool uses_f = strstr(bt, " F.") != NULL || strstr(bt, "(F.") != NULL;
    mk_buf_printf(&mod, "import math\n\nimport torch\n%simport triton\nimport triton.language as tl\n",
                  uses_f ? "import torch.nn.functional as F\n" : "");
    if (uses.len) mk_buf_printf(&mod, "\nMK_USES_TORCH = (%s)\n", mk_buf_cstr(&uses));
    if (clp.len)
      mk_buf_printf(&mod, "# Parameters ModelNew keeps in channels_last (converted once, not per call).\n"
                          "MK_CHANNELS_LAST = (%s)\n", mk_buf_cstr(&clp));
    any_layout_line(&e, &mod);
    mk_buf_puts(&mod, mk_buf_cstr(&kernels));
    if (e.need_bcast) mk_buf_puts(&mod, bcast_helper);
    if (e.need_cl_helpers) mk_buf_puts(&mod, cl_helpers);
    if (e.need_channel_bias) mk_buf_puts(&mod, channel_bias_helper);
    if (e.need_const) mk_pyemit_constant_helper(&mod);
    if (e.need_gn_affine) mk_buf_puts(&mod, gn_affine_helper);
    if (e.need_bn_affine) mk_buf_puts(&mod, bn_affine_helper);
    if (e.need_tf32_round) mk_buf_puts(&mod, tf32_round_helper);
    if (e.need_pool) mk_buf_puts(&mod, bi_pool_helper());
    mk_buf_puts(&mod, "\n\n");
    bi_emit_run_signature(p->g, sk, &mod);
    mk_buf_puts(&mod, mk_buf_cstr(&body));
    bi_emit_return(p->g, sk, &mod);
    if (mod.err || kernels.err || body.err) rc = mk_errf(err, MK_ERANGE, "generated module too large");
  }
  if (rc == 0) {
    *out = mk_buf_steal(&mod, NULL);
    if (*out == NULL) rc = mk_errf(err, MK_ENOMEM, "out of memory");
  }
  mk_buf_free(&kernels);
  mk_buf_free(&body);
  mk_buf_free(&uses);
  mk_buf_free(&mod);
  mk_buf_free(&clp);
  return rc;
}

/* The module's code after its docstring (which names the variant). */
static const char *code_of(const char *src) {
  const char *end = strstr(src, "\n\"\"\"\n"); /* the docstring's closing line */
  return end ? end + 5 : src;
}

/* True if a candidate already listed has the same code: a configuration that
 * changes nothing this subkernel uses (the elementwise block of a subkernel
 * whose implicit-GEMM convolution carries every stage) is not measured twice. */
static bool same_code_listed(const mk_candidate_list *l, int from, const char *src) {
  for (int i = from; i < l->n; i++)
    if (l->items[i].source && strcmp(code_of(l->items[i].source), code_of(src)) == 0) return true;
  return false;
}

static int cmp_variant(const void *a, const void *b) {
  const variant *x = a, *y = b;
  if (x->dist != y->dist) return x->dist - y->dist;
  if (x->gemm != y->gemm) return x->gemm - y->gemm;
  /* Implicit-GEMM convolutions, then channels_last ones first: with the tail
   * fused, or the bias folded and the tail run in memory order, they are the
   * likelier winners (docs/builtin-proposer.md). */
  /* Among implicit GEMMs of one distance, the table's order. */
  if (x->cl >= 2 && y->cl >= 2 && x->cl != y->cl) return x->cl - y->cl;
  if (x->cl != y->cl) return y->cl - x->cl;
  /* Channel tiles first: declined where no batch norm reads a channels_last
   * value, and where one does, the row layouts read it C floats apart. */
  if (x->split != y->split) {
    int xs = x->split == NORM_CTILE ? -1 : x->split, ys = y->split == NORM_CTILE ? -1 : y->split;
    return xs - ys;
  }
  if (x->base != y->base) return x->base - y->base;
  /* A norm applied by its pool, then the same stored by its own kernel:
   * twins, measured one after the other. */
  return x->normst - y->normst;
}

/* True if the plan ends in a pool (and its epilogue) that applies the plan's
 * only norm while loading, and has no other pool: one such pair per
 * subkernel, so merging stops at the pool (a left-to-right premerge would
 * otherwise grow a whole network of such blocks into one subkernel). */
static bool ends_in_norm_applied_by_pool(const bi_plan *p) {
  int norms = 0, pools = 0, last = p->nst - 1;
  while (last >= 0 && (p->st[last].kind == BI_VIEW || p->st[last].fused_into >= 0)) last--;
  for (int s = 0; s < p->nst; s++) {
    norms += p->st[s].kind == BI_NORM;
    pools += p->st[s].kind == BI_POOL;
  }
  return last >= 0 && norms == 1 && pools == 1 && p->st[last].pro_norm >= 0;
}

/* True if the plan ends in a norm whose epilogue applies the plan's only
 * other norm while loading (decide_norm_on_epilogue_load): ShuffleNet's
 * bn3 and shortcut norm with `out += shortcut`. One such pair per subkernel,
 * as for a norm applied by its pool, so premerging stops there. */
static bool ends_in_norm_applied_by_epilogue(const bi_plan *p) {
  int norms = 0, last = p->nst - 1;
  while (last >= 0 && (p->st[last].kind == BI_VIEW || p->st[last].fused_into >= 0)) last--;
  for (int s = 0; s < p->nst; s++) norms += p->st[s].kind == BI_NORM;
  return last >= 0 && norms == 2 && p->st[last].kind == BI_NORM && p->st[last].epi_norm >= 0;
}

/* One GEMM whose epilogue carries every other stage that computes (views are
 * free): the product and what follows it in one kernel, as after attention's
 * q @ k^T (scale, causal mask, activation), so the product is not written
 * and read again by a second kernel. */
static bool gemm_epilogue_covers(const bi_plan *p) {
  int gemm = -1;
  for (int s = 0; s < p->nst; s++) {
    if (p->st[s].kind != BI_GEMM) continue;
    if (gemm >= 0) return false;
    gemm = s;
  }
  if (gemm < 0 || p->st[gemm].epi < 0) return false;
  for (int s = 0; s < p->nst; s++)
    if (s != gemm && s != p->st[gemm].epi && p->st[s].kind != BI_VIEW) return false;
  return true;
}

/* Reductions whose kernels carry every other stage that computes: their
 * prologues and broadcast epilogues (`x / sqrt(mean(x**2, 1, True) + eps)`,
 * an RMS norm written out). Applies the broadcast epilogues to p. */
static bool reduce_broadcast_covers(bi_plan *p) {
  if (!bi_plan_fuse_broadcast_epilogues(p)) return false;
  for (int s = 0; s < p->nst; s++) {
    const bi_stage *st = &p->st[s];
    if (st->kind == BI_VIEW || (st->kind == BI_REDUCE && st->bcast_epi >= 0)) continue;
    if (st->kind == BI_EW && st->fused_into >= 0 && p->st[st->fused_into].kind == BI_REDUCE &&
        p->st[st->fused_into].bcast_epi >= 0)
      continue;
    return false;
  }
  return true;
}

bool mk_builtin_fuses(const mk_graph *g, const mk_subkernel *sk) {
  bi_plan p;
  mk_errmsg ignored = {{0}};
  if (g == NULL || sk == NULL || bi_plan_build(g, sk, &p, &ignored)) return false;
  bool fused = p.nst >= 2 && (bi_conv_chain_covers(&p, 0) || ends_in_norm_applied_by_pool(&p) ||
                              ends_in_norm_applied_by_epilogue(&p) || gemm_epilogue_covers(&p) ||
                              reduce_broadcast_covers(&p));
  bi_plan_free(&p);
  return fused;
}

int mk_builtin_propose(const mk_propose_request *req, mk_candidate_list *out, mk_errmsg *err) {
  if (req == NULL || req->graph == NULL || req->subkernel == NULL || out == NULL)
    return mk_errf(err, MK_EINVAL, "no subkernel given");
  /* Only in-place updates (num_batches_tracked += 1): the verifier can judge
   * them, but a kernel launch for one increment gains nothing over PyTorch's. */
  if (req->subkernel->noutputs == 0)
    return mk_errf(err, MK_EUNSUPPORTED,
                   "subkernel %s has no outputs (only in-place updates, such as "
                   "num_batches_tracked += 1): a kernel launch gains nothing there, the "
                   "reference stays",
                   req->subkernel->name ? req->subkernel->name : "?");
  bi_plan p;
  int rc = bi_plan_build(req->graph, req->subkernel, &p, err);
  if (rc) return rc;
  bool has_base = false, has_gemm = false, has_conv = false, has_kernel = false, has_norm = false;
  bool conv_bias = false; /* a convolution with a bias tensor */
  bool has_igemm = false; /* a convolution the implicit-GEMM kernel computes */
  bool igemm_first = false; /* ... whose implicit GEMM is likely to beat cuDNN */
  bool few_channels = false; /* ... with few input channels: cuDNN's is float32 */
  bool narrow = false;       /* ... with fewer input channels than a dot's K */
  bool stem = false;         /* ... that the stem loop computes (bi_conv_stem_ok) */
  for (int s = 0; s < p.nst; s++) {
    bi_kind k = p.st[s].kind;
    has_base |= k == BI_EW || k == BI_REDUCE || k == BI_SOFTMAX || k == BI_NORM || k == BI_POOL;
    has_gemm |= k == BI_GEMM;
    has_norm |= k == BI_NORM;
    if (k == BI_TORCH) {
      char sn[64];
      bi_short(&req->graph->nodes[p.st[s].nodes[0]], sn, sizeof sn);
      has_conv |= strstr(sn, "2d") != NULL || strstr(sn, "3d") != NULL;
      conv_bias |= bi_arg_tensor(bi_arg(&req->graph->nodes[p.st[s].nodes[0]], 2, "bias")) >= 0;
      if (bi_conv_igemm_supported(req->graph, &req->graph->nodes[p.st[s].nodes[0]])) {
        has_igemm = true;
        igemm_first |= bi_conv_igemm_promising(&p, s);
        few_channels |= mk_layout_few_channels(req->graph, &req->graph->nodes[p.st[s].nodes[0]]);
        narrow |= bi_conv_narrow(req->graph, &req->graph->nodes[p.st[s].nodes[0]]);
        stem |= bi_conv_stem_ok(req->graph, &req->graph->nodes[p.st[s].nodes[0]]);
      }
    }
    has_kernel |= k != BI_VIEW && k != BI_TORCH && k != BI_REPLAY;
  }
  /* A lone 2-d/3-d convolution still has variants worth measuring: the same
   * cuDNN call in channels_last (1.3-1.65x on H200, PERF-NOTES), and, when it
   * has a bias, the default layout with the bias added by a vectorised kernel
   * instead of cuDNN's separate pass (numerically the eager computation, for
   * when channels_last rounds differently under TF32). */
  bool cl_only = !has_kernel && has_conv && !conv_bias;
  bool lone_conv = !has_kernel && has_conv;
  if (!has_kernel && !lone_conv) {
    bi_plan_free(&p);
    return mk_errf(err, MK_EUNSUPPORTED,
                   "subkernel %s has only view or delegated ops: nothing for a Triton kernel to do",
                   req->subkernel->name ? req->subkernel->name : "?");
  }
  cfg_tables tb = tables_for(req->device);
  int nb = has_base ? tb.n_ew : 1, ng = has_gemm ? tb.n_gemm * 2 + 1 : 1;
  int nc = has_conv ? 2 + (has_igemm ? tb.n_igemm : 0) : 1;
  int nn = has_norm ? (int)(sizeof norm_splits / sizeof norm_splits[0]) : 1;
  /* Norms applied by the pool that reads them (builtin_plan.c): each such
   * configuration also with the norm stored by its own kernel. On an H100
   * (problem 85) the first version of the applying pool, with its per-tap
   * index arithmetic, ran 2.31 ms where the stored form ran 1.77: which
   * wins is the verifier's to say. */
  bool on_load = bi_plan_norm_on_load(&p);
  bi_plan stored_plan = {0};
  if (on_load && bi_plan_build(req->graph, req->subkernel, &stored_plan, err) == 0)
    bi_plan_store_norms(&stored_plan);
  else
    on_load = false;
  int nsv = on_load ? 2 : 1;
  /* In-place epilogues of norms (`out += bn(...)`) are stored into their
   * target by the channel-tiled norm only: a configuration that cannot write
   * them is written again from a plan with them as their own stage. */
  bi_plan apart_plan = {0};
  bool apart = bi_plan_build(req->graph, req->subkernel, &apart_plan, err) == 0 &&
               bi_plan_unfuse_inplace_epilogues(&apart_plan);
  /* Reductions whose next run broadcasts their value back over their input
   * (bi_plan_fuse_broadcast_epilogues): one kernel reads the input, reduces
   * and runs the run on the same tiles; the plan without it (two kernels:
   * the reduced tensor stored, then read by the run's own kernel, whose
   * grid covers every element) is the `_apart` variant. The fused kernel has
   * one program per block of kept columns (or of short rows): with few of
   * them (a row reduction of a few long rows) the two kernels come first. */
  bi_plan bapart_plan = {0};
  bool bcast = bi_plan_build(req->graph, req->subkernel, &bapart_plan, err) == 0 &&
               bi_plan_fuse_broadcast_epilogues(&p);
  if (bcast) {
    if (on_load) bi_plan_fuse_broadcast_epilogues(&stored_plan);
    if (apart) bi_plan_fuse_broadcast_epilogues(&apart_plan);
  }
  bool bcast_few = bcast && bi_plan_broadcast_programs(&p) < BCAST_MIN_PROGRAMS;
  int nba = bcast ? 2 : 1;
  int nv = nb * ng * nc * nn * nsv * nba; /* an upper bound: the loops below skip some */
  int modes = has_norm ? bi_norm_modes(&p) : 1;
  bool short_rows = has_norm && (modes & 4) && bi_norm_short_rows(&p);
  int sp_first = 0; /* the first norm layout any norm stage can use */
  while (sp_first + 1 < nn && !(modes & (1 << sp_first))) sp_first++;
  variant *vs = calloc((size_t)nv, sizeof *vs);
  if (vs == NULL) {
    bi_plan_free(&p);
    bi_plan_free(&stored_plan);
    bi_plan_free(&apart_plan);
    bi_plan_free(&bapart_plan);
    return mk_errf(err, MK_ENOMEM, "out of memory");
  }
  int i = 0;
  for (int b = 0; b < nb; b++)
    for (int g = 0; g < ng; g++)
      for (int c = cl_only ? 1 : 0; c < nc; c++)
        for (int sp = 0; sp < nn; sp++) {
          if (!(modes & (1 << sp))) continue; /* no norm stage can use this layout */
          /* The cuBLAS variant (g = last), channels_last and split norms are as
           * promising as the default: which wins depends on the shapes. */
          int gd = g == tb.n_gemm * 2 ? 1 : (g % tb.n_gemm) + (g / tb.n_gemm);
          /* The interpreter runs split norms' many small programs slowly: on
           * the CPU try them after the other layouts. */
          int sd = tb.ew == ew_cpu && norm_splits[sp] > 0 ? 1 : 0;
          /* Short rows (bi_norm_short_rows): the row loop a step after the
           * rows in registers, on either device. */
          if (short_rows && norm_splits[sp] == 0) sd = 1;
          /* Where cuDNN is likely faster, the implicit GEMMs come after its variants;
           * over few channels the TF32 ones a step after the 3xTF32 ones and cuDNN's
           * NCHW variant (they seldom pass there), beside its channels_last one. */
          int cd = few_channels && c == 1 ? 1 : 0;
          if (c >= 2 && tb.igemm[c - 2].pack && !narrow) continue; /* packs nothing */
          if (c >= 2 && tb.igemm[c - 2].stem && !stem) continue;   /* no stem in it */
          if (c >= 2) {
            const igemm_cfg *ic = &tb.igemm[c - 2];
            bool exact = few_channels && (strcmp(ic->prec, "tf32x3") == 0 || ic->round == 4);
            cd = (exact ? 0 : ic->dist + (few_channels ? 1 : 0)) + (igemm_first ? 0 : 2);
          }
          /* `_apart` beside each elementwise configuration of the first GEMM,
           * convolution and norm ones only: which of the two wins depends on
           * the reduction's shape, not on those (and each is a kernel to verify). */
          bool first_others = g == 0 && c == (cl_only ? 1 : 0) && sp == sp_first;
          for (int ns = 0; ns < nsv; ns++)
            for (int ba = 0; ba < nba; ba++) {
              if (ba == 1 && (!first_others || ns != 0)) continue;
              vs[i++] = (variant){.base = b, .gemm = g, .cl = c, .split = sp, .normst = ns,
                                  .bapart = ba,
                                  .dist = b + gd + sd + cd + (ba != bcast_few ? 1 : 0)};
            }
        }
  nv = i;
  qsort(vs, (size_t)nv, sizeof *vs, cmp_variant);
  int max = req->max_candidates > 0 ? req->max_candidates : nv;
  int added = 0, first = out->n;
  /* Why channel tiles were not proposed (a note): the first reason of a
   * configuration whose convolutions write channels_last, else of any (an
   * NCHW convolution's "input is not channels_last" says least). */
  char ctile_why[400] = "", ctile_why_nchw[400] = "";
  /* A configuration the generator cannot write (a layout an in-place op
   * cannot store through) is skipped, not the subkernel: AlexNet's conv1 +
   * relu_ had no candidate because its channels_last variant could not
   * write the relu in place. The first reason is the answer only when no
   * configuration is written. */
  char skipped_why[MK_ERRMSG_MAX] = "";
  rc = 0;
  for (i = 0; i < nv && added < max && rc == 0; i++) {
    mk_buf name;
    mk_buf_init(&name, 256);
    variant_name(&tb, &vs[i], has_base, has_gemm, has_conv, has_norm, &name);
    /* Repair / optimise: propose the other configurations, not the parent again. */
    if (req->parent && req->parent->name && strcmp(req->parent->name, mk_buf_cstr(&name)) == 0) {
      mk_buf_free(&name);
      continue;
    }
    bi_config cfg;
    make_config(&tb, &vs[i], &cfg);
    char *src = NULL;
    char *why = cfg.channels_last || cfg.conv_igemm || !has_conv ? ctile_why : ctile_why_nchw;
    const bi_plan *plan = vs[i].bapart ? &bapart_plan : cfg.norm_stored ? &stored_plan : &p;
    rc = emit_module(plan, &cfg, mk_buf_cstr(&name), &src, why, sizeof ctile_why, err);
    if ((rc == MK_EUNSUPPORTED || rc == CTILE_DECLINED) && apart && !vs[i].bapart)
      rc = emit_module(&apart_plan, &cfg, mk_buf_cstr(&name), &src, why, sizeof ctile_why, err);
    if (rc == CTILE_DECLINED) {
      rc = 0;
      mk_buf_free(&name);
      continue;
    }
    if (rc == MK_EUNSUPPORTED) {
      if (skipped_why[0] == '\0')
        mk_strlcpy(skipped_why, err ? err->text : "unsupported", sizeof skipped_why);
      rc = 0;
      mk_buf_free(&name);
      continue;
    }
    bool parent_code = rc == 0 && req->parent && req->parent->source &&
                       strcmp(code_of(req->parent->source), code_of(src)) == 0;
    if (rc == 0 && (parent_code || same_code_listed(out, first, src))) {
      free(src);
      mk_buf_free(&name);
      continue;
    }
    if (rc == 0) {
      mk_candidate c = {.name = mk_buf_steal(&name, NULL), .source = src,
                        .origin = mk_strdup("builtin")};
      mk_buf notes;
      mk_buf_init(&notes, 512);
      mk_buf_printf(&notes, "%d kernel stage(s)%s%s%s", p.nst,
                    cfg.conv_igemm && has_igemm ? ", convolution as an implicit GEMM, the tail fused"
                    : cfg.channels_last && has_conv ? ", channels_last conv" : "",
                    has_gemm ? (cfg.gemm_torch ? ", cuBLAS GEMM + fused epilogue" : ", Triton GEMM") : "",
                    cfg.norm_ctile ? ", batch norm on [pixels x channels] tiles" : "");
      c.notes = mk_buf_steal(&notes, NULL);
      mk_buf_free(&notes);
      if (!c.name || !c.origin || !c.notes) {
        mk_candidate_free(&c);
        rc = mk_errf(err, MK_ENOMEM, "out of memory");
      } else {
        rc = mk_candidate_list_push(out, c);
        if (rc) mk_errf(err, rc, "out of memory");
        else added++;
      }
    }
    mk_buf_free(&name);
  }
  /* Why a configuration on channel tiles was not proposed (the first reason),
   * in the notes of the others. */
  if (ctile_why[0] == '\0') memcpy(ctile_why, ctile_why_nchw, sizeof ctile_why);
  for (i = first; rc == 0 && ctile_why[0] && i < out->n; i++) {
    mk_candidate *c = &out->items[i];
    if (strstr(c->name, "_ctile")) continue;
    mk_buf notes;
    mk_buf_init(&notes, 1024);
    mk_buf_printf(&notes, "%s; %s", c->notes ? c->notes : "", ctile_why);
    char *note = mk_buf_steal(&notes, NULL);
    mk_buf_free(&notes);
    if (note == NULL) {
      rc = mk_errf(err, MK_ENOMEM, "out of memory");
      break;
    }
    free(c->notes);
    c->notes = note;
  }
  if (rc == 0 && out->n == first && skipped_why[0])
    rc = mk_errf(err, MK_EUNSUPPORTED, "%s", skipped_why);
  else if (rc == 0 && err)
    err->text[0] = '\0'; /* a skipped configuration's reason is no error */
  free(vs);
  bi_plan_free(&p);
  bi_plan_free(&stored_plan);
  bi_plan_free(&apart_plan);
  bi_plan_free(&bapart_plan);
  return rc;
}
