# ModelNew composed by MKEvolve 0.1.0 from kernelbench/level2/65_Conv2d_AvgPool_Sigmoid_Sum.py (class Model).
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 conv2d_avg_pool2d_sigmoid_sum lines 14-17  reference (PyTorch)

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the original module (verbatim) ----
import torch
import torch.nn as nn

class Model(nn.Module):
    """
    This model performs a convolution, average pooling, applies sigmoid, and sums the result.
    """
    def __init__(self, in_channels, out_channels, kernel_size, pool_kernel_size):
        super(Model, self).__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.avg_pool = nn.AvgPool2d(pool_kernel_size)

    def forward(self, x):
        x = self.conv(x)
        x = self.avg_pool(x)
        x = torch.sigmoid(x)
        x = torch.sum(x, dim=[1,2,3]) # Sum over all spatial dimensions
        return x

batch_size = 128
in_channels = 8
out_channels = 64
height, width = 384, 384
kernel_size = 3
pool_kernel_size = 4

def get_inputs():
    return [torch.rand(batch_size, in_channels, height, width)]

def get_init_inputs():
    return [in_channels, out_channels, kernel_size, pool_kernel_size]


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


class ModelNew(Model):
    """The same module, composed of verified subkernels."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # conv weights the kernels read in channels_last: converted once
        _mk_keep_channels_last(self, ("conv.weight", ))

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        # conv2d_avg_pool2d_sigmoid_sum — lines 14-17 — PyTorch reference
        v3 = F.conv2d(x, self.conv.weight, self.conv.bias, (1, 1), (0, 0), (1, 1), 1)
        v3 = v3.contiguous(memory_format=torch.channels_last)
        v4 = F.avg_pool2d(v3, 4, 4, 0, False, True, None)
        v4 = v4.contiguous(memory_format=torch.channels_last)
        v5 = torch.sigmoid(v4)
        v5 = v5.contiguous(memory_format=torch.channels_last)
        v6 = torch.sum(v5, dim=[1, 2, 3])
        return v6
