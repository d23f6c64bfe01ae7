"""Explore's first screen: its card pictures are asked for with the run, before the page
exists, at the width its inspector gives them, so that the page draws them in its first
frame; that width is computed from the terminal's alone (``explore_layout``)."""

from __future__ import annotations

from pathlib import Path

from viewer_support import (
    count_requests_from_the_start,
    make_app,
    open_explore,
    screen_text,
    wait_for,
)

from tvis.tui.pages.explore_layout import inspector_picture_width

SIZES = (100, 119, 137, 159, 160, 161, 199, 213)
"""Terminal widths on both sides of each layout's edge, where rounding a share differs."""


async def test_the_inspector_width_computed_from_the_terminal_is_the_one_laid_out(
    run_dir: Path,
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        for width in SIZES:
            await pilot.resize_terminal(width, 40)
            await wait_for(
                pilot,
                lambda w=width: page.size.width == w and page.inspector.lines.size.width,
                f"Explore laid out at {width} columns",
            )
            await pilot.pause()
            assert page.inspector.display
            assert inspector_picture_width(width) == page.inspector.lines.picture_width(), width
        await pilot.resize_terminal(99, 40)
        await wait_for(pilot, lambda: page.layout_name == "compact", "the compact layout")
        assert inspector_picture_width(99) is None  # the tree alone: no cards to draw
        assert not page.inspector.display


async def explore_after_the_prefetch(pilot, asked: list[dict]):
    """Replay up and the first screen's prefetch over, then Explore opened: how many of
    ``asked`` came before Explore, and the page."""
    app = pilot.app
    await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
    await wait_for(
        pilot,
        lambda: all(w.is_finished for w in app.workers if w.group == "prefetch"),
        "the first screen's prefetch",
    )
    before_explore = len(asked)
    return before_explore, await open_explore(pilot)


async def test_the_first_screen_asks_its_pictures_once_before_explore_at_the_width_drawn(
    run_dir: Path,
):
    """The opening call's cards ask their views once, at the width they are drawn at, and
    the app has asked for them with the run, before Explore was built: the cards find them
    in the client's cache. (Laid out at even widths first, the cards asked at half the
    screen, then at their own; asked only once Explore was laid out, they came a round
    trip and a frame later.)"""
    app = make_app(run_dir)
    asked = count_requests_from_the_start(app)
    async with app.run_test(size=(120, 40)) as pilot:
        before_explore, page = await explore_after_the_prefetch(pilot, asked)
        cards = page.inspector.cards
        await wait_for(pilot, lambda: all(c.has_data for c in cards), "the cards")
        tensors = {c.ref.entry["id"] for c in cards if c.ref is not None}
        views = [
            (i, a)
            for i, a in enumerate(asked)
            if a["method"] == "view" and a["tensor"] in tensors and a["batch"] == app.batch
        ]
        assert len(views) == len(cards) == len(tensors)  # each asked once
        assert all(i < before_explore for i, _ in views)  # with the run, not by the page
        assert {a["width"] for _, a in views} == {cards[0].picture_width()}
        assert page.inspector.lines.card_width() == page.inspector.lines.size.width > 0
        # The layer view under the cards came with them.
        call = page.inspector.selection.call
        layer = [i for i, a in enumerate(asked) if a["method"] == "on_image" and a["call"] == call]
        assert layer and layer[0] < before_explore


async def test_a_page_is_composed_with_its_tab_bar_and_status_line(run_dir: Path, monkeypatch):
    """Explore's first layout is its last: the tab bar and the status line are there from
    the page's compose (mounted after the switch, they moved every pane a row down in a
    second layout), and the tab bar's key hints follow the focus `_start` gives the tree."""
    from tvis.tui.pages.explore import ExplorePage
    from tvis.tui.widgets.page_tabs import PageTabs
    from tvis.tui.widgets.status_line import StatusLine

    laid_out: list[tuple[int, int]] = []
    lay_out = ExplorePage._refresh_layout  # Textual's (private): the screen's layout

    def recorded(page: ExplorePage, *args, **kwargs) -> None:
        laid_out.append((len(page.query(PageTabs)), len(page.query(StatusLine))))
        lay_out(page, *args, **kwargs)

    monkeypatch.setattr(ExplorePage, "_refresh_layout", recorded)
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await pilot.press("2")  # at once, as the bench does: Explore is not built ahead
        page = await open_explore(pilot)
        assert "explore" not in app.ahead.built
        assert laid_out and set(laid_out) == {(1, 1)}  # from the first layout on
        assert page.calls.region.y == 2  # under the tab bar and the pane bar
        tabs = page.query_one(PageTabs)
        assert tabs.titles[tabs.current or 0] == "Explore"
        await wait_for(pilot, lambda: "j down" in str(tabs.render()), "the tree's keys")
        assert page.focused is page.calls.call_tree
        assert len(app.screen.query(PageTabs)) == 1  # not mounted a second time


async def test_a_first_visit_draws_nothing_while_the_switch_holds_the_display(
    run_dir: Path, monkeypatch
):
    """``switch_mode`` holds the display for the switch — on a first visit until the page
    has mounted, not for Textual's 50 ms (``delay_update``'s timer: the page, mounted in
    20–30 ms, was drawn at 50) — and a layout inside the hold still rendered the whole
    page, 30–40 ms of the app's thread for a frame the app then dropped. Pins the private
    bits ``Page`` uses: ``Screen._compositor_refresh``, ``App._batch_count``."""
    from textual._compositor import Compositor

    from tvis.tui.pages.page import Page

    app = make_app(run_dir)
    renders: list[tuple[str, int]] = []
    render_update = Compositor.render_update

    def recorded(compositor, *args, **kwargs):
        screen = app.screen
        if isinstance(screen, Page) and compositor is screen._compositor:
            renders.append((type(screen).__name__, app._batch_count))
        return render_update(compositor, *args, **kwargs)

    monkeypatch.setattr(Compositor, "render_update", recorded)
    timers: list[str] = []
    set_timer = app.set_timer

    def timed(delay, callback=None, *, name=None, **kwargs):
        timers.append(name or "")
        return set_timer(delay, callback, name=name, **kwargs)

    monkeypatch.setattr(app, "set_timer", timed)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await pilot.press("2")
        await open_explore(pilot)
        assert "explore" not in app.ahead.built
        assert ("ExplorePage", 0) in renders  # drawn once the hold ended
        assert [r for r in renders if r[1]] == []  # nothing rendered inside it
        # Held until the page had mounted (20–30 ms), not by Textual's 50 ms timer.
        assert "delay_update" not in timers
        assert app._batch_count == 0


def test_the_tab_bar_looks_each_page_module_up_once(monkeypatch):
    """Which pages are installed is looked up once per process: the tab bar asks at every
    refresh, a dozen times on the way to the first screen, and each lookup of a page not
    imported yet searched the import path again."""
    import importlib.util

    from tvis.tui.pages import pages_for

    pages_for(True, ranks=2)  # every page looked up (once, whichever test asked first)
    looked_up: list[str] = []
    find_spec = importlib.util.find_spec

    def counting(name, *args, **kwargs):
        looked_up.append(name)
        return find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", counting)
    listed = [spec.id for spec in pages_for(True, ranks=2)]
    assert listed == ["replay", "explore", "loss", "weights", "insights", "ranks", "live"]
    assert [spec.id for spec in pages_for(False)] == ["live"]
    assert looked_up == []


async def test_the_run_pages_tabs_are_written_before_the_first_page_is_built(run_dir: Path):
    """The tab bar with the run's pages reaches the terminal before the first page's build,
    which holds the display until the page is drawn: a page's number can be pressed while
    Replay is built, and Explore then follows its build without a Replay frame."""
    from tvis.tui.app import TvisApp

    app = make_app(run_dir)
    events: list[str] = []
    display = app._display

    def spy_display(screen, renderable):
        if app.run_name is not None and not events:
            events.append(f"written {type(screen).__name__}")
        return display(screen, renderable)

    def spy_build(spec):
        events.append(f"built {spec.id}")
        return TvisApp._build_page(app, spec)

    app._display = spy_display
    app._build_page = spy_build
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        assert events[:2] == ["written Screen", "built replay"]


async def test_a_page_key_waiting_when_the_run_s_tabs_are_written_is_the_page_shown(
    run_dir: Path,
):
    """A `2` already waiting for the app when the run's tabs are written (answers asked
    ahead, the tabs come early) shows Explore: the first page, whose build was put after
    that write, does not open over it."""
    app = make_app(run_dir)
    loaded = app._run_loaded

    def loaded_then_key(run, info) -> None:
        loaded(run, info)
        app.simulate_key("2")  # in the queue before the refresh that builds the first page

    app._run_loaded = loaded_then_key
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "explore", "Explore")
        await pilot.pause(0.5)  # where the first page, opened after the tabs, would come
        assert app.current_mode == "explore"


