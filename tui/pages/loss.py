"""Loss: how the batch's loss came to be — the loss across the run, the exact loss call and
its reduction checked against the recorded scalar, each sample's p(target) → −log p →
loss (worst first), and a confusion matrix (classification), each target token coloured by
its loss (language models), the followed sample's masks, per-pixel loss and each class's
IoU (segmentation) or the residuals (regression).

Every number comes from the agent (``loss_curve``, ``loss_detail``, ``sample_table``),
sized to what one screen shows.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive, var
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import get_current_worker

from tvis.tui import colors, fmt, keys
from tvis.tui.focus_style import FocusVerticalScroll
from tvis.tui.messages import Selection
from tvis.tui.pages.loss_ctc import ctc_cells, ctc_note, ctc_text
from tvis.tui.pages.loss_labels import labels_text
from tvis.tui.pages.loss_soft import soft_targets_text
from tvis.tui.pages.page import Page
from tvis.tui.pane import AgentPane
from tvis.tui.picture import SIGNED, VALUES, Picture, Scale, to_rgb
from tvis.tui.picture.colormaps import Depth
from tvis.tui.picture.widget import depth_of
from tvis.tui.widgets.histogram import histogram
from tvis.tui.widgets.lists import LineColumn, LineTable, without_empty_columns
from tvis.tui.widgets.pixel_loss import PixelLossView
from tvis.tui.widgets.sparkline import sparkline
from tvis.tui.widgets.watch_curve import WatchCurve

if TYPE_CHECKING:
    from textual import getters

    from tvis.tui.app import TvisApp

WORST_ROWS = 64
"""Samples listed per batch: the worst screenful and then some; the rest are no worse."""

BESIDE_AFTER_S = 0.3
"""Rest after the batch or sample last changed before the batches beside are fetched (as
Explore's: ``explore.NEIGHBOURS_AFTER_S``)."""

TOKENS_SHOWN = 512
"""Token positions of one sequence coloured at once: a long sentence; a page at 80×24."""


CONTRASTIVE = (
    "a contrastive loss: each sample's target is its own pair in the batch (the logits are "
    "the batch's similarities), so there are no classes to confuse"
)

REDUCED = {"mean": "averaged over the batch", "sum": "summed over the batch"}
"""How a loss of the script's own reduces its samples, in words (``reduction``)."""


def call_line(detail: dict[str, Any]) -> Text:
    """``F.cross_entropy(reduction='mean', ignore_index=0)  train.py:72``."""
    call = detail.get("call") or {}
    text = Text()
    name = str(call.get("name") or detail.get("fn") or "loss")
    text.append(name, style="bold")
    args = [f"reduction={detail.get('reduction')!r}"] if detail.get("reduction") else []
    for key in ("ignore_index", "label_smoothing"):
        value = detail.get(key)
        if value not in (None, -100, 0.0) or (key == "ignore_index" and value == 0):
            args.append(f"{key}={value!r}")
    if detail.get("weighted"):
        args.append("weight=…")
    if call.get("def"):
        # The script's own function or class: what tvis found of the loss inside it is
        # not an argument the script passed.
        text.append("(…)")
        reduced = REDUCED.get(str(detail.get("reduction")))
        found = ([reduced] if reduced else []) + [a for a in args if not a.startswith("reduc")]
        if found:
            text.append(f"   {' · '.join(found)}", style=colors.MUTED)
    elif not name.endswith(")"):  # an inline expression names its own reduction
        text.append(f"({', '.join(args)})")
    if call.get("site"):
        text.append(f"   called at {fmt.where(call['site'])}", style=colors.MUTED)
    value, backward = detail.get("value"), detail.get("backward_loss")
    terms = detail.get("terms") or []
    if not isinstance(value, float) or not isinstance(backward, float):
        return text
    if len(terms) > 1 or not _close(value, backward):
        text.append(f"\nbackward ran on {fmt.num(backward)}", style=colors.WARN)
        if terms:
            text.append(" = " + terms_text(terms, detail.get("rest"), backward), style=colors.WARN)
        else:
            text.append(
                f", not this call's {fmt.num(value)}: the call is one term of the loss, or "
                "the loss was scaled",
                style=colors.WARN,
            )
    return text


def terms_text(terms: list[dict[str, Any]], rest: float | None, total: float) -> str:
    """``1 × CrossEntropyLoss 1.384 + 0.5 × GaussianNLLLoss 4.799 + 0.01475 not from a
    loss call``: the loss terms backward's scalar was made from, weighted as it weighs them."""
    parts = []
    for term in terms:
        weight = term.get("weight")
        scaled = f"{fmt.num(weight)} × " if isinstance(weight, float) else ""
        parts.append(f"{scaled}{term.get('fn')} {fmt.num(term.get('value'))}")
    line = " + ".join(parts)
    if rest is None:
        return line + " (combined otherwise than by a weighted sum)"
    if abs(rest) > 1e-5 * max(1.0, abs(total)):  # float32 rounding of the sum is not a term
        line += f" + {fmt.num(rest)} from terms no loss call made"
    return line


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-12) or (math.isnan(a) and math.isnan(b))


