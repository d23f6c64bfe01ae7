"""The viewer's colour maps: values, signed values, heat overlays, and what a terminal keeps of them.

Colour means a value here, never decoration. ``VALUES`` is perceptually ordered (dark →
bright, viridis-like) for activations and weights; ``SIGNED`` runs blue (negative) through
near-black (zero) to red (positive) for gradients, updates and residuals; ``HEAT`` is laid
over pictures (Grad-CAM, On image). NaN is magenta and ±Inf white in every map, so they are
seen. Labels (a class, a token) get ``label_palette``: distinct hues, not a value's ramp.

Terminals without truecolor get a shorter palette of colours they really have: a ramp of entries of the xterm 256-colour
cube, or of the 16 ANSI colours, chosen so the map stays one map (no grey middle). ``palette(cmap, depth)`` gives that palette; the legend shows the same colours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Literal

import numpy as np
from rich.color import EIGHT_BIT_PALETTE, Color, ColorSystem

Depth = Literal["truecolor", "256", "16"]

NAN_RGB = (255, 0, 255)
INF_RGB = (255, 255, 255)
MASKED_RGB = (58, 58, 58)
"""Cells a mask removed (a causal attention's future): a flat grey no map uses (one of
xterm's 256 greys; 16-colour terminals get ANSI dark grey, see ``masked_rgb``)."""


def _lut(anchors: list[tuple[int, int, int]]) -> np.ndarray:
    """A 256-entry RGB table interpolated through evenly spaced anchor colours."""
    points = np.linspace(0, 255, len(anchors))
    channels = np.array(anchors, dtype=np.float64).T
    table = np.stack([np.interp(np.arange(256), points, c) for c in channels], axis=-1)
    return table.round().astype(np.uint8)


@dataclass(frozen=True, eq=False)
class Colormap:
    """A colour map: 256 RGB entries from the low end to the high end, the ramp of xterm
    256-colour entries that stands in for it without truecolor, and the ramp of ANSI colour
    numbers for 16-colour terminals."""

    name: str
    lut: np.ndarray
    cube: tuple[tuple[int, int, int], ...]
    ansi16: tuple[int, ...]


# The 256-colour ramps are picked by hand from the xterm cube: every entry is coloured
# (a nearest-colour match turns a map's dark middle grey), each is brighter than the last
# for VALUES and HEAT, and each survives Rich's downgrade to 256 colours unchanged.
VALUES = Colormap(
    "values",
    _lut([(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)]),
    (
        (95, 0, 95),
        (95, 0, 135),
        (0, 95, 135),
        (0, 135, 135),
        (0, 175, 135),
        (95, 175, 95),
        (95, 215, 95),
        (175, 215, 0),
        (215, 215, 0),
        (255, 255, 95),
    ),
    (4, 12, 6, 14, 2, 10, 3, 11),  # no magenta: that is NaN
)
SIGNED = Colormap(
    "signed",
    # Zero fades into a dark terminal so the sign and size of a gradient stand out.
    _lut([(80, 150, 255), (40, 70, 140), (22, 22, 28), (150, 45, 40), (255, 110, 80)]),
    (
        (135, 175, 255),
        (95, 135, 255),
        (0, 95, 215),
        (0, 0, 175),
        (0, 0, 95),
        (38, 38, 38),
        (95, 0, 0),
        (175, 0, 0),
        (215, 0, 0),
        (255, 95, 0),
        (255, 175, 95),
    ),
    (12, 4, 8, 1, 9),
)
HEAT = Colormap(
    "heat",
    _lut([(0, 0, 4), (87, 16, 110), (188, 55, 84), (249, 142, 9), (252, 255, 164)]),
    (
        (0, 0, 0),
        (0, 0, 95),
        (95, 0, 95),
        (135, 0, 95),
        (175, 0, 95),
        (215, 95, 0),
        (255, 135, 0),
        (255, 175, 0),
        (255, 215, 95),
        (255, 255, 175),
    ),
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


# Colours for labels (classes, tokens): ten hues told apart at a glance on a dark
# background, none of them magenta (NaN) or grey (unlabelled), in the order they are
# given out; per depth, the nearest entries the terminal really has.
_LABELS: dict[str, tuple] = {
    "truecolor": (
        (240, 130, 30),
        (90, 160, 245),
        (100, 200, 90),
        (240, 85, 110),
        (175, 125, 235),
        (245, 210, 50),
        (60, 205, 205),
        (190, 135, 90),
        (185, 230, 90),
        (250, 165, 205),
    ),
    "256": (
        (255, 135, 0),
        (95, 175, 255),
        (95, 215, 95),
        (255, 95, 135),
        (175, 135, 255),
        (255, 215, 0),
        (0, 215, 215),
        (175, 135, 95),
        (175, 215, 95),
        (255, 175, 215),
    ),
    "16": tuple(_ANSI16[i] for i in (9, 12, 10, 11, 14, 3, 2, 6, 4, 1)),
}


def label_palette(depth: Depth) -> np.ndarray:
    """The distinct label colours (K×3 uint8) at colour ``depth``."""
    return np.array(_LABELS[depth], dtype=np.uint8)


def label_rgb(labels: np.ndarray, ignored: np.ndarray | None, depth: Depth) -> np.ndarray:
    """A 2-D array of class ids as a picture (h×w×3 uint8): class ``c`` in the ``c``-th
    label colour (the colours repeat past ten classes), ``ignored`` cells and negative ids
    in the masked grey, which no label uses."""
    colours = label_palette(depth)
    ids = np.asarray(labels, dtype=np.int64)
    rgb = colours[np.mod(ids, len(colours))]
    off = ids < 0
    if ignored is not None:
        off |= np.asarray(ignored, dtype=bool).reshape(ids.shape)
    rgb[off] = masked_rgb(depth)
    return rgb


@cache
def palette(cmap: Colormap, depth: Depth) -> np.ndarray:
    """The colours (K×3 uint8, low → high) ``cmap`` is drawn with at colour ``depth``."""
    if depth == "truecolor":
        return cmap.lut
    if depth == "16":
        return np.array([_ANSI16[i] for i in cmap.ansi16], dtype=np.uint8)
    return np.array(cmap.cube, dtype=np.uint8)


def nonfinite_rgb(depth: Depth) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(NaN colour, Inf colour) at ``depth``: bright magenta and white are in every palette."""
    if depth == "16":
        return _ANSI16[13], _ANSI16[15]
    return NAN_RGB, INF_RGB


def masked_rgb(depth: Depth) -> tuple[int, int, int]:
    """The colour of masked cells at ``depth``."""
    return _ANSI16[8] if depth == "16" else MASKED_RGB


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


def to_rgb(array: np.ndarray, scale: Scale, cmap: Colormap | None, depth: Depth) -> np.ndarray:
    """Colour a 2-D array (h×w×3 uint8) with the colours ``depth`` has. NaN is magenta, ±Inf
    white. No default depth: a caller that forgot it would draw truecolor everywhere."""
    cmap = cmap or (SIGNED if scale.signed else VALUES)
    colours = palette(cmap, depth)
    a = np.asarray(array, dtype=np.float64)
    rgb = colours[levels(scale.unit(a), len(colours))]
    nan, inf = nonfinite_rgb(depth)
    rgb[np.isnan(a)] = nan
    rgb[np.isinf(a)] = inf
    return rgb


def overlay(picture: np.ndarray, unit_map: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """``HEAT`` colours of a [0, 1] map laid over an RGB or grey uint8 picture of its size,
    in full colour: a blend of a photo is a photo, which ``Picture`` fits to the terminal's
    colours (``fit``) as it draws."""
    rgb = np.asarray(picture)
    if rgb.ndim == 2:
        rgb = np.repeat(rgb[..., None], 3, axis=-1)
    heat = to_rgb(unit_map, Scale(0.0, 1.0), HEAT, "truecolor").astype(np.float64)
    mixed = (1 - alpha) * rgb[..., :3].astype(np.float64) + alpha * heat
    return np.clip(mixed, 0, 255).round().astype(np.uint8)


def mosaic(
    tiles: Sequence[np.ndarray],
    per_row: int,
    scale: Scale,
    cmap: Colormap | None,
    depth: Depth,
) -> np.ndarray:
    """2-D arrays as one picture (h×w×3 uint8): ``per_row`` tiles a row, each coloured on the
    one shared ``scale``, one dark gap pixel between tiles (darker than any map's colour)."""
    if not len(tiles):
        return np.zeros((1, 1, 3), np.uint8)
    h = max(t.shape[0] for t in tiles)
    w = max(t.shape[1] for t in tiles)
    per_row = max(1, min(per_row, len(tiles)))
    rows = -(-len(tiles) // per_row)
    out = np.zeros((rows * (h + 1) - 1, per_row * (w + 1) - 1, 3), np.uint8)
    out[...] = gap_rgb(depth)
    for i, tile in enumerate(tiles):
        y, x = divmod(i, per_row)
        y, x = y * (h + 1), x * (w + 1)
        out[y : y + tile.shape[0], x : x + tile.shape[1]] = to_rgb(tile, scale, cmap, depth)
    return out


def gap_rgb(depth: Depth) -> tuple[int, int, int]:
    """Between the tiles of a mosaic: black in 16 and 256 colours, else a near-black that
    still parts two black tiles from the terminal's own background."""
    return (24, 24, 28) if depth == "truecolor" else (0, 0, 0)


@cache
def _sent_256() -> np.ndarray:
    """Per xterm 256-colour number, the entry Rich ends up sending for its RGB: itself,
    except for the cube's greys, which Rich sends as an entry of the grey ramp (followed
    until Rich sends the entry's RGB as that very entry). Made at the first 256-colour
    picture, not at import: 240 of Rich's colour downgrades the first screen can skip."""
    sent = np.array([EIGHT_BIT_PALETTE[n] for n in range(256)], dtype=np.uint8)
    for number in range(16, 256):
        at = number
        while True:
            down = Color.from_rgb(*EIGHT_BIT_PALETTE[at]).downgrade(_EIGHT).number
            if down is None or down == at:
                break
            at = down
        sent[number] = EIGHT_BIT_PALETTE[at]
    return sent


_EIGHT = ColorSystem.EIGHT_BIT
_ANSI16_INT = np.array(_ANSI16, dtype=np.int64)


def fit(rgb: np.ndarray, depth: Depth) -> np.ndarray:
    """A picture (h×w×3 uint8) in colours the terminal has at ``depth``, chosen as Rich
    downgrades (its 256-colour rule; the nearest ANSI colour by its red-mean distance) and
    then kept as they are when Rich sends them: what is sent is what was chosen. Colours
    of the maps' palettes are kept as they are.
    Not dithered: at a few pixels a cell, error diffusion turns a 16-colour photo into
    noise in which the shape of an overlay is lost; nearest colours keep the shape."""
    if depth == "truecolor":
        return rgb
    flat = rgb.reshape(-1, 3).astype(np.int64)
    keys, inverse = np.unique(flat @ np.array([1 << 16, 1 << 8, 1]), return_inverse=True)
    unique = np.stack([keys >> 16, (keys >> 8) & 255, keys & 255], axis=-1)
    if depth == "256":
        chosen = _sent_256()[_xterm_number(unique)]
    else:
        chosen = _ANSI16_INT[_nearest_ansi(unique)].astype(np.uint8)
    return chosen[inverse.reshape(-1)].reshape(rgb.shape)


def _xterm_number(rgb: np.ndarray) -> np.ndarray:
    """Rich's 256-colour number for each RGB row (``Color.downgrade``, vectorised): the grey
    ramp below 15% saturation, else the nearest step of the 6×6×6 cube per channel."""
    unit = rgb / 255.0
    high, low = unit.max(axis=1), unit.min(axis=1)
    light = (high + low) / 2
    spread = high - low
    with np.errstate(invalid="ignore", divide="ignore"):
        saturation = np.where(
            spread == 0,
            0.0,
            np.where(light <= 0.5, spread / (high + low), spread / (2.0 - high - low)),
        )
    grey = np.round(light * 25.0).astype(np.int64)
    grey_number = np.where(grey == 0, 16, np.where(grey == 25, 231, 231 + grey))
    six = np.where(rgb < 95, rgb / 95, 1 + (rgb - 95) / 40)
    steps = np.round(six).astype(np.int64)
    cube_number = 16 + 36 * steps[:, 0] + 6 * steps[:, 1] + steps[:, 2]
    return np.where(saturation < 0.15, grey_number, cube_number)


def _nearest_ansi(rgb: np.ndarray) -> np.ndarray:
    """The index of the nearest ANSI colour per RGB row, by Rich's red-mean distance."""
    colours = _ANSI16_INT[None]
    part = rgb[:, None, :]
    red_mean = (part[..., 0] + colours[..., 0]) // 2
    d = part - colours
    distance = (
        (((512 + red_mean) * d[..., 0] ** 2) >> 8)
        + 4 * d[..., 1] ** 2
        + (((767 - red_mean) * d[..., 2] ** 2) >> 8)
    )
    return distance.argmin(axis=1)
