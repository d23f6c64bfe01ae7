"""What a live server has received: a bounded history per name, with counters and summaries.

Written by the server's connection threads, read by the session API and the Live page; every
method takes the store's lock briefly and hands out lists, never the live deques. Summaries of a
value (min, max, norm, ...) are computed on first request, not on arrival, so receiving a large
tensor costs only its bytes.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvis.live.codec import Array, decode

HISTORY = 256
"""Default entries kept per name: a long enough sparkline of a loss, few enough to scan quickly."""

MAX_BYTES = 1024**3
"""Default bytes kept per name: sixteen steps of a 64 MB weight; older ones are dropped first.
The newest entry is always kept, however large."""

RATE_WINDOW = 10.0
"""Seconds of arrivals the rate is measured over, so it reflects the job now, not an hour ago."""


@dataclass(frozen=True)
class Digest:
    """Summary numbers of a value: its plotted ``scalar`` (the value itself, or an array's L2 norm
    over its finite entries) and statistics over finite entries; None where they do not apply."""

    scalar: float | None = None
    min: float | None = None
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    nonfinite: int = 0


@dataclass
class Entry:
    """One catch as received: the value, which catch of its name it was, when and from whom, and
    the frame payload its arrays view."""

    name: str
    seq: int
    sent: float
    received: float
    sender: dict
    value: Any
    nbytes: int
    payload: np.ndarray | None = field(default=None, repr=False)
    _digest: Digest | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        """``tensor``, ``ndarray``, ``scalar``, ``str`` or ``tree``."""
        if isinstance(self.value, Array):
            return self.value.kind
        if isinstance(self.value, str):
            return "str"
        if isinstance(self.value, (list, tuple, dict)):
            return "tree"
        return "scalar"

    @property
    def shape(self) -> tuple[int, ...] | None:
        return self.value.data.shape if isinstance(self.value, Array) else None

    @property
    def dtype(self) -> str:
        """The wire dtype of an array, the Python type name of anything else."""
        return self.value.dtype if isinstance(self.value, Array) else type(self.value).__name__

    def digest(self) -> Digest:
        """Summary numbers, computed once (idempotent, so a race costs time, not correctness)."""
        if self._digest is None:
            self._digest = summarize(self.value)
        return self._digest


def summarize(value: Any) -> Digest:
    """The Digest of a received value."""
    if isinstance(value, bool | int | float):
        v = float(value)
        return Digest(v, v, v, v, 0.0, 0 if math.isfinite(v) else 1)
    if isinstance(value, complex):
        return summarize(abs(value))
    if not isinstance(value, Array) or value.data.size == 0:
        return Digest()
    x = value.numeric()
    if x.dtype.kind == "c":
        x = np.abs(x)
    elif x.dtype.kind == "b":
        x = x.view(np.uint8)
    nonfinite = 0
    if x.dtype.kind == "f":
        finite = np.isfinite(x)
        nonfinite = int(x.size - np.count_nonzero(finite))
        if nonfinite:
            x = x[finite]
        if x.size == 0:
            return Digest(nonfinite=nonfinite)
    mean = float(x.mean(dtype=np.float64))
    std = float(x.std(dtype=np.float64))
    norm = math.sqrt(x.size * (std * std + mean * mean))
    return Digest(norm, float(x.min()), float(x.max()), mean, std, nonfinite)


@dataclass
class Channel:
    """One name's history (oldest first) and counters since the server started."""

    entries: deque[Entry] = field(default_factory=deque)
    bytes: int = 0
    received: int = 0
    arrivals: deque[float] = field(default_factory=lambda: deque(maxlen=1024))
    dropped: dict[tuple[str, int], int] = field(default_factory=dict)

    def rate(self, now: float) -> float:
        """Arrivals per second over the last RATE_WINDOW seconds."""
        recent = [t for t in self.arrivals if now - t <= RATE_WINDOW]
        if len(recent) < 2:
            return 0.0
        return (len(recent) - 1) / max(now - recent[0], recent[-1] - recent[0], 1e-9)


