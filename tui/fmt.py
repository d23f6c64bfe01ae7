"""Short, fixed-width text for numbers, shapes, times and sizes as the viewer shows them."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def shape(dims: Sequence[int] | None) -> str:
    """``[8, 3, 32, 32]`` → ``8×3×32×32``; a scalar is ``scalar``; unknown is empty."""
    if dims is None:
        return ""
    if len(dims) == 0:
        return "scalar"
    return "×".join(str(d) for d in dims)


def num(value: Any, digits: int = 3) -> str:
    """A compact number: ``0.0123``, ``1.2e-05``, ``nan``, ``—`` for missing."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}" if abs(value) < 10**9 else f"{value:.{digits}g}"
    try:
        value = float(value)
    except (TypeError, ValueError):
        return str(value)
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if value == 0:
        return "0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e5:
        return f"{value:.{digits}g}" if magnitude < 1 else f"{value:.{digits + 1}g}"
    return f"{value:.{max(1, digits - 1)}e}"


def ms(value: float | None, approx: bool = False) -> str:
    """Milliseconds, with ``≈`` when the figure is inferred."""
    if value is None:
        return "—"
    prefix = "≈" if approx else ""
    if value >= 100:
        return f"{prefix}{value:.0f} ms"
    if value >= 1:
        return f"{prefix}{value:.2f} ms"
    return f"{prefix}{value * 1000:.0f} µs"


def pct(fraction: float | None) -> str:
    if fraction is None:
        return "—"
    return (
        f"{fraction * 100:.0f}%" if fraction >= 0.01 or fraction == 0 else f"{fraction * 100:.1f}%"
    )


def size(n: float | None) -> str:
    if n is None:
        return "—"
    for unit in ("B", "kB", "MB", "GB"):  # powers of 1000, as `tvis ls` prints them
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` cells with an ellipsis when it did not fit."""
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: max(0, width - 1)] + "…"


def clip_middle(text: str, width: int) -> str:
    """``text`` shortened in the middle (``/tmp/…/runs``) so both ends stay readable."""
    if len(text) <= width:
        return text
    keep = max(1, width - 1)
    head = keep // 2
    return text[:head] + "…" + text[len(text) - (keep - head) :]


def clip_start(text: str, width: int) -> str:
    """``text`` cut at its start (``…0.bn1.weight``): a dotted path keeps its most specific
    part."""
    if len(text) <= width:
        return text
    if width <= 0:
        return ""
    return "…" + text[len(text) - width + 1 :]


def where(loc: Any) -> str:
    """``[file, line]`` as ``file:line``; library files lose their site-packages prefix."""
    if not (isinstance(loc, (list, tuple)) and len(loc) == 2):
        return "—"
    file = str(loc[0])
    for marker in ("site-packages/", "dist-packages/"):
        if marker in file:
            file = file.split(marker, 1)[1]
    return f"{file}:{loc[1]}"


def call_name(row: dict[str, Any]) -> str:
    """How a call is named in lists: its module path or function name, else its class."""
    return row.get("name") or row.get("cls") or f"call {row.get('id')}"
