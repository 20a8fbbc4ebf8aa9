# ModelNew composed by MKEvolve 0.1.0 from kernelbench/level2/15_ConvTranspose3d_BatchNorm_Subtract.py (class Model).
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 conv_transpose3d             lines 14-14  reference (PyTorch)
#   sk1 add                          lines 15-15  reference (PyTorch)
#   sk2 batch_norm_mean              lines 15-16  reference (PyTorch)
#   sk3 sub                          lines 16-16  reference (PyTorch)

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the original module (verbatim) ----
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    A 3D convolutional transpose layer followed by Batch Normalization and subtraction.
    """
    def __init__(self, in_channels, out_channels, kernel_size, stride, padding, bias=True):
        super(Model, self).__init__()
        self.conv_transpose = nn.ConvTranspose3d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=bias)
        self.batch_norm = nn.BatchNorm3d(out_channels)

    def forward(self, x):
        x = self.conv_transpose(x)
        x = self.batch_norm(x)
        x = x - torch.mean(x, dim=(2, 3, 4), keepdim=True)  # Subtract mean along spatial dimensions
        return x

batch_size = 16
in_channels = 16
out_channels = 32
depth, height, width = 16, 32, 32
kernel_size = 3
stride = 2
padding = 1

def get_inputs():
    return [torch.rand(batch_size, in_channels, depth, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, stride, padding]


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
        _mk_keep_channels_last(self, ("conv_transpose.weight", ))

    def forward(self, x):
        x = _mk_convert(x, torch.channels_last_3d)
        # conv_transpose3d — lines 14-14 — PyTorch reference
        v8 = F.conv_transpose3d(x, self.conv_transpose.weight, self.conv_transpose.bias, (2, 2, 2), (1, 1, 1), (0, 0, 0), 1, (1, 1, 1))
        # add — lines 15-15 — PyTorch reference
        v9 = self.batch_norm.num_batches_tracked.add_(1)
        # batch_norm_mean — lines 15-16 — PyTorch reference
        v10 = F.batch_norm(v8, self.batch_norm.running_mean, self.batch_norm.running_var, weight=self.batch_norm.weight, bias=self.batch_norm.bias, training=True, momentum=0.1, eps=1e-05)
        v13 = torch.mean(v10, dim=(2, 3, 4), keepdim=True)
        # sub — lines 16-16 — PyTorch reference
        v14 = v10.sub(v13)
        return v14
