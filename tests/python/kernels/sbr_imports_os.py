"""Imports a module a candidate has no use for."""
import os

import torch


def run(x, b):
    os.environ.get("X")
    return torch.empty_like(x)
