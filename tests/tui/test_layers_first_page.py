"""The layers table's first page comes with Explore's first screen: `y` then draws its rows
from the client's cache, in the frame that mounts the table, on the selected call's row —
on a big batch the agent's answer to it was the longest wait of the key."""

from __future__ import annotations

from pathlib import Path

from viewer_support import count_requests, make_app, open_explore, screen_text, wait_for

from tvis.store.lru import LRU
from tvis.tui.data import CACHE_ENTRIES
from tvis.tui.widgets.layers_table import LayersTable


async def _first_screen_fetched(pilot, app) -> None:
    await wait_for(
        pilot,
        lambda: all(w.is_finished for w in app.workers if w.group == "prefetch"),
        "the first screen's prefetch",
    )


async def test_y_on_the_first_screen_asks_the_agent_for_no_layers_rows(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await _first_screen_fetched(pilot, app)
        selected = page.selection.call
        asked = count_requests(app)
        await pilot.press("y")
        table = page.query_one(LayersTable)
        await wait_for(pilot, lambda: table.row_count and table.row(0), "the table's rows")
        assert [a for a in asked if a["method"] == "layers"] == []
        # The cursor is where the table's own requests put it: the selected call's row.
        assert table.row(table.cursor)["id"] == selected
        assert "layers · call order" in screen_text(app)
        assert app.internal_errors == []


async def test_the_table_from_the_prefetch_is_the_table_the_agent_gives_on_asking(
    run_dir: Path,
):
    screens = []
    for prefetched in (True, False):
        app = make_app(run_dir)
        async with app.run_test(size=(120, 40)) as pilot:
            page = await open_explore(pilot)
            await _first_screen_fetched(pilot, app)
            if not prefetched:
                app.data._cache = LRU(CACHE_ENTRIES)  # as if nothing had been fetched
            await pilot.press("y")
            table = page.query_one(LayersTable)
            await wait_for(pilot, lambda t=table: t.row_count and t.row(0), "the table's rows")
            await pilot.pause(0.2)
            screens.append((table.cursor, table.row_count, screen_text(app)))
    assert screens[0] == screens[1]
