"""The runtime worker's main loop: JSON lines on stdin, one response per line
on the original stdout.

The protocol owns file descriptor 1 exclusively: at start the server keeps a
private duplicate of it and points fd 1 and ``sys.stdout`` at stderr, so a
``print`` in user code, a C extension's printf or a compiler's chatter can
never corrupt a response. Requests run one at a time, in order.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import platform
import sys
import threading
import traceback
from pathlib import Path
from typing import IO, Any

from mkworker import audit, memory, protocol
from mkworker.protocol import Params, Progress, Result, WorkerError


def configure_triton_env() -> None:
    """On a machine without CUDA, Triton kernels run in its interpreter.
    TRITON_INTERPRET is read when triton is imported, so this must run first;
    a value set by the caller is left alone."""
    if "TRITON_INTERPRET" in os.environ:
        return
    import torch  # torch does not import triton

    if not torch.cuda.is_available():
        os.environ["TRITON_INTERPRET"] = "1"
        if "triton" in sys.modules:
            print("mkworker: warning: triton was imported before TRITON_INTERPRET was set",
                  file=sys.stderr)


class Channel:
    """The protocol's output stream (thread-safe, one line per write)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()

    def send(self, line: str) -> None:
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()


def claim_stdout() -> Channel:
    """Moves the protocol to a private duplicate of fd 1 and sends everything
    else written to fd 1 / sys.stdout to stderr."""
    sys.stdout.flush()
    proto_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return Channel(os.fdopen(proto_fd, "w", encoding="utf-8", buffering=1))


def _worker_version() -> str:
    """Content hash of the worker's own sources: verdicts cached by an older
    verifier (other guards, other comparisons) must not answer for this one."""
    digest = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _env_files(*modules: Any) -> list[str]:
    """Files whose change means a different environment: the interpreter, the given
    modules' files (torch/version.py, triton/__init__.py: rewritten by every install)
    and the worker's own sources. The engine records their stamps with this hello so
    that a later run can trust it without starting a worker (docs/runtime.md)."""
    files = [os.path.realpath(sys.executable)]
    for m in modules:
        f = getattr(m, "__file__", None)
        if f:
            files.append(os.path.realpath(f))
    files += sorted(str(p.resolve()) for p in Path(__file__).parent.glob("*.py"))
    return files


def _hello(params: Params, progress: Progress) -> Result:
    import torch
    import torch.version

    triton_mod: Any = None
    try:
        import triton

        triton_version: str | None = triton.__version__
        triton_mod = triton
    except Exception:  # triton missing or broken: report, do not fail the handshake
        triton_version = None
    cuda = torch.cuda.is_available()
    return {
        "protocol": protocol.PROTOCOL_VERSION,
        "torch": torch.__version__.split("+")[0],
        "torch_full": torch.__version__,
        "triton": triton_version,
        "python": platform.python_version(),
        "device": torch.cuda.get_device_name(0) if cuda else "cpu",
        "cuda": torch.version.cuda if cuda else None,
        "triton_interpret": os.environ.get("TRITON_INTERPRET") == "1",
        "pid": os.getpid(),
        "worker_version": _worker_version(),
        "methods": protocol.method_names(),
        "env_files": _env_files(torch.version, *([triton_mod] if triton_mod else [])),
    }


def _shutdown(params: Params, progress: Progress) -> Result:
    return {}


def load_methods() -> list[str]:
    """Registers the builtin methods and imports the method modules that
    exist (mkworker.verify, mkworker.native_state and mkworker.kbcheck are optional).
    Returns import problems as text."""
    problems: list[str] = []
    for name, fn in (("hello", _hello), ("shutdown", _shutdown)):
        if protocol.lookup(name) is None:
            protocol.register(name, fn)
    for module in ("mkworker.capture", "mkworker.verify", "mkworker.native_state",
                   "mkworker.kbcheck"):
        if importlib.util.find_spec(module) is None:
            continue
        try:
            importlib.import_module(module)
        except Exception:
            problems.append(f"{module}: {traceback.format_exc()}")
    return problems


