"""The trial loop on hand-written Triton kernels (CPU, Triton interpreter)."""

from __future__ import annotations

import torch
from _verify_helpers import check, load, sbr_inputs
from mkworker.candidate import CandidateError, load_candidate


def test_correct_kernel_passes():
    out = check(load("sbr_ok"), trials=4)
    assert out.status == "ok", out.reason
    assert out.trials == 4 and out.trials_passed == 4
    assert out.failing == 0 and out.max_abs <= 1e-5
    orders = [t["order"] for t in out.per_trial]
    assert orders == ["candidate_first", "reference_first"] * 2
    assert len({t["seed"] for t in out.per_trial}) == 4


def test_trials_record_the_host_seconds_the_cpu_plan_reads():
    out = check(load("sbr_ok"), trials=3)
    assert out.status == "ok", out.reason
    for t in out.per_trial:
        for key in ("inputs_s", "reference_s", "candidate_s"):
            assert isinstance(t[key], float) and t[key] >= 0, (key, t)
    # The interpreted kernel costs more than the eager reference of the same work.
    cand = sum(t["candidate_s"] for t in out.per_trial)
    assert cand > sum(t["reference_s"] for t in out.per_trial)


def test_failed_call_still_records_its_seconds():
    out = check(load("sbr_wrong_constant"), trials=2)
    assert out.status == "mismatch"
    assert all(t["candidate_s"] >= 0 and t["inputs_s"] >= 0 for t in out.per_trial)


def test_correct_kernel_on_non_contiguous_input():
    # A transposed input: the candidate must see the same strides as in the program.
    def inputs_for(seed):
        g = torch.Generator().manual_seed(seed)
        return [torch.randn(300, 4, generator=g).t(), torch.randn(300, generator=g)]
    out = check(load("sbr_ok"), trials=2, inputs_for=inputs_for)
    assert out.status == "ok", out.reason


def test_wrong_constant_is_a_mismatch():
    out = check(load("sbr_wrong_constant"))
    assert out.status == "mismatch"
    assert out.trials_passed == 0 and out.trials == 3
    assert out.failing > 0 and out.max_abs > 0.1
    assert "elements differ" in out.reason
    assert out.worst is not None and len(out.worst["index"]) == 2


def test_off_by_one_names_the_last_element():
    out = check(load("sbr_off_by_one"), trials=2)
    assert out.status == "mismatch"
    # Only the last element is wrong; it is where the worst error is (unless relu made it 0).
    assert out.worst is not None
    assert out.worst["index"] == [3, 299]
    assert out.worst["actual"] == -1.0
    assert out.per_trial[0]["failing_elements"] == 1


def test_nan_where_reference_is_finite_fails():
    out = check(load("sbr_nan"), trials=2)
    assert out.status == "mismatch"
    assert out.nan > 0
    assert "NaN" in out.reason
    assert out.to_json()["max_abs_error"] == "inf"


def test_wrong_dtype_is_a_mismatch():
    out = check(load("sbr_wrong_dtype"), trials=1)
    assert out.status == "mismatch"
    assert "dtype float64" in out.reason


def test_exception_in_run_is_a_runtime_error_with_line():
    out = check(load("sbr_raises"))
    assert out.status == "runtime_error"
    assert "kernel launch failed on purpose" in out.reason
    assert out.line == 8
    assert out.traceback and "RuntimeError" in out.traceback


def test_keyboard_interrupt_is_not_swallowed():
    src = "import torch\n\ndef run(x, b):\n    raise KeyboardInterrupt\n"
    cand = load_candidate(src, "kbd", "builtin")
    try:
        check(cand, trials=1)
    except KeyboardInterrupt:
        pass
    else:
        raise AssertionError("KeyboardInterrupt was swallowed")


def test_system_exit_in_run_is_a_runtime_error():
    src = "import torch\n\ndef run(x, b):\n    raise SystemExit(3)\n"
    out = check(load_candidate(src, "exit", "builtin"), trials=1)
    assert out.status == "runtime_error"
    assert "exit(3)" in out.reason


def test_kernel_api_typo_is_a_compile_error():
    out = check(load("sbr_kernel_typo"), trials=1)
    assert out.status == "compile_error", out.reason
    assert "maximumm" in out.reason
    assert out.line == 13


def test_syntax_error_is_a_compile_error_with_line():
    src = "import torch\n\n\ndef run(x, b)\n    return x\n"
    try:
        load_candidate(src, "syntax", "builtin")
    except CandidateError as e:
        assert e.status == "compile_error"
        assert e.line == 4
    else:
        raise AssertionError("no error")


def test_import_error_is_a_compile_error_with_line():
    src = "import torch\n\nX = torch.not_a_function()\n\ndef run(x, b):\n    return x\n"
    try:
        load_candidate(src, "importerr", "builtin")
    except CandidateError as e:
        assert e.status == "compile_error"
        assert e.line == 3
        assert "not_a_function" in e.reason
    else:
        raise AssertionError("no error")


def test_missing_run_is_a_compile_error():
    try:
        load_candidate("import torch\n\ndef forward(x):\n    return x\n", "norun", "builtin")
    except CandidateError as e:
        assert e.status == "compile_error"
        assert "run" in e.reason
    else:
        raise AssertionError("no error")


def test_inputs_differ_per_trial_and_reference_sees_same_inputs():
    seen: list[torch.Tensor] = []

    def ref(x, b):
        seen.append(x.clone())
        return torch.relu(x * 2.0 + b)
    out = check(load("sbr_ok"), trials=3, ref=ref, inputs_for=sbr_inputs())
    assert out.status == "ok"
    assert not torch.equal(seen[0], seen[1]) and not torch.equal(seen[1], seen[2])
