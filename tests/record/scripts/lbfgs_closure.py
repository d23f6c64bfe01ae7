"""Full-batch curve fitting with torch.optim.LBFGS: many forward/backward passes per step()."""

import argparse
import json
import math

import torch
from torch import nn


def make_data(n=128):
    x = torch.linspace(-math.pi, math.pi, n).unsqueeze(1)
    y = torch.sin(2 * x) + 0.3 * x
    return x, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    x, y = make_data()
    model = nn.Sequential(
        nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 32), nn.Tanh(), nn.Linear(32, 1)
    )
    optimizer = torch.optim.LBFGS(
        model.parameters(), lr=1.0, max_iter=10, history_size=10, line_search_fn="strong_wolfe"
    )
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):

        def closure():
            optimizer.zero_grad()
            loss = nn.functional.mse_loss(model(x), y)
            loss.backward()
            return loss

        loss = optimizer.step(closure)
        if log:
            log.write(json.dumps({"step": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
