"""Replay's keys that bring data draw what was fetched while the cursor rested: ``v`` (the
layer's Neurons and Stats views), ``end`` and ``.`` (the last and the next batch's cards and
layer thumbnails).
After a rest they ask the agent for nothing they show, and their screen is the screen of the
same keys without the rest."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import record_example
from test_replay import open_replay, seek_to
from viewer_support import (
    count_requests,
    count_requests_from_the_start,
    make_app,
    screen_text,
    wait_for,
)

from tvis.tui.pages import replay
from tvis.tui.widgets.layer_stack import LayerStack
from tvis.tui.widgets.layer_views import NeuronsView, StatsView
from tvis.tui.widgets.replay_cards import InputCard

SHOWN_BY_END = ("pipeline", "sample_table", "thumbs")
"""What the cards and the layer stack ask for a batch."""


REST_S = 0.5
"""A rest longer than ``replay.BESIDE_AFTER_S``."""


async def _rested(pilot, app) -> None:
    """Past the rest after which the page fetches ahead, and that fetch done."""
    await pilot.pause(REST_S)
    # Under load the rest's timer can fire well after ``REST_S`` (a test's cold keys set a
    # rest no test waits out).
    await wait_for(
        pilot,
        lambda: app.screen._beside_timer is None or replay.BESIDE_AFTER_S > REST_S,
        "the rest's timer",
    )
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "the prefetch")
    await wait_for(pilot, lambda: not app.data.busy, "the agent's answers")
    # The status line's "waiting for …" cue of a slow answer (a loaded machine) goes at the
    # link's next check: the screens compared are those of a link at rest.
    await wait_for(pilot, lambda: not app.link_wait, "the link at rest")


def _asked_for(asked: list[dict], methods: tuple[str, ...], **where) -> list[dict]:
    """The requests among ``asked`` (the key's own, not the background's) for ``methods``
    with the parameters ``where``."""
    return [
        a
        for a in asked
        if not a.get("background")
        and a["method"] in methods
        and all(a.get(k) == v for k, v in where.items())
    ]


async def _views_then_end(pilot, app, rested: bool) -> tuple[list[list[dict]], list[str]]:
    """On a layer: ``v`` (Neurons), ``v`` (Stats), then ``end``, each after a rest when
    ``rested``; per key the requests it sent and the screen once it is drawn."""
    page = await open_replay(pilot)
    event = await seek_to(pilot, page, "features.1.0")
    await wait_for(pilot, lambda: "mean over channels" in screen_text(app), "On image")
    sent, screens = [], []
    neurons, stats = page.query_one(NeuronsView), page.query_one(StatsView)
    drawn = {
        "v1": lambda: neurons.last_reply is not None,
        "v2": lambda: stats.card is not None and stats.card.card.has_data,
        "end": lambda: (
            page.current_event().batch != event.batch
            and page.query_one(InputCard).pipeline is not None
            and bool(page.query_one(InputCard).target)
        ),
    }
    for name, key in (("v1", "v"), ("v2", "v"), ("end", "end")):
        await _rested(pilot, app)
        asked = count_requests(app) if rested else []
        await pilot.press(key)
        await wait_for(pilot, drawn[name], f"{name} drawn")
        await _rested(pilot, app)
        sent.append(asked)
        screens.append(screen_text(app))
    return sent, screens


async def test_v_and_end_after_a_rest_ask_the_agent_nothing_they_show(run_dir: Path):
    app = make_app(run_dir)
    every = count_requests_from_the_start(app)  # the rest's fetches too: a failure's cause
    async with app.run_test(size=(120, 40)) as pilot:
        (on_neurons, on_stats, on_end), _ = await _views_then_end(pilot, app, rested=True)
        page = app.screen
        last = page.recording.event(page.recording.total - 1).batch
        first = page.recording.event(0).batch  # the layer's, features.1.0's
        # Seen in ~4 of 25 CI runs, never alone: `v` asked for Neurons again (a rest fired
        # before the layer views mounted: the test below). The message holds every neurons
        # request of the test, whole, for whoever catches it next.
        neurons = [a for a in every if a["method"] == "neurons"]
        assert _asked_for(on_neurons, ("neurons",), batch=first) == [], neurons
        assert _asked_for(on_stats, ("tensor", "view"), batch=first) == []
        assert _asked_for(on_end, SHOWN_BY_END, batch=last) == []
        assert app.internal_errors == []


async def test_a_rest_that_comes_before_the_layer_views_mount_still_fetches_what_v_shows(
    run_dir: Path,
):
    """On a loaded machine the rest's timer can fire before the layer views, mounted by the
    frame that set it, exist: the rest waits for them instead of forgetting their views
    (CI saw `v` ask for Neurons again after such a rest)."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        rec = page.recording
        page.seek(next(s for s in range(rec.total) if rec.event(s).name == "features.1.0"))
        views = page._views
        assert not views.ready  # mounted by the frame, composed a moment later
        page._beside_timer.stop()
        page._prefetch_beside()  # the rest, fired first
        await wait_for(pilot, lambda: "mean over channels" in screen_text(app), "On image")
        await _rested(pilot, app)
        asked = count_requests(app)
        await pilot.press("v")
        await wait_for(pilot, lambda: page.query_one(NeuronsView).last_reply is not None, "v")
        assert _asked_for(asked, ("neurons",)) == []
        assert app.internal_errors == []


