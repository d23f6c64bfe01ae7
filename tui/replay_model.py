"""What Replay plays: the recording's events (from the agent's ``replay`` method), fetched
page by page, and where a step of each size lands. No widgets here: the page draws it.

A step moves by one event (``layer`` and ``call``: the event list of that detail), to the
start of the next phase run (``phase``), or to the start of the next batch (``batch``).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tvis.agent.replies import (
    REPLAY_PAGE,
    OutlineRun,
    ReplayAnswer,
    ReplayBatch,
    ReplayDetail,
    ReplayEvent,
)

STEP_SIZES = ("layer", "call", "phase", "batch")
"""Step sizes in the order ``z`` cycles them; ``call`` plays every module and function."""

SPEEDS = (1, 2, 4, 8, 15, 30)
"""Events per second while playing. 4 reads comfortably; 30 skims a large model."""

PAGE = REPLAY_PAGE
"""Events asked for at once (tvis.agent.replies declares the replay query)."""


@dataclass(frozen=True)
class Place:
    """A moment to land on in another event list: a batch, its phase, and a call in it."""

    batch: int | None
    phase: str | None
    call: int | None = None


@dataclass
class Recording:
    """One ``replay`` answer's outline and the event pages fetched so far. An answer not
    ``complete`` covers the events the agent had built (a big run's first page comes
    first); ``completed`` takes the whole run's outline when it comes."""

    total: int = 0
    complete: bool = True
    detail: ReplayDetail = "layer"
    sample: int = 0
    status: str = ""
    outline: list[OutlineRun] = field(default_factory=list)
    batches: list[ReplayBatch] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    pages: dict[int, Sequence[ReplayEvent]] = field(default_factory=dict)

    @classmethod
    def from_reply(cls, reply: ReplayAnswer, offset: int = 0) -> Recording:
        rec = cls(
            total=reply.total,
            complete=reply.complete,
            detail=reply.detail,
            sample=reply.sample,
            status=reply.status,
            outline=list(reply.outline),
            batches=list(reply.batches),
            missing=list(reply.missing),
        )
        rec.add_page(offset, reply.events)
        return rec

    def completed(self, reply: ReplayAnswer) -> None:
        """Take the whole run's total, outline, batches and notes from ``reply`` (of the
        same query): the events fetched so far stay, they do not change as the rest is
        built."""
        self.total, self.complete, self.status = reply.total, reply.complete, reply.status
        self.outline, self.batches = list(reply.outline), list(reply.batches)
        self.missing = list(reply.missing)
        self.add_page(reply.events[0].seq if reply.events else 0, reply.events)

    def add_page(self, offset: int, events: Sequence[ReplayEvent]) -> None:
        for i in range(0, len(events), PAGE):
            self.pages[(offset + i) // PAGE] = events[i : i + PAGE]

    def event(self, seq: int) -> ReplayEvent | None:
        """Event ``seq`` if its page is here (None: fetch page ``seq // PAGE``)."""
        page = self.pages.get(seq // PAGE)
        if page is None or not 0 <= seq % PAGE < len(page):
            return None
        return page[seq % PAGE]

    def missing_pages(self, seq: int, ahead: int = 1) -> list[int]:
        """Pages around ``seq`` not fetched yet: its own, then ``ahead`` after it."""
        last = (self.total - 1) // PAGE if self.total else -1
        wanted = [p for p in range(seq // PAGE, seq // PAGE + 1 + ahead) if p <= last]
        return [p for p in wanted if p not in self.pages]

    # -- where steps land ------------------------------------------------------------------

    def _starts(self, unit: str) -> list[int]:
        rows: Sequence[OutlineRun | ReplayBatch] = self.outline if unit == "phase" else self.batches
        return sorted({r["start"] for r in rows if isinstance(r.get("start"), int)})

    def step(self, seq: int, size: str, delta: int) -> int:
        """Where a step of ``size`` (``delta`` = ±1) from ``seq`` lands, within the recording."""
        if not self.total:
            return 0
        if size in ("layer", "call"):
            return max(0, min(self.total - 1, seq + delta))
        starts = self._starts(size) or [0]
        i = bisect_right(starts, seq) - 1  # the run (or batch) seq is in
        if delta > 0:
            target = starts[i + 1] if i + 1 < len(starts) else self.total - 1
        else:
            target = starts[i - 1] if seq == starts[max(i, 0)] and i > 0 else starts[max(i, 0)]
        return max(0, min(self.total - 1, target))

    def batch_row(self, batch: int | None) -> ReplayBatch | None:
        return next((b for b in self.batches if b["batch"] == batch), None)

    def batch_events(self, batch: int | None) -> list[ReplayEvent]:
        """The fetched events of one batch, in order."""
        row = self.batch_row(batch)
        if row is None:
            return []
        start, count = int(row["start"]), int(row["count"])
        found = (self.event(s) for s in range(start, start + count))
        return [e for e in found if e is not None]

    def find_call(self, batch: int, call: int | None, phase: str | None) -> tuple[int, bool]:
        """(seq, exact) of ``call``'s event in ``batch`` (its ``phase`` first): exact when
        that event is among the fetched pages; else the start of the batch's ``phase`` run
        (or of the batch), where it will be."""
        runs = [r for r in self.outline if r["batch"] == batch]
        runs.sort(key=lambda r: r["phase"] != phase)
        for run in runs:
            for seq in range(run["start"], run["start"] + run["count"]):
                e = self.event(seq)
                if call is not None and e is not None and e.call == call:
                    return seq, True
        if runs and runs[0]["phase"] == phase:
            return int(runs[0]["start"]), False
        row = self.batch_row(batch)
        return (int(row["start"]) if row else 0), False

    def find(self, like: ReplayEvent | Place | None) -> int:
        """The event of this list closest to ``like`` (an event of another detail or
        sample): the same call in the same batch and phase, else that batch's phase run."""
        if like is None or not self.total:
            return 0
        runs = [r for r in self.outline if r["batch"] == like.batch and r["phase"] == like.phase]
        for run in runs:
            for seq in range(run["start"], run["start"] + run["count"]):
                e = self.event(seq)
                if e is not None and e.call is not None and e.call == like.call:
                    return seq
        if runs:
            return int(runs[0]["start"])
        row = self.batch_row(like.batch)
        return int(row["start"]) if row else 0


def first_nonfinite(run_info: dict[str, Any] | None) -> Place | None:
    """The place (batch, call, phase) of the run's first non-finite value, from the
    anomalies its recording closed with: the forward origin before the gradient one in the
    same batch, a non-finite loss (no origin found) at its loss call; None in a healthy run."""
    found = []
    for rank, kind in enumerate(("nonfinite", "nonfinite_grad", "loss_nonfinite")):
        for anomaly in (run_info or {}).get("anomalies") or []:
            if anomaly.get("kind") != kind or not isinstance(anomaly.get("batch"), int):
                continue
            origin = anomaly.get("origin") or {}
            phase = origin.get("phase") or ("backward" if kind == "nonfinite_grad" else "loss")
            if origin.get("kind") == "input":
                phase = "data"
            place = Place(anomaly["batch"], phase, origin.get("call"))
            found.append((anomaly["batch"], rank, place))
    return min(found, key=lambda f: f[:2])[2] if found else None


PACE_WINDOW_S = 2.0
"""How far back the drawn rate is measured: long enough to average a few slow frames,
short enough that a change of speed shows within two seconds."""


@dataclass
class Pace:
    """Frames drawn while playing, for saying how many a second really are (a frame that
    takes longer than the timer's interval makes the timer skip ticks)."""

    times: list[float] = field(default_factory=list)

    def drawn(self, now: float) -> None:
        self.times = [t for t in self.times if now - t <= PACE_WINDOW_S] + [now]

    def reset(self) -> None:
        self.times = []

    def rate(self) -> float | None:
        """Frames a second over the window; None until a second's worth was measured."""
        if len(self.times) < 3 or self.times[-1] - self.times[0] < 1.0:
            return None
        return (len(self.times) - 1) / (self.times[-1] - self.times[0])
