"""A 2×2 checkerboard through the picture kit, for screenshots in a real terminal:
``python checkerboard.py MODE`` (sixel, kitty or halfcell)."""

from __future__ import annotations

import sys

import numpy as np
from textual.app import App, ComposeResult

from tvis.tui import images
from tvis.tui.picture import Picture


class Checkerboard(App):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.image_mode = mode

    def compose(self) -> ComposeResult:
        yield Picture(max_rows=8, legend=False)

    def on_mount(self) -> None:
        self.query_one(Picture).show_values(np.array([[0.0, 1.0], [1.0, 0.0]]))


if __name__ == "__main__":
    mode = images.resolve(sys.argv[1])
    images.prepare(mode)
    Checkerboard(mode).run()
