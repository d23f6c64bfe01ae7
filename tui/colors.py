"""The viewer's colours. Colour means a training phase or a value, never decoration.

Phases: data · forward · loss · backward · update (the optimizer step). Values: a
sequential map for activations and a diverging one, centred on zero, for gradients; and
good / warn / bad for judgements such as ‖Δw‖/‖w‖.
"""

from __future__ import annotations

import numpy as np

PHASE = {
    "data": "#4fb3a9",
    "forward": "#5b9cf0",
    "loss": "#e8b33a",
    "backward": "#c27ddb",
    "optimizer": "#72c26a",
}
"""One hue per training phase; the update step is the optimizer phase."""

PHASE_LABEL = {"optimizer": "update"}

GOOD, WARN, BAD = "#72c26a", "#e8b33a", "#e5534b"
MUTED = "#7f8796"


def phase_color(phase: str | None) -> str:
    return PHASE.get(phase or "", MUTED)


def phase_label(phase: str | None) -> str:
    return PHASE_LABEL.get(phase or "", phase or "?")


def _lut(anchors: list[tuple[int, int, int]]) -> np.ndarray:
    """A 256-entry RGB table interpolated through evenly spaced anchor colours."""
    points = np.linspace(0, 255, len(anchors))
    channels = np.array(anchors, dtype=np.float64).T
    table = np.stack([np.interp(np.arange(256), points, c) for c in channels], axis=-1)
    return table.round().astype(np.uint8)


# Perceptually ordered, dark → bright, readable on dark and light terminals (viridis-like).
SEQUENTIAL = _lut([(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)])
# Blue (negative) — near-black (zero) — red (positive): zero fades into a dark terminal so
# the sign and magnitude of a gradient stand out.
DIVERGING = _lut([(80, 150, 255), (40, 70, 140), (22, 22, 28), (150, 45, 40), (255, 110, 80)])


def colorize(array: np.ndarray, lo: float, hi: float, diverging: bool) -> np.ndarray:
    """Map a 2-D float array to uint8 RGB (h×w×3). NaN/Inf become magenta so they are seen."""
    a = np.asarray(array, dtype=np.float64)
    finite = np.isfinite(a)
    if diverging:
        span = max(abs(lo), abs(hi)) or 1.0
        t = (a / span + 1.0) / 2.0
        table = DIVERGING
    else:
        span = (hi - lo) or 1.0
        t = (a - lo) / span
        table = SEQUENTIAL
    idx = np.clip(np.nan_to_num(t, nan=0.0) * 255, 0, 255).astype(np.int64)
    rgb = table[idx]
    rgb[~finite] = (255, 0, 255)
    return rgb


def ratio_color(ratio: float | None) -> str:
    """‖Δw‖/‖w‖ judged by the usual rule of thumb: around 1e-3 is healthy. Missing (a zero
    weight such as a fresh bias) is no judgement; NaN/Inf is bad."""
    if ratio is None:
        return MUTED
    if not np.isfinite(ratio):
        return BAD
    if 1e-4 <= ratio <= 1e-2:
        return GOOD
    if 1e-5 <= ratio <= 1e-1:
        return WARN
    return BAD
