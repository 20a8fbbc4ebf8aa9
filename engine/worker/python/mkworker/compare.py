"""Comparing a candidate's outputs with the reference's, element by element.

An element passes when |actual - expected| <= atol + rtol * |expected| (torch.allclose's
rule), computed in float64. NaN passes only where the reference is NaN, +-Inf only where
the reference has the same infinity; a NaN or Inf where the reference is finite always
fails and is counted separately, because it is the signature of a broken kernel rather
than of rounding. The report names the worst element (the largest excess over the
tolerance, non-finite first) by its multi-dimensional index.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class Comparison:
    """Result of comparing one tensor (or a structure of tensors) with its reference."""

    ok: bool = True
    reason: str = ""
    elements: int = 0
    failing: int = 0
    nan: int = 0              # NaN where the reference is not NaN
    inf: int = 0              # Inf where the reference is finite (or the other infinity)
    max_abs: float = 0.0
    max_rel: float = 0.0      # over elements with |expected| >= atol (near 0 it means nothing)
    worst_output: int | None = None
    worst_index: list[int] | None = None
    worst_expected: float | None = None
    worst_actual: float | None = None
    _worst_excess: float = field(default=-math.inf, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "reason": self.reason, "elements": self.elements,
            "failing_elements": self.failing, "nan": self.nan, "inf": self.inf,
            "max_abs_error": _finite_or_str(self.max_abs),
            "max_rel_error": _finite_or_str(self.max_rel),
            "worst": None if self.worst_index is None else {
                "output": self.worst_output, "index": self.worst_index,
                "expected": _finite_or_str(self.worst_expected),
                "actual": _finite_or_str(self.worst_actual),
            },
        }


def _finite_or_str(x: float | None) -> float | str | None:
    """JSON has no NaN/Inf: they are spelled as strings, like the protocol's floats."""
    if x is None or math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _fail(c: Comparison, reason: str) -> Comparison:
    c.ok = False
    if not c.reason:
        c.reason = reason
    return c


def _unravel(flat: int, shape: tuple[int, ...]) -> list[int]:
    idx: list[int] = []
    for d in reversed(shape):
        idx.append(flat % d if d else 0)
        flat = flat // d if d else 0
    return list(reversed(idx))


def compare_tensor(expected: torch.Tensor, actual: Any, atol: float, rtol: float,
                   out: Comparison | None = None, output_index: int = 0,
                   label: str = "output") -> Comparison:
    """Compares one tensor; accumulates into `out` (a fresh Comparison when None)."""
    c = out if out is not None else Comparison()
    if not isinstance(actual, torch.Tensor):
        return _fail(c, f"{label} is a {type(actual).__name__}, the reference returns a tensor")
    if tuple(actual.shape) != tuple(expected.shape):
        return _fail(c, f"{label} has shape {list(actual.shape)}, the reference "
                        f"{list(expected.shape)}")
    if actual.dtype != expected.dtype:
        return _fail(c, f"{label} has dtype {str(actual.dtype).replace('torch.', '')}, the "
                        f"reference {str(expected.dtype).replace('torch.', '')}")
    if actual.device != expected.device:
        return _fail(c, f"{label} is on {actual.device}, the reference on {expected.device}")
    n = expected.numel()
    c.elements += n
    if n == 0:
        return c
    if expected.dtype == torch.bool or not (expected.is_floating_point() or expected.is_complex()):
        return _compare_exact(expected, actual, c, output_index, label)
    _compare_float(expected.detach().reshape(-1), actual.detach().reshape(-1),
                   tuple(expected.shape), atol, rtol, c, output_index, label)
    return c


# Elements compared at once. The float64 comparison keeps about ten temporaries of a
# chunk alive (8 bytes an element each): 2**24 elements cost ~1.3 GB at the peak, where
# comparing a level-1 output of 1.6e9 elements at once needed ~60 GB and ran the
# verifier out of memory on an 80 GB GPU.
CHUNK = 1 << 24


def chunks(*flat: torch.Tensor) -> Iterator[tuple[int, list[torch.Tensor]]]:
    """(offset, the same slice of each 1-d tensor, as float64) over their length,
    CHUNK elements at a time."""
    n, size = flat[0].numel(), CHUNK
    for lo in range(0, n, size):
        yield lo, [t[lo:lo + size].to(torch.float64) for t in flat]


@dataclass
class _Worst:
    excess: float = -math.inf
    flat: int = -1
    expected: float = 0.0
    actual: float = 0.0


