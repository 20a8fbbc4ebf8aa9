"""Replays captured graphs with real tensors.

The verifier uses this to run a subkernel's reference (the recorded torch
calls of its nodes, exactly as the user's forward made them), and tests use it
to prove a capture is exact: replaying the whole graph gives bit-identical
results to ``model(*inputs)``.

Values are looked up by id in an ``env`` (dict value id -> tensor): inputs by
forward argument index, parameters / buffers / attributes on the model by
name, node results as the nodes run. In-place nodes mutate their inputs as in
eager mode and bind the fresh value ids to the same tensor objects.
"""

from __future__ import annotations

import hashlib
import os
import random
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch._subclasses import fake_tensor
from torch.overrides import TorchFunctionMode

from mkworker import batchsize, loader, memory
from mkworker.encode import JSON, NotReplayable, decode, resolve_op

Graph = dict[str, Any]
Env = dict[int, torch.Tensor]

# --- problems, models, inputs -----------------------------------------------------

_PROBLEMS: OrderedDict[tuple[str, str], loader.Problem] = OrderedDict()


def load_problem(path: str) -> loader.Problem:
    """The module file loaded once per content (edits load a fresh module)."""
    source, sha = loader.read_source(path)
    key = (path, sha)
    problem = _PROBLEMS.get(key)
    if problem is None:
        problem = loader.load(path, source)
        _PROBLEMS[key] = problem
        while len(_PROBLEMS) > 16:
            loader.unload(_PROBLEMS.popitem(last=False)[1])
    return problem


def seed_all(seed: int) -> None:
    """Seeds every generator user code may draw from (torch on all devices,
    Python's random, numpy's global one)."""
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed % (1 << 32))
    except ImportError:
        pass


def build_model(path: str, cls: str = "Model", seed: int = 0,
                device: str | torch.device = "cpu") -> torch.nn.Module:
    """``cls(*get_init_inputs())`` with weights drawn after ``seed_all(seed)``
    on the CPU (as KernelBench does), then moved to ``device``; train mode."""
    problem = load_problem(path)
    model_cls = problem.model_class(cls)
    seed_all(seed)
    init_args = problem.call_list("get_init_inputs")
    with problem.user_code(f"{cls}(*get_init_inputs())"):
        model = model_cls(*init_args)
    model = model.to(device)
    model.train()
    return model


_SIZE_FACTORIES = frozenset({
    torch.rand, torch.randn, torch.zeros, torch.ones, torch.empty, torch.full, torch.randint,
    torch.normal, torch.randperm,
})


