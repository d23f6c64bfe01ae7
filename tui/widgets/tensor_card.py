"""A tensor as the inspector shows it: shape, dtype, a stats row, a histogram and a heatmap
of its values or its gradient for the followed sample. Never its repr."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.events import Resize
from textual.widget import Widget
from textual.widgets import Static

from tvis.store.schema import DEAD_ZEROS
from tvis.tui import colors, fmt
from tvis.tui.pane import AgentPane
from tvis.tui.picture import Picture, Scale
from tvis.tui.picture.text_lines import TextLines
from tvis.tui.picture.widget import depth_of
from tvis.tui.steady import Steady, SteadyStatic
from tvis.tui.widgets.histogram import histogram


@dataclass(frozen=True)
class TensorRef:
    """Where a card's tensor lives: an argument of a call in a batch, or a parameter's
    weight / grad / update at a step."""

    title: str
    entry: dict[str, Any]
    run: str
    batch: int | None = None
    step: int | None = None
    param: str | None = None
    which: str = "weight"
    gradient_view: bool = False  # for parameters: this card *is* a gradient or an update


def stats_text(entry: dict[str, Any]) -> Text:
    """The stats row: μ σ min max mean|x| ‖·‖ zeros NaN Inf (warnings coloured)."""
    s = entry.get("stats") or {}
    text = Text()

    def item(label: str, value: str, style: str = "") -> None:
        text.append(label + " ", style=colors.MUTED)
        text.append(value + "  ", style=style)

    item("μ", fmt.num(s.get("mean")))
    item("σ", fmt.num(s.get("std")))
    item("min", fmt.num(s.get("min")))
    item("max", fmt.num(s.get("max")))
    text.append("\n")
    item("mean|x|", fmt.num(s.get("absmean")))
    item("‖·‖", fmt.num(s.get("norm")))
    zeros = s.get("zeros")
    item("zeros", fmt.pct(zeros), colors.WARN if zeros is not None and zeros > DEAD_ZEROS else "")
    bad = (s.get("nan") or 0) + (s.get("inf") or 0)
    if bad:
        item("NaN", fmt.num(s.get("nan") or 0), colors.BAD)
        item("Inf", fmt.num(s.get("inf") or 0), colors.BAD)
    return text


def leading_dims(shape: list[int], batch_dim: int | None, sliced: bool) -> list[int]:
    """The dims a 2-D view must fix: all but the last two, after the sample is taken out."""
    dims = list(shape)
    if sliced and batch_dim is not None and 0 <= batch_dim < len(dims):
        del dims[batch_dim]
    return dims[:-2] if len(dims) > 2 else []


CARD_ROWS = 10
"""Rows of a card's picture in the inspector."""


def why_no_picture(ref: TensorRef, target: dict[str, Any]) -> str | None:
    """Why ``target`` (the entry or its gradient entry) has no picture to draw, or None."""
    if target.get("not_captured"):
        return f"not captured: {target['not_captured']}"
    if ref.param is None and not target.get("value"):
        return "values not kept (stats only)"
    if (target.get("stats") or {}).get("numel") == 1:
        return ""  # a scalar is its statistics
    return None


def view_request(
    ref: TensorRef, grad: bool, sample: int | None, index: list[int], width: int, rows: int
) -> tuple[str, dict[str, Any]]:
    """The agent request that draws ``ref`` in a card of ``width`` columns and ``rows``
    rows (shared with the inspector's prefetch, so what it fetches is what a card asks)."""
    size = {"width": width, "height": 2 * rows}
    if ref.param is not None:
        return "param", {
            "run": ref.run,
            "step": ref.step,
            "name": ref.param,
            "which": ref.which,
            "index": index,
            **size,
        }
    where: dict[str, Any] = {"batch": ref.batch} if ref.batch is not None else {"step": ref.step}
    if sample is not None and ref.entry.get("batch_dim") is not None:
        where["sample"] = sample
    return "view", {
        "run": ref.run,
        "tensor": ref.entry["id"],
        "grad": grad,
        "index": index,
        **where,
        **size,
    }


