"""No DataLoader: nanoGPT-style get_batch() draws random windows with torch.randint."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

block_size = 16
batch_size = 8
vocab_size = 12


def make_data(n):
    # A repeating token pattern with a little noise, so there is something to learn.
    base = torch.arange(n) % vocab_size
    noise = torch.randint(0, vocab_size, (n,))
    keep = torch.rand(n) < 0.9
    return torch.where(keep, base, noise)


def get_batch(data):
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i : i + block_size] for i in ix])
    y = torch.stack([data[i + 1 : i + 1 + block_size] for i in ix])
    return x, y


class BigramMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, 32)
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, vocab_size))

    def forward(self, idx):
        return self.mlp(self.emb(idx))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    data = make_data(2000)
    model = BigramMLP()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        x, y = get_batch(data)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, vocab_size), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
