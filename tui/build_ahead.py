"""Pages built ahead while the viewer is idle, so that a page's first visit is only a switch.

Once the page on screen has settled — no request waiting for the agent and no key or mouse
event for ``QUIET_S`` — the next page not built yet (Explore first, then the tab bar's
order) is built and mounted hidden: its widgets compose, style themselves and ask the agent
for what they show, exactly as on a first visit, but while nobody waits; once its answers
are in it is laid out and rendered at the terminal's size, still hidden. One page per quiet
spell: its own requests make the viewer busy again, and a key pressed meanwhile is answered
before the next page starts. The page's modules are imported on a thread first (an import
on the app's thread held a key for 20–50 ms). A visit to a page not built yet builds it
then, as before. Once Explore is built, before the other pages, the quiet spells do in small
slices what a key would otherwise do on its first use (Explore's highlighter, the help's
drawing, then Explore's panes, hidden, then each of them laid out and drawn, still hidden,
at the size it will be shown at), one after another while nothing happens. No slice starts
while a key the terminal sent waits in the app's queue (``input_waiting``): the key is
handled first.

A page not on screen — built ahead and not visited yet, or left for another — holds what it
watches of the app (the batch, the sample, the run; ``hidden_pages``): a change calls its
watcher once, later — at the next quiet spell, or before its first frame if it is shown
first — so `.` on Replay, or a point chosen on Insights' Embeddings, does not reload the
hidden pages under the key. The page on screen follows the app at once.

In `tvis tui` (``freezes``), the quiet spell after a page was built also moves what exists
then out of the cyclic collector's reach (``gc.freeze``): the pages live as long as the app, and every full collection rescanned
them, a pause of 60–120 ms at a random key or first visit. The price: a cycle alive at a
freeze that dies later is never collected — a few per page, once.
"""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from textual import events

from tvis.tui.pages import warm

if TYPE_CHECKING:
    from textual.screen import Screen
    from textual.timer import Timer

    from tvis.tui.app import TvisApp
    from tvis.tui.hidden_pages import HeldWatches
    from tvis.tui.pages import PageSpec

QUIET_S = 0.5
"""How long nothing may happen before a page is built ahead: a user reading the screen, not
one between two keys."""

LAY_OUT_QUIET_S = 0.15
"""A page built ahead is laid out once its answers are in and this long has passed quietly."""

PART_QUIET_S = 0.15
"""Explore built, the small slices that follow one another (the help's drawing) once this
long has passed quietly, within one quiet spell: a key starts the wait for ``QUIET_S`` again."""

TICK_S = 0.1
"""How often the app looks whether it is quiet."""

ORDER = ("explore",)
"""Built first, ahead of the tab bar's order: the page most first visits go to."""


def input_waiting(app: TvisApp) -> bool:
    """Whether a key, a mouse event or a paste waits in the app's queue: the driver's thread
    has read it, the app has not handled it yet. Quiet-spell work then waits for a later
    tick, so that a key pressed just as a slice would start is answered first."""
    waiting: Iterable[object] = (
        app._message_queue.values
    )  # Textual's own queue (``textual._queue``): a deque
    return any(isinstance(m, (events.Key, events.MouseEvent, events.Paste)) for m in waiting)


