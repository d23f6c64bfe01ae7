"""Replay's transport: the line saying what plays (state, step size, speed, where), and the
scrubber, a bar over the whole recording coloured by phase that a click or drag seeks in."""

from __future__ import annotations

from typing import Any

from rich.style import Style
from rich.text import Text
from textual.events import Click, MouseMove
from textual.message import Message
from textual.widgets import Static

from tvis.agent.replies import ReplayEvent
from tvis.tui import colors, fmt
from tvis.tui.replay_model import Recording

PHASES = ("data", "forward", "loss", "backward", "optimizer")


def phase_key() -> Text:
    """``■ data ■ forward …``: what the scrubber's colours mean."""
    text = Text()
    for phase in PHASES:
        text.append("■", style=colors.phase_color(phase))
        text.append(f" {colors.phase_label(phase)}  ", style=colors.MUTED)
    return text


class Scrubber(Static):
    """One cell per slice of the recording, coloured by the phase playing there; the cursor
    is the bright bar, batch starts are ticked below. Click or drag to seek."""

    DEFAULT_CSS = "Scrubber { height: 2; padding: 0 1; }"

    class Seek(Message):
        """The user asked to jump to event ``seq``."""

        def __init__(self, seq: int) -> None:
            super().__init__()
            self.seq = seq

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.recording: Recording | None = None
        self.cursor = 0

    def show(self, recording: Recording | None, cursor: int) -> None:
        if (recording, cursor) != (self.recording, self.cursor) or not self.recording:
            self.recording, self.cursor = recording, cursor
            self.update(self._render_bar(), layout=False)  # two lines, always

    def on_resize(self) -> None:
        self.update(self._render_bar(), layout=False)

    def _width(self) -> int:
        return max(10, (self.size.width or 80) - 2)

    def _cell_of(self, seq: int, total: int, width: int) -> int:
        return min(width - 1, seq * width // max(total, 1))

    def _render_bar(self) -> Text:
        rec = self.recording
        if rec is None or not rec.total:
            return Text("nothing recorded to replay yet", style=colors.MUTED)
        width = min(self._width(), max(rec.total, 1) * 4)
        phase_of = ["data"] * width
        for run in rec.outline:
            first = self._cell_of(run["start"], rec.total, width)
            last = self._cell_of(run["start"] + run["count"] - 1, rec.total, width)
            for cell in range(first, last + 1):
                # A cell covering several runs shows the rarer phases over the forward bulk.
                if phase_of[cell] in ("data", "forward") or run["phase"] not in ("data", "forward"):
                    phase_of[cell] = run["phase"]
        at = self._cell_of(self.cursor, rec.total, width)
        bar = Text()
        for cell, phase in enumerate(phase_of):
            # Played cells full height, the rest lower: the bar reads as progress too.
            if cell == at:
                bar.append("█", style=Style(color="white", bold=True))
            else:
                glyph = "█" if cell < at else "▄"
                bar.append(glyph, style=Style(color=colors.phase_color(phase)))
        ticks = [" "] * width
        for row in rec.batches:
            cell = self._cell_of(row["start"], rec.total, width)
            label = f"b{row['batch']}"
            # A blank on each side, so neighbouring labels never run together ("b3b4").
            if all(c == " " for c in ticks[max(0, cell - 1) : cell + len(label) + 1]):
                ticks[cell : cell + len(label)] = list(label)
        bar.append("\n" + "".join(ticks)[:width], style=colors.MUTED)
        return bar

    def _seek_to(self, x: int) -> None:
        rec = self.recording
        if rec is None or not rec.total:
            return
        width = min(self._width(), max(rec.total, 1) * 4)
        cell = max(0, min(width - 1, x - 1))  # one column of padding on the left
        self.post_message(self.Seek(min(rec.total - 1, cell * rec.total // width)))

    def on_click(self, event: Click) -> None:
        self._seek_to(event.x)

    def on_mouse_move(self, event: MouseMove) -> None:
        if event.button == 1:  # dragging with the left button held
            self._seek_to(event.x)


def transport_text(
    rec: Recording | None,
    event: ReplayEvent | None,
    cursor: int,
    playing: bool,
    size: str,
    speed: int,
    width: int,
    hint: str = "",
    drawn: float | None = None,
) -> Text:
    """``▶ 23/108 · forward · batch 0 (step 0) · features.1.0 Conv2d [32,16,16] · step
    layer · 4/s``: what plays and how, clipped to ``width``; ``hint`` (a key the event
    offers, such as opening a light group) goes before the step size. ``drawn``: the
    frames a second measured while playing, said when short of ``speed``."""
    text = Text()
    text.append(" ▶ playing " if playing else " ❚❚ paused ", style="bold reverse")
    if rec is None or not rec.total:
        text.append("  loading the recording …", style=colors.MUTED)
        return text
    text.append(f" {cursor + 1}/{rec.total} ")
    if event is None:
        text.append("· loading …", style=colors.MUTED)
    else:
        phase = event.phase
        text.append("· ")
        text.append(colors.phase_label(phase), style=f"bold {colors.phase_color(phase)}")
        step = event.step
        text.append(f" · batch {event.batch}" + (f" (step {step})" if step is not None else ""))
        if event.name and event.kind != "batch":  # a data event's name is its batch, said above
            text.append(f" · {fmt.clip(event.name, 40)}", style="bold")
        if event.cls:
            text.append(f" {event.cls}", style=colors.MUTED)
        if event.shape and event.kind in ("layer", "grad"):
            text.append(f" {fmt.shape(event.shape)}", style=colors.MUTED)
    if hint:
        text.append(f"  · {hint}", style="bold")
    text.append(f"  · step {size} (z) · ", style=colors.MUTED)
    if playing and drawn is not None and drawn < speed * 0.9:
        text.append(f"{drawn:.0f}/s drawn of {speed}/s", style=colors.WARN)
        text.append(" (+/-)", style=colors.MUTED)
    else:
        text.append(f"{speed}/s (+/-)", style=colors.MUTED)
    text.truncate(max(10, width), overflow="ellipsis")
    return text