async def test_the_replay_screen_after_prefetched_keys_is_the_screen_of_cold_ones(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (replay.BESIDE_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(replay, "BESIDE_AFTER_S", rest)
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            _, drawn = await _views_then_end(pilot, app, rested=False)
            screens.append(drawn)
            assert app.internal_errors == []
    assert screens[0] == screens[1]


def _pictures(asked: list[dict]) -> list[dict]:
    return [a for a in asked if a["method"] == "on_image"]


async def test_a_paused_replay_steps_asking_only_the_picture_it_draws(run_dir: Path):
    """Paused, a step asks for its own frame's picture, nothing ahead of it: the next key
    may go anywhere (what it will show is fetched in the background once the cursor rests)."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.1.0")
        await _rested(pilot, app)
        asked = count_requests(app)
        for _ in range(3):
            await pilot.press("l")
            drawn = page.current_event()
            await _rested(pilot, app)
            mine = [a for a in _pictures(asked) if not a.get("background")]
            assert {(a["batch"], a["call"]) for a in mine} <= {(drawn.batch, drawn.call)}
            asked.clear()
        assert app.internal_errors == []


async def test_a_playing_replay_asks_ahead_in_the_background_only_the_frames_it_plays(
    run_dir: Path,
):
    """Playing by phase, the pictures fetched ahead are those of the events play lands on
    (a phase's first), sent behind the frame's own requests; none of the events it skips."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await _rested(pilot, app)
        rec = page.recording
        while page.size_name != "phase":
            await pilot.press("z")
        landed, seq = set(), page.cursor
        while (following := rec.step(seq, "phase", 1)) != seq:
            seq = following
            landed.add((rec.event(seq).batch, rec.event(seq).call))
        asked = count_requests(app)
        await pilot.press("space")
        await wait_for(
            pilot,
            lambda: [a for a in _pictures(asked) if a.get("background")],
            "pictures fetched ahead while playing",
        )
        await pilot.press("space")
        ahead = [a for a in _pictures(asked) if a.get("background")]
        assert {(a["batch"], a["call"]) for a in ahead} <= landed
        assert app.internal_errors == []


async def test_the_next_and_previous_sample_after_a_rest_ask_the_agent_nothing_they_show(
    run_dir: Path,
):
    """`]` and `[` reload the event list for the new sample, then its cards and the layers'
    thumbnails: fetched while the cursor rested, the key draws them from the cache in one
    frame (it was a frame per answer)."""
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_replay(pilot)
        await seek_to(pilot, page, "features.1.0")
        size = app.batch_info["batch_size"]
        for key, sample in (("right_square_bracket", 2), ("left_square_bracket", 0)):
            for _ in range(2):  # `]` twice then `[` twice: samples 1, 2, then 1, 0
                await _rested(pilot, app)
                asked = count_requests(app)
                await pilot.press(key)
                shown = app.sample
                await wait_for(
                    pilot,
                    lambda shown=shown: (
                        page.query_one(LayerStack)._key[2] == shown
                        and page.query_one(InputCard).pipeline is not None
                    ),
                    f"sample {shown} drawn",
                )
                await _rested(pilot, app)
                assert _asked_for(asked, ("replay", *SHOWN_BY_END), sample=shown) == []
            assert app.sample == sample % size
        assert app.internal_errors == []


async def test_the_next_sample_drawn_from_the_cache_is_the_screen_of_a_cold_one(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (replay.BESIDE_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(replay, "BESIDE_AFTER_S", rest)
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_replay(pilot)
            await seek_to(pilot, page, "features.1.0")
            await _rested(pilot, app)
            await pilot.press("right_square_bracket")
            await wait_for(
                pilot,
                lambda page=page: (
                    page.query_one(LayerStack)._key[2] == 1
                    and bool(page.query_one(InputCard).target)
                ),
                "sample 1 drawn",
            )
            await _rested(pilot, app)
            screens.append(screen_text(app))
            assert app.internal_errors == []
    assert screens[0] == screens[1]


@pytest.fixture(scope="module")
def three_batches(tmp_path_factory) -> Path:
    """The image classifier over 3 steps: the next batch from the first is neither the
    first nor the last (what ``home`` and ``end`` fetch ahead)."""
    return record_example(tmp_path_factory.mktemp("three"), "image_classifier", "--steps", "3")


async def _next_batch(pilot, app) -> tuple[list[dict], str, int]:
    """Replay rested on its first screen, then `.`: what `.` asked, its screen once the
    next batch's cards are drawn, and that batch."""
    page = await open_replay(pilot)
    start = page.current_event().batch
    assert app.batch_indices.index(start) + 2 < len(app.batch_indices)  # not before `end`'s
    await _rested(pilot, app)
    asked = count_requests(app)
    await pilot.press("full_stop")
    await wait_for(
        pilot,
        lambda: (
            page.current_event().batch != start
            and page.query_one(InputCard).pipeline is not None
            and bool(page.query_one(InputCard).target)
        ),
        "the next batch drawn",
    )
    await _rested(pilot, app)
    return asked, screen_text(app), page.current_event().batch


async def test_the_next_batch_after_a_rest_asks_the_agent_nothing_it_shows(three_batches: Path):
    """`.` plays the next batch from its start: its cards and layer thumbnails, fetched
    while the cursor rested, are drawn from the client's cache (asked at the key, they
    were drawn a frame after it, "loading …" first)."""
    app = make_app(three_batches)
    async with app.run_test(size=(120, 40)) as pilot:
        asked, _, batch = await _next_batch(pilot, app)
        assert _asked_for(asked, SHOWN_BY_END, batch=batch) == []
        assert app.internal_errors == []


async def test_the_next_batch_s_screen_after_a_rest_is_the_screen_of_a_cold_one(
    three_batches: Path, monkeypatch: pytest.MonkeyPatch
):
    screens = []
    for rest in (replay.BESIDE_AFTER_S, 3600.0):  # prefetched, then never prefetched
        monkeypatch.setattr(replay, "BESIDE_AFTER_S", rest)
        app = make_app(three_batches)
        async with app.run_test(size=(120, 40)) as pilot:
            asked, screen, batch = await _next_batch(pilot, app)
            screens.append(screen)
            if rest == 3600.0:  # the cold key did ask for the batch's cards
                assert _asked_for(asked, SHOWN_BY_END, batch=batch)
    assert screens[0] == screens[1]
