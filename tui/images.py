"""How pictures are drawn: kitty graphics, sixel, or half-block cells.

``--images`` or ``$TVIS_IMAGES`` force a mode. ``auto`` picks half blocks inside tmux/screen,
when output is not a terminal, and on consoles that cannot draw pictures; otherwise it asks
the terminal through textual-image. That probe reads the terminal's answer from stdin, so
``prepare`` must run before the app starts (afterwards Textual owns stdin).
"""

from __future__ import annotations

import os
import re
import select
import sys
import time
from collections.abc import Mapping

MODES = ("auto", "kitty", "sixel", "halfcell")

_NO_GRAPHICS_TERMS = ("dumb", "linux", "vt100", "vt220")


class ImageModeError(ValueError):
    """An image mode that is not one of ``MODES``."""


def requested_mode(flag: str | None, env: Mapping[str, str] = os.environ) -> str:
    """The mode asked for by the flag, else by ``$TVIS_IMAGES``, else ``auto``."""
    mode = (flag or env.get("TVIS_IMAGES") or "auto").strip().lower()
    if mode not in MODES:
        raise ImageModeError(
            f"unknown image mode {mode!r}; use one of {', '.join(MODES)} (--images or TVIS_IMAGES)."
        )
    return mode


def graphics_impossible(env: Mapping[str, str] = os.environ, tty: bool | None = None) -> bool:
    """True where pictures cannot work: tmux/screen, no terminal, or a text-only console."""
    if tty is None:
        out, inp = sys.__stdout__, sys.__stdin__
        tty = bool(out and inp and out.isatty() and inp.isatty())
    term = env.get("TERM", "")
    return (
        not tty
        or "TMUX" in env
        or term.startswith(("screen", "tmux"))
        or term in _NO_GRAPHICS_TERMS
    )


def resolve(flag: str | None, env: Mapping[str, str] = os.environ, tty: bool | None = None) -> str:
    """The concrete mode (kitty, sixel or halfcell) to draw with."""
    mode = requested_mode(flag, env)
    if mode != "auto":
        return mode
    if graphics_impossible(env, tty):
        return "halfcell"
    if env.get("TERM") == "xterm-kitty" or env.get("TERM_PROGRAM", "").lower() in ("ghostty",):
        return "kitty" if placeholders_supported(terminal_version()) else "halfcell"
    mode = _probe()
    if mode == "kitty" and not placeholders_supported(terminal_version()):
        return "halfcell"
    return mode


KITTY_PLACEHOLDERS = (0, 28)
"""The first kitty that draws pictures through Unicode placeholders, the way textual-image
places them; an older kitty (Debian 12 ships 0.26.5) shows a grid of empty boxes instead."""

XTVERSION_WAIT_S = 1.0
"""The longest wait for the terminal's version reply. The version query is followed by a
primary device-attributes query (DA1), which every terminal answers, in order: the wait
ends at that answer, so it is this long only for a terminal that answers nothing. A kitty
behind two slow ssh hops, or starting on a busy machine, may take hundreds of milliseconds;
missing its reply would draw empty boxes on a kitty too old for placeholders."""


def placeholders_supported(version: str | None) -> bool:
    """Whether a terminal that named itself ``version`` (XTVERSION) draws kitty placeholders.
    Terminals other than kitty that speak its protocol (ghostty, wezterm) do; so does one
    that does not say."""
    match = re.match(r"kitty\((\d+)\.(\d+)", version or "")
    if not match:
        return True
    return (int(match.group(1)), int(match.group(2))) >= KITTY_PLACEHOLDERS


def terminal_version() -> str | None:
    """The terminal's name and version from its XTVERSION reply, e.g. ``kitty(0.26.5)``."""
    try:
        import termios

        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except (ImportError, OSError):
        return None
    try:
        return ask_version(fd)
    except (OSError, termios.error):
        return None
    finally:
        os.close(fd)


_VERSION_REPLY = re.compile(rb"\x1bP>\|([^\x1b]*)\x1b\\")
_DA1_REPLY = re.compile(rb"\x1b\[\?[\d;]*c")


def ask_version(fd: int) -> str | None:
    """Ask the terminal on ``fd`` for its version (XTVERSION), then for its attributes
    (DA1), and read until the attributes come: a terminal that does not know XTVERSION
    has then said so by answering DA1 alone."""
    match = _VERSION_REPLY.search(_ask(fd, b"\x1b[>0q\x1b[c"))
    return match.group(1).decode(errors="replace") if match else None


SIXEL_LIMIT = (1000, 1000)
"""The largest sixel picture (width, height in pixels) drawn when the terminal does not say:
xterm's default ``maxGraphicSize``. xterm drops a wider or taller picture whole and leaves
its cells black."""

_GEOMETRY_REPLY = re.compile(rb"\x1b\[\?2;0;(\d+);(\d+)S")

_sixel_limit: tuple[int, int] = SIXEL_LIMIT


def sixel_limit() -> tuple[int, int]:
    """The largest sixel picture (width, height in pixels) this terminal draws."""
    return _sixel_limit


def ask_graphics_limit(fd: int) -> tuple[int, int] | None:
    """Ask the terminal on ``fd`` for the sixel area it allows (XTSMGRAPHICS, read the
    geometry), fenced by DA1 as ``ask_version`` is; None when it does not answer."""
    reply = _ask(fd, b"\x1b[?2;1;0S\x1b[c")
    match = _GEOMETRY_REPLY.search(reply)
    if not match:
        return None
    width, height = int(match.group(1)), int(match.group(2))
    return (width, height) if width > 0 and height > 0 else None


def _ask(fd: int, query: bytes) -> bytes:
    """Write ``query`` (ending in DA1) to the terminal on ``fd`` in raw mode and read the
    replies until DA1's answer, or ``XTVERSION_WAIT_S``."""
    import termios
    import tty

    saved = termios.tcgetattr(fd)
    tty.setraw(fd)
    try:
        os.write(fd, query)
        reply = b""
        deadline = time.monotonic() + XTVERSION_WAIT_S
        while not _DA1_REPLY.search(reply):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            reply += os.read(fd, 256)
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    return reply


def _measure_sixel_limit() -> None:
    global _sixel_limit
    try:
        import termios

        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except (ImportError, OSError):
        return
    try:
        _sixel_limit = ask_graphics_limit(fd) or SIXEL_LIMIT
    except (OSError, termios.error):
        pass
    finally:
        os.close(fd)


def _probe() -> str:
    from textual_image import renderable

    if renderable.Image is renderable.SixelImage:
        return "sixel"
    if renderable.Image is renderable.TGPImage:
        return "kitty"
    return "halfcell"


def prepare(mode: str) -> None:
    """Load textual-image for kitty/sixel now, and for sixel ask how large a picture may be,
    while the terminal can still answer (afterwards Textual owns stdin)."""
    if mode in ("kitty", "sixel"):
        import textual_image.widget  # noqa: F401  (measures the cell size at import)
    if mode == "sixel":
        _measure_sixel_limit()
