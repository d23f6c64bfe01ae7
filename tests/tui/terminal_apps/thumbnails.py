"""Pictures given their content as they are mounted into a grid after a key, as Grad-CAM's
thumbnails are, for screenshots in a real terminal: ``python thumbnails.py MODE``; `m`
mounts three bright squares."""

from __future__ import annotations

import sys

import numpy as np
from textual.app import App, ComposeResult
from textual.containers import Grid, Vertical
from textual.widgets import Static

from tvis.tui import images
from tvis.tui.picture import Picture

BRIGHT = (250, 250, 40)


class Thumbnails(App):
    CSS = "Grid { grid-size: 3; grid-columns: 24; grid-gutter: 0 1; } .thumb { height: auto; }"
    BINDINGS = [("m", "mount_thumbnails")]

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.image_mode = mode

    def compose(self) -> ComposeResult:
        yield Static("press m")
        yield Grid()

    def action_mount_thumbnails(self) -> None:
        square = np.empty((24, 24, 3), dtype=np.uint8)
        square[...] = BRIGHT
        boxes = []
        for i in range(3):
            picture = Picture(max_rows=12, legend=False, classes="thumb")
            picture.show_rgb(square)  # before its mount, as a grid's answer is drawn
            boxes.append(Vertical(picture, Static(f"s{i}"), classes="thumb"))
        self.query_one(Grid).mount(*boxes)


if __name__ == "__main__":
    mode = images.resolve(sys.argv[1])
    images.prepare(mode)
    Thumbnails(mode).run()
