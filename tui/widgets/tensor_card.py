"""A tensor as the inspector shows it: shape, dtype, a stats row, a histogram and a heatmap
of its values or its gradient for the followed sample. Never its repr."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.events import Resize
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from tvis.store.schema import DEAD_ZEROS
from tvis.tui import colors, fmt
from tvis.tui.pane import AgentPane
from tvis.tui.picture import Scale
from tvis.tui.picture.widget import depth_of, legend_text, value_cells
from tvis.tui.steady import Steady
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


def kept_note(value: dict[str, Any]) -> str:
    """What a card adds when only part of the tensor's values were stored (``value``: its
    record's value entry): the first samples or rows; nothing when every sample was kept
    (the batch was no bigger than ``--samples``, and the count is None)."""
    count, kept = value.get("count"), value.get("kept")
    if kept not in ("samples", "rows") or not isinstance(count, int):
        return ""
    return f"  values kept for the first {count} {kept}"


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


def first_view_request(
    ref: TensorRef, grad: bool, sample: int | None, width: int, rows: int
) -> tuple[str, dict[str, Any]] | None:
    """The request a card showing ``ref`` makes first (no index picked), or None when it
    draws no picture: what is fetched ahead for a card, so that the card finds it cached."""
    target = ref.entry.get("grad_entry") if grad else ref.entry
    if target is None or why_no_picture(ref, target) is not None:
        return None
    return view_request(ref, grad, sample, [], width, rows)


GUTTER = 3
"""Columns a card spends on its left bar and the padding either side of its content."""


def picture_width(card_width: int) -> int:
    """Columns a card ``card_width`` wide asks for its view at."""
    return max(8, card_width - GUTTER - 2)


class CardHost(Protocol):
    """What a card needs from the widget that draws it."""

    app: Any

    def ask(self, method: str, tag: str = "main", **params: Any) -> bool: ...

    def cancel(self, tag: str = "main") -> None: ...

    def card_width(self) -> int:
        """The card's width, bar and padding included."""
        ...

    def card_changed(self, card: Card) -> None:
        """``card`` has new content: draw it again."""
        ...


@dataclass(frozen=True)
class CardStyles:
    """The styles a card's lines are drawn in, taken from the drawing widget's CSS."""

    base: Style  # the widget's colours, under everything
    bar: Style  # the left bar
    current: Style  # the left bar of the card under the inspector's cursor
    muted: Style  # a note where the picture would be


