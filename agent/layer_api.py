"""The layer-view methods of the agent API: one layer's output or gradient for the
followed sample, as Replay's layer stack shows it: painted over the input picture or its
tokens (``on_image``), channel by channel (``neurons``), and as small maps of many layers
at once (``thumbs``). The numpy work is in ``layer_views``; this reads the values."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import layer_views as lv
from tvis.agent import views
from tvis.agent.calltree import CallTree
from tvis.agent.decode import Vocabulary
from tvis.agent.dispatch import rpc
from tvis.agent.lookups import Lookups
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError
from tvis.agent.samples import model_input
from tvis.store.reader import Chunk

# Layers whose thumbnails one request asks for: a stack shows a screenful; 128 × 2 small
# maps stay well within a frame's budget.
MAX_THUMBS = 128
# A thumbnail is a hint of where a layer is active, not a picture to read.
MAX_THUMB_CELLS = 64


class LayerViewsAPI:
    """``on_image``, ``neurons`` and ``thumbs`` over the runs ``lookups`` reads."""

    def __init__(self, lookups: Lookups) -> None:
        self.lookups = lookups
        self.store = lookups.store

    def _layer_values(
        self, run: str, batch: int, call: int, sample: int, grad: bool, weights: bool = False
    ) -> tuple[Chunk, CallTree, dict[str, Any], np.ndarray]:
        """One sample's values of a call's first output (or the gradient that reached the call,
        ``CallTree.grad_output``; or, ``weights``,
        the attention weights an attention owner computed). A tensor without a batch dim
        (a position embedding) is the same for every sample and comes whole."""
        chunk = self.store.chunk(run, "batch", batch)
        tree = self.lookups.tree(run, batch)
        if call not in tree.by_id:
            raise AgentError(f"batch {batch} has no call {call}.", NOT_FOUND)
        name = tree.by_id[call].get("name")
        owned = _attention_of(chunk.record, call) if weights and not grad else None
        if owned is not None:
            entry = tree.tensor(owned)
        elif grad:
            entry = tree.grad_output(tree.by_id[call])
        else:
            entry = tree.first_output(tree.by_id[call])
        if entry is None:
            raise AgentError(f"{name} returned no tensor.", NOT_FOUND)
        if grad:
            entry = tree.grad_of(entry)
            if entry is None:
                raise AgentError(f"{name}'s output has no recorded gradient.", NOT_FOUND)
        values = chunk.array(entry["id"])
        if values is None:
            what = "gradient" if grad else "output"
            raise AgentError(
                f"{name}'s {what} has statistics only; its values were not kept.", NOT_FOUND
            )
        return chunk, tree, entry, views.take_sample(values, entry.get("batch_dim"), sample)

    def _replay_picture(
        self, run: str, chunk: Chunk, tree: CallTree, sample: int
    ) -> np.ndarray | None:
        """The followed sample's input picture at its stored size, or None without one."""
        given = model_input(chunk.record, tree)
        values = chunk.array(given["id"]) if given else None
        if values is None or values.ndim != 4 or values.shape[1] not in (1, 3, 4):
            return None
        return views.take_sample(values, 0, sample)

    def _replay_tokens(self, chunk: Chunk, tree: CallTree, sample: int) -> np.ndarray | None:
        """The followed sample's input token ids (1-D), or None when the input is no such."""
        given = model_input(chunk.record, tree)
        values = chunk.array(given["id"]) if given else None
        if values is None or values.ndim != 2 or values.dtype.kind not in "iu":
            return None
        if not 0 <= sample < values.shape[0]:
            return None
        return np.asarray(values[sample])

    def _on_tokens(
        self, run: str, chunk: Chunk, tree: CallTree, sample: int, values: np.ndarray
    ) -> dict[str, Any] | None:
        """For a text model, the layer "on the input" is on its tokens: each position's
        mean |x| over its features, scaled to [0, 1] (``kind: "text"``). None when the input
        is not token ids or the layer has no position axis that matches them."""
        ids = self._replay_tokens(chunk, tree, sample)
        if ids is None or values.ndim < 1 or values.shape[0] != ids.size or not ids.size:
            return None
        x = np.nan_to_num(views.as_real(np.asarray(values)).astype(np.float32), posinf=0, neginf=0)
        per_position = np.abs(x.reshape(ids.size, -1)).mean(axis=1)[: lv.MAX_TEXT_TOKENS]
        low, peak = float(per_position.min()), float(per_position.max())
        span = peak - low
        unit = (per_position - low) / span if span > 0 else np.zeros_like(per_position)
        vocab = Vocabulary(self.store.index(run).get("data"))
        shown = ids[: lv.MAX_TEXT_TOKENS].tolist()
        return {
            "kind": "text",
            "tokens": [vocab.token(int(i)) for i in shown],
            "strength": unit.astype(np.float32),
            "peak": peak,
            "low": low,
            "total": int(ids.size),
            "vocab_why": vocab.why,
        }

    @rpc
    def on_image(
        self,
        run: str,
        batch: int,
        call: int,
        sample: int = 0,
        grad: bool = False,
        query: int = 0,
        at: list[int] | None = None,
        picture: bool = False,
        width: int = 48,
        height: int = 48,
    ) -> dict[str, Any]:
        """A layer's activation (or gradient) for ``sample`` painted over the input picture:
        ``map`` in [0, 1] at the picture's shrunk size; ``at = [row, col]`` (in the map's own
        grid) adds every neuron's raw value there; ``picture`` adds the picture itself.
        ``applies: false`` with ``why`` (one sentence) when the layer has no place on it."""
        views.check_size(width, height)
        if width * height * 4 > lv.MAX_VIEW_BYTES:
            raise AgentError("an on-image map is at most 6144 cells (e.g. 96 × 64).", BAD_REQUEST)
        chunk, tree, entry, values = self._layer_values(
            run, batch, call, sample, grad, weights=True
        )
        pixels = self._replay_picture(run, chunk, tree, sample)
        how = lv.layout(values.shape, pixels is not None, _is_attention(chunk.record, entry))
        base = {
            "call": call,
            "sample": sample,
            "grad": grad,
            "tensor": entry["id"],
            "kind": how.kind,
        }
        if pixels is None:
            text = self._on_tokens(run, chunk, tree, sample, values)
            if text is not None:
                return {**base, "applies": True, **text}
        if how.kind == "none" or pixels is None:
            return {**base, "applies": False, "why": how.why}
        shown = views.picture(pixels, self.lookups.normalize(run), width, height)
        size = tuple(shown["array"].shape[:2])
        result = {
            **base,
            "applies": True,
            "grid": how.grid,
            "query": query if how.kind == "attention" else None,
            **lv.on_image(values, how, size, query),
        }
        result["image"] = shown["array"] if picture else None
        if at is not None:
            if len(at) != 2:
                raise AgentError("at must be [row, col].", BAD_REQUEST)
            result["location"] = lv.at_location(values, how, at[0], at[1])
        return result

    @rpc
    def neurons(
        self,
        run: str,
        batch: int,
        call: int,
        sample: int = 0,
        grad: bool = False,
        position: int | None = None,
        offset: int = 0,
        limit: int = 16,
        width: int = 12,
        height: int = 12,
    ) -> dict[str, Any]:
        """Every channel / hidden unit of a layer for ``sample``, most active first, one page
        (see ``layer_views.neurons``); vectors as bars labelled with class names or tokens."""
        chunk, tree, entry, values = self._layer_values(run, batch, call, sample, grad)
        data = self.store.index(run).get("data") or {}
        labels = _labels(data, values.shape[-1] if values.ndim else 0)
        grid = None
        if values.ndim == 2 and self._replay_picture(run, chunk, tree, sample) is not None:
            grid = lv.layout(values.shape, True).grid
        result = lv.neurons(
            values,
            grid=grid,
            labels=labels,
            position=position,
            offset=offset,
            limit=limit,
            width=width,
            height=height,
        )
        result.update(
            call=call, sample=sample, grad=grad, tensor=entry["id"], shape=list(values.shape)
        )
        return result

    @rpc
    def thumbs(
        self,
        run: str,
        batch: int,
        calls: list[int],
        sample: int = 0,
        grad: bool = False,
        width: int = 8,
        height: int = 4,
    ) -> dict[str, Any]:
        """Small maps of several layers for ``sample`` (a layer stack's thumbnails): mean |x|
        per location; a layer without values gets ``array: null`` and ``why``."""
        if len(calls) > MAX_THUMBS:
            raise AgentError(f"ask for at most {MAX_THUMBS} thumbnails at once.", BAD_REQUEST)
        if not (1 <= width and 1 <= height and width * height <= MAX_THUMB_CELLS):
            raise AgentError(f"a thumbnail is at most {MAX_THUMB_CELLS} cells.", BAD_REQUEST)
        rows: list[dict[str, Any]] = []
        for call in calls:
            try:
                _, _, entry, values = self._layer_values(run, batch, call, sample, grad)
            except AgentError as e:
                rows.append({"call": call, "array": None, "why": e.message})
                continue
            small = lv.thumbnail(values, width, height)
            lo, hi = views.finite_range(small)
            rows.append({"call": call, "array": small, "lo": lo, "hi": hi})
        return {"sample": sample, "grad": grad, "thumbs": rows}


def _attention_of(record: dict[str, Any], call: int) -> int | None:
    """The attention weights tensor the attention owner ``call`` computed, if recorded."""
    for found in record.get("attention") or []:
        if isinstance(found, dict) and found.get("call") == call:
            return found.get("tensor")
    return None


def _is_attention(record: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Whether ``entry`` holds attention weights: recorded as such, or a tensor of their
    shape (the dropout applied to them)."""
    shapes = [a.get("shape") for a in record.get("attention") or [] if isinstance(a, dict)]
    found = {a.get("tensor") for a in record.get("attention") or [] if isinstance(a, dict)}
    return entry.get("id") in found or entry.get("shape") in shapes


def _labels(data: dict[str, Any], n: int) -> list[str] | None:
    """Class names or vocabulary tokens for a vector of ``n`` units, when one matches."""
    for key in ("classes", "vocab"):
        names = data.get(key)
        if isinstance(names, list) and len(names) == n and n > 0:
            return [str(x) for x in names]
    return None
