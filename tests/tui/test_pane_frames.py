"""A pane key's screen is complete in the frame that shows the pane: nothing it changes is
left for a frame after (20–40 ms later, a screen update away), and nothing unchanged is
sent again. Each test pins one way a pane key cost a second frame in a real terminal
(traced with the viewer writing its own layouts, paints and writes on a pty)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events, messages
from textual._compositor import Compositor
from viewer_support import make_app, no_quiet_spell, open_explore, screen_text, wait_for

from tvis.tui.pages.explore import PaneBar
from tvis.tui.widgets.inspector_lines import InspectorLines
from tvis.tui.widgets.source_view import SourceView


def left_by_layouts(page, pending, monkeypatch) -> list[str]:
    """From now on, for each frame a layout of ``page`` draws: the widgets on screen for
    which ``pending(widget)`` holds then and did not when the layout began (what the
    layout itself asked for and left to a later frame). A layout's frame, not the frames
    of what handlers ask between layouts, which come at the screen's next update."""
    from textual.widget import Widget

    left: list[str] = []
    layouts: list[set] = []
    refresh_layout, render_update = page._refresh_layout, Compositor.render_update

    def laid_out(*args, **kwargs):
        layouts.append({w for w in page.walk_children(Widget) if pending(w)})
        try:
            return refresh_layout(*args, **kwargs)
        finally:
            layouts.pop()

    def rendered(compositor, *args, **kwargs):
        if compositor is page._compositor and layouts:
            before = layouts[-1]
            left.extend(
                type(w).__name__
                for w in compositor.visible_widgets
                if pending(w) and w not in before
            )
        return render_update(compositor, *args, **kwargs)

    monkeypatch.setattr(page, "_refresh_layout", laid_out)
    monkeypatch.setattr(Compositor, "render_update", rendered)
    return left


def count_frames(page, monkeypatch) -> list[None]:
    """From now on, one entry per frame ``page`` writes (a paint with something to send)."""
    frames: list[None] = []
    render_update = Compositor.render_update

    def recorded(compositor, *args, **kwargs):
        update = render_update(compositor, *args, **kwargs)
        if compositor is page._compositor and update is not None:
            frames.append(None)
        return update

    monkeypatch.setattr(Compositor, "render_update", recorded)
    return frames


async def show_panes(pilot, page, panes) -> None:
    """Press each ``(key, pane)``'s key and wait until that pane has the focus."""
    for key, pane in panes:
        await pilot.press(key)
        await wait_for(pilot, lambda p=pane: page._focused_pane() == p, key)
        await pilot.pause(0.2)


async def test_a_focus_move_does_not_redraw_the_whole_page(run_dir: Path, monkeypatch):
    """Textual's screen repaints itself whole when its focused widget changes (a reactive's
    default): every pane key sent the unchanged rest of the screen again, 15–22 KB."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        whole: list[bool] = []
        update_widgets = Compositor.update_widgets

        def recorded(compositor, widgets):
            if compositor is page._compositor:
                whole.append(page in widgets)
            return update_widgets(compositor, widgets)

        monkeypatch.setattr(Compositor, "update_widgets", recorded)
        with no_quiet_spell(app):
            for key, focused in (("i", "inspector"), ("c", "calls"), ("i", "inspector")):
                await pilot.press(key)
                await wait_for(pilot, lambda f=focused: page._focused_pane() == f, key)
                await pilot.pause()
        assert whole and not any(whole)


async def test_a_pane_key_writes_the_pane_bar_once(run_dir: Path):
    """The bar says which pane has the focus: drawn as the key showed the pane, before the
    focus moved, it was drawn again when the focus arrived, a frame later."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        bar = page.query_one(PaneBar)
        drawn: list[str] = []
        update = bar.update
        bar.update = lambda content, **kw: (drawn.append(str(content)), update(content, **kw))[1]
        for key, pane in (("a", "samples"), ("i", "inspector"), ("s", "source")):
            drawn.clear()
            await pilot.press(key)
            await wait_for(pilot, lambda p=pane: page._focused_pane() == p, key)
            await pilot.pause()
            assert len(drawn) == 1, (key, drawn)


