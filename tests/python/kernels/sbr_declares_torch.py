"""Declared delegation: Triton does scale and bias, then torch.relu, declared below."""
import torch
import triton
import triton.language as tl

MK_USES_TORCH = ("relu",)


@triton.jit
def _sb(x_ptr, b_ptr, y_ptr, n, D, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs % D, mask=m)
    tl.store(y_ptr + offs, x * 2.0 + b, mask=m)


def run(x, b):
    y = torch.empty_like(x)
    n = x.numel()
    _sb[(triton.cdiv(n, 1024),)](x, b, y, n, x.shape[-1], BLOCK=1024)
    return torch.relu(y)
