"""Explore's other panes — source, layers, timeline, step, samples — and the layouts."""

from __future__ import annotations

from pathlib import Path

import pytest
from rich.style import Style
from rich.text import Text
from viewer_support import count_requests, make_app, node_named, open_explore, screen_text, wait_for

from tvis.tui import fmt
from tvis.tui.colors import phase_label
from tvis.tui.widgets import layers_table
from tvis.tui.widgets.inspector_lines import TextBlock
from tvis.tui.widgets.layers_table import LayersTable
from tvis.tui.widgets.samples_view import SampleTable
from tvis.tui.widgets.source_view import SourceView, annotation_text
from tvis.tui.widgets.step_view import ParamTable
from tvis.tui.widgets.timeline import Timeline, fit_label


async def test_d_jumps_to_the_definition_in_the_annotated_source(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("d")  # ShapesCNN is defined in model.py
        view = page.query_one(SourceView)
        await wait_for(pilot, lambda: view.file == "model.py", "model.py shown")
        assert view.cursor + 1 == page.selection.row["def"][1]
        assert view.lines[view.cursor].plain.strip() == "def forward(self, x):"
        assert "32×64" in screen_text(app)  # an executed line's annotation


async def _model_source_annotated(pilot, page) -> SourceView:
    """`d` on the opening call (ShapesCNN): its file, model.py, shown with the executed
    lines annotated."""
    await pilot.press("d")
    view = page.query_one(SourceView)
    await wait_for(
        pilot, lambda: view.file == "model.py" and view.annotations, "annotated model.py"
    )
    return view


async def test_enter_on_an_annotated_line_selects_its_call(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        view = await _model_source_annotated(pilot, page)
        line = min(view.annotations)
        view.move_to(line - 1)
        call = view.annotations[line][0]["call"]
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: page.selection and page.selection.call == call,
            "the line's call selected",
        )
        assert getattr(page.calls.call_tree.cursor_node.data.call, "id", None) == call


async def test_source_lines_end_beside_the_scrollbar_not_under_it(run_dir: Path):
    """An annotated line's shape, name and time end at the view's right edge, left of the
    vertical scrollbar: drawn the widget's whole width, their last two cells (the time's
    unit) were under it. Lines are cut, never scrolled sideways."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        view = await _model_source_annotated(pilot, page)
        await pilot.pause(0.2)
        assert view.show_vertical_scrollbar and not view.show_horizontal_scrollbar
        width = view.scrollable_size.width
        assert width == view.size.width - view.styles.scrollbar_size_vertical
        line = min(view.annotations)
        view.move_to(line - 1)
        strip = view.render_line(line - 1 - int(view.scroll_y))
        assert strip.cell_length == width
        assert strip.text.rstrip().endswith("s")  # µs or ms: the time's unit is on screen


async def test_a_table_taller_than_its_pane_draws_its_columns_beside_its_scrollbar(
    lm_run: Path,
):
    """The language model's samples at 80×24 overflow the pane: their lines are drawn in the
    width the vertical scrollbar leaves, so no cell is under it (drawn the whole width, the
    two cells at the right edge were hidden at every sideways scroll)."""
    app = make_app(lm_run)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("a")
        table = page.query_one(SampleTable)
        await wait_for(pilot, lambda: table.row_count and table.size.width, "the samples")
        await pilot.pause(0.3)
        assert table.show_vertical_scrollbar
        width = table.scrollable_size.width
        for y in range(table.size.height):
            assert table.render_line(y).cell_length <= width, y


async def test_layers_table_sorts_by_column_and_enter_selects_the_call(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("y")
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count > 10 and table.row(0), "layer rows")
        assert app.focused is table
        assert table.row(0)["layer"] == 1  # numbered among the layers, data calls left out
        assert "output" in screen_text(app) and "1 " in screen_text(app)
        assert f"{table.row_count} layers · call order · o / O sort" in screen_text(app)
        while table.sort_column.sort != "std":
            await pilot.press("o")
        await wait_for(
            pilot,
            lambda: _column(table, "std") == sorted(_column(table, "std"), reverse=True),
            "rows sorted by σ, largest first",
        )
        assert "σ ▼" in screen_text(app)
        caption = f"{table.row_count} layers · σ ▼ · o / O sort"
        await wait_for(pilot, lambda: caption in screen_text(app), "the caption naming the sort")
        await pilot.press("O")
        await wait_for(
            pilot, lambda: _column(table, "std") == sorted(_column(table, "std")), "σ ascending"
        )
        await pilot.press("G")
        assert table.cursor == table.row_count - 1
        await pilot.press("g")
        first = table.row(0)
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: getattr(page.calls.call_tree.cursor_node.data.call, "id", None) == first["id"],
            "the row's call revealed in the tree",
        )


async def test_the_layers_table_opens_on_the_selected_call_even_beyond_its_first_page(
    run_dir: Path, monkeypatch
):
    # Pages of 4 rows: the selected head is then found by the agent (``locate``), not on
    # the first page the table asks for.
    monkeypatch.setattr(layers_table, "PAGE", 4)
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        page.calls.call_tree.move_cursor(node_named(page, "head"))
        await wait_for(
            pilot, lambda: page.selection and page.selection.row.get("name") == "head", "head"
        )
        await pilot.press("y")
        table = page.query_one(LayersTable)
        on_cursor = lambda: table.row(table.cursor) or {}  # noqa: E731
        await wait_for(pilot, lambda: on_cursor().get("name") == "head", "the cursor on head")
        assert table.cursor >= 4
        at = table.cursor
        await pilot.press("k", "k", "k", "k", "k")  # onto a page not held yet
        await wait_for(pilot, lambda: table.row(at - 5) is not None, "the rows above")
        await pilot.pause(0.2)
        assert table.cursor == at - 5  # the user's now: pages arriving leave it there


def _column(table: LayersTable, key: str) -> list[float]:
    rows = [table.row(i) for i in range(table.row_count)]
    if not table.row_count or None in rows:
        return [float("nan")]  # not all arrived yet
    return [r[key] for r in rows if r[key] is not None]


async def test_timeline_shows_phase_bands_and_enter_selects_the_bar(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("t")
        timeline = page.query_one(Timeline)
        await wait_for(pilot, lambda: timeline.bars, "timeline bars")
        text = screen_text(app)
        assert "── forward" in text and "── backward (≈" in text
        # How wide a band is depends on the recording's timing: each band shows its label
        # clipped to fit, never a fragment of another.
        area = timeline.content_region
        band = text.splitlines()[area.y][area.x : area.right]
        spans = timeline.phase_spans(timeline.size.width)
        assert {phase for phase, _, _ in spans} >= {"data", "forward", "backward"}
        for phase, x0, x1 in spans:
            assert band[x0:x1] == fit_label(phase_label(phase), x1 - x0)
        head = next(
            i for i, b in enumerate(timeline.bars) if b["name"] == "head" and b["lane"] == "forward"
        )
        timeline._move(head)
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: page.selection and page.selection.row.get("name") == "head",
            "head selected from its bar",
        )
        before = timeline.cursor
        await pilot.press("h")
        assert timeline.cursor != before


async def test_step_pane_judges_update_ratios_and_opens_a_parameter(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("p")
        table = page.query_one(ParamTable)
        await wait_for(pilot, lambda: table.row_count == 11, "the 11 parameters")
        text = screen_text(app)
        assert "‖Δw‖/‖w‖" in text and "SGD(lr=0.05" in text and "step 0" in text
        await pilot.press("enter")
        await wait_for(
            pilot,
            lambda: page.inspector.shown is not None and page.inspector.shown.kind == "param",
            "the parameter in the inspector",
        )
        assert [c.ref.which for c in page.inspector.cards] == ["weight", "grad", "update"]
        # the gradient's values are stored rounded (weights and Δw are exact): said once
        note = "values stored to 11 significant bits; run with --exact to keep them whole"

        def notes() -> list[str]:
            blocks = page.inspector.lines.blocks
            return [str(b.content) for b in blocks if isinstance(b, TextBlock)]

        await wait_for(pilot, lambda: notes().count(note) == 1, "the rounded gradient's note")


async def test_samples_pane_follows_the_chosen_sample_everywhere(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("a")
        table = page.query_one(SampleTable)
        await wait_for(pilot, lambda: table.row_count == 32, "32 samples")
        await pilot.press("j", "j", "j", "enter")
        await wait_for(pilot, lambda: app.sample == 3, "sample 3 followed")
        assert "sample 3" in screen_text(app).splitlines()[-1]
        await pilot.press("c")
        await wait_for(
            pilot,
            lambda: (
                "sample 3" in page.inspector.cards[0]._note or page.inspector.cards[0]._sample == 3
            ),
            "the inspector on sample 3",
        )


async def test_resizing_switches_between_compact_medium_and_wide_layouts(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        assert page.visible_panes() == ["calls", "inspector"]
        await pilot.resize_terminal(80, 24)
        await wait_for(pilot, lambda: page.layout_name == "compact", "compact layout")
        assert page.visible_panes() == ["calls"]
        assert not page.inspector.display
        await pilot.press("enter")  # in compact layouts enter brings the inspector forward
        await wait_for(pilot, lambda: page.visible_panes() == ["inspector"], "the inspector alone")
        await pilot.resize_terminal(200, 60)
        await wait_for(pilot, lambda: page.layout_name == "wide", "wide layout")
        assert page.visible_panes() == ["calls", "inspector", "source"]
        assert node_named(page, "ShapesCNN") is not None


async def test_a_narrow_layers_table_drops_whole_columns_and_keeps_the_warnings(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("y")
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count and table.row(0), "layer rows")
        await pilot.pause()
        header = next(line for line in screen_text(app).splitlines() if " # name" in line)
        titles = header.split()
        assert titles[:4] == ["#", "name", "class", "output"] and titles[-1] == "flags"
        assert "fwd" not in titles  # gave way whole, not cut at the edge


async def test_timeline_of_a_later_batch_draws_its_forward_lane(run_dir: Path):
    """Every batch's calls are timed from that batch's start (not offset by tvis's overhead
    in the batches before), so the second batch's forward lane is drawn, not empty."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("full_stop", "t")
        timeline = page.query_one(Timeline)
        await wait_for(
            pilot, lambda: timeline.bars and timeline.batch_index == 1, "batch 1's timeline"
        )
        forward = [b for b in timeline.bars if b["lane"] == "forward"]
        assert forward and all(0 <= b["t0"] <= b["t1"] <= timeline.span for b in forward)
        area = timeline.content_region
        lines = screen_text(app).splitlines()[area.y : area.bottom]
        lane = next(i for i, line in enumerate(lines) if "── forward" in line)
        assert "ShapesCNN" in lines[lane + 1][area.x : area.right]


async def test_source_follows_the_selection_into_another_file_and_the_loss_line_has_its_shape(
    run_dir: Path,
):
    """The model's calls are defined in model.py; the loss function is library code, called
    at train.py:72: the Source pane follows to its call site, annotated with its output."""
    app = make_app(run_dir)
    async with app.run_test(size=(200, 50)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("s", "c")  # the Source pane beside, the tree focused again
        view = page.query_one(SourceView)
        await wait_for(pilot, lambda: view.file == "model.py", "the model's definition")
        tree = page.calls.call_tree
        tree.move_cursor(await wait_for(pilot, lambda: node_named(page, "F.cross_entropy"), "loss"))
        await wait_for(pilot, lambda: view.file == "train.py", "the loss call's file")
        site = page.selection.row["site"][1]
        assert view.cursor + 1 == site
        assert view.lines[view.cursor].plain.strip().startswith("loss = F.cross_entropy(")
        assert "scalar F.cross_entropy" in annotation_text(view.annotations[site])
        line = await wait_for(
            pilot,
            lambda: next(r for r in screen_text(app).splitlines() if f"▕  {site} " in r),
            "the loss line on screen",
        )
        assert "scalar" in line, line


async def test_layers_table_keeps_its_class_column_at_120_columns(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("y")
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count > 10 and table.row(3), "layer rows")
        assert "cls" in [c.key for c, _ in table._columns(table.size.width)]
        assert "Conv2d" in screen_text(app) and "class" in screen_text(app)


def _drawn(strip) -> list[tuple[str, str]]:
    """A line as what each cell shows: its character and its colours and attributes."""
    return [(ch, str(s.style or "")) for s in strip for ch in s.text]


async def test_layer_rows_are_laid_out_once_however_often_they_are_drawn(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("y")
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count > 10 and table.row(10), "layer rows")
        await pilot.pause()
        width, shown = table.size.width, min(table.row_count, table.size.height - 1)
        built = table.rows_built
        assert built == shown  # the first screen: each row laid out once
        for _ in range(2):  # drawn again from scratch: nothing is laid out again
            table._lines.clear()
            for y in range(table.size.height):
                table.render_line(y)
        await pilot.press("j", "j", "k")  # the cursor moves: rows restyled, not laid out
        page.calls.call_tree.focus()  # and the table blurred, then focused again
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert table.rows_built == built
        # Each line shows what Rich's layout of the same cells shows (the flags too).
        for index in range(shown):
            if index == table.cursor:
                continue
            expected = Text()
            for column, w in table._columns(width):
                value = column.render(table.row(index))
                expected.append_text(layers_table._cell(value, w, column.right))
            expected.stylize(Style(meta={"row": index}))
            rich_line = [s for s in expected.render(app.console) if s.text != "\n"]
            assert _drawn(table._row_line(index, width)) == _drawn(rich_line), index


async def test_a_pane_built_for_the_first_time_never_squeezes_the_inspector(run_dir: Path):
    """`a` (then `s`, `p`) at 120 columns builds a pane where the inspector was: the
    inspector is hidden before the new pane is laid out, so its cards are never drawn at
    another width, and `i` brings them back as they were, asking nothing again."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        lines = page.inspector.lines
        width = lines.size.width
        await wait_for(pilot, lambda: all(c.has_data for c in lines.cards), "the cards' views")
        asked = count_requests(app)
        for key in ("a", "s", "p"):
            await pilot.press(key)
            await pilot.pause(0.3)
            await pilot.press("i")
            await wait_for(pilot, lambda: page.inspector.display, "the inspector back")
            await pilot.pause(0.3)
            assert lines.size.width == width
        cards = [a for a in asked if a["method"] == "view" and not a.get("background")]
        assert cards == [], "the inspector's cards asked for their pictures again"
        assert app.internal_errors == []


async def test_samples_table_lists_every_sample_and_moves_the_preview(run_dir: Path):
    """The samples table (drawn line by line): one row per sample with its target,
    prediction and loss, the followed sample marked, columns as wide as their widest
    value; the cursor keys move the preview, enter follows the row's sample."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("a")
        table = page.query_one(SampleTable)
        await wait_for(pilot, lambda: table.row_count == 32, "32 samples")
        view = page.query_one("#samples")
        rows = view.rows
        assert [c.label for c in table.columns] == [
            "",
            "sample",
            "target",
            "prediction",
            "loss",
            "p(target)",
        ]
        first = [Text(c).plain if isinstance(c, str) else c.plain for c in table.cells(0)]
        assert first[0] == "●" and first[1] == str(rows[0]["sample"])
        assert all(table.cells(i)[0].plain == " " for i in range(1, 32))
        widths = table.column_widths(table.size.width)
        for column, w in enumerate(widths):
            values = [table.cells(i)[column] for i in range(32)]
            assert w == max(
                len(table.columns[column].label),
                *(v.cell_len if isinstance(v, Text) else len(v) for v in values),
            )
        text = screen_text(app)
        assert "prediction" in text and "p(target)" in text
        for row in rows[:5]:  # the first rows on screen, each with its loss
            assert fmt.num(row["loss"]) in text
        await pilot.press("j", "j")
        await wait_for(
            pilot,
            lambda: f"sample {rows[2]['sample']} as the model received it" in screen_text(app),
            "the preview of the third row",
        )
        await pilot.press("G")
        assert table.cursor_row == 31
        await pilot.press("g", "j", "enter")
        await wait_for(pilot, lambda: app.sample == rows[1]["sample"], "row 2 followed")
        await pilot.pause(0.1)
        assert table.cells(1)[0].plain == "●" and table.cells(0)[0].plain == " "
        assert table.cursor_row == 1
        assert app.internal_errors == []


async def test_step_table_moves_the_inspector_with_its_cursor_but_not_when_filled(run_dir: Path):
    """The step's parameter table (drawn line by line): filling it chooses nothing, the
    inspector stays on the call; `j` shows the next parameter there; each column is as
    wide as its widest value."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        call = page.inspector.shown
        await pilot.press("p")
        table = page.query_one(ParamTable)
        await wait_for(pilot, lambda: table.row_count == 11, "the 11 parameters")
        await pilot.pause(0.2)
        assert page.inspector.shown == call
        names = [p["name"] for p in table.params]
        assert table.column_widths(0)[0] == max(map(len, names))
        assert all(name in screen_text(app) for name in names)
        await pilot.press("j")
        await wait_for(
            pilot,
            lambda: (
                page.inspector.selection.kind == "param"
                and page.inspector.selection.param["name"] == names[1]
            ),
            "the second parameter in the inspector",
        )
        assert app.internal_errors == []


@pytest.mark.parametrize("size", [(120, 40), (200, 60), (99, 30)])
async def test_the_samples_pane_is_built_at_the_width_the_layout_gives_it(
    run_dir: Path, size: tuple[int, int]
):
    """The page chooses the samples pane's arrangement (preview beside or under the table)
    before its first layout, from ``last_pane_width``: that width is the one Textual
    gives the pane, in the medium, wide and compact layouts."""
    from tvis.tui.pages.explore_layout import last_pane_width
    from tvis.tui.widgets.samples_view import SamplesView

    app = make_app(run_dir)
    async with app.run_test(size=size) as pilot:
        page = await open_explore(pilot)
        await pilot.press("a")
        view = await wait_for(pilot, lambda: page.query(SamplesView).first(), "the pane")
        await wait_for(pilot, lambda: view.size.width, "its layout")
        assert view.size.width == last_pane_width(size[0])
        assert view.has_class("-narrow") == (view.size.width < SamplesView.NARROW)


async def test_at_80x24_the_samples_table_keeps_most_of_the_pane_above_its_preview(run_dir: Path):
    """Under the table (a narrow pane), the preview picture is at most a third of the
    terminal's rows: at 80×24 the table showed 2 of its 32 samples above a 16-row picture.
    A taller terminal gives the picture its rows back, redrawn to fit."""
    from tvis.tui.picture import Picture
    from tvis.tui.widgets.samples_view import PREVIEW_ROWS, SamplesView

    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("a")
        view = await wait_for(pilot, lambda: page.query(SamplesView).first(), "the pane")
        picture = view.query_one("#preview-image", Picture)
        await wait_for(pilot, lambda: picture.has_data and picture.size.height, "the preview")
        table = view.query_one(SampleTable)
        assert view.has_class("-narrow")
        assert picture.size.height <= 24 // 3 + 1  # the picture and its caption
        assert table.size.height - 1 >= 8, table.size  # rows under the header
        text = screen_text(app)
        assert all(f"\n    {n}  " in text for n in range(1, 8)), text
        await pilot.resize_terminal(80, 60)
        await wait_for(pilot, lambda: picture.max_rows == PREVIEW_ROWS[0], "the taller preview")
        await wait_for(pilot, lambda: picture.size.height > 24 // 3 + 1, "the picture redrawn")
        assert app.internal_errors == []
