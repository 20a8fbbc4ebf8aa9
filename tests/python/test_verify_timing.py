"""Timing statistics, the side-work and suspicious-speedup checks, and GPU timing (skipped
without CUDA)."""

from __future__ import annotations

import pytest
import torch
from _verify_helpers import load, sbr_inputs, sbr_reference
from mkworker import timing
from mkworker.candidate import kernel_codes
from mkworker.verify import (
    Outcome,
    Settings,
    Side,
    TrialSpec,
    _composition_at_other_batch,
    _other_batch,
    _recheck,
    compile_check,
)

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def test_summarize():
    s = timing.summarize([4.0, 1.0, 2.0, 3.0, 100.0])
    assert s["median_ms"] == 3.0 and s["min_ms"] == 1.0 and s["max_ms"] == 100.0
    assert s["trials"] == 5
    assert s["spread"] == pytest.approx((4.0 - 2.0) / 3.0)
    with pytest.raises(ValueError):
        timing.summarize([])


def test_side_work_detection():
    assert timing.side_work({"median_ms": 1.0, "device_median_ms": 1.02}) is None
    assert timing.side_work({"median_ms": 0.005, "device_median_ms": 0.03}) is None
    why = timing.side_work({"median_ms": 0.1, "device_median_ms": 2.0})
    assert why is not None and "outside the timed stream" in why


def test_speedup_and_min_bytes():
    assert timing.speedup({"median_ms": 2.0}, {"median_ms": 0.5}) == 4.0
    assert timing.speedup(None, {"median_ms": 0.5}) is None
    x = torch.empty(10, 4)
    b = torch.empty(4).expand(10, 4)
    # x once (even when listed twice), the expanded bias by its distinct elements.
    assert timing.min_bytes([x, x, b, 3]) == 40 * 4 + 4 * 4


def test_cpu_timing_says_unavailable():
    t = timing.unavailable()
    assert t["available"] is False and "CPU" in t["reason"]


def test_other_batch():
    assert _other_batch(None, 4096) == 4095
    assert _other_batch(8, 4096) == 7
    assert _other_batch(1, None) is None
    assert _other_batch(None, None) is None


def _make(batch):
    return sbr_inputs(rows=batch if batch is not None else 4)


def _spec(cand):
    return TrialSpec(seeds=[1, 2], atol=1e-4, rtol=1e-4, device=torch.device("cpu"),
                     check_ops=True, cand_file=str(cand.path),
                     kernel_codes=kernel_codes(cand.module))


def test_recheck_catches_a_shape_specialised_cheat():
    cand = load("sbr_specialised")
    try:
        run = cand.run
        ref, side = Side(call=lambda xs: sbr_reference(*xs)), Side(call=lambda xs: run(*xs))
        settings = Settings(trials=2, atol=1e-4, rtol=1e-4, batch=4)
        out = Outcome()
        rec = _recheck(ref, side, _make, _spec(cand), settings, _other_batch(4, None), out)
    finally:
        cand.unload()
    assert rec["trials_passed"] == 6 and rec["other_batch"] == 3
    assert rec["other_batch_status"] == "mismatch"
    assert out.status == "mismatch" and "re-check at batch 3" in out.reason


def test_recheck_accepts_a_correct_kernel():
    cand = load("sbr_ok")
    try:
        run = cand.run
        ref, side = Side(call=lambda xs: sbr_reference(*xs)), Side(call=lambda xs: run(*xs))
        out = Outcome()
        settings = Settings(trials=1, atol=1e-4, rtol=1e-4, batch=4)
        rec = _recheck(ref, side, _make, _spec(cand), settings, 3, out)
    finally:
        cand.unload()
    assert out.status == "ok" and rec["other_batch_status"] == "ok"


