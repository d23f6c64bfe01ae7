"""Weights' "all layers" in half-block cells: every parameter's thumbnail, one line widget.

The thumbnails were a widget each (a name, a picture and its parts: ~9 widgets), and `a`
mounted a screenful of them, ~140 widgets that took ~130 ms to mount and ~150 ms to lay
out. Here the grid is one scroll view: a line is cut from the thumbnails of its row, each
drawn once per answer and width; a thumbnail asks for its picture when it scrolls into
view. Sixel and kitty pictures stay widgets of their own (``weights.AllLayers``): a
graphic is placed by the widget that holds its cells.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from rich.segment import Segment
from rich.text import Text
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from tvis.tui import fmt
from tvis.tui.pane import Asks
from tvis.tui.picture import Scale
from tvis.tui.picture.widget import depth_of, value_cells

THUMB_PX = (24, 12)
"""Thumbnail values (width × height) asked per parameter: 288 floats, ~1 KiB a reply."""

NAME_CHARS = 30
"""Longest parameter name a thumbnail shows (cut at its end, as before)."""

PICTURE_ROWS = 6
"""Cell rows a thumbnail's picture takes at most: its name above, a blank line below."""


@dataclass(slots=True)
class _Thumb:
    """One parameter's thumbnail: nothing asked yet, asked (``…``), its values or why not."""

    asked: bool = False
    values: np.ndarray | None = None
    message: str | None = None
    drawn: tuple[int, list[Strip]] | None = None  # its lines at a width


