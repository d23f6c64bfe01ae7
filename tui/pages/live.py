"""The Live page: what `tvis.catch` calls in a running job are sending, as it arrives.

The page runs its own receiving server (`tvis.live.server.LiveServer`) in this process, started
by `tvis tui --live` or by the user's `L` on the page — never by merely visiting it, so a tab
opened in passing does not take the port a later `tvis tui --live` needs. A table
lists one row per name (trend sparkline, newest value, shape, rate, counts, drops); the selected
name's value is drawn below as a heatmap and a histogram (a scalar shows its recent history), and
``[``/``]`` step back and forth through the kept history. A timer rebuilds the view four times a
second in a worker thread, so summarizing a large tensor never stalls the screen.
"""

from __future__ import annotations

import errno
import time
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Static

from tvis.live.address import parse_address
from tvis.live.codec import Array
from tvis.live.holder import port_holder
from tvis.live.server import LiveServer
from tvis.live.store import Entry
from tvis.store.printable import printable, printable_line
from tvis.tui import keys
from tvis.tui.live_image import HeatmapImage, fit
from tvis.tui.pages.page import Page
from tvis.tui.picture import Picture, Scale
from tvis.tui.widgets.lists import ListTable
from tvis.tui.widgets.live_bars import LiveBars
from tvis.tui.widgets.sparkline import sparkline

REFRESH_HZ = 4
"""View rebuilds per second: smooth for a job catching every step, cheap when nothing changes."""

TREND_WIDTH = 20
"""Catches shown in a row's sparkline: enough to see a trend, narrow enough for 80 columns."""

COLUMNS = ("name", "trend", "newest", "shape", "rate/s", "recv", "drops")


@dataclass(frozen=True)
class Row:
    """One name's line in the table, as text cells in COLUMNS order."""

    name: str
    cells: tuple[str, ...]


@dataclass(frozen=True)
class Detail:
    """What the lower half shows for one entry of the selected name."""

    title: str
    stats: str
    image: HeatmapImage | None
    bars: list[float]
    bars_caption: str
    bars_axis: tuple[float, float] | None = None


@dataclass(frozen=True)
class View:
    """Everything the page draws, built off the UI thread."""

    status: str
    rows: list[Row]
    selected: str | None
    detail: Detail | None
    pin: tuple[int, float] | None


@dataclass(frozen=True)
class Request:
    """What the view is built for: the selected name, the pinned entry (None: newest), the step
    to take through history, the sizes of the panes to fill, and the one rank shown (None: all)."""

    selected: str | None
    pin: tuple[int, float] | None
    step: int
    heat_cols: int
    heat_rows: int
    bar_cols: int
    rank: int | None = None


