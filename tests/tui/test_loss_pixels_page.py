"""A segmentation script (a U-Net, ``CrossEntropyLoss(ignore_index=255)`` on [B, 5, H, W]
logits and [B, H, W] masks with an unlabeled border) seen in the viewer: the Loss page
shows the followed sample's target and predicted masks and per-pixel loss as pictures with
pixel accuracy and IoU per class, never tokens; Replay's card shows the target as a mask."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from support import run_tvis
from textual.widgets import Static
from viewer_support import goto_page, make_app, screen_text, showing, wait_for

from tvis.tui.pages.loss import LossView
from tvis.tui.picture import Picture
from tvis.tui.picture.colormaps import masked_rgb
from tvis.tui.picture.widget import depth_of
from tvis.tui.widgets.pixel_loss import PixelLossView, shape_note
from tvis.tui.widgets.replay_cards import InputCard

SCRIPT = Path(__file__).resolve().parents[1] / "wild" / "scripts" / "seg_unet"


@pytest.fixture(scope="module")
def seg_runs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("seg unet")
    shutil.copytree(SCRIPT, folder, dirs_exist_ok=True)
    result = run_tvis("run", "--steps", "2", "--out", "runs", "train.py", cwd=folder)
    assert result.returncode == 0, result.stderr
    return folder / "runs"


def _grey(app) -> tuple[int, int, int]:
    """The ignored grey at the test terminal's colour depth."""
    return masked_rgb(depth_of(app.console.color_system))


def _colours(picture: Picture) -> set[tuple[int, int, int]]:
    """The colours a half-block picture paints (foreground and background of its cells)."""
    found = set()
    for strip in picture.query_one("_Cells").strips:
        for segment in strip:
            for colour in (segment.style.color, segment.style.bgcolor):
                if colour is not None:
                    found.add(tuple(colour.get_truecolor()))
    return found


async def test_loss_page_of_a_segmentation_loss_shows_masks_and_pixel_loss_not_tokens(seg_runs):
    app = make_app(seg_runs)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        view = app.screen.query_one(LossView)
        await wait_for(pilot, lambda: view.pixels and view.detail, "the pixel view")
        pixels = view.query_one(PixelLossView)
        assert pixels.display
        target, pred, loss = (
            pixels.query_one(f"#pixel-{name}", Picture) for name in ("target", "pred", "loss")
        )
        await wait_for(pilot, lambda: target.has_data and pred.has_data and loss.has_data, "masks")
        assert _grey(app) in _colours(target)  # the unlabeled border, shown as ignored
        assert _grey(app) not in _colours(pred)  # every pixel has a prediction
        # The pictures hold their data as soon as they are drawn; the texts beside them are
        # on screen after the layout that follows (a frame later on a loaded machine).
        text = await wait_for(
            pilot, lambda: "IoU per class" in screen_text(app) and screen_text(app), "the IoU"
        )
        assert "token" not in text.lower() and "<255>" not in text
        assert "valid per-pixel losses" in text and "✓ matches" in text
        assert "pixel accuracy" in text and "IoU per class" in text
        assert "ignored (ignore_index=255)" in text
        assert np.array_equal(view.pixels["target"][:2], np.full((2, 32), 255))
        assert view.pixels["sample"] == 0
        await pilot.press("right_square_bracket")  # the next sample
        await wait_for(pilot, lambda: (view.pixels or {}).get("sample") == 1, "sample 1")
        assert "2 training batches" in screen_text(app)
        await pilot.press("b")
        await wait_for(pilot, lambda: "this batch · b: batch / run" in screen_text(app), "batch")
        assert app.internal_errors == []


async def test_replay_shows_a_segmentation_target_as_a_mask_not_numbers(seg_runs):
    app = make_app(seg_runs)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "replay")
        page = app.screen
        await wait_for(pilot, lambda: page.recording and page.current_event(), "the first event")
        card = page.query_one(InputCard)
        await wait_for(pilot, lambda: card.mask is not None and card.pipeline, "the target mask")
        mask = card.query_one("#card-mask", Picture)
        assert mask.display and mask.has_data and _grey(app) in _colours(mask)
        text = await wait_for(pilot, lambda: showing(app, "target mask 32×32"), "the mask")
        assert "0 0 0 0" not in text
        # Sample 0's mask holds class 0 and class 1 only (train.py: `i % 4 + 1`); its legend
        # names those, not the other classes the model predicted somewhere.
        legend = card.query_one(".mask-legend", Static).render()
        assert legend.plain.split() == ["■0", "■1", "■", "ignored"], legend.plain
        rec = page.recording
        page.seek(next(s for s in range(rec.total) if (e := rec.event(s)) and e.kind == "loss"))
        await wait_for(pilot, lambda: "pixel accuracy" in screen_text(app), "the result card")
        assert "no per-sample result" not in screen_text(app)
        assert app.internal_errors == []


async def test_a_classifier_keeps_its_confusion_matrix_and_no_pixel_view(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        view = app.screen.query_one(LossView)
        await wait_for(pilot, lambda: view.samples and view.detail, "the confusion matrix")
        assert not view.query_one(PixelLossView).display
        assert view.query_one("#loss-picture", Picture).has_data


def test_a_reduced_plane_and_a_volumes_slice_say_what_is_shown():
    view = {"shape": [100, 90], "shown": [50, 45], "stride": 2, "slice": None}
    assert shape_note(view) == (
        "100×90, shown as 50×45 (masks: one pixel of each 2×2 block, loss: its mean)"
    )
    volume = {"shape": [8, 8], "shown": [8, 8], "stride": 1, "slice": "the middle slice [3, :, :]"}
    assert shape_note(volume) == "8×8 · the middle slice [3, :, :]"
