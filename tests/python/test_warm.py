"""The compile ahead of a whole program's reference (mkworker/warm.py, docs/verify.md
"warm_reference"): the request, the child's markers and the check's wait."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from mkworker import warm
from mkworker.protocol import WorkerError

ROOT = Path(__file__).resolve().parents[2]
WORKER_PATH = str(ROOT / "engine" / "worker" / "python")

TINY = """
import torch

class Model(torch.nn.Module):
    def __init__(self, n):
        super().__init__()
        self.lin = torch.nn.Linear(n, n)

    def forward(self, x):
        return torch.relu(self.lin(x)) * 2

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return [8]
"""


@pytest.fixture
def markers(tmp_path, monkeypatch) -> Path:
    """Each test's own marker folder (tempfile's directory moved under tmp_path)."""
    monkeypatch.setattr(warm.tempfile, "gettempdir", lambda: str(tmp_path))
    return tmp_path / f"mkworker-warm-{os.getuid()}"


def problem(tmp_path: Path) -> str:
    path = tmp_path / "tiny.py"
    path.write_text(TINY)
    return str(path)


def noop(message: str, fraction: float) -> None:
    pass


def test_nothing_is_compiled_ahead_on_the_cpu(tmp_path, markers):
    got = warm.warm_reference({"file": problem(tmp_path), "class": "Model", "seed": 0,
                               "device": "cpu", "modes": ["default"]}, noop)
    assert got["started"] is False and "CPU" in got["reason"]
    assert not warm._children


@pytest.mark.parametrize("params, words", [
    ({"file": 3}, "file"),
    ({"seed": True}, "integers"),
    ({"batch": "2"}, "integers"),
    ({"modes": ["max-autotune"]}, "modes"),
    ({"modes": []}, "modes"),
    ({"file": "/nonexistent/problem.py"}, "no such file"),
])
def test_bad_requests_say_what_is_wrong(tmp_path, markers, params, words):
    base = {"file": problem(tmp_path), "class": "Model", "seed": 0, "device": "cuda",
            "modes": ["default"]}
    with pytest.raises(WorkerError) as e:
        warm.warm_reference({**base, **params}, noop)
    assert e.value.kind == "bad_request"
    assert words in str(e.value)


def test_the_key_follows_the_file_content_and_the_draws(tmp_path):
    f = problem(tmp_path)
    k = warm.reference_key(f, "Model", None, 0)
    assert k == warm.reference_key(f, "Model", None, 0)
    assert k != warm.reference_key(f, "Model", 2, 0)
    assert k != warm.reference_key(f, "Model", None, 1)
    Path(f).write_text(TINY + "\n# edited\n")
    assert k != warm.reference_key(f, "Model", None, 0)


def test_no_compile_ahead_means_no_wait(tmp_path, markers):
    assert warm.wait_for(problem(tmp_path), "Model", None, 0) is None


def running(markers: Path, key: str, seconds: float) -> subprocess.Popen:
    """A stand-in child: a live process whose pid the running marker holds."""
    child = subprocess.Popen([sys.executable, "-c", f"import time; time.sleep({seconds})"])
    markers.mkdir(mode=0o700, exist_ok=True)
    (markers / f"{key}.running").write_text(str(child.pid))
    return child


def test_the_check_waits_for_a_running_child_until_it_is_done(tmp_path, markers):
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    child = running(markers, key, 30)
    try:
        def finish() -> None:
            time.sleep(0.5)
            (markers / f"{key}.running").rename(markers / f"{key}.done")
        threading.Thread(target=finish).start()
        got = warm.wait_for(f, "Model", None, 0)
        assert got is not None and got["state"] == "done"
        assert got["waited_s"] >= 0.4
    finally:
        child.kill()
        child.wait()


def test_a_child_that_dies_ends_the_wait(tmp_path, markers):
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    child = running(markers, key, 0.5)
    got = warm.wait_for(f, "Model", None, 0)
    child.wait()
    assert got is not None and got["state"] == "ended early"
    assert got["waited_s"] < 10


def test_the_wait_is_bounded(tmp_path, markers):
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    child = running(markers, key, 30)
    try:
        got = warm.wait_for(f, "Model", None, 0, limit_s=0.5)
        assert got is not None and got["state"] == "running"
        assert 0.4 <= got["waited_s"] < 5
    finally:
        child.kill()
        child.wait()


def test_a_second_request_while_one_runs_starts_nothing(tmp_path, markers):
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    child = running(markers, key, 30)
    try:
        got = warm.warm_reference({"file": f, "class": "Model", "seed": 0, "device": "cuda",
                                   "modes": ["default"]}, noop)
        assert got == {"started": False, "key": key, "reason": "already running"}
    finally:
        child.kill()
        child.wait()


def test_the_child_compiles_each_mode_and_marks_the_key_done(tmp_path):
    """The child itself, on the CPU (inductor's C++ backend): what it compiled, and
    the marker the check waits on. Its graphs are the check's: compile_ahead builds
    and feeds the model as _verify_composition does."""
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    spec = {"file": f, "class": "Model", "seed": 0, "batch": None, "device": "cpu",
            "modes": ["default"], "key": key, "dir": str(tmp_path)}
    env = {**os.environ, "PYTHONPATH": WORKER_PATH,
           "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    done = subprocess.run([sys.executable, "-m", "mkworker.warm", json.dumps(spec)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["default"]["compile_s"] > 0
    assert json.loads((tmp_path / f"{key}.done").read_text()) == ["default"]
    assert not (tmp_path / f"{key}.running").exists()


def test_a_finished_child_covers_its_modes_only(tmp_path, markers, monkeypatch):
    """A second request for modes a finished child compiled starts nothing; one that
    adds a mode starts a child for that mode alone."""
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    markers.mkdir(mode=0o700, exist_ok=True)
    (markers / f"{key}.done").write_text(json.dumps(["default"]))
    req = {"file": f, "class": "Model", "seed": 0, "device": "cuda", "modes": ["default"]}
    assert warm.warm_reference(req, noop) == {"started": False, "key": key,
                                              "reason": "already done"}
    started: list[list[str]] = []

    class FakePopen:
        pid = os.getpid()

        def __init__(self, argv: list[str], **kw: object) -> None:
            started.append(json.loads(argv[-1])["modes"])

        def poll(self) -> int:
            return 0

    monkeypatch.setattr(warm.subprocess, "Popen", FakePopen)
    got = warm.warm_reference({**req, "modes": ["default", "reduce-overhead"]}, noop)
    assert got["started"] is True
    assert started == [["reduce-overhead"]]


def test_a_child_that_fails_leaves_no_marker(tmp_path):
    f = problem(tmp_path)
    key = warm.reference_key(f, "Model", None, 0)
    spec = {"file": f, "class": "NoSuchModel", "seed": 0, "batch": None, "device": "cpu",
            "modes": ["default"], "key": key, "dir": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "mkworker.warm", json.dumps(spec)],
                          env={**os.environ, "PYTHONPATH": WORKER_PATH},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode != 0
    assert "NoSuchModel" in done.stderr
    assert not (tmp_path / f"{key}.done").exists()
    assert not (tmp_path / f"{key}.running").exists()
