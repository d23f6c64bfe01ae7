"""Pixels to terminal cells: square-pixel geometry, nearest-neighbour scaling, half blocks.

A half-block cell shows two pixels — "▀" with the upper pixel as foreground and the lower
one as background — and a terminal cell is about twice as tall as wide, so each pixel is
square. Graphics terminals (sixel, kitty) get real pixels at the cell size they report.
"""

from __future__ import annotations

from functools import lru_cache
from itertools import groupby, repeat

import numpy as np
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual.strip import Strip

UPPER_HALF = "▀"
LOWER_HALF = "▄"


def integer_fit(
    h: int, w: int, max_h: int, max_w: int, max_k: int | None = None
) -> tuple[int, int]:
    """The pixel size of an ``h``×``w`` array drawn into at most ``max_h``×``max_w`` pixels
    with square pixels: a whole number of pixels per value (at most ``max_k``) when it fits
    (crisp, every value the same size), else shrunk by one factor on both axes."""
    if h <= 0 or w <= 0 or max_h <= 0 or max_w <= 0:
        return 0, 0
    k = min(max_h // h, max_w // w, max_k or max_h)
    if k >= 1:
        return h * k, w * k
    scale = min(max_h / h, max_w / w)
    return max(1, min(max_h, int(h * scale))), max(1, min(max_w, int(w * scale)))


def resample(pixels: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Nearest-neighbour resampling of the first two axes."""
    h, w = pixels.shape[:2]
    rows = np.minimum((np.arange(out_h) * h / out_h).astype(np.int64), h - 1)
    cols = np.minimum((np.arange(out_w) * w / out_w).astype(np.int64), w - 1)
    return pixels[rows][:, cols]


@lru_cache(maxsize=16384)
def _cell_style(top: tuple[int, int, int], bottom: tuple[int, int, int] | None) -> Style:
    return Style(color=Color.from_rgb(*top), bgcolor=Color.from_rgb(*bottom) if bottom else None)


def half_block_cells(rgb: np.ndarray) -> list[list[Segment]]:
    """One segment per cell of an RGB picture (h×w×3 uint8), two pixel rows per cell row.
    An odd last pixel row leaves its cells' lower halves without a colour: the background
    shows."""
    return [[Segment(UPPER_HALF, _cell_style(*pair)) for pair in row] for row in _pairs(rgb)]


def half_block_strips(rgb: np.ndarray) -> list[Strip]:
    """The cells of ``half_block_cells`` as strips, a run of equal cells as one segment: an
    upscaled map then costs a fraction of the segments to compose and of the colour codes
    sent to the terminal."""
    strips = []
    for row in _pairs(rgb):
        segments = [
            Segment(UPPER_HALF * sum(1 for _ in run), _cell_style(*pair))
            for pair, run in groupby(row)
        ]
        strips.append(Strip(segments, rgb.shape[1]))
    return strips


def half_block_text(rgb: np.ndarray) -> Text:
    """The cells of ``half_block_cells`` as Rich text (rows on lines), for pictures set in
    text: a layer's thumbnail in its row."""
    text = Text()
    for y, row in enumerate(half_block_cells(rgb)):
        if y:
            text.append("\n")
        for segment in row:
            text.append(segment.text, segment.style)
    return text


def _pairs(rgb: np.ndarray):
    """Per cell row, the (top, bottom) pixel colours of its cells (bottom None past an odd
    last row)."""
    for y in range(0, rgb.shape[0], 2):
        tops = map(tuple, rgb[y].tolist())
        last = y + 1 == rgb.shape[0]
        bottoms = repeat(None, rgb.shape[1]) if last else map(tuple, rgb[y + 1].tolist())
        yield zip(tops, bottoms, strict=True)


def value_at(shape: tuple[int, int], pixels: tuple[int, int], y: int, x: int) -> tuple[int, int]:
    """The array row and column that pixel (y, x) of a ``pixels``-sized drawing shows."""
    h, w = shape
    return min(h - 1, y * h // max(1, pixels[0])), min(w - 1, x * w // max(1, pixels[1]))