def test_the_trial_after_timing_starts_both_sides_from_the_same_state():
    """Timing runs the reference and the candidate different numbers of times, and each
    call of a batch norm in training moves its running statistics: the other-batch trial
    after it must start them equal (on an H100 every batch-norm network "failed" there,
    on running_mean and num_batches_tracked)."""
    torch.manual_seed(0)
    ref_bn, cand_bn = torch.nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)

    def state(m: torch.nn.Module):
        return lambda: dict(m.named_buffers())

    ref = Side(call=lambda xs: ref_bn(*xs), state=state(ref_bn))
    cand = Side(call=lambda xs: cand_bn(*xs), state=state(cand_bn))
    with torch.no_grad():  # what timing does: the candidate called more often
        for _ in range(5):
            cand_bn(torch.randn(8, 3) * 4 + 2)
        ref_bn(torch.randn(8, 3))

    def make(batch):
        def inputs(seed):
            return [torch.randn(batch or 8, 3, generator=torch.Generator().manual_seed(seed))]
        return inputs

    spec = TrialSpec(seeds=[1, 2], atol=1e-4, rtol=1e-4, device=torch.device("cpu"))
    settings = Settings(trials=2, atol=1e-4, rtol=1e-4, batch=8)
    got = _composition_at_other_batch(ref, cand, make, spec, settings, 8)
    assert got == {"batch": 7, "status": "ok", "reason": ""}
    assert int(cand_bn.num_batches_tracked) == int(ref_bn.num_batches_tracked)


