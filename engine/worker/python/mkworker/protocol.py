"""JSON-lines protocol of docs/protocol.md: envelope, errors, method registry.

No torch import here: the registry and the error mapping are used by every
method module (capture, verify, ...) and by the server before torch loads.

Registry API (stable; docs/capture.md):

    from mkworker.protocol import register, WorkerError, Progress

    def verify_subkernel(params: dict, progress: Progress) -> dict:
        progress("compiling", 0.1)
        ...
        raise WorkerError("unsupported", "no GPU", line=None)
    register("verify_subkernel", verify_subkernel)
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any

PROTOCOL_VERSION = 1

ERROR_KINDS = frozenset({
    "bad_request", "syntax_error", "import_error", "missing", "python_error",
    "data_dependent", "unsupported", "oom", "internal",
})

Params = dict[str, Any]
Result = dict[str, Any]
Progress = Callable[[str, float], None]
Method = Callable[[Params, Progress], Result]

_METHODS: dict[str, Method] = {}

# Longest message / traceback text sent back; the engine keeps stderr anyway.
_MAX_MESSAGE = 4000
_MAX_TRACEBACK = 16000


class WorkerError(Exception):
    """An error a method reports as ``{"ok": false, "error": {...}}``.

    ``kind`` is one of ERROR_KINDS; ``line`` is the 1-based line in the
    user's file the error concerns (None when unknown)."""

    def __init__(self, kind: str, message: str, *, line: int | None = None,
                 traceback_text: str | None = None, file: str | None = None) -> None:
        if kind not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line
        self.traceback_text = traceback_text
        self.file = file

    def to_json(self) -> dict[str, Any]:
        err: dict[str, Any] = {"kind": self.kind, "message": _clip(self.message, _MAX_MESSAGE)}
        if self.line is not None:
            err["line"] = self.line
        if self.file is not None:
            err["file"] = self.file
        if self.traceback_text:
            err["traceback"] = _clip_tail(self.traceback_text, _MAX_TRACEBACK)
        return err


def register(name: str, fn: Method, *, replace: bool = False) -> None:
    """Adds a method. ``fn(params, progress) -> result dict`` runs on the
    server's thread; it raises WorkerError for expected failures; any other
    exception becomes python_error (with the user line when a traceback
    frame lies in a ``.py`` file named by a string param) or internal.
    Registering a taken name raises ValueError unless ``replace``."""
    if not isinstance(name, str) or not name:
        raise ValueError("method name must be a non-empty string")
    if name in _METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered")
    _METHODS[name] = fn


def lookup(name: str) -> Method | None:
    return _METHODS.get(name)


def method_names() -> list[str]:
    return sorted(_METHODS)


def param(params: Params, key: str, typ: type | tuple[type, ...], default: Any = ...) -> Any:
    """Reads one parameter, raising bad_request when it is missing or mistyped
    (bool is never accepted as int)."""
    if key not in params or params[key] is None:
        if default is ...:
            raise WorkerError("bad_request", f"missing parameter {key!r}")
        return default
    value = params[key]
    types = typ if isinstance(typ, tuple) else (typ,)
    if isinstance(value, bool) and bool not in types:
        raise WorkerError("bad_request", f"parameter {key!r} must be {_type_names(types)}")
    if not isinstance(value, types):
        raise WorkerError("bad_request", f"parameter {key!r} must be {_type_names(types)}, "
                          f"got {type(value).__name__}")
    return value


def _type_names(types: tuple[type, ...]) -> str:
    return " or ".join(t.__name__ for t in types)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _clip_tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else "...\n" + text[-(limit - 4):]


# --- exceptions -> error objects ------------------------------------------------

def user_line(tb: TracebackType | None, files: Iterable[str]) -> tuple[int | None, str | None]:
    """(line, file) of the innermost traceback frame that lies in one of
    ``files`` (compared as given and as real paths)."""
    wanted = set()
    for f in files:
        wanted.add(f)
        wanted.add(os.path.realpath(f))
    found: tuple[int | None, str | None] = (None, None)
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name in wanted:
            found = (tb.tb_lineno, name)
        tb = tb.tb_next
    return found


