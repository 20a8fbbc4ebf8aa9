"""A KernelBench-format problem led by a GEMM: linear, scale, residual, softmax."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x)
        y = y * 0.5 + y
        return torch.softmax(y, dim=1)


batch_size = 256
in_features = 1024
out_features = 512


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_features)]


def get_init_inputs() -> list:
    return [in_features, out_features]
