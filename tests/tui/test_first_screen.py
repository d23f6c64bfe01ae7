"""Explore's first screen: its card pictures are asked for with the run, before the page
exists, at the width its inspector gives them, so that the page draws them in its first
frame; that width is computed from the terminal's alone (``explore_layout``)."""

from __future__ import annotations

from pathlib import Path

from viewer_support import count_requests_from_the_start, make_app, open_explore, wait_for

from tvis.tui.pages.explore_layout import inspector_picture_width

SIZES = (100, 119, 137, 159, 160, 161, 199, 213)
"""Terminal widths on both sides of each layout's edge, where rounding a share differs."""


async def test_the_inspector_width_computed_from_the_terminal_is_the_one_laid_out(
    run_dir: Path,
):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        for width in SIZES:
            await pilot.resize_terminal(width, 40)
            await wait_for(
                pilot,
                lambda w=width: page.size.width == w and page.inspector.lines.size.width,
                f"Explore laid out at {width} columns",
            )
            await pilot.pause()
            assert page.inspector.display
            assert inspector_picture_width(width) == page.inspector.lines.picture_width(), width
        await pilot.resize_terminal(99, 40)
        await wait_for(pilot, lambda: page.layout_name == "compact", "the compact layout")
        assert inspector_picture_width(99) is None  # the tree alone: no cards to draw
        assert not page.inspector.display


async def test_the_first_screen_asks_its_pictures_once_before_explore_at_the_width_drawn(
    run_dir: Path,
):
    """The opening call's cards ask their views once, at the width they are drawn at, and
    the app has asked for them with the run, before Explore was built: the cards find them
    in the client's cache. (Laid out at even widths first, the cards asked at half the
    screen, then at their own; asked only once Explore was laid out, they came a round
    trip and a frame later.)"""
    app = make_app(run_dir)
    asked = count_requests_from_the_start(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the Replay page")
        await wait_for(
            pilot,
            lambda: all(w.is_finished for w in app.workers if w.group == "prefetch"),
            "the first screen's prefetch",
        )
        before_explore = len(asked)
        page = await open_explore(pilot)
        cards = page.inspector.cards
        await wait_for(pilot, lambda: all(c.has_data for c in cards), "the cards")
        tensors = {c.ref.entry["id"] for c in cards if c.ref is not None}
        views = [
            (i, a)
            for i, a in enumerate(asked)
            if a["method"] == "view" and a["tensor"] in tensors and a["batch"] == app.batch
        ]
        assert len(views) == len(cards) == len(tensors)  # each asked once
        assert all(i < before_explore for i, _ in views)  # with the run, not by the page
        assert {a["width"] for _, a in views} == {cards[0].picture_width()}
        assert page.inspector.lines.card_width() == page.inspector.lines.size.width > 0
        # The layer view under the cards came with them.
        call = page.inspector.selection.call
        layer = [i for i, a in enumerate(asked) if a["method"] == "on_image" and a["call"] == call]
        assert layer and layer[0] < before_explore
