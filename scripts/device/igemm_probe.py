"""Where the pooled implicit GEMM loses its time (issue #14), measured on the GPU.

One hand-written Triton convolution (2-d, channels_last, TF32 tensor cores) in
the shape of the builtin proposer's `igemm` kernels, with switches for the
suspects named in docs/bench/conv-fused-h100/README.md:

- POOL 0: the plain convolution, stored channels_last (the main loop's speed);
  POOL 1: a max pool in registers the way the proposer writes it today (rows
  enumerate windows, taps innermost, `tl.reshape` + `tl.max`);
  POOL 2: taps outside the GEMM (rows are pooled pixels; one GEMM per window
  tap, each reduced into the running max elementwise: no reshape).
- ROUND 0: plain TF32 (the tensor cores truncate); 2: rounded to nearest
  inside the loop (the proposer's `tf32r`); 3: input and weight rounded to
  nearest once before the launch (`tf32p`); the float32-accurate ones, for
  references cuDNN computes in float32 (few input channels): 4: 3xTF32 with
  operands split into TF32 high and low parts before the launch (three
  products straight from memory), 5: Triton's own 3xTF32 (split inside the
  loop), 6: float32 FMA ("ieee").
- I64: 64-bit (1) or 32-bit (0) row index math.

Each variant is checked against cuDNN (conv2d + max_pool2d, TF32 as PyTorch
runs it by default) and timed with CUDA events beside cuDNN channels_last.
Usage: python3 igemm_probe.py N C H W OC K POOL_K [--json OUT]
(problem 35: 128 64 128 128 128 3 2). Prints one line per variant.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from profile_whole import median_ms  # beside this script


@triton.jit
def _round_nearest(v):
    return ((v.to(tl.int32, bitcast=True) + 4096) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def _gemm(x_ptr, w_ptr, xl_ptr, wl_ptr, n, oh, ow, m_mask, rn, n_mask, C, H, W, sxn, sxh, sxw,
          swo, swh, sww,
          KH: tl.constexpr, KW: tl.constexpr, ROUND: tl.constexpr,
          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    ncb = tl.cdiv(C, BLOCK_K)
    xbase = n * sxn + oh * sxh + ow * sxw
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for it in range(0, KH * KW * ncb):
        kt = it // ncb
        cs = (it % ncb) * BLOCK_K + tl.arange(0, BLOCK_K)
        c_ok = cs < C
        kh = kt // KW
        kw = kt % KW
        row_ok = m_mask & (oh + kh < H) & (ow + kw < W)
        aoff = (xbase + kh * sxh + kw * sxw)[:, None] + cs[None, :]
        amask = row_ok[:, None] & c_ok[None, :]
        boff = rn[None, :] * swo + (cs + kh * swh + kw * sww)[:, None]
        bmask = c_ok[:, None] & n_mask[None, :]
        a = tl.load(x_ptr + aoff, mask=amask, other=0.0)
        b = tl.load(w_ptr + boff, mask=bmask, other=0.0)
        if ROUND == 2:
            a = _round_nearest(a)
            b = _round_nearest(b)
        if ROUND == 4:  # the small products first, then the large one
            al = tl.load(xl_ptr + aoff, mask=amask, other=0.0)
            bl = tl.load(wl_ptr + boff, mask=bmask, other=0.0)
            acc = tl.dot(al, b, acc, input_precision="tf32")
            acc = tl.dot(a, bl, acc, input_precision="tf32")
        if ROUND == 5:
            acc = tl.dot(a, b, acc, input_precision="tf32x3")
        elif ROUND == 6:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc, input_precision="tf32")
    return acc


@triton.jit
def _probe(x_ptr, w_ptr, xl_ptr, wl_ptr, bias_ptr, y_ptr, NB, C, H, W, OC, OH, OW, QH, QW,
           sxn, sxh, sxw, swo, swh, sww,
           KH: tl.constexpr, KW: tl.constexpr, PK: tl.constexpr, POOL: tl.constexpr,
           ROUND: tl.constexpr, I64: tl.constexpr,
           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pm = tl.program_id(0)
    if I64:
        pm = pm.to(tl.int64)
    rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    n_mask = rn < OC
    bias = tl.load(bias_ptr + rn, mask=n_mask, other=0.0)[None, :]
    if POOL == 0:
        m_mask = rm < NB * OH * OW
        n = rm // (OH * OW)
        oh = (rm // OW) % OH
        ow = rm % OW
        acc = _gemm(x_ptr, w_ptr, xl_ptr, wl_ptr, n, oh, ow, m_mask, rn, n_mask, C, H, W, sxn, sxh,
                    sxw, swo, swh, sww, KH, KW, ROUND, BLOCK_M, BLOCK_N, BLOCK_K) + bias
        # channels_last (N, OH, OW, OC): flat offset rm * OC + channel
        tl.store(y_ptr + rm[:, None] * OC + rn[None, :], acc,
                 mask=m_mask[:, None] & n_mask[None, :])
    elif POOL == 1:
        TAPS: tl.constexpr = PK * PK
        m_mask = rm < NB * QH * QW * TAPS
        q = rm // TAPS
        tap = rm % TAPS
        n = q // (QH * QW)
        oh = ((q // QW) % QH) * PK + tap // PK
        ow = (q % QW) * PK + tap % PK
        acc = _gemm(x_ptr, w_ptr, xl_ptr, wl_ptr, n, oh, ow, m_mask, rn, n_mask, C, H, W, sxn, sxh,
                    sxw, swo, swh, sww, KH, KW, ROUND, BLOCK_M, BLOCK_N, BLOCK_K) + bias
        pooled = tl.max(tl.reshape(acc, (BLOCK_M // TAPS, TAPS, BLOCK_N)), axis=1)
        rq = pm * (BLOCK_M // TAPS) + tl.arange(0, BLOCK_M // TAPS)
        QS = QH * QW
        tl.store(y_ptr + ((rq // QS) * OC * QS + rq % QS)[:, None] + (rn * QS)[None, :], pooled,
                 mask=(rq < NB * QS)[:, None] & n_mask[None, :])
    else:
        QS = QH * QW
        m_mask = rm < NB * QS
        n = rm // QS
        qh = (rm // QW) % QH
        qw = rm % QW
        pooled = tl.full((BLOCK_M, BLOCK_N), float("-inf"), tl.float32)
        for t in tl.static_range(PK * PK):
            acc = _gemm(x_ptr, w_ptr, xl_ptr, wl_ptr, n, qh * PK + t // PK, qw * PK + t % PK,
                        m_mask, rn, n_mask, C, H, W, sxn, sxh, sxw, swo, swh, sww, KH, KW, ROUND,
                        BLOCK_M, BLOCK_N, BLOCK_K)
            pooled = tl.maximum(pooled, acc)
        pooled = pooled + bias
        tl.store(y_ptr + (n * OC * QS + rm % QS)[:, None] + (rn * QS)[None, :], pooled,
                 mask=m_mask[:, None] & n_mask[None, :])


@triton.jit
def _round_kernel(src, dst, n, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = i < n
    tl.store(dst + i, _round_nearest(tl.load(src + i, mask=m)), mask=m)


def round_tf32(t: torch.Tensor) -> torch.Tensor:
    """t rounded to TF32 (nearest, ties away), same strides."""
    out = torch.empty_like(t)
    n = t.numel()
    _round_kernel[(triton.cdiv(n, 1024),)](t, out, n, BLOCK=1024)
    return out


def untimed(fn: Callable[[], object], reps: int) -> float:
    """Runs fn once (the interpreter's check); no time."""
    fn()
    return 1.0


def launcher(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor, pk: int, pool: int, rnd: int,
             i64: int, bm: int, bn: int, bk: int, warps: int,
             stages: int) -> Callable[[], torch.Tensor]:
    nb, c, h, wd = x.shape
    oc, _, kh, kw = w.shape
    oh, ow = h - kh + 1, wd - kw + 1
    qh, qw = oh // pk, ow // pk
    bk = min(bk, max(16, triton.next_power_of_2(c)))  # a dot's K is at least 16
    if pool == 0:
        y = torch.empty((nb, oh, ow, oc), device=x.device).permute(0, 3, 1, 2)  # channels_last
        rows = nb * oh * ow
    else:
        y = torch.empty((nb, oc, qh, qw), device=x.device)
        rows = nb * qh * qw * (pk * pk if pool == 1 else 1)

    def run() -> torch.Tensor:
        xr, wr = (round_tf32(x), round_tf32(w)) if rnd in (3, 4) else (x, w)
        # 3xTF32 split before the launch: the low parts are what the high ones miss
        xl, wl = (round_tf32(x - xr), round_tf32(w - wr)) if rnd == 4 else (xr, wr)
        sx, sw = xr.stride(), wr.stride()
        _probe[(triton.cdiv(rows, bm), triton.cdiv(oc, bn))](
            xr, wr, xl, wl, bias, y, nb, c, h, wd, oc, oh, ow, qh, qw, sx[0], sx[2], sx[3],
            sw[0], sw[2], sw[3], KH=kh, KW=kw, PK=pk, POOL=pool, ROUND=0 if rnd == 3 else rnd,
            I64=i64, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
        return y
    return run


def main() -> int:
    ap = argparse.ArgumentParser()
    for name in ("n", "c", "h", "w", "oc", "k", "pk"):
        ap.add_argument(name, type=int)
    ap.add_argument("--json")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--cpu", action="store_true", help="check under TRITON_INTERPRET=1, no timing")
    ap.add_argument("--precision", action="store_true",
                    help="only the float32-accurate variants (and tf32p beside them)")
    a = ap.parse_args()
    dev = "cpu" if a.cpu else "cuda"
    timer = untimed if a.cpu else median_ms
    torch.manual_seed(0)
    cl = torch.channels_last
    x = torch.randn(a.n, a.c, a.h, a.w, device=dev).contiguous(memory_format=cl)
    w = (torch.randn(a.oc, a.c, a.k, a.k, device=dev) * 0.05).contiguous(memory_format=cl)
    bias = torch.randn(a.oc, device=dev)
    flops = 2.0 * a.n * (a.h - a.k + 1) * (a.w - a.k + 1) * a.oc * a.c * a.k * a.k
    with torch.no_grad():
        conv = F.conv2d(x, w, bias)
        ref = {0: conv, 1: F.max_pool2d(conv, a.pk), 2: F.max_pool2d(conv, a.pk)}
        # float64 truth for the precision variants: is each as close as cuDNN's own result?
        exact = {}
        if a.precision:
            conv64 = F.conv2d(x.double(), w.double(), bias.double())
            exact = {0: conv64, 1: F.max_pool2d(conv64, a.pk)}
            for pool, want in exact.items():
                gap = ((ref[pool].double() - want).norm() / want.norm()).item()
                print(f"cuDNN (PyTorch's default) vs float64, pool={pool}: rel {gap:.1e}",
                      flush=True)
        base = {"cudnn conv": timer(lambda: F.conv2d(x, w, bias), a.reps),
                "cudnn conv+pool": timer(lambda: F.max_pool2d(F.conv2d(x, w, bias), a.pk), a.reps)}
    rows = [{"variant": k, "ms": v, "tflops": flops / v / 1e9} for k, v in base.items()]
    for r in rows:
        print(f"{r['variant']:58s} {r['ms']:8.3f} ms {r['tflops']:6.1f} TFLOP/s", flush=True)
    configs = [(128, 64, 32, 4, 3), (128, 128, 32, 8, 3), (128, 64, 64, 4, 3), (64, 128, 32, 4, 4),
               (128, 128, 64, 8, 2), (256, 64, 32, 8, 3)]
    first = configs[0]
    variants = [(0, rnd, 1, first) for rnd in (0, 2, 3)] + [(0, 3, 0, first)]
    variants += [(0, 3, 0, cfg) for cfg in configs[1:]] + [(0, 2, 1, cfg) for cfg in configs[1:3]]
    variants += [(pool, rnd, 1, first) for pool in (1, 2) for rnd in (2, 3)]
    variants += [(pool, 3, 0, cfg) for pool in (1, 2) for cfg in configs[:4]]
    if a.precision:
        variants = [(pool, rnd, 0, first) for pool in (0, 1) for rnd in (3, 4, 5, 6)]
    if a.cpu:
        variants = [(pool, rnd, 1, (32, 16, 16, 4, 1)) for pool in (0, 1, 2) for rnd in (0, 3, 4)]
    for pool, rnd, i64, cfg in variants:
        if a.oc <= 64 and cfg[1] > 64:
            continue
        name = f"pool={pool} round={rnd} i64={i64} tile={'x'.join(map(str, cfg))}"
        try:
            run = launcher(x, w, bias, a.pk, pool, rnd, i64, *cfg)
            out = run()
            if not a.cpu:
                torch.cuda.synchronize()
            err = ((out - ref[pool]).norm() / ref[pool].norm()).item()
            err64 = (((out.double() - exact[pool]).norm() / exact[pool].norm()).item()
                     if pool in exact else None)
            ms = timer(run, a.reps)
        except Exception as exc:  # a config may not compile (shared memory)
            print(f"{name:58s} failed: {str(exc).splitlines()[0][:80]}", flush=True)
            continue
        rows.append({"variant": name, "ms": ms, "tflops": flops / ms / 1e9, "rel_err": err,
                     "rel_err_float64": err64})
        vs64 = f" (float64: {err64:.1e})" if err64 is not None else ""
        print(f"{name:58s} {ms:8.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s rel {err:.1e}{vs64}",
              flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"shape": {k: v for k, v in vars(a).items() if k != "json"}, "rows": rows}, f,
                      indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
