"""The `?` / F1 screen: every key of the viewer, generated from the bindings (after the
user's keymap), so it never disagrees with what the keys do. The keys of what is on screen
come first — the focused pane's, then the rest of the page's — and every other scope after."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, ClassVar, cast

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

KEYS_COLUMN = (12, 16)
"""The keys column's least width, and its most where the help is narrow (then a binding with
many keys wraps them rather than squeezing every description)."""

Row = tuple["Text | str", "Text | str", str]
"""One line of the help: keys, what they do, the binding's id."""


def scope_rows(app, keymap: dict[str, str], title: str, scope: list[Binding]) -> list[Row]:
    """A scope's lines: its title, a line per binding, a blank line."""
    rows: list[Row] = [(Text(title, style=f"bold {colors.PHASE['forward']}"), "", "")]
    for binding in scope:
        if binding.id and binding.id.startswith("app.page"):
            if binding.id == "app.page1":  # the nine page keys read better as one row
                rows.append(("1 … 9", "jump to the n-th page of the tab bar", "app.page1…9"))
            continue
        shown = " ".join(key_label(app, k) for k in effective_keys(binding, keymap))
        rows.append((shown, binding.description, binding.id or ""))
    rows.append(("", "", ""))
    return rows


ELSEWHERE = "Elsewhere"
"""The section that heads the scopes of what is not on screen."""


def elsewhere_rows() -> list[Row]:
    return [(Text(ELSEWHERE, style=f"bold {colors.MUTED}"), "", ""), ("", "", "")]


def section_order(first: list[str]) -> list[str]:
    """The help's sections, by title, for a screen whose keys are ``first``: the scopes on
    screen, "Everywhere", "Elsewhere", then the other scopes."""
    order: list[str] = []
    for title, _, on_screen in ordered_scopes(first):
        if not on_screen and ELSEWHERE not in order:
            order.append(ELSEWHERE)
        order.append(title)
    return order


def all_sections(app, keymap: dict[str, str]) -> dict[str, list[Row]]:
    """Every section's lines, by title (the order is each screen's, ``section_order``)."""
    sections = {title: scope_rows(app, keymap, title, scope) for title, scope in keys.SCOPES}
    sections[ELSEWHERE] = elsewhere_rows()
    return sections


def column_widths(sections: dict[str, list[Row]], wide: bool) -> tuple[int, int]:
    """The keys and id columns' widths, over every section: drawn apart, the sections still
    line up as one table."""
    rows = [row for lines in sections.values() for row in lines]
    least, most = KEYS_COLUMN
    keys_width = max(
        max(Text(r[0]).cell_len if isinstance(r[0], str) else r[0].cell_len for r in rows), least
    )
    if not wide:
        keys_width = min(keys_width, most)
    return keys_width, max(Text(r[2]).cell_len for r in rows)


def section_table(rows: list[Row], widths: tuple[int, int], wide: bool) -> Table:
    """A section's lines as a table with the columns every section shares."""
    keys_width, id_width = widths
    # Expanded: the descriptions fill the width whatever a section holds, so the ids line up.
    table = Table(box=None, show_header=False, pad_edge=False, expand=True)
    table.add_column("keys", style="bold", no_wrap=wide, width=keys_width)
    table.add_column("does", ratio=1)
    if wide:
        table.add_column("id", style=colors.MUTED, no_wrap=True, width=id_width)
    for keys_text, does, id_text in rows:
        if wide:
            table.add_row(keys_text, does, id_text)
        elif id_text:
            cell = Text(does) if isinstance(does, str) else does.copy()
            cell.append(f"\n{id_text}", style=colors.MUTED)
            table.add_row(keys_text, cell)
        else:
            table.add_row(keys_text, does)
    return table


def help_table(
    app, keymap: dict[str, str], first: list[str] | None = None, width: int = 120
) -> Table:
    """The whole help as one table (what the screen shows, drawn section by section)."""
    wide = width >= ID_COLUMN_FROM
    sections = all_sections(app, keymap)
    rows = [row for title in section_order(first or []) for row in sections[title]]
    return section_table(rows, column_widths(sections, wide), wide)


WIDTHS_KEPT = 2
"""Widths (and styles) a help's sections are kept drawn at."""


class HelpDrawing:
    """Every section of the help drawn to strips once per width and style, and kept: the
    help of any page is its sections' strips in that page's order, so a page's first `?`
    draws nothing another page's `?` (or a quiet spell, ``draw_ahead``) has drawn. Rich laid
    the whole ~170-line table out afresh for every page (~55 ms)."""

    def __init__(self, app, keymap: dict[str, str], wide: bool) -> None:
        self.sections = all_sections(app, keymap)
        self.widths = column_widths(self.sections, wide)
        self.wide = wide
        # (width, style) -> section title -> its strips; the last WIDTHS_KEPT widths and
        # styles (a help measured at one width and painted at another draws both once).
        self._drawn: dict[tuple[int, object], dict[str, list[Strip]]] = {}
        self.draws = 0  # sections drawn, for tests

    def strips(
        self, title: str, widget: Widget, width: int, style: Style, options: RenderOptions
    ) -> list[Strip]:
        at = (width, style.rich_style)
        if at not in self._drawn:
            if len(self._drawn) >= WIDTHS_KEPT:
                del self._drawn[next(iter(self._drawn))]
            self._drawn[at] = {}
        drawn = self._drawn[at]
        strips = drawn.get(title)
        if strips is None:
            table = section_table(self.sections[title], self.widths, self.wide)
            strips = RichVisual(widget, table).render_strips(width, None, style, options)
            drawn[title] = strips
            self.draws += 1
        return strips

    def undrawn(self, width: int, style: Style) -> str | None:
        """A section not drawn yet at ``width`` and ``style`` (None: all are)."""
        drawn = self._drawn.get((width, style.rich_style), {})
        return next((t for t in self.sections if t not in drawn), None)


