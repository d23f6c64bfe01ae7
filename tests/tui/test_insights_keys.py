"""Insights' `e` draws the run's projection fetched while the page rested on another view:
after a rest it asks the agent nothing, and its screen is the screen of a cold `e`."""

from __future__ import annotations

from pathlib import Path

import pytest
from viewer_support import count_requests, goto_page, make_app, screen_text, wait_for

from tvis.tui.pages import insights
from tvis.tui.widgets.embeddings_view import EmbeddingsView

REST_S = 0.6
"""Longer than ``insights.AHEAD_AFTER_S``."""


async def _embeddings_after_a_rest(pilot, app) -> tuple[list[dict], str]:
    """Insights on its first view, a rest, then `e`: what `e` asked, and the screen."""
    await goto_page(pilot, "insights")
    page = app.screen
    await wait_for(pilot, lambda: page.found is not None and page.shown_view, "the first view")
    assert page.shown_view != "embeddings"
    await pilot.pause(REST_S)
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
    await wait_for(pilot, lambda: not app.data.busy, "the agent's answers")
    asked = count_requests(app)
    await pilot.press("e")
    view = page.query_one(EmbeddingsView)
    await wait_for(pilot, lambda: view.reply is not None, "the projection drawn")
    await pilot.pause(REST_S)
    return asked, screen_text(app)


async def test_e_after_a_rest_asks_the_agent_nothing_it_shows(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        asked, _ = await _embeddings_after_a_rest(pilot, app)
        assert [a for a in asked if a["method"] == "embeddings" and not a.get("background")] == []
        assert app.internal_errors == []


async def test_the_embeddings_screen_after_a_prefetch_is_the_screen_of_a_cold_one(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (insights.AHEAD_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(insights, "AHEAD_AFTER_S", rest)
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            asked, screen = await _embeddings_after_a_rest(pilot, app)
            screens.append(screen)
            if rest == 3600.0:  # the cold `e` did ask for the projection
                assert [a for a in asked if a["method"] == "embeddings"]
    assert screens[0] == screens[1]
