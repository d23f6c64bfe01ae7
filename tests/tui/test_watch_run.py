"""A `tvis run --watch` run in the viewer: the Loss page shows the whole watch series with
the recorded steps and the anomaly, and Replay opens on the NaN's origin."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import goto_page, make_app, screen_text, wait_for
from support import record_script, run_tvis

from tvis.tui.anomaly_start import opening_event
from tvis.tui.widgets.watch_curve import WatchCurve

NAN_AT_41 = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(100):
    i = torch.randint(0, 64, (16,))
    batch = x[i].clone()
    if step == 41:
        batch[3, 2] = float("nan")
    loss = torch.nn.functional.mse_loss(model(batch), y[i])
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
        text = screen_text(app)
        assert "watched 42 steps · stopped at step 41: loss became nan at step 41" in text
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
        assert target["phase"] == "forward"
        assert app.batch == target["batch"] == app.run_info["batches"][-1]["index"]
        page = app.screen
        await wait_for(pilot, lambda: page.recording, "the replay events")
        event = page.current_event()
        assert event["batch"] == target["batch"] and event["phase"] == "forward"
        assert app.batch_info["step"] == 41


def test_ls_shows_watch_runs_with_steps_and_anomaly(watched):
    result = run_tvis("ls", str(watched.parent))
    assert result.returncode == 0, result.stderr
    assert "watch: 42 steps, anomaly at step 41: loss became nan at step 41" in result.stdout