async def test_the_inspector_shown_again_asks_no_layout_of_its_own(run_dir: Path):
    """Its lines change as it loses or gains the focus (the current card's mark) while it
    is hidden or not laid out yet: asked then, its layout came after the frame that showed
    it — the showing layout sizes it and draws every line anyway."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await wait_for(pilot, lambda: page.inspector.settled, "the inspector settled")
        await pilot.pause(0.3)  # its pictures drawn
        lines = page.query_one(InspectorLines)
        asked: list[bool] = []
        refresh = lines.refresh

        def recorded(*regions, **kwargs):
            asked.append(kwargs.get("layout", False))
            return refresh(*regions, **kwargs)

        lines.refresh = recorded
        panes = [("a", "samples"), ("i", "inspector"), ("s", "source"), ("i", "inspector")]
        await show_panes(pilot, page, panes)
        assert True not in asked
        # And what it shows is its lines of now: the current card marked, focused.
        assert lines.current == page.inspector.current


async def test_a_file_opened_in_a_new_source_pane_is_drawn_once(run_dir: Path, monkeypatch):
    """`d` opens the definition's file in a Source pane not laid out yet: the cursor was
    placed as the view had no height, and placed again after the first frame, which
    repainted the whole view a frame later. Now the layout that sizes the view places the
    cursor's line a third of the way down (or the file's end at the bottom), and nothing
    asks the view to be drawn again."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 24)) as pilot:
        page = await open_explore(pilot)
        shown: list[tuple[int, int, int]] = []
        asked_after: list[str] = []
        render_update = Compositor.render_update
        refresh = SourceView.refresh

        def recorded(compositor, *args, **kwargs):
            views = list(page.query(SourceView))
            if compositor is page._compositor and views and views[0].file == "model.py":
                view = views[0]
                shown.append((int(view.scroll_y), view.cursor, view.size.height))
            return render_update(compositor, *args, **kwargs)

        def refreshed(view, *regions, **kwargs):
            if shown:
                asked_after.append(repr(kwargs))
            return refresh(view, *regions, **kwargs)

        monkeypatch.setattr(Compositor, "render_update", recorded)
        monkeypatch.setattr(SourceView, "refresh", refreshed)
        with no_quiet_spell(app):
            await pilot.press("d")
            view = page.query_one(SourceView)
            await wait_for(pilot, lambda: shown, "model.py drawn")
            await pilot.pause(0.3)
        top, cursor, height = shown[0]
        assert cursor > height  # far enough down the file to need the scroll
        assert top == min(cursor - height // 3, len(view.lines) - height)
        assert asked_after == []


async def test_what_a_layout_asks_to_repaint_is_drawn_in_its_frame(run_dir: Path, monkeypatch):
    """A layout gives a scrolling pane its size and its scroll bars their extent, and each
    bar asks for a repaint as it does: Textual drew the bars in a frame of their own, a
    screen update (20–40 ms) after the one showing the pane."""
    from textual.scrollbar import ScrollBar

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        left = left_by_layouts(
            page, lambda w: isinstance(w, ScrollBar) and w._repaint_required, monkeypatch
        )
        await show_panes(pilot, page, [("s", "source"), ("a", "samples"), ("i", "inspector")])
        assert left == []


async def test_a_new_layers_table_is_drawn_at_its_own_width_in_its_first_frame(
    run_dir: Path, monkeypatch
):
    """The table's virtual width is its columns', which follow its width: set when its
    Resize came, after the frame that showed it at the width of no columns, it cost a
    layout and a frame more."""
    from tvis.tui.widgets.layers_table import LayersTable

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        drawn: list[tuple[int, int]] = []
        render_update = Compositor.render_update

        def recorded(compositor, *args, **kwargs):
            tables = list(page.query(LayersTable))
            if compositor is page._compositor and tables and tables[0].row_count:
                table = tables[0]
                drawn.append((table.virtual_size.width, table._total_width(table.size.width)))
            return render_update(compositor, *args, **kwargs)

        monkeypatch.setattr(Compositor, "render_update", recorded)
        await pilot.press("y")
        await wait_for(pilot, lambda: drawn, "the layers table drawn")
        await pilot.pause(0.2)
        assert all(virtual == columns for virtual, columns in drawn), drawn


async def test_a_pane_s_first_showing_is_laid_out_whole_before_it_is_drawn(
    run_dir: Path, monkeypatch
):
    """A layout that sizes new content asks for more as it goes (auto heights measured
    with cached ones, scroll bars that appear once the content overflows): Textual laid
    each out and drew it in a frame of its own, so the samples pane's first showing was
    complete in its third frame. A layout's frame is drawn with nothing it asked to lay
    out again left waiting."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        left = left_by_layouts(page, lambda w: w._layout_required, monkeypatch)
        await show_panes(pilot, page, [("a", "samples"), ("p", "step"), ("t", "timeline")])
        assert left == []


async def test_a_frame_waits_for_a_repaint_asked_just_before_it(run_dir: Path, monkeypatch):
    """A widget tells the screen it wants a repaint when its own task next runs: asked
    just before the screen's tick (the tab bar's keys at a focus change), it was drawn a
    frame after the rest of the key's screen. The frame now waits for it (briefly)."""
    from tvis.tui.widgets.page_tabs import PageTabs

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tabs = page.query_one(PageTabs)
        await pilot.pause(0.3)
        drawn: list[bool] = []
        render_update = Compositor.render_update

        def recorded(compositor, *args, **kwargs):
            if compositor is page._compositor:
                drawn.append(tabs._repaint_required)
            return render_update(compositor, *args, **kwargs)

        monkeypatch.setattr(Compositor, "render_update", recorded)
        with no_quiet_spell(app):
            tabs.refresh()  # its Update is on its way: the tab bar's task has not run
            page.refresh()  # and the screen has something of its own to draw
            page._on_timer_update()  # the screen's tick comes first
            assert drawn == []  # not drawn without it
            await pilot.pause(0.1)
        assert drawn and not tabs._repaint_required


