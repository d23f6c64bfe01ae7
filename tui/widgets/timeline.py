"""A batch's time as a flame chart in cells: phase bands on top, then the forward lane and the
(approximate) backward lane, one row per call depth. Each bar is a call in its phase's
colour; the cursor moves between bars and enter selects the call everywhere."""

from __future__ import annotations

import math
from collections import defaultdict
from typing import ClassVar

from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import BindingType
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tvis.agent.replies import PhaseSpan, TimelineBar, TimelineReply
from tvis.tui import colors, fmt, keys
from tvis.tui.messages import GotoCall
from tvis.tui.pane import Asks

HEADER_ROWS = 2  # phase bands, time axis
LANES = ("forward", "backward")
MAX_ZOOM = 4096.0


def fit_label(label: str, width: int) -> str:
    """``label`` padded to ``width`` cells, or clipped with "…" when it does not fit; a band too
    narrow for a letter and the "…" stays blank rather than showing a cut-off fragment."""
    if width <= 0:
        return ""
    if len(label) < width:
        return label.ljust(width)
    if width < 3:
        return " " * width
    return label[: width - 1] + "…"


def _dim(hex_color: str, factor: float) -> Color:
    c = Color.parse(hex_color).get_truecolor()
    return Color.from_rgb(c.red * factor, c.green * factor, c.blue * factor)