class ThumbGrid(Asks, ScrollView, can_focus=True):
    """A thumbnail of every parameter, ``PER_ROW`` a row, fetched as they scroll into view."""

    COMPONENT_CLASSES: ClassVar[set[str]] = {"thumb-grid--name", "thumb-grid--note"}

    DEFAULT_CSS = """
    ThumbGrid { height: 1fr; }
    ThumbGrid > .thumb-grid--name { text-style: bold; }
    ThumbGrid > .thumb-grid--note { color: $text-muted; }
    """

    PER_ROW = 3
    ROW_HEIGHT = 8  # a name, up to ``PICTURE_ROWS`` of cells, a blank line
    PAD = 1  # cells either side of a thumbnail

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step: int | None = None
        self.which = "weight"
        self.params: list[dict[str, Any]] = []
        self._thumbs: list[_Thumb] = []
        self._shown = 0  # which ``show`` the thumbnails and replies belong to
        self._load_due = False  # a load waits for the scroll's animation to end

    # -- what is shown ---------------------------------------------------------------------

    @property
    def row_count(self) -> int:
        return -(-len(self.params) // self.PER_ROW)

    @property
    def loaded_count(self) -> int:
        """Thumbnails whose picture was asked for."""
        return sum(t.asked for t in self._thumbs)

    async def show(self, params: list[dict[str, Any]], step: int | None, which: str) -> None:
        """Thumbnails of ``params``' ``which`` at ``step``, where the grid is scrolled."""
        self.step, self.which, self.params = step, which, params
        self._shown += 1
        self._wanted_replies.clear()  # replies for the thumbnails shown before are dropped
        self._thumbs = [_Thumb() for _ in params]
        self._resize_virtual()
        self.refresh()
        self.load_visible()

    def _resize_virtual(self) -> None:
        # As wide as what it is drawn in (lines are cut to it): it scrolls only up and down.
        self.virtual_size = Size(0, self.row_count * self.ROW_HEIGHT)

    def visible_rows(self) -> range:
        """The rows of thumbnails with a line in view."""
        top = int(self.scroll_y)
        height = self.size.height or self.app.size.height
        first = top // self.ROW_HEIGHT
        return range(first, min(self.row_count, -(-(top + height) // self.ROW_HEIGHT)))

    def load_visible(self) -> None:
        """Ask for the pictures of the thumbnails in view that have not asked yet."""
        if self.step is None or not self.display:
            return
        for row in self.visible_rows():
            for index in range(row * self.PER_ROW, min(len(self.params), (row + 1) * self.PER_ROW)):
                if not self._thumbs[index].asked:
                    self._load(index)

    def _load(self, index: int) -> None:
        thumb = self._thumbs[index]
        thumb.asked, thumb.drawn = True, None
        self._refresh_thumb(index)
        width, height = THUMB_PX
        self.ask(
            "matrix",
            tag=f"{self._shown}:{index}",
            run=self.app.run_name,
            step=self.step,
            name=self.params[index]["name"],
            which=self.which,
            width=width,
            height=height,
        )

    def _thumb_of(self, tag: str) -> int | None:
        shown, index = map(int, tag.split(":"))
        return index if shown == self._shown and index < len(self._thumbs) else None

    def answered(self, tag: str, result: Any) -> None:
        index = self._thumb_of(tag)
        if index is not None:
            thumb = self._thumbs[index]
            thumb.values, thumb.message, thumb.drawn = (
                np.asarray(result["array"], dtype=np.float32),
                None,
                None,
            )
            self._refresh_thumb(index)

    def failed(self, tag: str, message: str) -> None:
        index = self._thumb_of(tag)
        if index is not None:
            thumb = self._thumbs[index]
            thumb.values, thumb.message, thumb.drawn = None, message, None
            self._refresh_thumb(index)

    def _refresh_thumb(self, index: int) -> None:
        self.refresh_lines((index // self.PER_ROW) * self.ROW_HEIGHT, self.ROW_HEIGHT)

    # -- scrolling -------------------------------------------------------------------------

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._load_after_scroll()

    def _load_after_scroll(self) -> None:
        """Load what is in view once the scroll stops: an animated End passes over every
        row between, and asked for each of them."""
        if self.app.animator.is_being_animated(self, "scroll_y"):
            if not self._load_due:
                self._load_due = True
                self.call_after_refresh(self._after_refresh)
            return
        self.load_visible()

    def _after_refresh(self) -> None:
        self._load_due = False
        self._load_after_scroll()

    def on_resize(self) -> None:
        self._resize_virtual()
        for thumb in self._thumbs:
            thumb.drawn = None  # drawn at the new width when next in view
        self.load_visible()

    def on_show(self) -> None:
        self.load_visible()

    # -- drawing ---------------------------------------------------------------------------

    @property
    def drawn_width(self) -> int:
        """The cells a line takes: the grid's width less its scrollbar."""
        return self.scrollable_content_region.width

    def row_size(self, row: int) -> int:
        """Thumbnails in row ``row``: ``PER_ROW``, fewer in the last."""
        return max(0, min(self.PER_ROW, len(self.params) - row * self.PER_ROW))

    def column_edges(self, width: int, count: int) -> list[int]:
        """Where each of a row's ``count`` thumbnails starts, and the last one ends: the
        width shared out as evenly as whole cells allow (a last row of fewer shares it
        among fewer, as the thumbnail widgets did)."""
        return [i * width // count for i in range(count + 1)]

    def render_line(self, y: int) -> Strip:
        width, base = self.drawn_width, self.rich_style
        line = int(self.scroll_y) + y
        row, within = divmod(line, self.ROW_HEIGHT)
        count = self.row_size(row)
        if not count:
            return Strip.blank(width, base)
        edges = self.column_edges(width, count)
        parts = [
            self._thumb_lines(row * self.PER_ROW + column, edges[column + 1] - edges[column])[
                within
            ]
            for column in range(count)
        ]
        return Strip.join(parts).crop_extend(0, width, base)

    def _thumb_lines(self, index: int, width: int) -> list[Strip]:
        """Thumbnail ``index``'s ``ROW_HEIGHT`` lines, ``width`` cells each: its name, then
        its picture in half blocks, or ``…`` while asked, or why there is none."""
        thumb = self._thumbs[index]
        if thumb.drawn is not None and thumb.drawn[0] == width:
            return thumb.drawn[1]
        base = self.rich_style
        inner = max(1, width - 2 * self.PAD)
        name = fmt.clip(str(self.params[index].get("name")), NAME_CHARS)
        name_style = self.get_component_rich_style("thumb-grid--name")
        body: list[Strip] = [self._text_line(Text(name, style=name_style), inner)]
        if thumb.values is not None:
            values = thumb.values.reshape(1, -1) if thumb.values.ndim < 2 else thumb.values
            depth = depth_of(self.app.console.color_system)
            cells = value_cells(values, Scale.of(values, signed=True), inner, PICTURE_ROWS, depth)
            body += [s.apply_style(base) for s in cells]
        elif thumb.asked:
            note = thumb.message if thumb.message is not None else "…"
            text = Text(note, style=self.get_component_rich_style("thumb-grid--note"))
            for wrapped in text.wrap(self.app.console, inner)[: self.ROW_HEIGHT - 1]:
                body.append(self._text_line(wrapped, inner))
        pad = Strip.blank(self.PAD, base)
        lines = [
            Strip.join([pad, s.crop_extend(0, inner, base), pad]) for s in body[: self.ROW_HEIGHT]
        ]
        lines += [Strip.blank(width, base)] * (self.ROW_HEIGHT - len(lines))
        thumb.drawn = (width, lines)
        return lines

    def _text_line(self, text: Text, width: int) -> Strip:
        text = text.copy()
        text.truncate(width)
        text.stylize(text.style)  # a Text's own style is not in its rendered segments
        segments = [s for s in text.render(self.app.console) if s.text != "\n"]
        return Strip(segments or [Segment("")]).apply_style(self.rich_style)
