"""The inspector's header, sections, value lines and tensor cards as one line-API widget.

A tree move used to replace the content of ~40 nested widgets (a card alone was a dozen:
title, statistics, histogram, picture rows, legend, slice), and Textual laid all of them out
and composited them, twice, on every move. Here a move rebuilds the lines whose content
changed and repaints only those; a layout is asked for only when the number of lines
changes. The layer views below stay widgets of their own (pictures that can be clicked,
sixel or kitty graphics), mounted once and left in place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from rich.console import RenderableType
from rich.segment import Segment
from rich.text import Text
from textual.events import Resize
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widget import Widget

from tvis.tui.pane import AgentPane
from tvis.tui.steady import Steady
from tvis.tui.widgets.tensor_card import CARD_CSS, Card, TensorRef, card_styles, picture_width


@dataclass(eq=False)
class TextBlock:
    """Text (or any Rich renderable) between the cards: ``pad`` columns either side,
    ``below`` blank lines under it; ``section`` draws it in the section titles' style."""

    content: RenderableType
    pad: int = 0
    below: int = 0
    section: bool = False
    _drawn: tuple[tuple, list[Strip]] | None = field(default=None, repr=False)

    def lines(self, widget: Widget, width: int) -> list[Strip]:
        base = widget.rich_style
        key = (width, base)
        if self._drawn is not None and self._drawn[0] == key:
            return self._drawn[1]
        content = self.content
        if self.section:
            content = Text(
                str(content), style=widget.get_component_rich_style("inspector--section")
            )
        inner = max(1, width - 2 * self.pad)
        console = widget.app.console
        options = console.options.update(width=inner, height=None, highlight=False)
        rendered = console.render_lines(content, options, pad=False) if content else []
        pad = [Segment(" " * self.pad)] if self.pad else []
        drawn = [
            Strip([*pad, *Strip(line).crop_extend(0, inner, None), *pad], width).apply_style(base)
            for line in rendered
        ]
        drawn += [Strip.blank(width, base)] * self.below
        self._drawn = (key, drawn)
        return drawn


Block = TextBlock | TensorRef
"""What goes below the header: text, or a tensor (drawn as a card)."""


