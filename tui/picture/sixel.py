"""Sixel pictures: our encoder and the widget that places one on the screen.

A sixel picture is sent band by band (six pixel rows each), one pass per colour. Every colour
register is defined in the header, before any pixel is drawn: xterm paints a band wrongly
when a register is defined in the middle of it (textual-image 0.12's encoder does that, and
its pictures show a stripe across the top band). Pictures arrive here already in at most
256 colours (colour-map palettes, or a photo quantized with dithering), so nothing is
re-quantized and a heatmap's colours are exactly its palette's.
"""

from __future__ import annotations

import numpy as np
from rich.control import Control
from rich.segment import ControlType, Segment
from textual.geometry import Region
from textual.strip import Strip
from textual.widget import Widget

MAX_REGISTERS = 256
"""Colour registers a sixel terminal is sure to have (VT340-compatible ones have 256+)."""


def _packed(rgb: np.ndarray) -> np.ndarray:
    """One number per pixel's colour (uniques of numbers are far cheaper than of rows)."""
    flat = rgb.reshape(-1, 3).astype(np.uint32)
    return flat[:, 0] << 16 | flat[:, 1] << 8 | flat[:, 2]


def colour_count(rgb: np.ndarray) -> int:
    """How many distinct colours an RGB picture holds."""
    return len(np.unique(_packed(rgb)))


def indexed(rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(palette K×3, h×w indices) of an RGB picture with at most ``MAX_REGISTERS`` colours."""
    colours, inverse = np.unique(_packed(rgb), return_inverse=True)
    if len(colours) > MAX_REGISTERS:
        raise ValueError(f"{len(colours)} colours: quantize to {MAX_REGISTERS} first")
    palette = np.stack([colours >> 16, colours >> 8 & 255, colours & 255], axis=1).astype(np.uint8)
    return palette, inverse.reshape(rgb.shape[:2]).astype(np.intp)


def _band(index: np.ndarray, colours: int) -> str:
    """One band (up to six pixel rows of register indices) as sixel passes, one per colour
    present: every run of a repeated character in all passes is found in one numpy sweep,
    so the Python work is one string piece per run."""
    rows, width = index.shape
    codes = np.zeros((colours, width), dtype=np.uint8)
    columns = np.arange(width)
    for dy in range(rows):
        codes[index[dy], columns] |= np.uint8(1 << dy)
    present = np.flatnonzero(codes.any(axis=1))
    codes = codes[present]
    flat = codes.ravel()
    change = np.empty(flat.size, dtype=bool)
    change[0] = True
    np.not_equal(flat[1:], flat[:-1], out=change[1:])
    change[::width] = True  # every pass starts a run
    starts = np.flatnonzero(change)
    lengths = np.diff(np.append(starts, flat.size)).tolist()
    chars = (flat[starts] + 63).tolist()  # sixel characters: 63 + the six pixel bits
    rows_of = (starts // width).tolist()
    passes: list[list[str]] = [[f"#{c}"] for c in present.tolist()]
    for row, char, n in zip(rows_of, chars, lengths, strict=True):
        passes[row].append(_SHORT[n][char] if n < 4 else f"!{n}{_CHARS[char]}")
    return "$".join(map("".join, passes)) + "-"


_CHARS = [chr(c) for c in range(128)]
_SHORT = [[c * n for c in _CHARS] for n in range(4)]  # runs of 1-3 are written out


def encode(rgb: np.ndarray) -> str:
    """The sixel escape sequence drawing an RGB picture (h×w×3 uint8, ≤ 256 colours)."""
    palette, index = indexed(rgb)
    h, w = index.shape
    parts = [f'\x1bPq"1;1;{w};{h}']
    for i, (r, g, b) in enumerate(palette.tolist()):
        parts.append(f"#{i};2;{round(r * 100 / 255)};{round(g * 100 / 255)};{round(b * 100 / 255)}")
    parts.extend(_band(index[top : top + 6], len(palette)) for top in range(0, h, 6))
    parts.append("\x1b\\")
    return "".join(parts)


class SixelCanvas(Widget):
    """A picture drawn with sixel graphics into exactly ``cols`` × ``rows`` cells."""

    DEFAULT_CSS = "SixelCanvas { width: auto; height: auto; }"

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.pixels: np.ndarray | None = None
        self.cell = (10, 20)
        self._encoded: tuple[tuple, str] | None = None

    def show(self, pixels: np.ndarray | None, cell: tuple[int, int]) -> None:
        """Draw ``pixels`` (whole cells of ``cell`` pixels each; None clears)."""
        self.pixels, self.cell, self._encoded = pixels, cell, None
        if pixels is not None:
            self.styles.width = pixels.shape[1] // cell[0]
            self.styles.height = pixels.shape[0] // cell[1]
        self.display = pixels is not None
        self.refresh(layout=True)

    def _sixels(self, crop: Region) -> str:
        key = (crop.x, crop.y, crop.width, crop.height)
        if self.pixels is None:
            return ""
        if self._encoded is None or self._encoded[0] != key:
            cw, ch = self.cell
            part = self.pixels[crop.y * ch : crop.bottom * ch, crop.x * cw : crop.right * cw]
            self._encoded = (key, encode(np.ascontiguousarray(part)))
        return self._encoded[1]

    def render_lines(self, crop: Region) -> list[Strip]:
        if self.pixels is None or crop.width <= 0 or crop.height <= 0:
            return [Strip.blank(crop.width)] * max(0, crop.height)
        shown = self.screen.find_widget(self).visible_region
        # The picture is sent with the last line: the cursor jumps to the visible top-left,
        # draws, and comes back to where Textual expects it.
        picture = [
            Segment(Control.move_to(shown.x, shown.y).segment.text),
            Segment(self._sixels(crop), control=((ControlType.CURSOR_FORWARD, 0),)),
            Segment(Control.move_to(shown.right, shown.bottom - 1).segment.text),
        ]
        return [Strip.blank(crop.width)] * (crop.height - 1) + [Strip(picture, crop.width)]
