"""A small KernelBench-format problem: convolution, bias, scaling, GELU.

Used by scripts/quickstart.sh. Run `mkevolve analyze examples/conv_bias_relu.py`
to see its operator graph, `mkevolve evolve examples/conv_bias_relu.py` to
compose a faster ModelNew.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, scale: float) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.02)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.conv(x)
        x = x + self.bias
        x = x * self.scale
        x = F.gelu(x)
        return torch.relu(x - 0.1)


batch_size = 64
in_channels = 16
out_channels = 32
height = width = 64
kernel_size = 3
scale = 1.5


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_channels, height, width)]


def get_init_inputs() -> list:
    return [in_channels, out_channels, kernel_size, scale]
