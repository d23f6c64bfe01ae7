"""A long build (Replay's event list) lets the short requests in flight pass first, and is
never starved by them."""

from __future__ import annotations

import threading
import time

from tvis.agent import traffic
from tvis.agent.dispatch import METHODS
from tvis.agent.traffic import Traffic


def _serve_until(traffic_: Traffic, release: threading.Event, done: list[str]) -> threading.Event:
    entered = threading.Event()

    def short() -> None:
        with traffic_.serving(long=False):
            entered.set()
            release.wait(10)
            done.append("short")

    threading.Thread(target=short, daemon=True).start()
    entered.wait(10)
    return entered


def test_a_build_waits_for_the_short_request_in_flight(monkeypatch):
    monkeypatch.setattr(traffic, "MAX_WAIT_S", 30.0)
    lane, release, done = Traffic(), threading.Event(), []
    _serve_until(lane, release, done)
    threading.Timer(0.05, release.set).start()
    lane.give_way()
    done.append("build")
    assert done == ["short", "build"]


def test_a_build_is_never_starved_by_a_request_that_does_not_end(monkeypatch):
    monkeypatch.setattr(traffic, "MAX_WAIT_S", 0.05)
    lane, release, done = Traffic(), threading.Event(), []
    _serve_until(lane, release, done)
    start = time.monotonic()
    lane.give_way()
    assert done == [] and time.monotonic() - start < 5
    release.set()


def test_replay_gives_way_and_is_not_waited_for_itself(monkeypatch):
    monkeypatch.setattr(traffic, "MAX_WAIT_S", 30.0)
    assert getattr(METHODS["replay"], "gives_way", False)
    assert not getattr(METHODS["layers"], "gives_way", False)
    lane = Traffic()
    with lane.serving(long=True):
        start = time.monotonic()
        lane.give_way()  # the build's own request is not one it waits for
        assert time.monotonic() - start < 5
