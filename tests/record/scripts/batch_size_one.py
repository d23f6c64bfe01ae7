"""Batch size 1 (one sample per step), with a per-sample squeeze as such code often has."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Sequences(Dataset):
    """Short random sequences labelled by whether their sum is positive."""

    def __init__(self, n=64, length=12, seed=0):
        g = torch.Generator().manual_seed(seed)
        self.x = torch.randn(n, length, 3, generator=g)
        self.y = (self.x.sum(dim=(1, 2)) > 0).long()

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(3, 16)
        self.norm = nn.LayerNorm(16)
        self.head = nn.Linear(16, 2)

    def forward(self, x):
        h = self.norm(F.relu(self.proj(x)))  # (1, T, 16)
        return self.head(h.mean(dim=1))  # (1, 2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    loader = DataLoader(Sequences(), batch_size=1, shuffle=True)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    log = open(args.log, "a") if args.log else None

    for step, (x, y) in enumerate(loader):
        if step >= args.steps:
            break
        logits = model(x)
        loss = F.cross_entropy(logits.squeeze(0), y.squeeze(0))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
