"""Tensor statistics and kept values for every kind of tensor a model produces."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tvis.record import tensors
from tvis.record.tensors import keep, stats, to_numpy


@pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64, torch.uint8]
)
def test_stats_match_torch_for_each_dtype(dtype):
    x = (torch.arange(-6, 18) % 11).to(dtype)
    s, hist = stats(x)
    ref = x.double()
    assert s["numel"] == 24
    assert s["mean"] == pytest.approx(float(ref.mean()), rel=1e-6)
    assert s["std"] == pytest.approx(float(ref.std(correction=0)), rel=1e-5)
    assert (s["min"], s["max"]) == (float(ref.min()), float(ref.max()))
    assert s["norm"] == pytest.approx(float(ref.norm()), rel=1e-5)
    assert s["zeros"] == pytest.approx(float((ref == 0).double().mean()))
    assert sum(hist["counts"]) == 24


def test_non_finite_values_are_counted_and_excluded_from_moments():
    s, hist = stats(torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 3.0]))
    assert (s["nan"], s["inf"]) == (1, 2)
    assert s["mean"] == 2.0 and s["max"] == 3.0
    assert sum(hist["counts"]) == 2


def test_all_nan_tensor_has_nan_moments_and_no_histogram():
    s, hist = stats(torch.full((3,), float("nan")))
    assert s["nan"] == 3 and math.isnan(s["mean"]) and hist is None


def test_bool_complex_scalar_empty_and_meta_tensors():
    assert stats(torch.tensor([True, False, False]))[0]["zeros"] == pytest.approx(2 / 3)
    assert stats(torch.tensor([3 + 4j]))[0]["mean"] == 5.0  # magnitude
    assert stats(torch.tensor(2.5))[0]["max"] == 2.5
    assert stats(torch.zeros(0, 4)) == ({"numel": 0}, None)
    assert stats(torch.empty(2, 3, device="meta")) == ({"numel": 6}, None)
    assert keep(torch.empty(2, 3, device="meta"), 0, 1, 100) == (None, None)


def test_large_offset_keeps_std_accurate():
    x = torch.randn(10_000, generator=torch.Generator().manual_seed(0)) * 1e-3 + 1e4
    assert stats(x)[0]["std"] == pytest.approx(float(x.double().std(correction=0)), rel=1e-2)


def test_values_widen_bf16_and_keep_exact_float32():
    x = torch.randn(4, 3).to(torch.bfloat16)
    np.testing.assert_array_equal(to_numpy(x), x.float().numpy())
    y = torch.randn(5, 2).t()  # non-contiguous
    np.testing.assert_array_equal(to_numpy(y), y.numpy())


def test_chunked_statistics_and_subsampled_histogram_of_a_large_tensor():
    x = torch.randn(3, 100_003, generator=torch.Generator().manual_seed(1))
    x[:, ::5] = 0
    s, hist = stats(x)
    ref = x.double()
    assert s["mean"] == pytest.approx(float(ref.mean()), abs=1e-6)
    assert s["std"] == pytest.approx(float(ref.std(correction=0)), rel=1e-6)
    assert s["absmean"] == pytest.approx(float(ref.abs().mean()), rel=1e-6)
    assert s["norm"] == pytest.approx(float(ref.norm()), rel=1e-6)
    assert (s["min"], s["max"]) == (float(ref.min()), float(ref.max()))
    assert s["zeros"] == pytest.approx(float((ref == 0).double().mean()), abs=1e-12)
    assert hist["sampled"] > 1 and sum(hist["counts"]) < x.numel()
    # The subset's shape matches the whole tensor's: the zero spike lands in one bin.
    whole = np.histogram(x.numpy(), bins=32, range=(s["min"], s["max"]))[0] / x.numel()
    sampled = np.array(hist["counts"]) / sum(hist["counts"])
    assert np.abs(whole - sampled).max() < 0.02


@pytest.mark.parametrize(
    "x",
    [
        torch.randn(7),
        torch.randn(64, 64),
        torch.randn(3, 5).t(),  # non-contiguous
        torch.full((9,), 2.5),  # constant: a one-value range
        torch.randn(100, dtype=torch.float64),
        torch.randn(50).to(torch.bfloat16),
        torch.relu(torch.randn(4096)),  # zeros
        torch.randn(10) * 1e-3 + 1e4,  # the shifted variance pass
        torch.arange(12) % 5,
        torch.tensor([3e38, 3e38, 1.0]),  # a sum that overflows
    ],
)
def test_small_tensor_statistics_equal_the_general_path(x, monkeypatch):
    fast = stats(x)
    monkeypatch.setattr(tensors, "_small_stats", lambda flat: None)
    assert repr(fast) == repr(stats(x))  # every float bit for bit, NaN included
