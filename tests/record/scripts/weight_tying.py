"""A language model whose output projection shares its weight with the token embedding."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

vocab_size = 30


class TiedLM(nn.Module):
    def __init__(self, dim=24):
        super().__init__()
        self.embedding = nn.Embedding(vocab_size, dim)
        self.rnn = nn.GRU(dim, dim, batch_first=True)
        self.decoder = nn.Linear(dim, vocab_size, bias=False)
        self.decoder.weight = self.embedding.weight  # weight tying

    def forward(self, idx):
        h, _ = self.rnn(self.embedding(idx))
        return self.decoder(h)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = TiedLM()
    assert model.decoder.weight is model.embedding.weight
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)  # the shared weight appears once
    log = open(args.log, "a") if args.log else None

    for step in range(args.steps):
        start = torch.randint(0, vocab_size, (8, 1))
        seq = (start + 3 * torch.arange(13)) % vocab_size
        logits = model(seq[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, vocab_size), seq[:, 1:].reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if log:
            log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
            log.flush()


if __name__ == "__main__":
    main()
