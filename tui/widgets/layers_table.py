"""Every module and function call of the batch as one sortable row: output shape, σ,
mean |x|, % zeros, ‖grad‖, forward and ≈backward time, and the warning flags. Calls of the
data pipeline are left to the tree: this table is about the model's layers.

A line-API scroll view over the agent's ``layers``: the agent sorts (once per order, kept
with the batch) and the table asks for the pages of rows that come into view, so a model
with 20,000 layers paints its first screen after one small reply, and a sort is one more.
A row's cells are laid out once per order and width (plain segments, most cells one
string and one style, no Rich layout); the cursor and focus only restyle those segments, so
moving the cursor or focusing the table builds no row again. Each drawn line is kept in an
LRU cache until its row, the cursor or the width changes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.containers import Vertical
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widget import Widget

from tvis.store import schema
from tvis.tui import colors, fmt, keys, marks
from tvis.tui.messages import GotoCall, Selected, Selection
from tvis.tui.pane import AgentPane

PAGE = 200
"""Rows per request: several screens of the tallest terminal, a few kB over ssh."""

CACHED_LINES = 1024
"""Drawn lines kept: a few screens either way of the cursor at any width."""

HEADER = 1
"""Lines above the rows (the column titles), which stay put while the rows scroll."""


def page_request(
    run: str | None, batch: int | None, sort: str | None, desc: bool, page: int
) -> dict[str, Any]:
    """The ``layers`` parameters of rows page ``page`` in one order: the table's own, and
    the first screen's prefetch (``TvisApp._prefetch_first_screen``), which must match them
    for the table to find its first page in the client's cache."""
    return {
        "run": run,
        "batch": batch,
        "sort": sort,
        "desc": desc,
        "offset": page * PAGE,
        "limit": PAGE,
        "skip_data": True,
    }


def locate_request(params: dict[str, Any], call: int) -> dict[str, Any]:
    """Where ``call``'s row is in the order of page ``params``, without rows."""
    return params | {"limit": 0, "locate": call}


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    sort: str | None
    width: int  # 0: takes what the others leave (at least NAME_MIN)
    right: bool
    render: Callable[[dict[str, Any]], Text | str]


NAME_MIN = 16


def _flags(row: dict[str, Any]) -> Text:
    text = Text()
    for m in marks.of_row(row):
        text.append(f"{m.symbol} {m.label} ", style=m.color)
    return text


def _zeros(row: dict[str, Any]) -> Text:
    z = row.get("zeros")
    return Text(fmt.pct(z), style=colors.WARN if z is not None and z > schema.DEAD_ZEROS else "")


def _grad(row: dict[str, Any]) -> Text:
    g = row.get("grad_norm")
    return Text(
        fmt.num(g), style=colors.WARN if g is not None and g < schema.VANISHING_GRAD else ""
    )


COLUMNS = [
    Column("order", "#", "order", 6, True, lambda r: Text(str(r.get("layer", "")), colors.MUTED)),
    Column("name", "name", "name", 0, False, lambda r: fmt.call_name(r)),
    Column(
        "cls",
        "class",
        "cls",
        14,
        False,
        lambda r: Text(r.get("cls") or r.get("kind") or "", colors.MUTED),
    ),
    Column("shape", "output", "out_numel", 13, True, lambda r: fmt.shape(r.get("out_shape"))),
    Column("std", "σ", "std", 9, True, lambda r: fmt.num(r.get("std"))),
    Column("absmean", "mean|x|", "absmean", 9, True, lambda r: fmt.num(r.get("absmean"))),
    Column("zeros", "zeros", "zeros", 7, True, _zeros),
    Column("grad", "‖grad‖", "grad_norm", 9, True, _grad),
    Column(
        "fwd",
        "fwd",
        "fwd_ms",
        9,
        True,
        lambda r: Text(fmt.ms(r.get("fwd_ms")), colors.PHASE["forward"]),
    ),
    Column(
        "bwd",
        "≈bwd",
        "bwd_ms",
        9,
        True,
        lambda r: Text(fmt.ms(r.get("bwd_ms")), colors.PHASE["backward"]),
    ),
    Column("flags", "flags", None, 20, False, _flags),
]

SORTABLE = [c for c in COLUMNS if c.sort]

BY_KEY = {c.key: c for c in COLUMNS}

PRIORITY = ("order", "flags", "shape", "cls", "std", "grad", "zeros", "absmean", "fwd", "bwd")
"""Which columns stay when the pane is narrow, most wanted first (the name always stays):
the warnings, what the output is and what made it (a name such as ``features.0.0`` does
not say Conv2d), then how it and its gradient behave."""


