"""Times three ways of indexing a channel-broadcast operand in an NCHW elementwise tail
(issue #14, level-2 problem 90 at 0.95x of compile): the builtin proposer's flat kernel
that divides every element's offset by runtime sizes, the same kernel with the sizes as
compile-time constants (a division by a constant becomes a multiply and a shift, as in
inductor's code), and a 2-d grid with one (batch, channel) row per program row (one
division per program). torch.compile's own kernel for the same tail is timed beside them,
all on the output of a cuDNN conv3d, in one interleaved run.

Usage: python3 ew_index_probe.py [--shape N C D H W] [--reps N]
The default shape is the conv3d output of a 128 x 8 x 16 x 64 x 64 input, 64 channels.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from profile_whole import interleaved  # beside this script


@triton.jit
def _flat_runtime(x_ptr, b_ptr, s_ptr, y_ptr, D1, D2, D3, D4, numel, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    ch = (offs // (D2 * D3 * D4)) % D1
    v = tl.load(x_ptr + offs, mask=mask, other=0) + tl.load(b_ptr + ch, mask=mask, other=0)
    v = tl.where(v > 0, v, v * 0.2) + tl.load(s_ptr + ch, mask=mask, other=0)
    v = tl.minimum(tl.maximum(v, -1.0), 1.0)
    v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, v, mask=mask)


@triton.jit
def _flat_const(
    x_ptr, b_ptr, s_ptr, y_ptr, D1: tl.constexpr, INNER: tl.constexpr, numel, BLOCK: tl.constexpr
):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < numel
    ch = (offs // INNER) % D1
    v = tl.load(x_ptr + offs, mask=mask, other=0) + tl.load(b_ptr + ch, mask=mask, other=0)
    v = tl.where(v > 0, v, v * 0.2) + tl.load(s_ptr + ch, mask=mask, other=0)
    v = tl.minimum(tl.maximum(v, -1.0), 1.0)
    v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, v, mask=mask)


@triton.jit
def _rows_2d(x_ptr, b_ptr, s_ptr, y_ptr, D1, INNER, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    col = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    mask = col < INNER
    ch = row % D1
    offs = row.to(tl.int64) * INNER + col
    v = tl.load(x_ptr + offs, mask=mask, other=0) + tl.load(b_ptr + ch)
    v = tl.where(v > 0, v, v * 0.2) + tl.load(s_ptr + ch)
    v = tl.minimum(tl.maximum(v, -1.0), 1.0)
    v = 0.5 * v * (1.0 + tl.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, v, mask=mask)


def eager_tail(v: torch.Tensor, b: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    v = v + b.view(1, -1, 1, 1, 1)
    v = F.leaky_relu(v, 0.2) + s
    return F.gelu(torch.clamp(v, -1.0, 1.0))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", type=int, nargs=5, default=[128, 64, 14, 62, 62])
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    dev = torch.device("cuda")
    n, c, d, h, w = a.shape
    v = torch.randn(n, c, d, h, w, device=dev)
    b = torch.randn(c, device=dev)
    s = torch.randn(c, 1, 1, 1, device=dev)
    inner = d * h * w
    numel = v.numel()
    ref = eager_tail(v, b, s)
    compiled = torch.compile(eager_tail)

    def launch(kind: str) -> torch.Tensor:
        y = torch.empty_like(v)
        if kind == "flat_runtime":
            _flat_runtime[(triton.cdiv(numel, 1024),)](
                v, b, s, y, c, d, h, w, numel, BLOCK=1024, num_warps=4
            )
        elif kind == "flat_const":
            _flat_const[(triton.cdiv(numel, 1024),)](
                v, b, s, y, c, inner, numel, BLOCK=1024, num_warps=4
            )
        else:
            _rows_2d[(n * c, triton.cdiv(inner, 1024))](
                v, b, s, y, c, inner, BLOCK=1024, num_warps=4
            )
        return y

    fns: dict[str, Callable[[], object]] = {
        "eager": lambda: eager_tail(v, b, s),
        "compile": lambda: compiled(v, b, s),
        "flat_runtime": lambda: launch("flat_runtime"),
        "flat_const": lambda: launch("flat_const"),
        "rows_2d": lambda: launch("rows_2d"),
    }
    for k, fn in fns.items():
        err = (fn() - ref).abs().max().item()  # type: ignore[operator]
        print(f"{k:14s} max err {err:.3g}")
    gb = 2 * numel * 4 / 1e9
    for k, ms in interleaved(fns, a.reps).items():
        print(f"{k:14s} {ms:8.3f} ms  {gb / ms:7.1f} TB/s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