class _ShrinkFactories(TorchFunctionMode):
    """Makes tensors of get_inputs() directly at the reduced batch: factory
    calls get dim 0 of their size cut to ``batch`` (no full-size tensor is
    ever built, which matters for inputs of several GB)."""

    def __init__(self, batch: int) -> None:
        super().__init__()
        self.batch = batch

    def __torch_function__(self, func: Callable[..., Any], types: Any,
                           args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = dict(kwargs or {})
        if func in _SIZE_FACTORIES:
            args, kwargs = self._cut(func, list(args), kwargs)
        return func(*args, **kwargs)

    def _cut(self, func: Callable[..., Any], args: list[Any],
             kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
        def cut(size: Sequence[int]) -> list[int]:
            dims = [int(s) for s in size]
            if dims and dims[0] > self.batch:
                dims[0] = self.batch
            return dims

        if "size" in kwargs and isinstance(kwargs["size"], list | tuple):
            kwargs["size"] = cut(kwargs["size"])
        elif func is torch.randperm:
            if args and isinstance(args[0], int) and args[0] > self.batch:
                args[0] = self.batch
        elif func in (torch.randint, torch.normal):
            for i, a in enumerate(args):  # the size is the one tuple argument
                if isinstance(a, list | tuple):
                    args[i] = cut(a)
                    break
        elif args and isinstance(args[0], list | tuple):
            args[0] = cut(args[0])
        elif args and all(isinstance(a, int) for a in args) and func is not torch.full:
            args = cut(args)
        return tuple(args), kwargs


def _expected_shapes(problem: loader.Problem, batch: int) -> list[list[int] | None]:
    with fake_tensor.FakeTensorMode(allow_non_fake_inputs=True):
        full = problem.call_list("get_inputs")
    shapes: list[list[int] | None] = []
    for x in full:
        if isinstance(x, torch.Tensor):
            dims = [int(s) for s in x.shape]
            if dims and dims[0] > batch:
                dims[0] = batch
            shapes.append(dims)
        else:
            shapes.append(None)
    return shapes


def generate_inputs(problem: loader.Problem, seed: int = 0, device: str | torch.device = "cpu",
                    batch: int | None = None) -> list[Any]:
    """get_inputs() after ``seed_all(seed)``, with dim 0 of every tensor cut to
    ``batch`` (the capture's ``batch`` rule), moved to ``device``.

    On a GPU the factory calls of get_inputs() draw there (``torch.device`` as
    the default device): the CPU generator is serial, and a level-1 problem's
    4 GiB of inputs took ~6 s per seed that way, 30 s of every candidate's
    check. The values differ from a CPU draw of the same seed, not their
    distribution; a get_inputs() that fails so is drawn on the CPU."""
    dev = torch.device(device)
    if dev.type == "cuda":
        try:
            with torch.device(dev):
                inputs = _draw(problem, seed, batch)
            return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in inputs]
        except Exception:
            pass  # a get_inputs() that mixes devices or needs the CPU: drawn there
    inputs = _draw(problem, seed, batch)
    return [x.to(dev) if isinstance(x, torch.Tensor) else x for x in inputs]


def _draw(problem: loader.Problem, seed: int, batch: int | None) -> list[Any]:
    inputs: list[Any] | None = None
    if batch is not None:
        expected = _expected_shapes(problem, batch)
        seed_all(seed)
        try:
            with _ShrinkFactories(batch):
                inputs = problem.call_list("get_inputs")
        except Exception:
            inputs = None
        if inputs is not None and [
            [int(s) for s in x.shape] if isinstance(x, torch.Tensor) else None for x in inputs
        ] != expected:
            inputs = None  # get_inputs derives shapes some other way: cut afterwards
    if inputs is None:
        seed_all(seed)
        inputs = problem.call_list("get_inputs")
        if batch is not None:
            inputs = [x.narrow(0, 0, batch).clone()
                      if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] > batch
                      else x for x in inputs]
    return inputs


# make_inputs is asked for the same (file, seed) by every candidate a worker checks, and
# get_inputs() draws on the CPU (torch's CPU generator is serial: seconds for problem
# 10's 2 GB input, most of a 30 s verification on an H100) and copies to the device.
# The worker keeps what was drawn, with every generator's state right after drawing it,
# and hands out copies: a hit costs a device-side copy and leaves the generators as a
# fresh draw would, so nothing that runs after can tell. Bounded by count and bytes.
_INPUTS: OrderedDict[tuple[Any, ...], tuple[list[Any], tuple[Any, ...]]] = OrderedDict()
_INPUTS_KEPT = 8


