# An LLM fine-tuning script's shape: a small decoder-only model whose blocks run under
# activation checkpointing when `gradient_checkpointing` is on (as HF's
# `model.gradient_checkpointing_enable()` does), RMSNorm, a causal mask, AdamW and
# gradient clipping. Each checkpointed block's forward runs again during backward.
import math

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

VOCAB, DIM, HEADS, LAYERS, CTX = 48, 32, 4, 2, 16


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False)
        self.wo = nn.Linear(dim, dim, bias=False)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.wqkv(x).split(c, dim=-1)
        q, k, v = (z.view(b, t, self.n_heads, -1).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(q.size(-1))
        causal = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        att = att.masked_fill(causal, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(b, t, c)
        return self.wo(y)


class MLP(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.w1 = nn.Linear(dim, 4 * dim, bias=False)
        self.w2 = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)))


class Block(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.attn_norm = RMSNorm(dim)
        self.attn = Attention(dim, n_heads)
        self.ffn_norm = RMSNorm(dim)
        self.ffn = MLP(dim)

    def forward(self, x):
        x = x + self.attn(self.attn_norm(x))
        return x + self.ffn(self.ffn_norm(x))


class Transformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_embeddings = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList(Block(DIM, HEADS) for _ in range(LAYERS))
        self.norm = RMSNorm(DIM)
        self.output = nn.Linear(DIM, VOCAB, bias=False)
        self.gradient_checkpointing = False

    def forward(self, tokens):
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            if self.gradient_checkpointing and self.training:
                h = checkpoint(layer, h, use_reentrant=False)
            else:
                h = layer(h)
        return self.output(self.norm(h))


def get_batch(generator, batch_size=4):
    # A repeating pattern with noise: something a small model can learn in a few steps.
    start = torch.randint(0, VOCAB, (batch_size, 1), generator=generator)
    seq = (start + torch.arange(CTX + 1)) % VOCAB
    return seq[:, :-1].contiguous(), seq[:, 1:].contiguous()


if __name__ == "__main__":
    torch.manual_seed(1337)
    gen = torch.Generator().manual_seed(0)
    model = Transformer()
    model.gradient_checkpointing = True
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
    model.train()
    for it in range(4):
        x, y = get_batch(gen)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        print(f"iter {it}: loss {loss.item()}, grad norm {norm.item()}")
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
