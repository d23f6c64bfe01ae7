"""Numpy pieces of the insight pages: PCA, attention rollout, map resizing and colouring,
and token strings joined back into text. Pure functions on arrays; no torch."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tvis.store.schema import LossCurve


def pca(points: np.ndarray, components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``points`` projected on their first principal components, and the share
    of the variance each component explains.

    Signs are fixed (each component's largest loading is positive) so the same data gives
    the same picture every time. Fewer rows or features than ``components`` give zeros.
    """
    x = np.asarray(points, dtype=np.float64)
    x = x.reshape(x.shape[0], -1) if x.ndim != 2 else x
    n = x.shape[0]
    out = np.zeros((n, components), dtype=np.float32)
    ratio = np.zeros(components, dtype=np.float32)
    x = x[:, np.all(np.isfinite(x), axis=0)] if n else x
    if n < 2 or x.shape[1] == 0:
        return out, ratio
    centred = x - x.mean(axis=0)
    _, singular, vt = np.linalg.svd(centred, full_matrices=False)
    k = min(components, vt.shape[0])
    axes = vt[:k]
    signs = np.sign(axes[np.arange(k), np.abs(axes).argmax(axis=1)])
    axes = axes * np.where(signs == 0, 1.0, signs)[:, None]
    out[:, :k] = centred @ axes.T
    variance = singular**2
    total = variance.sum()
    if total > 0:
        ratio[:k] = variance[:k] / total
    return out, ratio


def rollout(layers: Sequence[np.ndarray]) -> np.ndarray:
    """Attention rollout across layers (first layer first): each head-averaged map mixed
    with the identity for the residual path, 0.5·A + 0.5·I, its rows normalised to sum
    to 1, and the layers multiplied through, ``R = Â_L · … · Â_1``."""
    result = None
    for attention in layers:
        a = np.asarray(attention, dtype=np.float64)
        a = 0.5 * a + 0.5 * np.eye(a.shape[-1])
        sums = a.sum(axis=-1, keepdims=True)
        a = a / np.where(sums == 0, 1.0, sums)
        result = a if result is None else a @ result
    if result is None:
        raise ValueError("rollout needs at least one attention map")
    return result.astype(np.float32)


def resize(values: np.ndarray, height: int, width: int) -> np.ndarray:
    """A 2-D array resized bilinearly to ``height`` × ``width`` (pixel centres aligned,
    as an image library resizes a Grad-CAM map onto its picture)."""
    values = np.asarray(values, dtype=np.float64)
    h, w = values.shape

    def axis(n_out: int, n_in: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        pos = np.clip((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0, n_in - 1)
        lo = np.floor(pos).astype(int)
        hi = np.minimum(lo + 1, n_in - 1)
        return lo, hi, pos - lo

    r0, r1, fr = axis(height, h)
    c0, c1, fc = axis(width, w)
    top = values[r0][:, c0] * (1 - fc) + values[r0][:, c1] * fc
    bottom = values[r1][:, c0] * (1 - fc) + values[r1][:, c1] * fc
    return (top * (1 - fr[:, None]) + bottom * fr[:, None]).astype(np.float32)


# Heat colours for a map in [0, 1]: dark blue, blue, cyan, yellow, red (a jet-like ramp
# people read Grad-CAM overlays with).
_STOPS = np.array([0.0, 0.25, 0.5, 0.75, 1.0])
_COLOURS = np.array(
    [[0, 0, 128], [0, 64, 255], [0, 224, 255], [255, 224, 0], [224, 0, 0]], dtype=np.float64
)


def heat_colours(unit: np.ndarray) -> np.ndarray:
    """A map with values in [0, 1] as uint8 RGB heat colours (NaN shows as the lowest)."""
    v = np.clip(np.nan_to_num(np.asarray(unit, dtype=np.float64), nan=0.0), 0.0, 1.0)
    rgb = np.stack([np.interp(v, _STOPS, _COLOURS[:, c]) for c in range(3)], axis=-1)
    return rgb.round().astype(np.uint8)


def blend(image: np.ndarray, unit_map: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """Heat colours of ``unit_map`` laid over an RGB or grey uint8 ``image`` of its size."""
    rgb = image if image.ndim == 3 else np.repeat(image[..., None], 3, axis=-1)
    mixed = (1 - alpha) * rgb[..., :3].astype(np.float64) + alpha * heat_colours(unit_map)
    return np.clip(mixed, 0, 255).round().astype(np.uint8)


def join_tokens(tokens: Sequence[str]) -> str:
    """Token strings back into text, for the tokenizer families a vocabulary shows:
    byte-level BPE (``Ġ`` marks a space), SentencePiece (``▁``), WordPiece (``##``
    continues a word), characters, or whole words."""
    tokens = [t for t in tokens if t]
    if any("Ġ" in t or "Ċ" in t for t in tokens):
        return "".join(tokens).replace("Ġ", " ").replace("Ċ", "\n")
    if any(t.startswith("▁") for t in tokens):
        return "".join(tokens).replace("▁", " ").strip()
    if any(t.startswith("##") for t in tokens):
        return " ".join(tokens).replace(" ##", "")
    plain = [t for t in tokens if not _special(t)]
    if plain and all(len(t) == 1 for t in plain):
        return "".join(tokens)
    return " ".join(tokens)


def _special(token: str) -> bool:
    """``<eos>``, ``[CLS]`` and the like: markers, not text."""
    return len(token) > 2 and token[0] + token[-1] in ("<>", "[]")


def patch_grid(tokens: int) -> dict[str, int] | None:
    """Where a vision transformer's patches sit: ``{h, w, offset}`` when ``tokens`` is a
    square number of patches, with or without one leading [CLS] token."""
    for offset in (1, 0):
        side = int(round((tokens - offset) ** 0.5))
        if side > 1 and side * side == tokens - offset:
            return {"h": side, "w": side, "offset": offset}
    return None


def loss_curve(batches: list[dict[str, Any]], width: int) -> LossCurve:
    """The ``loss_curve`` reply body from the run index's batch maps (in recorded order)."""
    steps, light, seen_steps = [], [], set()
    previous = None
    for b in batches:
        if not b.get("light") and b.get("step") not in seen_steps:
            seen_steps.add(b.get("step"))
            steps.append({"step": b.get("step"), "batch": b["index"]})
        if b.get("light"):
            if light and light[-1][1] == previous:
                light[-1][1] = b["index"]
            else:
                light.append([b["index"], b["index"]])
        previous = b["index"]
    points = [
        (b["index"], float(b["loss"]), bool(b.get("light")))
        for b in batches
        if isinstance(b.get("loss"), (int, float)) and math.isfinite(b["loss"])
    ]
    columns = []
    for chunk in np.array_split(np.arange(len(points)), min(width, len(points)) or 1):
        if chunk.size == 0:
            continue
        part = [points[i] for i in chunk]
        losses = [p[1] for p in part]
        columns.append(
            {
                "first": part[0][0],
                "last": part[-1][0],
                "lo": min(losses),
                "hi": max(losses),
                "mean": sum(losses) / len(losses),
                "light": all(p[2] for p in part),
            }
        )
    values = [p[1] for p in points]
    return {
        "columns": columns,
        "steps": steps,
        "light": light,
        "total": len(points),
        "lo": min(values) if values else None,
        "hi": max(values) if values else None,
    }
