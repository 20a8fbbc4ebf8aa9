"""Verification methods of the runtime worker: verify_subkernel, verify_composition,
time_reference (schemas in docs/verify.md).

The verifier decides "correct" and "how fast". For a candidate it runs N trials, each on
fresh inputs from its own seed, alternating whether the candidate runs before or after
the reference; each trial compares the outputs (compare.py) and applies the guards
(guards.py): aliasing, modified inputs, results of an earlier call, torch calls a custom
kernel must not make, global state. On a GPU the reference (eager and torch.compile) and
the candidate are timed with one protocol (timing.py); speedups beyond 10x or beyond the
device's measured bandwidth are re-checked with more trials and another batch size before
they are accepted. On the CPU, Triton runs in its interpreter and there is no timing.

A failure of the candidate is a result (status mismatch / compile_error / runtime_error /
rejected), never an error response; errors (MethodError) are for bad requests and for a
reference that cannot run. A CUDA error that poisons the context ends the process so
that the engine's supervisor restarts the worker (the job reads "crashed").
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from . import memory, precision, timing, warm
from .candidate import (
    Candidate,
    CandidateError,
    error_line,
    is_triton_compile_error,
    kernel_codes,
    load_candidate,
    load_file,
    raised_in,
    short_traceback,
)
from .compare import Comparison, compare_outputs, compare_tensor, fingerprint, fingerprints_match
from .compare import flatten_outputs as _flatten
from .guards import (
    GlobalSnapshot,
    GuardViolation,
    KernelLaunches,
    OpRecorder,
    alias_pairs,
    clone_exact,
    same_bits,
)

Progress = Callable[[str, float], None]

SUSPICIOUS_SPEEDUP = 10.0      # over eager: re-check before accepting
BANDWIDTH_SLACK = 1.25         # x the measured copy bandwidth
RECHECK_TRIAL_FACTOR = 3       # re-check runs this many times the trials, on new seeds
STATUSES = ("ok", "mismatch", "compile_error", "runtime_error", "rejected")


class MethodError(Exception):
    """An error response (docs/protocol.md error kinds): the request or the reference is at
    fault, not the candidate."""

    def __init__(self, kind: str, message: str, line: int | None = None,
                 tb: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.line = line
        self.traceback = tb

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {"kind": self.kind, "message": self.message}
        if self.line is not None:
            d["line"] = self.line
        if self.traceback:
            d["traceback"] = self.traceback
        return d


# ---------------------------------------------------------------------------------------
# Parameters


def _get(params: dict[str, Any], key: str, kind: type | tuple[type, ...], default: Any,
         required: bool = False) -> Any:
    if key not in params or params[key] is None:
        if required:
            raise MethodError("bad_request", f"missing parameter `{key}`")
        return default
    v = params[key]
    if isinstance(v, bool) and kind in (int, float, (int, float)):
        raise MethodError("bad_request", f"parameter `{key}` must be a number")
    if not isinstance(v, kind):
        raise MethodError("bad_request", f"parameter `{key}` has the wrong type "
                                         f"({type(v).__name__})")
    return v


# torch.compile modes a request may ask to time beside the default mode.
COMPILE_MODES = ("max-autotune-no-cudagraphs", "reduce-overhead")


@dataclass
class Settings:
    # trials, atol and rtol have no default here: the engine always sends them, and their
    # one default is the engine's (mk_verify_options_init). A verification request without
    # them is refused rather than judged by a second default.
    trials: int
    atol: float
    rtol: float
    seed: int = 0
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    timing: bool = True
    compile_reference: bool = True
    # More torch.compile modes timed beside the default one (COMPILE_MODES), in the same
    # interleaved run: the baselines a user could also pick.
    compile_modes: tuple[str, ...] = ()
    batch: int | None = None

    @staticmethod
    def parse(params: dict[str, Any], batch_default: int | None = None,
              verifying: bool = True) -> Settings:
        """verifying=False (time_reference) compares nothing: no trials or tolerances."""
        s = Settings(trials=_get(params, "trials", int, 1, required=verifying),
                     atol=float(_get(params, "atol", (int, float), 0.0, required=verifying)),
                     rtol=float(_get(params, "rtol", (int, float), 0.0, required=verifying)))
        if not 1 <= s.trials <= 1000:
            raise MethodError("bad_request", "`trials` must be between 1 and 1000")
        s.seed = _get(params, "seed", int, 0)
        if not (s.atol >= 0 and s.rtol >= 0 and math.isfinite(s.atol + s.rtol)):
            raise MethodError("bad_request", "`atol` and `rtol` must be finite and >= 0")
        s.device = _device(_get(params, "device", str, None))
        s.timing = bool(_get(params, "timing", bool, True))
        s.compile_reference = bool(_get(params, "compile_reference", bool, True))
        modes = _get(params, "compile_modes", list, [])
        if any(m not in COMPILE_MODES for m in modes):
            raise MethodError("bad_request", "`compile_modes` must be among "
                                             + ", ".join(COMPILE_MODES))
        s.compile_modes = tuple(dict.fromkeys(modes))
        s.batch = _get(params, "batch", int, batch_default)
        if s.batch is not None and s.batch < 1:
            raise MethodError("bad_request", "`batch` must be >= 1")
        return s


def _device(name: str | None) -> torch.device:
    if name is None:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cpu":
        os.environ["TRITON_INTERPRET"] = "1"
        return torch.device("cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise MethodError("unsupported", "device `cuda` requested but this worker sees no "
                                             "CUDA device")
        os.environ.pop("TRITON_INTERPRET", None)
        dev = torch.device(name)
        if dev.index is None:
            dev = torch.device("cuda", torch.cuda.current_device())
        return dev
    raise MethodError("bad_request", f"unknown device `{name}` (cpu or cuda)")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _fatal_if_poisoned(device: torch.device, exc: BaseException) -> None:
    """A sticky CUDA error (illegal address, ...) leaves the context unusable: end the process
    so that the supervisor reports the job as crashed and restarts the worker."""
    if device.type != "cuda":
        return
    try:
        torch.cuda.synchronize(device)
        torch.empty(1, device=device).add_(1)
        torch.cuda.synchronize(device)
    except Exception as e2:  # the context is gone
        sys.stderr.write(f"mkworker: CUDA context unusable after candidate error: {exc}\n"
                         f"mkworker: {e2}\n")
        sys.stderr.flush()
        os._exit(70)


# ---------------------------------------------------------------------------------------
# The trial loop


@dataclass
class Side:
    """One side of a comparison: a callable on the input list, and what it owns."""

    call: Callable[[list[Any]], Any]
    owned: Callable[[], dict[str, torch.Tensor]] = dict  # params/buffers outputs must not alias
    state: Callable[[], dict[str, torch.Tensor]] | None = None  # mutable state (buffers)


@dataclass
class Outcome:
    """The result of a verification (to_json() gives the report of docs/verify.md)."""

    status: str = "ok"
    reason: str = ""
    line: int | None = None
    traceback: str | None = None
    error_kind: str | None = None
    trials: int = 0
    trials_passed: int = 0
    max_abs: float = 0.0
    max_rel: float = 0.0
    failing: int = 0
    elements: int = 0
    nan: int = 0
    inf: int = 0
    worst: dict[str, Any] | None = None
    per_trial: list[dict[str, Any]] = field(default_factory=list)
    torch_calls: list[str] = field(default_factory=list)
    # The largest TF32 error of the reference itself on a trial that passed only against
    # the full-FP32 result (precision.py); None when every trial passed the plain check.
    tf32_noise: float | None = None
    # The same for the state a forward updates (batch-norm running statistics computed
    # from TF32 convolutions): the largest TF32 error of the reference's own buffers on a
    # trial whose buffers passed only against the full-FP32 run. Kept apart from
    # tf32_noise: KernelBench compares outputs, not buffers, so a composition whose
    # buffers alone needed it is still accepted (docs/verify.md).
    state_tf32_noise: float | None = None

    def fail(self, status: str, reason: str, line: int | None = None,
             tb: str | None = None) -> None:
        # The first hard failure wins; rejected/errors outrank a mismatch.
        if self.status in ("ok", "mismatch") and (status != "mismatch" or self.status == "ok"):
            self.status, self.reason, self.line, self.traceback = status, reason, line, tb

    def to_json(self) -> dict[str, Any]:
        cmp = Comparison(max_abs=self.max_abs, max_rel=self.max_rel)
        j = cmp.to_json()
        return {
            "status": self.status, "reason": self.reason, "line": self.line,
            "traceback": self.traceback, "error_kind": self.error_kind,
            "trials": self.trials, "trials_passed": self.trials_passed,
            "max_abs_error": j["max_abs_error"], "max_rel_error": j["max_rel_error"],
            "worst": self.worst, "failing_elements": self.failing, "elements": self.elements,
            "nonfinite": {"nan": self.nan, "inf": self.inf},
            "per_trial": self.per_trial,
            "torch_calls": self.torch_calls,
            "reference_tf32": None if self.tf32_noise is None else {
                "noise": self.tf32_noise, "factor": precision.NOISE_FACTOR,
                "compared_with": "fp32"},
            "state_tf32": None if self.state_tf32_noise is None else {
                "noise": self.state_tf32_noise, "factor": precision.NOISE_FACTOR,
                "compared_with": "fp32"},
        }


@dataclass
class TrialSpec:
    seeds: list[int]
    atol: float
    rtol: float
    device: torch.device
    check_ops: bool = False
    allowed_ops: tuple[str, ...] = ()
    cand_file: str | None = None
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    state_label: str = "buffer"
    kernel_codes: frozenset[Any] = frozenset()
    # Compare a failing candidate with the reference run again in full FP32
    # (precision.py): set where the reference may run TF32.
    exact_rerun: bool = False


class _ReferenceFailed(Exception):
    pass


def _name(names: list[str], i: int, kind: str) -> str:
    return names[i] if i < len(names) else f"{kind} {i}"


_COMPILE_LIKE = (NameError, AttributeError, TypeError, ImportError, NotImplementedError)


def _classify(exc: BaseException, cand_file: str | None, device: torch.device,
              out: Outcome, codes: frozenset[Any] = frozenset()) -> None:
    """Turns an exception raised by the candidate into a status."""
    # Triton's interpreter wraps the kernel's own exception: classify that one.
    while type(exc).__name__ == "InterpreterError" and exc.__cause__ is not None:
        exc = exc.__cause__
    line = error_line(exc, cand_file) if cand_file else None
    tb = short_traceback(exc)
    if isinstance(exc, CandidateError):
        out.fail(exc.status, exc.reason, exc.line, exc.traceback)
    elif isinstance(exc, GuardViolation):
        out.fail("rejected", str(exc), line)
    elif is_triton_compile_error(exc):
        msg = str(exc).strip().splitlines()
        out.fail("compile_error", "Triton compile error: " + (msg[-1] if msg else ""), line, tb)
    elif device.type == "cpu" and isinstance(exc, _COMPILE_LIKE) and raised_in(exc, codes):
        # The interpreter runs the kernel as Python: what the compiler rejects on a GPU
        # surfaces as these exceptions inside the kernel's own frame.
        first = str(exc).strip().splitlines()
        out.fail("compile_error", f"Triton kernel error: {type(exc).__name__}: "
                                  f"{first[0] if first else ''}", line, tb)
    elif isinstance(exc, torch.OutOfMemoryError | MemoryError):
        # The server releases every cache the worker keeps (memory.release) and runs
        # the job once more when that gave anything back: nothing to free here.
        out.error_kind = "oom"
        out.fail("runtime_error", f"out of memory: {str(exc).splitlines()[0] if str(exc) else ''}",
                 line, tb)
    elif isinstance(exc, SystemExit):
        out.fail("runtime_error", f"the candidate called exit({exc.code})", line, tb)
    else:
        _fatal_if_poisoned(device, exc)
        first = str(exc).strip().splitlines()
        msg = f"{type(exc).__name__}: {first[0] if first else ''}"
        if isinstance(exc, ValueError):
            msg += " (a candidate raises ValueError for shapes it does not handle)"
        out.fail("runtime_error", msg, line, tb)


def _call_candidate(cand: Side, inputs: list[Any], spec: TrialSpec,
                    out: Outcome) -> tuple[bool, Any]:
    """Runs the candidate under the guards. (False, None) when it failed (out says why)."""
    snap = GlobalSnapshot()
    rec = OpRecorder(spec.allowed_ops, spec.cand_file) if spec.check_ops else None
    try:
        with torch.no_grad():
            if rec is not None:
                with rec.recording():
                    result = cand.call(inputs)
            else:
                result = cand.call(inputs)
        # Only the current stream: work the candidate left on another stream is not
        # waited for, and shows up as wrong results.
        if spec.device.type == "cuda":
            torch.cuda.current_stream(spec.device).synchronize()
    except KeyboardInterrupt:
        raise
    except BaseException as e:  # every candidate failure is a result
        _classify(e, spec.cand_file, spec.device, out, spec.kernel_codes)
        why = snap.check()
        if why and out.status == "runtime_error":
            out.reason += f"; it also {why}"
        return False, None
    why = snap.check()
    if why:
        out.fail("rejected", f"the candidate {why}")
        return False, None
    if rec is not None:
        for c in rec.calls:
            if c.name not in out.torch_calls and len(out.torch_calls) < 50:
                out.torch_calls.append(c.name)
        why = rec.reason()
        if why:
            first = rec.violations[0]
            out.fail("rejected", f"the candidate {why}", first.line)
            return False, None
    return True, result


def _check_memory(ref_out: list[Any], ref_in: list[Any], cand_out: list[Any],
                  cand_in: list[Any], ref: Side, cand: Side, prev_cand_out: list[Any],
                  spec: TrialSpec) -> str | None:
    """Aliasing guard: the candidate's outputs may share memory only where the reference's
    do (a view subkernel, a mutated buffer returned)."""
    bad = alias_pairs(cand_out, cand_in) - alias_pairs(ref_out, ref_in)
    if bad:
        i, j = min(bad)
        return (f"{_name(spec.output_names, i, 'output')} shares memory with "
                f"{_name(spec.input_names, j, 'input')}; the reference returns new memory there")
    ref_owned, cand_owned = ref.owned(), cand.owned()
    ok_owned = {(i, k) for i, j in alias_pairs(ref_out, list(ref_owned.values()))
                for k in [list(ref_owned)[j]]}
    keys = list(cand_owned)
    for i, j in sorted(alias_pairs(cand_out, list(cand_owned.values()))):
        if (i, keys[j]) not in ok_owned:
            return (f"{_name(spec.output_names, i, 'output')} shares memory with the model's "
                    f"`{keys[j]}`")
    foreign = [*ref_out, *ref_in]
    if alias_pairs(cand_out, foreign):
        i, _ = min(alias_pairs(cand_out, foreign))
        return (f"{_name(spec.output_names, i, 'output')} shares memory with a tensor of the "
                f"reference run: the candidate found the reference's result instead of "
                f"computing it")
    if prev_cand_out and alias_pairs(cand_out, prev_cand_out):
        i, _ = min(alias_pairs(cand_out, prev_cand_out))
        return (f"{_name(spec.output_names, i, 'output')} is the same memory as the previous "
                f"call's result (a reused output buffer overwrites what the caller holds)")
    tensors = [t for t in cand_out if isinstance(t, torch.Tensor)]
    own_pairs = {(a, b) for a, b in alias_pairs(cand_out, cand_out) if a < b}
    ref_pairs = {(a, b) for a, b in alias_pairs(ref_out, ref_out) if a < b}
    if tensors and own_pairs - ref_pairs:
        a, b = min(own_pairs - ref_pairs)
        return (f"{_name(spec.output_names, a, 'output')} and "
                f"{_name(spec.output_names, b, 'output')} share memory; the reference's do not")
    return None


def _check_inputs(base: list[Any], ref_in: list[Any], cand_in: list[Any], spec: TrialSpec,
                  out: Outcome) -> bool:
    """Mutation guard. False when the candidate failed it (out says why)."""
    for j, b in enumerate(base):
        if not isinstance(b, torch.Tensor):
            continue
        ref_changed = not same_bits(ref_in[j], b)
        cand_changed = not same_bits(cand_in[j], b)
        name = _name(spec.input_names, j, "input")
        if cand_changed and not ref_changed:
            out.fail("rejected", f"the candidate modified {name}, which the reference leaves "
                                 f"unchanged (inputs are read-only unless the op is in-place)")
            return False
        if ref_changed:
            c = compare_tensor(ref_in[j], cand_in[j], spec.atol, spec.rtol,
                               label=f"{name} (updated in place by the reference)")
            if not cand_changed:
                out.fail("mismatch", f"the reference updates {name} in place; the candidate "
                                     f"leaves it unchanged")
                return False
            if not c.ok:
                out.fail("mismatch", c.reason)
                return False
    return True


def _check_state(ref: Side, cand: Side, spec: TrialSpec, out: Outcome,
                 exact_state: Callable[[], dict[str, torch.Tensor] | None],
                 record: dict[str, Any]) -> bool:
    """The state a forward updated, compared like outputs: plainly, then (for a buffer
    that fails) against the reference's full-FP32 run within the reference's own TF32
    error of it, as `_against_exact` does for outputs."""
    if ref.state is None or cand.state is None:
        return True
    rs, cs = ref.state(), cand.state()
    for k, rv in rs.items():
        cv = cs.get(k)
        if cv is None:
            continue
        c = compare_tensor(rv, cv, spec.atol, spec.rtol, label=f"{spec.state_label} `{k}`")
        if c.ok or _state_within_tf32(k, rv, cv, exact_state, spec, record, out):
            continue
        out.fail("mismatch", c.reason + " (state updated by forward)")
        return False
    return True


def _state_within_tf32(key: str, rv: torch.Tensor, cv: Any,
                       exact_state: Callable[[], dict[str, torch.Tensor] | None],
                       spec: TrialSpec, record: dict[str, Any], out: Outcome) -> bool:
    exact = exact_state()
    ev = exact.get(key) if exact else None
    if ev is None or not isinstance(rv, torch.Tensor):
        return False
    noise = precision.output_noise([rv], [ev])[0]
    if noise <= 0.0:
        return False  # no TF32 in the reference's buffer: the plain verdict stands
    atol = precision.widened_atol(spec.atol, [noise])[0]
    if not compare_tensor(ev, cv, atol, spec.rtol, label=f"{spec.state_label} `{key}`").ok:
        return False
    record["state_tf32_noise"] = max(record.get("state_tf32_noise", 0.0), noise)
    out.state_tf32_noise = max(out.state_tf32_noise or 0.0, noise)
    return True


def _snapshot_state(side: Side) -> dict[str, torch.Tensor] | None:
    if side.state is None:
        return None
    return {k: v.detach().clone() for k, v in side.state().items()}


def _load_state(side: Side, saved: dict[str, torch.Tensor] | None) -> None:
    if side.state is None or saved is None:
        return
    live = side.state()
    with torch.no_grad():
        for k, v in saved.items():
            if k in live:
                live[k].copy_(v)


class _ExactRerun:
    """The reference run once more in full FP32 from where this trial's run started
    (precision.py), at most once per trial and only when a comparison asks: its outputs
    and the state it left. The reference's own state is put back as its first run left
    it. None when the rerun fails (the plain verdicts stand) or is not asked for."""

    def __init__(self, ref: Side, base: list[Any], pre_state: dict[str, torch.Tensor] | None,
                 spec: TrialSpec) -> None:
        self.ref, self.base, self.pre_state, self.spec = ref, base, pre_state, spec
        self.done = False
        self.result: tuple[list[Any], dict[str, torch.Tensor] | None] | None = None

    def get(self) -> tuple[list[Any], dict[str, torch.Tensor] | None] | None:
        if not self.done and self.spec.exact_rerun:
            self.done = True
            self.result = self._run()
        return self.result

    def state(self) -> dict[str, torch.Tensor] | None:
        got = self.get()
        return got[1] if got else None

    def _run(self) -> tuple[list[Any], dict[str, torch.Tensor] | None] | None:
        ref = self.ref
        post_state = _snapshot_state(ref)
        _load_state(ref, self.pre_state)  # the rerun starts where this trial's reference started
        try:
            with torch.no_grad(), precision.full_fp32():
                exact_out = _flatten(ref.call([clone_exact(x) for x in self.base]))
            _sync(self.spec.device)
            return exact_out, _snapshot_state(ref)
        except Exception as e:
            _fatal_if_poisoned(self.spec.device, e)
            return None  # the plain verdicts stand; the first run of the reference worked
        finally:
            _load_state(ref, post_state)


def _against_exact(exact: _ExactRerun, ref_out: list[Any], cand_raw: Any, spec: TrialSpec,
                   plain: Comparison, record: dict[str, Any], out: Outcome) -> Comparison:
    """A candidate that failed the plain comparison, compared again with the reference run
    in full FP32, within the reference's own TF32 error (precision.py). Returns the
    comparison that decides: the exact one when it passes, else the plain one."""
    got = exact.get()
    if got is None:
        return plain
    exact_out = got[0]
    noise = precision.output_noise(ref_out, exact_out)
    if not noise or max(noise) <= 0.0:
        return plain  # the reference used no TF32 here: nothing to allow for
    c = compare_outputs(exact_out, cand_raw, spec.atol, spec.rtol, spec.output_names,
                        atols=precision.widened_atol(spec.atol, noise))
    if not c.ok:
        return plain
    record["reference_tf32_noise"] = max(noise)
    out.tf32_noise = max(out.tf32_noise or 0.0, max(noise))
    return c


def run_trials(ref: Side, cand: Side, inputs_for: Callable[[int], list[Any]],
               spec: TrialSpec, progress: Progress | None = None,
               progress_span: tuple[float, float] = (0.0, 1.0)) -> Outcome:
    """Runs the trials. Raises _ReferenceFailed when the reference itself cannot run."""
    out = Outcome()
    prev_ref_fp: list[torch.Tensor] | None = None
    prev_cand_fp: list[torch.Tensor] | None = None
    prev_cand_out: list[Any] = []
    prev_passed = False
    lo, hi = progress_span
    n = len(spec.seeds)
    for t, seed in enumerate(spec.seeds):
        if progress is not None:
            progress(f"trial {t + 1}/{n} (seed {seed})", lo + (hi - lo) * t / n)
        t_inputs = time.perf_counter()
        try:
            with torch.no_grad():
                base = inputs_for(seed)
        except MethodError:
            raise
        except Exception as e:
            raise _ReferenceFailed(f"making the inputs failed: {type(e).__name__}: {e}") from e
        ref_in = [clone_exact(x) for x in base]
        cand_in = [clone_exact(x) for x in base]
        cand_first = t % 2 == 0
        record: dict[str, Any] = {"trial": t, "seed": seed,
                                  "order": "candidate_first" if cand_first else "reference_first",
                                  "inputs_s": round(time.perf_counter() - t_inputs, 6)}
        out.trials += 1
        ok_call, cand_raw = True, None
        t_cand = time.perf_counter()
        if cand_first:
            ok_call, cand_raw = _call_candidate(cand, cand_in, spec, out)
            t_cand = time.perf_counter() - t_cand
        pre_state = _snapshot_state(ref) if spec.exact_rerun else None
        t_ref = time.perf_counter()
        try:
            with torch.no_grad():
                ref_out = _flatten(ref.call(ref_in))
            _sync(spec.device)
            record["reference_s"] = round(time.perf_counter() - t_ref, 6)
        except Exception as e:
            _fatal_if_poisoned(spec.device, e)
            raise _ReferenceFailed(f"the reference failed: {type(e).__name__}: {e}") from e
        if not cand_first:
            t_cand = time.perf_counter()
            ok_call, cand_raw = _call_candidate(cand, cand_in, spec, out)
            t_cand = time.perf_counter() - t_cand
        # Host seconds of the candidate's call (what a kernel costs under the CPU's
        # interpreter), of making the inputs (the program before the subkernel) and of
        # the reference: the engine's CPU plan sizes its work from them.
        record["candidate_s"] = round(t_cand, 6)
        if not ok_call:
            record["status"] = out.status
            out.per_trial.append(record)
            break
        cand_out = _flatten(cand_raw)
        why = _check_memory(ref_out, ref_in, cand_out, cand_in, ref, cand, prev_cand_out, spec)
        if why:
            out.fail("rejected", f"the candidate's {why}")
            record["status"] = "rejected"
            out.per_trial.append(record)
            break
        exact = _ExactRerun(ref, base, pre_state, spec)
        if not _check_inputs(base, ref_in, cand_in, spec, out) or \
                not _check_state(ref, cand, spec, out, exact.state, record):
            record["status"] = out.status
            out.per_trial.append(record)
            if out.status != "mismatch":
                break
            continue
        c = compare_outputs(ref_out, cand_raw, spec.atol, spec.rtol, spec.output_names)
        if not c.ok and spec.exact_rerun:
            c = _against_exact(exact, ref_out, cand_raw, spec, c, record, out)
        out.elements += c.elements
        out.failing += c.failing
        out.nan += c.nan
        out.inf += c.inf
        out.max_abs = max(out.max_abs, c.max_abs)
        out.max_rel = max(out.max_rel, c.max_rel)
        record.update({"passed": c.ok, "max_abs_error": c.to_json()["max_abs_error"],
                       "failing_elements": c.failing})
        # Cached-result guard: the same answer for different data.
        ref_fp = [fingerprint(x) for x in ref_out if isinstance(x, torch.Tensor)]
        cand_fp = [fingerprint(x) if isinstance(x, torch.Tensor) else torch.empty(0)
                   for x in cand_out]
        # Only after a passing trial: a kernel that is wrong the same way every time (all
        # zeros) is a mismatch, not a cache.
        if prev_passed and prev_ref_fp is not None and prev_cand_fp is not None and \
                len(cand_fp) == len(prev_cand_fp) == len(ref_fp):
            data_changed = any(not fingerprints_match(a, b, spec.atol, spec.rtol)
                               for a, b in zip(ref_fp, prev_ref_fp, strict=True))
            stale = all(fingerprints_match(a, b, spec.atol, spec.rtol)
                        for a, b in zip(cand_fp, prev_ref_fp, strict=True)) or \
                all(fingerprints_match(a, b, 0.0, 0.0)
                    for a, b in zip(cand_fp, prev_cand_fp, strict=True))
            if data_changed and stale and not c.ok:
                out.fail("rejected", f"the candidate returned the previous trial's result for "
                                     f"new inputs (trial {t}, seed {seed}): its result depends "
                                     f"on a cached earlier call, not on its inputs")
                record["status"] = "rejected"
                out.per_trial.append(record)
                break
        prev_ref_fp, prev_cand_fp, prev_cand_out = ref_fp, cand_fp, cand_out
        prev_passed = c.ok
        if c.ok:
            out.trials_passed += 1
            record["status"] = "ok"
        else:
            record["status"] = "mismatch"
            if out.worst is None:
                j = c.to_json()
                out.worst = dict(j["worst"] or {}, trial=t, seed=seed)
            out.fail("mismatch", f"trial {t} (seed {seed}): {c.reason}")
        out.per_trial.append(record)
    if progress is not None:
        progress("trials done", hi)
    return out


# ---------------------------------------------------------------------------------------
# Timing


# The last reference compiled, by (file digest, class, subkernel, batch, seed, device,
# compile asked for) and mode: the candidates of one subkernel arrive one after another,
# and torch.compile is paid once for them. One reference only: a new reference resets
# dynamo (its recompilation limit counts per code object, and every reference here is
# called through the same lambdas), which would leave an older compiled function stale;
# the modes of one reference are kept side by side.
_COMPILED: dict[tuple[Any, ...], tuple[Callable[..., Any] | None, str | None, float]] = {}


def _compiled(fn: Callable[..., Any], args: list[Any], device: torch.device,
              key: tuple[Any, ...] | None, mode: str | None = None
              ) -> tuple[Callable[..., Any] | None, str | None, float]:
    """torch.compile(fn, mode=mode), compiled and run once on args: (compiled, None,
    compile seconds), or (None, reason, 0) when compilation fails. Reused for the same
    key and mode."""
    full = (key, mode) if key is not None else None
    if full is not None and full in _COMPILED:
        return _COMPILED[full]
    try:
        import torch._dynamo

        if full is None or any(k[0] != key for k in _COMPILED):
            torch._dynamo.reset()
            _COMPILED.clear()
        cfn = torch.compile(fn) if mode is None else torch.compile(fn, mode=mode)
        t0 = time.perf_counter()
        with torch.no_grad():
            cfn(*args)
        _sync(device)
        got: tuple[Callable[..., Any] | None, str | None, float] = (
            cfn, None, time.perf_counter() - t0)
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        got = (None, f"torch.compile{'' if mode is None else f' ({mode})'} failed: "
                     f"{type(e).__name__}: {first}", 0.0)
    if full is not None:
        _COMPILED[full] = got
    return got


def _forget_compiled() -> int:
    """Drops the compiled references and resets dynamo, whose CUDA-graph trees hold
    reduce-overhead's pool and static inputs; how many were kept."""
    kept = len(_COMPILED)
    if kept:
        _COMPILED.clear()
        import torch._dynamo

        torch._dynamo.reset()
    return kept


