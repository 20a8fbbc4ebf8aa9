"""Host against device time, kernel by kernel: eager Model, a ModelNew and torch.compile
(default mode) of one problem under torch.profiler, in one process.

Usage: python3 profile_tables.py PROBLEM.py MODELNEW.py TAG
Writes $OUT/prof-TAG.txt: per callable the wall time per forward (host-bound when it is
well above the device's kernel time), the kernels' summed device time and launch count,
then torch.profiler's table by self device time. profile_whole.py is the fuller tool
(layouts, inductor's code); this one answers "host-bound or device-bound?" quickly."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import IO, Any

import torch
from profile_whole import load  # beside this script
from torch.profiler import ProfilerActivity, profile

ITERS = 5


def wall_ms(fn: Callable[..., object], inputs: list[Any], reps: int = 10) -> float:
    for _ in range(3):
        fn(*inputs)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(reps):
        fn(*inputs)
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / reps * 1e3


def table(fn: Callable[..., object], inputs: list[Any], label: str, out: IO[str]) -> None:
    wall = wall_ms(fn, inputs)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(ITERS):
            fn(*inputs)
        torch.cuda.synchronize()
    events = prof.key_averages()
    on_device = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    device = sum(e.self_device_time_total for e in on_device) / ITERS / 1e3
    launches = sum(e.count for e in on_device) / ITERS
    out.write(f"\n===== {label}: wall {wall:.3f} ms/iter, device kernels {device:.3f} ms/iter, "
              f"{launches:.0f} launches/iter\n")
    out.write(events.table(sort_by="self_device_time_total", row_limit=30,
                           max_name_column_width=90))
    out.flush()


def main(problem: str, modelnew: str, tag: str) -> None:
    prob = load(problem, "problem")
    ours = load(modelnew, "modelnew")
    init = prob.get_init_inputs()
    torch.manual_seed(0)
    ref = prob.Model(*init).cuda()
    torch.manual_seed(0)
    new = ours.ModelNew(*init).cuda()
    new.load_state_dict(ref.state_dict())
    torch.manual_seed(1)
    inputs = [x.cuda() if torch.is_tensor(x) else x for x in prob.get_inputs()]
    with open(os.path.join(os.environ.get("OUT", "/tmp"), f"prof-{tag}.txt"), "w") as out, \
            torch.no_grad():
        table(ref, inputs, "eager", out)
        table(new, inputs, "ours", out)
        table(torch.compile(ref), inputs, "compile default", out)


if __name__ == "__main__":
    main(*sys.argv[1:4])
