"""Guards: each exercised by a kernel (or a piece of code) that tries the trick."""

from __future__ import annotations

import threading

import pytest
import torch
from _verify_helpers import check, load, source
from mkworker.candidate import CandidateError, load_candidate, op_short_name, scan_source
from mkworker.guards import (
    GlobalSnapshot,
    GuardViolation,
    OpRecorder,
    alias_pairs,
    clone_exact,
    overlaps,
    same_bits,
)

# --- tricks run through the trial loop -------------------------------------------------

def test_output_aliasing_input_is_rejected():
    out = check(load("sbr_alias_output"), trials=2)
    assert out.status == "rejected"
    assert "shares memory with input 0 (x)" in out.reason


def test_mutating_an_input_is_rejected():
    out = check(load("sbr_mutate_input"), trials=2)
    assert out.status == "rejected"
    assert "modified input 0 (x)" in out.reason
    assert "leaves unchanged" in out.reason


def test_cached_earlier_result_is_rejected():
    out = check(load("sbr_cached"), trials=3)
    assert out.status == "rejected", out.reason
    assert "previous trial's result" in out.reason
    # The first trial passed (it computed); the second returned the stale copy.
    assert out.trials_passed == 1


def test_reused_output_buffer_is_rejected():
    out = check(load("sbr_reused_buffer"), trials=3)
    assert out.status == "rejected"
    assert "same memory as the previous call" in out.reason


def test_calling_torch_relu_inside_a_custom_kernel_is_rejected():
    out = check(load("sbr_calls_torch"), trials=2)
    assert out.status == "rejected"
    assert "torch.relu" in out.reason
    assert "MK_USES_TORCH" in out.reason
    assert out.line == 20  # the line of the torch.relu call in the candidate


def test_declared_torch_op_is_allowed():
    cand = load("sbr_declares_torch")
    assert cand.uses_torch == ("relu",)
    out = check(cand, trials=2)
    assert out.status == "ok", out.reason
    assert "torch.relu" in out.torch_calls


def test_reference_origin_may_call_torch():
    out = check(load("sbr_calls_torch", origin="reference"), trials=2)
    assert out.status == "ok", out.reason


def test_torch_ops_aten_is_caught():
    out = check(load("sbr_calls_aten"), trials=1)
    assert out.status == "rejected"
    assert "aten" in out.reason


def test_disabled_torch_function_is_caught_at_aten_level():
    # The static scan forbids torch._C; run the same code through the recorder directly.
    rec = OpRecorder()
    x = torch.randn(8)
    with rec.recording():
        with torch._C.DisableTorchFunction():
            torch.relu(x)
    assert [v.short for v in rec.violations] == ["relu"]


def test_recorder_allows_allocation_views_and_metadata():
    rec = OpRecorder()
    x = torch.randn(4, 6)
    with rec.recording():
        y = torch.empty_like(x)
        z = x.view(6, 4).t().contiguous()
        _ = (x.shape, x.stride(), x.numel(), x.is_contiguous(), x[1:].data_ptr())
        y.zero_()
        y.copy_(z.t().reshape(4, 6))
    assert rec.violations == [], rec.violations


def test_recorder_flags_arithmetic_operators():
    rec = OpRecorder()
    x = torch.randn(4)
    with rec.recording():
        _ = x * 2 + 1
    assert {v.short for v in rec.violations} == {"mul", "add"}


def test_recorder_notices_a_popped_mode_stack():
    from torch.utils._python_dispatch import _pop_mode

    rec = OpRecorder()
    with pytest.raises(GuardViolation, match="mode stacks"):
        with rec.recording():
            _pop_mode()


def test_side_thread_is_rejected():
    snap = GlobalSnapshot()
    stop = threading.Event()
    t = threading.Thread(target=stop.wait, name="sneaky")
    t.start()
    try:
        why = snap.check()
    finally:
        stop.set()
        t.join()
    assert why is not None and "sneaky" in why


def test_precision_flag_change_is_rejected_and_restored():
    before = torch.backends.cuda.matmul.allow_tf32
    snap = GlobalSnapshot()
    torch.backends.cuda.matmul.allow_tf32 = not before
    why = snap.check()
    assert why is not None and "allow_tf32" in why
    assert torch.backends.cuda.matmul.allow_tf32 == before


