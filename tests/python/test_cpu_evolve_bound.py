"""A default-option CPU evolve of a KernelBench problem, real worker and Triton
interpreter, stays inside its plan's budget: before the CPU plan this problem
(a 4096x4096 linear) verified six candidates in 88 s on 2 cores; with
`--time-budget 45` the whole run must end within the budget and the check of
what it kept, verified, with the plan's progress line. Needs the built binary
($MKEVOLVE_BIN, else build/mkevolve) and ../shared/kernelbench; skips without."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from conftest import KERNELBENCH, REPO, needs_kernelbench

BIN = Path(os.environ.get("MKEVOLVE_BIN", REPO / "build" / "mkevolve"))
PROBLEM = KERNELBENCH / "level2" / "40_Matmul_Scaling_ResidualAdd.py"
BUDGET_S = 45
# The budget, then the whole-program check of what it kept (planned inside the
# budget, but the machine is shared) and the worker's start and the capture.
BOUND_S = BUDGET_S + 45

pytestmark = [needs_kernelbench,
              pytest.mark.skipif(not BIN.is_file(), reason=f"{BIN} is not built")]


def test_cpu_evolve_stays_inside_its_budget(tmp_path: Path) -> None:
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    env.pop("MKEVOLVE_NO_CACHE", None)
    t0 = time.monotonic()
    p = subprocess.run(
        [str(BIN), "evolve", str(PROBLEM), "--device", "cpu", "--json",
         "--time-budget", str(BUDGET_S), "--workdir", str(tmp_path / "work"),
         "--cache-dir", str(tmp_path / "cache")],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    assert p.returncode == 0, p.stderr[-3000:]
    assert wall < BOUND_S, f"{wall:.0f} s"
    s = json.loads(p.stdout)
    assert s["verified"] is True and s["timed"] is False
    for sk in s["subkernels"]:
        # Verified, or the true reason: never "faster" on a run without timings.
        assert sk["state"] == "verified" or "faster" not in sk["summary"], sk["summary"]
    progress = p.stderr.replace("\r", "\n")
    assert "linear_clone_mul_add: candidate 1 (up to" in progress
    assert "candidates 1/" in progress and "ETA ~" in progress
    log = [json.loads(line) for line in
           (tmp_path / "work" / PROBLEM.stem / "run.jsonl").read_text().splitlines()]
    plan = [e for e in log if e["event"] == "cpu_plan"]
    assert plan and all(e["budget_s"] == BUDGET_S for e in plan)
    evaluated = [e for e in log if e["event"] == "evaluated"]
    assert 1 <= len(evaluated) <= 3  # one at a time, depth + 1 at most
    # The first job's limit was its share: the budget over the subkernel and its check.
    first = next(m for m in progress.splitlines() if "candidate 1 (up to" in m)
    limit = float(first.split("(up to ")[1].split(" s)")[0])
    assert limit <= BUDGET_S / 2 + 1
