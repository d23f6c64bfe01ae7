"""The terminal's version (XTVERSION) is read on a real pseudo-terminal, however slowly the
terminal answers, and a terminal that does not know the query is not waited for."""

from __future__ import annotations

import os
import pty
import threading
import time

from tvis.tui import images

KITTY_REPLY = b"\x1bP>|kitty(0.26.5)\x1b\\"
DA1_REPLY = b"\x1b[?62;c"


def _terminal(master: int, answer: bytes, delay_s: float) -> threading.Thread:
    """A terminal on the pty's far side: reads both queries, answers after ``delay_s``."""

    def run() -> None:
        asked = b""
        while b"\x1b[c" not in asked:
            asked += os.read(master, 64)
        time.sleep(delay_s)
        os.write(master, answer)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _ask(answer: bytes, delay_s: float) -> tuple[str | None, float]:
    master, slave = pty.openpty()
    try:
        terminal = _terminal(master, answer, delay_s)
        start = time.monotonic()
        version = images.ask_version(slave)
        terminal.join(5)
        return version, time.monotonic() - start
    finally:
        os.close(slave)
        os.close(master)


def test_a_slow_kittys_version_is_still_read():
    version, _ = _ask(KITTY_REPLY + DA1_REPLY, delay_s=0.4)  # a busy machine, or two ssh hops
    assert version == "kitty(0.26.5)"
    assert not images.placeholders_supported(version)


def test_a_terminal_without_xtversion_is_not_waited_for():
    version, took = _ask(DA1_REPLY, delay_s=0.0)
    assert version is None
    assert took < images.XTVERSION_WAIT_S / 2  # ended by the attributes reply, not the clock


def _ask_limit(answer: bytes) -> tuple[int, int] | None:
    master, slave = pty.openpty()
    try:
        terminal = _terminal(master, answer, 0.0)
        limit = images.ask_graphics_limit(slave)
        terminal.join(5)
        return limit
    finally:
        os.close(slave)
        os.close(master)


def test_the_sixel_limit_is_what_the_terminal_says():
    assert _ask_limit(b"\x1b[?2;0;2048;1536S" + DA1_REPLY) == (2048, 1536)


def test_a_terminal_without_xtsmgraphics_gets_no_limit_and_the_default_applies():
    assert _ask_limit(DA1_REPLY) is None
    assert _ask_limit(b"\x1b[?2;3;0;0S" + DA1_REPLY) is None  # "failure": not an area
    assert images.sixel_limit() == images.SIXEL_LIMIT  # nothing asked outside a terminal
