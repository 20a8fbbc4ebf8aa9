"""SIGINT, SIGTERM and SIGKILL of `mkevolve check` while its worker is busy
(a ModelNew whose forward never returns), and SIGTERM and SIGKILL of
`mkevolve lsp` with a worker started, leave no worker process behind: every
process carrying this test's marker (an environment variable the workers
inherit) is counted in /proc. Needs the built binary ($MKEVOLVE_BIN, else
build/mkevolve); skips without it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from conftest import REPO

BIN = Path(os.environ.get("MKEVOLVE_BIN", REPO / "build" / "mkevolve"))
EXAMPLE = REPO / "examples" / "conv_bias_relu.py"
pytestmark = pytest.mark.skipif(not BIN.is_file(), reason=f"{BIN} is not built")


def _marked(marker: str) -> list[int]:
    """Live (not zombie) processes whose environment holds `marker`."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            env = Path(f"/proc/{name}/environ").read_bytes()
            stat = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        if marker.encode() in env and stat[stat.rfind(b")") + 2:][:1] not in (b"Z", b"X"):
            out.append(int(name))
    return out


def _wait_for(cond, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()


def _env(tmp_path: Path, marker: str) -> dict[str, str]:
    # MKEVOLVE_* passes the workers' allow-list: the marker reaches them.
    return dict(os.environ, MKEVOLVE_TEST_MARK=marker, MKEVOLVE_CACHE_DIR=str(tmp_path / "cache"),
                ASAN_OPTIONS="detect_leaks=0")


def _busy_worker(marker: str, engine: int) -> bool:
    """A worker (a marked process other than the engine) that has used CPU for a while."""
    for pid in _marked(marker):
        if pid == engine:
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        if int(fields[11]) > 300:  # utime in ticks: past the imports, in the loop
            return True
    return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL])
def test_check_killed_mid_job_leaves_no_worker(tmp_path, sig):
    marker = f"mksig-{uuid.uuid4().hex[:10]}"
    new = tmp_path / "new.py"
    new.write_text(EXAMPLE.read_text() + "\n\nclass ModelNew(Model):\n"
                   "    def forward(self, x):\n        while True:\n            x = x + 0\n")
    p = subprocess.Popen([str(BIN), "check", str(new), "--against", str(EXAMPLE),
                          "--device", "cpu", "--no-cache", "--timeout", "120"],
                         env=_env(tmp_path, marker), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    try:
        assert _wait_for(lambda: _busy_worker(marker, p.pid), 90), "the worker never got busy"
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        assert p.returncode in (-sig, 128 + sig), (p.returncode, err)
        if sig != signal.SIGKILL:
            assert b"mkevolve: " in err and b"workers stopped" in err, err
        assert _wait_for(lambda: not _marked(marker), 10), f"left behind: {_marked(marker)}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def _frame(msg: dict) -> bytes:
    body = json.dumps(msg).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_lsp_killed_leaves_no_worker(tmp_path, sig):
    marker = f"mklsp-{uuid.uuid4().hex[:10]}"
    model = tmp_path / "model.py"
    model.write_text(EXAMPLE.read_text())
    p = subprocess.Popen([str(BIN), "lsp", "--stdio"], env=_env(tmp_path, marker),
                         stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        assert p.stdin is not None
        p.stdin.write(_frame({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                              "params": {"processId": None, "rootUri": tmp_path.as_uri(),
                                         "capabilities": {}}}))
        p.stdin.write(_frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))
        p.stdin.write(_frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
            "textDocument": {"uri": model.as_uri(), "languageId": "python", "version": 1,
                             "text": model.read_text()}}}))
        p.stdin.flush()
        assert _wait_for(lambda: len([q for q in _marked(marker) if q != p.pid]) >= 2, 60), \
            "the server started no worker"
        p.send_signal(sig)
        p.wait(timeout=30)
        assert _wait_for(lambda: not _marked(marker), 10), f"left behind: {_marked(marker)}"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        for stream in (p.stdin, p.stderr):
            if stream:
                stream.close()
        for pid in _marked(marker):
            os.kill(pid, signal.SIGKILL)


def test_check_memory_hog_gets_the_memory_limit_verdict(tmp_path):
    """A ModelNew touching 3 GiB under a 1 GiB limit: the verdict says so, the run
    ends promptly and no worker is left (the machine never comes near its OOM killer)."""
    marker = f"mkmem-{uuid.uuid4().hex[:10]}"
    new = tmp_path / "hog.py"
    new.write_text(EXAMPLE.read_text() + "\n\nclass ModelNew(Model):\n"
                   "    def forward(self, x):\n"
                   "        hog = torch.ones(3 * 1024 ** 3 // 4)\n"
                   "        return super().forward(x) + hog[:1] * 0\n")
    env = _env(tmp_path, marker)
    env["MKEVOLVE_WORKER_MEMORY_GB"] = "1"
    t0 = time.monotonic()
    p = subprocess.run([str(BIN), "check", str(new), "--against", str(EXAMPLE), "--device", "cpu",
                        "--no-cache", "--trials", "1", "--batch", "1", "--timeout", "120"],
                       env=env, capture_output=True, text=True, timeout=180)
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "NO: oom" in p.stdout, p.stdout
    assert "exceeded the memory limit of 1 GiB" in p.stdout, p.stdout
    assert time.monotonic() - t0 < 100
    assert _wait_for(lambda: not _marked(marker), 10), f"left behind: {_marked(marker)}"
