"""The left pane of Explore: the call tree, a `/` search over every call of the batch, and a
filter that lists the calls of one kind. Search and filter results are a flat list; picking
one reveals the call in the tree."""

from __future__ import annotations

from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from tvis.tui import colors, fmt, keys, marks
from tvis.tui.messages import GotoCall, Selected, Selection
from tvis.tui.pane import Asks
from tvis.tui.widgets.call_tree import KIND_GLYPH, CallTree
from tvis.tui.widgets.lists import ListOptions
from tvis.tui.widgets.search_box import SearchBox

SEARCH_DEBOUNCE_S = 0.15
"""Typing pauses shorter than this are one query: a search per keystroke would queue
requests behind each other over ssh."""

HITS = 200
"""Search results shown; a query matching more is too broad to browse anyway."""

FILTER_HITS = 5000
"""Calls a filter lists at most (the agent's largest page): every loss or function call of
a batch, the first 5,000 modules of a very deep model."""

FILTERS = ("all", "module", "function", "loss")
"""Kinds the filter cycles through (data and optimizer calls are a handful of roots)."""


def hit_text(row: dict[str, Any]) -> Text:
    text = Text(
        KIND_GLYPH.get(row.get("kind", ""), "·") + " ", style=colors.phase_color(row.get("phase"))
    )
    text.append(fmt.call_name(row))
    if row.get("cls") and row.get("name"):
        text.append(f" {row['cls']}", style=colors.MUTED)
    shape = fmt.shape(row.get("out_shape"))
    if shape:
        text.append(f"  {shape}", style=colors.MUTED)
    for m in marks.of_row(row):
        text.append(f" {m.symbol}", style=m.color)
    return text


class HitList(ListOptions):
    """Calls found by search or filter, in call order."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.HITS]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.hit_rows: list[dict[str, Any]] = []
        self.batch_index: int | None = None

    def show_rows(self, rows: list[dict[str, Any]], batch: int) -> None:
        self.hit_rows, self.batch_index = rows, batch
        self.clear_options()
        self.add_options([Option(hit_text(r), id=str(i)) for i, r in enumerate(rows)])
        if rows:
            self.highlighted = 0

    def action_close(self) -> None:
        if isinstance(self.parent, CallsPane):
            self.parent.close_results()


class CallsPane(Asks, Vertical):
    """Call tree with search and kind filter."""

    DEFAULT_CSS = """
    CallsPane #search { display: none; height: 3; border: tall $accent; }
    CallsPane #search.-shown { display: block; }
    CallsPane HitList { display: none; height: 1fr; border: none; }
    CallsPane HitList.-shown { display: block; }
    CallsPane CallTree { height: 1fr; }
    CallsPane CallTree.-hidden { display: none; }
    CallsPane #calls-footer { height: 1; color: $text-muted; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [*keys.SEARCH]

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.filter = "all"
        self._timer: Timer | None = None
        self._summary = ""
        self._hits_batch = 0  # the batch the search or filter in flight was asked about
        self._filtering = False  # which of the two it is

    def compose(self) -> ComposeResult:
        yield SearchBox(placeholder="search calls by name or class", id="search")
        yield HitList()
        yield CallTree()
        yield Static(id="calls-footer")

    @property
    def call_tree(self) -> CallTree:
        return self.query_one(CallTree)

    @property
    def hits(self) -> HitList:
        return self.query_one(HitList)

    def set_summary(self, summary: str) -> None:
        self._summary = summary
        self._refresh_footer()

    def _refresh_footer(self) -> None:
        text = Text(self._summary, style=colors.MUTED)
        text.append(f"  filter: {self.filter}", style="" if self.filter != "all" else colors.MUTED)
        self.query_one("#calls-footer", Static).update(text)

    # -- search --------------------------------------------------------------------------

    def open_search(self) -> None:
        search = self.query_one("#search", Input)
        search.add_class("-shown")
        search.focus()

    @on(Input.Changed, "#search")
    def _query_changed(self, event: Input.Changed) -> None:
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(SEARCH_DEBOUNCE_S, lambda: self._search(event.value))

    @on(Input.Submitted, "#search")
    def _query_submitted(self, event: Input.Submitted) -> None:
        # Enter ends typing: the box gives its line back to the results.
        if self.hits.hit_rows:
            event.input.remove_class("-shown")
            self.hits.focus()

    def _search(self, query: str) -> None:
        query = query.strip()
        if not query:
            self.cancel("search")
            self.close_results(False)
            return
        self._hits_batch, self._filtering = self.app.batch, False
        self.ask(
            "find",
            tag="search",
            run=self.app.run_name,
            batch=self._hits_batch,
            query=query,
            limit=HITS,
        )

    # -- filter --------------------------------------------------------------------------

    def cycle_filter(self) -> None:
        self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]
        self._refresh_footer()
        if self.filter == "all":
            self.close_results()
        else:
            self._filter(self.filter)

    def _filter(self, kind: str) -> None:
        self._hits_batch, self._filtering = self.app.batch, True
        self.ask(
            "find",
            tag="search",  # one of search and filter in flight: the last asked
            run=self.app.run_name,
            batch=self._hits_batch,
            query="",
            kind=kind,
            limit=FILTER_HITS,
        )

    def answered(self, tag: str, result: Any) -> None:
        # find's decoded rows: the list shows them as the maps they were sent as.
        self._show_hits([dict(r.raw) for r in result], self._hits_batch)
        if self._filtering:
            self.hits.focus()  # a filter's keys move in its list; a search keeps its box

    def failed(self, tag: str, message: str) -> None:
        self.set_summary(message)

    # -- results -------------------------------------------------------------------------

    def _show_hits(self, rows: list[dict[str, Any]], batch: int) -> None:
        self.hits.show_rows(rows, batch)
        self.hits.add_class("-shown")
        self.call_tree.add_class("-hidden")
        self.set_summary(f"{len(rows):,} call{'s' if len(rows) != 1 else ''} found")

    def close_results(self, focus_tree: bool = True) -> None:
        self.query_one("#search", Input).remove_class("-shown")
        self.hits.remove_class("-shown")
        self.call_tree.remove_class("-hidden")
        if self.filter != "all":
            self.filter = "all"
            self._refresh_footer()
        if focus_tree:
            self.call_tree.focus()

    def action_close(self) -> None:
        self.close_results()

    @on(OptionList.OptionHighlighted)
    def _hit_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        row = self._hit(event.option_index)
        if row is not None:
            self.post_message(
                Selected(Selection("call", batch=self.hits.batch_index, call=row["id"], row=row))
            )

    @on(OptionList.OptionSelected)
    def _hit_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        row = self._hit(event.option_index)
        if row is not None:
            self.close_results()
            self.post_message(
                GotoCall(row["id"], batch=self.hits.batch_index, path=row.get("path"))
            )

    def _hit(self, index: int) -> dict[str, Any] | None:
        rows = self.hits.hit_rows
        return rows[index] if 0 <= index < len(rows) else None
