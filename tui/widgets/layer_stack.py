"""Replay's layer stack: one row per layer of the batch, in forward order, with a thumbnail
of its activation for the followed sample that lights up when forward reaches it and turns
into its gradient when backward does, and ‖dL/d(output)‖ as a bar on a log scale."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

from tvis.agent.replies import ReplayEvent, ThumbsReply
from tvis.store.schema import FLAGS
from tvis.tui import colors, fmt
from tvis.tui.pane import AgentPane
from tvis.tui.picture import HEAT, VALUES, Scale, to_rgb
from tvis.tui.picture.colormaps import Depth
from tvis.tui.picture.raster import half_block_text, resample
from tvis.tui.picture.text_lines import text_strip
from tvis.tui.picture.widget import depth_of

THUMB_W, THUMB_H = 16, 2
"""A thumbnail is 16 × 2 values: one row of 16 half-block cells, enough to see where a map
is active, and 128 bytes a layer over the wire."""

BAR_W = 8
"""Cells of the ‖dL/d(output)‖ bar."""

MAX_LAYERS = 128
"""Layers whose thumbnails are fetched (the agent's bound); rows beyond keep their bar."""


def log_fraction(value: float | None, lo: float, hi: float) -> float:
    """Where ``value`` sits between ``lo`` and ``hi`` on a log scale (0..1; 0 when absent)."""
    if value is None or not math.isfinite(value) or value <= 0 or lo <= 0:
        return 0.0
    if hi <= lo:
        return 1.0
    return max(
        0.0, min(1.0, (math.log10(value) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)))
    )


def thumb_text(array: np.ndarray | None, grad: bool, cells: int, depth: Depth) -> Text:
    """A thumbnail as half-block cells through the picture kit's colour maps at ``depth``
    (activations in VALUES, gradient magnitudes in HEAT); blank dots when there is none yet."""
    if array is None or not np.asarray(array).size:
        return Text("·" * cells, style=colors.MUTED)
    values = np.asarray(array, dtype=np.float32)
    rgb = to_rgb(values, Scale.of(values), HEAT if grad else VALUES, depth)
    return half_block_text(resample(rgb, THUMB_H, cells))


def thumb_requests(
    run: str, batch: int, sample: int, batch_events: list[ReplayEvent]
) -> list[tuple[str, dict[str, Any]]]:
    """The ``thumbs`` requests (tag, parameters) the stack makes for a batch: its layers'
    activations, and the gradients of those backward reaches (so a player can ask early)."""
    calls = [e.call for e in batch_events if e.kind == "layer" and e.call is not None]
    calls = calls[:MAX_LAYERS]
    if not calls:
        return []
    common = {"run": run, "batch": batch, "sample": sample, "width": THUMB_W, "height": THUMB_H}
    requests = [("act", {**common, "calls": calls, "grad": False})]
    backward = {e.call for e in batch_events if e.kind == "grad"}
    grads = [c for c in calls if c in backward]
    if grads:
        requests.append(("grad", {**common, "calls": grads, "grad": True}))
    return requests


