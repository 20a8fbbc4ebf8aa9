"""The ``capture`` method: the exact operator graph of a module's forward.

The model and its inputs are built under FakeTensorMode (shapes and dtypes,
no data, no compute) and ``forward`` runs under a TorchFunctionMode that
records every outermost torch call: the function as called (``F.conv2d``,
``Tensor.__add__``), its arguments in the protocol encoding, the module it ran
in and the exact span of the user's source that made it. Calls made inside a
recorded call are not recorded, so the graph has the granularity the user
wrote. Schema and rules: docs/protocol.md; design notes: docs/capture.md.
"""

from __future__ import annotations

import ast
import contextlib
import copy
import inspect
import logging
import sys
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import CodeType, FrameType
from typing import Any, NoReturn

import torch
import torch.nn.functional as F
from torch._subclasses import fake_tensor
from torch.overrides import TorchFunctionMode

from mkworker import batchsize, loader
from mkworker.encode import NotReplayable, dtype_name, encode, resolve_op, tensor_ids
from mkworker.protocol import Params, Progress, Result, WorkerError, param, register

SCHEMA_VERSION = 1

# --- op names ----------------------------------------------------------------------

# Namespaces searched for the name of a called function, most preferred first.
_NAMESPACES: tuple[tuple[str, object], ...] = (
    ("torch.nn.functional", F),
    ("torch", torch),
    ("torch.Tensor", torch.Tensor),
    ("torch.special", torch.special),
    ("torch.linalg", torch.linalg),
    ("torch.fft", torch.fft),
    ("torch.nn.init", torch.nn.init),
)


class OpNames:
    """Reverse map from a function object to a dotted name that resolves to
    it from ``torch``. Built once; unknown functions are named from
    ``__module__`` + ``__qualname__`` after checking the name resolves."""

    def __init__(self) -> None:
        self._names: dict[int, str] = {}
        self._keep: list[object] = []  # ids stay valid while the objects live
        self._built = False

    def _add(self, obj: object, name: str) -> None:
        if id(obj) not in self._names:
            self._names[id(obj)] = name
            self._keep.append(obj)

    def _build(self) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for prefix, ns in _NAMESPACES:
                names = sorted(n for n in dir(ns) if not n.startswith("_"))
                if ns is torch.Tensor:  # operators: __add__, __getitem__, ...
                    names += sorted(n for n in dir(ns) if n.startswith("__") and n.endswith("__"))
                for n in names:
                    try:
                        if ns is torch.Tensor:
                            obj = inspect.getattr_static(ns, n)
                        else:
                            obj = getattr(ns, n)
                    except AttributeError:
                        continue
                    if isinstance(obj, staticmethod | classmethod):
                        obj = getattr(ns, n)
                    self._add(obj, f"{prefix}.{n}")
                    if ns is torch.Tensor:
                        self._add(getattr(ns, n, obj), f"{prefix}.{n}")
        self._built = True

    def name(self, func: Callable[..., Any]) -> str:
        if not self._built:
            self._build()
        found = self._names.get(id(func))
        if found is not None:
            return found
        found = self._derive(func)
        self._add(func, found)
        return found

    def _derive(self, func: Callable[..., Any]) -> str:
        owner = getattr(func, "__self__", None)
        if getattr(func, "__name__", None) in ("__get__", "__set__") and owner is not None:
            # a Tensor property getter (x.T, x.mT, x.data): bound descriptor method
            prop = self._names.get(id(owner))
            if prop is not None:
                return f"{prop}.{func.__name__}"
            descr_name = getattr(owner, "__name__", None)
            if descr_name and _resolves(f"torch.Tensor.{descr_name}", owner):
                return f"torch.Tensor.{descr_name}.{func.__name__}"
        module = getattr(func, "__module__", None) or ""
        qualname = getattr(func, "__qualname__", None) or getattr(func, "__name__", "")
        short = getattr(func, "__name__", "")
        candidates = [f"{module}.{qualname}"] if module else []
        candidates += [f"{prefix}.{short}" for prefix, _ in _NAMESPACES if short]
        for cand in candidates:
            if _resolves(cand, func):
                return cand
        # Not reachable from torch: keep the defining module's name (replay
        # imports it); docs/capture.md lists this limit.
        return f"{module}.{qualname}" if module else f"unknown.{short or 'op'}"


