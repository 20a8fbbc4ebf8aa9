# ModelNew composed by MKEvolve 0.1.0 from kernelbench/level2/15_ConvTranspose3d_BatchNorm_Subtract.py (class Model).
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 conv_transpose3d_add         lines 14-15  reference (PyTorch)
#   sk1 batch_norm_mean              lines 15-16  reference (PyTorch)
#   sk2 sub                          lines 16-16  reference (PyTorch)

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


class ModelNew(Model):
    """The same module, composed of verified subkernels."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # conv weights the kernels read in channels_last: converted once
        _mk_keep_channels_last(self, ("conv_transpose.weight", ))

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last_3d)
        # conv_transpose3d_add — lines 14-15 — PyTorch reference
        v8 = F.conv_transpose3d(x, self.conv_transpose.weight, self.conv_transpose.bias, (2, 2, 2), (1, 1, 1), (0, 0, 0), 1, (1, 1, 1))
        v9 = self.batch_norm.num_batches_tracked.add_(1)
        # batch_norm_mean — lines 15-16 — PyTorch reference
        v10 = F.batch_norm(v8, self.batch_norm.running_mean, self.batch_norm.running_var, weight=self.batch_norm.weight, bias=self.batch_norm.bias, training=True, momentum=0.1, eps=1e-05)
        v13 = torch.mean(v10, dim=(2, 3, 4), keepdim=True)
        # sub — lines 16-16 — PyTorch reference
        v14 = v10.sub(v13)
        return v14