@cuda
def test_gpu_timing_matches_a_plain_event_loop():
    dev = torch.device("cuda")
    x = torch.randn(4096, 4096, device=dev)
    t = timing.time_cuda(lambda: torch.relu(x), dev)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    plain = []
    flush = torch.empty(256 << 20, dtype=torch.int8, device=dev)
    for _ in range(50):
        flush.zero_()
        torch.cuda.synchronize()
        s.record()
        torch.relu(x)
        e.record()
        torch.cuda.synchronize()
        plain.append(s.elapsed_time(e))
    ref = sorted(plain)[len(plain) // 2]
    assert abs(t["median_ms"] - ref) / ref < 0.10
    assert timing.side_work(t) is None


@cuda
def test_gpu_side_stream_work_is_detected():
    dev = torch.device("cuda")
    x = torch.randn(8192, 8192, device=dev)
    side = torch.cuda.Stream()

    def sneaky():
        with torch.cuda.stream(side):
            for _ in range(20):
                torch.mm(x, x)
        return torch.empty_like(x)
    t = timing.time_cuda(sneaky, dev, timing.TimingConfig(min_trials=5, max_trials=5))
    assert timing.side_work(t) is not None


@cuda
def test_gpu_device_limits():
    lim = timing.device_limits(torch.device("cuda"))
    assert lim["copy_bandwidth"] > 1e11 and lim["l2_bytes"] >= 0
    # TF32 is at least as fast as plain float32, and the caller's setting survives
    assert lim["matmul_flops_tf32"] >= 0.9 * lim["matmul_flops_fp32"] > 1e12
    assert set(timing.limits_summary(lim)) == {"copy_bandwidth", "matmul_flops_fp32",
                                               "matmul_flops_tf32"}


@cuda
def test_gpu_timing_block_eager_only_when_asked():
    from mkworker.verify import _timing_block

    dev = torch.device("cuda")
    x = torch.randn(1024, 1024, device=dev)
    res = _timing_block(torch.relu, torch.relu, [x], dev, Outcome(), None, (0, 1),
                        ("eager-only-test",), compile_reference=False)
    assert res["reference_compile"]["available"] is False
    assert "eager timing only" in res["reference_compile"]["reason"]
    assert res["reference_eager"]["median_ms"] > 0 and res["speedup_vs_compile"] is None
    assert res["limits"]["copy_bandwidth"] > 1e11


@cuda
def test_gpu_group_timing_interleaves_and_keeps_ratios():
    """Identical callables timed together measure the same; twice the work measures
    about twice; every callable gets the same number of rounds."""
    dev = torch.device("cuda")
    x = torch.randn(4096, 4096, device=dev)
    a, b, c = timing.time_cuda_group([lambda: torch.relu(x), lambda: torch.relu(x),
                                      lambda: (torch.relu(x), torch.relu(x))], dev)
    assert a["trials"] == b["trials"] == c["trials"] >= 10
    assert a["interleaved_with"] == 2
    assert abs(a["median_ms"] / b["median_ms"] - 1) < 0.05
    assert 1.6 < c["median_ms"] / a["median_ms"] < 2.4


@cuda
def test_gpu_timing_block_times_eager_compile_and_candidate_together():
    from mkworker.verify import _timing_block

    dev = torch.device("cuda")
    x = torch.randn(2048, 2048, device=dev)
    res = _timing_block(torch.relu, torch.relu, [x], dev, Outcome(), None, (0, 1),
                        ("together-test",))
    assert res["reference_compile"]["available"] is not False
    assert res["reference_compile"]["compile_s"] > 0
    assert res["candidate"]["interleaved_with"] == 2
    assert abs(res["speedup_vs_eager"] - 1) < 0.1  # the same function, timed together
    assert "interleaved" in res["protocol"]


def test_compile_modes_are_parsed_and_checked():
    from mkworker.verify import COMPILE_MODES, MethodError

    req = {"trials": 5, "atol": 1e-4, "rtol": 1e-4}
    s = Settings.parse({**req, "compile_modes": [*COMPILE_MODES, COMPILE_MODES[0]]})
    assert s.compile_modes == COMPILE_MODES  # in order, once each
    assert Settings.parse(req).compile_modes == ()
    with pytest.raises(MethodError, match="compile_modes"):
        Settings.parse({**req, "compile_modes": ["max-autotune"]})


@cuda
def test_gpu_timing_block_times_every_compile_mode_in_the_same_run():
    from mkworker.verify import COMPILE_MODES, _timing_block

    dev = torch.device("cuda")
    x = torch.randn(2048, 2048, device=dev)
    res = _timing_block(torch.relu, torch.relu, [x], dev, Outcome(), None, (0, 1),
                        ("modes-test",), compile_modes=COMPILE_MODES)
    modes = res["reference_compile_modes"]
    assert set(modes) == set(COMPILE_MODES)
    for t in modes.values():
        assert t["median_ms"] > 0 and t["compile_s"] > 0
        assert t["interleaved_with"] == 4  # eager, default, two modes, candidate
    assert res["reference_compile"]["median_ms"] > 0


def _ref(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tanh(x @ w), x.sum(dim=1)


def test_compile_check_passes_a_baseline_within_the_tolerance():
    base = [torch.randn(8, 16), torch.randn(16, 4)]
    got = compile_check(_ref, _ref, base, 1e-4, 1e-4)
    assert got["ok"] is True and got["max_abs_error"] == 0.0
    assert (got["atol"], got["rtol"]) == (1e-4, 1e-4)


def test_compile_check_names_a_baseline_outside_the_tolerance():
    # what a TF32 convolution does to a float32 reference: errors of ~1e-3
    def off(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        a, b = _ref(x, w)
        return a + 2e-3, b

    base = [torch.randn(8, 16), torch.randn(16, 4)]
    got = compile_check(_ref, off, base, 1e-4, 1e-4)
    assert got["ok"] is False
    assert got["max_abs_error"] == pytest.approx(2e-3, rel=1e-3)
    assert "output 0" in got["reason"]
    assert compile_check(_ref, off, base, 1e-2, 1e-2)["ok"] is True


def test_compile_check_of_a_baseline_that_cannot_run_is_no_verdict():
    def broken(*_: torch.Tensor) -> torch.Tensor:
        raise RuntimeError("inductor lowering failed\nmore")

    got = compile_check(_ref, broken, [torch.randn(8, 16), torch.randn(16, 4)], 1e-4, 1e-4)
    assert got["ok"] is None and got["max_abs_error"] is None
    assert got["reason"] == "not checked: RuntimeError: inductor lowering failed"


def test_compile_check_runs_each_side_on_fresh_copies():
    # a forward that writes its input in place must not change what the other side reads
    def inplace(x: torch.Tensor) -> torch.Tensor:
        return x.mul_(2)

    x = torch.randn(5)
    before = x.clone()
    assert compile_check(inplace, inplace, [x], 0.0, 0.0)["ok"] is True
    assert torch.equal(x, before)
