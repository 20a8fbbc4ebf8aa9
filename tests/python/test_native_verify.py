"""verify_subkernel in the native worker (engine/worker/native, docs/native-worker.md)
against the Python worker's, on a GPU: builtin CUDA candidates with a launch plan
(MK_CUDA_PLAN) of three fixtures, and a broken copy of each (0.5 added to what an
elementwise kernel stores), verified by both workers on the same graph, seeds and
state; both must give the same verdict, ok for the candidates and mismatch for the
broken ones. The cases (graph, ATen forms, candidates, sm_90 cubins) are written by the
C test native_worker/gpu_cases ($MK_TESTS_BIN, else build*/tests/mk_tests); the state
by the Python worker's write_state. Skips without a GPU, the binaries or NVRTC."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, Worker, mk_tests_binary
from test_native_worker import _binary

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not torch.cuda.is_available(),
                                 reason="the native worker verifies on a GPU")]

TRIALS = 3


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    binary = mk_tests_binary()
    if binary is None or _binary() is None:
        pytest.skip("no mk_tests or mkworker-native binary")
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the cases' cubins are compiled for sm_90")
    out = tmp_path_factory.mktemp("native_verify")
    env = dict(os.environ, MK_NATIVE_VERIFY_OUT=str(out), MK_REPO_DIR=str(REPO))
    r = subprocess.run([str(binary), "native_worker/gpu_cases"], env=env,
                       capture_output=True, text=True, timeout=600)
    if "skip" in r.stdout and not (out / "manifest.json").is_file():
        pytest.skip(f"the C test wrote no cases: {r.stdout.strip()[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    return out


class Native:
    """mkworker-native driven line by line."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen([str(_binary())], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        self.next_id = 1

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps({"v": 1, "id": self.next_id, "method": method,
                                          "params": params}) + "\n")
        self.proc.stdin.flush()
        self.next_id += 1
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def test_native_and_python_verdicts_agree(cases: Path, tmp_path: Path) -> None:
    manifest = json.loads((cases / "manifest.json").read_text())["cases"]
    assert len(manifest) >= 4
    py, native = Worker(), Native()
    states: dict[str, dict[str, Any]] = {}
    try:
        for case in manifest:
            fx = case["fixture"]
            graph = json.loads((cases / f"{fx}.graph.json").read_text())
            if fx not in states:
                resp, _ = py.request("write_state", {"graph": graph, "dir": str(tmp_path / fx),
                                                     "trials": TRIALS, "seed": 0})
                assert resp["ok"], resp
                states[fx] = resp["result"]
            name = case["candidate"]
            cand = {"source": (cases / f"{name}.py").read_text(), "name": name,
                    "origin": "builtin",
                    "cubin": base64.b64encode((cases / f"{name}.cubin").read_bytes()).decode()}
            common = {"graph": graph, "nodes": case["nodes"], "inputs": case["inputs"],
                      "outputs": case["outputs"], "candidate": cand, "trials": TRIALS,
                      "seed": 0, "atol": 1e-4, "rtol": 1e-4, "device": "cuda"}
            p_resp, _ = py.request("verify_subkernel", {**common, "timing": False})
            n_resp = native.request("verify_subkernel", {
                **common, "timing": case["expect"] == "ok",
                "aten": json.loads((cases / f"{fx}.aten.json").read_text()),
                "state_file": states[fx]["state_file"],
                "inputs_files": states[fx]["inputs_files"]})
            assert p_resp["ok"], p_resp
            assert n_resp["ok"], n_resp
            p, n = p_resp["result"], n_resp["result"]
            print(f"{name}: python {p['status']} ({p['max_abs_error']}), "
                  f"native {n['status']} ({n['max_abs_error']})"
                  + (f", {n['timing']['candidate']['median_ms']:.4f} ms vs eager "
                     f"{n['timing']['reference_eager']['median_ms']:.4f} ms"
                     if n["timing"].get("available") else ""))
            assert n["status"] == p["status"] == case["expect"], (name, p["reason"], n["reason"])
            assert n["trials"] == TRIALS and n["trials_passed"] == p["trials_passed"]
            assert [t["seed"] for t in n["per_trial"]] == [t["seed"] for t in p["per_trial"]]
    finally:
        py.close()
        native.close()
