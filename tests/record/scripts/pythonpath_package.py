"""Imports its model from a package found only through PYTHONPATH:

PYTHONPATH=tests/record/scripts/pylib python tests/record/scripts/pythonpath_package.py
"""

import argparse
import json

import torch
import torch.nn.functional as F
from toynets import ResidualMLP


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = ResidualMLP(6, 24, 3)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        x = torch.randn(32, 6)
        y = x[:, :3].argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