class TensorCard(Steady, AgentPane):
    """One tensor argument, output or parameter tensor."""

    DEFAULT_CSS = """
    TensorCard { height: auto; padding: 0 1; margin-bottom: 1; border-left: tall $panel; }
    TensorCard.-current { border-left: tall $accent; }
    TensorCard > Static { height: auto; }
    """

    def __init__(
        self, ref: TensorRef, grad: bool, sample: int | None, max_rows: int = CARD_ROWS, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.max_rows = max_rows
        self.initial = (ref, grad, sample)  # shown once mounted
        self.ref: TensorRef | None = None
        self.index: list[int] = []
        self._lead: list[int] = []
        self._grad = False
        self._sample: int | None = None
        self._view_shape: list[int] | None = None
        self._note = ""
        self._made_for = 0  # the picture width the histogram and view were made for

    def compose(self) -> ComposeResult:
        yield TextLines(classes="head")  # title, statistics, histogram: one widget to lay out
        yield Picture(max_rows=self.max_rows)
        yield SteadyStatic(classes="dims")

    def on_mount(self) -> None:
        self.show(*self.initial)

    def on_resize(self, event: Resize) -> None:
        # Made for the width it had: a scrollbar that appears once the cards are mounted
        # narrows them, and the histogram and view are then made again for the new width.
        if self.ref is not None and self.picture_width() != self._made_for:
            self._refresh_text()
            self._load_view()

    def show(self, ref: TensorRef, grad: bool, sample: int | None) -> None:
        """Show ``ref``; ``grad`` picks the gradient (for call arguments), ``sample`` the
        followed sample (ignored by tensors without a batch dim)."""
        same = self.ref is not None and self.ref.entry.get("id") == ref.entry.get("id")
        if not same:
            self.index = []
        self.ref, self._grad, self._sample = ref, grad and ref.param is None, sample
        self._refresh_text()
        self._load_view()

    def step_index(self, delta: int) -> None:
        """Move through the leading dims (e.g. channels), the last one fastest."""
        if not self._lead:
            return
        index = (self.index + [0] * len(self._lead))[: len(self._lead)]
        flat = 0
        for i, size in zip(index, self._lead, strict=True):
            flat = flat * size + i
        total = 1
        for size in self._lead:
            total *= size
        flat = (flat + delta) % total
        new: list[int] = []
        for size in reversed(self._lead):
            flat, i = divmod(flat, size)
            new.insert(0, i)
        self.index = new
        self._refresh_text()
        self._load_view()

    def _entry(self) -> dict[str, Any] | None:
        assert self.ref is not None
        if self._grad:
            return self.ref.entry.get("grad_entry")
        return self.ref.entry

    def _sliced(self) -> bool:
        return (
            self._sample is not None
            and self.ref is not None
            and self.ref.entry.get("batch_dim") is not None
        )

    def _refresh_text(self) -> None:
        ref = self.ref
        assert ref is not None
        entry = self._entry()
        title = Text(style="bold")
        title.append(ref.title)
        title.append(f"  {fmt.shape(ref.entry.get('shape'))} {ref.entry.get('dtype', '')}")
        if ref.entry.get("device") and ref.entry.get("device") != "cpu":
            title.append(f" {ref.entry['device']}", style=colors.MUTED)
        if self._grad:
            title.append("  gradient", style=colors.PHASE["backward"])
        elif ref.gradient_view:
            title.append(
                f"  {ref.which}",
                style=colors.PHASE["backward" if ref.which == "grad" else "optimizer"],
            )
        if ref.entry.get("batch_dim_inferred"):
            title.append("  batch dim inferred", style=colors.WARN)
        head = self.query_one(".head", TextLines)
        if entry is None:
            missing = Text("no gradient recorded for this tensor", style=colors.MUTED)
            head.update(Text("\n").join([title, missing]))
            self.query_one(Picture).clear()
            self.query_one(".dims", Static).update("")
            self._lead = []
            return
        self._made_for = self.picture_width()
        width = max(16, self._made_for - 2)
        diverging = self._grad or ref.gradient_view
        bars = histogram(
            entry.get("hist"),
            min(width, 64),
            diverging,
            depth=depth_of(self.app.console.color_system),
        )
        head.update(Text("\n").join([title, stats_text(entry), bars]))
        self._lead = leading_dims(
            list(entry.get("shape") or []), ref.entry.get("batch_dim"), self._sliced()
        )
        self._refresh_dims()

    def _refresh_dims(self) -> None:
        text = Text(style=colors.MUTED)
        if self._sliced():
            text.append(f"sample {self._sample}  ")
        if self._lead:
            index = (self.index + [0] * len(self._lead))[: len(self._lead)]
            where = ", ".join(f"{i}/{n}" for i, n in zip(index, self._lead, strict=True))
            text.append(f"[{where}] ‹ › ", style="")
        if self._view_shape:
            text.append(f"plane {fmt.shape(self._view_shape)}  ")
        text.append(self._note)
        self.query_one(".dims", Static).update(text)

    def picture_width(self) -> int:
        """Columns the picture can use. A card is asked for its view while it mounts, before
        it is laid out; its parent's width is known then, less the card's border and padding."""
        width = self.size.width
        if not width and isinstance(self.parent, Widget):
            width = self.parent.size.width - self.styles.gutter.width
        return max(8, width - 2)

    def _load_view(self) -> None:
        ref = self.ref
        target = self._entry() if ref is not None else None
        if ref is None or target is None:
            return
        why = why_no_picture(ref, target)
        if why is not None:
            self._no_values(why)
            return
        method, params = view_request(
            ref, self._grad, self._sample, self.index, self.picture_width(), self.max_rows
        )
        if not self.ask(method, **params):
            self.query_one(Picture).placeholder("loading …")

    def answered(self, tag: str, view: dict[str, Any]) -> None:
        signed = self._grad or bool(self.ref and self.ref.gradient_view)
        array = view["array"]
        if array.size == 1:  # one value (a sample's label, a scalar): say it, draw nothing
            self.query_one(Picture).placeholder(f"value {fmt.num(float(array.flat[0]))}")
        else:
            self.query_one(Picture).show_values(array, Scale.of(array, signed))
        self._view_shape = view.get("shape")
        self._note = "block means" if view.get("downsampled") else ""
        value = (self._entry() or {}).get("value") or {}
        if value.get("kept") == "samples":
            self._note += f"  values kept for the first {value.get('count', '?')} samples"
        elif value.get("kept") == "rows":
            self._note += f"  values kept for the first {value.get('count', '?')} rows"
        self._refresh_dims()

    def failed(self, tag: str, message: str) -> None:
        self._no_values(message)

    def _no_values(self, message: str) -> None:
        self.query_one(Picture).clear()
        self._view_shape = None
        self._note = message
        self._refresh_dims()


class ValueLine(SteadyStatic):
    """A non-tensor argument: ``name = value`` (the recorder's short repr), a text quoted
    whole, or token ids with the text they decode to."""

    DEFAULT_CSS = "ValueLine { height: auto; padding: 0 1; }"

    def show(self, arg: dict[str, Any]) -> None:
        text = Text()
        text.append(str(arg.get("name", "?")), style="bold")
        text.append(" = ")
        if isinstance(arg.get("text"), str):
            text.append(repr(fmt.clip(arg["text"], TEXT_SHOWN)), style=colors.PHASE["data"])
        elif isinstance(arg.get("ids"), list):
            text.append(decoded_text(arg))
        else:
            text.append(fmt.clip(str(arg.get("repr", "?")), 200))
        self.update(text)


TEXT_SHOWN = 600
"""Characters of a text argument shown in the inspector: a paragraph, not a document."""


def decoded_text(arg: dict[str, Any]) -> Text:
    """Token ids as ``N ids → "text"`` plus the tokens, or the ids and why they stay ids."""
    ids = arg.get("ids") or []
    decoded = arg.get("decoded") or {}
    text = Text()
    if "text" in decoded:
        if ids:
            text.append(f"{len(ids)} token ids → ", style=colors.MUTED)
        elif decoded.get("sample") is not None:
            text.append(f"sample {decoded['sample']} decoded → ", style=colors.MUTED)
        text.append(repr(fmt.clip(decoded["text"] or "", TEXT_SHOWN)), style=colors.PHASE["data"])
        tokens = decoded.get("tokens") or []
        text.append("\n  tokens ", style=colors.MUTED)
        text.append(fmt.clip(" ".join(repr(t)[1:-1] or "·" for t in tokens), TEXT_SHOWN))
    else:
        text.append(fmt.clip(str(ids), 200))
        if decoded.get("why"):
            text.append(f"\n  {decoded['why']}", style=colors.MUTED)
    return text
