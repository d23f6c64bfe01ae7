"""What the viewer fetches ahead of need goes in the background (``Data.prefetch_later``),
and a request for the same answer meanwhile is sent itself rather than made to wait."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tvis.agent.client import LocalClient
from tvis.tui.data import Data

WAIT_S = 10.0
ROOTS = {"run": ".", "batch": 0, "parent": -1, "offset": 0, "limit": 200}


class HeldBackground(LocalClient):
    """The in-process client, whose background calls wait for ``release``: an agent busy
    with requests someone waits for holds a prefetch back that way."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.release = threading.Event()
        self.background: list[str] = []

    def call_background(self, method: str, **params):
        self.background.append(method)
        self.release.wait(WAIT_S)
        return self.call(method, **params)


def test_a_call_for_what_a_background_prefetch_is_fetching_does_not_wait_for_it(run_dir: Path):
    client = HeldBackground(run_dir)
    data = Data(client)
    with ThreadPoolExecutor(1) as pool:
        prefetch = pool.submit(data.prefetch_later, "calls", **ROOTS)
        while not client.background:  # the prefetch is on its way, and held
            threading.Event().wait(0.01)
        answered = ThreadPoolExecutor(1).submit(data.call, "calls", **ROOTS)
        roots = answered.result(timeout=WAIT_S / 2)  # not after the prefetch's release
        assert roots.calls and not prefetch.done()
        client.release.set()
        assert prefetch.result(timeout=WAIT_S) == roots
    assert data.peek("calls", **ROOTS) == (True, roots)
    assert not data.busy


def test_a_second_prefetch_of_the_same_answer_joins_the_first(run_dir: Path):
    client = HeldBackground(run_dir)
    data = Data(client)
    with ThreadPoolExecutor(3) as pool:
        prefetches = [pool.submit(data.prefetch_later, "calls", **ROOTS) for _ in range(3)]
        threading.Event().wait(0.3)  # all three asked; the first one's request is held
        assert client.background == ["calls"]
        client.release.set()
        answers = [p.result(timeout=WAIT_S) for p in prefetches]
    assert answers[0].calls and answers == [answers[0]] * 3
