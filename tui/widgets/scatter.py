"""``Scatter``: a 2-D point cloud in half-block cells, each point coloured by its label.

Half blocks give two square pixels per cell, each with its own colour (braille dots would
share one colour per cell and mix classes). Up to ten labels get the picture kit's distinct
label hues, more get evenly spaced entries of its ``VALUES`` map, at the terminal's colour
depth. The selected point is drawn last, as a cross in the cursor colour, and marked points
(search hits) in the cursor colour too. Clicking posts ``Scatter.Picked`` with the nearest
point.
"""

from __future__ import annotations

import numpy as np
from rich.segment import Segment
from rich.style import Style
from textual.events import Click, Resize
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget

from tvis.tui.picture import colormaps, raster
from tvis.tui.picture.colormaps import Depth
from tvis.tui.picture.widget import CURSOR_RGB, depth_of

BACKGROUND_RGB = (16, 16, 20)
UNLABELLED_RGB = (150, 150, 150)
MARGIN_PX = 2
"""Pixels kept free around the cloud, so the extreme points and the cursor cross show."""


DARKEST_SHARE = 0.2
"""Share of ``VALUES`` at its dark end left out: those colours vanish on a dark background."""


def label_colours(count: int, depth: Depth) -> np.ndarray:
    """``count`` colours (count×3 uint8): distinct hues for up to ten labels; for more,
    where no set of hues stays distinct, colours spread evenly over the visible part of
    ``VALUES`` at ``depth``."""
    distinct = colormaps.label_palette(depth)
    if count <= len(distinct):
        return distinct[: max(count, 1)]
    colours = colormaps.palette(colormaps.VALUES, depth)
    first = int(round(DARKEST_SHARE * (len(colours) - 1)))
    return colours[np.linspace(first, len(colours) - 1, count).round().astype(int)]


