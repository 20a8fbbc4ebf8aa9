"""Sizes that follow the batch (mkworker.batchsize; docs/capture.md, "Running
at any batch"): which integers of a graph move with the batch, how they are
written, and that a replay at any batch matches the module."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import REPO, fixture
from mkworker import batchsize, capture, replay


def nodes_with_sizes(g: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for n in g["nodes"]:
        if n.get("batch_ints"):
            out.setdefault(n["op"].rsplit(".", 1)[-1], []).extend(n["batch_ints"])
    return out


def write(tmp_path: Path, forward: str, inputs: str = "[torch.rand(6, 4, 5)]") -> str:
    src = tmp_path / "m.py"
    src.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        + "".join(f"        {line}\n" for line in forward.splitlines())
        + f"def get_inputs():\n    return {inputs}\n"
        "def get_init_inputs():\n    return []\n")
    return str(src)


@pytest.mark.parametrize("batch", [None, 2])
def test_sizes_read_from_the_batch_are_sizes_of_the_calls_tensors(batch):
    g = capture.capture_file(fixture("batch_sizes.py"), batch=batch)
    b = batch or 64
    assert g["batch_free"] == {"ok": True, "why": None, "inputs": [0]}
    sizes = nodes_with_sizes(g)
    assert sorted(sizes) == ["ones", "reshape", "view"]
    (ones,) = sizes["ones"]
    assert ones["t"] == 0 and ones["at"] == [0]  # no tensor argument: the forward input
    flat, per_channel = sizes["view"]
    # y.view(x.size(0), -1): y's dim 0; y.reshape(b * ch, ...): 8 * y's dim 0;
    # .view(b, ch) of the [b * ch] sums: their dim 0 over 8
    assert {k: flat[k] for k in ("at", "dim", "num", "den", "off")} == \
        {"at": [1], "dim": 0, "num": 1, "den": 1, "off": 0}
    reshape = sizes["reshape"][0]
    assert {k: reshape[k] for k in ("at", "num", "den")} == {"at": [1], "num": 8, "den": 1}
    assert {k: per_channel[k] for k in ("at", "num", "den")} == {"at": [1], "num": 1, "den": 8}
    view = next(n for n in g["nodes"] if n["op"] == "torch.Tensor.view")
    assert view["args"][1] == b  # the captured number stays where it was


@pytest.mark.parametrize("batch", [1, 3, 64, 100])
def test_a_replay_at_any_batch_matches_the_module(batch):
    g = capture.capture_file(fixture("batch_sizes.py"), batch=2)
    model = replay.build_model(fixture("batch_sizes.py"))
    x = torch.rand(batch, 3, 16, 16)
    _, out = replay.run_graph(g, model, [x])
    with torch.no_grad():
        assert torch.equal(out, model(x))


def test_sizes_inside_containers_and_keywords(tmp_path):
    g = capture.capture_file(write(tmp_path, "y = x.reshape((x.shape[0] * 4, 5))\n"
                                             "return y.new_zeros(size=[y.shape[0] + 3, 2])"))
    assert g["batch_free"]["ok"]
    reshape, zeros = (n["batch_ints"] for n in g["nodes"])
    assert reshape[0]["at"] == [1, 0] and reshape[0]["num"] == 4
    assert zeros[0]["at"] == ["size", 0] and zeros[0]["off"] == 3
    model = replay.build_model(g["file"])
    for b in (1, 9):
        x = torch.rand(b, 4, 5)
        assert torch.equal(replay.run_graph(g, model, [x])[1], model(x))


def test_a_factorys_sizes_follow_a_forward_input(tmp_path):
    # torch.zeros(layers, x.size(0), h) reads no tensor: its size is the input's dim 0
    g = capture.capture_file(write(tmp_path, "h = torch.zeros(2, x.size(0), 5)\n"
                                             "return x + h.sum(0)[:, None, :]"))
    assert g["batch_free"]["ok"], g["batch_free"]
    (size,) = g["nodes"][0]["batch_ints"]
    assert g["nodes"][0]["inputs"] == [] and size["t"] == 0 and size["at"] == [1]
    model = replay.build_model(g["file"])
    for b in (1, 9):
        x = torch.rand(b, 4, 5)
        assert torch.equal(replay.run_graph(g, model, [x])[1], model(x))


@pytest.mark.parametrize(("forward", "why"), [
    # an integer no size explains: the square of the batch (three points catch it)
    ("return x.sum() + torch.zeros(x.size(0) ** 2).sum()", "not a size of the call's tensor"),
    # a size divided into a float: not an integer argument
    ("return x * (1.0 / x.size(0))", "an argument other than a size"),
    # the graph itself changes with the batch
    ("for i in range(x.size(0)):\n    x = x + i\nreturn x", "the recorded calls change"),
])
def test_what_is_not_batch_free_says_why(tmp_path, forward, why):
    g = capture.capture_file(write(tmp_path, forward))
    assert g["batch_free"]["ok"] is False and why in g["batch_free"]["why"]
    assert not any(n.get("batch_ints") for n in g["nodes"])


def test_a_forward_that_fails_at_another_batch_is_not_batch_free(tmp_path):
    # both inputs have dim 0 of 8, so both count as batched: grown, the matmul fails
    src = write(tmp_path, "return x @ w", "[torch.rand(8, 8), torch.rand(8, 3)]")
    Path(src).write_text(Path(src).read_text().replace("def forward(self, x):",
                                                       "def forward(self, x, w):"))
    g = capture.capture_file(src)
    assert g["batch_free"]["ok"] is False
    assert "fails at another batch" in g["batch_free"]["why"]


def test_real_mode_captures_are_not_batch_free():
    g = capture.capture_file(fixture("dynamic_shape.py"))
    assert g["mode"] == "real"
    assert g["batch_free"]["ok"] is False and "real tensors" in g["batch_free"]["why"]


@pytest.mark.parametrize(("values", "sizes", "fit"), [
    ([4, 5, 6], [4, 5, 6], (1, 1, 0)),
    ([32, 40, 48], [4, 5, 6], (8, 1, 0)),
    ([4, 5, 6], [32, 40, 48], (1, 8, 0)),
    ([7, 8, 9], [4, 5, 6], (1, 1, 3)),
    ([4, 6, 9], [4, 5, 6], None),        # not linear in the batch
    ([4, 5, 6], [9, 9, 9], None),        # the size does not move
    ([1, 1, 2], [2, 3, 4], None),        # a floor division no formula fits exactly
])
def test_fit(values, sizes, fit):
    assert batchsize._fit(values, sizes) == fit


def test_growing_keeps_the_other_dims():
    x = torch.rand(2, 3, 4)
    assert batchsize.with_batch(x, 5).shape == (5, 3, 4)
    assert batchsize.with_batch(x, 1).shape == (1, 3, 4)
    grown = batchsize.probe_inputs([x, torch.rand(2, 7), torch.rand(3), 1.5], 2)
    assert [tuple(t.shape) if isinstance(t, torch.Tensor) else t for t in grown] == \
        [(4, 3, 4), (4, 7), (3,), 1.5]


BIN = Path(os.environ.get("MKEVOLVE_BIN", REPO / "build" / "mkevolve"))

RUN_AT_BATCHES = """
import importlib.util, sys, torch
spec = importlib.util.spec_from_file_location("new", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
torch.manual_seed(0)
ref = m.Model(*m.get_init_inputs())
new = m.ModelNew(*m.get_init_inputs())
new.load_state_dict(ref.state_dict())
xs = {b: torch.rand(b, 3, 16, 16) for b in (64, 5, 1)}
with torch.no_grad():
    want = {b: ref(x) for b, x in xs.items()}
    m.Model.forward = lambda *a: 1 / 0  # only ModelNew's own kernels may answer
    for b, x in xs.items():
        got = new(x)
        assert got.shape == want[b].shape and torch.allclose(got, want[b], atol=1e-4), b
    try:
        new(torch.rand(2, 3, 8, 8))  # another size of the other dims: the user's forward
        raise AssertionError("ran at a shape it was not made for")
    except ZeroDivisionError:
        pass
"""


@pytest.mark.skipif(not BIN.is_file(), reason=f"{BIN} is not built")
def test_a_cpu_evolved_modelnew_runs_at_the_modules_own_batch(tmp_path: Path) -> None:
    """The CPU plan captures at a reduced batch (2); the ModelNew it writes runs
    its kernels at the module's batch (64) and any other, not only at 2."""
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    out = tmp_path / "ModelNew.py"
    p = subprocess.run(
        [str(BIN), "evolve", fixture("batch_sizes.py"), "--device", "cpu", "--json",
         "--time-budget", "60", "-o", str(out), "--workdir", str(tmp_path / "work"),
         "--cache-dir", str(tmp_path / "cache")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads(p.stdout)
    assert summary["verified"] is True
    assert any(sk["state"] == "verified" for sk in summary["subkernels"])
    text = out.read_text()
    assert "@triton.jit" in text and ".view(" in text and ".shape[0], -1)" in text
    run = subprocess.run([sys.executable, "-c", RUN_AT_BATCHES, str(out)],
                         env=dict(env, TRITON_INTERPRET="1"), capture_output=True, text=True,
                         timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
