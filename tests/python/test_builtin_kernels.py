"""The harness that checks builtin-proposer candidates (tests/python/propose_harness.py).

tests/c/test_propose_e2e.c trusts this harness to fail wrong candidates: here
it is shown to pass a correct Triton kernel and to fail a wrong output, a
missing in-place update (batch norm's running statistics), a wrong shape and
a crashing candidate, each with a reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).resolve().parent / "propose_harness.py"

REFERENCE = '''
import torch


def run(x0, running_mean):
    running_mean.mul_(0.9).add_(x0.mean(dim=0), alpha=0.1)
    return torch.relu(x0)
'''

GOOD = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.store(y_ptr + offs, tl.maximum(x, 0.0), mask=mask)


@triton.jit
def _ema_kernel(x_ptr, rm_ptr, rows, cols, BLOCK: tl.constexpr):
    c = tl.program_id(0)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for r0 in range(0, rows, BLOCK):
        r = r0 + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + r * cols + c, mask=r < rows, other=0.0)
    mean = tl.sum(acc, axis=0) / rows
    tl.store(rm_ptr + c, tl.load(rm_ptr + c) * 0.9 + 0.1 * mean)


def run(x0, running_mean):
    x = x0.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    _relu_kernel[(triton.cdiv(n, 256),)](x, y, n, BLOCK=256)
    _ema_kernel[(x.shape[1],)](x, running_mean, x.shape[0], x.shape[1], BLOCK=64)
    return y
'''

WRONG_VALUE = GOOD.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.0) + 1e-3")
NO_UPDATE = GOOD.replace("    _ema_kernel[", "    if False:\n        _ema_kernel[")
WRONG_SHAPE = GOOD.replace("return y", "return y[:, :-1]")
CRASH = GOOD.replace("x = x0.contiguous()", "x = x0.contiguous()\n    raise RuntimeError('boom')")


def run_harness(tmp_path: Path, candidates: dict[str, str]) -> dict[str, dict[str, object]]:
    sk = tmp_path / "sk0"
    sk.mkdir()
    (sk / "reference.py").write_text(REFERENCE)
    for name, src in candidates.items():
        (sk / name).write_text(src)
    manifest = {"subkernels": [{
        "name": "relu_ema", "dir": "sk0",
        "inputs": [{"shape": [37, 5], "dtype": "float32"}, {"shape": [5], "dtype": "float32"}],
        "candidates": list(candidates),
    }]}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    env = dict(os.environ, TRITON_INTERPRET="1")
    out = subprocess.run([sys.executable, str(HARNESS), str(tmp_path)], env=env,
                         capture_output=True, text=True, timeout=300, check=True)
    recs = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    return {r["candidate"]: r for r in recs}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    pytest.importorskip("triton")
    return run_harness(tmp_path_factory.mktemp("harness"), {
        "good.py": GOOD, "wrong_value.py": WRONG_VALUE, "no_update.py": NO_UPDATE,
        "wrong_shape.py": WRONG_SHAPE, "crash.py": CRASH,
    })


def test_correct_kernel_passes(results: dict[str, dict[str, object]]) -> None:
    assert results["good.py"]["ok"] is True, results["good.py"]["error"]


def test_wrong_output_fails(results: dict[str, dict[str, object]]) -> None:
    r = results["wrong_value.py"]
    assert r["ok"] is False
    assert "output 0" in str(r["error"])


def test_missing_in_place_update_fails(results: dict[str, dict[str, object]]) -> None:
    r = results["no_update.py"]
    assert r["ok"] is False
    assert "input 1 after the call" in str(r["error"])


def test_wrong_shape_fails(results: dict[str, dict[str, object]]) -> None:
    r = results["wrong_shape.py"]
    assert r["ok"] is False
    assert "shape" in str(r["error"])


def test_crash_is_a_result(results: dict[str, dict[str, object]]) -> None:
    r = results["crash.py"]
    assert r["ok"] is False
    assert "boom" in str(r["error"])
