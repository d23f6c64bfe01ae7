"""The viewer's colour maps: values, signed values, heat overlays, and what a terminal keeps of them.

Colour means a value here, never decoration. ``VALUES`` is perceptually ordered (dark →
bright, viridis-like) for activations and weights; ``SIGNED`` runs blue (negative) through
near-black (zero) to red (positive) for gradients, updates and residuals; ``HEAT`` is laid
over pictures (Grad-CAM, On image). NaN is magenta and ±Inf white in every map, so they are
seen.

Terminals without truecolor get a shorter palette of colours they really have: each map is
sampled onto the xterm 256-colour cube (only entries that survive Rich's colour downgrade
unchanged, so a dark purple never turns grey), or onto a hand-picked ramp of the 16 ANSI
colours. ``palette(cmap, depth)`` gives that palette; the legend shows the same colours.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np

Depth = Literal["truecolor", "256", "16"]

NAN_RGB = (255, 0, 255)
INF_RGB = (255, 255, 255)


def _lut(anchors: list[tuple[int, int, int]]) -> np.ndarray:
    """A 256-entry RGB table interpolated through evenly spaced anchor colours."""
    points = np.linspace(0, 255, len(anchors))
    channels = np.array(anchors, dtype=np.float64).T
    table = np.stack([np.interp(np.arange(256), points, c) for c in channels], axis=-1)
    return table.round().astype(np.uint8)


@dataclass(frozen=True, eq=False)
class Colormap:
    """A colour map: 256 RGB entries from the low end to the high end, and the ramp of
    ANSI colour numbers that stands in for it on a 16-colour terminal."""

    name: str
    lut: np.ndarray
    ansi16: tuple[int, ...]


VALUES = Colormap(
    "values",
    _lut([(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]),
    (5, 4, 12, 6, 14, 2, 10, 11),
)
SIGNED = Colormap(
    "signed",
    # Zero fades into a dark terminal so the sign and size of a gradient stand out.
    _lut([(80, 150, 255), (40, 70, 140), (22, 22, 28), (150, 45, 40), (255, 110, 80)]),
    (12, 4, 8, 1, 9),
)
HEAT = Colormap(
    "heat",
    _lut([(0, 0, 4), (87, 16, 110), (188, 55, 84), (249, 142, 9), (252, 255, 164)]),
    (0, 5, 1, 9, 3, 11, 15),
)

# The 16 ANSI colours as Rich downgrades to them (its standard palette): a colour emitted
# with exactly these components is drawn as that ANSI colour, whatever the theme.
_ANSI16 = [
    (0, 0, 0),
    (170, 0, 0),
    (0, 170, 0),
    (170, 85, 0),
    (0, 0, 170),
    (170, 0, 170),
    (0, 170, 170),
    (170, 170, 170),
    (85, 85, 85),
    (255, 85, 85),
    (85, 255, 85),
    (255, 255, 85),
    (85, 85, 255),
    (255, 85, 255),
    (85, 255, 255),
    (255, 255, 255),
]

CUBE_STEPS = 24
"""Points at which a map is sampled onto the 256-colour cube: about as many distinct cube
colours as a map's path crosses, so neighbouring levels stay apart."""


