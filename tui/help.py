"""The `?` / F1 screen: every key of the viewer, generated from the bindings (after the
user's keymap), so it never disagrees with what the keys do. The keys of what is on screen
come first — the focused pane's, then the rest of the page's — and every other scope after."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.css.styles import RulesMap
from textual.screen import ModalScreen, Screen
from textual.strip import Strip
from textual.style import Style
from textual.visual import RenderOptions, RichVisual, Visual
from textual.widget import Widget
from textual.widgets import Static

from tvis.tui import colors, keys

if TYPE_CHECKING:
    from textual import getters

    from tvis.tui.app import TvisApp


def effective_keys(binding: Binding, keymap: dict[str, str]) -> list[str]:
    """The keys that trigger ``binding`` once the user's keymap is applied."""
    spec = keymap.get(binding.id or "", binding.key)
    return [k.strip() for k in spec.split(",") if k.strip()]


def key_label(app, key: str) -> str:
    return app.get_key_display(Binding(key, ""))


def _binding_ids(widget: Widget) -> list[str]:
    ids = []
    for cls in type(widget).__mro__:
        for binding in cls.__dict__.get("BINDINGS", []):
            if isinstance(binding, Binding) and binding.id and binding.id not in ids:
                ids.append(binding.id)
    return ids


def ids_on_screen(screen: Screen) -> list[str]:
    """Binding ids of what ``screen`` shows: the focused widget and its ancestors first."""
    ids: list[str] = []
    focused = screen.focused
    chain = list(focused.ancestors_with_self) if focused is not None else [screen]
    shown = [w for w in screen.walk_children(Widget, with_self=False) if w.region]
    for widget in [*chain, *shown]:
        if isinstance(widget, Widget):
            ids += [i for i in _binding_ids(widget) if i not in ids]
    return ids


def ordered_scopes(first: list[str]) -> list[tuple[str, list[Binding], bool]]:
    """Every scope as ``(title, bindings, on_screen)``: on-screen scopes in the order their keys
    come in ``first``, then "Everywhere", then the others in table order."""
    rank = {id: i for i, id in enumerate(first)}
    scopes = [(title, scope) for title, scope in keys.SCOPES if title != "Everywhere"]
    here = [s for s in scopes if any(b.id in rank for b in s[1])]
    here.sort(key=lambda s: min(rank[b.id] for b in s[1] if b.id in rank))
    everywhere = [s for s in keys.SCOPES if s[0] == "Everywhere"]
    rest = [s for s in scopes if s not in here]
    return [(t, s, True) for t, s in here + everywhere] + [(t, s, False) for t, s in rest]


ID_COLUMN_FROM = 90
"""Widest help (in columns) that still gives each binding's id a column of its own; a
narrower one writes the id under its description, which then keeps room to be read."""


def help_table(
    app, keymap: dict[str, str], first: list[str] | None = None, width: int = 120
) -> Table:
    wide = width >= ID_COLUMN_FROM
    table = Table(box=None, show_header=False, pad_edge=False)
    # Narrow, a binding with many keys wraps them rather than squeezing every description.
    table.add_column(
        "keys", style="bold", no_wrap=wide, min_width=12, max_width=None if wide else 16
    )
    table.add_column("does", ratio=1)
    if wide:
        table.add_column("id", style=colors.MUTED, no_wrap=True)

    def add(keys_text, does, id_text) -> None:
        if wide:
            table.add_row(keys_text, does, id_text)
        elif id_text:
            cell = Text(does) if isinstance(does, str) else does.copy()
            cell.append(f"\n{id_text}", style=colors.MUTED)
            table.add_row(keys_text, cell)
        else:
            table.add_row(keys_text, does)

    elsewhere = False
    for title, scope, on_screen in ordered_scopes(first or []):
        if not on_screen and not elsewhere:
            elsewhere = True
            add(Text("Elsewhere", style=f"bold {colors.MUTED}"), "", "")
            add("", "", "")
        add(Text(title, style=f"bold {colors.PHASE['forward']}"), "", "")
        for binding in scope:
            if binding.id and binding.id.startswith("app.page"):
                if binding.id == "app.page1":  # the nine page keys read better as one row
                    add("1 … 9", "jump to the n-th page of the tab bar", "app.page1…9")
                continue
            shown = " ".join(key_label(app, k) for k in effective_keys(binding, keymap))
            add(shown, binding.description, binding.id or "")
        add("", "", "")
    return table


class DrawnOnce(Visual):
    """A Rich renderable drawn to strips once per width and style and then kept.

    The help's table is ~170 rows; Rich lays it out afresh for every measure and every
    frame of a Static (its height, then each repaint: seven times a `?`, ~30 ms each)."""

    def __init__(self, widget: Widget, renderable: Table) -> None:
        self._widget = widget
        self._rich = RichVisual(widget, renderable)
        self._strips: tuple[tuple[int, object], list[Strip]] | None = None  # the last drawing

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return self._rich.get_optimal_width(rules, container_width)

    def get_height(self, rules: RulesMap, width: int) -> int:
        options = RenderOptions(self._widget._get_style, rules)
        return len(self._drawn(width, self._widget.visual_style, options))

    def render_strips(
        self, width: int, height: int | None, style: Style, options: RenderOptions
    ) -> list[Strip]:
        return self._drawn(width, style, options)[:height]

    def _drawn(self, width: int, style: Style, options: RenderOptions) -> list[Strip]:
        # Drawn at the widget's style both to measure and to paint: one drawing serves both.
        key = (width, style.rich_style)
        if self._strips is None or self._strips[0] != key:
            self._strips = (key, self._rich.render_strips(width, None, style, options))
        return self._strips[1]


TABLES_KEPT = 16
"""Help tables kept drawn (one per page and focus a user asked help on, at one width)."""


class HelpScreen(ModalScreen[None]):
    """Every key, the ones of what is on screen first. The app builds it once and shows it
    again on each `?` (`show`), with the table drawn once per set of keys on screen."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.HELP]

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    HelpScreen > VerticalScroll { width: 90%; max-width: 110; height: 90%; scrollbar-gutter: stable; border: round $accent; padding: 0 1; background: $surface; }
    """

    def __init__(self, first: list[str] | None = None) -> None:
        super().__init__()
        self.first = first or []
        self._tables: dict[tuple, DrawnOnce] = {}

    def show(self, first: list[str]) -> HelpScreen:
        """Itself, about to be shown again over a screen whose keys are ``first``."""
        self.first = first
        if self.is_mounted:
            self.query_one(VerticalScroll).scroll_home(animate=False)
            self._fill()
        return self

    def compose(self) -> ComposeResult:
        with VerticalScroll():
            yield Static(
                Text("Keys — remap any of them by id in " + str(keys.keymap_path()), style="bold")
            )
            yield Static(id="help-table")
            yield Static(Text(f"{keys.shown(self.app, 'help.close')} closes", style=colors.MUTED))

    def on_resize(self) -> None:
        self._fill()

    def _fill(self) -> None:
        width = self.query_one(VerticalScroll).content_region.width or self.app.size.width
        key = (tuple(self.first), width >= ID_COLUMN_FROM, tuple(self.app.keymap.items()))
        if key not in self._tables:
            if len(self._tables) >= TABLES_KEPT:
                del self._tables[next(iter(self._tables))]
            table = help_table(self.app, self.app.keymap, self.first, width)
            self._tables[key] = DrawnOnce(self.query_one("#help-table", Static), table)
        shown = self.query_one("#help-table", Static)
        if shown.visual is not self._tables[key]:
            shown.update(self._tables[key])

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)
