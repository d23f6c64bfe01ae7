"""Gradient accumulation: --accum batches (loss / accum, backward each) per optimizer.step()."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3, help="optimizer steps")
    parser.add_argument("--accum", type=int, default=4)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    x = torch.randn(512, 10)
    y = (x[:, 0] - x[:, 1] > 0).long()
    loader = DataLoader(TensorDataset(x, y), batch_size=8, shuffle=True)
    model = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Dropout(0.1), nn.Linear(32, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    log = open(args.log, "a") if args.log else None

    step = 0
    optimizer.zero_grad()
    for batch, (inputs, labels) in enumerate(loader):
        loss = F.cross_entropy(model(inputs), labels)
        (loss / args.accum).backward()
        if log:
            log.write(json.dumps({"batch": batch, "step": step, "loss": loss.item()}) + "\n")
            log.flush()
        if (batch + 1) % args.accum == 0:
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