async def test_a_frame_waits_for_the_focus_move_s_messages_to_be_handled(
    run_dir: Path, monkeypatch
):
    """Tab moves the focus at once and tells the two widgets with Blur and Focus messages;
    the screen's tick before they were handled drew the panes' restyle, and the inspector's
    mark came a frame later (two writes per Tab on a pty). The frame waits for them."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        inspector = page.inspector
        await wait_for(pilot, lambda: inspector.settled, "the inspector settled")
        await pilot.pause(0.3)
        marked: list[int | None] = []
        render_update = Compositor.render_update

        def recorded(compositor, *args, **kwargs):
            if compositor is page._compositor:
                marked.append(inspector.lines.current)
            return render_update(compositor, *args, **kwargs)

        monkeypatch.setattr(Compositor, "render_update", recorded)
        with no_quiet_spell(app):
            # A focus move's Focus, on its way: the inspector has not marked its card yet.
            inspector.post_message(events.Focus())
            page.refresh()  # and the screen has something of its own to draw
            page._on_timer_update()  # the screen's tick comes first
            assert marked == []  # not drawn before the inspector has marked its card
            await pilot.pause(0.1)
        assert marked and marked[0] == inspector.current


async def test_a_frame_waits_for_the_repaints_the_screen_has_been_told_of(
    run_dir: Path,
):
    """A widget's repaint reaches the screen as a message in the screen's own queue; the
    screen's tick before it had taken them drew the frame without them (leaving the
    inspector by `c` or Tab: its mark came a frame later). The frame takes them first."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        lines = page.inspector.lines
        await wait_for(pilot, lambda: page.inspector.settled, "the inspector settled")
        await pilot.pause(0.3)
        with no_quiet_spell(app):
            await wait_for(pilot, lambda: not page._asks_on_the_way(), "the screen at rest")
            page.post_message(messages.Update(lines))  # as the lines tell it of a repaint
            assert page._asks_on_the_way()  # the frame takes it first
            await pilot.pause(0.1)
            assert not page._asks_on_the_way()


