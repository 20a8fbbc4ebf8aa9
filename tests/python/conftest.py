"""Shared test setup for the Python runtime worker.

The worker package lives in engine/worker/python; tests import it from there
and start ``python -m mkworker`` subprocesses with the same path. Triton runs
in its interpreter on machines without CUDA (set before anything imports it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WORKER_PATH = REPO / "engine" / "worker" / "python"
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _shared_dir() -> Path:
    """MK_SHARED_DIR, else ../shared next to the repository (as the C tests'
    mk_test_shared_dir); from a git worktree, next to the main checkout."""
    env = os.environ.get("MK_SHARED_DIR")
    if env:
        return Path(env)
    here = (REPO / ".." / "shared").resolve()
    dotgit = REPO / ".git"
    if not here.is_dir() and dotgit.is_file():
        text = dotgit.read_text().strip()
        if text.startswith("gitdir:"):
            main = Path(text.split(":", 1)[1].strip()).resolve().parents[2]
            return (main / ".." / "shared").resolve()
    return here


KERNELBENCH = _shared_dir() / "kernelbench"

if str(WORKER_PATH) not in sys.path:
    sys.path.insert(0, str(WORKER_PATH))

from mkworker.server import configure_triton_env  # noqa: E402

configure_triton_env()


def fixture(name: str) -> str:
    return str(FIXTURES / name)


def mk_tests_binary() -> Path | None:
    """The C test runner that writes the GPU tests' cases: $MK_TESTS_BIN, else the first
    built one (the devkit's on the device machine)."""
    env = os.environ.get("MK_TESTS_BIN")
    if env:
        return Path(env)
    for build in ("build", "build-asan", "build-release", ".devkit"):
        p = REPO / build / ("mk_tests" if build == ".devkit" else "tests/mk_tests")
        if p.is_file():
            return p
    return None


def kernelbench_files(level: int | None = None) -> list[Path]:
    levels = [level] if level is not None else [1, 2, 3]
    files: list[Path] = []
    for lv in levels:
        files += sorted((KERNELBENCH / f"level{lv}").glob("*.py"))
    return files


needs_kernelbench = pytest.mark.skipif(not (KERNELBENCH / "level1").is_dir(),
                                       reason="../shared/kernelbench is absent")


class Worker:
    """A ``python -m mkworker`` subprocess driven line by line."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(WORKER_PATH) + os.pathsep + env.get("PYTHONPATH", "")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "mkworker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, env=env, cwd=str(REPO))
        self.next_id = 1

    def send_raw(self, line: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, f"worker closed stdout; stderr: {self.stderr_tail()}"
        return json.loads(line)

    def request(self, method: str, params: dict | None = None) -> tuple[dict, list[dict]]:
        """Sends one request; returns (response, progress lines before it)."""
        rid = self.next_id
        self.next_id += 1
        self.send_raw(json.dumps({"v": 1, "id": rid, "method": method,
                                  "params": params or {}}).encode())
        progress = []
        while True:
            msg = self.read()
            assert msg["id"] == rid, msg
            if "progress" in msg:
                progress.append(msg)
                continue
            return msg, progress

    def stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return "(running)"
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")[-4000:]

    def close(self) -> int:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()
        return self.proc.returncode


@pytest.fixture(scope="module")
def worker():
    w = Worker()
    yield w
    w.close()
