"""Explore: the full debugger view of a recording — call tree, inspector, source, layers,
timeline, step and samples, kept on the same call, batch and followed sample.

Layout follows the terminal: three columns when wide (tree · inspector · one more pane),
two when medium (tree · one pane), one pane at a time when compact (80×24). The pane bar
names every pane with its key; a pane fetches its data only while it is visible.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Horizontal
from textual.geometry import Size
from textual.timer import Timer
from textual.widget import AwaitMount, Widget
from textual.widgets import Static
from textual.worker import get_current_worker

from tvis.agent.replies import CallsAnswer
from tvis.tui import colors, keys
from tvis.tui.anomaly_start import opening_event
from tvis.tui.hidden_layout import draw_hidden
from tvis.tui.messages import GotoCall, GotoSource, Selected, Selection
from tvis.tui.pages.explore_layout import (
    SHARES,
    last_pane_width,
    layout_for,
    shown_inspector_picture_width,
)
from tvis.tui.pages.page import Page
from tvis.tui.pane import Asks
from tvis.tui.widgets.call_tree import CallTree, first_interesting
from tvis.tui.widgets.calls_pane import CallsPane
from tvis.tui.widgets.inspector import Inspector
from tvis.tui.widgets.layers_table import LayersPane, LayersTable
from tvis.tui.widgets.samples_view import SamplesView, SampleTable, fetch_samples
from tvis.tui.widgets.source_view import SourcePane, SourceView, highlight
from tvis.tui.widgets.step_view import ParamTable, StepView
from tvis.tui.widgets.timeline import Timeline

PANES = ("calls", "inspector", "source", "layers", "timeline", "step", "samples")
"""Each pane is brought up by the binding ``explore.<pane>`` (see keys.EXPLORE)."""
SIDE = ("source", "layers", "timeline", "step", "samples")
"""Panes that share the last column (wide) or the right column (medium, with inspector)."""


NEIGHBOURS_AFTER_S = 0.3
"""Idle time after the selection last changed before the batches beside it are asked for."""


def fetch_beside(
    data: Any,
    run: str,
    batches: list[int],
    call: int | None,
    of_batch: int | None,
    inspect: Callable[[Any, list[Selection]], None],
    also: Callable[[Any, int], None] | None = None,
) -> None:
    """Ask ``data`` for what ``.``/``,`` to each of ``batches`` will show (run in a worker
    thread; in the background, behind every request a key is waiting for): the tree's roots, the pages on the way to the call at ``call``'s place
    (``call`` of batch ``of_batch``: the call the switch keeps selected; without one, the
    first interesting root, opened), and what the inspector
    shows for it (``inspect``: ``Inspector.prefetcher``'s function); then ``also`` (the
    client, the batch): what other panes on screen show for it."""
    worker = get_current_worker()
    for batch in batches:
        if worker.is_cancelled:
            return
        roots = data.prefetch_later("calls", **CallTree.page_request(run, batch, -1))
        rows = roots.calls if isinstance(roots, CallsAnswer) else ()
        if not rows:
            continue
        first = rows[first_interesting(rows)]
        shown, parents = first.id, [first.id] if first.n_children else []
        if call is not None and of_batch is not None:
            there = data.prefetch_later(
                "counterpart", run=run, batch=of_batch, call=call, other=batch
            )
            if isinstance(there, dict) and there.get("exact"):
                shown = there["call"]
                data.prefetch_later("call", run=run, batch=batch, call=shown)
                parents = [*parents, *(there.get("path") or [])]
        for parent in dict.fromkeys(parents):
            if worker.is_cancelled:
                return
            data.prefetch_later("calls", **CallTree.page_request(run, batch, parent))
        inspect(data, [Selection("call", batch=batch, call=shown)])
        if also is not None and not worker.is_cancelled:
            also(data, batch)


def fetch_panes(data: Any, run: str, batch: int, step: int | None, sample: int) -> None:
    """Warm ``data``'s cache, in the background, with what `a` (the Samples pane) and `p`
    or `m` (the step's pane, its tree) show for this ``batch`` when first opened."""
    fetch_samples(data, batch, run=run, sample=sample)
    if step is not None:
        data.prefetch_later("step", run=run, step=step)


def fetch_source(data: Any, run: str, wanted: list[str]) -> None:
    """Warm ``data``'s cache, in the background, with what the Source pane shows when `s`,
    `d` or `u` opens it: the run's source files, then each of ``wanted`` (the selected
    call's definition and call site) that is one of them, else the first file, as
    ``_sources_arrived`` picks — each highlighted too. Answers held cost nothing again."""
    files = data.prefetch_later("sources", run=run)
    if not isinstance(files, list) or not files:
        return
    for file in [f for f in wanted if f in files] or files[:1]:
        source = data.prefetch_later("source", run=run, file=file)
        if isinstance(source, dict) and source.get("text"):
            highlight(source["text"])


class PaneBar(Static):
    """Which panes exist, their keys, which are on screen, and the batch/step mode."""

    DEFAULT_CSS = "PaneBar { height: 1; padding: 0 1; }"

    _shown: Text | None = None

    def show(self, visible: list[str], focused: str | None, mode: str) -> None:
        text = Text()
        for name in PANES:
            on_screen = name in visible
            style = Style(
                bold=on_screen,
                reverse=name == focused,
                dim=not on_screen,
                meta={"@click": f"screen.pane('{name}')"},
            )
            text.append(f" {keys.shown(self.app, f'explore.{name}')} {name} ", style=style)
        text.append(f"   {mode} mode ({keys.shown(self.app, 'explore.mode')})", style=colors.MUTED)
        if text != self._shown:  # a focus moved where the bar already said it would
            self._shown = text
            self.update(text, layout=False)  # one row whatever it says: a repaint, not a layout


class ExplorePage(Asks, Page):
    """The Explore page."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.EXPLORE]

    DEFAULT_CSS = """
    ExplorePage #panes { height: 1fr; }
    ExplorePage #panes > * { height: 1fr; }
    ExplorePage #panes > .-divided { border-right: vkey $panel-lighten-2; }
    """

    def __init__(self) -> None:
        super().__init__()
        self.layout_name = "medium"
        self.front = "calls"
        self.side = "source"
        self.right = "inspector"
        self.mode = "batch"
        self.selection: Selection | None = None
        self._loaded: dict[str, Any] = {}
        self._source_files: list[str] | None = None
        self._tree_step: int | None = None  # the step whose tree was asked for last
        # The panes built so far, by name: looked up on every key, where a DOM query would
        # walk the page's few hundred widgets each time.
        self._panes: dict[str, Widget] = {}
        self._highlighter_warm = False
        self._mounting: dict[str, AwaitMount] = {}  # panes built ahead, not mounted yet
        self._drawn_ahead: dict[str, Size] = {}  # hidden panes drawn ahead, at that size
        self._source_behind = False  # the selection moved while the Source pane was hidden
        self._neighbours_timer: Timer | None = None
        self._beside_due = False  # the selection rested while the page was hidden

    def compose(self) -> ComposeResult:
        # The tree and the inspector always exist; the other panes are built in quiet spells
        # once the first screen is up (``build_pane_ahead``), or by their first key.
        yield PaneBar()
        with Horizontal(id="panes"):
            yield self._kept(CallsPane(id="calls"))
            yield self._kept(Inspector(id="inspector"))
        # Sized for this terminal before the first layout: laid out 1fr each, the inspector
        # asked its cards' pictures at that width, then again at its own once `_start` set it.
        self.layout_name = layout_for(self.app.size.width)
        self._size_panes(self.visible_panes())

    def _kept(self, pane: Widget) -> Widget:
        self._panes[pane.id or ""] = pane
        return pane

    def warm_ahead(self) -> bool:
        """Pygments builds its Python lexer on first use (~40 ms, the most of a first `s`
        after the pane's own build): done once, in a quiet spell, after every page is built
        ahead (the app calls this). False once done."""
        if self._highlighter_warm or not self.is_mounted:
            return False
        self._highlighter_warm = True
        highlight("")
        return True

    def build_pane_ahead(self) -> bool:
        """Build the next pane not built yet, hidden, and load it with this batch, in a
        quiet spell (the app calls this once the help is drawn): a pane's first key then
        only shows it (`a`, `y`, `s`: 115–160 ms → 30–75 ms). False once every pane is."""
        name = next((n for n in PANES if self._pane(n) is None), None)
        if name is None or not self.is_mounted:
            return False
        pane = self._build_pane(name)
        pane.display = False
        self._mounting[name] = self._mount_pane(pane)
        self.run_worker(self._loaded_when_mounted(name), group="panes-ahead")
        return True

    def draw_pane_ahead(self) -> bool:
        """Lay out a hidden pane at the size of the slot it will be shown in and draw it
        there, hidden (``hidden_layout``), in a quiet spell after the panes are built (the
        app calls this): its first showing then resizes nothing and draws only what
        changed since (`a` 60–73 → 39–44 ms, `p` 33–37 → 26–29). False when every hidden pane
        is drawn at its slot's size. Only while the page is on screen: a page hidden
        behind another one keeps its quiet spells for that page's own fetching ahead."""
        if not self.is_current:
            return False
        slot = self._slot_size()
        if slot is None:
            return False
        name = next((n for n in PANES if self._drawable_ahead(n, slot)), None)
        if name is None:
            return False
        draw_hidden(self._panes[name], slot)
        self._drawn_ahead[name] = slot
        return True

    def _drawable_ahead(self, name: str, slot: Size) -> bool:
        pane = self._pane(name)
        return (
            pane is not None
            and not pane.display
            and name not in self._mounting
            and self._drawn_ahead.get(name) != slot
        )

    def _slot_size(self) -> Size | None:
        """The size a hidden pane will have once shown: the last pane on screen's (the one
        that takes the rest of the width, as a pane brought up does); None before the
        page is laid out."""
        if not self.is_mounted:
            return None
        shown = self._pane(self.visible_panes()[-1])
        size = shown.outer_size if shown is not None and shown.display else None
        return size if size else None

    def panes_left_ahead(self) -> bool:
        """Whether a pane is still to be built or drawn ahead."""
        slot = self._slot_size()
        return any(
            self._pane(name) is None or (slot is not None and self._drawable_ahead(name, slot))
            for name in PANES
        )

    async def _loaded_when_mounted(self, name: str) -> None:
        await self._mounting[name]
        del self._mounting[name]
        self._ensure_loaded(name)

    def _mount_pane(self, pane: Widget) -> AwaitMount:
        """Mount ``pane`` in its place among the panes mounted so far."""
        before = [
            p for n in PANES[: PANES.index(pane.id or "")] if (p := self._pane(n)) and p.is_attached
        ]
        return self.query_one("#panes", Horizontal).mount(pane, after=before[-1])

    def _build_pane(self, name: str) -> Widget:
        if name == "samples":
            width = last_pane_width(self.app.size.width)
            return self._kept(SamplesView(self.app.image_mode, width=width, id=name))
        kinds = {"source": SourcePane, "layers": LayersPane, "timeline": Timeline, "step": StepView}
        return self._kept(kinds[name](id=name))

    def on_mount(self) -> None:
        self.watch(self.app, "batch", self._batch_changed, init=False)
        self.watch(self.app, "run_info", self._run_info_changed, init=False)
        self.watch(self.app, "run_name", self._run_changed, init=False)
        # After the first refresh every pane has composed its own children.
        self.call_after_refresh(self._start)

    async def _start(self) -> None:
        self.layout_name = layout_for(self.app.size.width)
        await self._apply_layout()
        self._batch_changed()
        self.calls.call_tree.focus()
        event = opening_event(self.app.run_info)  # a watched run opens on its anomaly
        if event and event.call is not None and event.batch == self.app.batch:
            self._reveal(event.batch, event.call, None)

    # -- panes ---------------------------------------------------------------------------

    @property
    def calls(self) -> CallsPane:
        pane = self._panes["calls"]
        assert isinstance(pane, CallsPane)
        return pane

    @property
    def inspector(self) -> Inspector:
        pane = self._panes["inspector"]
        assert isinstance(pane, Inspector)
        return pane

    def visible_panes(self) -> list[str]:
        if self.layout_name == "wide":
            return ["calls", "inspector", self.side]
        if self.layout_name == "medium":
            return ["calls", self.right]
        return [self.front]

    def _pane(self, name: str) -> Widget | None:
        """Pane ``name`` if it has been built."""
        return self._panes.get(name)

    def _focus_target(self, name: str) -> Widget:
        if name == "calls":
            hits = self.calls.hits
            return hits if hits.has_class("-shown") else self.calls.call_tree
        targets = {
            "source": SourceView,
            "layers": LayersTable,
            "step": ParamTable,
            "samples": SampleTable,
        }
        if name in targets:
            return self.query_one(targets[name])
        return self._pane(name) or self.calls.call_tree

    async def _apply_layout(self, focus: str | None = None) -> None:
        """Show this layout's panes, building those not built yet, and focus pane ``focus``
        (by default the front pane, if the focus is in a pane no longer shown)."""
        visible = self.visible_panes()
        new = [self._build_pane(name) for name in visible if self._pane(name) is None]
        # Sized and the panes it replaces hidden before it is mounted: mounted first, it
        # squeezed the inspector for a frame, whose cards then drew and asked for their
        # pictures at that width, and again at their own when `i` brought it back.
        self._size_panes(visible)
        # One frame: a pane drawn empty while it mounts, then with its (often cached)
        # answer, cost a layout and a render more.
        with self.app.batch_update():
            for pane in new:
                await self._mount_pane(pane)
            for name in visible:  # built ahead, still mounting: composed before it is focused
                if (mounting := self._mounting.get(name)) is not None:
                    await mounting
            if focus is None and self._focused_pane() not in visible:
                focus = visible[0] if self.front not in visible else self.front
            if focus is not None:
                self._focus_target(focus).focus()
            # The bar says the focus to come: Textual moves it after this handler, and a bar
            # drawn with the old one was drawn again a frame later.
            self._apply_layout_bar(focus)
            for name in visible:
                self._ensure_loaded(name)
            if "source" in visible and self._source_behind:
                self._follow_in_source()

    def _size_panes(self, visible: list[str]) -> None:
        """Show the ``visible`` panes built so far at this layout's widths, hide the rest."""
        shares = SHARES.get(self.layout_name, {})
        self.inspector.picture_width_when_shown = shown_inspector_picture_width(self.app.size.width)
        for name in PANES:
            pane = self._pane(name)
            if pane is None:
                continue
            pane.display = name in visible
            pane.set_class(name in visible[:-1], "-divided")
            pane.styles.width = f"{shares[name]}%" if name in shares else "1fr"

    def _focused_pane(self) -> str | None:
        focused = self.focused
        if focused is None:
            return None
        ancestors = focused.ancestors_with_self
        return next((n for n in PANES if (p := self._pane(n)) is not None and p in ancestors), None)

    async def on_resize(self) -> None:
        width = self.app.size.width
        self.inspector.picture_width_when_shown = shown_inspector_picture_width(width)
        layout = layout_for(width)
        if layout != self.layout_name:
            self.layout_name = layout
            await self._apply_layout()
            self._refresh_summary()

    def on_descendant_focus(self) -> None:
        self._apply_layout_bar()

    def _apply_layout_bar(self, focused: str | None = None) -> None:
        focused = focused or self._focused_pane()
        self.query_one(PaneBar).show(self.visible_panes(), focused, self.mode)

    async def action_pane(self, name: str) -> None:
        """Bring pane ``name`` on screen and focus it."""
        if self.layout_name == "wide" and name in SIDE:
            self.side = name
        elif self.layout_name == "medium" and name != "calls":
            self.right = name
        self.front = name
        await self._apply_layout(focus=name)

    async def action_back(self) -> None:
        """Escape: out of a pane, back to the call tree (the one pane at 80×24)."""
        if self._focused_pane() != "calls" or self.front != "calls":
            await self.action_pane("calls")

    # -- data ----------------------------------------------------------------------------

    def _run_changed(self, *_: Any) -> None:
        """Another run was opened: forget everything that belonged to the last one."""
        self._loaded.clear()
        self._source_files = None
        self.selection = None
        self.mode = "batch"
        for pane in self.query(SourcePane):
            pane.reset()

    def _run_info_changed(self, *_: Any) -> None:
        self._refresh_summary()

    def _batch_changed(self, *_: Any) -> None:
        app = self.app
        if app.run_name is None:
            return
        for name in ("layers", "timeline", "samples", "step"):
            self._loaded.pop(name, None)
        if self.mode == "step":
            self._show_step_mode()
        else:
            self.calls.call_tree.show_batch(app.run_name, app.batch)
        self._refresh_summary()
        for name in self.visible_panes():
            self._ensure_loaded(name)
        if (
            self.selection is not None
            and self.selection.kind == "call"
            and self.selection.call is not None
        ):
            # The same call in the new batch is found by where it stands in the tree: its
            # id there may be another call's (a data item that ran one transform more).
            held = self._counterpart_held(self.selection, app.batch)
            if held is None or not self._reveal_held(app.batch, held):
                self._reveal(app.batch, self.selection.call, None, self.selection.batch)

    def _refresh_summary(self) -> None:
        app = self.app
        info = app.batch_info or {}
        if self.mode == "step":
            summary = f"step {app.current_step} · its micro-batches and parameters"
        else:
            summary = f"batch {app.batch} · {info.get('n_calls', '?')} calls"
        if self.layout_name == "compact":
            summary += f" · {keys.shown(self.app, 'tree.select')} inspects"
        self.calls.set_summary(summary)

    def _ensure_loaded(self, name: str) -> None:
        app = self.app
        if app.run_name is None or self._pane(name) is None:
            return
        key = (app.run_name, app.batch if name != "step" else app.current_step)
        if (
            name in ("layers", "timeline", "samples", "step", "source")
            and self._loaded.get(name) == key
        ):
            return
        if name == "layers":
            table = self.query_one(LayersTable)
            if self.selection is not None and self.selection.kind == "call":
                table.follow = self.selection.call  # opened on the selected call's row
            table.load(app.batch)
        elif name == "timeline":
            self.query_one(Timeline).load(app.batch)
        elif name == "samples":
            self.query_one(SamplesView).load(app.batch)
        elif name == "step":
            self.query_one(StepView).load(app.current_step)
        elif name == "source":
            self.query_one(SourceView).batch_index = app.batch
            if self.query_one(SourceView).file is None:
                self._open_first_source()
        else:
            return
        self._loaded[name] = key

    def _open_first_source(self) -> None:
        self.ask("sources", tag="sources", run=self.app.run_name)

    def _sources_arrived(self, files: list[str]) -> None:
        self._source_files = list(files)
        pane = self.query_one(SourcePane)
        pane.set_files(self._source_files)
        if pane.requested is not None:
            return  # a jump (d / u / the selection) already chose the file
        wanted = self._selection_file("def")
        if wanted and wanted[0] in files:
            pane.show(*wanted)
        elif files:
            pane.show(files[0])

    def _show_step_mode(self) -> None:
        step = self.app.current_step
        if step is None:
            self.notify("this batch belongs to no recorded optimizer step", timeout=4)
            self.mode = "batch"
            if self.app.run_name is not None:
                self.calls.call_tree.show_batch(self.app.run_name, self.app.batch)
            return
        self._load_step_tree(step)

    def _load_step_tree(self, step: int) -> None:
        self._tree_step = step
        self.ask("step", tag="step-tree", run=self.app.run_name, step=step)

    def _step_arrived(self, record: dict[str, Any]) -> None:
        if self.app.run_name is None:
            return
        info = record.get("step") or {}
        wanted = set(info.get("batches") or [])
        batches = [
            b for b in (self.app.run_info or {}).get("batches") or [] if b.get("index") in wanted
        ]
        self.calls.call_tree.show_step(
            self.app.run_name,
            {**info, "index": self._tree_step},
            batches,
            record.get("params") or [],
        )

    def answered(self, tag: str, result: Any) -> None:
        if tag == "sources":
            self._sources_arrived(result)
        else:
            self._step_arrived(result)

    def action_toggle_mode(self) -> None:
        self.mode = "step" if self.mode == "batch" else "batch"
        self._batch_changed()
        self._apply_layout_bar()

    # -- selection -----------------------------------------------------------------------

    @on(Selected)
    async def _selected(self, message: Selected) -> None:
        self.selection = message.selection
        self.inspector.show(message.selection)
        self.inspector.prefetch(self.calls.call_tree.beside_cursor())
        if message.selection.kind == "call" and message.selection.call is not None:
            for timeline in self.query(Timeline):
                timeline.select_call(message.selection.call)
            for table in self.query(LayersTable):
                if message.selection.batch in (None, table.batch_index):
                    table.show_call(message.selection.call)
                else:  # a batch switch, the table hidden: it opens on the call when shown
                    table.follow = message.selection.call
        if message.open_inspector and "inspector" not in self.visible_panes():
            await self.action_pane("inspector")
        self._follow_in_source()
        if self._neighbours_timer is not None:
            self._neighbours_timer.stop()
        self._neighbours_timer = self.set_timer(NEIGHBOURS_AFTER_S, self._prefetch_beside)

    def _prefetch_beside(self) -> None:
        """Once the selection rests, fetch what the tree's first and last rows show (`home`,
        `end`), the source `s` and `d` open on, the samples and step `a`, `p` and `m`
        open on, and the batches beside this one as
        ``.``/``,`` will show them, so that those keys draw from the client's cache in one
        frame; and mount the inspector's layer views, hidden, for the first layer shown."""
        self._neighbours_timer = None
        if not self.is_current:  # built ahead, or left: asked for when next shown
            self._beside_due = True
            return
        # Not while built hidden: it would compete with the page the user is on.
        self.inspector.mount_layer_views()
        app = self.app
        data, run, position = app.data, app.run_name, app.batch_position
        if data is None or run is None or position is None or self.mode != "batch":
            return
        indices = app.batch_indices
        beside = [indices[p] for p in (position + 1, position - 1) if 0 <= p < len(indices)]
        selection = self.selection
        call = selection.call if selection is not None and selection.kind == "call" else None
        of_batch = selection.batch if selection is not None else None
        inspect = self.inspector.prefetcher()
        ends = self.calls.call_tree.at_ends()  # what `home` and `end` show, this batch's
        also = None
        if "samples" in self.visible_panes():
            also = partial(fetch_samples, run=run, sample=app.sample)
        files = [where[0] for which in ("def", "site") if (where := self._selection_file(which))]
        wanted = list(dict.fromkeys(files))  # the definition and call site, once each
        batch, step, sample = app.batch, app.current_step, app.sample

        def fetch() -> None:
            inspect(data, ends)
            fetch_source(data, run, wanted)
            fetch_panes(data, run, batch, step, sample)
            fetch_beside(data, run, beside, call, of_batch, inspect, also)

        self.run_worker(
            fetch,
            group="batch-neighbours",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def key_handled(self) -> None:
        """Any key: what ``.``/``,`` show is fetched again once keys rest. A key may change
        it without moving the selection (a pane opened, the inspector's view), and what
        the client had cached may have been pushed out since; answers it still holds cost
        nothing (``Data`` answers them without asking the agent)."""
        if self._neighbours_timer is not None:
            self._neighbours_timer.stop()
        self._neighbours_timer = self.set_timer(NEIGHBOURS_AFTER_S, self._prefetch_beside)

    def on_screen_resume(self) -> None:
        if self._beside_due:
            self._beside_due = False
            self._neighbours_timer = self.set_timer(NEIGHBOURS_AFTER_S, self._prefetch_beside)

    def _follow_in_source(self) -> None:
        """Keep a visible Source pane on the selected call's definition (its call site when
        the definition is library code, as a loss function's is), in whatever file that is,
        unless the user is reading the source themselves."""
        if self._focused_pane() == "source":
            return
        if "source" not in self.visible_panes():
            self._source_behind = True  # built ahead or hidden: it follows when shown
            return
        self._source_behind = False
        files = self._source_files or []
        for which in ("def", "site"):
            where = self._selection_file(which)
            if where and where[0] in files:
                self.query_one(SourcePane).show(*where)
                return

    @on(GotoCall)
    async def _goto_call(self, message: GotoCall) -> None:
        batch = self.app.batch if message.batch is None else message.batch
        if batch != self.app.batch:
            self.app.batch = batch
        self._reveal(batch, message.call, message.path)
        if self.layout_name == "compact" and self.front != "calls":
            await self.action_pane("inspector")

    def _counterpart_held(self, selection: Selection, batch: int) -> int | None:
        """The call of ``batch`` at the selected call's place, when the client holds the
        answer (fetched while the selection rested: ``fetch_beside``); the selected call
        itself when it is of ``batch`` already. None: to be asked."""
        call = selection.call
        if call is None or selection.batch in (None, batch):
            return call
        source = self.app.data
        if source is None:
            return None
        found, reply = source.peek(
            "counterpart", run=self.app.run_name, batch=selection.batch, call=call, other=batch
        )
        if not found or not isinstance(reply, dict) or not reply.get("exact"):
            return None  # a near match is shown by ``_reveal``, which says so
        return int(reply["call"])

    def reveal_now(self, batch: int, call: int) -> bool:
        """Select ``call`` of the batch shown now, before a page switch to Explore draws
        (Loss' `u`), when the client holds everything on the way (``_reveal_held``):
        the switch then draws the call in its first frame, not the old selection and then
        the call. False when it must be asked for (a ``GotoCall`` then)."""
        if not self.is_mounted or self.mode != "batch" or batch != self.app.batch:
            return False
        if self.layout_name == "compact":
            return False  # ``_goto_call`` brings the inspector forward too
        if not self._reveal_held(batch, call):
            return False
        self.workers.cancel_group(self, "reveal")  # an older reveal would move it again
        return True

    def _reveal_held(self, batch: int, call: int) -> bool:
        """Put the cursor on ``call`` of ``batch`` and inspect it now, in the key's frame,
        when the client holds its record and the tree's pages on the way (fetched while
        the selection rested: ``fetch_beside``); the tree's ``Selected`` that follows finds
        it shown. False when something must be asked for (``_reveal`` then)."""
        source = self.app.data
        if source is None:
            return False
        found, record = source.peek("call", run=self.app.run_name, batch=batch, call=call)
        if not found or not isinstance(record, dict):
            return False
        node = self.calls.call_tree.reveal_held(batch, call, list(record.get("path") or []))
        selection = CallTree.selection_of(node) if node is not None else None
        if selection is None:
            return False
        self.selection = selection
        self.inspector.show(selection)
        return True

    @work(exclusive=True, group="reveal", exit_on_error=False)
    async def _reveal(
        self, batch: int, call: int, path: list[int] | None, of_batch: int | None = None
    ) -> None:
        """Select ``call`` of ``batch`` in the tree (``path``: its ancestors, asked for when
        None); with ``of_batch`` another batch, ``call`` is that batch's, and the call at
        its place in ``batch``'s tree is selected (else its nearest ancestor there)."""
        if of_batch is not None and of_batch != batch:
            moved = await self._counterpart(of_batch, call, batch)
            if moved is None:
                return
            call, path = moved
        if path is None:
            source = self.app.data
            if source is None:
                return  # not connected yet: nothing to find it in
            request = {"run": self.app.run_name, "batch": batch, "call": call}
            try:
                found, record = source.peek("call", **request)  # prefetched: no thread hop
                if not found:
                    record = await asyncio.to_thread(source.call, "call", **request)
            except Exception as e:
                self.notify(
                    f"cannot find call {call} in batch {batch}: {e}", severity="warning", timeout=4
                )
                return
            path = record.get("path") or []
        found = await self.calls.call_tree.reveal(batch, call, list(path))
        if not found:
            self.notify(
                f"call {call} is not in the tree of batch {batch}", severity="warning", timeout=4
            )

    async def _counterpart(
        self, of_batch: int, call: int, batch: int
    ) -> tuple[int, list[int]] | None:
        """``counterpart``'s call and path, saying so when it is only the nearest ancestor
        (None, said too, when ``batch`` has nothing of the way to the call)."""
        source = self.app.data
        if source is None:
            return None
        request = {"run": self.app.run_name, "batch": of_batch, "call": call, "other": batch}
        try:
            found, reply = source.peek("counterpart", **request)
            if not found:
                reply = await asyncio.to_thread(source.call, "counterpart", **request)
        except Exception as e:
            self.notify(
                f"cannot find call {call} of batch {of_batch} in batch {batch}: {e}",
                severity="warning",
                timeout=4,
            )
            return None
        if reply.get("call") is None:
            self.notify(f"batch {batch} has no call where it stood", timeout=4)
            return None
        if not reply.get("exact"):
            self.notify(f"batch {batch} did not run that call: its nearest caller", timeout=4)
        return reply["call"], list(reply.get("path") or [])

    @on(GotoSource)
    async def _goto_source(self, message: GotoSource) -> None:
        await self.action_pane("source")
        self.query_one(SourcePane).show(message.file, message.line)

    def _selection_file(self, which: str) -> tuple[str, int] | None:
        row = (self.selection.row if self.selection else None) or {}
        loc = row.get(which)
        if isinstance(loc, (list, tuple)) and len(loc) == 2 and isinstance(loc[0], str):
            return loc[0], int(loc[1]) if isinstance(loc[1], int) else 1
        return None

    def action_goto_source(self, which: str) -> None:
        where = self._selection_file(which)
        label = "definition" if which == "def" else "call site"
        if where is None:
            self.notify(f"the selected call has no recorded {label}", timeout=3)
            return
        if self._source_files is not None and where[0] not in self._source_files:
            self.notify(f"{where[0]} is library code, not in the run's source snapshot", timeout=4)
            return
        self.post_message(GotoSource(*where))

    # -- search and filter ---------------------------------------------------------------

    async def action_search(self) -> None:
        if "calls" not in self.visible_panes():
            await self.action_pane("calls")
        self.calls.open_search()

    async def action_cycle_filter(self) -> None:
        if "calls" not in self.visible_panes():
            await self.action_pane("calls")
        self.calls.cycle_filter()
