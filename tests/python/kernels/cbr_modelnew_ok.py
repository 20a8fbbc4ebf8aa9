"""ModelNew for examples/conv_bias_relu.py: the convolution stays, the epilogue is Triton."""
import torch
import torch.nn as nn
import torch.nn.functional as F
import triton
import triton.language as tl


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



@triton.jit
def _epi(x_ptr, b_ptr, y_ptr, n, C, HW, scale, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    b = tl.load(b_ptr + (offs // HW) % C, mask=m)
    v = (x + b) * scale
    g = 0.5 * v * (1.0 + tl.math.erf(v * 0.7071067811865476))
    tl.store(y_ptr + offs, tl.maximum(g - 0.1, 0.0), mask=m)


class ModelNew(Model):
    def forward(self, x):
        x = self.conv(x).contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _epi[(triton.cdiv(n, 4096),)](x, self.bias, y, n, x.shape[1], x.shape[2] * x.shape[3],
                                      self.scale, BLOCK=4096)
        return y
