"""ReLU (KernelBench level1 19_ReLU)."""
import torch
import triton
import triton.language as tl


@triton.jit
def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=m), 0.0), mask=m)


def run(x):
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _relu[(triton.cdiv(n, 65536),)](x, y, n, BLOCK=65536)
    return y
