"""Tokens live in a uint16 np.memmap file on disk; batches are sampled from it (nanoGPT-style)."""

import argparse
import json
import os
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

block_size = 16
batch_size = 8
vocab_size = 50


def write_tokens(path, n, seed=0):
    rng = np.random.default_rng(seed)
    tokens = np.memmap(path, dtype=np.uint16, mode="w+", shape=(n,))
    # A random walk over the vocabulary: the next token is close to the previous one.
    steps = rng.integers(-2, 3, size=n)
    tokens[:] = (np.cumsum(steps) % vocab_size).astype(np.uint16)
    tokens.flush()
    del tokens


def get_batch(path):
    # Recreate the memmap every batch, as nanoGPT does, to avoid a memory leak.
    data = np.memmap(path, dtype=np.uint16, mode="r")
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack(
        [torch.from_numpy(data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
    )
    return x, y


class TokenMLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(vocab_size, 24)
        self.out = nn.Sequential(nn.GELU(), nn.Linear(24, vocab_size))

    def forward(self, idx):
        return self.out(self.emb(idx))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TokenMLP()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    log = open(args.log, "a") if args.log else None

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "train.bin")
        write_tokens(path, 5000)
        for step in range(args.steps):
            x, y = get_batch(path)
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, vocab_size), y.view(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()


if __name__ == "__main__":
    main()
