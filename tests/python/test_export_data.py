"""mkworker.export_data: the tensor files a C++ export reads, and the data
it records from a problem (docs/export.md). The C++ side of the same format
is tested by tests/suites/65-export.sh, which builds the generated project."""

from __future__ import annotations

import importlib.util
import json
import os
import struct
from pathlib import Path

import pytest
import torch
from mkworker import export_data

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "export" / "small_net.py"


def test_round_trip_of_every_dtype_and_shape(tmp_path: Path) -> None:
    tensors = [
        ("f32", torch.randn(3, 4)),
        ("scalar", torch.tensor(7, dtype=torch.int64)),
        ("empty", torch.zeros(0, 5)),
        ("strided", torch.arange(12.0).reshape(3, 4).t()),
        ("bool", torch.tensor([True, False, True])),
        ("bf16", torch.randn(4).to(torch.bfloat16)),
        ("cl", torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)),
    ]
    path = str(tmp_path / "t.mkt")
    assert export_data.write_tensors(path, tensors) == len(tensors)
    back = export_data.read_tensors(path)
    assert list(back) == [name for name, _ in tensors]
    for name, t in tensors:
        assert back[name].dtype == t.dtype and back[name].shape == t.shape
        assert torch.equal(back[name], t), name


def test_the_header_is_the_documented_one(tmp_path: Path) -> None:
    path = tmp_path / "t.mkt"
    export_data.write_tensors(str(path), [("w", torch.ones(2, dtype=torch.float32))])
    raw = path.read_bytes()
    assert raw[:8] == b"MKTENS1\n"
    assert struct.unpack("<I", raw[8:12]) == (1,)
    assert raw[12:16] == struct.pack("<I", 1) and raw[16:17] == b"w"
    assert raw[17:21] == struct.pack("<I", 7) and raw[21:28] == b"float32"
    assert raw[28:32] == struct.pack("<I", 1) and raw[32:40] == struct.pack("<q", 2)
    assert raw[40:48] == struct.pack("<Q", 8) and raw[48:] == struct.pack("<2f", 1.0, 1.0)


def test_unsupported_dtype_is_refused(tmp_path: Path) -> None:
    with pytest.raises(export_data.ExportError, match="complex"):
        export_data.write_tensors(str(tmp_path / "t.mkt"),
                                  [("c", torch.zeros(2, dtype=torch.complex64))])


def test_outputs_flatten_depth_first() -> None:
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    assert [t.item() for t in export_data.flatten_tensors((a, [b, (c,)], 3))] == [0.0, 1.0, 2.0]


def test_state_tensor_paths() -> None:
    net = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    assert export_data.state_tensor(net, "0.weight") is net[0].weight
    assert export_data.state_tensor(net, "1.running_mean") is net[1].running_mean
    with pytest.raises(export_data.ExportError):
        export_data.state_tensor(net, "1.momentum")


def _manifest(tmp_path: Path, tensors: list[str]) -> Path:
    (tmp_path / "problem.py").write_text(FIXTURE.read_text())
    manifest = {"problem": "problem.py", "class": "Model", "device": "cpu", "seed": 4,
                "tensors": tensors}
    path = tmp_path / "export.json"
    path.write_text(json.dumps(manifest))
    return path


def test_make_data_records_the_model_before_its_forward(tmp_path: Path) -> None:
    names = ["conv.weight", "bn.running_mean", "bn.num_batches_tracked", "scale"]
    path = _manifest(tmp_path, names)
    assert export_data.main(["export_data", str(path)]) == 0
    w = export_data.read_tensors(str(tmp_path / "data" / "weights.mkt"))
    ex = export_data.read_tensors(str(tmp_path / "data" / "example.mkt"))
    assert list(w) == names
    # the statistics as they were before the forward (which updates them)
    assert torch.equal(w["bn.running_mean"], torch.zeros(4))
    assert w["bn.num_batches_tracked"].item() == 0
    assert sorted(ex) == ["input.0", "input.1", "output.0", "output.1"]
    # the same seeds give the same Model and inputs, and its outputs
    torch.manual_seed(4)
    spec = importlib.util.spec_from_file_location("small_net", FIXTURE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    model = mod.Model(*mod.get_init_inputs())
    assert torch.equal(w["conv.weight"], model.conv.weight.detach())
    torch.manual_seed(5)
    inputs = mod.get_inputs()
    assert torch.equal(ex["input.0"], inputs[0])
    with torch.no_grad():
        soft, total = model(*inputs)
    assert torch.equal(ex["output.0"], soft) and torch.equal(ex["output.1"], total)


def test_make_data_refuses_non_tensor_inputs(tmp_path: Path) -> None:
    path = _manifest(tmp_path, [])
    src = (tmp_path / "problem.py").read_text().replace(
        "torch.randn(2, 10)]", "3]")
    (tmp_path / "problem.py").write_text(src)
    assert export_data.main(["export_data", str(path)]) == 1
    assert not os.path.exists(tmp_path / "data" / "weights.mkt")
