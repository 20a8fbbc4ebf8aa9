"""Loading candidate kernels: content-addressed files, fresh imports, a static policy check.

A candidate is the text of a Python module with `run(*inputs)` (docs/candidates.md).
Triton's `@triton.jit` reads a function's source from its file, so the text is written
to a file named by its SHA-256 under the candidate cache directory and imported from
there, under a module name that is unique per load: two verifications never share
module state (a global cache in a candidate cannot leak from one check to the next).

Before importing, the source is scanned (ast) for what a kernel never needs and a
cheat does: imports outside the allowed set, tampering with interpreter or torch
internals (mode stacks, frames, the garbage collector), side streams and threads,
changes to global precision flags, rebinding attributes of torch. The runtime guards
(guards.py) catch the same tricks at run time; the scan gives an early, exact reason
with a line number.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import itertools
import os
import sys
import tempfile
import traceback
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from mkworker import audit, cuda_runtime

Policy = Literal["subkernel", "composition"]

# Roots a subkernel candidate may import (docs/candidates.md, plus harmless typing).
_SUBKERNEL_IMPORTS = frozenset({"torch", "triton", "math", "typing", "__future__"})
# Roots nobody's kernel code needs and that reach into the interpreter (any policy).
_BANNED_IMPORTS = frozenset({
    "ctypes", "gc", "inspect", "threading", "_thread", "multiprocessing", "concurrent",
    "asyncio", "signal", "builtins", "importlib", "sys", "subprocess", "socket",
    "pickle", "marshal", "cffi",
})
# Builtins that defeat a static reading of the code or reach outside it.
_BANNED_NAMES = {
    "__import__": "imports modules dynamically",
    "exec": "executes generated code",
    "eval": "evaluates generated code",
    "compile": "compiles generated code",
    "globals": "reads the module namespace dynamically",
    "locals": "reads frame locals dynamically",
    "vars": "reads namespaces dynamically",
    "getattr": "looks attributes up dynamically (spell the attribute out)",
    "setattr": "sets attributes dynamically",
    "delattr": "deletes attributes dynamically",
    "__builtins__": "reaches into the builtins",
    "breakpoint": "starts a debugger",
    "open": "opens files",
}
# Names a ModelNew file (which embeds the user's Model verbatim) may use.
_COMPOSITION_NAMES_OK = frozenset({"getattr", "setattr", "delattr", "vars", "open"})
# Attributes that tamper with the verifier, the interpreter or global numerics (any policy).
_TAMPER_ATTRS = {
    "_python_dispatch": "manipulates torch's dispatch mode stack",
    "overrides": "manipulates torch's function mode stack",
    "_C": "reaches into torch._C (it can switch the verifier's op recording off)",
    "__globals__": "reads another function's globals",
    "__subclasses__": "walks the class hierarchy",
    "__code__": "rewrites code objects",
    "__closure__": "reads closures",
    "__dict__": "edits namespaces directly",
    "__builtins__": "reaches into the builtins",
    "_getframe": "inspects the caller's frames",
    "f_back": "inspects the caller's frames",
    "f_globals": "inspects the caller's frames",
    "f_locals": "inspects the caller's frames",
    "backends": "changes global precision or library settings (torch.backends)",
    "set_float32_matmul_precision": "changes the global matmul precision",
    "set_default_dtype": "changes the default dtype",
    "use_deterministic_algorithms": "changes global determinism settings",
    "set_flush_denormal": "changes global denormal handling",
}
# Attributes a subkernel never needs: concurrency outside the timed stream.
_SUBKERNEL_ATTRS = {
    "Stream": "uses a CUDA stream of its own (work outside the timed stream)",
    "ExternalStream": "uses a CUDA stream of its own (work outside the timed stream)",
    "stream": "switches CUDA streams (work outside the timed stream)",
    "set_stream": "switches CUDA streams (work outside the timed stream)",
    "Event": "records CUDA events (a kernel needs none)",
    "CUDAGraph": "replays CUDA graphs",
    "graphs": "replays CUDA graphs",
    "_dynamo": "calls into torch._dynamo",
    "compile": "calls torch.compile (a candidate is a kernel, not a compiler call)",
    "manual_seed": "reseeds the random generator",
    "testing": "uses triton.testing (a candidate computes; it does not benchmark)",
    "do_bench": "benchmarks inside the candidate",
}

_load_counter = itertools.count()


class CandidateError(Exception):
    """A candidate that cannot be run: `status` is `compile_error` or `rejected`."""

    def __init__(self, status: str, reason: str, line: int | None = None,
                 tb: str | None = None) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.line = line
        self.traceback = tb


@dataclass
class Candidate:
    """An imported candidate. `unload()` removes its module from sys.modules."""

    name: str
    origin: str
    path: Path
    sha256: str
    module: types.ModuleType
    uses_torch: tuple[str, ...] = ()
    watched: bool = False  # under the audit hook (mkworker/audit.py)
    cuda: cuda_runtime.Launcher | None = None  # CUDA C++ candidates: their `_mk_cuda`
    _unloaded: bool = field(default=False, repr=False)

    def attr(self, name: str) -> Any:
        try:
            return self.module.__dict__[name]
        except KeyError:
            raise CandidateError("compile_error", f"{self.path.name} defines no `{name}`") from None

    @property
    def run(self) -> Callable[..., Any]:
        fn = self.attr("run")
        if not callable(fn):
            raise CandidateError("compile_error", "`run` is not a function")
        return fn

    def unload(self) -> None:
        if not self._unloaded:
            if self.cuda is not None:
                self.cuda.close()
            sys.modules.pop(self.module.__name__, None)
            self._unloaded = True
            if self.watched:
                audit.unwatch(self.path)


def cache_dir() -> Path:
    """$MKEVOLVE_CACHE_DIR/candidates, else ~/.cache/mkevolve/candidates."""
    base = os.environ.get("MKEVOLVE_CACHE_DIR")
    root = Path(base) if base else Path.home() / ".cache" / "mkevolve"
    return root / "candidates"


def write_source(source: str) -> tuple[Path, str]:
    """Writes `source` to its content-addressed file (once); returns (path, sha256).

    Written to a temporary file and renamed, so concurrent workers never see a partial file.
    """
    sha = hashlib.sha256(source.encode("utf-8")).hexdigest()
    d = cache_dir() / sha[:2]
    path = d / f"mk_{sha[:40]}.py"
    if path.exists():
        return path, sha
    d.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-", suffix=".py")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(source)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path, sha


def _root_name(node: ast.expr) -> str | None:
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


class _Scanner(ast.NodeVisitor):
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.findings: list[tuple[int, str]] = []
        self.module_aliases: set[str] = set()
        self.attrs = dict(_TAMPER_ATTRS)
        if policy == "subkernel":
            self.attrs.update(_SUBKERNEL_ATTRS)

    def _flag(self, node: ast.AST, why: str) -> None:
        self.findings.append((getattr(node, "lineno", 0), why))

    def _check_module(self, node: ast.AST, name: str) -> None:
        parts = name.split(".")
        if parts[0] in _BANNED_IMPORTS:
            self._flag(node, f"imports `{name}`, which reaches into the interpreter")
        elif self.policy == "subkernel" and parts[0] not in _SUBKERNEL_IMPORTS:
            self._flag(node, f"imports `{name}`; a candidate may import only torch, triton "
                             "and math (docs/candidates.md)")
        for p in parts[1:]:
            if p in self.attrs:
                self._flag(node, f"imports `{name}`: {self.attrs[p]}")

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self._check_module(node, a.name)
            self.module_aliases.add((a.asname or a.name).split(".")[0])

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        mod = node.module or ""
        if node.level:
            self._flag(node, "uses a relative import")
            return
        self._check_module(node, mod)
        for a in node.names:
            if a.name in self.attrs:
                self._flag(node, f"imports `{a.name}` from {mod}: {self.attrs[a.name]}")
            elif a.name in _BANNED_NAMES:
                self._flag(node, f"imports `{a.name}`: {_BANNED_NAMES[a.name]}")
            self.module_aliases.add(a.asname or a.name)

    def visit_Name(self, node: ast.Name) -> None:
        if self.policy == "composition" and node.id in _COMPOSITION_NAMES_OK:
            return  # a user's Model may look its layers up by name
        if node.id in _BANNED_NAMES:
            self._flag(node, f"uses `{node.id}`, which {_BANNED_NAMES[node.id]}")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr in self.attrs:
            self._flag(node, f"uses `.{node.attr}`: {self.attrs[node.attr]}")
        self.generic_visit(node)

    def _check_targets(self, targets: list[ast.expr]) -> None:
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute) and _root_name(sub) in self.module_aliases:
                    self._flag(t, f"assigns to `{ast.unparse(sub)}`: a candidate must not "
                                  "rebind attributes of torch, triton or math")
                    break

    def visit_Assign(self, node: ast.Assign) -> None:
        self._check_targets(node.targets)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._check_targets([node.target])
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._check_targets([node.target])
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        self._check_targets(node.targets)
        self.generic_visit(node)


def scan_source(source: str, policy: Policy = "subkernel",
                filename: str = "<candidate>") -> list[tuple[int, str]]:
    """Static policy check. Returns [(line, reason)], empty when the source is acceptable.

    Raises CandidateError(compile_error) on a syntax error.
    """
    try:
        tree = ast.parse(source, filename=filename)
    except SyntaxError as e:
        raise CandidateError("compile_error", f"syntax error: {e.msg}", e.lineno) from None
    s = _Scanner(policy)
    # Imports first so that aliases are known when assignments are checked.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            for a in node.names:
                s.module_aliases.add((a.asname or a.name).split(".")[0])
    s.visit(tree)
    return sorted(set(s.findings))


def error_line(exc: BaseException, path: Path | str) -> int | None:
    """Line in `path` where `exc` arose: the innermost traceback frame in that file.

    Triton compile errors carry a line relative to the jitted function; it is mapped back
    to the file through the function's first line.
    """
    path = str(path)
    if isinstance(exc, SyntaxError) and exc.filename == path:
        return exc.lineno
    line = _triton_error_line(exc, path)
    if line is not None:
        return line
    found: int | None = None
    for fs in traceback.extract_tb(exc.__traceback__):
        if fs.filename == path:
            found = fs.lineno
    if found is None and exc.__cause__ is not None and exc.__cause__ is not exc:
        return error_line(exc.__cause__, path)
    return found


def _triton_error_line(exc: BaseException, path: str) -> int | None:
    node = getattr(exc, "node", None)
    src = getattr(exc, "src", None)
    rel = getattr(node, "lineno", None)
    if not isinstance(src, str) or not isinstance(rel, int):
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return None
    # The jitted source starts at its `def` line; find it in the file.
    first = src.split("\n", 1)[0].strip()
    for i, ln in enumerate(text.split("\n"), start=1):
        if ln.strip() == first:
            return i + rel - 1
    return None


def is_triton_compile_error(exc: BaseException) -> bool:
    """True for Triton's compile-time errors (raised at the first launch, not at import)."""
    try:
        from triton.compiler.errors import CompilationError
    except ImportError:  # pragma: no cover - triton is a dependency
        return False
    e: BaseException | None = exc
    while e is not None:
        if isinstance(e, CompilationError):
            return True
        e = e.__cause__
    return False


