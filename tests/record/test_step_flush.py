"""When a recorded step reaches the disk: step k and its batches are on disk once its
``optimizer.step()`` returns, however slow the disk; whenever the recording ends in
Python, every finished step is."""

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
    batches."""
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


def _train(steps: int, after_step=None, in_function: bool = False) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        x = torch.randn(8, 16)
        if in_function:
            _train_step(model, opt, x)
        else:
            loss = model(x).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        if after_step is not None:
            after_step(step)


def _train_step(model: nn.Module, opt: torch.optim.Optimizer, x: torch.Tensor) -> float:
    """A project function around the step: its batch ends when it returns."""
    loss = model(x).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss.item()


def _slow_disk(monkeypatch) -> None:
    """Every batch and step takes 0.1 s to write: the writer falls behind training."""
    for name in ("write_batch", "write_step"):
        write = getattr(RunWriter, name)

        def slow(self, *args, _write=write, **kwargs):
            time.sleep(0.1)
            return _write(self, *args, **kwargs)

        monkeypatch.setattr(RunWriter, name, slow)


@pytest.mark.parametrize("in_function", [False, True], ids=["loop", "train_step"])
def test_step_is_on_disk_with_its_batch_when_its_optimizer_step_returns(
    tmp_path, monkeypatch, in_function
):
    _slow_disk(monkeypatch)
    seen: dict[int, list[int]] = {}

    def look(step: int) -> None:
        seen[step] = _on_disk(tmp_path / "run", step + 1)

    outcome = record_here(lambda: _train(6, look, in_function), tmp_path, steps=5)
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
