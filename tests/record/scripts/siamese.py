"""A siamese encoder: two forwards through the same network, one contrastive loss, one backward."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))

    def forward(self, x):
        return F.normalize(self.net(x), dim=1)


def contrastive_loss(z1, z2, same, margin=0.5):
    distance = (z1 - z2).pow(2).sum(dim=1).sqrt()
    return torch.mean(same * distance.pow(2) + (1 - same) * F.relu(margin - distance).pow(2))


def make_pairs(prototypes, n):
    a = torch.randint(0, len(prototypes), (n,))
    same = (torch.rand(n) < 0.5).float()
    b = torch.where(same.bool(), a, torch.randint(0, len(prototypes), (n,)))
    same = (a == b).float()
    x1 = prototypes[a] + 0.3 * torch.randn(n, 16)
    x2 = prototypes[b] + 0.3 * torch.randn(n, 16)
    return x1, x2, same


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    prototypes = torch.randn(6, 16)
    encoder = Encoder()
    optimizer = torch.optim.Adam(encoder.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        x1, x2, same = make_pairs(prototypes, 32)
        z1 = encoder(x1)
        z2 = encoder(x2)
        loss = contrastive_loss(z1, z2, same)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
