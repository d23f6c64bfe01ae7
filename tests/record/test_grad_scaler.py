"""Mixed precision's GradScaler: backward runs on ``loss × scale``; the recording holds the
loss and the activations' gradients in the units the optimizer sees."""

from __future__ import annotations

import pytest
import torch
from helpers import record_here
from torch import nn

from tvis.store.reader import RunReader


def train(scaled: bool, steps: int) -> list[float]:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    scaler = torch.amp.GradScaler("cpu", enabled=scaled)
    losses = []
    for _ in range(steps):
        x, y = torch.randn(8, 6), torch.randint(0, 3, (8,))
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        losses.append(loss.item())
    return losses


def _recorded(tmp_path, scaled: bool) -> tuple[list[float], RunReader]:
    losses: list[float] = []
    outcome = record_here(lambda: losses.extend(train(scaled, 2)), tmp_path / str(scaled), steps=5)
    return losses, RunReader(outcome.run_dir)


def _grad_norms(run: RunReader) -> dict[str, float]:
    record = run.batch(0).record
    entries = record["tensors"]
    norms = {}
    for call in record["calls"]:
        if call["kind"] == "module" and call["outputs"]:
            grad = entries[call["outputs"][0]["tensor"]]["grad"]
            norms[call["name"]] = entries[grad]["stats"]["norm"]
    return norms


def test_a_scaled_backward_is_recorded_in_the_optimizers_units(tmp_path):
    plain_losses, plain = _recorded(tmp_path, scaled=False)
    scaled_losses, scaled = _recorded(tmp_path, scaled=True)
    assert scaled_losses == plain_losses == train(False, 2)  # training is untouched
    batches = scaled.index()["batches"]
    assert [b["grad_scale"] for b in batches] == [65536.0, 65536.0]
    assert [b["loss"] for b in batches] == pytest.approx(scaled_losses)  # not × 65536
    assert "grad_scale" not in plain.index()["batches"][0]
    # Dividing by a power of two is exact: the gradients are those of the unscaled run.
    assert _grad_norms(scaled) == pytest.approx(_grad_norms(plain), rel=1e-6)
    assert _grad_norms(scaled)