class LivePage(Page):
    """The Live page, receiving on ``address`` (``HOST:PORT``; port 0 picks a free one)."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.LIVE]

    DEFAULT_CSS = """
    LivePage #live-status { height: 1; background: $boost; }
    LivePage #live-names { height: auto; max-height: 45%; }
    LivePage #live-title { height: 1; text-style: bold; }
    LivePage #live-stats { height: 1; color: $text-muted; }
    LivePage #live-detail { height: 1fr; }
    LivePage #live-bars { width: 2fr; }
    LivePage #live-heatmap { width: 3fr; }
    """

    def __init__(self, address: str, token: str | None = None, listen: bool = True) -> None:
        super().__init__()
        self.listen = listen
        parsed = parse_address(address)
        self.host, self.port = parsed.host, parsed.port
        self.token = token or parsed.token
        self.server: LiveServer | None = None
        self.selected: str | None = None
        self.view: View | None = None
        self._pin: tuple[int, float] | None = None
        self._jumps = 0  # how often a key has reset the pin (`end`, a row, a rank)
        self._built_after = 0  # the jumps the view being built knows of
        self._step = 0
        self.rank: int | None = None  # only this sender rank's catches; None: every rank
        self._busy = False
        self._cells: dict[str, tuple[str, ...]] = {}
        self._details: dict[tuple, Detail] = {}

    def compose(self) -> ComposeResult:
        yield Static("Live", id="live-status")
        yield ListTable(id="live-names", cursor_type="row", zebra_stripes=True)
        with Vertical(id="live-detail"):
            yield Static("", id="live-title")
            yield Static("", id="live-stats")
            with Horizontal():
                with Vertical(id="live-heatmap"):
                    yield Picture()
                yield LiveBars(id="live-bars")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        if self.listen:
            self.action_listen()
        else:
            self._say(
                f"Live · not receiving · {keys.shown(self.app, 'live.listen')} listens on "
                f"{self.host}:{self.port} (where catches go)"
            )

    def _say(self, message: str) -> None:
        # Text, never markup: an address or an error may hold "[...]".
        self.query_one("#live-status", Static).update(Text(message))

    def action_listen(self) -> None:
        """Start receiving; a port already taken is named with its holder and a way out."""
        if self.server is not None:
            return
        try:
            server = LiveServer(self.host, self.port, self.token)
            server.start()
        except (OSError, ValueError) as exc:
            self._say(self._refusal(exc))
            return
        self.server = server
        self.set_interval(1 / REFRESH_HZ, self._tick)
        self._tick()

    def _refusal(self, exc: Exception) -> str:
        where = f"{self.host}:{self.port}"
        if not (isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE):
            return (
                f"Could not listen on {where} ({exc}); pick another with tvis tui --live HOST:PORT."
            )
        holder = port_holder(self.port) or "another program"
        self.port = 0  # the next try takes a free port
        return (
            f"{where} is already in use by {holder}; press {keys.shown(self.app, 'live.listen')} "
            "to listen on a free port instead and point senders at it with TVIS_SERVER."
        )

    def on_unmount(self) -> None:
        if self.server is not None:
            self.server.stop()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key is None:  # an empty table (nothing caught yet) "highlights" no row
            return
        name = event.row_key.value
        if name != self.selected:
            self.selected, self._pin, self._step = name, None, 0
            self._jumps += 1
            self._tick()

    def action_step(self, delta: int) -> None:
        """Move through the selected name's kept history (negative: older)."""
        self._step += delta
        self._tick()

    def action_newest(self) -> None:
        """Follow the newest value again."""
        self._pin, self._step = None, 0
        self._jumps += 1
        self._tick()

    def _history_keys(self) -> str:
        app = self.app
        older, newer = keys.shown(app, "live.older"), keys.shown(app, "live.newer")
        return (
            f"{keys.shown(app, 'live.rank')} rank filter · {older} {newer} older/newer, "
            f"{keys.shown(app, 'live.newest')} newest"
        )

    def action_rank_filter(self) -> None:
        """Show one rank's catches, the next rank's, …, then every rank's again."""
        if self.server is None:
            return
        ranks = ranks_seen(self.server.store)
        if self.rank is None:
            self.rank = ranks[0] if ranks else None
        else:
            later = [r for r in ranks if r > self.rank]
            self.rank = later[0] if later else None
        self._pin, self._step = None, 0
        self._jumps += 1
        self._tick()

    def _tick(self) -> None:
        if self.server is None or self._busy:
            return
        self._busy = True
        heatmap, bars = self.query_one("#live-heatmap"), self.query_one(LiveBars)
        request = Request(
            self.selected,
            self._pin,
            self._step,
            max(1, heatmap.size.width),
            max(2, (heatmap.size.height - 3) * 2),  # the legend and the note take 3 rows
            bars.bar_columns,
            self.rank,
        )
        self._step, self._built_after = 0, self._jumps
        self._build(request)

    @work(thread=True, group="live-view")
    def _build(self, request: Request) -> None:
        if self.server is None:
            return
        try:
            view = build_view(self.server, request, self._details)
        except Exception as exc:
            # A bug in summarizing one value must not take the page down; say so where seen.
            status = f"Live · could not draw the view: {exc}"
            view = View(status, [], request.selected, None, request.pin)
        try:
            self.app.call_from_thread(self._apply, view)
        except RuntimeError:
            pass  # The app closed while this view was being built.

    def _show_image(self, image: HeatmapImage | None) -> None:
        picture = self.query_one("#live-heatmap Picture", Picture)
        if image is None or not image.pixels.size:
            picture.placeholder(image.note if image else "")
            return
        picture.max_rows = max(1, self.query_one("#live-heatmap").size.height - 3)
        picture.show_values(image.pixels, Scale(image.vmin, image.vmax), legend=image.note)

    def _apply(self, view: View) -> None:
        self._busy = False
        if not self.query("#live-status"):
            return  # the app closed while this view was built: the page's widgets are gone
        self.view = view
        if view.selected == self.selected and self._built_after == self._jumps:
            # Not after a jump made while this view was built: it would put the old pin back.
            self._pin = view.pin
        self._say(f"{view.status} · {self._history_keys()}")
        table = self.query_one(DataTable)
        for row in view.rows:
            if row.name not in self._cells:
                table.add_row(*map(Text, row.cells), key=row.name)
            elif self._cells[row.name] != row.cells:
                for column, old, new in zip(COLUMNS, self._cells[row.name], row.cells, strict=True):
                    if old != new:
                        table.update_cell(row.name, column, Text(new), update_width=True)
            self._cells[row.name] = row.cells
        if self.selected is None and view.rows:
            self.selected = view.rows[0].name
        detail = view.detail
        self.query_one("#live-title", Static).update(Text(detail.title if detail else ""))
        self.query_one("#live-stats", Static).update(Text(detail.stats if detail else ""))
        self._show_image(detail.image if detail else None)
        self.query_one(LiveBars).show(
            detail.bars if detail else [],
            detail.bars_caption if detail else "",
            detail.bars_axis if detail else None,
        )


