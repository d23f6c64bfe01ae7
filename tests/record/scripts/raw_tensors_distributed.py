"""Raw tensors, no nn.Module, no optimizer, with torch.distributed imported (it holds the
deprecated ``reduce_op``, which warns when any attribute of it is read)."""

import argparse
import json

import torch
import torch.distributed  # noqa: F401

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--log", default=None)
args = parser.parse_args()
torch.manual_seed(0)
w = torch.randn(4, 1, requires_grad=True)
log = open(args.log, "a") if args.log else None
for batch in range(args.steps):
    loss = (torch.randn(8, 4) @ w).square().mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
    if log:
        log.write(json.dumps({"batch": batch, "loss": loss.item()}) + "\n")
        log.flush()
