"""Replay: a captured graph, run node by node with real tensors, equals the
user's forward bit for bit (torch.equal), including in-place updates of
buffers; subgraphs run as candidate-convention functions."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from conftest import fixture, kernelbench_files, needs_kernelbench
from mkworker import capture, replay
from mkworker.encode import tensor_ids

BATCH = 2


def _flat(x: object) -> list[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, list | tuple):
        return [t for v in x for t in _flat(v)]
    return []


def graph_bytes(g: dict) -> int:
    size = {"float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2}
    total = 0
    for v in g["values"]:
        n = 1
        for s in v["shape"]:
            n *= s
        total += n * size.get(v["dtype"], 1)
    return total


def assert_replay_exact(path: str, batch: int | None = BATCH, seed: int = 0) -> dict:
    """Captures, then runs forward eagerly and the graph by replay on the same
    model, inputs and RNG state; outputs and buffers must be identical."""
    g = capture.capture_file(path, batch=batch)
    if graph_bytes(g) > 6 << 30:
        pytest.skip(f"{Path(path).name}: {graph_bytes(g) >> 20} MiB at batch {g['batch']}")
    model = replay.build_model(path, seed=seed)
    before = {k: v.clone() for k, v in model.named_buffers()}
    inputs = replay.make_inputs(path, seed=seed + 1, batch=g["batch"])
    shapes = [v["shape"] for v in g["values"] if v["kind"] == "input"]
    assert [list(x.shape) for x in inputs if isinstance(x, torch.Tensor)] == shapes
    again = [x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]
    with torch.no_grad():
        replay.seed_all(1234)
        ref = model(*inputs)
        after = {k: v.clone() for k, v in model.named_buffers()}
        for k, v in model.named_buffers():
            v.copy_(before[k])
        replay.seed_all(1234)
        _, out = replay.run_graph(g, model, again)
    refs, outs = _flat(ref), _flat(out)
    assert len(refs) == len(outs) > 0
    for a, b in zip(refs, outs, strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert torch.equal(a, b), f"{Path(path).name}: replay differs from forward"
    for k, v in model.named_buffers():
        assert torch.equal(v, after[k]), f"{Path(path).name}: buffer {k} differs after replay"
    for a, b in zip(inputs, again, strict=True):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), "inputs modified differently"
    return g


@pytest.mark.parametrize("name", ["simple.py", "inplace.py", "control.py", "unknown_op.py",
                                  "dynamic_shape.py", "init_reads_data.py", "unicode_span.py",
                                  "random_forward.py", "prints.py"])
def test_fixture_replays_exactly(name):
    assert_replay_exact(fixture(name), batch=None)


def test_replay_detects_a_wrong_graph():
    """The exactness check can fail: a tampered constant changes the result."""
    g = capture.capture_file(fixture("simple.py"))
    mul = next(n for n in g["nodes"] if n["args"][1:] == [{"float": 2.0}])
    mul["args"][1] = {"float": 3.0}
    model = replay.build_model(fixture("simple.py"))
    inputs = replay.make_inputs(fixture("simple.py"))
    with torch.no_grad():
        ref = model(*inputs)
        for _, b in model.named_buffers():
            b.zero_()
        _, out = replay.run_graph(g, model, inputs)
    assert not torch.equal(ref, out)


def _groups_by_statement(g: dict) -> list[list[int]]:
    return [s["nodes"] for s in g["statements"]]


def _boundary(g: dict, nodes: list[int]) -> tuple[list[int], list[int]]:
    """Inputs (read, not produced inside, not model state) and outputs
    (produced inside, read later or returned) of a node group."""
    inside = set(nodes)
    produced: set[int] = set()
    reads: list[int] = []
    for nid in nodes:
        n = g["nodes"][nid]
        for vid in n["inputs"] + n["mutates"]:
            kind = g["values"][vid]["kind"]
            if vid not in produced and vid not in reads and kind in ("input", "node"):
                reads.append(vid)
        produced.update(n["outputs"])
    later: set[int] = set(tensor_ids(g["outputs"]))
    for n in g["nodes"]:
        if n["id"] not in inside and n["id"] > max(nodes):
            later.update(n["inputs"])
    outs = [v for nid in nodes for v in g["nodes"][nid]["outputs"]
            if v in later and g["values"][v]["kind"] == "node"]
    return reads, outs


def test_subkernels_compose_to_the_forward():
    path = fixture("simple.py")
    g = capture.capture_file(path)
    model = replay.build_model(path)
    x = replay.make_inputs(path, seed=3)[0]
    with torch.no_grad():
        before = {k: v.clone() for k, v in model.named_buffers()}
        ref = model(x)
        for k, v in model.named_buffers():
            v.copy_(before[k])
        env = {0: x}
        for nodes in _groups_by_statement(g):
            ins, outs = _boundary(g, nodes)
            fn = replay.subkernel_fn(g, nodes, ins, outs, model)
            got = fn(*[env[v] for v in ins])
            got = got if isinstance(got, tuple) else (got,)
            assert len(got) == len(outs)
            env.update(zip(outs, got, strict=True))
    assert torch.equal(env[g["outputs"]["t"]], ref)


def test_batch_norm_subkernel_updates_running_stats():
    path = fixture("simple.py")
    g = capture.capture_file(path)
    bn = next(n for n in g["nodes"] if n["op"] == "torch.nn.functional.batch_norm")
    model = replay.build_model(path)
    rm_vid, rv_vid = bn["mutates"]
    ins = [bn["inputs"][0], rm_vid, rv_vid]
    fn = replay.subkernel_fn(g, [bn["id"]], ins, bn["outputs"], model)
    x = torch.randn(4, 4, 6, 6)
    mean, var = torch.zeros(4), torch.ones(4)
    y, new_mean, new_var = fn(x, mean, var)
    assert new_mean is mean and new_var is var  # updated in place, as eager does
    assert torch.allclose(mean, 0.1 * x.mean(dim=(0, 2, 3)), atol=1e-6)
    expect = torch.nn.functional.batch_norm(x, torch.zeros(4), torch.ones(4),
                                            model.bn.weight, model.bn.bias, training=True)
    assert torch.equal(y, expect)


def test_unreplayable_values_are_refused():
    g = capture.capture_file(fixture("global_const.py"))
    with pytest.raises(replay.ReplayError, match="not replayable"):
        replay.run_graph(g, replay.build_model(fixture("global_const.py")),
                         replay.make_inputs(fixture("global_const.py")))
    g = capture.capture_file(fixture("simple.py"))
    with pytest.raises(replay.ReplayError, match="not available"):
        replay.subkernel_fn(g, [3], [], [g["nodes"][3]["outputs"][0]], None)
    with pytest.raises(replay.ReplayError, match="needs the model"):
        replay.subkernel_fn(g, [0], [0], [g["nodes"][0]["outputs"][0]], None)


def test_make_inputs_cuts_the_batch_without_building_full_tensors(tmp_path):
    src = tmp_path / "huge.py"
    src.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x, t):\n"
        "        return x.sum(1) + t\n\n\n"
        "def get_inputs():\n"
        "    return [torch.rand(1 << 20, 1 << 14), torch.randint(0, 2, (1 << 20,)).float()]\n\n\n"
        "def get_init_inputs():\n    return []\n")
    t0 = time.perf_counter()
    x, t = replay.make_inputs(str(src), seed=1, batch=3)  # full size would be 64 GiB
    assert time.perf_counter() - t0 < 5.0
    assert list(x.shape) == [3, 1 << 14] and list(t.shape) == [3]
    x2, _ = replay.make_inputs(str(src), seed=1, batch=3)
    assert torch.equal(x, x2)


@needs_kernelbench
@pytest.mark.parametrize("path", kernelbench_files(2), ids=lambda p: p.name)
def test_level2_replays_exactly(path):
    assert_replay_exact(str(path))


LEVEL1_SAMPLE = ["12_Matmul_with_diagonal_matrices_.py", "33_BatchNorm.py", "36_RMSNorm_.py",
                 "42_Max_Pooling_2D.py", "51_Argmax_over_a_dimension.py", "88_MinGPTNewGelu.py",
                 "92_cumsum_exclusive.py", "93_masked_cumsum.py", "95_CrossEntropyLoss.py",
                 "97_ScaledDotProductAttention.py", "99_TripletMarginLoss.py"]
LEVEL3_SAMPLE = ["5_AlexNet.py", "20_MobileNetV2.py", "50_ReLUSelfAttention.py"]


@needs_kernelbench
@pytest.mark.parametrize("name", LEVEL1_SAMPLE)
def test_level1_sample_replays_exactly(name):
    path = next(p for p in kernelbench_files(1) if p.name == name)
    assert_replay_exact(str(path))


@needs_kernelbench
@pytest.mark.parametrize("name", LEVEL3_SAMPLE)
def test_level3_sample_replays_exactly(name):
    path = next(p for p in kernelbench_files(3) if p.name == name)
    assert_replay_exact(str(path))


def test_make_inputs_draws_once_per_worker_and_leaves_the_generators_as_a_draw_would(
        tmp_path: Path) -> None:
    src = tmp_path / "p.py"
    src.write_text(
        "import torch\n"
        "class Model(torch.nn.Module):\n"
        "    def forward(self, x, y):\n"
        "        return x + y\n"
        "def get_inputs():\n"
        "    x = torch.rand(4, 3)\n"
        "    return [x, x, 7]\n"
        "def get_init_inputs():\n"
        "    return []\n")
    path = str(src)
    replay._INPUTS.clear()
    first = replay.make_inputs(path, seed=5)
    after_draw = torch.rand(3)
    second = replay.make_inputs(path, seed=5)
    after_hit = torch.rand(3)
    assert torch.equal(first[0], second[0]) and second[2] == 7
    assert first[0].data_ptr() != second[0].data_ptr()  # a copy: the caller may write it
    assert second[0] is second[1]  # a tensor given twice stays one tensor
    assert torch.equal(after_draw, after_hit)  # the generators as a fresh draw leaves them
    first[0].add_(1.0)
    assert torch.equal(replay.make_inputs(path, seed=5)[0], second[0])  # kept intact
    assert not torch.equal(replay.make_inputs(path, seed=6)[0], second[0])
    # An edited file is drawn again.
    src.write_text(src.read_text().replace("torch.rand(4, 3)", "torch.zeros(4, 3) ") + "\n")
    assert torch.equal(replay.make_inputs(path, seed=5)[0], torch.zeros(4, 3))


def test_multi_head_attention_calls_replay_exactly():
    """The calls recorded inside F.multi_head_attention_forward replay to the
    module's own outputs bit for bit."""
    assert_replay_exact(fixture("attention_modules.py"))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="draws on a GPU")
