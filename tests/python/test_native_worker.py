"""The native worker (engine/worker/native) on a GPU: a cubin compiled with NVRTC,
launched through the driver API on tensors the worker builds from seeds, gives what
torch computes from the same seeds. The protocol parts run on the CPU in the C tests
(tests/c/test_native_worker.c). Needs the binary ($MK_NATIVE_WORKER, else
build*/mkworker-native) and a GPU; skips otherwise."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import torch
from conftest import REPO
from test_cuda_candidates import SCALE_CUDA, _compile


def _binary() -> Path | None:
    env = os.environ.get("MK_NATIVE_WORKER")
    if env:
        return Path(env)
    for build in ("build", "build-asan", "build-release"):
        p = REPO / build / "mkworker-native"
        if p.is_file():
            return p
    return None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the native worker launches on a GPU")
def test_launch_matches_torch_from_the_same_seeds() -> None:
    binary = _binary()
    if binary is None:
        pytest.skip("no mkworker-native binary (built when CMake finds libtorch)")
    major, minor = torch.cuda.get_device_capability()
    cubin = _compile(SCALE_CUDA, f"sm_{major}{minor}")
    n = 1000
    launch = {"cubin": base64.b64encode(cubin).decode(), "kernel": "scale_add",
              "signature": "fffq", "grid": [(n + 127) // 128], "block": [128],
              "args": [{"randn": [n], "seed": 11}, {"randn": [4], "seed": 12},
                       {"zeros": [n]}, {"int": n}]}
    lines = [{"v": 1, "id": 1, "method": "hello", "params": {"protocol": 1}},
             {"v": 1, "id": 2, "method": "launch", "params": launch},
             {"v": 1, "id": 3, "method": "shutdown", "params": {}}]
    t0 = time.monotonic()
    proc = subprocess.run([str(binary)], input="".join(json.dumps(x) + "\n" for x in lines),
                          capture_output=True, text=True, timeout=120, check=True)
    wall = time.monotonic() - t0
    replies = [json.loads(x) for x in proc.stdout.splitlines()]
    assert [r["id"] for r in replies] == [1, 2, 3]
    hello, res = replies[0]["result"], replies[1]
    assert hello["native"] and hello["device"] != "cpu", hello
    assert res["ok"], res
    torch.manual_seed(11)
    x = torch.randn(n, device="cuda")
    torch.manual_seed(12)
    b = torch.randn(4, device="cuda")
    want = (2.0 * x + b.repeat(n // 4)).double()
    y = next(t for t in res["result"]["tensors"] if t["index"] == 2)
    assert y["sum"] == pytest.approx(want.sum().item(), rel=1e-5, abs=1e-3)
    assert y["abs_max"] == pytest.approx(want.abs().max().item(), rel=1e-6)
    print(f"native worker: hello, launch and shutdown in {wall:.2f} s")
