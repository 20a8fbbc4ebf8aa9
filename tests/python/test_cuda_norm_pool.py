"""The builtin generator's CUDA C++ norm and pool candidates against their PyTorch reference.

The cases are the C test `propose_cuda/norm_pool_cases_for_the_gpu`'s output: for every
subkernel of the norm and pool fixtures (norms, pools, norm_pools, normalize_rows,
conv_bn_tails, conv_norm_tails) with CUDA candidates, reference.py, each candidate and the
cubin NVRTC compiled for it (sm_90), and manifest.json. This test runs that binary
($MK_TESTS_BIN, else build*/tests/mk_tests) with MK_CUDA_NORM_POOL_OUT set, or reads
$MK_CUDA_NORM_POOL_DIR, and skips when neither is there.

Without a GPU: the cases cover every norm and pool kind, and the worker's static scan
accepts every candidate. On a GPU (marked `gpu`): every candidate matches the reference
(outputs and the in-place running statistics, rtol = atol = 1e-4, the harness's
comparison) with the inputs in the default layout and again with every 4-d / 5-d input
in channels_last, which the kernels read through their strides.

    cd tests/python
    PYTHONPATH=../../engine/worker/python python -m pytest -q test_cuda_norm_pool.py
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, mk_tests_binary
from mkworker.candidate import scan_source

KINDS = ("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm", "normalize",
         "max_pool1d", "max_pool2d", "max_pool3d", "avg_pool1d", "avg_pool2d", "avg_pool3d",
         "adaptive_avg_pool2d", "adaptive_max_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d")



@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("MK_CUDA_NORM_POOL_DIR")
    if given:
        return Path(given)
    binary = mk_tests_binary()
    if binary is None:
        pytest.skip("no mk_tests binary to write the cases "
                    "(build it, or set MK_CUDA_NORM_POOL_DIR)")
    out = tmp_path_factory.mktemp("cuda_norm_pool")
    env = dict(os.environ, MK_CUDA_NORM_POOL_OUT=str(out), MK_REPO_DIR=str(REPO))
    r = subprocess.run([str(binary), "propose_cuda/norm_pool_cases_for_the_gpu"], env=env,
                       capture_output=True, text=True, timeout=600)
    if "skip" in r.stdout and not (out / "manifest.json").is_file():
        pytest.skip(f"the C test wrote no cases: {r.stdout.strip()[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _manifest(cases: Path) -> list[dict[str, Any]]:
    return json.loads((cases / "manifest.json").read_text())["subkernels"]


def test_cases_cover_every_norm_and_pool_kind(cases: Path) -> None:
    sks = _manifest(cases)
    names = [sk["name"] for sk in sks]
    for kind in KINDS:
        assert any(n == kind or n.startswith(kind + "_") for n in names), f"no CUDA case for {kind}"
    split = [c for sk in sks for c in sk["candidates"] if "split32" in c]
    assert split, "the split-rows variant is missing"
    for sk in sks:
        for cand in sk["candidates"]:
            path = cases / sk["dir"] / cand
            assert path.with_suffix(".cubin").is_file()
            assert scan_source(path.read_text(), "subkernel") == [], f"{sk['dir']}/{cand}"


def _in_layout(sk: dict[str, Any], layout: str) -> dict[str, Any]:
    """The subkernel with every 4-d / 5-d input in `layout` (the harness makes them so)."""
    sk = dict(sk)
    sk["inputs"] = [dict(i, channels_last=layout == "channels_last" and len(i["shape"]) in (4, 5))
                    for i in sk["inputs"]]
    return sk


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA candidates need a GPU")
@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
def test_candidates_match_the_reference(cases: Path, layout: str) -> None:
    import propose_harness

    failures = []
    checked = 0
    for sk in _manifest(cases):
        case = _in_layout(sk, layout)
        for cand in sk["candidates"]:
            try:
                why = propose_harness.check(cases / sk["dir"], case, cand, "cuda")
            except Exception as exc:  # a broken candidate is a failure with its reason
                why = f"{type(exc).__name__}: {exc}"
            checked += 1
            if why is not None:
                failures.append(f"{sk['dir']} ({sk['name']}) {cand}: {why}")
    assert checked > 0
    head = f"{len(failures)}/{checked} candidates differ ({layout}):\n"
    assert not failures, head + "\n".join(failures)
