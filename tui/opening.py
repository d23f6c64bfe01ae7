"""What the viewer asks its agent first — the handshake, the runs under its root, the index of
the run it opens — asked from a thread as soon as the agent's pipe is open (``Opening``).

Each answer waits for the last (the run to open comes from the list of runs), so asked from
the app, once it is up, they were three round trips between "connecting …" and the first
page. Asked here, the handshake and the list go out together, the run's index follows its
list at once, and all three are answered while the viewer still imports Textual and the
agent still starts beside it. Nothing here imports Textual: ``tvis tui`` starts this before
its heavy imports.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from tvis.agent.client import greet_and_list

if TYPE_CHECKING:
    from tvis.agent.client import Client
    from tvis.agent.target import Target


def run_to_open(runs: list[dict[str, Any]], wanted: str | None) -> str | None:
    """The run the viewer opens on connecting: the one asked for (by name or id), or the
    only one."""
    if wanted:
        match = next((r for r in runs if wanted in (r.get("run"), r.get("run_id"))), None)
        return match["run"] if match else None
    return runs[0]["run"] if len(runs) == 1 else None


class FirstAnswers:
    """The runs under the root, the run the viewer opens (None: a picker) and its index
    (None: not asked, or refused — the app's own request then says why), as the agent sent
    them: ``Data`` neither caches nor decodes these methods."""

    def __init__(
        self, runs: list[dict[str, Any]], run: str | None, info: dict[str, Any] | None
    ) -> None:
        self.runs, self.run, self.info = runs, run, info


class Opening:
    """Greets ``client``'s agent and asks for its first answers on a thread of its own;
    ``client`` and ``answers`` wait for them (and raise what the handshake raised)."""

    def __init__(
        self, client: Client, target: Target, allow_empty: bool, wanted_run: str | None
    ) -> None:
        self._greeted = threading.Event()
        self._answered = threading.Event()
        self._client: Client | None = None
        self._error: Exception | None = None
        self._answers: FirstAnswers | None = None
        threading.Thread(
            target=self._ask,
            args=(client, target, allow_empty, wanted_run),
            name="tvis-opening",
            daemon=True,
        ).start()

    def _ask(
        self, client: Client, target: Target, allow_empty: bool, wanted_run: str | None
    ) -> None:
        try:
            client, runs = greet_and_list(client, target, allow_empty)
        except Exception as e:
            self._error = e
            self._greeted.set()
            self._answered.set()
            return
        self._client = client
        self._greeted.set()
        run, info = run_to_open(runs, wanted_run), None
        if run is not None:
            try:
                info = client.call("run", run=run)
            except Exception:
                info = None
        self._answers = FirstAnswers(runs, run, info)
        self._answered.set()

    def answered(self) -> bool:
        """Whether the answers are all in, the handshake having gone well (never waits)."""
        return self._answered.is_set() and self._client is not None

    def client(self) -> Client:
        """The client once its agent has shaken hands; raises why it could not."""
        self._greeted.wait()
        if self._client is None:
            assert self._error is not None
            raise self._error
        return self._client

    def answers(self) -> FirstAnswers | None:
        """The first answers (None when the handshake failed: ``client`` raised that)."""
        self._answered.wait()
        return self._answers