memory.register("compiled references", _forget_compiled)

ModeEntry = tuple[Callable[[], Any] | None, str | None, float]


def _compile_modes(ref_fn: Callable[..., Any], base: list[Any], device: torch.device,
                   ref_key: tuple[Any, ...] | None, modes: tuple[str, ...],
                   progress: Progress | None, at: float) -> dict[str, ModeEntry]:
    """Each extra torch.compile mode of the reference, compiled before the timed run:
    mode -> (a call on its own input copies, or None; why not; compile seconds)."""
    out: dict[str, ModeEntry] = {}
    for mode in modes:
        if progress:
            progress(f"compiling the reference with torch.compile (mode={mode})", at)
        inputs = [clone_exact(x) for x in base]
        key = (*ref_key, device.index) if ref_key is not None else None
        cfn, why, secs = _compiled(ref_fn, inputs, device, key, mode)
        call = (lambda f=cfn, xs=inputs: f(*xs)) if cfn is not None else None
        out[mode] = (call, why, secs)
    return out


def _mode_times(modes: dict[str, ModeEntry], times: list[dict[str, Any]],
                first: int) -> dict[str, dict[str, Any]]:
    """The timings of the extra modes, in the order they were appended after `first`."""
    res: dict[str, dict[str, Any]] = {}
    i = first
    for mode, (call, why, secs) in modes.items():
        if call is None:
            res[mode] = {"available": False, "reason": why}
            continue
        res[mode] = {**times[i], "compile_s": secs}
        i += 1
    return res


