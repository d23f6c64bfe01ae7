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


class _Wide(torch.nn.Module):
    """Activations of 2 MB and more per kept sample, as a realistic model's are."""

    def __init__(self) -> None:
        super().__init__()
        self.up = torch.nn.Linear(256, 1024)
        self.down = torch.nn.Linear(1024, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down(torch.relu(self.up(x)))


def _train_wide(log: list) -> None:
    torch.manual_seed(0)
    model = _Wide()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):
        x = torch.randn(4, 512, 256)  # 3 kept samples of the wide layer: 6 MB
        loss = model(x).pow(2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log.append((loss.detach().clone(), [p.detach().clone() for p in model.parameters()]))


def test_large_kept_values_live_outside_the_heap_and_training_stays_bit_identical(
    tmp_path, monkeypatch
):
    """Kept values of large activations are copies in mappings of their own (freed, they go
    back to the OS rather than pinning the script's heap), and rounding them in place on
    the writer thread never reaches a tensor of the script's."""
    from tvis.record.writer_thread import BackgroundWriter
    from tvis.store import host_memory

    large: list[bool] = []
    put_batch = BackgroundWriter.put_batch

    def spy_batch(self, index, record, arrays, pending):
        large.extend(
            host_memory.mapping(a) is not None
            for a in arrays.values()
            if a.nbytes >= host_memory.MMAP_BYTES
        )
        return put_batch(self, index, record, arrays, pending)

    monkeypatch.setattr(BackgroundWriter, "put_batch", spy_batch)
    plain: list = []
    _train_wide(plain)
    recorded: list = []
    outcome = record_here(lambda: _train_wide(recorded), tmp_path, steps=3)
    assert outcome.steps == 3
    assert len(large) >= 6 and all(large)
    assert len(recorded) >= 2  # the third step ends the recording before it is logged
    for (a, pa), (b, pb) in zip(plain, recorded, strict=False):
        assert torch.equal(a, b)
        assert all(torch.equal(p, q) for p, q in zip(pa, pb, strict=True))


class _Unsaved(torch.nn.Module):
    """Linear then ReLU: autograd saves the ReLU's output, never the Linear's (the ReLU's
    input), so untraced that activation dies as soon as the ReLU has run."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(8, 256)
        self.head = torch.nn.Linear(256, 1)
        self.seen: list = []
        self.fc.register_forward_hook(lambda m, a, out: self.seen.append(weakref.ref(out)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.fc(x)))


def test_activations_autograd_does_not_keep_die_during_the_backward(tmp_path):
    """The batch holds what it captured weakly once its backward begins: an activation
    autograd released is freed then, as untraced, not when the batch closes (held to the
    end, ResNet-18's activations all outlived its backward)."""
    torch.manual_seed(0)
    model = _Unsaved()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    alive_in_backward: list[bool] = []
    model.head.register_full_backward_hook(
        lambda m, gi, go: alive_in_backward.append(model.seen[-1]() is not None)
    )

    def train() -> None:
        for _ in range(2):
            loss = model(torch.randn(4, 8)).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    plain: list[bool] = []
    train()
    plain, alive_in_backward[:] = list(alive_in_backward), []
    outcome = record_here(train, tmp_path, steps=2)
    assert outcome.steps == 2
    assert plain == [False, False]
    assert alive_in_backward == [False, False]


def test_private_statistics_copies_lie_outside_the_malloc_heap():
    """The writer thread frees them whenever it reaches them: in the script's heap, the
    holes would fall among the next step's activations at a different place each run."""
    from tvis.record import tensors
    from tvis.store import host_memory

    assert torch.randn(512, 1024).clone().data_ptr() % host_memory._HUGE != 0
    big = torch.randn(512, 1024)  # 2 MB
    copy = tensors.private_copy(big)
    assert torch.equal(copy, big) and copy.data_ptr() != big.data_ptr()
    # A mapping of host_memory.empty's own starts on a huge page; malloc's never does.
    assert copy.data_ptr() % host_memory._HUGE == 0
    small = torch.randn(16, 16)
    assert torch.equal(tensors.private_copy(small), small)
    half = torch.randn(512, 1024).to(torch.bfloat16)  # numpy has no bfloat16: a clone
    assert torch.equal(tensors.private_copy(half), half)
