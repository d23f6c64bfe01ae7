"""The keys every list and table shares (``keys.LIST``): j/k move, g/G jump to the ends.

``LineTable`` is the one for long tables: drawn line by line, it renders only the rows in
view, where a ``DataTable`` builds every row up front (20,000 parameters took ~23 s)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Size
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import DataTable, OptionList

from tvis.tui import keys


class ListTable(DataTable):
    """A DataTable that moves with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIST]

    def action_first_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=0)

    def action_last_row(self) -> None:
        if self.row_count:
            self.move_cursor(row=self.row_count - 1)


class ListOptions(OptionList):
    """An OptionList that moves with the list keys."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIST]

    def action_first_row(self) -> None:
        self.action_first()

    def action_last_row(self) -> None:
        self.action_last()


@dataclass(frozen=True)
class LineColumn:
    """A headed column of a ``LineTable``: numbers are right-aligned."""

    label: str
    right: bool = False


CACHED_LINES = 1024
"""Drawn lines a ``LineTable`` keeps: a few screens either way of the cursor."""


MISSING = "—"
"""A cell with no value (``fmt.num(None)``)."""


def without_empty_columns(
    columns: Sequence[LineColumn], rows: list[tuple[Text | str, ...]], kept: int
) -> tuple[tuple[LineColumn, ...], list[tuple[Text | str, ...]]]:
    """``columns`` and ``rows`` less each column after the first ``kept`` that has no value
    on any row: a regression's samples have no class and no p(target), and a column of
    dashes only pushes the loss away."""
    if not rows:
        return tuple(columns), rows
    shown = [
        i
        for i in range(len(columns))
        if i < kept or any(str(cells[i]).strip() != MISSING for cells in rows)
    ]
    return tuple(columns[i] for i in shown), [tuple(cells[i] for i in shown) for cells in rows]


def content_widths(
    columns: Sequence[LineColumn], rows: Sequence[Sequence[Text | str]]
) -> list[int]:
    """Each column as wide as its widest value or its title, as a ``DataTable`` sizes its
    columns: the widths stay put while the cursor moves."""
    widths = [len(c.label) for c in columns]
    for cells in rows:
        widths = [
            max(w, cell_len(v) if isinstance(v, str) else v.cell_len)
            for w, v in zip(widths, cells, strict=True)
        ]
    return widths


def fit_cell(value: Text | str, width: int, right: bool) -> Text:
    """``value`` in ``width`` cells with a cell of padding either side (as a DataTable pads),
    clipped with … when it is longer."""
    text = value.copy() if isinstance(value, Text) else Text(value)
    text.truncate(width, overflow="ellipsis")
    pad = " " * (width - text.cell_len)
    return Text(" ") + (Text(pad) + text if right else text + pad) + " "


def append_cell(line: Text, value: Text | str, width: int, right: bool) -> None:
    """``fit_cell`` appended to ``line``, without building a Text per cell when ``value``
    is a string or a Text of one style (a screenful of a sort's lines is ~200 cells)."""
    if isinstance(value, Text) and value.spans:
        line.append_text(fit_cell(value, width, right))
        return
    plain, style = (value.plain, value.style) if isinstance(value, Text) else (value, "")
    size = cell_len(plain)
    if size > width:
        plain = set_cell_size(plain, max(0, width - 1)) + "…" if width else ""
        size = width
    pad = " " * (width - size)
    if right:
        line.append(" " + pad)
        line.append(plain, style)
        line.append(" ")
    else:
        line.append(" ")
        line.append(plain, style)
        line.append(pad + " ")


class LineTable(ScrollView, can_focus=True):
    """A headed table drawn line by line: only the rows in view are ever rendered, so a
    table of 20,000 rows fills at once and a key repaints a screenful of cached lines.

    A subclass names its ``columns``, says how wide each is (``column_widths``) and what
    row ``i`` shows (``cells``), and calls ``set_rows`` when its rows change. The cursor is
    ``cursor_row``; moving it posts ``Highlighted``, enter posts ``Selected``."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIST]
    # pageup/pagedown/home/end come from ScrollableContainer's bindings, whose actions
    # (page_up, page_down, scroll_home, scroll_end) move the cursor here.

    COMPONENT_CLASSES: ClassVar[set[str]] = {"line-table--header", "line-table--cursor"}

    DEFAULT_CSS = """
    LineTable { background: $surface; color: $foreground; }
    LineTable > .line-table--header { text-style: bold; background: $panel; color: $foreground; }
    LineTable:ansi > .line-table--header { background: ansi_bright_blue; color: ansi_default; }
    LineTable > .line-table--cursor {
        background: $block-cursor-blurred-background;
        color: $block-cursor-blurred-foreground;
        text-style: $block-cursor-blurred-text-style;
    }
    LineTable:focus > .line-table--cursor {
        background: $block-cursor-background;
        color: $block-cursor-foreground;
        text-style: $block-cursor-text-style;
    }
    """

    HEADER = 1
    """Lines above the rows (the column titles), which stay put while the rows scroll."""

    columns: tuple[LineColumn, ...] = ()
    """The headed columns; a table whose columns change with its rows sets its own."""

    cursor_row: var[int] = var(0, init=False)
    """The row the cursor is on (0 when there are no rows)."""

    class RowMessage(Message):
        """Something happened at ``row`` of ``table``."""

        def __init__(self, table: LineTable, row: int) -> None:
            super().__init__()
            self.table = table
            self.row = row

        @property
        def control(self) -> LineTable:
            return self.table

    class Highlighted(RowMessage):
        """The cursor moved to ``row``."""

    class Selected(RowMessage):
        """Enter (or a click on the cursor's row) chose ``row``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.row_count = 0
        self._generation = 0  # which rows the cached lines show
        self._lines: LRUCache[tuple, Strip] = LRUCache(CACHED_LINES)

    # -- for subclasses -------------------------------------------------------------------

    def column_widths(self, width: int) -> list[int]:
        """Each column's content width (without its padding) when the table is ``width``
        cells wide."""
        return [len(c.label) for c in self.columns]

    def cells(self, row: int) -> Sequence[Text | str]:
        """What row ``row`` shows, one value per column."""
        raise NotImplementedError

    def set_rows(self, count: int, cursor: int | None = None) -> None:
        """The rows changed (there are ``count``): redraw them, with the cursor on
        ``cursor`` (kept where it was when None) without announcing a move."""
        self.row_count = count
        self._generation += 1
        row = self.cursor_row if cursor is None else cursor
        self.set_reactive(LineTable.cursor_row, self.validate_cursor_row(row))
        self._resize_virtual()
        self._scroll_to_cursor()
        self.refresh()

    # -- drawing --------------------------------------------------------------------------

    @property
    def content_width(self) -> int:
        """The columns the rows are drawn in: the width less the vertical scrollbar's, when
        the rows overflow the height (drawn the whole width, a line's last two cells were
        under it). Decided from the rows: the scrollbar's arrival sends no resize."""
        overflows = self.row_count + self.HEADER > self.size.height
        gutter = self.styles.scrollbar_size_vertical if overflows else 0
        return max(0, self.size.width - gutter)

    def _resize_virtual(self) -> None:
        total = sum(w + 2 for w in self.column_widths(self.content_width))
        self.virtual_size = Size(total, self.row_count + self.HEADER)

    def on_resize(self) -> None:
        # The lines drawn are kept by width: a table shown again at its size (every
        # widget shown gets a Resize) draws from them.
        self._resize_virtual()
        self._scroll_to_cursor()

    def render_line(self, y: int) -> Strip:
        width = self.content_width
        scroll_x, scroll_y = self.scroll_offset
        if y < self.HEADER:
            strip = self._header_line(width)
        else:
            index = scroll_y + y - self.HEADER
            strip = self._row_line(index, width) if index < self.row_count else Strip.blank(0)
        if scroll_x == 0 and strip.cell_length == width:
            return strip  # drawn at this width, the table's colours in it: as it is
        base = self.rich_style
        return strip.crop_extend(scroll_x, scroll_x + width, base).apply_style(base)

    def _header_line(self, width: int) -> Strip:
        key = ("header", self._generation, width)
        if key not in self._lines:
            text = Text()
            for column, w in zip(self.columns, self.column_widths(width), strict=True):
                append_cell(text, column.label, w, column.right)
            text.pad_right(width - text.cell_len)  # the title bar spans the table
            text.stylize(self.get_component_rich_style("line-table--header"))
            self._lines[key] = self._strip(text)
        return self._lines[key]

    def _row_line(self, index: int, width: int) -> Strip:
        selected = index == self.cursor_row
        key = (self._generation, index, width, selected, selected and self.has_focus)
        if key not in self._lines:
            text = Text()
            widths = self.column_widths(width)
            for column, w, cell in zip(self.columns, widths, self.cells(index), strict=True):
                append_cell(text, cell, w, column.right)
            text.pad_right(width - text.cell_len)  # the cursor's bar spans the table
            if selected:  # over the cells' own colours, as a DataTable's cursor is
                text.stylize(self.get_component_rich_style("line-table--cursor"))
            text.stylize(Style(meta={"row": index}))
            self._lines[key] = self._strip(text)
        return self._lines[key]

    def _strip(self, text: Text) -> Strip:
        """``text`` as a line, on the table's colours (a line's strip has none of its own)."""
        segments = [s for s in text.render(self.app.console) if s.text != "\n"]
        return Strip(segments or [Segment("")]).apply_style(self.rich_style)

    def on_focus(self) -> None:
        self.refresh()

    def on_blur(self) -> None:
        self.refresh()

    # -- moving ---------------------------------------------------------------------------

    def validate_cursor_row(self, row: int) -> int:
        return max(0, min(row, self.row_count - 1))

    def watch_cursor_row(self) -> None:
        self._scroll_to_cursor()
        self.refresh()
        if self.row_count:
            self.post_message(self.Highlighted(self, self.cursor_row))

    def move_cursor(self, row: int) -> None:
        self.cursor_row = row

    @property
    def page_rows(self) -> int:
        """Rows shown at once."""
        return max(1, self.size.height - self.HEADER)

    def _scroll_to_cursor(self) -> None:
        top = self.scroll_offset.y
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + self.page_rows:
            self.scroll_to(y=self.cursor_row - self.page_rows + 1, animate=False)

    def action_cursor_down(self) -> None:
        self.cursor_row += 1

    def action_cursor_up(self) -> None:
        self.cursor_row -= 1

    def action_first_row(self) -> None:
        self.cursor_row = 0

    def action_last_row(self) -> None:
        self.cursor_row = self.row_count - 1

    def action_page_down(self) -> None:
        self.cursor_row += self.page_rows

    def action_page_up(self) -> None:
        self.cursor_row -= self.page_rows

    def action_scroll_home(self) -> None:
        self.action_first_row()

    def action_scroll_end(self) -> None:
        self.action_last_row()

    def key_enter(self) -> None:
        if self.row_count:
            self.post_message(self.Selected(self, self.cursor_row))

    def on_click(self, event: events.Click) -> None:
        row = event.style.meta.get("row") if event.style else None
        if isinstance(row, int):
            if row == self.cursor_row:
                self.post_message(self.Selected(self, row))
            self.cursor_row = row
