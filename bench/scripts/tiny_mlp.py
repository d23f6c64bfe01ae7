"""A tiny MLP on random data: a recorded run of it is almost all fixed start-up cost.

python tiny_mlp.py --steps 3
"""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--log", default=None, help="append one JSON line per step here")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")


if __name__ == "__main__":
    main()
