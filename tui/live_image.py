"""A caught array as the 2-D values the Live page draws, and a note on how they were made.

``fit`` turns any array into at most the pixels the picture has room for and says, in words,
how it did (wrapping, flattening, block means): the picture is labelled whenever it is not the
array one-to-one. Colours, magnification and drawing are the picture kit's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class HeatmapImage:
    """Values to draw (rows × cols, NaN for none), the range of the colours, and a note."""

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
    """The values of ``array`` in at most ``cols`` × ``pixel_rows`` pixels, aspect kept, to be
    coloured from ``vmin`` to ``vmax`` (the array's finite range, which the caller knows).

    Larger arrays are reduced by block means; smaller ones are left for the picture to magnify.
    """
    values, note = as_2d(array, cols)
    height, width = values.shape
    if height == 0 or width == 0:
        return HeatmapImage(np.zeros((0, 0)), vmin, vmax, "empty")
    scale = min(cols / width, pixel_rows / height)
    if scale >= 1:
        return HeatmapImage(values, vmin, vmax, note)
    out_h, out_w = max(1, int(height * scale)), max(1, int(width * scale))
    row_edges = np.linspace(0, height, out_h + 1).astype(int)[:-1]
    col_edges = np.linspace(0, width, out_w + 1).astype(int)[:-1]
    sums = np.add.reduceat(np.add.reduceat(values, row_edges, axis=0), col_edges, axis=1)
    counts = np.outer(np.diff([*row_edges, height]), np.diff([*col_edges, width]))
    means = sums / counts
    reduced = f"block means of {height}×{width} → {out_h}×{out_w}"
    return HeatmapImage(means, vmin, vmax, f"{note}; {reduced}" if note else reduced)
