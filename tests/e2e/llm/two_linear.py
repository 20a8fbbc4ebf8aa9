"""Fixture for the LLM end-to-end tests: two linear layers with their
activations, which the modular decomposition splits into two subkernels and
--monolithic keeps as one."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.fc1(x))
        return torch.sigmoid(self.fc2(h)) * 2.0


batch_size = 16
d_in = 32
d_hidden = 64
d_out = 16


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, d_in)]


def get_init_inputs() -> list:
    return [d_in, d_hidden, d_out]
