"""DataLoaders with workers that draw random numbers, for the bit-identity tests.

Each pipeline augments with torch, numpy and ``random`` inside the worker, so a batch
fetched with the wrong worker's streams (or the main process's) differs at once.
"""

from __future__ import annotations

import math
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

FEATURES = 8


def augment(x: torch.Tensor) -> torch.Tensor:
    """Noise from all three random sources a dataset commonly uses."""
    x = x + 0.1 * torch.randn_like(x)
    x = x * float(np.random.uniform(0.9, 1.1))
    return x + random.random() * 0.01


class Points(Dataset):
    """Map-style: item i is a fixed point plus augmentation; label i % 3."""

    def __init__(self, n: int = 48) -> None:
        g = torch.Generator().manual_seed(3)
        self.points = torch.randn(n, FEATURES, generator=g)
        self.tagged = False

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, i: int):
        x = augment(self.points[i])
        if self.tagged:  # set by worker_init_fn on the worker's own copy
            x = x + float(get_worker_info().id)
        return x, i % 3


class Stream(IterableDataset):
    """Iterable: items start..end, sharded across workers by get_worker_info()."""

    def __init__(self, start: int = 0, end: int = 40, shard: bool = True) -> None:
        self.start, self.end, self.shard = start, end, shard
        g = torch.Generator().manual_seed(4)
        self.points = torch.randn(end, FEATURES, generator=g)

    def __iter__(self):
        info = get_worker_info()
        start, end = self.start, self.end
        if info is not None and self.shard:
            per = math.ceil((end - start) / info.num_workers)
            start = start + info.id * per
            end = min(start + per, end)
        for i in range(start, end):
            yield augment(self.points[i]), i % 3


def tag_worker(worker_id: int) -> None:
    """A worker_init_fn that reseeds numpy from torch's worker seed and marks its copy."""
    np.random.seed(torch.initial_seed() % 2**32)
    get_worker_info().dataset.tagged = True


def shard_in_init(worker_id: int) -> None:
    """torch's documented sharding: narrow the worker's own copy of the dataset."""
    info = get_worker_info()
    dataset = info.dataset
    per = math.ceil((dataset.end - dataset.start) / info.num_workers)
    dataset.start = dataset.start + worker_id * per
    dataset.end = min(dataset.start + per, dataset.end)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden = nn.Linear(FEATURES, 16)
        self.drop = nn.Dropout(0.5)
        self.head = nn.Linear(16, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.drop(torch.relu(self.hidden(x))))


def make_loader(config: str) -> DataLoader:
    """The DataLoader of one configuration of the identity matrix."""
    common = {"batch_size": 4, "num_workers": 2}
    if config == "map_shuffle":
        return DataLoader(Points(), shuffle=True, **common)
    if config == "worker_init_fn":
        return DataLoader(Points(), shuffle=True, worker_init_fn=tag_worker, **common)
    if config == "persistent":
        return DataLoader(Points(24), shuffle=True, persistent_workers=True, **common)
    if config == "generator":
        generator = torch.Generator().manual_seed(11)
        return DataLoader(Points(), shuffle=True, generator=generator, **common)
    if config == "iterable_sharded":
        return DataLoader(Stream(0, 35), **common)
    if config == "iterable_init_sharded":
        return DataLoader(Stream(0, 35, shard=False), worker_init_fn=shard_in_init, **common)
    if config == "three_workers_prefetch":
        return DataLoader(Points(), shuffle=True, batch_size=4, num_workers=3, prefetch_factor=3)
    raise ValueError(config)


CONFIGS = [
    "map_shuffle",
    "worker_init_fn",
    "persistent",
    "generator",
    "iterable_sharded",
    "iterable_init_sharded",
    "three_workers_prefetch",
]


def train(config: str, steps: int, log: list) -> Net:
    """Train for ``steps`` steps over several epochs. Map-style epochs are left after 4
    batches (a persistent iterator then restarts mid-epoch); iterable ones run out."""
    epoch_batches = 100 if config.startswith("iterable") else 4
    torch.manual_seed(0)
    random.seed(0)
    np.random.seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = make_loader(config)
    done = 0
    while done < steps:
        for i, (x, y) in enumerate(loader):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            log.append((loss.detach().clone(), x.clone(), y.clone()))
            done += 1
            if done >= steps or i + 1 >= epoch_batches:
                break
    log.append(("rng", torch.rand(2), np.random.rand(2), random.random()))
    return model
