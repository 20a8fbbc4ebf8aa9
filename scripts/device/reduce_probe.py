"""Times the builtin proposer's RMS norm written out (KernelBench level 1's 36_RMSNorm_
expression) as one kernel with a broadcast epilogue against its `_apart` two kernels,
eager and torch.compile, at level 1's size [112, 64, 512, 512] on the GPU (a smoke test
at a small size on the CPU under TRITON_INTERPRET=1). The candidates are the builtin's
for tests/fixtures/propose/rms_written_out.json as one subkernel, written into
.kb/reduce-probe by scripts/device/prepare-reduce-probe.sh (their sizes are read at run
time).

    python3 scripts/device/reduce_probe.py .kb/reduce-probe OUT_DIR     (carry .kb)
"""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path

import torch


def rms(x: torch.Tensor) -> torch.Tensor:
    return x / torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + 1e-5)


def median_ms(fn: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, reps: int = 15) -> float:
    if x.device.type == "cpu":  # a smoke test under TRITON_INTERPRET=1: no timing
        fn(x)
        return 0.0
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(x)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return sorted(times)[len(times) // 2]


def main() -> int:
    here, out = Path(sys.argv[1]), Path(sys.argv[2])
    cpu = not torch.cuda.is_available()
    shape = (2, 8, 16, 16) if cpu else (112, 64, 512, 512)
    x = torch.randn(shape, device="cpu" if cpu else "cuda")
    with torch.no_grad():
        want = rms(x)
        rows = []
        compiled = rms if cpu else torch.compile(rms)
        for name, fn in [("eager", rms), ("torch.compile", compiled)]:
            rows.append({"variant": name, "ms": median_ms(fn, x)})
        for path in sorted(p for p in here.glob("triton_*.py")):
            spec = importlib.util.spec_from_file_location(path.stem, path)
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            got = mod.run(x)
            err = float((got - want).abs().max())
            rows.append({"variant": path.stem, "ms": median_ms(mod.run, x), "max_abs_err": err})
            del got
    text = "\n".join(json.dumps(r) for r in rows)
    print(text)
    (out / "reduce_probe.jsonl").write_text(text + "\n")
    print("cpu" if cpu else torch.cuda.get_device_name(0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
