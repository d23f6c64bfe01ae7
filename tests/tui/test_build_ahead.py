"""Pages built ahead while the viewer is idle: a first visit is only a switch, a key keeps
them from starting, and nothing is asked of the agent twice."""

from __future__ import annotations

import subprocess
import sys
import time

from viewer_support import (
    count_requests,
    make_app,
    no_quiet_spell,
    node_named,
    open_explore,
    screen_text,
    showing,
    wait_for,
)

from tvis.tui import build_ahead


def spy_requests(app) -> list[tuple[str, str]]:
    """Every request the app sends the agent, as (method, its parameters), in order; a
    guess sent in the background (``Data.prefetch_later``) is named "METHOD (background)"."""
    sent: list[tuple[str, str]] = []
    dial = app.link.connector

    class Spy:
        def __init__(self, client):
            self.client, self.on_lost = client, None

        def call(self, method, **params):
            sent.append((method, repr(sorted(params.items()))))
            return self.client.call(method, **params)

        def call_background(self, method, **params):
            sent.append((f"{method} (background)", repr(sorted(params.items()))))
            return self.client.call_background(method, **params)

        def __getattr__(self, name):
            return getattr(self.client, name)

    app.link.connector = lambda: Spy(dial())
    return sent


async def test_a_page_built_ahead_is_only_switched_to_on_its_first_visit(run_dir):
    """Once Replay has settled, Explore is built, answered and laid out hidden; `2` then
    shows that very screen, complete, with no build and no new request. (Built before it
    is laid out, its cards first ask for 8-column views, as a hidden inspector's do.)"""
    app = make_app(run_dir)
    sent = spy_requests(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await wait_for(pilot, lambda: "explore" in app.ahead.built, "Explore built ahead")
        page = app.explore_page()
        await wait_for(
            pilot,
            lambda: (
                not app.ahead._unlaid
                and page.inspector.cards
                and all(card.has_data for card in page.inspector.cards)
            ),
            "Explore answered and laid out, hidden",
        )
        assert app.current_mode == "replay"
        assert page.inspector.size.width > 0  # laid out at the terminal's size
        builds: list[str] = []
        build = app._build_page
        app._build_page = lambda spec: builds.append(spec.id) or build(spec)  # type: ignore[method-assign]
        asked_before = len(sent)
        await pilot.press("2")
        assert await open_explore(pilot) is page
        await pilot.pause(0.3)
        assert builds == []
        # nothing it shows is asked again; once shown, what the next keys may show (the
        # batch beside, the rows beside the cursor) is guessed at, in the background only
        asked_since = sent[asked_before:]
        assert all(method.endswith(" (background)") for method, _ in asked_since), asked_since
        assert len(sent) == len(set(sent)), "a request was sent twice"
        assert app.internal_errors == []


async def test_every_page_is_built_ahead_once_in_turn_and_each_visit_finds_it(run_dir):
    """Explore first, then the tab bar's order; each page once; visiting each after that
    builds nothing, and no request was sent twice."""
    app = make_app(run_dir)
    sent = spy_requests(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        others = [p.id for p in app.pages() if p.id not in ("replay", "explore")]
        await wait_for(
            pilot,
            lambda: (
                len(app.ahead.built) == 1 + len(others)
                and not app.ahead._unlaid
                and not app.data.busy
            ),
            "every page built ahead",
            timeout=40,
        )
        assert app.ahead.built == ["explore", *others]
        screens = dict(app.page_screens)
        for n, spec in enumerate(app.pages(), start=1):
            await app.action_page(n)
            await pilot.pause(0.1)
            assert app.screen is screens[spec.id]
            assert app.screen.query("PageTabs") and app.screen.query("StatusLine")
        assert len(sent) == len(set(sent)), "a request was sent twice"
        assert app.internal_errors == []


async def test_keys_keep_pages_from_being_built_ahead_and_a_visit_then_builds_its_own(
    run_dir, monkeypatch
):
    """While keys come faster than the quiet spell nothing is built ahead (a key never
    waits behind a build it did not ask for); a page visited meanwhile is built then."""
    monkeypatch.setattr(build_ahead, "QUIET_S", 1.5)  # wide: two loaded cores
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await wait_for(pilot, lambda: not app.data.busy, "Replay's answers")
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline:
            await pilot.press("f12")  # a key bound to nothing: a user's, all the same
            await pilot.pause(0.1)
        assert app.ahead.built == []
        await pilot.press("2")
        page = await open_explore(pilot)
        assert app.ahead.built == [] and page is app.explore_page()
        await wait_for(pilot, lambda: "loss" in app.ahead.built, "the next page built ahead")
        assert app.internal_errors == []


def test_tvis_tui_moves_the_imports_out_of_the_collectors_reach_before_the_app_starts(
    run_dir,
):
    """What `tvis tui` imported lives as long as it does: frozen before the app runs, a
    full collection on the way to the first page scans the app's objects, not textual's
    (60–120 ms each before); the app freezes its pages once they settle, and runs the full
    collections itself, in quiet spells (``quiet_collect``). The start runs with the
    collector off (the app's first quiet spell turns it on), and it is on again once the
    app has ended."""
    code = (
        "import gc, sys\n"
        "from tvis.tui.app import TvisApp\n"
        "seen = {}\n"
        "def run(self):\n"
        "    seen['frozen'] = gc.get_freeze_count()\n"
        "    seen['freezes'] = self.ahead.freezes\n"
        "    seen['collects'] = self.collects_quietly\n"
        "    seen['held'] = self.collector.start_held and not gc.isenabled()\n"
        "    self.link.close()\n"
        "TvisApp.run = run\n"
        "from tvis import cli\n"
        f"cli.main(['tui', {str(run_dir)!r}])\n"
        "assert seen['frozen'] > 10_000 and seen['freezes'] and seen['collects'], seen\n"
        "assert seen['held'] and gc.isenabled(), seen\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr


async def test_a_page_built_ahead_follows_a_new_batch_when_quiet_not_under_the_key(run_dir):
    """`.` and `]` on Replay reload no hidden page under the key (its watchers, and its
    widgets', are held); the page catches up at the next quiet spell, and its visit shows
    the new batch."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await wait_for(pilot, lambda: "explore" in app.ahead.built, "Explore built ahead")
        await wait_for(
            pilot, lambda: not app.ahead._unlaid and not app.data.busy, "Explore laid out"
        )
        assert app.batch_count > 1
        before = app.batch
        with no_quiet_spell(app):
            await pilot.press(".")  # the next batch, as a user asks for it
            assert app.batch != before and "explore" in app.ahead.held
            held = app.ahead.held["explore"]
            assert held.pending  # held, not run under the key
            pending = len(held.pending)
            await pilot.press("]")  # the next sample: the hidden inspector's own watcher too
            assert app.sample == 1 and len(held.pending) > pending
        await wait_for(pilot, lambda: not app.ahead.held["explore"].pending, "caught up")
        await app.action_page(2)
        await open_explore(pilot)
        assert not held.holding and "explore" not in app.ahead.held  # shown: it follows the app
        await wait_for(pilot, lambda: f"batch {app.batch} · " in screen_text(app), "new batch")
        assert app.internal_errors == []


async def test_a_page_left_holds_its_watchers_until_a_quiet_spell_or_its_visit(run_dir):
    """Explore, visited and left for Replay, reloads nothing under `]` there; it catches up
    at the next quiet spell, and its visit shows the new sample, following the app again."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await app.action_page(1)
        await wait_for(pilot, lambda: app.current_mode == "replay", "back on Replay")
        held = app.ahead.held["explore"]
        assert held.holding
        with no_quiet_spell(app):
            await pilot.press("]")  # the next sample
            assert app.sample == 1 and held.pending  # held, not run under the key
        await wait_for(pilot, lambda: not held.pending, "caught up when quiet")
        await app.action_page(2)
        await wait_for(pilot, lambda: app.current_mode == "explore", "Explore again")
        assert not held.holding
        await pilot.press("]")  # on screen: followed at once
        assert app.sample == 2 and not held.pending
        await wait_for(pilot, lambda: "sample 2" in screen_text(app), "the new sample shown")
        assert page is app.screen and app.internal_errors == []


async def test_a_point_chosen_on_embeddings_asks_nothing_of_the_hidden_pages_under_the_key(
    run_dir,
):
    """j on Insights' Embeddings makes every page follow the next sample: the pages behind
    it (Replay, Explore) ask the agent for it only once the keys rest."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await app.action_page([p.id for p in app.pages()].index("insights") + 1)
        await wait_for(pilot, lambda: app.screen.found, "the Insights page")
        await pilot.press("e")
        view = await wait_for(pilot, lambda: app.screen.current_view(), "the embeddings view")
        await wait_for(pilot, lambda: view.reply, "the embeddings")
        await wait_for(pilot, lambda: not app.data.busy, "the page settled")
        asked = count_requests(app)
        sample = app.sample
        with no_quiet_spell(app):
            await pilot.press("j")
            assert app.sample != sample and asked == []
        await wait_for(
            pilot, lambda: [a for a in asked if a.get("sample") == app.sample], "caught up"
        )
        assert app.internal_errors == []


async def test_the_source_highlighter_and_then_the_panes_are_built_in_quiet_spells(run_dir):
    """Once Explore is built, quiet spells build the source highlighter's lexer (not under
    the first `s`), then, after the help, each pane hidden and loaded with the batch on
    screen: a pane's first key then only shows it, mounting nothing and asking the agent
    nothing, and the screen shows what the pane was loaded with."""
    from tvis.tui.pages.explore import PANES
    from tvis.tui.widgets.layers_table import LayersTable

    app = make_app(run_dir)
    sent = spy_requests(app)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await wait_for(pilot, lambda: page._highlighter_warm, "the highlighter", timeout=60)
        await wait_for(
            pilot,
            lambda: all(page._pane(name) for name in PANES) and not page._mounting,
            "every pane built ahead",
            timeout=60,
        )
        assert page.visible_panes() == ["calls", "inspector"]
        assert not any(page._pane(name).display for name in PANES[2:])
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count > 0, "the layers loaded, hidden")
        widgets = len(list(page.walk_children()))
        sent.clear()
        with no_quiet_spell(app):
            await pilot.press("y")
            await wait_for(pilot, lambda: page._focused_pane() == "layers", "the layers pane")
            await pilot.pause(0.2)
            assert len(list(page.walk_children())) == widgets
            assert [method for method, _ in sent if method == "layers"] == []
            assert showing(app, "Linear") and table.region.width > 0
        assert app.internal_errors == []


async def test_the_help_is_drawn_ahead_in_quiet_slices_and_a_first_question_mark_draws_nothing(
    run_dir,
):
    """Once Explore is built, quiet spells mount the help hidden and draw its sections a
    slice at a time, at the width it will show them: its first `?` on any page only stacks
    them."""
    from tvis.tui.help import HelpScreen

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)

        def drawn():
            if not app.is_screen_installed("help"):
                return None
            help = app.get_screen("help")
            drawings = list(help._drawings.values())
            if drawings and drawings[0].draws == len(drawings[0].sections):
                return help, drawings[0]
            return None

        help, drawing = await wait_for(pilot, drawn, "the help drawn ahead", timeout=60)
        assert app.screen is not help  # hidden until asked for
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: app.screen is help, "the help shown")
        await wait_for(pilot, lambda: showing(app, "tree.expand"), "its keys")
        assert list(help._drawings.values()) == [drawing] and drawing.draws == len(drawing.sections)
        assert isinstance(help, HelpScreen) and app.internal_errors == []


async def test_quiet_spell_work_waits_while_a_key_is_waiting_for_the_app(run_dir):
    """A key the driver has handed the app, not handled yet, holds the quiet-spell work back
    (no page is built under it) and starts the wait for quiet again; once handled, the work
    goes on. (``input_waiting`` reads the app's queue: Textual's insides.)"""
    from textual import events

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await wait_for(pilot, lambda: not app.data.busy, "Explore's answers in")
        assert not build_ahead.input_waiting(app)
        app.post_message(events.Key("x", "x"))  # as the driver posts it; handled at the next turn
        assert build_ahead.input_waiting(app)
        app.ahead.quiet_since = time.monotonic() - 60  # long quiet, were it not for the key
        built = list(app.ahead.built)
        app.ahead.tick()
        assert app.ahead.built == built and time.monotonic() - app.ahead.quiet_since < 1
        await pilot.pause()
        assert not build_ahead.input_waiting(app)


async def test_a_page_laid_out_ahead_is_laid_out_once_on_its_first_visit(run_dir):
    """A page built ahead is laid out in one quiet slice and, in the next, laid out again
    where its widgets' answers to the first layout's resize events asked for it (a hidden
    screen never lays itself out), then rendered: the key that shows it lays it out once
    at most (it was twice: the rest of that cascade, then the tab bar's own layout)."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await wait_for(pilot, lambda: "loss" in app.ahead.built, "Loss built ahead", timeout=60)
        loss = app.page_screens["loss"]
        await wait_for(
            pilot,
            lambda: "loss" not in app.ahead._unlaid and not app.data.busy,
            "Loss laid out and rendered, hidden",
            timeout=60,
        )
        assert app.screen is not loss and id(loss) not in app._laid_out
        layouts: list[object] = []
        lay_out = loss._refresh_layout
        loss._refresh_layout = lambda *a, **k: layouts.append(a) or lay_out(*a, **k)
        await pilot.press("3")
        await wait_for(pilot, lambda: app.screen is loss, "the Loss page")
        await pilot.pause(0.3)
        # None since a layout runs its follow-ups in its own pass (``Page._refresh_layout``):
        # the one laid out ahead left nothing for the key to do but draw.
        assert len(layouts) <= 1
        assert "F.cross_entropy" in screen_text(app)  # and what it drew is the page
        assert app.internal_errors == []


async def test_a_page_mounted_whole_is_shown_without_textuals_repaint_hold(run_dir):
    """Textual's ``switch_mode`` holds every repaint for 50 ms (``App.delay_update``) to mask
    a screen composing. A page built ahead, or visited before, has nothing to mask: its
    switch holds nothing, so its frame is drawn at the key, not 50 ms after it."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await wait_for(pilot, lambda: "loss" in app.ahead.built, "Loss built ahead", timeout=60)
        await wait_for(
            pilot, lambda: "loss" not in app.ahead._unlaid, "Loss laid out ahead", timeout=60
        )
        ids = [p.id for p in app.pages()]
        loss = app.page_screens["loss"]
        await app.action_page(ids.index("loss") + 1)  # its first visit
        assert app.screen is loss and app._batch_count == 0
        await pilot.pause()
        await app.action_page(ids.index("explore") + 1)  # a page visited before
        assert app.current_mode == "explore" and app._batch_count == 0
        await pilot.pause(0.2)
        assert "Explore" in screen_text(app) and app.internal_errors == []


async def test_the_help_is_drawn_ahead_after_explore_and_before_the_other_pages(run_dir):
    """`?` is among the first keys on the first page: its drawing comes right after
    Explore's build, then the other pages are built, each after a whole quiet spell."""
    app = make_app(run_dir)
    built_with_help: list[tuple[str, bool]] = []  # each page built ahead, the help drawn then
    build = app.ahead.build

    def help_drawn() -> bool:
        if not app.is_screen_installed("help"):
            return False
        drawings = list(app.get_screen("help")._drawings.values())
        return bool(drawings) and drawings[0].draws == len(drawings[0].sections)

    def spy(spec) -> None:
        built_with_help.append((spec.id, help_drawn()))
        build(spec)

    app.ahead.build = spy
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        others = [p.id for p in app.pages() if p.id not in ("replay", "explore")]
        await wait_for(
            pilot, lambda: len(built_with_help) == 1 + len(others), "every page built", timeout=60
        )
        assert built_with_help == [("explore", False), *((p, True) for p in others)]
        assert app.internal_errors == []


async def test_the_help_is_arranged_ahead_for_the_page_on_screen_and_its_question_mark_lays_out_once(
    run_dir,
):
    """Drawn ahead, the help is also stacked in the order of the page on screen and laid out
    hidden until its layout settles: `?` there lays it out once, one frame (its first
    layout had cascaded under the key, the table's height then the scroll bars': three)."""
    from tvis.tui.help import ids_on_screen, section_order

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        # What the page shows, whole: the layer views come a frame after the cards, and
        # their keys are among those the help is ordered by.
        views = page.inspector.layer_views
        await wait_for(pilot, lambda: views.ready and views.region, "the layer views")

        def arranged():
            if not app.is_screen_installed("help"):
                return None
            help = app.get_screen("help")
            visual = help.query_one("#help-table").visual
            order = section_order(ids_on_screen(page))
            if getattr(visual, "order", None) == order and not help._layout_required:
                return help
            return None

        help = await wait_for(pilot, arranged, "the help arranged for Explore", timeout=60)
        # What `?` itself lays out: the panes built and drawn ahead after the help, in
        # quiet spells that could meet the key, are done first.
        await wait_for(pilot, lambda: not page.panes_left_ahead(), "the panes ahead", 30)
        await wait_for(pilot, arranged, "the help still arranged for Explore")
        layouts: list[object] = []
        lay_out = help._refresh_layout
        help._refresh_layout = lambda *a, **k: layouts.append(a) or lay_out(*a, **k)
        with no_quiet_spell(app):
            await pilot.press("question_mark")
            await wait_for(pilot, lambda: app.screen is help, "the help shown")
            await wait_for(pilot, lambda: showing(app, "tree.expand"), "its keys")
            await pilot.pause(0.3)
        assert len(layouts) == 1
        assert app.internal_errors == []


async def test_a_source_pane_built_ahead_opens_on_the_selection_made_since(run_dir):
    """Built ahead, the Source pane opened on the selection of then (the model, model.py);
    the tree moved to the loss call while it was hidden: its first `s` shows the loss's
    call site in train.py, as a pane built by that key would."""
    from tvis.tui.widgets.source_view import SourceView

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await wait_for(
            pilot, lambda: page._pane("source") and not page._mounting, "Source built", timeout=60
        )
        view = page.query_one(SourceView)
        await wait_for(pilot, lambda: view.file == "model.py", "the model's definition")
        loss = await wait_for(pilot, lambda: node_named(page, "F.cross_entropy"), "the loss")
        page.calls.call_tree.move_cursor(loss)
        await wait_for(pilot, lambda: page.selection.row.get("name") == "F.cross_entropy", "it")
        await pilot.press("s")
        await wait_for(pilot, lambda: view.file == "train.py", "the loss call's file")
        assert view.cursor + 1 == page.selection.row["site"][1]
        assert app.internal_errors == []