def _inputs_budget(device: torch.device) -> int:
    """Bytes of drawn inputs a worker may keep: a quarter of a GPU's memory while at
    least half of it stays free (candidates and references need it more), or 2 GiB of
    host memory."""
    if device.type == "cuda":
        free, total = torch.cuda.mem_get_info(device)
        kept = sum(_nbytes(v) for v, _ in _INPUTS.values())
        return max(0, min(total // 4, kept + free - total // 2))
    return 2 << 30


def drop_inputs() -> int:
    """Forgets every kept input (a job ran out of memory); how many were kept."""
    kept = len(_INPUTS)
    _INPUTS.clear()
    return kept


memory.register("drawn inputs", drop_inputs)


def _rng_state() -> tuple[Any, ...]:
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_initialized() else None
    try:
        import numpy as np

        npstate: Any = np.random.get_state()
    except ImportError:
        npstate = None
    return torch.get_rng_state(), cuda, random.getstate(), npstate


def _set_rng_state(state: tuple[Any, ...]) -> None:
    cpu, cuda, py, npstate = state
    torch.set_rng_state(cpu)
    if cuda is not None:
        torch.cuda.set_rng_state_all(cuda)
    random.setstate(py)
    if npstate is not None:
        import numpy as np

        np.random.set_state(npstate)


def _copies(values: Sequence[Any]) -> list[Any]:
    """Fresh copies; a tensor given twice stays one tensor."""
    memo: dict[int, torch.Tensor] = {}
    out = []
    for x in values:
        if isinstance(x, torch.Tensor):
            x = memo.setdefault(id(x), x.clone())
        out.append(x)
    return out


def _nbytes(values: Sequence[Any]) -> int:
    return sum(x.numel() * x.element_size() for x in values if isinstance(x, torch.Tensor))


def make_inputs(path: str, seed: int = 0, device: str | torch.device = "cpu",
                batch: int | None = None) -> list[Any]:
    """The problem's inputs for one trial (see generate_inputs), drawn once per worker."""
    dev = torch.device(device)
    st = os.stat(path)
    key = (os.path.abspath(path), st.st_mtime_ns, st.st_size, seed, str(dev), batch)
    hit = _INPUTS.get(key)
    if hit is not None:
        _INPUTS.move_to_end(key)
        values, state = hit
        _set_rng_state(state)
        return _copies(values)
    values = generate_inputs(load_problem(path), seed, dev, batch)
    state = _rng_state()
    size = _nbytes(values)
    budget = _inputs_budget(dev)
    if size <= budget:
        while _INPUTS and (len(_INPUTS) >= _INPUTS_KEPT or
                           size + sum(_nbytes(v) for v, _ in _INPUTS.values()) > budget):
            _INPUTS.popitem(last=False)
        _INPUTS[key] = (values, state)
        return _copies(values)
    return values


# --- graph execution ---------------------------------------------------------------


class ReplayError(Exception):
    """A node or value that cannot be replayed (opaque argument, const value,
    a value missing from env)."""


def lookup_attr(model: torch.nn.Module, name: str) -> torch.Tensor:
    """A parameter, buffer or tensor attribute by its dotted name."""
    obj: Any = model
    for part in name.split("."):
        obj = getattr(obj, part)
    if not isinstance(obj, torch.Tensor):
        raise ReplayError(f"{name} is not a tensor on the model")
    return obj


def _model_value(graph: Graph, vid: int, model: torch.nn.Module | None) -> torch.Tensor:
    value = graph["values"][vid]
    kind = value["kind"]
    if kind in ("param", "buffer", "attr"):
        if model is None:
            raise ReplayError(f"value {vid} ({kind} {value['name']}) needs the model")
        return lookup_attr(model, value["name"])
    if kind == "const":
        raise ReplayError(f"value {vid} is a tensor made outside forward that is not a "
                          "parameter, buffer or attribute: not replayable")
    if kind == "input":
        raise ReplayError(f"value {vid} (forward input {value['index']}) was not given")
    raise ReplayError(f"value {vid} (made by node {value.get('producer')}) is not available: "
                      "its producer is not among the nodes run")


def _env_getter(graph: Graph, env: Env, model: torch.nn.Module | None
                ) -> Callable[[int], torch.Tensor]:
    def get(vid: int) -> torch.Tensor:
        t = env.get(vid)
        if t is None:
            t = _model_value(graph, vid, model)
            env[vid] = t
        return t

    return get


def _device_of(env: Mapping[int, torch.Tensor], model: torch.nn.Module | None) -> torch.device:
    for t in env.values():
        return t.device
    if model is not None:
        for t in model.parameters():
            return t.device
        for t in model.buffers():
            return t.device
    return torch.device("cpu")


def decode_args(node: Mapping[str, Any], env: Mapping[int, torch.Tensor] | Callable[[int], Any],
                device: str | torch.device | None = None) -> tuple[list[Any], dict[str, Any]]:
    """(args, kwargs) of a recorded node with tensors taken from ``env`` (a
    mapping or a function of the value id). Device constants become
    ``device`` when given. Raises NotReplayable for opaque arguments."""
    get = env if callable(env) else env.__getitem__
    enc_args, enc_kwargs = batchsize.resolve(node, lambda vid: get(vid).shape)
    args = [decode(a, get, device) for a in enc_args]
    kwargs = {k: decode(v, get, device) for k, v in enc_kwargs.items()}
    return args, kwargs


def _bind(enc: JSON, result: Any, env: Env, bound: list[int]) -> None:
    if isinstance(enc, dict) and len(enc) == 1:
        (tag, body), = enc.items()
        if tag == "t":
            if not isinstance(result, torch.Tensor):
                raise ReplayError(
                    f"expected a tensor for value {body}, got {type(result).__name__}")
            env[body] = result
            bound.append(body)
        elif tag in ("tuple", "list"):
            if not isinstance(result, list | tuple) or len(result) != len(body):
                raise ReplayError("result structure differs from the capture")
            for e, r in zip(body, result, strict=True):
                _bind(e, r, env, bound)


# The program's layout plan (engine/ir/mk_layout.h): value id -> "channels_last" or
# "contiguous", applied to a value right after it is produced (a no-op when it already
# has that layout), so a replay computes what the composed program computes.
Layouts = Mapping[int, str]
LAYOUTS = ("channels_last", "contiguous")


def apply_layout(x: Any, how: str | None) -> Any:
    """x converted as the plan says (channels_last / channels_last_3d by rank)."""
    if how is None or not isinstance(x, torch.Tensor):
        return x
    if how == "contiguous":
        return x.contiguous()
    fmt = {4: torch.channels_last, 5: torch.channels_last_3d}.get(x.dim())
    return x if fmt is None else x.contiguous(memory_format=fmt)


def _apply_layouts(vids: Sequence[int], env: Env, layouts: Layouts | None) -> None:
    if not layouts:
        return
    for v in vids:
        how = layouts.get(v)
        if how is not None and v in env:
            env[v] = apply_layout(env[v], how)


def run_node(graph: Graph, node: Mapping[str, Any], env: Env, model: torch.nn.Module | None,
             device: str | torch.device | None = None) -> Any:
    """Runs one recorded node; writes its outputs (and the fresh ids of the
    tensors it mutated) into env. Returns the call's result."""
    get = _env_getter(graph, env, model)
    try:
        fn = resolve_op(node["op"])
        args, kwargs = decode_args(node, get, device)
    except NotReplayable as exc:
        raise ReplayError(f"node {node['id']} ({node['op']}): {exc}") from None
    result = fn(*args, **kwargs)
    bound: list[int] = []
    _bind(node["out"], result, env, bound)
    unbound = [v for v in node["outputs"] if v not in bound]
    if unbound:
        returned = [env[b] for b in bound]
        not_returned = [m for m in node["mutates"] if not any(get(m) is r for r in returned)]
        if len(not_returned) != len(unbound):
            raise ReplayError(f"node {node['id']} ({node['op']}): outputs and mutates disagree")
        for m, v in zip(not_returned, unbound, strict=True):
            env[v] = get(m)
    return result


def run_nodes(graph: Graph, node_ids: Sequence[int], env: Env,
              model: torch.nn.Module | None = None,
              device: str | torch.device | None = None,
              layouts: Layouts | None = None) -> Env:
    """Runs the given nodes in order (ids into graph["nodes"]). Parameters,
    buffers and attributes missing from env are looked up on ``model``.
    ``device`` (default: where the env's tensors are) replaces recorded
    device constants; ``layouts`` is the program's layout plan. Returns env."""
    if device is None:
        device = _device_of(env, model)
    nodes = graph["nodes"]
    for nid in node_ids:
        run_node(graph, nodes[nid], env, model, device)
        _apply_layouts(nodes[nid]["outputs"], env, layouts)
    return env


def input_env(graph: Graph, inputs: Sequence[Any]) -> Env:
    """env with the forward inputs bound to their value ids."""
    env: Env = {}
    for value in graph["values"]:
        if value["kind"] == "input":
            x = inputs[value["index"]]
            if not isinstance(x, torch.Tensor):
                raise ReplayError(f"forward input {value['index']} is not a tensor")
            env[value["id"]] = x
    return env


def run_graph(graph: Graph, model: torch.nn.Module, inputs: Sequence[Any],
              device: str | torch.device | None = None,
              layouts: Layouts | None = None) -> tuple[Env, Any]:
    """Replays the whole forward: (env, output with forward's structure); with
    ``layouts``, the program as the layout plan lays it out."""
    env = input_env(graph, inputs)
    _apply_layouts(list(env), env, layouts)
    run_nodes(graph, range(len(graph["nodes"])), env, model, device, layouts)
    get = _env_getter(graph, env, model)
    return env, decode(graph["outputs"], get, device)


def subkernel_fn(graph: Graph, node_ids: Sequence[int], input_vids: Sequence[int],
                 output_vids: Sequence[int], model: torch.nn.Module | None = None,
                 device: str | torch.device | None = None,
                 layouts: Layouts | None = None) -> Callable[..., Any]:
    """A function running a subgraph: called with the tensors of
    ``input_vids`` in order, it returns the tensor of the single output or a
    tuple in ``output_vids`` order (the candidate convention of
    docs/candidates.md). Values read by the nodes that are not inputs must be
    parameters, buffers or attributes of ``model``; they are looked up when
    the function is made. ``layouts`` (the program's layout plan) converts the
    values the nodes produce, as the composed program does. Raises
    ReplayError now if the subgraph cannot run."""
    nodes = graph["nodes"]
    steps = [nodes[i] for i in node_ids]
    inputs = list(input_vids)
    produced = set(inputs)
    fixed: Env = {}
    for node in steps:
        try:
            resolve_op(node["op"])
        except NotReplayable as exc:
            raise ReplayError(f"node {node['id']}: {exc}") from None
        for vid in node["inputs"] + node["mutates"]:
            if vid not in produced and vid not in fixed:
                fixed[vid] = _model_value(graph, vid, model)
        produced.update(node["outputs"])
    missing = [v for v in output_vids if v not in produced and v not in fixed]
    if missing:
        raise ReplayError(f"outputs {missing} are not produced by nodes {list(node_ids)}")
    outputs = list(output_vids)
    plans: dict[str, list[_NodePlan]] = {}

    def run(*tensors: torch.Tensor) -> Any:
        if len(tensors) != len(inputs):
            raise TypeError(f"subkernel takes {len(inputs)} inputs, got {len(tensors)}")
        env: Env = dict(fixed)
        env.update(zip(inputs, tensors, strict=True))
        dev = device if device is not None else (
            tensors[0].device if tensors else _device_of(fixed, model))
        plan = plans.get(str(dev))
        if plan is None:  # decode every argument once per device, not once per call
            plan = plans[str(dev)] = [_NodePlan(graph, node, dev) for node in steps]
        for node, step in zip(steps, plan, strict=True):
            if step.fast:
                env[step.out] = step.fn(*_fill(step.args, env), **_fill(step.kwargs, env))
            else:
                run_node(graph, node, env, model, dev)
            _apply_layouts(node["outputs"], env, layouts)
        if len(outputs) == 1:
            return env[outputs[0]]
        return tuple(env[v] for v in outputs)

    return run


class _Slot:
    """Where a tensor of the environment goes in a pre-decoded argument list."""

    __slots__ = ("vid",)

    def __init__(self, vid: int) -> None:
        self.vid = vid


def _fill(x: Any, env: Env) -> Any:
    if isinstance(x, _Slot):
        return env[x.vid]
    if isinstance(x, list):
        return [_fill(e, env) for e in x]
    if isinstance(x, tuple):
        return tuple(_fill(e, env) for e in x)
    if isinstance(x, dict):
        return {k: _fill(v, env) for k, v in x.items()}
    return x


class _NodePlan:
    """A node's callable and arguments decoded once. Nodes that return one
    tensor and mutate nothing run through this fast path; the others go
    through run_node, which binds structures and mutations."""

    def __init__(self, graph: Graph, node: Mapping[str, Any], device: Any) -> None:
        out = node["out"]
        self.fast = (not node["mutates"] and isinstance(out, dict) and len(out) == 1
                     and "t" in out and len(node["outputs"]) == 1
                     and not node.get("batch_ints"))  # sizes read from the tensors per call
        self.out = out["t"] if self.fast else -1
        self.fn = resolve_op(node["op"])
        self.args, self.kwargs = decode_args(node, _Slot, device) if self.fast else ([], {})


def source_sha256(path: str) -> str:
    with open(path, "rb") as fh:
        return hashlib.sha256(fh.read()).hexdigest()


def same_file(graph: Graph, path: str) -> bool:
    """Whether ``graph`` was captured from the current content of ``path``."""
    return os.path.exists(path) and graph.get("source_sha256") == source_sha256(path)
