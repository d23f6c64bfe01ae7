"""``LoadingCue``: says "loading …" when what was asked for takes long enough to be noticed.

Most answers arrive in a frame or two, and a cue drawn and removed that fast only flickers;
one that takes longer (a grid of Grad-CAM maps, a picture over ssh) would otherwise sit as
empty or black boxes with nothing saying why.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.timer import Timer
from textual.widget import Widget

CUE_AFTER_S = 0.3
"""How long an answer may take before the cue shows: about when a wait is noticed."""


class LoadingCue:
    """Calls ``show`` when ``start`` was not followed by ``stop`` within ``CUE_AFTER_S``,
    and ``hide`` at ``stop`` once shown."""

    def __init__(self, owner: Widget, show: Callable[[], None], hide: Callable[[], None]) -> None:
        self.owner, self._show, self._hide = owner, show, hide
        self._timer: Timer | None = None
        self.shown = False

    def start(self) -> None:
        self._cancel()
        self._timer = self.owner.set_timer(CUE_AFTER_S, self._due)

    def stop(self) -> None:
        self._cancel()
        if self.shown:
            self.shown = False
            self._hide()

    @property
    def waiting(self) -> bool:
        return self._timer is not None or self.shown

    def _due(self) -> None:
        self._timer = None
        self.shown = True
        self._show()

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
