"""A small training setup defined in the test tree, so tvis treats it as project code."""

from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset


class Blobs(Dataset):
    """Deterministic 3×12×12 images in three classes."""

    classes = ["dark", "mid", "bright"]

    def __init__(self, n: int = 96) -> None:
        g = torch.Generator().manual_seed(1)
        self.labels = torch.randint(0, 3, (n,), generator=g)
        self.images = torch.randn(n, 3, 12, 12, generator=g) + self.labels.view(-1, 1, 1, 1)

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        return self.images[i], self.labels[i]


def pool_and_flatten(x: torch.Tensor) -> torch.Tensor:
    x = F.max_pool2d(x, 2)
    return torch.flatten(x, 1)


class SmallNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.drop = nn.Dropout(0.3)
        self.head = nn.Linear(6 * 6 * 6, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv(x)))
        x = self.drop(pool_and_flatten(x))
        return self.head(x)


def setup(seed: int = 0, workers: int = 0):
    torch.manual_seed(seed)
    model = SmallNet()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    loader = DataLoader(Blobs(), batch_size=16, shuffle=True, num_workers=workers)
    return model, opt, loader


def train(model, opt, loader, steps: int, log: list) -> None:
    """Train for ``steps`` optimizer steps, appending (loss, labels) before each step."""
    done = 0
    while done < steps:
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            log.append((loss.detach().clone(), y.clone()))
            opt.step()
            done += 1
            if done == steps:
                return
