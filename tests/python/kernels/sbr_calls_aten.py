"""Trick: hides the torch call behind torch.ops.aten."""
import torch


def run(x, b):
    y = torch.ops.aten.mul.Tensor(x, 2.0)
    return torch.ops.aten.relu.default(torch.ops.aten.add.Tensor(y, b))
