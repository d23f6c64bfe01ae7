"""`--from-step` and `--watch` under `torchrun` (gloo, 2 ranks): every rank records the
same steps, bit-identical to plain, and the ranks agree on the step the watch stops at."""

from __future__ import annotations

import json

from ranks_support import torchrun

from tvis.store import watch as series_store
from tvis.store.reader import RunReader, find_runs


def _journal(folder, rank: int) -> list[dict]:
    return [json.loads(line) for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()]


def test_from_step_records_the_same_late_steps_on_every_rank(tmp_path):
    plain = torchrun("plain", [], ["--steps", "8", "--journal", str(tmp_path / "plain")], tmp_path)
    assert plain.returncode == 0, plain.stderr
    args = ["--from-step", "4", "--steps", "2", "--ranks", "all", "--out", "runs"]
    late = torchrun("module", args, ["--steps", "8", "--journal", str(tmp_path / "late")], tmp_path)
    assert late.returncode == 0, late.stderr
    runs = [RunReader(p) for p in find_runs(tmp_path / "runs")]
    assert len(runs) == 2
    for rank, run in enumerate(runs):
        recorded = _journal(tmp_path / "late", rank)
        assert len(recorded) == 6  # both ranks stopped after step 5
        assert recorded == _journal(tmp_path / "plain", rank)[:6]
        steps = run.index()["steps"]
        assert [s["index"] for s in steps] == [4, 5]
        assert [s["loss"] for s in steps] == [line["loss"] for line in recorded[4:]]


def test_watch_stops_every_rank_at_the_step_one_rank_went_nan(tmp_path):
    script = ["--steps", "30", "--nan-at", "9", "--journal", str(tmp_path / "j")]
    result = torchrun("module", ["--watch", "--out", "runs"], script, tmp_path)
    assert result.returncode == 0, result.stderr
    assert "tvis: anomaly at step 9:" in result.stderr
    runs = [RunReader(p) for p in find_runs(tmp_path / "runs")]
    assert len(runs) == 2
    for run in runs:
        assert run.meta["watch"]["anomaly"]["step"] == 9
        assert series_store.read(run.path)["steps"] == 10
        assert [s["index"] for s in run.index()["steps"]] == [7, 8, 9]
    losses = [s["loss"] for s in runs[1].index()["steps"]]
    assert losses[-1] != losses[-1]  # rank 1's own loss is the NaN
