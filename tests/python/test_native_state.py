"""mkworker.native_state: the state the native worker runs on (docs/native-worker.md).

``write_state`` must hand the native worker exactly what ``verify_subkernel`` uses: the
model built by ``replay.build_model(file, class, seed)`` and trial ``t``'s inputs from
seed ``seed + 1 + t`` (with the batch shrink), in the export's tensor format; with
``values``, the replay's values of each trial after the trials before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from mkworker import export_data, native_state, replay
from mkworker.verify import MethodError

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "propose" / "norm_pools"


def _graph() -> dict:
    g = json.loads(FIXTURE.with_suffix(".json").read_text())
    g["file"] = str(FIXTURE.with_suffix(".py"))
    return g


def _quiet(message: str, fraction: float) -> None:
    pass


def test_state_and_inputs_are_the_verifiers_draws(tmp_path: Path) -> None:
    g = _graph()
    out = native_state.write_state({"graph": g, "dir": str(tmp_path), "trials": 2, "seed": 5,
                                    "batch": 1}, _quiet)
    state = export_data.read_tensors(out["state_file"])
    model = replay.build_model(g["file"], "Model", 5)
    names = {v["name"] for v in g["values"] if v["kind"] in ("param", "buffer", "attr")}
    assert set(state) == names
    for name in names:
        assert torch.equal(state[name], replay.lookup_attr(model, name)), name
    for t, path in enumerate(out["inputs_files"]):
        got = export_data.read_tensors(path)
        want = replay.make_inputs(g["file"], 5 + 1 + t, "cpu", 1)
        assert list(got) == [f"input.{i}" for i in range(len(want))]
        for i, x in enumerate(want):
            assert x.shape[0] == 1 and torch.equal(got[f"input.{i}"], x)
    assert "values_files" not in out


def test_values_follow_the_trials_before_them(tmp_path: Path) -> None:
    g = _graph()
    bn_updates = [n["outputs"][-1] for n in g["nodes"] if n["op"].endswith("batch_norm")
                  and n.get("mutates")]
    assert bn_updates
    out = native_state.write_state({"graph": g, "dir": str(tmp_path), "trials": 2,
                                    "values": bn_updates}, _quiet)
    v0, v1 = (export_data.read_tensors(p) for p in out["values_files"])
    model = replay.build_model(g["file"], "Model", 0)
    for t, got in enumerate((v0, v1)):
        env, _ = replay.run_graph(g, model, replay.make_inputs(g["file"], 1 + t, "cpu", None))
        for v in bn_updates:
            assert torch.equal(got[f"v{v}"], env[v])
    assert not all(torch.equal(v0[f"v{v}"], v1[f"v{v}"]) for v in bn_updates)


@pytest.mark.parametrize("params, text", [
    ({"trials": 2}, "`dir`"),
    ({"dir": "x", "trials": 0}, "`trials`"),
    ({"dir": "x", "trials": 1, "batch": 0}, "`batch`"),
    ({"dir": "x", "trials": 1, "values": [10 ** 6]}, "`values`"),
])
def test_bad_requests(params: dict, text: str) -> None:
    with pytest.raises(MethodError, match=text):
        native_state.write_state({"graph": _graph(), **params}, _quiet)
