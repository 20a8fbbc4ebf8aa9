# ModelNew composed by MKEvolve 0.1.0 from tests/fixtures/propose/conv_chain.py (class Model).
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 conv2d_add_relu_mul          lines 14-15  reference (PyTorch)
#   sk1 conv_transpose2d_tanh_sub_mean lines 16-18  reference (PyTorch)

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the original module (verbatim) ----
"""Convolution followed by an elementwise chain and a channel reduction (fixture)."""
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(9, 10, 3)
        self.convt = nn.ConvTranspose2d(10, 4, 3, stride=2)
        self.bias = nn.Parameter(torch.randn(10, 1, 1))

    def forward(self, x):
        x = self.conv(x)
        x = torch.relu(x + self.bias) * 0.5
        y = self.convt(x)
        y = torch.tanh(y) - 0.25
        return torch.mean(y, dim=1, keepdim=True)


def get_inputs():
    return [torch.randn(2, 9, 10, 9)]


def get_init_inputs():
    return []


def _mk_keep_channels_last(module, names):
    """Stores the named 4-d/5-d parameters of `module` in channels_last."""
    for name in names:
        try:
            p = module.get_parameter(name)
        except AttributeError:
            continue
        fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(p.dim())
        if fmt is not None:
            p.data = p.data.contiguous(memory_format=fmt)


# ---- layout conversions of the composed forward (MKEvolve) ----
# x.contiguous(memory_format=fmt), as a tiled Triton transpose where that is faster.
import os

try:
    import triton
    import triton.language as tl
except ImportError:  # no Triton: PyTorch's copy everywhere
    triton = None

_MK_CONVERT_MIN_NUMEL = 1 << 20  # below this, launching from Python costs more than the copy
_MK_CONVERT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)

if triton is not None:
    @triton.jit
    def _mk_transpose_kernel(src, dst, A, B, BLOCK_A: tl.constexpr,
                             BLOCK_B: tl.constexpr):
        # dst[n, b, a] = src[n, a, b] for one [BLOCK_A x BLOCK_B] tile of image n; the
        # tiles of one image on axis 0 (no 65535 limit), consecutive ones along b
        tiles_b = tl.cdiv(B, BLOCK_B)
        tile = tl.program_id(0)
        n = tl.program_id(1).to(tl.int64)
        a = (tile // tiles_b) * BLOCK_A + tl.arange(0, BLOCK_A).to(tl.int64)
        b = (tile % tiles_b) * BLOCK_B + tl.arange(0, BLOCK_B).to(tl.int64)
        mask = (a[:, None] < A) & (b[None, :] < B)
        base = n * A * B
        val = tl.load(src + base + a[:, None] * B + b[None, :], mask=mask)
        tl.store(dst + base + b[None, :] * A + a[:, None], val, mask=mask)


def _mk_convert(x, fmt):
    if x.is_contiguous(memory_format=fmt):
        return x
    cl = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    usable = (triton is not None and cl is not None and x.numel() >= _MK_CONVERT_MIN_NUMEL
              and x.dtype in _MK_CONVERT_DTYPES
              and (x.is_cuda or os.environ.get('TRITON_INTERPRET') == '1')
              and not (x.requires_grad and torch.is_grad_enabled()))
    if usable and fmt == cl and x.is_contiguous():
        a, b = x.shape[1], x[0, 0].numel()  # [C x pixels] planes become [pixels x C]
    elif usable and fmt == torch.contiguous_format and x.is_contiguous(memory_format=cl):
        a, b = x[0, 0].numel(), x.shape[1]
    else:
        return x.contiguous(memory_format=fmt)
    out = torch.empty_like(x, memory_format=fmt)
    grid = (triton.cdiv(a, 64) * triton.cdiv(b, 64), x.shape[0])
    _mk_transpose_kernel[grid](x, out, a, b, BLOCK_A=64, BLOCK_B=64, num_warps=4)
    return out


class ModelNew(Model):
    """The same module, composed of verified subkernels."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # conv weights the kernels read in channels_last: converted once
        _mk_keep_channels_last(self, ("conv.weight", "convt.weight", ))

    def forward(self, x):
        x = _mk_convert(x, torch.channels_last)
        # conv2d_add_relu_mul — lines 14-15 — PyTorch reference
        v6 = F.conv2d(x, self.conv.weight, self.conv.bias, (1, 1), (0, 0), (1, 1), 1)
        v7 = v6.add(self.bias)
        v8 = torch.relu(v7)
        v9 = v8.mul(0.5)
        # conv_transpose2d_tanh_sub_mean — lines 16-18 — PyTorch reference
        v10 = F.conv_transpose2d(v9, self.convt.weight, self.convt.bias, (2, 2), (0, 0), (0, 0), 1, (1, 1))
        v11 = torch.tanh(v10)
        v12 = v11.sub(0.25)
        v13 = torch.mean(v12, dim=1, keepdim=True)
        return v13
