"""Sixel pictures: the encoder round-trips every pixel, and in a real xterm the picture shows
each value as one crisp square of exactly its colour (no stripe, no blur)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from terminal_apps.thumbnails import BRIGHT

from tvis.tui import images
from tvis.tui.picture import VALUES, sixel

TERM_SHOT = next(
    (
        folder / "shared" / "tools" / "term-shot"
        for folder in Path(__file__).resolve().parents
        if (folder / "shared" / "tools" / "term-shot").exists()
    ),
    Path("term-shot"),
)
"""The screenshot tool, in ``shared/tools`` beside the checkout (or beside its worktrees)."""
CHECKERBOARD = Path(__file__).parent / "terminal_apps" / "checkerboard.py"
THUMBNAILS = Path(__file__).parent / "terminal_apps" / "thumbnails.py"


def decode(data: str) -> tuple[np.ndarray, np.ndarray]:
    """(register per pixel, register colours in percent) of a sixel sequence: a decoder
    written from the format, to check ours against."""
    body = data[data.index("q") + 1 : data.rindex("\x1b\\")]
    size = re.match(r'"1;1;(\d+);(\d+)', body)
    w, h = int(size.group(1)), int(size.group(2))
    body = body[size.end() :]
    out = np.full((h, w), -1, dtype=np.int64)
    registers: dict[int, tuple[int, int, int]] = {}
    x = band = colour = 0
    for token in re.finditer(r"#(\d+)(?:;2;(\d+);(\d+);(\d+))?|!(\d+)(.)|([?-~])|(\$)|(-)", body):
        if token.group(1) is not None:
            colour = int(token.group(1))
            if token.group(2) is not None:
                registers[colour] = tuple(int(token.group(i)) for i in (2, 3, 4))
            continue
        if token.group(8):
            x = 0
            continue
        if token.group(9):
            x, band = 0, band + 1
            continue
        count, char = (
            (int(token.group(5)), token.group(6)) if token.group(5) else (1, token.group(7))
        )
        bits = ord(char) - 63
        for dy in range(6):
            if bits >> dy & 1 and band * 6 + dy < h:
                out[band * 6 + dy, x : x + count] = colour
        x += count
    palette = np.array([registers[i] for i in range(len(registers))])
    return out, palette


def test_sixel_encoding_round_trips_every_pixel():
    rng = np.random.default_rng(0)
    colours = VALUES.lut[::16]
    rgb = colours[rng.integers(0, len(colours), size=(31, 45))]  # 31 rows: a partial band
    data = sixel.encode(rgb)
    index, palette = decode(data)
    expected_palette, expected_index = sixel.indexed(rgb)
    assert (index == expected_index).all()
    assert np.abs(palette - expected_palette.astype(float) * 100 / 255).max() <= 0.5
    # every register is defined before the first pixel is drawn
    first_draw = re.search(r"#\d+(?!\d|;)", data).start()
    assert data.rfind(";2;") < first_draw


def test_more_colours_than_registers_is_refused():
    rgb = np.arange(300 * 3, dtype=np.uint32).reshape(1, 300, 3).astype(np.uint8)
    rgb[0, :, 0] = np.arange(300) % 256
    rgb[0, :, 1] = np.arange(300) // 256
    with pytest.raises(ValueError, match="quantize"):
        sixel.encode(rgb)


def _squares(shot: np.ndarray, colour: tuple[int, int, int]) -> list[tuple[int, int, int, int]]:
    """Bounding boxes (y0, y1, x0, x1) of the two squares of ``colour`` in a screenshot."""
    near = (np.abs(shot - np.array(colour)) <= 4).all(axis=-1)
    ys, xs = np.nonzero(near)
    assert ys.size, f"no pixel of {colour} on the screen"
    mid_x = (xs.min() + xs.max()) / 2
    boxes = []
    for side in (xs < mid_x, xs >= mid_x):
        y, x = ys[side], xs[side]
        boxes.append((y.min(), y.max() + 1, x.min(), x.max() + 1))
        box = near[y.min() : y.max() + 1, x.min() : x.max() + 1]
        assert box.all(), f"the square of {colour} is not one solid block"
    return boxes


needs_terminal = pytest.mark.skipif(
    not (
        TERM_SHOT.exists() and all(shutil.which(t) for t in ("Xvfb", "xterm", "import", "xdotool"))
    ),
    reason="needs ../shared/tools/term-shot with Xvfb, xterm, imagemagick and xdotool",
)


@needs_terminal
def test_sixel_xterm_shows_each_value_as_a_crisp_square_of_its_colour(tmp_path: Path):
    shot = _shot(tmp_path, "sixel")
    low, high = tuple(VALUES.lut[0].tolist()), tuple(VALUES.lut[-1].tolist())
    for colour in (low, high):
        for y0, y1, x0, x1 in _squares(shot, colour):
            assert y1 - y0 == x1 - x0 >= 20, "a value is a square several pixels wide"


@needs_terminal
def test_sixel_wider_than_xterms_graphics_limit_is_drawn_within_it(tmp_path: Path):
    """64×64 squares asked to fill 200×60 cells would be ~2000 px wide: xterm drops any
    picture over its 1000 px limit and leaves the cells black."""
    shot = _shot(tmp_path, "sixel", size=(200, 60), board=("64", "56"))
    high = (np.abs(shot - VALUES.lut[-1].astype(int)) <= 4).all(axis=-1)
    low = (np.abs(shot - VALUES.lut[0].astype(int)) <= 4).all(axis=-1)
    assert high.sum() > 100_000 and low.sum() > 100_000, "the picture was dropped"
    xs = np.nonzero(high | low)[1]
    assert xs.max() - xs.min() <= images.SIXEL_LIMIT[0]


@needs_terminal
def test_sixel_pictures_given_as_they_are_mounted_are_drawn(tmp_path: Path):
    """Grad-CAM's grid gives each thumbnail its map as it is mounted: in xterm the three
    showed as black lines (drawn only on a resize that never came)."""
    shot = _shot(tmp_path, "sixel", "--keys", "m", size=(100, 30), app=THUMBNAILS, seen=BRIGHT)
    bright = (np.abs(shot - np.array(BRIGHT)) <= 6).all(axis=-1)
    assert bright.sum() >= 3 * 200 * 200, "the three 24-column squares are drawn"


async def test_sixel_pictures_are_capped_to_the_terminals_graphics_limit():
    from textual.app import App

    from tvis.tui.picture import Picture
    from tvis.tui.picture.widget import cell_size

    class Wide(App):
        image_mode = "sixel"

        def compose(self):
            yield Picture(max_rows=56, legend=False)

    app = Wide()
    async with app.run_test(size=(200, 60)) as pilot:
        picture = app.query_one(Picture)
        picture.show_values(np.random.default_rng(0).random((64, 64)))
        await pilot.pause()
        cw, ch = cell_size()
        assert 200 * cw > images.SIXEL_LIMIT[0] or 56 * ch > images.SIXEL_LIMIT[1]
        h, w = picture._graphics.pixels.shape[:2]
        assert 0 < w <= images.SIXEL_LIMIT[0] and 0 < h <= images.SIXEL_LIMIT[1]


def _shot(
    tmp_path: Path,
    mode: str,
    *args: str,
    size: tuple[int, int] = (60, 16),
    board: tuple[str, ...] = (),
    app: Path = CHECKERBOARD,
    seen: tuple[int, int, int] | None = None,
) -> np.ndarray:
    """A screenshot of ``app`` (the checkerboard) in a real terminal, given longer on a
    second try, when ``seen`` (the board's brightest colour) is not on it (a busy machine can
    take many seconds to start the terminal and the app)."""
    from PIL import Image

    out = tmp_path / f"{mode}.png"
    cols, rows = map(str, size)
    for wait in ("8", "25"):
        command = [str(TERM_SHOT), *args, "--cols", cols, "--rows", rows, "--wait", wait, str(out)]
        command += ["--", sys.executable, str(app), mode, *board]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120)
        assert out.exists(), result.stderr[-2000:]
        shot = np.asarray(Image.open(out).convert("RGB")).astype(int)
        if (np.abs(shot - np.array(seen or VALUES.lut[-1])) <= 4).all(axis=-1).any():
            break
    return shot


def test_kitty_older_than_placeholders_is_drawn_in_half_blocks():
    from tvis.tui.images import placeholders_supported

    assert not placeholders_supported("kitty(0.26.5)")  # Debian 12's kitty: empty boxes
    assert placeholders_supported("kitty(0.28.0)")
    assert placeholders_supported("WezTerm 20240203")  # speaks the protocol, says no version
    assert placeholders_supported(None)
