"""The launch plan (MK_CUDA_PLAN, docs/candidates.md) against run(), on the CPU.

The builtin CUDA generator writes each candidate's launcher as Python (run()) and as a
plan the native worker executes without Python. Both must launch the same kernels with
the same grids, blocks and arguments. No GPU is needed to check that: run() is called
on CPU tensors with a recording stand-in for ``_mk_cuda``, and the native worker's
``plan_launches`` runs the plan on the same inputs with its launches recorded instead
of made. Every planned candidate of eight proposer fixtures (every variant), written by
the C test native_worker/plan_cases; skips without the binaries."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, mk_tests_binary
from mkworker import export_data
from test_native_worker import _binary


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = mk_tests_binary()
    if binary is None or _binary() is None:
        pytest.skip("no mk_tests or mkworker-native binary")
    out = tmp_path_factory.mktemp("native_plan")
    env = dict(os.environ, MK_NATIVE_PLAN_OUT=str(out), MK_REPO_DIR=str(REPO))
    r = subprocess.run([str(binary), "native_worker/plan_cases"], env=env,
                       capture_output=True, text=True, timeout=300)
    if "skip" in r.stdout and not (out / "manifest.json").is_file():
        pytest.skip(f"the C test wrote no cases: {r.stdout.strip()[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _tensor(t: torch.Tensor) -> dict[str, Any]:
    dtype = {torch.float32: "float32", torch.bool: "bool"}.get(t.dtype, "other")
    return {"shape": list(t.shape), "strides": list(t.stride()), "dtype": dtype}


class _Recorder:
    """Stands in for the worker's ``_mk_cuda``: records each launch, launches nothing."""

    def __init__(self) -> None:
        self.launches: list[dict[str, Any]] = []

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...],
               args: tuple[Any, ...], shared: int = 0) -> None:
        self.launches.append({
            "kernel": name, "grid": [int(g) for g in grid], "block": [int(b) for b in block],
            "args": [{"ptr": _tensor(a)} if isinstance(a, torch.Tensor) else {"int": int(a)}
                     for a in args]})


def _inputs(specs: list[dict[str, Any]], seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    out = []
    for s in specs:
        x = torch.randn(s["shape"], generator=g)
        out.append(x > 0 if s["dtype"] == "bool" else x.abs() + 0.5)  # positive: variances
    return out


def _channels_last(x: torch.Tensor) -> torch.Tensor:
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    return x if fmt is None else x.contiguous(memory_format=fmt)


def _python_launches(source: str, xs: list[torch.Tensor]) -> dict[str, Any]:
    """What plan_launches answers, from run(): its launches, then its outputs or the
    ValueError with which it refuses the inputs (docs/candidates.md)."""
    rec = _Recorder()
    namespace: dict[str, Any] = {"__name__": "mk_plan_case", "_mk_cuda": rec}
    exec(compile(source, "candidate.py", "exec"), namespace)  # our own generator's module
    try:
        with torch.no_grad():
            out = namespace["run"](*[x.clone() for x in xs])
    except ValueError as e:
        return {"launches": rec.launches, "candidate_error": str(e)}
    outs = list(out) if isinstance(out, tuple | list) else [out]
    return {"launches": rec.launches,
            "outputs": [_tensor(t) | {"dtype": export_data.DTYPES[t.dtype]} for t in outs]}


def test_plans_launch_what_run_launches(cases: Path, tmp_path: Path) -> None:
    manifest = json.loads((cases / "manifest.json").read_text())["cases"]
    assert len(manifest) >= 20
    proc = subprocess.Popen([str(_binary())], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdin and proc.stdout
    launches = refused = 0
    try:
        for i, case in enumerate(manifest):
            source = (cases / case["candidate"]).read_text()
            xs = _inputs(case["inputs"], i)
            path = str(tmp_path / f"inputs_{i}.mkt")
            export_data.write_tensors(path, [(f"input.{k}", x) for k, x in enumerate(xs)])
            # as captured, then every 4-d / 5-d input channels_last (strides, layouts)
            cl = [k for k, x in enumerate(xs) if x.dim() in (4, 5)]
            for layout in ([], cl) if cl else ([],):
                given = [_channels_last(x) if k in layout else x for k, x in enumerate(xs)]
                want = _python_launches(source, given)
                proc.stdin.write(json.dumps({"v": 1, "id": i, "method": "plan_launches", "params": {
                    "candidate": {"source": source}, "graph_file": str(cases / case["graph"]),
                    "inputs_file": path, "channels_last": layout}}) + "\n")
                proc.stdin.flush()
                reply = json.loads(proc.stdout.readline())
                assert reply["ok"], (case["candidate"], layout, reply)
                assert reply["result"] == want, (case["candidate"], layout)
                launches += len(want["launches"])
                refused += "candidate_error" in want
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert launches >= len(manifest)
    print(f"{len(manifest)} planned candidates, {launches} launches equal, "
          f"{refused} refusals of channels_last inputs equal")
