"""The Loss and Weights pages over example recordings, driven with Pilot, and both pages in
a real 80×24 terminal (tmux): a classifier's confusion matrix, a language model's tokens
coloured by loss with the text its own decoder gives, a ViT's patch kernels as a grid."""

from __future__ import annotations

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from support import EXAMPLES, TVIS, record_example, record_script
from viewer_support import goto_page, make_app, open_explore, screen_text, wait_for

from tvis.tui import fmt
from tvis.tui.pages.loss import LossView, WorstTable
from tvis.tui.pages.weights import AllLayers, LayerView, ParamList, Thumb, WeightsView
from tvis.tui.picture import Picture, Scale
from tvis.tui.picture.sixel import SixelCanvas
from tvis.tui.picture.widget import depth_of, value_cells
from tvis.tui.widgets.thumb_grid import PICTURE_ROWS, THUMB_PX, ThumbGrid


@pytest.fixture(scope="module")
def text_lm(tmp_path_factory) -> Path:
    return record_example(tmp_path_factory.mktemp("text lm runs"), "text_lm", "--steps", "2")


@pytest.fixture(scope="module")
def vit(tmp_path_factory) -> Path:
    return record_example(tmp_path_factory.mktemp("vit runs"), "vit", "--steps", "2")


def _script_tokenizer():
    path = EXAMPLES / "text_lm" / "train.py"
    spec = importlib.util.spec_from_file_location("text_lm_for_tui", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module.CharTokenizer((path.parent / "data.txt").read_text(encoding="utf-8"))


async def _open_page(pilot, mode: str):
    app = pilot.app
    await open_explore(pilot)
    await pilot.press(str([p.id for p in app.pages()].index(mode) + 1))  # its number key
    await wait_for(pilot, lambda: app.current_mode == mode, f"the {mode} page")
    return app.screen


async def test_loss_page_of_a_classifier_shows_the_confusion_matrix(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await _open_page(pilot, "loss")
        view = page.query_one(LossView)
        await wait_for(pilot, lambda: view.samples and view.detail, "the confusion matrix")
        picture = view.query_one("#loss-picture", Picture)
        assert picture.has_data
        run = app.run_info
        sizes = [b["batch_size"] for b in run["batches"] if not b["light"]]
        assert int(np.asarray(view.detail["confusion"]["matrix"]).sum()) == sum(sizes)
        text = screen_text(app)
        assert "rows: target · columns: predicted" in text and "✓ matches" in text
        assert "called at train.py:" in text
        await pilot.press("shift+right")
        assert view.cell == (0, 1)
        await pilot.press("b")
        assert "batch 0," in screen_text(app)
        assert app.internal_errors == []


async def test_loss_page_lists_the_samples_of_a_chosen_confusion_cell(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await _open_page(pilot, "loss")
        view = page.query_one(LossView)
        await wait_for(pilot, lambda: view.samples, "the batch's samples")
        first = view.samples[0]
        classes = view.detail["confusion"]["classes"]
        view.cell = (classes.index(first["target"]), classes.index(first["pred"]))
        view.draw_confusion()
        note = str(view.query_one("#loss-note").render())
        listed = note.split("samples of batch 0: ")[1].split(", ")
        assert str(first["sample"]) in listed
        expected = [
            r["sample"]
            for r in view.samples
            if (r["target"], r["pred"]) == (first["target"], first["pred"])
        ]
        assert [int(s) for s in listed] == expected


async def test_loss_page_of_a_language_model_colours_tokens_with_the_scripts_text(text_lm):
    tokenizer = _script_tokenizer()
    app = make_app(text_lm)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await _open_page(pilot, "loss")
        view = page.query_one(LossView)
        await wait_for(pilot, lambda: view.tokens, "the tokens of sample 0")
        # Follow the shortest sequence: it has padding to strike out.
        samples = app.data.call("samples", run=app.run_name, batch=0)["rows"]
        shortest = min(samples, key=lambda r: r["tokens"])["sample"]
        app.sample = shortest
        await wait_for(
            pilot, lambda: view.tokens and view.tokens["sample"] == shortest, "the short sample"
        )
        rows = view.tokens["rows"]
        ids = [r["target"] for r in rows if not r["pad"]]
        assert view.tokens["text"]["target"] == tokenizer.decode(ids)
        kind = view.query_one("#loss-kind").render()
        spans = [str(s.style) for s in kind.spans]
        assert any("strike" in s for s in spans), "padding is struck out"
        assert sum("on #" in s or "on rgb" in s for s in spans) >= len(ids)
        text = screen_text(app)
        assert tokenizer.decode(ids)[:40] in text.replace("\n", "")
        assert "ignore_index=0" in text and "✓ matches" in text
        await pilot.press("l")
        assert view.token_cursor == 1 and "position 1:" in str(
            view.query_one("#loss-note").render()
        )
        assert app.internal_errors == []


async def test_explore_samples_table_shows_decoded_text_of_a_language_model(text_lm):
    tokenizer = _script_tokenizer()
    app = make_app(text_lm)
    async with app.run_test(size=(160, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press("a")
        table = await wait_for(
            pilot,
            lambda: app.screen.query("SampleTable") and app.screen.query_one("SampleTable"),
            "the samples table",
        )
        await wait_for(pilot, lambda: table.row_count, "the samples rows")
        assert table.per_token
        labels = [c.label for c in table.columns]
        assert "target text" in labels and "predicted text" in labels
        row = app.data.call("samples", run=app.run_name, batch=0)["rows"][0]
        tokens = app.data.call("sample_table", run=app.run_name, batch=0, sample=0)["rows"]
        assert row["target_text"] == tokenizer.decode([r["target"] for r in tokens if not r["pad"]])
        assert row["target_text"][:30] in screen_text(app)


async def _param_list(pilot) -> tuple:
    """The Weights page once its parameter list is filled: (page, list)."""
    page = await _open_page(pilot, "weights")
    table = page.query_one(ParamList)
    await wait_for(pilot, lambda: table.row_count, "the parameter list")
    return page, table


async def _choose(pilot, page, table, name: str) -> LayerView:
    """Parameter ``name`` chosen in the list and drawn: the layer view."""
    table.focus()
    table.move_cursor(row=[p["name"] for p in table.params].index(name))
    layer = page.query_one(LayerView)
    await wait_for(pilot, lambda: (layer.shown or {}).get("name") == name, name)
    return layer


async def test_weights_page_of_a_vit_shows_patch_kernels_as_a_filter_by_channel_grid(vit):
    app = make_app(vit)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        layer = await _choose(pilot, page, table, "patch_embed.proj.weight")
        grid = layer.shown
        assert grid["shape"] == [64, 3, 4, 4] and grid["channels"] == 3
        assert grid["array"].shape == (grid["filters"], 3, 4, 4) and grid["filters"] > 1
        assert layer.query_one(Picture).has_data
        assert "‖Δw‖/‖w‖" in screen_text(app)
        note = str(layer.query_one(Picture).query_one(".note").render())
        assert "input channels 0–2 of 3" in " ".join(note.split())
        await pilot.press("greater_than_sign")
        await wait_for(
            pilot,
            lambda: (layer.shown or {}).get("first_filter") == grid["filters"],
            "next filters",
        )
        await pilot.press("w")
        await wait_for(pilot, lambda: "gradient dL/dw" in screen_text(app), "the gradient")
        # a gradient is stored rounded (weights and Δw are not), and its stats say so
        rounded = "values stored to 11 significant bits; run with --exact to keep them whole"

        def stats_text() -> str:
            return " ".join(str(layer.query_one("#layer-stats").render()).split())

        await wait_for(pilot, lambda: rounded in stats_text(), "the rounded gradient's note")
        await pilot.press("n")
        await wait_for(pilot, lambda: "step 1 (2 of 2)" in screen_text(app), "the next step")
        await pilot.press("w")
        await wait_for(pilot, lambda: "update Δw" in screen_text(app), "the update")
        await wait_for(
            pilot,
            lambda: "norm" in stats_text() and rounded not in stats_text(),
            "the update's statistics, without the note (Δw is exact)",
        )
        assert app.internal_errors == []


@pytest.mark.parametrize("image_mode", ["sixel", "halfcell"])
async def test_weights_page_built_ahead_fits_the_kernel_grid_to_its_pane_once_laid_out(
    run_dir, image_mode
):
    """The page built ahead, hidden, asks for its picture before it is laid out (at no
    size); once laid out at 200×60 the first conv's 16 filters × 3 input channels all fit
    the pane (45 rows, 120 columns), not the one channel of 7 filters that no room held."""
    app = make_app(run_dir, image_mode)
    async with app.run_test(size=(200, 60)) as pilot:
        await wait_for(
            pilot,
            lambda: "weights" in app.ahead.built and not app.ahead._unlaid,
            "the Weights page built ahead and laid out",
            timeout=40,
        )
        await pilot.press("4")
        layer = app.screen.query_one(LayerView)
        await wait_for(
            pilot, lambda: (layer.shown or {}).get("name") == "features.0.0.weight", "the grid"
        )
        await wait_for(pilot, lambda: layer.shown["channels"] == 3, "every input channel")
        assert layer.shown["filters"] == 16 and layer.shown["shape"] == [16, 3, 3, 3]
        note = " ".join(str(layer.query_one(Picture).query_one(".note").render()).split())
        assert "filters 0–15 of 16" in note and "input channels 0–2 of 3" in note
        assert app.internal_errors == []


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_kernel_grid_is_cut_to_the_pane_it_is_drawn_in(run_dir, size):
    """The grid's filters and channels are those that fit the pane as laid out: asked
    before the page had its size (or at a size it had for a moment, before its tab bar
    and status line), it was cut to another pane — at 80×24 seven filters of one channel
    in a 4-row picture — and is asked again at this one."""
    app = make_app(run_dir)
    async with app.run_test(size=size) as pilot:
        page, _ = await _param_list(pilot)
        layer = page.query_one(LayerView)
        await wait_for(pilot, lambda: (layer.shown or {}).get("kernel") is not None, "a grid")
        await pilot.pause(0.3)
        param = layer.param or {}
        assert len(param.get("shape") or []) == 4
        _, fitted = layer.picture_request(param, layer.step, layer.which)
        grid = layer.shown
        assert (grid["filters"], grid["channels"]) == (fitted["filters"], fitted["channels"])
        picture = layer.query_one(Picture)
        kernel = min(8, param["shape"][2])
        # Filters down, one kernel and a gap each, in half-block rows of two pixels.
        assert grid["filters"] * (kernel + 1) - 1 <= 2 * picture.max_rows


async def test_weights_page_draws_a_long_vector_as_bars_and_says_how_it_was_reduced(vit):
    app = make_app(vit)
    async with app.run_test(size=(100, 30)) as pilot:
        page, table = await _param_list(pilot)
        vectors = [p for p in table.params if len(p["shape"]) == 1]
        longest = max(vectors, key=lambda p: p["shape"][0])
        layer = await _choose(pilot, page, table, longest["name"])
        bars = layer.shown["array"].shape[1]
        assert bars < longest["shape"][0]  # narrower than the vector: block means
        text = " ".join(screen_text(app).split())
        assert f"{longest['shape'][0]} values as bars (shown as {bars} block means)" in text


LONG_NAMES = """
import torch
from torch import nn

class Stage(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.downsample = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.BatchNorm2d(c))

    def forward(self, x):
        return self.downsample(x)

torch.manual_seed(0)
model = nn.Sequential()
model.add_module("backbone_stage_one", Stage(128))
model.add_module("head", nn.Sequential(nn.Flatten(), nn.Linear(128 * 4 * 4, 3)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = nn.functional.cross_entropy(model(torch.randn(2, 128, 4, 4)), torch.tensor([0, 2]))
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


async def test_weights_list_keeps_the_update_ratio_in_view_and_names_their_ends(tmp_path):
    run = record_script(tmp_path, LONG_NAMES, "--steps", "2")
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        name = "backbone_stage_one.downsample.0.weight"  # 128×128×3×3
        ratio = fmt.num(next(p for p in table.params if p["name"] == name)["norms"]["ratio"])
        shown = table.shown_name(name)
        row = next(line for line in screen_text(app).splitlines() if shown in line)
        assert ratio in row  # ‖Δw‖/‖w‖, the column that matters most, is not cut off
        assert shown == "…" + name[1 - len(shown) :]  # a path keeps its specific end
        await pilot.resize_terminal(160, 40)  # room for longer names beside the picture
        await wait_for(pilot, lambda: len(table.shown_name(name)) > len(shown), "more")


async def test_weights_names_take_the_room_the_numbers_leave(vit):
    app = make_app(vit)
    async with app.run_test(size=(120, 40)) as pilot:
        _, table = await _param_list(pilot)
        width = table.size.width
        header = "".join(s.text for s in table.render_line(0)).rstrip()
        names = [str(p["name"]) for p in table.params]
        clipped = [n for n in names if table.shown_name(n) != n]
        # a ViT's 2-D shapes leave more than a 4-D shape would: names are cut only where
        # the list is full (they were cut at 18 of 62 cells with 9 cells blank at the right)
        assert not clipped or len(header) >= width - 3, (clipped, header, width)
        assert max(map(len, map(table.shown_name, names))) > 18


async def _all_layers(pilot) -> ThumbGrid:
    """The Weights page's list filled, then `a`: its grid of thumbnails."""
    page, _ = await _param_list(pilot)
    await pilot.press("a")
    grid = page.query_one(WeightsView).grid
    assert isinstance(grid, ThumbGrid)  # half-block cells: one line widget
    await wait_for(pilot, lambda: grid.display and grid.loaded_count, "all layers")
    return grid


def _cells(strip) -> list[tuple]:
    """A line cell by cell: its character and colours (segments may be cut anywhere)."""
    return [(c, s.style.color, s.style.bgcolor) for s in strip for c in s.text]


def _thumb_box(grid: ThumbGrid, index: int) -> tuple[int, int, int]:
    """Thumbnail ``index``'s first line in the grid's content, its first and end column."""
    row, column = divmod(index, grid.PER_ROW)
    edges = grid.column_edges(grid.drawn_width, grid.row_size(row))
    return row * grid.ROW_HEIGHT, edges[column], edges[column + 1]


def _grid_line(grid: ThumbGrid, line: int):
    """Line ``line`` of the grid's content, as the grid draws it where it is scrolled."""
    return grid.render_line(line - int(grid.scroll_y))


async def test_weights_all_layers_loads_thumbnails_as_they_scroll_into_view(vit):
    app = make_app(vit)
    async with app.run_test(size=(120, 30)) as pilot:
        page, _ = await _param_list(pilot)
        grid = page.query_one(WeightsView).grid
        page.action_toggle_all()  # `a`, and End at once, before the grid is laid out
        await pilot.pause(0)
        grid.focus()
        await pilot.press("end")
        last = len(grid.params) - 1
        await wait_for(
            pilot, lambda: grid._thumbs[last].values is not None, "the last thumbnail, at the end"
        )
        assert grid.scroll_y == grid.max_scroll_y > 0
        # Only the thumbnails in view ask for their pictures: a model of 20,000 parameters
        # asks for a screenful.
        in_view = -(-grid.size.height // grid.ROW_HEIGHT) + 1
        assert 0 < grid.loaded_count <= 2 * in_view * grid.PER_ROW < len(grid.params)
        assert not grid._thumbs[len(grid.params) // 2].asked  # scrolled past, never shown
        # One widget, however many parameters: no thumbnail is a widget of its own.
        assert not grid.children and not page.query(Thumb)
        await wait_for(
            pilot,
            lambda: all(t.values is not None for t in grid._thumbs if t.asked),
            "the thumbnails' pictures",
        )
        assert app.internal_errors == []


async def test_weights_all_layers_in_sixel_keeps_a_widget_per_thumbnail(run_dir):
    """A sixel picture is placed by the widget that holds its cells: there the thumbnails
    stay widgets, each with its own graphic."""
    app = make_app(run_dir, "sixel")
    async with app.run_test(size=(120, 40)) as pilot:
        page, _ = await _param_list(pilot)
        await pilot.press("a")
        grid = page.query_one(WeightsView).grid
        assert isinstance(grid, AllLayers)
        await wait_for(pilot, lambda: grid.display and grid.loaded_count, "all layers")
        await wait_for(
            pilot,
            lambda: all(t.query_one(Picture).has_data for t in grid.query(Thumb) if t.loaded),
            "the thumbnails' pictures",
        )
        canvases = [t.query_one(SixelCanvas) for t in grid.query(Thumb) if t.loaded]
        assert canvases and all(c.pixels is not None for c in canvases)
        assert app.internal_errors == []


def _assert_thumbnail(app, grid: ThumbGrid, index: int, text: str) -> None:
    """Thumbnail ``index`` shows its parameter's name and picture in its column."""
    depth = depth_of(app.console.color_system)
    width, height = THUMB_PX
    param = grid.params[index]
    top, x0, x1 = _thumb_box(grid, index)
    # Its name, bold, one cell in: the name a user reads on screen.
    name = fmt.clip(str(param["name"]), 30)[: x1 - x0 - 2]
    title = [(c, s.style.bold) for s in _grid_line(grid, top) for c in s.text]
    assert title[x0 + 1 : x0 + 1 + len(name)] == [(c, True) for c in name]
    assert name in text
    # Its picture: the agent's reply in half blocks, cell for cell as ``Picture``
    # draws values (``value_cells``), below the name, inside its column.
    reply = app.data.call(
        "matrix",
        run=app.run_name,
        step=grid.step,
        name=param["name"],
        which="weight",
        width=width,
        height=height,
    )
    array = np.asarray(reply["array"], dtype=np.float32)
    array = array.reshape(1, -1) if array.ndim < 2 else array
    expected = value_cells(array, Scale.of(array, signed=True), x1 - x0 - 2, PICTURE_ROWS, depth)
    assert expected and len(expected) <= PICTURE_ROWS
    for r, strip in enumerate(expected):
        drawn = _cells(_grid_line(grid, top + 1 + r))
        cells = _cells(strip.apply_style(grid.rich_style))  # on the grid's colours
        assert drawn[x0 + 1 : x0 + 1 + len(cells)] == cells, (param["name"], r)
        assert len(cells) <= x1 - x0 - 2  # never into the next thumbnail


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 60)])
async def test_weights_all_layers_draws_each_thumbnail_as_a_picture_does_within_the_pane(vit, size):
    app = make_app(vit)
    async with app.run_test(size=size) as pilot:
        grid = await _all_layers(pilot)
        shown = min(len(grid.params), grid.PER_ROW * 2)
        await wait_for(
            pilot,
            lambda: all(grid._thumbs[i].values is not None for i in range(shown)),
            "the first thumbnails' pictures",
        )
        await pilot.pause()
        # The grid fits its pane: inside the screen, beside or under the list, each line
        # exactly as wide as the grid, the thumbnails sharing it out.
        screen = app.screen.region
        assert screen.contains_region(grid.region) and grid.size.height >= grid.ROW_HEIGHT
        edges = grid.column_edges(grid.drawn_width, grid.PER_ROW)
        # (left of the scrollbar: a thumbnail under it lost its right end)
        left = grid.scrollable_content_region.width
        assert edges[0] == 0 and edges[-1] == left
        overflows = grid.row_count * grid.ROW_HEIGHT > grid.size.height
        assert (left < grid.size.width) == overflows  # a scrollbar where it scrolls
        for y in range(grid.size.height):
            assert grid.render_line(y).cell_length == grid.drawn_width
        text = screen_text(app)
        for index in range(shown):
            _assert_thumbnail(app, grid, index, text)
        assert app.internal_errors == []


async def test_weights_all_layers_last_row_shares_the_width_among_its_thumbnails(run_dir):
    """11 parameters: a last row of two, each half the width, as the thumbnail widgets
    shared it (and as sixel and kitty still do)."""
    app = make_app(run_dir)
    async with app.run_test(size=(200, 60)) as pilot:
        grid = await _all_layers(pilot)
        assert len(grid.params) == 11 and grid.row_size(3) == 2
        await wait_for(
            pilot, lambda: all(t.values is not None for t in grid._thumbs), "every thumbnail"
        )
        await pilot.pause()
        top, x0, x1 = _thumb_box(grid, 10)
        assert (x0, x1) == (grid.drawn_width // 2, grid.drawn_width)
        text = screen_text(app)
        for index in range(len(grid.params)):
            _assert_thumbnail(app, grid, index, text)
        assert app.internal_errors == []


async def test_weights_all_layers_keys_scroll_and_redraw_the_thumbnails(vit):
    app = make_app(vit)
    async with app.run_test(size=(120, 30)) as pilot:
        grid = await _all_layers(pilot)
        page = app.screen
        grid.focus()
        assert grid.scroll_y == 0
        await pilot.press("pagedown")
        await wait_for(pilot, lambda: grid.scroll_y == grid.size.height, "a page down")
        first = grid.visible_rows().start * grid.PER_ROW
        await wait_for(pilot, lambda: grid._thumbs[first].values is not None, "its pictures")
        await pilot.press("down")
        await wait_for(pilot, lambda: grid.scroll_y == grid.size.height + 1, "a line down")
        # `w` shows the gradients where the grid is: the thumbnails in view ask again.
        top = grid.scroll_y
        shown = grid.visible_rows().start * grid.PER_ROW
        before = grid._thumbs[shown].values
        await pilot.press("w")
        await wait_for(pilot, lambda: grid.which == "grad", "the gradients")
        await wait_for(pilot, lambda: grid._thumbs[shown].values is not None, "a gradient")
        assert grid.scroll_y == top and not grid._thumbs[0].asked
        assert not np.array_equal(grid._thumbs[shown].values, before)
        await pilot.press("home")
        await wait_for(pilot, lambda: grid.scroll_y == 0, "the top")
        await wait_for(pilot, lambda: grid._thumbs[0].values is not None, "the first, again")
        await pilot.press("a")
        layer = page.query_one(LayerView)
        await wait_for(pilot, lambda: layer.display and not grid.display, "one layer again")
        assert app.internal_errors == []


async def test_weights_list_sorts_by_its_headed_columns(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page, table = await _param_list(pilot)
        for _ in range(4):  # parameter → shape → ‖w‖ → ‖grad‖ → ‖Δw‖/‖w‖
            await pilot.press("o")
        ratios = [(p.get("norms") or {}).get("ratio") for p in table.params]
        finite = [r for r in ratios if r is not None]
        assert finite == sorted(finite, reverse=True) and ratios[: len(finite)] == finite
        assert "sorted by ‖Δw‖/‖w‖ ↓" in screen_text(app)


async def _ends(pilot, table) -> None:
    """G goes to the list's last row and g to its first, and neither touches the app's
    value/gradient (bound to g outside lists)."""
    table.focus()
    await pilot.press("G")
    assert table.cursor_row == table.row_count - 1 > 0
    await pilot.press("g")
    assert table.cursor_row == 0
    assert pilot.app.show_grad is False


async def test_g_and_shift_g_go_to_the_ends_of_the_weights_and_loss_lists(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        _, table = await _param_list(pilot)
        await _ends(pilot, table)
        await pilot.press(str([p.id for p in app.pages()].index("loss") + 1))
        await wait_for(pilot, lambda: app.current_mode == "loss", "the Loss page")
        worst = app.screen.query_one(WorstTable)
        await wait_for(pilot, lambda: worst.row_count > 1, "the worst samples")
        await _ends(pilot, worst)


async def test_the_loss_lists_cursor_is_on_the_sample_the_detail_shows(run_dir):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        worst = app.screen.query_one(WorstTable)
        await wait_for(pilot, lambda: worst.row_count > 1, "the worst samples")
        assert worst.rows[worst.cursor_row]["sample"] == app.sample
        for _ in range(2):  # the next samples followed: the cursor goes with them
            await pilot.press("right_square_bracket")
            await wait_for(
                pilot, lambda: worst.rows[worst.cursor_row]["sample"] == app.sample, "the cursor"
            )
        assert worst.cursor_row != 0  # not left at the top, where the worst sample is


async def test_page_hints_follow_a_remapped_key(run_dir):
    keymap = {"weights.which": "x", "weights.step_next": "ctrl+n", "app.batch_next": "b"}
    app = make_app(run_dir, keymap=keymap)
    async with app.run_test(size=(160, 40)) as pilot:
        await _param_list(pilot)
        text = screen_text(app)
        assert "x weight/grad/Δw" in text and "^n/p step" in text
        assert "w weight/grad/Δw" not in text
        await pilot.press(str([p.id for p in app.pages()].index("loss") + 1))
        await wait_for(pilot, lambda: ",/b batch" in screen_text(app), "the Loss hints")


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_loss_and_weights_pages_read_at_80x24_in_tmux(run_dir):
    socket = f"tvis-lw-{os.getpid()}-{time.monotonic_ns()}"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}

    def tmux(*args: str) -> str:
        return subprocess.run(
            ["tmux", "-L", socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
            env=env,
        ).stdout

    def wait(text: str) -> str:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            screen = tmux("capture-pane", "-p", "-t", "main")
            if text in screen:
                return screen
            time.sleep(0.1)
        raise AssertionError(f"{text!r} never appeared:\n{screen}")

    command = f"{TVIS} tui {shlex.quote(str(run_dir))}; echo TVIS-EXIT=$?; sleep 600"
    tmux("new-session", "-d", "-s", "main", "-x", "80", "-y", "24", command)
    try:
        wait("1 Replay")  # the viewer opens on Replay; Loss is page 3, Weights page 4
        wait("paused")
        tmux("send-keys", "-t", "main", "3")
        for text in ("✓ matches", "F.cross_entropy", "p(target)", "confusion"):
            wait(text)
        tmux("send-keys", "-t", "main", "4")
        screen = wait("‖Δw‖/‖w‖")
        assert "features.0.0.weight" in screen and "filters 0–" in wait("filters 0–")
        tmux("send-keys", "-t", "main", "q")
        screen = wait("TVIS-EXIT=0")
        assert "Traceback" not in screen
    finally:
        subprocess.run(["tmux", "-L", socket, "kill-server"], capture_output=True, timeout=30)
