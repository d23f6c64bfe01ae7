"""Weights: one parameter at a time, chosen from a list of every parameter with its norms.

Conv kernels show as a filter × channel grid of small maps, matrices as heatmaps with rows
labelled by token or class (embedding tables, classifier heads), vectors as bars; with the
weight, its gradient or the optimizer's update Δw, at any recorded step. "All layers"
shows a thumbnail of every parameter, each fetched when it scrolls into view. Every view
is cut down on the agent to what the pane shows (``kernel_grid``, ``matrix``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Static

from tvis.tui import colors, fmt, keys
from tvis.tui.pane import AgentPane
from tvis.tui.picture import SIGNED, Picture, Scale, to_rgb
from tvis.tui.picture.colormaps import Depth
from tvis.tui.picture.widget import depth_of
from tvis.tui.widgets.histogram import histogram
from tvis.tui.widgets.lists import ListTable
from tvis.tui.widgets.sparkline import signed_sparkline

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

    from tvis.tui.app import TvisApp
"""The list's headed columns and the key each sorts by."""

NUMBER_COLUMNS = 44
"""Cells the columns after the name take (a 4-D shape, three numbers, cell padding and the
scrollbar): the name gets what is left, so ‖Δw‖/‖w‖ stays in view."""

GAP_RGB = (24, 24, 28)
"""Between kernels of the grid: darker than any colour of the signed map."""

THUMB_PX = (24, 12)
"""Thumbnail values (width × height) asked per parameter: 288 floats, ~1 KiB a reply."""

MAX_FILTERS = 32
"""Kernels per column of the grid; ``<``/``>`` page through more (the agent's limit)."""


def param_sort_key(param: dict[str, Any], key: str) -> Any:
    norms = param.get("norms") or {}
    if key == "name":
        return param.get("name") or ""
    if key == "numel":
        return int(np.prod(param.get("shape") or [0]))
    value = norms.get(key)
    return value if isinstance(value, (int, float)) and np.isfinite(value) else -np.inf


def kernel_mosaic(grid: np.ndarray, scale: Scale, depth: Depth) -> np.ndarray:
    """Kernels ``[F, C, h, w]`` as one picture: filters down, channels across, one gap
    pixel between kernels, every kernel on the same signed scale."""
    f, c, h, w = grid.shape
    out = np.empty((f * (h + 1) - 1, c * (w + 1) - 1, 3), dtype=np.uint8)
    out[:] = GAP_RGB
    for i in range(f):
        for j in range(c):
            y, x = i * (h + 1), j * (w + 1)
            out[y : y + h, x : x + w] = to_rgb(grid[i, j], scale, SIGNED, depth)
    return out


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


