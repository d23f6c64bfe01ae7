"""A float64 model (physics-style regression): parameters and inputs in double precision."""

import argparse
import json

import torch
from torch import nn


def damped_oscillator(t):
    return torch.exp(-0.3 * t) * torch.cos(4.0 * t)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)
    )
    model = model.double()
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        t = torch.rand(64, 1, dtype=torch.float64) * 5
        loss = torch.mean((model(t) - damped_oscillator(t)) ** 2)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
