"""Runs a "tf32p" candidate's `_mk_tf32_round` under the interpreter (CPU).

Used by tests/c/test_propose_e2e.c: the helper only runs on a GPU inside the
candidate (`x.is_cuda`), so the CPU tests call it directly. It must round every
float32 to TF32 to nearest with ties away (cuDNN's rounding of its TF32
inputs) and keep the tensor's strides. Prints "ok" or what differs.
"""

from __future__ import annotations

import importlib.util
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch


def main(path: str) -> int:
    spec = importlib.util.spec_from_file_location("tf32p_candidate", path)
    if spec is None or spec.loader is None:
        print(f"cannot load {path}")
        return 1
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    x = torch.randn(3, 5, 7, 6).contiguous(memory_format=torch.channels_last)
    # a tie (ties away from zero), a value under half a step, a negative tie, zero
    x[0, :4, 0, 0] = torch.tensor([1.0 + 2.0**-11, 1.0 + 2.0**-12, -(1.0 + 2.0**-11), 0.0])
    y = mod._mk_tf32_round(x)
    want = ((x.view(torch.int32) + 4096) & -8192).view(torch.float32)
    if y.stride() != x.stride():
        print(f"strides {y.stride()} != {x.stride()}")
        return 1
    if not torch.equal(y, want):
        print(f"max difference {(y - want).abs().max().item()}")
        return 1
    got = [y[0, c, 0, 0].item() for c in range(4)]
    if got != [1.0 + 2.0**-10, 1.0, -(1.0 + 2.0**-10), 0.0]:
        print("ties and halves are not rounded to nearest, ties away")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
