"""scale-bias-relu that produces NaN: sqrt of a negative number where x < 0."""
import torch
import triton
import triton.language as tl


@triton.jit
def _sbr(x_ptr, b_ptr, y_ptr, n, D, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    b = tl.load(b_ptr + offs % D, mask=m)
    y = tl.maximum(x * 2.0 + b, 0.0) + tl.sqrt(tl.minimum(x, 0.0)) * 0.0
    tl.store(y_ptr + offs, y, mask=m)


def run(x, b):
    y = torch.empty_like(x)
    n = x.numel()
    _sbr[(triton.cdiv(n, 1024),)](x, b, y, n, x.shape[-1], BLOCK=1024)
    return y
