"""Escape answered in ~10 ms instead of 100–200.

A terminal sends Escape as one byte, ESC, which also starts every arrow and function key's
sequence: Textual's parser holds a lone ESC until ``ESCDELAY`` ms pass with nothing after it
(100 by default), and its Linux driver notices that time passing only when its wait for
input times out, every 100 ms — so closing the help, the search box or a pane waited 100 to
200 ms before the viewer even saw the key. `tvis tui` sets ``ESCDELAY`` to
``command.ESCAPE_DELAY_MS`` unless the user set it (a terminal's sequence arrives in one read, so
this is ample locally and over ssh; tmux's own default is 10 ms), and runs on
``PromptEscapeDriver``, whose input thread wakes when the parser's wait ends.

The input loop is Textual's own (``LinuxDriver.run_input_thread``, textual 8.2.8) with
that one change; ``tests/tui/test_prompt_escape.py`` fails if Textual's loop changes.
"""

from __future__ import annotations

import os
import selectors
from codecs import getincrementaldecoder

from textual._loop import loop_last
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
        """Wait for input and dispatch events (Textual's loop; only the wait differs)."""
        selector = selectors.SelectSelector()
        selector.register(self.fileno, selectors.EVENT_READ)

        fileno = self.fileno
        EVENT_READ = selectors.EVENT_READ

        parser = XTermParser(self._debug)
        feed = parser.feed
        tick = parser.tick

        utf8_decoder = getincrementaldecoder("utf-8")().decode
        decode = utf8_decoder
        read = os.read

        def process_selector_events(
            selector_events: list[tuple[selectors.SelectorKey, int]],
            final: bool = False,
        ) -> None:
            for last, (_selector_key, mask) in loop_last(selector_events):
                if mask & EVENT_READ:
                    unicode_data = decode(read(fileno, 1024 * 4), final=final and last)
                    if not unicode_data:
                        # This can occur if the stdin is piped
                        break
                    for event in feed(unicode_data):
                        self.process_message(event)
            for event in tick():
                self.process_message(event)

        try:
            while not self.exit_event.is_set():
                process_selector_events(selector.select(parser_wait_s(parser)))
            selector.unregister(self.fileno)
            process_selector_events(selector.select(0.1), final=True)

        finally:
            selector.close()
            try:
                for _event in feed(""):
                    pass
            except (EOFError, ParseError):
                pass
