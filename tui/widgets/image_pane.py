"""A picture (a sample's input image): kitty or sixel through textual-image, or half blocks."""

from __future__ import annotations

import numpy as np
from textual.app import ComposeResult
from textual.widget import Widget

from tvis.tui.widgets.heatmap import Heatmap


class ImagePane(Widget):
    """Shows one RGB picture in the app's image mode."""

    DEFAULT_CSS = """
    ImagePane { height: auto; width: 1fr; }
    ImagePane > .graphics { width: auto; height: auto; max-height: 16; }
    """

    def __init__(self, mode: str, max_rows: int = 12, **kwargs) -> None:
        super().__init__(**kwargs)
        self.mode = mode
        self.max_rows = max_rows
        self._graphics = None

    def compose(self) -> ComposeResult:
        if self.mode in ("kitty", "sixel"):
            from textual_image.widget import SixelImage, TGPImage

            cls = SixelImage if self.mode == "sixel" else TGPImage
            self._graphics = cls(classes="graphics")
            self._graphics.styles.max_height = self.max_rows
            yield self._graphics
        else:
            yield Heatmap(max_rows=self.max_rows)

    def show(self, rgb: np.ndarray) -> None:
        rgb = np.asarray(rgb, dtype=np.uint8)
        if self._graphics is not None:
            from PIL import Image

            self._graphics.image = Image.fromarray(np.ascontiguousarray(rgb))
        else:
            self.query_one(Heatmap).show_rgb(rgb)

    def clear(self) -> None:
        if self._graphics is not None:
            self._graphics.image = None
        else:
            self.query_one(Heatmap).clear()
