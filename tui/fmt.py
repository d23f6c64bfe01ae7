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
    part. Block indices are what tell ``layers.0.attention.wq`` from ``layers.1.attention.wq``,
    so when a plain cut would lose one, the middle is shortened instead (``…0.atten.wq``)."""
    if len(text) <= width:
        return text
    if width <= 0:
        return ""
    start = len(text) - width + 1
    cut = "…" + text[start + 1 if text[start : start + 1] == "." else start :]
    parts = text.split(".")
    last_index = max((i for i, p in enumerate(parts) if p.isdigit()), default=-1)
    if last_index < 0 or _keeps_every_index(text, start):
        return cut
    heads = _heads(parts[: last_index + 1])
    tail = parts[last_index + 1 :]
    rest = "".join("." + p for p in tail)
    for lead in heads:
        if len(lead) + len(rest) <= width:
            return lead + rest
    lead = heads[-1]  # the indices alone: the tail gets the room
    shrunk = _shrink(tail, len(lead) + len(rest) - width)
    if shrunk is not None:
        return lead + shrunk
    for i in range(1, len(tail)):
        if len(lead) + len("…" + ".".join(tail[i:])) <= width:
            return lead + "…" + ".".join(tail[i:])
    return cut


def _shrink(parts: list[str], excess: int) -> str | None:
    """``.a.b.c`` with its segments but the last cut from the left by ``excess`` characters
    in all (each keeps one: ``.attn.c_proj`` → ``.at.c_proj``), or None when that is not
    enough."""
    cut = []
    for part in parts[:-1]:
        take = min(excess, len(part) - 1)
        cut.append(part[: len(part) - take])
        excess -= take
    return None if excess > 0 else "".join("." + p for p in cut + parts[-1:])


def _keeps_every_index(text: str, start: int) -> bool:
    """Whether ``text[start:]`` still holds every numeric segment of the dotted path whole."""
    offset = 0
    for part in text.split("."):
        if part.isdigit() and offset < start:
            return False
        offset += len(part) + 1
    return True


def _heads(parts: list[str]) -> list[str]:
    """The path up to its last block index, longest first, every index kept: whole, then cut
    at a segment before its first index (``…layers.0``), then its indices alone (``…3.2``)."""
    first = next(i for i, p in enumerate(parts) if p.isdigit())
    heads = [".".join(parts)]
    heads += ["…" + ".".join(parts[i:]) for i in range(1, first + 1)]
    heads.append("…" + ".".join(p for p in parts if p.isdigit()))
    return heads


def token_ids(rows: list[Any], key: str) -> str:
    """The ids under ``key`` of a sample's token rows, padding left out, spaced: what shows
    where the run has no vocabulary to decode them."""
    return " ".join(str(r.get(key)) for r in rows if not r.get("pad") and key in r)


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