class Timeline(Asks, ScrollView, can_focus=True):
    """Flame chart of one batch (``timeline`` from the agent)."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.TIMELINE]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.total_ms = 0.0
        self.phases: list[PhaseSpan] = []
        self.bars: list[TimelineBar] = []
        self.rows: list[
            tuple[str, int | None]
        ] = []  # (lane, depth) per chart row; depth None = title
        self.by_row: dict[tuple[str, int], list[int]] = defaultdict(list)
        self.cursor: int | None = None
        self.zoom = 1.0
        self.view_t0 = 0.0
        self.batch_index: int | None = None
        self.follow: int | None = None  # the call selected elsewhere
        self.message = "loading…"

    # -- data ----------------------------------------------------------------------------

    def load(self, batch: int) -> None:
        self.batch_index = batch
        self._fetch(batch)

    def _fetch(self, batch: int) -> None:
        self.ask("timeline", run=self.app.run_name, batch=batch)

    def answered(self, tag: str, data: TimelineReply) -> None:
        self.set_timeline(data)

    def failed(self, tag: str, message: str) -> None:
        self.message = message
        self.bars = []
        self.refresh()

    def set_timeline(self, data: TimelineReply) -> None:
        self.total_ms = float(data["total_ms"] or 0.0) or 1.0
        self.phases = data["phases"]
        self.bars = sorted(
            (b for b in data["bars"] if b["lane"] in LANES),
            key=lambda b: (LANES.index(b["lane"]), b["depth"] or 0, b["t0"]),
        )
        self.by_row = defaultdict(list)
        for i, bar in enumerate(self.bars):
            self.by_row[(bar["lane"], bar["depth"] or 0)].append(i)
        self.rows = []
        for lane in LANES:
            depths = sorted(d for (ln, d) in self.by_row if ln == lane)
            if depths:
                self.rows.append((lane, None))
                self.rows += [(lane, d) for d in range(depths[-1] + 1)]
        self.cursor = 0 if self.bars else None
        self.message = "" if self.bars else "no timed calls in this batch"
        self.zoom, self.view_t0 = 1.0, 0.0
        # Only its height scrolls; a width taken from its size would change with its first
        # layout and ask a second frame.
        self.virtual_size = Size(0, HEADER_ROWS + len(self.rows))
        if self.follow is not None:
            self.select_call(self.follow)
        self.refresh()

    def select_call(self, call: int) -> None:
        """Put the cursor on ``call``'s forward bar (or its backward one)."""
        self.follow = call
        for i, bar in enumerate(self.bars):
            if bar["call"] == call:
                self._move(i)
                return

    # -- geometry ------------------------------------------------------------------------

    @property
    def span(self) -> float:
        return self.total_ms / self.zoom

    def _x(self, t: float, width: int) -> float:
        return (t - self.view_t0) / self.span * width

    def _row_of(self, bar_index: int) -> int:
        bar = self.bars[bar_index]
        return HEADER_ROWS + self.rows.index((bar["lane"], bar["depth"] or 0))

    # -- drawing -------------------------------------------------------------------------

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        if not self.bars:
            text = self.message if y == 0 else ""
            return Strip([Segment(text.ljust(width)[:width], Style(color=colors.MUTED))])
        if y == 0:
            return self._phase_band(width)
        if y == 1:
            return self._axis(width)
        index = int(self.scroll_y) + y - HEADER_ROWS
        if not 0 <= index < len(self.rows):
            return Strip.blank(width, Style())
        lane, depth = self.rows[index]
        if depth is None:
            title = (
                f"── {lane}"
                + (" (≈ inferred from gradient arrival)" if lane == "backward" else "")
                + " "
            )
            return Strip(
                [Segment(title.ljust(width, "─")[:width], Style(color=colors.PHASE[lane]))]
            )
        return self._bar_row(lane, depth, width)

    def phase_spans(self, width: int) -> list[tuple[str, int, int]]:
        """Each phase band as ``(phase, first column, end column)`` at ``width``."""
        spans: list[tuple[str, int, int]] = []
        end = 0
        for p in sorted(self.phases, key=lambda p: p["t0"]):
            if self._x(p["t1"], width) <= 0 or self._x(p["t0"], width) >= width:
                continue  # zoomed out of view
            # A phase gets at least one cell and never draws over the one before it.
            x0 = max(end, round(self._x(p["t0"], width)))
            x1 = min(width, max(x0 + 1, round(self._x(p["t1"], width))))
            if x0 < x1:
                spans.append((p["phase"], x0, x1))
                end = x1
        return spans

    def _phase_band(self, width: int) -> Strip:
        cells = [(" ", Style())] * width
        for phase, x0, x1 in self.phase_spans(width):
            style = Style(bgcolor=_dim(colors.phase_color(phase), 0.45), color="white")
            label = fit_label(colors.phase_label(phase), x1 - x0)
            for x in range(x0, x1):
                cells[x] = (label[x - x0], style)
        return Strip([Segment(ch, st) for ch, st in cells], width)

    def _axis(self, width: int) -> Strip:
        line = [" "] * width
        ticks = 4
        for i in range(ticks + 1):
            t = self.view_t0 + self.span * i / ticks
            label = fmt.ms(t)
            x = min(width - len(label), round(width * i / ticks))
            for j, ch in enumerate(label):
                if 0 <= x + j < width:
                    line[x + j] = ch
        return Strip([Segment("".join(line), Style(color=colors.MUTED))], width)

    def _bar_row(self, lane: str, depth: int, width: int) -> Strip:
        cells: list[tuple[str, Style]] = [(" ", Style())] * width
        for i in self.by_row.get((lane, depth), []):
            bar = self.bars[i]
            x0 = math.floor(self._x(bar["t0"], width))
            x1 = max(x0 + 1, math.ceil(self._x(bar["t1"], width)))
            if x1 <= 0 or x0 >= width:
                continue
            phase = bar["phase"] if lane == "forward" else "backward"
            selected = i == self.cursor
            # Neighbours alternate in brightness so adjacent calls of one phase stay apart.
            shade = 0.85 if i % 2 else 0.62
            bg = Color.parse("white") if selected else _dim(colors.phase_color(phase), shade)
            style = Style(bgcolor=bg, color="black", bold=selected, meta={"bar": i})
            label = "▏" + fit_label(bar["name"] or str(bar["call"]), x1 - x0 - 1)
            for x in range(max(0, x0), min(width, x1)):
                k = x - x0
                cells[x] = (label[k] if k < len(label) else " ", style)
        return Strip([Segment(ch, st) for ch, st in cells], width)

    # -- moving --------------------------------------------------------------------------

    def _move(self, index: int) -> None:
        self.cursor = index
        bar = self.bars[index]
        if not (self.view_t0 <= bar["t0"] and bar["t1"] <= self.view_t0 + self.span):
            self.view_t0 = max(0.0, min(self.total_ms - self.span, bar["t0"] - self.span * 0.1))
        row = self._row_of(index)
        if not (self.scroll_y + HEADER_ROWS <= row < self.scroll_y + self.size.height):
            self.scroll_to(y=max(0, row - self.size.height // 2), animate=False, immediate=True)
        self.refresh()

    def action_bar(self, delta: int) -> None:
        if self.cursor is None:
            return
        bar = self.bars[self.cursor]
        row = self.by_row[(bar["lane"], bar["depth"] or 0)]
        pos = row.index(self.cursor) + delta
        if 0 <= pos < len(row):
            self._move(row[pos])

    def action_lane(self, delta: int) -> None:
        if self.cursor is None:
            return
        bar = self.bars[self.cursor]
        mid = (bar["t0"] + bar["t1"]) / 2
        chart_rows = [(lane, depth) for lane, depth in self.rows if depth is not None]
        pos = chart_rows.index((bar["lane"], bar["depth"] or 0)) + delta
        while 0 <= pos < len(chart_rows):
            candidates = self.by_row.get(chart_rows[pos], [])
            if candidates:
                best = min(
                    candidates,
                    key=lambda i: abs((self.bars[i]["t0"] + self.bars[i]["t1"]) / 2 - mid),
                )
                self._move(best)
                return
            pos += delta

    def action_zoom(self, factor: float) -> None:
        if not self.bars:
            return
        centre = self.view_t0 + self.span / 2
        if self.cursor is not None:
            bar = self.bars[self.cursor]
            centre = (bar["t0"] + bar["t1"]) / 2
        self.zoom = min(MAX_ZOOM, max(1.0, self.zoom * factor))
        self.view_t0 = max(0.0, min(self.total_ms - self.span, centre - self.span / 2))
        self.refresh()

    def action_select_bar(self) -> None:
        if self.cursor is not None:
            self.post_message(GotoCall(self.bars[self.cursor]["call"], batch=self.batch_index))

    def on_click(self, event: events.Click) -> None:
        index = event.style.meta.get("bar")
        if isinstance(index, int):
            self._move(index)
            self.action_select_bar()
