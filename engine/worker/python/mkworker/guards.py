"""Run-time guards against candidates that look right without doing the work.

Each guard gives a reason a user can read. The verifier (verify.py) combines them:

- memory: exact-layout copies of inputs, storage overlap between tensors (an output that
  aliases an input, a parameter, or a tensor the reference made);
- mutation: inputs changed when the reference leaves them alone;
- ops: a TorchFunctionMode and a TorchDispatchMode record every torch call the candidate
  makes; only allocation, view, copy and metadata calls are allowed, plus the ops the
  candidate declares in MK_USES_TORCH (docs/candidates.md). Calls made by Triton itself
  (the launcher, the CPU interpreter) are recognised by the calling frame and ignored;
- global state: precision flags, default dtype, rebound torch functions, the mode stacks
  and the number of live threads, before and after the candidate runs.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch._dynamo  # imported now: importing it rebinds torch.manual_seed
from torch.overrides import TorchFunctionMode, resolve_name
from torch.utils._python_dispatch import TorchDispatchMode

from .candidate import op_short_name

# ---------------------------------------------------------------------------------------
# Memory


def clone_exact(t: Any) -> Any:
    """A copy with its own storage and the same sizes, strides and storage span.

    A candidate must see the layout the composed program will give it (a transposed view,
    an expanded bias), so this copies the storage span the view covers, not just its
    elements. Non-tensors are returned as they are.
    """
    if not isinstance(t, torch.Tensor):
        return t
    if t.numel() == 0:
        return t.detach().clone()
    span = 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True))
    flat = t.detach().as_strided((span,), (1,), t.storage_offset()).clone()
    out = flat.as_strided(tuple(t.shape), tuple(t.stride()), 0)
    if t.requires_grad and t.is_leaf:
        out.requires_grad_(False)
    return out


def _byte_range(t: torch.Tensor) -> tuple[int, int, int]:
    """(storage pointer, first byte, end byte) of the memory a tensor can touch."""
    st = t.untyped_storage()
    base = st.data_ptr()
    size = t.element_size()
    if t.numel() == 0:
        return base, 0, 0
    span = 1 + sum((s - 1) * stv for s, stv in zip(t.shape, t.stride(), strict=True))
    start = t.storage_offset() * size
    return base, start, start + span * size


def overlaps(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when two tensors share memory (same storage and intersecting byte ranges)."""
    if a.device != b.device:
        return False
    pa, sa, ea = _byte_range(a)
    pb, sb, eb = _byte_range(b)
    if ea == sa or eb == sb:
        return False
    if pa != pb:
        # Different storages can still alias (from_blob, set_): compare absolute ranges.
        return pa + sa < pb + eb and pb + sb < pa + ea
    return sa < eb and sb < ea


def alias_pairs(outputs: list[Any], others: list[Any]) -> set[tuple[int, int]]:
    """{(i, j)}: output i shares memory with others[j]."""
    pairs: set[tuple[int, int]] = set()
    for i, o in enumerate(outputs):
        if not isinstance(o, torch.Tensor):
            continue
        for j, x in enumerate(others):
            if isinstance(x, torch.Tensor) and overlaps(o, x):
                pairs.add((i, j))
    return pairs


def same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equality (NaN == NaN); for deciding whether an input was modified."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(torch.equal(a.nan_to_num(0.0, 1.0, -1.0), b.nan_to_num(0.0, 1.0, -1.0))
                    and torch.equal(a.isnan(), b.isnan()))
    return bool(torch.equal(a, b))


# ---------------------------------------------------------------------------------------
# Torch calls made by the candidate

