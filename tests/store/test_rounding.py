"""Activations and gradients stored rounded (format 4): within the bound, NaN/Inf/huge and
subnormal values kept bit for bit, exact where exact data matters, and whole without
rounding when asked; a format-3 run still opens."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tvis.store import rounding
from tvis.store.reader import RunReader
from tvis.store.writer import RunWriter

BITS = rounding.MANTISSA_BITS
RNG = np.random.default_rng(0)


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"<u{a.dtype.itemsize}")


def test_default_keeps_a_relative_error_of_at_most_2_to_the_minus_11():
    assert BITS == 10
    for dtype in (np.float32, np.float64):
        # every binade from tiny normals to huge values
        x = RNG.standard_normal(200_000) * 10.0 ** RNG.uniform(-30, 30, 200_000)
        x = x.astype(dtype)
        r = rounding.round_mantissa(x, BITS)
        assert r.dtype == x.dtype and r.shape == x.shape
        rel = np.abs(r.astype(np.float64) - x.astype(np.float64)) / np.abs(x.astype(np.float64))
        assert rel.max() <= 2.0**-11
        assert not np.array_equal(r, x)  # it did round
        assert np.array_equal(np.sign(r), np.sign(x))


def test_nan_inf_huge_and_subnormal_values_stay_what_they_were():
    f32 = np.finfo(np.float32)
    special = np.array(
        [np.inf, -np.inf, np.nan, 0.0, -0.0, f32.max, -f32.max, 1e-45, -1e-40, 70000.0, 3e38],
        np.float32,
    )
    payloads = np.array([0x7F800001, 0xFFFFFFFF, 0x7FC00123, 0xFF801FFF], np.uint32)
    x = np.concatenate([special, payloads.view(np.float32)])
    r = rounding.round_mantissa(x, BITS)
    # non-finite: every bit (a NaN with a low payload does not become Inf)
    nonfinite = ~np.isfinite(x)
    assert np.array_equal(_bits(r)[nonfinite], _bits(x)[nonfinite])
    assert np.isfinite(r[np.isfinite(x)]).all()  # nothing huge became Inf
    assert (np.abs(r[5:7]) < f32.max).all() and np.abs(r[5:7] / x[5:7] - 1).max() < 2.0**-10
    assert np.array_equal(_bits(r[3:5]), _bits(x[3:5]))  # +0 and -0
    assert np.array_equal(_bits(r[7:9]), _bits(x[7:9]))  # subnormals: not turned to zero
    assert r[9] != 70000.0 and abs(r[9] / 70000.0 - 1) <= 2.0**-11  # no float16 overflow


def test_narrow_and_integer_dtypes_are_left_alone():
    for a in (
        RNG.standard_normal(100).astype(np.float16),
        np.arange(100, dtype=np.int64),
        np.arange(100, dtype=np.uint8),
    ):
        assert rounding.round_mantissa(a, BITS) is a
    x = RNG.standard_normal(10).astype(np.float32)
    assert rounding.round_mantissa(x, None) is x  # --exact
    assert rounding.round_mantissa(x, 23) is x


def _batch_record() -> tuple[dict, dict[int, np.ndarray]]:
    """A batch: a data-pipeline input, a conv output, its gradient, a loss call's logits,
    a derived per-sample loss, integer labels and the conv output pooled per sample (the
    same every call)."""
    rng = np.random.default_rng(1)
    image = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    conv = rng.standard_normal((2, 4, 8, 8)).astype(np.float32) * 1e4
    conv[0, 0, 0, :3] = [np.nan, np.inf, 3.0e38]
    grad = rng.standard_normal((2, 4, 8, 8)).astype(np.float32) * 1e-6
    logits = rng.standard_normal((2, 5)).astype(np.float32)
    labels = np.array([1, 3], np.int64)
    per_sample = rng.random(2).astype(np.float32)
    pooled = rng.standard_normal((2, 4)).astype(np.float32)
    arrays = {0: image, 1: labels, 2: conv, 3: grad, 4: logits, 5: per_sample, 6: pooled}
    entries = [
        {"id": i, "shape": list(a.shape), "dtype": str(a.dtype), "stats": {}, "batch_dim": 0}
        for i, a in arrays.items()
    ]
    entries[2]["grad"], entries[3]["of"] = 3, 2
    entries[5]["derived"] = entries[6]["derived"] = True

    def call(i, name, kind, phase, inputs, outputs):
        return {
            "id": i,
            "parent": -1,
            "depth": 0,
            "kind": kind,
            "name": name,
            "cls": None,
            "phase": phase,
            "inputs": [{"name": "x", "tensor": t} for t in inputs],
            "outputs": [{"name": "return", "tensor": t} for t in outputs],
        }

    calls = [
        call(0, "conv", "module", "forward", [0], [2]),
        call(1, "head", "module", "forward", [2], [4]),
        call(2, "cross_entropy", "loss", "loss", [4, 1], []),
    ]
    batch = {"index": 0, "step": 0, "micro": 0, "n_calls": 3, "phase_ms": {}}
    record = {
        "batch": batch,
        "calls": calls,
        "tensors": entries,
        "data": {"batch": [{"name": "x", "tensor": 0}, {"name": "y", "tensor": 1}]},
        "repr": [{"call": 0, "module": "conv", "depth": 0, "tensor": 6}],
    }
    return record, arrays


def _write(path: Path, bits: int | None) -> RunReader:
    record, arrays = _batch_record()
    writer = RunWriter(path, {"script": "train.py"}, mantissa_bits=bits)
    writer.write_batch(0, record, arrays)
    writer.write_index({"batches": [record["batch"]], "steps": [], "params": [], "notices": []})
    return RunReader(path)


def test_activations_and_gradients_are_rounded_and_the_data_stays_exact(tmp_path):
    run = _write(tmp_path / "run", BITS)
    assert run.meta["values"] == {"mantissa_bits": BITS}
    batch = run.batch(0)
    _, original = _batch_record()
    for tid in (0, 1, 4, 5):  # input, labels, the loss's logits, per-sample loss
        assert np.array_equal(_bits(np.asarray(batch.array(tid))), _bits(original[tid]))
    for tid in (2, 3, 6):  # activation, gradient, the activation pooled per sample
        assert batch.tensor(tid)["value"]["bits"] == BITS
        stored = np.asarray(batch.array(tid))
        assert not np.array_equal(stored, original[tid])
        assert np.array_equal(_bits(stored), _bits(rounding.round_mantissa(original[tid], BITS)))
    conv = np.asarray(batch.array(2))
    assert np.isnan(conv[0, 0, 0, 0]) and conv[0, 0, 0, 1] == np.inf
    assert np.isfinite(conv[0, 0, 0, 2])


def test_exact_stores_every_bit(tmp_path):
    run = _write(tmp_path / "run", None)
    assert "values" not in run.meta
    _, original = _batch_record()
    batch = run.batch(0)
    for tid, array in original.items():
        assert np.array_equal(_bits(np.asarray(batch.array(tid))), _bits(array))


FORMAT3 = Path(__file__).parent / "data" / "format3_run"


def test_a_format_3_run_still_opens(tmp_path):
    """Written by tvis's format-3 writer (lossless chunks, before rounding existed)."""
    run_dir = shutil.copytree(FORMAT3, tmp_path / "old")
    (run_dir / "steps").mkdir(exist_ok=True)
    run = RunReader(run_dir)
    assert run.meta["format"] == 3 and "values" not in run.meta
    x = np.random.default_rng(3).standard_normal((2, 4, 16, 16)).astype(np.float32)
    batch = run.batch(0)
    assert np.array_equal(_bits(np.asarray(batch.array(0))), _bits(x))
    assert np.array_equal(np.asarray(batch.array(1)), np.maximum(x, 0))
    assert np.array_equal(batch.array(1)[1, 2], np.maximum(x, 0)[1, 2])
    assert list(np.asarray(batch.array(2))) == [0, 1]


@pytest.mark.parametrize("bits", [4, 10, 16])
def test_the_bound_follows_the_bits(bits):
    x = RNG.standard_normal(50_000).astype(np.float32)
    r = rounding.round_mantissa(x, bits)
    assert (np.abs(r / x - 1) <= 2.0 ** -(bits + 1)).all()
