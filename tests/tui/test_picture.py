"""The picture kit: colour maps that stay one map at every colour depth, whole-pixel square
values, non-finite colours, labels, a legend, and clicks that name the value under them."""

from __future__ import annotations

import numpy as np
from rich.color import Color, ColorSystem
from rich.color_triplet import ColorTriplet
from textual.app import App, ComposeResult

from tvis.tui.picture import HEAT, SIGNED, VALUES, Picture, Scale, colormaps, raster
from tvis.tui.picture.widget import depth_of


def _luminance(rgb: np.ndarray) -> np.ndarray:
    return rgb.astype(float) @ np.array([0.2126, 0.7152, 0.0722])


def test_256_colour_palettes_survive_the_terminal_downgrade_unchanged():
    for cmap in (VALUES, SIGNED, HEAT):
        for rgb in colormaps.palette(cmap, "256").tolist():
            down = Color.from_rgb(*rgb).downgrade(ColorSystem.EIGHT_BIT)
            assert down.get_truecolor() == ColorTriplet(*rgb), (cmap.name, rgb)


def test_value_and_heat_palettes_brighten_monotonically_at_every_depth():
    for cmap in (VALUES, HEAT):
        for depth in ("truecolor", "256"):
            lum = _luminance(colormaps.palette(cmap, depth))
            assert np.all(np.diff(lum) >= 0), (cmap.name, depth)


def test_16_colour_palettes_use_only_ansi_colours():
    for cmap in (VALUES, SIGNED, HEAT):
        palette = colormaps.palette(cmap, "16").tolist()
        for number, rgb in zip(cmap.ansi16, palette, strict=True):
            assert Color.from_rgb(*rgb).downgrade(ColorSystem.STANDARD).number == number


def test_label_colours_are_distinct_hues_the_terminal_really_has():
    from tvis.tui.widgets.scatter import UNLABELLED_RGB, label_colours

    for rgb in label_colours(10, "256").tolist():
        down = Color.from_rgb(*rgb).downgrade(ColorSystem.EIGHT_BIT)
        assert down.get_truecolor() == ColorTriplet(*rgb), rgb
    ansi = [
        Color.from_rgb(*rgb).downgrade(ColorSystem.STANDARD).number
        for rgb in label_colours(10, "16").tolist()
    ]
    assert len(set(ansi)) == 10 and not {0, 5, 7, 8, 13, 15} & set(ansi)  # no greys, magenta
    for depth in ("truecolor", "256", "16"):
        colours = label_colours(10, depth).astype(int)
        assert len({tuple(c) for c in colours.tolist()}) == 10
        assert colormaps.NAN_RGB not in map(tuple, colours.tolist())
        assert UNLABELLED_RGB not in map(tuple, colours.tolist())
        if depth == "truecolor":  # any two at least as far apart as orange from yellow
            gaps = np.linalg.norm(colours[:, None] - colours[None], axis=-1)
            assert gaps[~np.eye(10, dtype=bool)].min() > 60
    assert len(label_colours(3, "256")) == 3
    many = label_colours(40, "truecolor")  # past ten: a ramp, as no set of hues stays apart
    assert len(many) == 40 and np.all(np.diff(_luminance(many)) >= 0)


def test_nan_and_inf_have_their_own_colours():
    rgb = colormaps.to_rgb(
        np.array([[0.0, np.nan, np.inf, 1.0]]), Scale(0.0, 1.0), None, "truecolor"
    )
    assert tuple(rgb[0, 1]) == colormaps.NAN_RGB
    assert tuple(rgb[0, 2]) == colormaps.INF_RGB
    assert tuple(rgb[0, 0]) != tuple(rgb[0, 3])


def test_signed_scale_puts_zero_in_the_middle():
    scale = Scale.of(np.array([-1.0, 4.0]), signed=True)
    assert (scale.lo, scale.hi) == (-4.0, 4.0)
    assert scale.unit(np.array([0.0]))[0] == 0.5


