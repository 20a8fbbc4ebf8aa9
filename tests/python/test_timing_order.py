"""The interleaved timing protocol's logic, on the CPU: torch.cuda's events and
synchronisation are replaced by a host clock (the GPU tests in
test_verify_timing.py measure the real thing), so the order of calls, the
rounds, the trial count and what _timing_block reports are checked on every
machine."""

from __future__ import annotations

import time
from typing import Any

import pytest
import torch
from mkworker import timing, verify
from mkworker.verify import Outcome


class HostEvent:
    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def elapsed_time(self, end: HostEvent) -> float:
        return (end.t - self.t) * 1e3


class NoFlush:
    def flush(self) -> None:
        pass


@pytest.fixture
def host_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "Event", HostEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a, **k: None)
    monkeypatch.setattr(timing, "_flusher", lambda device: NoFlush())
    monkeypatch.setattr(timing, "device_limits", lambda device: {
        "name": "host clock", "copy_bandwidth": 1e11, "matmul_flops_fp32": 1e12,
        "matmul_flops_tf32": 1e12})


def _sleeper(seconds: float, log: list[str], name: str) -> Any:
    def fn() -> None:
        log.append(name)
        time.sleep(seconds)
    return fn


CFG = timing.TimingConfig(min_warmup=1, warmup_ms=0.0, min_trials=6, max_trials=6, budget_ms=1.0)


def test_rounds_rotate_the_order(host_clock: None) -> None:
    log: list[str] = []
    fns = [_sleeper(0.001, log, n) for n in "abc"]
    out = timing.time_cuda_group(fns, torch.device("cuda"), CFG)
    timed = log[3:]  # after one warm-up call each
    assert len(timed) == 18 and [out[i]["trials"] for i in range(3)] == [6, 6, 6]
    rounds = [timed[i:i + 3] for i in range(0, 18, 3)]
    assert rounds[0] == ["a", "b", "c"] and rounds[1] == ["b", "c", "a"]
    assert rounds[2] == ["c", "a", "b"] and rounds[3] == rounds[0]
    # every callable in every position twice
    for pos in range(3):
        assert sorted(r[pos] for r in rounds) == ["a", "a", "b", "b", "c", "c"]
    assert all(o["interleaved_with"] == 2 and o["warmup_calls"] == 1 for o in out)


def test_ratios_come_from_the_same_run(host_clock: None) -> None:
    log: list[str] = []
    slow, fast = _sleeper(0.004, log, "slow"), _sleeper(0.002, log, "fast")
    a, b = timing.time_cuda_group([slow, fast], torch.device("cuda"), CFG)
    assert 1.4 < a["median_ms"] / b["median_ms"] < 2.8
    single = timing.time_cuda(fast, torch.device("cuda"), CFG)
    assert single["interleaved_with"] == 0 and single["trials"] == 6


def test_trial_count_fills_the_budget_per_callable(host_clock: None) -> None:
    cfg = timing.TimingConfig(min_warmup=2, warmup_ms=0.0, min_trials=2, max_trials=1000,
                              budget_ms=20.0)
    log: list[str] = []
    out = timing.time_cuda_group([_sleeper(0.001, log, "a"), _sleeper(0.001, log, "b")],
                                 torch.device("cuda"), cfg)
    # about 20 ms per callable at ~1 ms a call (sleep overshoots, so fewer)
    assert 5 <= out[0]["trials"] <= 25 and out[0]["trials"] == out[1]["trials"]


