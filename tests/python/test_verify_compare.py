"""Element-wise comparison and its diagnosis."""

from __future__ import annotations

import math

import torch
from mkworker.compare import compare_outputs, compare_tensor, fingerprint, fingerprints_match


def test_equal_tensors_pass():
    x = torch.randn(3, 4)
    c = compare_tensor(x, x.clone(), 1e-4, 1e-4)
    assert c.ok and c.failing == 0 and c.max_abs == 0.0 and c.elements == 12


def test_tolerance_is_atol_plus_rtol_times_reference():
    e = torch.tensor([1000.0, 0.0])
    # 0.05 off at 1000 is within 1e-4 + 1e-4 * 1000 = 0.1001; 1e-3 off at 0 is not.
    assert compare_tensor(e, torch.tensor([1000.05, 0.0]), 1e-4, 1e-4).ok
    c = compare_tensor(e, torch.tensor([1000.0, 1e-3]), 1e-4, 1e-4)
    assert not c.ok and c.failing == 1 and c.worst_index == [1]


def test_worst_element_index_is_multidimensional():
    e = torch.zeros(2, 3, 4)
    a = e.clone()
    a[1, 2, 3] = 5.0
    a[0, 0, 0] = 0.5
    c = compare_tensor(e, a, 1e-4, 1e-4)
    assert c.failing == 2
    assert c.worst_index == [1, 2, 3]
    assert c.worst_expected == 0.0 and c.worst_actual == 5.0
    assert math.isclose(c.max_abs, 5.0)
    assert "[1, 2, 3]" in c.reason


def test_nan_and_inf_where_reference_is_finite_fail():
    e = torch.ones(4)
    a = torch.tensor([1.0, float("nan"), float("inf"), 1.0])
    c = compare_tensor(e, a, 1e-4, 1e-4)
    assert not c.ok and c.nan == 1 and c.inf == 1 and c.failing == 2
    assert c.worst_index in ([1], [2])
    assert c.to_json()["max_abs_error"] == "inf"


def test_nan_and_inf_matching_the_reference_pass():
    e = torch.tensor([float("nan"), float("inf"), -float("inf"), 2.0])
    assert compare_tensor(e, e.clone(), 1e-4, 1e-4).ok
    c = compare_tensor(e, torch.tensor([float("nan"), -float("inf"), -float("inf"), 2.0]),
                       1e-4, 1e-4)
    assert not c.ok and c.inf == 1


def test_huge_tolerance_cannot_hide_nan():
    c = compare_tensor(torch.ones(3), torch.tensor([1.0, float("nan"), 1.0]), 1e9, 1e9)
    assert not c.ok


def test_shape_dtype_and_structure_mismatches():
    x = torch.randn(2, 3)
    assert "shape [3, 2]" in compare_tensor(x, x.t().contiguous(), 1e-4, 1e-4).reason
    assert "dtype float64" in compare_tensor(x, x.double(), 1e-4, 1e-4).reason
    assert "returned 1 value" in compare_outputs([x, x], x, 1e-4, 1e-4).reason
    assert compare_outputs([x], (x.clone(),), 1e-4, 1e-4).ok
    assert "is a int" in compare_outputs([x], 3, 1e-4, 1e-4).reason


def test_integer_outputs_compare_exactly():
    e = torch.tensor([1, 2, 3])
    assert compare_tensor(e, e.clone(), 10.0, 10.0).ok
    c = compare_tensor(e, torch.tensor([1, 2, 4]), 10.0, 10.0)
    assert not c.ok and c.worst_index == [2]


def test_relative_error_ignores_near_zero_references():
    e = torch.tensor([1e-9, 2.0])
    a = torch.tensor([2e-9, 2.0002])
    c = compare_tensor(e, a, 1e-4, 1e-4)
    assert c.max_rel < 2e-4


def test_fingerprints():
    x = torch.randn(10000)
    assert fingerprints_match(fingerprint(x), fingerprint(x.clone()), 0.0, 0.0)
    assert not fingerprints_match(fingerprint(x), fingerprint(x + 1), 1e-4, 1e-4)
    assert fingerprint(x).numel() == 4096


def test_fingerprint_indices_stay_in_bounds_for_large_tensors():
    # float32 linspace rounds n - 1 up to n above 2**24 elements; the sample must
    # still index inside the tensor (on the GPU that was a device-side assert)
    import torch
    from mkworker.compare import fingerprint

    n = (1 << 25) + 3
    t = torch.arange(n, dtype=torch.float64)
    fp = fingerprint(t)
    assert fp.numel() == 4096
    assert fp[-1].item() == n - 1


def test_chunked_comparison_finds_what_one_pass_finds(monkeypatch):
    """Big outputs are compared a chunk at a time (float64 temporaries of the whole
    tensor ran a 1.6e9-element output out of an 80 GB GPU): counts, largest errors and
    the worst element are the whole tensor's, wherever the chunk borders fall."""
    from mkworker import compare, precision

    torch.manual_seed(0)
    e = torch.randn(7, 11, 13)
    a = e + 1e-6 * torch.randn_like(e)
    a[0, 0, 5] += 0.01           # a small miss in the first chunk
    a[6, 10, 12] += 0.5          # the worst, in the last element of the last chunk
    a[3, 4, 5] = float("nan")    # counted, and ranked above every finite miss
    e2 = e.clone()
    e2[3, 4, 5] = 1.0
    whole = compare_tensor(e2, a, 1e-4, 1e-4)
    noise_whole = precision.output_noise([e], [a.nan_to_num()])
    for size in (1, 7, 64, 1000):
        monkeypatch.setattr(compare, "CHUNK", size)
        c = compare_tensor(e2, a, 1e-4, 1e-4)
        assert (c.failing, c.nan, c.inf, c.max_rel, c.worst_index) == \
            (whole.failing, whole.nan, whole.inf, whole.max_rel, whole.worst_index)
        assert c.failing == 3 and c.nan == 1 and c.worst_index == [3, 4, 5]
        assert c.reason == whole.reason
        assert precision.output_noise([e], [a.nan_to_num()]) == noise_whole
    monkeypatch.setattr(compare, "CHUNK", 7)
    b = e.clone()
    b[6, 10, 12] += 0.5
    b[0, 0, 5] += 0.01
    c = compare_tensor(e, b, 1e-4, 1e-4)
    assert c.worst_index == [6, 10, 12] and abs(c.max_abs - 0.5) < 1e-6