@dataclass(frozen=True)
class NameInfo:
    """A point-in-time view of one name: counters plus its newest entry."""

    name: str
    received: int
    kept: int
    bytes: int
    rate: float
    dropped: int
    latest: Entry


class Store:
    """Received catches, per name, bounded by ``history`` entries and ``max_bytes`` bytes.

    ``recycle`` is handed the payload of each evicted entry that nothing outside the store can
    read any more, so the server can receive into it again (see `Recycler`).
    """

    def __init__(
        self,
        history: int = HISTORY,
        max_bytes: int = MAX_BYTES,
        recycle: Callable[[np.ndarray], None] | None = None,
    ) -> None:
        self.history = max(1, history)
        self.max_bytes = max_bytes
        self.version = 0
        self._recycler = Recycler() if recycle else None
        self._recycle = recycle
        self._lock = threading.Lock()
        self._channels: dict[str, Channel] = {}

    def add(self, entry: Entry, dropped: int) -> None:
        """Keep ``entry``; ``dropped`` is its sender's running count of drops for this name."""
        spare = []
        with self._lock:
            channel = self._channels.setdefault(entry.name, Channel())
            channel.entries.append(entry)
            channel.bytes += entry.nbytes
            channel.received += 1
            channel.arrivals.append(entry.received)
            channel.dropped[(entry.sender.get("host", ""), entry.sender.get("pid", 0))] = dropped
            while len(channel.entries) > self.history or (
                channel.bytes > self.max_bytes and len(channel.entries) > 1
            ):
                old = channel.entries.popleft()
                channel.bytes -= old.nbytes
                payload = self._recycler.spare(old) if self._recycler else None
                if payload is not None:
                    spare.append(payload)
            self.version += 1
        for payload in spare:
            self._recycle(payload)

    def names(self) -> list[str]:
        """Names in the order they first arrived."""
        with self._lock:
            return list(self._channels)

    def entries(self, name: str) -> list[Entry]:
        """The kept entries of ``name``, oldest first (empty if it never arrived)."""
        with self._lock:
            channel = self._channels.get(name)
            return list(channel.entries) if channel else []

    def info(self, name: str) -> NameInfo | None:
        """Counters and newest entry of ``name``; None if it never arrived."""
        now = time.time()
        with self._lock:
            channel = self._channels.get(name)
            if channel is None:
                return None
            return NameInfo(
                name=name,
                received=channel.received,
                kept=len(channel.entries),
                bytes=channel.bytes,
                rate=channel.rate(now),
                dropped=sum(channel.dropped.values()),
                latest=channel.entries[-1],
            )


class Recycler:
    """Tells whether an evicted entry's payload is still readable by anyone outside the store.

    An entry holding one array can be reached only through references to the entry, its Array,
    the array view or the payload (a session's tensor holds the view or a view of the payload; a
    viewer mid-draw holds the entry or the view). `sys.getrefcount` counts them. The counts with
    no outside holder are measured once, on a throwaway entry taken through the same decoding and
    the same call, so they are right on any interpreter; anything above them means a holder, and
    the payload is left alone. Other values (trees, scalars) are never recycled.
    """

    def __init__(self) -> None:
        self._baseline: tuple[int, ...] | None = None
        payload = np.zeros(4, dtype=np.uint8)
        node = {"kind": "ndarray", "dtype": "uint8", "shape": [4]}
        probe = Entry("probe", 0, 0.0, 0.0, {}, decode(node, payload), 4, payload)
        del payload
        self.spare(probe)

    def spare(self, entry: Entry) -> np.ndarray | None:
        """``entry``'s payload if only the caller's local variable reaches it, else None.

        The first call (from __init__, on the throwaway entry) records the baseline counts.
        """
        value = entry.value
        if not isinstance(value, Array) or entry.payload is None:
            return None
        counts = (
            sys.getrefcount(entry),
            sys.getrefcount(value),
            sys.getrefcount(value.data),
            sys.getrefcount(entry.payload),
        )
        if self._baseline is None:
            self._baseline = counts
            return None
        return entry.payload if counts == self._baseline else None
