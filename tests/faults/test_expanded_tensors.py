"""Statistics of an expanded (stride-0) tensor come from its storage, each element
weighted by how often it repeats: the same numbers as the materialised tensor, in time
proportional to what is stored, so a huge broadcast costs what its storage costs."""

from __future__ import annotations

import math
from pathlib import Path

import torch
from torch import nn

from tvis.record import tensors
from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader

HERE = Path(__file__).resolve().parent

# Logical elements no machine could hold (4 TB of float32): only storage can be read.
HUGE = 1 << 20


def test_statistics_of_an_expanded_tensor_match_the_materialised_one():
    torch.manual_seed(0)
    base = torch.randn(3, 1, 5)
    base[0, 0, 0] = float("nan")
    base[1, 0, 1] = 0.0
    wide = base.expand(3, 400, 5)
    got, hist = tensors.stats(wide)
    want, want_hist = tensors.stats(wide.contiguous())
    assert got["numel"] == want["numel"] == 6000
    assert got["nan"] == want["nan"] == 400 and got["zeros"] == want["zeros"]
    for key in ("mean", "std", "min", "max", "absmean", "norm"):
        assert math.isclose(got[key], want[key], rel_tol=1e-5), key
    assert hist["counts"] == want_hist["counts"]


def test_statistics_of_a_huge_broadcast_read_only_its_storage():
    got, hist = tensors.stats(torch.full((1,), 2.0).expand(HUGE, HUGE))
    assert got["numel"] == HUGE * HUGE and got["mean"] == 2.0 and got["std"] == 0.0
    assert got["norm"] == 2.0 * HUGE and sum(hist["counts"]) == HUGE * HUGE


def add_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """A project function: tvis records its arguments, the huge mask among them."""
    return x + mask[: x.shape[0], : x.shape[1]]


class Broadcast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(1).expand(HUGE, HUGE)  # an attention-style mask, never materialised
        return add_mask(x * self.scale, mask)


def _train() -> None:
    model = Broadcast()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loss = model(torch.ones(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()


def test_recording_a_huge_broadcast_keeps_its_statistics(tmp_path):
    outcome = record(_train, Settings(steps=1), HERE, tmp_path / "run")
    assert outcome.status == "complete"
    assert not any("tvis failed" in n for n in outcome.notices), outcome.notices
    batch = RunReader(outcome.run_dir).batch(0).record
    masks = [e for e in batch["tensors"] if e["shape"] == [HUGE, HUGE]]
    assert masks and all(e["stats"]["numel"] == HUGE * HUGE for e in masks)
    assert all(e["stats"]["mean"] == 1.0 for e in masks)
