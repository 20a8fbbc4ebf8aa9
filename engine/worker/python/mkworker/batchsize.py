"""Sizes that move with the batch (docs/capture.md, "Running at any batch").

A capture records ``x.view(x.size(0), -1)`` as ``view(x, 16, -1)``: sizes read
in Python are constants of the graph, so code emitted from it would run at the
captured batch only. To find which constants are really the batch, the capture
runs ``forward`` twice more with dim 0 of the batched inputs grown by one and by
two (on fake tensors: no data, no compute) and compares the three graphs. Every
integer argument that differs is written as a size of one of its node's own
tensor arguments (a factory's, which has none: of a batched forward input),
``num * t.shape[dim] // den + off``, exact at all three batches; pyemit writes
that expression (``v3.view(v3.shape[0], -1)``) and replay evaluates it. When
anything else changes with the batch (the graph's structure, a float, an
integer no size explains) the graph is not batch-free
and compositions keep to the captured shapes (ModelNew guards on them).

Pure functions over recorded graphs; the capture calls :func:`probe_inputs` and
:func:`annotate`.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import torch

JSON = Any
Path = list[int | str]


def batched_indices(inputs: Sequence[Any]) -> list[int]:
    """Positions of the forward arguments that carry the batch: tensors whose
    dim 0 is the first tensor argument's dim 0 (KernelBench's convention;
    ``shrink`` cuts the same ones)."""
    first = next((x for x in inputs if isinstance(x, torch.Tensor) and x.dim() >= 1), None)
    if first is None:
        return []
    b = first.shape[0]
    return [i for i, x in enumerate(inputs)
            if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == b]


def with_batch(x: torch.Tensor, n: int) -> torch.Tensor:
    """``x`` with dim 0 of size ``n`` (fake or meta tensors: only shapes matter)."""
    if n <= x.shape[0]:
        return x.narrow(0, 0, n).clone()
    extra = x.narrow(0, 0, 1).expand(n - x.shape[0], *x.shape[1:])
    return torch.cat([x, extra])


def probe_inputs(inputs: Sequence[Any], grow: int) -> list[Any]:
    """The inputs with dim 0 of every batched one grown by ``grow``."""
    idx = set(batched_indices(inputs))
    return [with_batch(x, x.shape[0] + grow) if i in idx else x for i, x in enumerate(inputs)]


class NotBatchFree(Exception):
    """Why a graph's sizes cannot follow the batch (a sentence for the user)."""


def _where(node: dict[str, Any]) -> str:
    span = node.get("span") or {}
    line = f", line {span['line']}" if span.get("line") else ""
    return f"node {node['id']} ({node['op'].rsplit('.', 1)[-1]}{line})"


def _is_int(x: JSON) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _differences(a: JSON, b: JSON, c: JSON, path: Path, out: list[tuple[Path, list[int]]],
                 node: dict[str, Any]) -> None:
    """Walks three encodings of one argument in step; collects the integer
    leaves that differ. Raises NotBatchFree for any other difference."""
    if a == b == c:
        return
    if _is_int(a) and _is_int(b) and _is_int(c):
        out.append((path, [a, b, c]))
        return
    if isinstance(a, dict) and isinstance(b, dict) and isinstance(c, dict) \
            and len(a) == len(b) == len(c) == 1 and a.keys() == b.keys() == c.keys():
        (tag, body), = a.items()
        if tag in ("tuple", "list", "size", "slice", "dict"):
            _differences(body, b[tag], c[tag], path, out, node)
            return
    if isinstance(a, list) and isinstance(b, list) and isinstance(c, list) \
            and len(a) == len(b) == len(c):
        for i, (x, y, z) in enumerate(zip(a, b, c, strict=True)):
            _differences(x, y, z, [*path, i], out, node)
        return
    raise NotBatchFree(f"{_where(node)}: an argument other than a size changes with the batch")