async def test_a_page_key_pressed_while_the_first_page_imports_builds_that_page_alone(
    run_dir: Path, monkeypatch
):
    """The first page's module (numpy, the picture kit: the warm thread's 0.1–0.2 s at a
    start) is waited for off the app's loop: a `2` pressed at the tabs meanwhile is handled
    then, Explore is built and shown, and Replay, no longer wanted, is not built behind it
    (the key waited for Replay's import and build, then Explore's)."""
    import asyncio

    import tvis.tui.app as app_module

    imported = app_module.imported
    release = asyncio.Event()

    async def replay_held(module: str) -> None:
        if module == "tvis.tui.pages.replay":
            await release.wait()
        await imported(module)

    monkeypatch.setattr(app_module, "imported", replay_held)
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "1 Replay" in screen_text(app), "the run's tabs")
        await pilot.press("2")
        await open_explore(pilot)
        release.set()
        await pilot.pause(0.2)  # the first page's worker goes on: it finds a page chosen
        assert app.current_mode == "explore"
        assert not app.page_built("replay")


async def test_the_first_screen_s_tree_rows_are_asked_with_the_run(run_dir: Path):
    """The tree opens its first interesting root: that root's children are on the first
    screen, and are asked with the run, beside the roots and the root's record (asked by
    the tree once Explore was up, they came a round trip after its first frame)."""
    app = make_app(run_dir)
    asked = count_requests_from_the_start(app)
    async with app.run_test(size=(120, 40)) as pilot:
        before_explore, page = await explore_after_the_prefetch(pilot, asked)
        opened = page.calls.call_tree.cursor_node
        assert opened is not None and opened.is_expanded and opened.children
        call = opened.data.call.id
        trees = [i for i, a in enumerate(asked) if a["method"] == "calls"]
        assert [asked[i]["parent"] for i in trees if i < before_explore] == [-1, call]
        assert all(asked[i]["parent"] != call for i in trees if i >= before_explore)


