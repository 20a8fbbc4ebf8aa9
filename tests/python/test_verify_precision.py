"""The TF32-aware comparison (mkworker/precision.py) in the trial loop, on the CPU.

TF32 itself needs a GPU, so the reference here emulates it: when
`torch.backends.cudnn.allow_tf32` is set (PyTorch's default) it rounds its operands to
TF32's 10-bit mantissa before a matmul, as cuDNN's TF32 convolutions do; with the flag off
(what the verifier sets for its full-FP32 rerun) it computes in FP32.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from mkworker import precision
from mkworker.verify import Side, TrialSpec, run_trials


def _truncate(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x with its float32 mantissa cut to `bits` bits (toward zero)."""
    mask = ~((1 << (23 - bits)) - 1)
    return (x.contiguous().view(torch.int32) & mask).view(torch.float32)


def _round(x: torch.Tensor, bits: int) -> torch.Tensor:
    """x with its float32 mantissa rounded to nearest at `bits` bits: another TF32
    algorithm's rounding of the same operands."""
    half = 1 << (22 - bits)
    mask = ~((1 << (23 - bits)) - 1)
    return ((x.contiguous().view(torch.int32) + half) & mask).view(torch.float32)


def tf32_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    if torch.backends.cudnn.allow_tf32:
        return _truncate(a, 10) @ _truncate(b, 10)
    return a @ b


def inputs_for(seed: int) -> list[Any]:
    # A convolution's scale: weights ~ 1/sqrt(fan-in), outputs of order 1.
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(64, 512, generator=g), torch.randn(512, 48, generator=g) / 512**0.5]


def run(cand, trials: int = 3, exact_rerun: bool = True, ref=tf32_reference,
        ref_state=None, cand_state=None):
    spec = TrialSpec(seeds=[7 + t for t in range(trials)], atol=1e-4, rtol=1e-4,
                     device=torch.device("cpu"), exact_rerun=exact_rerun,
                     output_names=["output 0"])
    return run_trials(Side(call=lambda xs: ref(*xs), state=ref_state),
                      Side(call=lambda xs: cand(*xs), state=cand_state), inputs_for, spec)


@pytest.fixture(autouse=True)
def _tf32_flags():
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = True  # PyTorch's default
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


def test_exact_candidate_fails_plainly_but_passes_against_fp32():
    out = run(lambda a, b: a @ b)
    assert out.status == "ok", out.reason
    assert out.trials_passed == 3
    assert out.tf32_noise is not None and out.tf32_noise > 1e-4  # why the plain check failed
    assert all("reference_tf32_noise" in t for t in out.per_trial)
    rep = out.to_json()["reference_tf32"]
    assert rep == {"noise": out.tf32_noise, "factor": precision.NOISE_FACTOR,
                   "compared_with": "fp32"}
    # Measured against the exact result: an FP32 candidate is (nearly) exact.
    assert out.max_abs < 1e-3


def test_other_tf32_rounding_passes():
    out = run(lambda a, b: _round(a, 10) @ _round(b, 10))
    assert out.status == "ok", out.reason
    assert out.tf32_noise is not None


def test_without_the_rerun_the_same_candidate_fails():
    out = run(lambda a, b: a @ b, exact_rerun=False)
    assert out.status == "mismatch"
    assert out.tf32_noise is None and out.to_json()["reference_tf32"] is None


def test_lower_precision_than_the_reference_still_fails():
    # bf16's 7-bit mantissa: ~8x the reference's own error.
    out = run(lambda a, b: _truncate(a, 7) @ _truncate(b, 7))
    assert out.status == "mismatch"
    assert "elements differ" in out.reason
    assert out.tf32_noise is None


def test_a_wrong_candidate_still_fails():
    out = run(lambda a, b: a @ b + 0.01)  # ~10x the reference's own error
    assert out.status == "mismatch"
    assert out.tf32_noise is None


def test_reference_without_tf32_keeps_the_plain_verdict():
    out = run(lambda a, b: (a @ b) * (1 + 1e-3), ref=lambda a, b: a @ b)
    assert out.status == "mismatch"
    assert out.tf32_noise is None


def test_flags_are_restored_after_the_rerun():
    run(lambda a, b: a @ b)
    assert torch.backends.cudnn.allow_tf32 is True


def test_the_rerun_leaves_the_reference_state_in_step():
    # Each forward advances a buffer (like batch-norm statistics); the rerun must not
    # advance the reference's twice, nor start from the advanced state.
    ref_buf = {"calls": torch.zeros(())}
    cand_buf = {"calls": torch.zeros(())}

    def ref(a, b):
        ref_buf["calls"] += 1
        return tf32_reference(a, b) + ref_buf["calls"]

    def cand(a, b):
        cand_buf["calls"] += 1
        return a @ b + cand_buf["calls"]

    out = run(cand, trials=4, ref=ref, ref_state=lambda: ref_buf,
              cand_state=lambda: cand_buf)
    assert out.status == "ok", out.reason
    assert float(ref_buf["calls"]) == float(cand_buf["calls"]) == 4.0


