"""A half-block heatmap: a 2-D array drawn two pixels per terminal cell, with a colour bar.

Each cell is "▀" with the upper pixel as foreground and the lower as background, so it works in
any terminal with true colour. `fit` turns any array into the pixels to draw and says, in words,
how it did (wrapping, flattening, block means): the picture is labelled whenever it is not the
array one-to-one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.strip import Strip
from textual.widget import Widget

# Viridis at nine evenly spaced stops: perceptually uniform and readable for colour-blind users.
_STOPS = np.array(
    [
        (68, 1, 84),
        (71, 44, 122),
        (59, 81, 139),
        (44, 113, 142),
        (33, 144, 141),
        (39, 173, 129),
        (92, 200, 99),
        (170, 220, 50),
        (253, 231, 37),
    ],
    dtype=np.float64,
)
LUT = np.stack(
    [
        np.interp(np.linspace(0, 1, 256), np.linspace(0, 1, len(_STOPS)), _STOPS[:, c])
        for c in range(3)
    ],
    axis=1,
).astype(np.uint8)
NAN_RGB = (0, 0, 0)
"""Colour of NaN cells and of the padding after a wrapped 1-D array."""

BAR_WIDTH = 24
"""Cells of the colour bar: enough to read the gradient, short enough to leave room for labels."""


@dataclass(frozen=True)
class HeatmapImage:
    """Pixels to draw (rows × cols, NaN for none), the value range of the colours, and a note."""

    pixels: np.ndarray
    vmin: float
    vmax: float
    note: str


def as_2d(array: np.ndarray, cols: int) -> tuple[np.ndarray, str]:
    """``array`` as a 2-D float array, and how it was made 2-D ("" if it already was)."""
    # float32 and float64 are used as they are (a float64 copy of a 64 MB tensor costs 128 MB);
    # narrower types are widened so block sums cannot overflow.
    wide = array.dtype.kind == "f" and array.dtype.itemsize >= 4
    values = (
        array if wide else np.abs(array) if array.dtype.kind == "c" else array.astype(np.float64)
    )
    if values.ndim == 2:
        return values, ""
    if values.ndim == 0:
        return values.reshape(1, 1), ""
    if values.ndim > 2:
        return values.reshape(
            -1, values.shape[-1]
        ), f"flattened to {math.prod(values.shape[:-1])}×{values.shape[-1]}"
    width = max(1, min(values.size, cols))
    rows = -(-values.size // width)
    padded = np.full(rows * width, np.nan)
    padded[: values.size] = values
    note = f"1-D, wrapped in rows of {width}" if rows > 1 else ""
    return padded.reshape(rows, width), note


def fit(array: np.ndarray, cols: int, pixel_rows: int, vmin: float, vmax: float) -> HeatmapImage:
    """The image of ``array`` in at most ``cols`` × ``pixel_rows`` pixels, aspect kept, coloured
    from ``vmin`` to ``vmax`` (the array's finite range, which the caller already knows).

    Larger arrays are reduced by block means; smaller ones are magnified by whole pixels.
    """
    values, note = as_2d(array, cols)
    height, width = values.shape
    if height == 0 or width == 0:
        return HeatmapImage(np.zeros((0, 0)), vmin, vmax, "empty")
    scale = min(cols / width, pixel_rows / height)
    if scale >= 1:
        k = int(scale)
        return HeatmapImage(np.repeat(np.repeat(values, k, 0), k, 1), vmin, vmax, note)
    out_h, out_w = max(1, int(height * scale)), max(1, int(width * scale))
    row_edges = np.linspace(0, height, out_h + 1).astype(int)[:-1]
    col_edges = np.linspace(0, width, out_w + 1).astype(int)[:-1]
    sums = np.add.reduceat(np.add.reduceat(values, row_edges, axis=0), col_edges, axis=1)
    counts = np.outer(np.diff([*row_edges, height]), np.diff([*col_edges, width]))
    means = sums / counts
    reduced = f"block means of {height}×{width} → {out_h}×{out_w}"
    return HeatmapImage(means, vmin, vmax, f"{note}; {reduced}" if note else reduced)


def colours(pixels: np.ndarray, vmin: float, vmax: float) -> np.ndarray:
    """RGB (uint8, shape + (3,)) of each pixel on the viridis scale from vmin to vmax."""
    span = vmax - vmin if vmax > vmin else 1.0
    with np.errstate(invalid="ignore"):
        index = np.clip((pixels - vmin) / span * 255, 0, 255)
    rgb = LUT[np.nan_to_num(index, nan=0).astype(np.intp)]
    rgb[np.isnan(pixels)] = NAN_RGB
    return rgb


def _style(fg: np.ndarray, bg: np.ndarray) -> Style:
    return Style.parse(f"rgb({fg[0]},{fg[1]},{fg[2]}) on rgb({bg[0]},{bg[1]},{bg[2]})")


class LiveHeatmap(Widget):
    """Draws a HeatmapImage in half-block cells, then its note and a colour bar."""

    DEFAULT_CSS = """
    LiveHeatmap { height: 1fr; width: 1fr; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.image: HeatmapImage | None = None
        self._lines: list[Strip] = []

    def show(self, image: HeatmapImage | None) -> None:
        """Draw ``image`` (None: clear)."""
        self.image = image
        self._lines = self._render_image(image) if image is not None else []
        self.refresh()

    def render_line(self, y: int) -> Strip:
        return self._lines[y] if y < len(self._lines) else Strip.blank(self.size.width, Style())

    def _render_image(self, image: HeatmapImage) -> list[Strip]:
        pixels = image.pixels
        if pixels.shape[0] % 2:
            pixels = np.vstack([pixels, np.full((1, pixels.shape[1]), np.nan)])
        rgb = colours(pixels, image.vmin, image.vmax)
        lines = [
            Strip(
                [
                    Segment("▀", _style(top, bottom))
                    for top, bottom in zip(rgb[y], rgb[y + 1], strict=True)
                ]
            )
            for y in range(0, rgb.shape[0], 2)
        ]
        lines.append(Strip([Segment(image.note, Style(dim=True))]))
        bar = colours(np.linspace(image.vmin, image.vmax, BAR_WIDTH), image.vmin, image.vmax)
        lines.append(
            Strip(
                [
                    Segment(f"{image.vmin:.4g} ", Style()),
                    *(Segment(" ", _style(c, c)) for c in bar),
                    Segment(f" {image.vmax:.4g}", Style()),
                ]
            )
        )
        return lines