class InspectorLines(Steady, AgentPane):
    """The header, then text blocks and cards, drawn line by line. Cards are reused from
    one call to the next by position, so a move between calls of one shape rebuilds their
    lines and asks for their views, and nothing else."""

    DEFAULT_CSS = (
        "InspectorLines { height: auto; }\n"
        "InspectorLines > .inspector--section { color: $text-muted; text-style: bold; }\n"
        + CARD_CSS.format(name="InspectorLines")
    )

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "card--bar",
        "card--current",
        "card--muted",
        "inspector--section",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.header = TextBlock(Text("Nothing selected yet."), below=1)
        self.blocks: list[TextBlock | Card] = []
        self.cards: list[Card] = []
        self.current: int | None = None  # the card drawn as under the cursor
        self._kept: list[Card] = []  # cards made so far, reused by position
        self._strips: list[Strip] = []  # every line, for the width they were made for
        self._made_for: int | None = None  # that width, or None once the content changed
        self._tops: list[int] = []  # the first line of each card
        self._drawn: dict[int, Strip] = {}  # each line as last drawn, by its y
        self._update_due = False

    # -- content -------------------------------------------------------------------------

    def set_header(self, content: RenderableType) -> None:
        self.header = TextBlock(content, below=1)
        self._changed()

    def set_body(self, blocks: Iterable[Block], grad: bool, sample: int | None) -> None:
        """Show ``blocks`` under the header, each ``TensorRef`` as a card showing its
        values or gradient (``grad``) for the followed ``sample``."""
        body: list[TextBlock | Card] = []
        shown: list[tuple[Card, TensorRef]] = []
        for block in blocks:
            if isinstance(block, TensorRef):
                if len(shown) == len(self._kept):
                    self._kept.append(Card(self, f"card{len(shown)}"))
                card = self._kept[len(shown)]
                shown.append((card, block))
                body.append(card)
            else:
                body.append(block)
        for card in self._kept[len(shown) :]:
            self.cancel(card.tag)  # a reply still on its way has no card to land in
        # Replaced before the cards ask: an answer from the cache lands at once, in them.
        self.blocks, self.cards = body, [card for card, _ in shown]
        for card, ref in shown:
            card.show(ref, grad, sample)
        self._changed()

    def mark_current(self, index: int | None) -> None:
        if index != self.current:
            self.current = index
            self._changed()

    def card_region(self, index: int) -> Region:
        """Where card ``index`` is, in this widget's lines."""
        self._lines(self._width())
        top = self._tops[index]
        end = self._tops[index + 1] if index + 1 < len(self._tops) else len(self._strips)
        return Region(0, top, self._width(), end - top)

    # -- what a card needs (tensor_card.CardHost) ----------------------------------------

    def card_width(self) -> int:
        return self._width()

    def picture_width(self) -> int:
        """Columns a card's view is asked for at this width (for prefetching)."""
        return picture_width(self._width())

    def card_changed(self, card: Card) -> None:
        self._changed()

    def answered(self, tag: str, result: Any) -> None:
        for card in self.cards:
            if card.tag == tag:
                card.answered(result)

    def failed(self, tag: str, message: str) -> None:
        for card in self.cards:
            if card.tag == tag:
                card.failed(message)

    # -- drawing -------------------------------------------------------------------------

    def _width(self) -> int:
        width = self.size.width
        if not width and isinstance(self.parent, Widget):
            # Before the first layout: what the inspector leaves beside its rail.
            width = self.parent.size.width - 1
        return max(0, width)

    def _changed(self) -> None:
        """Content changed: the lines are made again once this message's work is done, so
        the changes of one move (header, cards, their views) are drawn together."""
        self._made_for = None
        if not self._update_due and self.is_attached:
            self._update_due = True
            self.call_next(self._update)

    def _update(self) -> None:
        """Repaint the lines that changed; lay out again only if their number did."""
        self._update_due = False
        width = self._width()
        if not width:
            # Hidden (or not laid out yet): the layout that shows it sizes it, and its
            # paint draws every line, not those it drew before it was hidden. Asked here,
            # that layout came a frame after the one showing it.
            self._set_dirty()
            return
        lines = self._lines(width)
        if len(lines) != self.size.height:  # its height is its lines' (height: auto)
            self.refresh(layout=True)
            rail = getattr(self.parent, "content_changed", None)
            if rail is not None:
                rail()  # drawn in the frame of that layout
            return
        drawn, start = self._drawn, None
        for y, new in enumerate([*lines, None]):
            old = drawn.get(y)
            same = old is not None and (old is new or old == new)
            if not same and start is None and new is not None:
                start = y
            elif (same or new is None) and start is not None:
                self.refresh(Region(0, start, width, y - start))
                start = None

    def _lines(self, width: int) -> list[Strip]:
        if self._made_for == width:
            return self._strips
        styles = card_styles(self)
        strips = list(self.header.lines(self, width))
        tops: list[int] = []
        for block in self.blocks:
            if isinstance(block, Card):
                tops.append(len(strips))
                current = self.current is not None and self.cards[self.current] is block
                strips += block.lines(width, current, styles)
            else:
                strips += block.lines(self, width)
        self._strips, self._tops, self._made_for = strips, tops, width
        return strips

    def on_resize(self, event: Resize) -> None:
        for card in self.cards:
            card.resized()  # a new width asks for views of that width
        # Its height follows its lines (height: auto): a selection with more or fewer
        # lines resizes it, and the lines, made for this width already, stay as they are.
        if self._made_for != event.size.width:
            self._changed()

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        lines = self._lines(width)
        line = lines[y] if y < len(lines) else Strip.blank(width, self.rich_style)
        self._drawn[y] = line  # what the screen shows there, for `_update` to compare
        return line