def compile_check(ref_fn: Callable[..., Any], compiled_fn: Callable[..., Any], base: list[Any],
                  atol: float, rtol: float) -> dict[str, Any]:
    """Whether torch.compile's own output passes the comparison a candidate must pass
    (plain atol/rtol, no TF32 widening: KernelBench's), on fresh copies of the timing
    inputs: {"ok": bool | None, "max_abs_error", "reason"}. A baseline that would fail the
    check it is compared under is reported as such (docs/bench.md, "Baselines");
    ok is None when either side could not run."""
    try:
        with torch.no_grad():
            expected = [t.detach() if isinstance(t, torch.Tensor) else t
                        for t in _flatten(ref_fn(*[clone_exact(x) for x in base]))]
            got = compiled_fn(*[clone_exact(x) for x in base])
        c = compare_outputs(expected, got, atol, rtol)
    except Exception as e:
        first = str(e).splitlines()[0] if str(e) else ""
        return {"ok": None, "max_abs_error": None,
                "reason": f"not checked: {type(e).__name__}: {first}"}
    rep = c.to_json()
    return {"ok": c.ok, "max_abs_error": rep["max_abs_error"], "reason": c.reason,
            "atol": atol, "rtol": rtol}


def _time_together(fns: list[Callable[[], Any]], device: torch.device) -> list[dict[str, Any]]:
    with torch.no_grad():
        return timing.time_cuda_group(fns, device)