class Card:
    """One tensor argument, output or parameter tensor, as lines of cells: a bar on its
    left, then its title, statistics and histogram, its heatmap and legend, and which slice
    that is. Not a widget: the inspector draws all its cards in one line-API widget, so a
    tree move repaints lines instead of laying out a dozen widgets per card."""

    def __init__(self, host: CardHost, tag: str, max_rows: int = CARD_ROWS) -> None:
        self.host = host
        self.tag = tag  # what its view requests are asked under, in the host
        self.max_rows = max_rows
        self.ref: TensorRef | None = None
        self.index: list[int] = []
        self.values: np.ndarray | None = None  # the heatmap's values, once they came
        self.scale: Scale | None = None
        self._lead: list[int] = []
        self._grad = False
        self._sample: int | None = None
        self._view_shape: list[int] | None = None
        self._note = ""  # after the slice: how the values were kept, or why none are drawn
        self._placeholder = ""  # in the picture's place: loading, a single value
        self._drawn: tuple[tuple, list[list[Segment]]] | None = None  # and what it was for
        self._framed: tuple[bool, list[Strip]] | None = None  # with the bar, and its state
        self._version = 0  # content changes, to know when the lines are stale
        self._asked_width = 0  # the picture width its view was asked for

    @property
    def has_data(self) -> bool:
        return self.values is not None

    def show(self, ref: TensorRef, grad: bool, sample: int | None) -> None:
        """Show ``ref``; ``grad`` picks the gradient (for call arguments), ``sample`` the
        followed sample (ignored by tensors without a batch dim)."""
        same = self.ref is not None and self.ref.entry.get("id") == ref.entry.get("id")
        if not same:
            self.index = []
        self.host.cancel(self.tag)  # a view still on its way was for what was shown before
        self.ref, self._grad, self._sample = ref, grad and ref.param is None, sample
        self._refresh()

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
        self._refresh()

    def resized(self) -> None:
        """The host's width changed: a view asked for another width is asked again."""
        if self.ref is not None and self.picture_width() != self._asked_width:
            self._load_view()

    def _refresh(self) -> None:
        entry = self._entry()
        if entry is None:
            self._lead = []
        else:
            assert self.ref is not None
            self._lead = leading_dims(
                list(entry.get("shape") or []), self.ref.entry.get("batch_dim"), self._sliced()
            )
        self._changed()
        self._load_view()

    def _changed(self) -> None:
        self._version += 1
        self.host.card_changed(self)

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

    def picture_width(self) -> int:
        """Columns the view is asked for."""
        return picture_width(self.host.card_width())

    def _load_view(self) -> None:
        ref = self.ref
        target = self._entry() if ref is not None else None
        if ref is None or target is None:
            self._no_values("")
            return
        why = why_no_picture(ref, target)
        if why is not None:
            self._no_values(why)
            return
        if self.host.card_width() <= 0:
            # Not laid out (a pane not shown yet): asked once the host is, at its width;
            # a picture asked now would be at the narrowest and asked again then.
            self._asked_width = 0
            self.values, self._placeholder = None, "loading …"
            self._changed()
            return
        self._asked_width = self.picture_width()
        method, params = view_request(
            ref, self._grad, self._sample, self.index, self._asked_width, self.max_rows
        )
        if not self.host.ask(method, tag=self.tag, **params):
            self.values, self._placeholder = None, "loading …"
            self._changed()

    def answered(self, view: dict[str, Any]) -> None:
        signed = self._grad or bool(self.ref and self.ref.gradient_view)
        array = view["array"]
        if array.size == 1:  # one value (a sample's label, a scalar): say it, draw nothing
            self.values, self.scale = None, None
            self._placeholder = f"value {fmt.num(float(array.flat[0]))}"
        else:
            values = np.asarray(array, dtype=np.float32)
            if values.ndim < 2:
                values = values.reshape(1, -1)
            elif values.ndim > 2:
                values = values.reshape(-1, values.shape[-1])
            self.values, self.scale, self._placeholder = values, Scale.of(values, signed), ""
        self._view_shape = view.get("shape")
        self._note = "block means" if view.get("downsampled") else ""
        self._note += kept_note((self._entry() or {}).get("value") or {})
        self._changed()

    def failed(self, message: str) -> None:
        self._no_values(message)

    def _no_values(self, message: str) -> None:
        self.values, self.scale, self._placeholder = None, None, ""
        self._view_shape = None
        self._note = message
        self._changed()

    # -- drawing -------------------------------------------------------------------------

    def head_text(self, width: int) -> Text:
        """Title, statistics and a histogram ``width`` cells wide (at most 64)."""
        ref = self.ref
        assert ref is not None
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
        entry = self._entry()
        if entry is None:
            missing = Text("no gradient recorded for this tensor", style=colors.MUTED)
            return Text("\n").join([title, missing])
        diverging = self._grad or ref.gradient_view
        depth = depth_of(self.host.app.console.color_system)
        bars = histogram(entry.get("hist"), min(width, 64), diverging, depth=depth)
        return Text("\n").join([title, stats_text(entry), bars])

    def dims_text(self) -> Text:
        """Which slice the heatmap is: the followed sample, the leading index, the plane."""
        text = Text(style=colors.MUTED)
        if self.ref is None or self._entry() is None:
            return text
        if self._sliced():
            text.append(f"sample {self._sample}  ")
        if self._lead:
            index = (self.index + [0] * len(self._lead))[: len(self._lead)]
            where = ", ".join(f"{i}/{n}" for i, n in zip(index, self._lead, strict=True))
            text.append(f"[{where}] ‹ › ", style="")
        if self._view_shape:
            text.append(f"plane {fmt.shape(self._view_shape)}  ")
        text.append(self._note)
        return text

    def lines(self, width: int, current: bool, styles: CardStyles) -> list[Strip]:
        """The card ``width`` cells wide, its bar in the current style when ``current``,
        and a blank line under it."""
        key = (width, styles, self._version)
        if self._drawn is None or self._drawn[0] != key:
            self._drawn = (key, self._content(width, styles))
            self._framed = None
        if self._framed is None or self._framed[0] != current:
            # Textual's "tall" left border: the cell's left three quarters in the background.
            edge = (styles.current if current else styles.bar).color
            bar = Segment("▊", Style(color=styles.base.bgcolor, bgcolor=edge))
            framed = [Strip([bar, *line], width) for line in self._drawn[1]]
            self._framed = (current, [*framed, Strip.blank(width, styles.base)])
        return self._framed[1]

    def _content(self, width: int, styles: CardStyles) -> list[list[Segment]]:
        """Every line right of the bar: padding, content, padding, in the base style."""
        if self.ref is None:
            return []
        inner = max(1, width - GUTTER)
        console = self.host.app.console
        depth = depth_of(console.color_system)
        base = styles.base
        head_width = max(16, self.picture_width() - 2)
        lines = text_lines(self.head_text(head_width), inner, console, base)
        if self.values is not None and self.scale is not None:
            cells = value_cells(self.values, self.scale, inner, self.max_rows, depth)
            lines += [list(Segment.apply_style(strip, base)) for strip in cells]
            legend = legend_text(self.values, self.scale, min(inner, 40), depth)
            lines += text_lines(legend, inner, console, base)
        if self._placeholder:
            lines += text_lines(Text(self._placeholder, style=styles.muted), inner, console, base)
        lines += text_lines(self.dims_text(), inner, console, base) or [[]]
        pad = Segment(" ", base)
        out = []
        for line in lines:
            fill = inner - Segment.get_line_length(line)
            out.append(
                [pad, *line, Segment(" " * (fill + 1), base)] if fill > 0 else [pad, *line, pad]
            )
        return out


