"""The worker methods end to end: capture a problem, verify subkernels and compositions.

These need the capture side of the worker (mkworker.capture / replay / protocol)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch
from _verify_helpers import ENGINE_OPTIONS, KERNELS, source

pytest.importorskip("mkworker.replay")
from mkworker.capture import capture_file
from mkworker.verify import MethodError, time_reference
from mkworker.verify import verify_composition as _verify_composition
from mkworker.verify import verify_subkernel as _verify_subkernel

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "conv_bias_relu.py")
SHARED = Path(os.environ.get("MK_SHARED_DIR", ROOT.parent / "shared"))
RELU = SHARED / "kernelbench" / "level1" / "19_ReLU.py"

_graphs: dict[tuple[str, int], dict] = {}


def graph(path: str, batch: int = 2) -> dict:
    if (path, batch) not in _graphs:
        _graphs[(path, batch)] = capture_file(path, "Model", batch)
    return _graphs[(path, batch)]


def progress_log() -> tuple[list, object]:
    seen: list[tuple[str, float]] = []
    return seen, lambda m, f: seen.append((m, f))


def verify_subkernel(params):
    seen, prog = progress_log()
    rep = _verify_subkernel({**ENGINE_OPTIONS, **params}, prog)
    fractions = [f for _, f in seen]
    assert (fractions == sorted(fractions) and fractions[-1] == 1.0) or rep["status"] != "ok"
    return rep


def verify_composition(params, progress):
    return _verify_composition({**ENGINE_OPTIONS, **params}, progress)


def epilogue(name: str, origin: str = "builtin", trials: int = 2) -> dict:
    # nodes 1..5 of the example: + bias, * scale, gelu, - 0.1, relu
    return verify_subkernel({
        "graph": graph(EXAMPLE), "nodes": [1, 2, 3, 4, 5], "inputs": [4, 1], "outputs": [9],
        "candidate": {"source": source(name), "name": name, "origin": origin},
        "trials": trials, "device": "cpu"})


def test_example_graph_is_what_the_tests_assume():
    g = graph(EXAMPLE)
    ops = [n["op"].rsplit(".", 1)[-1] for n in g["nodes"]]
    assert ops == ["conv2d", "add", "mul", "gelu", "sub", "relu"]
    assert g["nodes"][1]["inputs"] == [4, 1] and g["nodes"][5]["outputs"] == [9]


def test_subkernel_correct_epilogue_passes():
    rep = epilogue("cbr_epilogue_ok")
    assert rep["status"] == "ok", rep["reason"]
    assert rep["trials_passed"] == 2 and rep["max_abs_error"] < 1e-5
    assert rep["timing"]["available"] is False and "CPU" in rep["timing"]["reason"]
    assert rep["device"] == "cpu" and rep["batch"] == 2


def test_subkernel_tanh_gelu_is_a_mismatch_with_a_location():
    rep = epilogue("cbr_epilogue_tanh")
    assert rep["status"] == "mismatch"
    assert rep["trials_passed"] == 0 and rep["failing_elements"] > 0
    assert 1e-4 < rep["max_abs_error"] < 1e-2
    assert len(rep["worst"]["index"]) == 4
    assert "value 9" in rep["reason"]


def test_subkernel_calling_torch_is_rejected_unless_reference():
    src = ("import torch\nimport torch.nn.functional as F\n\n\ndef run(x, b):\n"
           "    return torch.relu(F.gelu((x + b) * 1.5) - 0.1)\n")
    for origin, status in (("llm", "rejected"), ("reference", "ok")):
        rep = verify_subkernel({
            "graph": graph(EXAMPLE), "nodes": [1, 2, 3, 4, 5], "inputs": [4, 1],
            "outputs": [9], "candidate": {"source": src, "name": "t", "origin": origin},
            "trials": 2, "device": "cpu"})
        assert rep["status"] == status, rep["reason"]
    assert rep["max_abs_error"] == 0.0


def test_subkernel_syntax_error_is_a_compile_error():
    rep = verify_subkernel({
        "graph": graph(EXAMPLE), "nodes": [5], "inputs": [8], "outputs": [9],
        "candidate": {"source": "import torch\n\ndef run(x)\n    return x\n"},
        "device": "cpu"})
    assert rep["status"] == "compile_error" and rep["line"] == 3


@pytest.mark.skipif(not RELU.exists(), reason="../shared/kernelbench is not available")
def test_kernelbench_relu():
    g = graph(str(RELU), batch=2)
    rep = verify_subkernel({"graph": g, "nodes": [0], "inputs": [0], "outputs": [1],
                            "candidate": {"source": source("relu_ok"), "name": "relu"},
                            "trials": 2, "device": "cpu"})
    assert rep["status"] == "ok", rep["reason"]
    assert rep["elements"] == 2 * 2 * 393216


def test_bad_requests():
    base = {"graph": graph(EXAMPLE), "nodes": [5], "inputs": [8], "outputs": [9],
            "candidate": {"source": source("relu_ok")}, "device": "cpu"}
    for change in ({"outputs": [99]}, {"nodes": "5"}, {"candidate": "x"},
                   {"trials": 0}, {"atol": -1.0}, {"device": "tpu"}, {"graph": None}):
        with pytest.raises(MethodError) as e:
            verify_subkernel({**base, **change})
        assert e.value.kind == "bad_request", change
    for key in ("trials", "atol", "rtol"):  # the engine always sends them: no second default
        with pytest.raises(MethodError, match=f"missing parameter `{key}`"):
            _verify_subkernel({**base, **ENGINE_OPTIONS, key: None}, lambda m, f: None)
    if not torch.cuda.is_available():
        with pytest.raises(MethodError) as e:
            verify_subkernel({**base, "device": "cuda"})
        assert e.value.kind == "unsupported"


def test_graph_file_param(tmp_path):
    import json

    p = tmp_path / "graph.json"
    p.write_text(json.dumps(graph(EXAMPLE)))
    rep = verify_subkernel({"graph_file": str(p), "nodes": [5], "inputs": [8], "outputs": [9],
                            "candidate": {"source": source("relu_ok")}, "trials": 1,
                            "device": "cpu"})
    assert rep["status"] == "ok", rep["reason"]


def test_composition_correct_modelnew_passes():
    rep = verify_composition({"file": str(KERNELS / "cbr_modelnew_ok.py"),
                              "reference_file": EXAMPLE, "trials": 2, "device": "cpu",
                              "batch": 2}, lambda m, f: None)
    assert rep["status"] == "ok", rep["reason"]
    assert rep["trials_passed"] == 2 and rep["notes"] == []
    assert rep["timing"]["available"] is False


def test_composition_cached_modelnew_is_rejected():
    rep = verify_composition({"file": str(KERNELS / "cbr_modelnew_cached.py"),
                              "reference_file": EXAMPLE, "trials": 3, "device": "cpu",
                              "batch": 2}, lambda m, f: None)
    assert rep["status"] == "rejected"
    assert "cached earlier call" in rep["reason"]


def test_composition_wrong_weights_are_a_mismatch(tmp_path):
    # A ModelNew whose forward ignores the conv bias: same weights, wrong math.
    src = (KERNELS / "cbr_modelnew_ok.py").read_text()
    src = src.replace("x = self.conv(x).contiguous()",
                      "x = F.conv2d(x, self.conv.weight).contiguous()")
    f = tmp_path / "new.py"
    f.write_text(src)
    rep = verify_composition({"file": str(f), "reference_file": EXAMPLE, "trials": 1,
                              "device": "cpu", "batch": 2}, lambda m, f: None)
    assert rep["status"] == "mismatch"


def test_composition_graph_that_never_captured_is_reported(tmp_path: Path) -> None:
    # A CUDA-graph ModelNew (compose_graph.c's runtime keeps its captures in _mk_graphs)
    # whose capture failed ran its plain forward: the report says so and why.
    src = (KERNELS / "cbr_modelnew_ok.py").read_text() + (
        "\n\nclass _Graphs:\n"
        "    def __init__(self) -> None:\n"
        "        self.entries: dict = {('sig',): None}\n"
        "        self.why = 'RuntimeError: operation not permitted when stream is capturing'\n"
        "\n\nclass ModelNew(ModelNew):\n"
        "    def forward(self, *args):\n"
        "        self._mk_graphs = _Graphs()\n"
        "        return super().forward(*args)\n")
    f = tmp_path / "new.py"
    f.write_text(src)
    rep = verify_composition({"file": str(f), "reference_file": EXAMPLE, "trials": 1,
                              "device": "cpu", "batch": 2}, lambda m, f: None)
    assert rep["status"] == "ok", rep["reason"]
    assert rep["cuda_graph_captured"] is False
    assert any("never captured (RuntimeError: operation not permitted" in n
               for n in rep["notes"]), rep["notes"]
    plain = verify_composition({"file": str(KERNELS / "cbr_modelnew_ok.py"),
                                "reference_file": EXAMPLE, "trials": 1, "device": "cpu",
                                "batch": 2}, lambda m, f: None)
    assert "cuda_graph_captured" not in plain


def test_composition_missing_class_is_a_compile_error():
    rep = verify_composition({"file": EXAMPLE, "reference_file": EXAMPLE, "device": "cpu",
                              "batch": 2}, lambda m, f: None)
    assert rep["status"] == "compile_error" and "ModelNew" in rep["reason"]


def test_time_reference_on_cpu_is_unavailable():
    rep = time_reference({"file": EXAMPLE, "device": "cpu"}, lambda m, f: None)
    assert rep["timing"]["available"] is False


def test_methods_are_registered_with_the_protocol():
    protocol = pytest.importorskip("mkworker.protocol")
    for name in ("verify_subkernel", "verify_composition", "time_reference"):
        assert protocol.lookup(name) is not None


def test_composition_is_run_once_more_at_a_smaller_batch(tmp_path: Path) -> None:
    """A composition that passed runs one more trial a batch smaller (docs/verify.md):
    its guard lets any batch through when its graph is batch-free, so a size it still
    fixes shows there, and the engine composes it again with the whole shape guarded."""
    ok = verify_composition({"file": str(KERNELS / "cbr_modelnew_ok.py"),
                             "reference_file": EXAMPLE, "trials": 1, "device": "cpu",
                             "batch": 2}, lambda m, f: None)
    assert ok["status"] == "ok" and ok["other_batch"] == {"batch": 1, "status": "ok",
                                                          "reason": ""}
    # the same kernel, its output made for batch 2 whatever the input's
    src = (KERNELS / "cbr_modelnew_ok.py").read_text().replace(
        "y = torch.empty_like(x)", "y = torch.empty((2,) + tuple(x.shape[1:]))")
    f = tmp_path / "new.py"
    f.write_text(src)
    rep = verify_composition({"file": str(f), "reference_file": EXAMPLE, "trials": 1,
                              "device": "cpu", "batch": 2}, lambda m, f: None)
    assert rep["status"] == "ok", rep["reason"]  # right at its own batch ...
    other = rep["other_batch"]
    assert other["batch"] == 1 and other["status"] != "ok" and other["reason"]  # ... not at 1
