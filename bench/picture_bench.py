"""How long the picture kit takes to draw a 256×256 heatmap at 120×40, in each image mode.

Measured through a real ``Picture`` in a Textual app driven by Pilot (the app's own
geometry, colour depth and canvas), from ``show_values`` until the canvas holds its strips
(half blocks) or its escape sequence (sixel) or its image (kitty, where textual-image then
sends the pixels). Sixel encoding happens when the canvas renders, so it is timed there.

    .venv/bin/python bench/picture_bench.py [--repeat 20]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import time

import numpy as np
from textual.app import App, ComposeResult
from textual.geometry import Region

from tvis.tui.picture import Picture, Scale
from tvis.tui.picture.sixel import SixelCanvas


class _Bench(App):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.image_mode = mode

    def compose(self) -> ComposeResult:
        yield Picture(max_rows=36)


async def _measure(mode: str, repeat: int) -> list[float]:
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal((256, 256)).astype(np.float32) for _ in range(repeat)]
    app = _Bench(mode)
    times = []
    async with app.run_test(size=(120, 40)) as pilot:
        picture = app.query_one(Picture)
        await pilot.pause()
        for array in arrays:
            start = time.perf_counter()
            picture.show_values(array, Scale.of(array))
            canvas = picture._graphics
            if isinstance(canvas, SixelCanvas):  # encoded when drawn: encode it now
                h, w = canvas.pixels.shape[:2]
                canvas._sixels(Region(0, 0, w // canvas.cell[0], h // canvas.cell[1]))
            times.append((time.perf_counter() - start) * 1000)
            await pilot.pause()
    return times


@contextlib.contextmanager
def _quiet_stdout():
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        os.dup2(saved, 1)
        os.close(devnull)
        os.close(saved)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    from textual_image._terminal import get_cell_size

    get_cell_size()  # the cell size graphics modes draw with (10×20 when not a terminal)
    print(f"{'mode':<10} {'median ms':>10} {'p90 ms':>8}")
    for mode in ("halfcell", "sixel", "kitty"):
        with _quiet_stdout():  # textual-image sends kitty pictures to the real stdout
            times = asyncio.run(_measure(mode, args.repeat))
        p90 = statistics.quantiles(times, n=10)[-1]
        print(f"{mode:<10} {statistics.median(times):>10.1f} {p90:>8.1f}")


if __name__ == "__main__":
    main()
