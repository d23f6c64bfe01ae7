"""Every module and function call of the batch as one sortable row: output shape, σ,
mean |x|, % zeros, ‖grad‖, forward and ≈backward time, and the warning flags. Calls of the
data pipeline are left to the tree: this table is about the model's layers.

Sorting happens at the agent (``layers(sort=…)``) so a model with thousands of layers
sorts without shipping them all twice."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Static

from tvis.store import schema
from tvis.tui import colors, fmt, keys, marks
from tvis.tui.fetch import fetch
from tvis.tui.messages import GotoCall, Selected, Selection

PAGE = 1000
"""Rows per request while filling the table."""

MAX_ROWS = 20_000
"""Rows shown at most; beyond this a table is no longer read row by row (use search)."""


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    sort: str | None
    render: Callable[[dict[str, Any]], Text | str]


def _right(value: str, style: str = "") -> Text:
    return Text(value, style=style, justify="right")


def _flags(row: dict[str, Any]) -> Text:
    text = Text()
    for m in marks.of_row(row):
        text.append(f"{m.symbol} {m.label} ", style=m.color)
    return text


def _zeros(row: dict[str, Any]) -> Text:
    z = row.get("zeros")
    return _right(fmt.pct(z), colors.WARN if z is not None and z > schema.DEAD_ZEROS else "")


def _grad(row: dict[str, Any]) -> Text:
    g = row.get("grad_norm")
    return _right(fmt.num(g), colors.WARN if g is not None and g < schema.VANISHING_GRAD else "")


COLUMNS = [
    Column(
        "order", "#", "order", lambda r: _right(str(r.get("order", r.get("id", ""))), colors.MUTED)
    ),
    Column("name", "name", "name", lambda r: fmt.call_name(r)),
    Column(
        "cls",
        "class",
        "cls",
        lambda r: Text(r.get("cls") or r.get("kind") or "", style=colors.MUTED),
    ),
    Column("shape", "output", "out_numel", lambda r: _right(fmt.shape(r.get("out_shape")))),
    Column("std", "σ", "std", lambda r: _right(fmt.num(r.get("std")))),
    Column("absmean", "mean|x|", "absmean", lambda r: _right(fmt.num(r.get("absmean")))),
    Column("zeros", "zeros", "zeros", _zeros),
    Column("grad", "‖grad‖", "grad_norm", _grad),
    Column(
        "fwd", "fwd", "fwd_ms", lambda r: _right(fmt.ms(r.get("fwd_ms")), colors.PHASE["forward"])
    ),
    Column(
        "bwd", "≈bwd", "bwd_ms", lambda r: _right(fmt.ms(r.get("bwd_ms")), colors.PHASE["backward"])
    ),
    Column("flags", "flags", None, _flags),
]

SORTABLE = [c for c in COLUMNS if c.sort]


class LayersTable(DataTable):
    """The layers table of one batch; ``o``/``O`` or a header click sorts."""

    BINDINGS = [*keys.LIST, *keys.LAYERS]

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", zebra_stripes=False, **kwargs)
        self.sort_column = SORTABLE[0]
        self.desc = False
        self.batch_index: int | None = None
        self.rows_by_key: dict[str, dict[str, Any]] = {}
        self.hidden_data_calls = 0
        self.follow: int | None = None
        self._filling = False

    def on_mount(self) -> None:
        for column in COLUMNS:
            self.add_column(self._label(column), key=column.key)

    def _label(self, column: Column) -> Text:
        if column is self.sort_column and column.sort != "order":
            return Text(column.label + (" ▼" if self.desc else " ▲"), style="bold")
        return Text(column.label)

    def load(self, batch: int) -> None:
        """Fill the table for ``batch`` in the current sort order."""
        self.batch_index = batch
        self._fetch(batch, self.sort_column.sort, self.desc)

    @work(thread=True, exclusive=True, group="layers", exit_on_error=False)
    def _fetch(self, batch: int, sort: str, desc: bool) -> None:
        rows: list[dict[str, Any]] = []
        total = None
        while total is None or len(rows) < min(total, MAX_ROWS):
            got: list[dict[str, Any]] = []

            def keep(page: dict[str, Any], got=got) -> None:
                got.append(page)

            fetch(
                self,
                keep,
                "layers",
                on_error=self._error,
                run=self.app.run_name,
                batch=batch,
                sort=sort,
                desc=desc,
                offset=len(rows),
                limit=PAGE,
            )
            if not got or not got[0].get("rows"):
                break
            total = got[0].get("total", 0)
            rows += got[0]["rows"]
        self.app.call_from_thread(self._fill, rows)

    def _fill(self, rows: list[dict[str, Any]]) -> None:
        highlighted = self._highlighted_key()
        self._filling = True  # the cursor moves below are ours, not a user's selection
        self.clear()
        for column in COLUMNS:
            self.columns[column.key].label = self._label(column)
        self.rows_by_key = {}
        shown = [r for r in rows if r.get("phase") != "data"]
        self.hidden_data_calls = len(rows) - len(shown)
        for row in shown:
            key = str(row.get("id"))
            self.rows_by_key[key] = row
            self.add_row(*(c.render(row) for c in COLUMNS), key=key)
        if self.follow is not None and str(self.follow) in self.rows_by_key:
            highlighted = str(self.follow)
        if highlighted in self.rows_by_key:
            self.move_cursor(row=self.get_row_index(highlighted))
        self.call_after_refresh(setattr, self, "_filling", False)
        self.post_message(self.Filled())

    class Filled(Message):
        """The table holds a new set of rows."""

    def show_call(self, call: int | None) -> None:
        """Put the cursor on ``call``'s row (the call selected elsewhere)."""
        self.follow = call
        key = str(call)
        if call is not None and key in self.rows_by_key and not self.has_focus:
            self._filling = True
            self.move_cursor(row=self.get_row_index(key))
            self.call_after_refresh(setattr, self, "_filling", False)

    def _error(self, message: str) -> None:
        self.clear()
        self.notify(message, severity="error", timeout=5)

    def _highlighted_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            return self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None

    # -- sorting -------------------------------------------------------------------------

    def sort_by(self, column: Column, desc: bool | None = None) -> None:
        if desc is None:
            desc = (
                not self.desc
                if column is self.sort_column
                else column.sort not in ("order", "name", "cls")
            )
        self.sort_column, self.desc = column, desc
        if self.batch_index is not None:
            self._fetch(self.batch_index, column.sort, desc)

    def action_sort_next(self) -> None:
        i = SORTABLE.index(self.sort_column)
        self.sort_by(SORTABLE[(i + 1) % len(SORTABLE)])

    def action_sort_reverse(self) -> None:
        self.sort_by(self.sort_column, not self.desc)

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = next((c for c in COLUMNS if c.key == event.column_key.value), None)
        if column is not None and column.sort:
            self.sort_by(column)

    # -- selection -----------------------------------------------------------------------

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        row = self.rows_by_key.get(event.row_key.value)
        if row is not None and self.has_focus and not self._filling:
            self.post_message(
                Selected(Selection("call", batch=self.batch_index, call=row["id"], row=row))
            )

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        row = self.rows_by_key.get(event.row_key.value)
        if row is not None:
            self.post_message(GotoCall(row["id"], batch=self.batch_index))


class LayersPane(Vertical):
    """The Layers pane: a caption saying what the table holds, then the table."""

    DEFAULT_CSS = """
    LayersPane #layers-caption { height: 1; color: $text-muted; }
    LayersPane LayersTable { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Static("", id="layers-caption")
        yield LayersTable()

    @on(LayersTable.Filled)
    def _filled(self, event: LayersTable.Filled) -> None:
        table = self.query_one(LayersTable)
        order = (
            "call order"
            if table.sort_column.sort == "order"
            else (f"{table.sort_column.label} {'▼' if table.desc else '▲'}")
        )
        text = Text(f"{table.row_count} layers · {order} · o / O sort")
        if table.hidden_data_calls:
            text.append(
                f" · {table.hidden_data_calls} data-pipeline calls are in the tree",
                style=colors.MUTED,
            )
        self.query_one("#layers-caption", Static).update(text)
