"""A tiny GPT in the style of minGPT, trained on input.txt, that samples text between steps.

Every `--sample-every` steps it prints a sample of `--sample-tokens` characters drawn with
a `@torch.no_grad()` generate() loop: one forward per new token over the last `block_size`
characters, as minGPT's and nanoGPT's training scripts do to watch the model learn.

    python gpt_sample.py --steps 3
"""

import argparse
import json
import math
import os

import torch
import torch.nn.functional as F
from torch import nn

parser = argparse.ArgumentParser(description="tiny GPT that samples between steps")
parser.add_argument("--steps", type=int, default=200, help="optimizer steps to run")
parser.add_argument("--sample-every", type=int, default=1)
parser.add_argument("--sample-tokens", type=int, default=150)
parser.add_argument("--n-layer", type=int, default=2)
parser.add_argument("--n-embd", type=int, default=64)
parser.add_argument("--n-head", type=int, default=4)
parser.add_argument("--block-size", type=int, default=32)
parser.add_argument("--batch-size", type=int, default=16)
parser.add_argument("--seed", type=int, default=42)
parser.add_argument("--log", default=None, help="append one JSON line per step here")
args = parser.parse_args()


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        mask = torch.tril(torch.ones(block_size, block_size))
        self.register_buffer("bias", mask.view(1, 1, block_size, block_size))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class Block(nn.Module):
    def __init__(self, n_embd, n_head, block_size):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(n_embd, 4 * n_embd), nn.GELU(), nn.Linear(4 * n_embd, n_embd)
        )

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        x = x + self.mlp(self.ln_2(x))
        return x


class GPT(nn.Module):
    def __init__(self, vocab_size, n_layer, n_embd, n_head, block_size):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, n_embd)
        self.pos_emb = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList([Block(n_embd, n_head, block_size) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        b, t = idx.size()
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device).unsqueeze(0)
        x = self.tok_emb(idx) + self.pos_emb(pos)
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss


@torch.no_grad()
def generate(model, idx, max_new_tokens, temperature=1.0, top_k=None):
    """Take a conditioning sequence of indices and complete it max_new_tokens times."""
    for _ in range(max_new_tokens):
        idx_cond = idx if idx.size(1) <= model.block_size else idx[:, -model.block_size :]
        logits, _ = model(idx_cond)
        logits = logits[:, -1, :] / temperature
        if top_k is not None:
            v, _ = torch.topk(logits, top_k)
            logits[logits < v[:, [-1]]] = -float("Inf")
        probs = F.softmax(logits, dim=-1)
        idx_next = torch.multinomial(probs, num_samples=1)
        idx = torch.cat((idx, idx_next), dim=1)
    return idx


def main():
    torch.manual_seed(args.seed)
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "input.txt")) as f:
        text = f.read()
    chars = sorted(set(text))
    stoi = {ch: i for i, ch in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text], dtype=torch.long)

    model = GPT(len(chars), args.n_layer, args.n_embd, args.n_head, args.block_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.1)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        if step % args.sample_every == 0:
            model.eval()
            context = torch.tensor([[stoi["\n"]]], dtype=torch.long)
            y_gen = generate(model, context, args.sample_tokens, top_k=10)[0]
            completion = "".join(chars[int(i)] for i in y_gen)
            print(f"step {step}: {completion.strip()[:60]!r}")

        ix = torch.randint(len(data) - args.block_size - 1, (args.batch_size,))
        x = torch.stack([data[i : i + args.block_size] for i in ix])
        y = torch.stack([data[i + 1 : i + args.block_size + 1] for i in ix])

        model.train()
        logits, loss = model(x, y)
        model.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

        print(f"step {step}: loss {loss.item():.4f}")
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
