"""The bottom line: where the data comes from, which run, batch and step, the followed
sample, whether heatmaps show values or gradients, and how pictures are drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from tvis.tui import colors, fmt

if TYPE_CHECKING:
    from textual import getters

    from tvis.tui.app import TvisApp


class StatusLine(Static):
    """Re-renders from the app's state whenever that state changes."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    DEFAULT_CSS = """
    StatusLine { dock: bottom; height: 1; background: $panel; padding: 0 1; }
    """

    def on_mount(self) -> None:
        names = ("run_name", "batch", "sample", "show_grad", "run_status", "status_note")
        for name in (*names, "link_wait"):
            self.watch(self.app, name, self._changed, init=False)
        self._changed()

    def on_resize(self) -> None:
        self._changed()

    def _state(self) -> Text:
        app = self.app
        text = Text()
        if app.run_name:
            if app.run_status == "running":
                text.append(" ● live", style=self._ink(colors.BAD))
            elif app.run_status and app.run_status != "complete":
                text.append(f" ({app.run_status})", style=self._ink(colors.WARN))
            # Recorded indices, not positions: "batch 102/103" when eval groups left gaps.
            last = app.batch_indices[-1] if app.batch_count else 0
            text.append(f" · batch {app.batch}/{last}")
            step = app.current_step
            text.append(f" · step {step if step is not None else '—'}")
            text.append(f" · sample {app.sample}", style=self._ink(colors.PHASE["data"]))
            if app.show_grad:
                text.append(" · gradient", style=self._ink(colors.PHASE["backward"]))
            else:
                text.append(" · value", style=self._ink(colors.PHASE["forward"]))
        text.append(
            f" · {'images ' if self._roomy() else ''}{app.image_mode}",
            style=self._ink(colors.MUTED, ""),
        )
        if app.status_note:
            text.append(f" · {app.status_note}", style=self._ink(colors.WARN))
        if app.link_wait:
            text.append(f" · {app.link_wait}", style=self._ink(colors.WARN))
        return text

    def _ink(self, colour: str, plain: str = "bold") -> str:
        """``colour`` where the terminal has 256 colours or more; with 16 the nearest ANSI
        colour (dark blue for the value marker) vanishes on the line's grey, so the text
        keeps the line's own colour, in ``plain`` style."""
        return colour if self.app.console.color_system in ("256", "truecolor") else plain

    def _roomy(self) -> bool:
        return (self.size.width or 120) >= 100

    def _changed(self, *_: object) -> None:
        app = self.app
        state = self._state()
        # The target and the run name give way (shortened in the middle) to the state;
        # on a narrow terminal the target goes first.
        room = max(12, (self.size.width or 120) - 2 - state.cell_len)
        run = app.run_id or app.run_name or ""
        text = Text()
        if not run:
            text.append(fmt.clip_middle(app.target_label, room), style="bold")
        elif room < 40:
            text.append(fmt.clip_middle(run, room))
        else:
            run_room = min(len(run), room * 3 // 5)
            text.append(fmt.clip_middle(app.target_label, room - run_room - 3), style="bold")
            text.append(" · ")
            text.append(fmt.clip_middle(run, run_room))
        text.append_text(state)
        self.update(text, layout=False)  # one docked row whatever it says: a repaint
