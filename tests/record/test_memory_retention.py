"""Recording holds no more of the script's memory than it needs: an evaluation loop's
activations die when its forward returns, as they do without tvis."""

from __future__ import annotations

import weakref

import torch
from helpers import record_here


class _Scratch(torch.nn.Module):
    """A forward with a large local that nothing else keeps (no autograd under no_grad)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 8)
        self.locals: list = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wide = x.repeat(1, 64)  # a local only: dead once forward returns
        self.locals.append(weakref.ref(wide))
        return self.fc(wide[:, :8])


def test_an_evaluation_forwards_locals_die_when_it_returns(tmp_path):
    torch.manual_seed(0)
    model = _Scratch()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    alive_after: list[int] = []

    def train() -> None:
        for _ in range(2):
            with torch.no_grad():  # an evaluation loop: one light group of forwards
                for _ in range(5):
                    model(torch.randn(4, 8))
                    alive_after.append(sum(ref() is not None for ref in model.locals))
                    model.locals.clear()
            loss = model(torch.randn(4, 8)).pow(2).mean()
            model.locals.clear()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    outcome = record_here(train, tmp_path, steps=2)
    assert outcome.steps == 2
    assert alive_after == [0] * 10


def test_statistics_copies_held_for_the_writer_stay_small(tmp_path, monkeypatch):
    """Large activations' statistics are computed on the writer thread from private
    copies; what a batch hands over is capped, so queued batches do not pile up memory."""
    from tvis.record import builder
    from tvis.record.writer_thread import BackgroundWriter

    handed: list[int] = []
    put_stats, put_batch = BackgroundWriter.put_stats, BackgroundWriter.put_batch

    def count(pending) -> None:
        handed.append(sum(t.nbytes for _, t in pending))

    def spy_stats(self, pending):
        count(pending)
        return put_stats(self, pending)

    def spy_batch(self, index, record, arrays, pending):
        count(pending)
        return put_batch(self, index, record, arrays, pending)

    monkeypatch.setattr(BackgroundWriter, "put_stats", spy_stats)
    monkeypatch.setattr(BackgroundWriter, "put_batch", spy_batch)
    torch.manual_seed(0)
    layers = torch.nn.Sequential(*[torch.nn.Linear(1024, 1024) for _ in range(12)])
    optimizer = torch.optim.SGD(layers.parameters(), lr=0.01)

    def train() -> None:
        for _ in range(2):
            loss = layers(torch.randn(1024, 1024)).pow(2).mean()  # 4 MB per activation
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    record_here(train, tmp_path, steps=2)
    assert max(handed) > 0
    assert max(handed) <= builder.DEFER_BYTES <= 16 * 2**20
