"""Numpy pieces of the insight pages: PCA, attention rollout, map resizing, and token
strings joined back into text. Pure functions on arrays; no torch. Colouring is the
viewer's (its picture kit): maps leave here as floats."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tvis.store.schema import LossColumn, LossCurve


def pca(points: np.ndarray, components: int = 2) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``points`` projected on their first principal components, and the share
    of the variance each component explains.

    The axes are the top eigenvectors of the smaller of the covariance (features²) and
    Gram (rows²) matrices, found by subspace iteration: a full SVD or eigendecomposition
    of a 768-wide layer costs seconds, and the view needs two components. Signs are fixed
    (each component's largest loading is positive) so the same data gives the same
    picture every time. Fewer rows or features than ``components`` give zeros.
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
    k = min(components, n, centred.shape[1])
    by_features = centred.shape[1] <= n
    square = centred.T @ centred if by_features else centred @ centred.T
    total = float(np.trace(square))
    variance, vectors = top_eigen(square, k)
    if by_features:
        axes = vectors.T
    else:  # Gram eigenvectors are the projections; the feature axes follow from them
        lengths = np.sqrt(variance)
        axes = (centred.T @ vectors).T / np.where(lengths > 0, lengths, 1.0)[:, None]
    signs = np.sign(axes[np.arange(k), np.abs(axes).argmax(axis=1)])
    axes = axes * np.where(signs == 0, 1.0, signs)[:, None]
    out[:, :k] = centred @ axes.T
    if total > 0:
        ratio[:k] = variance / total
    return out, ratio


# Subspace iteration: a block a few vectors wider than asked converges at the rate of the
# gap to the block's edge; the residual bound stops it once the axes are exact to float32.
_EXTRA_VECTORS = 8
_MAX_ITERATIONS = 300
_TOLERANCE = 1e-9


def top_eigen(square: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` largest eigenvalues (≥ 0, descending) and eigenvectors (columns) of a
    symmetric positive semi-definite matrix, by subspace iteration with Rayleigh–Ritz."""
    size = square.shape[0]
    block = min(size, k + _EXTRA_VECTORS)
    if block == size:  # small enough to decompose whole
        values, vectors = np.linalg.eigh(square)
        return np.clip(values[::-1][:k], 0.0, None), vectors[:, ::-1][:, :k]
    start = np.random.default_rng(0).standard_normal((size, block))
    basis, _ = np.linalg.qr(start)
    scale = max(float(np.abs(square).max()), 1e-300)
    for _ in range(_MAX_ITERATIONS):
        basis, _ = np.linalg.qr(square @ basis)
        values, small = np.linalg.eigh(basis.T @ square @ basis)
        ritz = basis @ small[:, ::-1][:, :k]
        top = values[::-1][:k]
        residual = np.abs(square @ ritz - ritz * top).max()
        if residual <= _TOLERANCE * scale:
            break
    return np.clip(top, 0.0, None), ritz


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
    steps: list[dict] = []
    light: list[list[int]] = []
    seen_steps: set[int | None] = set()
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
    columns: list[LossColumn] = []
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
