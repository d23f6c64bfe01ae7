"""The batch's samples: input (picture or text), target, prediction, loss. Enter makes a
sample the followed one, which every heatmap then slices out."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from tvis.tui import colors, fmt
from tvis.tui.pane import Asks
from tvis.tui.picture import Picture, Scale
from tvis.tui.widgets.lists import LineColumn, LineTable, content_widths, without_empty_columns

PREVIEW_CELLS = 34
"""Width of the preview's pictures beside the table (its column, less the padding)."""
PREVIEW_PX = 64
"""Side of the preview picture asked of the agent: sharp in half blocks at 32 cells wide."""


def label(value: Any, classes: list[str] | None) -> str:
    if isinstance(value, int) and classes and 0 <= value < len(classes):
        return f"{classes[value]} ({value})"
    return "—" if value is None else str(value)


CLASS_COLUMNS = (
    LineColumn(""),
    LineColumn("sample"),
    LineColumn("target"),
    LineColumn("prediction"),
    LineColumn("loss", right=True),
    LineColumn("p(target)", right=True),
)
TEXT_COLUMNS = (
    LineColumn(""),
    LineColumn("sample"),
    LineColumn("target text"),
    LineColumn("predicted text"),
    LineColumn("mean loss", right=True),
    LineColumn("worst token"),
)
TEXT_CELL = 40
"""Characters of a decoded text shown in a table cell; the preview shows it whole."""


class SampleTable(LineTable):
    """The batch's samples, one row each, drawn line by line: a ``DataTable`` rendered
    every cell of every row through Rich on the pane's first frame (~40 ms of `a`)."""

    columns: tuple[LineColumn, ...] = CLASS_COLUMNS  # TEXT_COLUMNS for a language model

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.per_token = False
        self._cells: list[tuple[Text | str, ...]] = []
        self._widths = [len(c.label) for c in self.columns]

    def fill(
        self,
        rows: list[dict[str, Any]],
        classes: list[str] | None,
        followed: int,
        per_token: bool = False,
        cursor: int | None = None,
    ) -> None:
        """Show ``rows`` (the followed sample marked), the cursor on row ``cursor`` (kept
        where it was when None); the cursor's row is announced (``Highlighted``) either way,
        so the preview shows the row it is on."""
        self.per_token = per_token
        cells = [sample_cells(row, classes, followed, per_token) for row in rows]
        columns = TEXT_COLUMNS if per_token else CLASS_COLUMNS
        self.columns, self._cells = without_empty_columns(columns, cells, kept=2)
        self._widths = content_widths(self.columns, self._cells)
        self.set_rows(len(rows), cursor)
        if rows:
            self.post_message(self.Highlighted(self, self.cursor_row))

    def column_widths(self, width: int) -> list[int]:
        return self._widths

    def cells(self, row: int) -> tuple[Text | str, ...]:
        return self._cells[row]


def sample_cells(
    row: dict[str, Any], classes: list[str] | None, followed: int, per_token: bool
) -> tuple[Text | str, ...]:
    """What a sample's row shows: the followed mark, the sample, what it should have been
    and what the model made of it, its loss and how sure the model was."""
    mark = Text("●" if row.get("sample") == followed else " ", style=colors.PHASE["data"])
    loss = Text(fmt.num(row.get("loss")), style=colors.PHASE["loss"])
    if per_token:
        return (
            mark,
            str(row.get("sample")),
            text_cell(row.get("target_text")),
            text_cell(row.get("pred_text")),
            loss,
            worst_cell(row.get("worst")),
        )
    target, pred = row.get("target"), row.get("pred")
    verdict = ""
    if target is not None and pred is not None:
        verdict = colors.GOOD if target == pred else colors.BAD
    return (
        mark,
        str(row.get("sample")),
        label(target, classes),
        Text(label(pred, classes), style=verdict),
        loss,
        fmt.num(row.get("p_target")),
    )


def text_cell(text: str | None) -> Text:
    """A decoded text in one cell: quoted, cut, newlines shown as ⏎."""
    if text is None:
        return Text("—", style=colors.MUTED)
    return Text(fmt.clip(text.replace("\n", "⏎"), TEXT_CELL))


def sequence_preview(row: dict[str, Any]) -> Text:
    """A language model's sample: the target text and what the model predicted, whole."""
    text = Text()
    for title, key in (("target", "target_text"), ("predicted", "pred_text")):
        text.append(f"{title}\n", style=f"bold {colors.MUTED}")
        value = row.get(key)
        text.append(value if value is not None else "—")
        text.append("\n")
    text.append(
        f"{row.get('tokens', '?')} tokens · accuracy {fmt.pct(row.get('accuracy'))}",
        style=colors.MUTED,
    )
    return text