def test_small_array_is_drawn_as_whole_pixel_squares():
    values = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    h, w = raster.integer_fit(32, 32, 80, 100)
    assert (h, w) == (64, 64)  # two pixels per value both ways: square, crisp
    pixels = raster.resample(colormaps.to_rgb(values, Scale.of(values), None, "truecolor"), h, w)
    blocks = pixels.reshape(32, 2, 32, 2, 3)
    assert (blocks == blocks[:, :1, :, :1]).all()  # every value one uniform 2×2 block


def test_an_odd_last_pixel_row_leaves_the_background_below_it():
    rgb = np.full((3, 2, 3), 200, np.uint8)
    first, last = raster.half_block_strips(rgb)
    assert all(seg.style.bgcolor == Color.from_rgb(200, 200, 200) for seg in first)
    assert all(seg.style.bgcolor is None for seg in last)  # not a black half row


def test_a_run_of_equal_cells_is_one_segment_and_every_cell_stays():
    left, right = (10, 20, 30), (200, 100, 0)
    rgb = np.zeros((2, 12, 3), np.uint8)
    rgb[:, :5], rgb[:, 5:] = left, right  # a 2-value map upscaled to 5 and 7 cells
    (strip,) = raster.half_block_strips(rgb)
    assert [(seg.text, seg.style.color.triplet) for seg in strip] == [
        ("▀" * 5, left),
        ("▀" * 7, right),
    ]
    assert strip.cell_length == 12
    assert [len(row) for row in raster.half_block_cells(rgb)] == [12]  # per cell, for texts


def test_large_array_shrinks_by_one_factor_keeping_its_aspect():
    assert raster.integer_fit(256, 128, 40, 200) == (40, 20)


class _One(App):
    def __init__(self, picture: Picture) -> None:
        super().__init__()
        self.picture = picture
        self.picked = []

    def compose(self) -> ComposeResult:
        yield self.picture

    def on_picture_picked(self, event: Picture.Picked) -> None:
        self.picked.append((event.row, event.col))


async def test_labels_and_legend_are_drawn_beside_the_values():
    picture = Picture(max_rows=8)
    app = _One(picture)
    async with app.run_test(size=(60, 16)) as pilot:
        values = np.array([[0.0, 1.0, 2.0], [3.0, 4.0, np.nan]])
        picture.show_values(values, y_labels=["cat", "dog"], x_labels=["a", "b", "c"])
        await pilot.pause()
        lines = [
            "".join(s.text for s in picture.query_one(".ylabels").render_line(y)) for y in range(4)
        ]
        assert "cat" in lines[0] and "dog" in "".join(lines)
        legend = picture.query_one(".legend").text.plain
        assert legend.startswith("0 ") and "4" in legend and "NaN" in legend
        assert "a" in str(picture.query_one(".xlabels").render())


async def test_tokens_in_brackets_are_labels_not_markup():
    """[CLS] and [PAD] vanished as markup tags, and a closing one such as [/INST] raised
    MarkupError and ended the viewer."""
    picture = Picture(max_rows=8)
    app = _One(picture)
    async with app.run_test(size=(60, 16)) as pilot:
        tokens = ["[CLS]", "[/INST]", "p1"]
        picture.show_values(np.eye(3), y_labels=tokens, x_labels=tokens)
        await pilot.pause()
        rows = "".join(
            "".join(s.text for s in picture.query_one(".ylabels").render_line(y)) for y in range(6)
        )
        assert "[CLS]" in rows and "[/INST]" in rows
        assert "[CLS]" in str(picture.query_one(".xlabels").render())


