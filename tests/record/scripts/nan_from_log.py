"""A model whose forward takes the log of a negative activation: the loss is NaN from
the first step (the NaN-origin fixture of issue 16)."""

import argparse
import json

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 2)

    def forward(self, x):
        h = self.fc1(x)
        h = torch.log(h)  # NaN where h < 0
        return self.fc2(h)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()
    torch.manual_seed(0)
    model = Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    log = open(args.log, "a") if args.log else None
    for batch in range(args.steps):
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if log:
            log.write(json.dumps({"batch": batch, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
