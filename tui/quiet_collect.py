"""The cyclic collector's full passes, moved out from under the keys into quiet spells.

CPython starts a full (generation-2) collection on its own once ten generation-1 passes have
run and the objects that survived them reach a quarter of those the last full pass kept.
After `tvis tui` freezes its imports and pages (``gc.freeze``) that last pass keeps few, so
a screen that makes many lasting objects — Explore's first build on a 20,000-call batch,
its layers table, a Loss or Insights page filled from a reply — triggers one, and it pauses
the app's thread (and every thread with it) in the middle of the key that made them: 40–65
ms of each `y` on that batch (``gc.callbacks``). Here the automatic full pass is switched
off (its threshold set out of reach; the young passes stay as they were) and the app runs
it itself once nothing has happened for ``QUIET_S``: no key, no request on the wire (the
clock that builds pages ahead, ``BuildAhead.quiet_since``). A viewer that is never
quiet still collects, after ``MOST_YOUNG_PASSES`` generation-1 passes, as CPython would
have long before.

`tvis tui` also runs its start with the collector off (``start_held``): Textual's import,
the shell and the first pages make objects that live as long as the viewer, and the young
passes over them (≈ 190 of them before the first screen) found nothing to free. The first quiet
spell — after the pages built ahead were frozen (``gc.freeze``) — turns it back on, or
``START_MOST_OBJECTS`` made objects do in a viewer never quiet.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from textual.timer import Timer

    from tvis.tui.app import TvisApp

QUIET_S = 1.0
"""Nothing for this long: a user reading the screen, not one between two keys (longer than
the pages built ahead wait, `build_ahead.QUIET_S`: a key pressed 0.5–0.9 s after the last
finds no full pass under way)."""

CHECK_S = 0.25
"""How often the app looks whether a full pass is due and it is quiet."""

DUE_YOUNG_PASSES = 10
"""Generation-1 passes since the last full one before a full one is due: CPython's own
default (the third threshold)."""

MOST_YOUNG_PASSES = 100
"""Never quiet this long (a run followed live, keys held down): collect anyway. Ten times
CPython's count: about 700,000 objects made, a few seconds of steady work."""

START_MOST_OBJECTS = 700_000
"""A start never quiet turns the collector back on after this many objects made (net): as
many as ``MOST_YOUNG_PASSES`` young passes would have looked at."""

OUT_OF_REACH = 1 << 30
"""The third threshold while the app collects: CPython never reaches it."""


class QuietCollector:
    """Runs the full collections of ``app`` in its quiet spells (``start``/``stop``)."""

    def __init__(self, app: TvisApp) -> None:
        self.app = app
        self.full_passes = 0  # run here (for tests and benches)
        self._timer: Timer | None = None
        self._thresholds: tuple[int, int, int] | None = None
        self.start_held = False
        """The collector was turned off for the start (`tvis tui`): the first quiet spell,
        or the app's end, turns it back on."""

    @property
    def running(self) -> bool:
        return self._timer is not None

    def start(self) -> None:
        if self._timer is not None:
            return
        young, middle, _ = self._thresholds = gc.get_threshold()
        gc.set_threshold(young, middle, OUT_OF_REACH)
        self._timer = self.app.set_interval(CHECK_S, self.check, name="quiet-collect")

    def stop(self) -> None:
        """Hand the full passes back to CPython (the app is closing)."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if self._thresholds is not None:
            gc.set_threshold(*self._thresholds)
            self._thresholds = None
        self.release_start()

    def release_start(self) -> None:
        """The collector on again, as CPython runs it (if the start had it off)."""
        if self.start_held:
            self.start_held = False
            gc.enable()

    def due(self) -> bool:
        """Whether CPython would have run a full pass by now (its count, not its 25 % rule:
        a few spare passes in quiet spells cost nobody a key)."""
        return gc.get_count()[2] >= DUE_YOUNG_PASSES

    def quiet(self) -> bool:
        app = self.app
        if app.data is not None and app.data.busy:
            return False
        return time.monotonic() - app.ahead.quiet_since >= QUIET_S

    def check(self) -> None:
        if not self.app.is_running:
            self.stop()
            return
        if self.start_held and (gc.get_count()[0] >= START_MOST_OBJECTS or self.quiet()):
            self.release_start()
        passes = gc.get_count()[2]
        if passes >= MOST_YOUNG_PASSES or (passes >= DUE_YOUNG_PASSES and self.quiet()):
            gc.collect()
            self.full_passes += 1
