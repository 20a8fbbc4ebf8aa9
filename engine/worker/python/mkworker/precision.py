"""The reference's own precision: TF32 on the GPU.

PyTorch's defaults let cuDNN convolutions use TF32 on the GPU
(`torch.backends.cudnn.allow_tf32 = True`), so the reference a candidate is compared with
is itself only accurate to about 1e-3 relative on a convolution's output, and which
elements it rounds which way depends on the algorithm cuDNN picks (a channels_last
convolution picks another one than NCHW). A candidate that runs the same convolution in
another layout differs from the reference by the reference's own rounding, not by a bug,
and fails a 1e-4 tolerance it would pass against the exact result.

So when a candidate fails the plain comparison while TF32 is in force, the verifier runs
the reference once more with TF32 off (full FP32: the exact answer the TF32 reference
approximates) and measures the reference's own error on each output,
`noise = max |reference - exact|`. The candidate then passes if every element is within
`atol + NOISE_FACTOR * noise + rtol * |exact|` of the exact result: no further from the
true answer than twice the reference's own error, plus the usual tolerance. Where the
reference does not use TF32 (no convolution; matmuls, whose TF32 is off by default) the
noise is 0 and the verdict is the plain one. A candidate that lowers precision beyond
what PyTorch's defaults do (plain TF32 GEMMs for an FP32 matmul, bf16) still fails.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch

from mkworker.compare import chunks

# How many times the reference's own TF32 error a candidate may be off the exact result
# (on top of atol): two independent TF32 roundings of the same sums differ by up to about
# twice the error of one.
NOISE_FACTOR = 2.0


def tf32_in_force(device: torch.device) -> bool:
    """Whether the reference may run TF32 on this device under the current flags."""
    return device.type == "cuda" and (bool(torch.backends.cudnn.allow_tf32)
                                      or bool(torch.backends.cuda.matmul.allow_tf32))


@contextmanager
def full_fp32() -> Iterator[None]:
    """TF32 off for cuDNN and cuBLAS inside the block; the flags are restored after."""
    cudnn, matmul = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    try:
        yield
    finally:
        torch.backends.cudnn.allow_tf32 = cudnn
        torch.backends.cuda.matmul.allow_tf32 = matmul


def output_noise(reference: list[Any], exact: list[Any]) -> list[float]:
    """Per output, the largest |reference - exact| over elements finite in both (0 for
    non-float outputs and for outputs whose shapes differ, which the comparison reports)."""
    noise: list[float] = []
    for r, e in zip(reference, exact, strict=False):
        if not (isinstance(r, torch.Tensor) and isinstance(e, torch.Tensor)) or \
                r.shape != e.shape or not r.is_floating_point() or r.numel() == 0:
            noise.append(0.0)
            continue
        n = 0.0
        for _, (r64, e64) in chunks(r.detach().reshape(-1), e.detach().reshape(-1)):
            fin = torch.isfinite(r64) & torch.isfinite(e64)
            if bool(fin.any().item()):
                n = max(n, float((r64 - e64).abs()[fin].max().item()))
        noise.append(n if math.isfinite(n) else 0.0)
    return noise


def widened_atol(atol: float, noise: list[float]) -> list[float]:
    """The per-output absolute tolerance against the exact result."""
    return [atol + NOISE_FACTOR * n for n in noise]


def note(noise: list[float]) -> str:
    """One line for reports: why a candidate passed against the FP32 result."""
    return (f"compared with the full-FP32 result: the reference runs TF32 (PyTorch's default "
            f"for cuDNN convolutions) and is itself off by up to {max(noise):.3g}; allowed "
            f"atol + {NOISE_FACTOR:g}x that")