def build_view(server: LiveServer, request: Request, cache: dict[tuple, Detail]) -> View:
    """The page's content for ``request``; ``cache`` keeps details of entries already drawn."""
    store = server.store
    now = time.time()
    rows = []
    for name in store.names():
        info = store.info(name)
        if info is None:
            continue  # forgotten since names() was read (the server's total bound)
        kept = _of_rank(store.entries(name), request.rank)
        # Padded to full width: the table sizes a column by the cells it is first given.
        scalars = [e.digest().scalar for e in kept[-TREND_WIDTH:]]
        trend = sparkline(scalars, TREND_WIDTH).plain.rjust(TREND_WIDTH)
        latest = kept[-1] if kept else info.latest
        cells = (
            printable_line(name),  # names come from any peer: shown, never obeyed
            trend,
            _newest(latest) if kept else "",
            _shape(latest),
            f"{info.rate:.1f}",
            str(info.received),
            str(info.dropped),
        )
        rows.append(Row(name, cells))
    shown = "every rank" if request.rank is None else f"rank {request.rank} only"
    status = (
        f"Live · receiving on {server.address} · {len(rows)} names · {server.connected} "
        f"connected · {server.stats.refused} refused · {shown}"
    )
    selected = request.selected or (rows[0].name if rows else None)
    entries = _of_rank(store.entries(selected), request.rank) if selected else []
    if not entries:
        return View(status, rows, selected, None, None)
    index = _index(entries, request.pin, request.step)
    entry = entries[index]
    pin = None if index == len(entries) - 1 else (entry.seq, entry.received)
    key = (
        selected,
        entry.seq,
        entry.received,
        request.heat_cols,
        request.heat_rows,
        request.bar_cols,
        request.rank,
    )
    if key not in cache:
        cache.clear()  # One entry's detail at a time: the one on screen.
        cache[key] = _detail(entry, entries, index, request, now)
    return View(status, rows, selected, cache[key], pin)


def ranks_seen(store) -> list[int]:
    """The distributed ranks that have sent anything kept, in order."""
    return sorted({e.sender.get("rank") for n in store.names() for e in store.entries(n)} - {None})


