"""The tab bar: the pages that exist for what is open, each with its number key, and on the
right the main keys of the focused pane (as lazygit and nvitop show them), read from the
bindings after the user's keymap."""

from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual.binding import Binding
from textual.widget import Widget
from textual.widgets import Static

from tvis.tui import keys

HINTS = 4
"""Keys hinted for the focused pane: its main moves, few enough to leave room for the tabs."""


def _pane_bindings(widget: Widget | None) -> list[Binding]:
    """The focused widget's own bindings with ids, in table order (nearest class first)."""
    found: list[Binding] = []
    if widget is None:
        return found
    for cls in type(widget).__mro__:
        for binding in cls.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding) and binding.id and binding not in found:
                found.append(binding)
    return found


def key_hints(app, widget: Widget | None, room: int) -> str:
    """``"j down · k up · ? keys"``: the focused pane's first keys that fit in ``room``
    columns, then help and the palette."""
    pane = [
        f"{keys.shown(app, b.id or '')} {b.description.lower()}"
        for b in _pane_bindings(widget)[:HINTS]
    ]
    always = [f"{keys.shown(app, 'app.help')} keys", f"{keys.shown(app, 'app.palette')} palette"]
    while pane and len(" · ".join(pane + always)) > room:
        pane.pop()
    return " · ".join(pane + always)


class PageTabs(Static):
    """``1 Explore  2 Live`` with the current page highlighted; click or press the number."""

    DEFAULT_CSS = """
    PageTabs { dock: top; height: 1; background: $panel; padding: 0 1; }
    """

    def __init__(self, titles: list[str] | None = None, current: int | None = None) -> None:
        super().__init__()
        self.titles: list[str] = list(titles or [])
        self.current = current
        self._shown: Text | None = None  # the line drawn last

    def on_mount(self) -> None:
        self.watch(self.screen, "focused", self._redraw, init=False)

    def on_resize(self) -> None:
        self._redraw()

    def show(self, titles: list[str], current: int | None) -> None:
        self.titles, self.current = titles, current
        self._redraw()

    def _redraw(self, *_: object) -> None:
        text = Text()
        for i, title in enumerate(self.titles):
            style = Style(
                reverse=i == self.current,
                bold=i == self.current,
                meta={"@click": f"app.page({i + 1})"},
            )
            text.append(f" {i + 1} {title} ", style=style)
            text.append(" ")
        room = self.size.width - 2 - text.cell_len - 1
        hints = key_hints(self.app, self.screen.focused, room)
        if len(hints) <= room:
            text.append(" " * (room + 1 - len(hints)) + hints, style="dim")
        if text == self._shown:
            # Each visit shows the tabs again; a page built ahead has them drawn already,
            # and an update asked for a layout of the whole page under the key.
            return
        self._shown = text
        self.update(text, layout=False)  # one docked row whatever it says: a repaint
