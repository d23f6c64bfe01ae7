"""The agent's worker threads: requests run side by side, and one that hangs never starves
the rest.

A request can block for good on something outside the agent (a hung network mount under
one run); a fixed pool would then fill up with such requests until nothing is answered.
Here a request that has run ``SLOW_S`` seconds stops counting against the pool: while
others wait, another thread is started for them, up to ``MOST`` threads in all.
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


class Workers:
    """Runs jobs (no-argument callables that never raise) on threads of its own."""

    def __init__(self, steady: int = STEADY, most: int = MOST, slow_s: float = SLOW_S) -> None:
        self.steady, self.most, self.slow_s = steady, most, slow_s
        self._jobs: deque[Callable[[], None]] = deque()
        self._started: dict[int, float] = {}  # thread id -> when its job started
        self._threads = 0
        self._idle = 0
        self._closed = False
        self._cond = threading.Condition()
        threading.Thread(target=self._watch, name="tvis-agent-watch", daemon=True).start()

    def submit(self, job: Callable[[], None]) -> None:
        with self._cond:
            self._jobs.append(job)
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
            while (self._jobs or self._started) and time.monotonic() < deadline:
                self._cond.wait(TICK_S)

    def _grow(self) -> None:
        """Start a thread (under the lock) when jobs wait, none is idle, and fewer than
        ``steady`` threads are not stuck in a slow job."""
        if not self._jobs or self._idle >= len(self._jobs) or self._threads >= self.most:
            return
        now = time.monotonic()
        stuck = sum(1 for t in self._started.values() if now - t >= self.slow_s)
        if self._threads - stuck < self.steady:
            self._threads += 1
            threading.Thread(target=self._work, name="tvis-agent", daemon=True).start()

    def _work(self) -> None:
        me = threading.get_ident()
        while True:
            with self._cond:
                self._idle += 1
                while not self._jobs and not self._closed and self._threads <= self.steady:
                    self._cond.wait()
                self._idle -= 1
                if not self._jobs:  # closed, or a thread beyond the steady ones
                    self._threads -= 1
                    return
                job = self._jobs.popleft()
                self._started[me] = time.monotonic()
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
