"""A hand-written torch.optim.Optimizer subclass (SGD with Nesterov-free momentum and decoupled
weight decay) driven by a warmup + cosine LambdaLR schedule."""

import argparse
import json
import math

import torch
import torch.nn.functional as F
from torch import nn


class MomentumSGDW(torch.optim.Optimizer):
    def __init__(self, params, lr=0.1, momentum=0.9, weight_decay=0.0):
        if lr <= 0:
            raise ValueError(f"invalid learning rate {lr}")
        defaults = dict(lr=lr, momentum=momentum, weight_decay=weight_decay)
        super().__init__(params, defaults)

    @torch.no_grad()
    def step(self, closure=None):
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = torch.zeros_like(p)
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).add_(p.grad)
                if group["weight_decay"]:
                    p.mul_(1 - group["lr"] * group["weight_decay"])
                p.add_(buf, alpha=-group["lr"])
        return loss


def warmup_cosine(warmup, total):
    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        progress = (step - warmup) / max(1, total - warmup)
        return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))

    return factor


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 32), nn.SiLU(), nn.Linear(32, 4))
    optimizer = MomentumSGDW(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(2, args.steps))
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        x = torch.randn(32, 12)
        y = x[:, :4].argmax(dim=1)
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        scheduler.step()
        if log:
            record = {"batch": step, "loss": loss.item(), "lr": scheduler.get_last_lr()[0]}
            log.write(json.dumps(record) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