async def test_click_names_the_value_under_the_pointer():
    picture = Picture(max_rows=8, legend=False)
    app = _One(picture)
    async with app.run_test(size=(40, 12)) as pilot:
        picture.show_values(np.arange(4, dtype=np.float32).reshape(2, 2))
        await pilot.pause()
        assert picture.value_at(0, 0) == (0, 0)
        cells = picture.query_one(raster_cells())
        await pilot.click(cells, offset=(cells.size.width - 1, cells.size.height - 1))
        await pilot.pause()
        assert app.picked == [(1, 1)]


def raster_cells():
    from tvis.tui.picture.widget import _Cells

    return _Cells


async def test_masked_values_are_drawn_grey_and_named_in_the_legend():
    picture = Picture(max_rows=8)
    app = _One(picture)
    async with app.run_test(size=(40, 12)) as pilot:
        values = np.array([[0.5, 0.0], [0.25, 0.75]], dtype=np.float32)
        picture.show_values(values, masked=np.triu(np.ones((2, 2), bool), 1))
        await pilot.pause()
        cells = picture.query_one(raster_cells())
        (top_right,) = [s for s in cells.render_line(0)][-1:]
        grey = colormaps.masked_rgb(depth_of(app.console.color_system))
        assert top_right.style.color.triplet == ColorTriplet(*grey)
        assert "masked" in picture.query_one(".legend").text.plain


async def test_a_place_on_a_shrunk_photo_keeps_its_whole_frame():
    """A cell of a grid laid over a photo (a place on a layer's map) is framed after the
    photo is scaled to its cells: shrinking never drops an edge of the frame."""
    picture = Picture(max_rows=6, legend=False)
    app = _One(picture)
    async with app.run_test(size=(40, 12)) as pilot:
        picture.set_cursor((3, 3), grid=(4, 4))  # the bottom-right quarter of a 48×48 photo
        picture.show_rgb(np.zeros((48, 48, 3), dtype=np.uint8))
        await pilot.pause()
        strips = picture.query_one(raster_cells()).strips
        white = ColorTriplet(255, 255, 255)
        # Half blocks: a cell's foreground is its top pixel (▀), its background the bottom.
        pixels = [
            [
                (seg.style.color.triplet, seg.style.bgcolor.triplet)
                for seg in strip
                for _ in range(seg.cell_length)
            ]
            for strip in strips
        ]
        bottom = [bg for bg in (row[-1][1] for row in pixels)]
        assert bottom[-1] == white  # the frame's bottom edge is on the last pixel row
        assert pixels[0][-1] != (white, white)  # and the top-left of the photo is untouched


async def test_a_notice_with_brackets_is_shown_as_written(tmp_path):
    """Notices carry paths, tokens and agent errors; as markup, "[/INST]" raised MarkupError."""
    from textual.widgets._toast import Toast
    from viewer_support import make_app

    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        app.notify("no token [/INST] in [CLS]")
        app.screen.notify("from a widget: [/x]")
        await pilot.pause()
        shown = [Toast(n).render().plain for n in app._notifications]
        assert shown == ["no token [/INST] in [CLS]", "from a widget: [/x]"]


async def test_a_cursor_move_draws_the_cells_a_full_drawing_would():
    """A cursor move redraws only the outline's cell rows, on the picture scaled before:
    its cells are those of the picture drawn anew under the same cursor, and the scaled
    picture is not redone."""
    picture = Picture(max_rows=12)
    app = _One(picture)
    async with app.run_test(size=(60, 16)) as pilot:
        values = np.random.default_rng(0).standard_normal((7, 9)).astype(np.float32)
        picture.show_values(values)
        await pilot.pause()
        cells = picture.query_one("_Cells")
        scaled = picture._scaled
        for cursor in [(0, 0), (3, 4), (6, 8), (3, 4), (5, 1)]:
            picture.set_cursor(cursor)
            moved = [list(strip) for strip in cells.strips]
            assert picture._scaled is scaled  # not scaled again
            picture._draw()  # the same cursor, drawn in full
            assert moved == [list(strip) for strip in cells.strips], cursor
            scaled = picture._scaled
