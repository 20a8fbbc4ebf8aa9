"""GPU timing: one protocol for the reference (eager and torch.compile) and the candidate.

Protocol, per callable:
1. warm-up: at least `min_warmup` calls and at least `warmup_ms` of work (compilation,
   autotuning and caches settle);
2. the number of timed trials is chosen from the warm-up estimate to fill `budget_ms`,
   clamped to [min_trials, max_trials];
3. each trial: write a buffer larger than the L2 cache (nothing stays cached from the
   previous trial), synchronise the device (every stream is idle), record a start event,
   call, record an end event on the current stream, synchronise the device again, and
   record a second end event: `stream` time = start..end, `device` time = start..end
   after the full synchronisation. Work left running on another stream (or thread) shows
   up in the device time only; a gap between the two beyond launch latency is reported
   by `side_work()`.
4. statistics: median, min, max, mean and spread = interquartile range / median.

What is compared is timed together (`time_cuda_group`): the eager reference, its
torch.compile and the candidate run in interleaved rounds of one run, so that the
device's drift (clocks, host load, library heuristics) is the same for all of them.

On the CPU there is no timing: the Triton interpreter's speed says nothing about a GPU,
and results say so plainly (`unavailable()`).
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

CPU_REASON = ("no timing on the CPU: Triton kernels run in Triton's interpreter there, whose "
              "speed says nothing about a GPU")


def unavailable(reason: str = CPU_REASON) -> dict[str, Any]:
    return {"available": False, "reason": reason}


def summarize(times_ms: list[float]) -> dict[str, Any]:
    """Median, min, max, mean and spread (IQR / median) of a list of times in ms."""
    if not times_ms:
        raise ValueError("no times to summarise")
    xs = sorted(times_ms)
    med = statistics.median(xs)
    if len(xs) >= 4:
        q = statistics.quantiles(xs, n=4, method="inclusive")
        iqr = q[2] - q[0]
    else:
        iqr = xs[-1] - xs[0]
    return {
        "median_ms": med, "min_ms": xs[0], "max_ms": xs[-1],
        "mean_ms": statistics.fmean(xs), "spread": (iqr / med) if med > 0 else 0.0,
        "trials": len(xs),
    }


@dataclass
class TimingConfig:
    min_warmup: int = 3
    warmup_ms: float = 50.0
    min_trials: int = 10
    max_trials: int = 100
    budget_ms: float = 300.0
    flush_l2: bool = True


class L2Flusher:
    """A device buffer twice the size of the L2 cache (at least 64 MiB); `flush()` writes it."""

    def __init__(self, device: torch.device) -> None:
        props = torch.cuda.get_device_properties(device)
        l2 = int(getattr(props, "L2_cache_size", 0) or 0)
        nbytes = max(2 * l2, 64 << 20)
        self.buf = torch.empty(nbytes // 4, dtype=torch.int32, device=device)
        self.nbytes = nbytes

    def flush(self) -> None:
        self.buf.fill_(0x5A5A5A5A)


_flushers: dict[int, L2Flusher] = {}


def _flusher(device: torch.device) -> L2Flusher:
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _flushers:
        _flushers[idx] = L2Flusher(torch.device("cuda", idx))
    return _flushers[idx]


def time_cuda(fn: Callable[[], Any], device: torch.device,
              cfg: TimingConfig | None = None) -> dict[str, Any]:
    """Times `fn()` on a CUDA device with the protocol above (a group of one).

    Returns summarize() of the stream times plus `device_median_ms` (times with every
    stream drained) and `warmup_calls`.
    """
    return time_cuda_group([fn], device, cfg)[0]


def _warm_up(fn: Callable[[], Any], device: torch.device, cfg: TimingConfig) -> tuple[float, int]:
    """Calls `fn` until warm (see the protocol); its estimated ms per call and the calls."""
    torch.cuda.synchronize(device)
    calls, spent_ms = 0, 0.0
    w0 = torch.cuda.Event(enable_timing=True)
    w1 = torch.cuda.Event(enable_timing=True)
    while calls < cfg.min_warmup or spent_ms < cfg.warmup_ms:
        w0.record()
        fn()
        w1.record()
        torch.cuda.synchronize(device)
        spent_ms += w0.elapsed_time(w1)
        calls += 1
        if calls >= 1000:
            break
    return max(spent_ms / calls, 1e-3), calls


def time_cuda_group(fns: Sequence[Callable[[], Any]], device: torch.device,
                    cfg: TimingConfig | None = None) -> list[dict[str, Any]]:
    """Times several callables in one interleaved run: warm-up of each, then rounds in
    which every callable runs once, in an order rotated each round (each one runs in
    each position equally often). The device's state drifts by tens of percent over
    seconds (clocks, the host's load after a compilation, cuDNN's algorithm choice):
    timed one after the other, an identical copy of a module measured 1.3x slower than
    the module itself on the H200 (docs/bench/timing-order-h200). Interleaved, the drift
    is shared, and the ratios between them are what a comparison needs.

    The trial count fills `budget_ms` per callable on average (the slower ones get
    fewer than their share). Returns one time_cuda-style summary per callable, in
    order."""
    cfg = cfg or TimingConfig()
    flusher = _flusher(device) if cfg.flush_l2 else None
    sync = torch.cuda.synchronize
    warm = [_warm_up(fn, device, cfg) for fn in fns]
    est = sum(ms for ms, _ in warm)
    n = int(min(cfg.max_trials, max(cfg.min_trials, cfg.budget_ms * len(fns) / est)))
    k = len(fns)
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True),
                torch.cuda.Event(enable_timing=True)) for _ in range(n)] for _ in fns]
    for i in range(n):
        for j in range(k):
            f = (i + j) % k
            start, end, drained = events[f][i]
            if flusher is not None:
                flusher.flush()
            sync(device)
            start.record()
            fns[f]()
            end.record()
            sync(device)
            drained.record()
    sync(device)
    out: list[dict[str, Any]] = []
    for f in range(k):
        stream_ms = [s.elapsed_time(e) for s, e, _ in events[f]]
        device_ms = [s.elapsed_time(d) for s, _, d in events[f]]
        summary = summarize(stream_ms)
        summary["device_median_ms"] = statistics.median(device_ms)
        summary["warmup_calls"] = warm[f][1]
        summary["interleaved_with"] = k - 1
        out.append(summary)
    return out


def side_work(t: dict[str, Any], slack_ms: float = 0.05, ratio: float = 0.5) -> str | None:
    """A reason when the device time exceeds the stream time by more than launch latency:
    work continued on another stream after the timed region ended."""
    stream, dev = t["median_ms"], t["device_median_ms"]
    if dev - stream > max(slack_ms, ratio * stream):
        return (f"work continues outside the timed stream: {stream:.4g} ms on the current "
                f"stream but {dev:.4g} ms until the device is idle (side streams or threads "
                f"escape the timer)")
    return None


def speedup(reference: dict[str, Any] | None, candidate: dict[str, Any] | None) -> float | None:
    if not reference or not candidate or not reference.get("median_ms"):
        return None
    c = candidate.get("median_ms")
    if not c:
        return None
    return float(reference["median_ms"]) / float(c)


_limits: dict[int, dict[str, Any]] = {}


def device_limits(device: torch.device) -> dict[str, Any]:
    """Measured device-to-device copy bandwidth (bytes/s) and the device's description,
    cached per process. A kernel that moves its minimum bytes faster than this is
    measuring something else."""
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx in _limits:
        return _limits[idx]
    dev = torch.device("cuda", idx)
    props = torch.cuda.get_device_properties(dev)
    n = 256 << 20  # bytes per buffer
    a = torch.empty(n // 4, dtype=torch.float32, device=dev).fill_(1.0)
    b = torch.empty_like(a)
    secs = _seconds_per_call(functools.partial(b.copy_, a), dev, warmup=3, reps=10)
    del a, b  # free the buffers before the matmul measurements
    _limits[idx] = {
        "name": props.name, "sm_count": props.multi_processor_count,
        "l2_bytes": int(getattr(props, "L2_cache_size", 0) or 0),
        "copy_bandwidth": (2 * n) / secs if secs > 0 else float("inf"),
        "matmul_flops_fp32": _matmul_rate(dev, tf32=False),
        "matmul_flops_tf32": _matmul_rate(dev, tf32=True),
    }
    return _limits[idx]


def _seconds_per_call(fn: Callable[[], Any], dev: torch.device, warmup: int, reps: int) -> float:
    """Mean seconds per call of `fn`, `reps` calls back to back between two CUDA events
    (a ceiling measurement: no L2 flush, unlike time_cuda)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize(dev)
    s = torch.cuda.Event(enable_timing=True)
    e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(reps):
        fn()
    e.record()
    torch.cuda.synchronize(dev)
    return s.elapsed_time(e) / 1e3 / reps


