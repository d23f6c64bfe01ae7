"""Numpy views of one layer's tensor for one sample: what Replay's layer stack and the
"every layer" views show (On image, Neurons, thumbnails). Pure functions on arrays; they
raise ``AgentError`` (400/404) with a sentence when a view does not apply.

The arrays given here are one sample's values (the batch dim already taken out).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvis.agent import insight_views as iv
from tvis.agent import views
from tvis.agent.protocol import BAD_REQUEST, NOT_FOUND, AgentError

# Every reply of these views stays under this many bytes of array data, so one replay frame
# costs at most a few tens of KiB over two ssh hops (the budget is 32 KiB a frame).
MAX_VIEW_BYTES = 24 << 10
# Token positions of a text model's input painted with a layer's strength: a long sequence
# (the Loss page colours as many); 512 float32 strengths are 2 KiB.
MAX_TEXT_TOKENS = 512
# Raw values listed at one picked location: a screen lists far fewer; 4096 float32 = 16 KiB.
MAX_LOCATION_VALUES = 4096


@dataclass(frozen=True)
class Layout:
    """How one sample's tensor lies over the input picture.

    ``kind``: "conv" (channels × H × W), "tokens" (T × D with the patch grid of a vision
    transformer), "attention" (heads × T × T over the patch grid), or "none" with ``why``.
    """

    kind: str
    why: str | None = None
    grid: dict[str, int] | None = None


def layout(shape: Sequence[int], picture: bool, attention: bool = False) -> Layout:
    """Whether (and how) a sample's tensor of ``shape`` can be painted over the input
    picture; ``picture`` says whether the model's input is one, ``attention`` whether the
    tensor holds attention weights (heads × T × T, from the recording's attention section)."""
    if not picture:
        return Layout(
            "none", "the model's input is not a picture, so there is nothing to paint on."
        )
    dims = list(shape)
    if attention and len(dims) == 3 and dims[1] == dims[2] and iv.patch_grid(dims[1]):
        return Layout("attention", grid=iv.patch_grid(dims[1]))
    if len(dims) >= 3 and dims[-1] > 1 and dims[-2] > 1:
        return Layout("conv")
    if len(dims) == 2 and iv.patch_grid(dims[0]):
        return Layout("tokens", grid=iv.patch_grid(dims[0]))
    where = "×".join(str(d) for d in dims) or "a scalar"
    return Layout("none", f"its output ({where} per sample) has no place on the picture.")


def strength(values: np.ndarray, how: Layout, query: int = 0) -> np.ndarray:
    """The 2-D map painted over the picture: mean |x| over channels at each location (conv),
    each patch's mean |x| over its features (tokens), or where token ``query`` looks,
    heads averaged (attention). NaN/Inf count as 0 so one bad value does not blank it."""
    x = np.nan_to_num(views.as_real(np.asarray(values)).astype(np.float32), posinf=0, neginf=0)
    if how.kind == "conv":
        return np.abs(x.reshape(-1, *x.shape[-2:])).mean(axis=0)
    grid = how.grid or {}
    h, w, offset = grid.get("h", 0), grid.get("w", 0), grid.get("offset", 0)
    if how.kind == "tokens":
        return np.abs(x[offset : offset + h * w]).mean(axis=1).reshape(h, w)
    if how.kind == "attention":
        if not 0 <= query < x.shape[-1]:
            raise AgentError(f"token {query} is out of range (0–{x.shape[-1] - 1}).", BAD_REQUEST)
        return x.mean(axis=0)[query, offset : offset + h * w].reshape(h, w)
    raise AgentError(how.why or "this layer has no place on the picture.", NOT_FOUND)


def on_image(
    values: np.ndarray, how: Layout, size: tuple[int, int], query: int = 0
) -> dict[str, Any]:
    """The ``on_image`` map: the layer's strength, bilinearly resized onto a picture of
    ``size`` (h, w) and scaled to [0, 1]; ``peak`` is the largest strength before scaling."""
    small = strength(values, how, query)
    peak = float(small.max()) if small.size else 0.0
    low = float(small.min()) if small.size else 0.0
    resized = iv.resize(small, *size)
    span = peak - low
    unit = (resized - low) / span if span > 0 else np.zeros_like(resized)
    return {
        "map": np.clip(unit, 0.0, 1.0).astype(np.float32),
        "map_shape": list(small.shape),
        "peak": peak,
        "low": low,
    }


def at_location(values: np.ndarray, how: Layout, row: int, col: int) -> dict[str, Any]:
    """Every neuron's raw value at one location of the layer's map (row, col in the map's
    own grid): the channels there for a conv map, the features of that patch's token."""
    x = np.asarray(values)
    if how.kind == "conv":
        h, w = x.shape[-2:]
        picked, first = x.reshape(-1, h, w), 0
    elif how.kind == "tokens" and how.grid:
        h, w = how.grid["h"], how.grid["w"]
        picked = None
        first = how.grid["offset"]
    else:
        raise AgentError("values at a location exist for conv maps and patch tokens.", NOT_FOUND)
    if not (0 <= row < h and 0 <= col < w):
        raise AgentError(f"location ({row}, {col}) is outside the {h}×{w} map.", BAD_REQUEST)
    if picked is not None:
        found = picked[:, row, col]
    else:
        found = x[first + row * w + col]
    found = np.asarray(found, dtype=np.float32).reshape(-1)
    return {
        "row": row,
        "col": col,
        "values": found[:MAX_LOCATION_VALUES],
        "total": int(found.size),
    }


def _magnitudes(x: np.ndarray) -> np.ndarray:
    return np.abs(np.nan_to_num(views.as_real(x).astype(np.float32), posinf=0, neginf=0))


def neurons(
    values: np.ndarray,
    *,
    grid: dict[str, int] | None,
    labels: Sequence[str] | None,
    position: int | None,
    offset: int,
    limit: int,
    width: int,
    height: int,
) -> dict[str, Any]:
    """Every channel or hidden unit of one sample's tensor, most active first, one page:

    - ``maps``: a conv map's channels (C × H × W) or a vision transformer's features over
      its patch grid, each its own small map (block-mean downsampled to width × height);
    - ``strips``: a token sequence's hidden units (T × D), each a 1 × T strip;
    - ``bars``: a vector (logits, a pooled feature), or row ``position`` of a token
      sequence (a language model's logits at one position), one value per unit with
      ``labels`` (class names or tokens) when their count matches, highest value first.
    """
    if offset < 0 or limit < 1:
        raise AgentError("offset must be 0 or more and limit at least 1.", BAD_REQUEST)
    views.check_size(width, height)
    x = views.as_real(np.asarray(values))
    if position is None and x.ndim == 2 and labels is not None and len(labels) == x.shape[1]:
        position = x.shape[0] - 1  # a language model's logits: the last position's guess
    if position is not None and x.ndim == 2:
        if not 0 <= position < x.shape[0]:
            raise AgentError(
                f"position {position} is out of range (0–{x.shape[0] - 1}).", BAD_REQUEST
            )
        x = x[position]
    if x.ndim <= 1:
        return {**_bars(x.reshape(-1), labels, offset, limit), "position": position}
    if x.ndim == 2 and grid is None:
        units = np.ascontiguousarray(x.T)[:, None, :]  # D strips of 1 × T
        # A strip is one row: give it the cells a square map would have had, in length.
        kind, width, height = "strips", width * height, 1
    elif x.ndim == 2 and grid is not None:
        h, w, first = grid["h"], grid["w"], grid["offset"]
        units = np.ascontiguousarray(x[first : first + h * w].T).reshape(-1, h, w)
        kind = "maps"
    else:
        units = x.reshape(-1, *x.shape[-2:])
        kind = "maps"
    score = _magnitudes(units).reshape(units.shape[0], -1).mean(axis=1)
    order = np.argsort(-score, kind="stable")
    per_map = min(units.shape[1], height) * min(units.shape[2], width) * 4
    limit = max(1, min(limit, MAX_VIEW_BYTES // max(per_map, 1)))
    page = order[offset : offset + limit]
    maps = [views.block_mean(units[i], height, width) for i in page]
    lo, hi = views.finite_range(np.stack(maps)) if maps else (None, None)
    return {
        "kind": kind,
        "total": int(units.shape[0]),
        "offset": offset,
        "units": [int(i) for i in page],
        "scores": [float(score[i]) for i in page],
        "maps": maps,
        "map_shape": list(units.shape[1:]),
        "lo": lo,
        "hi": hi,
    }


def _bars(x: np.ndarray, labels: Sequence[str] | None, offset: int, limit: int) -> dict[str, Any]:
    labelled = labels is not None and len(labels) == x.size
    finite = np.nan_to_num(x.astype(np.float64), nan=-np.inf)
    order = np.argsort(-finite if labelled else -np.abs(finite), kind="stable")
    limit = min(limit, MAX_VIEW_BYTES // 64)  # a bar is a value and a short label
    page = order[offset : offset + limit]
    lo, hi = views.finite_range(x.astype(np.float32)) if x.size else (None, None)
    return {
        "kind": "bars",
        "order": "value" if labelled else "magnitude",  # highest first / largest |value| first
        "total": int(x.size),
        "offset": offset,
        "units": [int(i) for i in page],
        "values": [float(x[i]) for i in page],
        "labels": [str(labels[i]) for i in page] if labels is not None and labelled else None,
        "lo": lo,
        "hi": hi,
    }


def thumbnail(values: np.ndarray, width: int, height: int) -> np.ndarray:
    """A small picture of one sample's tensor for a layer stack row: mean |x| over channels
    for maps, |x| for a token × feature plane or a vector, block-mean downsampled."""
    x = _magnitudes(np.asarray(values))
    if x.ndim >= 3:
        x = x.reshape(-1, *x.shape[-2:]).mean(axis=0)
    elif x.ndim < 2:
        x = x.reshape(1, -1)
    return views.block_mean(x, height, width)