def cuda_context_usable() -> bool:
    """False when CUDA was used in this process and no longer works."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_initialized():
        return True
    try:
        torch.cuda.synchronize()
        torch.empty(1, device="cuda").fill_(1.0).item()
    except Exception:
        return False
    return True


_warm_thread: threading.Thread | None = None


def start_warm_up() -> None:
    """Warms the capture machinery in the background while the engine does
    its handshake; methods wait for it (wait_warm) before using torch."""
    global _warm_thread
    capture = sys.modules.get("mkworker.capture")
    if capture is None or _warm_thread is not None:
        return

    def run() -> None:
        try:
            capture.warm_up()
        except Exception:
            print(f"mkworker: warm-up failed: {traceback.format_exc()}", file=sys.stderr)

    # torch 2.11 crashed (SIGSEGV in FakeTensorMode.__enter__) when the warm-up ran on
    # another thread on a GPU machine with CUDA hidden: warm up synchronously by default.
    mode = os.environ.get("MKWORKER_WARMUP", "sync")
    if mode == "off":
        return
    if mode == "sync":
        run()
        return
    _warm_thread = threading.Thread(target=run, name="mkworker-warm-up", daemon=True)
    _warm_thread.start()


def wait_warm() -> None:
    if _warm_thread is not None:
        _warm_thread.join()


class Server:
    def __init__(self, channel: Channel, load_problems: list[str] | None = None) -> None:
        self.channel = channel
        self.load_problems = load_problems or []

    def handle(self, line: bytes) -> bool:
        """Answers one request line. Returns False when the worker should stop."""
        try:
            req_id, method, params = protocol.parse_request(line)
        except WorkerError as err:
            self.channel.send(protocol.error_line(getattr(err, "req_id", None), err))
            return True
        fn = protocol.lookup(method)
        if fn is None:
            message = (f"unknown method {method!r} (known: "
                       f"{', '.join(protocol.method_names())})")
            if self.load_problems:
                message += "; method modules that failed to load: " + " | ".join(
                    p.splitlines()[0] + " " + p.strip().splitlines()[-1]
                    for p in self.load_problems)
            err = WorkerError("bad_request", message)
            self.channel.send(protocol.error_line(req_id, err))
            return True

        def progress(message: str, fraction: float) -> None:
            self.channel.send(protocol.progress_line(req_id, message, fraction))

        line, oom = self._run(req_id, fn, params, progress)
        if oom:
            line = self._after_oom(req_id, fn, params, progress, line)
        self.channel.send(line)
        if oom and (why := memory.stranded()):
            print(f"mkworker: {why}; exiting so the engine restarts a clean worker",
                  file=sys.stderr)
            sys.stderr.flush()
            os._exit(71)
        if not cuda_context_usable():
            # A kernel hit a device-side assert or an illegal address: every later
            # CUDA call in this process fails. The answer for the job that did it is
            # sent; exit so the supervisor starts a clean worker for the next one.
            print("mkworker: CUDA context is unusable after that job; exiting so the "
                  "engine restarts a clean worker", file=sys.stderr)
            sys.stderr.flush()
            os._exit(70)
        return method != "shutdown"

    def _after_oom(self, req_id: Any, fn: protocol.Method, params: Params,
                   progress: Progress, line: str) -> str:
        """A job ran out of memory: the worker's caches let go, and when that gave
        anything back the job runs once more (memory.py says why). The second
        answer is the job's, out of memory or not."""
        released = memory.release()
        if not released.any() or fn in (_hello, _shutdown):
            return line
        print(f"mkworker: out of memory; released {released.entries} kept entries "
              f"({released.freed_bytes / 2**30:.1f} GiB) and running the job again",
              file=sys.stderr)
        progress("out of memory with the worker's caches held: released them, "
                 "running again", 0.0)
        line, again = self._run(req_id, fn, params, progress)
        if again:
            memory.release()
        return line

    def _run(self, req_id: Any, fn: protocol.Method, params: Params,
             progress: Progress) -> tuple[str, bool]:
        """The answer line, and whether the job ran out of memory."""
        sys.stdout = sys.stderr  # user code may have replaced it last time
        if fn is not _hello:
            wait_warm()  # one thread of torch at a time
        audit.take()  # a violation counts for the request it happened in
        try:
            result = fn(params, progress)
            if not isinstance(result, dict):
                raise WorkerError("internal", f"method returned {type(result).__name__}, "
                                  "not an object")
            result = audit.enforce(result, audit.take())
            return protocol.ok_line(req_id, result), memory.ran_out(result)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # SystemExit from user code must not stop the worker
            err = protocol.error_from_exception(exc, protocol.files_in_params(params))
            if err.kind == "internal":
                print(f"mkworker: internal error: {err.traceback_text}", file=sys.stderr)
            return protocol.error_line(req_id, err), memory.ran_out(error_kind=err.kind)
        finally:
            sys.stdout = sys.stderr

    def serve(self, stream: IO[bytes]) -> int:
        while True:
            line = stream.readline()
            if not line:
                return 0
            if not line.strip():
                continue
            if not self.handle(line):
                return 0


def main() -> int:
    channel = claim_stdout()
    audit.install()
    configure_triton_env()
    requests = sys.stdin.buffer
    # user code calling input() must not eat protocol lines
    sys.stdin = open(os.devnull, encoding="utf-8")
    problems = load_methods()
    start_warm_up()
    for problem in problems:
        print(f"mkworker: could not load {problem}", file=sys.stderr)
    try:
        return Server(channel, problems).serve(requests)
    finally:
        wait_warm()  # a daemon thread still importing torch at exit aborts the interpreter
