"""The program's layout plan in the worker (`layouts`, engine/ir/mk_layout.h): the
replays convert values as the composed program does, and verify_subkernel gives a
subkernel its inputs in the planned layout (CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

pytest.importorskip("mkworker.replay")
from mkworker import replay, verify
from mkworker.capture import capture_file
from mkworker.verify import MethodError, as_composed, verify_subkernel

ROOT = Path(__file__).resolve().parents[2]
NET = str(ROOT / "tests" / "fixtures" / "propose" / "conv_net.py")
CL = torch.channels_last


@pytest.fixture(scope="module")
def net() -> dict:
    return capture_file(NET, "Model", 2)


def _node(g: dict, short: str, k: int = 0) -> dict:
    found = [n for n in g["nodes"] if n["op"].rsplit(".", 1)[-1].rstrip("_") == short]
    return found[k]


def _plan(g: dict) -> dict[int, str]:
    # What the engine sends for this graph (tests/c/test_layout.c checks the planner).
    lay = {0: "channels_last"}
    for short in ("conv2d", "batch_norm", "cat", "max_pool2d"):
        for n in [n for n in g["nodes"] if n["op"].endswith("." + short)]:
            lay[n["outputs"][0]] = "channels_last"
    lay[_node(g, "adaptive_avg_pool2d")["outputs"][0]] = "contiguous"
    return lay


def test_replay_follows_the_plan_and_matches_the_plain_replay(net):
    model = replay.build_model(NET, "Model", 0, "cpu")
    inputs = replay.make_inputs(NET, 1, "cpu", 2)
    env_plain, out_plain = replay.run_graph(net, model, inputs)
    env, out = replay.run_graph(net, model, inputs, layouts=_plan(net))
    assert env[0].is_contiguous(memory_format=CL) and not env_plain[0].is_contiguous(
        memory_format=CL)
    conv = _node(net, "conv2d", 1)["outputs"][0]
    assert env[conv].is_contiguous(memory_format=CL)
    pooled = _node(net, "adaptive_avg_pool2d")["outputs"][0]
    assert env[pooled].is_contiguous()  # the view after it needs this
    torch.testing.assert_close(out, out_plain, rtol=1e-5, atol=1e-5)


def test_subkernel_gets_its_inputs_in_the_planned_layout(net, tmp_path):
    # The second conv + batch norm, with a candidate that insists on channels_last.
    conv = _node(net, "conv2d", 1)
    bn = _node(net, "batch_norm", 1)
    src = tmp_path / "cand.py"
    src.write_text(
        "import torch\n"
        "import torch.nn.functional as F\n\n"
        "MK_USES_TORCH = ('conv2d', 'batch_norm')\n\n\n"
        "def run(x, w, b, rm, rv, g, beta):\n"
        "    if not x.is_contiguous(memory_format=torch.channels_last):\n"
        "        raise ValueError('expected a channels_last input')\n"
        "    return F.batch_norm(F.conv2d(x, w, b, 1, 1), rm, rv, g, beta, True, 0.1, 1e-5)\n")
    ins = [conv["inputs"][0], conv["inputs"][1], conv["inputs"][2], *bn["inputs"][1:]]
    params = {"graph": net, "nodes": [conv["id"], bn["id"]], "inputs": ins,
              "outputs": [bn["outputs"][0]], "trials": 2, "atol": 1e-4, "rtol": 1e-4,
              "device": "cpu",
              "candidate": {"source": src.read_text(), "name": "cl", "origin": "llm"}}
    plain = verify_subkernel(dict(params), lambda m, f: None)
    assert plain["status"] == "runtime_error" and "channels_last" in plain["reason"]
    planned = verify_subkernel(dict(params, layouts={str(k): v for k, v in _plan(net).items()}),
                               lambda m, f: None)
    assert planned["status"] == "ok", planned["reason"]


def test_bad_layouts_are_bad_requests(net):
    base = {"graph": net, "nodes": [0], "inputs": [0, 1, 2], "outputs": [
        net["nodes"][0]["outputs"][0]], "device": "cpu", "trials": 1, "atol": 1e-4, "rtol": 1e-4,
        "candidate": {"source": "def run(*a):\n    return a[0]\n", "name": "x", "origin": "llm"}}
    for bad in ([1], {"zero": "channels_last"}, {"0": "nhwc"}, {"99999": "contiguous"}):
        with pytest.raises(MethodError) as e:
            verify_subkernel(dict(base, layouts=bad), lambda m, f: None)
        assert e.value.kind == "bad_request"


def test_the_timed_candidate_converts_its_outputs_as_the_composition_does():
    # An NCHW result where the plan says channels_last: the composition copies it after
    # the call, so the candidate's timing must include that copy (the reference's
    # function converts what it makes itself).
    def run(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x.sum(1)
    x = torch.randn(2, 3, 4, 5)
    timed = as_composed(run, ["channels_last", None])
    a, b = timed(x)
    assert a.is_contiguous(memory_format=CL) and not run(x)[0].is_contiguous(memory_format=CL)
    torch.testing.assert_close(a, x * 2)
    assert b.shape == (2, 4, 5)
    single = as_composed(lambda t: t.contiguous(memory_format=CL), ["contiguous"])(x)
    assert single.is_contiguous()
    assert as_composed(run, [None, None]) is run  # nothing planned: the call itself


def test_verify_subkernel_times_the_composed_call(net, tmp_path, monkeypatch):
    conv = _node(net, "conv2d", 1)
    out = conv["outputs"][0]
    seen = {}

    def finish(*args, **kw):
        seen["call"] = kw["cand_call"]
        return {"status": "ok"}
    monkeypatch.setattr(verify, "_finish", finish)
    params = {"graph": net, "nodes": [conv["id"]], "inputs": conv["inputs"][:3],
              "outputs": [out], "trials": 1, "atol": 1e-4, "rtol": 1e-4, "device": "cpu",
              "layouts": {str(k): v for k, v in _plan(net).items()},
              "candidate": {"source": "import torch.nn.functional as F\n\n"
                                      "def run(x, w, b):\n"
                                      "    return F.conv2d(x.contiguous(), w, b, 1, 1)\n",
                            "name": "nchw", "origin": "llm"}}
    verify_subkernel(params, lambda m, f: None)
    x = torch.randn(2, conv_in_channels(net, conv), 8, 8)
    w = replay.lookup_attr(replay.build_model(NET, "Model", 0, "cpu"),
                           net["values"][conv["inputs"][1]]["name"])
    y = seen["call"](x, w, None)
    assert y.is_contiguous(memory_format=CL)  # converted as the plan says


def conv_in_channels(g: dict, conv: dict) -> int:
    return int(g["values"][conv["inputs"][1]]["shape"][1])


@pytest.mark.parametrize("body, status", [
    ("    x.add_(1)\n", "ok"),                 # returns None: no outputs
    ("    x.add_(1)\n    return ()\n", "ok"),
    ("    x.add_(2)\n", "mismatch"),           # the in-place update is what is compared
    ("    return x + 1\n", "mismatch"),        # leaves the buffer unchanged
])
def test_a_subkernel_that_only_updates_state_is_verified(net, body, status):
    # Batch norm's `num_batches_tracked.add_(1)`, whose result no op reads: no outputs,
    # its in-place update compared (it was refused as a bad request).
    node = next(n for n in net["nodes"] if n["op"].endswith(".add_") and n["mutates"])
    params = {"graph": net, "nodes": [node["id"]], "inputs": node["inputs"], "outputs": [],
              "trials": 2, "atol": 1e-4, "rtol": 1e-4, "device": "cpu",
              "candidate": {"source": "MK_USES_TORCH = ('add',)\n\n\ndef run(x):\n" + body,
                            "name": "c", "origin": "reference"}}
    r = verify_subkernel(params, lambda m, f: None)
    assert r["status"] == status, r["reason"]


def test_no_outputs_and_no_update_is_a_bad_request(net):
    conv = _node(net, "conv2d", 0)
    params = {"graph": net, "nodes": [conv["id"]], "inputs": conv["inputs"], "outputs": [],
              "trials": 1, "atol": 1e-4, "rtol": 1e-4, "device": "cpu",
              "candidate": {"source": "def run(*a):\n    return ()\n", "name": "c",
                            "origin": "llm"}}
    with pytest.raises(MethodError) as e:
        verify_subkernel(params, lambda m, f: None)
    assert e.value.kind == "bad_request" and "in place" in str(e.value)