def _with_column_sums(matmul, buf: dict[str, torch.Tensor]):
    """A forward that also updates state from its product, as batch norm updates its
    running statistics from a convolution's output: here the column sums (64 rows add
    up their TF32 errors past atol)."""
    def forward(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        y = matmul(a, b)
        buf["sums"].copy_(y.sum(0))
        return y
    return forward


def _state_run(cand_matmul, exact_rerun: bool = True, shift: float = 0.0):
    ref_buf, cand_buf = {"sums": torch.zeros(48)}, {"sums": torch.zeros(48)}
    ref = _with_column_sums(tf32_reference, ref_buf)
    inner = _with_column_sums(cand_matmul, cand_buf)

    def cand(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        inner(a, b)  # the state from the exact product
        cand_buf["sums"] += shift
        return tf32_reference(a, b)  # outputs as the reference's: only the state differs
    return run(cand, exact_rerun=exact_rerun, ref=ref, ref_state=lambda: ref_buf,
               cand_state=lambda: cand_buf)


def test_state_within_the_references_tf32_error_passes():
    out = _state_run(lambda a, b: a @ b)
    assert out.status == "ok", out.reason
    assert out.tf32_noise is None  # the outputs passed plainly
    assert out.state_tf32_noise is not None and out.state_tf32_noise > 1e-4
    assert all("state_tf32_noise" in t for t in out.per_trial)
    rep = out.to_json()
    assert rep["reference_tf32"] is None
    assert rep["state_tf32"] == {"noise": out.state_tf32_noise,
                                 "factor": precision.NOISE_FACTOR, "compared_with": "fp32"}


def test_state_fails_plainly_without_the_rerun():
    out = _state_run(lambda a, b: a @ b, exact_rerun=False)
    assert out.status == "mismatch"
    assert "(state updated by forward)" in out.reason
    assert out.state_tf32_noise is None


def test_wrong_state_still_fails():
    out = _state_run(lambda a, b: a @ b, shift=0.05)
    assert out.status == "mismatch"
    assert "buffer `sums`" in out.reason and "(state updated by forward)" in out.reason
    assert out.state_tf32_noise is None


def test_output_noise_ignores_non_float_and_non_finite():
    r = [torch.tensor([1.0, float("inf"), 2.0]), torch.tensor([1, 2])]
    e = [torch.tensor([1.5, float("inf"), 2.0]), torch.tensor([1, 3])]
    assert precision.output_noise(r, e) == [0.5, 0.0]


def test_the_emulated_reference_error_is_tf32_sized():
    a, b = inputs_for(7)
    noise = precision.output_noise([tf32_reference(a, b)], [a @ b])[0]
    assert 1e-4 < noise < 5e-3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_channels_last_conv_passes_against_the_tf32_reference_on_the_gpu():
    # The case that motivated it: the same convolution in channels_last (another cuDNN
    # algorithm, another TF32 rounding) against PyTorch's default NCHW one.
    dev = torch.device("cuda")
    w = torch.randn(64, 32, 3, 3, device=dev) / (32 * 9) ** 0.5

    def conv_inputs(seed: int) -> list[Any]:
        g = torch.Generator(device=dev).manual_seed(seed)
        return [torch.randn(16, 32, 64, 64, device=dev, generator=g)]

    def ref(x):
        return torch.nn.functional.conv2d(x, w)

    def cand(x):
        cl = torch.nn.functional.conv2d(x.contiguous(memory_format=torch.channels_last),
                                        w.contiguous(memory_format=torch.channels_last))
        return cl.contiguous()

    def bf16(x):
        return torch.nn.functional.conv2d(x.bfloat16(), w.bfloat16()).float()

    def spec(exact: bool) -> TrialSpec:
        return TrialSpec(seeds=[1, 2, 3], atol=1e-4, rtol=1e-4, device=dev,
                         exact_rerun=exact)

    assert precision.tf32_in_force(dev)
    out = run_trials(Side(call=lambda xs: ref(*xs)), Side(call=lambda xs: cand(*xs)),
                     conv_inputs, spec(True))
    assert out.status == "ok", out.reason
    low = run_trials(Side(call=lambda xs: ref(*xs)), Side(call=lambda xs: bf16(*xs)),
                     conv_inputs, spec(True))
    assert low.status == "mismatch", "bf16 must not pass as TF32-accurate"