def _compare_float(e_all: torch.Tensor, a_all: torch.Tensor, shape: tuple[int, ...],
                   atol: float, rtol: float, c: Comparison, output_index: int,
                   label: str) -> None:
    """The float comparison, chunk by chunk (CHUNK): counts, largest errors and the
    worst element over the whole tensor, as one pass over it would find them."""
    nfail = 0
    nan_before, inf_before = c.nan, c.inf
    worst = _Worst()
    for lo, (e, a) in chunks(e_all, a_all):
        e_nan, a_nan = torch.isnan(e), torch.isnan(a)
        e_fin, a_fin = torch.isfinite(e), torch.isfinite(a)
        diff = (a - e).abs()
        tol = atol + rtol * e.abs()
        # Elementwise pass: both finite and close; both NaN; the same infinity.
        same_inf = torch.isinf(e) & torch.isinf(a) & (torch.sign(a) == torch.sign(e))
        passed = (e_fin & a_fin & (diff <= tol)) | (e_nan & a_nan) | same_inf
        bad_nan = a_nan & ~e_nan
        bad_inf = torch.isinf(a) & ~same_inf
        fails = int((~passed).sum().item())
        nfail += fails
        c.nan += int(bad_nan.sum().item())
        c.inf += int(bad_inf.sum().item())
        both_fin = e_fin & a_fin
        if bool(both_fin.any().item()):
            c.max_abs = max(c.max_abs, float(diff[both_fin].max().item()))
            big = both_fin & (e.abs() >= max(atol, 1e-30))
            if bool(big.any().item()):
                c.max_rel = max(c.max_rel, float((diff[big] / e[big].abs()).max().item()))
        if fails:
            # Excess over the tolerance; non-finite failures rank above every finite one.
            excess = torch.where(both_fin, diff - tol, torch.full_like(diff, math.inf))
            excess = torch.where(passed, torch.full_like(diff, -math.inf), excess)
            at = int(torch.argmax(excess).item())
            x = float(excess[at].item())
            if x > worst.excess:
                worst = _Worst(x, lo + at, float(e[at].item()), float(a[at].item()))
    if c.nan > nan_before or c.inf > inf_before:
        c.max_abs = math.inf
    c.failing += nfail
    if not nfail:
        return
    if worst.excess > c._worst_excess:
        c._worst_excess = worst.excess
        c.worst_output = output_index
        c.worst_index = _unravel(worst.flat, shape)
        c.worst_expected = worst.expected
        c.worst_actual = worst.actual
    where = ", ".join(str(i) for i in c.worst_index or [])
    if c.nan or c.inf:
        what = f"{c.nan} NaN and {c.inf} Inf values where the reference is finite"
    else:
        what = (f"{nfail} of {e_all.numel()} elements differ by more than atol + rtol*|ref| "
                f"(max abs error {c.max_abs:.3g})")
    _fail(c, f"{label}: {what}; worst at [{where}]: expected "
             f"{c.worst_expected:.6g}, got {c.worst_actual:.6g}")


def _compare_exact(expected: torch.Tensor, actual: torch.Tensor, c: Comparison,
                   output_index: int, label: str) -> Comparison:
    eq = (expected == actual).reshape(-1)
    nfail = int((~eq).sum().item())
    if nfail:
        c.failing += nfail
        flat = int(torch.argmin(eq.to(torch.uint8)).item())
        e = expected.reshape(-1)[flat]
        a = actual.reshape(-1)[flat]
        d = abs(float(a.to(torch.float64).item()) - float(e.to(torch.float64).item()))
        c.max_abs = max(c.max_abs, d)
        if c.worst_index is None:
            c.worst_output = output_index
            c.worst_index = _unravel(flat, tuple(expected.shape))
            c.worst_expected = float(e.item())
            c.worst_actual = float(a.item())
        _fail(c, f"{label}: {nfail} of {expected.numel()} elements differ (exact dtype "
                 f"{str(expected.dtype).replace('torch.', '')})")
    return c


def flatten_outputs(value: Any) -> list[Any]:
    """A forward's or run()'s return value as a list: a tensor -> [tensor]; tuple/list kept."""
    if isinstance(value, tuple | list):
        return list(value)
    return [value]


def compare_outputs(expected: list[torch.Tensor], actual: Any, atol: float, rtol: float,
                    names: list[str] | None = None,
                    atols: list[float] | None = None) -> Comparison:
    """Compares run()'s return value with the reference's output list.

    One output: `run` returns that tensor (a 1-tuple is accepted); several: a tuple or list in
    the reference's order. `atols`, when given, is each output's own absolute tolerance
    (precision.py widens it by the reference's TF32 error) in place of `atol`.
    """
    c = Comparison()
    got = flatten_outputs(actual)
    if len(got) != len(expected):
        kind = "a tensor" if len(expected) == 1 else f"a tuple of {len(expected)} tensors"
        return _fail(c, f"returned {len(got)} value(s); the reference returns {kind}")
    for i, (e, a) in enumerate(zip(expected, got, strict=True)):
        label = names[i] if names and i < len(names) else f"output {i}"
        a_tol = atols[i] if atols is not None and i < len(atols) else atol
        compare_tensor(e, a, a_tol, rtol, c, i, label)
    return c


def fingerprint(t: torch.Tensor, count: int = 4096) -> torch.Tensor:
    """A fixed sample of a tensor's elements (float64, on the CPU) for cheap later comparisons:
    deciding whether a candidate returned an earlier call's result."""
    flat = t.detach().reshape(-1)
    n = flat.numel()
    if n <= count:
        return flat.to(device="cpu", dtype=torch.float64).clone()
    # Integer arithmetic: a float32 linspace rounds n - 1 up to n for n > 2**24,
    # which indexed past the end (a device-side assert on the GPU).
    idx = torch.arange(count, device=flat.device, dtype=torch.int64) * (n - 1) // (count - 1)
    return flat[idx].to(device="cpu", dtype=torch.float64)


def fingerprints_match(a: torch.Tensor, b: torch.Tensor, atol: float, rtol: float) -> bool:
    if a.shape != b.shape:
        return False
    return bool(torch.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
