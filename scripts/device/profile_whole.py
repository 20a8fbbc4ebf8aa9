"""Where the time goes: eager, torch.compile and (optionally) our ModelNew of a
problem, side by side at kernel level (torch.profiler), plus the convolution
alone in NCHW and in channels_last and the layouts inductor chose.

Usage: python3 profile_whole.py OUTDIR PROBLEM.py[=MODELNEW.py] ...
Writes OUTDIR/<problem>.json (kernel tables, layouts, times) and
OUTDIR/<problem>.inductor.py (inductor's generated code, from its cache).
Run with TORCH_LOGS unset; the generated code is read from the compiled
module's file."""

from __future__ import annotations

import glob
import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile


def load(path: str, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def median_ms(fn: Callable[[], object], reps: int = 30) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def interleaved(fns: dict[str, Callable[[], object]], rounds: int = 20) -> dict[str, float]:
    for fn in fns.values():
        fn()
    torch.cuda.synchronize()
    got: dict[str, list[float]] = {k: [] for k in fns}
    keys = list(fns)
    for r in range(rounds):
        for k in keys[r % len(keys):] + keys[: r % len(keys)]:
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fns[k]()
            b.record()
            torch.cuda.synchronize()
            got[k].append(a.elapsed_time(b))
    return {k: sorted(v)[len(v) // 2] for k, v in got.items()}


def kernel_table(fn: Callable[[], object], iters: int = 5) -> dict[str, Any]:
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(iters):
            fn()
        torch.cuda.synchronize()
    rows = []
    total = 0.0
    launches = 0
    for ev in prof.key_averages():
        dev_us = getattr(ev, "self_device_time_total", None)
        if dev_us is None:
            dev_us = getattr(ev, "self_cuda_time_total", 0.0)
        if dev_us <= 0:
            continue
        total += dev_us
        launches += ev.count
        rows.append({"kernel": ev.key[:160], "calls_per_iter": ev.count / iters,
                     "us_per_iter": dev_us / iters})
    rows.sort(key=lambda r: -r["us_per_iter"])
    return {"kernels": rows[:14], "kernel_us_per_iter": total / iters,
            "launches_per_iter": launches / iters}


def conv_layouts(model: torch.nn.Module, xs: list[Any]) -> list[dict[str, Any]]:
    """Each conv module alone on its captured input: NCHW vs channels_last."""
    seen: list[dict[str, Any]] = []
    inputs: dict[str, torch.Tensor] = {}
    hooks = []
    for name, m in model.named_modules():
        if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d, torch.nn.ConvTranspose2d,
                          torch.nn.ConvTranspose3d)):
            hooks.append(m.register_forward_pre_hook(
                lambda mod, args, name=name: inputs.setdefault(name, args[0].detach())))
    with torch.no_grad():
        model(*xs)
    for h in hooks:
        h.remove()
    mods = dict(model.named_modules())
    for name, x in list(inputs.items())[:4]:
        seen.append(time_one_conv(name, mods[name], x))
    return seen


def time_one_conv(name: str, m: torch.nn.Module, x: torch.Tensor) -> dict[str, Any]:
    fmt = torch.channels_last if x.dim() == 4 else torch.channels_last_3d
    w_cl = m.weight.detach().contiguous(memory_format=fmt)
    x_cl = x.contiguous(memory_format=fmt)
    with torch.no_grad():
        t_nchw = median_ms(lambda: m(x))
        w0 = m.weight.data
        m.weight.data = w_cl
        t_cl = median_ms(lambda: m(x_cl))
        m.weight.data = w0
        t_cvt = median_ms(lambda: x.contiguous(memory_format=fmt))
    return {"module": name, "type": type(m).__name__, "input": list(x.shape),
            "nchw_ms": t_nchw, "channels_last_ms": t_cl, "convert_input_ms": t_cvt}


def inductor_code(out_path: str, since: float) -> None:
    user = os.environ.get("USER", "root")
    root = os.environ.get("TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_" + user)
    files = [f for f in glob.glob(os.path.join(root, "**", "*.py"), recursive=True)
             if os.path.getmtime(f) >= since and "call(" in open(f, errors="ignore").read()]
    with open(out_path, "w") as fh:
        for f in sorted(files, key=os.path.getmtime):
            fh.write(f"# ==== {os.path.basename(f)}\n")
            fh.write(open(f, errors="ignore").read())


def profile_problem(outdir: str, spec: str) -> dict[str, Any]:
    path, _, ours = spec.partition("=")
    name = os.path.basename(path)[:-3]
    mod = load(path, "problem_" + name.split("_")[0])
    dev = torch.device("cuda", 0)
    torch.manual_seed(0)
    model = mod.Model(*mod.get_init_inputs()).to(dev)
    xs = [x.to(dev) if isinstance(x, torch.Tensor) else x for x in mod.get_inputs()]
    row: dict[str, Any] = {"problem": name}
    fns: dict[str, Callable[[], object]] = {}
    with torch.no_grad():
        fns["eager"] = lambda: model(*xs)
        t0 = time.time()
        cfn = torch.compile(model)
        cfn(*xs)
        torch.cuda.synchronize()
        row["compile_s"] = time.time() - t0
        inductor_code(os.path.join(outdir, name + ".inductor.py"), t0 - 1)
        fns["compile"] = lambda: cfn(*xs)
        out_c = cfn(*xs)
        outs = out_c if isinstance(out_c, (tuple, list)) else [out_c]
        row["compile_output_strides"] = [list(o.stride()) for o in outs
                                         if isinstance(o, torch.Tensor)]
        if ours:
            new_mod = load(ours, "modelnew_" + name.split("_")[0])
            torch.manual_seed(0)
            new = new_mod.ModelNew(*mod.get_init_inputs()).to(dev)
            new.load_state_dict(model.state_dict())
            fns["ours"] = lambda: new(*xs)
        row["interleaved_ms"] = interleaved(fns)
        row["profiles"] = {k: kernel_table(fn) for k, fn in fns.items()}
        try:
            row["convs"] = conv_layouts(model, xs)
        except Exception as e:
            row["convs_error"] = repr(e)
    torch._dynamo.reset()
    return row


def main() -> None:
    outdir = sys.argv[1]
    os.makedirs(outdir, exist_ok=True)
    for spec in sys.argv[2:]:
        try:
            row = profile_problem(outdir, spec)
        except Exception as e:
            row = {"problem": spec, "error": repr(e)}
        name = os.path.basename(spec.partition("=")[0])[:-3]
        with open(os.path.join(outdir, name + ".json"), "w") as fh:
            json.dump(row, fh, indent=1)
        brief = {k: row.get(k) for k in ("problem", "interleaved_ms", "compile_s")}
        brief["launches"] = {k: v["launches_per_iter"] for k, v in row.get("profiles", {}).items()}
        brief["convs"] = [(c["type"], round(c["nchw_ms"], 3), round(c["channels_last_ms"], 3),
                           round(c["convert_input_ms"], 3)) for c in row.get("convs", [])]
        print(json.dumps(brief), flush=True)


if __name__ == "__main__":
    main()