async def test_the_inspector_s_next_card_scrolls_in_one_frame(run_dir: Path, monkeypatch):
    """`j` in the inspector scrolled to the next card in an animation: the inspector sent
    again in each of ~9 frames (150 KB over 150 ms, traced on a pty) for what one shows.
    Then the scroll, left to after the next refresh (Textual's default), came a frame
    after the card's mark."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 24)) as pilot:
        page = await open_explore(pilot)
        inspector = page.inspector
        await wait_for(pilot, lambda: inspector.settled, "the inspector settled")
        await show_panes(pilot, page, [("i", "inspector")])
        assert inspector.max_scroll_y > 0  # the cards overflow: a card below needs a scroll
        animated: list[str] = []
        animate = inspector.animate
        inspector.animate = lambda attribute, *a, **kw: (
            animated.append(attribute),
            animate(attribute, *a, **kw),
        )[1]
        frames = count_frames(page, monkeypatch)
        with no_quiet_spell(app):
            for _ in range(len(inspector.cards) - 1):
                frames.clear()
                await pilot.press("j")
                await pilot.pause(0.2)
                if inspector.scroll_y > 0:
                    break
        assert inspector.scroll_y > 0 and animated == []
        assert len(frames) == 1


async def test_a_pane_built_ahead_is_drawn_whole_in_the_frame_that_shows_it(
    run_dir: Path, monkeypatch
):
    """Each pane key after the panes were built ahead writes one frame. A second came
    ≈ 30 ms later for what the first left: the samples pane's empty picture (laid out at
    no size, so no visible widget) asked a layout, and with it a scroll bar; the timeline
    took its scroll width from its size once its Resize came; the inspector, its current
    card marked while hidden, drew the lines it had before and marked it a frame later."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await wait_for(pilot, lambda: not page.panes_left_ahead(), "the panes built ahead", 30)
        await pilot.pause(0.3)
        frames = count_frames(page, monkeypatch)
        shown = []
        with no_quiet_spell(app):
            for key, pane in (("a", "samples"), ("i", "inspector"), ("t", "timeline")):
                frames.clear()
                await pilot.press(key)
                await wait_for(pilot, lambda p=pane: page._focused_pane() == p, key)
                await pilot.pause(0.3)
                shown.append((key, len(frames)))
        assert shown == [("a", 1), ("i", 1), ("t", 1)]


async def test_a_cursor_moved_out_of_view_scrolls_in_the_move_s_frame(run_dir: Path, monkeypatch):
    """The layers table's and Weights' list's `G` and `g` move the cursor out of view,
    and the move's first frame shows the scroll that follows it (the layers table, which
    shows no scroll bar, did not scroll at all)."""
    from test_loss_weights_pages import _param_list

    from tvis.tui.widgets.layers_table import LayersTable

    def first_frames(page, table) -> list[float]:
        """The table's scroll offset in each frame ``page`` writes from now on."""
        drawn: list[float] = []
        render_update = Compositor.render_update

        def recorded(compositor, *args, **kwargs):
            update = render_update(compositor, *args, **kwargs)
            if update is not None and compositor is page._compositor:
                drawn.append(table.scroll_y)
            return update

        monkeypatch.setattr(Compositor, "render_update", recorded)
        return drawn

    async def moves(pilot, table, drawn) -> list[tuple[str, float, float]]:
        """Per key: the scroll drawn in its first frame, and the scroll it ends at."""
        shown = []
        for key in ("G", "g"):
            drawn.clear()
            await pilot.press(key)
            await wait_for(pilot, lambda: drawn, f"{key} drawn")
            await pilot.pause(0.3)
            shown.append((key, drawn[0], table.scroll_y))
        return shown

    app = make_app(run_dir)
    async with app.run_test(size=(120, 24)) as pilot:
        page = await open_explore(pilot)
        await show_panes(pilot, page, [("y", "layers")])
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count > table.size.height, "rows to scroll")
        with no_quiet_spell(app):
            shown = await moves(pilot, table, first_frames(page, table))
        assert shown[0][2] > 0 and shown[1][2] == 0
        assert all(first == final for _, first, final in shown), shown
        weights, params = await _param_list(pilot)
        params.focus()
        await pilot.resize_terminal(120, 14)  # fewer rows than the run has parameters
        await wait_for(pilot, lambda: params.row_count > params.page_rows, "rows to scroll")
        await pilot.pause(0.3)
        shown = await moves(pilot, params, first_frames(weights, params))
        assert shown[0][2] > 0 and shown[1][2] == 0
        assert all(first == final for _, first, final in shown), shown


