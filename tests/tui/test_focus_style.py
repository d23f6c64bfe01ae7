"""A container that takes the focus restyles what its focus can change: itself, and what is
under it only when a rule lets its focus style that (``tvis.tui.focus_style``)."""

from __future__ import annotations

from pathlib import Path

from textual.app import App, ComposeResult
from textual.color import Color
from textual.widgets import Static
from viewer_support import make_app, open_explore, wait_for

from tvis.tui.focus_style import FocusVerticalScroll


def restyled_nodes(app) -> list:
    """Every node the stylesheet restyles from now on."""
    restyled: list = []
    update_nodes = app.stylesheet.update_nodes

    def recorded(nodes, animate=False):
        nodes = list(nodes)
        restyled.extend(nodes)
        return update_nodes(nodes, animate)

    app.stylesheet.update_nodes = recorded
    return restyled


def styles_under(widget) -> dict:
    """The stylesheet's rules on ``widget`` and every widget under it."""
    return {node: node.styles.base.get_rules() for node in widget.walk_children(with_self=True)}


async def test_the_inspector_s_focus_restyles_the_inspector_alone(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        inspector = page.inspector
        # Its lines, cards, layer views and their pictures: mounted a moment after its
        # cards are drawn, which on a loaded machine is after `open_explore` returns.
        await wait_for(
            pilot,
            lambda: len(inspector.walk_children(with_self=False)) > 10,
            "the inspector's widgets",
        )
        under = set(inspector.walk_children(with_self=False))
        restyled = restyled_nodes(app)
        await pilot.press("i")
        await wait_for(pilot, lambda: inspector.has_focus, "the inspector focused")
        await pilot.press("c")
        await wait_for(pilot, lambda: not inspector.has_focus, "the tree focused again")
        assert inspector in restyled
        assert not under & set(restyled)
        # What Textual's own restyle of the whole inspector gives, it had already.
        kept = styles_under(inspector)
        app.update_styles(inspector)
        assert styles_under(inspector) == kept


class Column(App):
    """A focusable column holding a line of text, with ``CSS`` of the test's choosing."""

    def __init__(self, css: str) -> None:
        self.CSS = css
        super().__init__()

    def compose(self) -> ComposeResult:
        with FocusVerticalScroll():
            yield Static("a line", id="line")
        yield Static("below", id="below")


async def test_a_rule_that_styles_by_the_container_s_focus_restyles_what_is_under_it():
    app = Column("FocusVerticalScroll:focus Static { color: red; }")
    async with app.run_test() as pilot:
        column, line = app.query_one(FocusVerticalScroll), app.query_one("#line")
        assert column.has_focus  # the app's first focusable widget
        assert line.styles.color == Color.parse("red")
        app.set_focus(None)
        await pilot.pause()
        assert line.styles.color != Color.parse("red")


async def test_without_such_a_rule_the_container_alone_is_restyled():
    app = Column("FocusVerticalScroll:focus { background: red; }")
    async with app.run_test() as pilot:
        column, line = app.query_one(FocusVerticalScroll), app.query_one("#line")
        app.set_focus(None)  # the app focused the column as it started
        await pilot.pause()
        restyled = restyled_nodes(app)
        column.focus()
        await pilot.pause()
        assert column.styles.background == Color.parse("red")
        assert column in restyled and line not in restyled
