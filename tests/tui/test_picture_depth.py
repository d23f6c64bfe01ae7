"""Every picture honours the terminal's colours: with 16 or 256 colours the Neurons mosaic,
the Grad-CAM and attention overlays and the layer stack's thumbnails are drawn only in
colours the terminal has, so what Rich sends is what the picture kit chose (not a
nearest-colour guess that turns a map's middle grey)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from rich.color import STANDARD_PALETTE, Color, ColorSystem
from rich.color_triplet import ColorTriplet
from rich.text import Text
from test_insights_page import _open_insights
from test_replay import open_replay, seek_to
from viewer_support import make_app, screen_text, wait_for

from tvis.tui.picture import Picture, colormaps, raster
from tvis.tui.picture.widget import _Cells
from tvis.tui.widgets.layer_stack import LayerStack
from tvis.tui.widgets.layer_views import NeuronsView

SYSTEMS = {"16": ColorSystem.STANDARD, "256": ColorSystem.EIGHT_BIT}


def foreign(colours: set[ColorTriplet], depth: str) -> set[ColorTriplet]:
    """The colours of ``colours`` that a terminal of ``depth`` does not have as they are."""
    if depth == "16":
        return colours - {ColorTriplet(*c) for c in STANDARD_PALETTE._colors}
    return {
        c
        for c in colours
        if Color.from_rgb(*c).downgrade(ColorSystem.EIGHT_BIT).get_truecolor() != c
    }


def picture_colours(picture: Picture) -> set[ColorTriplet]:
    """The colours of a picture's half-block cells (foreground: upper pixel, background:
    lower pixel)."""
    found = set()
    for strip in picture.query_one(_Cells).strips:
        for segment in strip:
            for colour in (segment.style.color, segment.style.bgcolor):
                if colour is not None:
                    found.add(colour.get_truecolor())
    return found


def text_colours(text: Text, glyph: str) -> set[ColorTriplet]:
    """The colours of the spans of ``text`` that draw ``glyph``."""
    found = set()
    for span in text.spans:
        if glyph in text.plain[span.start : span.end] and not isinstance(span.style, str):
            for colour in (span.style.color, span.style.bgcolor):
                if colour is not None:
                    found.add(colour.get_truecolor())
    return found


def app_with_colours(run: Path, depth: str):
    app = make_app(run)
    app.console._color_system = SYSTEMS[depth]  # what --colors / $COLORTERM would give
    return app


def test_fit_gives_only_colours_the_terminal_sends_unchanged():
    rng = np.random.default_rng(0)
    photo = rng.integers(0, 256, (40, 30, 3), dtype=np.uint8)
    for depth in SYSTEMS:
        fitted = colormaps.fit(photo, depth)
        assert fitted.shape == photo.shape
        colours = {ColorTriplet(*c) for c in fitted.reshape(-1, 3).tolist()}
        assert len(colours) > 8 and not foreign(colours, depth)
        assert np.array_equal(colormaps.fit(fitted, depth), fitted)  # palettes are kept
    assert colormaps.fit(photo, "truecolor") is photo


def test_the_half_block_styler_is_the_one_thumbnails_use():
    rgb = colormaps.to_rgb(np.arange(8.0).reshape(2, 4), colormaps.Scale(0, 7), None, "16")
    text = raster.half_block_text(rgb)
    assert text.plain == raster.UPPER_HALF * 4
    assert not foreign(text_colours(text, raster.UPPER_HALF), "16")


@pytest.mark.parametrize("depth", ["16", "256"])
async def test_neurons_mosaic_uses_only_the_terminals_colours(run_dir: Path, depth: str):
    app = app_with_colours(run_dir, depth)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.1.0")
        await pilot.press("v")
        await wait_for(pilot, lambda: "channels, most active first" in screen_text(app), "maps")
        colours = picture_colours(page.query_one(NeuronsView).query_one(Picture))
        assert len(colours) > 3 and not foreign(colours, depth)


@pytest.mark.parametrize("depth", ["16", "256"])
async def test_layer_stack_thumbnails_use_only_the_terminals_colours(run_dir: Path, depth: str):
    app = app_with_colours(run_dir, depth)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        stack = page.query_one(LayerStack)
        await seek_to(pilot, page, "features.1.0", kind="grad")
        await wait_for(pilot, lambda: stack._thumbs[False] and stack._thumbs[True], "thumbnails")
        colours = text_colours(Text("\n").join(stack.lines()), raster.UPPER_HALF)
        assert len(colours) > 3 and not foreign(colours, depth)


@pytest.mark.parametrize("depth", ["16", "256"])
async def test_gradcam_overlay_uses_only_the_terminals_colours(recorded_run: Path, depth: str):
    app = app_with_colours(recorded_run, depth)
    async with app.run_test(size=(120, 40)) as pilot:
        page, _ = await _open_insights(pilot, "gradcam")
        overlay = page.query_one("#gradcam-overlay", Picture)
        await wait_for(pilot, lambda: overlay.has_data, "the Grad-CAM overlay")
        colours = picture_colours(overlay)
        assert len(colours) > 3 and not foreign(colours, depth)


@pytest.mark.parametrize("depth", ["16", "256"])
async def test_attention_overlay_uses_only_the_terminals_colours(vit_run: Path, depth: str):
    app = app_with_colours(vit_run, depth)
    async with app.run_test(size=(120, 40)) as pilot:
        page, _ = await _open_insights(pilot, "attention")
        overlay = page.query_one("#attention-overlay", Picture)
        await wait_for(pilot, lambda: overlay.has_data, "the [CLS] overlay")
        colours = picture_colours(overlay)
        assert len(colours) > 3 and not foreign(colours, depth)
