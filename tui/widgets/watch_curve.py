"""The watch series of a `tvis run --watch` run: loss, gradient norm and learning rate over
every step the script took, the steps recorded in full highlighted and the anomaly marked."""

from __future__ import annotations

import math
from typing import Any

from rich.text import Text

from tvis.tui import colors, fmt
from tvis.tui.pane import AgentPane
from tvis.tui.widgets.sparkline import sparkline

LABEL = 10
"""Columns of the label before each line (``grad norm`` and a space)."""

_ROWS = (
    ("loss", "loss", colors.PHASE["loss"]),
    ("grad norm", "grad_norm", colors.PHASE["backward"]),
    ("lr", "lr", colors.PHASE["optimizer"]),
)


def _scaled(values: list[float | None], log: bool) -> list[float | None]:
    if not log:
        return values
    return [math.log10(v) if v is not None and v > 0 else None for v in values]


def watch_text(series: dict[str, Any], current_step: int | None) -> Text:
    """Three sparklines over every watched step, then a marks row: █ recorded in full,
    ▲ the step open in the viewer, ✖ the anomaly, ! a step with NaN/Inf."""
    columns = series.get("columns") or []
    anomaly = series.get("anomaly") or {}
    recorded = series.get("recorded")
    text = Text()
    headline = f"watched {series.get('steps', 0):,} steps"
    if anomaly:
        headline += f" · stopped at step {anomaly.get('step')}: {anomaly.get('text')}"
    else:
        headline += " · no anomaly"
    text.append(headline + "\n", style=colors.BAD if anomaly else colors.MUTED)
    for label, name, color in _ROWS:
        log = bool((series.get("log") or {}).get(name))
        values = _scaled([c.get(name) for c in columns], log)
        text.append(f"{label:<{LABEL}}", style=colors.MUTED)
        text.append_text(sparkline(values, len(columns), color))
        lo, hi = (series.get("lo") or {}).get(name), (series.get("hi") or {}).get(name)
        scale = " log" if log else ""
        text.append(f"  {fmt.num(lo)}–{fmt.num(hi)}{scale}\n", style=colors.MUTED)
    text.append(" " * LABEL)
    for c in columns:
        span = range(c["first"], c["last"] + 1)
        if anomaly and anomaly.get("step") in span:
            text.append("✖", style=f"bold {colors.BAD}")
        elif current_step is not None and current_step in span:
            text.append("▲", style=f"bold {colors.PHASE['loss']}")
        elif recorded and recorded[0] <= c["last"] and c["first"] <= recorded[1]:
            text.append("█", style=colors.PHASE["forward"])
        elif c.get("bad"):
            text.append("!", style=colors.BAD)
        else:
            text.append(" ")
    text.append(f"\n{'':<{LABEL}}", style=colors.MUTED)
    text.append(
        f"step 0 … {max(series.get('steps', 1) - 1, 0)}   █ recorded in full  ▲ this step  "
        "✖ anomaly",
        style=colors.MUTED,
    )
    return text


class WatchCurve(AgentPane):
    """The Loss page's view of the watch series; hidden for a run recorded without --watch."""

    DEFAULT_CSS = "WatchCurve { height: auto; padding: 0 1; display: none; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.series: dict[str, Any] | None = None

    def load(self) -> None:
        width = max(8, self.app.size.width - 2 - LABEL - 24)
        self.ask("watch_series", run=self.app.run_name, width=width)

    def answered(self, tag: str, result: Any) -> None:
        self.series = result
        self.display = result is not None
        self.refresh(layout=True)

    def failed(self, tag: str, message: str) -> None:
        self.series = {"error": message}
        self.display = True
        self.refresh(layout=True)

    def render(self) -> Text:
        series = self.series
        if not series:
            return Text("")
        if "error" in series:
            return Text(series["error"], style=colors.BAD)
        return watch_text(series, (self.app.batch_info or {}).get("step"))
