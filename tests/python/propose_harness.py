"""Runs builtin-proposer candidates against their PyTorch reference.

Used by tests/c/test_propose_e2e.c (which writes the candidates) and by
tests/python/test_builtin_kernels.py. Input: a directory with manifest.json:

    {"subkernels": [{"name": "...", "dir": "sk0",
                     "inputs": [{"name": "x0", "shape": [...], "dtype": "float32",
                                 "channels_last": true}],  # optional: the layout plan
                     "candidates": ["triton_b1024_w4.py", ...]}]}

Each subkernel directory holds reference.py and the candidates. For every
subkernel, inputs are made from a fixed seed, the reference and each candidate
run on separate copies, and outputs and inputs (in-place updates) are compared
with rtol = atol = 1e-4; a CUDA GEMM candidate in plain TF32 (`..._tf32.py`,
not `_3xtf32`) with rtol = 5e-3 and atol = 5e-3 times the reference's largest
magnitude (TF32 rounds each operand to 10 mantissa bits). Output: one JSON object
per line on stdout, {"subkernel", "candidate", "ok", "error"}. Runs Triton under TRITON_INTERPRET=1
when there is no GPU.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

if "TRITON_INTERPRET" not in os.environ:
    try:
        import torch as _t

        if not _t.cuda.is_available():
            os.environ["TRITON_INTERPRET"] = "1"
    except ImportError:  # pragma: no cover - torch is a requirement
        pass

import torch

# The worker package (its static scan, the CUDA runtime), from this checkout.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "engine" / "worker" / "python"))

RTOL = 1e-4
ATOL = 1e-4
# Plain TF32 GEMM candidates (builtin_cuda_gemm.c's `cuda_gemm..._tf32`): relative to the
# output's scale, as their products carry TF32's rounding.
TF32_TOL = 5e-3


def is_plain_tf32(cand: str) -> bool:
    return cand.endswith("_tf32.py") and not cand.endswith("_3xtf32.py")


# MK_HARNESS_SPLIT_ON_CPU=1: 3xTF32 candidates ("_tf32x3p") take their GPU path
# (operands split into TF32 high and low parts, three products) under the
# interpreter too, where the tf32 flag (`tf32_<n> = x.is_cuda`) would be False.
# Their result is float32-accurate, so the usual comparison holds.
_GPU_FLAG = re.compile(r"^(    tf32_\d+) = \w+\.is_cuda$", re.M)


def load_module(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"cand_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    mod = importlib.util.module_from_spec(spec)
    if os.environ.get("MK_HARNESS_SPLIT_ON_CPU") == "1" and "_tf32x3p" in path.name:
        source = _GPU_FLAG.sub(r"\1 = True", path.read_text())
        if source == path.read_text():
            raise ImportError(f"{path.name}: no tf32 flag to force")
        exec(compile(source, str(path), "exec"), mod.__dict__)
        return mod
    spec.loader.exec_module(mod)
    # A CUDA C++ candidate: its cubin (compiled by the engine) lies beside it.
    cubin = path.with_suffix(".cubin")
    if getattr(mod, "MK_BACKEND", None) == "cuda" and cubin.is_file():
        from mkworker import cuda_runtime

        cuda_runtime.bind(mod, cubin.read_bytes())
    return mod


def make_inputs(specs: list[dict[str, Any]], device: str, seed: int) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for s in specs:
        dtype = getattr(torch, s["dtype"])
        shape = tuple(s["shape"])
        if dtype.is_floating_point:
            t = torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
            if s.get("positive"):
                t = t.abs() + 0.5
        elif dtype == torch.bool:
            t = torch.randint(0, 2, shape, generator=gen).bool()
        else:
            t = torch.randint(0, 5, shape, generator=gen).to(dtype)
        if s.get("channels_last") and t.dim() in (4, 5):
            # The program's layout plan gives this input in channels_last.
            fmt = torch.channels_last if t.dim() == 4 else torch.channels_last_3d
            t = t.contiguous(memory_format=fmt)
        out.append(t.to(device))
    return out


def as_tuple(r: Any) -> tuple[Any, ...]:
    return r if isinstance(r, tuple) else (r,)


def compare(name: str, a: Any, b: Any, tf32: bool = False) -> str | None:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
        return None if a == b else f"{name}: {a!r} != {b!r}"
    if a.shape != b.shape:
        return f"{name}: shape {tuple(b.shape)} != reference {tuple(a.shape)}"
    if a.dtype != b.dtype:
        return f"{name}: dtype {b.dtype} != reference {a.dtype}"
    af, bf = a.double(), b.double()
    rtol, atol = RTOL, ATOL
    if tf32 and af.is_floating_point() and af.numel():
        scale = af.abs().nan_to_num(0.0, posinf=0.0, neginf=0.0).max().item()
        rtol, atol = TF32_TOL, TF32_TOL * max(1.0, scale)
    if not torch.allclose(af, bf, rtol=rtol, atol=atol, equal_nan=True):
        diff = (af - bf).abs().nan_to_num(0.0).max().item()
        return f"{name}: max abs difference {diff:.3g}"
    return None


def check(sk_dir: Path, sk: dict[str, Any], cand: str, device: str) -> str | None:
    # The worker's static scan first: a builtin candidate it rejects would never
    # be verified on the GPU (e.g. one reading torch.backends).
    from mkworker.candidate import scan_source

    findings = scan_source((sk_dir / cand).read_text(), "subkernel")
    if findings:
        return f"the worker's scan rejects it: line {findings[0][0]}: {findings[0][1]}"
    ref = load_module(sk_dir / "reference.py")
    mod = load_module(sk_dir / cand)
    base = make_inputs(sk["inputs"], device, seed=1234)
    ref_in = [t.clone() for t in base]
    cand_in = [t.clone() for t in base]
    want = as_tuple(ref.run(*ref_in))
    # Under the worker's op guard, as the verifier runs it: a candidate computing
    # through torch ops it does not declare (MK_USES_TORCH) is rejected there.
    from mkworker.guards import OpRecorder

    rec = OpRecorder(getattr(mod, "MK_USES_TORCH", ()), sk_dir / cand)
    with torch.no_grad(), rec.recording():
        got = as_tuple(mod.run(*cand_in))
    why = rec.reason()
    if why:
        return f"the worker's guard rejects it: it {why}"
    if len(want) != len(got):
        return f"{len(got)} outputs, reference has {len(want)}"
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        msg = compare(f"output {i}", a, b, is_plain_tf32(cand))
        if msg:
            return msg
    # MK_HARNESS_CTILE_CL=1: a channel-tiled batch norm ("_ctile") that says it
    # stores channels_last must return its 4-d/5-d outputs in that layout.
    if os.environ.get("MK_HARNESS_CTILE_CL") == "1" and "_ctile" in cand:
        # (at least one output: a whole graph returns other values too)
        if "stored channels_last" in (sk_dir / cand).read_text():
            formats = {4: torch.channels_last, 5: torch.channels_last_3d}
            cl = [
                b.is_contiguous(memory_format=formats[b.dim()])
                for b in got
                if isinstance(b, torch.Tensor) and b.dim() in formats
            ]
            if not any(cl):
                return "no output is channels_last, though its norm says it stores so"
    for i, (a, b) in enumerate(zip(ref_in, cand_in, strict=True)):
        msg = compare(f"input {i} after the call", a, b)
        if msg:
            return msg
    return None


def main(argv: list[str]) -> int:
    root = Path(argv[1])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    manifest = json.loads((root / "manifest.json").read_text())
    for sk in manifest["subkernels"]:
        sk_dir = root / sk["dir"]
        for cand in sk["candidates"]:
            try:
                err = check(sk_dir, sk, cand, device)
            except Exception as exc:  # a broken candidate is a result, not a crash
                tb = traceback.format_exc(limit=3)
                err = f"{type(exc).__name__}: {exc}\n{tb}"
            rec = {"subkernel": sk["name"], "candidate": cand, "ok": err is None, "error": err}
            print(json.dumps(rec), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
