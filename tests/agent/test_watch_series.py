"""`watch_series`: a watched run's per-step series, decimated for the Loss page."""

from __future__ import annotations

import json
import math

import pytest

from tvis.agent.api import AgentAPI
from tvis.agent.protocol import AgentError
from tvis.store import watch as series_store


def _watched_run(tmp_path, steps: int = 3000, nan_at: int = 2295):
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"format": 2, "status": "complete"}))
    series = series_store.Series()
    for i in range(steps):
        series.loss.append(math.nan if i == nan_at else 2.0 / (1 + i))
        series.grad_norm.append(math.nan if i == nan_at else 1.0)
        series.lr.append(1e-3)
        series.ms.append(5.0)
    series.anomaly = {"step": nan_at, "kind": "loss_nonfinite", "text": "loss became nan"}
    series_store.write(run, series)
    return tmp_path


def test_series_is_decimated_to_the_width_with_the_nan_marked(tmp_path):
    api = AgentAPI(_watched_run(tmp_path))
    reply = api.watch_series(run="run", width=100)
    assert reply["steps"] == 3000 and len(reply["columns"]) == 100
    bad = [c for c in reply["columns"] if c["bad"]]
    assert len(bad) == 1 and bad[0]["first"] <= 2295 <= bad[0]["last"]
    assert reply["log"] == {"loss": True, "grad_norm": False, "lr": False}
    assert reply["anomaly"]["step"] == 2295 and reply["recorded"] is None
    assert all(math.isfinite(c["loss"]) for c in reply["columns"])  # the NaN is left out


def test_run_without_watch_has_no_series_and_bad_width_is_refused(tmp_path):
    root = _watched_run(tmp_path)
    (root / "run" / series_store.WATCH).unlink()
    api = AgentAPI(root)
    assert api.watch_series(run="run") is None
    with pytest.raises(AgentError, match="width must be 1 to 2048"):
        api.watch_series(run="run", width=0)
