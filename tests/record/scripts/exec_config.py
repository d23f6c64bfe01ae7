"""Top-level script (no main guard) whose settings come from a Python file run with exec()."""

import argparse
import json
import os

import torch
from torch import nn

parser = argparse.ArgumentParser()
parser.add_argument(
    "--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "config_exec.py")
)
parser.add_argument("--steps", type=int, default=None)
parser.add_argument("--log", default=None)
args = parser.parse_args()

cfg = {}
exec(open(args.config).read(), cfg)
if args.steps is not None:
    cfg["steps"] = args.steps

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, cfg["hidden"]), nn.Tanh(), nn.Linear(cfg["hidden"], 1))
optimizer = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
true_w = torch.tensor([[1.5], [-2.0], [0.5], [3.0]])
log = open(args.log, "a") if args.log else None

for step in range(cfg["steps"]):
    x = torch.randn(cfg["batch_size"], 4)
    y = x @ true_w + 0.1 * torch.randn(cfg["batch_size"], 1)
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if log:
        log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
        log.flush()
