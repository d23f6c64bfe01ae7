"""A checkerboard through the picture kit, for screenshots in a real terminal:
``python checkerboard.py MODE [SIDE ROWS]`` (sixel, kitty or halfcell): SIDE×SIDE squares
(2 unless given) at most ROWS cells tall (8 unless given)."""

from __future__ import annotations

import sys

import numpy as np
from textual.app import App, ComposeResult

from tvis.tui import images
from tvis.tui.picture import Picture


class Checkerboard(App):
    def __init__(self, mode: str, side: int = 2, rows: int = 8) -> None:
        super().__init__()
        self.image_mode = mode
        self.side, self.rows = side, rows

    def compose(self) -> ComposeResult:
        yield Picture(max_rows=self.rows, legend=False)

    def on_mount(self) -> None:
        board = np.indices((self.side, self.side)).sum(axis=0) % 2
        self.query_one(Picture).show_values(board.astype(np.float32))


if __name__ == "__main__":
    mode = images.resolve(sys.argv[1])
    images.prepare(mode)
    Checkerboard(mode, *map(int, sys.argv[2:4])).run()