def kernel_codes(module: types.ModuleType) -> frozenset[tuple[str, str]]:
    """Code objects of the module's @triton.jit functions (through autotune/heuristics
    wrappers): an error raised inside one of them under the interpreter is what the
    compiler would have rejected on a GPU."""
    codes: set[tuple[str, str]] = set()
    for obj in list(module.__dict__.values()):
        seen = 0
        while obj is not None and not isinstance(obj, types.FunctionType) and seen < 8:
            obj = getattr(obj, "fn", None)
            seen += 1
        if isinstance(obj, types.FunctionType) and seen > 0:
            codes.add((obj.__code__.co_filename, obj.__code__.co_name))
    return frozenset(codes)


def raised_in(exc: BaseException, codes: frozenset[tuple[str, str]]) -> bool:
    """True when a frame of `exc`'s traceback runs one of `codes` (file, function name); the
    interpreter may run a rewritten copy of the kernel, so code objects are not compared."""
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if (code.co_filename, code.co_name) in codes:
            return True
        tb = tb.tb_next
    return False


def short_traceback(exc: BaseException, limit: int = 4000) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= limit else "..." + text[-limit:]


def _import_path(path: Path, tag: str) -> types.ModuleType:
    modname = f"mkcand_{tag}_{next(_load_counter)}"
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        raise CandidateError("compile_error", f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module  # triton resolves a kernel's globals through its module
    try:
        spec.loader.exec_module(module)
    except CandidateError:
        sys.modules.pop(modname, None)
        raise
    except SyntaxError as e:
        sys.modules.pop(modname, None)
        raise CandidateError("compile_error", f"syntax error: {e.msg}", e.lineno) from None
    except KeyboardInterrupt:
        sys.modules.pop(modname, None)
        raise
    except BaseException as e:  # SystemExit from a candidate is its failure, not ours
        sys.modules.pop(modname, None)
        raise CandidateError("compile_error",
                             f"import failed: {type(e).__name__}: {e}",
                             error_line(e, path), short_traceback(e)) from None
    return module


def _watched_import(path: Path, tag: str) -> types.ModuleType:
    """Imports candidate code under the audit hook: from its first line on, it may
    not start processes or open sockets (mkworker/audit.py)."""
    audit.watch(path)
    try:
        return _import_path(path, tag)
    except BaseException:
        audit.unwatch(path)
        raise


def _uses_torch(module: types.ModuleType) -> tuple[str, ...]:
    raw = module.__dict__.get("MK_USES_TORCH", ())
    if isinstance(raw, str):
        raw = (raw,)
    if not isinstance(raw, tuple | list) or not all(isinstance(x, str) for x in raw):
        raise CandidateError("rejected", "MK_USES_TORCH must be a tuple of op names, "
                                         "e.g. (\"conv2d\",)")
    return tuple(op_short_name(x) for x in raw)


def op_short_name(op: str) -> str:
    """Last dotted component without dunders or an in-place `_`, like mk_op_short_name.

    "torch.Tensor.__iadd__" -> "iadd", "torch.Tensor.add_" -> "add",
    "torch.Tensor.shape.__get__" -> "shape", "aten.relu.default" -> "relu".
    """
    parts = [p for p in op.split(".") if p]
    if not parts:
        return op
    if parts[0] == "aten" and len(parts) >= 2:
        parts = parts[:2]  # drop the overload name
    last = parts[-1]
    if last in ("__get__", "__set__") and len(parts) > 1:
        last = parts[-2]
    if last.startswith("__") and last.endswith("__") and len(last) > 4:
        last = last[2:-2]
    if last.endswith("_") and len(last) > 1:
        last = last[:-1]
    return last


def load_candidate(source: str, name: str = "candidate", origin: str = "builtin",
                   policy: Policy = "subkernel", cubin: bytes | None = None) -> Candidate:
    """Writes, scans and imports a candidate. Raises CandidateError.

    Candidates whose origin is `reference` skip the static scan's subkernel rules (they are
    PyTorch itself) but not the tamper rules. A CUDA C++ candidate (`MK_BACKEND = "cuda"`)
    gets its `_mk_cuda` launcher over `cubin`, which the engine compiled (cuda_runtime.py).
    """
    if not isinstance(source, str) or not source.strip():
        raise CandidateError("compile_error", "the candidate source is empty")
    path, sha = write_source(source)
    effective: Policy = "composition" if origin == "reference" else policy
    findings = scan_source(source, effective, str(path))
    if findings:
        line, why = findings[0]
        more = f" (and {len(findings) - 1} more)" if len(findings) > 1 else ""
        raise CandidateError("rejected", f"line {line}: {why}{more}", line)
    module = _watched_import(path, sha[:12])
    cand = Candidate(name=name, origin=origin, path=path, sha256=sha, module=module,
                     watched=True)
    try:
        cand.uses_torch = _uses_torch(module)
        if cuda_runtime.is_cuda_module(module):
            try:
                cand.cuda = cuda_runtime.bind(module, cubin)
            except ValueError as e:
                raise CandidateError("compile_error", str(e)) from None
        if policy == "subkernel":
            _ = cand.run
    except CandidateError:
        cand.unload()
        raise
    return cand


def load_file(path: str | Path, policy: Policy | None = "composition") -> Candidate:
    """Imports a user file freshly from where it is: a ModelNew file after the scan
    (`policy`), the user's own problem file without one (`policy=None`)."""
    p = Path(path).resolve()
    try:
        source = p.read_text(encoding="utf-8")
    except OSError as e:
        raise CandidateError("compile_error", f"cannot read {p}: {e.strerror}") from None
    findings = scan_source(source, policy, str(p)) if policy is not None else []
    if findings:
        line, why = findings[0]
        raise CandidateError("rejected", f"line {line}: {why}", line)
    sha = hashlib.sha256(source.encode("utf-8")).hexdigest()
    if policy is None:
        module = _import_path(p, sha[:12])
    else:
        module = _watched_import(p, sha[:12])
    return Candidate(name=p.stem, origin="file", path=p, sha256=sha, module=module,
                     watched=policy is not None)
