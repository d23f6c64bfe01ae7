"""A scroll bar drawn in the same frame as the content it scrolls.

Textual's own scroll bar learns the content's new height during the layout that places the
content, and only then asks to be drawn: one frame later, after a second layout. A tree move
changes the inspector's height almost every time, so its screen was complete a frame late.
This rail is asked to redraw when the content changes, before that layout, and reads the
container's size while the layout's frame is drawn, so both land in one frame.
"""

from __future__ import annotations

from rich.segment import Segment
from textual import events
from textual.containers import VerticalScroll
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

from tvis.tui.steady import Steady


class ScrollRail(Widget):
    """One column docked at the right of a scrolling container: its track and its thumb.
    Clicking the track or dragging the thumb scrolls the container."""

    COMPONENT_CLASSES = {"scroll-rail--thumb"}

    DEFAULT_CSS = """
    ScrollRail { dock: right; width: 1; height: 100%; background: $scrollbar-background; }
    ScrollRail > .scroll-rail--thumb { background: $scrollbar; }
    ScrollRail:hover > .scroll-rail--thumb { background: $scrollbar-hover; }
    """

    def __init__(self) -> None:
        super().__init__()
        self._dragging = False
        self._drawn: tuple[int, int] | None = None  # the thumb last drawn
        self._cells = (Strip.blank(1), Strip.blank(1))  # a cell of track, one of thumb

    def _thumb(self) -> tuple[int, int] | None:
        """The thumb's first and last row + 1, or None when everything fits."""
        box, rows = self.parent, self.size.height
        if not isinstance(box, Widget) or rows <= 0:
            return None
        content, shown = box.virtual_size.height, box.scrollable_content_region.height
        if content <= shown or shown <= 0:
            return None
        length = max(1, round(rows * shown / content))
        top = round((rows - length) * box.scroll_y / max(1, box.max_scroll_y))
        return top, top + length

    def sync(self) -> None:
        """Redraw if the thumb drawn last is not where the container now says (the content
        changed without ``refresh`` being asked before its layout, or it scrolled)."""
        if self._thumb() != self._drawn:
            self.refresh()

    def render_lines(self, crop: Region) -> list[Strip]:
        # Once per drawing, not per line: where the thumb is, and its two kinds of cell.
        self._drawn = self._thumb()
        width = self.size.width
        thumb = self.get_component_rich_style("scroll-rail--thumb")
        self._cells = (
            Strip([Segment(" " * width, self.rich_style)], width),
            Strip([Segment(" " * width, thumb)], width),
        )
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        on = self._drawn is not None and self._drawn[0] <= y < self._drawn[1]
        return self._cells[on]

    def _scroll_to_row(self, y: int) -> None:
        box = self.parent
        if isinstance(box, Widget) and self.size.height > 1:
            fraction = min(1.0, max(0.0, y / (self.size.height - 1)))
            box.scroll_to(y=fraction * box.max_scroll_y, animate=False)

    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._dragging = True
        self.capture_mouse()
        self._scroll_to_row(event.y)
        event.stop()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self._scroll_to_row(event.y)
            event.stop()

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()
            event.stop()


class RailScroll(Steady, VerticalScroll):
    """A vertical scroll whose bar is a ``ScrollRail``: the subclass composes ``self.rail``
    and hides Textual's bar in its own CSS (``scrollbar-size-vertical: 0``; with that rule
    here or inline, alternated runs of a tree move came out 4–10 ms slower, cause not found).
    Call ``content_changed`` when new content goes in, so the rail is drawn in the frame of
    the layout that content asks for."""

    def __init__(self, *children: Widget, **kwargs) -> None:
        super().__init__(*children, **kwargs)
        self.rail = ScrollRail()

    def content_changed(self) -> None:
        self.rail.refresh()

    def watch_virtual_size(self, size) -> None:
        # Content that grew later (a picture arriving): the rail catches up after the frame.
        self.call_later(self.rail.sync)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.rail.sync()
