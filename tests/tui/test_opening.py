"""`tvis tui` asks its agent for the handshake, the runs and the run it opens as soon as the
agent's pipe is open (``Dialer.start``, tui/opening.py): answered while the viewer imports
Textual, the app opens the run on them without a round trip of its own."""

from __future__ import annotations

from pathlib import Path

from viewer_support import spy_requests, wait_for

from tvis.agent.target import Target
from tvis.tui.app import TvisApp
from tvis.tui.command import Dialer


class SpiedDialer(Dialer):
    """A ``Dialer`` whose clients report every request the app sends through them."""

    def __init__(self, target: Target, **kwargs) -> None:
        super().__init__(target, **kwargs)
        self.asked: list[dict] = []

    def __call__(self):
        client = super().__call__()
        spy_requests(client, self.asked)
        return client


async def test_the_run_opens_on_the_answers_asked_before_the_app_existed(run_dir: Path):
    dialer = SpiedDialer(Target(path=str(run_dir)))
    dialer.start()
    assert dialer._opening is not None
    first = dialer._opening.answers()  # answered with no app, no Textual loop running
    assert first is not None and first.run and first.info["run"] == first.run
    assert [r["run"] for r in first.runs] == [first.run]
    app = TvisApp(dialer, "local", "halfcell")
    async with app.run_test(size=(120, 40)) as pilot:
        # All in before the app started: connected as it mounted, with no thread between.
        assert app.data is not None and app.run_name == first.run
        assert not [w for w in app.workers if w.group == "connect"]
        await wait_for(pilot, lambda: app.current_mode == "replay", "the first page")
        assert app.run_name == first.run and app.run_info is first.info
        opening = [a for a in dialer.asked if a["method"] in ("hello", "runs", "run")]
        assert opening == []  # none asked again by the app


async def test_the_run_asked_for_by_id_is_the_one_asked_ahead(run_dir: Path):
    dialer = Dialer(Target(path=str(run_dir)), wanted_run=run_dir.name)
    dialer.start()
    assert dialer._opening is not None
    first = dialer._opening.answers()
    assert first is not None and first.info is not None
    assert first.info["run_id"] == run_dir.name
    dialer().close()
