"""The worker's guard: the process the engine starts, holding the real worker
as its only child (docs/runtime.md, "Containment").

Candidate code runs in the worker, and a process it starts may leave the
worker's process group (``setsid``) or outlive the worker. The guard is what
makes "the worker and everything it started" one tree that can be ended as a
whole:

- it is a child subreaper (``PR_SET_CHILD_SUBREAPER``): whatever the worker's
  descendants orphan is re-parented to the guard, not to init, so the engine
  finds it by walking the guard's descendants;
- it asks to be sent SIGTERM when the engine dies (``PR_SET_PDEATHSIG``, also
  when the engine is killed with SIGKILL), and checks that the engine did not
  die before it asked (``MKWORKER_PARENT``);
- when the worker exits, or on SIGTERM/SIGHUP, it SIGKILLs every descendant,
  reaps them and exits the way the worker did (same status or signal), so the
  engine's crash reports are unchanged;
- the worker gets SIGKILL when the guard dies (its own PDEATHSIG).

Stdlib only and before anything heavy is imported: the fork must be cheap.
Linux only; elsewhere (or with ``MKWORKER_NO_GUARD=1``) the worker runs alone.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> ppid of every process, from /proc/<pid>/stat."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def descendants(root: int) -> list[int]:
    """Every living descendant of `root` (not `root` itself)."""
    parents = _parents()
    tree = {root}
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                changed = True
    tree.discard(root)
    return sorted(tree)


def kill_descendants(root: int) -> int:
    """SIGKILLs the descendants of `root` (a few rounds: one may fork meanwhile)."""
    killed = 0
    for _ in range(4):
        pids = descendants(root)
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed += 1
            except OSError:
                pass
        _reap()
    return killed


def _reap() -> None:
    """Collects the exit status of finished children (adopted ones too)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


class _Stop(Exception):
    pass


def _on_signal(signum: int, frame: object) -> None:
    raise _Stop(signum)


def _exit_like(status: int) -> None:
    """Ends the guard the way the worker ended."""
    sys.stderr.flush()
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # the worker dumped already
        except (ImportError, ValueError, OSError):
            pass
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # these cannot be caught anyway
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1)


def _guard(worker: int, engine: int) -> None:
    """The guard's whole life; never returns."""
    status = 0
    try:
        # A signal from here on ends the tree as one in the loop does: one that came
        # while prctl was still loading libc ended the guard with a traceback and
        # status 1 instead of the signal (a flaky containment test, 2026-12-06).
        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            signal.signal(sig, _on_signal)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        # The protocol pipes are the worker's: the engine must see their EOF when it
        # closes them, not when the guard exits.
        devnull = os.open(os.devnull, os.O_RDWR)
        os.dup2(devnull, 0)
        os.dup2(devnull, 1)
        os.close(devnull)
        if engine and os.getppid() != engine:  # the engine died before we asked
            raise _Stop(signal.SIGTERM)
        while True:
            pid, st = os.waitpid(-1, 0)  # adopted orphans are reaped here too
            if pid == worker:
                status = st
                break
    except _Stop as stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        try:
            os.kill(worker, signal.SIGKILL)
        except OSError:
            pass
        status = (int(stop.args[0]) & 0x7F) if stop.args else signal.SIGTERM
    except ChildProcessError:
        status = 0
    kill_descendants(os.getpid())
    _exit_like(status)


def start() -> None:
    """Forks the worker off a guard. Returns in the worker; the guard never returns."""
    if not sys.platform.startswith("linux") or os.environ.get("MKWORKER_NO_GUARD") == "1":
        return
    engine = int(os.environ.get("MKWORKER_PARENT", "0") or 0)
    if not _prctl(PR_SET_CHILD_SUBREAPER, 1):
        return  # no prctl: run unguarded rather than not at all
    guard = os.getpid()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != guard:
            os._exit(1)
        return
    _guard(pid, engine)
