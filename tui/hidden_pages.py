"""Pages off screen follow the app in quiet spells, or when shown again.

Every page watches what it shows of the app — the batch, the sample, the run — and a page
not on screen that followed each change would reload under the key that made it: `.` on
Loss paid for Explore, Weights and Insights too (their requests, their views rebuilt, their
layout), every time. So a page that is left holds its watchers of the app (its own and its
widgets'): each held watcher is called once with the newest change at the next quiet spell
(``build_ahead``), or before the page's first frame if it is shown first, so the page
draws the batch and sample of now — from the client's cache where it has them — never the
one it was left on. Pages built ahead hold theirs the same way until their first visit.

Textual keeps an object's watchers as ``(node, callback)`` lists per attribute; those of
nodes on the page are swapped, in place, for callbacks that pass through while the page is
shown and note the change while it is not (``HeldWatches.wrap``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.reactive import invoke_watcher

if TYPE_CHECKING:
    from textual.screen import Screen


class HeldWatches:
    """A page's watchers of the app: called as they come while ``holding`` is off; while
    it is on, only the newest change per watcher is kept, to be called at ``flush``."""

    def __init__(self, app: Any, screen: Screen) -> None:
        self.app = app
        self.screen = screen
        self.holding = True
        self.pending: dict[Callable, tuple[Any, Any, Any]] = {}  # callback -> (node, old, new)
        self._held: set[int] = set()  # id() of the holding callbacks made

    def _on_page(self, node: Any) -> bool:
        while node is not None:
            if node is self.screen:
                return True
            node = node._parent
        return False

    def wrap(self) -> None:
        """Swap the page's watchers of the app not swapped yet for holding ones (widgets
        mount and watch after the page does)."""
        for watchers in getattr(self.app, "__watchers", {}).values():
            for i, (node, callback) in enumerate(watchers):
                if id(callback) not in self._held and self._on_page(node):
                    watchers[i] = (node, self._holding(node, callback))

    def _holding(self, node: Any, callback: Callable) -> Callable:
        def held(old: Any, new: Any) -> None:
            if not self.holding:
                invoke_watcher(node, callback, old, new)
                return
            first = self.pending.pop(callback, None)  # the newest change goes last
            self.pending[callback] = (node, old if first is None else first[1], new)

        self._held.add(id(held))
        return held

    def flush(self) -> bool:
        """Call each held watcher once, now, with its newest change; whether there was any."""
        pending, self.pending = self.pending, {}
        for callback, (node, old, new) in pending.items():
            if not node._closing:
                invoke_watcher(node, callback, old, new)
        return bool(pending)

    def hold(self) -> None:
        """The page is hidden: changes wait for ``release``."""
        self.wrap()
        self.holding = True

    def release(self) -> None:
        """The page is shown: it catches up, then follows the app as it changes."""
        self.holding = False
        self.flush()


class HiddenPages:
    """The app's pages' held watchers, by page id."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.watches: dict[str, HeldWatches] = {}

    def hide(self, page_id: str, screen: Screen) -> HeldWatches:
        """``screen`` (page ``page_id``) is off screen, built ahead or left."""
        watches = self.watches.get(page_id)
        if watches is None or watches.screen is not screen:
            watches = self.watches[page_id] = HeldWatches(self.app, screen)
        watches.hold()
        return watches

    def show(self, page_id: str) -> None:
        """Page ``page_id`` is about to be shown: what it held is called first."""
        watches = self.watches.get(page_id)
        if watches is not None:
            watches.release()
