# nanoGPT's openwebtext style: the corpus encoded with a tiktoken encoding (`enc`) into a
# uint16 array, batches cut from it, and a GPT whose vocabulary is `enc.n_vocab`. The
# encoding is built in memory from a tiny byte-pair table (tiktoken.get_encoding("gpt2")
# would download GPT-2's), the rest is as the original does it.
import numpy as np
import tiktoken
import torch
import torch.nn as nn
from torch.nn import functional as F

TEXT = "the cat sat on the mat. the dog sat on the log. " * 30


def byte_pair_ranks():
    """Every single byte, then a few merges, ranked as tiktoken's files rank them."""
    ranks = {bytes([b]): b for b in range(256)}
    for pair in (b"th", b"the", b" t", b" the", b"at", b" s", b" sat", b" on", b"og"):
        ranks[pair] = len(ranks)
    return ranks


enc = tiktoken.Encoding(
    name="tiny_bpe",
    pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\w+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""",
    mergeable_ranks=byte_pair_ranks(),
    special_tokens={"<|endoftext|>": 265},
)
ids = enc.encode_ordinary(TEXT)
ids.append(enc.eot_token)
train_data = np.array(ids, dtype=np.uint16)
block_size, batch_size = 16, 4


def get_batch():
    ix = torch.randint(len(train_data) - block_size, (batch_size,))
    x = torch.stack([torch.from_numpy(train_data[i : i + block_size].astype(np.int64)) for i in ix])
    y = torch.stack(
        [torch.from_numpy(train_data[i + 1 : i + 1 + block_size].astype(np.int64)) for i in ix]
    )
    return x, y


class GPT(nn.Module):
    def __init__(self, vocab_size, n_embd=32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.block = nn.TransformerEncoderLayer(n_embd, 2, 64, dropout=0.0, batch_first=True)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        x = self.wte(idx) + self.wpe(torch.arange(t))
        x = self.block(
            x, src_mask=nn.Transformer.generate_square_subsequent_mask(t), is_causal=True
        )
        logits = self.lm_head(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


torch.manual_seed(1337)
model = GPT(enc.n_vocab)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
for iter_num in range(3):
    X, Y = get_batch()
    logits, loss = model(X, Y)
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    print(f"iter {iter_num}: loss {loss.item():.4f}")
