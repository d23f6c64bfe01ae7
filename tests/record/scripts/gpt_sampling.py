"""A tiny char-level transformer that samples text between steps, as minGPT and nanoGPT do:
a `@torch.no_grad()` generate() with top-k and `torch.multinomial`, one forward per new
character (60 per step). Logs `{"batch", "loss", "sample"}`: the sampled ids show that the
random stream sampling draws from is what it is without tvis."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

TEXT = "the quick brown fox jumps over the lazy dog. pack my box with five dozen jugs. " * 6
block_size = 16
chars = sorted(set(TEXT))
stoi = {ch: i for i, ch in enumerate(chars)}
data = torch.tensor([stoi[c] for c in TEXT], dtype=torch.long)


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        t = x.size(1)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab, dim=32, heads=2, layers=2):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block_size, dim)
        self.blocks = nn.ModuleList([Block(dim, heads) for _ in range(layers)])
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx, targets=None):
        x = self.tok(idx) + self.pos(torch.arange(idx.size(1)))
        for block in self.blocks:
            x = block(x)
        logits = self.head(x)
        if targets is None:
            return logits, None
        return logits, F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    @torch.no_grad()
    def generate(self, idx, max_new_tokens, top_k=5):
        for _ in range(max_new_tokens):
            logits, _ = self(idx[:, -block_size:])
            logits = logits[:, -1, :]
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
            idx_next = torch.multinomial(F.softmax(logits, dim=-1), num_samples=1)
            idx = torch.cat((idx, idx_next), dim=1)
        return idx


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TinyGPT(len(chars))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    log = open(args.log, "a") if args.log else None
    for step in range(args.steps):
        model.eval()
        sample = model.generate(torch.zeros(1, 1, dtype=torch.long), 60)[0].tolist()
        model.train()
        ix = torch.randint(len(data) - block_size - 1, (8,))
        x = torch.stack([data[i : i + block_size] for i in ix])
        y = torch.stack([data[i + 1 : i + block_size + 1] for i in ix])
        _, loss = model(x, y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item(), "sample": sample}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
