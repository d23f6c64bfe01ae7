"""Pages off screen follow the app only when shown again: a batch switch asks the agent
nothing for them, and a page shown again draws the batch of now, never the one it was left
on."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest
from test_terminal import STRAY_ESCAPES, TVIS, Tmux
from viewer_support import (
    count_requests,
    goto_page,
    make_app,
    no_quiet_spell,
    screen_text,
    wait_for,
)

LOSS_ASKS = {"loss_detail", "sample_table"}
"""What the Loss page asks the agent for a batch (it shows, or fetches beside it)."""


async def _settled(pilot, app) -> None:
    await pilot.pause(0.1)
    await wait_for(
        pilot,
        lambda: not app.data.busy and all(w.is_finished for w in app.workers),
        "the viewer idle",
    )


async def _visit_all(pilot, app) -> None:
    """Explore, Loss, Weights and Insights, each until its answers are in; then Loss."""
    for page_id in ("explore", "loss", "weights", "insights", "loss"):
        await goto_page(pilot, page_id)
        await _settled(pilot, app)


async def test_a_batch_switch_on_loss_asks_nothing_for_the_pages_visited_before(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await _visit_all(pilot, app)
        asked = count_requests(app)
        with no_quiet_spell(app):  # hidden pages catch up in one: they are not the key's
            await pilot.press("full_stop")
            await _settled(pilot, app)
        # Loss's own (the batch after the new one, fetched once it rests), nothing else; once
        # it rests, also what its `u` shows: its loss call's record and cards, in the
        # background (a loaded machine gets there before the viewer is idle).
        loss_call = app.screen.view.detail["call"]["id"]
        own = [
            a
            for a in asked
            if a["method"] in LOSS_ASKS
            or (a["method"] == "call" and a.get("call") == loss_call and a.get("background"))
            or (a["method"] == "view" and a.get("background"))
        ]
        assert own == asked, asked
        assert app.internal_errors == []


async def test_a_page_shown_again_draws_the_batch_switched_to_while_it_was_hidden(
    run_dir: Path,
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await _visit_all(pilot, app)
        left_on = app.batch
        await pilot.press("full_stop")
        now = app.batch
        assert now != left_on
        await _settled(pilot, app)
        await goto_page(pilot, "explore")
        await pilot.pause()  # the first frame after the switch
        first = screen_text(app)
        assert f"batch {now} · " in first and f"batch {left_on} · " not in first, first
        page = app.explore_page()
        await wait_for(pilot, lambda: page.calls.call_tree.batch_index == now, "the tree of now")
        await goto_page(pilot, "weights")
        step = app.current_step
        await pilot.pause()
        assert f"step {step} (" in screen_text(app)
        assert app.internal_errors == []


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_in_a_terminal_explore_shown_after_a_switch_on_loss_shows_the_new_batch(
    run_dir: Path, tmp_path: Path
):
    term = Tmux(tmp_path, f"{TVIS} tui {shlex.quote(str(run_dir))}")
    try:
        term.wait("paused")
        term.keys("2")
        term.wait("batch 0 · ")
        term.keys("3")
        term.wait("Loss · batch 0")
        term.keys(".")
        term.wait("Loss · batch 1")
        term.keys("2")
        screen = term.wait("batch 1 · ")
        assert "batch 0 · " not in screen, screen
        term.keys("q")
        screen = term.wait("TVIS-EXIT=0")
        assert "Traceback" not in screen and not STRAY_ESCAPES.search(screen), screen
    finally:
        term.close()
