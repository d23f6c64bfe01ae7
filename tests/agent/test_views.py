"""The numpy views: sample slicing, planes, block means, pictures, bounded arrays."""

from __future__ import annotations

import numpy as np
import pytest

from tvis.agent import views
from tvis.agent.protocol import AgentError


def test_block_mean_averages_equal_blocks_exactly():
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    out = views.block_mean(a, 2, 2)
    np.testing.assert_array_equal(out, [[2.5, 4.5], [10.5, 12.5]])


def test_block_mean_covers_every_value_with_uneven_blocks():
    a = np.random.default_rng(0).standard_normal((57, 131))
    out = views.block_mean(a, 10, 40)
    assert out.shape == (10, 40) and out.dtype == np.float32
    # Block means weighted by block size give back the overall mean.
    rows = np.diff(np.append((np.arange(10) * 57) // 10, 57))
    cols = np.diff(np.append((np.arange(40) * 131) // 40, 131))
    weighted = (out.astype(np.float64) * np.outer(rows, cols)).sum() / a.size
    assert weighted == pytest.approx(a.mean(), abs=1e-6)


def test_block_mean_leaves_a_small_array_alone():
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    np.testing.assert_array_equal(views.block_mean(a, 10, 10), a)


def test_block_mean_keeps_nan_visible():
    a = np.ones((8, 8))
    a[0, 0] = np.nan
    out = views.block_mean(a, 2, 2)
    assert np.isnan(out[0, 0]) and np.isfinite(out[1:, :]).all() and np.isfinite(out[0, 1])


def test_plane_takes_the_sample_along_a_sequence_first_batch_dim():
    a = np.arange(5 * 4 * 6).reshape(5, 4, 6)
    cut = views.plane(a, batch_dim=1, sample=2, index=[])
    np.testing.assert_array_equal(cut.values, a[:, 2, :])
    assert cut.sample == 2


def test_plane_fixes_leading_dims_with_index():
    a = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5)
    cut = views.plane(a, batch_dim=0, sample=1, index=[2])
    np.testing.assert_array_equal(cut.values, a[1, 2])
    assert cut.index == [2]


def test_plane_makes_vectors_and_scalars_one_row():
    assert views.plane(np.arange(7), None, None, []).values.shape == (1, 7)
    assert views.plane(np.array(3.0), None, None, []).values.shape == (1, 1)


def test_plane_ignores_the_sample_for_a_tensor_without_batch_dim():
    cut = views.plane(np.ones((3, 4)), batch_dim=None, sample=5, index=[])
    assert cut.sample is None and cut.values.shape == (3, 4)


@pytest.mark.parametrize(
    ("kwargs", "status"),
    [
        ({"batch_dim": 0, "sample": 9, "index": []}, 404),
        ({"batch_dim": 0, "sample": -1, "index": []}, 400),
        ({"batch_dim": 0, "sample": 0, "index": [0, 0, 0]}, 400),
        ({"batch_dim": 0, "sample": 0, "index": [7]}, 400),
    ],
    ids=["sample-not-kept", "negative-sample", "too-many-indices", "index-out-of-range"],
)
def test_plane_refuses_what_the_tensor_does_not_have(kwargs, status):
    with pytest.raises(AgentError) as e:
        views.plane(np.zeros((2, 3, 4, 5)), **kwargs)
    assert e.value.status == status


def test_crop_clips_the_window_and_refuses_an_empty_one():
    values, window = views.crop(np.arange(100).reshape(10, 10), [2, 50, -3, 4])
    assert window == [2, 10, 0, 4] and values.shape == (8, 4)
    with pytest.raises(AgentError):
        views.crop(np.zeros((4, 4)), [3, 3, 0, 4])


def test_heatmap_reports_the_finite_range_of_what_it_returns():
    a = np.zeros((1, 4, 4), dtype=np.float32)
    a[0, 0, 0], a[0, 3, 3], a[0, 1, 1] = np.inf, -2.0, np.nan
    out = views.heatmap(a, batch_dim=0, sample=0, index=[], window=None, width=8, height=8)
    assert out["lo"] == -2.0 and out["hi"] == 0.0
    assert not out["downsampled"]


def test_heatmap_refuses_absurd_sizes():
    with pytest.raises(AgentError):
        views.heatmap(
            np.zeros((4, 4)), batch_dim=None, sample=None, index=[], window=None, width=0, height=4
        )


def test_picture_undoes_the_recorded_normalization():
    rng = np.random.default_rng(1)
    pixels = rng.random((3, 8, 8))
    mean, std = [0.5, 0.4, 0.3], [0.2, 0.2, 0.1]
    normalized = (pixels - np.array(mean)[:, None, None]) / np.array(std)[:, None, None]
    out = views.picture(normalized.astype(np.float32), {"mean": mean, "std": std}, 8, 8)
    assert out["normalized"] and out["array"].shape == (8, 8, 3) and out["array"].dtype == np.uint8
    np.testing.assert_allclose(out["array"], np.round(pixels.transpose(1, 2, 0) * 255), atol=1)


def test_picture_keeps_the_aspect_ratio_when_shrinking():
    out = views.picture(np.zeros((3, 64, 32), np.float32), None, 16, 16)
    assert out["array"].shape == (16, 8, 3)


def test_picture_accepts_channels_last_uint8_and_grayscale():
    rgb = np.full((10, 12, 3), 200, np.uint8)
    assert views.picture(rgb, None, 20, 20)["array"].shape == (10, 12, 3)
    gray = views.picture(np.linspace(-5, 5, 36).reshape(6, 6), None, 6, 6)
    assert gray["array"].shape == (6, 6) and gray["scale"] == "minmax"
    assert gray["array"].min() == 0 and gray["array"].max() == 255


def test_picture_refuses_a_tensor_that_is_not_an_image():
    with pytest.raises(AgentError):
        views.picture(np.zeros((7, 5, 9)), None, 8, 8)


def test_bounded_keeps_whole_rows_when_they_fit():
    out = views.bounded(np.arange(100).reshape(10, 10), 35)
    assert out["truncated"] and not out["flat"] and out["array"].shape == (3, 10)


def test_bounded_flattens_when_one_row_is_too_big():
    out = views.bounded(np.arange(100).reshape(2, 50), 20)
    assert out["flat"] and out["array"].tolist() == list(range(20))


def test_bounded_pages_through_rows_from_start():
    a = np.arange(100).reshape(10, 10)
    first = views.bounded(a, 40)
    second = views.bounded(a, 40, start=first["next"])
    last = views.bounded(a, 40, start=second["next"])
    pages = [first["array"], second["array"], last["array"]]
    np.testing.assert_array_equal(np.concatenate(pages), a)
    assert last["next"] is None
    with pytest.raises(AgentError):
        views.bounded(a, 40, start=10)


def test_bounded_returns_everything_under_the_cap():
    out = views.bounded(np.arange(10), 10)
    assert not out["truncated"] and out["array"].shape == (10,)
