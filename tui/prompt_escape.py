"""Escape answered in ~10 ms instead of 100–200.

A terminal sends Escape as one byte, ESC, which also starts every arrow and function key's
sequence: Textual's parser holds a lone ESC until ``ESCDELAY`` ms pass with nothing after it
(100 by default), and its Linux driver notices that time passing only when its wait for
input times out, every 100 ms — so closing the help, the search box or a pane waited 100 to
200 ms before the viewer even saw the key. `tvis tui` sets ``ESCDELAY`` to
``command.ESCAPE_DELAY_MS`` unless the user set it (a terminal's sequence arrives in one read, so
this is ample locally and over ssh; tmux's own default is 10 ms), and runs on
``PromptEscapeDriver``, whose input thread wakes when the parser's wait ends.

``PromptEscapeDriver.run_input_thread`` replaces Textual's (``LinuxDriver.run_input_thread``,
textual 8.2.8) and does what it does but for that wait; ``tests/tui/test_prompt_escape.py``
fails if Textual's changes, so that this one is checked against it again.
"""

from __future__ import annotations

import contextlib
import os
import selectors
from codecs import getincrementaldecoder
from collections.abc import Iterable
from typing import Any

from textual._parser import ParseError
from textual._time import get_time
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

IDLE_WAIT_S = 0.1
"""Textual's wait for input when the parser waits for nothing (it checks for exit then)."""


def parser_wait_s(parser: XTermParser) -> float:
    """How long the input thread may wait for input before the parser's own wait (a lone
    ESC's) runs out: IDLE_WAIT_S when it waits for nothing."""
    deadline = parser._timeout_time
    if deadline is None:
        return IDLE_WAIT_S
    return min(IDLE_WAIT_S, max(0.0, deadline - get_time()) + 0.001)


class PromptEscapeDriver(LinuxDriver):
    """Textual's Linux driver, its input thread waking when a lone ESC's wait ends."""

    def run_input_thread(self) -> None:
        """Read the terminal, turn its bytes into key and mouse events for the app, and
        never wait for input past the moment a lone ESC becomes the Escape key."""
        parser = XTermParser(self._debug)
        decode = getincrementaldecoder("utf-8")().decode

        def dispatch(events: Iterable[Any]) -> None:
            for event in events:
                self.process_message(event)

        with selectors.SelectSelector() as selector:
            selector.register(self.fileno, selectors.EVENT_READ)
            try:
                while not self.exit_event.is_set():
                    if selector.select(parser_wait_s(parser)):
                        text = decode(os.read(self.fileno, 4096))
                        if text:  # empty: the input is a pipe that closed
                            dispatch(parser.feed(text))
                    dispatch(parser.tick())  # a lone ESC whose wait ran out is due now
            finally:
                with contextlib.suppress(EOFError, ParseError):
                    list(parser.feed(""))  # the end of input: what the parser held goes
