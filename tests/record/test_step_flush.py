"""When a recorded step reaches the disk: step k is on disk once its ``optimizer.step()``
returns, however slow the disk, and its batches once the next batch begins; whenever the
recording ends in Python, every finished step is."""

from __future__ import annotations

import time

import pytest
import torch
from helpers import record_here
from torch import nn

from tvis.store.reader import RunReader
from tvis.store.writer import RunWriter


def _on_disk(run_dir, finished: int) -> list[int]:
    """Steps the run index on disk lists; the first ``finished`` are read whole with their
    batches (a later step may be written before its batch closes)."""
    reader = RunReader(run_dir)
    index = reader.index()
    listed = {b["index"] for b in index["batches"]}
    for step in index["steps"][:finished]:
        chunk = reader.step(step["index"])
        for param in chunk.record["params"]:
            chunk.array(param["update"])
        assert step["batches"] and set(step["batches"]) <= listed
        for batch in step["batches"]:
            assert reader.batch(batch).record["calls"]
    return [s["index"] for s in index["steps"]]


def _train(steps: int, after_step=None) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(8, 16)
        loss = model(x).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        if after_step is not None:
            after_step(step)


def _slow_disk(monkeypatch) -> None:
    """Every batch and step takes 0.1 s to write: the writer falls behind training."""
    for name in ("write_batch", "write_step"):
        write = getattr(RunWriter, name)

        def slow(self, *args, _write=write):
            time.sleep(0.1)
            return _write(self, *args)

        monkeypatch.setattr(RunWriter, name, slow)


def test_step_is_on_disk_when_its_optimizer_step_returns(tmp_path, monkeypatch):
    _slow_disk(monkeypatch)
    seen: dict[int, list[int]] = {}

    def look(step: int) -> None:
        # Its batch is written when the batch closes, at the next forward.
        seen[step] = _on_disk(tmp_path / "run", step)

    outcome = record_here(lambda: _train(6, look), tmp_path, steps=5)
    assert outcome.status == "complete"
    assert sorted(seen) == [0, 1, 2, 3]  # the fifth step() ends the recording
    for step, steps in seen.items():
        assert set(range(step + 1)) <= set(steps), (step, steps)


class _Interrupted(Exception):
    pass


def _end(how: str):
    def after_step(step: int) -> None:
        if step < 2:
            return
        if how == "raises":
            raise _Interrupted("the script failed")
        if how == "exits":
            raise SystemExit(3)
        if how == "ctrl_c":
            raise KeyboardInterrupt

    return after_step


@pytest.mark.parametrize(
    ("how", "status"),
    [
        ("step_limit", "complete"),
        ("returns", "complete"),
        ("raises", "failed"),
        ("exits", "failed"),
        ("ctrl_c", "interrupted"),
    ],
)
def test_every_finished_step_is_on_disk_when_the_recording_ends(tmp_path, monkeypatch, how, status):
    _slow_disk(monkeypatch)
    stepped = {"step_limit": 3, "returns": 2}.get(how, 3)
    limit = 3 if how == "step_limit" else 10
    outcome = record_here(lambda: _train(stepped, _end(how)), tmp_path, steps=limit)
    assert outcome.status == status
    assert _on_disk(tmp_path / "run", stepped) == list(range(stepped))
