"""Compiling a whole program's reference ahead of its check (docs/verify.md,
"warm_reference").

The whole-program check times torch.compile's forms of the reference as its
baselines: the default mode, and "reduce-overhead" for a CUDA-graph variant. Both
compiles come after the search's wall-time budget, and they grow with the network:
on an H200 the tail after DenseNet-121's 150 s search was about 100 s, most of it
those two compiles. `warm_reference` starts a child process that compiles the same
forms of the same reference at the start of the search, beside it; the child fills
inductor's on-disk caches (the FX graph cache and Triton's kernels), so the check's
own compile of the same graphs loads them instead of compiling them (DenseNet-121 on
this CPU: 139 s cold, 15 s with the cache filled by another process).

The child is one of the worker's descendants, so it ends with the worker's tree
(guard.py). It marks its work with a file while it runs (`<key>.running`, holding
its pid) and writes `<key>.done` (the modes it compiled) when it ends; `wait_for`,
called by the check, waits for a running child of the same reference, up to a limit,
so that the check does not compile the same graphs beside it. Nothing is ever shared but inductor's
own caches: a child that fails or is killed leaves the check to compile as before.

Run as `python -m mkworker.warm SPEC` (SPEC: the JSON the parent writes).
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .protocol import Params, Progress, Result, WorkerError

# The compile modes a child may compile ahead: max-autotune's benchmarks would run
# on the GPU beside the search's timings, so that mode is compiled by the check.
MODES = ("default", "reduce-overhead")
# A child that has not finished by then is killed by its own alarm.
CHILD_LIMIT_S = 900
# The longest a check waits for a running child of its reference: after that it
# compiles beside it (the graphs the child finished load from the cache). The check
# itself runs under the engine's job limit (300 s by default; DenseNet-121's took
# 56 s on an H200, its compile included), so the wait leaves it most of that.
WAIT_LIMIT_S = 120.0

# key -> the child started for it (this worker's own, reaped when it ends)
_children: dict[str, subprocess.Popen[bytes]] = {}


def _marker_dir() -> Path:
    d = Path(tempfile.gettempdir()) / f"mkworker-warm-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    return d


def reference_key(file: str, cls: str, batch: int | None, seed: int) -> str:
    """Names one reference's compile ahead: its file's content, class, batch and seed
    (what the check's compiled graphs depend on)."""
    h = hashlib.sha256(Path(file).read_bytes())
    h.update(json.dumps([os.path.realpath(file), cls, batch, seed]).encode())
    return h.hexdigest()[:32]


def _alive(pid: int) -> bool:
    # /proc, not os.kill(pid, 0): a signal is an audited event (audit.py)
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:][:1] != b"Z"


def _reap() -> None:
    for key, child in list(_children.items()):
        if child.poll() is not None:
            del _children[key]


def _state(key: str) -> str:
    """"running" (a live process holds the marker), "done" (a child finished) or
    "none" for a key."""
    d = _marker_dir()
    try:
        pid = int((d / f"{key}.running").read_text().strip() or "0")
    except (OSError, ValueError):
        pid = 0
    if pid > 0 and _alive(pid):
        return "running"
    return "done" if (d / f"{key}.done").exists() else "none"


def _done_modes(key: str) -> list[str]:
    """The modes a finished child compiled (what its `.done` marker lists)."""
    try:
        got = json.loads((_marker_dir() / f"{key}.done").read_text() or "[]")
    except (OSError, ValueError):
        return []
    return [m for m in got if isinstance(m, str)] if isinstance(got, list) else []


