"""An exception inside run()."""
import torch


def run(x, b):
    y = torch.empty_like(x)
    if y.dim() == 2:
        raise RuntimeError("kernel launch failed on purpose")
    return y
