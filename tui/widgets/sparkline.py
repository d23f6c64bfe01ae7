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


def sparkline(values: Sequence[float | None], width: int, color: str = "") -> Text:
    """A series as block heights between its min and max, squeezed to ``width`` points by
    bucket means; a missing point (None) is a gap, a NaN or infinite one a "!" (a bucket
    with one shows it: a blown-up step is never averaged away). A flat series is drawn at
    half height."""
    numbers = [math.nan if v is None else float(v) for v in values]
    series = resample_series(numbers, width)
    broken = resample_series([1.0 if _broken(v) else 0.0 for v in values], width)
    finite = [v for v in series if math.isfinite(v)]
    lo, hi = (min(finite), max(finite)) if finite else (0.0, 0.0)
    chars = []
    for v, bad in zip(series, broken, strict=True):
        if bad > 0:
            chars.append("!")
        elif not math.isfinite(v):
            chars.append(" ")
        else:
            chars.append(BLOCKS[1 + round((v - lo) / (hi - lo) * 7)] if hi > lo else BLOCKS[4])
    return Text("".join(chars), style=color)


def _broken(value: float | None) -> bool:
    """A number that is there but not finite (NaN, ±Inf)."""
    return value is not None and not math.isfinite(value)


def signed_sparkline(
    values: Sequence[float | None], width: int, positive: str, negative: str
) -> tuple[Text, Text]:
    """A series as two lines around a zero axis between them: values above zero rise from
    it in ``positive``, values below hang from it in ``negative``, both on one scale (the
    largest |value| fills its line). NaN points are gaps."""
    series = resample_series([math.nan if v is None else float(v) for v in values], width)
    finite = [abs(v) for v in series if math.isfinite(v)]
    top = max(finite, default=0.0) or 1.0
    up, down = Text(), Text()
    for v in series:
        eighths = round(abs(v) / top * 8) if math.isfinite(v) else 0
        if not math.isfinite(v) or eighths == 0:
            up.append(" ")
            down.append(" ")
        elif v > 0:
            up.append(BLOCKS[eighths], style=positive)
            down.append(" ")
        else:
            up.append(" ")
            # Reversed, a lower block's empty top takes the colour: a bar hanging from the axis.
            down.append(BLOCKS[8 - eighths], style=f"reverse {negative}")
    return up, down


def hbar(fraction: float, width: int) -> str:
    """A horizontal bar ``fraction`` (0–1) of ``width`` cells long, in eighth-cell steps."""
    if width <= 0:
        return ""
    fraction = min(1.0, max(0.0, fraction if math.isfinite(fraction) else 0.0))
    eighths = round(fraction * width * 8)
    full, rest = divmod(eighths, 8)
    bar = "█" * full + (EIGHTHS[rest] if rest else "")
    return bar.ljust(width)


def signed_hbar(value: float, top: float, left: int, right: int) -> list[tuple[str, str]]:
    """A bar for ``value`` on a zero axis: ``left`` cells for values down to ``-top``, an
    axis, ``right`` cells for values up to ``top``; (text, "neg"/"pos"/"axis"/"") pieces."""
    fraction = abs(value) / top if math.isfinite(value) and top > 0 else 0.0
    if value < 0 and left:
        eighths = min(left * 8, round(fraction * left * 8))
        full, rest = divmod(eighths, 8)
        pad = left - full - (1 if rest else 0)
        # A reversed left block whose empty right part takes the colour: the bar's left end.
        pieces = [(" " * pad, "")] + ([(EIGHTHS[8 - rest], "neg-edge")] if rest else [])
        pieces += [("█" * full, "neg"), ("│", "axis"), (" " * right, "")]
        return pieces
    bar = hbar(fraction if value > 0 else 0.0, right)
    return [(" " * left, ""), ("│", "axis"), (bar, "pos")]