def _xterm256() -> np.ndarray:
    levels = [0, 95, 135, 175, 215, 255]
    cube = [(levels[i // 36], levels[i // 6 % 6], levels[i % 6]) for i in range(216)]
    greys = [(8 + 10 * i,) * 3 for i in range(24)]
    return np.array(cube + greys, dtype=np.float64)  # indices 16..255


@cache
def _cube_candidates() -> np.ndarray:
    """256-colour entries that Rich's downgrade maps back to themselves."""
    from rich.color import Color, ColorSystem

    table = _xterm256()
    keep = [
        rgb
        for i, rgb in enumerate(table, start=16)
        if Color.from_rgb(*rgb).downgrade(ColorSystem.EIGHT_BIT).number == i
    ]
    return np.array(keep, dtype=np.float64)


def _nearest(colours: np.ndarray, candidates: np.ndarray) -> np.ndarray:
    # Red-mean weighted distance: close enough to perception for picking palette entries.
    rmean = (colours[:, None, 0] + candidates[None, :, 0]) / 2
    d = colours[:, None, :] - candidates[None, :, :]
    dist = (
        (2 + rmean / 256) * d[..., 0] ** 2
        + 4 * d[..., 1] ** 2
        + (2 + (255 - rmean) / 256) * d[..., 2] ** 2
    )
    return candidates[np.argmin(dist, axis=1)]


@cache
def palette(cmap: Colormap, depth: Depth) -> np.ndarray:
    """The colours (K×3 uint8, low → high) ``cmap`` is drawn with at colour ``depth``."""
    if depth == "truecolor":
        return cmap.lut
    if depth == "16":
        return np.array([_ANSI16[i] for i in cmap.ansi16], dtype=np.uint8)
    samples = cmap.lut[np.linspace(0, 255, CUBE_STEPS).round().astype(int)].astype(np.float64)
    picked = _nearest(samples, _cube_candidates())
    distinct = [picked[0]]
    for colour in picked[1:]:
        if not np.array_equal(colour, distinct[-1]):
            distinct.append(colour)
    return np.array(distinct, dtype=np.uint8)


def nonfinite_rgb(depth: Depth) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(NaN colour, Inf colour) at ``depth``: bright magenta and white are in every palette."""
    if depth == "16":
        return _ANSI16[13], _ANSI16[15]
    return NAN_RGB, INF_RGB


@dataclass(frozen=True)
class Scale:
    """How values map to colours: ``lo`` → the low end, ``hi`` → the high end. A signed
    scale is symmetric around zero, so zero always has the middle colour."""

    lo: float
    hi: float
    signed: bool = False

    @classmethod
    def of(cls, array: np.ndarray, signed: bool = False) -> Scale:
        """The scale spanning the finite values of ``array`` (0..1 when there are none)."""
        a = np.asarray(array, dtype=np.float64)
        finite = a[np.isfinite(a)]
        if finite.size == 0:
            return cls(-1.0 if signed else 0.0, 1.0, signed)
        lo, hi = float(finite.min()), float(finite.max())
        if signed:
            span = max(abs(lo), abs(hi)) or 1.0
            return cls(-span, span, True)
        return cls(lo, hi, False)

    def unit(self, array: np.ndarray) -> np.ndarray:
        """Values placed on [0, 1] (clipped); non-finite values stay NaN/±Inf."""
        a = np.asarray(array, dtype=np.float64)
        span = (self.hi - self.lo) or 1.0
        with np.errstate(invalid="ignore"):
            t = (a - self.lo) / span
            return np.where(np.isfinite(a), np.clip(t, 0.0, 1.0), a)


def levels(unit: np.ndarray, colours: int) -> np.ndarray:
    """Palette positions (0..colours-1) of values on [0, 1]; non-finite → 0 (painted over)."""
    t = np.nan_to_num(unit, nan=0.0, posinf=1.0, neginf=0.0)
    return np.clip((t * (colours - 1)).round(), 0, colours - 1).astype(np.intp)


def to_rgb(
    array: np.ndarray, scale: Scale, cmap: Colormap | None = None, depth: Depth = "truecolor"
) -> np.ndarray:
    """Colour a 2-D array (h×w×3 uint8). NaN is magenta, ±Inf white."""
    cmap = cmap or (SIGNED if scale.signed else VALUES)
    colours = palette(cmap, depth)
    a = np.asarray(array, dtype=np.float64)
    rgb = colours[levels(scale.unit(a), len(colours))]
    nan, inf = nonfinite_rgb(depth)
    rgb[np.isnan(a)] = nan
    rgb[np.isinf(a)] = inf
    return rgb


def overlay(picture: np.ndarray, unit_map: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """``HEAT`` colours of a [0, 1] map laid over an RGB or grey uint8 picture of its size."""
    rgb = np.asarray(picture)
    if rgb.ndim == 2:
        rgb = np.repeat(rgb[..., None], 3, axis=-1)
    heat = to_rgb(unit_map, Scale(0.0, 1.0), HEAT).astype(np.float64)
    mixed = (1 - alpha) * rgb[..., :3].astype(np.float64) + alpha * heat
    return np.clip(mixed, 0, 255).round().astype(np.uint8)
