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
        tty = bool(sys.__stdout__ and sys.__stdout__.isatty() and sys.__stdin__.isatty())
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

XTVERSION_WAIT_S = 0.2
"""How long to wait for the terminal's version reply: a local terminal answers in
microseconds, one behind two ssh hops in tens of milliseconds; a silent one costs this once."""


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
        import tty

        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except (ImportError, OSError):
        return None
    try:
        saved = termios.tcgetattr(fd)
        tty.setraw(fd)
        try:
            os.write(fd, b"\x1b[>0q")
            reply = b""
            while select.select([fd], [], [], XTVERSION_WAIT_S)[0]:
                reply += os.read(fd, 256)
                if reply.endswith(b"\x1b\\"):
                    break
        finally:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
    except (OSError, termios.error):
        return None
    finally:
        os.close(fd)
    match = re.search(rb"\x1bP>\|([^\x1b]*)\x1b\\", reply)
    return match.group(1).decode(errors="replace") if match else None


def _probe() -> str:
    from textual_image import renderable

    if renderable.Image is renderable.SixelImage:
        return "sixel"
    if renderable.Image is renderable.TGPImage:
        return "kitty"
    return "halfcell"


def prepare(mode: str) -> None:
    """Load textual-image for kitty/sixel now, while the terminal can still answer its probes."""
    if mode in ("kitty", "sixel"):
        import textual_image.widget  # noqa: F401  (measures the cell size at import)