def test_timing_block_reports_eager_and_candidate_together(host_clock: None) -> None:
    calls: list[str] = []

    def ref(x: torch.Tensor) -> torch.Tensor:
        calls.append("ref")
        time.sleep(0.002)
        return x + 1

    def cand(x: torch.Tensor) -> torch.Tensor:
        calls.append("cand")
        time.sleep(0.001)
        return x + 1

    res = verify._timing_block(ref, cand, [torch.ones(4)], torch.device("cuda"), Outcome(),
                               None, (0, 1), ("host-test",), compile_reference=False)
    assert res["available"] and "interleaved" in res["protocol"]
    assert res["reference_compile"]["available"] is False
    assert res["candidate"]["interleaved_with"] == 1
    assert res["reference_eager"]["trials"] == res["candidate"]["trials"]
    assert 1.2 < res["speedup_vs_eager"] < 3.5
    assert res["median_ms"] == res["candidate"]["median_ms"] and res["min_bytes"] == 32
    assert calls.count("ref") > 10 and calls.count("cand") > 10


def test_compiled_reference_is_reused_for_the_same_key(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []

    def fake_compile(fn: Any, mode: str | None = None) -> Any:
        compiled.append((fn, mode))
        return fn

    monkeypatch.setattr(torch, "compile", fake_compile)
    verify._COMPILED.clear()
    dev = torch.device("cpu")
    first = verify._compiled(torch.relu, [torch.ones(2)], dev, ("k", 1))
    again = verify._compiled(torch.relu, [torch.ones(2)], dev, ("k", 1))
    assert first[0] is torch.relu and again is first and len(compiled) == 1
    verify._compiled(torch.tanh, [torch.ones(2)], dev, ("k", 2))
    assert len(compiled) == 2 and list(verify._COMPILED) == [(("k", 2), None)]  # one reference
    # Other modes of the same reference are kept beside it, each compiled once.
    verify._compiled(torch.tanh, [torch.ones(2)], dev, ("k", 2), "reduce-overhead")
    verify._compiled(torch.tanh, [torch.ones(2)], dev, ("k", 2), "reduce-overhead")
    assert compiled[-1] == (torch.tanh, "reduce-overhead") and len(compiled) == 3
    assert set(verify._COMPILED) == {(("k", 2), None), (("k", 2), "reduce-overhead")}

    def broken(fn: Any) -> Any:
        raise RuntimeError("no backend\nmore")

    monkeypatch.setattr(torch, "compile", broken)
    cfn, why, secs = verify._compiled(torch.relu, [torch.ones(2)], dev, ("k", 3))
    assert cfn is None and why == "torch.compile failed: RuntimeError: no backend" and secs == 0
    verify._COMPILED.clear()


def test_timing_block_with_compile_times_all_three(host_clock: None,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch, "compile", lambda fn: fn)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: None)
    verify._COMPILED.clear()
    res = verify._timing_block(torch.relu, torch.relu, [torch.ones(8)], torch.device("cuda"),
                               Outcome(), None, (0, 1), ("host-test-3",))
    assert res["reference_compile"]["compile_s"] >= 0
    assert res["reference_compile"]["interleaved_with"] == 2
    assert res["speedup_vs_compile"] is not None
    verify._COMPILED.clear()


def test_retime_keeps_the_smaller_speedup(host_clock: None) -> None:
    def ref(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.002)
        return x

    def cand(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.002)
        return x

    tim: dict[str, Any] = {"speedup_vs_eager": 20.0, "median_ms": 0.1,
                           "reference_eager": {"median_ms": 2.0}, "reference_compile": None}
    sus: dict[str, Any] = {}
    verify._retime(tim, ref, cand, [torch.ones(2)], torch.device("cuda"), sus)
    assert sus["retimed_speedup_vs_eager"] < 2 and tim["speedup_vs_eager"] < 2
    assert tim["median_ms"] == pytest.approx(2.0 / sus["retimed_speedup_vs_eager"])
    kept: dict[str, Any] = {"speedup_vs_eager": 0.5, "median_ms": 4.0,
                            "reference_eager": {"median_ms": 2.0}}
    verify._retime(kept, ref, cand, [torch.ones(2)], torch.device("cuda"), {})
    assert kept["speedup_vs_eager"] == 0.5 and kept["median_ms"] == 4.0
