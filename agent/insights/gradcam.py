"""The Grad-CAM view's agent methods: one sample's map for a conv layer and a class choice
(predicted or true) laid onto its input picture, and grids of them: every sample for one
layer, or every layer for one sample. Maps are floats in [0, 1]; the viewer colours them."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent import views
from tvis.agent.dispatch import rpc
from tvis.agent.insights.common import InsightBase, class_name, is_picture_batch, section_list
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError, require_non_negative
from tvis.agent.samples import model_input
from tvis.store.reader import Chunk

# Pixels in one grid reply (cells × width × height): 16 cells of 32 × 32 at 7 bytes per
# pixel (float map + RGB picture) stay near the 64 KiB budget of a view.
MAX_GRID_PIXELS = 16384
# Cells in one grid: a screen shows a few dozen thumbnails at most.
MAX_GRID_CELLS = 64
# A map fewer cells a side than this cannot say where in the picture the evidence is (a
# CIFAR-sized ResNet's last layers are 1×1 and 2×2): the layer shown first is the deepest
# whose map has at least this many.
MIN_SIDE = 4


class GradcamAPI(InsightBase):
    """``gradcam`` and ``gradcam_grid``."""

    @rpc
    def gradcam(
        self,
        run: str,
        batch: int,
        sample: int = 0,
        layer: str | None = None,
        which: str = "pred",
        width: int = 64,
        height: int = 32,
    ) -> dict[str, Any]:
        """A Grad-CAM map for one sample, conv layer and class choice (``pred`` or
        ``true``), resized onto the input picture and scaled to [0, 1]."""
        require_non_negative(sample=sample)
        views.check_size(width, height)
        chunk = self.store.chunk(run, "batch", batch)
        maps = _maps(chunk, batch)
        layers = list(dict.fromkeys(m["layer"] for m in maps if isinstance(m.get("layer"), str)))
        layer = layer if layer is not None else _first_layer(chunk, maps, layers)
        cell = self._cell(run, batch, maps, layer, which, sample, width, height)
        return {
            "layers": layers,
            "choices": [m.get("which") for m in maps if m.get("layer") == layer],
            **cell,
        }

    @rpc
    def gradcam_grid(
        self,
        run: str,
        batch: int,
        layer: str | None = None,
        which: str = "pred",
        sample: int | None = None,
        width: int = 24,
        height: int = 24,
        limit: int = 32,
        first: int = 0,
    ) -> dict[str, Any]:
        """Many small Grad-CAM cells at once: without ``sample``, the kept samples from
        ``first`` (up to ``limit``) for one layer; with ``sample``, every layer for it."""
        require_non_negative(sample=sample)
        views.check_size(width, height)
        cells_wanted = min(limit, MAX_GRID_CELLS)
        if cells_wanted < 1 or cells_wanted * width * height > MAX_GRID_PIXELS:
            raise AgentError(
                f"limit × width × height must stay within {MAX_GRID_PIXELS} pixels "
                f"(and limit between 1 and {MAX_GRID_CELLS}).",
                BAD_REQUEST,
            )
        chunk = self.store.chunk(run, "batch", batch)
        maps = _maps(chunk, batch)
        layers = list(dict.fromkeys(m["layer"] for m in maps if isinstance(m.get("layer"), str)))
        if sample is None:
            layer = layer if layer is not None else _first_layer(chunk, maps, layers)
            kept = _kept(chunk, maps, layer, which)
            pairs = [(layer, s) for s in range(max(first, 0), min(kept, first + cells_wanted))]
        else:
            pairs = [(name, sample) for name in layers[:cells_wanted]]
        cells = [self._cell(run, batch, maps, n, which, s, width, height) for n, s in pairs]
        return {
            "layers": layers,
            "layer": layer if sample is None else None,
            "sample": sample,
            "which": which,
            "kept": _kept(chunk, maps, layer or layers[-1], which),
            "cells": cells,
        }

    def _cell(
        self,
        run: str,
        batch: int,
        maps: list[dict],
        layer: str,
        which: str,
        sample: int,
        width: int,
        height: int,
    ) -> dict[str, Any]:
        chunk = self.store.chunk(run, "batch", batch)
        choice = _choice(maps, layer, which)
        cam = views.take_sample(
            self.lookups.values(chunk, chunk.tensor(choice["tensor"])), 0, sample
        )
        cam = cam.astype(np.float64)
        picture = self._picture(run, batch, chunk, sample, width, height)
        out_h, out_w = picture.shape[:2] if picture is not None else _fit(cam.shape, height, width)
        peak = float(cam.max()) if cam.size else 0.0
        loss_given = chunk.record.get("loss")
        loss: dict[str, Any] = loss_given if isinstance(loss_given, dict) else {}
        cls = _class_of(chunk, loss, which, sample)
        return {
            "layer": layer,
            "which": which,
            "sample": sample,
            "class": cls,
            "class_name": class_name(self.lookups.data_info(run).get("classes"), cls),
            "p": _probability(chunk, loss, which, sample, cls),
            "approximate": bool(choice.get("approximate")),
            "map": iv.resize(cam / peak if peak > 0 else cam, out_h, out_w),
            "peak": peak,
            "map_shape": list(cam.shape),
            "image": picture,
        }

    def _picture(
        self, run: str, batch: int, chunk: Chunk, sample: int, width: int, height: int
    ) -> np.ndarray | None:
        given = model_input(chunk.record, self.lookups.tree(run, batch))
        if given is None or not is_picture_batch(given):
            return None
        values = chunk.array(given["id"])
        if values is None or sample >= values.shape[0]:
            return None
        return views.picture(values[sample], self.lookups.normalize(run), width, height)["array"]


def _maps(chunk: Chunk, batch: int) -> list[dict]:
    maps = section_list(chunk.record, "gradcam")
    if not maps:
        raise AgentError(f"batch {batch} has no Grad-CAM maps.", NOT_FOUND)
    return maps


def _choice(maps: list[dict], layer: str, which: str) -> dict:
    choice = next((m for m in maps if m.get("layer") == layer and m.get("which") == which), None)
    if choice is None:
        layers = list(dict.fromkeys(m["layer"] for m in maps if isinstance(m.get("layer"), str)))
        raise AgentError(
            f"no Grad-CAM for layer {layer!r} and class {which!r}; layers: {layers}.", NOT_FOUND
        )
    return choice


def _first_layer(chunk: Chunk, maps: list[dict], layers: list[str]) -> str:
    """The deepest layer whose map is at least MIN_SIDE cells a side, else the deepest."""
    for name in reversed(layers):
        shape = (chunk.tensor(_choice(maps, name, "pred")["tensor"]) or {}).get("shape") or []
        if len(shape) >= 2 and min(shape[-2:]) >= MIN_SIDE:
            return name
    return layers[-1]


def _kept(chunk: Chunk, maps: list[dict], layer: str, which: str) -> int:
    """How many samples have a map of ``layer`` (the recorder may keep the first few)."""
    values = chunk.array(_choice(maps, layer, which)["tensor"])
    return int(values.shape[0]) if values is not None else 0


def _fit(shape: tuple, height: int, width: int) -> tuple[int, int]:
    h, w = shape[-2:]
    factor = max(-(-h // height), -(-w // width), 1)
    return -(-h // factor), -(-w // factor)


def _class_of(chunk: Chunk, loss: dict, which: str, sample: int) -> int | None:
    key = "pred" if which == "pred" else "target"
    if not isinstance(loss.get(key), int) or loss.get("shape") is None:
        return None
    values = chunk.array(loss[key])
    if values is None or values.ndim != 1 or sample >= values.shape[0]:
        return None
    return int(values[sample])


def _probability(chunk: Chunk, loss: dict, which: str, sample: int, cls: int | None) -> Any:
    """The model's probability for the chosen class: p(target) for the true class, the
    top-1 probability for the predicted one; null when not recorded."""
    if cls is None:
        return None
    if which != "pred" and isinstance(loss.get("p_target"), int):
        values = chunk.array(loss["p_target"])
        if values is not None and values.ndim == 1 and sample < values.shape[0]:
            return float(values[sample])
    if isinstance(loss.get("top_i"), int) and isinstance(loss.get("top_p"), int):
        top_i, top_p = chunk.array(loss["top_i"]), chunk.array(loss["top_p"])
        if top_i is not None and top_p is not None and sample < top_i.shape[0]:
            hits = np.flatnonzero(np.asarray(top_i[sample]).reshape(-1) == cls)
            if hits.size:
                return float(np.asarray(top_p[sample]).reshape(-1)[hits[0]])
    return None
