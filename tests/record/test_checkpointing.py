"""The model run again, not as training's forward: activation checkpointing's recomputation
during backward, and torch.func transforms (per-sample gradients). Neither is recorded; each
module of the training forward is recorded once, as it first ran, with its gradient."""

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


def per_sample_norms(steps: int) -> list[float]:
    """A training loop that also takes per-sample gradient norms with vmap(grad(...))."""
    from torch.func import functional_call, grad, vmap

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def sample_loss(params, x, y):
        out = functional_call(model, params, (x.unsqueeze(0),))
        return nn.functional.cross_entropy(out, y.unsqueeze(0))

    norms = []
    for _ in range(steps):
        x, y = torch.randn(5, 6), torch.randint(0, 3, (5,))
        loss = nn.functional.cross_entropy(model(x), y)
        params = {k: v.detach() for k, v in model.named_parameters()}
        per_sample = vmap(grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
        norms.append(float(sum(g.square().sum() for g in per_sample.values())))
        opt.zero_grad()
        loss.backward()
        opt.step()
    return norms


def test_torch_func_transforms_are_not_recorded(tmp_path):
    plain = per_sample_norms(2)
    recorded: list[float] = []
    outcome = record_here(lambda: recorded.extend(per_sample_norms(2)), tmp_path, steps=5)
    assert recorded == plain
    texts = " ".join(outcome.notices)
    assert "failed" not in texts and "torch.func transforms" in texts
    batch = RunReader(outcome.run_dir).batch(0).record
    names = Counter(c["name"] for c in batch["calls"] if c["kind"] == "module")
    assert names["0"] == names["2"] == 1  # the training forward only
    loss = batch["loss"]
    assert loss["fn"] == "cross_entropy" and batch["tensors"][loss["per_element"]]["shape"] == [5]
