"""Runtime containment of candidate code: an audit hook (PEP 578) that refuses
processes, signals to other processes, sockets and native libraries asked for
by a candidate (docs/verify.md, "Containment").

The static scan (candidate.scan_source) rejects ``import os`` or
``subprocess``, but not what torch re-exports: ``torch.os.system``,
``torch.os.fork`` and ``torch.multiprocessing.Process`` reach the same calls.
The hook sees the call itself. It is installed once per worker and decides by
the stack: walking outwards from the event, the first frame that is either a
*candidate* file (registered with :func:`watch`) or a *trusted* compiler path
(Triton, torch's inductor and C++-extension builder, this package) decides.
A candidate frame first: the event is refused (PermissionError) and recorded,
so that a candidate catching the exception is still rejected. A trusted frame
first: allowed (Triton compiling a candidate's kernel runs ptxas and cc).
Frames of other library code (the standard library, the rest of torch) are
looked through, so ``torch.multiprocessing.spawn`` is the candidate's call.

Limits: native code (a C++ extension the candidate builds, a CUDA kernel)
raises no audit events; what it starts is still ended with the worker's tree
(mkworker/guard.py) and the worker's memory limit applies to it.
"""

from __future__ import annotations

import os
import sys
import threading
from dataclasses import dataclass
from types import FrameType
from typing import Any

# event -> what a candidate tried to do (shown in the verdict)
EVENTS: dict[str, str] = {
    "os.fork": "start a process (os.fork)",
    "os.forkpty": "start a process (os.forkpty)",
    "os.system": "start a process (os.system)",
    "os.exec": "start a program (os.exec*)",
    "os.posix_spawn": "start a process (os.posix_spawn)",
    "os.spawn": "start a process (os.spawn*)",
    "os.startfile": "start a program (os.startfile)",
    "subprocess.Popen": "start a process (subprocess.Popen)",
    "pty.spawn": "start a process (pty.spawn)",
    "os.kill": "signal a process (os.kill)",
    "os.killpg": "signal a process group (os.killpg)",
    "signal.pthread_kill": "signal a thread (signal.pthread_kill)",
    "socket.__new__": "open a socket",
    "socket.socketpair": "open a socket pair",
    "socket.connect": "connect a socket",
    "socket.bind": "bind a socket",
    "socket.getaddrinfo": "resolve a host name",
    "socket.gethostbyname": "resolve a host name",
    "ctypes.dlopen": "load a native library (ctypes)",
}


@dataclass
class Violation:
    event: str
    what: str
    file: str
    line: int | None

    def reason(self) -> str:
        where = f" at line {self.line}" if self.line else ""
        return (f"the candidate tried to {self.what}{where}: candidates may not start "
                f"processes, signal other processes, open sockets or load native libraries")


_lock = threading.Lock()
_watched: dict[str, int] = {}  # candidate file -> how many loads hold it
_violations: list[Violation] = []
_installed = False


def _package_dir(name: str) -> str | None:
    mod = sys.modules.get(name)
    f = getattr(mod, "__file__", None)
    return os.path.dirname(os.path.realpath(f)) + os.sep if f else None


_trusted_cache: list[str] = []


def _trusted_prefixes() -> list[str]:
    """Paths whose code may start processes: compilers (resolved once torch and
    triton are imported)."""
    if _trusted_cache and len(_trusted_cache) >= 3:
        return _trusted_cache
    out = [os.path.dirname(os.path.realpath(__file__)) + os.sep]
    triton_dir = _package_dir("triton")
    if triton_dir:
        out.append(triton_dir)
    torch_dir = _package_dir("torch")
    if torch_dir:
        out += [torch_dir + "_inductor" + os.sep,
                torch_dir + "utils" + os.sep + "cpp_extension.py"]
    _trusted_cache[:] = out
    return out


def _decide(frame: FrameType | None) -> tuple[str, int] | None:
    """(file, line) of the candidate frame that asked, or None when allowed."""
    trusted = _trusted_prefixes()
    while frame is not None:
        fn = frame.f_code.co_filename
        if fn in _watched:
            return fn, frame.f_lineno
        if fn.startswith(tuple(trusted)):
            return None
        frame = frame.f_back
    return None


def _hook(event: str, args: tuple[Any, ...]) -> None:
    what = EVENTS.get(event)
    if what is None or not _watched:
        return
    who = _decide(sys._getframe(1))
    if who is None:
        return
    with _lock:
        if len(_violations) < 20:
            _violations.append(Violation(event, what, who[0], who[1]))
    raise PermissionError(f"mkevolve: candidates may not {what}")


def install() -> None:
    """Installs the hook (once per process; audit hooks cannot be removed)."""
    global _installed
    if not _installed:
        sys.addaudithook(_hook)
        _installed = True


def watch(path: str | os.PathLike[str]) -> None:
    """Marks a candidate file: events asked for by its code are refused."""
    install()
    key = str(path)
    with _lock:
        _watched[key] = _watched.get(key, 0) + 1


def unwatch(path: str | os.PathLike[str]) -> None:
    key = str(path)
    with _lock:
        n = _watched.get(key, 0) - 1
        if n > 0:
            _watched[key] = n
        else:
            _watched.pop(key, None)


def take() -> Violation | None:
    """The first violation since the last call (and forgets them all)."""
    with _lock:
        first = _violations[0] if _violations else None
        _violations.clear()
    return first


def enforce(result: dict[str, Any], violation: Violation | None) -> dict[str, Any]:
    """Turns a verification result into `rejected` when the candidate asked for a
    refused event at any point of the request (import, trials, timing), whatever
    it did with the exception."""
    if violation is None or "status" not in result:
        return result
    result["status"] = "rejected"
    result["reason"] = violation.reason()
    result["line"] = violation.line
    result["error_kind"] = None
    result["timing"] = {"available": False, "reason": "not timed: the candidate was rejected"}
    return result
