"""Builds the model on the meta device (no memory), materializes it on CPU with to_empty() and
initializes it with reset_parameters(), then trains. A meta-device shape check runs too."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


class MLP(nn.Module):
    def __init__(self, dim=16, hidden=64, classes=4):
        super().__init__()
        self.fc1 = nn.Linear(dim, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.fc2 = nn.Linear(hidden, classes)

    def forward(self, x):
        return self.fc2(F.gelu(self.norm(self.fc1(x))))


def init_weights(model):
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    with torch.device("meta"):
        model = MLP()
        # Check output shapes without allocating anything.
        assert model(torch.empty(2, 16)).shape == (2, 4)
    model = model.to_empty(device="cpu")
    init_weights(model)

    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    log = open(args.log, "a") if args.log else None
    for step in range(args.steps):
        x = torch.randn(32, 16)
        y = x[:, :4].argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