def _is_oom(exc: BaseException) -> bool:
    if isinstance(exc, MemoryError):
        return True
    return type(exc).__name__ == "OutOfMemoryError" or (
        isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()
        and "CUDA" in str(exc))


def files_in_params(params: Params) -> list[str]:
    """String parameters that name Python files: where user code lives."""
    return [v for v in params.values()
            if isinstance(v, str) and v.endswith(".py") and os.path.isabs(v)]


def error_from_exception(exc: BaseException, user_files: Iterable[str] = ()) -> WorkerError:
    """Maps any exception escaping a method to a WorkerError."""
    if isinstance(exc, WorkerError):
        return exc
    files = list(user_files)
    tb_text = "".join(traceback.format_exception(exc))
    if isinstance(exc, SyntaxError) and exc.filename in files:
        return WorkerError("syntax_error", f"{exc.msg} (line {exc.lineno})", line=exc.lineno,
                           file=exc.filename, traceback_text=tb_text)
    message = f"{type(exc).__name__}: {exc}"
    if _is_oom(exc):
        return WorkerError("oom", message, traceback_text=tb_text)
    line, file = user_line(exc.__traceback__, files)
    if isinstance(exc, SystemExit):
        message = f"user code called exit({exc.code!r})"
    if line is not None:
        return WorkerError("python_error", message, line=line, file=file, traceback_text=tb_text)
    if isinstance(exc, SystemExit):
        return WorkerError("python_error", message, traceback_text=tb_text)
    return WorkerError("internal", message, traceback_text=tb_text)


# --- envelope --------------------------------------------------------------------

def _finite(obj: Any) -> Any:
    """JSON has no NaN/Inf: non-finite floats in results go out as strings."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return "nan" if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {k: _finite(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_finite(v) for v in obj]
    return obj


def dumps(obj: Any) -> str:
    try:
        return json.dumps(obj, allow_nan=False, separators=(",", ":"))
    except ValueError:
        return json.dumps(_finite(obj), allow_nan=False, separators=(",", ":"))


def ok_line(req_id: Any, result: Result) -> str:
    return dumps({"v": PROTOCOL_VERSION, "id": req_id, "ok": True, "result": result})


def error_line(req_id: Any, err: WorkerError) -> str:
    return dumps({"v": PROTOCOL_VERSION, "id": req_id, "ok": False, "error": err.to_json()})


def progress_line(req_id: Any, message: str, fraction: float) -> str:
    frac = min(1.0, max(0.0, float(fraction))) if math.isfinite(fraction) else 0.0
    return dumps({"v": PROTOCOL_VERSION, "id": req_id,
                  "progress": {"message": str(message), "fraction": frac}})


def parse_request(line: bytes | str) -> tuple[Any, str, Params]:
    """(id, method, params) of one request line; WorkerError(bad_request) with
    ``.req_id`` set to whatever id could be read."""
    try:
        req = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _bad(None, f"invalid JSON: {exc}") from None
    if not isinstance(req, dict):
        raise _bad(None, "a request must be a JSON object")
    req_id = req.get("id")
    if isinstance(req_id, dict | list):
        raise _bad(None, "id must be a number or a string")
    version = req.get("v", PROTOCOL_VERSION)
    if version != PROTOCOL_VERSION:
        raise _bad(req_id, f"protocol version {version!r} not supported (this worker speaks "
                   f"{PROTOCOL_VERSION})")
    method = req.get("method")
    if not isinstance(method, str):
        raise _bad(req_id, "missing method")
    params = req.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise _bad(req_id, "params must be an object")
    return req_id, method, params


def _bad(req_id: Any, message: str) -> WorkerError:
    err = WorkerError("bad_request", message)
    err.req_id = req_id  # type: ignore[attr-defined]
    return err
