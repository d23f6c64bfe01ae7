# A word-level LSTM language model as pytorch/examples' word_language_model lays out its
# data — sequence first, (T, B), with nn.LSTM(batch_first=False) — over sentences of
# different lengths padded at their end, the padding taken out by a (T, B) mask
# multiplied into the per-token loss.
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
gen = torch.Generator().manual_seed(2)
idx2word = ["<pad>", "<eos>"] + [f"w{i}" for i in range(30)]
word2idx = {w: i for i, w in enumerate(idx2word)}
PAD = word2idx["<pad>"]


def sentence():
    n = int(torch.randint(4, 12, (1,), generator=gen))
    return torch.randint(2, len(idx2word), (n,), generator=gen).tolist() + [word2idx["<eos>"]]


def batchify(sentences):
    """(T, B) inputs and next-word targets, padded, with the (T, B) mask of real tokens."""
    longest = max(len(s) for s in sentences) - 1
    data = torch.full((longest, len(sentences)), PAD)
    target = torch.full((longest, len(sentences)), PAD)
    mask = torch.zeros(longest, len(sentences))
    for j, s in enumerate(sentences):
        data[: len(s) - 1, j] = torch.tensor(s[:-1])
        target[: len(s) - 1, j] = torch.tensor(s[1:])
        mask[: len(s) - 1, j] = 1.0
    return data, target, mask


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp=24, nhid=32, nlayers=1):
        super().__init__()
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers, self.nhid = nlayers, nhid

    def forward(self, input, hidden):
        output, hidden = self.rnn(self.encoder(input), hidden)
        return self.decoder(output), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


corpus = [sentence() for _ in range(40)]
model = RNNModel(len(idx2word))
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
batch_size = 6
for i in range(0, len(corpus) - batch_size + 1, batch_size):
    data, targets, mask = batchify(corpus[i : i + batch_size])
    hidden = model.init_hidden(batch_size)
    model.zero_grad()
    output, hidden = model(data, hidden)
    ntokens = output.size(-1)
    loss = F.cross_entropy(output.view(-1, ntokens), targets.view(-1), reduction="none")
    loss = (loss.view_as(mask) * mask).sum() / mask.sum()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
    optimizer.step()
    print(f"| batch {i // batch_size} | loss {loss.item():5.2f}")
