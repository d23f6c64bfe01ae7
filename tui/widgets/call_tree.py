"""The call tree: a batch's calls in call order, loaded lazily a page at a time.

Only the rows on screen are ever fetched: a node's children arrive when it is expanded, in
pages, with a "… more" row that loads the next page when the cursor reaches it. Runs of
repeated siblings (``blocks.0`` … ``blocks.11``) fold into one group row. In step mode the
roots are the step's micro-batches and its parameters.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import BindingType
from textual.cache import LRUCache
from textual.geometry import Region
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets.tree import TreeNode
from textual.worker import WorkType

from tvis.agent.protocol import AgentError, ConnectionLost
from tvis.agent.replies import CallRowView, CallsAnswer
from tvis.tui import colors, fmt, keys, marks
from tvis.tui.messages import Selected, Selection
from tvis.tui.widgets.sparkline import EIGHTHS

if TYPE_CHECKING:
    from textual import getters

    from tvis.tui.app import TvisApp

PAGE = 200
"""Children fetched per request: several screens of rows, one small reply (~60 KB)."""

GROUP_MIN = 3
"""Repeated siblings fold into a group from this many on; two are easier read unfolded."""

SHAPE_CELLS = 12
"""Room for an output shape such as ``32×16×16×16``; longer shapes are clipped."""

SHAPE_MIN_WIDTH = 36
BAR_MIN_WIDTH = 58
"""Row widths from which the shape, then the time bar, are shown: names come first."""

BAR_CELLS = 6

KIND_GLYPH = {"module": "■", "function": "ƒ", "loss": "Σ", "data": "◆", "optimizer": "↻"}

_INDEXED = re.compile(r"^(.*)\.(\d+)$")


@dataclass
class Node:
    """What a tree row stands for."""

    kind: str  # call | group | more | dropped | loading | batch | params | param | message
    batch: int | None = None
    call: CallRowView | None = None  # a call row (kind call)
    row: dict[str, Any] = field(default_factory=dict)  # a batch's BatchInfo, a ParamRecord
    parent_call: int = -1  # whose children a "more" row (or a batch row) pages through
    offset: int = 0  # for "more": where the next page starts
    loaded: bool = False
    rows: Sequence[CallRowView] = ()  # a group's members
    step: int | None = None
    text: str = ""
    opening: bool = False  # opened by the tree itself, on the way to the model's layers


OPENED_WRAPPERS = 3
"""At most this many containers are opened per level on the way to the first layers."""

NOT_CONNECTED = "not connected to an agent yet."

RATIO_HEADER = "‖Δw‖/‖w‖"
"""What the number beside each parameter in step mode is."""


def dropped_label(site: dict[str, Any]) -> str:
    """The row standing for calls the recorder counted but did not record: past the call
    cap, or repeats of a forward a light group had already recorded in full."""
    count = site.get("count")
    count = f"{count:,}" if isinstance(count, int) else "?"
    if site.get("why") == "repeat":
        first = site.get("recorded")
        first = f"the first {first}" if isinstance(first, int) else "the first ones"
        why = f"repeated forward: {first} from its line recorded in full, these counted"
        return f"×{count} more {site.get('name')} ({why}, not recorded)"
    return f"×{count} more {site.get('name')} (past the call cap: counted, not recorded)"


def first_interesting(rows: Sequence[CallRowView | None]) -> int:
    """Where the cursor starts: the model's forward call if it is a root (what a user opens
    a run to see), else the first row."""
    return next((i for i, r in enumerate(rows) if r is not None and r.kind == "module"), 0)


def group_runs(rows: Sequence[CallRowView]) -> list[CallRowView | Sequence[CallRowView]]:
    """Rows with runs of repeated siblings gathered into lists: same class and either
    consecutive numbered names (``blocks.3``, ``blocks.4``) or the very same name; or
    consecutive calls of the data pipeline, whatever they are (a library dataset's items
    are each a few transform calls, not one ``__getitem__`` of the project's)."""
    out: list[CallRowView | Sequence[CallRowView]] = []
    i = 0
    while i < len(rows):
        j = i + 1
        while j < len(rows) and _continues(rows[j - 1], rows[j]):
            j += 1
        if j - i >= GROUP_MIN:
            out.append(rows[i:j])
        else:
            out.extend(rows[i:j])
        i = j
    return out


def _continues(a: CallRowView, b: CallRowView) -> bool:
    if a.phase == b.phase == "data":
        return True
    if a.cls != b.cls or a.kind != b.kind:
        return False
    name_a, name_b = a.name, b.name
    if name_a == name_b:
        return True
    ma, mb = _INDEXED.match(name_a), _INDEXED.match(name_b)
    return bool(ma and mb and ma[1] == mb[1] and int(mb[2]) == int(ma[2]) + 1)


def _mixes_classes(rows: Sequence[CallRowView]) -> bool:
    """Only the data pipeline's runs mix classes (``_continues``)."""
    return len({r.cls for r in rows}) > 1


def group_label(rows: Sequence[CallRowView]) -> str:
    if _mixes_classes(rows):
        return "data pipeline"
    first, last = rows[0].name, rows[-1].name
    ma, mb = _INDEXED.match(first), _INDEXED.match(last)
    if ma and mb and first != last:
        return f"{ma[1]}.{ma[2]}…{mb[2]}"
    return rows[0].label


class CallTree(Tree[Node], inherit_bindings=False):
    """The calls of one batch, or of one step's micro-batches plus its parameters."""

    if TYPE_CHECKING:
        app = getters.app(TvisApp)  # tvis's app, for the type checker

    BINDINGS: ClassVar[list[BindingType]] = [*keys.TREE]

    DEFAULT_CSS = """
    CallTree { scrollbar-size-vertical: 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("calls", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self.auto_expand = False
        self.run_name: str | None = None
        self.batch_index: int | None = None
        self.time_scale = 0.0
        self._loads: dict[int, asyncio.Task] = {}
        self._generation = 0  # bumped on every reset, so answers for an old tree are dropped
        # A call's or group's row text, kept while its node, width and time scale stay: the
        # tree's lines are drawn again whenever it gains or loses focus (its tint, guides
        # and cursor change), and the rows themselves need not be laid out again for that.
        self._row_texts: LRUCache[int, tuple[Node, tuple, Text]] = LRUCache(1024)
        self._paint_style: Style | None = None
        self.rows_built = 0
        self._lines_width = 0  # the width the tree's lines were built for

    # -- Textual's Tree, without a layout where nothing moved ------------------------------
    # Its handlers rebuild every line and lay the whole page out again on any resize or
    # style change. A focus change (new colours) or a new height (the search box shown,
    # a pane beside) needs a repaint only; a row's text depends on the width alone.

    def _on_resize(self, event: events.Resize) -> None:
        if event.size.width == self._lines_width:
            event.prevent_default()
            self._line_cache.grow(event.size.height)
            self.refresh()
        self._lines_width = event.size.width

    def notify_style_update(self) -> None:
        super(Tree, self).notify_style_update()
        self._line_cache.clear()
        self._updates += 1  # in every line's cache key
        self.refresh()

    # -- what the tree holds -------------------------------------------------------------

    def show_batch(self, run: str, batch: int) -> None:
        """Show the calls of ``batch``; the roots load at once, the rest on demand."""
        self._reset(run, batch)
        if not self._load_cached(self.root, self.root, 0):
            self._ensure_loaded_soon(self.root)

    def show_step(
        self,
        run: str,
        step: dict[str, Any],
        batches: list[dict[str, Any]],
        params: list[dict[str, Any]],
    ) -> None:
        """Show a step: one row per micro-batch (its calls below it) and its parameters."""
        self._reset(run, None)
        index = step.get("index")
        for info in batches:
            self.root.add(
                "",
                Node("batch", batch=info.get("index"), row=info, step=index, parent_call=-1),
                allow_expand=True,
            )
        params_node = self.root.add(
            "",
            Node("params", step=index, loaded=True, text=f"parameters ({len(params)})"),
            allow_expand=bool(params),
        )
        for p in params:
            params_node.add_leaf("", Node("param", step=index, row=p))
        self.root.expand()
        if self.root.children:
            self.call_after_refresh(self.move_cursor, self.root.children[0])

    def _reset(self, run: str, batch: int | None) -> None:
        for task in self._loads.values():
            task.cancel()
        self._loads.clear()
        self._generation += 1
        self.clear()
        # No cursor until the new rows come: Tree.clear keeps the old node as the cursor
        # until its next rebuild, and a page put in place at once must find none.
        self.cursor_line = -1
        self.run_name, self.batch_index = run, batch
        # In step mode the roots are added at once; only a batch's roots are fetched.
        self.root.data = Node("root", batch=batch, parent_call=-1, loaded=batch is None)
        self.time_scale = 0.0
        self._row_texts.clear()

    # -- lazy loading --------------------------------------------------------------------

    def _ensure_loaded_soon(self, node: TreeNode[Node]) -> None:
        async def load() -> None:
            await self.ensure_loaded(node)

        self._run_load(load)

    def _run_load(self, load: Callable[[], Coroutine[None, None, None]]) -> None:
        """Run ``load`` in a worker that makes its coroutine when it starts: a worker
        cancelled before (the tree reset, the app quitting) leaves no coroutine never
        awaited behind it."""
        work: WorkType[None] = load  # named: mypy cannot pick the union's arm for a bare one
        self.run_worker(work, group="tree-load", exit_on_error=False)

    @staticmethod
    def page_request(
        run: str | None, batch: int | None, parent: int, offset: int = 0
    ) -> dict[str, Any]:
        """The ``calls`` request for one page of ``parent``'s children (-1: the roots)."""
        return {"run": run, "batch": batch, "parent": parent, "offset": offset, "limit": PAGE}

    def _load_cached(self, node: TreeNode[Node], anchor: TreeNode[Node], offset: int) -> bool:
        """Put ``node``'s page at ``offset`` in place now when the client holds it (seen
        before, or prefetched for the batch beside this one): the tree is drawn whole in the
        frame the key asked for, without an empty tree or a placeholder in between."""
        data, source = node.data, self.app.data
        if data is None or source is None or (self._loads.get(id(node)) and offset == 0):
            return False
        parent = data.call.id if data.call is not None else -1
        found, page = source.peek(
            "calls", **self.page_request(self.run_name, data.batch, parent, offset)
        )
        if not found or not isinstance(page, CallsAnswer):
            return False
        self._page_arrived(node, anchor, offset, page)
        return True

    async def ensure_loaded(self, node: TreeNode[Node]) -> None:
        """Fetch ``node``'s first page of children once, however many callers ask."""
        data = node.data
        if data is None or data.loaded or data.kind not in ("root", "call", "batch"):
            return
        if self._load_cached(node, node, 0):
            return
        task = self._loads.get(id(node))
        if task is None:
            task = asyncio.ensure_future(self._load_page(node, node, 0))
            self._loads[id(node)] = task
        await asyncio.shield(task)

    async def _load_page(self, node: TreeNode[Node], anchor: TreeNode[Node], offset: int) -> None:
        """Fetch one page of ``node``'s children and put it where ``anchor`` stands
        (a loading placeholder, a "more" row, or ``node`` itself for the first page)."""
        data = node.data
        assert data is not None
        run, batch, generation = self.run_name, data.batch, self._generation
        parent = data.call.id if data.call is not None else -1
        if node is not self.root and not node.children:
            node.add_leaf(Text("loading…", style="italic " + colors.MUTED), Node("loading"))
        try:
            source = self.app.data
            if source is None:
                raise AgentError(NOT_CONNECTED)
            page: CallsAnswer = await asyncio.to_thread(
                source.call, "calls", **self.page_request(run, batch, parent, offset)
            )
        except ConnectionLost as e:
            self.app.connection_lost(e.message)
            return
        except AgentError as e:
            self._replace_placeholder(node, anchor, [Node("message", text=e.message)])
            return
        finally:
            self._loads.pop(id(node), None)
        if generation != self._generation:
            return  # the tree was reset while the page was on its way
        self._page_arrived(node, anchor, offset, page)

    def _page_arrived(
        self, node: TreeNode[Node], anchor: TreeNode[Node], offset: int, page: CallsAnswer
    ) -> None:
        data = node.data
        assert data is not None
        batch = data.batch
        parent = data.call.id if data.call is not None else -1
        rows = page.calls
        self._note_times(rows, top=node is self.root or data.kind == "batch")
        items: list[Node] = []
        for item in group_runs(rows):
            if isinstance(item, CallRowView):
                items.append(Node("call", batch=batch, call=item))
            else:
                items.append(
                    Node("group", batch=batch, rows=item, text=group_label(item), loaded=True)
                )
        total, end = page.total, offset + len(rows)
        if end < total:
            items.append(
                Node(
                    "more",
                    batch=batch,
                    parent_call=parent,
                    offset=end,
                    text=f"… {total - end} more calls",
                )
            )
        else:
            items += [Node("dropped", text=dropped_label(s)) for s in page.dropped]
        data.loaded = True
        self._replace_placeholder(node, anchor, items)

    def _replace_placeholder(
        self, node: TreeNode[Node], anchor: TreeNode[Node], items: list[Node]
    ) -> None:
        cursor = self.cursor_node
        for child in list(node.children):
            if (
                child.data is not None
                and child.data.kind in ("loading", "more")
                and (child is anchor or child.data.kind == "loading")
            ):
                child.remove()
        for item in items:
            if item.kind == "group":
                group = node.add("", item, allow_expand=True)
                for row in item.rows:
                    self._add_call(group, Node("call", batch=item.batch, call=row))
            elif item.kind == "call":
                self._add_call(node, item)
            else:
                node.add_leaf("", item)
        if node is self.root and cursor is None and node.children:
            self._lay_out()
            first = self._first_interesting(node)
            self.move_cursor(first)
            if first.allow_expand and first.data is not None and first.data.kind == "call":
                self._open_towards_layers(first)  # what a user came to see
        elif cursor is not None and cursor.tree is self and cursor.line >= 0:
            self.move_cursor(cursor)
        if node.data is not None and node.data.opening:
            node.data.opening = False
            calls = [c for c in node.children if c.data is not None and c.data.kind == "call"]
            has_layers = any(
                c.data is not None and (c.data.kind == "group" or not c.allow_expand)
                for c in node.children
            )
            if not has_layers:  # only wrappers here (DDP, a model holding the model): go on
                for child in [c for c in calls if c.allow_expand][:OPENED_WRAPPERS]:
                    self._open_towards_layers(child)

    @staticmethod
    def _open_towards_layers(node: TreeNode[Node]) -> None:
        """Expand ``node``, and then its containers level by level until a level holds a
        layer (a call without calls inside) or a group of repeated blocks."""
        assert node.data is not None
        node.data.opening = True
        node.expand()

    @staticmethod
    def _first_interesting(node: TreeNode[Node]) -> TreeNode[Node]:
        rows = [c.data.call if c.data is not None else None for c in node.children]
        return node.children[first_interesting(rows)]

    def _add_call(self, parent: TreeNode[Node], item: Node) -> TreeNode[Node]:
        has_children = item.call is not None and item.call.n_children > 0
        return parent.add("", item, allow_expand=has_children)

    def _note_times(self, rows: Sequence[CallRowView], top: bool) -> None:
        longest = max(((r.fwd_ms or 0) + (r.bwd_ms or 0) for r in rows), default=0.0)
        if top and longest > self.time_scale:
            self.time_scale = longest
            # The root is on every line's path: refreshing it re-renders every time bar.
            self.root.refresh()
            self.refresh()

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Node]) -> None:
        event.stop()
        node = event.node
        if node.data is not None and not node.data.loaded and not self._load_cached(node, node, 0):
            self._ensure_loaded_soon(node)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Node]) -> None:
        event.stop()
        node = event.node
        data = node.data
        if data is None:
            return
        if data.kind == "more" and node.parent is not None:
            parent, offset = node.parent, data.offset

            async def load() -> None:
                await self._load_page(parent, node, offset)

            self._run_load(load)
        selection = self.selection_of(node)
        if selection is not None:
            self.post_message(Selected(selection))

    def on_tree_node_selected(self, event: Tree.NodeSelected[Node]) -> None:
        # Enter opens the inspector (the page decides where it is); expanding is l / space.
        event.stop()
        selection = self.selection_of(event.node)
        if selection is not None:
            self.post_message(Selected(selection, open_inspector=True))

    def beside_cursor(self, reach: int = 1) -> list[Selection]:
        """What the rows just below and above the cursor select (nearest first): what the
        next j/k will show, for the inspector to prefetch."""
        found = []
        for distance in range(1, reach + 1):
            for line in (self.cursor_line + distance, self.cursor_line - distance):
                node = self.get_node_at_line(line) if line >= 0 else None
                selection = self.selection_of(node) if node is not None else None
                if selection is not None:
                    found.append(selection)
        return found

    def at_ends(self) -> list[Selection]:
        """What the first and last rows select: what `home` and `end` will show, for the
        inspector to prefetch (the last row is often the loss, which Loss' `u` shows too)."""
        found = []
        for line in dict.fromkeys((self.last_line, 0)):
            node = self.get_node_at_line(line) if line >= 0 else None
            selection = self.selection_of(node) if node is not None else None
            if selection is not None:
                found.append(selection)
        return found

    @staticmethod
    def selection_of(node: TreeNode[Node]) -> Selection | None:
        data = node.data
        if data is None:
            return None
        if data.kind == "call" and data.call is not None:
            return Selection("call", batch=data.batch, call=data.call.id, row=dict(data.call.raw))
        if data.kind == "group":
            return Selection(
                "group",
                batch=data.batch,
                call=data.rows[0].id,
                row={"label": data.text, "rows": [r.raw for r in data.rows]},
            )
        if data.kind == "batch":
            return Selection("batch", batch=data.batch, step=data.step, row=data.row)
        if data.kind == "param":
            return Selection("param", step=data.step, param=data.row)
        return None

    # -- finding a call ------------------------------------------------------------------

    async def reveal(self, batch: int, call: int, path: list[int]) -> bool:
        """Expand the ancestors of ``call`` (loading pages as needed) and put the cursor on it."""
        generation = self._generation
        parent = self.root
        if self.batch_index is None:  # step mode: the call lives under its micro-batch row
            found = next(
                (
                    n
                    for n in self.root.children
                    if n.data and n.data.kind == "batch" and n.data.batch == batch
                ),
                None,
            )
            if found is None:
                return False
            parent = found
        elif batch != self.batch_index:
            return False
        node = None
        for cid in [*path, call]:
            node = await self._find_child(parent, cid)
            if node is None or generation != self._generation:
                return False
            if cid != call:
                node.expand()
                await self.ensure_loaded(node)
            parent = node
        if node is None or generation != self._generation:
            return False
        self._lay_out()
        self.move_cursor(node)
        return True

    def reveal_held(self, batch: int, call: int, path: list[int]) -> TreeNode[Node] | None:
        """``reveal``, now, when every page on the way is loaded or held by the client (a
        batch switch after the batches beside were fetched): the tree and what it selects
        change in the key's own frame. None, the cursor not moved, when a page must be asked
        for (``reveal`` then)."""
        if self.batch_index is None or batch != self.batch_index:
            return None
        parent, node = self.root, None
        for cid in [*path, call]:
            data = parent.data
            if data is None or not (data.loaded or self._load_cached(parent, parent, 0)):
                return None
            parent.expand()
            node, _ = self._child_named(parent, cid)
            if node is None:
                return None
            parent = node
        if node is None:
            return None
        self._lay_out()
        self.move_cursor(node)
        return node

    @staticmethod
    def _child_named(
        parent: TreeNode[Node], cid: int
    ) -> tuple[TreeNode[Node] | None, TreeNode[Node] | None]:
        """Call ``cid`` among ``parent``'s loaded children (the group it is folded into
        opened), else the "more" row after which it may be (None: it is not a child)."""
        more = None
        for child in parent.children:
            data = child.data
            if data is None:
                continue
            if data.call is not None and data.call.id == cid:
                return child, None
            if data.kind == "group" and any(r.id == cid for r in data.rows):
                child.expand()
                found = next(
                    c for c in child.children if c.data and c.data.call and c.data.call.id == cid
                )
                return found, None
            if data.kind == "more":
                more = child
        return None, more

    async def _find_child(self, parent: TreeNode[Node], cid: int) -> TreeNode[Node] | None:
        parent.expand()
        await self.ensure_loaded(parent)
        while True:
            child, more = self._child_named(parent, cid)
            if child is not None:
                return child
            if more is None:
                return None
            generation = self._generation
            await self._load_page(parent, more, more.data.offset if more.data else 0)
            if generation != self._generation:
                return None

    def call_nodes(self) -> list[TreeNode[Node]]:
        """The loaded call rows that are on display, top to bottom."""
        nodes = (self.get_node_at_line(i) for i in range(self.last_line + 1))
        return [n for n in nodes if n is not None and n.data and n.data.kind == "call"]

    def _lay_out(self) -> None:
        """Lay out the lines of nodes added since the last paint, so that moving the cursor to
        one of them finds its line (reading ``last_line`` builds the lines)."""
        _ = self.last_line

    # -- keys ----------------------------------------------------------------------------

    def action_expand(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and not node.is_expanded:
            node.expand()
        elif node.is_expanded and node.children:
            self.move_cursor(node.children[0])

    def action_collapse(self) -> None:
        node = self.cursor_node
        if node is None:
            return
        if node.allow_expand and node.is_expanded:
            node.collapse()
        elif node.parent is not None and node.parent is not self.root:
            self.move_cursor(node.parent)

    # -- rows ----------------------------------------------------------------------------

    def get_label_width(self, node: TreeNode[Node]) -> int:
        # Labels fill the width they are given; never ask for horizontal scrolling.
        return 1

    def render_label(self, node: TreeNode[Node], base_style: Style, style: Style) -> Text:
        data = node.data
        depth = 0
        parent = node.parent
        while parent is not None and parent is not self.root:
            depth += 1
            parent = parent.parent
        width = max(10, self.size.width - depth * self.guide_depth - 2)
        icon = ("▼ " if node.is_expanded else "▶ ") if node.allow_expand else "  "
        # The row's own colours (phase glyph, time bar, marks) sit on top of the cursor style.
        text = Text(style=style)
        text.append(icon, style=Style(dim=True))
        text.append_text(self._kept_row_text(data, width))
        return text

    def _kept_row_text(self, data: Node | None, width: int) -> Text:
        if data is None or data.kind not in ("call", "group"):
            return self._row_text(data, width)
        key = (width, self.time_scale)
        kept = self._row_texts.get(id(data))
        if kept is not None and kept[0] is data and kept[1] == key:
            return kept[2]
        text = self._row_text(data, width)
        self._row_texts[id(data)] = (data, key, text)  # holds data: its id is not reused
        self.rows_built += 1
        return text

    def render_lines(self, crop: Region) -> list[Strip]:
        # The widget's style is looked up once per paint rather than once per line (it
        # walks the ancestors' backgrounds).
        self._paint_style = self.rich_style
        try:
            return super().render_lines(crop)
        finally:
            self._paint_style = None

    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        style = self._paint_style or self.rich_style
        return self._render_line(y + scroll_y, scroll_x, scroll_x + self.size.width, style)

    def _row_text(self, data: Node | None, width: int) -> Text:
        if data is None:
            return Text("")
        if data.kind == "call" and data.call is not None:
            return self._call_text(data.call, width)
        if data.kind == "group":
            return self._group_text(data, width)
        if data.kind == "batch":
            info = data.row
            text = Text(f"batch {info.get('index')}", style="bold")
            text.append(
                f"  micro {info.get('micro', 0)}  loss {fmt.num(info.get('loss'))}",
                style=colors.MUTED,
            )
            return text
        if data.kind == "params":
            # The parameters' row heads the columns its children fill.
            left = Text(data.text, style="bold " + colors.PHASE["optimizer"])
            right = Text("shape".rjust(SHAPE_CELLS) + f" {RATIO_HEADER:>9}", style=colors.MUTED)
            return self._columns(left, right, width)
        if data.kind == "param":
            return self._param_text(data.row, width)
        if data.kind == "more":
            return Text(data.text, style="italic " + colors.MUTED)
        if data.kind == "message":
            return Text(fmt.clip(data.text, width), style=colors.BAD)
        return Text(data.text, style="italic " + colors.MUTED)

    def _columns(self, left: Text, right: Text, width: int) -> Text:
        room = width - right.cell_len - 1
        if room < 8:
            right, room = Text(""), width
        left.truncate(room, overflow="ellipsis", pad=True)
        return Text.assemble(left, " ", right)

    def _call_text(self, row: CallRowView, width: int) -> Text:
        left = Text(KIND_GLYPH.get(row.kind, "·") + " ", style=colors.phase_color(row.phase))
        left.append(row.label)
        if row.cls and row.name and row.cls != row.name:
            left.append(f" {row.cls}", style=colors.MUTED)
        return self._columns(left, self._right(row, width), width)

    def _right(self, row: CallRowView, width: int) -> Text:
        """Output shape, time bar and marks; the bar, then the shape, give way when narrow."""
        right = Text()
        if width >= SHAPE_MIN_WIDTH:
            shape = fmt.clip(fmt.shape(row.out_shape), SHAPE_CELLS)
            right.append(shape.rjust(SHAPE_CELLS), style=colors.MUTED)
            right.append(" ")
        if width >= BAR_MIN_WIDTH:
            right.append_text(self._time_bar(row.fwd_ms, row.bwd_ms))
            right.append(" ")
        found = marks.of_call(row)
        for m in found[:2]:
            right.append(m.symbol, style=m.color)
        right.append(" " * (2 - min(2, len(found))))
        return right

    def _time_bar(self, fwd: float | None, bwd: float | None, cells: int = BAR_CELLS) -> Text:
        """Forward and (approximate) backward time as one bar, each in its phase colour."""
        scale = self.time_scale or 1.0
        text = Text()
        used = 0
        for ms, phase in ((fwd, "forward"), (bwd, "backward")):
            eighths = round(min(1.0, (ms or 0) / scale) * cells * 8)
            if ms and eighths == 0:
                eighths = 1
            eighths = min(eighths, (cells - used) * 8)
            full, rest = divmod(eighths, 8)
            part = "█" * full + (EIGHTHS[rest] if rest else "")
            used += len(part)
            text.append(part, style=colors.PHASE[phase])
        text.append(" " * (cells - used))
        return text

    def _group_text(self, data: Node, width: int) -> Text:
        rows = data.rows
        first = rows[0]
        left = Text(KIND_GLYPH.get(first.kind, "·") + " ", style=colors.phase_color(first.phase))
        left.append(data.text)
        left.append(f" ×{len(rows)}", style="bold")
        if not _mixes_classes(rows) and first.cls and first.cls not in data.text:
            left.append(f" {first.cls}", style=colors.MUTED)
        summary = replace(
            first,
            fwd_ms=sum(r.fwd_ms or 0 for r in rows),
            bwd_ms=sum(r.bwd_ms or 0 for r in rows) or None,
            flags=tuple(
                sorted(
                    {f for r in rows for f in r.flags}
                    | {m.key for r in rows for m in marks.of_call(r)}
                )
            ),
            out_stats=None,
            grad_norm=None,
        )
        return self._columns(left, self._right(summary, width), width)

    def _param_text(self, param: dict[str, Any], width: int) -> Text:
        left = Text(param.get("name", "?"))
        ratio = (param.get("norms") or {}).get("ratio")
        right = Text(
            fmt.clip(fmt.shape(param.get("shape")), SHAPE_CELLS).rjust(SHAPE_CELLS),
            style=colors.MUTED,
        )
        right.append(f" {fmt.num(ratio):>9}", style=colors.ratio_color(ratio))
        return self._columns(left, right, width)
