"""``Picture``: the one widget every page draws arrays and pictures with.

It draws real pixels with sixel or kitty graphics where the app's image mode allows, and
half-block cells elsewhere (tmux, tests, ``--images halfcell``). Values are coloured through
``colormaps`` at the terminal's colour depth, scaled by a whole number of pixels per value
when they fit (a 32×32 map is 32×32 crisp squares), with optional tick labels on both axes
(tokens, indices, class names) and a legend. Clicking a value (or a pixel of a picture) posts
``Picture.Picked``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.css.scalar import Unit
from textual.events import Click, Resize
from textual.geometry import Size
from textual.message import Message
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static

from tvis.tui import fmt, images
from tvis.tui.picture import colormaps, raster
from tvis.tui.picture.colormaps import Colormap, Depth, Scale
from tvis.tui.picture.sixel import MAX_REGISTERS, SixelCanvas, colour_count
from tvis.tui.picture.text_lines import TextLines
from tvis.tui.steady import Steady, SteadyStatic

if TYPE_CHECKING:
    from textual_image.widget import TGPImage

LABEL_CHARS = 8
"""Longest tick label drawn; tokens and class names longer than this are cut."""

CURSOR_RGB = (255, 255, 255)

MAX_VALUE_CELLS = 4
"""Widest a single value is drawn, in cells: a 5-class logit vector stays a strip, not a
wall of five giant squares."""


def depth_of(color_system: str | None) -> Depth:
    """The colour depth a Rich console's colour system allows."""
    if color_system == "truecolor":
        return "truecolor"
    if color_system == "256":
        return "256"
    return "16"


def value_cells(
    values: np.ndarray, scale: Scale, width: int, max_rows: int, depth: Depth
) -> list[Strip]:
    """A 2-D array as half-block cells at most ``width`` × ``max_rows``, coloured on
    ``scale`` at ``depth``, a whole number of cells per value where it fits: what a
    ``Picture`` draws in half blocks, for widgets that draw their own lines."""
    h, w = values.shape[:2]
    px_h, px_w = raster.integer_fit(h, w, max_rows * 2, width, MAX_VALUE_CELLS)
    if not px_w:
        return []
    rgb = colormaps.to_rgb(values, scale, None, depth)
    return raster.half_block_strips(raster.resample(rgb, px_h, px_w))


def legend_text(
    values: np.ndarray,
    scale: Scale,
    width: int,
    depth: Depth,
    cmap: Colormap | None = None,
    masked: np.ndarray | None = None,
    note: str = "",
) -> Text:
    """The colour ramp from the scale's low to its high end in ``width`` cells, and the
    colours of NaN, Inf and masked values when ``values`` holds any."""
    cmap = cmap or (colormaps.SIGNED if scale.signed else colormaps.VALUES)
    colours = colormaps.palette(cmap, depth)
    lo, hi = fmt.num(scale.lo), fmt.num(scale.hi)
    n = max(4, width - len(lo) - len(hi) - 2)
    ramp = colours[np.linspace(0, len(colours) - 1, n).round().astype(int)]
    text = Text(lo + " ", style="dim")
    for r, g, b in ramp.tolist():
        text.append(raster.LOWER_HALF, style=Style(color=f"rgb({r},{g},{b})"))
    text.append(" " + hi, style="dim")
    nan, inf = colormaps.nonfinite_rgb(depth)
    if np.isnan(values).any():
        text.append("  ■", style=Style(color="rgb({},{},{})".format(*nan)))
        text.append(" NaN", style="dim")
    if np.isinf(values).any():
        text.append("  ■", style=Style(color="rgb({},{},{})".format(*inf)))
        text.append(" Inf", style="dim")
    if masked is not None and masked.any():
        grey = colormaps.masked_rgb(depth)
        text.append("  ■", style=Style(color="rgb({},{},{})".format(*grey)))
        text.append(" masked", style="dim")
    if note:
        text.append("  " + note, style="dim")
    return text


def label_legend(
    classes: Sequence[int], names: Sequence[str | None], depth: Depth, ignored: bool = False
) -> Text:
    """Each class's swatch and name (its id where it has none), as ``show_labels`` colours
    them, and the ignored grey when the picture has ignored cells."""
    colours = colormaps.label_palette(depth)
    text = Text()
    for c, name in zip(classes, names, strict=False):
        r, g, b = (int(v) for v in colours[int(c) % len(colours)])
        text.append("■", style=Style(color=f"rgb({r},{g},{b})"))
        text.append(f"{name if name else c} ", style="dim")
    if ignored:
        grey = colormaps.masked_rgb(depth)
        text.append("■", style=Style(color="rgb({},{},{})".format(*grey)))
        text.append(" ignored", style="dim")
    text.rstrip()
    return text


