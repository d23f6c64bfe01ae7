"""A multi-row bar chart widget drawn with block glyphs.

The bar chart shows a histogram of a tensor or the recent history of a scalar; both are a
sequence of heights, so one widget serves both, captioned with what it shows.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.widget import Widget

from tvis.tui.widgets.sparkline import BLOCKS

AXIS = 9
"""Columns of the y-axis: a value in 8 (``-1.23e+04``) and the axis line."""


def _label(value: float) -> str:
    return f"{value:.3g}"[: AXIS - 1].rjust(AXIS - 1)


class LiveBars(Widget):
    """Vertical bars of the given heights across the widget, a y-axis saying what the lowest
    and the tallest bar stand for, and a caption line below."""

    DEFAULT_CSS = """
    LiveBars { height: 1fr; width: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.heights: list[float] = []
        self.caption = ""
        self.axis: tuple[float, float] | None = None

    @property
    def bar_columns(self) -> int:
        """How many bars fit beside the axis."""
        return max(1, self.size.width - AXIS)

    def show(
        self, heights: Sequence[float], caption: str, axis: tuple[float, float] | None = None
    ) -> None:
        """Draw one bar per height (non-negative; the tallest fills the widget); ``axis`` is
        what the bottom and the top of the chart stand for."""
        self.heights = [max(0.0, float(h)) for h in heights]
        self.caption = caption
        self.axis = axis
        self.refresh()

    def render(self) -> Text:
        rows = max(1, self.size.height - 1)
        top = max(self.heights, default=0.0)
        eighths = [round(h / top * rows * 8) if top > 0 else 0 for h in self.heights]
        text = Text()
        for row in range(rows - 1, -1, -1):
            if self.axis is not None and self.heights:
                label = {rows - 1: _label(self.axis[1]), 0: _label(self.axis[0])}.get(row)
                text.append((label or " " * (AXIS - 1)) + ("┤" if label else "│"), style="dim")
            base = row * 8
            text.append("".join(BLOCKS[min(8, max(0, e - base))] for e in eighths), style="cyan")
            text.append("\n")
        text.append(self.caption, style="dim")
        return text