def _resolves(name: str, obj: object) -> bool:
    try:
        found = resolve_op(name)
    except Exception:
        return False
    return found is obj or found == obj


OP_NAMES = OpNames()

# Calls that read tensor data into Python: control flow on them cannot be
# captured (and under FakeTensorMode there is no data to read).
_DATA_READERS = frozenset({
    "torch.Tensor.item", "torch.Tensor.tolist", "torch.Tensor.__bool__", "torch.Tensor.__int__",
    "torch.Tensor.__float__", "torch.Tensor.__index__", "torch.Tensor.__complex__",
    "torch.Tensor.numpy", "torch.Tensor.__array__", "torch.Tensor.equal", "torch.equal",
    "torch.Tensor.allclose", "torch.allclose", "torch.Tensor.is_nonzero", "torch.is_nonzero",
    "torch.Tensor.__contains__",
})

# batch_norm updates its running statistics without bumping their version
# counters, so the generic mutation check misses them: (training, mean, var)
# argument positions.
_BATCH_NORM_ARGS: dict[str, tuple[tuple[int, str], tuple[int, str], tuple[int, str]]] = {
    "torch.nn.functional.batch_norm": ((5, "training"), (1, "running_mean"), (2, "running_var")),
    "torch.batch_norm": ((5, "training"), (3, "running_mean"), (4, "running_var")),
    "torch.native_batch_norm": ((5, "training"), (3, "running_mean"), (4, "running_var")),
}


# Composite torch functions recorded as the calls they make, not as one node:
# F.multi_head_attention_forward (nn.MultiheadAttention, nn.TransformerEncoderLayer)
# is a Python function of linears, views, bmm / scaled_dot_product_attention and
# softmax; as one opaque node no kernel could touch it, and the attention weights it
# averages for callers that drop them are computed whatever happens. Its own
# torch-function check (the module global `has_torch_function`) is answered False while
# it runs inside the recorder, so its body runs and its calls are recorded; the
# leaf calls check for modes through other functions and are seen as usual.
_INLINED = frozenset({"torch.nn.functional.multi_head_attention_forward"})


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], pos: int, name: str) -> Any:
    if name in kwargs:
        return kwargs[name]
    return args[pos] if pos < len(args) else None


def _flat_tensors(obj: object, out: list[torch.Tensor]) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        if not any(t is obj for t in out):
            out.append(obj)
    elif isinstance(obj, list | tuple):
        for v in obj:
            _flat_tensors(v, out)
    elif isinstance(obj, dict):
        for v in obj.values():
            _flat_tensors(v, out)
    return out


# --- shape rules -------------------------------------------------------------------
# Ops whose fake/meta execution is slow (the recurrent ops unroll into one
# small op per time step: minutes for a long sequence): their outputs are
# made directly from the documented shapes. Only used on fake/meta tensors.


