"""Where a watched run opens: on the anomaly that stopped it, not on its first batch.

A `tvis run --watch` recording holds the anomalous step and the steps before it; the user
came for the anomaly. For a NaN or Inf that is the call where the first non-finite value
appeared (forward, else the gradient in backward); for a spike, the first batch of the step.
"""

from __future__ import annotations

from typing import Any

from tvis.tui.replay_model import Place, Recording

# Anomalies of the run index that name where a batch first went non-finite, best first.
_ORIGINS = ("nonfinite", "nonfinite_grad")


def watched_anomaly(info: dict[str, Any] | None) -> dict[str, Any] | None:
    """The anomaly a watched run stopped at (``meta.watch.anomaly``), or None."""
    watch = ((info or {}).get("meta") or {}).get("watch")
    anomaly = watch.get("anomaly") if isinstance(watch, dict) else None
    return anomaly if isinstance(anomaly, dict) else None


def opening_event(info: dict[str, Any] | None) -> Place | None:
    """The place (batch, phase, call) to open a watched run on (what Replay's ``find`` takes), or
    None for a run that was not watched or stopped at no anomaly."""
    anomaly = watched_anomaly(info)
    if anomaly is None:
        return None
    found = {a.get("kind"): a for a in (info or {}).get("anomalies") or [] if isinstance(a, dict)}
    for kind in _ORIGINS:
        entry = found.get(kind)
        if entry and isinstance(entry.get("batch"), int):
            origin = entry.get("origin") or {}
            return Place(entry["batch"], origin.get("phase"), origin.get("call"))
    step = anomaly.get("step")
    for b in (info or {}).get("batches") or []:
        if isinstance(b, dict) and b.get("step") == step and not b.get("light"):
            return Place(b.get("index"), "forward")
    return None


def opening_batch(info: dict[str, Any] | None) -> int | None:
    event = opening_event(info)
    return event.batch if event and isinstance(event.batch, int) else None


def opening_seq(recording: Recording, event: Place) -> int:
    """Replay's event to open on: the anomaly's own call, else the first event of its batch
    and phase at or after it (at layer detail a project function is not an event; calls are
    numbered in the order they began)."""
    seq = recording.find(event)
    call = event.call
    found = recording.event(seq)
    if call is None or (found is not None and found.call == call):
        return seq
    for run in recording.outline:
        if run["batch"] != event.batch or run["phase"] != event.phase:
            continue
        for s in range(run["start"], run["start"] + run["count"]):
            e = recording.event(s)
            if e is not None and e.call is not None and e.call >= call:
                return s
    return seq
