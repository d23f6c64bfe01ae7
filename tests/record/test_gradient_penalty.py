"""A gradient penalty (WGAN-GP): the script's own ``torch.autograd.grad(create_graph=True)``
fires the activations' gradient hooks before the loss's backward does. What tvis records as
dL/d(activation) is the backward's, not the penalty's inner gradient."""

from __future__ import annotations

import pytest
import torch
from helpers import record_here
from torch import nn

from tvis.store.reader import RunReader


def critic_loss(critic: nn.Module, seen: list | None = None) -> torch.Tensor:
    """One critic loss with a gradient penalty; ``seen`` collects the tanh output's
    gradient from the loss's backward only (what tvis should record)."""
    torch.manual_seed(0)
    real, fake = torch.randn(16, 2) + 2, torch.randn(16, 2)
    mixed = (0.3 * real + 0.7 * fake).requires_grad_(True)
    outer = [False]  # set once the penalty's own autograd.grad is done
    if seen is not None:

        def keep(module, args, out):
            out.register_hook(lambda g: seen.append(g.norm().item()) if outer[0] else None)

        handle = critic[1].register_forward_hook(keep)
    score = critic(mixed)
    if seen is not None:
        handle.remove()  # the penalty's forward only
    grads = torch.autograd.grad(score.sum(), mixed, create_graph=True)[0]
    loss = critic(fake).mean() - critic(real).mean() + 10 * ((grads.norm(dim=1) - 1) ** 2).mean()
    outer[0] = True
    return loss


def make_critic() -> nn.Module:
    torch.manual_seed(1)
    return nn.Sequential(nn.Linear(2, 8), nn.Tanh(), nn.Linear(8, 1))


def test_the_loss_gradient_is_recorded_not_the_penaltys_inner_one(tmp_path):
    seen: list[float] = []
    critic_loss(make_critic(), seen).backward()
    expected = seen[0]  # dL/d(tanh output) of the penalty's forward, from the backward

    def train() -> None:
        critic = make_critic()
        opt = torch.optim.SGD(critic.parameters(), lr=0.1)
        for _ in range(2):
            loss = critic_loss(critic)
            opt.zero_grad()
            loss.backward()
            opt.step()

    run = RunReader(record_here(train, tmp_path, steps=2).run_dir)
    record = run.batch(0).record
    entries = record["tensors"]
    first = [c for c in record["calls"] if c["kind"] == "module" and c["depth"] == 0][0]
    score = entries[first["outputs"][0]["tensor"]]
    assert score["grad"] is None  # the loss does not use the penalty's score itself
    tanh = next(c for c in record["calls"] if c["parent"] == first["id"] and c["cls"] == "Tanh")
    grad = entries[entries[tanh["outputs"][0]["tensor"]]["grad"]]
    assert grad["stats"]["norm"] == pytest.approx(expected, rel=1e-5)
