"""SGD's prediction of the after-weights (format 5): the same bits wherever it is redone,
and format-4 runs (Δw always XOR-ed against the weight) still read."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from tvis.store import codec, predict
from tvis.store.reader import RunReader

DATA = Path(__file__).parent / "data"
HYPER = {
    "lr": 0.1,
    "momentum": 0.9,
    "dampening": 0.0,
    "weight_decay": 1e-4,
    "nesterov": False,
    "maximize": False,
}


def test_a_format_4_run_with_steps_still_reads_bit_exactly(tmp_path):
    """Written by tvis's format-4 writer (data/make_format4_steps_run.py): SGD with
    momentum, every Δw an XOR against its weight; read back as the training had them."""
    run = RunReader(shutil.copytree(DATA / "format4_steps_run", tmp_path / "old"))
    expected = np.load(DATA / "format4_steps_expected.npz")
    assert run.meta["format"] == 4
    for index in range(3):
        step = run.step(index)
        assert len(step.record["params"]) == 2
        for p in step.record["params"]:
            assert "predict" not in step.tensor(p["update"])["value"]
            for which in ("weight", "update"):
                want = expected[f"{index}/{p['name']}/{which}"]
                assert step.array(p[which]).tobytes() == want.tobytes(), (index, p["name"])


def _ulps(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.abs(a.view(np.int32).astype(np.int64) - b.view(np.int32).astype(np.int64))


def test_prediction_is_sgds_step_to_within_a_unit_in_the_last_place():
    """torch's SGD, written out in float64 (first step, then one with the momentum buffer
    the first left, nesterov and not): the prediction is that, cast once to float32."""
    rng = np.random.default_rng(0)
    w0, g0, g1 = (rng.standard_normal(4096).astype(np.float32) for _ in range(3))
    for nesterov in (False, True):
        hyper = {**HYPER, "nesterov": nesterov, "dampening": 0.0 if nesterov else 0.25}
        m, wd = hyper["momentum"], hyper["weight_decay"]
        force0 = g0.astype(np.float64) + wd * w0.astype(np.float64)
        buf0 = force0
        d0 = force0 + m * buf0 if nesterov else buf0
        w1 = (w0.astype(np.float64) - 0.2 * d0).astype(np.float32)
        first = predict.sgd_after(w0, g0, {**hyper, "lr": 0.2})
        assert _ulps(first, w1).max() <= 1
        dw0 = np.subtract(w1, w0)
        force1 = g1.astype(np.float64) + wd * w1.astype(np.float64)
        buf1 = m * buf0 + (1 - hyper["dampening"]) * force1
        d1 = force1 + m * buf1 if nesterov else buf1
        want = (w1.astype(np.float64) - 0.1 * d1).astype(np.float32)
        got = predict.sgd_after(
            w1, g1, hyper, (0.2, dw0, w0, g0) if nesterov else (0.2, dw0, None, None)
        )
        # Δw_prev kept the rounding of w1 (torch's buffer did not): an error of a unit in
        # the last place of the weights, momentum times, carried into the prediction.
        scale = np.spacing(np.maximum(np.maximum(np.abs(w0), np.abs(w1)), np.abs(want)))
        err = np.abs(got.astype(np.float64) - want) / scale
        assert (err <= 2).all()
        assert (got == want).mean() > 0.5


def test_prediction_is_elementwise_so_any_slice_predicts_the_same_bits():
    """No reduction (whose order BLAS or threads could change): a region's prediction is
    the same as the same region of the whole's, as writer and reader must agree."""
    rng = np.random.default_rng(1)
    w, g = rng.standard_normal((64, 33), np.float32), rng.standard_normal((64, 33), np.float32)
    arrays = (rng.standard_normal((64, 33), np.float32) * 1e-3, w * 0.99, g * 1.01)
    hyper = {**HYPER, "nesterov": True, "maximize": True}
    whole = predict.sgd_after(w, g, hyper, (0.1, *arrays))
    part = predict.sgd_after(w[:5], g[:5], hyper, (0.1, *(a[:5] for a in arrays)))
    assert part.tobytes() == whole[:5].tobytes()
    one = predict.sgd_after(w[0, 0].copy().reshape(()), g[0, 0].copy().reshape(()), hyper)
    assert one.shape == () and one.tobytes() == predict.sgd_after(w, g, hyper)[0, 0].tobytes()


def test_elements_whose_bits_could_depend_on_the_machine_are_predicted_as_the_weight():
    """NaN payloads differ between CPUs and flush-to-zero modes read subnormals as 0: such
    elements (in any input, or a result below float32's normal range) take the weight's
    own bits, found from bits, so every machine predicts them alike."""
    tiny = np.finfo(np.float32).tiny
    w = np.array([1.0, np.nan, np.inf, tiny / 4, 1.0, 2e-38, 1.0, 0.0], np.float32)
    g = np.array([1.0, 1.0, 1.0, 1.0, tiny / 8, 0.0, np.nan, 0.0], np.float32)
    hyper = {**HYPER, "weight_decay": 0.0, "momentum": 0.0}
    got = predict.sgd_after(w, g, hyper)
    want = w.copy()
    want[0] = np.float32(1.0 - 0.1)
    want[5] = np.float32(2e-38)  # w - 0 stays normal
    assert got[[0, 5, 7]].tobytes() == want[[0, 5, 7]].tobytes()
    for i in (1, 2, 3, 4, 6):
        assert got[i : i + 1].tobytes() == w[i : i + 1].tobytes(), i
    near = np.array([1e-37], np.float32)  # lands below float32's normal range
    result = predict.sgd_after(near, np.array([0.99e-36], np.float32), hyper)
    assert result.tobytes() == near.tobytes()


@pytest.mark.parametrize(
    "group",
    [
        {**HYPER, "lr": "<Tensor>"},
        {k: v for k, v in HYPER.items() if k != "nesterov"},
        {**HYPER, "weight_decay": 1e-40},
        {**HYPER, "lr": float("nan")},
    ],
)
def test_groups_the_rule_cannot_use_have_no_prediction(group):
    assert predict.sgd_hyper(group) is None


def test_xor_against_a_good_prediction_is_smaller_and_lossless():
    rng = np.random.default_rng(2)
    w = rng.standard_normal(1 << 16).astype(np.float32)
    g = rng.standard_normal(1 << 16).astype(np.float32)
    after = (w.astype(np.float64) - 0.01 * g.astype(np.float64)).astype(np.float32)
    predicted = predict.sgd_after(w, g, {**HYPER, "lr": 0.01, "weight_decay": 0.0})
    against = codec.encode(after, predicted)
    assert against.nbytes < codec.encode(after, w).nbytes / 4
    decoded = codec.decode(against.payload, after.dtype, after.shape, predicted, against.crc32)
    assert decoded.tobytes() == after.tobytes()
