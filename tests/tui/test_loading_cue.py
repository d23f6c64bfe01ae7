"""A wait long enough to notice says "loading …"; a quick answer never flickers a cue."""

from __future__ import annotations

from textual.app import App
from textual.widgets import Static

from tvis.tui.widgets.loading_cue import CUE_AFTER_S, LoadingCue


class Host(App):
    def compose(self):
        yield Static("", id="line")

    def on_mount(self) -> None:
        line = self.query_one("#line", Static)
        self.cue = LoadingCue(line, lambda: line.update("loading …"), lambda: line.update(""))


async def test_a_slow_answer_shows_the_cue_until_it_arrives():
    app = Host()
    async with app.run_test() as pilot:
        app.cue.start()
        await pilot.pause(CUE_AFTER_S + 0.2)
        assert app.cue.shown and "loading" in str(app.query_one("#line", Static).content)
        app.cue.stop()
        assert not app.cue.waiting and str(app.query_one("#line", Static).content) == ""


async def test_a_quick_answer_never_shows_the_cue():
    app = Host()
    async with app.run_test() as pilot:
        shown = []
        app.cue._show = lambda: shown.append(True)
        app.cue.start()
        await pilot.pause(CUE_AFTER_S / 3)
        app.cue.stop()
        await pilot.pause(CUE_AFTER_S + 0.2)
        assert shown == [] and not app.cue.waiting
