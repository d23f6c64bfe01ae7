"""Saves a checkpoint (model and optimizer state_dict) with torch.save every other step."""

import argparse
import json
import os
import tempfile

import torch
import torch.nn.functional as F
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 24)
        self.bn = nn.BatchNorm1d(24)
        self.fc2 = nn.Linear(24, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))


def save_checkpoint(path, model, optimizer, step):
    torch.save(
        {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, path
    )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--save-every", type=int, default=2)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    log = open(args.log, "a") if args.log else None

    with tempfile.TemporaryDirectory() as out_dir:
        ckpt_path = os.path.join(out_dir, "ckpt.pt")
        for step in range(args.steps):
            x = torch.randn(32, 6)
            y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % args.save_every == 0:
                save_checkpoint(ckpt_path, model, optimizer, step)
            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()

        # Reload the last checkpoint, as a resume would.
        checkpoint = torch.load(ckpt_path, weights_only=True)
        model.load_state_dict(checkpoint["model"])


if __name__ == "__main__":
    main()
