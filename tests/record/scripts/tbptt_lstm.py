"""Character LSTM over one long stream with truncated BPTT: the hidden state is carried across
chunks and detached so gradients stop at the chunk boundary."""

import argparse
import json

import torch
import torch.nn.functional as F
from torch import nn

TEXT = "to be or not to be that is the question whether tis nobler in the mind to suffer " * 20
bptt = 20
batch_size = 4


def batchify(data, bsz):
    """Cut the stream into `bsz` parallel columns: (len // bsz, bsz)."""
    n = data.size(0) // bsz
    return data[: n * bsz].view(bsz, n).t().contiguous()


class CharLSTM(nn.Module):
    def __init__(self, vocab, emb=16, hidden=48, layers=2):
        super().__init__()
        self.encoder = nn.Embedding(vocab, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers)
        self.decoder = nn.Linear(hidden, vocab)
        self.layers, self.hidden = layers, hidden

    def init_hidden(self, bsz):
        zeros = torch.zeros(self.layers, bsz, self.hidden)
        return (zeros, zeros.clone())

    def forward(self, x, hidden):
        out, hidden = self.rnn(self.encoder(x), hidden)
        return self.decoder(out), hidden


def repackage_hidden(h):
    """Detach hidden states from their history (truncated backpropagation through time)."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--log", default=None)
    args = parser.parse_args()

    torch.manual_seed(0)
    vocab = sorted(set(TEXT))
    stoi = {c: i for i, c in enumerate(vocab)}
    stream = batchify(torch.tensor([stoi[c] for c in TEXT]), batch_size)

    model = CharLSTM(len(vocab))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    log = open(args.log, "a") if args.log else None

    hidden = model.init_hidden(batch_size)
    step = 0
    while step < args.steps:
        for i in range(0, stream.size(0) - 1 - bptt, bptt):
            x, y = stream[i : i + bptt], stream[i + 1 : i + 1 + bptt]
            hidden = repackage_hidden(hidden)
            output, hidden = model(x, hidden)
            loss = F.cross_entropy(output.view(-1, len(vocab)), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            optimizer.step()
            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()
            step += 1
            if step >= args.steps:
                break


if __name__ == "__main__":
    main()
