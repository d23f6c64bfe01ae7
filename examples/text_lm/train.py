"""Train a small character-level causal transformer on the short story in data.txt.

Each training example is one sentence, so sequences have different lengths; batches are padded
with a PAD token that the loss ignores. After training, the model writes a few sentences of its own.

    python train.py --steps 300
"""

import argparse
import json
import math
import re
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, Dataset

HERE = Path(__file__).resolve().parent


class CharTokenizer:
    """Characters to ids and back, with three special tokens."""

    PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"

    def __init__(self, text):
        self.itos = [self.PAD, self.BOS, self.EOS] + sorted(set(text))
        self.stoi = {token: i for i, token in enumerate(self.itos)}
        self.pad_id = self.stoi[self.PAD]
        self.bos_id = self.stoi[self.BOS]
        self.eos_id = self.stoi[self.EOS]

    def __len__(self):
        return len(self.itos)

    def encode(self, text):
        return [self.bos_id] + [self.stoi[ch] for ch in text] + [self.eos_id]

    def decode(self, ids):
        specials = (self.pad_id, self.bos_id, self.eos_id)
        return "".join(self.itos[i] for i in ids if i not in specials)


def split_sentences(text, max_chars):
    """Split prose into sentences; cut long ones at a word boundary to at most max_chars."""
    text = " ".join(text.split())
    sentences = []
    for sentence in re.split(r"(?<=[.!?])\s+", text):
        while len(sentence) > max_chars:
            cut = sentence.rfind(" ", 0, max_chars)
            sentences.append(sentence[:cut])
            sentence = sentence[cut + 1 :]
        if sentence:
            sentences.append(sentence)
    return sentences


class SentenceDataset(Dataset):
    def __init__(self, sentences, tokenizer):
        self.sentences = sentences
        self.tokenizer = tokenizer

    def __len__(self):
        return len(self.sentences)

    def __getitem__(self, index):
        return torch.tensor(self.tokenizer.encode(self.sentences[index]), dtype=torch.long)


def pad_collate(pad_id):
    def collate(sequences):
        """Right-pad to the longest sequence; targets are the inputs shifted by one."""
        length = max(len(s) for s in sequences) - 1
        inputs = torch.full((len(sequences), length), pad_id, dtype=torch.long)
        targets = torch.full((len(sequences), length), pad_id, dtype=torch.long)
        for row, seq in enumerate(sequences):
            inputs[row, : len(seq) - 1] = seq[:-1]
            targets[row, : len(seq) - 1] = seq[1:]
        return inputs, targets

    return collate


class MultiHeadAttention(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        assert dim % heads == 0
        self.heads = heads
        self.head_dim = dim // heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        q = q.view(B, T, self.heads, self.head_dim).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, self.heads, self.head_dim).transpose(1, 2)
        v = v.view(B, T, self.heads, self.head_dim).transpose(1, 2)

        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        scores = scores.masked_fill(~causal, float("-inf"))
        attn = torch.softmax(scores, dim=-1)
        attn = self.dropout(attn)

        out = (attn @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.proj(out)


class Block(nn.Module):
    def __init__(self, dim, heads, dropout):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = MultiHeadAttention(dim, heads, dropout)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(
            nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim), nn.Dropout(dropout)
        )

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.mlp(self.ln2(x))
        return x


class TinyLM(nn.Module):
    def __init__(self, vocab_size, block_size, dim=64, heads=4, layers=2, dropout=0.1):
        super().__init__()
        self.block_size = block_size
        self.tok_emb = nn.Embedding(vocab_size, dim)
        self.pos_emb = nn.Embedding(block_size, dim)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(dim, heads, dropout) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.lm_head = nn.Linear(dim, vocab_size)

    def forward(self, idx):
        B, T = idx.shape
        positions = torch.arange(T, device=idx.device)
        x = self.drop(self.tok_emb(idx) + self.pos_emb(positions))
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    @torch.no_grad()
    def generate(self, tokenizer, max_new_tokens=120, temperature=0.8):
        idx = torch.tensor([[tokenizer.bos_id]])
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.block_size :])[:, -1, :] / temperature
            logits[:, tokenizer.pad_id] = float("-inf")
            next_id = torch.multinomial(torch.softmax(logits, dim=-1), num_samples=1)
            if next_id.item() == tokenizer.eos_id:
                break
            idx = torch.cat([idx, next_id], dim=1)
        return tokenizer.decode(idx[0].tolist())


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", default=str(HERE / "data.txt"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--max-chars", type=int, default=96, help="longest sentence in chars")
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--log", default=None, help="append one JSON line per batch here")
    parser.add_argument("--print-every", type=int, default=50)
    return parser.parse_args()


def main():
    args = parse_args()
    torch.manual_seed(args.seed)

    text = Path(args.data).read_text(encoding="utf-8")
    tokenizer = CharTokenizer(text)
    dataset = SentenceDataset(split_sentences(text, args.max_chars), tokenizer)
    loader = DataLoader(
        dataset,
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        collate_fn=pad_collate(tokenizer.pad_id),
    )

    model = TinyLM(len(tokenizer), block_size=args.max_chars + 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    PAD = tokenizer.pad_id
    log = open(args.log, "a") if args.log else None

    step = 0
    running = 0.0
    start = time.perf_counter()
    model.train()
    while step < args.steps:
        for inputs, targets in loader:
            logits = model(inputs)
            B, T, V = logits.shape
            loss = F.cross_entropy(logits.view(B * T, V), targets.view(-1), ignore_index=PAD)

            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()

            loss_value = loss.item()
            if log:
                log.write(json.dumps({"batch": step, "loss": loss_value}) + "\n")
                log.flush()
            running += loss_value
            step += 1
            if step % args.print_every == 0:
                elapsed = (time.perf_counter() - start) * 1000 / step
                print(
                    f"step {step:4d}  loss {running / args.print_every:.4f}  {elapsed:.1f} ms/step"
                )
                running = 0.0
            if step >= args.steps:
                break

    model.eval()
    for _ in range(3):
        print("sample:", model.generate(tokenizer))
    if log:
        log.close()


if __name__ == "__main__":
    main()
