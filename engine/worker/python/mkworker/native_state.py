"""The state the native worker runs on (docs/native-worker.md).

The native worker (engine/worker/native) has no Python: it cannot import the problem,
build its ``Model`` or call ``get_inputs()``. The method ``write_state`` does that once,
exactly as ``verify_subkernel`` does (``replay.build_model(file, class, seed)``: the
weights drawn after ``seed_all(seed)``; trial ``t``'s inputs from
``replay.make_inputs(file, seed + 1 + t, "cpu", batch)``), and writes them in the tensor
file format of the C++ export (``export_data.write_tensors``: named, C-contiguous, no
pickle), which the native worker reads:

- ``DIR/state.mkt``: every parameter, buffer and tensor attribute the graph reads, by
  its state_dict name, as built (before any forward);
- ``DIR/inputs_<t>.mkt``: ``input.<i>`` for trial ``t`` (draws are on the CPU, as the
  verifier draws them before moving them to its device);
- with ``values``: ``DIR/values_<t>.mkt``, ``v<id>`` for each listed value of a replay
  of the whole graph on trial ``t`` (trials ``0..t`` replayed in order on one model, as
  the verifier's trials leave its buffers): the Python worker's answer, for tests that
  hold the native interpreter to it.

Params: ``graph`` | ``graph_file``, ``dir``, ``trials`` (1..1000), ``seed`` (0), ``batch``
(the graph's), ``values`` (optional value ids), ``layouts`` (the plan, for ``values``).
"""

from __future__ import annotations

import os
from typing import Any

import torch

from mkworker import export_data, replay
from mkworker.verify import METHODS, MethodError, _layouts, _load_graph, register_methods


def _state(graph: dict[str, Any], model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    names = sorted({v["name"] for v in graph["values"] if v["kind"] in ("param", "buffer", "attr")})
    return [(n, replay.lookup_attr(model, n).detach().clone()) for n in names]


def write_state(params: dict[str, Any], progress: Any) -> dict[str, Any]:
    """Writes the model's state and each trial's inputs (and values) under ``dir``."""
    graph = _load_graph(params)
    folder = params.get("dir")
    trials = params.get("trials")
    seed = params.get("seed", 0)
    batch = params.get("batch", graph.get("batch"))
    wanted = params.get("values") or []
    if not isinstance(folder, str) or not folder:
        raise MethodError("bad_request", "`dir` (a folder to write into) is required")
    if not isinstance(trials, int) or not 1 <= trials <= 1000:
        raise MethodError("bad_request", "`trials` must be an int between 1 and 1000")
    bad_batch = batch is not None and (not isinstance(batch, int) or batch < 1)
    if not isinstance(seed, int) or bad_batch:
        raise MethodError("bad_request", "`seed` must be an int and `batch` an int >= 1")
    nvals = len(graph["values"])
    if not isinstance(wanted, list) or \
            not all(isinstance(v, int) and 0 <= v < nvals for v in wanted):
        raise MethodError("bad_request", "`values` must be a list of value ids of the graph")
    layouts = _layouts(params, nvals)
    path, cls = str(graph["file"]), str(graph.get("class") or "Model")
    os.makedirs(folder, exist_ok=True)
    model = replay.build_model(path, cls, seed, "cpu")
    state_file = os.path.join(folder, "state.mkt")
    export_data.write_tensors(state_file, _state(graph, model))
    inputs_files, values_files = [], []
    for t in range(trials):
        progress(f"trial {t + 1}/{trials}", t / trials)
        inputs = replay.make_inputs(path, seed + 1 + t, "cpu", batch)
        if not all(isinstance(x, torch.Tensor) for x in inputs):
            raise MethodError("unsupported", "get_inputs() returns something other than tensors: "
                                             "the native worker takes tensors only")
        name = os.path.join(folder, f"inputs_{t}.mkt")
        export_data.write_tensors(name, [(f"input.{i}", x) for i, x in enumerate(inputs)])
        inputs_files.append(name)
        if wanted:
            with torch.no_grad():
                env, _ = replay.run_graph(graph, model, inputs, layouts=layouts)
            name = os.path.join(folder, f"values_{t}.mkt")
            export_data.write_tensors(name, [(f"v{v}", env[v] if v in env else
                                              replay.lookup_attr(model, graph["values"][v]["name"]))
                                             for v in wanted])
            values_files.append(name)
    result: dict[str, Any] = {"state_file": state_file, "inputs_files": inputs_files,
                              "batch": batch, "seed": seed}
    if wanted:
        result["values_files"] = values_files
    return result


METHODS.setdefault("write_state", write_state)
register_methods()
