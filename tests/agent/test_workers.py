"""The agent's worker threads: background jobs start after the others, never lost."""

from __future__ import annotations

import threading

from tvis.agent.workers import Workers

WAIT_S = 10.0


def _job(started: list[str], name: str, release: threading.Event | None = None):
    def run() -> None:
        started.append(name)
        if release is not None:
            release.wait(WAIT_S)

    return run


def test_a_background_job_starts_after_the_job_running_and_the_one_waiting():
    pool = Workers(steady=1, slow_s=60.0)
    started: list[str] = []
    release = threading.Event()
    pool.submit(_job(started, "running", release))
    pool.submit(_job(started, "prefetch"), background=True)
    pool.submit(_job(started, "key"))
    assert not threading.Event().wait(0.3) and started == ["running"]
    release.set()
    pool.close(WAIT_S)
    assert started == ["running", "key", "prefetch"]


def test_a_build_that_gives_way_by_itself_does_not_hold_a_background_job_back():
    pool = Workers(slow_s=60.0)
    started: list[str] = []
    release, prefetched = threading.Event(), threading.Event()
    pool.submit(_job(started, "replay's list", release), yields=True)
    pool.submit(prefetched.set, background=True)
    assert prefetched.wait(WAIT_S)
    release.set()
    pool.close(WAIT_S)


def test_background_jobs_still_waiting_at_the_close_are_run():
    pool = Workers(slow_s=60.0)
    started: list[str] = []
    release = threading.Event()
    pool.submit(_job(started, "running", release))
    for n in range(3):
        pool.submit(_job(started, f"prefetch {n}"), background=True)
    threading.Timer(0.2, release.set).start()
    pool.close(WAIT_S)
    assert sorted(started) == ["prefetch 0", "prefetch 1", "prefetch 2", "running"]


def test_a_job_running_past_slow_s_no_longer_holds_background_jobs_back():
    pool = Workers(slow_s=0.2)
    release, prefetched = threading.Event(), threading.Event()
    pool.submit(_job([], "stuck", release))
    pool.submit(prefetched.set, background=True)
    assert prefetched.wait(WAIT_S)  # after ~0.2 s and the next tick, not after the release
    release.set()
    pool.close(WAIT_S)