def _matmul_rate(dev: torch.device, tf32: bool, n: int = 4096) -> float:
    """FLOP/s of a square float32 matmul through cuBLAS, with or without TF32: the
    device's ceiling for float32 matrix work (the fastest any kernel gets), measured
    once per process. The caller's TF32 setting is restored."""
    prev = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        a = torch.rand(n, n, device=dev)
        b = torch.rand(n, n, device=dev)
        secs = _seconds_per_call(functools.partial(torch.matmul, a, b), dev, warmup=2, reps=5)
        del a, b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = prev
    return 2.0 * n * n * n / secs if secs > 0 else float("inf")


def limits_summary(lim: dict[str, Any]) -> dict[str, float]:
    """The ceilings a roofline estimate needs, as reported with every timing."""
    return {"copy_bandwidth": lim["copy_bandwidth"],
            "matmul_flops_fp32": lim["matmul_flops_fp32"],
            "matmul_flops_tf32": lim["matmul_flops_tf32"]}


def min_bytes(tensors: list[Any]) -> int:
    """Bytes a kernel must move at least: every input read once and every output written
    once (distinct storages only)."""
    seen: set[tuple[int, int]] = set()
    total = 0
    for t in tensors:
        if not isinstance(t, torch.Tensor) or t.numel() == 0:
            continue
        key = (t.untyped_storage().data_ptr(), t.storage_offset())
        if key in seen:
            continue
        seen.add(key)
        # An expanded tensor (stride 0) reads only its distinct elements.
        distinct = 1
        for s, st in zip(t.shape, t.stride(), strict=True):
            if st != 0:
                distinct *= s
        total += distinct * t.element_size()
    return total