class ParamList(ListTable):
    """Every parameter of the step with headed, sortable norm columns."""

    def __init__(self, **kwargs) -> None:
        super().__init__(cursor_type="row", **kwargs)
        self.params: list[dict[str, Any]] = []
        self.sort_column = 0
        self.descending = False

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def fill(self, params: list[dict[str, Any]], chosen: str | None) -> None:
        key = COLUMNS[self.sort_column][1]
        self.params = sorted(params, key=lambda p: param_sort_key(p, key), reverse=self.descending)
        self.clear()
        name_width = max(12, min(28, (self.size.width or 62) - NUMBER_COLUMNS))
        for p in self.params:
            n = p.get("norms") or {}
            self.add_row(
                fmt.clip_start(str(p.get("name", "?")), name_width),
                Text(fmt.shape(p.get("shape")), style=colors.MUTED),
                Text(fmt.num(n.get("w")), justify="right"),
                Text(fmt.num(n.get("grad")), justify="right"),
                Text(
                    fmt.num(n.get("ratio")),
                    justify="right",
                    style=colors.ratio_color(n.get("ratio")),
                ),
                key=p.get("name"),
            )
        names = [p.get("name") for p in self.params]
        if chosen in names:
            self.move_cursor(row=names.index(chosen))

    def on_resize(self) -> None:
        if self.params:  # names are clipped to the width: fill again at the new one
            row = self.cursor_row
            chosen = self.params[row].get("name") if 0 <= row < len(self.params) else None
            self.fill(self.params, chosen)

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

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.param: dict[str, Any] | None = None
        self.step: int | None = None
        self.which = "weight"
        self.first_filter = 0
        self.shown: dict[str, Any] | None = None

    def on_resize(self) -> None:
        # The picture takes what the header, bars, note and statistics leave.
        self.query_one(Picture).max_rows = max(4, self.size.height - 12)

    def compose(self) -> ComposeResult:
        yield Static("", id="layer-header")
        yield Static("", id="layer-bars")
        yield Picture(max_rows=14, id="layer-picture")
        yield Static("", id="layer-stats")

    def show(self, param: dict[str, Any], step: int | None, which: str) -> None:
        if self.param is None or param.get("name") != self.param.get("name"):
            self.first_filter = 0
        self.param, self.step, self.which = param, step, which
        self._header()
        picture = self.query_one(Picture)
        picture.placeholder(f"{WHICH_LABEL[which]} …")
        name = param.get("name")
        common = {"run": self.app.run_name, "step": step, "name": name, "which": which}
        shape = param.get("shape") or []
        if len(shape) == 4:
            rows, cols = self._fit(shape)
            self.ask(
                "kernel_grid",
                tag="picture",
                filters=rows,
                channels=cols,
                first_filter=self.first_filter,
                cell=min(8, max(shape[2], shape[3])),
                **common,
            )
        else:
            width = max(16, (self.size.width or self.app.size.width) - 12)
            height = 1 if len(shape) <= 1 else max(4, picture.max_rows * 2)
            self.ask("matrix", tag="picture", width=width, height=height, **common)
        tensor = param.get(which)
        if isinstance(tensor, int):
            self.ask("tensor", tag="stats", run=self.app.run_name, step=step, tensor=tensor)
        else:
            self.query_one("#layer-stats", Static).update(
                Text(f"no {WHICH_LABEL[which]} recorded at this step", style=colors.MUTED)
            )

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
            self._stats(result)
        elif "kernel" in result:
            self._kernels(result)
        else:
            self._matrix(result)

    def failed(self, tag: str, message: str) -> None:
        if tag == "picture":
            self.query_one(Picture).placeholder(message)
        else:
            self.query_one("#layer-stats", Static).update(Text(message, style=colors.MUTED))

    def _kernels(self, grid: dict[str, Any]) -> None:
        self.shown = grid
        array = np.asarray(grid["array"], dtype=np.float32)
        scale = Scale.of(array, signed=True)
        depth = depth_of(self.app.console.color_system)
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
        self.query_one(Picture).show_rgb(kernel_mosaic(array, scale, depth), note=note)

    def _matrix(self, view: dict[str, Any]) -> None:
        self.shown = view
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
        self.query_one("#layer-stats", Static).update(text)

    def page_filters(self, delta: int) -> None:
        grid = self.shown or {}
        if "kernel" not in grid or self.param is None:
            return
        out = grid["shape"][0]
        step = grid["filters"]
        self.first_filter = max(0, min(self.first_filter + delta * step, max(out - step, 0)))
        self.show(self.param, self.step, self.which)


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
    """Thumbnails of every parameter, three a row, fetched as they scroll into view."""

    DEFAULT_CSS = """
    AllLayers { height: 1fr; }
    AllLayers > Horizontal { height: 8; }
    """

    PER_ROW = 3

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step: int | None = None
        self.which = "weight"

    async def show(self, params: list[dict[str, Any]], step: int | None, which: str) -> None:
        self.step, self.which = step, which
        await self.remove_children()
        rows = []
        for i in range(0, len(params), self.PER_ROW):
            rows.append(Horizontal(*(Thumb(p) for p in params[i : i + self.PER_ROW])))
        await self.mount_all(rows)
        self.call_after_refresh(self.load_visible)

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self.load_visible()

    def on_resize(self) -> None:
        self.load_visible()

    def load_visible(self) -> None:
        if self.step is None:
            return
        rows = list(self.query(Horizontal))
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
    WeightsView #weights-left > Static { height: auto; padding: 0 1; }
    WeightsView ParamList { height: 1fr; }
    WeightsView #weights-right { width: 1fr; height: 1fr; }
    WeightsView.-narrow { layout: vertical; }
    WeightsView.-narrow #weights-left { width: 1fr; height: 9; }
    """

    NARROW = 110
    """Below this many columns the list goes above the picture instead of beside it."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.step: int | None = None
        self.params: list[dict[str, Any]] = []
        self.which = "weight"
        self.chosen: str | None = None
        self.all_layers = False

    def compose(self) -> ComposeResult:
        with Vertical(id="weights-left"):
            yield Static("", id="weights-sort")
            yield ParamList()
        with Vertical(id="weights-right"):
            yield LayerView()
            yield AllLayers()

    def on_mount(self) -> None:
        self.query_one(AllLayers).display = False
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
        self.fill()
        if self.all_layers:
            self.run_worker(
                self.query_one(AllLayers).show(
                    self.query_one(ParamList).params, self.step, self.which
                )
            )
        elif self.params:
            chosen = next((p for p in self.params if p.get("name") == self.chosen), None)
            self.choose(chosen or self.query_one(ParamList).params[0])

    def failed(self, tag: str, message: str) -> None:
        self.query_one("#weights-sort", Static).update(Text(message, style=colors.BAD))

    def fill(self) -> None:
        table = self.query_one(ParamList)
        table.fill(self.params, self.chosen)
        self.query_one("#weights-sort", Static).update(
            Text(
                f"{len(self.params)} parameters · step {self.step} · {table.header_text()}",
                style=colors.MUTED,
            )
        )

    def choose(self, param: dict[str, Any]) -> None:
        self.chosen = param.get("name")
        self.query_one(LayerView).show(param, self.step, self.which)

    @on(DataTable.RowHighlighted)
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        param = next((p for p in self.params if p.get("name") == event.row_key.value), None)
        if param is not None and param.get("name") != self.chosen and not self.all_layers:
            self.choose(param)

    async def toggle_all(self) -> None:
        self.all_layers = not self.all_layers
        grid = self.query_one(AllLayers)
        self.query_one(LayerView).display = not self.all_layers
        grid.display = self.all_layers
        if self.all_layers and self.step is not None:
            await grid.show(self.query_one(ParamList).params, self.step, self.which)
        elif self.chosen:
            self.answered("main", {"params": self.params})