class LayerStack(AgentPane):
    """The layers of one batch as rows; ``show`` says which event plays.

    Drawn line by line: an event changes two rows (the layer it leaves, the one it
    reaches), so each line is kept as cells under the key of what it shows, and a step
    of the player makes only the lines whose key changed (a whole ``Text`` made and
    rendered again per event was ≈ 10–15 ms of each `n`)."""

    DEFAULT_CSS = "LayerStack { height: 1fr; width: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.forward_layers: list[ReplayEvent] = []  # forward events of the batch, in order
        self.arrived: dict[int | None, int] = {}  # call → position of its gradient in backward
        self.event: ReplayEvent | None = None
        self._key: tuple | None = None
        self._position: dict[int | None, int] = {}  # call → its row
        self._norms = (0.0, 0.0)  # the smallest and largest ‖dL/d out‖ of the batch
        self._thumbs: dict[bool, dict[int, Any]] = {False: {}, True: {}}
        self._cells: dict[tuple[int, bool, int, str], Text] = {}
        self._version = 0  # bumped by whatever changes what the lines show
        self._shown: tuple[tuple, list[tuple]] | None = None  # (made for, each line's key)
        self._strips: dict[tuple, Strip] = {}  # a line's key → its cells
        self._strips_for: tuple[int, Style] | None = None  # the width and base style

    def load(self, run: str, batch: int, sample: int, batch_events: list[ReplayEvent]) -> None:
        """The batch's layers (from its events) and their thumbnails for ``sample``."""
        key = (run, batch, sample, len(batch_events))
        if key == self._key:
            return
        self._key = key
        self.forward_layers = [e for e in batch_events if e.kind == "layer"]
        self._position = {layer.call: i for i, layer in enumerate(self.forward_layers)}
        backward = [e for e in batch_events if e.kind == "grad"]
        self.arrived = {e.call: i for i, e in enumerate(backward)}
        norms = [layer.grad_norm for layer in self.forward_layers]
        finite = [n for n in norms if isinstance(n, (int, float)) and n > 0 and math.isfinite(n)]
        self._norms = (min(finite), max(finite)) if finite else (0.0, 0.0)
        self._thumbs = {False: {}, True: {}}
        self._cells = {}
        for tag, params in thumb_requests(run, batch, sample, batch_events):
            self.ask("thumbs", tag=tag, **params)
        self._changed(drawn=True)

    def show(self, event: ReplayEvent | None) -> None:
        self.event = event
        self._changed()

    def answered(self, tag: str, result: ThumbsReply) -> None:
        grad = tag == "grad"
        self._thumbs[grad] = {t["call"]: t.get("array") for t in result["thumbs"]}
        self._cells = {k: v for k, v in self._cells.items() if k[1] != grad}
        self._changed(drawn=True)

    def failed(self, tag: str, message: str) -> None:
        self._thumbs[tag == "grad"] = {}
        self._changed(drawn=True)

    def _changed(self, drawn: bool = False) -> None:
        """What the lines show changed; ``drawn``: so did how a line of a given key looks
        (a new batch, thumbnails answered)."""
        self._version += 1
        if drawn:
            self._strips = {}
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------

    def _state(self) -> tuple[str, int, int]:
        """(phase, forward position reached, backward position reached) of the event."""
        e = self.event
        phase = (e.phase if e else "") or "data"
        if e is not None and e.kind == "layer":
            return phase, self._position.get(e.call, -1), -1
        if e is not None and e.kind == "grad":
            return phase, len(self.forward_layers), self.arrived.get(e.call, -1)
        if phase == "loss":
            return phase, len(self.forward_layers), -1
        if phase == "optimizer":
            return phase, len(self.forward_layers), len(self.arrived)
        return phase, -1, -1

    def line_keys(self) -> list[tuple]:
        """What each line on screen shows, as a key: the heading, then the rows of the
        layers around the one playing (a row's key holds all its drawing depends on)."""
        depth = depth_of(self.app.console.color_system)
        made_for = (self._version, self.size, depth)
        if self._shown is not None and self._shown[0] == made_for:
            return self._shown[1]
        if not self.forward_layers:
            keys: list[tuple] = [("empty",)]
        else:
            _, fwd, bwd = self._state()
            current = self.event.call if self.event else None
            width = max(20, self.size.width or 40)
            # Narrow stacks (80 columns) halve the thumbnail so the names stay readable.
            thumb_w = THUMB_W if width >= 44 else THUMB_W // 2
            name_w = max(6, width - thumb_w - BAR_W - 9)
            count = len(self.forward_layers)
            height = max(3, self.size.height or count + 1)
            at = self._position.get(current, 0) if current is not None else 0
            first = max(0, min(at - height // 2, count - height))
            keys = [("heading", name_w, thumb_w)]
            for i in range(first, min(count, first + height - 1)):
                call = self.forward_layers[i].call
                call = -1 if call is None else call  # a layer without a call is never current
                arrived = call in self.arrived and self.arrived[call] <= bwd
                lit = i <= fwd
                keys.append(("row", i, call == current, lit, arrived, name_w, thumb_w, depth))
        self._shown = (made_for, keys)
        return keys

    def lines(self) -> list[Text]:
        """The lines on screen as text (what ``render_line`` draws)."""
        return [self._draw(key) for key in self.line_keys()]

    def render_line(self, y: int) -> Strip:
        keys = self.line_keys()
        width, base = self.size.width, self.rich_style
        if self._strips_for != (width, base):
            self._strips, self._strips_for = {}, (width, base)
        if y >= len(keys):
            return Strip.blank(width, base)
        key = keys[y]
        strip = self._strips.get(key)
        if strip is None:
            strip = text_strip(self._draw(key), self.app.console, base)
            strip = self._strips[key] = strip.crop_extend(0, width, base)
        return strip

    def _draw(self, key: tuple) -> Text:
        if key[0] == "empty":
            return Text("no layers in this batch (yet)", style=colors.MUTED)
        if key[0] == "heading":
            _, name_w, thumb_w = key
            return Text(
                f"{'layer':<{name_w}} {'sample':<{thumb_w}}  ‖dL/d out‖", style=colors.MUTED
            )
        _, i, here, lit, arrived, name_w, thumb_w, depth = key
        return self._row(self.forward_layers[i], here, lit, arrived, name_w, thumb_w, depth)

    def _thumb(self, call: int, grad: bool, cells: int, depth: Depth) -> Text:
        key = (call, grad, cells, depth)
        if key not in self._cells:
            array = self._thumbs[grad].get(call)
            if array is None:
                return thumb_text(None, grad, cells, depth)  # not answered yet: not kept
            self._cells[key] = thumb_text(array, grad, cells, depth)
        return self._cells[key]

    def _row(
        self,
        layer: ReplayEvent,
        here: bool,
        lit: bool,
        arrived: bool,
        name_w: int,
        thumb_w: int,
        depth: Depth,
    ) -> Text:
        call = layer.call if layer.call is not None else -1
        text = Text()
        warn = "".join(FLAGS[f].symbol for f in layer.flags if f in FLAGS and FLAGS[f].warning)
        # Clipped from the left: layer paths differ at their end (…s.1.attn.qkv).
        room = name_w - (len(warn) + 1 if warn else 0)
        name = layer.name or "?"
        name = fmt.clip_start(name, room)
        name += f" {warn}" if warn else ""
        style = "bold reverse" if here else ("" if lit or arrived else colors.MUTED)
        text.append(f"{name:<{name_w}} ", style=style)
        if arrived or lit:
            text.append_text(self._thumb(call, arrived, thumb_w, depth))
        else:
            text.append("·" * thumb_w, style=colors.MUTED)
        norm = layer.grad_norm
        if arrived:
            cells = round(log_fraction(norm, *self._norms) * BAR_W)
            text.append(" " + "█" * cells + "░" * (BAR_W - cells), style=colors.PHASE["backward"])
            text.append(f" {fmt.num(norm, 1)}", style=colors.MUTED)
        else:
            text.append(" " + "░" * BAR_W, style=colors.MUTED)
        return text
