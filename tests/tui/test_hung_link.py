"""A link that hangs (the agent stopped, not closed, as a suspended ssh is): the status line
says the viewer waits within about a second, and the link is declared dead, and the app
offline, within the client's silence limit, not after a minute with no sign."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from pathlib import Path

from viewer_support import make_app, open_explore, screen_text, wait_for

from tvis.agent import client as client_module
from tvis.agent.protocol import PROTOCOL_VERSION, AgentError


async def test_a_stopped_agent_shows_waiting_then_goes_offline_within_the_limit(run_dir: Path):
    app = make_app(run_dir)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        client = app.data.client
        os.kill(client.pid, signal.SIGSTOP)
        try:
            stopped = time.monotonic()
            asking = threading.Thread(target=_ask, args=(client,), daemon=True)
            asking.start()  # a request now waits on the stopped agent
            await pilot.press("full_stop", "right_square_bracket")
            await wait_for(pilot, lambda: "waiting for" in screen_text(app), "the cue", 5)
            cue = time.monotonic() - stopped
            await wait_for(pilot, lambda: app.offline, "the app offline", 20)
            dead = time.monotonic() - stopped
        finally:
            with contextlib.suppress(ProcessLookupError):  # killed as dead, as it should be
                os.kill(client.pid, signal.SIGCONT)
        assert cue < 3, f"the waiting cue took {cue:.1f} s"
        assert dead <= client_module.LINK_SILENCE_S + 2, f"offline after {dead:.1f} s"
        assert "has said nothing for 10 s" in app.offline
        assert "waiting for" not in screen_text(app)


def _ask(client) -> None:
    try:
        client.call("hello", protocol=PROTOCOL_VERSION)
    except AgentError:
        pass  # the link is declared dead: what the test waits for