def text_lines(text: Text, width: int, console: Console, base: Style) -> list[list[Segment]]:
    """Rich text wrapped to ``width`` as lines of segments over ``base`` (none for empty
    text)."""
    if not text or width <= 0:
        return []
    options = console.options.update(width=width, height=None, highlight=False)
    return console.render_lines(text, options, style=base, pad=False)


class TensorCard(Steady, AgentPane):
    """A ``Card`` as a widget of its own (the layer views' Stats view)."""

    DEFAULT_CSS = "TensorCard { height: auto; }"

    COMPONENT_CLASSES: ClassVar[set[str]] = {"card--bar", "card--current", "card--muted"}

    def __init__(
        self, ref: TensorRef, grad: bool, sample: int | None, max_rows: int = CARD_ROWS, **kwargs
    ) -> None:
        super().__init__(**kwargs)
        self.card = Card(self, "view", max_rows)
        self.initial = (ref, grad, sample)  # shown once mounted

    @property
    def ref(self) -> TensorRef | None:
        return self.card.ref

    def on_mount(self) -> None:
        self.card.show(*self.initial)

    def show(self, ref: TensorRef, grad: bool, sample: int | None) -> None:
        self.card.show(ref, grad, sample)

    def card_width(self) -> int:
        # Asked while it mounts, before it is laid out: the nearest container laid out
        # knows the width (a Stats view shown for the first time by `v` has none yet).
        width = self.size.width
        node = self.parent
        while not width and isinstance(node, Widget):
            width, node = node.size.width, node.parent
        return width

    def card_changed(self, card: Card) -> None:
        self.refresh(layout=True)

    def on_resize(self, event: Resize) -> None:
        self.card.resized()

    def answered(self, tag: str, view: dict[str, Any]) -> None:
        self.card.answered(view)

    def failed(self, tag: str, message: str) -> None:
        self.card.failed(message)

    def _lines(self) -> list[Strip]:
        return self.card.lines(self.size.width, False, card_styles(self))

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.card.lines(width, False, card_styles(self)))

    def render_line(self, y: int) -> Strip:
        lines = self._lines()
        return lines[y] if y < len(lines) else Strip.blank(self.size.width, self.rich_style)


def card_styles(widget: Widget) -> CardStyles:
    """A card's styles from ``widget``'s component classes ``card--bar``, ``card--current``
    and ``card--muted``."""
    return CardStyles(
        base=widget.rich_style,
        bar=widget.get_component_rich_style("card--bar"),
        current=widget.get_component_rich_style("card--current"),
        muted=widget.get_component_rich_style("card--muted"),
    )


CARD_CSS = """
{name} > .card--bar {{ color: $panel; }}
{name} > .card--current {{ color: $accent; }}
{name} > .card--muted {{ color: $text-muted; }}
"""
"""The component classes of a widget that draws cards (``CARD_CSS.format(name=...)``)."""

TensorCard.DEFAULT_CSS += CARD_CSS.format(name="TensorCard")


def value_text(arg: dict[str, Any]) -> Text:
    """A non-tensor argument: ``name = value`` (the recorder's short repr), a text quoted
    whole, or token ids with the text they decode to."""
    text = Text()
    text.append(str(arg.get("name", "?")), style="bold")
    text.append(" = ")
    if isinstance(arg.get("text"), str):
        text.append(repr(fmt.clip(arg["text"], TEXT_SHOWN)), style=colors.PHASE["data"])
    elif isinstance(arg.get("ids"), list):
        text.append(decoded_text(arg))
    else:
        text.append(fmt.clip(str(arg.get("repr", "?")), 200))
    return text


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
