"""Custom torch.autograd.Functions in the forward: a straight-through weight quantizer and a
Swish activation with a hand-written backward."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


class QuantizeSTE(torch.autograd.Function):
    """Round to `levels` steps in the forward; pass the gradient straight through."""

    @staticmethod
    def forward(ctx, x, levels):
        scale = x.abs().max().clamp(min=1e-8) / levels
        return torch.round(x / scale) * scale

    @staticmethod
    def backward(ctx, grad_output):
        return grad_output, None


class SwishFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        sig = torch.sigmoid(x)
        ctx.save_for_backward(x, sig)
        return x * sig

    @staticmethod
    def backward(ctx, grad_output):
        x, sig = ctx.saved_tensors
        return grad_output * (sig * (1 + x * (1 - sig)))


class QuantLinear(nn.Linear):
    def forward(self, x):
        return F.linear(x, QuantizeSTE.apply(self.weight, 8), self.bias)


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = QuantLinear(8, 32)
        self.fc2 = QuantLinear(32, 2)

    def forward(self, x):
        return self.fc2(SwishFunction.apply(self.fc1(x)))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        x = torch.randn(32, 8)
        y = (x[:, 0] * x[:, 1] > 0).long()
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
