"""``LRU``: the one bounded least-recently-used map of the agent and the viewer (it lives on
the lowest floor, which both may import).

Thread-safe, because the agent serves requests from threads and the viewer asks from workers.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")


class LRU:
    """A thread-safe least-recently-used map of at most ``size`` entries."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._items)

    def peek(self, key: Hashable) -> tuple[bool, Any]:
        """``(True, value)`` when ``key`` is kept (it becomes the most recent), else
        ``(False, None)``: a kept None is told apart from a missing key."""
        with self._lock:
            if key in self._items:
                self._items.move_to_end(key)
                return True, self._items[key]
        return False, None

    def put(self, key: Hashable, value: Any) -> None:
        """Keep ``value`` under ``key`` as the most recent, dropping the least recent."""
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            self._trim()

    def get(self, key: Hashable, build: Callable[[], T]) -> T:
        """The value kept under ``key``, else ``build()`` kept and returned."""
        found, value = self.peek(key)
        if found:
            return value
        value = build()
        with self._lock:
            # Two threads may build the same key at once: both get the first one kept, so
            # what is derived from it (``RunStore.derived``) is derived once.
            value = self._items.setdefault(key, value)
            self._items.move_to_end(key)
            self._trim()
        return value

    def _trim(self) -> None:
        while len(self._items) > self.size:
            self._items.popitem(last=False)