def cell_size() -> tuple[int, int]:
    """Pixels per terminal cell (width, height), as textual-image measured them."""
    from textual_image._terminal import get_cell_size

    size = get_cell_size()
    return size.width, size.height


@dataclass(frozen=True)
class _Content:
    values: np.ndarray | None
    rgb: np.ndarray | None
    scale: Scale | None
    cmap: Colormap | None
    x_labels: tuple[str, ...] | None
    y_labels: tuple[str, ...] | None
    legend: str
    masked: np.ndarray | None = None
    tiles: tuple[np.ndarray, ...] | None = None  # a mosaic: its tiles, coloured as values are
    per_row: int | None = None  # tiles a row of the mosaic (None: as many as fit the width)
    labels: np.ndarray | None = None  # class ids, each in its label colour (``masked``: ignored)


class _Cells(Steady, Widget):
    """Half-block cells of an RGB picture, drawn line by line."""

    DEFAULT_CSS = "_Cells { width: auto; height: auto; }"

    def __init__(self) -> None:
        super().__init__()
        self.strips: list[Strip] = []

    def set_strips(self, strips: list[Strip]) -> None:
        resized = [s.cell_length for s in strips] != [s.cell_length for s in self.strips]
        self.strips = strips
        self.refresh(layout=resized)  # a new layout only when the cells' shape changed

    def get_content_width(self, container: Size, viewport: Size) -> int:
        return max((s.cell_length for s in self.strips), default=0)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.strips)

    def render_line(self, y: int) -> Strip:
        if y < len(self.strips):
            return self.strips[y].apply_style(self.rich_style)  # under the cells' colours
        return Strip.blank(self.size.width, self.rich_style)


class _Row(Steady, Widget):
    """Tick labels beside the canvas. Not a ``Horizontal``: a page's rule for its own
    ``Horizontal`` containers would reach in and resize it."""

    DEFAULT_CSS = "_Row { layout: horizontal; width: 1fr; height: auto; }"