def worst_cell(worst: dict[str, Any] | None) -> Text:
    if not worst:
        return Text("—", style=colors.MUTED)
    return Text(f"{worst.get('token')!r} {fmt.num(worst.get('loss'))} @{worst.get('pos')}")


class SamplesView(Asks, Vertical):
    """The Samples pane: the table and a preview of the highlighted sample's input."""

    DEFAULT_CSS = f"""
    SamplesView #samples-header {{ height: auto; color: $text-muted; }}
    SamplesView > Horizontal {{ height: 1fr; }}
    SamplesView SampleTable {{ width: 1fr; min-width: 40; }}
    SamplesView #preview {{ width: {PREVIEW_CELLS + 2}; height: auto; padding: 0 1; }}
    SamplesView #preview-text {{ height: auto; }}
    SamplesView.-narrow > Horizontal {{ layout: vertical; }}
    SamplesView.-narrow SampleTable {{ width: 1fr; height: 1fr; }}
    SamplesView.-narrow #preview {{ width: 1fr; height: auto; }}
    """

    NARROW = 96
    """Below this many columns the preview goes under the table instead of beside it."""

    def __init__(self, image_mode: str, width: int | None = None, **kwargs) -> None:
        """``width``: the columns the page will lay it out at, when it knows them: the
        arrangement and the preview's pictures are then the right ones in its first frame,
        not after a second layout."""
        super().__init__(**kwargs)
        self.set_class(width is not None and width < self.NARROW, "-narrow")
        self._preview_width = preview_width(width)
        self.image_mode = image_mode
        self.batch_index: int | None = None
        self.rows: list[dict[str, Any]] = []
        self.per_token = False
        self._previewed: dict[str, Any] | None = None  # the row the preview shows

    def compose(self) -> ComposeResult:
        yield Static("", id="samples-header")
        with Horizontal():
            yield SampleTable()
            with Vertical(id="preview"):
                rows = preview_rows(self.has_class("-narrow"), self.app.size.height)
                pictures = (
                    Picture(max_rows=rows[0], id="preview-image"),
                    Picture(max_rows=rows[1], id="preview-map"),
                )
                for picture in pictures:
                    picture.width_before_layout = self._preview_width
                    yield picture
                yield Static("", id="preview-text")

    def on_mount(self) -> None:
        self.watch(self.app, "sample", self._followed_changed, init=False)

    def on_resize(self) -> None:
        narrow = self.size.width < self.NARROW
        self.set_class(narrow, "-narrow")
        image, values = preview_rows(narrow, self.app.size.height)
        self.query_one("#preview-image", Picture).set_max_rows(image)
        self.query_one("#preview-map", Picture).set_max_rows(values)

    def load(self, batch: int) -> None:
        self.batch_index = batch
        self._fetch(batch)

    def _fetch(self, batch: int) -> None:
        self.ask("samples", tag="samples", run=self.app.run_name, batch=batch)

    def answered(self, tag: str, result: dict[str, Any]) -> None:
        if tag == "samples":
            self._show(result)
        elif tag == "image":
            self.query_one("#preview-image", Picture).show_rgb(result["array"])
        else:
            self.query_one("#preview-map", Picture).show_values(
                result["array"], Scale.of(result["array"])
            )

    def failed(self, tag: str, message: str) -> None:
        if tag == "samples":
            self.query_one("#samples-header", Static).update(Text(message, style=colors.BAD))
        else:
            self.query_one("#preview-text", Static).update(Text(message, style=colors.MUTED))

    def _class_names(self) -> list[str] | None:
        return ((self.app.run_info or {}).get("data") or {}).get("classes")

    def _show(self, result: dict[str, Any]) -> None:
        self.rows = result.get("rows") or []
        size = result.get("batch_size")  # None where no batch of samples was recorded
        if size is None and self.rows:
            size = len(self.rows)
        header = Text(f"batch {self.batch_index} · ")
        if size is not None:
            header.append(f"{size} samples · ")
        header.append("enter follows a sample everywhere ([ and ] too)")
        if not any(r.get(k) is not None for r in self.rows for k in ("target", "pred", "loss")):
            header.append(
                "\ntargets, predictions and per-sample losses were not recorded in this run",
                style=colors.MUTED,
            )
        if result.get("vocabulary"):
            header.append(f"\n{result['vocabulary']}", style=colors.MUTED)
        self.per_token = bool(result.get("per_token"))
        self.query_one("#samples-header", Static).update(header)
        table = self.query_one(SampleTable)
        table.fill(self.rows, self._class_names(), self.app.sample, self.per_token)
        if self.rows:  # in this frame, not the next: the table's Highlighted comes after it
            self._preview(self.rows[table.cursor_row])

    def _followed_changed(self, sample: int) -> None:
        if self.rows:
            self.query_one(SampleTable).fill(
                self.rows,
                self._class_names(),
                sample,
                self.per_token,
                cursor=min(sample, len(self.rows) - 1),
            )

    @on(SampleTable.Highlighted)
    def _highlighted(self, event: SampleTable.Highlighted) -> None:
        event.stop()
        if 0 <= event.row < len(self.rows) and self.rows[event.row] is not self._previewed:
            self._preview(self.rows[event.row])

    @on(SampleTable.Selected)
    def _selected(self, event: SampleTable.Selected) -> None:
        event.stop()
        if 0 <= event.row < len(self.rows) and isinstance(self.rows[event.row].get("sample"), int):
            self.app.sample = self.rows[event.row]["sample"]

    def _preview(self, row: dict[str, Any]) -> None:
        self._previewed = row
        given = row.get("input") or {}
        text = self.query_one("#preview-text", Static)
        self.query_one("#preview-image", Picture).clear()
        self.query_one("#preview-map", Picture).clear()
        if "target_text" in row:
            text.update(sequence_preview(row))
        elif given.get("kind") == "text" or given.get("text"):
            text.update(Text(fmt.clip(str(given.get("text", "")), 2000)))
        elif isinstance(given.get("tensor"), int) and isinstance(row.get("sample"), int):
            text.update(
                Text(f"sample {row.get('sample')} as the model received it", style=colors.MUTED)
            )
            self._load_input(row["sample"], given)
        else:
            text.update(Text("no input recorded for this sample", style=colors.MUTED))

    def _load_input(self, sample: int, given: dict[str, Any]) -> None:
        # A newer sample's preview overtakes the older one, whichever kind each is.
        method, params = preview_request(self.app.run_name or "", self.batch_index, sample, given)
        self.cancel("view" if method == "image" else "image")
        self.ask(method, tag=method, **params)


