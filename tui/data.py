"""The agent client as the viewer uses it: blocking calls made from worker threads, with a
small cache for answers that cannot change, so moving back to a call costs no round trip.

This is where the viewer receives replies: the hottest are decoded here, once, into the
frozen dataclasses of ``tvis.agent.replies`` (``decode_reply``), before they are cached."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, Protocol

from tvis.agent.replies import decode_reply
from tvis.store.lru import LRU


class Client(Protocol):
    """What ``tvis.agent.client.connect`` returns (see agent/PROTOCOL.md)."""

    on_lost: Callable[[str], None] | None  # told (from a client thread) when the link drops

    def call(self, method: str, **params: Any) -> Any: ...

    def call_background(self, method: str, **params: Any) -> Any: ...

    def silence(self) -> float: ...

    def describe(self) -> str: ...

    def close(self) -> None: ...


CACHE_ENTRIES = 512
"""Answers kept. A screenful needs a few dozen (rows, a call, its views); 512 keeps the
last several hundred cursor positions while staying a few MB at the agent's view sizes."""

NEVER_CACHED = frozenset({"hello", "runs", "run"})
"""Answers that change while a run is being recorded."""

LIVE_UNCACHED = frozenset({"source", "sources", "find", "replay"})
"""Answers that merge every batch so far, so they grow while a recording is running."""


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


class Data:
    """A thread-safe caching façade over one agent client. Identical requests in flight at
    the same time are sent once: the later callers wait for the first one's answer — unless
    the first was sent in the background (``prefetch_later``) and the later one is not: the
    agent may hold that one back behind others, so the later one is sent too."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.live = False
        self._cache = LRU(CACHE_ENTRIES)
        self._inflight: dict[tuple, tuple[Future, bool]] = {}  # -> (answer, sent in background)
        self._lock = threading.Lock()
        self._calls = 0  # requests on the wire now, cached or not

    @property
    def busy(self) -> bool:
        """Whether a request is waiting for the agent now (a page is still loading)."""
        return self._calls > 0

    def describe(self) -> str:
        return self.client.describe()

    def close(self) -> None:
        self.client.close()

    def call(self, method: str, **params: Any) -> Any:
        with self._lock:
            self._calls += 1
        try:
            return self._call(method, params, background=False)
        finally:
            with self._lock:
                self._calls -= 1

    def _call(self, method: str, params: dict[str, Any], background: bool) -> Any:
        send = self.client.call_background if background else self.client.call
        cacheable = method not in NEVER_CACHED and not (self.live and method in LIVE_UNCACHED)
        if not cacheable:
            return decode_reply(method, send(method, **params))
        key = (method, _freeze(params))
        with self._lock:
            found, value = self._cache.peek(key)
            if found:
                return value
            pending = self._inflight.get(key)
            if pending is None or (pending[1] and not background):
                future: Future = Future()
                self._inflight[key] = (future, background)
                pending = None
        if pending is not None:
            return pending[0].result()
        try:
            result = decode_reply(method, send(method, **params))
        except BaseException as e:
            with self._lock:
                if self._inflight.get(key, (None,))[0] is future:
                    del self._inflight[key]
            future.set_exception(e)
            raise
        with self._lock:
            if self._inflight.get(key, (None,))[0] is future:
                del self._inflight[key]
            self._cache.put(key, result)
        future.set_result(result)
        return result

    def peek(self, method: str, **params: Any) -> tuple[bool, Any]:
        """``(True, answer)`` when ``call`` would answer from the cache, else ``(False, None)``:
        a prefetched answer can then be drawn at once, without a worker round trip."""
        return self._cache.peek((method, _freeze(params)))

    def prefetch(self, method: str, **params: Any) -> Any:
        """``call``, for warming the cache: a failure here is left to the real request."""
        try:
            return self.call(method, **params)
        except Exception:
            return None

    def prefetch_later(self, method: str, **params: Any) -> Any:
        """``prefetch`` of what a key may show next, not what is on its way to the screen:
        the agent serves it after every request not sent this way, so that it never delays
        one (a request for the same answer meanwhile is sent again, not made to wait)."""
        with self._lock:
            self._calls += 1
        try:
            return self._call(method, params, background=True)
        except Exception:
            return None
        finally:
            with self._lock:
                self._calls -= 1