class WeightsPage(Screen):
    """The Weights page."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.WEIGHTS]

    DEFAULT_CSS = "WeightsPage #weights-title { height: 1; padding: 0 1; }"

    def __init__(self) -> None:
        super().__init__()
        self.step: int | None = None

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static("", id="weights-title")
            yield WeightsView()

    def on_mount(self) -> None:
        self.watch(self.app, "batch", self._batch_changed, init=False)
        self.call_after_refresh(self._batch_changed)

    @property
    def view(self) -> WeightsView:
        return self.query_one(WeightsView)

    def _steps(self) -> list[int]:
        steps = (self.app.run_info or {}).get("steps") or []
        return [s["index"] for s in steps if isinstance(s.get("index"), int)]

    def _batch_changed(self, *_: Any) -> None:
        step = self.app.current_step
        steps = self._steps()
        if step not in steps:
            step = steps[-1] if steps else None
        self._open(step)

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
        view.answered("main", {"params": view.params})

    def action_sort_next(self) -> None:
        table = self.view.query_one(ParamList)
        table.sort_column = (table.sort_column + 1) % len(COLUMNS)
        table.descending = table.sort_column >= 2  # norms: largest first
        self.view.fill()

    def action_sort_reverse(self) -> None:
        table = self.view.query_one(ParamList)
        table.descending = not table.descending
        self.view.fill()

    async def action_toggle_all(self) -> None:
        await self.view.toggle_all()

    def action_filters(self, delta: int) -> None:
        self.view.query_one(LayerView).page_filters(delta)