# Function-level calls (short names) that allocate, reshape, copy or ask about a tensor.
ALLOWED_FUNCTIONS = frozenset({
    # allocation
    "empty", "empty_like", "empty_strided", "zeros", "zeros_like", "ones", "ones_like",
    "full", "full_like", "new_empty", "new_empty_strided", "new_zeros", "new_ones",
    "new_full", "new_tensor", "tensor", "as_tensor", "arange", "fill", "zero",
    # views and layout
    "view", "view_as", "reshape", "reshape_as", "permute", "transpose", "t", "T", "mT",
    "expand", "expand_as", "broadcast_to", "broadcast_tensors", "as_strided", "squeeze",
    "unsqueeze", "flatten", "unflatten",
    "narrow", "select", "split", "chunk", "unbind", "contiguous", "getitem", "setitem",
    "movedim", "swapaxes", "detach", "alias", "iter", "len",
    # copies and conversions
    "clone", "copy", "to", "type", "float", "half", "bfloat16", "double", "int", "long",
    "bool", "cuda", "cpu", "data",
    # metadata
    "size", "shape", "stride", "numel", "nelement", "dim", "ndim", "ndimension",
    "is_contiguous", "data_ptr", "element_size", "itemsize", "nbytes", "dtype", "device",
    "storage_offset", "untyped_storage", "is_cuda", "is_floating_point", "is_complex",
    "get_device", "requires_grad", "requires_grad_", "is_leaf", "layout", "is_tensor",
    "item", "tolist", "format", "repr", "hash", "bool_", "index", "is_set_to",
    "result_type", "promote_types", "can_cast", "is_nonzero",
})
# The same at the ATen level, for calls that bypass the Python API (torch.ops.aten.*).
ALLOWED_ATEN = frozenset({
    "empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "zeros",
    "zeros_like", "new_zeros", "ones", "ones_like", "new_ones", "full", "full_like",
    "new_full", "fill", "zero", "arange", "scalar_tensor", "lift_fresh", "lift_fresh_copy",
    "view", "_unsafe_view", "reshape", "as_strided", "permute", "transpose", "t", "expand",
    "squeeze", "unsqueeze", "slice", "select", "narrow", "alias", "detach", "split",
    "split_with_sizes", "unbind", "clone", "copy", "_to_copy", "_copy_from", "resize",
    "_local_scalar_dense", "is_nonzero", "sym_size", "sym_stride", "sym_numel",
    "sym_storage_offset", "set",
})

def _dirs(module_file: str) -> tuple[str, ...]:
    """A package directory as code objects may name it: as imported and symlinks resolved."""
    raw = str(Path(module_file).parent) + "/"
    real = str(Path(module_file).resolve().parent) + "/"
    return (raw, real) if raw != real else (raw,)


_TORCH_DIRS = _dirs(torch.__file__)
_THIS_FILES = (str(Path(__file__)), str(Path(__file__).resolve()))
try:
    import triton as _triton

    _TRITON_DIRS: tuple[str, ...] = _dirs(_triton.__file__)
except ImportError:  # pragma: no cover - triton is a dependency
    _TRITON_DIRS = ()


@dataclass
class OpCall:
    name: str   # the torch name ("torch.relu", "torch.Tensor.add", "aten.relu.default")
    short: str  # short name ("relu", "add")
    line: int | None  # line in the candidate's file


def _caller(cand_file: str | None) -> tuple[bool, int | None]:
    """(made by Triton, line in the candidate file) for the torch call being intercepted.

    The innermost frame outside torch (and outside this module) made the call. When that
    frame is Triton's own code (launcher, interpreter, autotuner) the call is Triton's.
    """
    f: types.FrameType | None = sys._getframe(2)
    first: str | None = None
    line: int | None = None
    while f is not None:
        fn = f.f_code.co_filename
        if first is None and not fn.startswith(_TORCH_DIRS) and fn not in _THIS_FILES \
                and not fn.startswith("<frozen"):
            first = fn
        if cand_file is not None and fn == cand_file:
            line = f.f_lineno
            break
        f = f.f_back
    by_triton = bool(first and _TRITON_DIRS and first.startswith(_TRITON_DIRS))
    return by_triton, line


class _State:
    def __init__(self, allowed: frozenset[str], cand_file: str | None) -> None:
        self.allowed = allowed
        self.cand_file = cand_file
        self.calls: list[OpCall] = []
        self.violations: list[OpCall] = []
        self.in_dispatch = 0
        self.fn_depth = 0


class _FunctionRecorder(TorchFunctionMode):
    def __init__(self, st: _State) -> None:
        super().__init__()
        self.st = st

    def __torch_function__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        st = self.st
        kwargs = kwargs or {}
        if st.in_dispatch:
            return func(*args, **kwargs)
        try:
            name = resolve_name(func) or getattr(func, "__name__", repr(func))
        except Exception:
            name = getattr(func, "__name__", repr(func))
        by_triton, line = _caller(st.cand_file)
        if not by_triton:
            short = op_short_name(name)
            call = OpCall(name, short, line)
            st.calls.append(call)
            if short not in ALLOWED_FUNCTIONS and short not in st.allowed:
                st.violations.append(call)
        st.fn_depth += 1
        try:
            return func(*args, **kwargs)
        finally:
            st.fn_depth -= 1


class _DispatchRecorder(TorchDispatchMode):
    def __init__(self, st: _State) -> None:
        super().__init__()
        self.st = st

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (),
                           kwargs: Any = None) -> Any:
        st = self.st
        kwargs = kwargs or {}
        if st.fn_depth == 0:
            # A call that reached ATen without passing the Python API's torch-function
            # check (e.g. with torch function disabled).
            by_triton, line = _caller(st.cand_file)
            if not by_triton:
                name = str(func)
                short = op_short_name(name)
                call = OpCall(name, short, line)
                st.calls.append(call)
                if short not in ALLOWED_ATEN and short not in st.allowed:
                    st.violations.append(call)
        st.in_dispatch += 1
        try:
            return func(*args, **kwargs)
        finally:
            st.in_dispatch -= 1