def _rnn_rule(n_states: int) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    def rule(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if kwargs or len(args) != 9 or not isinstance(args[0], torch.Tensor):
            return None  # packed sequences and keyword calls: run the op itself
        x, hx, _params, _bias, num_layers, _drop, _train, bidirectional, batch_first = args
        states = list(hx) if n_states > 1 else [hx]
        if len(states) != n_states or not all(isinstance(h, torch.Tensor) for h in states):
            return None
        del num_layers, batch_first  # (seq, batch) or (batch, seq): both keep x's leading dims
        dirs = 2 if bidirectional else 1
        out_shape = [*x.shape[:-1], dirs * states[0].shape[-1]]
        out = torch.empty(out_shape, dtype=x.dtype, device=x.device)
        return (out, *(torch.empty(h.shape, dtype=h.dtype, device=h.device) for h in states))

    return rule


_SHAPE_RULES: dict[str, Callable[[tuple[Any, ...], dict[str, Any]], Any]] = {
    "torch.lstm": _rnn_rule(2),
    "torch.gru": _rnn_rule(1),
    "torch.rnn_tanh": _rnn_rule(1),
    "torch.rnn_relu": _rnn_rule(1),
}


# --- source positions ------------------------------------------------------------


@dataclass
class Statements:
    """The statements of ``forward`` as line ranges: simple statements, and
    the header of compound ones (``for x in torch.split(...)``)."""

    ranges: list[tuple[int, int]] = field(default_factory=list)
    _cache: dict[int, tuple[int, int] | None] = field(default_factory=dict)

    @classmethod
    def of(cls, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> Statements:
        st = cls()
        st._collect(fn.body)
        return st

    def _collect(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                self.ranges.append((stmt.lineno, stmt.lineno))
                continue
            blocks = [getattr(stmt, name, None) for name in ("body", "orelse", "finalbody")]
            handlers = getattr(stmt, "handlers", None) or []
            cases = getattr(stmt, "cases", None) or []
            if not any(isinstance(b, list) and b for b in blocks) and not handlers and not cases:
                self.ranges.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
                continue
            first_body = stmt.body[0].lineno if getattr(stmt, "body", None) else stmt.lineno + 1
            self.ranges.append((stmt.lineno, max(stmt.lineno, first_body - 1)))
            for b in blocks:
                if isinstance(b, list):
                    self._collect(b)
            for h in handlers:
                self._collect(h.body)
            for c in cases:
                self._collect(c.body)

    def find(self, line: int) -> tuple[int, int] | None:
        if line in self._cache:
            return self._cache[line]
        best: tuple[int, int] | None = None
        for lo, hi in self.ranges:
            if lo <= line <= hi and (best is None or hi - lo < best[1] - best[0]):
                best = (lo, hi)
        self._cache[line] = best
        return best


def find_function(tree: ast.Module, code: CodeType,
                  class_name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The def whose code object is ``code`` (matched by first line)."""
    best = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        firsts = {node.lineno} | {d.lineno for d in node.decorator_list}
        if code.co_firstlineno in firsts and node.name == code.co_name:
            best = node
    return best


def _find_class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


_POSITIONS: dict[CodeType, list[tuple[int | None, int | None, int | None, int | None]]] = {}


def _span(frame: FrameType) -> dict[str, int]:
    code = frame.f_code
    positions = _POSITIONS.get(code)
    if positions is None:
        # co_positions is Python 3.11+; older interpreters give lines only
        get = getattr(code, "co_positions", None)
        positions = list(get()) if get is not None else []
        _POSITIONS[code] = positions
    index = frame.f_lasti // 2
    line, end_line, col, end_col = positions[index] if 0 <= index < len(positions) else (
        None, None, None, None)
    if line is None:
        line = frame.f_lineno
    if col is None or end_col is None or end_line is None:
        return {"line": line, "col": 0, "end_line": line, "end_col": 0}
    return {"line": line, "col": col, "end_line": end_line, "end_col": end_col}


def _user_frames(path: str, forward_code: CodeType | None,
                 start: FrameType | None) -> tuple[FrameType | None, FrameType | None]:
    """(innermost frame in the user's file, outermost frame of forward)."""
    inner = outer = None
    frame = start
    while frame is not None:
        code = frame.f_code
        if inner is None and code.co_filename == path:
            inner = frame
        if code is forward_code:
            outer = frame
        frame = frame.f_back
    return inner, outer


# --- the recorder -----------------------------------------------------------------


class DataDependent(Exception):
    """forward read tensor data into Python (if/while/int() on a tensor)."""

    def __init__(self, message: str, line: int | None) -> None:
        super().__init__(message)
        self.line = line


@contextlib.contextmanager
def _own_torch_function_check_off(func: Callable[..., Any]) -> Iterator[None]:
    """While composite `func` runs, its module's `has_torch_function` (the check
    that would hand the call back to the recorder as a whole) answers False."""
    module = sys.modules.get(getattr(func, "__module__", "") or "")
    saved = getattr(module, "has_torch_function", None) if module is not None else None
    if saved is None:
        raise RuntimeError("no torch-function check to turn off")
    module.has_torch_function = lambda *_: False  # type: ignore[union-attr]
    try:
        yield
    finally:
        module.has_torch_function = saved  # type: ignore[union-attr]


def _no_tensor(t: torch.Tensor) -> int:
    raise NotReplayable("a tensor inside a forward argument")


def scalar_input(index: int, value: Any) -> dict[str, Any]:
    """A forward argument that is not a tensor, as docs/protocol.md's
    ``scalar_inputs`` entry: its encoded value, or ``opaque`` when it cannot be
    written back as a Python literal (an object, a list holding tensors)."""
    try:
        enc = encode(value, _no_tensor)
    except NotReplayable:
        enc = None
    if (enc is None and value is not None) or _has_opaque(enc):
        return {"index": index, "opaque": True, "type": type(value).__name__}
    return {"index": index, "value": enc}


def _has_opaque(enc: Any) -> bool:
    """Whether an encoded value holds a part no literal can stand for."""
    if isinstance(enc, dict):
        return "opaque" in enc or any(_has_opaque(v) for v in enc.values())
    if isinstance(enc, list):
        return any(_has_opaque(v) for v in enc)
    return False


class Recorder(TorchFunctionMode):
    """Records outermost torch calls into nodes and values (docs/protocol.md).

    While a recorded call runs, the mode is off (TorchFunctionMode pops itself
    for the duration of ``__torch_function__``), so only calls made by user
    code or by nn.Module code outside torch functions are seen."""

    def __init__(self, path: str, forward_code: CodeType | None,
                 statements: Statements | None, shape_only: bool = False) -> None:
        super().__init__()
        self.shape_only = shape_only  # fake/meta tensors: shape rules may stand in for ops
        self.path = path
        self.forward_code = forward_code
        self.statements = statements
        self.values: list[dict[str, Any]] = []
        self.nodes: list[dict[str, Any]] = []
        self.stmt_nodes: dict[tuple[int, int], list[int]] = {}
        self._vid: dict[int, int] = {}
        self._keep: list[torch.Tensor] = []
        self._module_names: dict[int, str] = {}
        self._module_stack: list[torch.nn.Module] = []
        self.data_dependent: DataDependent | None = None
        self._inlining = False
        # forward arguments that are not tensors (`s: float`): the graph holds
        # their captured values as constants, so ModelNew guards on them
        self.scalar_inputs: list[dict[str, Any]] = []
        self.outputs: Any = None  # forward's return value, encoded once it returned

    # values

    def add_value(self, t: torch.Tensor, kind: str, **extra: Any) -> int:
        vid = len(self.values)
        value: dict[str, Any] = {"id": vid, "kind": kind}
        value.update(extra)
        value["shape"] = [int(s) for s in t.shape]
        value["dtype"] = dtype_name(t.dtype)
        value["contiguous"] = bool(t.is_contiguous())
        self.values.append(value)
        self._vid[id(t)] = vid
        self._keep.append(t)
        return vid

    def known(self, t: torch.Tensor) -> bool:
        return id(t) in self._vid

    def read_id(self, t: torch.Tensor) -> int:
        """Value id of a tensor being read; unknown tensors become consts."""
        vid = self._vid.get(id(t))
        if vid is None:
            vid = self.add_value(t, "const")
        return vid

    def register_model(self, model: torch.nn.Module, inputs: list[Any]) -> None:
        for i, x in enumerate(inputs):
            if isinstance(x, torch.Tensor):
                if not self.known(x):
                    self.add_value(x, "input", index=i)
            else:
                self.scalar_inputs.append(scalar_input(i, x))
        for name, p in model.named_parameters():
            if not self.known(p):
                self.add_value(p, "param", name=name)
        for name, b in model.named_buffers():
            if not self.known(b):
                self.add_value(b, "buffer", name=name)
        for prefix, m in model.named_modules():
            self._module_names[id(m)] = prefix
            for attr, v in vars(m).items():
                if isinstance(v, torch.Tensor) and not self.known(v):
                    self.add_value(v, "attr", name=f"{prefix}.{attr}" if prefix else attr)

    # modules

    def pre_hook(self, module: torch.nn.Module, args: Any) -> None:
        self._module_stack.append(module)

    def post_hook(self, module: torch.nn.Module, args: Any, output: Any) -> None:
        if self._module_stack and self._module_stack[-1] is module:
            self._module_stack.pop()

    def _module(self) -> tuple[str | None, str | None]:
        if not self._module_stack:
            return None, None
        m = self._module_stack[-1]
        name = self._module_names.get(id(m))
        if name == "":  # the captured model itself
            return None, None
        return name, type(m).__name__

    # calls

    def __torch_function__(self, func: Callable[..., Any], types: Any, args: tuple[Any, ...] = (),
                           kwargs: dict[str, Any] | None = None) -> Any:
        kwargs = kwargs or {}
        op = OP_NAMES.name(func)
        if op in _DATA_READERS:
            self._data_dependent(op)
        if op in _INLINED and not self._inlining:
            done, result = self._inline(func, args, kwargs)
            if done:
                return result
        tensors = _flat_tensors(args, [])
        _flat_tensors(kwargs, tensors)
        versions = [t._version for t in tensors]
        rule = _SHAPE_RULES.get(op) if self.shape_only else None
        try:
            result = rule(args, kwargs) if rule is not None else None
            if result is None:
                result = func(*args, **kwargs)
        except fake_tensor.DataDependentOutputException:
            self._data_dependent(op)
        mutated = [t for t, v in zip(tensors, versions, strict=True) if t._version != v]
        bn = _BATCH_NORM_ARGS.get(op)
        if bn is not None and _arg(args, kwargs, *bn[0]):
            for pos, name in bn[1:]:
                t = _arg(args, kwargs, pos, name)
                if isinstance(t, torch.Tensor) and not any(t is m for m in mutated):
                    mutated.append(t)
        if not mutated and not _flat_tensors(result, []):
            return result  # sizes, ints, dtypes: constants for later calls
        self._record(op, args, kwargs, result, mutated)
        return result

    def _inline(self, func: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> tuple[bool, Any]:
        """Runs composite `func` with the recorder on, so the calls it makes are
        recorded (see _INLINED). (False, None) when its body fails in here: what it
        recorded is taken back and the caller records it as one node."""
        nodes, values, keep = len(self.nodes), len(self.values), len(self._keep)
        stmt_nodes = {k: list(v) for k, v in self.stmt_nodes.items()}
        self._inlining = True
        try:
            with _own_torch_function_check_off(func), self:
                return True, func(*args, **kwargs)
        except DataDependent:
            raise
        except Exception as e:
            logging.getLogger(__name__).debug("recording %s as one node: %s",
                                              getattr(func, "__name__", func), e)
            del self.nodes[nodes:]
            for t in self._keep[keep:]:
                self._vid.pop(id(t), None)
            del self._keep[keep:]
            del self.values[values:]
            self.stmt_nodes = stmt_nodes
            return False, None
        finally:
            self._inlining = False

    def _data_dependent(self, op: str) -> NoReturn:
        inner, _ = _user_frames(self.path, self.forward_code, sys._getframe(1))
        line = inner.f_lineno if inner is not None else None
        short = op.rsplit(".", 1)[-1]
        err = DataDependent(f"forward reads tensor data into Python ({short}) at line {line}: "
                            "control flow on tensor values cannot be captured; use torch.where "
                            "or masks instead", line)
        if self.data_dependent is None:
            self.data_dependent = err
        raise err

    def _record(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any,
                mutated: list[torch.Tensor]) -> None:
        nid = len(self.nodes)
        enc_args = [encode(a, self.read_id) for a in args]
        enc_kwargs = {k: encode(v, self.read_id) for k, v in kwargs.items()}
        inputs = tensor_ids(enc_args)
        tensor_ids(list(enc_kwargs.values()), inputs)
        mutates = [self.read_id(t) for t in mutated]
        fresh: dict[int, int] = {}  # id(tensor) -> output value id of this node

        def out_id(t: torch.Tensor) -> int:
            vid = fresh.get(id(t))
            if vid is None:
                vid = self.add_value(t, "node", producer=nid)
                fresh[id(t)] = vid
            return vid

        out = encode(result, out_id)
        outputs = tensor_ids(out)
        for t in mutated:  # mutated tensors not returned: fresh ids last, in mutates order
            if id(t) not in fresh:
                outputs.append(out_id(t))
        inner, outer = _user_frames(self.path, self.forward_code, sys._getframe(1))
        module, module_type = self._module()
        node: dict[str, Any] = {
            "id": nid, "op": op, "args": enc_args, "kwargs": enc_kwargs,
            "inputs": inputs, "outputs": outputs, "out": out, "mutates": mutates,
            "module": module, "module_type": module_type,
            "span": _span(inner) if inner is not None else None,
        }
        self.nodes.append(node)
        if outer is not None and self.statements is not None:
            line = _span(outer)["line"]
            rng = self.statements.find(line)
            if rng is not None:
                self.stmt_nodes.setdefault(rng, []).append(nid)

    @contextlib.contextmanager
    def hooks(self) -> Iterator[None]:
        pre = torch.nn.modules.module.register_module_forward_pre_hook(self.pre_hook)
        post = torch.nn.modules.module.register_module_forward_hook(self.post_hook,
                                                                     always_call=True)
        try:
            yield
        finally:
            pre.remove()
            post.remove()


# --- one attempt in one mode --------------------------------------------------------


@dataclass
class Target:
    """What to capture: a loaded problem, the class and its forward."""

    problem: loader.Problem
    cls: type
    forward_code: CodeType | None
    forward_span: dict[str, int] | None
    statements: Statements | None


def _target(problem: loader.Problem, class_name: str) -> Target:
    cls = problem.model_class(class_name)
    problem.function("get_inputs")
    problem.function("get_init_inputs")
    text = problem.source.decode("utf-8", errors="replace")
    tree = ast.parse(text, problem.path)
    forward = inspect.unwrap(getattr(cls, "forward", None))  # type: ignore[arg-type]
    code = getattr(forward, "__code__", None)
    if code is None or code.co_filename != problem.path:
        # forward inherited from a library class (nn.Sequential): no statements
        cdef = _find_class(tree, class_name)
        span = {"line": cdef.lineno, "end_line": cdef.end_lineno or cdef.lineno} if cdef else None
        return Target(problem, cls, None, span, None)
    fdef = find_function(tree, code, class_name)
    if fdef is None:
        return Target(problem, cls, code, None, None)
    return Target(problem, cls, code, {"line": fdef.lineno, "end_line": fdef.end_lineno or 0},
                  Statements.of(fdef))


def shrink(inputs: list[Any], batch: int | None) -> tuple[list[Any], int | None]:
    """Dim 0 of every input tensor cut to ``batch``; the batch actually
    applied (None when no tensor was larger)."""
    if batch is None:
        return inputs, None
    out: list[Any] = []
    applied = None
    for x in inputs:
        if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] > batch:
            x = x.narrow(0, 0, batch).clone()
            applied = batch
        out.append(x)
    return out, applied


def _build_model(target: Target) -> torch.nn.Module:
    problem = target.problem
    init_args = problem.call_list("get_init_inputs")
    with problem.user_code(f"{target.cls.__name__}(*get_init_inputs())"):
        model = target.cls(*init_args)
    if not isinstance(model, torch.nn.Module):
        raise WorkerError("python_error", f"{target.cls.__name__}() did not return a module")
    model.train()
    return model


def to_fake(model: torch.nn.Module, mode: fake_tensor.FakeTensorMode) -> None:
    """Replaces the model's parameters, buffers and tensor attributes by fake
    copies (ties kept). Assignment goes through setattr so modules that keep
    derived lists (nn.LSTM's flat weights) see the new tensors."""
    memo: dict[int, torch.Tensor] = {}

    def fake(t: torch.Tensor) -> torch.Tensor:
        got = memo.get(id(t))
        if got is None:
            got = mode.from_tensor(t)
            if isinstance(t, torch.nn.Parameter):
                got = torch.nn.Parameter(got, requires_grad=t.requires_grad)
            memo[id(t)] = got
        return got

    for m in list(model.modules()):
        for name, p in list(m._parameters.items()):
            if p is not None:
                setattr(m, name, fake(p))
        for name, b in list(m._buffers.items()):
            if b is not None:
                setattr(m, name, fake(b))
        for name, v in list(vars(m).items()):
            if isinstance(v, torch.Tensor) and not name.startswith("_"):
                setattr(m, name, fake(v))


def _attempt(target: Target, mode: str, batch: int | None,
             real_init: bool = False) -> dict[str, Any]:
    """Builds the model and inputs in ``mode`` and records forward.
    ``real_init``: the model is built with real tensors (its __init__ reads
    tensor data, e.g. ``linspace(...).item()``) and then made fake."""
    from mkworker import replay  # real mode makes inputs the way replays do

    problem = target.problem
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.no_grad())
        model = None
        if real_init or mode == "real":
            replay.seed_all(0)
            model = _build_model(target)
        if mode == "fake":
            fake_mode = fake_tensor.FakeTensorMode(allow_non_fake_inputs=True)
            stack.enter_context(fake_mode)
            if model is not None:
                to_fake(model, fake_mode)
        elif mode == "meta":
            stack.enter_context(torch.device("meta"))
            if model is not None:
                model = model.to("meta")
        if model is None:
            model = _build_model(target)
        if mode == "real":
            inputs = replay.generate_inputs(problem, seed=0, device="cpu", batch=batch)
            applied = batch if inputs_shrunk(inputs, problem, batch) else None
        else:
            inputs, applied = shrink(problem.call_list("get_inputs"), batch)
        rec = _record_forward(target, model, inputs, shape_only=mode != "real")
        if mode == "real":
            free = batchsize.unavailable("captured with real tensors (an output shape depends on "
                                         "data)")
        else:
            free = _probe_batches(target, model, inputs, rec)
    statements = [{"line": lo, "end_line": hi, "nodes": ids}
                  for (lo, hi), ids in sorted(rec.stmt_nodes.items())]
    return {"values": rec.values, "nodes": rec.nodes, "outputs": rec.outputs,
            "scalar_inputs": rec.scalar_inputs, "batch_free": free,
            "statements": statements, "batch": applied, "mode": mode,
            "init": "real" if real_init or mode == "real" else mode}


def _record_forward(target: Target, model: torch.nn.Module, inputs: list[Any],
                    shape_only: bool) -> Recorder:
    """Runs forward once under a new Recorder; its graph is the recorder's
    values, nodes and (encoded) outputs."""
    rec = Recorder(target.problem.path, target.forward_code, target.statements,
                   shape_only=shape_only)
    rec.register_model(model, inputs)
    with loader.on_path(target.problem.path), rec.hooks(), rec:
        try:
            out = model(*inputs)
        except DataDependent:
            pass
        except Exception as exc:
            with contextlib.suppress(AttributeError):
                exc._mk_phase = "forward"  # type: ignore[attr-defined]
            raise
    if rec.data_dependent is not None:
        raise rec.data_dependent
    rec.outputs = encode(out, rec.read_id)
    return rec


def _probe_batches(target: Target, model: torch.nn.Module, inputs: list[Any],
                   main: Recorder) -> dict[str, Any]:
    """Runs forward again at two larger batches (fake or meta tensors: shapes
    only) and marks the sizes that follow the batch (mkworker.batchsize)."""
    graphs = []
    for grow in (1, 2):
        try:
            rec = _record_forward(target, model, batchsize.probe_inputs(inputs, grow),
                                  shape_only=True)
        except Exception as exc:  # the forward itself says what fixes the batch
            text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            return batchsize.unavailable(f"the forward fails at another batch: {text[:160]}")
        graphs.append({"values": rec.values, "nodes": rec.nodes, "outputs": rec.outputs})
    main_graph = {"values": main.values, "nodes": main.nodes, "outputs": main.outputs}
    return batchsize.annotate(main_graph, graphs)


def inputs_shrunk(inputs: list[Any], problem: loader.Problem, batch: int | None) -> bool:
    """Whether real inputs made at ``batch`` differ from full-size ones (asks
    get_inputs for shapes under FakeTensorMode: free)."""
    if batch is None:
        return False
    with fake_tensor.FakeTensorMode(allow_non_fake_inputs=True):
        full = problem.call_list("get_inputs")
    return any(isinstance(f, torch.Tensor) and f.dim() >= 1 and f.shape[0] > batch
               for f in full)


_LIMITATION_TYPES = tuple(t for t in (
    getattr(fake_tensor, "UnsupportedOperatorException", None),
    getattr(fake_tensor, "UnsupportedFakeTensorException", None),
    getattr(fake_tensor, "DynamicOutputShapeException", None),
    getattr(fake_tensor, "DataDependentOutputException", None),
    NotImplementedError,
) if isinstance(t, type))


def _is_limitation(exc: BaseException) -> bool:
    """Whether a failure comes from fake/meta tensors rather than user code."""
    cause = exc.__cause__ or exc
    if isinstance(cause, _LIMITATION_TYPES):
        return True
    text = str(cause).lower()
    return "meta" in text or "fake" in text or "data-dependent" in text


def _modes(batch: int | None) -> list[tuple[str, int | None, bool]]:
    """Attempts in order: (mode, batch, real_init)."""
    plan: list[tuple[str, int | None, bool]] = []
    for mode, real_init in (("fake", False), ("fake", True), ("meta", False)):
        if batch is not None:
            plan.append((mode, batch, real_init))
        plan.append((mode, None, real_init))
    plan.append(("real", batch if batch is not None else REAL_BATCH, True))
    return plan


# Batch used when no fake/meta capture works and real tensors must run.
REAL_BATCH = 2


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """FakeTensorMode logs a traceback for every op whose meta kernel fails;
    failures are expected here (an attempt at a reduced batch) and reported
    by the capture itself."""
    log = logging.getLogger("torch._subclasses.fake_tensor")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def capture_file(path: str, class_name: str = "Model", batch: int | None = None,
                 progress: Progress | None = None) -> dict[str, Any]:
    """Captures one module file (no cache). Raises WorkerError."""
    with _quiet_fake_tensor_log():
        return _capture_file(path, class_name, batch, progress)


def _capture_file(path: str, class_name: str, batch: int | None,
                  progress: Progress | None) -> dict[str, Any]:
    t0 = time.perf_counter()
    source, sha = loader.read_source(path)
    problem = loader.load(path, source)
    try:
        target = _target(problem, class_name)
        first: BaseException | None = None
        last: BaseException | None = None
        got: dict[str, Any] | None = None
        built_fake = False  # whether a model was ever built on fake tensors
        for mode, b, real_init in _modes(batch):
            if real_init and mode == "fake" and built_fake:
                continue  # __init__ worked on fake tensors: forward is what failed
            if progress is not None:
                progress(f"capturing in {mode} mode" + (f" at batch {b}" if b else ""), 0.1)
            try:
                got = _attempt(target, mode, b, real_init)
                break
            except DataDependent as exc:
                raise WorkerError("data_dependent", str(exc), line=exc.line, file=path) from None
            except WorkerError as exc:
                if exc.kind in ("missing", "bad_request"):
                    raise
                first, last = first or exc, exc
            except Exception as exc:
                first, last = first or exc, exc
            if mode == "fake" and getattr(last, "_mk_phase", None) == "forward":
                built_fake = True
        if got is None:
            assert first is not None and last is not None
            raise _report(first if not _is_limitation(first) else last, path)
    finally:
        loader.unload(problem)
    forward = target.forward_span
    ms = (time.perf_counter() - t0) * 1000.0
    return {
        "schema": SCHEMA_VERSION, "file": path, "class": class_name, "source_sha256": sha,
        "batch": got["batch"], "mode": got["mode"], "init": got["init"],
        "values": got["values"], "nodes": got["nodes"], "outputs": got["outputs"],
        "scalar_inputs": got["scalar_inputs"], "batch_free": got["batch_free"],
        "forward": forward, "statements": got["statements"],
        "stats": {"capture_ms": round(ms, 3), "nodes": len(got["nodes"]),
                  "values": len(got["values"]), "cached": False},
    }


def _report(exc: BaseException, path: str) -> WorkerError:
    if isinstance(exc, WorkerError):
        return exc
    from mkworker.protocol import error_from_exception

    err = error_from_exception(exc, [path])
    if err.kind == "internal":
        err = WorkerError("python_error", err.message, traceback_text=err.traceback_text)
    return err


# --- the protocol method -------------------------------------------------------------

_CACHE: OrderedDict[tuple[str, str, str, int | None], dict[str, Any]] = OrderedDict()
_CACHE_SIZE = 64


def capture(params: Params, progress: Progress) -> Result:
    """``capture`` (docs/protocol.md): cached by (file, sha256, class, batch)."""
    path = param(params, "file", str)
    class_name = param(params, "class", str, "Model")
    batch = param(params, "batch", int, None)
    if batch is not None and batch < 1:
        raise WorkerError("bad_request", f"batch must be >= 1, got {batch}")
    if not class_name.isidentifier():
        raise WorkerError("bad_request", f"class must be an identifier, got {class_name!r}")
    _, sha = loader.read_source(path)
    key = (path, sha, class_name, batch)
    hit = _CACHE.get(key)
    if hit is not None:
        _CACHE.move_to_end(key)
        result = copy.deepcopy(hit)
        result["stats"]["cached"] = True
        return result
    result = capture_file(path, class_name, batch, progress)
    if result["source_sha256"] == sha:
        _CACHE[key] = copy.deepcopy(result)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return result


def clear_cache() -> None:
    _CACHE.clear()


class _WarmUp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3)
        self.bn = torch.nn.BatchNorm2d(2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.bn(self.conv(x))) + 1.0


def warm_up() -> None:
    """Pays the one-time costs of a first capture (FakeTensorMode's imports,
    the op name table: about 2 s) so the first real capture is fast. The
    server runs this in a background thread at start."""
    OP_NAMES.name(torch.relu)
    with _quiet_fake_tensor_log(), torch.no_grad(), \
            fake_tensor.FakeTensorMode(allow_non_fake_inputs=True):
        model = _WarmUp()
        x = torch.rand(2, 2, 8, 8)
        rec = Recorder(__file__, None, None, shape_only=True)
        rec.register_model(model, [x])
        with rec.hooks(), rec:
            model(x)


register("capture", capture)
