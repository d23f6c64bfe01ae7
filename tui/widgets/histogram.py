"""A recorded histogram (32 bins between lo and hi) as block bars coloured by bin value."""

from __future__ import annotations

from functools import lru_cache
from itertools import groupby
from typing import Any

import numpy as np
from rich.color import Color
from rich.style import Style
from rich.text import Text

from tvis.tui import colors, fmt
from tvis.tui.picture.colormaps import Depth, Scale, to_rgb
from tvis.tui.widgets.sparkline import BLOCKS, resample_series


@lru_cache(maxsize=4096)
def _ink(r: int, g: int, b: int) -> Style:
    return Style(color=Color.from_rgb(r, g, b))


def histogram(
    hist: dict[str, Any] | None,
    width: int,
    diverging: bool,
    rows: int = 2,
    *,
    depth: Depth,
) -> Text:
    """``rows`` lines of bars (tallest bin = full height) and a line with lo and hi.

    Each bar takes the colour its bin's value has in the heatmap, so the two read together.
    """
    hist = hist or {}
    counts = list(hist.get("counts") or [])
    if not counts or width < 8:
        return Text("no histogram", style=colors.MUTED)
    lo, hi = float(hist.get("lo", 0.0)), float(hist.get("hi", 0.0))
    if not any(counts[1:]) and not hist.get("sampled"):
        # Every value in the first bin, counted whole: the maximum would land in the last bin
        # unless it equals the minimum, so this is a constant (a scalar) and its recorded
        # range [v, v + 1] is made up; an axis from v to v + 1 would mislead.
        return Text(f"every value is {fmt.num(lo)}", style=colors.MUTED)
    bars = resample_series([float(c) for c in counts], width)
    if len(bars) < width:  # stretch the bins over the width the card has
        bars = [bars[i * len(bars) // width] for i in range(width)]
    top = max(bars) or 1.0
    centres = np.linspace(lo, hi, len(bars))
    rgb = to_rgb(centres[None, :], Scale.of(centres, signed=diverging), None, depth)[0]
    styles = [_ink(*c) for c in rgb.tolist()]
    text = Text()
    for row in range(rows - 1, -1, -1):
        cells = []
        for value, style in zip(bars, styles, strict=True):
            level = value / top * rows * 8 - row * 8
            ch = BLOCKS[int(min(8, max(0, round(level))))] if value > 0 else " "
            if ch == " " and row == 0 and value > 0:
                ch = BLOCKS[1]  # a non-empty bin always shows
            cells.append((ch, style))
        for (ch, style), run in groupby(cells):  # equal cells in one span: fewer to draw
            text.append(ch * sum(1 for _ in run), style=style)
        text.append("\n")
    lo_s, hi_s = fmt.num(lo), fmt.num(hi)
    # A large tensor's histogram counts a spread-out subset: say so between lo and hi.
    mid = f" sampled 1/{hist['sampled']} " if hist.get("sampled") else " "
    gap = max(len(mid), len(bars) - len(lo_s) - len(hi_s))
    text.append(lo_s + mid.center(gap) + hi_s, style=colors.MUTED)
    return text
