"""Triton subkernels compiled ahead of time for the C++ export.

``mkevolve export`` runs ``python -m mkworker.export_triton MODELNEW.py OUT.json
--arch 90 --subkernels 0:0,2:2 --seed 0`` (docs/export.md). Two steps:

1. **Record** (a child process: Triton's CPU interpreter when torch sees no
   GPU, the GPU otherwise): the ModelNew is built as KernelBench builds it and
   its forward runs once on ``get_inputs()``. While a Triton subkernel's
   ``sk<s>_run`` runs, every ATen call it makes is recorded (a
   ``TorchDispatchMode``: op, overload, the arguments typed by the op's
   schema, which recorded tensors it reads and makes) and every Triton launch
   (``JITFunction.run`` / the interpreter's): kernel, grid, every argument
   (tensors by the recorded tensor they are, ints, floats, constexprs) and the
   launch options (num_warps, num_stages, ...). Data-dependent steps (an
   ``.item()``, a random op) and tensors the subkernel did not get or make
   are refused: a replay of fixed shapes could not reproduce them.
2. **Compile** (this process, no interpreter): each distinct launch
   specialisation is compiled with ``triton.compile(ASTSource(...),
   target=GPUTarget("cuda", arch, 32))`` -- the same binder the JIT uses
   (dtypes, constexprs, ints equal to 1, 16-divisibility of ints and of the
   recorded pointers). No GPU is needed. Out: the cubin, the kernel's name,
   shared memory, num_warps, and its parameter list as the PTX declares it
   (the arguments left after specialisation, then the scratch pointers newer
   Triton adds, passed as null as Triton's launcher does when their size is 0).

OUT.json (``mkevolve.export-triton/1``) is read by engine/export, which writes
the C++ that replays each subkernel: its ATen calls through ``at::_ops`` and
its launches through ``cuLaunchKernel``. Everything is for the shapes of
``get_inputs()``: the replay checks them.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import inspect
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from typing import Any

SCHEMA = "mkevolve.export-triton/1"

# torch dtype name -> Triton's pointer element name (the signature's "*fp32").
TRITON_DTYPES = {
    "float32": "fp32", "float16": "fp16", "bfloat16": "bf16", "float64": "fp64",
    "int64": "i64", "int32": "i32", "int16": "i16", "int8": "i8", "uint8": "u8", "bool": "i1",
}


class ExportTritonError(Exception):
    """Something the export cannot compile or replay (said in the user's terms)."""


# ---- the schema of an ATen op ------------------------------------------------------------

def _split_top(text: str) -> list[str]:
    """Splits at commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def schema_types(schema: Any) -> list[str]:
    """Each argument's declared type ("SymInt[]", "int[1]?", "Tensor", ...), alias marks dropped."""
    text = str(schema)
    head = text[text.index("(") + 1: text.rindex(") ->")]
    out = []
    for part in _split_top(head):
        if part == "*":
            continue
        typ = part.rsplit(" ", 1)[0] if "=" not in part else part.split("=")[0].rsplit(" ", 1)[0]
        out.append(re.sub(r"\([a-z!|.\s]*\)", "", typ).strip())
    return out


def _kind(typ: str) -> str:
    """The C++ spelling class of a declared type (engine/export spells each)."""
    opt = typ.endswith("?")
    base = typ[:-1] if opt else typ
    base = re.sub(r"\[\d+\]", "[]", base)
    kinds = {
        "Tensor": "tensor", "Tensor[]": "tensors", "int": "int", "SymInt": "int", "int[]": "ints",
        "SymInt[]": "symints", "float": "float", "bool": "bool", "Scalar": "scalar",
        "ScalarType": "dtype", "Layout": "layout", "Device": "device", "MemoryFormat": "memfmt",
        "str": "str", "Generator": "generator", "float[]": "floats",
    }
    if base not in kinds:
        raise ExportTritonError(f"an argument of type {typ} (the export spells no such argument)")
    return kinds[base] + ("?" if opt else "")


# ---- recording -----------------------------------------------------------------------------

def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


class Tape:
    """One subkernel's run: its inputs, ATen calls and Triton launches, in order."""

    def __init__(self, index: int, name: str) -> None:
        self.index = index
        self.name = name
        self.vars: dict[int, int] = {}  # id(tensor) -> var
        self.keep: list[Any] = []       # holds every tensor seen, so ids stay unique
        self.steps: list[dict[str, Any]] = []
        self.inputs: list[dict[str, Any]] = []
        self.outputs: list[int] = []

    def new_var(self, t: Any) -> int:
        v = len(self.keep)
        self.keep.append(t)
        self.vars[id(t)] = v
        return v

    def var_of(self, t: Any, what: str) -> int:
        v = self.vars.get(id(t))
        if v is None:
            raise ExportTritonError(f"{what} is a tensor the subkernel neither got as an "
                                    "argument nor made (a global or a constant tensor): "
                                    "not replayable")
        return v

    def add_input(self, pos: int, t: Any) -> None:
        import torch

        if not isinstance(t, torch.Tensor):
            self.inputs.append({"pos": pos, "tensor": False})
            return
        if id(t) in self.vars:  # the same tensor twice: one var
            self.inputs.append({"pos": pos, "tensor": True, "same_as": self.vars[id(t)]})
            return
        self.inputs.append({"pos": pos, "tensor": True, "var": self.new_var(t),
                            "sizes": list(t.shape), "strides": list(t.stride()),
                            "dtype": _dtype_name(t.dtype)})

    def _value(self, kind: str, value: Any, where: str) -> Any:
        import torch

        base = kind.rstrip("?")
        if value is None:
            if kind.endswith("?") or base == "generator":
                return None
            raise ExportTritonError(f"{where}: None for a {base}")
        if base == "tensor":
            return self.var_of(value, where)
        if base == "tensors":
            return [self.var_of(t, where) for t in value]
        if base in ("int", "bool", "float", "str"):
            return value
        if base in ("ints", "symints", "floats"):
            return list(value)
        if base == "scalar":
            if isinstance(value, bool):
                return {"b": value}
            if isinstance(value, int):
                return {"i": value}
            return {"f": float(value)}
        if base == "dtype":
            return _dtype_name(value)
        if base == "layout":
            if value != torch.strided:
                raise ExportTritonError(f"{where}: layout {value} (only strided tensors)")
            return "strided"
        if base == "device":
            return "device"  # the replay's device
        if base == "memfmt":
            return str(value).removeprefix("torch.")
        raise ExportTritonError(f"{where}: a {base} argument is not replayable (random numbers?)")

    def op(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        import torch

        schema = func._schema
        overload = schema.overload_name or "default"
        where = f"subkernel sk{self.index} ({self.name}): {schema.name}.{overload}"
        if schema.name in ("aten::_local_scalar_dense", "aten::item", "aten::is_nonzero",
                           "aten::equal", "aten::allclose", "aten::nonzero"):
            raise ExportTritonError(f"{where} reads a tensor's values on the host (data-dependent: "
                                    "a replay of fixed launches cannot follow it)")
        if any(w in schema.name for w in _RANDOM):
            raise ExportTritonError(f"{where} draws random numbers: not replayable")
        types = schema_types(schema)
        rec_args = []
        for i, (a, typ) in enumerate(zip(schema.arguments, types, strict=True)):
            if i < len(args) and not a.kwarg_only:
                value = args[i]
            elif a.name in kwargs:
                value = kwargs[a.name]
            elif a.has_default_value():
                value = a.default_value
            else:
                value = None
            kind = _kind(typ)
            if kind.rstrip("?") == "generator" and value is not None:
                raise ExportTritonError(f"{where} draws random numbers: not replayable")
            rec_args.append([kind, self._value(kind, value, where)])
        rets = [str(r.type) for r in schema.returns]
        several = isinstance(out, (tuple, list)) and not isinstance(out, torch.Tensor)
        outs = out if several else [out]
        if len(rets) == 1 and rets[0] == "List[Tensor]":
            result = "tensors"
            outs = list(out)
        elif all(r == "Tensor" for r in rets):
            result = "tuple" if len(rets) > 1 else ("tensor" if rets else "none")
        else:
            raise ExportTritonError(f"{where} returns {', '.join(rets)}, not tensors "
                                    "(data-dependent)")
        out_vars = []
        for t in outs if rets else []:
            out_vars.append(self.vars[id(t)] if id(t) in self.vars else self.new_var(t))
        self.steps.append({"op": schema.name.removeprefix("aten::"),
                           "overload": schema.overload_name,
                           "args": rec_args, "result": result, "out": out_vars})

    def launch(self, kernel: dict[str, Any], grid: tuple[int, int, int],
               args: list[dict[str, Any]], options: dict[str, Any]) -> None:
        self.steps.append({"launch": kernel, "grid": list(grid), "args": args, "options": options})


class _Recorder:
    """The recording state of one process (one ModelNew forward)."""

    def __init__(self) -> None:
        self.tape: Tape | None = None
        self.tapes: list[Tape] = []
        self.error: ExportTritonError | None = None


_REC = _Recorder()


def _mode_class() -> type:
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordMode(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            out = func(*args, **(kwargs or {}))
            if _REC.tape is not None and _REC.error is None:
                try:
                    _REC.tape.op(func, args, kwargs or {}, out)
                except ExportTritonError as e:
                    _REC.error = e
            return out

    return RecordMode


def _kernel_id(fn: Any) -> dict[str, str]:
    py = getattr(fn, "fn", fn)
    while hasattr(py, "fn") and not inspect.isfunction(py):
        py = py.fn
    return {"name": py.__name__, "qualname": py.__qualname__}


def _launch_args(tape: Tape, fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 where: str) -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
    """Each kernel parameter's recorded value, the launch options, and the bound arguments."""
    import torch

    py = getattr(fn, "fn", fn)
    sig = inspect.signature(py)
    names = list(sig.parameters)
    params = {k: v for k, v in kwargs.items() if k in names}
    options = {k: v for k, v in kwargs.items() if k not in names}
    bound = sig.bind(*args, **params)
    bound.apply_defaults()
    rec = []
    for name in names:
        value = bound.arguments[name]
        item: dict[str, Any] = {"name": name}
        if isinstance(value, torch.Tensor):
            if value.dtype not in _TORCH_TRITON:
                raise ExportTritonError(f"{where}: argument {name} is a {value.dtype} tensor")
            item.update(t=tape.var_of(value, f"{where}: argument {name}"),
                        dtype=_dtype_name(value.dtype),
                        align16=value.data_ptr() % 16 == 0)
        elif value is None or isinstance(value, (bool, int, float, str)):
            item["v"] = value
        elif hasattr(value, "value") and isinstance(value.value, _PLAIN):
            item["v"] = value.value  # tl.constexpr
        elif type(value).__module__.startswith("triton.language") and hasattr(value, "name"):
            item["tl_dtype"] = value.name  # a tl.dtype constexpr (tl.float32)
        else:
            raise ExportTritonError(f"{where}: argument {name} is a {type(value).__name__}, "
                                    "which the "
                                    "export does not pass to a compiled kernel")
        rec.append(item)
    for k, v in options.items():
        if not isinstance(v, (bool, int, float, str, type(None))):
            raise ExportTritonError(f"{where}: launch option {k}={v!r} is not a plain value")
    return rec, options, dict(bound.arguments)


_TORCH_TRITON: dict[Any, str] = {}
# ATen ops that draw random numbers (also those without a Generator argument).
_RANDOM = ("rand", "normal", "bernoulli", "dropout", "multinomial", "uniform", "exponential",
           "cauchy", "geometric", "poisson")
_PLAIN = (bool, int, float, str, type(None))


def _grid3(grid: Any, bound: dict[str, Any], where: str) -> tuple[int, int, int]:
    if callable(grid):
        grid = grid(bound)
    g = [int(x) for x in grid] + [1, 1]
    if len(grid) > 3 or len(grid) < 1:
        raise ExportTritonError(f"{where}: a grid of {len(grid)} dimensions")
    return g[0], g[1], g[2]


@contextlib.contextmanager
def _launch_hooks() -> Iterator[None]:
    """Records every Triton launch made while a tape is open (JIT and interpreter)."""
    from torch.utils._python_dispatch import _disable_current_modes
    from triton.runtime import jit

    classes: list[type] = [jit.JITFunction]
    with contextlib.suppress(ImportError):
        from triton.runtime.interpreter import InterpretedFunction

        classes.append(InterpretedFunction)
    saved = {c: c.run for c in classes}

    def wrap(orig: Callable[..., Any]) -> Callable[..., Any]:
        def run(self: Any, *args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            tape = _REC.tape
            if tape is not None and not warmup and _REC.error is None:
                where = f"subkernel sk{tape.index} ({tape.name}): kernel {_kernel_id(self)['name']}"
                try:
                    rec, options, bound = _launch_args(tape, self, args, kwargs, where)
                    grid3 = _grid3(grid, {**bound, **options}, where)
                    tape.launch(_kernel_id(self), grid3, rec, options)
                except ExportTritonError as e:
                    _REC.error = e
            # the launch's own copies (interpreter) are not the tape's
            with _disable_current_modes():
                return orig(self, *args, grid=grid, warmup=warmup, **kwargs)

        return run

    for c in classes:
        c.run = wrap(saved[c])  # type: ignore[method-assign]
    try:
        yield
    finally:
        for c in classes:
            c.run = saved[c]  # type: ignore[method-assign]


def _wrap_run(fn: Callable[..., Any], section: int,
              queue: list[tuple[int, str]]) -> Callable[..., Any]:
    mode_cls = _mode_class()

    def run(*args: Any) -> Any:
        import torch

        if not queue:
            raise ExportTritonError(f"sk{section}_run ran more often than the ModelNew's "
                                    "header says")
        index, name = queue.pop(0)
        tape = Tape(index, name)
        for i, a in enumerate(args):
            tape.add_input(i, a)
        _REC.tape = tape
        try:
            with mode_cls():
                out = fn(*args)
        finally:
            _REC.tape = None
        if _REC.error is not None:
            raise _REC.error
        outs = out if isinstance(out, tuple) else (out,)
        for i, t in enumerate(outs):
            if not isinstance(t, torch.Tensor):
                raise ExportTritonError(f"subkernel sk{index} ({name}) returns a "
                                        f"{type(t).__name__} at place {i}, not a tensor")
            tape.outputs.append(tape.var_of(t, f"subkernel sk{index}: its output {i}"))
        tape.keep = []
        _REC.tapes.append(tape)
        return out

    return run


def record(modelnew: str, subkernels: list[tuple[int, int, str]], seed: int,
           device: str) -> dict[str, Any]:
    """Runs the ModelNew's forward once and returns each listed subkernel's tape.
    `subkernels`: (index, section, name) of the Triton subkernels, in the forward's order."""
    import torch

    from mkworker import loader

    for name, short in TRITON_DTYPES.items():
        _TORCH_TRITON[getattr(torch, name)] = short
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    problem = loader.load(modelnew)
    mod = problem.module
    with contextlib.suppress(ImportError):
        from triton.runtime.autotuner import Autotuner

        for name, obj in vars(mod).items():
            if isinstance(obj, Autotuner):
                raise ExportTritonError(f"kernel {name} is autotuned: the export compiles one "
                                        "configuration, and which one the autotuner picks depends "
                                        "on the GPU it runs on")
    queues: dict[int, list[tuple[int, str]]] = {}
    for index, section, name in subkernels:
        queues.setdefault(section, []).append((index, name))
    for section, queue in queues.items():
        fn = getattr(mod, f"sk{section}_run", None)
        if fn is None:
            raise ExportTritonError(f"the ModelNew has no sk{section}_run")
        setattr(mod, f"sk{section}_run", _wrap_run(fn, section, queue))
    torch.manual_seed(seed)
    model = problem.model_class("ModelNew")(*problem.function("get_init_inputs")()).to(device)
    torch.manual_seed(seed + 1)
    inputs = [x.to(device) if isinstance(x, torch.Tensor) else x
              for x in problem.function("get_inputs")()]
    _REC.tapes = []
    with _launch_hooks(), torch.no_grad():
        model(*inputs)
    left = [f"sk{i}" for q in queues.values() for i, _ in q]
    if left:
        raise ExportTritonError(f"the forward did not run {', '.join(left)}")
    return {"device": device, "subkernels": [
        {"index": t.index, "name": t.name, "inputs": t.inputs, "steps": t.steps,
         "outputs": t.outputs} for t in sorted(_REC.tapes, key=lambda t: t.index)]}


# ---- compiling -------------------------------------------------------------------------------

def _find_kernel(module: Any, kid: dict[str, str]) -> Any:
    from triton.runtime.jit import JITFunction

    for obj in vars(module).values():
        fn = obj
        while fn is not None and not isinstance(fn, JITFunction):
            fn = getattr(fn, "fn", None)
        if fn is not None and (fn.fn.__name__, fn.fn.__qualname__) == (kid["name"],
                                                                      kid["qualname"]):
            return fn
    raise ExportTritonError(f"kernel {kid['name']} is not a module-level @triton.jit function "
                            "of the "
                            "ModelNew (the compiler looks kernels up by name)")


def _stand_in(dtype: str, align16: bool) -> Any:
    """A CPU tensor the binder specialises as the recorded pointer was: dtype, and 16-byte
    alignment (the base of a fresh CPU tensor is 64-aligned; one element in, it is not)."""
    import torch

    t = torch.empty(64, dtype=getattr(torch, dtype))
    return t if align16 else t[1:]


PTX_SIZES = {"u64": 8, "b64": 8, "s64": 8, "f64": 8, "u32": 4, "b32": 4, "s32": 4, "f32": 4,
             "u16": 2, "b16": 2, "s16": 2, "f16": 2, "u8": 1, "b8": 1, "s8": 1}


def ptx_params(ptx: str, name: str) -> list[str]:
    """The .param types of entry `name` in PTX text ("u64", "u32", "f32", ...)."""
    m = re.search(r"\.entry\s+" + re.escape(name) + r"\s*\((.*?)\)", ptx, re.S)
    if m is None:
        raise ExportTritonError(f"kernel {name}: no .entry in its PTX")
    return re.findall(r"\.param\s+\.(\w+)", m.group(1))


def _bind(fn: Any, backend: Any, args: list[Any], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """(signature, constexprs, attrs, options) as the JIT's binder makes them (JITFunction.run:
    its _pack_args where the installed Triton has it, else the same steps written out)."""
    from triton.runtime import jit

    binder = jit.create_function_from_signature(fn.signature, fn.params, backend)
    bound, specialization, options = binder(*args, **kwargs)
    if hasattr(fn, "_pack_args"):
        options, signature, constexprs, attrs = fn._pack_args(backend, kwargs, bound,
                                                              specialization, options)
        return signature, constexprs, attrs, options
    from triton._utils import find_paths_if, get_iterable_path

    options = backend.parse_options(kwargs)
    sigvals = [x[0] for x in specialization]
    signature = {p.name: v for p, v in zip(fn.params, sigvals, strict=True)}
    paths = find_paths_if(sigvals, lambda _, val: val == "constexpr")
    constexprs = {p: get_iterable_path(list(bound.values()), p) for p in paths}
    attrvals = ["" if x[0] == "constexpr" else x[1] for x in specialization]
    paths = find_paths_if(attrvals, lambda _, x: isinstance(x, str))
    attrs = {p: backend.parse_attr(get_iterable_path(attrvals, p)) for p in paths}
    return signature, constexprs, attrs, options


def compile_launch(module: Any, launch: dict[str, Any], arch: int) -> dict[str, Any]:
    """Compiles one recorded launch's kernel for sm_<arch>; returns its description."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource, make_backend

    fn = _find_kernel(module, launch["launch"])
    name = launch["launch"]["name"]
    target = GPUTarget("cuda", arch, 32)
    backend = make_backend(target)
    args: list[Any] = []
    for a in launch["args"]:
        if "t" in a:
            args.append(_stand_in(a["dtype"], a["align16"]))
        elif "tl_dtype" in a:
            args.append(getattr(tl, a["tl_dtype"]))
        else:
            args.append(a["v"])
    kwargs = dict(launch["options"])
    signature, constexprs, attrs, options = _bind(fn, backend, args, kwargs)
    ck = triton.compile(ASTSource(fn, signature, constexprs, attrs), target=target,
                        options=options.__dict__)
    md = ck.metadata
    where = f"kernel {name}"
    for what, bad in (("global scratch memory", getattr(md, "global_scratch_size", 0) > 0),
                      ("profile scratch memory", getattr(md, "profile_scratch_size", 0) > 0),
                      ("a cooperative grid", bool(getattr(md, "launch_cooperative_grid", False))),
                      ("programmatic dependent launch", bool(getattr(md, "launch_pdl", False))),
                      ("thread-block clusters", getattr(md, "num_ctas", 1) != 1),
                      ("tensor descriptors", bool(getattr(md, "tensordesc_meta", None)))):
        if bad:
            raise ExportTritonError(f"{where} needs {what}, which the export's launcher does "
                                    "not set up")
    ptx = ck.asm["ptx"]
    ptx = ptx.decode() if isinstance(ptx, bytes) else ptx
    ptypes = ptx_params(ptx, md.name)
    kept = []  # the recorded arguments left as parameters, in order
    for i, a in enumerate(launch["args"]):
        key = signature.get(a["name"]) if isinstance(signature, dict) else None
        if key is None or key == "constexpr" or (i,) in constexprs or a["name"] in constexprs:
            continue
        kept.append({"name": a["name"], "type": key, **({"t": a["t"], "align16": (i,) in attrs and
                    any(x[0] == "tt.divisibility" for x in attrs[(i,)])} if "t" in a
                    else {"v": a["v"]})})
    if len(ptypes) < len(kept):
        raise ExportTritonError(f"{where}: its PTX has {len(ptypes)} parameters for "
                                f"{len(kept)} arguments")
    for k, pt in zip(kept, ptypes, strict=False):
        k["ptx"] = pt
        if pt not in PTX_SIZES:
            raise ExportTritonError(f"{where}: parameter {k['name']} is a .{pt}")
        if "t" in k and PTX_SIZES[pt] != 8:
            raise ExportTritonError(f"{where}: pointer {k['name']} is a .{pt} parameter")
    extra = ptypes[len(kept):]
    if any(PTX_SIZES.get(p) != 8 for p in extra):
        raise ExportTritonError(f"{where}: trailing parameters {extra} are not scratch pointers")
    cubin = ck.asm["cubin"]
    return {"name": md.name, "cubin": base64.b64encode(cubin).decode(), "shared": int(md.shared),
            "num_warps": int(md.num_warps), "arch": arch, "params": kept, "scratch": len(extra),
            "constexprs": {str(k): v for k, v in constexprs.items()
                           if isinstance(v, (bool, int, float, str, type(None)))}}


def _spec_key(launch: dict[str, Any], params: list[dict[str, Any]] | None = None) -> str:
    """What decides the compiled code: kernel, every argument except tensors' identities and
    non-constexpr values beyond their specialisation, and the options."""
    key = []
    for a in launch["args"]:
        if "t" in a:
            key.append(("t", a["dtype"], a["align16"]))
        elif "tl_dtype" in a:
            key.append(("tl", a["tl_dtype"]))
        else:
            key.append(("v", a["v"]))
    return json.dumps([launch["launch"], key, sorted(launch["options"].items())])


def compile_all(modelnew: str, rec: dict[str, Any], arch: int) -> dict[str, Any]:
    """Compiles every launch of `rec` (record()'s result); each launch gets its kernel's id."""
    import triton

    from mkworker import loader

    module = loader.load(modelnew).module
    kernels: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for sk in rec["subkernels"]:
        for step in sk["steps"]:
            if "launch" not in step:
                continue
            key = _spec_key(step)
            if key not in seen:
                try:
                    kernels.append(compile_launch(module, step, arch))
                except ExportTritonError as e:
                    where = f"subkernel sk{sk['index']} ({sk['name']})"
                    raise ExportTritonError(f"{where}: {e}") from None
                seen[key] = len(kernels) - 1
            step["kernel"] = seen[key]
    return {"schema": SCHEMA, "arch": arch, "triton": triton.__version__, **rec, "kernels": kernels}


# ---- the command -------------------------------------------------------------------------------

def _parse_subkernels(text: str) -> list[tuple[int, int, str]]:
    out = []
    for item in filter(None, text.split(",")):
        parts = item.split(":")
        out.append((int(parts[0]), int(parts[1]), parts[2] if len(parts) > 2 else ""))
    return out


def _record_child(args: argparse.Namespace, out: str) -> None:
    """Records in a fresh interpreter: the interpreter mode is chosen before triton is imported."""
    env = dict(os.environ)
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    env.pop("TRITON_INTERPRET", None)
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    cmd = [sys.executable, "-m", "mkworker.export_triton", "--record", args.modelnew, out,
           "--subkernels", args.subkernels, "--seed", str(args.seed), "--device", device]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        raise ExportTritonError("recording the launches failed: " + (lines[-1] if lines else
                                                                     f"exit {p.returncode}"))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="python -m mkworker.export_triton")
    ap.add_argument("modelnew")
    ap.add_argument("out")
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--subkernels", required=True, help="index:section[:name],... in forward order")
    ap.add_argument("--record", action="store_true", help="(internal) record only, into OUT")
    ap.add_argument("--device", default="cpu", help="(internal) the recording's device")
    args = ap.parse_args(argv[1:])
    args.modelnew = os.path.abspath(args.modelnew)
    try:
        if args.record:
            rec = record(args.modelnew, _parse_subkernels(args.subkernels), args.seed, args.device)
            with open(args.out, "w", encoding="utf-8") as f:
                json.dump(rec, f)
            return 0
        if os.environ.get("TRITON_INTERPRET") == "1":
            os.environ.pop("TRITON_INTERPRET")  # compiling needs the real JIT functions
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "record.json")
            _record_child(args, path)
            with open(path, encoding="utf-8") as f:
                rec = json.load(f)
        plan = compile_all(args.modelnew, rec, args.arch)
        with open(args.out, "w", encoding="utf-8") as f:
            json.dump(plan, f)
        n = sum(1 for sk in plan["subkernels"] for s in sk["steps"] if "launch" in s)
        print(f"triton: {len(plan['kernels'])} kernels compiled for sm_{args.arch} (Triton "
              f"{plan['triton']}), {n} launches recorded on {plan['device']}", file=sys.stderr)
        return 0
    except ExportTritonError as e:
        print(f"mkworker.export_triton: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