def _cell(value: Text | str, width: int, right: bool) -> Text:
    """``value`` fitted to ``width`` cells (clipped with …, padded on the side away from it)."""
    text = value if isinstance(value, Text) else Text(value)
    text = text.copy()
    text.truncate(width - 1, overflow="ellipsis")
    pad = " " * (width - 1 - text.cell_len)
    return Text(pad) + text + " " if right else text + pad + " "


def _cell_segments(
    value: Text | str, width: int, right: bool, style_of: Callable[[str | Style], Style]
) -> list[Segment] | None:
    """What ``_cell`` draws, as segments, for a cell of one style (every cell but the flags);
    None for a cell of several styles, which Rich lays out."""
    if isinstance(value, Text):
        if value.spans:
            return None
        plain, style = value.plain, (style_of(value.style) if value.style else None)
    else:
        plain, style = value, None
    room = width - 1
    if cell_len(plain) > room:
        plain = set_cell_size(plain, room - 1) + "…"
    pad = " " * (room - cell_len(plain))
    if not right:  # as Rich draws it: the padding takes the text's style
        return [Segment(plain + pad + " ", style)]
    return [Segment(pad), Segment(plain, style), Segment(" ")] if plain else [Segment(pad + " ")]


class LayersTable(AgentPane, ScrollView, can_focus=True):
    """The layers table of one batch; ``o``/``O`` or a click on a title sorts."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIST, *keys.LAYERS]

    COMPONENT_CLASSES = {"layers-table--header", "layers-table--cursor"}

    DEFAULT_CSS = """
    LayersTable { background: $surface; }
    LayersTable > .layers-table--header { text-style: bold; background: $panel; }
    LayersTable > .layers-table--cursor { background: $accent 30%; }
    LayersTable:focus > .layers-table--cursor { background: $accent 60%; }
    """

    class Filled(Message):
        """The table holds a new order of rows."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.sort_column = SORTABLE[0]
        self.desc = False
        self.batch_index: int | None = None
        self.row_count = 0
        self.hidden_data_calls = 0
        self.cursor = 0
        self.follow: int | None = None
        self.pages: dict[int, list[dict[str, Any]]] = {}
        self._asked: set[int] = set()
        self._located: int | None = None  # the followed call's row (-1: it has none)
        self._placed = False  # whether the cursor has been put on it in this order
        self._order = 0  # which order of rows the pages belong to
        self._lines: LRUCache[tuple, Strip] = LRUCache(CACHED_LINES)
        self._rows: LRUCache[tuple, list[Segment]] = LRUCache(CACHED_LINES)
        self._styles: dict[str | Style, Style] = {}
        self.rows_built = 0  # rows laid out: once per order and width, however often drawn

    # -- what to show ---------------------------------------------------------------------

    def load(self, batch: int) -> None:
        """Show ``batch`` in the current sort order, on the followed call's row."""
        self.batch_index = batch
        self._reorder()

    def _reorder(self) -> None:
        self._order += 1
        self.pages.clear()
        self._asked.clear()
        self._located = None
        self._placed = False
        self._ask_page(0)  # answered before this returns when the page is at hand
        if self.follow is not None and not self._placed:
            # Asked beside page 0, not inside it: page 0 of an order is then one request
            # whichever call is followed, answered from the cache after the first time.
            self.ask(
                "layers",
                tag=f"{self._order}:locate",
                **locate_request(self._page_params(0), self.follow),
            )

    def _ask_page(self, page: int) -> None:
        if self.batch_index is None or page in self._asked:
            return
        self._asked.add(page)
        self.ask(
            "layers",
            tag=f"{self._order}:{page}",
            **self._page_params(page),
        )

    def _page_params(self, page: int) -> dict[str, Any]:
        return page_request(
            self.app.run_name, self.batch_index, self.sort_column.sort, self.desc, page
        )

    def answered(self, tag: str, result: dict[str, Any]) -> None:
        order, what = tag.split(":")
        if int(order) != self._order:
            return
        if what == "locate":
            located = result.get("located")
            self._located = -1 if located is None else located  # -1: it is not a row here
            if located is not None:
                self._ask_page(located // PAGE)
        else:
            page = int(what)
            self.pages[page] = result.get("rows") or []
            if page == 0:
                self.row_count = result.get("total") or 0
                self.hidden_data_calls = result.get("hidden") or 0
                self.virtual_size = Size(
                    self._total_width(self.size.width), self.row_count + HEADER
                )
                self.post_message(self.Filled())
        if 0 in self.pages:
            self._place_cursor()
        self.refresh()

    def _place_cursor(self) -> None:
        """On the followed call's row once it is known where it is: on page 0 at once, else
        when the agent's answer to ``locate`` comes. Once per order: then it is the user's."""
        if self._placed:
            return
        if self.follow is None:
            self.cursor = 0
        elif self._located is not None:
            self.cursor = max(0, self._located)
        else:
            ids = [r.get("id") for r in self.pages[0]]
            if self.follow not in ids:
                return  # the agent is still looking
            self.cursor = ids.index(self.follow)
        self._placed = True
        self._scroll_to_cursor()

    def failed(self, tag: str, message: str) -> None:
        self.row_count, self.pages = 0, {}
        self.refresh()
        self.notify(message, severity="error", timeout=5)

    def row(self, index: int) -> dict[str, Any] | None:
        """Row ``index`` in the shown order, if its page has arrived."""
        rows = self.pages.get(index // PAGE)
        return rows[index % PAGE] if rows is not None and index % PAGE < len(rows) else None

    def show_call(self, call: int | None) -> None:
        """Put the cursor on ``call``'s row (the call selected elsewhere)."""
        self.follow = call
        if call is None or self.has_focus or self.batch_index is None:
            return
        for page, rows in self.pages.items():
            for i, row in enumerate(rows):
                if row.get("id") == call:
                    self._move(page * PAGE + i, announce=False)
                    return
        self._reorder()  # not on a page we hold: the agent says where it is

    # -- drawing --------------------------------------------------------------------------

    def _columns(self, width: int) -> list[tuple[Column, int]]:
        """The columns that fit in ``width``, whole, each with its width: a column cut at the
        edge would show ``0.0`` for ``0.03``. Which go first is PRIORITY's order."""
        shown: list[str] = []
        used = NAME_MIN
        for key in PRIORITY:
            column = BY_KEY[key]
            if column.width and used + column.width <= width:
                shown.append(key)
                used += column.width
        shown.append("name")
        spare = max(0, width - used)
        return [(c, c.width or NAME_MIN + spare) for c in COLUMNS if c.key in shown]

    def _total_width(self, width: int) -> int:
        return sum(w for _, w in self._columns(width))

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        # Textual's (private), called by the layout as it sizes the table: its virtual
        # width (its columns') follows its width in that layout, which scrolls and draws
        # with it. Set at the Resize after, it cost another layout and frame.
        wide = Size(self._total_width(size.width), self.row_count + HEADER)
        self.set_reactive(LayersTable.virtual_size, wide)
        return super()._size_updated(size, wide, container_size, layout)

    def render_line(self, y: int) -> Strip:
        width = self.size.width
        scroll_x, scroll_y = self.scroll_offset
        if y < HEADER:
            strip = self._header(width)
        else:
            index = scroll_y + y - HEADER
            strip = self._row_line(index, width) if index < self.row_count else Strip.blank(0)
        return strip.crop_extend(scroll_x, scroll_x + width, Style())

    def _header(self, width: int) -> Strip:
        key = ("header", width, self.sort_column.key, self.desc)
        if key not in self._lines:
            style = self.get_component_rich_style("layers-table--header")
            text = Text(style=style)
            for column, w in self._columns(width):
                label = column.label
                if column is self.sort_column and column.sort != "order":
                    label += " ▼" if self.desc else " ▲"
                click = Style(meta={"@click": f"sort_key('{column.key}')"}) if column.sort else None
                text.append_text(_cell(Text(label, style=click or ""), w, column.right))
            self._lines[key] = self._strip(text)
        return self._lines[key]

    def _row_line(self, index: int, width: int) -> Strip:
        row = self.row(index)
        if row is None:
            self.call_later(self._ask_page, index // PAGE)  # not from inside a paint
            return self._strip(Text("  …", style=colors.MUTED))
        selected = index == self.cursor
        key = (self._order, index, width, selected, self.has_focus)
        if key not in self._lines:
            style = Style(meta={"row": index})
            if selected:
                style = self.get_component_rich_style("layers-table--cursor") + style
            segments = Segment.apply_style(self._row_segments(index, row, width), post_style=style)
            self._lines[key] = Strip(segments)
        return self._lines[key]

    def _row_segments(self, index: int, row: dict[str, Any], width: int) -> list[Segment]:
        """Row ``index``'s cells, unstyled by the cursor: laid out once per order and width."""
        key = (self._order, index, width)
        segments = self._rows.get(key)
        if segments is None:
            segments = []
            for column, w in self._columns(width):
                value = column.render(row)
                cell = _cell_segments(value, w, column.right, self._style)
                if cell is None:
                    text = _cell(value, w, column.right)
                    cell = [s for s in text.render(self.app.console) if s.text != "\n"]
                segments.extend(cell)
            self._rows[key] = segments
            self.rows_built += 1
        return segments

    def _style(self, name: str | Style) -> Style:
        style = self._styles.get(name)
        if style is None:
            style = self._styles[name] = self.app.console.get_style(name)
        return style

    def _strip(self, text: Text) -> Strip:
        segments = [s for s in text.render(self.app.console) if s.text != "\n"]
        return Strip(segments or [Segment("")])

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- moving ---------------------------------------------------------------------------

    def _move(self, index: int, announce: bool = True) -> None:
        if not self.row_count:
            return
        self.cursor = max(0, min(index, self.row_count - 1))
        self._scroll_to_cursor()
        self.refresh()
        row = self.row(self.cursor)
        if announce and row is not None and self.has_focus:
            self.follow = row["id"]
            self.post_message(
                Selected(Selection("call", batch=self.batch_index, call=row["id"], row=row))
            )

    def _scroll_to_cursor(self) -> None:
        # Forced: the table shows no scroll bar (its CSS bases are AgentPane's, not
        # ScrollView's, so its overflow is hidden), and Textual scrolls such a widget only
        # when told to; a cursor moved below the last row shown stayed out of view. At
        # once, in the move's frame (Textual's default waits for the next refresh).
        rows_shown = max(1, self.size.height - HEADER)
        top = self.scroll_offset.y
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True, force=True)
        elif self.cursor >= top + rows_shown:
            y = self.cursor - rows_shown + 1
            self.scroll_to(y=y, animate=False, immediate=True, force=True)

    def action_cursor_down(self) -> None:
        self._move(self.cursor + 1)

    def action_cursor_up(self) -> None:
        self._move(self.cursor - 1)

    def action_first_row(self) -> None:
        self._move(0)

    def action_last_row(self) -> None:
        self._move(self.row_count - 1)

    def action_page_down(self) -> None:
        self._move(self.cursor + max(1, self.size.height - HEADER))

    def action_page_up(self) -> None:
        self._move(self.cursor - max(1, self.size.height - HEADER))

    def action_select(self) -> None:
        row = self.row(self.cursor)
        if row is not None:
            self.post_message(GotoCall(row["id"], batch=self.batch_index))

    def on_click(self, event: events.Click) -> None:
        index = event.style.meta.get("row") if event.style else None
        if isinstance(index, int):
            self._move(index)

    # -- sorting --------------------------------------------------------------------------

    def sort_by(self, column: Column, desc: bool | None = None) -> None:
        if desc is None:
            desc = (
                not self.desc
                if column is self.sort_column
                else column.sort not in ("order", "name", "cls")
            )
        self.sort_column, self.desc = column, desc
        row = self.row(self.cursor)
        if row is not None:
            self.follow = row["id"]  # the cursor stays on its call in the new order
        self._reorder()

    def action_sort_next(self) -> None:
        i = SORTABLE.index(self.sort_column)
        self.sort_by(SORTABLE[(i + 1) % len(SORTABLE)])

    def action_sort_reverse(self) -> None:
        self.sort_by(self.sort_column, not self.desc)

    def action_sort_key(self, key: str) -> None:
        column = next((c for c in SORTABLE if c.key == key), None)
        if column is not None:
            self.sort_by(column)


class Caption(Widget):
    """One line of text. A new text repaints the line and lays nothing out (a ``Static``'s
    update lays out the whole screen: one of three layouts of the table's first paint)."""

    DEFAULT_CSS = "Caption { height: 1; }"

    text: reactive[Text] = reactive(Text, layout=False)

    def render(self) -> Text:
        return self.text


class LayersPane(Vertical):
    """The Layers pane: a caption saying what the table holds, then the table."""

    DEFAULT_CSS = """
    LayersPane #layers-caption { color: $text-muted; }
    LayersPane LayersTable { height: 1fr; }
    """

    def compose(self) -> ComposeResult:
        yield Caption(id="layers-caption")
        yield LayersTable()

    @on(LayersTable.Filled)
    def _filled(self, event: LayersTable.Filled) -> None:
        table = self.query_one(LayersTable)
        order = (
            "call order"
            if table.sort_column.sort == "order"
            else (f"{table.sort_column.label} {'▼' if table.desc else '▲'}")
        )
        sort_keys = (
            f"{keys.shown(self.app, 'layers.sort')} / {keys.shown(self.app, 'layers.reverse')}"
        )
        # One line that ends in … where the pane is narrower, never a word cut off.
        text = Text(f"{table.row_count} layers · {order} · {sort_keys} sort", no_wrap=True)
        text.overflow = "ellipsis"
        if table.hidden_data_calls:
            text.append(f" · {table.hidden_data_calls} data calls: in the tree", colors.MUTED)
        self.query_one("#layers-caption", Caption).text = text
