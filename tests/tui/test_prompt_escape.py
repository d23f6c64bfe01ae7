"""Escape is seen as soon as its wait for the rest of a sequence ends (``prompt_escape``)."""

from __future__ import annotations

import hashlib
import inspect
import time

from textual import constants, events
from textual._xterm_parser import XTermParser
from textual.drivers.linux_driver import LinuxDriver

from tvis.tui import command
from tvis.tui.prompt_escape import IDLE_WAIT_S, PromptEscapeDriver, parser_wait_s

TEXTUAL_INPUT_LOOP_SHA256 = "d796af6d69db337d6fa6bd463984f7d17188d991dbb22f60efb92a8a9619507c"
"""``LinuxDriver.run_input_thread`` of textual 8.2.8, which ``PromptEscapeDriver`` replaces."""


def test_textual_input_loop_is_the_one_prompt_escape_replaces():
    source = inspect.getsource(LinuxDriver.run_input_thread)
    assert hashlib.sha256(source.encode()).hexdigest() == TEXTUAL_INPUT_LOOP_SHA256, (
        "Textual's input loop changed: bring PromptEscapeDriver.run_input_thread up to date"
    )
    assert issubclass(PromptEscapeDriver, LinuxDriver)


def test_a_lone_escape_wakes_the_input_thread_when_its_wait_ends(monkeypatch):
    monkeypatch.setattr(constants, "ESCAPE_DELAY", command.ESCAPE_DELAY_MS / 1000)
    parser = XTermParser()
    assert parser_wait_s(parser) == IDLE_WAIT_S  # nothing pending: Textual's own wait
    assert list(parser.feed("\x1b")) == []  # maybe the start of an arrow's sequence
    wait = parser_wait_s(parser)
    assert 0 < wait <= constants.ESCAPE_DELAY + 0.001  # not Textual's 100 ms tick
    time.sleep(wait)
    keys = [e.key for e in parser.tick() if isinstance(e, events.Key)]
    assert keys == ["escape"]  # due when the thread wakes
    assert parser_wait_s(parser) == IDLE_WAIT_S


def test_sequences_that_start_with_escape_still_parse_as_their_keys(monkeypatch):
    monkeypatch.setattr(constants, "ESCAPE_DELAY", command.ESCAPE_DELAY_MS / 1000)
    parser = XTermParser()
    keys = [e.key for e in parser.feed("\x1b[B\x1b[1;2C\x1b[6~") if isinstance(e, events.Key)]
    assert keys == ["down", "shift+right", "pagedown"]
