"""The inspector's scroll rail: its thumb follows the content and the scroll position,
the mouse scrolls with it, and when the content changes it is drawn with that change, in
the same frame, not once more after it (`tui/widgets/scroll_rail.py`)."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import Static

from tvis.tui.widgets.scroll_rail import RailScroll, ScrollRail


class _CountingRail(ScrollRail):
    def __init__(self) -> None:
        super().__init__()
        self.refreshes = 0

    def refresh(self, *args, **kwargs):
        self.refreshes += 1
        return super().refresh(*args, **kwargs)


class _Box(RailScroll):
    DEFAULT_CSS = "_Box { scrollbar-size-vertical: 0; }"

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rail = _CountingRail()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield self.rail
        yield Static("\n".join(f"line {i}" for i in range(self.rows)), id="text")


class _Page(App):
    def __init__(self, rows: int) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield _Box(self.rows)


async def _settle(pilot) -> None:
    for _ in range(4):
        await pilot.pause()


async def test_the_thumb_spans_the_shown_share_and_follows_the_scroll():
    app = _Page(rows=40)
    async with app.run_test(size=(30, 10)) as pilot:
        await _settle(pilot)
        box = app.query_one(_Box)
        assert box.rail._drawn == (0, 2)  # 10 of 40 rows shown: a quarter of 10 rows, on top
        box.scroll_end(animate=False)
        await _settle(pilot)
        assert box.rail._drawn == (8, 10)


async def test_everything_fitting_draws_no_thumb():
    app = _Page(rows=5)
    async with app.run_test(size=(30, 10)) as pilot:
        await _settle(pilot)
        assert app.query_one(_Box).rail._drawn is None


async def test_clicking_the_bottom_of_the_rail_scrolls_to_the_end():
    app = _Page(rows=40)
    async with app.run_test(size=(30, 10)) as pilot:
        await _settle(pilot)
        box = app.query_one(_Box)
        await pilot.click(ScrollRail, offset=(0, 9))
        await _settle(pilot)
        assert box.scroll_y == box.max_scroll_y > 0
        assert box.rail._drawn == (8, 10)


async def test_a_content_change_announced_before_its_layout_is_drawn_once():
    app = _Page(rows=40)
    async with app.run_test(size=(30, 10)) as pilot:
        await _settle(pilot)
        box = app.query_one(_Box)
        box.rail.refreshes = 0
        box.query_one("#text", Static).update("\n".join("x" for _ in range(20)))
        box.content_changed()  # what the inspector does when it puts in new cards
        await _settle(pilot)
        assert box.rail._drawn == (0, 5)  # 10 of 20 rows: half the rail
        assert box.rail.refreshes == 1  # the sync after the layout found it drawn already


async def test_a_content_change_nobody_announced_is_caught_up_after_its_layout():
    app = _Page(rows=40)
    async with app.run_test(size=(30, 10)) as pilot:
        await _settle(pilot)
        box = app.query_one(_Box)
        box.query_one("#text", Static).update("\n".join("x" for _ in range(20)))
        await _settle(pilot)
        assert box.rail._drawn == (0, 5)
