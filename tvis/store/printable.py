"""Text from a run or an agent made safe for a terminal, and sizes made readable.

A run's metadata, a call's name or a token is written by whoever controls the training
script or the cluster account; printed raw, an escape sequence in it sets the viewer's
clipboard (OSC 52), its window title or clears its screen. Every such string passes
through ``printable`` before it reaches a terminal: control characters other than tab and
newline become visible stand-ins (``␛`` for ESC), so nothing is lost from sight and
nothing is interpreted; a carriage return (harmless, and at the end of every line of a
CRLF source) is dropped.
"""

from __future__ import annotations

_STAND_INS: dict[int, int | None] = {c: 0x2400 + c for c in range(0x20) if c not in (9, 10)}
_STAND_INS[0x0D] = None  # CR: sources saved with CRLF line ends read as they were written
_STAND_INS[0x7F] = 0x2421  # ␡
_STAND_INS.update({c: 0xFFFD for c in range(0x80, 0xA0)})  # C1 controls (CSI, OSC, ...)


def printable(text: str) -> str:
    """``text`` with every control character but tab and newline made visible."""
    return text if text.isprintable() else text.translate(_STAND_INS)


def printable_line(text: str) -> str:
    """``printable``, and tabs and newlines too: for one row of a table."""
    return printable(text).replace("\t", " ").replace("\n", "\u2424")


def human_bytes(n: float) -> str:
    """``n`` bytes as `tvis ls` and `tvis run` print them, in units of powers of 1000
    (what the labels say, and what `du --si` and disk makers say): 512 B, 1.5 kB, 2.0 GB."""
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"
