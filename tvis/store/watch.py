"""The watch series of a `tvis run --watch` run: one light record per optimizer step.

Stored in the run folder as ``watch.msgpack`` (written atomically, rewritten every few
seconds while the script trains, so a killed run keeps nearly all of it)::

    {"version": 1,
     "steps": n,                          # steps watched (step numbers 0 … n-1)
     "loss": bin float64[n],              # mean loss the step's backward(s) ran on (NaN: none)
     "grad_norm": bin float64[n],         # global L2 norm of every stepped gradient
     "lr": bin float64[n],                # learning rate of the first optimizer's first group
     "ms": bin float32[n],                # wall time of the step, ms
     "nonfinite": [[step, [count per param group]], ...],   # only steps that had any
     "checks": ["nan"] | ["nan", "spike"], "spike": {"factor", "window"},
     "anomaly": {"step", "kind", "text", "value", "median"?} | None}

Arrays are raw little-endian bytes: 2,000 steps take about 56 KB, ten thousand 280 KB.
``kind`` is ``loss_nonfinite``, ``grad_nonfinite``, ``loss_spike`` or ``grad_spike``.
Torch-free: the agent reads it for the Loss page.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import numpy as np

from tvis.store import atomic

WATCH = "watch.msgpack"
VERSION = 1
_COLUMNS = {"loss": "<f8", "grad_norm": "<f8", "lr": "<f8", "ms": "<f4"}


@dataclass
class Series:
    """The watch series in memory (plain Python lists while the script trains)."""

    loss: list[float] = field(default_factory=list)
    grad_norm: list[float] = field(default_factory=list)
    lr: list[float] = field(default_factory=list)
    ms: list[float] = field(default_factory=list)
    nonfinite: list[list] = field(default_factory=list)
    checks: list[str] = field(default_factory=lambda: ["nan"])
    spike: dict[str, float] = field(default_factory=dict)
    anomaly: dict[str, Any] | None = None

    @property
    def steps(self) -> int:
        return len(self.loss)

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {"version": VERSION, "steps": self.steps}
        for name, dtype in _COLUMNS.items():
            out[name] = np.asarray(getattr(self, name), dtype=dtype).tobytes()
        out.update(
            nonfinite=self.nonfinite, checks=self.checks, spike=self.spike, anomaly=self.anomaly
        )
        return out


def write(run_dir: Path, series: Series) -> None:
    atomic.write_msgpack(Path(run_dir) / WATCH, series.record())


def read(run_dir: Path) -> dict[str, Any] | None:
    """The series with its columns as numpy arrays, or None when the run has none.
    A file that does not fit the format raises ValueError with one sentence."""
    path = Path(run_dir) / WATCH
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        record = msgpack.unpackb(data, raw=False, strict_map_key=False)
        n = int(record["steps"])
        if record.get("version", 0) > VERSION:
            raise ValueError(f"{path} is a newer watch format than this tvis reads.")
        for name, dtype in _COLUMNS.items():
            column = np.frombuffer(record[name], dtype=dtype)
            if len(column) != n:
                raise ValueError(f"{path}: {name} holds {len(column)} steps, not {n}.")
            record[name] = column
    except ValueError:
        raise
    except Exception:
        raise ValueError(f"{path} is corrupt; the watch series cannot be read.") from None
    return record


def describe(meta: dict[str, Any]) -> str | None:
    """What `tvis ls` says of a watched run (from its meta.json), or None if not watched."""
    watch = meta.get("watch")
    if not isinstance(watch, dict):
        return None
    steps = watch.get("steps")
    if not isinstance(steps, int):
        return "watch: still training"
    anomaly = watch.get("anomaly")
    if isinstance(anomaly, dict):
        return (
            f"watch: {steps:,} steps, anomaly at step {anomaly.get('step')}: {anomaly.get('text')}"
        )
    return f"watch: {steps:,} steps, no anomaly"