async def test_a_first_visit_draws_the_cards_before_it_mounts_the_layer_views(run_dir: Path):
    """The layer views (≈ 20 widgets, under the cards of a model call) are mounted after the
    first frame of a first visit, and then show the call's layer: the tree and the cards
    are not drawn a layout later for them (the cards, when at hand, in a frame without
    them). A page built ahead mounts them with its build
    (hidden, nobody waits), so its first visit mounts nothing."""
    from textual._compositor import Compositor

    from tvis.tui.pages.explore import ExplorePage

    app = make_app(run_dir)
    frames: list[tuple[bool, bool]] = []  # per Explore frame: cards drawn, views mounted
    render_update = Compositor.render_update

    def recorded(compositor, *args, **kwargs):
        page = app.screen
        if isinstance(page, ExplorePage) and compositor is page._compositor:
            cards = page.inspector.cards
            drawn = bool(cards) and all(c.has_data for c in cards)
            frames.append((drawn, page.inspector.layer_views.is_attached))
        return render_update(compositor, *args, **kwargs)

    Compositor.render_update = recorded
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
            await pilot.press("2")  # at once: Explore is not built ahead
            page = await open_explore(pilot)
            views = page.inspector.layer_views
            await wait_for(pilot, lambda: views.ready and views.display, "the layer views")
            assert views.shown_layer is not None
            assert views.shown_layer.call == page.inspector.selection.call
            assert "explore" not in app.ahead.built
            assert frames and not frames[0][1]  # not in the page's first frame
            assert any(drawn and not mounted for drawn, mounted in frames) or not frames[0][0]
    finally:
        Compositor.render_update = render_update

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(
            pilot,
            lambda: "explore" in app.ahead.built and app.page_screens["explore"].is_mounted,
            "Explore built ahead",
        )
        page = app.page_screens["explore"]
        views = page.inspector.layer_views
        await wait_for(pilot, lambda: views.ready, "the layer views, mounted with the build")
        assert page is not app.screen and views.shown_layer is not None


