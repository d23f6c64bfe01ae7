# A sequence tagger over variable-length sentences: padded batches, an embedding with
# padding_idx, a bidirectional GRU fed through pack_padded_sequence, and a masked
# token loss written by hand (CE with reduction="none", times the mask, summed over
# the real tokens and divided by their count).
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

PAD = 0
words = ["<pad>", "the", "cat", "sat", "on", "mat", "a", "dog", "ran", "to", "park", "big", "small"]
word2idx = {w: i for i, w in enumerate(words)}
tags = ["<pad>", "DET", "NOUN", "VERB", "ADP", "ADJ"]
tag_of = {
    "the": "DET",
    "a": "DET",
    "cat": "NOUN",
    "mat": "NOUN",
    "dog": "NOUN",
    "park": "NOUN",
    "sat": "VERB",
    "ran": "VERB",
    "on": "ADP",
    "to": "ADP",
    "big": "ADJ",
    "small": "ADJ",
}

torch.manual_seed(0)
random_gen = torch.Generator().manual_seed(0)
sentences = []
for _ in range(64):
    n = int(torch.randint(3, 9, (1,), generator=random_gen))
    ids = torch.randint(1, len(words), (n,), generator=random_gen)
    sentences.append(ids)


def collate(batch):
    lengths = torch.tensor([len(s) for s in batch])
    x = pad_sequence(batch, batch_first=True, padding_value=PAD)
    y = pad_sequence(
        [torch.tensor([tags.index(tag_of[words[i]]) for i in s]) for s in batch],
        batch_first=True,
        padding_value=PAD,
    )
    return x, y, lengths


class Tagger(nn.Module):
    def __init__(self, vocab_size, tagset_size, emb=16, hidden=24):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, emb, padding_idx=PAD)
        self.rnn = nn.GRU(emb, hidden, batch_first=True, bidirectional=True)
        self.out = nn.Linear(2 * hidden, tagset_size)

    def forward(self, x, lengths):
        emb = self.embed(x)
        packed = pack_padded_sequence(emb, lengths.cpu(), batch_first=True, enforce_sorted=False)
        packed_out, _ = self.rnn(packed)
        out, _ = pad_packed_sequence(packed_out, batch_first=True, total_length=x.size(1))
        return self.out(out)


def masked_loss(logits, targets, lengths):
    mask = (torch.arange(targets.size(1))[None, :] < lengths[:, None]).float()
    loss = F.cross_entropy(
        logits.reshape(-1, logits.size(-1)), targets.reshape(-1), reduction="none"
    )
    loss = loss.view_as(mask) * mask
    return loss.sum() / mask.sum()


loader = torch.utils.data.DataLoader(sentences, batch_size=8, shuffle=True, collate_fn=collate)
model = Tagger(len(words), len(tags))
optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
for _epoch in range(1):
    for i, (x, y, lengths) in enumerate(loader):
        model.zero_grad()
        logits = model(x, lengths)
        loss = masked_loss(logits, y, lengths)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 5.0)
        optimizer.step()
        print(f"batch {i} loss {loss.item():.4f}")
