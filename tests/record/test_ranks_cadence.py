"""Ranks that step at different cadences (rank 1 accumulates gradients over two batches)
stop after the same training batch under tvis, so no rank is left waiting in a collective
and the launch exits 0 as plain torchrun does."""

from __future__ import annotations

import json

from ranks_support import torchrun

from tvis.agent.ranks import _first_failure
from tvis.store.format import rank_folder
from tvis.store.reader import RunReader

# Rank 0 steps every batch, rank 1 every second: rank 1 has 3 steps after batch 6.
SCRIPT_ARGS = ["--accumulate-rank1", "2", "--batches", "8", "--steps", "99"]


def _journal(folder, rank: int) -> list[dict]:
    lines = (folder / f"rank{rank}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines]


def test_ranks_stepping_at_different_cadences_stop_together(tmp_path):
    plain = torchrun("plain", [], [*SCRIPT_ARGS, "--journal", "plain"], tmp_path)
    assert plain.returncode == 0, plain.stderr
    result = torchrun(
        "module", ["--steps", "3", "--out", "runs"], [*SCRIPT_ARGS, "--journal", "rec"], tmp_path
    )
    assert result.returncode == 0, result.stderr
    (group,) = [p for p in (tmp_path / "runs").iterdir() if p.is_dir()]
    runs = [RunReader(group / rank_folder(r)) for r in (0, 1)]
    assert [r.status for r in runs] == ["complete", "complete"]
    batches = [[b for b in r.index()["batches"] if not b["light"]] for r in runs]
    assert len(batches[0]) == len(batches[1]) == 6  # the first batch where rank 1 has 3 steps
    assert [len(r.index()["steps"]) for r in runs] == [6, 3]
    for rank, steps in ((0, 6), (1, 3)):  # bit-identical to plain, step for step
        recorded = _journal(tmp_path / "rec", rank)
        assert recorded == _journal(tmp_path / "plain", rank)[:steps]
    assert any("different cadences" in n["text"] for n in runs[0].index()["notices"])


def test_first_failure_is_never_a_rank_that_only_lost_its_peer():
    rows = [
        {"rank": 0, "status": "complete", "ended": 10.0},
        {"rank": 1, "status": "failed", "ended": 11.0, "peer_failure": True},
        {"rank": 2, "status": "complete", "ended": 12.0},
    ]
    assert _first_failure(rows) == 0  # it left first; rank 1 only lost it
    rows[0]["status"] = "failed"
    rows[0]["peer_failure"] = False
    assert _first_failure(rows) == 0
    assert _first_failure([{**rows[1], "ended": 1.0}, rows[2]]) == 2
    assert _first_failure([rows[2]]) is None


def test_ranks_page_says_a_complete_rank_left_first():
    from tvis.tui.pages.ranks import summary

    rows = [
        {"rank": 0, "status": "complete", "steps": 3},
        {"rank": 1, "status": "failed", "peer_failure": True, "error": "Connection closed by peer"},
    ]
    lines = [t.plain for t in summary({"ranks": rows, "first_failure": 0}).renderables]
    assert "✗ rank 0 left first (3 steps); the others lost their peer" in lines