def _suspicion(eager: dict[str, Any] | None, cand_t: dict[str, Any], moved: int,
               device: torch.device) -> list[str]:
    reasons: list[str] = []
    sp = timing.speedup(eager, cand_t)
    if sp is not None and sp > SUSPICIOUS_SPEEDUP:
        reasons.append(f"{sp:.1f}x faster than eager PyTorch (over {SUSPICIOUS_SPEEDUP:g}x)")
    lim = timing.device_limits(device)
    secs = cand_t["median_ms"] / 1e3
    if secs > 0 and moved > 0:
        bw = moved / secs
        if bw > BANDWIDTH_SLACK * lim["copy_bandwidth"]:
            reasons.append(f"moves at least {moved / 1e6:.1f} MB in {cand_t['median_ms']:.4g} ms "
                           f"= {bw / 1e12:.2f} TB/s, above the device's measured "
                           f"{lim['copy_bandwidth'] / 1e12:.2f} TB/s")
    return reasons


def _timing_block(ref_fn: Callable[..., Any], cand_fn: Callable[..., Any] | None,
                  base: list[Any], device: torch.device, out: Outcome,
                  progress: Progress | None, span: tuple[float, float],
                  ref_key: tuple[Any, ...] | None = None,
                  compile_reference: bool = True,
                  compile_modes: tuple[str, ...] = (),
                  tolerance: tuple[float, float] | None = None) -> dict[str, Any]:
    """Times the eager reference, its torch.compile (unless not asked for) and (when
    given) the candidate, interleaved in one run (timing.time_cuda_group): the ratios
    between them are taken under the same device state. torch.compile compiles first,
    outside the timed run. With a tolerance (atol, rtol), torch.compile's output is also
    checked against eager's under it (compile_check)."""
    if device.type != "cuda":
        return timing.unavailable()
    lo, hi = span
    lim = timing.device_limits(device)
    res: dict[str, Any] = {"available": True, "device": lim["name"],
                           "protocol": "cuda-events, L2 flushed, all streams synchronised, "
                                       "eager, torch.compile and candidate interleaved",
                           "limits": timing.limits_summary(lim)}
    if ref_key is None:
        # Not reused by later jobs, but the default mode and the extra modes of this one
        # must share a key: a different key resets dynamo under the ones compiled before.
        ref_key = ("call", id(ref_fn))
    ref_in = [clone_exact(x) for x in base]
    fns: list[Callable[[], Any]] = [lambda: ref_fn(*ref_in)]
    comp_in = [clone_exact(x) for x in base]
    if compile_reference:
        if progress:
            progress("compiling the reference with torch.compile", lo)
        key = (*ref_key, device.index) if ref_key is not None else None
        cfn, why, compile_s = _compiled(ref_fn, comp_in, device, key)
    else:
        cfn, why, compile_s = None, "not measured: eager timing only was asked for", 0.0
    if cfn is not None:
        fns.append(lambda: cfn(*comp_in))
    modes = _compile_modes(ref_fn, base, device, ref_key if compile_reference else None,
                           compile_modes, progress, lo)
    for entry in modes.values():
        if entry[0] is not None:
            fns.append(entry[0])
    cand_in = [clone_exact(x) for x in base]
    if cand_fn is not None:
        fns.append(lambda: cand_fn(*cand_in))
    if progress:
        progress("timing " + ", ".join(["eager"] + ["torch.compile"] * (cfn is not None)
                                       + ["candidate"] * (cand_fn is not None)),
                 lo + (hi - lo) / 3)
    times = _time_together(fns, device)
    res["reference_eager"] = times[0]
    comp = times[1] if cfn is not None else None
    if modes:
        res["reference_compile_modes"] = _mode_times(modes, times, 1 + (cfn is not None))
    res["reference_compile"] = comp if comp is not None else {"available": False,
                                                              "reason": why}
    if comp is not None:
        comp["compile_s"] = compile_s
        if tolerance is not None and cfn is not None:
            comp["check"] = compile_check(ref_fn, cfn, base, *tolerance)
    if cand_fn is None:
        res["speedup_compile_vs_eager"] = timing.speedup(res["reference_eager"], comp)
        return res
    cand_t = times[-1]
    side = timing.side_work(cand_t)
    if side:  # measure again before concluding: one noisy run is not a verdict
        cand_t = _time_together([fns[-1]], device)[0]
        side = timing.side_work(cand_t)
        if side:
            out.fail("rejected", f"the candidate's {side}")
    res["candidate"] = cand_t
    res["median_ms"] = cand_t["median_ms"]
    res["min_ms"] = cand_t["min_ms"]
    res["spread"] = cand_t["spread"]
    res["speedup_vs_eager"] = timing.speedup(res["reference_eager"], cand_t)
    res["speedup_vs_compile"] = timing.speedup(comp, cand_t)
    with torch.no_grad():
        outs = _flatten(cand_fn(*[clone_exact(x) for x in base]))
    res["min_bytes"] = timing.min_bytes([*base, *outs])
    return res


