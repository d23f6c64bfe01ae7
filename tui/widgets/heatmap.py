"""A 2-D array (or an RGB picture) drawn in half blocks, with a colour bar for arrays.

Each cell shows two pixels: "▀" with the upper pixel as foreground and the lower one as
background, so a cell of roughly 1:2 aspect carries two square pixels. This works in every
terminal, tmux and tests included; kitty/sixel pictures go through the image pane instead.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from rich.color import Color
from rich.segment import Segment
from rich.style import Style
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget

from tvis.tui import colors, fmt

UPPER_HALF = "▀"
LOWER_HALF = "▄"


@lru_cache(maxsize=8192)
def _cell_style(top: tuple[int, int, int], bottom: tuple[int, int, int]) -> Style:
    return Style(color=Color.from_rgb(*top), bgcolor=Color.from_rgb(*bottom))


def fit(h: int, w: int, max_h: int, max_w: int) -> tuple[int, int]:
    """The pixel size of an ``h``×``w`` picture scaled to fit ``max_h``×``max_w``, keeping
    its aspect; small arrays are enlarged so an 8×8 map is not a dot."""
    if h <= 0 or w <= 0 or max_h <= 0 or max_w <= 0:
        return 0, 0
    scale = min(max_w / w, max_h / h)
    out_h, out_w = max(1, min(max_h, round(h * scale))), max(1, min(max_w, round(w * scale)))
    if h == 1:
        out_h = min(out_h, 2)  # a vector is one strip of cells, not a tall block
    return out_h, out_w


def resample(pixels: np.ndarray, out_h: int, out_w: int) -> np.ndarray:
    """Nearest-neighbour resampling of the first two axes."""
    h, w = pixels.shape[:2]
    rows = np.minimum((np.arange(out_h) * h / out_h).astype(np.int64), h - 1)
    cols = np.minimum((np.arange(out_w) * w / out_w).astype(np.int64), w - 1)
    return pixels[rows][:, cols]


def half_block_strips(rgb: np.ndarray, width: int) -> list[Strip]:
    """Cells for an RGB picture (h×w×3 uint8), two pixel rows per cell row."""
    if rgb.shape[0] % 2:
        rgb = np.concatenate([rgb, np.zeros_like(rgb[:1])], axis=0)
    strips = []
    for y in range(0, rgb.shape[0], 2):
        top, bottom = rgb[y], rgb[y + 1]
        segments = [
            Segment(UPPER_HALF, _cell_style(tuple(map(int, t)), tuple(map(int, b))))
            for t, b in zip(top, bottom, strict=True)
        ]
        strips.append(Strip(segments, len(segments)).extend_cell_length(width, Style()))
    return strips


class Heatmap(Widget):
    """Half-block heatmap of a 2-D array with a colour bar showing its min and max.

    Values use a sequential colour map; gradients a diverging one centred on zero. Give it
    an RGB array with ``show_rgb`` to draw a picture (the image pane's fallback).
    """

    DEFAULT_CSS = """
    Heatmap { height: auto; width: 1fr; }
    """

    def __init__(self, max_rows: int = 16, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_rows = max_rows
        self._array: np.ndarray | None = None
        self._rgb: np.ndarray | None = None
        self._lo = self._hi = 0.0
        self._diverging = False
        self._strips: list[Strip] | None = None
        self._strips_width = -1

    @property
    def has_data(self) -> bool:
        return self._array is not None or self._rgb is not None

    def show_array(self, array: np.ndarray, lo: float, hi: float, diverging: bool) -> None:
        array = np.asarray(array, dtype=np.float32)
        if array.ndim == 1:
            array = array[None, :]
        self._array, self._rgb = array, None
        self._lo, self._hi, self._diverging = float(lo), float(hi), diverging
        self._invalidate()

    def show_rgb(self, rgb: np.ndarray) -> None:
        rgb = np.asarray(rgb)
        if rgb.ndim == 2:
            rgb = np.repeat(rgb[..., None], 3, axis=-1)
        self._array, self._rgb = None, rgb[..., :3].astype(np.uint8)
        self._invalidate()

    def clear(self) -> None:
        self._array = self._rgb = None
        self._invalidate()

    def _invalidate(self) -> None:
        self._strips = None
        self.refresh(layout=True)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self._render_strips(width))

    def _pixel_size(self, width: int) -> tuple[int, int]:
        source = self._array if self._array is not None else self._rgb
        if source is None:
            return 0, 0
        rows = self.max_rows - (1 if self._array is not None else 0)
        return fit(source.shape[0], source.shape[1], 2 * max(1, rows), width)

    def _render_strips(self, width: int) -> list[Strip]:
        if self._strips is not None and self._strips_width == width:
            return self._strips
        strips: list[Strip] = []
        out_h, out_w = self._pixel_size(width)
        if self._array is not None and out_w:
            rgb = colors.colorize(self._array, self._lo, self._hi, self._diverging)
            strips = half_block_strips(resample(rgb, out_h, out_w), width)
            strips.append(self._colour_bar(min(width, max(out_w, 24)), width))
        elif self._rgb is not None and out_w:
            strips = half_block_strips(resample(self._rgb, out_h, out_w), width)
        self._strips, self._strips_width = strips, width
        return strips

    def _colour_bar(self, bar_width: int, width: int) -> Strip:
        if self._diverging:
            span = max(abs(self._lo), abs(self._hi))
            lo_text, hi_text = fmt.num(-span), fmt.num(span)
        else:
            lo_text, hi_text = fmt.num(self._lo), fmt.num(self._hi)
        n = max(1, bar_width - len(lo_text) - len(hi_text) - 2)
        table = colors.DIVERGING if self._diverging else colors.SEQUENTIAL
        ramp = table[np.linspace(0, 255, n).astype(np.int64)]
        label = Style(color=colors.MUTED)
        # Lower-half blocks: the legend reads as a thin bar, apart from the map above it.
        segments = [Segment(lo_text + " ", label)]
        segments += [Segment(LOWER_HALF, Style(color=Color.from_rgb(*map(int, c)))) for c in ramp]
        segments.append(Segment(" " + hi_text, label))
        return Strip(segments).extend_cell_length(width, Style())

    def render_line(self, y: int) -> Strip:
        strips = self._render_strips(self.size.width)
        if y < len(strips):
            return strips[y].crop(0, self.size.width)
        return Strip.blank(self.size.width, Style())
