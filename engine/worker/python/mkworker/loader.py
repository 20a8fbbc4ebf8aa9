"""Imports a user's module file, fresh every time.

Each load executes the file as a new module with a unique name, so an edited
file is always seen as edited and two versions never share globals. Errors
are reported in the user's terms: a syntax error with its line, a missing
``Model`` / ``get_inputs`` / ``get_init_inputs`` by name, an exception with
the line of the user's file where it happened.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import sys
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from mkworker.protocol import WorkerError, error_from_exception

# Files above this size are refused before compiling (a 10 MB file compiles in
# about a second; 64 MiB is far beyond any hand-written module).
MAX_FILE_BYTES = 64 << 20

_counter = itertools.count()


@dataclass
class Problem:
    """A loaded module file and the KernelBench entry points in it."""

    path: str
    source: bytes
    sha256: str
    module: types.ModuleType

    def model_class(self, name: str = "Model") -> type:
        import torch

        cls = getattr(self.module, name, None)
        if cls is None:
            raise WorkerError("missing", f"{os.path.basename(self.path)} defines no class "
                              f"{name!r} (a KernelBench problem defines `class {name}(nn.Module)`)",
                              file=self.path)
        if not isinstance(cls, type) or not issubclass(cls, torch.nn.Module):
            raise WorkerError("missing", f"{name!r} in {os.path.basename(self.path)} is not a "
                              "torch.nn.Module subclass", file=self.path,
                              line=_def_line(cls))
        return cls

    def function(self, name: str) -> Callable[..., Any]:
        fn = getattr(self.module, name, None)
        if fn is None:
            raise WorkerError("missing", f"{os.path.basename(self.path)} defines no function "
                              f"{name}() (a KernelBench problem defines get_inputs() and "
                              "get_init_inputs())", file=self.path)
        if not callable(fn):
            raise WorkerError("missing", f"{name} in {os.path.basename(self.path)} is not a "
                              "function", file=self.path)
        return fn

    def call_list(self, name: str) -> list[Any]:
        """Calls get_inputs / get_init_inputs and checks it returns a sequence."""
        fn = self.function(name)
        with self.user_code(f"{name}()"):
            value = fn()
        if isinstance(value, tuple):
            value = list(value)
        if not isinstance(value, list):
            raise WorkerError("python_error", f"{name}() must return a list, got "
                              f"{type(value).__name__}", file=self.path, line=_def_line(fn))
        return value

    @contextmanager
    def user_code(self, what: str) -> Iterator[None]:
        """Maps exceptions raised by user code to python_error with the line."""
        with on_path(self.path):
            try:
                yield
            except WorkerError:
                raise
            except Exception as exc:
                err = error_from_exception(exc, [self.path])
                if err.kind == "internal":  # no frame in the user's file
                    err = WorkerError("python_error", err.message,
                                      traceback_text=err.traceback_text)
                err.message = f"in {what}: {err.message}"
                raise err from exc


def _def_line(obj: object) -> int | None:
    code = getattr(obj, "__code__", None)
    return code.co_firstlineno if code is not None else None


@contextmanager
def on_path(path: str) -> Iterator[None]:
    """The file's directory on sys.path, so it can import its neighbours."""
    directory = os.path.dirname(path)
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    try:
        yield
    finally:
        if added:
            try:
                sys.path.remove(directory)
            except ValueError:
                pass


def read_source(path: str) -> tuple[bytes, str]:
    """(bytes, sha256 hex) of a module file; import_error when unreadable."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise WorkerError("bad_request", f"file must be an absolute path, got {path!r}")
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise WorkerError("unsupported", f"{os.path.basename(path)} is {size / 1e6:.1f} MB; "
                              f"module files above {MAX_FILE_BYTES >> 20} MiB are not analysed",
                              file=path)
        with open(path, "rb") as fh:
            source = fh.read()
    except OSError as exc:
        raise WorkerError("import_error", f"cannot read {path}: {exc.strerror}",
                          file=path) from None
    return source, hashlib.sha256(source).hexdigest()


def load(path: str, source: bytes | None = None) -> Problem:
    """Executes ``path`` as a fresh module. ``source`` (already read) avoids a
    second read so the hash matches what runs."""
    if source is None:
        source, sha = read_source(path)
    else:
        sha = hashlib.sha256(source).hexdigest()
    try:
        code = compile(source, path, "exec", dont_inherit=True)
    except SyntaxError as exc:
        raise WorkerError("syntax_error", f"{exc.msg} (line {exc.lineno})", line=exc.lineno,
                          file=path) from None
    except ValueError as exc:  # null bytes, bad encoding declaration
        raise WorkerError("syntax_error", f"cannot compile {os.path.basename(path)}: {exc}",
                          file=path) from None
    name = f"mk_user_{next(_counter)}_{sha[:12]}"
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module  # dataclasses, pickling and typing look modules up by name
    problem = Problem(path, source, sha, module)
    try:
        with on_path(path):
            exec(code, module.__dict__)
    except (ImportError, ModuleNotFoundError) as exc:
        sys.modules.pop(name, None)
        err = error_from_exception(exc, [path])
        raise WorkerError("import_error", f"{type(exc).__name__}: {exc}", line=err.line,
                          file=path, traceback_text=err.traceback_text) from exc
    except BaseException as exc:
        sys.modules.pop(name, None)
        if isinstance(exc, KeyboardInterrupt):
            raise
        err = error_from_exception(exc, [path])
        if err.kind in ("internal", "python_error"):
            err = WorkerError("python_error", f"while importing {os.path.basename(path)}: "
                              f"{err.message}", line=err.line, file=path,
                              traceback_text=err.traceback_text)
        raise err from exc
    return problem


def unload(problem: Problem) -> None:
    """Drops the module from sys.modules (its objects live on while referenced)."""
    sys.modules.pop(problem.module.__name__, None)
