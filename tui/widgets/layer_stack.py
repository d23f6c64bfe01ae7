"""Replay's layer stack: one row per layer of the batch, in forward order, with a thumbnail
of its activation for the followed sample that lights up when forward reaches it and turns
into its gradient when backward does, and ‖dL/d(output)‖ as a bar on a log scale."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from rich.text import Text

from tvis.agent.replies import ReplayEvent, ThumbsReply
from tvis.store.schema import FLAGS
from tvis.tui import colors, fmt
from tvis.tui.pane import AgentPane
from tvis.tui.picture import HEAT, VALUES, Scale, to_rgb
from tvis.tui.picture.colormaps import Depth
from tvis.tui.picture.raster import half_block_text, resample
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
    """The layers of one batch as rows; ``show`` says which event plays."""

    DEFAULT_CSS = "LayerStack { height: 1fr; width: 1fr; }"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.forward_layers: list[ReplayEvent] = []  # forward events of the batch, in order
        self.arrived: dict[int | None, int] = {}  # call → position of its gradient in backward
        self.event: ReplayEvent | None = None
        self._key: tuple | None = None
        self._thumbs: dict[bool, dict[int, Any]] = {False: {}, True: {}}
        self._cells: dict[tuple[int, bool, int, str], Text] = {}
        self._thumb_w = THUMB_W  # thumbnails drawn once per answer

    def load(self, run: str, batch: int, sample: int, batch_events: list[ReplayEvent]) -> None:
        """The batch's layers (from its events) and their thumbnails for ``sample``."""
        key = (run, batch, sample, len(batch_events))
        if key == self._key:
            return
        self._key = key
        self.forward_layers = [e for e in batch_events if e.kind == "layer"]
        backward = [e for e in batch_events if e.kind == "grad"]
        self.arrived = {e.call: i for i, e in enumerate(backward)}
        self._thumbs = {False: {}, True: {}}
        self._cells = {}
        for tag, params in thumb_requests(run, batch, sample, batch_events):
            self.ask("thumbs", tag=tag, **params)
        self.refresh()

    def show(self, event: ReplayEvent | None) -> None:
        self.event = event
        self.refresh()

    def answered(self, tag: str, result: ThumbsReply) -> None:
        grad = tag == "grad"
        self._thumbs[grad] = {t["call"]: t.get("array") for t in result["thumbs"]}
        self._cells = {k: v for k, v in self._cells.items() if k[1] != grad}
        self.refresh()

    def failed(self, tag: str, message: str) -> None:
        self._thumbs[tag == "grad"] = {}
        self.refresh()

    # -- drawing ---------------------------------------------------------------------------

    def _state(self) -> tuple[str, int, int]:
        """(phase, forward position reached, backward position reached) of the event."""
        e = self.event
        phase = (e.phase if e else "") or "data"
        position = {layer.call: i for i, layer in enumerate(self.forward_layers)}
        if e is not None and e.kind == "layer":
            return phase, position.get(e.call, -1), -1
        if e is not None and e.kind == "grad":
            return phase, len(self.forward_layers), self.arrived.get(e.call, -1)
        if phase == "loss":
            return phase, len(self.forward_layers), -1
        if phase == "optimizer":
            return phase, len(self.forward_layers), len(self.arrived)
        return phase, -1, -1

    def render(self) -> Text:
        if not self.forward_layers:
            return Text("no layers in this batch (yet)", style=colors.MUTED)
        phase, fwd, bwd = self._state()
        current = self.event.call if self.event else None
        norms = [layer.grad_norm for layer in self.forward_layers]
        finite = [n for n in norms if isinstance(n, (int, float)) and n > 0 and math.isfinite(n)]
        lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
        width = max(20, self.size.width or 40)
        # Narrow stacks (80 columns) halve the thumbnail so the names stay readable.
        self._thumb_w = THUMB_W if width >= 44 else THUMB_W // 2
        name_w = max(6, width - self._thumb_w - BAR_W - 9)
        rows = [
            self._row(i, layer, fwd, bwd, current, lo, hi, name_w)
            for i, layer in enumerate(self.forward_layers)
        ]
        height = max(3, self.size.height or len(rows))
        at = next((i for i, layer in enumerate(self.forward_layers) if layer.call == current), 0)
        first = max(0, min(at - height // 2, len(rows) - height))
        text = Text()
        header = Text(
            f"{'layer':<{name_w}} {'sample':<{self._thumb_w}}  ‖dL/d out‖", style=colors.MUTED
        )
        text.append_text(header)
        for row in rows[first : first + height - 1]:
            text.append("\n")
            text.append_text(row)
        return text

    def _thumb(self, call: int, grad: bool) -> Text:
        depth = depth_of(self.app.console.color_system)
        key = (call, grad, self._thumb_w, depth)
        if key not in self._cells:
            array = self._thumbs[grad].get(call)
            if array is None:
                return thumb_text(None, grad, self._thumb_w, depth)  # not answered yet: not kept
            self._cells[key] = thumb_text(array, grad, self._thumb_w, depth)
        return self._cells[key]

    def _row(
        self,
        i: int,
        layer: ReplayEvent,
        fwd: int,
        bwd: int,
        current: Any,
        lo: float,
        hi: float,
        name_w: int,
    ) -> Text:
        call = layer.call if layer.call is not None else -1
        arrived = call in self.arrived and self.arrived[call] <= bwd
        lit = i <= fwd
        here = call == current
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
            text.append_text(self._thumb(call, grad=arrived))
        else:
            text.append("·" * self._thumb_w, style=colors.MUTED)
        norm = layer.grad_norm
        if arrived:
            cells = round(log_fraction(norm, lo, hi) * BAR_W)
            text.append(" " + "█" * cells + "░" * (BAR_W - cells), style=colors.PHASE["backward"])
            text.append(f" {fmt.num(norm, 1)}", style=colors.MUTED)
        else:
            text.append(" " + "░" * BAR_W, style=colors.MUTED)
        return text
