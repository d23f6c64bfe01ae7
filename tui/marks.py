"""Warning marks for a call or layer: NaN/Inf, dead units, vanishing gradients.

The flags and their thresholds are defined once, in ``tvis.store.schema``; this module gives
them the viewer's colours. Marks come from the flags the recorder or agent attached and from
the statistics, so a mark shows even when one side of the pipeline did not name it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from tvis.agent.replies import CallRowView
from tvis.store import schema
from tvis.tui import colors

SEVERITY_COLOR = {"bad": colors.BAD, "warn": colors.WARN, "info": colors.MUTED}


@dataclass(frozen=True)
class Mark:
    """One warning: a one-cell symbol for rows, a label for the inspector, its colour."""

    key: str
    symbol: str
    label: str
    color: str


def _mark(flag: schema.Flag) -> Mark:
    return Mark(flag.key, flag.symbol, flag.label, SEVERITY_COLOR[flag.severity])


MARKS = {key: _mark(flag) for key, flag in schema.FLAGS.items() if flag.warning}
"""The warning marks, by flag."""


def of_row(row: dict[str, Any]) -> list[Mark]:
    """The marks of a call row (``calls``/``find``) or a ``layers`` row, most severe first."""
    found = {str(f) for f in row.get("flags") or ()}
    stats = row.get("out_stats")
    if stats is None:  # a layers row carries its statistics flat
        stats = {k: row.get(k) for k in ("nan", "inf", "zeros")} | {"numel": row.get("out_numel")}
    found.update(schema.stat_flags(cast(schema.Stats, stats), row.get("grad_norm")))
    return [MARKS[key] for key in schema.WARNING_ORDER if key in found]


def of_call(row: CallRowView) -> list[Mark]:
    """The marks of a decoded call-tree row, most severe first."""
    found = set(row.flags) | set(schema.stat_flags(row.out_stats, row.grad_norm))
    return [MARKS[key] for key in schema.WARNING_ORDER if key in found]


def info_flags(flags: list[str] | None) -> list[str]:
    """The non-warning flags as words; a flag the schema does not know is shown as it came."""
    words = []
    for key in flags or ():
        flag = schema.FLAGS.get(str(key))
        if flag is None:
            words.append(str(key).replace("_", " "))
        elif not flag.warning:
            words.append(flag.label)
    return words
