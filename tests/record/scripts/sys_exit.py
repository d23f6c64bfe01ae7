"""Stops itself with sys.exit(3) after 2 steps (e.g. a time limit or preemption handler)."""

import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch import nn

EXIT_REQUEUE = 3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--exit-after", type=int, default=2)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        if step >= args.exit_after:
            if log:
                log.close()
            sys.exit(EXIT_REQUEUE)  # out of time: ask the scheduler to requeue us
        x = torch.randn(16, 6)
        loss = F.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