async def test_replay_s_pictures_are_not_prefetched_once_another_page_was_chosen(
    run_dir: Path,
):
    """The first page's pictures are asked for as the run loads, once Replay's module is
    imported (on a thread, behind the warm one, so the app's loop reads keys meanwhile). A
    page's number pressed before that shows another page: Replay's pictures are not asked
    for then, and are not decoded under that page's build."""
    import asyncio
    import threading

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await wait_for(
            pilot,
            lambda: not any(t.name == "tvis-prefetch-replay" for t in threading.enumerate()),
            "the app's own prefetch of Replay",
        )
        data, asked = app.data, []
        prefetch = data.prefetch
        data.prefetch = lambda method, **params: (
            asked.append(method),
            prefetch(method, **params),
        )[1]
        for chosen, prefetched in (("explore", False), ("replay", True)):
            asked.clear()
            app._page_wanted = chosen
            await asyncio.to_thread(app._prefetch_replay, app.run_name, app.sample, app.batch)
            assert ("thumbs" in asked) == prefetched, chosen


async def test_a_fault_opening_the_first_page_is_said_and_the_viewer_goes_on(run_dir: Path):
    """The first page opens from a worker: a fault there (here, the mode switch itself) is
    an internal error in a sentence on screen, as a reply's fault is, not a worker failing
    in silence; the tabs still answer."""
    app = make_app(run_dir)
    switch = app.switch_mode
    failures = []

    def failing_once(mode: str):
        if not failures:
            failures.append(mode)
            raise RuntimeError("switch refused")
        return switch(mode)

    app.switch_mode = failing_once
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.internal_errors, "the fault said")
        assert app.internal_errors == ["first page: RuntimeError: switch refused"]
        assert failures == ["replay"]
        await pilot.press("2")
        await open_explore(pilot)


async def test_a_first_page_due_as_the_app_closes_is_not_opened(run_dir: Path):
    """The viewer closed just as the run's tabs were written (a `q` then, a test's end):
    the first page's worker, started after the refresh that wrote them, ran while Textual
    closed the app's screens, and the page it opened was a screen stack added under that
    loop ("dictionary changed size during iteration", a traceback on exit). Once the app
    is closing, no page is opened."""
    import asyncio

    app = make_app(run_dir)
    run_worker = app.run_worker
    started = []

    def started_as_the_app_closes(work, *args, **kwargs):
        if kwargs.get("group") != "first-page":
            return run_worker(work, *args, **kwargs)

        async def once_closing() -> None:
            while app.is_running:
                await asyncio.sleep(0.002)
            started.append(run_worker(work, *args, **kwargs))

        started.append(asyncio.ensure_future(once_closing()))

    app.run_worker = started_as_the_app_closes
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: started, "the first page's worker asked for")
    await asyncio.sleep(0.1)  # the worker runs its course
    assert len(started) == 2  # it did start, as the app closed
    assert not app.page_built("replay")
    assert app.internal_errors == []  # nor a mode switched to among closed screens
