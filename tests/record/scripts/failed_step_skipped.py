"""Out-of-memory recovery: the optimizer step of batch 1 raises, the loop catches the error,
drops that batch's gradients and goes on (fairseq-style `except RuntimeError`)."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


class FlakySGD(torch.optim.SGD):
    """SGD whose second step raises, as a CUDA out-of-memory error would."""

    def __init__(self, params, lr):
        super().__init__(params, lr=lr)
        self.calls = 0

    def step(self, closure=None):
        self.calls += 1
        if self.calls == 2:
            raise RuntimeError("CUDA out of memory (simulated)")
        return super().step(closure)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--log")
    args = parser.parse_args()
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))
    opt = FlakySGD(model.parameters(), lr=0.1)
    for i in range(args.steps + 1):
        x, y = torch.randn(4, 8), torch.randint(0, 2, (4,))
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        try:
            opt.step()
        except RuntimeError:
            opt.zero_grad()  # skip the batch
        if args.log:
            with open(args.log, "a") as f:
                f.write(json.dumps({"batch": i, "loss": loss.item()}) + "\n")


if __name__ == "__main__":
    main()
