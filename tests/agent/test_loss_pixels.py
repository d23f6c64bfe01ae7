"""A segmentation loss (a class per pixel) read as pictures over real recordings: the
followed sample's per-pixel loss, argmax prediction and ignore mask equal what torch
computes, large planes are reduced by picking classes (never averaging them), a volume
shows its middle slice, and each class's IoU is counted over valid pixels only."""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support import record_script, run_tvis

from tvis.agent.client import LocalClient
from tvis.agent.insights.loss_pixels import PIXELS_SHOWN, block_mean
from tvis.agent.protocol import encode

# What the pages promise to fetch per view.
VIEW_BYTES = 64 << 10

SEGMENTER = textwrap.dedent(
    """
    import sys
    import numpy as np
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, Dataset

    H, W = int(sys.argv[1]), int(sys.argv[2])


    class Shapes(Dataset):
        classes = ["background", "disc", "square"]

        def __len__(self):
            return 8

        def __getitem__(self, i):
            g = torch.Generator().manual_seed(i)
            x = torch.rand(3, H, W, generator=g)
            y = torch.zeros(H, W, dtype=torch.long)
            y[H // 4 : H // 2, W // 4 : W // 2] = 1 + i % 2
            y[:2] = 255  # an unlabeled border
            return x, y


    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.Conv2d(8, 3, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    crit = nn.CrossEntropyLoss(ignore_index=255)
    for step, (x, y) in enumerate(DataLoader(Shapes(), batch_size=4)):
        out = model(x)
        if step == 0:  # what the test recomputes the per-pixel views from
            np.save("logits.npy", out.detach().numpy())
            np.save("target.npy", y.numpy())
        loss = crit(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)


def _record(folder: Path, h: int, w: int) -> Path:
    (folder / "train.py").write_text(SEGMENTER)
    result = run_tvis(
        "run", "--steps", "1", "--out", "runs", "train.py", str(h), str(w), cwd=folder
    )
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture(scope="module")
def small(tmp_path_factory) -> Path:
    return _record(tmp_path_factory.mktemp("seg"), 24, 40)


@pytest.fixture(scope="module")
def large(tmp_path_factory) -> Path:
    return _record(tmp_path_factory.mktemp("seg large"), 100, 90)


def _torch_views(folder: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-pixel loss, argmax and ignore mask of the first batch, as torch computes them."""
    logits = torch.from_numpy(np.load(folder / "logits.npy"))
    target = torch.from_numpy(np.load(folder / "target.npy"))
    loss = F.cross_entropy(logits, target, ignore_index=255, reduction="none")
    return loss.numpy(), logits.argmax(1).numpy(), (target == 255).numpy()


def _call(folder: Path, method: str, **params):
    with LocalClient(folder / "runs") as client:
        (row,) = client.call("runs")
        return client.call(method, run=row["run"], batch=0, **params)


def test_pixel_view_of_a_sample_equals_what_torch_computes(small):
    loss, pred, ignored = _torch_views(small)
    target = np.load(small / "target.npy")
    for sample in (0, 3):
        view = _call(small, "sample_table", sample=sample)
        assert view["kind"] == "pixels" and view["shape"] == [24, 40] and view["stride"] == 1
        assert np.array_equal(view["target"], target[sample])
        assert np.array_equal(view["pred"], pred[sample])
        assert np.array_equal(view["ignored"].astype(bool), ignored[sample])
        assert np.array_equal(view["loss_ignored"].astype(bool), ignored[sample])
        valid = ~ignored[sample]
        np.testing.assert_allclose(view["loss"][valid], loss[sample][valid], rtol=1e-6, atol=1e-7)
        hits = (pred[sample] == target[sample])[valid]
        assert view["accuracy"] == pytest.approx(hits.mean())
        assert view["valid_pixels"] == int(valid.sum()) and view["pixels"] == 24 * 40
        assert view["names"] == [["background", "disc", "square"][c] for c in view["present"]]
        assert view["slice"] is None


def test_per_sample_rows_and_the_reduction_of_a_segmentation_loss(small):
    loss, pred, ignored = _torch_views(small)
    target = np.load(small / "target.npy")
    rows = _call(small, "sample_table")["rows"]
    assert [r["sample"] for r in rows] == [0, 1, 2, 3]
    for row in rows:
        valid = ~ignored[row["sample"]]
        assert row["loss"] == pytest.approx(loss[row["sample"]][valid].mean(), rel=1e-5)
        hits = pred[row["sample"]][valid] == target[row["sample"]][valid]
        assert row["accuracy"] == pytest.approx(hits.mean())
    detail = _call(small, "loss_detail")
    assert detail["per_pixel"] and not detail["per_token"] and "confusion" not in detail
    assert detail["reduction_check"]["terms"] == int((~ignored).sum())
    assert detail["reduction_check"]["matches"]


def test_class_iou_counts_valid_pixels_only(small):
    _, pred, ignored = _torch_views(small)
    target = np.load(small / "target.npy")
    iou = _call(small, "loss_detail")["iou"]
    batch = iou["batch"]
    valid = ~ignored
    t, p = target[valid], pred[valid]
    for c, value, pixels in zip(batch["classes"], batch["iou"], batch["pixels"], strict=True):
        union = ((t == c) | (p == c)).sum()
        assert value == pytest.approx(((t == c) & (p == c)).sum() / union)
        assert pixels == (t == c).sum()
    assert 255 not in batch["classes"]  # the ignored border is no class
    assert batch["accuracy"] == pytest.approx((t == p).mean()) and batch["total"] == t.size
    assert batch["names"] == [["background", "disc", "square"][c] for c in batch["classes"]]
    assert iou["run"]["batches"] == [0] and iou["run"]["iou"] == batch["iou"]


def test_a_large_plane_is_picked_at_strided_pixels_and_its_loss_block_averaged(large):
    loss, pred, ignored = _torch_views(large)
    target = np.load(large / "target.npy")
    view = _call(large, "sample_table", sample=1)
    step = view["stride"]
    assert step == 2 and view["shape"] == [100, 90] and view["shown"] == [50, 45]
    assert view["target"].size <= PIXELS_SHOWN
    assert np.array_equal(view["target"], target[1, ::2, ::2])  # picked, never averaged
    assert np.array_equal(view["pred"], pred[1, ::2, ::2])
    means, empty = block_mean(loss[1].astype(np.float64), ~ignored[1], 2)
    np.testing.assert_allclose(view["loss"], means, rtol=1e-5)
    assert np.array_equal(view["loss_ignored"].astype(bool), empty)
    assert len(encode({"id": 1, "result": view})) <= VIEW_BYTES


VOLUME = """
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Conv3d(1, 4, 3, padding=1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x = torch.randn(2, 1, 6, 8, 8)
y = torch.randint(0, 4, (2, 6, 8, 8))
np.save("y.npy", y.numpy())
out = model(x)
loss = nn.functional.cross_entropy(out, y)
opt.zero_grad()
loss.backward()
opt.step()
"""


def test_a_volume_shows_its_middle_slice_and_says_so(tmp_path):
    record_script(tmp_path, VOLUME, "--steps", "1")
    y = np.load(tmp_path / "y.npy")
    view = _call(tmp_path, "sample_table", sample=0)
    assert view["shape"] == [8, 8] and "middle slice [3, :, :] of 6×8×8" in view["slice"]
    assert np.array_equal(view["target"], y[0, 3])


def test_block_mean_leaves_ignored_pixels_out_and_marks_empty_blocks():
    values = np.array([[1.0, 3.0, 5.0], [100.0, 7.0, 9.0]])
    valid = np.array([[True, True, False], [False, True, False]])
    means, empty = block_mean(values, valid, 2)
    assert means.tolist() == [[pytest.approx(11 / 3), 0.0]]
    assert empty.tolist() == [[False, True]]
