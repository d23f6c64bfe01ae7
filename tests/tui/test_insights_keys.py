"""Insights' keys draw what was fetched while the page rested: `e` the run's projection
(fetched while another view is shown), Grad-CAM's `m` and `t` the next mode's maps and the
other class's. After a rest they ask the agent nothing, and their screens are the screens
of cold keys. Grad-CAM's grid keeps its thumbnails from one mode to the next."""

from __future__ import annotations

from pathlib import Path

import pytest
from viewer_support import count_requests, goto_page, make_app, screen_text, wait_for

from tvis.tui.pages import insights
from tvis.tui.picture import Picture
from tvis.tui.widgets.embeddings_view import EmbeddingsView
from tvis.tui.widgets.gradcam_view import GradcamView

REST_S = 0.6
"""Longer than ``insights.AHEAD_AFTER_S``."""


def _rest_timer_done(page) -> bool:
    """Whether the page's rest timer has fired (under load, well after ``REST_S``), or is
    set for a rest no test waits out."""
    return page._ahead_timer is None or insights.AHEAD_AFTER_S > REST_S


async def _embeddings_after_a_rest(pilot, app) -> tuple[list[dict], str]:
    """Insights on its first view, a rest, then `e`: what `e` asked, and the screen."""
    await goto_page(pilot, "insights")
    page = app.screen
    await wait_for(pilot, lambda: page.found is not None and page.shown_view, "the first view")
    assert page.shown_view != "embeddings"
    await pilot.pause(REST_S)
    await wait_for(pilot, lambda: _rest_timer_done(page), "the rest's timer")
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


async def _gradcam_rested(pilot, app):
    """Insights on Grad-CAM (the image classifier's first view), its map drawn, then a rest:
    the view."""
    await goto_page(pilot, "insights")
    page = app.screen
    await wait_for(pilot, lambda: page.shown_view == "gradcam", "the Grad-CAM view")
    view = page.query_one(GradcamView)
    await wait_for(pilot, lambda: view.reply is not None, "the map drawn")
    return view


def _drawn(view: GradcamView) -> bool:
    """Whether the Grad-CAM view shows its mode's answer (not a loading placeholder)."""
    if view.mode == "one":
        return view.reply is not None
    return not view.cue.waiting and bool(view.query(".thumb Picture"))


async def _rest(pilot, app) -> None:
    await pilot.pause(REST_S)
    await wait_for(pilot, lambda: _rest_timer_done(app.screen), "the rest's timer")
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
    await wait_for(pilot, lambda: not app.data.busy, "the agent's answers")
    # The status line's "waiting for …" cue of a slow answer goes at the link's next check.
    await wait_for(pilot, lambda: not app.link_wait, "the link at rest")


async def test_m_and_t_after_a_rest_ask_the_agent_nothing(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await _gradcam_rested(pilot, app)
        for key, mode in (("m", "samples"), ("m", "layers"), ("t", "layers"), ("m", "one")):
            await _rest(pilot, app)
            asked = count_requests(app)
            await pilot.press(key)
            assert view.mode == mode
            await pilot.pause(0.2)
            gradcam = [a for a in asked if a["method"].startswith("gradcam")]
            assert [a for a in gradcam if not a.get("background")] == [], key
        assert app.internal_errors == []


async def test_the_grad_cam_grid_keeps_its_thumbnails_and_the_map_its_drawing(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        view = await _gradcam_rested(pilot, app)
        overlay = view.query_one("#gradcam-overlay", Picture)
        drawn = overlay.has_data and overlay._content
        await pilot.press("m")  # samples of one layer
        await wait_for(pilot, lambda: view.query(".thumb Picture"), "the grid's thumbnails")
        await _rest(pilot, app)
        thumbs = list(view.query(".thumb Picture"))
        await pilot.press("m")  # every layer: as many thumbnails, the same widgets
        await _rest(pilot, app)
        assert list(view.query(".thumb Picture")) == thumbs
        await pilot.press("m")  # one sample again: the same answer, not drawn again
        await _rest(pilot, app)
        assert overlay._content is drawn
        assert app.internal_errors == []


async def test_the_grad_cam_screens_after_a_prefetch_are_the_screens_of_cold_keys(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (insights.AHEAD_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(insights, "AHEAD_AFTER_S", rest)
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            view = await _gradcam_rested(pilot, app)
            shown = []
            for _ in range(3):
                await _rest(pilot, app)
                await pilot.press("m")
                await _rest(pilot, app)
                await wait_for(pilot, lambda v=view: _drawn(v), "the maps drawn")
                await pilot.pause(0.2)
                shown.append(screen_text(app))
            screens.append(shown)
    assert screens[0] == screens[1]
