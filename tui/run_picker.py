"""The run picker: every run under the target, newest first, with status, script and size.
A run still being recorded shows as live; the list refreshes while it is open."""

from __future__ import annotations

import time
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from tvis.tui import colors, fmt, keys
from tvis.tui.pane import Asks
from tvis.tui.widgets.lists import ListTable

POLL_S = 2.0
"""How often the list is refreshed: new runs and finished recordings show within seconds."""

STATUS_STYLE = {
    "running": colors.BAD,
    "complete": colors.GOOD,
    "failed": colors.BAD,
    "interrupted": colors.WARN,
    "incomplete": colors.WARN,
    "unreadable": colors.BAD,
}


def status_text(status: str | None) -> Text:
    if status == "running":
        return Text("● live", style=f"bold {colors.BAD}")
    return Text(status or "?", style=STATUS_STYLE.get(status or "", ""))


def when(started: Any) -> str:
    if not isinstance(started, (int, float)):
        return "—"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(started))


class RunTable(ListTable):
    pass


class RunPicker(Asks, ModalScreen[str | None]):
    """Pick a run; dismisses with its ``run`` name (None on escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.RUNS]

    DEFAULT_CSS = """
    RunPicker { align: center middle; }
    RunPicker > Vertical { width: 95%; max-width: 140; height: 80%; border: round $accent; background: $surface; }
    RunPicker #runs-title { height: 1; padding: 0 1; }
    RunPicker RunTable { height: 1fr; }
    """

    def __init__(self, runs: list[dict[str, Any]], current: str | None = None) -> None:
        super().__init__()
        self.runs = runs
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(
                Text("Runs, newest first — enter opens one", style="bold"), id="runs-title"
            )
            yield RunTable(cursor_type="row")

    def on_mount(self) -> None:
        table = self.query_one(RunTable)
        for col in ("run", "status", "script", "steps", "batches", "calls", "size", "started"):
            table.add_column(col, key=col)
        self._fill(self.runs)
        table.focus()
        self.set_interval(POLL_S, self._poll)

    def _fill(self, runs: list[dict[str, Any]]) -> None:
        self.runs = runs
        table = self.query_one(RunTable)
        cursor = table.cursor_row
        table.clear()
        for r in runs:
            table.add_row(
                Text(
                    r.get("run_id") or r.get("run", "?"),
                    style="bold" if r.get("run") == self.current else "",
                ),
                status_text(r.get("status")),
                Text(r.get("script") or ""),  # a path, not markup
                Text(str(r.get("steps", "—")), justify="right"),
                Text(str(r.get("batches", "—")), justify="right"),
                Text(fmt.num(r.get("calls")), justify="right"),
                Text(fmt.size(r.get("bytes")), justify="right"),
                when(r.get("started")),
                key=r.get("run"),
            )
        if runs:
            table.move_cursor(row=min(max(cursor, 0), len(runs) - 1))

    def _poll(self) -> None:
        self.ask("runs")

    def answered(self, tag: str, runs: list[dict[str, Any]]) -> None:
        self._fill(runs)

    @on(DataTable.RowSelected)
    def _picked(self, event: DataTable.RowSelected) -> None:
        run = next((r for r in self.runs if r.get("run") == event.row_key.value), None)
        if run is None:
            return
        if run.get("status") == "unreadable":
            self.notify(run.get("error") or "this run cannot be read", severity="error", timeout=6)
            return
        self.dismiss(run["run"])

    def action_cancel(self) -> None:
        self.dismiss(None)