class OpRecorder:
    """Records the torch calls a candidate makes while it runs.

    `allowed` are extra short names (MK_USES_TORCH). `cand_file` locates lines.
    """

    def __init__(self, allowed: Iterable[str] = (), cand_file: str | Path | None = None) -> None:
        self.state = _State(frozenset(op_short_name(a) for a in allowed),
                            str(cand_file) if cand_file is not None else None)

    @property
    def violations(self) -> list[OpCall]:
        return self.state.violations

    @property
    def calls(self) -> list[OpCall]:
        return self.state.calls

    @contextmanager
    def recording(self) -> Iterator[OpRecorder]:
        fn_len = torch._C._len_torch_function_stack()
        dp_len = torch._C._len_torch_dispatch_stack()
        dm = _DispatchRecorder(self.state)
        fm = _FunctionRecorder(self.state)
        dm.__enter__()
        fm.__enter__()
        broken = False
        try:
            yield self
        finally:
            # The candidate must leave the mode stacks as it found them.
            broken = (torch._C._len_torch_function_stack() != fn_len + 1
                      or torch._C._len_torch_dispatch_stack() != dp_len + 1)
            for mode in (fm, dm):
                try:
                    mode.__exit__(None, None, None)
                except Exception:
                    broken = True
        if broken:
            raise GuardViolation("changed torch's mode stacks (it would hide its torch "
                                 "calls from the verifier)")

    def reason(self) -> str | None:
        if not self.violations:
            return None
        seen: dict[str, OpCall] = {}
        for v in self.violations:
            seen.setdefault(v.name, v)
        parts = []
        for v in list(seen.values())[:4]:
            where = f" (line {v.line})" if v.line else ""
            parts.append(f"{v.name}{where}")
        more = f" and {len(seen) - 4} more" if len(seen) > 4 else ""
        shorts = sorted({v.short for v in seen.values()})
        decl = ", ".join(f'"{s}"' for s in shorts[:4])
        return (f"calls torch ops instead of computing them: {', '.join(parts)}{more}. A custom "
                f"kernel may only allocate, view and copy through torch; declare "
                f"MK_USES_TORCH = ({decl},) if it delegates to PyTorch on purpose")


class GuardViolation(Exception):
    """A guard's finding while the candidate ran (raised out of the recording context)."""


# ---------------------------------------------------------------------------------------
# Global state


def _precision_flags() -> dict[str, Any]:
    flags: dict[str, Any] = {
        "torch.get_default_dtype()": torch.get_default_dtype(),
        "torch.get_float32_matmul_precision()": torch.get_float32_matmul_precision(),
        "torch.are_deterministic_algorithms_enabled()":
            torch.are_deterministic_algorithms_enabled(),
        "torch.is_grad_enabled()": torch.is_grad_enabled(),
    }
    b = torch.backends
    for name, obj, attr in (
        ("torch.backends.cuda.matmul.allow_tf32", b.cuda.matmul, "allow_tf32"),
        ("torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction", b.cuda.matmul,
         "allow_fp16_reduced_precision_reduction"),
        ("torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction", b.cuda.matmul,
         "allow_bf16_reduced_precision_reduction"),
        ("torch.backends.cudnn.allow_tf32", b.cudnn, "allow_tf32"),
        ("torch.backends.cudnn.benchmark", b.cudnn, "benchmark"),
        ("torch.backends.cudnn.deterministic", b.cudnn, "deterministic"),
        ("torch.backends.cudnn.enabled", b.cudnn, "enabled"),
    ):
        try:
            flags[name] = getattr(obj, attr)
        except Exception:  # an attribute a torch build lacks
            continue
    return flags


def _restore_flags(flags: dict[str, Any]) -> None:
    torch.set_default_dtype(flags["torch.get_default_dtype()"])
    torch.set_float32_matmul_precision(flags["torch.get_float32_matmul_precision()"])
    torch.use_deterministic_algorithms(flags["torch.are_deterministic_algorithms_enabled()"])
    torch.set_grad_enabled(flags["torch.is_grad_enabled()"])
    b = torch.backends
    for name, value in flags.items():
        if not name.startswith("torch.backends."):
            continue
        obj_path, attr = name.rsplit(".", 1)
        obj = {"torch.backends.cuda.matmul": b.cuda.matmul, "torch.backends.cudnn": b.cudnn}[
            obj_path]
        try:
            setattr(obj, attr, value)
        except Exception:
            continue


