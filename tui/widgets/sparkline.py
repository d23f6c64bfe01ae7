"""One-line charts made of eighth blocks: a series over time, a bar proportional to a value."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.text import Text

BLOCKS = " ▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉█"


def resample_series(values: Sequence[float], width: int) -> list[float]:
    """``values`` squeezed (by bucket means) or kept as is to at most ``width`` points."""
    if len(values) <= width:
        return list(values)
    out = []
    for i in range(width):
        a, b = i * len(values) // width, (i + 1) * len(values) // width
        chunk = [v for v in values[a : max(b, a + 1)] if math.isfinite(v)]
        out.append(sum(chunk) / len(chunk) if chunk else math.nan)
    return out


def sparkline(values: Sequence[float | None], width: int, color: str) -> Text:
    """A series as block heights between its min and max; missing or NaN points are gaps."""
    series = resample_series([math.nan if v is None else float(v) for v in values], width)
    finite = [v for v in series if math.isfinite(v)]
    if not finite:
        return Text("")
    lo, hi = min(finite), max(finite)
    span = (hi - lo) or 1.0
    chars = []
    for v in series:
        if not math.isfinite(v):
            chars.append(" ")
        else:
            chars.append(BLOCKS[1 + round((v - lo) / span * 7)])
    return Text("".join(chars), style=color)


def hbar(fraction: float, width: int) -> str:
    """A horizontal bar ``fraction`` (0–1) of ``width`` cells long, in eighth-cell steps."""
    if width <= 0:
        return ""
    fraction = min(1.0, max(0.0, fraction if math.isfinite(fraction) else 0.0))
    eighths = round(fraction * width * 8)
    full, rest = divmod(eighths, 8)
    bar = "█" * full + (EIGHTHS[rest] if rest else "")
    return bar.ljust(width)
