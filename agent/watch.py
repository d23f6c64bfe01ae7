"""The watch series of a `tvis run --watch` run, decimated for the Loss page."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent.dispatch import rpc
from tvis.agent.protocol import BAD_REQUEST, AgentError
from tvis.agent.store import RunStore
from tvis.store import watch as series_store

# A series spanning more than this factor between its smallest and largest positive value
# is drawn on a log scale: a loss falling from 2.3 to 0.001 is otherwise a flat line.
LOG_SPAN = 100.0


class WatchAPI:
    """``watch_series`` of the runs of ``store``."""

    def __init__(self, store: RunStore) -> None:
        self.store = store

    @rpc
    def watch_series(self, run: str, width: int = 200) -> dict[str, Any] | None:
        """The run's watch series decimated to ``width`` columns, or null when the run was
        not watched: ``{steps, columns: [{first, last, loss, grad_norm, lr, bad}], lo, hi
        (per series), log (per series), anomaly, recorded: [first, last] | null}``."""
        if not 1 <= width <= 2048:
            raise AgentError("width must be 1 to 2048.", BAD_REQUEST)
        reader = self.store.reader(run)
        try:
            series = series_store.read(reader.path)
        except ValueError as e:
            raise AgentError(str(e), BAD_REQUEST) from None
        if series is None:
            return None
        steps = [s.get("index") for s in self.store.index(run).get("steps") or []]
        steps = [s for s in steps if isinstance(s, int)]
        return decimate(series, width, [min(steps), max(steps)] if steps else None)


def decimate(series: dict[str, Any], width: int, recorded: list[int] | None) -> dict[str, Any]:
    n = int(series["steps"])
    bad = ~np.isfinite(series["loss"]) | ~np.isfinite(series["grad_norm"])
    for step, _counts in series.get("nonfinite") or []:
        if isinstance(step, int) and 0 <= step < n:
            bad[step] = True
    columns = []
    for part in np.array_split(np.arange(n), min(width, n) or 1):
        if part.size == 0:
            continue
        a, b = int(part[0]), int(part[-1]) + 1
        columns.append(
            {
                "first": a,
                "last": b - 1,
                "loss": _mean(series["loss"][a:b]),
                "grad_norm": _peak(series["grad_norm"][a:b]),
                "lr": _mean(series["lr"][a:b]),
                "bad": bool(bad[a:b].any()),
            }
        )
    out: dict[str, Any] = {
        "steps": n,
        "columns": columns,
        "anomaly": series.get("anomaly"),
        "recorded": recorded,
        "checks": series.get("checks"),
        "lo": {},
        "hi": {},
        "log": {},
    }
    for name in ("loss", "grad_norm", "lr"):
        finite = series[name][np.isfinite(series[name])]
        out["lo"][name] = float(finite.min()) if finite.size else None
        out["hi"][name] = float(finite.max()) if finite.size else None
        positive = finite[finite > 0]
        out["log"][name] = bool(
            positive.size == finite.size > 1 and positive.max() > LOG_SPAN * positive.min()
        )
    return out


def _mean(values: np.ndarray) -> float | None:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else None


def _peak(values: np.ndarray) -> float | None:
    """Gradient norms keep their largest per column: a spike is what one looks for."""
    finite = values[np.isfinite(values)]
    return float(finite.max()) if finite.size else None
