"""Weights: one parameter at a time, chosen from a list of every parameter with its norms.

Conv kernels show as a filter × channel grid of small maps, matrices as heatmaps with rows
labelled by token or class (embedding tables, classifier heads), vectors as bars; with the
weight, its gradient or the optimizer's update Δw, at any recorded step. "All layers"
shows a thumbnail of every parameter, each fetched when it scrolls into view. Every view
is cut down on the agent to what the pane shows (``kernel_grid``, ``matrix``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.reactive import var
from textual.timer import Timer
from textual.widgets import Static
from textual.worker import get_current_worker

from tvis.tui import colors, export, fmt, keys
from tvis.tui.pages.page import Page
from tvis.tui.pane import AgentPane, prefetch_all
from tvis.tui.picture import SIGNED, Picture, Scale
from tvis.tui.picture.widget import depth_of
from tvis.tui.widgets.histogram import histogram
from tvis.tui.widgets.layers_table import Caption
from tvis.tui.widgets.lists import LineColumn, LineTable
from tvis.tui.widgets.loading_cue import LoadingCue
from tvis.tui.widgets.sparkline import signed_sparkline
from tvis.tui.widgets.thumb_grid import THUMB_PX, ThumbGrid

WHICH = ("weight", "grad", "update")
WHICH_LABEL = {"weight": "weight w", "grad": "gradient dL/dw", "update": "update Δw"}

COLUMNS = (
    ("parameter", "name"),
    ("shape", "numel"),
    ("‖w‖", "w"),
    ("‖grad‖", "grad"),
    ("‖Δw‖/‖w‖", "ratio"),
)

if TYPE_CHECKING:
    from textual import getters
    from textual.timer import Timer

    from tvis.tui.app import TvisApp
"""The list's headed columns and the key each sorts by."""

MIN_NAME = 12
"""The name column's narrowest: below it the numbers scroll sideways instead."""

PICTURE_DELAY = 0.1
"""Seconds a parameter's picture waits after a list move that follows another this soon
(a key held down): the picture is drawn for the row the cursor stops on."""

NEIGHBOURS_AFTER_S = 0.3
"""Rest after the chosen parameter last changed before its neighbours' pictures are asked
for: keys repeating faster than this ask for nothing ahead."""

BESIDE_AFTER_S = 0.3
"""Rest after the page last changed before the steps beside are fetched (as Explore's
batches beside: ``explore.NEIGHBOURS_AFTER_S``)."""

MAX_FILTERS = 32
"""Kernels per column of the grid; ``<``/``>`` page through more (the agent's limit)."""


def sort_keys(params: list[dict[str, Any]], key: str) -> list[str] | np.ndarray:
    """What each of ``params`` sorts by in column ``key``: names as text, sizes and norms as
    numbers, where a norm that is missing or not finite sorts below every other."""
    if key == "name":
        return [p.get("name") or "" for p in params]
    if key == "numel":
        values = [math.prod(p.get("shape") or [0]) for p in params]
    else:
        values = [(p.get("norms") or {}).get(key) for p in params]
    numbers = np.array(
        [v if isinstance(v, (int, float)) else np.nan for v in values], dtype=np.float64
    )
    numbers[~np.isfinite(numbers)] = -np.inf
    return numbers


def sorted_order(keys: list[str] | np.ndarray, descending: bool) -> list[int]:
    """The places of ``keys`` in sorted order; equal keys keep their order either way."""
    if isinstance(keys, np.ndarray):  # 20,000 norms sort in C
        return np.argsort(-keys if descending else keys, kind="stable").tolist()
    return sorted(range(len(keys)), key=keys.__getitem__, reverse=descending)


def beside(row: int, count: int, page: int) -> list[int]:
    """The rows the list keys reach from ``row`` (j, k, PageDown, PageUp, G, g), likeliest
    first, each once: the parameters whose pictures are fetched ahead."""
    reached = (row + 1, row - 1, row + page, row - page, count - 1, 0)
    return [r for r in dict.fromkeys(reached) if 0 <= r < count and r != row]


def norms_text(param: dict[str, Any]) -> Text:
    n = param.get("norms") or {}
    text = Text()
    text.append("‖w‖ ", style=colors.MUTED)
    text.append(fmt.num(n.get("w")))
    text.append("  ‖grad‖ ", style=colors.MUTED)
    text.append(fmt.num(n.get("grad")))
    text.append("  ‖Δw‖ ", style=colors.MUTED)
    text.append(fmt.num(n.get("update")))
    text.append("  ‖Δw‖/‖w‖ ", style=colors.MUTED)
    text.append(fmt.num(n.get("ratio")), style=colors.ratio_color(n.get("ratio")))
    return text


