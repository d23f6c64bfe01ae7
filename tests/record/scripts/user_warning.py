"""A forward that calls softmax without ``dim``: torch warns at the user's line."""

import argparse
import json

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return torch.nn.functional.softmax(self.fc(x))  # UserWarning: implicit dim


parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--log", default=None)
args = parser.parse_args()
torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
log = open(args.log, "a") if args.log else None
for batch in range(args.steps):
    opt.zero_grad()
    loss = model(torch.randn(3, 4)).square().sum()
    loss.backward()
    opt.step()
    if log:
        log.write(json.dumps({"batch": batch, "loss": loss.item()}) + "\n")
        log.flush()
