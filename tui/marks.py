"""Warning marks for a call or layer: NaN/Inf, dead units, vanishing gradients.

Computed from the recorded statistics with the thresholds the viewer promises, and merged
with any flags the recorder or agent attached, so a mark shows even when one side of the
pipeline did not name it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tvis.tui import colors

DEAD_ZEROS = 0.9
"""Share of exact zeros above which a layer's units look dead (e.g. ReLU stuck at 0)."""

VANISHING_GRAD = 1e-8
"""‖dL/d(output)‖ below which the gradient reaching a layer is effectively gone."""


@dataclass(frozen=True)
class Mark:
    """One warning: a one-cell symbol for rows, a label for the inspector, its colour."""

    key: str
    symbol: str
    label: str
    color: str


NAN = Mark("nan", "✖", "NaN/Inf", colors.BAD)
DEAD = Mark("dead", "∅", "dead units?", colors.WARN)
VANISHING = Mark("vanishing", "↓", "vanishing", colors.WARN)

_FLAG_MARKS = {"nan": NAN, "inf": NAN, "nan_inf": NAN, "dead": DEAD, "vanishing": VANISHING}

INFO_FLAGS = {
    "mixes_samples": "mixes samples",
    "patch_embedding": "patch embedding",
    "truncated": "values truncated",
    "approx": "approximate",
    "bwd_inferred": "backward time inferred",
    "batch_dim_inferred": "batch dim inferred",
}
"""Flags that qualify a call without being warnings; shown as words in the inspector."""


def of_row(row: dict[str, Any]) -> list[Mark]:
    """The marks of a call row (``calls``/``find``) or a ``layers`` row, most severe first."""
    found: dict[str, Mark] = {}
    for flag in row.get("flags") or ():
        mark = _FLAG_MARKS.get(str(flag).lower())
        if mark:
            found[mark.key] = mark
    stats = row.get("out_stats") or {}
    if (stats.get("nan") or 0) + (stats.get("inf") or 0) > 0:
        found["nan"] = NAN
    zeros = row.get("zeros", stats.get("zeros"))
    if zeros is not None and zeros > DEAD_ZEROS:
        found["dead"] = DEAD
    grad_norm = row.get("grad_norm")
    if grad_norm is not None and grad_norm < VANISHING_GRAD:
        found["vanishing"] = VANISHING
    order = [NAN, DEAD, VANISHING]
    return [m for m in order if m.key in found]


def info_flags(flags: list[str] | None) -> list[str]:
    """The non-warning flags as words; unknown flags are shown as they came."""
    words = []
    for flag in flags or ():
        key = str(flag).lower()
        if key in _FLAG_MARKS:
            continue
        words.append(INFO_FLAGS.get(key, str(flag).replace("_", " ")))
    return words