class ParamList(LineTable):
    """Every parameter of the step with headed, sortable norm columns.

    Drawn line by line: a model of 20,000 parameters fills at once and only the rows in
    view are rendered. Each column's sort keys are computed the first time it sorts."""

    columns = tuple(LineColumn(label, right=key not in ("name", "numel")) for label, key in COLUMNS)

    sort_column: var[int] = var(0, init=False)
    """The headed column the rows are sorted by (an index of ``COLUMNS``)."""
    descending: var[bool] = var(False, init=False)

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.params: list[dict[str, Any]] = []
        """The parameters in the order listed."""
        self._given: list[dict[str, Any]] = []  # as the agent gave them
        self._sort_keys: dict[str, list[str] | np.ndarray] = {}  # per column, in given order
        self._widths: list[int] = [len(c.label) for c in self.columns]
        self._given_rows: dict[str | None, int] = {}  # parameter name → its place given
        self._order: list[int] = []  # the places given, in the order listed

    def watch_sort_column(self) -> None:
        self.fill(self._given, self._chosen())

    def watch_descending(self) -> None:
        self.fill(self._given, self._chosen())

    def sort_next(self) -> None:
        """Sort by the next column: names and shapes A→Z, norms largest first."""
        column = (self.sort_column + 1) % len(COLUMNS)
        self.set_reactive(ParamList.descending, column >= 2)
        self.sort_column = column

    def _chosen(self) -> str | None:
        row = self.cursor_row
        return self.params[row].get("name") if 0 <= row < len(self.params) else None

    def fill(self, params: list[dict[str, Any]], chosen: str | None) -> None:
        """List ``params`` in the sort order, the cursor on ``chosen`` if it is there."""
        if params is not self._given:  # new parameters: new keys, names and widths
            self._given, self._sort_keys = params, {}
            self._given_rows = {p.get("name"): i for i, p in enumerate(params)}
            self._widths = self._content_widths(params)
        key = COLUMNS[self.sort_column][1]
        if key not in self._sort_keys:
            self._sort_keys[key] = sort_keys(params, key)
        self._order = sorted_order(self._sort_keys[key], self.descending)
        self.params = list(map(params.__getitem__, self._order))
        given = self._given_rows.get(chosen)
        self.set_rows(len(self.params), cursor=0 if given is None else self._order.index(given))
        self.post_message(self.Filled(self))

    def _content_widths(self, params: list[dict[str, Any]]) -> list[int]:
        """The widest value of each column (a DataTable sizes its columns so), once per
        step: the widths stay put while the rows scroll and sort."""
        norms = [p.get("norms") or {} for p in params]

        def widest(values: Iterable[str]) -> int:
            return max(map(len, values), default=0)

        values = [
            widest(str(p.get("name", "?")) for p in params),
            widest(fmt.shape(p.get("shape")) for p in params),
            widest(fmt.num(n.get("w")) for n in norms),
            widest(fmt.num(n.get("grad")) for n in norms),
            widest(fmt.num(n.get("ratio")) for n in norms),
        ]
        return [max(len(c.label), w) for c, w in zip(self.columns, values, strict=True)]

    def column_widths(self, width: int) -> list[int]:
        # Names are clipped at their start to what the other columns, as wide as this
        # step's values, leave (each cell is padded by one on each side; one for the bar).
        others = sum(w + 2 for w in self._widths[1:])
        name_width = max(MIN_NAME, (width or 62) - others - 3)
        return [min(self._widths[0], name_width), *self._widths[1:]]

    def cells(self, row: int) -> tuple[Text | str, ...]:
        p = self.params[row]
        n = p.get("norms") or {}
        return (
            self.shown_name(str(p.get("name", "?"))),
            Text(fmt.shape(p.get("shape")), style=colors.MUTED),
            fmt.num(n.get("w")),
            fmt.num(n.get("grad")),
            Text(fmt.num(n.get("ratio")), style=colors.ratio_color(n.get("ratio"))),
        )

    def shown_name(self, name: str) -> str:
        """``name`` as its row shows it at the list's width: cut at its start when long."""
        return fmt.clip_start(name, self.column_widths(self.content_width)[0])

    def param_named(self, name: str | None) -> dict[str, Any] | None:
        given = self._given_rows.get(name)
        return None if given is None else self._given[given]

    class Filled(Message):
        """The rows were (re)filled: their order or the parameters changed."""

        def __init__(self, table: ParamList) -> None:
            super().__init__()
            self.table = table

    def header_text(self) -> str:
        label = COLUMNS[self.sort_column][0]
        order = keys.hint(self.app, (("weights.sort", "weights.reverse"), ""))
        return f"sorted by {label} {'↓' if self.descending else '↑'} ({order.strip()})"


