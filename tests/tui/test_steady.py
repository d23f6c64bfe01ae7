"""A widget that a layout resizes is drawn by that layout and not again for the virtual size
the layout gave it (what halved the bytes a tree move writes, `tui/steady.py`)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.containers import Vertical
from textual.strip import Strip
from textual.widget import Widget

from tvis.tui.steady import Steady, SteadyVertical


class _Lines(Widget):
    """``rows`` blank lines; notes each repaint asked of it after ``watching`` is set."""

    DEFAULT_CSS = "_Lines { height: auto; }"

    def __init__(self) -> None:
        super().__init__()
        self.rows = 3
        self.watching = False
        self.repaints = 0

    def refresh(self, *regions, repaint: bool = True, layout: bool = False, **kwargs):
        if self.watching and repaint:
            self.repaints += 1
        return super().refresh(*regions, repaint=repaint, layout=layout, **kwargs)

    def get_content_height(self, container, viewport, width: int) -> int:
        return self.rows

    def render_line(self, y: int) -> Strip:
        return Strip.blank(self.size.width)


class _SteadyLines(Steady, _Lines):
    pass


class _Column(App):
    def __init__(self, steady: bool) -> None:
        super().__init__()
        self.steady = steady

    def compose(self) -> ComposeResult:
        with SteadyVertical() if self.steady else Vertical():
            yield _SteadyLines() if self.steady else _Lines()


async def _repaints_of_one_resize(steady: bool) -> tuple[int, int]:
    """Repaints asked of the widget when it grows from 3 to 7 rows, and its height after."""
    app = _Column(steady)
    async with app.run_test(size=(40, 20)) as pilot:
        await pilot.pause()
        lines = app.query_one(_Lines)
        lines.watching = True
        lines.rows = 7
        lines.refresh(layout=True)  # the one repaint the content change itself asks for
        for _ in range(5):
            await pilot.pause()
        return lines.repaints, lines.size.height


async def test_a_steady_widget_is_not_repainted_for_its_new_virtual_size():
    assert await _repaints_of_one_resize(steady=True) == (1, 7)


async def test_a_plain_widget_is_repainted_again_so_the_test_above_measures_something():
    assert await _repaints_of_one_resize(steady=False) == (2, 7)
