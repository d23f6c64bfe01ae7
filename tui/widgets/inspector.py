"""The inspector: what the selected call (or batch, group, parameter) is and holds.

Its header comes from the row the tree already has, so it changes the moment the cursor
moves; the tensor cards follow when the agent answers ``call``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.timer import Timer
from textual.worker import get_current_worker

from tvis.tui import colors, export, fmt, keys, marks
from tvis.tui.focus_style import FocusStylesSelf
from tvis.tui.messages import Selection
from tvis.tui.pane import Asks
from tvis.tui.widgets.inspector_lines import Block, InspectorLines, TextBlock
from tvis.tui.widgets.inspector_requests import (
    call_args,
    call_request,
    layer_of,
    picture_requests,
)
from tvis.tui.widgets.layer_views import Layer, LayerViews, PlaceKeys
from tvis.tui.widgets.scroll_rail import RailScroll
from tvis.tui.widgets.sparkline import hbar
from tvis.tui.widgets.tensor_card import Card, TensorRef, decoded_text, value_text

DEBOUNCE_S = 0.03
"""A selection that follows another by less than this waits this long before its call is
asked for: holding j down then costs a request at its first row and one at the end instead
of one per row passed. A selection after a pause is asked for at once."""

PHASES = ("data", "forward", "loss", "backward", "optimizer")


def call_header(row: dict[str, Any]) -> Text:
    """Class, module path, definition and call site, phase, times, flags — always seven
    unwrapped lines, so moving between calls never re-lays out the cards below."""
    text = Text(no_wrap=True, overflow="ellipsis")
    cls, name = row.get("cls"), fmt.call_name(row)
    text.append(cls or name, style="bold")
    if cls and name != cls:
        text.append(f"  {name}")
    phase = row.get("phase")
    text.append(f"   {colors.phase_label(phase)}", style=f"bold {colors.phase_color(phase)}")
    text.append("\n")

    def line(label: str, value: str | Text, hint: str = "") -> None:
        text.append(f"{label:<9}", style=colors.MUTED)
        text.append(value)
        if hint:
            text.append(f"  {hint}", style=colors.MUTED)
        text.append("\n")

    line("kind", f"{row.get('kind', '?')}" + ("  (no_grad)" if row.get("no_grad") else ""))
    line("module", (row.get("name") or "(the model)") if row.get("kind") == "module" else "—")
    line("defined", fmt.where(row.get("def")), "d: source")
    line("called", fmt.where(row.get("site")), "u: source")
    times = Text()
    times.append(f"fwd {fmt.ms(row.get('fwd_ms'))}", style=colors.PHASE["forward"])
    times.append("   ")
    times.append(f"bwd {fmt.ms(row.get('bwd_ms'), approx=True)}", style=colors.PHASE["backward"])
    times.append("  (bwd approx.)", style=colors.MUTED)
    line("time", times)
    flags = Text()
    for m in marks.of_row(row):
        flags.append(f"{m.symbol} {m.label}  ", style=m.color)
    flags.append("  ".join(marks.info_flags(row.get("flags"))) or "—")
    line("flags", flags)
    text.rstrip()
    return text


def batch_header(info: dict[str, Any]) -> Text:
    """A batch: its step, loss, size and where its time went, phase by phase."""
    text = Text()
    text.append(f"batch {info.get('index')}", style="bold")
    text.append(f"   step {info.get('step')} · micro-batch {info.get('micro', 0)}")
    text.append(
        f"   loss {fmt.num(info.get('loss'))}   batch size {info.get('batch_size', '—')}\n\n"
    )
    phase_ms = info.get("phase_ms") or {}
    total = sum(v for v in phase_ms.values() if isinstance(v, (int, float))) or 1.0
    for phase in PHASES:
        ms = phase_ms.get(phase)
        text.append(f"{colors.phase_label(phase):<9}", style=colors.phase_color(phase))
        text.append(hbar((ms or 0) / total, 30), style=colors.phase_color(phase))
        text.append(f" {fmt.ms(ms)}\n")
    if info.get("overhead_ms") is not None:
        text.append(
            f"tvis's own work ({fmt.ms(info['overhead_ms'])}) is already subtracted.",
            style=colors.MUTED,
        )
    return text


def group_table(rows: list[dict[str, Any]]) -> Table:
    """Repeated blocks side by side, so the odd one out stands out."""
    table = Table(box=None, pad_edge=False, header_style=colors.MUTED)
    for col in ("block", "out σ", "‖grad‖", "fwd", "≈bwd", ""):
        table.add_column(col, justify="left" if col in ("block", "") else "right")
    for r in rows:
        stats = r.get("out_stats") or {}
        found = marks.of_row(r)
        table.add_row(
            fmt.call_name(r),
            fmt.num(stats.get("std")),
            fmt.num(r.get("grad_norm")),
            fmt.ms(r.get("fwd_ms")),
            fmt.ms(r.get("bwd_ms"), approx=True),
            Text(" ".join(m.label for m in found), style=found[0].color if found else ""),
        )
    return table


def param_header(param: dict[str, Any]) -> Text:
    norms = param.get("norms") or {}
    text = Text()
    text.append(param.get("name", "?"), style="bold")
    text.append(f"   {fmt.shape(param.get('shape'))} {param.get('dtype', '')}\n")
    text.append(f"{'module':<9}", style=colors.MUTED)
    text.append(
        f"{param.get('module') or '—'}   optimizer {param.get('optimizer', '—')} group {param.get('group', '—')}\n"
    )
    text.append(f"{'norms':<9}", style=colors.MUTED)
    text.append(
        f"‖w‖ {fmt.num(norms.get('w'))}   ‖grad‖ {fmt.num(norms.get('grad'))}   ‖Δw‖ {fmt.num(norms.get('update'))}   "
    )
    ratio = norms.get("ratio")
    text.append(f"‖Δw‖/‖w‖ {fmt.num(ratio)}", style=colors.ratio_color(ratio))
    text.append("\n")
    text.append(
        "weight is the value before the step; Δw = p_after − p_before exactly.", style=colors.MUTED
    )
    return text


def tokenizer_text(record: dict[str, Any]) -> Text:
    """A tokenizer call's texts in and tokens out, one sample each."""
    text = Text()
    texts = record.get("texts") or []
    for i, tokens in enumerate(record.get("tokens") or []):
        if i < len(texts):
            text.append(f"text[{i}] ", style=colors.MUTED)
            text.append(repr(fmt.clip(texts[i], 300)), style=colors.PHASE["data"])
            text.append("\n")
        text.append(f"  {len(tokens)} tokens ", style=colors.MUTED)
        text.append(fmt.clip(" ".join(str(t) for t in tokens), 300))
        text.append("\n")
    text.rstrip()
    return text


