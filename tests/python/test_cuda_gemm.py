"""The builtin generator's CUDA C++ GEMM candidates (tensor cores) against their PyTorch reference.

The cases are the C test `propose_cuda/gemm_cases_for_the_gpu`'s output: for every subkernel
of the GEMM fixtures (linear_epilogue: linear + bias + a fused elementwise epilogue;
matmul_bmm: matmul of a transposed weight, bmm of a transposed operand; attention_4d: the
4-d matmuls of attention heads) with CUDA candidates, reference.py, each candidate and the
cubin NVRTC compiled for it (sm_90), and manifest.json. This test runs that binary
($MK_TESTS_BIN, else build*/tests/mk_tests) with MK_CUDA_GEMM_OUT set, or reads
$MK_CUDA_GEMM_DIR, and skips when neither is there.

Without a GPU: the cases cover linear, matmul, bmm and the 4-d matmul, every GEMM subkernel
has the three variants (3xTF32 first), and the worker's static scan accepts every candidate.
On a GPU (marked `gpu`): every candidate matches the reference — 3xTF32 with
rtol = atol = 1e-4, plain TF32 within 5e-3 of the output's scale (propose_harness) — at the
captured shapes and at larger odd M, N, K (several row tiles, K not a multiple of the tile
depth) where the reference is shape-generic, with the inputs contiguous and again with
every 2-d+ input stored transposed (column-major: the kernels read operands through
their strides).

    cd tests/python
    PYTHONPATH=../../engine/worker/python python -m pytest -q test_cuda_gemm.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import torch
from conftest import REPO, mk_tests_binary
from mkworker.candidate import scan_source

VARIANTS = ["cuda_gemm128x128_3xtf32.py", "cuda_gemm64x64_3xtf32.py", "cuda_gemm128x128_tf32.py"]

# Larger odd sizes per subkernel whose reference reads its sizes from the tensors: every
# captured size of the inputs is replaced by the one given (linear: M, K, N; bmm: batch, M,
# K / N). The attention projection and the last matmul view to captured shapes: not resized.
RESIZE: dict[str, dict[int, int]] = {
    "linear_sigmoid_mul_add": {6: 301, 40: 263, 24: 133},
    "matmul_mul_relu": {17: 1100, 33: 129, 20: 135},
    "bmm_sub": {3: 5, 9: 131, 16: 67},
    "matmul_mul": {3: 2, 2: 3, 8: 77, 12: 41},
}



@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("MK_CUDA_GEMM_DIR")
    if given:
        return Path(given)
    binary = mk_tests_binary()
    if binary is None:
        pytest.skip("no mk_tests binary to write the cases (build it, or set MK_CUDA_GEMM_DIR)")
    out = tmp_path_factory.mktemp("cuda_gemm")
    env = dict(os.environ, MK_CUDA_GEMM_OUT=str(out), MK_REPO_DIR=str(REPO))
    r = subprocess.run([str(binary), "propose_cuda/gemm_cases_for_the_gpu"], env=env,
                       capture_output=True, text=True, timeout=600)
    if "skip" in r.stdout and not (out / "manifest.json").is_file():
        pytest.skip(f"the C test wrote no cases: {r.stdout.strip()[-300:]}")
    assert r.returncode == 0, r.stdout + r.stderr
    return out


def _manifest(cases: Path) -> list[dict[str, Any]]:
    return json.loads((cases / "manifest.json").read_text())["subkernels"]


def test_cases_cover_every_gemm_kind(cases: Path) -> None:
    sks = _manifest(cases)
    names = [sk["name"] for sk in sks]
    for kind in ("linear", "matmul", "bmm"):
        assert any(n == kind or n.startswith(kind + "_") for n in names), f"no CUDA case for {kind}"
    assert set(RESIZE) <= set(names)
    for sk in sks:
        assert sk["candidates"] == VARIANTS, sk["name"]
        for cand in sk["candidates"]:
            path = cases / sk["dir"] / cand
            assert path.with_suffix(".cubin").is_file()
            text = path.read_text()
            assert scan_source(text, "subkernel") == [], f"{sk['dir']}/{cand}"
            assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in text


def _resized(sk: dict[str, Any]) -> dict[str, Any]:
    sizes = RESIZE[sk["name"]]
    sk = dict(sk)
    sk["inputs"] = [dict(i, shape=[sizes.get(d, d) for d in i["shape"]]) for i in sk["inputs"]]
    return sk


def _transposed(t: torch.Tensor) -> torch.Tensor:
    """The same values stored column-major in the last two dims (a transposed operand)."""
    if t.dim() < 2 or not t.is_floating_point():
        return t.clone()
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _check(cases: Path, sk: dict[str, Any], cand: str, layout: str) -> str | None:
    import propose_harness as h

    sk_dir = cases / sk["dir"]
    ref = h.load_module(sk_dir / "reference.py")
    mod = h.load_module(sk_dir / cand)
    base = h.make_inputs(sk["inputs"], "cuda", seed=1234)
    want = h.as_tuple(ref.run(*[t.clone() for t in base]))
    args = [_transposed(t) if layout == "transposed" else t.clone() for t in base]
    # Under the worker's op guard, as the verifier runs it (propose_harness.check).
    from mkworker.guards import OpRecorder

    rec = OpRecorder(getattr(mod, "MK_USES_TORCH", ()), sk_dir / cand)
    with torch.no_grad(), rec.recording():
        got = h.as_tuple(mod.run(*args))
    torch.cuda.synchronize()
    if rec.reason():
        return f"the worker's guard rejects it: it {rec.reason()}"
    if len(want) != len(got):
        return f"{len(got)} outputs, reference has {len(want)}"
    for i, (a, b) in enumerate(zip(want, got, strict=True)):
        msg = h.compare(f"output {i}", a, b, h.is_plain_tf32(cand))
        if msg:
            return msg
    return None


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA candidates need a GPU")
@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
@pytest.mark.parametrize("shapes", ["captured", "resized"])
def test_candidates_match_the_reference(cases: Path, shapes: str, layout: str) -> None:
    failures = []
    checked = 0
    for sk in _manifest(cases):
        if shapes == "resized":
            if sk["name"] not in RESIZE:
                continue
            sk = _resized(sk)
        for cand in sk["candidates"]:
            try:
                why = _check(cases, sk, cand, layout)
            except Exception as exc:  # a broken candidate is a failure with its reason
                why = f"{type(exc).__name__}: {exc}"
            checked += 1
            if why is not None:
                failures.append(f"{sk['dir']} ({sk['name']}) {cand}: {why}")
    assert checked > 0
    head = f"{len(failures)}/{checked} candidates differ ({shapes}, {layout}):\n"
    assert not failures, head + "\n".join(failures)


# ---- on the CPU: run() against a stand-in for the kernels --------------------------------

_KERNEL = re.compile(r"__global__ void (\w+)\(([^)]*)\)")
_TILE = re.compile(r"mk_gemm_tile<(\d+), (\d+), ")


class _FakeLaunch:
    """`_mk_cuda` without a GPU: checks each launch's arguments against MK_CUDA_KERNELS
    (the worker's own packing) and computes a GEMM kernel's product and bias with torch from
    the pointers and strides run() passes (the epilogue is not emulated: `epilogues` counts
    the kernels that have one)."""

    def __init__(self, module: Any) -> None:
        self.kernels = module.MK_CUDA_KERNELS
        src = module.MK_CUDA_SOURCE
        self.params = {m.group(1): [p.split()[-1].lstrip("*") for p in m.group(2).split(",")]
                       for m in _KERNEL.finditer(src)}
        self.bodies = {m.group(1): src[m.end():src.find("\n}\n", m.end())]
                       for m in _KERNEL.finditer(src)}
        self.epilogues = 0

    def launch(self, name: str, grid: tuple[int, ...], block: tuple[int, ...],
               args: tuple[Any, ...], shared: int = 0) -> None:
        """The kernel's work, computed with the op guard's torch modes off (a kernel's
        computation is not run()'s torch calls)."""
        from torch.utils._python_dispatch import _disable_current_modes

        with torch._C.DisableTorchFunction(), _disable_current_modes():
            self._compute(name, grid, block, args)

    def _compute(self, name: str, grid: tuple[int, ...], block: tuple[int, ...],
                 args: tuple[Any, ...]) -> None:
        from mkworker import cuda_runtime

        cuda_runtime._packed(self.kernels[name], args, torch.device("cpu"))
        if "_gemm_" not in name:
            raise AssertionError(f"{name}: only GEMM kernels are expected here")
        a = dict(zip(self.params[name], args, strict=True))
        body = self.bodies[name]
        tile = _TILE.search(body)
        assert tile is not None
        bm, bn = int(tile.group(1)), int(tile.group(2))
        m, n, k, b1 = a["M"], a["N"], a["K"], a["B1"]
        tiles = -(-m // bm) * -(-n // bn)
        assert grid[0] % tiles == 0 and block[0] % 32 == 0
        batch = grid[0] // tiles
        assert batch % b1 == 0

        def view(t: torch.Tensor, rows: int, cols: int, s: tuple[int, ...]) -> torch.Tensor:
            v = torch.as_strided(t, (batch // b1, b1, rows, cols), s, t.storage_offset())
            return v.reshape(batch, rows, cols)

        av = view(a["A"], m, k, (a["sAb"], a["sAb1"], a["sAm"], a["sAk"]))
        bv = view(a["B"], k, n, (a["sBb"], a["sBb1"], a["sBk"], a["sBn"]))
        c = av.double() @ bv.double()
        if "bias" in a:
            c = c + torch.as_strided(a["bias"], (n,), (a["sbias"],), a["bias"].storage_offset())
        for p in self.params[name]:
            if not (p.startswith("p_") and f"{p}[offs] = acc_v;" in body):
                continue  # not the GEMM's own value
            a[p].view(-1)[: batch * m * n] = c.float().reshape(-1)
        if "// fused epilogue" in body:
            self.epilogues += 1


@pytest.mark.parametrize("layout", ["contiguous", "transposed"])
def test_launchers_pass_operands_the_kernels_read(cases: Path, layout: str) -> None:
    """Without a GPU: every GEMM candidate's run() launches with arguments of its signature's
    kinds, and the operands, sizes and strides it passes describe the product: a subkernel
    whose GEMM has no epilogue matches the reference with the kernel computed by torch; the
    worker's op guard accepts every run() (its own torch calls: allocation, views, strides)."""
    import propose_harness as h
    from mkworker.guards import OpRecorder

    compared = 0
    for sk in _manifest(cases):
        for variant in (sk, _resized(sk)) if sk["name"] in RESIZE else (sk,):
            sk_dir = cases / sk["dir"]
            ref = h.load_module(sk_dir / "reference.py")
            base = h.make_inputs(variant["inputs"], "cpu", seed=7)
            want = h.as_tuple(ref.run(*[t.clone() for t in base]))
            for cand in sk["candidates"]:
                mod = h.load_module(sk_dir / cand)  # no cubin beside it here: not bound
                fake = _FakeLaunch(mod)
                mod._mk_cuda = fake
                args = [_transposed(t) if layout == "transposed" else t.clone() for t in base]
                rec = OpRecorder(getattr(mod, "MK_USES_TORCH", ()), sk_dir / cand)
                with torch.no_grad(), rec.recording():
                    got = h.as_tuple(mod.run(*args))
                assert rec.reason() is None, f"{sk['name']} {cand}: the guard: {rec.reason()}"
                assert len(got) == len(want)
                if fake.epilogues:
                    continue
                for i, (x, y) in enumerate(zip(want, got, strict=True)):
                    msg = h.compare(f"{sk['name']} {cand} output {i}", x, y)
                    assert msg is None, msg
                compared += 1
    assert compared >= 6