def test_inputs_are_drawn_on_the_gpu_itself(tmp_path):
    """On a GPU, get_inputs()'s factories draw there (the CPU generator is serial: ~6 s
    per seed for a level-1 problem's 4 GiB): the same seed gives the same tensors, on
    the device, at the reduced batch too; a get_inputs() that needs the CPU still works."""
    src = tmp_path / "m.py"
    src.write_text("import torch\n"
                   "class Model(torch.nn.Module):\n    def forward(self, x, i):\n        return x\n"
                   "def get_inputs():\n"
                   "    return [torch.rand(64, 1 << 20), torch.randint(0, 5, (64,))]\n"
                   "def get_init_inputs():\n    return []\n")
    problem = replay.load_problem(str(src))
    a = replay.generate_inputs(problem, 3, "cuda")
    b = replay.generate_inputs(problem, 3, "cuda")
    assert all(t.is_cuda for t in a) and all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    small = replay.generate_inputs(problem, 3, "cuda", batch=2)
    assert [tuple(t.shape) for t in small] == [(2, 1 << 20), (2,)]
    # mixes a default-device draw with a CPU tensor: fails on the GPU, drawn on the CPU
    cpu_only = tmp_path / "c.py"
    cpu_only.write_text(src.read_text().replace(
        "torch.randint(0, 5, (64,))", "torch.arange(64) + torch.zeros(64, device='cpu')"))
    got = replay.generate_inputs(replay.load_problem(str(cpu_only)), 3, "cuda")
    assert got[1].is_cuda and got[1].tolist() == list(range(64))