class Scatter(Widget):
    """Points (N×2) drawn to fill the widget, keeping both axes' aspect honest."""

    DEFAULT_CSS = "Scatter { height: 1fr; width: 1fr; }"

    class Picked(Message):
        """The user clicked nearest to point ``index``."""

        def __init__(self, scatter: Scatter, index: int) -> None:
            super().__init__()
            self.scatter = scatter
            self.index = index

        @property
        def control(self) -> Scatter:
            return self.scatter

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.points: np.ndarray = np.zeros((0, 2), dtype=np.float32)
        self.labels: np.ndarray | None = None
        self.palette_index: dict[int, int] = {}
        self.selected: int | None = None
        self.marked = np.zeros(0, dtype=np.intp)
        self.texts: list[str] | None = None
        self._strips: list[Strip] = []
        self._pixels: np.ndarray = np.zeros((0, 2), dtype=np.intp)

    def show(
        self, points: np.ndarray, labels: np.ndarray | None, texts: list[str] | None = None
    ) -> None:
        """Draw ``points`` coloured by ``labels`` (int per point, -1 or None: unlabelled);
        with ``texts``, each point is written as its text where it does not overlap another
        (tokens of an embedding table)."""
        self.points = np.asarray(points, dtype=np.float64).reshape(-1, 2)
        self.texts = texts
        self.labels = None if labels is None else np.asarray(labels).reshape(-1)
        present = [] if self.labels is None else sorted(set(self.labels.tolist()) - {-1})
        self.palette_index = {label: i for i, label in enumerate(present)}
        self._draw()

    def colour_of(self, label: int) -> tuple[int, int, int]:
        """The colour ``label`` is drawn with (for a legend beside the plot)."""
        if label not in self.palette_index:
            return UNLABELLED_RGB
        colours = label_colours(len(self.palette_index), self._depth())
        r, g, b = (int(c) for c in colours[self.palette_index[label]])
        return r, g, b

    def select(self, index: int | None) -> None:
        self.selected = index
        self._draw()

    def mark(self, indices: np.ndarray) -> None:
        self.marked = np.asarray(indices, dtype=np.intp).reshape(-1)
        self._draw()

    def _depth(self) -> Depth:
        return depth_of(self.app.console.color_system) if self.is_mounted else "truecolor"

    def on_resize(self, event: Resize) -> None:
        self._draw()

    def on_mount(self) -> None:
        self._draw()

    def _draw(self) -> None:
        width, rows = self.size.width, self.size.height
        if not self.is_mounted or width < 4 or rows < 2:
            return
        px_w, px_h = width, rows * 2
        rgb = np.empty((px_h, px_w, 3), dtype=np.uint8)
        rgb[...] = BACKGROUND_RGB
        self._pixels = self._place(px_h, px_w)
        if len(self._pixels):
            ys, xs = self._pixels[:, 0], self._pixels[:, 1]
            rgb[ys, xs] = self._colours()
            if self.marked.size:
                hits = self.marked[self.marked < len(self._pixels)]
                rgb[ys[hits], xs[hits]] = CURSOR_RGB
            if self.selected is not None and 0 <= self.selected < len(self._pixels):
                self._cross(rgb, int(ys[self.selected]), int(xs[self.selected]))
        if self.texts is not None:
            self._write_texts(raster.half_block_cells(rgb), width)
        else:
            self._strips = raster.half_block_strips(rgb)
        self.refresh()

    def _write_texts(self, rows: list[list[Segment]], width: int) -> None:
        """Each point's text at its cell, left to right, skipping texts that would overlap
        one already written (the dot stays); search hits and the selection are written
        first so they always show."""
        texts = self.texts or []
        taken = [np.zeros(width, dtype=bool) for _ in rows]
        first = [i for i in (self.selected, *self.marked.tolist()) if i is not None]
        order = dict.fromkeys([*first, *range(len(self._pixels))])
        colours = self._colours()
        for i in order:
            if i >= len(self._pixels) or i >= len(texts):
                continue
            text = texts[i].replace("\n", "⏎").replace(" ", "␣") or "∅"
            row, col = int(self._pixels[i, 0]) // 2, int(self._pixels[i, 1])
            end = min(col + len(text), width)
            if row >= len(rows) or taken[row][col:end].any():
                continue
            taken[row][max(col - 1, 0) : min(end + 1, width)] = True  # one cell apart
            bright = i in first
            fg = CURSOR_RGB if bright else tuple(int(c) for c in colours[i])
            style = Style(color=f"rgb{fg}", bgcolor=f"rgb{BACKGROUND_RGB}", bold=bright)
            for k, char in enumerate(text[: end - col]):
                rows[row][col + k] = Segment(char, style)
        self._strips = [Strip(segments, width) for segments in rows]

    def _place(self, px_h: int, px_w: int) -> np.ndarray:
        """Pixel (row, col) of every point; equal units on both axes so distances read true."""
        if not len(self.points):
            return np.zeros((0, 2), dtype=np.intp)
        finite = np.where(np.isfinite(self.points), self.points, 0.0)
        lo, hi = finite.min(axis=0), finite.max(axis=0)
        span = np.maximum(hi - lo, 1e-12)
        room_w, room_h = px_w - 1 - 2 * MARGIN_PX, px_h - 1 - 2 * MARGIN_PX
        unit = min(room_w / span[0], room_h / span[1])
        off_x = MARGIN_PX + (room_w - span[0] * unit) / 2
        off_y = MARGIN_PX + (room_h - span[1] * unit) / 2
        xs = np.round(off_x + (finite[:, 0] - lo[0]) * unit).astype(np.intp)
        ys = np.round(px_h - 1 - off_y - (finite[:, 1] - lo[1]) * unit).astype(np.intp)
        return np.stack([np.clip(ys, 0, px_h - 1), np.clip(xs, 0, px_w - 1)], axis=1)

    def _colours(self) -> np.ndarray:
        n = len(self._pixels)
        out = np.empty((n, 3), dtype=np.uint8)
        out[...] = UNLABELLED_RGB
        if self.labels is not None and self.palette_index:
            colours = label_colours(len(self.palette_index), self._depth())
            for label, i in self.palette_index.items():
                out[self.labels[:n] == label] = colours[i]
        return out

    @staticmethod
    def _cross(rgb: np.ndarray, y: int, x: int) -> None:
        h, w = rgb.shape[:2]
        for dy, dx in ((0, 0), (-1, 0), (1, 0), (0, -1), (0, 1), (-2, 0), (2, 0)):
            if 0 <= y + dy < h and 0 <= x + dx < w:
                rgb[y + dy, x + dx] = CURSOR_RGB

    def render_line(self, y: int) -> Strip:
        if y < len(self._strips):
            return self._strips[y]
        return Strip.blank(self.size.width)

    def nearest(self, x: int, y: int) -> int | None:
        """The point drawn nearest to cell (x, y)."""
        if not len(self._pixels):
            return None
        py, px = y * 2 + 1, x
        d = (self._pixels[:, 0] - py) ** 2 + (self._pixels[:, 1] - px) ** 2
        return int(np.argmin(d))

    def on_click(self, event: Click) -> None:
        offset = event.get_content_offset(self)
        if offset is None:
            return
        index = self.nearest(offset.x, offset.y)
        if index is not None:
            self.post_message(self.Picked(self, index))
