"""Plain CUDA-event timing of a KernelBench problem's Model, as a user would write it.

Used on the GPU machine to cross-check `mkevolve check`: the same problem, the
same inputs, timed with nothing but torch.cuda.Event around each call. Two
loops: one that writes a buffer larger than L2 before each call (what the
verifier does) and one back to back (what naive benchmarks do). Prints one
JSON object: {"problem", "flushed_ms", "back_to_back_ms", "trials"}.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
import sys
from pathlib import Path

import torch


def load(path: Path):  # noqa: ANN201 - a module object
    spec = importlib.util.spec_from_file_location(path.stem.replace("-", "_"), path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def time_loop(fn, trials: int, flush: torch.Tensor | None) -> float:  # noqa: ANN001
    times = []
    for _ in range(trials):
        if flush is not None:
            flush.fill_(1)
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def main() -> None:
    path = Path(sys.argv[1])
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    mod = load(path)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).cuda()
    inputs = [x.cuda() if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(max(2 * l2, 64 << 20) // 4, dtype=torch.int32, device="cuda")
    with torch.no_grad():
        for _ in range(10):
            model(*inputs)
        flushed = time_loop(lambda: model(*inputs), trials, flush)
        b2b = time_loop(lambda: model(*inputs), trials, None)
    print(json.dumps({"problem": path.name, "flushed_ms": flushed, "back_to_back_ms": b2b,
                      "trials": trials}))


if __name__ == "__main__":
    main()
