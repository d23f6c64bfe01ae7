"""Training that dies at step 2: a batch-validation helper raises ValueError on a bad label."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

NUM_CLASSES = 3


def validate_batch(x, y):
    if not torch.isfinite(x).all():
        raise ValueError("non-finite input in batch")
    if y.min() < 0 or y.max() >= NUM_CLASSES:
        raise ValueError(f"label out of range [0, {NUM_CLASSES}): {y.tolist()}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(80, 4)
    y = x[:, :NUM_CLASSES].argmax(dim=1)
    y[2 * 16 + 5] = -1  # a corrupt label in the third batch (step 2)
    loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=False)
    model = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, NUM_CLASSES))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None

    for step, (inputs, labels) in enumerate(loader):
        if step >= args.steps:
            break
        validate_batch(inputs, labels)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
