"""The Live page, driven with Pilot, fed by a real sender process over a real socket."""

from __future__ import annotations

import asyncio
import os
import socket
import time

import numpy as np
from live_support import free_port, python
from textual.app import App
from textual.widgets import DataTable

from tvis.tui.live_image import fit
from tvis.tui.pages.live import LivePage, View
from tvis.tui.picture import Picture
from tvis.tui.widgets.live_bars import LiveBars
from tvis.tui.widgets.sparkline import sparkline

SENDER = """
    import torch, tvis
    weight = torch.arange(48.0).reshape(6, 8)
    for step in range(12):
        tvis.catch(torch.tensor(1.0 / (step + 1)), name="loss")
        tvis.catch(weight + step, name="weight")
    tvis.catch("[bold]done[/]", name="msg[x]")
"""


class PageApp(App):
    """The smallest app that shows a LivePage, as the real app shell will."""

    def __init__(self, address: str, listen: bool = True) -> None:
        super().__init__()
        self.address, self.listen = address, listen

    def on_mount(self) -> None:
        self.push_screen(LivePage(self.address, listen=self.listen))


async def settle(pilot, predicate, timeout: float = 30.0) -> bool:
    """Let the app run until ``predicate`` holds or ``timeout`` seconds pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await pilot.pause(0.05)
    return predicate()


def title(page: LivePage) -> str:
    return str(page.query_one("#live-title").content)


async def test_live_page_shows_rows_heatmap_and_steps_through_history():
    app = PageApp("127.0.0.1:0")
    async with app.run_test(size=(100, 40)) as pilot:
        page = app.screen
        assert isinstance(page, LivePage) and page.server is not None
        sender = python(SENDER, env={"TVIS_SERVER": page.server.address})
        await asyncio.to_thread(sender.wait, 120)
        assert sender.returncode == 0, sender.stderr.read()
        table = page.query_one(DataTable)
        received = lambda: page.view and [r.cells[5] for r in page.view.rows] == ["12", "12", "1"]  # noqa: E731
        assert await settle(pilot, lambda: table.row_count == 3 and received())

        loss_row = page.view.rows[0]
        assert loss_row.name == "loss" and loss_row.cells[2] == "0.08333"
        assert page.view.rows[1].cells[2].startswith("‖x‖ ")  # an array's newest norm, labelled
        assert loss_row.cells[1].strip()[0] == "█"  # the trend falls from its highest value

        await pilot.press("j")  # the list keys move the table
        assert await settle(pilot, lambda: title(page).startswith("weight · catch #12 · newest"))
        heatmap = page.query_one("#live-heatmap Picture", Picture)
        assert heatmap.has_data and heatmap.scale.hi == 47.0 + 11  # the picture kit draws it
        bars = page.query_one(LiveBars)
        assert sum(bars.heights) == 48
        assert bars.axis == (0.0, max(bars.heights))  # a y-axis from 0 to the tallest bin
        assert "┤" in bars.render().plain

        await pilot.press("left_square_bracket", "left_square_bracket")
        assert await settle(pilot, lambda: "catch #10 · 2 back" in title(page))
        assert heatmap.scale.hi == 47.0 + 9
        await pilot.press("right_square_bracket")
        assert await settle(pilot, lambda: "catch #11 · 1 back" in title(page))
        await pilot.press("end")
        assert await settle(pilot, lambda: "catch #12 · newest" in title(page))
        # `end` pressed while the view of an older step is being built still wins: that
        # view must not put its pin back (CI once lost an `end` this way).
        page.action_step(-1)
        page.action_newest()
        await pilot.pause(0.8)  # the stepped view lands, then a few refreshes
        assert "catch #12 · newest" in title(page)

        await pilot.press("down")
        assert await settle(pilot, lambda: title(page).startswith("msg[x] · catch #1"))
        assert not heatmap.has_data  # a string: nothing to draw
        assert page.view.rows[2].cells[2] == "[bold]done[…"


async def test_a_taken_port_names_its_holder_and_l_listens_on_a_free_one():
    app = PageApp("127.0.0.1:0")
    async with app.run_test() as pilot:
        taken = app.screen.server.address
        second = PageApp(taken)
        async with second.run_test() as pilot2:
            page = second.screen
            status = str(page.query_one("#live-status").content)
            assert status.startswith(f"{taken} is already in use by pid {os.getpid()} (")
            assert "press L to listen on a free port" in status
            await pilot2.press("L")
            assert page.server is not None and page.server.address != taken
            await pilot2.pause()
        await pilot.pause()


async def test_a_page_not_told_to_listen_binds_nothing_until_l():
    port = free_port()
    app = PageApp(f"127.0.0.1:{port}", listen=False)
    async with app.run_test() as pilot:
        page = app.screen
        assert page.server is None
        assert "L listens on 127.0.0.1:" in str(page.query_one("#live-status").content)
        with socket.create_server(("127.0.0.1", port)):
            pass  # the port is still free
        await pilot.press("L")
        assert page.server is not None and page.server.port == port


async def test_a_view_built_while_the_app_closes_lands_on_nothing_and_raises_nothing():
    """The app removes the page's widgets as it closes; a view built on a worker meanwhile
    arrives after them (seen in CI: NoMatches on '#live-status' failed the app)."""
    app = PageApp("127.0.0.1:0", listen=False)
    async with app.run_test() as pilot:
        page = app.screen
        assert isinstance(page, LivePage)
        await page.remove_children()  # as the closing app does, before the page itself
        page._apply(View("Live · a late view", [], None, None, None))
        await pilot.pause()
    assert app.return_code in (None, 0)


def test_sparkline_scales_min_to_max_and_marks_gaps_and_nonfinite():
    assert sparkline([0.0, 1.0, None, float("nan"), 0.5], 10).plain == "▁█ !▅"
    assert sparkline([2.0, 2.0], 10).plain == "▄▄"
    assert sparkline(list(range(100)), 4).plain == "▁▃▆█"  # quarters' means
    assert sparkline([0.0, float("inf"), 1.0, 2.0], 2).plain == "!█"  # never averaged away


def test_fit_reduces_large_arrays_by_block_means_and_says_so():
    image = fit(np.arange(400.0).reshape(20, 20), cols=10, pixel_rows=10, vmin=0, vmax=399)
    assert image.pixels.shape == (10, 10)
    assert image.pixels[0, 0] == np.mean([0, 1, 20, 21])
    assert image.note == "block means of 20×20 → 10×10"


def test_fit_wraps_vectors_and_leaves_small_arrays_to_the_picture():
    image = fit(np.arange(25.0), cols=10, pixel_rows=40, vmin=0, vmax=24)
    assert image.note == "1-D, wrapped in rows of 10"
    assert image.pixels.shape == (3, 10) and np.isnan(image.pixels[2, 5:]).all()
    small = fit(np.eye(2), cols=10, pixel_rows=10, vmin=0, vmax=1)
    assert small.pixels.shape == (2, 2) and small.note == ""  # the picture magnifies it


async def test_the_keys_on_an_empty_live_page_leave_the_app_running():
    """With nothing caught yet, `j` then `]` highlighted "no row" and the viewer exited with
    an AttributeError (found by bench/keys_bench.py)."""
    app = PageApp("127.0.0.1:0", listen=False)
    async with app.run_test(size=(100, 40)) as pilot:
        page = app.screen
        assert isinstance(page, LivePage) and page.query_one(DataTable).row_count == 0
        for key in ("j", "k", "right_square_bracket", "left_square_bracket", "end", "f"):
            await pilot.press(key)
            await pilot.pause(0.05)
        assert app.is_running and app.screen is page
        assert app._exit_renderables == []
