# ModelNew composed by MKEvolve 0.1.0 from kernelbench/level3/25_ShuffleNetUnit.py (class Model).
# Subkernels (each verified against PyTorch before it was chosen):
#   sk0 conv2d                       lines 51-51  reference (PyTorch)
#   sk1 add                          lines 51-51  reference (PyTorch)
#   sk2 batch_norm_relu              lines 51-51  reference (PyTorch)
#   sk3 conv2d_2                     lines 52-52  reference (PyTorch)
#   sk4 add_2                        lines 52-52  reference (PyTorch)
#   sk5 batch_norm                   lines 52-86  reference (PyTorch)
#   sk6 conv2d_3                     lines 54-54  reference (PyTorch)
#   sk7 add_3                        lines 54-54  reference (PyTorch)
#   sk8 batch_norm_relu_2            lines 54-54  reference (PyTorch)
#   sk9 conv2d_4                     lines 56-56  reference (PyTorch)
#   sk10 add_4                        lines 56-56  reference (PyTorch)
#   sk11 batch_norm_add               lines 56-56  reference (PyTorch)

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

# ---- the original module (verbatim) ----
import torch
import torch.nn as nn
import torch.nn.functional as F

class Model(nn.Module):
    def __init__(self, in_channels, out_channels, groups=3):
        """
        ShuffleNet unit implementation.

        :param in_channels: Number of input channels.
        :param out_channels: Number of output channels.
        :param groups: Number of groups for group convolution.
        """
        super(Model, self).__init__()
        
        # Ensure the output channels are divisible by groups
        assert out_channels % 4 == 0
        mid_channels = out_channels // 4
        
        # First 1x1 group convolution
        self.conv1 = nn.Conv2d(in_channels, mid_channels, kernel_size=1, stride=1, padding=0, groups=groups, bias=False)
        self.bn1 = nn.BatchNorm2d(mid_channels)
        
        # Depthwise 3x3 convolution
        self.conv2 = nn.Conv2d(mid_channels, mid_channels, kernel_size=3, stride=1, padding=1, groups=mid_channels, bias=False)
        self.bn2 = nn.BatchNorm2d(mid_channels)
        
        # Second 1x1 group convolution
        self.conv3 = nn.Conv2d(mid_channels, out_channels, kernel_size=1, stride=1, padding=0, groups=groups, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        
        # Shuffle operation
        self.shuffle = ChannelShuffle(groups)
        
        # Shortcut connection if input and output channels are the same
        if in_channels == out_channels:
            self.shortcut = nn.Sequential()
        else:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=1, padding=0, bias=False),
                nn.BatchNorm2d(out_channels)
            )
    
    def forward(self, x):
        """
        Forward pass for ShuffleNet unit.

        :param x: Input tensor, shape (batch_size, in_channels, height, width)
        :return: Output tensor, shape (batch_size, out_channels, height, width)
        """
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out = self.shuffle(out)
        out = F.relu(self.bn3(self.conv3(out)))
        
        out += self.shortcut(x)
        return out

class ChannelShuffle(nn.Module):
    def __init__(self, groups):
        """
        Channel shuffle operation.

        :param groups: Number of groups for shuffling.
        """
        super(ChannelShuffle, self).__init__()
        self.groups = groups
    
    def forward(self, x):
        """
        Forward pass for channel shuffle.

        :param x: Input tensor, shape (batch_size, channels, height, width)
        :return: Output tensor, shape (batch_size, channels, height, width)
        """
        batch_size, channels, height, width = x.size()
        channels_per_group = channels // self.groups
        
        # Reshape
        x = x.view(batch_size, self.groups, channels_per_group, height, width)
        
        # Transpose
        x = x.transpose(1, 2).contiguous()
        
        # Flatten
        x = x.view(batch_size, -1, height, width)
        
        return x
    
batch_size = 10
input_channels = 240
out_channels = 480
groups = 3
height = 224
width = 224
num_classes = 1000

def get_inputs():
    return [torch.rand(batch_size, input_channels, height, width)]

def get_init_inputs():
    return [input_channels, out_channels, groups]


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
        _mk_keep_channels_last(self, ("conv1.weight", "conv2.weight", "shortcut.0.weight", ))

    def forward(self, x):
        x = x.contiguous(memory_format=torch.channels_last)
        # conv2d — lines 51-51 — PyTorch reference
        v25 = F.conv2d(x, self.conv1.weight, None, (1, 1), (0, 0), (1, 1), 3)
        # add — lines 51-51 — PyTorch reference
        v26 = self.bn1.num_batches_tracked.add_(1)
        # batch_norm_relu — lines 51-51 — PyTorch reference
        v27 = F.batch_norm(v25, self.bn1.running_mean, self.bn1.running_var, weight=self.bn1.weight, bias=self.bn1.bias, training=True, momentum=0.1, eps=1e-05)
        v30 = F.relu(v27, inplace=False)
        # conv2d_2 — lines 52-52 — PyTorch reference
        v31 = F.conv2d(v30, self.conv2.weight, None, (1, 1), (1, 1), (1, 1), 120)
        # add_2 — lines 52-52 — PyTorch reference
        v32 = self.bn2.num_batches_tracked.add_(1)
        # batch_norm — lines 52-86 — PyTorch reference
        v33 = F.batch_norm(v31, self.bn2.running_mean, self.bn2.running_var, weight=self.bn2.weight, bias=self.bn2.bias, training=True, momentum=0.1, eps=1e-05)
        v33 = v33.contiguous()
        v36 = v33.view(10, 3, 40, 224, 224)
        v37 = v36.transpose(1, 2)
        v38 = v37.contiguous()
        v39 = v38.view(10, -1, 224, 224)
        # conv2d_3 — lines 54-54 — PyTorch reference
        v40 = F.conv2d(v39, self.conv3.weight, None, (1, 1), (0, 0), (1, 1), 3)
        v40 = v40.contiguous(memory_format=torch.channels_last)
        # add_3 — lines 54-54 — PyTorch reference
        v41 = self.bn3.num_batches_tracked.add_(1)
        # batch_norm_relu_2 — lines 54-54 — PyTorch reference
        v42 = F.batch_norm(v40, self.bn3.running_mean, self.bn3.running_var, weight=self.bn3.weight, bias=self.bn3.bias, training=True, momentum=0.1, eps=1e-05)
        v45 = F.relu(v42, inplace=False)
        # conv2d_4 — lines 56-56 — PyTorch reference
        v46 = F.conv2d(x, self.shortcut[0].weight, None, (1, 1), (0, 0), (1, 1), 1)
        # add_4 — lines 56-56 — PyTorch reference
        v47 = self.shortcut[1].num_batches_tracked.add_(1)
        # batch_norm_add — lines 56-56 — PyTorch reference
        v48 = F.batch_norm(v46, self.shortcut[1].running_mean, self.shortcut[1].running_var, weight=self.shortcut[1].weight, bias=self.shortcut[1].bias, training=True, momentum=0.1, eps=1e-05)
        v51 = v45.add_(v48)
        return v51
