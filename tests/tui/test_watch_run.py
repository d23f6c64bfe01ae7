"""A `tvis run --watch` run in the viewer: the Loss page shows the whole watch series with
the recorded steps and the anomaly, and Replay opens on the NaN's origin."""

from __future__ import annotations

from pathlib import Path

import pytest
from support import record_script, run_tvis
from viewer_support import goto_page, make_app, showing, wait_for

from tvis.tui.anomaly_start import opening_event
from tvis.tui.widgets.watch_curve import WatchCurve

NAN_AT_41 = """
import torch
from torch import nn


def unit_rows(batch):
    return batch / batch.norm(dim=1, keepdim=True)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 1))

    def forward(self, x):
        return self.body(unit_rows(x))


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(100):
    i = torch.randint(0, 64, (16,))
    batch = x[i].clone()
    if step == 41:
        batch[3] = 0.0  # an empty row: 0 / 0
    loss = nn.functional.mse_loss(model(batch), y[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.fixture(scope="module")
def watched(tmp_path_factory) -> Path:
    return record_script(tmp_path_factory.mktemp("watched"), NAN_AT_41, "--watch")


async def test_loss_page_shows_the_watch_series_with_recorded_steps_and_anomaly(watched):
    app = make_app(watched)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        curve = app.screen.query_one(WatchCurve)
        await wait_for(pilot, lambda: curve.series, "the watch series")
        said = "watched 42 steps · stopped at step 41: loss became nan at step 41"
        # the series is drawn in the frame after it came
        text = await wait_for(pilot, lambda: showing(app, said), "the watch line")
        assert "grad norm" in text and "█ recorded in full" in text
        marks = next(line for line in text.splitlines() if "✖" in line)
        assert marks.rstrip().endswith("✖")  # the last step watched is the anomaly
        assert "█" in marks
        assert app.internal_errors == []


async def test_replay_opens_on_the_call_where_the_nan_appeared(watched):
    app = make_app(watched)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "replay")
        target = opening_event(app.run_info)
        assert target.phase == "forward"
        assert app.batch == target.batch == app.run_info["batches"][-1]["index"]
        page = app.screen
        await wait_for(pilot, lambda: page.recording, "the replay events")
        event = page.current_event()
        assert event.batch == target.batch and event.phase == "forward"
        assert app.batch_info["step"] == 41
        assert target.call is not None  # the div in unit_rows
        # At layer detail the function is not an event: the first layer after it is.
        forward = [
            page.recording.event(s)
            for r in page.recording.outline
            if r["batch"] == target.batch and r["phase"] == "forward"
            for s in range(r["start"], r["start"] + r["count"])
        ]
        after = [e.call for e in forward if e and (e.call or -1) >= target.call]
        assert event.call == after[0]


async def test_explore_opens_on_the_call_where_the_nan_appeared(watched):
    app = make_app(watched)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "explore")
        target = opening_event(app.run_info)
        page = app.screen
        tree = page.calls.call_tree
        await wait_for(
            pilot,
            lambda: (
                tree.cursor_node and getattr(tree.cursor_node.data.call, "id", None) == target.call
            ),
            "the cursor on the NaN's call",
        )
        assert getattr(tree.cursor_node.data.call, "name", None) == "unit_rows"


def test_ls_shows_watch_runs_with_steps_and_anomaly(watched):
    result = run_tvis("ls", str(watched.parent))
    assert result.returncode == 0, result.stderr
    assert "watch: 42 steps, anomaly at step 41: loss became nan at step 41" in result.stdout


async def test_watched_run_without_anomaly_shows_its_series(tmp_path):
    quiet = NAN_AT_41.replace("if step == 41:", "if step == -1:").replace("range(100)", "range(30)")
    run = record_script(tmp_path, quiet, "--watch")
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await goto_page(pilot, "loss")
        curve = app.screen.query_one(WatchCurve)
        await wait_for(pilot, lambda: curve.series, "the watch series")
        said = "watched 30 steps · no anomaly"
        text = await wait_for(pilot, lambda: showing(app, said), "the watch line")
        assert "✖" not in text.split("step 0 … 29")[0]
        assert app.internal_errors == []