class HelpSections(Visual):
    """The help of one screen: its sections' strips, drawn once (``HelpDrawing``), in order."""

    def __init__(self, widget: Widget, drawing: HelpDrawing, order: list[str]) -> None:
        self._widget = widget
        self.drawing = drawing
        self.order = order

    def get_optimal_width(self, rules: RulesMap, container_width: int) -> int:
        return container_width

    def get_height(self, rules: RulesMap, width: int) -> int:
        options = RenderOptions(self._widget._get_style, rules)
        return len(self._lines(width, self._widget.visual_style, options))

    def render_strips(
        self, width: int, height: int | None, style: Style, options: RenderOptions
    ) -> list[Strip]:
        return self._lines(width, style, options)[:height]

    def _lines(self, width: int, style: Style, options: RenderOptions) -> list[Strip]:
        # Drawn at the widget's style both to measure and to paint: one drawing serves both.
        draw = self.drawing.strips
        return [s for title in self.order for s in draw(title, self._widget, width, style, options)]


AHEAD_SLICE_S = 0.008
"""How long one quiet-spell slice of the help's drawing may run (a section is 2–5 ms): a key
pressed meanwhile waits no longer than that."""

ARRANGE_LAYOUTS = 3
"""Layouts at most of the help arranged ahead for a page (``HelpScreen.arrange_ahead``): its
cascade settles in two; a widget that kept asking would otherwise hold the quiet spells."""


class HelpScreen(ModalScreen[None]):
    """Every key, the ones of what is on screen first. The app builds it once — in a quiet
    spell, hidden (``TvisApp.help_ahead``), or on the first `?` — and shows it again on each
    `?` (`show`), its sections drawn once for every page (``HelpDrawing``)."""

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
        self._drawings: dict[bool, HelpDrawing] = {}  # wide or not -> its sections drawn
        self._keymap: tuple = ()  # the keymap they were drawn with
        self._showing = False  # shown (or about to be), not only mounted ahead
        self._layouts_ahead = 0  # layouts of the order arranged ahead (``arrange_ahead``)

    def show(self, first: list[str]) -> HelpScreen:
        """Itself, about to be shown again over a screen whose keys are ``first``."""
        self.first = first
        self._showing = True
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
        if self._showing:  # mounted ahead, hidden: nothing is drawn until a quiet spell
            self._fill()

    def on_screen_suspend(self) -> None:
        self._showing = False

    def drawing(self) -> HelpDrawing:
        """The sections drawn for the help's width (afresh once the keymap changed)."""
        width = self.query_one(VerticalScroll).content_region.width or self.app.size.width
        keymap = tuple(self.app.keymap.items())
        if keymap != self._keymap:
            self._drawings, self._keymap = {}, keymap
        wide = width >= ID_COLUMN_FROM
        if wide not in self._drawings:
            self._drawings[wide] = HelpDrawing(self.app, self.app.keymap, wide)
        return self._drawings[wide]

    def draw_ahead(self) -> bool:
        """Draw one section not drawn yet, at the width and style the help will show it
        (the screen is mounted hidden and laid out, ``TvisApp.help_ahead``): a slice of a
        quiet spell, so that no `?` draws. False once every section is drawn."""
        table = self.query_one("#help-table", Static)
        width = table.content_region.width
        if not width:
            return False
        drawing = self.drawing()
        style = table.visual_style
        options = RenderOptions(table._get_style, cast(RulesMap, table.styles))  # as Textual does
        start = time.thread_time()
        title = drawing.undrawn(width, style)
        if title is None:
            return False
        while title is not None and time.thread_time() - start < AHEAD_SLICE_S:
            drawing.strips(title, table, width, style, options)
            title = drawing.undrawn(width, style)
        return True

    def arrange_ahead(self, first: list[str]) -> bool:
        """Stack the sections in the order of the page on screen (``first``: its keys) and
        lay them out, hidden, a slice at a time until the layout asks for nothing more:
        a `?` there then shows what is laid out, in one frame (its layout had cascaded
        under the key: the table's height, then the scroll bars', three frames). False
        once it is."""
        table = self.query_one("#help-table", Static)
        visual = table.visual
        arranged = isinstance(visual, HelpSections) and visual.order == section_order(first)
        if arranged and (not self._layout_required or self._layouts_ahead >= ARRANGE_LAYOUTS):
            return False
        if not arranged:
            self.first = first
            self._fill()
            self._layouts_ahead = 0
        self._layouts_ahead += 1
        self._refresh_layout(self.app.size)
        self._layout_required = False  # a hidden screen's update timer never lays it out
        return True

    def _fill(self) -> None:
        shown = self.query_one("#help-table", Static)
        order = section_order(self.first)
        drawing = self.drawing()
        visual = shown.visual
        if not (
            isinstance(visual, HelpSections) and visual.drawing is drawing and visual.order == order
        ):
            shown.update(HelpSections(shown, drawing, order))

    def action_scroll(self, lines: int) -> None:
        self.query_one(VerticalScroll).scroll_relative(y=lines, animate=False)