def _align_state(ref: Side, cand: Side) -> None:
    """Sets the candidate's mutable state (buffers a forward updates) to the reference's,
    for trials that run after the timing: timing calls the two sides different numbers of
    times, and each call of a batch norm in training moves its running statistics and
    num_batches_tracked, so without this every such program "failed" at another batch on
    state the trials never compared (docs/verify.md)."""
    if ref.state is None or cand.state is None:
        return
    theirs = cand.state()
    with torch.no_grad():
        for name, value in ref.state().items():
            mine = theirs.get(name)
            if isinstance(mine, torch.Tensor) and isinstance(value, torch.Tensor) and \
                    mine.shape == value.shape and mine.dtype == value.dtype:
                mine.copy_(value)


def _recheck(ref: Side, cand: Side, make: Callable[[int | None], Callable[[int], list[Any]]],
             spec: TrialSpec, settings: Settings, other_batch: int | None,
             out: Outcome) -> dict[str, Any]:
    """The stricter check of a suspicious speedup: more trials on new seeds, then another
    batch size. Failures become the outcome's status."""
    _align_state(ref, cand)
    seeds = [settings.seed + 100_003 + i for i in range(settings.trials * RECHECK_TRIAL_FACTOR)]
    spec2 = TrialSpec(**{**spec.__dict__, "seeds": seeds})
    more = run_trials(ref, cand, make(settings.batch), spec2)
    rec: dict[str, Any] = {"trials": more.trials, "trials_passed": more.trials_passed,
                           "status": more.status, "reason": more.reason}
    if more.status != "ok":
        out.fail(more.status, f"re-check of a suspicious speedup failed: {more.reason}",
                 more.line, more.traceback)
        return rec
    if other_batch is None:
        rec["other_batch"] = None
        rec["other_batch_status"] = "skipped: no smaller batch to run"
        return rec
    rec["other_batch"] = other_batch
    spec3 = TrialSpec(**{**spec.__dict__, "seeds": seeds[:2]})
    try:
        other = run_trials(ref, cand, make(other_batch), spec3)
    except _ReferenceFailed as e:
        rec["other_batch_status"] = f"skipped: the reference cannot run at batch " \
                                    f"{other_batch} ({e})"
        return rec
    if other.status == "runtime_error" and "ValueError" in other.reason:
        rec["other_batch_status"] = "specialised: the candidate rejects other shapes"
        return rec
    rec["other_batch_status"] = other.status
    if other.status != "ok":
        out.fail(other.status, f"re-check at batch {other_batch} failed: {other.reason}",
                 other.line, other.traceback)
    return rec


def _other_batch(batch: int | None, first_dim: int | None) -> int | None:
    """The batch of the re-check: one less (inputs can only be shrunk; an odd size also
    catches kernels that assume a power of two). None when there is no smaller one."""
    b = batch if batch is not None else first_dim
    if b is None or b < 2:
        return None
    return b - 1


# ---------------------------------------------------------------------------------------
# verify_subkernel