_WATCHED_NAMESPACES: tuple[tuple[str, Any], ...] = (
    ("torch", torch),
    ("torch.nn.functional", torch.nn.functional),
    ("torch.Tensor", torch.Tensor),
    ("torch.special", torch.special),
    ("torch.linalg", torch.linalg),
)


def _namespace_ids() -> dict[str, int]:
    ids: dict[str, int] = {}
    for prefix, ns in _WATCHED_NAMESPACES:
        for k, v in list(vars(ns).items()):
            if callable(v):
                ids[f"{prefix}.{k}"] = id(v)
    return ids


_POOL_FILES = ("concurrent/futures/thread.py", "concurrent/futures/process.py")


def _library_thread(t: threading.Thread) -> bool:
    """A thread started by torch or Triton themselves (compile pools, warm-up servers). The
    static scan keeps candidates from importing threading or concurrent.futures at all."""
    target = getattr(t, "_target", None)
    code = getattr(getattr(target, "__func__", target), "__code__", None)
    if code is None:
        return False
    fn = code.co_filename
    return fn.startswith(_TORCH_DIRS + _TRITON_DIRS) or fn.endswith(_POOL_FILES)


@dataclass
class GlobalSnapshot:
    """Process-wide state a candidate must leave alone: flags, torch's functions, threads."""

    flags: dict[str, Any] = field(default_factory=_precision_flags)
    namespace: dict[str, int] = field(default_factory=_namespace_ids)
    threads: set[int] = field(default_factory=lambda: {t.ident or 0 for t in
                                                       threading.enumerate()})

    def check(self, restore: bool = True) -> str | None:
        """Reason when something changed since the snapshot; restores the flags."""
        now = _precision_flags()
        changed = [k for k, v in self.flags.items() if now.get(k) != v]
        if changed:
            if restore:
                _restore_flags(self.flags)
            return (f"changed global settings: {', '.join(changed)} (they would change the "
                    f"reference's numerics too)")
        ids = _namespace_ids()
        rebound = sorted(k for k, v in self.namespace.items() if ids.get(k) != v)
        added = sorted(k for k in ids if k not in self.namespace and
                       k.startswith("torch.Tensor."))
        if rebound or added:
            names = (rebound + added)[:4]
            return f"replaced torch functions: {', '.join(names)}"
        alive = [t for t in threading.enumerate()
                 if (t.ident or 0) not in self.threads and not _library_thread(t)]
        if alive:
            return (f"left {len(alive)} thread(s) running ({alive[0].name}): work on "
                    f"other threads escapes the timer and races with the check")
        return None


class KernelLaunches:
    """Counts launches of the kernels a module defines while active (a ModelNew whose
    kernels never run passes only because it is PyTorch; the report says so). Triton
    kernels are counted through an instance-level wrapper of each kernel's `run`, which
    `kernel[grid](...)` and the autotuner both call; the CUDA C++ sections of a composed
    file (engine/compose/compose_cuda.c) through their launcher's `launch`."""

    def __init__(self, module: Any) -> None:
        self.kernels: dict[str, Any] = {}
        self._wrapped: list[tuple[Any, str]] = []  # (object, attribute counted)
        for name, obj in vars(module).items():
            if type(obj).__name__ == "_MkCudaKernels" and callable(getattr(obj, "launch", None)):
                self.kernels[name] = obj
                self._wrapped.append((obj, "launch"))
                continue
            inner = obj
            for _ in range(8):  # Autotuner / Heuristics keep the JIT function in .fn
                if type(inner).__name__ in ("JITFunction", "InterpretedFunction"):
                    break
                inner = getattr(inner, "fn", None)
            if type(inner).__name__ in ("JITFunction", "InterpretedFunction") and \
                    callable(getattr(inner, "run", None)):
                self.kernels[name] = inner
                self._wrapped.append((inner, "run"))
        self.count = 0

    def __enter__(self) -> KernelLaunches:
        for obj, attr in self._wrapped:
            orig = getattr(obj, attr)

            def counted(*args: Any, _orig: Any = orig, **kwargs: Any) -> Any:
                self.count += 1
                return _orig(*args, **kwargs)

            setattr(obj, attr, counted)
        return self

    def __exit__(self, *exc: object) -> None:
        for obj, attr in self._wrapped:
            obj.__dict__.pop(attr, None)

    def note(self) -> str | None:
        """The report's note when kernels are defined and none ran."""
        if not self.kernels or self.count:
            return None
        names = ", ".join(sorted(self.kernels))
        return (f"no custom kernel ran: {names} {'is' if len(self.kernels) == 1 else 'are'} "
                f"defined but never launched; the ModelNew computes with PyTorch alone")
