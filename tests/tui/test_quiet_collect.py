"""The cyclic collector's full passes run in the viewer's quiet spells, not under its keys."""

from __future__ import annotations

import gc
import weakref

from viewer_support import make_app, wait_for

from tvis.tui import quiet_collect


class FullPasses:
    """Counts the generation-2 collections while it is entered (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.count = 0

    def _seen(self, phase: str, info: dict) -> None:
        if phase == "stop" and info["generation"] == 2:
            self.count += 1

    def __enter__(self) -> FullPasses:
        gc.callbacks.append(self._seen)
        return self

    def __exit__(self, *_: object) -> None:
        gc.callbacks.remove(self._seen)


class Node:
    """A cycle's link: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


async def test_full_collections_wait_for_a_quiet_spell_then_run(run_dir):
    """A screen that makes many lasting objects between keys (a 20,000-call batch's) gets
    no full collection under it, however many young passes came before; the next quiet
    spell runs it, and it frees the cycles that died meanwhile. The app's end hands the
    full passes back to CPython."""
    thresholds = gc.get_threshold()
    app = make_app(run_dir)
    app.collects_quietly = True
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.collector.running, "the collector started")
        assert gc.get_threshold()[2] == quiet_collect.OUT_OF_REACH
        assert gc.get_threshold()[:2] == thresholds[:2]  # the young passes as they were
        cycle = Node()
        dead = weakref.ref(cycle)
        gc.collect(1)  # alive: moved to the oldest generation, which only a full pass scans
        del cycle
        kept = []
        with FullPasses() as full:
            for _ in range(quiet_collect.DUE_YOUNG_PASSES + 1):
                gc.collect(1)  # a full pass is due by CPython's count
            for key in ("j", "k", "j"):
                await pilot.press(key)
                # New lasting objects: enough that CPython would collect in full now, too
                # few to reach the never-quiet bound.
                kept.append([[i] for i in range(100_000)])
                await pilot.pause(0.05)
            assert full.count == 0
            assert dead() is not None and app.collector.full_passes == 0
            await wait_for(pilot, lambda: app.collector.full_passes, "a quiet full pass")
            assert full.count >= 1 and dead() is None
    assert gc.get_threshold() == thresholds


async def test_a_viewer_never_quiet_still_collects_in_full(run_dir):
    """Keys without a pause (or a live run's polls) never give a quiet spell: after
    ``MOST_YOUNG_PASSES`` young passes the full one runs anyway."""
    app = make_app(run_dir)
    app.collects_quietly = True
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.collector.running, "the collector started")
        gc.collect()
        for _ in range(quiet_collect.DUE_YOUNG_PASSES):
            gc.collect(1)
        app.ahead.input_seen()  # a key this instant: not quiet
        app.collector.check()
        assert app.collector.full_passes == 0  # due, but a user is at work
        for _ in range(quiet_collect.MOST_YOUNG_PASSES):
            gc.collect(1)
        app.ahead.input_seen()
        with FullPasses() as full:
            app.collector.check()
        assert full.count == 1 and app.collector.full_passes == 1


async def test_the_start_runs_without_the_collector_until_the_first_quiet_spell(run_dir):
    """`tvis tui` starts with the cyclic collector off (what it makes on the way to the
    first page lives as long as the viewer): still off when the first page is up, on again
    in the first quiet spell, as CPython runs it."""
    gc.disable()
    try:
        app = make_app(run_dir)
        app.collects_quietly = True
        app.collector.start_held = True
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.collector.running, "the first page")
            assert not gc.isenabled()
            await wait_for(pilot, gc.isenabled, "the collector on in a quiet spell")
            assert not app.collector.start_held
            assert gc.get_threshold()[2] == quiet_collect.OUT_OF_REACH  # full passes: quiet
    finally:
        gc.enable()


async def test_a_start_never_quiet_turns_the_collector_on_after_enough_objects(
    run_dir, monkeypatch
):
    """Keys from the first instant never give a quiet spell: once the start has made
    ``START_MOST_OBJECTS`` objects the collector is on anyway; an app that ends first
    turns it on as it ends."""
    monkeypatch.setattr(quiet_collect, "START_MOST_OBJECTS", 50_000)
    gc.disable()
    try:
        app = make_app(run_dir)
        app.collects_quietly = True
        app.collector.start_held = True
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.collector.running, "the first page")
            gc.collect(0)  # the young generation's count starts from nothing
            app.ahead.input_seen()  # a key this instant: not quiet
            app.collector.check()
            assert not gc.isenabled()
            kept = [[i] for i in range(60_000)]
            app.ahead.input_seen()
            app.collector.check()
            assert gc.isenabled() and len(kept) == 60_000
        gc.disable()
        ended = make_app(run_dir)
        ended.collects_quietly = True
        ended.collector.start_held = True
        async with ended.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: ended.collector.running, "the first page")
            ended.ahead.input_seen()
        assert gc.isenabled()
    finally:
        gc.enable()
