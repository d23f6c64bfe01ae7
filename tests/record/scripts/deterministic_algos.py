"""Reproducibility boilerplate: seeds everywhere and torch.use_deterministic_algorithms(True)."""

import argparse
import json
import os
import random

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn


def seed_everything(seed):
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.benchmark = False


class SmallConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.fc = nn.Linear(8 * 16, 3)

    def forward(self, x):
        return self.fc(self.pool(F.relu(self.conv(x))).flatten(1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    seed_everything(args.seed)
    model = SmallConvNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        labels = torch.from_numpy(np.random.randint(0, 3, size=16))
        images = torch.randn(16, 1, 12, 12) + labels.view(-1, 1, 1, 1).float()
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