def reduction_text(check: dict[str, Any] | None, detail: dict[str, Any]) -> Text:
    """The reduction as arithmetic, with a tick when it gives the recorded scalar."""
    text = Text()
    if not check:
        how = detail.get("per_sample_how") or detail.get("per_sample_why")
        text.append(
            f"loss {fmt.num(detail.get('value'))} "
            + (f"· per-sample: {how}" if how else "(per-element losses not recorded)"),
            style=colors.MUTED,
        )
        return text
    what = "per-element losses"
    if detail.get("per_token"):
        what = "valid per-token losses"
    elif detail.get("per_pixel"):
        what = "valid per-pixel losses"
    elif detail.get("fn") == "ctc_loss":  # one alignment sum a sample, not an element each
        what = "per-sample losses" + (
            " (each ÷ its target length)" if check["reduction"] == "mean" else ""
        )
    if check["reduction"] == "sum":
        text.append(f"sum of {check['terms']} {what} = {fmt.num(check['sum'], 6)}")
    else:
        divisor = "summed class weights" if check.get("weighted") else "count"
        if check["reduction"] == "batchmean":
            divisor = "batch size"
        text.append(
            f"{'batchmean' if check['reduction'] == 'batchmean' else 'mean'}: sum of {check['terms']} {what} {fmt.num(check['sum'], 6)} "
            f"/ {divisor} {fmt.num(check['divisor'], 6)} = {fmt.num(check['computed'], 6)}"
        )
    text.append(f"   recorded {fmt.num(check['recorded'], 6)} ")
    if check.get("matches"):
        text.append("✓ matches", style=colors.GOOD)
    elif check.get("matches") is None:
        text.append("(elements capped: not checked)", style=colors.MUTED)
    else:
        text.append("✗ differs", style=colors.BAD)
    return text


class LossCurve(AgentPane):
    """Loss per batch across the run, decimated to the pane's width; ┊ marks where a
    step begins, ░ light (evaluation) batches, ▲ the batch open on this page."""

    DEFAULT_CSS = "LossCurve { height: 3; padding: 0 1; }"

    curve: reactive[dict[str, Any] | None] = reactive(None, always_update=True)
    """The agent's ``loss_curve`` reply drawn (``{"error": …}`` when it failed)."""

    def load(self) -> None:
        width = max(8, self.size.width - 2 - 20)
        self.ask("loss_curve", run=self.app.run_name, width=width)

    def answered(self, tag: str, result: Any) -> None:
        self.curve = result

    def failed(self, tag: str, message: str) -> None:
        self.curve = {"error": message}

    def render(self) -> Text:
        curve = self.curve
        if curve is None:
            return Text("loss across the run …", style=colors.MUTED)
        if "error" in curve:
            return Text(curve["error"], style=colors.BAD)
        columns = curve.get("columns") or []
        if not columns:
            return Text("no batch of this run recorded a loss", style=colors.MUTED)
        line = sparkline([c["mean"] for c in columns], len(columns), colors.PHASE["loss"])
        text = Text(f"{fmt.num(curve['hi']):>8} ", style=colors.MUTED)
        text.append_text(line)
        text.append(f"  {curve['total']} batches\n", style=colors.MUTED)
        starts = {s["batch"] for s in curve.get("steps") or []}
        current = (self.app.batch_info or {}).get("index")
        marks = Text(f"{fmt.num(curve['lo']):>8} ", style=colors.MUTED)
        for c in columns:
            span = range(c["first"], c["last"] + 1)
            if current in span:
                marks.append("▲", style=f"bold {colors.PHASE['loss']}")
            elif c["light"]:
                marks.append("░", style=colors.MUTED)
            elif starts.intersection(span):
                marks.append("┊", style=colors.PHASE["optimizer"])
            else:
                marks.append(" ")
        marks.append("\n")
        marks.append(
            "         ▲ this batch  ┊ step starts  ░ evaluation (light)", style=colors.MUTED
        )
        text.append_text(marks)
        return text


CTC_COLUMNS = (
    LineColumn(""),
    LineColumn("sample"),
    LineColumn("target"),
    LineColumn("predicted"),
    LineColumn("loss", right=True),
)
"""The per-sample table's columns for a CTC loss."""


