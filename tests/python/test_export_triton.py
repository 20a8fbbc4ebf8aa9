"""mkworker.export_triton: the launches of a ModelNew's Triton subkernels recorded
(under Triton's CPU interpreter here) and their kernels compiled ahead of time
for sm_90 without a GPU (cubin, parameters after specialisation)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from conftest import WORKER_PATH
from mkworker import export_triton

# A ModelNew as compose writes it (the parts the helper uses): sk0_run launches one
# kernel on an output it allocates, with an int equal to 1, a constexpr, an int not
# divisible by 16 and a pointer one element into a buffer (not 16-byte aligned).
MODELNEW = textwrap.dedent('''
    import torch
    import torch.nn as nn
    import triton
    import triton.language as tl


    class Model(nn.Module):
        def forward(self, x):
            return x * 2.0 + 1.0


    def get_inputs():
        return [torch.randn(4, 40)]


    def get_init_inputs():
        return []


    @triton.jit
    def sk0__axpb(x_ptr, y_ptr, n, one, scale, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        tl.store(y_ptr + offs, x * scale + one, mask=mask)


    def sk0_run(x):
        buf = torch.empty(x.numel() + 1, device=x.device, dtype=x.dtype)
        y = buf[1:]
        n = x.numel()
        sk0__axpb[(triton.cdiv(n, 64),)](x.contiguous(), y, n, 1, 2.0, BLOCK=64, num_warps=2)
        return y.view(x.shape)


    class ModelNew(Model):
        def forward(self, x):
            # axpb — lines 9-9 — triton_b64
            v3 = sk0_run(x)
            return v3
    ''')


def _run(path: Path, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(WORKER_PATH))
    env.pop("TRITON_INTERPRET", None)  # the helper chooses per step
    return subprocess.run([sys.executable, "-m", "mkworker.export_triton", str(path), str(out),
                           "--arch", "90", "--subkernels", "0:0:axpb", *extra],
                          env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def plan(tmp_path_factory: pytest.TempPathFactory) -> dict:
    d = tmp_path_factory.mktemp("export_triton")
    path = d / "modelnew.py"
    path.write_text(MODELNEW)
    p = _run(path, d / "plan.json")
    assert p.returncode == 0, p.stderr
    return json.loads((d / "plan.json").read_text())


def test_records_the_subkernels_calls_and_launch(plan: dict) -> None:
    assert plan["schema"] == export_triton.SCHEMA and plan["arch"] == 90
    (sk,) = plan["subkernels"]
    assert sk["index"] == 0 and sk["name"] == "axpb"
    assert sk["inputs"] == [{"pos": 0, "tensor": True, "var": 0, "sizes": [4, 40],
                             "strides": [40, 1], "dtype": "float32"}]
    ops = [s.get("op") for s in sk["steps"] if "op" in s]
    assert ops[0] == "empty" and "slice" in ops and ops[-1] == "view"
    (launch,) = [s for s in sk["steps"] if "launch" in s]
    assert launch["launch"]["name"] == "sk0__axpb"
    assert launch["grid"] == [3, 1, 1]  # cdiv(160, 64)
    assert launch["options"] == {"num_warps": 2}
    args = {a["name"]: a for a in launch["args"]}
    assert args["x_ptr"]["t"] == 0 and args["x_ptr"]["align16"] is True
    assert args["y_ptr"]["align16"] is False  # one float into the buffer
    assert args["n"]["v"] == 160 and args["one"]["v"] == 1 and args["BLOCK"]["v"] == 64
    # the output is the view the run returned, made by the recorded steps
    view = next(s for s in sk["steps"] if s.get("op") == "view")
    assert sk["outputs"] == view["out"]


def test_compiles_a_cubin_for_sm90_without_a_gpu(plan: dict) -> None:
    (k,) = plan["kernels"]
    cubin = base64.b64decode(k["cubin"])
    assert cubin[:4] == b"\x7fELF"
    assert k["name"] == "sk0__axpb" and k["num_warps"] == 2 and k["arch"] == 90
    # BLOCK (constexpr) and one (== 1) are specialised away; n (160 = 16 * 10) is
    # kept with its divisibility; x_ptr is 16-aligned, y_ptr is not
    params = [(p["name"], p["type"], p["ptx"]) for p in k["params"]]
    assert params == [("x_ptr", "*fp32", "u64"), ("y_ptr", "*fp32", "u64"),
                      ("n", "i32", "u32"), ("scale", "fp32", "f32")]
    align = {p["name"]: p.get("align16") for p in k["params"]}
    assert align["x_ptr"] is True and align["y_ptr"] is False
    assert k["scratch"] >= 0  # Triton 3.9 adds two scratch pointers (null when unused)


def test_ptx_params_reads_the_entry() -> None:
    ptx = (".visible .entry kern(\n\t.param .u64 .ptr .global .align 1 kern_param_0,\n"
           "\t.param .u32 kern_param_1,\n\t.param .f32 kern_param_2\n)\n{\n}\n")
    assert export_triton.ptx_params(ptx, "kern") == ["u64", "u32", "f32"]
    with pytest.raises(export_triton.ExportTritonError):
        export_triton.ptx_params(ptx, "other")


def test_schema_types_keep_symint_and_optional() -> None:
    assert export_triton.schema_types(torch.ops.aten.empty.memory_format._schema) == [
        "SymInt[]", "ScalarType?", "Layout?", "Device?", "bool?", "MemoryFormat?"]
    assert export_triton.schema_types(torch.ops.aten.sum.dim_IntList._schema) == [
        "Tensor", "int[1]?", "bool", "ScalarType?"]
    assert export_triton._kind("int[1]?") == "ints?"
    assert export_triton._kind("Tensor") == "tensor"
    with pytest.raises(export_triton.ExportTritonError):
        export_triton._kind("Dimname")


@pytest.mark.parametrize(("old", "new", "says"), [
    ("    n = x.numel()\n", "    n = int(x.sum().item() * 0) + x.numel()\n",
     "reads a tensor's values on the host"),
    ("(x.contiguous(), y,", "(_GLOBAL, y,", "neither got as an argument nor made"),
    ("    buf = torch.empty(", "    torch.rand(3)\n    buf = torch.empty(",
     "draws random numbers"),
])
def test_refuses_what_a_replay_cannot_follow(tmp_path: Path, old: str, new: str, says: str) -> None:
    assert old in MODELNEW
    path = tmp_path / "modelnew.py"
    path.write_text(MODELNEW.replace(old, new) + "\n_GLOBAL = torch.ones(160)\n")
    p = _run(path, tmp_path / "plan.json")
    assert p.returncode == 1
    assert not (tmp_path / "plan.json").exists()
    assert "recording the launches failed" in p.stderr and says in p.stderr, p.stderr
