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
from collections import OrderedDict, deque
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

MAX_TOTAL = 1024**3
"""Default bytes kept across every name (payloads, decoded headers and each name's own
bookkeeping): what one name may keep (MAX_BYTES), so many names cost no more than one; past
it the oldest entries anywhere go first (the newest is always kept, however large), so a peer
that invents names cannot grow the server without end."""

MAX_NAMES = 4096
"""Default names kept: far more than a job catches, few enough that the per-name bookkeeping
stays small; past it the name updated longest ago goes, with its history."""

NAME_COST = 16 * 1024
"""Bytes a name costs before its entries (its arrival times, counters, dict slots)."""

MAX_SENDERS = 64
"""Senders whose drop counts a name remembers: every rank of a large node."""

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
    header_cost: int = field(default=0, repr=False)  # what its decoded header holds, in bytes

    @property
    def cost(self) -> int:
        """Bytes this entry keeps alive: its payload and its decoded header."""
        return self.nbytes + self.header_cost

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
    numbers: deque[int] = field(default_factory=deque)  # each entry's place in all arrivals
    bytes: int = 0
    cost: int = NAME_COST  # bytes kept for this name, bookkeeping included
    received: int = 0
    arrivals: deque[float] = field(default_factory=lambda: deque(maxlen=256))
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
    """Received catches, per name, bounded by ``history`` entries and ``max_bytes`` bytes,
    and in all by ``max_total`` bytes (payloads, decoded headers, bookkeeping) and
    ``max_names`` names; the oldest go first. The newest entry is always kept.

    ``recycle`` is handed the payload of each evicted entry that nothing outside the store can
    read any more, so the server can receive into it again (see `Recycler`).
    """

    def __init__(
        self,
        history: int = HISTORY,
        max_bytes: int = MAX_BYTES,
        recycle: Callable[[np.ndarray], None] | None = None,
        max_total: int = MAX_TOTAL,
        max_names: int = MAX_NAMES,
    ) -> None:
        self.history = max(1, history)
        self.max_bytes = max_bytes
        self.max_total = max_total
        self.max_names = max(1, max_names)
        self.total = 0  # bytes kept in all (see Channel.cost)
        self._kept = 0  # entries kept in all
        self._count = 0  # entries ever added: the number of the next one
        # (number, name) of every kept entry, oldest first; entries their own name dropped
        # stay until they reach the front (the deque is trimmed when mostly such).
        self._arrived: deque[tuple[int, str]] = deque()
        self._recent: OrderedDict[str, None] = OrderedDict()  # names, least recently updated first
        self.version = 0
        self._recycler = Recycler() if recycle else None
        self._recycle = recycle
        self._lock = threading.Lock()
        self._channels: dict[str, Channel] = {}

    def add(self, entry: Entry, dropped: int) -> None:
        """Keep ``entry``; ``dropped`` is its sender's running count of drops for this name."""
        spare: list[np.ndarray] = []
        with self._lock:
            channel = self._channels.get(entry.name)
            if channel is None:
                while len(self._channels) >= self.max_names:
                    self._forget(next(iter(self._recent)), spare)
                channel = self._channels[entry.name] = Channel()
                self.total += channel.cost
            self._recent[entry.name] = None
            self._recent.move_to_end(entry.name)
            channel.entries.append(entry)
            channel.bytes += entry.nbytes
            channel.cost += entry.cost
            self.total += entry.cost
            self._kept += 1
            self._count += 1
            channel.numbers.append(self._count)
            self._arrived.append((self._count, entry.name))
            channel.received += 1
            channel.arrivals.append(entry.received)
            sender = (entry.sender.get("host", ""), entry.sender.get("pid", 0))
            channel.dropped.pop(sender, None)  # re-inserted: the dict stays newest last
            channel.dropped[sender] = dropped
            if len(channel.dropped) > MAX_SENDERS:
                del channel.dropped[next(iter(channel.dropped))]
            while len(channel.entries) > self.history or (
                channel.bytes > self.max_bytes and len(channel.entries) > 1
            ):
                self._evict(channel, spare)
            self._within_total(spare)
            self.version += 1
        for payload in spare:
            self._recycle(payload)

    def _evict(self, channel: Channel, spare: list[np.ndarray]) -> None:
        """Drop the oldest entry of ``channel`` (under the lock)."""
        old = channel.entries.popleft()
        channel.numbers.popleft()
        channel.bytes -= old.nbytes
        channel.cost -= old.cost
        self.total -= old.cost
        self._kept -= 1
        payload = self._recycler.spare(old) if self._recycler else None
        if payload is not None:
            spare.append(payload)

    def _within_total(self, spare: list[np.ndarray]) -> None:
        """Drop the oldest entries anywhere until the total fits (under the lock); a name
        left with none is forgotten. The newest entry is always kept, however large."""
        while self.total > self.max_total and self._kept > 1:
            number, name = self._arrived[0]
            channel = self._channels.get(name)
            if channel is None or not channel.numbers or channel.numbers[0] != number:
                self._arrived.popleft()  # dropped already by its own name's bounds
                continue
            self._arrived.popleft()
            self._evict(channel, spare)
            if not channel.entries:
                self._forget(name, spare)
        if len(self._arrived) > 2 * self._kept + 64:
            kept = {n for c in self._channels.values() for n in c.numbers}
            self._arrived = deque(a for a in self._arrived if a[0] in kept)

    def _forget(self, name: str, spare: list[np.ndarray]) -> None:
        """Drop ``name`` and its history (under the lock)."""
        channel = self._channels.pop(name)
        self._recent.pop(name, None)
        while channel.entries:
            self._evict(channel, spare)
        self.total -= channel.cost

    def names(self) -> list[str]:
        """Names in the order they first arrived."""
        with self._lock:
            return list(self._channels)

    def latest(self, name: str) -> Entry | None:
        """The newest entry of ``name``; None if it never arrived or was forgotten."""
        with self._lock:
            channel = self._channels.get(name)
            return channel.entries[-1] if channel and channel.entries else None

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