class Picture(Steady, Widget):
    """An array as a colour map, or an RGB picture, at most ``max_rows`` cells tall."""

    DEFAULT_CSS = """
    Picture { height: auto; width: 1fr; }
    Picture .ylabels { width: auto; height: auto; color: $text-muted; }
    Picture .xlabels { height: auto; color: $text-muted; }
    Picture .legend { height: auto; }
    Picture .note { height: auto; color: $text-muted; }
    """

    class Picked(Message):
        """The user clicked value (``row``, ``col``) of the picture's array."""

        def __init__(self, picture: Picture, row: int, col: int) -> None:
            super().__init__()
            self.picture = picture
            self.row = row
            self.col = col

        @property
        def control(self) -> Picture:
            return self.picture

    def __init__(self, max_rows: int = 12, legend: bool = True, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_rows = max_rows
        self.show_legend = legend
        self.cursor: tuple[int, int] | None = None
        self.grid: tuple[int, int] | None = None  # what the cursor's cells are (None: values)
        self._content: _Content | None = None
        self._note = ""
        self._pixels = (0, 0)  # size of the last drawing, in pixels
        self._drawn_width = -1  # the widget's width when it last drew
        # The last drawing's picture scaled, before any cursor: (content, width, max_rows,
        # depth, pixels); a cursor move outlines on it.
        self._scaled: tuple[_Content, int, int, str, np.ndarray] | None = None
        self._plain_strips: list[Strip] | None = None  # its cells without a cursor, once asked
        self._cell = (1, 2)  # pixels per cell of the last drawing (half blocks: 1×2)
        self._graphics: SixelCanvas | TGPImage | None = None
        self._fitted: tuple[Depth, np.ndarray] | None = None  # a photo in the terminal's colours
        self._shape = (0, 0)  # values (or pixels) of what is drawn
        self.width_before_layout: int | None = None
        """The width it will be laid out at, where its parent knows it (a column of fixed
        width): what it is given before its first layout is drawn at that width, not at the
        terminal's and again once laid out (a second layout)."""

    # -- public --------------------------------------------------------------------------

    def show_values(
        self,
        array: np.ndarray,
        scale: Scale | None = None,
        cmap: Colormap | None = None,
        x_labels: Sequence[str] | None = None,
        y_labels: Sequence[str] | None = None,
        legend: str = "",
        masked: np.ndarray | None = None,
    ) -> None:
        """Draw a 2-D array (1-D: one row) coloured by ``cmap`` on ``scale`` (default: its
        own finite range; ``SIGNED`` when the scale is signed). Labels name rows/columns;
        ``masked`` (bool, the array's shape) marks values a mask removed, drawn grey."""
        values = np.asarray(array, dtype=np.float32)
        if values.ndim < 2:
            values = values.reshape(1, -1)
        elif values.ndim > 2:
            values = values.reshape(-1, values.shape[-1])
        scale = scale or Scale.of(values)
        self._set(
            _Content(
                values,
                None,
                scale,
                cmap,
                tuple(map(str, x_labels)) if x_labels is not None else None,
                tuple(map(str, y_labels)) if y_labels is not None else None,
                legend,
                np.asarray(masked, dtype=bool).reshape(values.shape)
                if masked is not None
                else None,
            )
        )

    def show_rgb(self, rgb: np.ndarray, note: str = "") -> None:
        """Draw a picture (h×w×3 or h×w uint8)."""
        rgb = np.asarray(rgb)
        if rgb.ndim == 2:
            rgb = np.repeat(rgb[..., None], 3, axis=-1)
        self._set(_Content(None, rgb[..., :3].astype(np.uint8), None, None, None, None, note))

    def show_labels(self, labels: np.ndarray, ignored: np.ndarray | None = None) -> None:
        """Draw a 2-D array of class ids (a segmentation mask): each class in its label
        colour, ``ignored`` cells (bool, the array's shape) in the masked grey."""
        ids = np.asarray(labels, dtype=np.int64)
        ids = ids.reshape(1, -1) if ids.ndim < 2 else ids.reshape(-1, ids.shape[-1])
        off = None if ignored is None else np.asarray(ignored, dtype=bool).reshape(ids.shape)
        self._set(_Content(None, None, None, None, None, None, "", off, labels=ids))

    def show_mosaic(
        self,
        tiles: Sequence[np.ndarray],
        scale: Scale,
        cmap: Colormap | None = None,
        per_row: int | None = None,
        note: str = "",
    ) -> None:
        """Draw small 2-D arrays side by side, ``per_row`` a row (default: as many as fit the
        width at one pixel a value), one dark pixel apart, all coloured on ``scale``."""
        arrays = tuple(np.asarray(t, dtype=np.float32) for t in tiles)
        self._set(_Content(None, None, scale, cmap, None, None, note, None, arrays, per_row))

    def placeholder(self, text: str) -> None:
        """Say why there is no picture (or that it is on its way), keeping the space."""
        self._content = None
        self._note = text
        self._draw()

    def clear(self) -> None:
        self.placeholder("")

    @property
    def has_data(self) -> bool:
        return self._content is not None

    @property
    def scale(self) -> Scale | None:
        """The scale the values are drawn on (None for a picture or nothing)."""
        return self._content.scale if self._content else None

    def set_cursor(
        self, cursor: tuple[int, int] | None, grid: tuple[int, int] | None = None
    ) -> None:
        """Outline one cell (row, col) of ``grid`` laid over the picture: by default one
        value of the array (e.g. the one a cursor or a click chose); over a photo, e.g. a
        place on a layer's map. Drawn after scaling, so it shows at any size."""
        self.cursor, self.grid = cursor, grid
        if not self._draw_cursor_only():
            self._draw()

    # -- drawing -------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        with _Row():
            yield SteadyStatic(classes="ylabels")
            yield self._canvas()
        yield SteadyStatic(classes="xlabels")
        yield TextLines(classes="legend")
        yield SteadyStatic(classes="note")

    def _mode(self) -> str:
        return getattr(self.app, "image_mode", "halfcell")

    def _canvas(self) -> Widget:
        mode = self._mode()
        if mode == "sixel":
            self._graphics = SixelCanvas()
            return self._graphics
        if mode == "kitty":
            from textual_image.widget import TGPImage

            self._graphics = TGPImage(classes="graphics")
            return self._graphics
        return _Cells()

    def set_max_rows(self, rows: int) -> None:
        """At most ``rows`` cells tall from now on: what it shows is drawn again to fit."""
        if rows != self.max_rows:
            self.max_rows = rows
            if self._content is not None:
                self._draw()

    def _set(self, content: _Content) -> None:
        self._content = content
        self._note = content.legend if content.values is None else ""
        self._fitted = None
        self._draw()

    def on_mount(self) -> None:
        # Textual counts a widget mounted only after its Mount handlers ran, so a picture
        # given before its mount is drawn once laid out (unless a resize drew it first).
        self.call_after_refresh(self._draw_unless_drawn)

    def _draw_unless_drawn(self) -> None:
        if self._drawn_width == -1 or self._drawn_at_other_width(self.size.width):
            self._draw()

    def on_resize(self, event: Resize) -> None:
        # Drawn to the width it has: a new width needs a new drawing; a new height is the
        # drawing's own (redrawing then would only ask for another layout).
        if self._drawn_at_other_width(event.size.width):
            self._draw()

    def _drawn_at_other_width(self, width: int) -> bool:
        """Whether a picture is drawn at another width (nothing, or a note, fits any)."""
        return self._content is not None and width != self._drawn_width

    def _depth(self) -> Depth:
        return depth_of(self.app.console.color_system)

    def _width_in_column(self) -> int | None:
        """Before its first layout, the width it will have where it fills a column: the
        content width of its nearest laid-out ancestor, down containers that each fill
        theirs (None where one shares a row or grid, or has a width of its own)."""
        taken = 0
        node: Widget = self
        for parent in self.ancestors:
            if not isinstance(parent, Widget) or not _fills_width(node):
                return None
            if parent.styles.layout is not None and parent.styles.layout.name != "vertical":
                return None
            taken += node.styles.margin.width
            if parent.size.width:
                return max(0, parent.scrollable_content_region.width - taken) or None
            taken += parent.styles.gutter.width
            node = parent
        return None

    def _draw(self) -> None:
        if not self.is_mounted or not self.query(".ylabels"):
            return  # drawn on mount
        content = self._content
        ylabels, xlabels = self.query_one(".ylabels", Static), self.query_one(".xlabels", Static)
        legend, note = self.query_one(".legend", TextLines), self.query_one(".note", Static)
        note.update(Text(self._note) if self._note else "")
        note.display = bool(self._note)
        if content is None:
            self._drawn_width = self.size.width
            self._paint(None, 0, 0)
            for part in (ylabels, xlabels, legend):
                part.update("")
                part.display = False
            return
        label_w = 0
        if content.y_labels:
            label_w = min(LABEL_CHARS, max(len(s) for s in content.y_labels)) + 1
        laid_out = self.size.width or self.width_before_layout or self._width_in_column()
        self._drawn_width = laid_out or 0
        width = max(4, (laid_out or self.app.size.width) - label_w)
        cw, ch = cell_size() if self._graphics is not None else (1, 2)
        # Pixels go out as they are; cells only in the colours the terminal has.
        depth = "truecolor" if self._graphics is not None else self._depth()
        rgb = self._source(content, depth, width)
        h, w = (content.values if content.values is not None else rgb).shape[:2]
        box_w, box_h = self._pixel_box(width, cw, ch)
        px_h, px_w = raster.integer_fit(h, w, box_h, box_w, MAX_VALUE_CELLS * cw)
        if not px_w:
            return
        self._pixels, self._cell = (px_h, px_w), (cw, ch)
        self._shape = (h, w)
        pixels = raster.resample(rgb, px_h, px_w)
        self._scaled = (content, self.size.width, self.max_rows, depth, pixels)
        self._plain_strips = None
        grid = self.grid or ((h, w) if content.values is not None else None)
        if self.cursor is not None and grid is not None:
            # A small cell is outlined by inverting it: back into the terminal's colours.
            pixels = colormaps.fit(self._outline(pixels, grid), depth)
        rows = self._paint(pixels, -(-px_w // cw), -(-px_h // ch))
        self._labels(content, label_w, (h, w), rows, ylabels, xlabels)
        legend.display = self.show_legend and content.values is not None
        if legend.display:  # text: in the terminal's colours even beside graphics
            legend.update(self._legend(content, min(width, 40), self._depth()))

    def _draw_cursor_only(self) -> bool:
        """Outline the cursor on the scaled picture of the last drawing, when the picture,
        its size and its colours are the same: a cursor key then skips colouring, scaling,
        labels and legend, and in cells redraws only the cell rows the outline is on
        (whether it could)."""
        scaled, content = self._scaled, self._content
        if scaled is None or content is None or not self.is_mounted:
            return False
        depth = "truecolor" if self._graphics is not None else self._depth()
        drawn, width, max_rows, drawn_depth, pixels = scaled
        same = (width, max_rows, drawn_depth) == (self.size.width, self.max_rows, depth)
        if drawn is not content or not same:
            return False
        grid = self.grid or (self._shape if content.values is not None else None)
        (cw, ch), (px_h, px_w) = self._cell, pixels.shape[:2]
        if self._graphics is not None or self.cursor is None or grid is None:
            if self.cursor is not None and grid is not None:
                pixels = colormaps.fit(self._outline(pixels, grid), depth)
            self._paint(pixels, -(-px_w // cw), -(-px_h // ch))
            return True
        if self._plain_strips is None:  # once per drawing: the cells without a cursor
            self._plain_strips = raster.half_block_strips(pixels)
        y0, y1 = self._outline_rows(px_h, grid[0])
        top, bottom = y0 // 2 * 2, min(px_h, -(-y1 // 2) * 2)  # whole cell rows
        band = colormaps.fit(self._outline(pixels, grid)[top:bottom], depth)
        strips = list(self._plain_strips)
        strips[top // 2 : top // 2 + -(-(bottom - top) // 2)] = raster.half_block_strips(band)
        self.query_one(_Cells).set_strips(strips)
        return True

    def _source(self, content: _Content, depth: Depth, width: int) -> np.ndarray:
        """The picture to scale (h×w×3 uint8) in ``depth``'s colours: values and mosaics
        coloured through the maps' palettes, a photo fitted to the nearest colours."""
        if content.values is not None:
            assert content.scale is not None  # values always come with their scale
            rgb = colormaps.to_rgb(content.values, content.scale, content.cmap, depth)
            if content.masked is not None:
                rgb[content.masked] = colormaps.masked_rgb(depth)
            return rgb
        if content.labels is not None:
            return colormaps.label_rgb(content.labels, content.masked, depth)
        if content.tiles is not None:
            tile_w = max((t.shape[-1] for t in content.tiles), default=1) + 1
            per_row = content.per_row or (width + 1) // tile_w
            assert content.scale is not None  # so do tiles
            return colormaps.mosaic(content.tiles, per_row, content.scale, content.cmap, depth)
        assert content.rgb is not None  # a content holds values, tiles or a photo
        if self._fitted is None or self._fitted[0] != depth:  # once per picture and depth
            self._fitted = (depth, colormaps.fit(content.rgb, depth))
        return self._fitted[1]

    def _pixel_box(self, width: int, cw: int, ch: int) -> tuple[int, int]:
        """The most pixels (width, height) the picture may take: ``width`` columns by
        ``max_rows`` rows, and for sixel no more whole cells than the terminal's graphics
        limit holds (a larger picture is dropped by the terminal, its cells left black)."""
        box_w, box_h = width * cw, self.max_rows * ch
        if self._mode() == "sixel":
            limit_w, limit_h = images.sixel_limit()
            box_w, box_h = min(box_w, limit_w // cw * cw), min(box_h, limit_h // ch * ch)
        return box_w, box_h

    def _paint(self, pixels: np.ndarray | None, cols: int, rows: int) -> int:
        graphics = self._graphics
        if graphics is None:
            strips = raster.half_block_strips(pixels) if pixels is not None else []
            self.query_one(_Cells).set_strips(strips)
            return len(strips)
        from PIL import Image

        if pixels is None:
            if isinstance(graphics, SixelCanvas):
                graphics.show(None, self._cell)
            else:
                graphics.image = None
                graphics.display = False
            self.screen.refresh()
            return 0
        # Pad to the cells' exact pixel size: the picture is drawn as it is (nothing
        # resamples it into blur or bands) and never reaches past its cells.
        cw, ch = self._cell
        canvas = np.empty((rows * ch, cols * cw, 3), dtype=np.uint8)
        canvas[...] = self.background_colors[1].rgb
        canvas[: pixels.shape[0], : pixels.shape[1]] = pixels
        if isinstance(graphics, SixelCanvas):  # made in sixel mode (_canvas)
            if colour_count(canvas) > MAX_REGISTERS:
                # A photo: choose its registers and dither, so it shows no bands.
                quantized = Image.fromarray(canvas).quantize(
                    MAX_REGISTERS,
                    method=Image.Quantize.MEDIANCUT,
                    dither=Image.Dither.FLOYDSTEINBERG,
                )
                canvas = np.asarray(quantized.convert("RGB"))
            graphics.show(canvas, self._cell)
        else:
            graphics.styles.width = cols
            graphics.styles.height = rows
            graphics.display = True
            graphics.image = Image.fromarray(canvas)
        # Graphics stay on the terminal until their cells are written again, and Textual
        # writes only cells whose text changed: repaint everything so no stale pixels stay.
        self.screen.refresh()
        return rows

    def _outline_rows(self, px_h: int, rows: int) -> tuple[int, int]:
        """The pixel rows the cursor's outline covers, of a picture ``px_h`` pixels high
        showing ``rows`` rows of values."""
        assert self.cursor is not None  # drawn only under a cursor
        row = self.cursor[0]
        return row * px_h // rows, max(row * px_h // rows + 1, (row + 1) * px_h // rows)

    def _outline(self, pixels: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
        assert self.cursor is not None  # drawn only under a cursor
        row, col = self.cursor
        px_h, px_w = pixels.shape[:2]
        y0, y1 = self._outline_rows(px_h, shape[0])
        x0, x1 = (
            col * px_w // shape[1],
            max(col * px_w // shape[1] + 1, (col + 1) * px_w // shape[1]),
        )
        out = pixels.copy()
        block = out[y0:y1, x0:x1]
        if block.shape[0] >= 3 and block.shape[1] >= 3:
            block[[0, -1], :] = CURSOR_RGB
            block[:, [0, -1]] = CURSOR_RGB
        else:
            block[...] = 255 - block
        return out

    def _labels(
        self,
        content: _Content,
        label_w: int,
        shape: tuple[int, int],
        rows: int,
        ylabels: Static,
        xlabels: Static,
    ) -> None:
        (h, w), (px_h, px_w), (cw, ch) = shape, self._pixels, self._cell
        ylabels.display = bool(content.y_labels)
        if content.y_labels:
            lines, last = [], None
            for r in range(rows):
                row = min(h - 1, r * ch * h // px_h)
                text = content.y_labels[row] if row != last and row < len(content.y_labels) else ""
                lines.append(text[:LABEL_CHARS].rjust(label_w - 1) + " ")
                last = row
            ylabels.update(Text("\n".join(lines)))  # tokens such as [CLS] are not markup
        xlabels.display = bool(content.x_labels)
        if content.x_labels:
            line, end = [" "] * (label_w + -(-px_w // cw) + LABEL_CHARS), 0
            for col, text in enumerate(content.x_labels[:w]):
                x = label_w + col * px_w // w // cw
                text = text[:LABEL_CHARS]
                if x >= end:
                    line[x : x + len(text)] = list(text)
                    end = x + len(text) + 1
            xlabels.update(Text("".join(line).rstrip()))

    def _legend(self, content: _Content, width: int, depth: Depth) -> Text:
        assert content.scale is not None and content.values is not None  # drawn for values
        return legend_text(
            content.values,
            content.scale,
            width,
            depth,
            content.cmap,
            content.masked,
            content.legend,
        )

    def value_at(self, x: int, y: int) -> tuple[int, int] | None:
        """The (row, col) of the array value (or picture pixel) under canvas cell (x, y)."""
        content = self._content
        if content is None or not self._pixels[0]:
            return None
        (cw, ch), (px_h, px_w) = self._cell, self._pixels
        px, py = x * cw + cw // 2, y * ch + ch // 2
        if not (0 <= px < px_w and 0 <= py < px_h):
            return None
        return raster.value_at(self._shape, self._pixels, py, px)

    def on_click(self, event: Click) -> None:
        canvas = self._graphics or self.query_one(_Cells)
        offset = event.get_content_offset(canvas)
        if offset is None:
            return
        picked = self.value_at(offset.x, offset.y)
        if picked is not None:
            self.post_message(self.Picked(self, *picked))


def _fills_width(widget: Widget) -> bool:
    """Whether ``widget`` takes its container's whole width in a column (no width of its
    own, ``1fr`` or ``100%``)."""
    width = widget.styles.width
    return width is None or (width.unit, width.value) in _WHOLE_WIDTH


_WHOLE_WIDTH = {(Unit.FRACTION, 1.0), (Unit.PERCENT, 100.0)}