def _load_graph(params: dict[str, Any]) -> dict[str, Any]:
    g = params.get("graph")
    if g is None and params.get("graph_file"):
        try:
            g = json.loads(Path(str(params["graph_file"])).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise MethodError("bad_request", f"cannot read graph_file: {e}") from None
    if not isinstance(g, dict) or not isinstance(g.get("values"), list) or \
            not isinstance(g.get("nodes"), list) or not g.get("file"):
        raise MethodError("bad_request", "`graph` (a capture result) or `graph_file` is required")
    if isinstance(g.get("result"), dict) and "values" not in g:
        g = g["result"]
    return g


def _int_list(params: dict[str, Any], key: str) -> list[int]:
    v = params.get(key)
    if not isinstance(v, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                          for x in v):
        raise MethodError("bad_request", f"`{key}` must be a list of value/node ids")
    return v


def _value_label(graph: dict[str, Any], vid: int) -> str:
    try:
        v = graph["values"][vid]
    except (IndexError, KeyError, TypeError):
        return f"value {vid}"
    kind = v.get("kind")
    if kind in ("param", "buffer", "attr"):
        return f"value {vid} ({kind} {v.get('name')})"
    if kind == "input":
        return f"value {vid} (forward input {v.get('index')})"
    if kind == "node":
        p = v.get("producer")
        op = ""
        if isinstance(p, int) and 0 <= p < len(graph["nodes"]):
            op = " " + str(graph["nodes"][p].get("op", "")).removeprefix("torch.")
        return f"value {vid} (result of node {p}{op})"
    return f"value {vid}"


def _replay() -> Any:
    try:
        from . import replay
    except ImportError as e:  # pragma: no cover - part of the package
        raise MethodError("internal", f"mkworker.replay is unavailable: {e}") from None
    return replay


def _candidate_report(cand_err: CandidateError, settings: Settings) -> dict[str, Any]:
    out = Outcome()
    out.fail(cand_err.status, cand_err.reason, cand_err.line, cand_err.traceback)
    rep = out.to_json()
    rep["timing"] = timing.unavailable("the candidate did not run") \
        if settings.device.type == "cuda" else timing.unavailable()
    rep["suspicious"] = None
    rep["device"] = _device_name(settings.device)
    rep["tolerance"] = {"atol": settings.atol, "rtol": settings.rtol}
    return rep


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu"


def _cubin_of(cand_p: dict[str, Any]) -> bytes | None:
    """The cubin the engine compiled for a CUDA C++ candidate (base64 in `cubin`)."""
    text = cand_p.get("cubin")
    if not isinstance(text, str):
        return None
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:
        raise MethodError("bad_request", "`candidate.cubin` is not base64") from None


def _layouts(params: dict[str, Any], nvals: int) -> dict[int, str]:
    """The program's layout plan (`layouts`: {"<value id>": "channels_last" |
    "contiguous"}; absent: none)."""
    raw = params.get("layouts")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise MethodError("bad_request", "`layouts` must be an object of value id -> layout")
    out: dict[int, str] = {}
    for k, how in raw.items():
        try:
            vid = int(k)
        except ValueError:
            raise MethodError("bad_request", f"`layouts` key {k!r} is not a value id") from None
        if not 0 <= vid < nvals or how not in _replay().LAYOUTS:
            raise MethodError("bad_request", f"`layouts`: {k!r} -> {how!r} is not a value id "
                                             f"and one of {', '.join(_replay().LAYOUTS)}")
        out[vid] = how
    return out


def verify_subkernel(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Checks a candidate for a subgraph of a captured graph (docs/verify.md)."""
    graph = _load_graph(params)
    node_ids = _int_list(params, "nodes")
    in_vids = _int_list(params, "inputs")
    out_vids = _int_list(params, "outputs")
    nvals = len(graph["values"])
    for v in [*in_vids, *out_vids]:
        if not 0 <= v < nvals:
            raise MethodError("bad_request", f"value id {v} is not in the graph")
    for n in node_ids:
        if not 0 <= n < len(graph["nodes"]):
            raise MethodError("bad_request", f"node id {n} is not in the graph")
    if not out_vids and not any(graph["nodes"][n].get("mutates") for n in node_ids):
        # A subkernel with no outputs is one that only updates state in place (a batch
        # norm's `num_batches_tracked.add_(1)` whose result no op reads): its in-place
        # updates are what is compared. Anything else would compare nothing.
        raise MethodError("bad_request", "`outputs` must name at least one value, unless "
                                         "the nodes update a value in place")
    settings = Settings.parse(params, graph.get("batch"))
    layouts = _layouts(params, nvals)
    cand_p = params.get("candidate")
    if not isinstance(cand_p, dict) or not isinstance(cand_p.get("source"), str):
        raise MethodError("bad_request", "`candidate` must be {source, name, origin}")
    origin = str(cand_p.get("origin") or "unknown")
    progress("loading candidate", 0.0)
    try:
        cand = load_candidate(cand_p["source"], str(cand_p.get("name") or "candidate"), origin,
                              cubin=_cubin_of(cand_p))
    except CandidateError as e:
        return _candidate_report(e, settings)
    try:
        return _verify_subkernel(graph, node_ids, in_vids, out_vids, settings, cand, progress,
                                 layouts)
    finally:
        cand.unload()


# Built models by (file digest, class, seed, device), with a pristine copy of their
# state: building a large model on the CPU costs seconds, restoring its state on
# the device costs a copy. Two entries bound the memory kept.
_MODELS: dict[tuple[Any, ...], tuple[torch.nn.Module, dict[str, torch.Tensor]]] = {}
_MODELS_KEPT = 2


def _forget_models() -> int:
    kept = len(_MODELS)
    _MODELS.clear()
    return kept


memory.register("built models", _forget_models)


def _model_for(replay: Any, graph: dict[str, Any], path: str, cls: str, seed: int,
               device: torch.device) -> torch.nn.Module:
    """The problem's model with its initial state, built once per worker."""
    key = (graph.get("source_sha256"), path, cls, seed, str(device))
    hit = _MODELS.get(key)
    if hit is not None:
        model, pristine = hit
        with torch.no_grad():
            for name, t in [*model.named_parameters(), *model.named_buffers()]:
                t.copy_(pristine[name])
        model.train()
        return model
    model = replay.build_model(path, cls, seed, device)
    pristine = {name: t.detach().clone()
                for name, t in [*model.named_parameters(), *model.named_buffers()]}
    while len(_MODELS) >= _MODELS_KEPT:
        _MODELS.pop(next(iter(_MODELS)))
    _MODELS[key] = (model, pristine)
    return model


def _verify_subkernel(graph: dict[str, Any], node_ids: list[int], in_vids: list[int],
                      out_vids: list[int], settings: Settings, cand: Candidate,
                      progress: Progress, layouts: dict[int, str] | None = None
                      ) -> dict[str, Any]:
    replay = _replay()
    device = settings.device
    path, cls = str(graph["file"]), str(graph.get("class") or "Model")
    progress("building the reference", 0.02)
    try:
        model = _model_for(replay, graph, path, cls, settings.seed, device)
        ref_fn = replay.subkernel_fn(graph, node_ids, in_vids, out_vids, model,
                                     layouts=layouts)
    except MethodError:
        raise
    except Exception as e:
        raise MethodError("python_error", f"cannot build the reference: {type(e).__name__}: "
                                          f"{e}", error_line(e, path), short_traceback(e)) from e

    def make(batch: int | None) -> Callable[[int], list[Any]]:
        def inputs_for(seed: int) -> list[Any]:
            inputs = replay.make_inputs(path, seed, device, batch)
            env, _ = replay.run_graph(graph, model, inputs, layouts=layouts)
            values = graph["values"]
            return [env[v] if v in env else replay.lookup_attr(model, values[v]["name"])
                    for v in in_vids]
        return inputs_for

    owned = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    ref = Side(call=lambda xs: ref_fn(*xs), owned=lambda: owned)
    run = _none_is_no_outputs(cand.run) if not out_vids else cand.run
    candidate_side = Side(call=lambda xs: run(*xs), owned=lambda: owned)
    spec = TrialSpec(
        seeds=[settings.seed + 1 + t for t in range(settings.trials)],
        atol=settings.atol, rtol=settings.rtol, device=device,
        check_ops=cand.origin != "reference", allowed_ops=cand.uses_torch,
        cand_file=str(cand.path), kernel_codes=kernel_codes(cand.module),
        exact_rerun=precision.tf32_in_force(device),
        input_names=[f"input {i} = {_value_label(graph, v)}" for i, v in enumerate(in_vids)],
        output_names=[f"output {i} = {_value_label(graph, v)}" for i, v in enumerate(out_vids)],
    )
    first_dim = _first_input_dim(graph)
    timed_call = as_composed(run, [(layouts or {}).get(v) for v in out_vids])
    ref_key = (graph.get("source_sha256"), cls, tuple(node_ids), tuple(in_vids),
               tuple(out_vids), settings.batch, settings.seed, str(device),
               tuple(sorted((layouts or {}).items())))
    return _finish(ref, candidate_side, make, spec, settings, progress,
                   ref_call=ref_fn, cand_call=timed_call, first_dim=first_dim, ref_key=ref_key)


def _none_is_no_outputs(run: Callable[..., Any]) -> Callable[..., Any]:
    """A subkernel without outputs returns the empty tuple (docs/candidates.md); a
    function that returns nothing returns None, which means the same."""
    def call(*xs: Any) -> Any:
        out = run(*xs)
        return () if out is None else out
    return call


def as_composed(run: Callable[..., Any], layouts: list[str | None]) -> Callable[..., Any]:
    """The candidate as the composed program calls it, for timing: each output converted
    to the layout the plan gives its value (a no-op when it has it already), as the
    composition does after the call. The reference's function converts what it makes
    itself (replay.subkernel_fn), so both sides pay for the copies the program will make:
    an NCHW output where the plan says channels_last cost ShuffleNetUnit's composition a
    963 MB copy that no subkernel's timing had seen (H100)."""
    if not any(layouts):
        return run
    apply = _replay().apply_layout

    def call(*xs: Any) -> Any:
        out = run(*xs)
        if isinstance(out, tuple):
            return tuple(apply(o, how) for o, how in zip(out, layouts, strict=False))
        return apply(out, layouts[0])
    return call


def _first_input_dim(graph: dict[str, Any]) -> int | None:
    for v in graph.get("values", []):
        if v.get("kind") == "input" and v.get("shape"):
            return int(v["shape"][0])
    return None


def _retime(tim: dict[str, Any], ref_call: Callable[..., Any], cand_call: Callable[..., Any],
            base: list[Any], device: torch.device, suspicious: dict[str, Any]) -> None:
    """Times eager and candidate together again; the run with the smaller speedup is the
    one reported."""
    ref_in, cand_in = [clone_exact(x) for x in base], [clone_exact(x) for x in base]
    eager, again = _time_together([lambda: ref_call(*ref_in), lambda: cand_call(*cand_in)],
                                  device)
    suspicious["retimed_median_ms"] = again["median_ms"]
    suspicious["retimed_speedup_vs_eager"] = timing.speedup(eager, again)
    first = tim.get("speedup_vs_eager")
    second = suspicious["retimed_speedup_vs_eager"]
    if first is None or second is None or second >= first:
        return
    scale = again["median_ms"] / eager["median_ms"] * tim["reference_eager"]["median_ms"]
    tim["median_ms"] = scale  # the candidate's time at the first run's reference speed
    tim["speedup_vs_eager"] = second
    tim["speedup_vs_compile"] = timing.speedup(tim.get("reference_compile"),
                                               {"median_ms": scale})


def _finish(ref: Side, cand: Side, make: Callable[[int | None], Callable[[int], list[Any]]],
            spec: TrialSpec, settings: Settings, progress: Progress,
            ref_call: Callable[..., Any], cand_call: Callable[..., Any],
            first_dim: int | None, ref_key: tuple[Any, ...] | None = None,
            check_compile: bool = False) -> dict[str, Any]:
    """Trials, then timing and the suspicious-speedup re-check; the report. With
    check_compile (whole programs: what bench records), torch.compile's output is also
    checked under the request's tolerance (compile_check); a subkernel's candidates,
    timed many times a search, skip that."""
    device = settings.device
    timed = settings.timing and device.type == "cuda"
    try:
        out = run_trials(ref, cand, make(settings.batch), spec, progress,
                         (0.05, 0.6 if timed else 0.95))
    except _ReferenceFailed as e:
        cause = e.__cause__ or e
        raise MethodError("python_error", str(e), None, short_traceback(cause)) from e
    rep: dict[str, Any]
    suspicious: dict[str, Any] | None = None
    tim: dict[str, Any]
    if out.status != "ok":
        tim = timing.unavailable("not timed: the candidate failed verification") if timed \
            else timing.unavailable() if device.type != "cuda" \
            else timing.unavailable("timing not requested")
    elif not timed:
        tim = timing.unavailable() if device.type != "cuda" \
            else timing.unavailable("timing not requested")
    else:
        base = make(settings.batch)(settings.seed + 1)
        tim = _timing_block(ref_call, cand_call, base, device, out, progress, (0.6, 0.9),
                            ref_key, settings.compile_reference, settings.compile_modes,
                            (settings.atol, settings.rtol) if check_compile else None)
        if out.status == "ok":
            reasons = _suspicion(tim["reference_eager"], tim["candidate"],
                                 tim.get("min_bytes", 0), device)
            if reasons:
                progress("re-checking a suspicious speedup", 0.9)
                suspicious = {"reasons": reasons}
                suspicious["recheck"] = _recheck(ref, cand, make, spec, settings,
                                                 _other_batch(settings.batch, first_dim), out)
                if out.status == "ok":
                    # Re-time: a speedup is accepted only if it reproduces.
                    _retime(tim, ref_call, cand_call, base, device, suspicious)
                suspicious["accepted"] = out.status == "ok"
    rep = out.to_json()
    rep["timing"] = tim
    rep["suspicious"] = suspicious
    rep["device"] = _device_name(device)
    rep["tolerance"] = {"atol": settings.atol, "rtol": settings.rtol}
    rep["batch"] = settings.batch
    progress("done", 1.0)
    return rep


# ---------------------------------------------------------------------------------------
# verify_composition and time_reference


def _init_inputs(*modules: Any) -> list[Any]:
    for m in modules:
        fn = getattr(m, "get_init_inputs", None)
        if callable(fn):
            return list(fn())
    return []


def _build(cls: Any, init: list[Any], seed: int, device: torch.device) -> torch.nn.Module:
    torch.manual_seed(seed)
    if device.type == "cuda":
        torch.cuda.manual_seed_all(seed)
    m = cls(*init)
    return m.to(device)


def _model_call(model: torch.nn.Module) -> Callable[..., Any]:
    """The reference's forward as torch.compile sees it, in the check and in a compile
    ahead (warm.py): the same callable over the same model traces to the same graphs,
    whose compiled forms inductor's on-disk cache then holds for the check."""
    return lambda *xs: model(*xs)


def compile_ahead(ref_file: str, cls_name: str, seed: int, batch: int | None,
                  device: torch.device, modes: list[str]) -> dict[str, Any]:
    """Compiles the reference's torch.compile forms the whole-program check will time
    (mode "default" or another of warm.MODES), built and fed as the check builds and
    feeds it: {mode: {"compile_s": s} or {"reason": why not}}. Run in warm.py's child."""
    ref_mod = load_file(ref_file, policy=None)  # the user's own code: no scan
    try:
        ref_cls = ref_mod.module.__dict__.get(cls_name)
        if ref_cls is None:
            raise MethodError("missing", f"{ref_file} defines no `{cls_name}`")
        model = _build(ref_cls, _init_inputs(ref_mod.module), seed, device)
        base = list(_replay().make_inputs(ref_file, seed + 1, device, batch))
        fn = _model_call(model)
        out: dict[str, Any] = {}
        for mode in modes:
            _, why, secs = _compiled(fn, [clone_exact(x) for x in base], device, None,
                                     None if mode == "default" else mode)
            out[mode] = {"compile_s": round(secs, 3)} if why is None else {"reason": why}
        return out
    finally:
        ref_mod.unload()


def verify_composition(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Checks a KernelBench-style ModelNew file against the problem's Model (docs/verify.md)."""
    file = _get(params, "file", str, None, required=True)
    ref_file = _get(params, "reference_file", str, None, required=True)
    cls_name = _get(params, "class", str, "ModelNew")
    ref_cls_name = _get(params, "reference_class", str, "Model")
    settings = Settings.parse(params)
    progress("loading", 0.0)
    try:
        ref_mod = load_file(ref_file, policy=None)  # the user's own code: no scan
    except CandidateError as e:
        kind = "syntax_error" if e.status == "compile_error" and "syntax" in e.reason \
            else "import_error"
        raise MethodError(kind, f"the reference file: {e.reason}", e.line, e.traceback) from None
    try:
        try:
            new_mod = load_file(file, policy="composition")
        except CandidateError as e:
            return _candidate_report(e, settings)
        try:
            return _verify_composition(ref_mod, ref_cls_name, new_mod, cls_name, ref_file,
                                       settings, progress)
        finally:
            new_mod.unload()
    finally:
        ref_mod.unload()


def _verify_composition(ref_mod: Candidate, ref_cls_name: str, new_mod: Candidate,
                        cls_name: str, ref_file: str, settings: Settings,
                        progress: Progress) -> dict[str, Any]:
    device = settings.device
    ref_cls = ref_mod.module.__dict__.get(ref_cls_name)
    if ref_cls is None:
        raise MethodError("missing", f"{ref_file} defines no `{ref_cls_name}`")
    init = _init_inputs(ref_mod.module)
    try:
        model = _build(ref_cls, init, settings.seed, device)
    except Exception as e:
        raise MethodError("python_error", f"building {ref_cls_name} failed: {e}",
                          error_line(e, ref_mod.path), short_traceback(e)) from e
    new_cls = new_mod.module.__dict__.get(cls_name)
    if new_cls is None:
        return _candidate_report(CandidateError(
            "compile_error", f"{new_mod.path.name} defines no `{cls_name}`"), settings)
    notes: list[str] = []
    try:
        new = _build(new_cls, init, settings.seed, device)
        try:
            new.load_state_dict(model.state_dict())
        except (RuntimeError, KeyError) as e:
            notes.append(f"load_state_dict from {ref_cls_name} failed "
                         f"({str(e).splitlines()[0]}); relying on seeded construction")
    except Exception as e:
        out = Outcome()
        _classify(e, str(new_mod.path), device, out)
        rep = out.to_json()
        rep["reason"] = f"building {cls_name} failed: {rep['reason']}"
        rep["timing"] = timing.unavailable("not timed: the candidate failed")
        rep["suspicious"] = None
        return rep
    replay = _replay()

    def make(batch: int | None) -> Callable[[int], list[Any]]:
        def inputs_for(seed: int) -> list[Any]:
            return list(replay.make_inputs(ref_file, seed, device, batch))
        return inputs_for

    def owned(m: torch.nn.Module) -> Callable[[], dict[str, torch.Tensor]]:
        return lambda: {**dict(m.named_parameters()), **dict(m.named_buffers())}

    def buffers(m: torch.nn.Module) -> Callable[[], dict[str, torch.Tensor]]:
        return lambda: dict(m.named_buffers())

    ref = Side(call=lambda xs: model(*xs), owned=owned(model), state=buffers(model))
    cand = Side(call=lambda xs: new(*xs), owned=owned(new), state=buffers(new))
    probe = make(settings.batch)(settings.seed)
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    try:
        with torch.no_grad():
            nout = len(_flatten(model(*[clone_exact(x) for x in probe])))
    except Exception as e:
        raise MethodError("python_error", f"{ref_cls_name}.forward failed: "
                                          f"{type(e).__name__}: {e}",
                          error_line(e, ref_mod.path), short_traceback(e)) from e
    # The probe advanced the reference's buffers (batch-norm statistics): put them back.
    model.load_state_dict(saved)
    spec = TrialSpec(
        seeds=[settings.seed + 1 + t for t in range(settings.trials)],
        atol=settings.atol, rtol=settings.rtol, device=device,
        cand_file=str(new_mod.path), kernel_codes=kernel_codes(new_mod.module),
        exact_rerun=precision.tf32_in_force(device),
        input_names=[f"forward input {i}" for i in range(len(probe))],
        output_names=[f"output {i}" for i in range(nout)] if nout > 1 else ["output"],
    )
    first_dim = next((int(x.shape[0]) for x in probe
                      if isinstance(x, torch.Tensor) and x.dim() > 0), None)
    # The reference's compiled forms are reused by the next compositions of the same
    # problem (the search verifies several): keyed by the file's content, so an edit
    # compiles again. They time an earlier instance built the same way.
    digest = hashlib.sha256(Path(ref_file).read_bytes()).hexdigest()
    ref_key = ("composition", digest, ref_cls_name, settings.batch, settings.seed)
    # A compile ahead of this reference (warm.py) still running: its graphs are the
    # ones compiled here, so wait for them rather than compile them beside it.
    ahead = warm.wait_for(ref_file, ref_cls_name, settings.batch, settings.seed) \
        if settings.timing and settings.compile_reference and device.type == "cuda" else None
    with KernelLaunches(new_mod.module) as launches:
        rep = _finish(ref, cand, make, spec, settings, progress,
                      ref_call=_model_call(model), cand_call=lambda *xs: new(*xs),
                      first_dim=first_dim, ref_key=ref_key, check_compile=True)
    if ahead is not None:
        rep["compiled_ahead"] = ahead
    if rep.get("status") == "ok":
        rep["other_batch"] = _composition_at_other_batch(ref, cand, make, spec, settings,
                                                         first_dim)
    if rep.get("status") == "ok" and launches.note():
        notes.append(launches.note())
    if rep.get("status") == "ok" and rep.get("reference_tf32"):
        notes.append(precision.note([rep["reference_tf32"]["noise"]]))
    rep["kernel_launches"] = launches.count
    captured = _graph_capture(new)
    if captured is not None:
        rep["cuda_graph_captured"] = captured[0]
        if not captured[0]:
            notes.append(captured[1])
    rep["notes"] = notes
    return rep


def _composition_at_other_batch(ref: Side, cand: Side,
                                make: Callable[[int | None], Callable[[int], list[Any]]],
                                spec: TrialSpec, settings: Settings,
                                first_dim: int | None) -> dict[str, Any]:
    """One trial of a composition that passed, at a batch one smaller (docs/verify.md).
    ModelNew's guard lets any batch through when its graph is batch-free (docs/capture.md,
    "Running at any batch"): this is where a size it still fixes would show, and the
    engine then composes it again with the whole shape guarded. A guarded ModelNew runs
    the user's forward there and passes."""
    b = _other_batch(settings.batch, first_dim)
    if b is None:
        return {"batch": None, "status": "skipped", "reason": "no smaller batch to run"}
    one = TrialSpec(**{**spec.__dict__, "seeds": spec.seeds[:1]})
    _align_state(ref, cand)
    try:
        got = run_trials(ref, cand, make(b), one)
    except _ReferenceFailed as e:
        return {"batch": b, "status": "skipped",
                "reason": f"the reference cannot run at batch {b} ({e})"}
    return {"batch": b, "status": got.status, "reason": got.reason}


def _graph_capture(module: torch.nn.Module) -> tuple[bool, str] | None:
    """Whether a CUDA-graph ModelNew (compose_graph.c's runtime keeps its captures in
    `_mk_graphs`) replayed a graph or fell back to its plain forward, and why; None for a
    ModelNew without one. A variant that never captured times its plain forward."""
    graphs = getattr(module, "_mk_graphs", None)
    entries = getattr(graphs, "entries", None)
    if not isinstance(entries, dict):
        return None
    if any(e is not None for e in entries.values()):
        return True, ""
    why = str(getattr(graphs, "why", "") or "no input signature could be captured")
    return False, f"its CUDA graph never captured ({why[:300]}): the plain forward ran"


def time_reference(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    """Eager and torch.compile timing of a problem's Model (docs/verify.md)."""
    file = _get(params, "file", str, None, required=True)
    cls_name = _get(params, "class", str, "Model")
    settings = Settings.parse(params, verifying=False)
    if settings.device.type != "cuda":
        return {"timing": timing.unavailable(), "device": "cpu"}
    replay = _replay()
    progress("building the model", 0.0)
    try:
        model = replay.build_model(file, cls_name, settings.seed, settings.device)
        inputs = list(replay.make_inputs(file, settings.seed, settings.device, settings.batch))
    except Exception as e:
        raise MethodError("python_error", f"{type(e).__name__}: {e}", error_line(e, file),
                          short_traceback(e)) from e
    out = Outcome()
    tim = _timing_block(lambda *xs: model(*xs), None, inputs, settings.device, out, progress,
                        (0.05, 0.95))
    progress("done", 1.0)
    return {"timing": tim, "device": _device_name(settings.device), "batch": settings.batch}


METHODS: dict[str, Callable[[dict[str, Any], Progress], dict[str, Any]]] = {
    "verify_subkernel": verify_subkernel,
    "verify_composition": verify_composition,
    "time_reference": time_reference,
    "warm_reference": warm.warm_reference,
}


def _as_worker_error(fn: Callable[[dict[str, Any], Progress], dict[str, Any]],
                     error_type: Any) -> Callable[[dict[str, Any], Progress], dict[str, Any]]:
    """The server's methods raise its WorkerError: translate MethodError at the boundary."""
    def method(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
        try:
            return fn(params, progress)
        except MethodError as e:
            raise error_type(e.kind, e.message, line=e.line, traceback_text=e.traceback) from e
    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def register_methods() -> None:
    """Registers the methods with the worker's protocol registry (the server imports this
    module at start). Safe to call twice."""
    try:
        from . import protocol
    except ImportError:  # the module used on its own (tests of the verifier alone)
        return
    for name, fn in METHODS.items():
        if protocol.lookup(name) is None:
            protocol.register(name, _as_worker_error(fn, protocol.WorkerError))


register_methods()
