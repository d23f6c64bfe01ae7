"""A project file as it was when the run was recorded, each executed line annotated with
what it produced (shape, op, how often, how long). Enter on an annotated line selects the
call that ran it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Static

from tvis.tui import colors, fmt, keys
from tvis.tui.messages import GotoCall
from tvis.tui.pane import Asks

GUTTER = 6


def annotation_text(anns: list[dict[str, Any]]) -> str:
    """What a line produced: ``8×16×32×32 conv2d ×2 0.41 ms`` (the first op, and how many more)."""
    if not anns:
        return ""
    a = anns[0]
    parts = [fmt.shape(a.get("shape")), str(a.get("op") or "")]
    if (a.get("count") or 1) > 1:
        parts.append(f"×{a['count']}")
    if a.get("ms") is not None:
        parts.append(fmt.ms(a.get("ms")))
    text = " ".join(p for p in parts if p)
    if len(anns) > 1:
        text += f" +{len(anns) - 1}"
    return text


HIGHLIGHTED_FILES = 16
"""Files whose highlighted lines are kept: a 2,000-line file takes 40–80 ms to highlight,
which a `d` back to it, or to a file highlighted at rest (``explore.fetch_source``),
then costs nothing."""


@functools.lru_cache(maxsize=HIGHLIGHTED_FILES)
def highlight(text: str) -> tuple[Text, ...]:
    """The file's lines, syntax-highlighted with the terminal's own palette (shared: never
    changed in place)."""
    # Imported here: Rich's Syntax brings pygments (≈ 20–50 ms), which Explore's first
    # screen, with its source pane closed, does not need.
    from rich.syntax import Syntax

    syntax = Syntax("", "python", theme="ansi_dark", tab_size=4)
    return tuple(syntax.highlight(text.expandtabs(4)).split("\n", allow_blank=True))


class SourceView(ScrollView, can_focus=True):
    """Line-API view of one file with a cursor line."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.SOURCE]

    DEFAULT_CSS = """
    SourceView { background: $surface; overflow-x: hidden; overflow-y: scroll; }
    """
    # Lines are cut to the view's width, so no horizontal scrollbar and a virtual size that
    # does not follow the width; the vertical scrollbar is always there. Each resize asked
    # for a layout, each scrollbar's arrival another: four on a file's first showing.

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.file: str | None = None
        self.lines: Sequence[Text] = ()
        self.annotations: dict[int, list[dict[str, Any]]] = {}
        self.cursor = 0
        self.batch_index: int | None = None
        self._cache: dict[tuple, Strip] = {}
        self._cursor_unplaced = False  # the cursor moved before the view had a size
        self.set_reactive(SourceView.show_vertical_scrollbar, True)

    def on_mount(self) -> None:
        self.vertical_scrollbar.display = True  # made shown, before the first layout

    def set_source(
        self,
        file: str | None,
        text: str,
        annotations: dict[int, list[dict[str, Any]]],
        line: int | None,
    ) -> None:
        self.file = file
        self.lines = highlight(text) if text else ()
        self.annotations = {int(k): v for k, v in annotations.items()}
        self._cache.clear()
        self.virtual_size = Size(0, len(self.lines))  # its width is the view's, whatever
        self.move_to(line - 1 if line else self._first_annotated())

    def _first_annotated(self) -> int:
        return min(self.annotations, default=1) - 1

    def move_to(self, index: int) -> None:
        self.cursor = max(0, min(index, len(self.lines) - 1))
        self._cache.clear()
        if self.size.height:
            self._scroll_to_cursor()
        else:
            # Not laid out: the layout that sizes the view places it, and its first frame
            # shows the cursor's line (placed after that frame, it cost another).
            self._cursor_unplaced = True
        self.refresh()

    def _scroll_to_cursor(self, immediate: bool = True) -> None:
        """Scroll the cursor's line into view, a third of the way down when it was off: at
        once, in the move's frame, unless a layout is under way."""
        if not (self.scroll_y <= self.cursor < self.scroll_y + self.size.height):
            top = max(0, self.cursor - self.size.height // 3)
            self.scroll_to(y=top, animate=False, immediate=immediate)

    def _size_updated(
        self, size: Size, virtual_size: Size, container_size: Size, layout: bool = True
    ) -> bool:
        # Textual's (private), called by the layout as it sizes the view.
        resized = super()._size_updated(size, virtual_size, container_size, layout)
        if self._cursor_unplaced and size.height:
            self._cursor_unplaced = False
            self._scroll_to_cursor(immediate=False)
        return resized

    def render_line(self, y: int) -> Strip:
        index = int(self.scroll_y) + y
        width = self.scrollable_size.width  # not under the scrollbar
        key = (index, width, index == self.cursor, self.has_focus)
        if key in self._cache:
            return self._cache[key]
        if index >= len(self.lines):
            return Strip.blank(width, Style())
        anns = self.annotations.get(index + 1, [])
        note = annotation_text(anns)
        note_w = min(len(note), max(0, width // 2 - 2))
        code_w = max(1, width - GUTTER - (note_w + 2 if note_w else 0))
        row = Text()
        row.append(f"{index + 1:>4} ", style=colors.MUTED)
        row.append("●" if anns else " ", style=colors.PHASE["forward"])
        code = self.lines[index].copy()
        code.truncate(code_w, overflow="ellipsis", pad=True)
        row.append_text(code)
        if note_w:
            row.append("  ")
            row.append(fmt.clip(note, note_w).rjust(note_w), style=colors.PHASE["forward"])
        if index == self.cursor:
            row.stylize(
                Style(reverse=self.has_focus, bold=not self.has_focus, underline=not self.has_focus)
            )
        strip = Strip(list(row.render(self.app.console)), row.cell_len).adjust_cell_length(width)
        self._cache[key] = strip
        return strip

    def on_resize(self) -> None:
        self._cache.clear()

    def on_focus(self) -> None:
        self._cache.clear()
        self.refresh()

    on_blur = on_focus

    # -- keys ----------------------------------------------------------------------------

    def action_cursor(self, delta: int) -> None:
        self.move_to(self.cursor + delta)

    def action_next_annotated(self, direction: int) -> None:
        lines = sorted(self.annotations)
        here = self.cursor + 1
        after = [n for n in lines if (n - here) * direction > 0]
        if after:
            self.move_to((min(after) if direction > 0 else max(after)) - 1)

    def action_select_line(self) -> None:
        anns = self.annotations.get(self.cursor + 1)
        if not anns:
            self.app.notify("this line did not run in the recorded batches", timeout=3)
            return
        ann = anns[0]
        batches = ann.get("batches") or []
        batch = self.batch_index if self.batch_index in batches or not batches else batches[0]
        if isinstance(ann.get("call"), int):
            self.post_message(GotoCall(ann["call"], batch=batch))

    def action_next_file(self) -> None:
        if isinstance(self.parent, SourcePane):
            self.parent.next_file()


class SourcePane(Asks, Vertical):
    """The Source pane: which file, then the annotated lines."""

    DEFAULT_CSS = """
    SourcePane #source-header { height: 1; color: $text-muted; }
    SourcePane SourceView { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.files: list[str] = []
        self.requested: str | None = None
        self._line: int | None = None  # the line to put under the cursor once a file arrives

    def compose(self) -> ComposeResult:
        yield Static("no file shown yet: d / u on a call jumps to its source", id="source-header")
        yield SourceView()

    @property
    def view(self) -> SourceView:
        return self.query_one(SourceView)

    def reset(self) -> None:
        self.files, self.requested = [], None
        self.view.set_source(None, "", {}, None)

    def set_files(self, files: list[str]) -> None:
        self.files = files

    def show(self, file: str, line: int | None = None) -> None:
        """Show ``file`` with ``line`` under the cursor (fetching it unless it is shown)."""
        self.requested = file
        if file == self.view.file:
            if line:
                self.view.move_to(line - 1)
            return
        self._load(file, line)

    def next_file(self) -> None:
        if not self.files:
            return
        current = self.view.file
        i = self.files.index(current) + 1 if current in self.files else 0
        self.show(self.files[i % len(self.files)])

    def _load(self, file: str, line: int | None) -> None:
        self._line = line
        self.ask("source", run=self.app.run_name, file=file)

    def answered(self, tag: str, src: dict[str, Any]) -> None:
        line = self._line
        anns = src.get("lines") or {}
        self.view.set_source(src.get("file", "?"), src.get("text") or "", anns, line)
        header = Text(src.get("file", "?"), style="bold")
        position = (
            f"  file {self.files.index(src['file']) + 1} of {len(self.files)} · "
            + keys.hint(self.app, ("source.file", "next"))
            if src.get("file") in self.files
            else ""
        )
        header.append(
            f"{position} · {len(anns)} executed lines · "
            + keys.hint(
                self.app,
                (("source.next", "source.prev"), "next/prev"),
                ("source.select", "selects its call"),
            ),
            style=colors.MUTED,
        )
        self.query_one("#source-header", Static).update(header)

    def failed(self, tag: str, message: str) -> None:
        self.query_one("#source-header", Static).update(Text(message, style=colors.BAD))
