"""A wide MLP of about 38M parameters trained with Adam on random data: the model of the
recording memory and size figures (issue 16). Four 3072×3072 layers and a classifier.

    python wide_mlp.py --steps 3
"""

import argparse
import json

import torch
from torch import nn


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--width", type=int, default=3072)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--log", default=None, help="append one JSON line per step here")
    args = parser.parse_args()

    torch.manual_seed(0)
    w = args.width
    model = nn.Sequential(
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, w), nn.ReLU(),
        nn.Linear(w, 10),
    )  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    log = open(args.log, "a") if args.log else None
    for step in range(args.steps):
        x = torch.randn(args.batch, w)
        y = torch.randint(0, 10, (args.batch,))
        optimizer.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        print(f"step {step}: loss {loss.item():.4f}")
        if log:
            log.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
