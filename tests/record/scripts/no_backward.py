"""Forwards only, never backward: evaluating a (randomly initialised) model over a dataset."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5, help="batches to evaluate")
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(160, 8)
    y = (x[:, 0] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=32)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    model.eval()
    log = open(args.log, "a") if args.log else None

    for batch, (inputs, labels) in enumerate(loader):
        if batch >= args.steps:
            break
        logits = model(inputs)  # grad mode is on, but nothing ever calls backward
        loss = F.cross_entropy(logits, labels)
        if log:
            log.write(json.dumps({"batch": batch, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