def _fit(values: list[int], sizes: list[int]) -> tuple[int, int, int] | None:
    """(num, den, off) with ``num * s // den + off == v`` exact for each pair."""
    if sizes[1] == sizes[0]:
        return None
    slope = Fraction(values[1] - values[0], sizes[1] - sizes[0])
    num, den = slope.numerator, slope.denominator
    if any(num * s % den for s in sizes):
        return None
    off = values[0] - num * sizes[0] // den
    if all(num * s // den + off == v for s, v in zip(sizes, values, strict=True)):
        return num, den, off
    return None


def _express(node: dict[str, Any], values: list[int], shapes: list[list[dict[str, Any]]],
             batched: Sequence[int]) -> dict[str, int]:
    """The first (tensor argument, dim) whose size explains ``values``; for a call
    that reads no such tensor (a factory: ``torch.zeros(layers, x.size(0), h)``),
    a batched forward input's dim 0."""
    for vid in [*node["inputs"], *(b for b in batched if b not in node["inputs"])]:
        dims = len(shapes[0][vid]["shape"])
        for d in range(dims):
            sizes = [s[vid]["shape"][d] for s in shapes]
            got = _fit(values, sizes)
            if got is not None:
                num, den, off = got
                return {"t": vid, "dim": d, "num": num, "den": den, "off": off}
    raise NotBatchFree(f"{_where(node)}: the value {values[0]} changes with the batch and is "
                       "not a size of the call's tensor arguments or of a forward input")


def _same_structure(main: dict[str, Any], probes: Sequence[dict[str, Any]]) -> None:
    for p in probes:
        if len(p["nodes"]) != len(main["nodes"]) or len(p["values"]) != len(main["values"]):
            raise NotBatchFree("the recorded calls change with the batch")
        for n, m in zip(main["nodes"], p["nodes"], strict=True):
            if (n["op"], n["inputs"], n["outputs"], n["mutates"]) != \
                    (m["op"], m["inputs"], m["outputs"], m["mutates"]):
                raise NotBatchFree(f"{_where(n)}: the recorded calls change with the batch")
        for v, w in zip(main["values"], p["values"], strict=True):
            if (v["kind"], v["dtype"], len(v["shape"])) != (w["kind"], w["dtype"], len(w["shape"])):
                raise NotBatchFree(f"value {v['id']} changes kind, dtype or rank with the batch")
        if p["outputs"] != main["outputs"]:
            raise NotBatchFree("the forward's return value changes with the batch")


def _node_sizes(n: dict[str, Any], others: Sequence[dict[str, Any]],
                values: list[list[dict[str, Any]]], batched: Sequence[int]) -> list[dict[str, Any]]:
    diffs: list[tuple[Path, list[int]]] = []
    a, b, c = n["args"], others[0]["args"], others[1]["args"]
    _differences(a, b, c, [], diffs, n)
    for key in n["kwargs"]:
        ka, kb, kc = n["kwargs"][key], others[0]["kwargs"].get(key), others[1]["kwargs"].get(key)
        _differences(ka, kb, kc, [key], diffs, n)
    if set(n["kwargs"]) != set(others[0]["kwargs"]) or set(n["kwargs"]) != set(others[1]["kwargs"]):
        raise NotBatchFree(f"{_where(n)}: its keyword arguments change with the batch")
    return [{"at": path, **_express(n, vals, values, batched)} for path, vals in diffs]


def annotate(main: dict[str, Any], probes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Compares the main capture with two probes (dim 0 of the batched inputs
    grown by one and two); on success adds ``batch_ints`` to every node with a
    size that follows the batch. Returns the graph's ``batch_free`` entry
    (docs/protocol.md)."""
    batched = [v["id"] for v in main["values"] if v["kind"] == "input"
               and probes and v["id"] < len(probes[0]["values"])
               and probes[0]["values"][v["id"]]["shape"] != v["shape"]]
    try:
        if len(probes) != 2:
            raise NotBatchFree("the forward did not run at other batches")
        if not batched:
            raise NotBatchFree("no tensor argument has a batch dimension")
        _same_structure(main, probes)
        values = [main["values"], probes[0]["values"], probes[1]["values"]]
        found: dict[int, list[dict[str, Any]]] = {}
        for i, n in enumerate(main["nodes"]):
            sizes = _node_sizes(n, [probes[0]["nodes"][i], probes[1]["nodes"][i]], values,
                                batched)
            if sizes:
                found[i] = sizes
    except NotBatchFree as why:
        return {"ok": False, "why": str(why), "inputs": []}
    for i, sizes in found.items():
        main["nodes"][i]["batch_ints"] = sizes
    return {"ok": True, "why": None, "inputs": batched}


def unavailable(why: str) -> dict[str, Any]:
    """The ``batch_free`` entry of a capture that could not probe other batches."""
    return {"ok": False, "why": why, "inputs": []}


def resolve(node: dict[str, Any], shape_of: Any) -> tuple[list[JSON], dict[str, JSON]]:
    """A node's encoded (args, kwargs) with each ``batch_ints`` size computed
    from ``shape_of(vid)`` (the replayed tensors' shapes)."""
    sizes = node.get("batch_ints")
    if not sizes:
        return node["args"], node["kwargs"]
    args, kwargs = copy.deepcopy(node["args"]), copy.deepcopy(node["kwargs"])
    for s in sizes:
        value = s["num"] * int(shape_of(s["t"])[s["dim"]]) // s["den"] + s["off"]
        at = s["at"]
        holder: Any = kwargs if isinstance(at[0], str) else args
        for step in at[:-1]:
            holder = holder[step]
            if isinstance(holder, dict):  # a container encoding: step into its body
                (holder,) = holder.values()
        holder[at[-1]] = value
    return args, kwargs