PARAM_PARTS = ("weight", "grad", "update")
"""What a parameter's card shows: its value before the step, its gradient, and Δw."""


class Inspector(PlaceKeys, Asks, FocusStylesSelf, RailScroll, can_focus=True):
    """The selected call's header and its tensors as cards (outputs first), and the layer
    views of a model call's output (with the On image view's place keys)."""

    BINDINGS: ClassVar[list[BindingType]] = [*keys.INSPECTOR, *keys.LAYER_VIEWS]

    DEFAULT_CSS = "Inspector { padding: 0 1; scrollbar-size-vertical: 0; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.selection: Selection | None = None
        self.shown: Selection | None = None  # the selection the cards below belong to
        self.current = 0
        self._timer: Timer | None = None
        self._shown_at = 0.0  # when the last selection came (time.monotonic)
        self._asked_for: Selection | None = None  # what the replies in flight are for
        self._param_entries: dict[str, dict | None] = {}
        self._param_parts: list[str] = []
        self.lines = InspectorLines()
        # Set by the page: the pictures' width once shown, for what is fetched while hidden.
        self.picture_width_when_shown: int | None = None
        # Mounted once, shown under the cards of a model call: never laid out anew per move.
        # Not composed with the inspector: ≈ 20 widgets, under the cards, mounted after a
        # first visit's first frame (``_show_layer``) or, hidden, when the page first rests.
        self.layer_views = LayerViews(classes="layer-views")
        self.layer_views.display = False

    def compose(self) -> ComposeResult:
        yield self.rail
        yield self.lines

    def mount_layer_views(self) -> None:
        if self.layer_views.parent is None:
            self.mount(self.layer_views)

    def _show_layer(self, layer: Layer) -> None:
        views = self.layer_views
        if views.ready:
            views.show(layer)
            return
        views.shown_layer = layer  # shown as they mount
        if views.parent is not None:
            return  # being mounted
        if self.screen.is_current:
            # A first visit: mounted after the frame that draws the tree and the cards, the
            # views come under them a frame later.
            self.call_after_refresh(self.mount_layer_views)
        else:
            self.mount_layer_views()  # a page built ahead: nobody waits

    def on_mount(self) -> None:
        self.watch(self.app, "show_grad", self._redraw_cards, init=False)
        self.watch(self.app, "sample", self._redraw_cards, init=False)

    # -- what to show --------------------------------------------------------------------

    def show(self, selection: Selection) -> None:
        """Show ``selection``: the header at once, the tensors at once too unless selections
        come faster than ``DEBOUNCE_S`` apart (a held key)."""
        if self.selection is not None and selection.key() == self.selection.key():
            return
        self.selection = selection
        header = self.lines.set_header
        if selection.kind == "call" and selection.row:
            header(call_header(selection.row))
        elif selection.kind == "group" and selection.row:
            rows = selection.row.get("rows") or []
            title = Text(f"{selection.row.get('label')}  ", style="bold")
            classes = list(dict.fromkeys(r.get("cls") or r.get("name") or "call" for r in rows))
            title.append(f"{len(rows)} calls: {', '.join(map(str, classes))}\n" if rows else "\n")
            header(Text.assemble(title))
        elif selection.kind == "batch" and selection.row:
            header(batch_header(selection.row))
        elif selection.kind == "param" and selection.param:
            header(param_header(selection.param))
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        now, previous = time.monotonic(), self._shown_at
        self._shown_at = now
        if now - previous >= DEBOUNCE_S or self._at_hand(selection):
            self._load()
        else:
            self._timer = self.set_timer(DEBOUNCE_S, self._load)

    def _at_hand(self, selection: Selection) -> bool:
        """Whether ``selection`` can be shown without a new request to the agent (nothing to
        ask, or the answer prefetched): then it is drawn at once, with no debounce."""
        if selection.kind == "param":
            return False
        if selection.kind != "call":
            return True
        data = getattr(self.app, "data", None)
        return (
            data is not None and data.peek("call", **call_request(self.app.run_name, selection))[0]
        )

    def prefetch(self, selections: list[Selection]) -> None:
        """Fetch into the client's cache what showing each of ``selections`` (the rows beside
        the cursor) will ask for, so that the next j/k draws at once, with no round trip."""
        data = getattr(self.app, "data", None)
        wanted = [s for s in selections if s.kind == "call" and s.call is not None]
        if data is None or not wanted:
            return
        fetch = self.prefetcher()
        self.run_worker(
            lambda: fetch(data, wanted),
            group="inspector-prefetch",
            exclusive=True,
            thread=True,
            exit_on_error=False,
        )

    def prefetcher(self) -> Callable[[Any, list[Selection]], None]:
        """``fetch(data, selections)``: asks ``data``, in the background, for what showing
        each call selection on this screen will ask for (its record, its cards' pictures,
        its layer views). What
        it needs from the screen is read now: it runs in a worker thread (any page's) and
        never reads the DOM itself."""
        views = self.layer_views
        app = self.app
        return partial(
            self._prefetch,
            run=app.run_name,
            sample=app.sample,
            grad=app.show_grad,
            width=self._picture_width(),
            layer_request=views.requester() if views.display else None,
        )

    def _picture_width(self) -> int | None:
        """Columns the cards ask their pictures at: the lines' own once laid out; before,
        (a pane not shown yet), the width the page will give it (None: no pictures)."""
        if self.lines.card_width() > 0:
            return self.lines.picture_width()
        return self.picture_width_when_shown

    @staticmethod
    def _prefetch(data, selections, run, sample, grad, width, layer_request) -> None:
        worker = get_current_worker()
        for selection in selections:
            if selection.kind != "call" or selection.call is None:
                continue
            call = data.prefetch_later("call", **call_request(run, selection))
            if not isinstance(call, dict):
                continue
            for method, params in picture_requests(
                call, selection, run, sample, grad, width, layer_request
            ):
                if worker.is_cancelled:
                    return
                data.prefetch_later(method, **params)

    def _load(self) -> None:
        self._timer = None
        selection = self.selection
        if selection is None:
            return
        if selection.kind == "call":
            self._load_call(selection)
        elif selection.kind == "param":
            self._load_param(selection)
        elif selection.kind == "group":
            rows = (selection.row or {}).get("rows") or []
            self._set_body(selection, [TextBlock(group_table(rows))])
        else:
            self._set_body(selection, [])

    def _load_call(self, selection: Selection) -> None:
        for which in PARAM_PARTS:
            self.cancel(which)
        self._asked_for = selection
        self.ask("call", tag="call", **call_request(self.app.run_name, selection))

    def _load_param(self, selection: Selection) -> None:
        """A parameter's weight, gradient and update entries, shown once all have come."""
        param = selection.param or {}
        self.cancel("call")
        self._asked_for = selection
        self._param_entries = {}
        self._param_parts = [w for w in PARAM_PARTS if isinstance(param.get(w), int)]
        for which in self._param_parts:
            self.ask(
                "tensor", tag=which, run=self.app.run_name, step=selection.step, tensor=param[which]
            )
        if not self._param_parts:
            self._show_param(selection, {})

    def answered(self, tag: str, result: Any) -> None:
        if tag == "call":
            if self._asked_for is not None:
                self._show_call(self._asked_for, result)
        else:
            self._param_arrived(tag, result)

    def failed(self, tag: str, message: str) -> None:
        if tag == "call":
            self._set_body(self._asked_for, [TextBlock(Text(message, style=colors.BAD))])
        else:
            self._param_arrived(tag, None)  # shown without that part

    def _param_arrived(self, which: str, entry: dict | None) -> None:
        self._param_entries[which] = entry
        if all(w in self._param_entries for w in self._param_parts):
            found = {w: e for w, e in self._param_entries.items() if e is not None}
            if self._asked_for is not None:
                self._show_param(self._asked_for, found)

    def _show_call(self, selection: Selection, call: dict[str, Any]) -> None:
        if selection != self.selection:
            return
        row = {
            **(selection.row or {}),
            **{k: v for k, v in call.items() if k not in ("inputs", "outputs")},
        }
        self.lines.set_header(call_header(row))
        blocks: list[Block] = []
        refs: list[TensorRef] = []
        for side, args in call_args(call):
            blocks.append(TextBlock(side, section=True))
            for i, arg in enumerate(args):
                entry = arg.get("entry") if isinstance(arg, dict) else None
                if entry is None:
                    shown = (
                        arg if isinstance(arg, dict) else {"name": f"{side}[{i}]", "repr": str(arg)}
                    )
                    blocks.append(TextBlock(value_text(shown), pad=1))
                    continue
                ref = TensorRef(
                    title=str(arg.get("name") or f"{side[:-1]} {i}"),
                    entry=entry,
                    run=self.app.run_name or "",
                    batch=selection.batch,
                )
                blocks.append(ref)
                refs.append(ref)
                if isinstance(arg.get("decoded"), dict) and "text" in arg["decoded"]:
                    blocks.append(TextBlock(decoded_text(arg), pad=1))
        rounded = next(filter(None, (_rounded(ref.entry) for ref in refs)), None)
        if rounded:  # once under the cards: their values (not their statistics) are rounded
            blocks.append(TextBlock(Text(rounded, style=colors.MUTED), below=1))
        for record in call.get("tokens") or []:
            blocks.append(TextBlock("tokenizer", section=True))
            blocks.append(TextBlock(tokenizer_text(record), pad=1))
        layer = layer_of(
            call, selection, self.app.run_name or "", self.app.sample, self.app.show_grad
        )
        if layer is not None:  # after the cards: On image · Neurons · Stats of the output
            blocks.append(TextBlock("this layer, for the followed sample", section=True))
        self._set_body(selection, blocks, layer)

    def _show_param(self, selection: Selection, entries: dict[str, dict]) -> None:
        if selection != self.selection:
            return
        blocks: list[Block] = []
        param = selection.param or {}
        for which in PARAM_PARTS:
            entry = entries.get(which)
            if entry is None:
                blocks.append(TextBlock(Text(f"{which}: not recorded", style=colors.MUTED)))
                continue
            blocks.append(
                TensorRef(
                    title=which,
                    entry=entry,
                    run=self.app.run_name or "",
                    step=selection.step,
                    param=param["name"],
                    which=which,
                    gradient_view=which != "weight",
                )
            )
        refs = [block for block in blocks if isinstance(block, TensorRef)]
        rounded = next(filter(None, (_rounded(ref.entry) for ref in refs)), None)
        if rounded:  # the gradient's values: weights and Δw are always exact
            blocks.append(TextBlock(Text(rounded, style=colors.MUTED), below=1))
        self._set_body(selection, blocks)

    def _set_body(
        self, selection: Selection | None, blocks: list[Block], layer: Layer | None = None
    ) -> None:
        """Show ``blocks`` under the header, and the layer views of ``layer`` under them
        (hidden when there is none)."""
        self.lines.set_body(blocks, self.app.show_grad, self.app.sample)
        views = self.layer_views
        if layer is not None:
            views.display = True
            self._show_layer(layer)
        elif views.display:
            views.display = False
        self.shown = selection
        self.current = 0
        self._mark_current()

    @property
    def settled(self) -> bool:
        """Whether what is shown is the newest selection's (nothing waits)."""
        return self._timer is None

    def _redraw_cards(self, *_: Any) -> None:
        for card in self.cards:
            if card.ref is not None:
                card.show(card.ref, self.app.show_grad, self.app.sample)
        views = self.layer_views
        if views.display and views.shown_layer is not None:
            self._show_layer(
                replace(views.shown_layer, sample=self.app.sample, grad=self.app.show_grad)
            )

    def action_cycle_view(self) -> None:
        if self.layer_views.display:
            self.layer_views.cycle()

    # -- keys ----------------------------------------------------------------------------

    def on_focus(self) -> None:
        # Before Textual's own handler (a subclass's runs first): `has_focus` is still False.
        self._mark_current(focused=True)

    def on_blur(self) -> None:
        self._mark_current(focused=False)

    def _mark_current(self, focused: bool | None = None) -> None:
        """The current card marked while the inspector has the focus."""
        focused = self.has_focus if focused is None else focused
        self.lines.mark_current(self.current if focused and self.cards else None)

    def action_next_card(self) -> None:
        self._move(1)

    def action_prev_card(self) -> None:
        self._move(-1)

    def _move(self, delta: int) -> None:
        if not self.cards:
            return
        self.current = (self.current + delta) % len(self.cards)
        self._mark_current()
        card = self.lines.card_region(self.current)
        # At once, in the key's frame: an animated scroll drew the inspector again in each
        # of ~9 frames, 150 KB for one key; one deferred to after the next refresh (Textual's
        # default) drew the card's mark a frame before the scroll.
        self.scroll_to_region(
            card.translate(self.lines.virtual_region.offset), animate=False, immediate=True
        )

    def action_index(self, delta: int) -> None:
        if self.cards:
            self.cards[self.current].step_index(delta)

    @property
    def cards(self) -> list[Card]:
        return self.lines.cards

    # -- taking a tensor home (tui/export.py) --------------------------------------------

    def current_item(self) -> export.ExportItem:
        """The tensor of the card under the cursor; ``ExportError`` when there is none."""
        ref = self.cards[self.current].ref if self.cards else None
        if ref is None:
            raise export.ExportError("select a call or a parameter with tensors first.")
        row = (self.selection.row if self.selection else None) or {}
        name = row.get("name") or row.get("cls") or "call"
        return export.item_for(ref, self.app.show_grad, name, self.app.run_id or ref.run)

    def _with_item(self, then) -> None:
        try:
            item = self.current_item()
        except export.ExportError as e:
            self.app.notify(str(e), severity="warning")
            return
        then(self.app, item)

    def action_export(self) -> None:
        self._with_item(export.start)

    def action_copy_python(self) -> None:
        self._with_item(export.copy_python)


def _rounded(entry: dict[str, Any]) -> str | None:
    """The note of a tensor entry, or of its gradient, stored rounded."""
    grad = entry.get("grad_entry") or {}
    return export.rounded_note(entry.get("value")) or export.rounded_note(grad.get("value"))
