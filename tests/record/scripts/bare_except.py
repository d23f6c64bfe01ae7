"""A loop that swallows everything around each step (`except BaseException`), to survive the
occasional bad batch; batch 1 is such a batch."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


def load_batch(step):
    x = torch.randn(16, 5)
    y = (x.sum(dim=1) > 0).long()
    if step == 1:
        y[0] = 7  # a corrupt label: cross_entropy raises on it
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    log = open(args.log, "a") if args.log else None
    skipped = 0

    for step in range(args.steps):
        try:
            x, y = load_batch(step)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()
        except BaseException:  # deliberately broad, as real scripts do
            skipped += 1
            continue

    if log:
        log.write(json.dumps({"skipped": skipped}) + "\n")
        log.close()


if __name__ == "__main__":
    main()
