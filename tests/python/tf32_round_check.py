"""Runs a "tf32p" candidate's `_mk_tf32_round` under the interpreter (CPU).

Used by tests/c/test_propose_e2e.c: the helper only runs on a GPU inside the
candidate (`x.is_cuda`), so the CPU tests call it directly. It must round every
float32 to TF32 to nearest with ties away (cuDNN's rounding of its TF32
inputs) into a copy in the memory format asked for (channels_last), whatever
the input's strides; `_mk_tf32_split` gives that rounding and the rounded
remainder (3xTF32's operands). Prints "ok" or what differs.
"""

from __future__ import annotations

import importlib.util
import os
import sys

os.environ.setdefault("TRITON_INTERPRET", "1")

import torch


def check(mod: object, x: torch.Tensor, fmt: torch.memory_format) -> str | None:
    """What is wrong with mod._mk_tf32_round(x, fmt), or None."""
    y = mod._mk_tf32_round(x, fmt)
    want = ((x.contiguous().view(torch.int32) + 4096) & -8192).view(torch.float32)
    if not y.is_contiguous(memory_format=fmt):
        return f"{tuple(x.shape)}: the copy is not in {fmt} (strides {y.stride()})"
    if not torch.equal(y, want):
        return f"{tuple(x.shape)}: max difference {(y - want).abs().max().item()}"
    return None


def main(path: str) -> int:
    spec = importlib.util.spec_from_file_location("tf32p_candidate", path)
    if spec is None or spec.loader is None:
        print(f"cannot load {path}")
        return 1
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(0)
    cl, cl3 = torch.channels_last, torch.channels_last_3d
    x = torch.randn(3, 5, 7, 6)
    # a tie (ties away from zero), a value under half a step, a negative tie, zero
    x[0, :4, 0, 0] = torch.tensor([1.0 + 2.0**-11, 1.0 + 2.0**-12, -(1.0 + 2.0**-11), 0.0])
    cases = [
        (x, cl),  # NCHW in: rounded and transposed in one pass
        (x.contiguous(memory_format=cl), cl),  # already channels_last
        (torch.randn(2, 70, 3, 5), cl),  # more channels than one tile
        (torch.randn(2, 3, 4, 5, 6), cl3),  # 3-d
        (torch.randn(2, 4, 9, 8)[:, :, 1:7, ::2], cl),  # spatial dims that do not merge
    ]
    for t, fmt in cases:
        wrong = check(mod, t, fmt)
        if wrong:
            print(wrong)
            return 1
    # 3xTF32's split: the high part is the rounding, the low part what it misses, rounded
    hi, lo = mod._mk_tf32_split(x, cl)
    rest = x - hi
    want_lo = ((rest.contiguous().view(torch.int32) + 4096) & -8192).view(torch.float32)
    if check(mod, x, cl) or not torch.equal(hi, mod._mk_tf32_round(x, cl)):
        print("the split's high part is not the rounding")
        return 1
    if not lo.is_contiguous(memory_format=cl) or not torch.equal(lo, want_lo):
        print("the split's low part is not the rounded remainder")
        return 1
    if ((hi + lo - x).abs() > x.abs() * 2.0**-20).any():
        print("high + low parts are not the value to about float32 accuracy")
        return 1
    y = mod._mk_tf32_round(x, cl)
    got = [y[0, c, 0, 0].item() for c in range(4)]
    if got != [1.0 + 2.0**-10, 1.0, -(1.0 + 2.0**-10), 0.0]:
        print("ties and halves are not rounded to nearest, ties away")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