def test_rebinding_a_torch_function_is_rejected():
    snap = GlobalSnapshot()
    orig = torch.nn.functional.gelu
    torch.nn.functional.gelu = lambda x, approximate="none": x
    try:
        why = snap.check()
    finally:
        torch.nn.functional.gelu = orig
    assert why is not None and "torch.nn.functional.gelu" in why


def test_clean_snapshot_has_no_findings():
    assert GlobalSnapshot().check() is None


# --- static scan -----------------------------------------------------------------------

@pytest.mark.parametrize("snippet,needle", [
    ("import os", "imports `os`"),
    ("import threading", "threading"),
    ("import ctypes", "ctypes"),
    ("from torch.utils._python_dispatch import _pop_mode", "dispatch mode"),
    ("s = torch.cuda.Stream()", "stream"),
    ("torch.backends.cuda.matmul.allow_tf32 = True", "precision"),
    ("torch.relu = abs", "rebind"),
    ("f = getattr(torch, 'relu')", "getattr"),
    ("import gc", "gc"),
    ("torch._C._set_grad_enabled(True)", "torch._C"),
    ("import sys\nsys._getframe(1)", "sys"),
    ("exec('x = 1')", "exec"),
    ("import triton.testing", "testing"),
])
def test_static_scan_rejects(snippet, needle):
    src = f"import torch\n{snippet}\n\ndef run(x):\n    return x\n"
    findings = scan_source(src, "subkernel")
    assert findings, snippet
    assert any(needle in why for _, why in findings), findings
    assert findings[0][0] == 2
    with pytest.raises(CandidateError) as e:
        load_candidate(src, "scan", "llm")
    assert e.value.status == "rejected"
    assert e.value.line == 2


def test_static_scan_accepts_the_fixture_kernels():
    for name in ("sbr_ok", "sbr_off_by_one", "sbr_calls_torch", "sbr_cached"):
        assert scan_source(source(name), "subkernel") == [], name


def test_composition_policy_allows_other_imports_but_not_tampering():
    src = "import numpy as np\nimport torch\nimport torch.nn as nn\n"
    assert scan_source(src, "composition") == []
    assert scan_source(src + "import gc\n", "composition")
    assert scan_source(src + "layer = getattr(object, 'x')\n", "composition") == []
    assert scan_source(src + "exec('1')\n", "composition")


def test_thread_fixture_is_rejected_statically():
    with pytest.raises(CandidateError, match="threading"):
        load("sbr_side_thread")


def test_bad_mk_uses_torch_is_rejected():
    with pytest.raises(CandidateError, match="MK_USES_TORCH"):
        load_candidate("import torch\nMK_USES_TORCH = (1, 2)\n\ndef run(x):\n    return x\n")


def test_candidate_file_is_content_addressed_and_imports_are_fresh():
    src = "import torch\nSTATE = []\n\ndef run(x):\n    STATE.append(1)\n    return len(STATE)\n"
    a = load_candidate(src, "a")
    b = load_candidate(src, "b")
    try:
        assert a.path == b.path and a.sha256 == b.sha256
        assert a.module is not b.module
        assert a.run(None) == 1 and a.run(None) == 2 and b.run(None) == 1
    finally:
        a.unload()
        b.unload()


# --- memory helpers --------------------------------------------------------------------

def test_clone_exact_keeps_layout_and_owns_memory():
    base = torch.randn(5, 7)
    for t in (base.t(), base[1:, ::2], torch.randn(7).expand(5, 7), base):
        c = clone_exact(t)
        assert c.shape == t.shape and c.stride() == t.stride()
        assert torch.equal(c, t)
        assert not overlaps(c, t)


def test_overlaps_and_alias_pairs():
    x = torch.randn(10)
    assert overlaps(x[:5], x[4:])
    assert not overlaps(x[:5], x[5:])
    assert overlaps(x.view(2, 5), x)
    assert alias_pairs([x[2:], torch.randn(3)], [torch.randn(2), x]) == {(0, 1)}


def test_same_bits_treats_nan_as_equal():
    a = torch.tensor([1.0, float("nan")])
    assert same_bits(a, a.clone())
    assert not same_bits(a, torch.tensor([1.0, 2.0]))


def test_op_short_name_matches_the_engine():
    assert op_short_name("torch.Tensor.__iadd__") == "iadd"
    assert op_short_name("torch.Tensor.add_") == "add"
    assert op_short_name("torch.nn.functional.conv2d") == "conv2d"
    assert op_short_name("aten.relu.default") == "relu"
    assert op_short_name("torch.Tensor.shape.__get__") == "shape"