def warm_reference(params: Params, progress: Progress) -> Result:
    """Starts a child that compiles the reference's torch.compile forms ahead."""
    file = params.get("file")
    cls = params.get("class", "Model")
    seed = params.get("seed", 0)
    batch = params.get("batch")
    device = params.get("device", "cpu")
    modes = params.get("modes", ["default"])
    if not isinstance(file, str) or not isinstance(cls, str) or not isinstance(device, str):
        raise WorkerError("bad_request", "warm_reference needs `file`, `class` and `device` "
                                         "as strings")
    if isinstance(seed, bool) or not isinstance(seed, int) or \
            (batch is not None and (isinstance(batch, bool) or not isinstance(batch, int))):
        raise WorkerError("bad_request", "`seed` and `batch` must be integers")
    if not isinstance(modes, list) or not modes or any(m not in MODES for m in modes):
        raise WorkerError("bad_request", f"`modes` must list some of {', '.join(MODES)}")
    if not device.startswith("cuda"):
        return {"started": False, "reason": "nothing is timed on the CPU: no compile ahead"}
    if not os.path.isfile(file):
        raise WorkerError("bad_request", f"no such file: {file}")
    _reap()
    key = reference_key(file, cls, batch, seed)
    state = _state(key)
    if state == "done":
        modes = [m for m in modes if m not in _done_modes(key)]
    if state == "running" or not modes:
        return {"started": False, "key": key, "reason": f"already {state}"}
    spec = {"file": file, "class": cls, "seed": seed, "batch": batch, "device": device,
            "modes": modes, "key": key, "dir": str(_marker_dir())}
    env = dict(os.environ)
    # Half the machine's compile threads: the search's own worker compiles too.
    env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", str(max(1, (os.cpu_count() or 2) // 2)))
    with open(_marker_dir() / f"{key}.log", "wb") as log:  # the child keeps its own copy
        child = subprocess.Popen([sys.executable, "-m", "mkworker.warm", json.dumps(spec)],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    # The child writes it too, first thing; written here as well so that a check
    # that comes at once waits. A child that already ended left `.done` (which
    # wins) or nothing (this pid is then not alive: no wait).
    (_marker_dir() / f"{key}.running").write_text(str(child.pid))
    _children[key] = child
    progress("compiling the reference ahead", 1.0)
    return {"started": True, "key": key, "pid": child.pid}


def wait_for(file: str, cls: str, batch: int | None, seed: int,
             limit_s: float = WAIT_LIMIT_S) -> dict[str, Any] | None:
    """Waits (up to limit_s) for a running compile ahead of this reference; what it
    found, for the check's report, or None when there was none."""
    try:
        key = reference_key(file, cls, batch, seed)
    except OSError:
        return None
    t0 = time.monotonic()
    state = _state(key)
    if state == "none":
        return None
    while state == "running" and time.monotonic() - t0 < limit_s:
        time.sleep(0.2)
        _reap()
        state = _state(key)
    return {"state": "running" if state == "running" else "done" if state == "done"
            else "ended early", "waited_s": round(time.monotonic() - t0, 3)}


def _child(spec: dict[str, Any]) -> int:
    """The child: compiles each mode, then lists those it compiled in the key's
    `.done` marker (a mode that failed is not listed: the check compiles it then,
    and says why)."""
    signal.alarm(CHILD_LIMIT_S)
    d = Path(spec["dir"])
    key = spec["key"]
    (d / f"{key}.running").write_text(str(os.getpid()))
    try:
        import torch

        from .verify import compile_ahead

        got = compile_ahead(spec["file"], spec["class"], int(spec["seed"]), spec["batch"],
                            torch.device(spec["device"]), list(spec["modes"]))
        print(json.dumps(got), flush=True)
        done = d / f"{key}.done"
        ready = [m for m in got if "compile_s" in got[m]]
        before = json.loads(done.read_text() or "[]") if done.exists() else []
        tmp = d / f"{key}.done.{os.getpid()}"
        tmp.write_text(json.dumps(sorted(set(before) | set(ready))))
        tmp.rename(done)
        return 0
    finally:
        # a failure leaves no marker: the check compiles as if none had run
        (d / f"{key}.running").unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(_child(json.loads(sys.argv[1])))
