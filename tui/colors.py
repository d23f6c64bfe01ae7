"""The viewer's colours. Colour means a training phase or a value, never decoration.

Phases: data · forward · loss · backward · update (the optimizer step), and good / warn /
bad for judgements such as ‖Δw‖/‖w‖. Values are coloured by the picture kit's colour maps
(``tvis.tui.picture.colormaps``).
"""

from __future__ import annotations

import math

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
NEGATIVE, POSITIVE = "#5096ff", "#ff6e50"
"""Below and above zero in one-line bars: the ends of the signed colour map."""
MUTED = "#7f8796"


def phase_color(phase: str | None) -> str:
    return PHASE.get(phase or "", MUTED)


def phase_label(phase: str | None) -> str:
    return PHASE_LABEL.get(phase or "", phase or "?")


def ratio_color(ratio: float | None) -> str:
    """‖Δw‖/‖w‖ judged by the usual rule of thumb: around 1e-3 is healthy. Missing (a zero
    weight such as a fresh bias) is no judgement; NaN/Inf is bad."""
    if ratio is None:
        return MUTED
    if not math.isfinite(ratio):
        return BAD
    if 1e-4 <= ratio <= 1e-2:
        return GOOD
    if 1e-5 <= ratio <= 1e-1:
        return WARN
    return BAD
