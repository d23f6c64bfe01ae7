"""A word-level LSTM language model with truncated BPTT, in the style of PyTorch's
word_language_model example, trained on input.txt.

    python lstm_lm.py --steps 3
"""

import argparse
import json
import math
import os
import re
import time

import torch
import torch.nn.functional as F
from torch import nn


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    """Tokenizes the text into words (punctuation and line ends as tokens); 90/10 train/valid."""

    def __init__(self, path):
        self.dictionary = Dictionary()
        with open(path, encoding="utf-8") as f:
            words = []
            for line in f:
                words += re.findall(r"[\w']+|[.,;!?]", line.lower()) + ["<eos>"]
        ids = torch.tensor([self.dictionary.add_word(w) for w in words], dtype=torch.long)
        n = int(0.9 * len(ids))
        self.train, self.valid = ids[:n], ids[n:]


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].reshape(-1)
    return data, target


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2, tie_weights=True):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        if tie_weights:
            assert nhid == ninp, "tied weights need nhid == emsize"
            self.decoder.weight = self.encoder.weight
        self.nlayers, self.nhid = nlayers, nhid
        nn.init.uniform_(self.encoder.weight, -0.1, 0.1)
        nn.init.zeros_(self.decoder.bias)

    def forward(self, input, hidden):
        emb = self.drop(self.encoder(input))
        output, hidden = self.rnn(emb, hidden)
        output = self.drop(output)
        decoded = self.decoder(output)
        return F.log_softmax(decoded.view(-1, decoded.size(-1)), dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


def repackage_hidden(h):
    """Wraps hidden states in new Tensors, to detach them from their history."""
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def evaluate(model, data_source, bptt, eval_batch_size):
    model.eval()
    total_loss = 0.0
    hidden = model.init_hidden(eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, bptt):
            data, targets = get_batch(data_source, i, bptt)
            output, hidden = model(data, hidden)
            hidden = repackage_hidden(hidden)
            total_loss += len(data) * F.nll_loss(output, targets).item()
    model.train()
    return total_loss / (len(data_source) - 1)


def main():
    parser = argparse.ArgumentParser(description="word-level LSTM language model")
    parser.add_argument("--data", default=os.path.join(os.path.dirname(__file__), "input.txt"))
    parser.add_argument("--emsize", type=int, default=128)
    parser.add_argument("--nlayers", type=int, default=2)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--clip", type=float, default=0.25)
    parser.add_argument("--steps", type=int, default=300, help="optimizer steps to run")
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--bptt", type=int, default=25)
    parser.add_argument("--seed", type=int, default=1111)
    parser.add_argument("--log-interval", type=int, default=20)
    parser.add_argument("--log", default=None, help="append one JSON line per step here")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    corpus = Corpus(args.data)
    train_data = batchify(corpus.train, args.batch_size)
    val_data = batchify(corpus.valid, 4)
    ntokens = len(corpus.dictionary)

    model = RNNModel(ntokens, args.emsize, args.emsize, args.nlayers)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    log = open(args.log, "a") if args.log else None

    step, epoch = 0, 0
    start = time.time()
    while step < args.steps:
        epoch += 1
        model.train()
        total_loss = 0.0
        hidden = model.init_hidden(args.batch_size)
        for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
            data, targets = get_batch(train_data, i, args.bptt)
            # Starting each batch, we detach the hidden state from how it was previously
            # produced. Otherwise the model would backpropagate all the way to the start.
            hidden = repackage_hidden(hidden)
            optimizer.zero_grad()
            output, hidden = model(data, hidden)
            loss = F.nll_loss(output, targets)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()

            if log:
                log.write(json.dumps({"batch": step, "loss": loss.item()}) + "\n")
                log.flush()
            total_loss += loss.item()
            step += 1
            if step % args.log_interval == 0:
                cur_loss = total_loss / (batch + 1)
                print(
                    f"| epoch {epoch:3d} | step {step:5d} | loss {cur_loss:5.2f}"
                    f" | ppl {math.exp(cur_loss):8.2f} | {(time.time() - start) / step * 1000:.0f} ms/step"
                )
            if step >= args.steps:
                break
        val_loss = evaluate(model, val_data, args.bptt, 4)
        print(
            f"| end of epoch {epoch:3d} | valid loss {val_loss:5.2f} | valid ppl {math.exp(val_loss):8.2f}"
        )


if __name__ == "__main__":
    main()