def fit_texts(widths: list[int], width: int) -> list[int]:
    """A CTC table's widths in ``width`` cells (each column padded by one cell a side): the
    target and predicted texts share what the other columns leave, each at least its
    title, so the loss stays in view and a long text ends in "…"."""
    others = sum(w + 2 for i, w in enumerate(widths) if i not in (2, 3))
    room = width - others - 4
    target, pred = widths[2], widths[3]
    if target + pred <= room:
        return widths
    half = max(room // 2, len("predicted"))
    target, pred = min(target, max(half, room - pred)), min(pred, max(half, room - target))
    return [
        widths[0],
        widths[1],
        max(target, len("target")),
        max(pred, len("predicted")),
        widths[4],
    ]


class WorstTable(LineTable):
    """Each sample's p(target) → −log p → loss; enter follows the sample everywhere."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    columns: tuple[LineColumn, ...] = (
        LineColumn(""),
        LineColumn("sample"),
        LineColumn("p(target)", right=True),
        LineColumn("−log p", right=True),
        LineColumn("loss", right=True),
    )

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.rows: list[dict[str, Any]] = []
        """The samples in the order listed."""
        self.followed: int | None = None
        self._cells: list[tuple[Text | str, ...]] = []
        self._widths = [len(c.label) for c in self.columns]
        self._texts = False  # a CTC loss's transcriptions: their columns share the width

    def fill(self, rows: list[dict[str, Any]], followed: int) -> None:
        """List ``rows``, ● on the ``followed`` sample. The cursor starts on the followed
        sample (the one the detail beside the list shows) and goes to it when another is
        followed; a new order keeps it on its sample."""
        was = self.rows[self.cursor_row]["sample"] if self.cursor_row < len(self.rows) else None
        if followed != self.followed:
            was = followed
        self.rows, self.followed = rows, followed
        # A CTC loss has no p(target): each sample's target and transcription instead.
        self._texts = texts = any("target_ids" in row for row in rows)
        cells: list[tuple[Text | str, ...]] = [
            (
                Text("●" if row["sample"] == followed else " ", style=colors.PHASE["data"]),
                str(row["sample"]),
                *(ctc_cells(row) if texts else (fmt.num(row.get("p_target")),)),
                *(() if texts else (fmt.num(row.get("neg_log_p")),)),
                Text(fmt.num(row.get("loss")), style=colors.PHASE["loss"]),
            )
            for row in rows
        ]
        columns = CTC_COLUMNS if texts else WorstTable.columns
        self.columns, self._cells = without_empty_columns(columns, cells, kept=2)
        self._widths = [
            max([len(c.label), *(len(cells[i]) for cells in self._cells)])
            for i, c in enumerate(self.columns)
        ]
        samples = [row["sample"] for row in rows]
        self.set_rows(len(rows), cursor=samples.index(was) if was in samples else 0)

    def clear(self) -> None:
        self.fill([], self.followed or 0)

    def column_widths(self, width: int) -> list[int]:
        return fit_texts(self._widths, width) if self._texts else self._widths

    def cells(self, row: int) -> tuple[Text | str, ...]:
        return self._cells[row]

    @on(LineTable.Selected)
    def _selected(self, event: LineTable.Selected) -> None:
        event.stop()
        if event.row < len(self.rows):
            self.app.sample = int(self.rows[event.row]["sample"])


def token_legend(mean: float, span: float, depth: Depth) -> Text:
    """The diverging scale the tokens are coloured on, around the batch's mean loss."""
    ramp = np.linspace(mean - span, mean + span, 16)[None, :]
    rgb = to_rgb(ramp, Scale(mean - span, mean + span, True), SIGNED, depth)[0]
    text = Text(f"loss {fmt.num(mean - span)} ", style=colors.MUTED)
    for r, g, b in rgb:
        text.append(" ", style=f"on rgb({r},{g},{b})")
    text.append(f" {fmt.num(mean + span)}   centre: batch mean {fmt.num(mean)}", style=colors.MUTED)
    text.append("   ", style=colors.MUTED)
    text.append("pad", style="strike dim")
    text.append(" ignored", style=colors.MUTED)
    return text


def word_tokens(rows: list[dict[str, Any]], joined: str | None) -> bool:
    """Whether the vocabulary joins its tokens with spaces (words), as the decoded target
    text shows: such tokens are drawn apart, not run together."""
    tokens = [str(r.get("target_token", "")) for r in rows if not r["pad"]]
    return bool(
        joined
        and " " in joined
        and tokens
        and all(t and t == t.strip() and t[0] not in "Ġ▁#" for t in tokens)
    )


def token_text(
    rows: list[dict[str, Any]],
    cursor: int,
    mean: float,
    span: float,
    depth: Depth,
    sep: str = "",
) -> Text:
    """The target tokens, each on the colour of its loss; padding struck out; the cursor's
    token reversed; ``sep`` between tokens (a space for words)."""
    losses = np.array(
        [r.get("loss", np.nan) if not r["pad"] else np.nan for r in rows], dtype=np.float64
    )
    rgb = to_rgb(losses[None, :], Scale(mean - span, mean + span, True), SIGNED, depth)[0]
    text = Text()
    # Trailing padding (most of a short sequence in a padded batch) shows once, counted.
    last_real = max((i for i, r in enumerate(rows) if not r["pad"]), default=-1)
    for i, row in enumerate(rows):
        token = str(row.get("target_token", row.get("target", "?")))
        if i > last_real + 1 and i > cursor:
            text.append(f"×{len(rows) - i + 1}", style="dim")
            break
        shown = token.replace("\n", "⏎") if token.strip() or not token else "␣" * len(token)
        if row["pad"]:
            style = "strike dim"
        else:
            r, g, b = (int(v) for v in rgb[i])
            # The signed map is dark around its centre: light letters there, dark at the ends.
            ink = "black" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "white"
            style = f"{ink} on rgb({r},{g},{b})"
        if i == cursor:
            style += " reverse bold underline"
        if i and sep:
            text.append(sep)
        text.append(shown, style=style)
    return text


def position_text(row: dict[str, Any] | None, aligned: bool = True) -> Text:
    """The cursor's position: its input (when the input is aligned with the targets, as a
    language model's is; a translation's source is not), target, prediction, p, loss."""
    text = Text()
    if row is None:
        return text
    text.append(f"position {row['pos']}: ", style=colors.MUTED)
    if aligned:
        text.append(f"input {row.get('input_token', '—')!r}  ")
    text.append(f"target {row.get('target_token', '—')!r}")
    if row["pad"]:
        text.append("   padding / ignore_index: not in the loss", style=colors.MUTED)
        return text
    verdict = colors.GOOD if row.get("pred") == row.get("target") else colors.BAD
    text.append("  predicted ")
    text.append(repr(row.get("pred_token", "—")), style=verdict)
    text.append(f"   p(target) {fmt.num(row.get('p_target'))} → −log p {fmt.num(row.get('loss'))}")
    return text


COUNTS_SHOWN = 12
"""Classes up to which the confusion matrix is also printed as numbers (fits 80 columns)."""


def counts_table(matrix: np.ndarray, names: list[str], cell: tuple[int, int]) -> Text:
    """The confusion counts as text, target rows × predicted columns, the chosen cell reversed."""
    width = max(4, len(str(int(matrix.max(initial=0)))) + 1)
    text = Text(" " * 10, style=colors.MUTED)
    for name in names:
        text.append(f"{fmt.clip(name, width - 1):>{width}}", style=colors.MUTED)
    text.append("\n")
    for r, name in enumerate(names):
        text.append(f"{fmt.clip(name, 9):>9} ", style=colors.MUTED)
        for c in range(len(names)):
            style = "reverse" if (r, c) == cell else (colors.GOOD if r == c else "")
            text.append(f"{int(matrix[r, c]):>{width}}", style=style)
        text.append("\n")
    return text


def batch_requests(
    run: str | None, batch: int | None, sample: int
) -> tuple[tuple[str, dict[str, Any]], tuple[str, dict[str, Any]]]:
    """What the page asks for ``batch``: the loss call with its worst samples, and the
    batch's rows or the followed sequence's tokens (``sample_table`` answers with whichever
    the loss has)."""
    detail = {"run": run, "batch": batch, "limit": WORST_ROWS, "elements": 0}
    table = {"run": run, "batch": batch, "sample": sample, "limit": TOKENS_SHOWN}
    return ("loss_detail", detail), ("sample_table", table)


def fetch_batches(data: Any, run: str, batches: list[int], sample: int) -> None:
    """Ask ``data`` for what the page shows for each of ``batches`` (in a worker thread)."""
    worker = get_current_worker()
    for batch in batches:
        for method, params in batch_requests(run, batch, sample):
            if worker.is_cancelled:
                return
            data.prefetch_later(method, **params)


class LossView(AgentPane):
    """The loss call, its reduction, the per-sample table and the kind-specific view."""

    DEFAULT_CSS = """
    LossView { layout: vertical; height: 1fr; }
    LossView #loss-call, LossView #loss-reduction { height: auto; padding: 0 1; }
    LossView #loss-body { height: 1fr; }
    LossView WorstTable { width: 44; height: 1fr; }
    LossView #loss-right { width: 1fr; height: 1fr; padding: 0 1; }
    LossView #loss-right > Static { height: auto; }
    LossView.-narrow #loss-body { layout: vertical; }
    LossView.-narrow WorstTable { width: 1fr; height: 8; }
    """

    NARROW = 100
    """Below this many columns the per-sample table goes above the kind-specific view."""

    detail: var[dict[str, Any] | None] = var(None, init=False, always_update=True)
    """The agent's ``loss_detail`` reply shown: the call, its reduction, the worst samples."""
    tokens: var[dict[str, Any] | None] = var(None, init=False, always_update=True)
    """The followed sequence's tokens (``sample_table`` of a language model)."""
    pixels: var[dict[str, Any] | None] = var(None, init=False, always_update=True)
    """The followed sample's masks and per-pixel loss (``sample_table`` of a segmentation
    loss)."""
    samples: var[list[dict[str, Any]]] = var(list, init=False, always_update=True)
    """The batch's rows (``sample_table`` of a classifier)."""
    worst_first: var[bool] = var(True, init=False)
    """The per-sample table worst first, else in sample order."""
    token_cursor: var[int] = var(0, init=False)
    """The token position the note describes."""
    cell: var[tuple[int, int]] = var((0, 0), init=False)
    """The confusion cell chosen (target row, predicted column)."""
    whole_run: var[bool] = var(True, init=False)
    """The confusion matrix of every training batch, else of this batch."""

    def compose(self) -> ComposeResult:
        yield Static("", id="loss-call")
        yield Static("", id="loss-reduction")
        with Horizontal(id="loss-body"):
            yield WorstTable()
            with FocusVerticalScroll(id="loss-right"):
                yield Static("", id="loss-kind")
                yield Picture(max_rows=14, id="loss-picture")
                yield PixelLossView(id="loss-pixels")
                yield Static("", id="loss-note")

    def on_resize(self) -> None:
        self.set_class(self.size.width < self.NARROW, "-narrow")

    @property
    def batch_index(self) -> int | None:
        return (self.app.batch_info or {}).get("index")

    def load(self) -> None:
        # Forgotten without drawing: the batch's replies draw when they come.
        self.set_reactive(LossView.detail, None)
        self.set_reactive(LossView.tokens, None)
        self.set_reactive(LossView.pixels, None)
        self.set_reactive(LossView.samples, [])
        self.query_one("#loss-call", Static).update(Text("loss call …", style=colors.MUTED))
        run, batch, sample = self.app.run_name, self.batch_index, self.app.sample
        for method, params in batch_requests(run, batch, sample):
            # At the same time: one round trip, not two, to the first paint.
            self.ask(method, tag="detail" if method == "loss_detail" else "table", **params)

    # -- replies ---------------------------------------------------------------------

    def answered(self, tag: str, result: Any) -> None:
        if tag == "detail":
            self.detail = result
            page = self.screen
            if isinstance(page, LossPage):
                page.rest_then_prefetch()  # now it names the loss call that `u` shows
        elif result.get("kind") == "tokens":
            last = max(len(result["rows"]) - 1, 0)
            self.set_reactive(LossView.token_cursor, min(self.token_cursor, last))
            self.tokens = result
        elif result.get("kind") == "pixels":
            self.pixels = result
        else:
            self.samples = result.get("rows") or []

    def watch_detail(self, detail: dict[str, Any] | None) -> None:
        if detail is not None:
            self._show_detail(detail)
            self._draw_kind()

    def watch_tokens(self) -> None:
        self._draw_kind()

    def watch_pixels(self) -> None:
        self._draw_kind()

    def watch_samples(self) -> None:
        self._draw_kind()

    def watch_worst_first(self) -> None:
        self.fill_worst()

    def watch_token_cursor(self) -> None:
        if self.tokens is not None:
            self._draw_tokens()

    def watch_cell(self) -> None:
        self.draw_confusion()

    def watch_whole_run(self) -> None:
        if (self.detail or {}).get("per_pixel"):
            self.query_one(PixelLossView).show_iou(self.detail or {}, self.whole_run)
        self.draw_confusion()

    def failed(self, tag: str, message: str) -> None:
        target = "#loss-call" if tag == "detail" else "#loss-note"
        self.query_one(target, Static).update(Text(message, style=colors.BAD))
        if tag == "detail":
            self.query_one("#loss-reduction", Static).update("")
            self.query_one(WorstTable).clear()
            self.query_one("#loss-picture", Picture).clear()

    def _show_detail(self, detail: dict[str, Any]) -> None:
        self.query_one("#loss-call", Static).update(call_line(detail))
        self.query_one("#loss-reduction", Static).update(
            reduction_text(detail.get("reduction_check"), detail)
        )
        self.fill_worst()

    def _draw_kind(self) -> None:
        """The view for the loss's kind, once the detail and the table have both come."""
        detail = self.detail
        if detail is None:
            return
        self.query_one(PixelLossView).display = bool(detail.get("per_pixel"))
        if detail.get("per_pixel"):
            if self.pixels is not None:
                self._draw_pixels()
        elif detail.get("per_token"):
            if self.tokens is not None:
                self._draw_tokens()
        elif detail.get("confusion"):
            if self.samples:
                self.draw_confusion()
        elif detail.get("multilabel"):
            self._draw_labels()
        elif detail.get("ctc"):
            self._draw_ctc()
        else:
            self._draw_regression()

    def fill_worst(self) -> None:
        rows = list((self.detail or {}).get("worst") or [])
        if not self.worst_first:
            rows.sort(key=lambda r: r["sample"])
        self.query_one(WorstTable).fill(rows, self.app.sample)

    # -- language models ---------------------------------------------------------------

    def _load_table(self) -> None:
        """The batch's rows (classification) or the followed sequence's tokens (language
        models): ``sample_table`` answers with whichever the loss has."""
        _, (method, params) = batch_requests(self.app.run_name, self.batch_index, self.app.sample)
        self.ask(method, tag="table", **params)

    def _scale(self) -> tuple[float, float]:
        mean = (self.detail or {}).get("valid_mean") or 0.0
        hist = (self.detail or {}).get("hist") or {}
        span = max(abs(hist.get("hi", mean) - mean), abs(mean - hist.get("lo", mean))) or 1.0
        return float(mean), float(span)

    def _draw_tokens(self) -> None:
        tokens = self.tokens or {}
        rows = tokens.get("rows") or []
        depth = depth_of(self.app.console.color_system)
        mean, span = self._scale()
        head = Text(f"sample {tokens.get('sample')} · ", style="bold")
        head.append(
            f"token accuracy {fmt.pct(tokens.get('accuracy'))} · h/l move", style=colors.MUTED
        )
        if tokens.get("vocabulary"):
            head.append(f"\n{tokens['vocabulary']}", style=colors.MUTED)
        source = tokens.get("input_vocabulary")  # a translation: its source side's own
        if source:
            head.append(f"\n{source}", style=colors.MUTED)
        texts = tokens.get("text") or {}
        sep = " " if word_tokens(rows, texts.get("target")) else ""
        head.append("\n")
        head.append_text(token_text(rows, self.token_cursor, mean, span, depth, sep))
        head.append("\n")
        head.append_text(token_legend(mean, span, depth))
        self.query_one("#loss-kind", Static).update(head)
        self.query_one("#loss-picture", Picture).clear()
        note = position_text(rows[self.token_cursor] if rows else None, aligned=not source)
        if source:
            note.append("\n\nsource    ", style=colors.MUTED)
            note.append(texts.get("input") or fmt.token_ids(rows, "input") or "—")
            note.append("\ntarget    ", style=colors.MUTED)
        else:
            note.append("\n\ntarget    ", style=colors.MUTED)
        note.append(texts.get("target") or fmt.token_ids(rows, "target") or "—")
        note.append("\npredicted ", style=colors.MUTED)
        note.append(texts.get("pred") or fmt.token_ids(rows, "pred") or "—")
        self.query_one("#loss-note", Static).update(note)

    def move_token(self, delta: int) -> None:
        rows = (self.tokens or {}).get("rows") or []
        if rows:
            self.token_cursor = (self.token_cursor + delta) % len(rows)

    # -- segmentation ------------------------------------------------------------------

    def _draw_pixels(self) -> None:
        assert self.pixels is not None and self.detail is not None  # drawn once both came
        self.query_one("#loss-kind", Static).update("")
        self.query_one("#loss-picture", Picture).clear()
        self.query_one("#loss-note", Static).update("")
        self.query_one(PixelLossView).show(self.pixels, self.detail, self.whole_run)

    # -- classification ------------------------------------------------------------------

    def _matrix(self) -> tuple[np.ndarray, list[int], list[str]] | None:
        confusion = (self.detail or {}).get("confusion")
        if not confusion:
            return None
        classes = list(confusion["classes"])
        names = [n or str(c) for n, c in zip(confusion["names"], classes, strict=True)]
        if self.whole_run:
            return np.asarray(confusion["matrix"]), classes, names
        position = {c: i for i, c in enumerate(classes)}
        matrix = np.zeros((len(classes), len(classes)), dtype=np.int32)
        for row in self.samples:
            t, p = position.get(row.get("target")), position.get(row.get("pred"))
            if t is not None and p is not None:
                matrix[t, p] += 1
        return matrix, classes, names

    def draw_confusion(self) -> None:
        found = self._matrix()
        if found is None:
            return
        matrix, classes, names = found
        assert self.detail is not None  # a matrix is found in the detail on screen
        confusion = self.detail["confusion"]
        scope = (
            f"{len(confusion.get('batches') or [])} training batches, "
            f"{confusion['samples']} samples"
            if self.whole_run
            else f"batch {self.batch_index}, {int(matrix.sum())} samples"
        )
        accuracy = np.trace(matrix) / matrix.sum() if matrix.sum() else None
        head = Text("confusion ", style="bold")
        head.append(
            f"({scope}) · accuracy {fmt.pct(accuracy)} · b: batch / run", style=colors.MUTED
        )
        head.append(
            "\nrows: target · columns: predicted · shift+arrows or click a cell", style=colors.MUTED
        )
        self.query_one("#loss-kind", Static).update(head)
        picture = self.query_one("#loss-picture", Picture)
        picture.show_values(
            matrix,
            Scale(0.0, float(max(matrix.max(), 1))),
            VALUES,
            x_labels=names,
            y_labels=names,
            legend="samples per cell",
        )
        r, c = self.cell
        self.set_reactive(LossView.cell, (min(r, len(classes) - 1), min(c, len(classes) - 1)))
        picture.set_cursor(self.cell)
        self._cell_samples(matrix, classes, names)

    def _cell_samples(self, matrix: np.ndarray, classes: list[int], names: list[str]) -> None:
        r, c = self.cell
        hits = [
            row["sample"]
            for row in self.samples
            if row.get("target") == classes[r] and row.get("pred") == classes[c]
        ]
        text = counts_table(matrix, names, self.cell) if len(names) <= COUNTS_SHOWN else Text()
        text.append(f"target {names[r]} → predicted {names[c]}: ", style="bold")
        text.append(f"{int(matrix[r, c])} {'in the run' if self.whole_run else 'in this batch'}")
        text.append(f"\nsamples of batch {self.batch_index}: ", style=colors.MUTED)
        text.append(", ".join(map(str, hits)) if hits else "none")
        self.query_one("#loss-note", Static).update(text)

    def move_cell(self, dr: int, dc: int) -> None:
        found = self._matrix()
        if found is None:
            return
        n = len(found[1])
        self.cell = ((self.cell[0] + dr) % n, (self.cell[1] + dc) % n)

    @on(Picture.Picked)
    def _picked(self, event: Picture.Picked) -> None:
        event.stop()
        if (self.detail or {}).get("confusion"):
            self.cell = (event.row, event.col)

    # -- regression and other losses -------------------------------------------------------

    def _draw_regression(self) -> None:
        self.query_one("#loss-kind", Static).update(self._histograms())
        self._clear_extras()

    def _histograms(self) -> Text:
        """The per-element (or per-sample) loss histogram, and |input − target| where known."""
        detail = self.detail or {}
        depth = depth_of(self.app.console.color_system)
        width = max(16, self.query_one("#loss-right").size.width - 2)
        of = "per-sample" if detail.get("hist_of") == "sample" else "per-element"
        text = Text()
        if detail.get("soft_target"):  # what the targets are comes before how the losses spread
            kind = str(detail["soft_target"])
            soft = soft_targets_text(self.samples, self.app.sample, kind)
            soft.rstrip()
            text.append_text(soft)
            text.append("\n\n")
        if detail.get("hist"):
            text.append(f"{of} loss\n", style="bold")
            text.append_text(histogram(detail["hist"], width, False, rows=4, depth=depth))
        else:  # a loss that does not split by sample, its elements not recorded
            text.append(
                "no histogram: neither per-sample nor per-element losses are known",
                style=colors.MUTED,
            )
        if detail.get("residual_hist"):
            text.append("\n|input − target| per element (sign not recorded)\n", style="bold")
            text.append_text(histogram(detail["residual_hist"], width, False, rows=4, depth=depth))
        return text

    def _clear_extras(self) -> None:
        """No picture here; the note only for a contrastive loss."""
        detail = self.detail or {}
        self.query_one("#loss-picture", Picture).clear()
        self.query_one("#loss-note", Static).update(
            CONTRASTIVE if detail.get("contrastive") else ""
        )

    def _draw_labels(self) -> None:
        """A multi-label loss: labels sets vs predicted, then the per-label histogram."""
        text = labels_text(self.samples, self.app.sample)
        text.append("\n")
        text.append_text(self._histograms())
        self.query_one("#loss-kind", Static).update(text)
        self._clear_extras()

    def _draw_ctc(self) -> None:
        """A CTC loss: how its transcriptions match their targets, then the per-sample
        histogram; the followed sample's pair in full beside them."""
        detail = self.detail or {}
        text = ctc_text(self.samples, detail.get("ctc"))
        text.append("\n")
        text.append_text(self._histograms())
        self.query_one("#loss-kind", Static).update(text)
        self.query_one("#loss-picture", Picture).clear()
        self.query_one("#loss-note", Static).update(ctc_note(self.samples, self.app.sample))

    # -- following the app ---------------------------------------------------------------

    def sample_changed(self) -> None:
        if self.detail is None:
            return
        self.fill_worst()
        if self.detail.get("soft_target"):
            self._draw_kind()  # ● moves to the followed sample's soft target
        if self.detail.get("per_token") or self.detail.get("per_pixel"):
            self._load_table()
        elif self.detail.get("multilabel"):
            self._draw_labels()
        elif self.detail.get("ctc"):
            self._draw_ctc()


class LossPage(Page):
    """The Loss page."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LOSS]

    DEFAULT_CSS = """
    LossPage #loss-title { height: 1; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="loss-title")
            yield WatchCurve()
            yield LossCurve()
            yield LossView()

    def __init__(self) -> None:
        super().__init__()
        self._beside_timer: Timer | None = None

    def on_mount(self) -> None:
        self.watch(self.app, "batch", self._batch_changed, init=False)
        self.watch(self.app, "sample", self._sample_changed, init=False)
        self.call_after_refresh(self._start)

    def on_screen_resume(self) -> None:
        self.rest_then_prefetch()  # built ahead, it fetched nothing beside while hidden

    def rest_then_prefetch(self) -> None:
        """Once the page rests (``BESIDE_AFTER_S``), fetch what its keys will show."""
        if self._beside_timer is not None:
            self._beside_timer.stop()
        self._beside_timer = self.set_timer(BESIDE_AFTER_S, self._prefetch_beside)

    def _prefetch_beside(self) -> None:
        """Once the page rests, fetch what `u`, `.` and `,` will show: the key then draws
        from the client's cache in its own frame, with no round trip."""
        self._beside_timer = None
        app = self.app
        data, run, position = app.data, app.run_name, app.batch_position
        if not self.is_current or data is None or run is None or position is None:
            return
        indices = app.batch_indices
        beside = [indices[p] for p in (position + 1, position - 1) if 0 <= p < len(indices)]
        sample = app.sample
        goto = self._goto_fetcher()

        def fetch() -> None:
            goto(data)
            fetch_batches(data, run, beside, sample)

        self.run_worker(
            fetch,
            group="loss-beside",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def _goto_fetcher(self) -> Callable[[Any], None]:
        """``fetch(data)``, for a worker thread: what `u` shows, the loss call in Explore's
        inspector (its record and its cards' pictures), so that the key draws it from the
        client's cache instead of waiting on the agent after the switch."""
        call = ((self.view.detail or {}).get("call") or {}).get("id")
        explore = self.app.explore_page()
        if call is None or explore is None or not explore.is_mounted:
            return lambda data: None  # (Explore not built yet: its inspector asks itself)
        inspect = explore.inspector.prefetcher()
        wanted = [Selection("call", batch=self.app.batch, call=call)]
        return lambda data: inspect(data, wanted)

    def _start(self) -> None:
        self.query_one(WatchCurve).load()
        self.query_one(LossCurve).load()
        self._batch_changed()

    @property
    def view(self) -> LossView:
        return self.query_one(LossView)

    def _batch_changed(self, *_: Any) -> None:
        info = self.app.batch_info or {}
        title = Text(f"Loss · batch {info.get('index')} · step {info.get('step')}", style="bold")
        hints = keys.hint(
            self.app,
            (("app.batch_prev", "app.batch_next"), "batch"),
            (("app.sample_prev", "app.sample_next"), "sample"),
            ("app.help", "keys"),
        )
        title.append(f"   {hints}", style=colors.MUTED)
        self.query_one("#loss-title", Static).update(title)
        self.query_one(LossCurve).refresh()
        self.query_one(WatchCurve).refresh()
        if info:
            self.view.load()
            self.rest_then_prefetch()

    def _sample_changed(self, *_: Any) -> None:
        self.view.sample_changed()
        self.rest_then_prefetch()  # the followed sequence's tokens beside are others

    def action_sort_worst(self) -> None:
        self.view.worst_first = not self.view.worst_first

    def action_token(self, delta: int) -> None:
        self.view.move_token(delta)

    def action_cell(self, dr: int, dc: int) -> None:
        self.view.move_cell(dr, dc)

    def action_toggle_scope(self) -> None:
        self.view.whole_run = not self.view.whole_run

    def action_goto_loss_call(self) -> None:
        call = ((self.view.detail or {}).get("call") or {}).get("id")
        if call is not None:
            self.app.goto_call(self.app.batch, call)