class LayerView(AgentPane):
    """One parameter: its picture at the step, its statistics and histogram."""

    DEFAULT_CSS = """
    LayerView { layout: vertical; height: 1fr; padding: 0 1; overflow-y: auto; }
    LayerView > Static { height: auto; }
    LayerView > Picture { height: auto; }
    """

    first_filter: var[int] = var(0, init=False)
    """The first filter of a conv kernel grid shown (``<``/``>`` page)."""
    shown: var[dict[str, Any] | None] = var(None, init=False, always_update=True)
    """The agent's picture reply on screen: a kernel grid or a matrix."""
    stats: var[dict[str, Any] | None] = var(None, init=False, always_update=True)
    """The agent's statistics reply for the tensor shown."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.param: dict[str, Any] | None = None
        self.step: int | None = None
        self.which = "weight"
        self.cue = LoadingCue(self, self._loading, lambda: None)  # the answer replaces it
        self._asked_picture: tuple[str, dict[str, Any]] | None = None

    def on_resize(self) -> None:
        # The picture takes what the header, bars, note and statistics leave.
        self.query_one(Picture).max_rows = max(4, self.size.height - 12)
        # A kernel grid or a matrix is cut to the pane: asked before the pane had its size
        # (or at another), it is asked again at this one.
        if self.param is not None and self._asked_picture != self.picture_request(
            self.param, self.step, self.which
        ):
            self._ask_picture()

    def compose(self) -> ComposeResult:
        yield Static("", id="layer-header")
        yield Static("", id="layer-bars")
        yield Picture(max_rows=14, id="layer-picture")
        yield Static("", id="layer-stats")

    def show(self, param: dict[str, Any], step: int | None, which: str) -> None:
        """Ask for ``param``'s ``which`` at ``step``: its picture and its statistics. An
        answer the client holds is drawn now; otherwise what is on screen stays until the
        answer comes, and a loading cue replaces it only if that takes ``CUE_AFTER_S``."""
        if self.param is None or param.get("name") != self.param.get("name"):
            self.set_reactive(LayerView.first_filter, 0)
        self.param, self.step, self.which = param, step, which
        self._header()
        self._ask_picture()
        stats = self.stats_request(param, step, which)
        if stats is not None:
            self.ask("tensor", tag="stats", **stats)
        else:
            self.query_one("#layer-stats", Static).update(
                Text(f"no {WHICH_LABEL[which]} recorded at this step", style=colors.MUTED)
            )

    def watch_first_filter(self) -> None:
        self._ask_picture()

    def _ask_picture(self) -> None:
        if not self.size.width:
            self._asked_picture = None  # not laid out yet: asked at its first size
            return
        method, params = self._asked_picture = self.picture_request(
            self.param or {}, self.step, self.which
        )
        if not self.ask(method, tag="picture", **params):
            self.cue.start()

    def _loading(self) -> None:
        self.query_one(Picture).placeholder(f"{WHICH_LABEL[self.which]} …")

    def requests(
        self, param: dict[str, Any], step: int | None, which: str
    ) -> list[tuple[str, dict[str, Any]]]:
        """What ``show(param, step, which)`` asks the agent, at this pane's size: a list
        prefetch asks the same, so the move finds the answers in the client's cache."""
        asked = [self.picture_request(param, step, which, first_filter=0)]
        stats = self.stats_request(param, step, which)
        if stats is not None:
            asked.append(("tensor", stats))
        return asked

    def stats_request(
        self, param: dict[str, Any], step: int | None, which: str
    ) -> dict[str, Any] | None:
        tensor = param.get(which)
        if not isinstance(tensor, int):
            return None
        return {"run": self.app.run_name, "step": step, "tensor": tensor}

    def picture_request(
        self, param: dict[str, Any], step: int | None, which: str, first_filter: int | None = None
    ) -> tuple[str, dict[str, Any]]:
        """The picture's request: a conv kernel grid or a matrix cut to the pane."""
        common = {"run": self.app.run_name, "step": step, "name": param.get("name"), "which": which}
        shape = param.get("shape") or []
        if len(shape) == 4:
            rows, cols = self._fit(shape)
            first = self.first_filter if first_filter is None else first_filter
            return "kernel_grid", {
                "filters": rows,
                "channels": cols,
                "first_filter": first,
                "cell": min(8, max(shape[2], shape[3])),
                **common,
            }
        width = max(16, (self.size.width or self.app.size.width) - 12)
        height = 1 if len(shape) <= 1 else max(4, self.query_one(Picture).max_rows * 2)
        return "matrix", {"width": width, "height": height, **common}

    def _fit(self, shape: list[int]) -> tuple[int, int]:
        """Filters and channels that fit the pane in half-block cells (two pixels a row)."""
        kh, kw = min(shape[2], 8), min(shape[3], 8)
        rows = max(1, (self.query_one(Picture).max_rows * 2 + 1) // (kh + 1))
        cols = max(1, (self.size.width - 4) // (kw + 1))
        return min(rows, MAX_FILTERS, shape[0]), min(cols, MAX_FILTERS, shape[1])

    def _header(self) -> None:
        p = self.param or {}
        text = Text(str(p.get("name")), style="bold")
        text.append(f"   {fmt.shape(p.get('shape'))} {p.get('dtype', '')}")
        text.append(f"   step {self.step} · ", style=colors.MUTED)
        text.append(WHICH_LABEL[self.which], style=f"bold {colors.PHASE['optimizer']}")
        text.append("  (w)", style=colors.MUTED)
        text.append("\n")
        text.append_text(norms_text(p))
        self.query_one("#layer-header", Static).update(text)

    def answered(self, tag: str, result: Any) -> None:
        if tag == "stats":
            self.stats = result
        else:
            self.cue.stop()
            self.shown = result

    def watch_shown(self, shown: dict[str, Any] | None) -> None:
        if shown is None:
            return
        if "kernel" in shown:
            self._kernels(shown)
        else:
            self._matrix(shown)

    def watch_stats(self, stats: dict[str, Any] | None) -> None:
        if stats is not None:
            self._stats(stats)

    def failed(self, tag: str, message: str) -> None:
        if tag == "picture":
            self.cue.stop()
            self.query_one(Picture).placeholder(message)
        else:
            self.query_one("#layer-stats", Static).update(Text(message, style=colors.MUTED))

    def _kernels(self, grid: dict[str, Any]) -> None:
        array = np.asarray(grid["array"], dtype=np.float32)
        scale = Scale.of(array, signed=True)
        out, inp = grid["shape"][:2]
        first = grid["first_filter"]
        note = (
            f"filters {first}–{first + grid['filters'] - 1} of {out} (rows, < > for more) × "
            f"input channels 0–{grid['channels'] - 1} of {inp} (columns) · "
            f"{'x'.join(map(str, grid['shape'][2:]))} kernels"
            f"{' averaged to ' + 'x'.join(map(str, grid['kernel'])) if grid['downsampled'] else ''}"
            f" · one scale ±{fmt.num(scale.hi)}"
        )
        if grid.get("kept_note"):
            note = f"{grid['kept_note']} · {note}"
        self.query_one("#layer-bars", Static).display = False  # a vector's, shown before
        # Filters down, channels across: a row of the mosaic is one filter's kernels.
        kernels = list(array.reshape(-1, *array.shape[2:]))
        self.query_one(Picture).show_mosaic(
            kernels, scale, SIGNED, per_row=array.shape[1], note=note
        )

    def _matrix(self, view: dict[str, Any]) -> None:
        array = np.asarray(view["array"], dtype=np.float32)
        picture = self.query_one(Picture)
        scale = Scale.of(array, signed=True)
        shape = view.get("shape") or []
        bars = self.query_one("#layer-bars", Static)
        if array.shape[0] == 1 and len((self.param or {}).get("shape") or []) <= 1:
            text = Text(f"{shape[-1] if shape else 1} values as bars", style=colors.MUTED)
            if view.get("downsampled"):
                text.append(f" (shown as {array.shape[1]} block means)", style=colors.MUTED)
            text.append(
                f"   {fmt.num(view.get('lo'))} … {fmt.num(view.get('hi'))}\n", style=colors.MUTED
            )
            up, down = signed_sparkline(
                array[0].tolist(), array.shape[1], colors.POSITIVE, colors.NEGATIVE
            )
            text.append_text(up)
            text.append("\n")
            text.append_text(down)
            text.append("   above the axis > 0, below < 0", style=colors.MUTED)
            bars.update(text)
            bars.display = True
            picture.show_values(array, scale, SIGNED)
            return
        bars.display = False
        labels = view.get("row_labels")
        y_labels = [repr(t)[1:-1] for t in labels] if labels else None
        legend = f"{shape[0]}×{shape[1] if len(shape) > 1 else 1}"
        if view.get("downsampled"):
            legend += f" shown as {array.shape[0]}×{array.shape[1]} block means"
        full = (self.param or {}).get("shape") or shape
        if shape and full and shape[0] < full[0]:
            legend += f" · the first {shape[0]} of {full[0]} rows were stored"
        if labels:
            legend += " · rows labelled by token/class"
        picture.show_values(array, scale, SIGNED, y_labels=y_labels, legend=legend)

    def _stats(self, entry: dict[str, Any]) -> None:
        stats = entry.get("stats") or {}
        text = Text()
        for key in ("mean", "std", "min", "max", "norm"):
            text.append(f"{key} ", style=colors.MUTED)
            text.append(f"{fmt.num(stats.get(key))}  ")
        text.append(f"zeros {fmt.pct(stats.get('zeros'))}\n", style=colors.MUTED)
        depth = depth_of(self.app.console.color_system)
        width = max(16, min(64, self.size.width - 4))
        text.append_text(histogram(entry.get("hist"), width, True, rows=2, depth=depth))
        rounded = export.rounded_note(entry.get("value"))
        if rounded:  # a gradient's values (not its statistics) may be stored rounded
            text.append(f"\n{rounded}", style=colors.MUTED)
        self.query_one("#layer-stats", Static).update(text)

    def page_filters(self, delta: int) -> None:
        grid = self.shown or {}
        if "kernel" not in grid or self.param is None:
            return
        out = grid["shape"][0]
        step = grid["filters"]
        self.first_filter = max(0, min(self.first_filter + delta * step, max(out - step, 0)))


class Thumb(AgentPane):
    """One parameter's thumbnail in "all layers"; asks for its picture only once shown."""

    DEFAULT_CSS = """
    Thumb { layout: vertical; height: 8; width: 1fr; padding: 0 1; }
    Thumb > Static { height: 1; }
    """

    def __init__(self, param: dict[str, Any], **kwargs) -> None:
        super().__init__(**kwargs)
        self.param = param
        self.loaded = False

    def compose(self) -> ComposeResult:
        yield Static(Text(fmt.clip(str(self.param.get("name")), 30), style="bold"))
        yield Picture(max_rows=6, legend=False)

    def load(self, step: int, which: str) -> None:
        self.loaded = True
        self.query_one(Picture).placeholder("…")
        width, height = THUMB_PX
        self.ask(
            "matrix",
            run=self.app.run_name,
            step=step,
            name=self.param["name"],
            which=which,
            width=width,
            height=height,
        )

    def answered(self, tag: str, result: Any) -> None:
        array = np.asarray(result["array"], dtype=np.float32)
        self.query_one(Picture).show_values(array, Scale.of(array, signed=True), SIGNED)

    def failed(self, tag: str, message: str) -> None:
        self.query_one(Picture).placeholder(message)


class AllLayers(VerticalScroll):
    """Thumbnails of every parameter, three a row, fetched as they scroll into view, as
    widgets: for sixel and kitty pictures (half-block cells are drawn by ``ThumbGrid``).

    Only the rows in view (and one either side) are mounted, between two spacers that hold
    the height of the rest: a model of 20,000 parameters is ~20 thumbnails, not 20,000
    (mounting them all took minutes and gigabytes)."""

    DEFAULT_CSS = """
    AllLayers { height: 1fr; }
    AllLayers > Horizontal { height: 8; }
    AllLayers > .spacer { height: 0; }
    """

    PER_ROW = 3
    ROW_HEIGHT = 8  # a Thumb's height

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step: int | None = None
        self.which = "weight"
        self.params: list[dict[str, Any]] = []
        self._rows: dict[int, Horizontal] = {}  # mounted rows by their index
        self._top = Static(classes="spacer")
        self._bottom = Static(classes="spacer")
        self._stale = False
        self._busy = self._again = False
        self._to_end = False  # End was pressed and the grid is not at its end yet

    def compose(self) -> ComposeResult:
        yield self._top
        yield self._bottom

    @property
    def row_count(self) -> int:
        return -(-len(self.params) // self.PER_ROW)

    async def show(self, params: list[dict[str, Any]], step: int | None, which: str) -> None:
        self.step, self.which, self.params = step, which, params
        self._to_end = False
        self._stale = True  # the mounted rows show the previous parameters
        await self._update_window()

    def _rewindow(self) -> None:
        if self._busy:
            self._again = True  # the update running now goes round once more
        else:
            self.run_worker(self._update_window(), group="window")

    async def _update_window(self) -> None:
        """Mount the rows of the window, one update at a time (a scroll during a mount
        asks for one more round instead of racing it)."""
        if self._busy:
            self._again = True
            return
        self._busy = True
        try:
            self._again = True
            while self._again:
                self._again = False
                await self._mount_window()
        finally:
            self._busy = False

    def _window(self) -> range:
        """The rows in view, with one more either side."""
        height = self.size.height or self.app.size.height
        first = max(0, int(self.scroll_y) // self.ROW_HEIGHT - 1)
        last = min(self.row_count, (int(self.scroll_y) + height) // self.ROW_HEIGHT + 2)
        return range(first, max(first, last))

    def _row(self, index: int) -> Horizontal:
        start = index * self.PER_ROW
        return Horizontal(*(Thumb(p) for p in self.params[start : start + self.PER_ROW]))

    async def _mount_window(self) -> None:
        window = self._window()
        if self._stale:
            self._stale, window_kept = False, range(0)
        else:
            window_kept = window
        gone = [row for i, row in self._rows.items() if i not in window_kept]
        if gone:
            await self.remove_children(gone)
        self._rows = {i: row for i, row in self._rows.items() if i in window_kept}
        above = [i for i in window if not self._rows or i < min(self._rows)]
        below = [i for i in window if i not in self._rows and i not in above]
        new = {i: self._row(i) for i in (*above, *below)}
        self._top.styles.height = window.start * self.ROW_HEIGHT
        self._bottom.styles.height = (self.row_count - window.stop) * self.ROW_HEIGHT
        if above:
            await self.mount_all([new[i] for i in above], after=self._top)
        if below:
            await self.mount_all([new[i] for i in below], before=self._bottom)
        self._rows.update(new)
        self.call_after_refresh(self.load_visible)

    def action_scroll_end(self) -> None:
        """To the last row, however much of the grid is laid out yet: End pressed right
        after ``a`` did nothing (nothing to scroll yet) or stopped where the layout had
        got to."""
        self._to_end = True
        self._reach_end()

    def _reach_end(self) -> None:
        if not self._to_end:
            return
        if not self.display or not self.params:
            self._to_end = False
            return
        laid_out = self.size.height and self.virtual_size.height >= self.row_count * self.ROW_HEIGHT
        if laid_out and self.scroll_y >= self.max_scroll_y:
            self._to_end = False
            return
        if laid_out:
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        self.call_after_refresh(self._reach_end)  # once more, after the next layout

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        mounted = range(min(self._rows, default=0), max(self._rows, default=-1) + 1)
        if self.params and self._window() != mounted:
            self._rewindow()
        else:
            self.load_visible()

    def on_resize(self) -> None:
        if self.params:
            self._rewindow()

    def load_visible(self) -> None:
        if self.step is None:
            return
        rows = list(self._rows.values())
        if not self.size.height or any(r.virtual_region.height == 0 for r in rows):
            self.call_after_refresh(self.load_visible)  # not laid out yet
            return
        top, bottom = self.scroll_y, self.scroll_y + self.size.height
        for row in rows:
            region = row.virtual_region
            if region.y + region.height < top or region.y > bottom:
                continue
            for thumb in row.query(Thumb):
                if not thumb.loaded:
                    thumb.load(self.step, self.which)

    @property
    def loaded_count(self) -> int:
        return sum(1 for t in self.query(Thumb) if t.loaded)


class WeightsView(AgentPane):
    """The list and the chosen layer (or all layers) at one step."""

    DEFAULT_CSS = """
    WeightsView { layout: horizontal; height: 1fr; }
    WeightsView #weights-left { width: 62; height: 1fr; }
    WeightsView #weights-sort { padding: 0 1; }
    WeightsView ParamList { height: 1fr; }
    WeightsView #weights-right { width: 1fr; height: 1fr; }
    WeightsView.-narrow { layout: vertical; }
    WeightsView.-narrow #weights-left { width: 1fr; height: 9; }
    """

    NARROW = 110
    """Below this many columns the list goes above the picture instead of beside it."""

    params: var[list[dict[str, Any]]] = var(list, init=False, always_update=True)
    """The step's parameters with their norms: the agent's reply on screen."""
    which: var[str] = var("weight", init=False)
    """What the pictures show: the weight, its gradient or the update Δw (``WHICH``)."""
    chosen: var[str | None] = var(None, init=False)
    """The parameter the list's cursor is on, drawn in the layer view."""
    all_layers: var[bool] = var(False, init=False)
    """A thumbnail of every parameter instead of the chosen one."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step: int | None = None
        self._last_move = -math.inf  # when the chosen parameter last changed
        self._moves = 0  # how many times: a later move makes an earlier one's draw stale
        self._neighbours_timer: Timer | None = None
        self._neighbours_due = False  # the cursor rested while the page was hidden
        self.grid: ThumbGrid | AllLayers  # "all layers": its thumbnails (made in compose)

    def compose(self) -> ComposeResult:
        with Vertical(id="weights-left"):
            yield Caption(id="weights-sort")
            yield ParamList()
        with Vertical(id="weights-right"):
            yield LayerView()
            # Cells are lines of one widget; a graphic needs a widget of its own to place it.
            self.grid = ThumbGrid() if self.app.image_mode == "halfcell" else AllLayers()
            yield self.grid

    def on_mount(self) -> None:
        self.grid.display = False
        self.query_one(ParamList).focus()

    def on_resize(self) -> None:
        narrow = self.size.width < self.NARROW
        self.set_class(narrow, "-narrow")
        # Beside the picture the list takes 62 cells, up to 72 (whole parameter names) when
        # the picture keeps 78.
        left = self.query_one("#weights-left")
        left.styles.width = None if narrow else max(62, min(72, self.size.width - 78))

    def load(self, step: int) -> None:
        self.step = step
        self.ask("step", run=self.app.run_name, step=step)

    def answered(self, tag: str, result: Any) -> None:
        self.params = result.get("params") or []

    def failed(self, tag: str, message: str) -> None:
        self.query_one("#weights-sort", Caption).text = Text(message, style=colors.BAD)

    def watch_params(self) -> None:
        self.query_one(ParamList).fill(self.params, self.chosen)
        self._draw()

    def watch_which(self) -> None:
        self._draw()

    def watch_chosen(self) -> None:
        if not self.all_layers:
            self._draw_soon()

    def _draw_soon(self) -> None:
        """Draw the chosen parameter: in the cursor's frame when the client holds its
        answers (prefetched while the cursor rested), else once the cursor has been painted.
        While keys repeat, only the row the cursor stops on is drawn, and no reply for a
        row passed over is drawn."""
        layer = self.query_one(LayerView)
        layer.cancel("picture")
        layer.cancel("stats")
        now = time.monotonic()
        repeating = now - self._last_move < PICTURE_DELAY
        self._last_move = now
        self._moves += 1
        move = self._moves
        if repeating:
            self.set_timer(PICTURE_DELAY, lambda: self._draw_move(move))
        elif self._held(self.query_one(ParamList).param_named(self.chosen)):
            self._draw()
        else:
            self.call_after_refresh(self._draw_move, move)

    def _draw_move(self, move: int) -> None:
        if move == self._moves and not self.all_layers:  # no later move overtook it
            self._draw()

    def _held(self, param: dict[str, Any] | None) -> bool:
        """Whether the client holds every answer that showing ``param`` needs."""
        data = self.app.data
        if param is None or data is None or self.step is None:
            return False
        asked = self.query_one(LayerView).requests(param, self.step, self.which)
        return all(data.peek(method, **params)[0] for method, params in asked)

    def _rest_then_prefetch(self) -> None:
        if self._neighbours_timer is not None:
            self._neighbours_timer.stop()
        self._neighbours_timer = self.set_timer(NEIGHBOURS_AFTER_S, self._prefetch_neighbours)

    def _prefetch_neighbours(self) -> None:
        """Once the cursor rests, fetch what the list keys would show next (``beside``), so
        that the move draws from the client's cache in the cursor's frame."""
        self._neighbours_timer = None
        data, step = self.app.data, self.step
        if not self.screen.is_current:  # built ahead, or left: asked for when next shown
            self._neighbours_due = True
            return
        if data is None or step is None or self.all_layers:
            return
        table, layer = self.query_one(ParamList), self.query_one(LayerView)
        rows = beside(table.cursor_row, len(table.params), table.page_rows)
        asked = [r for row in rows for r in layer.requests(table.params[row], step, self.which)]
        self.run_worker(
            lambda: prefetch_all(data, asked),
            group="weights-neighbours",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def resume(self) -> None:
        """The page is shown again: a rest that came while it was hidden is taken up."""
        if self._neighbours_due:
            self._neighbours_due = False
            self._rest_then_prefetch()

    async def watch_all_layers(self, all_layers: bool) -> None:
        self.query_one(LayerView).display = not all_layers
        self.grid.display = all_layers
        if all_layers:
            await self._draw_all()
        else:
            self._draw()

    @on(ParamList.Filled)
    def _filled(self, event: ParamList.Filled) -> None:
        event.stop()
        # A caption: a sort repaints this line and lays nothing out.
        self.query_one("#weights-sort", Caption).text = Text(
            f"{len(self.params)} parameters · step {self.step} · {event.table.header_text()}",
            style=colors.MUTED,
        )

    def _draw(self) -> None:
        """The chosen parameter (the first listed when none is) or every thumbnail."""
        if self.all_layers:
            self.run_worker(self._draw_all())
            return
        table = self.query_one(ParamList)
        listed = table.params
        param = table.param_named(self.chosen)
        if param is None and listed:
            param = listed[0]
            self.set_reactive(WeightsView.chosen, param.get("name"))
        if param is not None and self.step is not None:
            self.query_one(LayerView).show(param, self.step, self.which)
            self._rest_then_prefetch()
            page = self.screen
            if isinstance(page, WeightsPage):
                page.rest_then_prefetch()  # what the steps beside show has changed

    async def _draw_all(self) -> None:
        if self.step is not None:
            await self.grid.show(self.query_one(ParamList).params, self.step, self.which)

    @on(ParamList.Highlighted)
    def _highlighted(self, event: ParamList.Highlighted) -> None:
        event.stop()
        table = self.query_one(ParamList)
        if event.row < len(table.params):
            self.chosen = table.params[event.row].get("name")


def fetch_steps(
    data: Any,
    run: str,
    steps: list[int],
    name: Any,
    which: str,
    method: str,
    picture: dict[str, Any],
) -> None:
    """Ask ``data`` for what opening each of ``steps`` shows (run in a worker thread): the
    step's parameter list, parameter ``name``'s ``which`` there as a picture (``method``
    with ``picture``'s parameters) and its statistics."""
    worker = get_current_worker()
    for step in steps:
        if worker.is_cancelled:
            return
        answer = data.prefetch_later("step", run=run, step=step)
        params = answer.get("params") if isinstance(answer, dict) else None
        param = next((p for p in params or [] if p.get("name") == name), None)
        if param is None:
            continue
        data.prefetch_later(method, **{**picture, "step": step})
        tensor = param.get(which)
        if isinstance(tensor, int) and not worker.is_cancelled:
            data.prefetch_later("tensor", run=run, step=step, tensor=tensor)


class WeightsPage(Page):
    """The Weights page."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.WEIGHTS]

    DEFAULT_CSS = "WeightsPage #weights-title { height: 1; padding: 0 1; }"

    def __init__(self) -> None:
        super().__init__()
        self.step: int | None = None
        self._beside_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="weights-title")
            yield WeightsView()

    def on_mount(self) -> None:
        self.watch(self.app, "batch", self._batch_changed, init=False)
        self.call_after_refresh(self._batch_changed)

    def on_screen_resume(self) -> None:
        self.view.resume()

    @property
    def view(self) -> WeightsView:
        return self.query_one(WeightsView)

    def _steps(self) -> list[int]:
        steps = (self.app.run_info or {}).get("steps") or []
        return [s["index"] for s in steps if isinstance(s.get("index"), int)]

    def _step_of(self, batch: dict[str, Any] | None) -> int | None:
        """The step a batch opens this page on: its own, or the last recorded."""
        step = (batch or {}).get("step")
        steps = self._steps()
        return step if step in steps else (steps[-1] if steps else None)

    def _batch_changed(self, *_: Any) -> None:
        self._open(self._step_of(self.app.batch_info))

    def rest_then_prefetch(self) -> None:
        """Fetch the steps beside once the page has rested (``BESIDE_AFTER_S``)."""
        if self._beside_timer is not None:
            self._beside_timer.stop()
        self._beside_timer = self.set_timer(BESIDE_AFTER_S, self._prefetch_beside)

    def _prefetch_beside(self) -> None:
        """Once the page rests, fetch what `.`/`,` will show where they open another step:
        its parameter list, the shown parameter's picture and statistics there. The
        switch then draws from the client's cache in the key's frame."""
        self._beside_timer = None
        app, layer = self.app, self.view.query_one(LayerView)
        data, run, position = app.data, app.run_name, app.batch_position
        if not self.is_current or data is None or run is None or position is None:
            return
        if layer.param is None or self.view.all_layers:
            return
        batches = (app.run_info or {}).get("batches") or []
        beside = [
            self._step_of(batches[p]) for p in (position + 1, position - 1) if 0 <= p < len(batches)
        ]
        steps = [s for s in dict.fromkeys(beside) if s is not None and s != self.step]
        if not steps:
            return
        method, picture = layer.picture_request(layer.param, None, layer.which)
        name, which = layer.param.get("name"), layer.which
        self.run_worker(
            lambda: fetch_steps(data, run, steps, name, which, method, picture),
            group="weights-beside",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def _open(self, step: int | None) -> None:
        self.step = step
        title = Text("Weights", style="bold")
        if step is None:
            title.append("   no optimizer step was recorded in this run", style=colors.MUTED)
        else:
            steps = self._steps()
            title.append(f" · step {step} ({steps.index(step) + 1} of {len(steps)})")
            hints = keys.hint(
                self.app,
                (("weights.step_next", "weights.step_prev"), "step"),
                ("weights.which", "weight/grad/Δw"),
                ("weights.all", "all layers"),
                ("app.help", "keys"),
            )
            title.append(f"   {hints}", style=colors.MUTED)
        self.query_one("#weights-title", Static).update(title)
        if step is not None:
            self.view.load(step)

    def action_slide(self, delta: int) -> None:
        steps = self._steps()
        if self.step in steps:
            self._open(steps[(steps.index(self.step) + delta) % len(steps)])

    def action_cycle_which(self) -> None:
        view = self.view
        view.which = WHICH[(WHICH.index(view.which) + 1) % len(WHICH)]

    def action_sort_next(self) -> None:
        self.view.query_one(ParamList).sort_next()

    def action_sort_reverse(self) -> None:
        table = self.view.query_one(ParamList)
        table.descending = not table.descending

    def action_toggle_all(self) -> None:
        self.view.all_layers = not self.view.all_layers

    def action_filters(self, delta: int) -> None:
        self.view.query_one(LayerView).page_filters(delta)
