"""Keys that bring a call the cursor is not beside, drawn from what was fetched while the
page rested: Explore's `end` and `home` (the tree's last and first rows) and Loss' `u` (the
loss call, in Explore's inspector). After a rest they ask the agent nothing in the
foreground, and the inspector shows the call they went to."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.geometry import Region
from viewer_support import (
    count_layouts,
    count_requests,
    goto_page,
    make_app,
    no_quiet_spell,
    open_explore,
    wait_for,
)

from tvis.tui.picture import Picture
from tvis.tui.widgets.layer_views import LayerViews, OnImageView
from tvis.tui.widgets.samples_view import SamplesView
from tvis.tui.widgets.source_view import SourcePane, highlight

REST_S = 1.0
"""Longer than ``explore.NEIGHBOURS_AFTER_S`` and ``loss.BESIDE_AFTER_S``."""


def _foreground(asked: list[dict]) -> list[dict]:
    """The requests a key waited for (a prefetch for the next key is sent in the background)."""
    return [a for a in asked if not a.get("background")]


async def _rested(pilot, app) -> None:
    await pilot.pause(REST_S)
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
    await wait_for(pilot, lambda: not app.data.busy, "the agent's answers")


async def test_end_and_home_after_a_rest_ask_the_agent_nothing(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        for key, line in (("end", tree.last_line), ("home", 0)):
            await _rested(pilot, app)
            asked = count_requests(app)
            await pilot.press(key)
            wanted = tree.selection_of(tree.get_node_at_line(line))
            await wait_for(
                pilot,
                lambda w=wanted: (
                    page.inspector.shown is not None and page.inspector.shown.key() == w.key()
                ),
                f"the inspector on the row `{key}` went to",
            )
            assert _foreground(asked) == [], key
        assert app.internal_errors == []


async def test_u_after_loss_rested_asks_the_agent_nothing(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("home")  # the cursor away from the loss call
        await goto_page(pilot, "loss")
        loss = app.screen
        await wait_for(pilot, lambda: loss.view.detail, "the loss call's detail")
        call = loss.view.detail["call"]["id"]
        await _rested(pilot, app)
        asked = count_requests(app)
        await pilot.press("u")
        await wait_for(
            pilot,
            lambda: (
                app.current_mode == "explore"
                and page.inspector.shown is not None
                and page.inspector.shown.call == call
                and page.inspector.cards
                and all(c.ref for c in page.inspector.cards)
            ),
            "the loss call in Explore's inspector",
        )
        assert _foreground(asked) == []
        assert app.internal_errors == []


async def test_u_after_loss_rested_selects_the_loss_call_before_the_switch_draws(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await pilot.press("home")  # the cursor away from the loss call
        await goto_page(pilot, "loss")
        loss = app.screen
        await wait_for(pilot, lambda: loss.view.detail, "the loss call's detail")
        call = loss.view.detail["call"]["id"]
        await _rested(pilot, app)
        loss.action_goto_loss_call()  # `u`'s action: nothing has run after it yet
        assert page.selection is not None and page.selection.call == call
        assert page.inspector.selection is not None and page.inspector.selection.call == call
        await wait_for(pilot, lambda: app.current_mode == "explore", "the Explore page")
        await pilot.pause(0.3)
        tree = page.calls.call_tree
        assert tree.selection_of(tree.cursor_node).call == call
        assert app.internal_errors == []


async def test_s_d_and_u_after_a_rest_draw_the_source_without_asking_the_agent(run_dir: Path):
    """The Source pane's first opening, by `s`, or by `d` or `u` on the selected call, shows
    its file within the key: the run's files and the call's definition and call site were
    fetched, and highlighted, while the tree rested."""
    for key, which in (("s", "def"), ("d", "def"), ("u", "site")):
        highlight.cache_clear()
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_explore(pilot)  # on the model's call: model.py, from train.py
            where = page._selection_file(which)
            assert where is not None
            assert page._selection_file("def")[0] != page._selection_file("site")[0]
            await _rested(pilot, app)
            asked = count_requests(app)
            highlighted = highlight.cache_info().misses
            await pilot.press(key)
            assert page.query_one(SourcePane).view.file == where[0], key
            assert _foreground(asked) == [], key
            assert highlight.cache_info().misses == highlighted, key
            assert app.internal_errors == []


async def test_a_p_and_m_after_a_rest_draw_their_pane_without_asking_the_agent(run_dir: Path):
    """The Samples pane (`a`: its rows and the followed sample's preview), the step's pane
    (`p`) and the step's tree (`m`) open on what was fetched while the tree rested."""
    for key in ("a", "p", "m"):
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_explore(pilot)
            await _rested(pilot, app)
            asked = count_requests(app)
            await pilot.press(key)
            await pilot.pause(0.2)
            if key == "a":
                view = page.query_one(SamplesView)
                assert view.rows and view.query_one("#preview-image", Picture).has_data
            assert _foreground(asked) == [], key
            assert app.internal_errors == []


@pytest.mark.parametrize("first", ["replay", "explore"])
async def test_n_after_replay_rested_draws_the_layer_without_asking_the_agent(
    run_dir: Path, first: str
):
    """Replay's `n` from the batch loading to its first layer: the layer views were
    mounted, and the layer's On image answer fetched, while the page rested — shown
    first, or built while Explore was (then its rest starts when it is shown)."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        if first == "explore":
            await open_explore(pilot)
        await goto_page(pilot, "replay")
        page = app.screen
        await wait_for(pilot, lambda: page.current_event(), "the first event")
        await wait_for(  # at the page's first rest (later on a loaded machine)
            pilot, lambda: page.query(LayerViews) and page.query_one(LayerViews).ready, "views"
        )
        await _rested(pilot, app)
        views = page.query_one(LayerViews)
        assert views.ready and not views.display  # mounted, hidden: a batch loading
        asked = count_requests(app)
        await pilot.press("n")
        await wait_for(
            pilot, lambda: views.display and views.query_one(OnImageView).drawn, "the layer"
        )
        assert page.current_event().kind == "layer"
        assert _foreground(asked) == []
        assert app.internal_errors == []


@pytest.mark.parametrize(
    ("page", "key", "most"),
    [(2, "a", 3), (2, "s", 2), (2, "/", 1), (2, "tab", 0), (3, "tab", 1)],
)
async def test_a_key_after_a_rest_lays_the_page_out_at_most_so_often(
    run_dir: Path, page: int, key: str, most: int
):
    """Each layout of a page costs 5–25 ms of the key. A pane opened from the cache is
    drawn whole in its first layout — the samples' preview at the width it will have, the
    source's scrollbar there from the start — and settles in one or two more (Textual's
    own, for widgets laid out the first time); a focus change repaints the tab bar's key
    hints and the call tree's colours, and a new height (the search box) the tree's rows,
    without a layout. They were five, four, two, one and two."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        if page != 2:
            await pilot.press(str(page))
            await wait_for(pilot, lambda: app.current_mode != "explore", "the page")
        await _rested(pilot, app)
        layouts = count_layouts(app.screen)
        with no_quiet_spell(app):
            await pilot.press(key)
            await pilot.pause(0.5)
        assert len(layouts) <= most, layouts
        assert app.internal_errors == []