def _of_rank(entries: list[Entry], rank: int | None) -> list[Entry]:
    """The entries a rank sent (all of them for None): trend, newest and detail follow it;
    rate, received and drops stay counts over every rank."""
    return entries if rank is None else [e for e in entries if e.sender.get("rank") == rank]


def _index(entries: list[Entry], pin: tuple[int, float] | None, step: int) -> int:
    """Where the shown entry is after ``step``: the pinned one if still kept, else the newest."""
    index = len(entries) - 1
    if pin is not None:
        index = next((i for i, e in enumerate(entries) if (e.seq, e.received) == pin), 0)
    return min(len(entries) - 1, max(0, index + step))


def _detail(entry: Entry, entries: list[Entry], index: int, request: Request, now: float) -> Detail:
    back = len(entries) - 1 - index
    where = "newest" if back == 0 else f"{back} back"
    sender = entry.sender
    origin = f"{sender.get('host')}:{sender.get('pid')}"
    if sender.get("rank") is not None:
        origin += f" rank {sender['rank']}"
    title = printable_line(
        f"{entry.name} · catch #{entry.seq} · {where} ({index + 1} of {len(entries)} kept) · "
        f"{_shape(entry)} {entry.dtype} · from {origin} · {now - entry.sent:.1f}s ago"
    )
    digest = entry.digest()
    if (
        isinstance(entry.value, Array)
        and entry.value.data.size > 1
        and digest.min is not None
        and digest.max is not None
    ):
        stats = (
            f"min {digest.min:.4g}  max {digest.max:.4g}  mean {digest.mean:.4g}  "
            f"std {digest.std:.4g}  norm {digest.scalar:.4g}  non-finite {digest.nonfinite}"
        )
        values = entry.value.numeric()
        image = fit(values, request.heat_cols, request.heat_rows, digest.min, digest.max)
        bars, caption = _histogram(values, digest.min, digest.max, request.bar_cols)
        return Detail(title, stats, image, bars, caption, (0.0, float(max(bars, default=0))))
    if digest.scalar is not None:
        history = [e.digest().scalar for e in entries[: index + 1]][-request.bar_cols :]
        finite = [v for v in history if v is not None and np.isfinite(v)]
        low = min(finite, default=0.0)
        bars = [v - low if v is not None and np.isfinite(v) else 0.0 for v in history]
        high = max(finite, default=0.0)
        caption = f"last {len(history)} values, from {low:.4g} up to {max(finite, default=0.0):.4g}"
        return Detail(title, f"value {digest.scalar:.6g}", None, bars, caption, (low, high))
    return Detail(title, printable(_describe(entry.value)), None, [], "")


def _histogram(values: np.ndarray, low: float, high: float, bins: int) -> tuple[list[float], str]:
    flat = values.reshape(-1)
    if flat.dtype.kind == "c":
        flat = np.abs(flat)
    if flat.dtype.kind == "f":
        flat = flat[np.isfinite(flat)]
    counts, _ = np.histogram(flat, bins=bins, range=(low, high) if high > low else None)
    return counts.tolist(), f"histogram of {flat.size} finite values, {low:.4g} to {high:.4g}"


def _newest(entry: Entry) -> str:
    digest = entry.digest()
    if entry.kind == "str":
        return _clip(entry.value, 12)
    if entry.kind == "tree":
        return _clip(_describe(entry.value), 12)
    if digest.scalar is None:
        return ""
    label = "" if entry.kind == "scalar" or entry.value.data.size == 1 else "‖x‖ "
    return f"{label}{digest.scalar:.4g}"


def _shape(entry: Entry) -> str:
    shape = entry.shape
    if shape is None:
        return entry.kind
    return "×".join(map(str, shape)) or "0-d"


def _describe(value: object) -> str:
    """A one-line outline of a non-array value: strings clipped, trees by their leaves."""
    if isinstance(value, Array):
        return f"{'×'.join(map(str, value.data.shape)) or '0-d'} {value.dtype}"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_describe(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_describe(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner})"
    return _clip(repr(value), 40)


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
