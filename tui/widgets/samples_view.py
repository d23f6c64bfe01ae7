"""The batch's samples: input (picture or text), target, prediction, loss. Enter makes a
sample the followed one, which every heatmap then slices out."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from tvis.tui import colors, fmt, keys
from tvis.tui.fetch import fetch
from tvis.tui.picture import Picture, Scale

PREVIEW_PX = 64
"""Side of the preview picture asked of the agent: sharp in half blocks at 32 cells wide."""


def label(value: Any, classes: list[str] | None) -> str:
    if isinstance(value, int) and classes and 0 <= value < len(classes):
        return f"{classes[value]} ({value})"
    return "—" if value is None else str(value)


class SampleTable(DataTable):
    BINDINGS = keys.LIST

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)

    def on_mount(self) -> None:
        for col in ("", "sample", "target", "prediction", "loss", "p(target)"):
            self.add_column(col, key=col or "mark")

    def fill(self, rows: list[dict[str, Any]], classes: list[str] | None, followed: int) -> None:
        cursor = self.cursor_row
        self.clear()
        for row in rows:
            target, pred = row.get("target"), row.get("pred")
            verdict = ""
            if target is not None and pred is not None:
                verdict = colors.GOOD if target == pred else colors.BAD
            self.add_row(
                Text("●" if row.get("sample") == followed else " ", style=colors.PHASE["data"]),
                str(row.get("sample")),
                label(target, classes),
                Text(label(pred, classes), style=verdict),
                Text(fmt.num(row.get("loss")), justify="right", style=colors.PHASE["loss"]),
                Text(fmt.num(row.get("p_target")), justify="right"),
                key=str(row.get("sample")),
            )
        if rows:
            self.move_cursor(row=min(max(cursor, 0), len(rows) - 1))


class SamplesView(Vertical):
    """The Samples pane: the table and a preview of the highlighted sample's input."""

    DEFAULT_CSS = """
    SamplesView #samples-header { height: auto; color: $text-muted; }
    SamplesView > Horizontal { height: 1fr; }
    SamplesView SampleTable { width: 1fr; min-width: 40; }
    SamplesView #preview { width: 36; height: auto; padding: 0 1; }
    SamplesView #preview-text { height: auto; }
    SamplesView.-narrow > Horizontal { layout: vertical; }
    SamplesView.-narrow SampleTable { width: 1fr; height: 1fr; }
    SamplesView.-narrow #preview { width: 1fr; height: auto; }
    """

    NARROW = 96
    """Below this many columns the preview goes under the table instead of beside it."""

    def __init__(self, image_mode: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.image_mode = image_mode
        self.batch_index: int | None = None
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="samples-header")
        with Horizontal():
            yield SampleTable()
            with Vertical(id="preview"):
                yield Picture(max_rows=16, id="preview-image")
                yield Picture(max_rows=12, id="preview-map")
                yield Static("", id="preview-text")

    def on_mount(self) -> None:
        self.watch(self.app, "sample", self._followed_changed, init=False)

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW, "-narrow")

    def load(self, batch: int) -> None:
        self.batch_index = batch
        self._fetch(batch)

    @work(thread=True, exclusive=True, group="samples", exit_on_error=False)
    def _fetch(self, batch: int) -> None:
        fetch(self, self._show, "samples", on_error=self._error, run=self.app.run_name, batch=batch)

    def _error(self, message: str) -> None:
        self.query_one("#samples-header", Static).update(Text(message, style=colors.BAD))

    def _class_names(self) -> list[str] | None:
        return ((self.app.run_info or {}).get("data") or {}).get("classes")

    def _show(self, result: dict[str, Any]) -> None:
        self.rows = result.get("rows") or []
        header = Text(
            f"batch {self.batch_index} · {result.get('batch_size', len(self.rows))} samples · "
        )
        header.append("enter follows a sample everywhere ([ and ] too)")
        if not any(r.get(k) is not None for r in self.rows for k in ("target", "pred", "loss")):
            header.append(
                "\ntargets, predictions and per-sample losses were not recorded in this run",
                style=colors.MUTED,
            )
        self.query_one("#samples-header", Static).update(header)
        self.query_one(SampleTable).fill(self.rows, self._class_names(), self.app.sample)

    def _followed_changed(self, sample: int) -> None:
        table = self.query_one(SampleTable)
        if self.rows:
            table.fill(self.rows, self._class_names(), sample)
            table.move_cursor(row=min(sample, len(self.rows) - 1))

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        row = next((r for r in self.rows if str(r.get("sample")) == event.row_key.value), None)
        if row is not None:
            self._preview(row)

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.app.sample = int(event.row_key.value)

    def _preview(self, row: dict[str, Any]) -> None:
        given = row.get("input") or {}
        text = self.query_one("#preview-text", Static)
        self.query_one("#preview-image", Picture).clear()
        self.query_one("#preview-map", Picture).clear()
        if given.get("kind") == "text" or given.get("text"):
            text.update(Text(fmt.clip(str(given.get("text", "")), 2000)))
        elif isinstance(given.get("tensor"), int):
            text.update(
                Text(f"sample {row.get('sample')} as the model received it", style=colors.MUTED)
            )
            self._load_input(row.get("sample"), given)
        else:
            text.update(Text("no input recorded for this sample", style=colors.MUTED))

    @work(thread=True, exclusive=True, group="preview", exit_on_error=False)
    def _load_input(self, sample: int, given: dict[str, Any]) -> None:
        common = {
            "run": self.app.run_name,
            "batch": self.batch_index,
            "tensor": given["tensor"],
            "sample": sample,
        }
        if given.get("kind") == "image":
            fetch(
                self,
                lambda img: self.query_one("#preview-image", Picture).show_rgb(img["array"]),
                "image",
                on_error=self._preview_error,
                width=PREVIEW_PX,
                height=PREVIEW_PX,
                **common,
            )
        else:

            def show(view: dict[str, Any]) -> None:
                picture = self.query_one("#preview-map", Picture)
                picture.show_values(view["array"], Scale.of(view["array"]))

            fetch(self, show, "view", on_error=self._preview_error, width=32, height=22, **common)

    def _preview_error(self, message: str) -> None:
        self.query_one("#preview-text", Static).update(Text(message, style=colors.MUTED))