async def test_the_call_tree_repaints_its_cursor_when_it_loses_and_regains_focus(run_dir: Path):
    """Its colours follow the focus although a focus change no longer rebuilds its lines."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        tree = page.calls.call_tree
        row = tree.cursor_line - int(tree.scroll_y)

        def cursor_row():  # drawn as a paint draws it (render_line alone needs a paint before)
            return tree.render_lines(Region(0, row, tree.size.width, 1))[0]

        focused = cursor_row()
        await pilot.press("tab")
        await wait_for(pilot, lambda: not tree.has_focus, "the focus elsewhere")
        assert cursor_row() != focused
        await pilot.press("c")
        await wait_for(pilot, lambda: tree.has_focus, "the focus back")
        assert cursor_row() == focused


@pytest.mark.parametrize("size", [(120, 40), (200, 60), (80, 24)])
async def test_the_samples_preview_is_drawn_once_at_the_width_it_is_laid_out_at(
    run_dir: Path, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
):
    """Beside the table or under it: the page tells the pane its width, so the followed
    sample's picture is drawn before its first layout at the width it then gets, not at
    the terminal's and again (a layout more)."""
    app = make_app(run_dir)
    async with app.run_test(size=size) as pilot:
        page = await open_explore(pilot)
        await _rested(pilot, app)
        draws: list[int] = []
        draw = Picture._draw

        def counted(picture: Picture) -> None:
            if picture.id == "preview-image" and picture.has_data:
                draws.append(picture.size.width)
            draw(picture)

        monkeypatch.setattr(Picture, "_draw", counted)
        await pilot.press("a")
        picture = page.query_one(SamplesView).query_one("#preview-image", Picture)
        await wait_for(pilot, lambda: picture.size.width, "its layout")
        await pilot.pause(0.3)
        assert len(draws) == 1, draws
        assert picture._drawn_width == picture.size.width


@pytest.mark.parametrize("size", [(120, 40), (200, 60)])
async def test_replays_first_layer_picture_is_drawn_once_at_the_width_it_is_laid_out_at(
    run_dir: Path, size: tuple[int, int], monkeypatch: pytest.MonkeyPatch
):
    """The On image picture of the first layer played (`n`): the views it is in were
    hidden, so it has no width of its own yet, and it is drawn at the width of the column
    it fills, not at the terminal's and again once laid out. (Below 100 columns the same
    key brings the layer stack back in the input card's place: that column's width is
    new, and known only from the layout.)"""
    app = make_app(run_dir)
    async with app.run_test(size=size) as pilot:
        await goto_page(pilot, "replay")
        page = app.screen
        await wait_for(pilot, lambda: page.current_event(), "the first event")
        await _rested(pilot, app)
        picture = page.query_one(OnImageView).query_one(Picture)
        draws: list[int] = []
        draw = Picture._draw

        def counted(drawn: Picture) -> None:
            if drawn is picture and drawn.has_data:
                draws.append(drawn.size.width)
            draw(drawn)

        monkeypatch.setattr(Picture, "_draw", counted)
        await pilot.press("n")
        await wait_for(pilot, lambda: picture.has_data and picture.size.width, "its layout")
        await pilot.pause(0.3)
        assert len(draws) == 1, draws
        assert picture._drawn_width == picture.size.width
