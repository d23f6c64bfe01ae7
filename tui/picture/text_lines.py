"""Text drawn from strips made once per text and width.

For text whose every cell has its own colour (a histogram's bars, a colour bar): a
``Static`` styles such text again, cell by cell, on every paint, which cost a tensor card
5 ms per paint of its histogram, a few paints per tree move.
"""

from __future__ import annotations

from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from tvis.tui.steady import Steady


def text_strip(line: Text, console: Console, base: Style) -> Strip:
    """One line of text as cells over ``base``, in the text's own style too: Rich puts
    that style only into the segments of a text with spans, so one without lost it."""
    own = console.get_style(line.style) if line.style else Style.null()
    return Strip(Segment.apply_style(line.render(console), base + own), line.cell_len)


class TextLines(Steady, Widget):
    """Rich text, wrapped to the widget's width, as prebuilt lines of cells."""

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = Text()
        self._strips: list[Strip] = []
        self._made_for: tuple[int, Style] | None = None  # the width and base style

    def update(self, text: Text | str = "") -> None:
        lines_before = len(self._strips)
        self.text = Text(text) if isinstance(text, str) else text
        self._made_for = None
        # A new layout only when the height changes, as with a picture's cells.
        self.refresh(layout=len(self._lines(self.size.width)) != lines_before)

    def _lines(self, width: int) -> list[Strip]:
        if width <= 0 or not self.text:
            self._strips, self._made_for = [], None
            return self._strips
        base = self.rich_style  # the widget's colours, under the text's own
        if self._made_for != (width, base):
            self._made_for = (width, base)
            console = self.app.console
            self._strips = [
                text_strip(line, console, base) for line in self.text.wrap(console, width)
            ]
        return self._strips

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render_line(self, y: int) -> Strip:
        strips = self._lines(self.size.width)
        return strips[y] if y < len(strips) else Strip.blank(self.size.width, self.rich_style)
