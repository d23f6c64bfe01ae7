"""The agent's worker threads: requests run side by side, and one that hangs never starves
the rest.

A request can block for good on something outside the agent (a hung network mount under
one run); a fixed pool would then fill up with such requests until nothing is answered.
Here a request that has run ``SLOW_S`` seconds stops counting against the pool: while
others wait, another thread is started for them, up to ``MOST`` threads in all.

A client marks the requests it sends ahead of need (``background``: a viewer's prefetch of
what the next key may show) so that they never delay one a user is waiting for: they start
only while no other request is waiting or running — a build that gives way by itself
(``yields``: Replay's event list) and one running past ``SLOW_S`` do not count — and do not
take a place from the others. Once started they share the interpreter lock like any
request: they are kept from starting, not cut short.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

# Requests running at once when all are quick: several slow views and a burst of cheap
# calls overlap; numpy releases the GIL in the heavy parts, and more would only contend.
STEADY = 8
# Threads in all, stuck ones included: as many as the server lets requests wait (see
# server.MAX_PENDING), so every accepted request can be running.
MOST = 64
# A request running this long is taken for stuck (or for a long build) and no longer holds
# one of the STEADY places; a viewer's cheap calls answer in milliseconds.
SLOW_S = 2.0
# How often waiting requests are checked against running ones that have turned slow.
TICK_S = 0.25
# When the client's end closes, how long answers still being computed may take to go out.
CLOSE_WAIT_S = 60.0
# The kinds of job: one a client waits for, a build that gives way to those by itself, and
# one sent in the background.
NOW, YIELDS, LATER = "now", "yields", "later"


class Workers:
    """Runs jobs (no-argument callables that never raise) on threads of its own."""

    def __init__(self, steady: int = STEADY, most: int = MOST, slow_s: float | None = None) -> None:
        self.steady, self.most = steady, most
        self.slow_s = SLOW_S if slow_s is None else slow_s  # read now: tests set SLOW_S
        self._jobs: deque[tuple[Callable[[], None], str]] = deque()
        self._later: deque[Callable[[], None]] = deque()  # background jobs
        # thread id -> (when its job started, its kind: NOW, YIELDS or LATER)
        self._started: dict[int, tuple[float, str]] = {}
        self._threads = 0
        self._idle = 0
        self._closed = False
        self._cond = threading.Condition()
        threading.Thread(target=self._watch, name="tvis-agent-watch", daemon=True).start()

    def submit(
        self, job: Callable[[], None], background: bool = False, yields: bool = False
    ) -> None:
        """Run ``job``; a ``background`` one once nothing else is waiting or running but
        jobs that ``yields`` (give way to others by themselves)."""
        with self._cond:
            if background:
                self._later.append(job)
            else:
                self._jobs.append((job, YIELDS if yields else NOW))
            self._grow()
            self._cond.notify()

    def close(self, wait_s: float = CLOSE_WAIT_S) -> None:
        """Let the threads end once the jobs queued are done, waiting up to ``wait_s`` for
        them (answers a client asked for before it closed its end still go out); a stuck
        job is left to end when it can."""
        deadline = time.monotonic() + wait_s
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            while (self._jobs or self._later or self._started) and time.monotonic() < deadline:
                self._cond.wait(TICK_S)

    def _grow(self) -> None:
        """Start a thread (under the lock) when jobs that may start wait, none is idle, and
        fewer than ``steady`` threads run jobs that are neither slow nor background."""
        waiting = len(self._jobs) + (len(self._later) if self._may_start_later() else 0)
        if not waiting or self._idle >= waiting or self._threads >= self.most:
            return
        now = time.monotonic()
        aside = sum(
            1 for t, kind in self._started.values() if kind == LATER or now - t >= self.slow_s
        )
        if self._threads - aside < self.steady:
            self._threads += 1
            threading.Thread(target=self._work, name="tvis-agent", daemon=True).start()

    def _may_start_later(self) -> bool:
        """Whether a background job may start now (under the lock): no other job waits, and
        none runs but background ones, builds that give way and slow ones; at the close,
        always."""
        if self._closed:
            return True
        if self._jobs:
            return False
        now = time.monotonic()
        return all(kind != NOW or now - t >= self.slow_s for t, kind in self._started.values())

    def _next(self) -> tuple[Callable[[], None], str] | None:
        if self._jobs:
            return self._jobs.popleft()
        if self._later and self._may_start_later():
            return self._later.popleft(), LATER
        return None

    def _work(self) -> None:
        me = threading.get_ident()
        while True:
            with self._cond:
                self._idle += 1
                while (
                    (got := self._next()) is None
                    and not self._closed
                    and self._threads <= self.steady
                ):
                    # Background jobs wait for running ones to end or turn slow: look again.
                    self._cond.wait(TICK_S if self._later else None)
                self._idle -= 1
                if got is None:  # closed, or a thread beyond the steady ones
                    self._threads -= 1
                    return
                job, kind = got
                self._started[me] = (time.monotonic(), kind)
            try:
                job()
            finally:
                with self._cond:
                    self._started.pop(me, None)
                    self._cond.notify_all()

    def _watch(self) -> None:
        while True:
            time.sleep(TICK_S)
            with self._cond:
                if self._closed:
                    return
                self._grow()
