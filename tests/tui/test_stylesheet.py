"""The stylesheet parses each CSS source once: a widget class mounted for the first time (a
pane, a page, the help, a notice) parses its own CSS, not every source again."""

from __future__ import annotations

from collections import Counter

from textual.css import stylesheet
from viewer_support import make_app, open_explore, wait_for

from tvis.tui.app import PARSED_CSS_KEPT


async def test_a_first_pane_page_help_or_notice_parses_no_css_source_again(run_dir, monkeypatch):
    parsed: list[tuple] = []  # each source as the stylesheet's parse cache knows it
    parse = stylesheet.parse

    def recorded(scope, css, read_from, **kwargs):
        parsed.append((read_from, css, scope, kwargs["tie_breaker"], kwargs["is_default_rules"]))
        return parse(scope, css, read_from, **kwargs)

    app = make_app(run_dir)
    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        await wait_for(pilot, lambda: app.current_mode == "replay", "the first page")
        monkeypatch.setattr(stylesheet, "parse", recorded)
        page = await open_explore(pilot)
        await wait_for(
            pilot,
            lambda: app.ahead.next_page() is None and not page.panes_left_ahead(),
            "every page and pane built ahead",
            timeout=60,
        )
        for key in ("a", "s", "question_mark", "escape", "3", "2"):
            await pilot.press(key)
            await pilot.pause(0.1)
        app.notify("a first notice mounts Textual's toast widgets")
        await pilot.pause(0.3)
        assert app.screen.query("Toast")
        twice = {source[0] for source, n in Counter(parsed).items() if n > 1}
        assert not twice, f"parsed again: {sorted(map(str, twice))[:5]} of {len(parsed)}"
        assert len(app.stylesheet.source) < PARSED_CSS_KEPT / 2  # room to grow
        assert app.internal_errors == []