PREVIEW_ROWS = (16, 12)
"""Most rows of the preview's picture and of its map (a tensor input's values) beside the
table."""


def preview_rows(narrow: bool, terminal_rows: int) -> tuple[int, int]:
    """Most rows of the preview's picture and map: beside the table, ``PREVIEW_ROWS``; under
    it, a third of the terminal's rows at most, so that the table keeps most of the pane
    (at 80×24 it showed 2 samples under a 16-row picture; now 9 under an 8-row one)."""
    if not narrow:
        return PREVIEW_ROWS
    most = max(4, terminal_rows // 3)
    return min(PREVIEW_ROWS[0], most), min(PREVIEW_ROWS[1], most)


def preview_width(width: int | None) -> int | None:
    """Columns of the preview's pictures in a pane ``width`` wide: a column of their own
    beside the table, or under it the whole width (less the padding)."""
    if width is None:
        return None
    return PREVIEW_CELLS if width >= SamplesView.NARROW else width - 2


def preview_request(
    run: str, batch: int | None, sample: int, given: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """What the preview asks for a sample's recorded input (``given``: its row's input)."""
    common = {"run": run, "batch": batch, "tensor": given["tensor"], "sample": sample}
    if given.get("kind") == "image":
        return "image", {"width": PREVIEW_PX, "height": PREVIEW_PX, **common}
    return "view", {"width": 32, "height": 22, **common}


def fetch_samples(data: Any, batch: int, *, run: str, sample: int) -> None:
    """Warm ``data``'s cache, in the background, with what the pane shows for ``batch``: its
    rows, then the followed ``sample``'s preview (the row its cursor opens on)."""
    answer = data.prefetch_later("samples", run=run, batch=batch)
    rows = answer.get("rows") if isinstance(answer, dict) else None
    row = next((r for r in rows or [] if r.get("sample") == sample), None)
    if row is None or "target_text" in row:
        return
    given = row.get("input") or {}
    if given.get("kind") == "text" or given.get("text") or not isinstance(given.get("tensor"), int):
        return
    method, params = preview_request(run, batch, sample, given)
    data.prefetch_later(method, **params)
