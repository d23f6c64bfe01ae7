"""Every step: estimate_loss() with 100 no_grad forwards in eval mode, then greedy generation.

Modelled on nanoGPT's loop; only one forward/backward per step is training.
"""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

TEXT = (
    "the cat sat on the mat. the dog sat on the log. the cat saw the dog. "
    "the dog saw the cat and the cat ran to the mat. "
) * 8
context = 8
batch_size = 16
eval_iters = 50  # per split: 2 splits -> 100 forwards between steps

chars = sorted(set(TEXT))
stoi = {ch: i for i, ch in enumerate(chars)}
itos = dict(enumerate(chars))


def encode(s):
    return [stoi[c] for c in s]


def decode(ids):
    return "".join(itos[i] for i in ids)


data = torch.tensor(encode(TEXT), dtype=torch.long)
n = int(0.9 * len(data))
splits = {"train": data[:n], "val": data[n:]}


def get_batch(split):
    d = splits[split]
    ix = torch.randint(len(d) - context, (batch_size,))
    x = d[ix.unsqueeze(1) + torch.arange(context)]
    y = d[ix + context]
    return x, y


class ContextMLP(nn.Module):
    """Predict the next character from the previous `context` characters."""

    def __init__(self, vocab, dim=16, hidden=64):
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.net = nn.Sequential(
            nn.Flatten(), nn.Linear(context * dim, hidden), nn.ReLU(), nn.Dropout(0.1)
        )
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx):
        return self.head(self.net(self.emb(idx)))


@torch.no_grad()
def estimate_loss(model):
    out = {}
    model.eval()
    for split in ("train", "val"):
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            x, y = get_batch(split)
            losses[k] = F.cross_entropy(model(x), y).item()
        out[split] = losses.mean().item()
    model.train()
    return out


@torch.no_grad()
def generate(model, prompt, max_new_tokens=16):
    model.eval()
    idx = torch.tensor([encode(prompt)], dtype=torch.long)
    for _ in range(max_new_tokens):
        logits = model(idx[:, -context:])
        idx = torch.cat([idx, logits.argmax(dim=-1, keepdim=True)], dim=1)
    model.train()
    return decode(idx[0].tolist())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = ContextMLP(len(chars))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        losses = estimate_loss(model)

        x, y = get_batch("train")
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

        sample = generate(model, "the cat ")
        if log:
            record = {"batch": step, "loss": loss.item(), "val_loss": losses["val"]}
            record["sample"] = sample
            log.write(json.dumps(record) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
