"""Graph capture (docs/protocol.md): nodes, values, spans, statements,
mutation, modes, errors, cache."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

import pytest
from conftest import fixture
from mkworker import capture, loader
from mkworker.encode import resolve_op, tensor_ids
from mkworker.protocol import WorkerError


def cap(name: str, **kw) -> dict:
    return capture.capture_file(fixture(name), **kw)


def check_schema(g: dict) -> None:
    """The structural rules every graph must obey."""
    values, nodes = g["values"], g["nodes"]
    assert [v["id"] for v in values] == list(range(len(values)))
    assert [n["id"] for n in nodes] == list(range(len(nodes)))
    defined: set[int] = {v["id"] for v in values if v["kind"] != "node"}
    for n in nodes:
        assert resolve_op(n["op"]) is not None
        reads = tensor_ids(n["args"])
        tensor_ids(list(n["kwargs"].values()), reads)
        assert n["inputs"] == reads
        for vid in n["inputs"] + n["mutates"]:
            assert vid in defined, f"node {n['id']} reads {vid} before it exists"
        out_ids = tensor_ids(n["out"])
        assert n["outputs"][: len(out_ids)] == out_ids
        assert len(n["outputs"]) - len(out_ids) <= len(n["mutates"])
        for vid in n["outputs"]:
            assert values[vid]["kind"] == "node" and values[vid]["producer"] == n["id"]
            defined.add(vid)
    for vid in tensor_ids(g["outputs"]):
        assert vid in defined
    for s in g["statements"]:
        assert g["forward"]["line"] <= s["line"] <= s["end_line"] <= g["forward"]["end_line"]
    assert g["stats"]["nodes"] == len(nodes)


def line_of(name: str, text: str) -> int:
    lines = Path(fixture(name)).read_text().splitlines()
    return next(i + 1 for i, line in enumerate(lines) if text in line)


def test_simple_graph():
    g = cap("simple.py")
    check_schema(g)
    assert g["schema"] == 1 and g["class"] == "Model" and g["mode"] == "fake"
    assert g["batch"] is None and len(g["source_sha256"]) == 64
    ops = [n["op"] for n in g["nodes"]]
    assert ops == ["torch.nn.functional.conv2d", "torch.Tensor.add_",
                   "torch.nn.functional.batch_norm", "torch.nn.functional.relu",
                   "torch.Tensor.mul", "torch.Tensor.add", "torch.Tensor.view", "torch.Tensor.sum",
                   "torch.Tensor.mul"]
    by_name = {v.get("name"): v for v in g["values"]}
    assert by_name["conv.weight"]["kind"] == "param"
    assert by_name["conv.weight"]["shape"] == [4, 3, 3, 3]
    assert by_name["bn.running_mean"]["kind"] == "buffer"
    assert by_name["offset"]["kind"] == "buffer"
    assert by_name["scale"]["kind"] == "attr" and by_name["scale"]["shape"] == []
    x = g["values"][0]
    assert x == {"id": 0, "kind": "input", "index": 0, "shape": [8, 3, 16, 16],
                 "dtype": "float32", "contiguous": True}
    conv, _, bn, relu, mul, add, view, total, scale = g["nodes"]
    assert conv["module"] == "conv" and conv["module_type"] == "Conv2d"
    assert conv["args"][:3] == [{"t": 0}, {"t": by_name["conv.weight"]["id"]},
                                {"t": by_name["conv.bias"]["id"]}]
    assert conv["args"][3:] == [{"tuple": [1, 1]}, {"tuple": [0, 0]}, {"tuple": [1, 1]}, 1]
    assert g["values"][conv["outputs"][0]]["shape"] == [8, 4, 14, 14]
    # training mode: batch statistics, running stats updated in place
    training = bn["kwargs"]["training"] if "training" in bn["kwargs"] else bn["args"][5]
    assert training is True and bn["module"] == "bn"
    rm, rv = by_name["bn.running_mean"]["id"], by_name["bn.running_var"]["id"]
    assert bn["mutates"] == [rm, rv] and len(bn["outputs"]) == 3
    assert relu["module"] is None and relu["module_type"] is None
    assert mul["args"] == [{"t": relu["outputs"][0]}, {"float": 2.0}]
    # y.size(0) is a constant, not a node
    assert view["args"] == [{"t": add["outputs"][0]}, 8, -1]
    assert total["kwargs"] == {"dim": 1}
    assert g["outputs"] == {"t": scale["outputs"][0]}
    # exact spans (1-based lines, 0-based byte columns) and statements
    conv_line = line_of("simple.py", "y = self.conv(x)")
    assert conv["span"] == {"line": conv_line, "col": 12, "end_line": conv_line, "end_col": 24}
    assert view["span"]["line"] == conv_line + 5 and total["span"]["line"] == conv_line + 6
    assert g["forward"] == {"line": conv_line - 1, "end_line": conv_line + 7}
    stmts = [(s["line"], s["end_line"], s["nodes"]) for s in g["statements"]]
    assert stmts == [(conv_line, conv_line, [0]), (conv_line + 1, conv_line + 1, [1, 2]),
                     (conv_line + 2, conv_line + 2, [3, 4, 5]),
                     (conv_line + 4, conv_line + 6, [6, 7]), (conv_line + 7, conv_line + 7, [8])]


def test_inplace_ops_get_fresh_values():
    g = cap("inplace.py")
    check_schema(g)
    ops = [n["op"] for n in g["nodes"]]
    assert ops == ["torch.Tensor.mul", "torch.Tensor.add_", "torch.nn.functional.relu",
                   "torch.Tensor.__setitem__", "torch.Tensor.add_", "torch.Tensor.add_",
                   "torch.nn.functional.batch_norm"]
    mul, add_, relu, setitem, iadd, _, bn = g["nodes"]
    y0 = mul["outputs"][0]
    assert add_["mutates"] == [y0] and add_["out"] == {"t": add_["outputs"][0]}
    y1 = add_["outputs"][0]
    assert relu["mutates"] == [y1] and relu["kwargs"] == {"inplace": True}
    y2 = relu["outputs"][0]
    assert setitem["mutates"] == [y2] and setitem["out"] is None
    assert setitem["args"][1] == {"tuple": [{"slice": [None, None, None]}, 0]}
    assert setitem["args"][2] == 0.25
    y3 = setitem["outputs"][0]
    assert iadd["mutates"] == [y3] and iadd["inputs"] == [y3, 0]
    y4 = iadd["outputs"][0]
    assert bn["inputs"][0] == y4
    assert g["outputs"] == {"tuple": [{"t": bn["outputs"][0]}, {"t": y4}]}


def test_python_control_flow_is_unrolled_with_module_paths():
    g = cap("control.py")
    check_schema(g)
    linears = [n for n in g["nodes"] if n["op"] == "torch.nn.functional.linear"]
    assert [n["module"] for n in linears] == ["blocks.0.fc", "blocks.1.fc", "blocks.2.fc"]
    tanhs = [n for n in g["nodes"] if n["op"] == "torch.tanh"]
    assert [n["module"] for n in tanhs] == ["blocks.0", "blocks.1", "blocks.2"]
    assert tanhs[0]["module_type"] == "Block"
    # spans point into Block.forward; statements group by Model.forward's line
    block_line = line_of("control.py", "return torch.tanh(self.fc(x))")
    assert {n["span"]["line"] for n in linears + tanhs} == {block_line}
    loop_body = line_of("control.py", "x = block(x)")
    stmt = next(s for s in g["statements"] if s["line"] == loop_body)
    assert stmt["nodes"] == [n["id"] for n in g["nodes"]
                             if n["op"] in ("torch.nn.functional.linear", "torch.tanh")]
    chunk = next(n for n in g["nodes"] if n["op"] == "torch.chunk")
    assert chunk["out"] == {"tuple": [{"t": v} for v in chunk["outputs"]]}
    assert not any(n["op"].endswith(".dim") for n in g["nodes"])


def test_unknown_ops_are_recorded_by_name():
    g = cap("unknown_op.py")
    check_schema(g)
    assert [n["op"] for n in g["nodes"]] == [
        "torch.special.i0e", "torch.nn.functional.hardshrink", "torch.logcumsumexp",
        "torch.nan_to_num"]
    assert g["nodes"][3]["kwargs"] == {"nan": {"float": 0.0}, "posinf": {"float": 10000.0}}


def test_utf8_byte_columns_and_tensor_properties():
    g = cap("unicode_span.py")
    check_schema(g)
    text = Path(fixture("unicode_span.py")).read_text().splitlines()
    line = line_of("unicode_span.py", "torch.sigmoid")
    sig = g["nodes"][0]
    assert sig["op"] == "torch.sigmoid"
    raw = text[line - 1].encode()
    start = raw.index(b"torch.sigmoid")
    assert sig["span"] == {"line": line, "col": start, "end_line": line,
                           "end_col": start + len(b"torch.sigmoid(x)")}
    ops = [n["op"] for n in g["nodes"]]
    assert "torch.Tensor.T.__get__" in ops and "torch.Tensor.mT.__get__" in ops


def test_batch_param():
    g = cap("simple.py", batch=2)
    check_schema(g)
    assert g["batch"] == 2 and g["values"][0]["shape"] == [2, 3, 16, 16]
    view = next(n for n in g["nodes"] if n["op"] == "torch.Tensor.view")
    assert view["args"][1] == 2
    # cutting dim 0 breaks this forward: full shapes, batch null
    g = cap("batch_mismatch.py", batch=2)
    assert g["batch"] is None and g["values"][1]["shape"] == [4, 3]
    g = cap("batch_mismatch.py", batch=100)  # nothing to cut
    assert g["batch"] is None


def test_fallbacks_are_reported():
    g = cap("dynamic_shape.py")  # x[x > 0] has a data-dependent shape: real tensors
    check_schema(g)
    assert g["mode"] == "real" and g["batch"] == capture.REAL_BATCH
    g = cap("init_reads_data.py")  # .item() in __init__: built for real, then faked
    check_schema(g)
    assert g["mode"] == "fake" and g["init"] == "real"
    assert len([n for n in g["nodes"] if n["op"] == "torch.nn.functional.linear"]) == 3
    g = cap("simple.py")
    assert g["init"] == "fake"


def test_tensor_from_outside_forward_is_const():
    g = cap("global_const.py")
    check_schema(g)
    const = [v for v in g["values"] if v["kind"] == "const"]
    assert len(const) == 1 and const[0]["shape"] == [3, 4]


def test_scalar_forward_arguments_are_recorded_with_their_values(tmp_path: Path) -> None:
    """Forward arguments that are not tensors (docs/protocol.md, ``scalar_inputs``):
    their captured values, by index; one no literal can stand for is opaque."""
    src = tmp_path / "scalars.py"
    src.write_text(
        "import torch\n"
        "class Config:\n"
        "    scale = 2.0\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x, s, dims, flag, cfg, pair):\n"
        "        y = x * s * cfg.scale + pair[0]\n"
        "        return y.sum(dim=dims) if flag else y\n"
        "def get_inputs():\n"
        "    return [torch.randn(4, 8), 3.0, (1,), True, Config(), [torch.ones(8), 1]]\n"
        "def get_init_inputs():\n"
        "    return []\n")
    g = capture.capture_file(str(src))
    check_schema(g)
    assert [v["index"] for v in g["values"] if v["kind"] == "input"] == [0]
    assert g["scalar_inputs"][:4] == [{"index": 1, "value": {"float": 3.0}},
                                      {"index": 2, "value": {"tuple": [1]}},
                                      {"index": 3, "value": True},
                                      {"index": 4, "opaque": True, "type": "Config"}]
    # a list holding a tensor: its tensor is a const of the graph, the list opaque
    assert g["scalar_inputs"][4] == {"index": 5, "opaque": True, "type": "list"}
    assert capture.capture_file(fixture("simple.py"))["scalar_inputs"] == []


def test_errors_name_the_line():
    with pytest.raises(WorkerError) as e:
        cap("data_dependent.py")
    assert e.value.kind == "data_dependent"
    assert e.value.line == line_of("data_dependent.py", "if y.sum() > 0")
    with pytest.raises(WorkerError) as e:
        cap("forward_raises.py")
    assert e.value.kind == "python_error" and e.value.line == line_of("forward_raises.py", "@")
    assert "reduction dim" in e.value.message or "shape" in e.value.message
    with pytest.raises(WorkerError) as e:
        cap("init_raises.py")
    assert e.value.kind == "python_error"
    assert e.value.line == line_of("init_raises.py", "raise ValueError")
    assert "n must be positive" in e.value.message
    for name, what in (("no_model.py", "Model"), ("no_get_inputs.py", "get_inputs")):
        with pytest.raises(WorkerError) as e:
            cap(name)
        assert e.value.kind == "missing" and what in e.value.message
    with pytest.raises(WorkerError) as e:
        cap("simple.py", class_name="Nope")
    assert e.value.kind == "missing" and "Nope" in e.value.message


def test_print_in_forward_goes_where_stdout_points(capsys):
    g = cap("prints.py")
    assert [n["op"] for n in g["nodes"]] == ["torch.sigmoid"]
    assert "printed in forward" in capsys.readouterr().out


def test_syntax_error_and_import_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import torch\n\nclass Model(torch.nn.Module):\n    def forward(self x):\n"
                   "        return x\n")
    with pytest.raises(WorkerError) as e:
        capture.capture_file(str(bad))
    assert e.value.kind == "syntax_error" and e.value.line == 4
    imp = tmp_path / "imp.py"
    imp.write_text("import torch\nimport no_such_module_mk\n")
    with pytest.raises(WorkerError) as e:
        capture.capture_file(str(imp))
    assert e.value.kind == "import_error" and e.value.line == 2


def test_big_conv_captures_well_under_a_second():
    capture.warm_up()
    t0 = time.perf_counter()
    g = cap("big_conv.py")
    elapsed = time.perf_counter() - t0
    assert g["mode"] == "fake" and g["values"][0]["shape"] == [128, 64, 128, 128]
    assert elapsed < 0.5, f"128x64x128x128 conv took {elapsed:.3f} s"


def test_ten_megabyte_file(tmp_path):
    body = Path(fixture("simple.py")).read_text()
    filler = "# " + "x" * 97 + "\n"
    big = tmp_path / "big.py"
    big.write_text(filler * (10_000_000 // len(filler)) + body)
    assert big.stat().st_size > 10_000_000
    t0 = time.perf_counter()
    g = capture.capture_file(str(big))
    assert time.perf_counter() - t0 < 5.0
    offset = 10_000_000 // len(filler)
    assert g["nodes"][0]["span"]["line"] == offset + line_of("simple.py", "y = self.conv(x)")
    huge = tmp_path / "huge.py"
    with open(huge, "wb") as fh:
        fh.truncate(loader.MAX_FILE_BYTES + 1)
    with pytest.raises(WorkerError) as e:
        capture.capture_file(str(huge))
    assert e.value.kind == "unsupported" and "MB" in e.value.message


def test_cache_follows_content(tmp_path):
    src = tmp_path / "m.py"
    src.write_text(Path(fixture("simple.py")).read_text())
    capture.clear_cache()
    first = capture.capture({"file": str(src)}, lambda m, f: None)
    again = capture.capture({"file": str(src)}, lambda m, f: None)
    assert not first["stats"]["cached"] and again["stats"]["cached"]
    assert again["nodes"] == first["nodes"]
    other = capture.capture({"file": str(src), "batch": 2}, lambda m, f: None)
    assert not other["stats"]["cached"]
    src.write_text(src.read_text().replace("F.relu(y)", "torch.tanh(y)"))
    edited = capture.capture({"file": str(src)}, lambda m, f: None)
    assert not edited["stats"]["cached"]
    assert edited["source_sha256"] != first["source_sha256"]
    assert "torch.tanh" in [n["op"] for n in edited["nodes"]]
    os.utime(src)  # same content, new mtime: still cached
    assert capture.capture({"file": str(src)}, lambda m, f: None)["stats"]["cached"]


def test_multi_head_attention_is_recorded_as_its_calls():
    """F.multi_head_attention_forward runs with the recorder on: its linears,
    views, bmm, softmax and scaled_dot_product_attention are nodes kernels can
    replace, attributed to the attention module, and no node is the composite."""
    g = cap("attention_modules.py")
    check_schema(g)
    ops = [n["op"].rsplit(".", 1)[-1] for n in g["nodes"]]
    assert "multi_head_attention_forward" not in ops
    assert ops.count("linear") == 2 + 4  # in and out projections twice, the feed-forward
    assert "bmm" in ops and "softmax" in ops  # need_weights=True: the explicit product
    assert "scaled_dot_product_attention" in ops  # the encoder layer: need_weights=False
    first = g["nodes"][0]
    assert first["op"] == "torch.nn.functional.linear" and first["module"] == "attn"


def test_composite_that_fails_inside_is_one_node(monkeypatch):
    """When the composite cannot run with the recorder on, what it recorded is
    taken back and the call is one node, as before."""
    @contextlib.contextmanager
    def broken(func):
        raise RuntimeError("no check to turn off")
        yield

    monkeypatch.setattr(capture, "_own_torch_function_check_off", broken)
    g = cap("attention_modules.py")
    check_schema(g)
    ops = [n["op"].rsplit(".", 1)[-1] for n in g["nodes"]]
    assert ops.count("multi_head_attention_forward") == 2
    assert "bmm" not in ops
    produced = {v for n in g["nodes"] for v in n["outputs"]}
    assert all(v["kind"] != "node" or v["id"] in produced for v in g["values"])