async def test_a_page_shown_again_is_drawn_once(run_dir: Path, monkeypatch):
    """Textual lays a page shown again out and draws it as it switches, then repaints it
    whole for the ScreenResume that follows: every page key sent its page twice."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        for key, mode in (("3", "loss"), ("2", "explore")):  # both visited once
            await pilot.press(key)
            await wait_for(pilot, lambda m=mode: app.current_mode == m, key)
            await pilot.pause(0.3)
        frames: list[str] = []
        render_update = Compositor.render_update

        def recorded(compositor, *args, **kwargs):
            update = render_update(compositor, *args, **kwargs)
            if update is not None and compositor is app.screen._compositor:
                frames.append(app.current_mode)
            return update

        monkeypatch.setattr(Compositor, "render_update", recorded)
        with no_quiet_spell(app):
            for key, mode in (("3", "loss"), ("2", "explore")):
                await pilot.press(key)
                await wait_for(pilot, lambda m=mode: app.current_mode == m, key)
                await pilot.pause(0.3)
        assert frames == ["loss", "explore"]


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (200, 60)])
async def test_a_pane_drawn_ahead_is_shown_from_what_it_drew(run_dir: Path, monkeypatch, size):
    """Panes built ahead are also laid out and drawn ahead, hidden, at the size they will
    have (``hidden_layout``): the key that shows one builds none of its rows again but the
    cursor's (focused now), and the screen is the one a pane drawn at the key shows. Shown
    at no size before, each of the rows in view was built again under the key (`a`:
    ≈ 25 ms of its 54–73). In each layout: the slot is the right column, the side
    column, or the whole screen."""
    from tvis.tui.pages.explore import ExplorePage
    from tvis.tui.widgets.layers_table import LayersTable
    from tvis.tui.widgets.samples_view import SampleTable
    from tvis.tui.widgets.step_view import ParamTable

    keys = (("a", SampleTable), ("y", LayersTable), ("p", ParamTable))

    async def show_each(drawn_ahead: bool) -> tuple[list[tuple[str, int]], list[str]]:
        """Per key, the rows its line table built (the layers table keeps its own
        cache); and each screen."""
        if not drawn_ahead:
            monkeypatch.setattr(ExplorePage, "_drawable_ahead", lambda page, name, slot: False)
        app = make_app(run_dir)
        built, screens = [], []
        async with app.run_test(size=size) as pilot:
            page = await open_explore(pilot)
            await wait_for(pilot, lambda: not page.panes_left_ahead(), "the panes ahead", 30)
            await pilot.pause(0.3)
            with no_quiet_spell(app):
                for key, kind in keys:
                    table = page.query_one(kind)
                    rows: list[int] = []
                    if kind is not LayersTable:
                        cells = table.cells
                        monkeypatch.setattr(
                            table, "cells", lambda row, c=cells, r=rows: r.append(row) or c(row)
                        )
                    await pilot.press(key)
                    await wait_for(pilot, lambda t=table: t.has_focus, key)
                    await pilot.pause(0.3)
                    if kind is not LayersTable:
                        built.append((key, len(rows)))
                    screens.append(screen_text(app, styled=True))
        monkeypatch.undo()
        return built, screens

    built, screens = await show_each(drawn_ahead=True)
    assert built == [("a", 1), ("p", 1)]
    cold_built, cold_screens = await show_each(drawn_ahead=False)
    assert all(n > 5 for _, n in cold_built), cold_built
    assert screens == cold_screens
