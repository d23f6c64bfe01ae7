"""Keys that bring a call the cursor is not beside, drawn from what was fetched while the
page rested: Explore's `end` and `home` (the tree's last and first rows) and Loss' `u` (the
loss call, in Explore's inspector). After a rest they ask the agent nothing in the
foreground, and the inspector shows the call they went to."""

from __future__ import annotations

from pathlib import Path

from viewer_support import count_requests, goto_page, make_app, open_explore, wait_for

from tvis.tui.widgets.source_view import SourcePane

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


async def test_s_and_d_after_a_rest_draw_the_source_without_asking_the_agent(run_dir: Path):
    """The Source pane's first opening, by `s` or by `d` on the selected call, shows its
    file within the key: the run's files and that file were fetched while the tree rested."""
    for key in ("s", "d"):
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_explore(pilot)
            defined = page._selection_file("def")
            assert defined is not None
            await _rested(pilot, app)
            asked = count_requests(app)
            await pilot.press(key)
            assert page.query_one(SourcePane).view.file == defined[0], key
            assert _foreground(asked) == [], key
            assert app.internal_errors == []
