"""Library layers only: nn.TransformerEncoder (causal mask, padding mask) followed by an nn.LSTM,
for next-token prediction on padded sequences."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

PAD, vocab_size, max_len = 0, 20, 12


def make_batch(batch_size, generator):
    lengths = torch.randint(5, max_len + 1, (batch_size,), generator=generator)
    starts = torch.randint(1, vocab_size, (batch_size,), generator=generator)
    seq = torch.full((batch_size, max_len), PAD, dtype=torch.long)
    for i, (n, s) in enumerate(zip(lengths.tolist(), starts.tolist(), strict=True)):
        # Counting sequences that wrap around the vocabulary (skipping PAD).
        seq[i, :n] = (s - 1 + torch.arange(n)) % (vocab_size - 1) + 1
    return seq[:, :-1], seq[:, 1:]


class EncoderLSTM(nn.Module):
    def __init__(self, d_model=32, nhead=4):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos = nn.Parameter(torch.randn(max_len, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(
            d_model, nhead, dim_feedforward=64, dropout=0.1, batch_first=True
        )
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.lstm = nn.LSTM(d_model, d_model, batch_first=True)
        self.out = nn.Linear(d_model, vocab_size)

    def forward(self, tokens):
        T = tokens.shape[1]
        mask = torch.ones(T, T, dtype=torch.bool).triu(diagonal=1)  # True = may not attend
        x = self.embed(tokens) + self.pos[:T]
        x = self.encoder(x, mask=mask, src_key_padding_mask=tokens == PAD, is_causal=True)
        x, _ = self.lstm(x)
        return self.out(x)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(0)
    model = EncoderLSTM()
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        inputs, targets = make_batch(16, generator)
        logits = model(inputs)
        loss = F.cross_entropy(
            logits.reshape(-1, vocab_size), targets.reshape(-1), ignore_index=PAD
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
