"""Text drawn from strips made once per text and width.

For text whose every cell has its own colour (a histogram's bars, a colour bar): a
``Static`` styles such text again, cell by cell, on every paint, which cost a tensor card
5 ms per paint of its histogram, a few paints per tree move.
"""

from __future__ import annotations

from rich.text import Text
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget


class TextLines(Widget):
    """Rich text, wrapped to the widget's width, as prebuilt lines of cells."""

    DEFAULT_CSS = "TextLines { height: auto; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.text = Text()
        self._strips: list[Strip] = []
        self._width = -1  # the width the strips were made for

    def update(self, text: Text | str = "") -> None:
        lines_before = len(self._strips)
        self.text = Text(text) if isinstance(text, str) else text
        self._width = -1
        # A new layout only when the height changes, as with a picture's cells.
        self.refresh(layout=len(self._lines(self.size.width)) != lines_before)

    def _lines(self, width: int) -> list[Strip]:
        if width != self._width:
            self._width = width
            self._strips = []
            if width > 0 and self.text:
                console = self.app.console
                self._strips = [
                    Strip(line.render(console), line.cell_len)
                    for line in self.text.wrap(console, width)
                ]
        return self._strips

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._lines(width))

    def render_line(self, y: int) -> Strip:
        strips = self._lines(self.size.width)
        return strips[y] if y < len(strips) else Strip.blank(self.size.width)
