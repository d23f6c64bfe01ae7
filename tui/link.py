"""The viewer's link to its agent, from the first dial to a dropped connection and back.

``Link`` dials through the connector in a worker thread and hands the app the runs it found
(``TvisApp.connected``). While a request waits with no word from the agent, the status line
says so (``link_wait``). When the connection drops the app goes offline: one line says so,
the page is greyed and takes no input (so nothing on it half-updates), and ``R`` reconnects
through the same connector (same ControlMaster and jump hosts); the app then reloads the run
on the same batch, sample and selection (``TvisApp.reconnected``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from textual.screen import Screen
from textual.widget import Widget

from tvis.agent.protocol import AgentError
from tvis.tui import keys
from tvis.tui.data import Client, Data
from tvis.tui.widgets.page_tabs import PageTabs
from tvis.tui.widgets.status_line import StatusLine

if TYPE_CHECKING:
    from tvis.tui.app import TvisApp
    from tvis.tui.opening import FirstAnswers

WAITING_CUE_S = 1.0
"""Seconds of silence on a pending request before the status line says it waits: a healthy
agent beats twice a second (protocol.HEARTBEAT_S), so only a stalled link shows it."""
LINK_CHECK_S = 0.5

OFFLINE_BLOCKED = frozenset({"toggle_grad", "sample", "batch", "pick_run", "rank"})
"""App actions that change what pages show, refused while the connection is down."""

# A fresh connection, the runs under its root and the open run's index (None: no run open).
Dialled = tuple[Data, list[dict[str, Any]], dict | None]


def sentence(error: BaseException) -> str:
    """What went wrong, as the one sentence the agent or client gave."""
    if isinstance(error, AgentError):
        return error.message
    return str(error) or type(error).__name__


def grey(screen: Screen, offline: bool) -> None:
    """Disabled widgets draw dimmed and take no keys: the page stays as it was."""
    for child in screen.children:
        if not isinstance(child, (PageTabs, StatusLine)):
            child.disabled = offline


class Link:
    """The connection of ``app`` to its agent through ``connector`` (None: no agent, the
    Live page only). ``data`` is the open connection; ``offline`` says why it dropped,
    until reconnected."""

    def __init__(self, app: TvisApp, connector: Callable[[], Client] | None) -> None:
        self.app = app
        self.connector = connector
        self.data: Data | None = None
        self.offline: str | None = None
        self._refocus: Widget | None = None  # what had focus when the link dropped

    def start(self) -> None:
        """Watch for silence, and dial when there is an agent to dial."""
        self.app.set_interval(LINK_CHECK_S, self.check)
        connector = self.connector
        if connector is None:
            return
        if self._answered_ahead(connector):
            # Nothing left to wait for: connected here, not on a worker thread whose start
            # and hop back each wait for the app's busy thread (≈ 30 ms of a start).
            self._connect(connector, lambda deliver, *args: deliver(*args))
            return
        self.app.run_worker(
            lambda: self._connect(connector, self.app.call_from_thread),
            thread=True,
            exclusive=True,
            group="connect",
            exit_on_error=False,
        )

    def _answered_ahead(self, connector: Callable[[], Client]) -> bool:
        """Whether ``connector`` has greeted its agent and has the answers for the run this
        app opens already in (tui/opening.py), so that connecting waits for nothing."""
        answered = getattr(connector, "answered", None)
        return (
            callable(answered)
            and answered()
            and getattr(connector, "wanted_run", None) == self.app.wanted_run
        )

    def _connect(self, connector: Callable[[], Client], on_app: Callable[..., Any]) -> None:
        """Connect through ``connector`` and hand the app the runs and the run's index
        through ``on_app`` (``call_from_thread`` from a worker)."""
        try:
            data = Data(connector())
            # What the connector asked as soon as the agent's pipe was open (tui/opening.py),
            # or else asked now.
            early: FirstAnswers | None = getattr(connector, "first_answers", lambda: None)()
            runs = early.runs if early is not None else data.call("runs")
        except Exception as e:
            on_app(self.app.not_connected, sentence(e))
            return
        # The run it will open is asked for here, in the same breath: not one hop to the
        # UI thread (busy drawing "connecting …") and back first. A failure is left to the
        # app's own request, which says it.
        run, info = self.app.run_to_open(runs), None
        if early is not None and early.run == run:
            info = early.info
        elif run is not None:
            try:
                info = data.call("run", run=run)
            except Exception:
                info = None
        on_app(self._connected, data, runs, info)

    def _connected(self, data: Data, runs: list[dict[str, Any]], info: dict | None) -> None:
        self.data = data
        self._watch(data)
        self.app.connected(runs, info)

    def _watch(self, data: Data) -> None:
        """Go offline as soon as the client sees the connection drop, not at the next request."""

        def lost(message: str) -> None:
            try:
                self.app.call_from_thread(self.lost, message)
            except RuntimeError:
                pass  # the app has closed

        data.client.on_lost = lost

    def check(self) -> None:
        """Say so while a request has waited ``WAITING_CUE_S`` with no word from the agent;
        the client declares the link dead itself (client.LINK_SILENCE_S) and we go offline."""
        silent = 0.0
        if self.data is not None and self.offline is None:
            silent = self.data.client.silence()
        label = self.app.target_label
        self.app.link_wait = (
            f"waiting for {label} · {silent:.0f} s" if silent >= WAITING_CUE_S else ""
        )

    def refuses(self, action: str) -> bool:
        """Offline, nothing that changes what the pages show may run: they would half-update."""
        return self.offline is not None and action in OFFLINE_BLOCKED

    # -- a dropped link --------------------------------------------------------------------

    def lost(self, message: str) -> None:
        """Go offline: say so once, grey the page and stop anything from changing it."""
        app = self.app
        if self.offline is not None or self.data is None:
            return
        self.offline = message
        app.link_wait = ""  # offline says it now
        app.stop_polling()
        app.status_note = f"offline · {keys.shown(app, 'app.reconnect')} reconnects"
        app.notify(message, severity="error", timeout=30)
        self._refocus = app.screen.focused
        grey(app.screen, True)

    def reconnect(self) -> None:
        app = self.app
        if self.offline is None:
            app.notify(f"connected to {app.target_label}; nothing to reconnect", timeout=3)
            return
        app.status_note = f"reconnecting to {app.target_label} …"
        if getattr(self.connector, "may_prompt", False) and not app.is_headless:
            # ssh may ask for a password or a second factor: it gets the terminal meanwhile.
            with app.suspend():
                sys.stderr.write(f"tvis: reconnecting to {app.target_label} …\n")
                outcome = self._dial()
            self._dialled(outcome)
        else:
            app.run_worker(
                self._redial, thread=True, exclusive=True, group="connect", exit_on_error=False
            )

    def _redial(self) -> None:
        outcome = self._dial()
        self.app.call_from_thread(self._dialled, outcome)

    def _dial(self) -> Dialled | str:
        """A fresh connection and what the open run looks like now, or why it failed."""
        run, connector = self.app.run_name, self.connector
        if connector is None:
            return "there is no agent to connect to."
        try:
            data = Data(connector())
            runs = data.call("runs")
            info = data.call("run", run=run) if run else None
        except Exception as e:
            return sentence(e)
        return data, runs, info

    def _dialled(self, outcome: Dialled | str) -> None:
        if isinstance(outcome, str):
            self.app.status_note = f"offline · {keys.shown(self.app, 'app.reconnect')} reconnects"
            self.app.notify(f"could not reconnect: {outcome}", severity="error", timeout=10)
        else:
            self._reconnected(*outcome)

    def _reconnected(self, data: Data, runs: list[dict[str, Any]], info: dict | None) -> None:
        """Back online, on the page and the focus the drop left."""
        app = self.app
        old, self.data = self.data, data
        self._watch(data)
        self.offline = None
        app.status_note = ""
        if old is not None:
            old.close()
        for screen in app.page_screens.values():
            if screen is not None:
                grey(screen, False)
        if self._refocus is not None and self._refocus.is_attached:
            self._refocus.focus()
        self._refocus = None
        app.reconnected(runs, info)
        app.clear_notifications()  # the drop's message is no longer true
        app.notify(f"reconnected to {app.target_label}", timeout=3)

    def close(self) -> None:
        if self.data is not None:
            self.data.close()
