"""Activation checkpointing: the forwards torch recomputes during backward are not calls of
the script's, so each module is recorded once, as it first ran, with its gradient."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from helpers import record_here
from torch import nn
from torch.utils.checkpoint import checkpoint

from tvis.store.reader import RunReader


class Block(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.ff = nn.Sequential(nn.Linear(d, 2 * d), nn.GELU(), nn.Linear(2 * d, d))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.ff(self.norm(x))


class Checkpointed(nn.Module):
    def __init__(self, reentrant: bool) -> None:
        super().__init__()
        self.reentrant = reentrant
        self.blocks = nn.ModuleList(Block(8) for _ in range(3))
        self.head = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = checkpoint(block, x, use_reentrant=self.reentrant)
        return self.head(x)


def train(reentrant: bool, steps: int) -> list[float]:
    torch.manual_seed(0)
    model = Checkpointed(reentrant)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for _ in range(steps):
        x = torch.randn(6, 8, requires_grad=reentrant)  # reentrant needs an input with grad
        loss = nn.functional.cross_entropy(model(x), torch.randint(0, 4, (6,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("reentrant", [False, True])
def test_recomputed_forwards_are_not_recorded_again(tmp_path, reentrant):
    plain = train(reentrant, 2)
    recorded: list[float] = []
    outcome = record_here(lambda: recorded.extend(train(reentrant, 2)), tmp_path, steps=5)
    assert recorded == plain  # observing never changes training
    assert outcome.status == "complete"
    texts = " ".join(outcome.notices)
    assert "StopRecomputation" not in texts and "raised" not in texts
    assert "recomputes forwards during backward" in texts
    batch = RunReader(outcome.run_dir).batch(0).record
    calls = [c for c in batch["calls"] if c["kind"] == "module"]
    names = Counter(c["name"] for c in calls)
    assert names["blocks.0.ff.0"] == 1 and names["head"] == 1  # once: no recomputed copy
    assert all(c["phase"] == "forward" and "raised" not in c["flags"] for c in calls)
    # Every layer's gradient came: through the first forward's graph (non-reentrant), or
    # through the recomputed one (reentrant: the first forward ran without gradients).
    entries = batch["tensors"]
    assert all(entries[c["outputs"][0]["tensor"]]["grad"] is not None for c in calls)
