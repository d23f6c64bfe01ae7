"""Requests in flight on one agent, so that a long build lets short requests pass.

A viewer's next screen waits on short requests (a page of rows, a call, a picture), while
a long build (Replay's whole-run event list) may take seconds on a big run. Both are
Python and share one interpreter lock: on a small machine the short ones would crawl
behind the build. The build calls ``give_way`` between pieces of work; it returns when no
short request is in flight, or after ``MAX_WAIT_S``, so a build is never starved.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

MAX_WAIT_S = 0.2
"""The longest one ``give_way`` waits: short requests in a steady stream (prefetch) slow a
build down, they never stop it."""

POLL_S = 0.002


class Traffic:
    """The count of short requests an agent is serving, and the wait a long one makes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._short = 0

    @contextmanager
    def serving(self, long: bool) -> Iterator[None]:
        """Around one request; ``long`` ones (those that give way, and background ones) are
        not counted."""
        if long:
            yield
            return
        with self._lock:
            self._short += 1
        try:
            yield
        finally:
            with self._lock:
                self._short -= 1

    def give_way(self) -> None:
        """Wait while a short request is in flight (at most MAX_WAIT_S)."""
        if not self._short:
            return
        deadline = time.monotonic() + MAX_WAIT_S
        while self._short and time.monotonic() < deadline:
            time.sleep(POLL_S)
