"""Runs one kept candidate (a run's `candidates/<subkernel>.<variant>.py`) at the
problem's full shapes, to time it or to profile it under ncu (issue #14: why the
pooled implicit GEMMs lose).

Usage: python3 run_candidate.py PROBLEM.py CANDIDATE.py [--reps N]

The candidate must be a subkernel whose inputs are the program's own: its forward
inputs (`x0`, `x1`, ...) and the Model's parameters and buffers (`conv_weight` for
`conv.weight`), which the search's merges at the start make of most conv-led
level-2 problems. The Model is built with seed 0 and its inputs drawn after
seeding 1, as the verifier's first trial. Prints the candidate's median time in
ms (CUDA events over N calls after 3 warm-ups), and eager's beside it.
"""

from __future__ import annotations

import argparse
import inspect
import sys
from collections.abc import Callable
from typing import Any

import torch
from profile_whole import load, median_ms  # beside this script


def arguments(run: Callable[..., Any], inputs: list[Any], model: torch.nn.Module) -> list[Any]:
    """run's arguments by name: x<i> is forward input i, the rest the Model's tensors."""
    tensors = {k.replace(".", "_"): v for k, v in
               [*model.named_parameters(), *model.named_buffers()]}
    out = []
    for name in inspect.signature(run).parameters:
        if name.startswith("x") and name[1:].isdigit():
            out.append(inputs[int(name[1:])])
        elif name in tensors:
            out.append(tensors[name])
        else:
            raise SystemExit(f"{name}: not a forward input or a Model tensor; this candidate's "
                             "subkernel reads values the program computes before it")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("problem")
    ap.add_argument("candidate")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    prob = load(a.problem, "problem")
    cand = load(a.candidate, "candidate")
    torch.manual_seed(0)
    model = prob.Model(*prob.get_init_inputs()).cuda()
    torch.manual_seed(1)
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in prob.get_inputs()]
    args = arguments(cand.run, inputs, model)
    with torch.no_grad():
        ours = median_ms(lambda: cand.run(*args), a.reps)
        eager = median_ms(lambda: model(*inputs), a.reps)
    print(f"candidate {ours:.3f} ms, eager {eager:.3f} ms ({eager / ours:.2f}x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
