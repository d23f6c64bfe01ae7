# A word-level LSTM language model in the style of pytorch/examples word_language_model:
# a Corpus whose Dictionary maps word2idx / idx2word (here a dict), batchify into
# sequence-first [T, B] columns, and get_batch(source, i).
import torch
import torch.nn as nn


class Dictionary:
    def __init__(self):
        self.word2idx = {}
        self.idx2word = {}

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word[len(self.idx2word)] = word
            self.word2idx[word] = len(self.word2idx)
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus:
    def __init__(self, text):
        self.dictionary = Dictionary()
        self.train = self.tokenize(text)

    def tokenize(self, text):
        ids = []
        for line in text.splitlines():
            for word in line.split() + ["<eos>"]:
                ids.append(self.dictionary.add_word(word))
        return torch.tensor(ids, dtype=torch.int64)


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers):
        super().__init__()
        self.ntoken = ntoken
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nhid, self.nlayers = nhid, nlayers

    def forward(self, input, hidden):
        emb = self.encoder(input)
        output, hidden = self.rnn(emb, hidden)
        decoded = self.decoder(output)
        decoded = decoded.view(-1, self.ntoken)
        return torch.log_softmax(decoded, dim=1), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (
            weight.new_zeros(self.nlayers, bsz, self.nhid),
            weight.new_zeros(self.nlayers, bsz, self.nhid),
        )


# 21 repeats: each of the 4 columns batchify makes starts at another word.
TEXT = "\n".join(
    ["the cat sat on the mat", "the dog ate my homework", "a bird sang in the tree"] * 21
)


def batchify(data, bsz):
    nbatch = data.size(0) // bsz
    data = data.narrow(0, 0, nbatch * bsz)
    return data.view(bsz, -1).t().contiguous()


def get_batch(source, i, bptt=8):
    seq_len = min(bptt, len(source) - 1 - i)
    data = source[i : i + seq_len]
    target = source[i + 1 : i + 1 + seq_len].view(-1)
    return data, target


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


if __name__ == "__main__":
    torch.manual_seed(1111)
    corpus = Corpus(TEXT)
    train_data = batchify(corpus.train, 4)
    ntokens = len(corpus.dictionary)
    model = RNNModel(ntokens, 16, 16, 1)
    criterion = nn.NLLLoss()
    lr = 20
    model.train()
    hidden = model.init_hidden(4)
    for batch, i in enumerate(range(0, 3 * 8, 8)):
        data, targets = get_batch(train_data, i)
        model.zero_grad()
        hidden = repackage_hidden(hidden)
        output, hidden = model(data, hidden)
        loss = criterion(output, targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        for p in model.parameters():
            p.data.add_(p.grad, alpha=-lr)
        print(f"batch {batch} loss {loss.item():.3f}")
