"""kernelbench_check: an emitted ModelNew evaluated by KernelBench's own code.

KernelBench asserts CUDA, so on the CPU these tests use the stand-in in
tests/fixtures/kernelbench_stub (KernelBench's layout and interface, a real
CPU evaluation); they check what the worker makes of each answer and of each
way the evaluation can fail, and that the evaluation runs in its own process.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import REPO, WORKER_PATH
from mkworker import kbcheck, protocol

STUB = str(REPO / "tests" / "fixtures" / "kernelbench_stub")

REF = textwrap.dedent("""\
    import torch

    class Model(torch.nn.Module):
        def __init__(self, n):
            super().__init__()
            self.lin = torch.nn.Linear(n, n)

        def forward(self, x):
            return torch.relu(self.lin(x))

    def get_inputs():
        return [torch.randn(4, 8)]

    def get_init_inputs():
        return [8]
    """)

GOOD_NEW = REF + textwrap.dedent("""\

    class ModelNew(Model):
        def forward(self, x):
            return torch.clamp_min(torch.nn.functional.linear(x, self.lin.weight, self.lin.bias), 0)
    """)

WRONG_NEW = REF + textwrap.dedent("""\

    class ModelNew(Model):
        def forward(self, x):
            return torch.relu(self.lin(x)) + 1e-2
    """)

TRITON_NEW = REF + textwrap.dedent("""\
    import triton
    import triton.language as tl

    @triton.jit
    def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

    class ModelNew(Model):
        def forward(self, x):
            h = self.lin(x).contiguous()
            y = torch.empty_like(h)
            _relu[(triton.cdiv(h.numel(), 64),)](h, y, h.numel(), BLOCK=64)
            return y
    """)


def _files(tmp_path: Path, new_src: str) -> tuple[str, str]:
    ref, new = tmp_path / "prob.py", tmp_path / "prob_new.py"
    ref.write_text(REF)
    new.write_text(new_src)
    return str(ref), str(new)


def _params(ref: str, new: str, **extra: object) -> dict:
    return {"ref": ref, "new": new, "root": STUB, "seed": 42, "trials": 2, "perf_trials": 3,
            "timeout_s": 900, **extra}


def test_finds_kernelbench_in_a_checkout_of_either_layout(tmp_path: Path) -> None:
    fn, name = kbcheck.find_evaluator(STUB)
    sys.modules.pop("kernelbench.eval", None)
    sys.modules.pop("kernelbench", None)
    assert fn is not None and name == "kernelbench.eval.eval_kernel_against_ref"
    old = tmp_path / "old" / "src"
    old.mkdir(parents=True)
    (old / "eval.py").write_text("def eval_kernel_against_ref(original_model_src, "
                                 "custom_model_src, seed_num=42):\n    return None\n")
    def forget() -> None:  # find_evaluator runs in a fresh process in real use
        for name in ("kernelbench.eval", "kernelbench", "src.eval", "src"):
            sys.modules.pop(name, None)

    forget()
    try:
        fn, name = kbcheck.find_evaluator(str(tmp_path / "old"))
        assert fn is not None and name == "src.eval.eval_kernel_against_ref"
    finally:
        forget()


def test_missing_kernelbench_says_what_was_tried(tmp_path: Path) -> None:
    fn, reason = kbcheck.find_evaluator(str(tmp_path))
    assert fn is None
    assert "not importable" in reason and "kernelbench.eval" in reason and "src.eval" in reason
    fn, reason = kbcheck.find_evaluator(str(tmp_path / "nowhere"))
    assert fn is None and "is not a folder" in reason


def test_only_accepted_keywords_are_passed() -> None:
    def old(original_model_src: str, custom_model_src: str, seed_num: int = 42) -> None:
        return None

    got = kbcheck._accepted(old, {"original_model_src": "a", "custom_model_src": "b",
                                  "backend": "triton", "seed_num": 1})
    assert got == {"original_model_src": "a", "custom_model_src": "b", "seed_num": 1}


def test_backend_follows_the_imports() -> None:
    assert kbcheck.backend_for(TRITON_NEW) == "triton"
    assert kbcheck.backend_for(GOOD_NEW) == "cuda"
    assert kbcheck.backend_for("x = 1  # import triton later\n") == "cuda"


def test_correct_model_new_agrees_with_timings(tmp_path: Path) -> None:
    ref, new = _files(tmp_path, GOOD_NEW)
    out = kbcheck.run_isolated(_params(ref, new))
    assert out["available"] and out["error"] is None, out
    assert out["evaluator"] == "kernelbench.eval.eval_kernel_against_ref"
    assert out["compiled"] is True and out["correct"] is True
    assert out["runtime"] > 0 and out["ref_runtime"] > 0
    assert out["speedup"] == pytest.approx(out["ref_runtime"] / out["runtime"])
    assert out["metadata"]["correctness_trials"] == "(2 / 2)"


def test_wrong_model_new_is_reported_incorrect(tmp_path: Path) -> None:
    ref, new = _files(tmp_path, WRONG_NEW)
    out = kbcheck.run_isolated(_params(ref, new))
    assert out["available"] and out["correct"] is False
    assert out["metadata"]["correctness_issue"] == "Output mismatch"
    assert out["speedup"] is None


def test_triton_model_new_is_loaded_from_a_file(tmp_path: Path) -> None:
    ref, new = _files(tmp_path, TRITON_NEW)
    out = kbcheck.run_isolated(_params(ref, new, measure=False))
    assert out["correct"] is True, out
    assert out["metadata"]["backend"] == "triton"
    assert out["runtime"] is None


@pytest.mark.parametrize(("mode", "expect"), [
    ("raise", "raised AssertionError: CUDA is not available"),
    ("none", "returned no result"),
    ("crash", "killed by signal 11"),
])
def test_evaluation_failures_are_errors_not_verdicts(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, mode: str,
                                                      expect: str) -> None:
    monkeypatch.setenv("STUB_KB_MODE", mode)
    ref, new = _files(tmp_path, GOOD_NEW)
    out = kbcheck.run_isolated(_params(ref, new))
    assert out["available"] is True and out["correct"] is None
    assert expect in out["error"], out["error"]


def test_a_hanging_evaluation_is_killed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STUB_KB_MODE", "hang")
    ref, new = _files(tmp_path, GOOD_NEW)
    out = kbcheck.run_isolated(_params(ref, new, timeout_s=3))
    assert "did not finish in 3 s" in out["error"]


def test_the_worker_answers_kernelbench_check(tmp_path: Path) -> None:
    """Through the protocol, as the engine asks: one request, one answer; the
    evaluation's prints never reach the protocol stream."""
    noisy = GOOD_NEW.replace("class ModelNew", "print('noise')\nclass ModelNew")
    ref, new = _files(tmp_path, noisy)
    reqs = [{"id": 1, "method": "hello", "params": {"protocol": protocol.PROTOCOL_VERSION}},
            {"id": 2, "method": "kernelbench_check", "params": _params(ref, new)},
            {"id": 3, "method": "kernelbench_check", "params": {"ref": ref, "new": "/nonexistent"}},
            {"id": 4, "method": "kernelbench_check",  # the engine always sends trials
             "params": {k: v for k, v in _params(ref, new).items() if k != "trials"}}]
    env = {"PYTHONPATH": str(WORKER_PATH), "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "mkworker"],
                          input="\n".join(map(json.dumps, reqs)), capture_output=True, text=True,
                          timeout=300, env=env, check=False)
    answers = [json.loads(line) for line in proc.stdout.splitlines()]
    finals = {a["id"]: a for a in answers if "progress" not in a}
    assert finals[2]["ok"], finals[2]
    assert finals[2]["result"]["correct"] is True
    assert finals[3]["ok"] is False and finals[3]["error"]["kind"] == "bad_request"
    assert finals[4]["ok"] is False and "'trials'" in finals[4]["error"]["message"]
    assert "noise" not in proc.stdout


def test_the_worker_gives_its_cached_memory_back_first(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """KernelBench's process allocates its own GPU memory: the worker drops every
    cache it keeps (and torch's cached blocks) before starting it."""
    from mkworker import memory, replay, verify  # noqa: F401  (they register their caches)

    order: list[str] = []
    releasers = {name: (lambda name=name: order.append(name) or 0)
                 for name in memory._RELEASERS}
    monkeypatch.setattr(memory, "_RELEASERS", releasers)
    monkeypatch.setattr(kbcheck, "run_isolated",
                        lambda params: order.append("evaluated") or kbcheck.empty_result())
    ref, new = _files(tmp_path, GOOD_NEW)
    kbcheck.kernelbench_check(_params(ref, new), lambda what, frac: None)
    assert set(order[:-1]) == {"drawn inputs", "built models", "compiled references"}
    assert order[-1] == "evaluated"