class BuildAhead:
    """Builds the app's pages one by one in its quiet spells; ``input_seen`` on every key."""

    def __init__(
        self, app: TvisApp, build: Callable[[PageSpec], None], lay_out: Callable[[str], bool]
    ) -> None:
        self.app = app
        self.build = build
        self.lay_out = lay_out
        self.quiet_since = time.monotonic()
        self.built: list[str] = []  # page ids built ahead, in order (for tests and benches)
        self._unlaid: list[str] = []  # built ahead, not laid out yet
        self.held: dict[str, HeldWatches] = {}  # page id -> its watchers, held while hidden
        self._timer: Timer | None = None
        self.freezes = False  # `tvis tui` sets it: a test's app leaves the collector alone
        self._freeze_due = True  # the first page's objects, once it has settled
        self._imports: dict[str, threading.Thread] = {}  # page module -> its import
        self._slicing = False  # a part was done ahead in this quiet spell: the next comes soon

    def start(self) -> None:
        """Begin watching for quiet spells (once the first page is on screen)."""
        if self._timer is None:
            self.quiet_since = time.monotonic()
            self._timer = self.app.set_interval(TICK_S, self.tick, name="build-ahead")

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def hold(self, page_id: str, screen: Screen) -> None:
        """Hold ``screen``'s watchers of the app until it is shown (``hidden_pages``):
        meanwhile it catches up in quiet spells."""
        self.held[page_id] = self.app.hidden.hide(page_id, screen)

    def visited(self, page_id: str) -> None:
        """Shown (the app released what it held): no catching up in quiet spells until it
        is left again."""
        self.held.pop(page_id, None)

    def input_seen(self) -> None:
        self.quiet_since = time.monotonic()
        self._slicing = False

    def next_page(self) -> PageSpec | None:
        """The next page to build: Explore first, then the others in the tab bar's order."""
        pages = self.app.pages()
        unbuilt = [p for p in pages if not self.app.page_built(p.id)]
        for page_id in ORDER:
            for spec in unbuilt:
                if spec.id == page_id:
                    return spec
        return unbuilt[0] if unbuilt else None

    def _build_part_ahead(self) -> bool:
        """Explore built: what a page would otherwise do on a key's first use (Explore's
        source highlighter, the help drawn, Explore's panes), one slice per quiet spell.
        False when nothing is left."""
        explore = self.app.explore_page()
        if explore is not None and explore.warm_ahead():
            return True
        if self.app.help_ahead():
            return True
        return explore is not None and (explore.build_pane_ahead() or explore.draw_pane_ahead())

    def tick(self) -> None:
        app = self.app
        if not app.is_running:  # shutting down: its screens are being closed
            self.stop()
            return
        for held in self.held.values():
            held.wrap()
        now = time.monotonic()
        data = app.data
        if (
            data is None
            or data.busy
            or app.offline is not None
            or app.run_name is None
            or input_waiting(app)
        ):
            self.quiet_since = now
            return
        quiet = now - self.quiet_since
        if self._unlaid and quiet >= LAY_OUT_QUIET_S:
            # Its answers are in: laid out and rendered, hidden, in a slice of its own
            # (a page still mounting, on a loaded machine, is tried again at a later tick).
            if self.lay_out(self._unlaid[-1]):
                self._unlaid.pop()
            self.quiet_since = time.monotonic()
            return
        if quiet < (PART_QUIET_S if self._slicing else QUIET_S):
            return
        for page_id, held in self.held.items():
            if (
                held.holding and held.flush()
            ):  # a hidden page catches up with the batch, the sample, the run
                self._unlaid.append(page_id)
                self.quiet_since = time.monotonic()
                return
        if self._freeze_due:
            self._freeze_due = False
            if self.freezes:
                gc.freeze()
        spec = self.next_page()
        if spec is None or spec.id not in ORDER:
            # Explore built, the parts before the other pages: `?` is among a user's first
            # keys on the first page, where the other pages' first visits come later.
            if self._build_part_ahead():
                self.quiet_since = time.monotonic()
                self._slicing = True
                return
            self._slicing = False
            if spec is None:
                explore = app.explore_page()
                panes_left = explore is not None and explore.panes_left_ahead()
                if not panes_left and not any(held.holding for held in self.held.values()):
                    self.stop()
                return
            if quiet < QUIET_S:
                return  # a page next: built after a whole quiet spell, not a slice's
        if spec.module not in sys.modules and spec.module not in self._imports:
            self._imports[spec.module] = warm(spec)
        importing = self._imports.get(spec.module)
        if importing is not None and importing.is_alive():
            return
        self.built.append(spec.id)
        self.build(spec)
        self._unlaid.append(spec.id)
        self._freeze_due = True
        self.quiet_since = time.monotonic()
