"""Containment of candidate code in a real worker (``python -m mkworker`` under
its guard): candidates that start a process (also through what torch re-exports:
``torch.os.system``, ``torch.os.fork``, ``torch.multiprocessing.Process``), signal
a process or open a socket are rejected, whatever they do with the refusal, and
no process they asked for exists afterwards (counted in /proc); the guard ends
the worker's whole tree when the worker dies; compilers (trusted frames) still run.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, WORKER_PATH, Worker
from mkworker import audit, guard

EXAMPLE = REPO / "examples" / "conv_bias_relu.py"


def _marked(marker: str) -> list[int]:
    """Processes whose command line or environment holds `marker`."""
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        for what in ("cmdline", "environ"):
            try:
                with open(f"/proc/{name}/{what}", "rb") as f:
                    if marker.encode() in f.read():
                        pids.append(int(name))
                        break
            except OSError:
                continue
    return pids


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


@pytest.fixture
def marker() -> Iterator[str]:
    m = f"mkaudit-{uuid.uuid4().hex[:12]}"
    yield m
    _kill_all(_marked(m))


def _modelnew(tmp_path: Path, body: str, top: str = "") -> str:
    src = EXAMPLE.read_text() + f"\n\n{top}\n\nclass ModelNew(Model):\n" \
        "    def forward(self, x):\n" + "".join(f"        {ln}\n" for ln in body.splitlines()) + \
        "        return super().forward(x)\n"
    f = tmp_path / f"new_{uuid.uuid4().hex[:8]}.py"
    f.write_text(src)
    return str(f)


def _verify(worker: Worker, file: str) -> dict:
    resp, _ = worker.request("verify_composition", {
        "file": file, "reference_file": str(EXAMPLE), "trials": 1, "atol": 1e-4, "rtol": 1e-4,
        "device": "cpu",
        "batch": 1})
    assert resp["ok"] is True, resp
    return resp["result"]


EVIL = {
    "system": 'torch.os.system("MK_MARK={m} sleep 30 &")',
    "fork": ("if torch.os.fork() == 0:\n    torch.os.setsid()\n"
             '    torch.os.execve("/bin/sleep", ["sleep", "30"], {{"MK_MARK": "{m}"}})'),
    "multiprocessing": ('torch.multiprocessing.Process(target=torch.os.system, '
                        'args=("MK_MARK={m} sleep 30",)).start()'),
    "caught": ('try:\n    torch.os.system("MK_MARK={m} sleep 30 &")\n'
               "except PermissionError:\n    pass"),
    "socket": ('try:\n    torch.hub.urlopen("http://127.0.0.1:9/{m}", timeout=1)\n'
               "except Exception:\n    pass"),
    "signal": "torch.os.kill(torch.os.getppid(), 0)",
}


@pytest.mark.parametrize("trick", sorted(EVIL))
def test_escapes_are_rejected_and_leave_no_process(worker, tmp_path, marker, trick):
    rep = _verify(worker, _modelnew(tmp_path, EVIL[trick].format(m=marker)))
    assert rep["status"] == "rejected", rep
    assert "the candidate tried to" in rep["reason"] and rep["line"], rep["reason"]
    time.sleep(0.3)
    assert _marked(marker) == []
    # the worker still verifies honest code afterwards
    ok = _verify(worker, _modelnew(tmp_path, "pass"))
    assert ok["status"] == "ok", ok["reason"]


def test_import_time_escape_is_rejected(worker, tmp_path, marker):
    rep = _verify(worker, _modelnew(tmp_path, "pass",
                                    top=f'torch.os.system("MK_MARK={marker} sleep 30 &")'))
    assert rep["status"] == "rejected" and "os.system" in rep["reason"], rep
    assert _marked(marker) == []


def test_subkernel_candidate_escape_is_rejected(tmp_path, marker):
    from mkworker.candidate import load_candidate

    src = ("import torch\n\n\ndef run(x):\n"
           f'    torch.os.system("MK_MARK={marker} sleep 30 &")\n    return x.clone()\n')
    cand = load_candidate(src, "evil", "llm")
    try:
        audit.take()
        with pytest.raises(PermissionError):
            cand.run(torch_tensor())
        v = audit.take()
        assert v is not None and v.event == "os.system" and v.line == 5
        assert audit.enforce({"status": "ok"}, v)["status"] == "rejected"
    finally:
        cand.unload()
    # unloaded: the same call from elsewhere is not refused (the hook looks at the caller)
    assert audit.take() is None
    assert _marked(marker) == []


def torch_tensor():
    import torch

    return torch.zeros(3)


def test_trusted_frames_may_start_processes():
    """Code outside candidate files (a compiler, our own) still runs programs."""
    audit.install()
    out = subprocess.run([sys.executable, "-c", "print(1)"], capture_output=True, check=True)
    assert out.stdout.strip() == b"1"
    assert audit.take() is None


def _guarded(marker: str) -> subprocess.Popen:
    """A guard whose worker leaves a double-forked grandchild in its own session."""
    code = (
        "import os, sys, time\n"
        "from mkworker import guard\n"
        "guard.start()\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execve('/bin/sleep', ['sleep', '60'], {{'MK_MARK': '{marker}'}})\n"
        "    os._exit(0)\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n")
    env = dict(os.environ, PYTHONPATH=str(WORKER_PATH), MKWORKER_PARENT=str(os.getpid()))
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, env=env,
                            start_new_session=True)


def _wait_for(cond, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


@pytest.mark.parametrize("how", ["worker_dies", "guard_sigterm"])
def test_guard_ends_the_whole_tree(marker, how):
    p = _guarded(marker)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == b"ready"
        assert _wait_for(lambda: len(_marked(marker)) >= 1, 5)
        escaped = [pid for pid in _marked(marker) if pid not in (p.pid,)]
        assert escaped, "the grandchild did not start"
        if how == "worker_dies":
            workers = guard.descendants(p.pid)
            python_workers = [w for w in workers if _alive(w) and
                              Path(f"/proc/{w}/cmdline").read_bytes().startswith(b"/")]
            assert python_workers
            os.kill(python_workers[0], signal.SIGKILL)
            assert p.wait(timeout=10) == -signal.SIGKILL  # the guard exits like its worker
        else:
            os.kill(p.pid, signal.SIGTERM)
            assert p.wait(timeout=10) == -signal.SIGTERM
        assert _wait_for(lambda: not [q for q in _marked(marker) if _alive(q)], 5), \
            "a process outlived the guard"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if p.stdout:
            p.stdout.close()


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2:stat.rfind(b")") + 3] not in (b"Z", b"X")


def test_guard_exits_when_the_engine_died_first(marker):
    """MKWORKER_PARENT names a parent that is not ours: the guard ends at once."""
    env = dict(os.environ, PYTHONPATH=str(WORKER_PATH), MKWORKER_PARENT="1")
    code = f"from mkworker import guard\nguard.start()\nimport time\ntime.sleep(30)  # {marker}\n"
    p = subprocess.run([sys.executable, "-c", code], env=env, timeout=20)
    assert p.returncode == -signal.SIGTERM
    assert _wait_for(lambda: not [q for q in _marked(marker) if _alive(q)], 5)


def test_modelnew_whose_kernel_never_runs_says_so(tmp_path):
    """A ModelNew that defines a Triton kernel but computes with PyTorch passes, with a note."""
    from mkworker.verify import verify_composition

    src = (REPO / "tests" / "python" / "kernels" / "cbr_modelnew_ok.py").read_text()
    ok = verify_composition({"file": str(REPO / "tests" / "python" / "kernels" /
                                         "cbr_modelnew_ok.py"),
                             "reference_file": str(EXAMPLE), "trials": 1, "atol": 1e-4,
                             "rtol": 1e-4, "device": "cpu",
                             "batch": 1}, lambda m, f: None)
    assert ok["status"] == "ok" and ok["kernel_launches"] > 0 and ok["notes"] == []
    idle = tmp_path / "idle.py"
    idle.write_text(src + "\n\nclass ModelNew(Model):  # noqa: F811\n    pass\n")
    rep = verify_composition({"file": str(idle), "reference_file": str(EXAMPLE), "trials": 1,
                              "atol": 1e-4, "rtol": 1e-4, "device": "cpu", "batch": 1},
                             lambda m, f: None)
    assert rep["status"] == "ok" and rep["kernel_launches"] == 0
    assert any(n.startswith("no custom kernel ran: _epi") for n in rep["notes"]), rep["notes"]
