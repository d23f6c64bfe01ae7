# Token classification as the Hugging Face NER examples write it: words split into
# subwords, only a word's first subword labelled (the rest get -100, which cross_entropy's
# ignore_index skips), batches padded to the longest with pad id 0 and label 0, and the
# padding taken out by multiplying the per-token loss by the attention mask.
import torch
import torch.nn as nn
import torch.nn.functional as F

IGNORE = -100
PAD = 0
labels = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
# subword ids 1..39; each word is 1-3 subwords
torch.manual_seed(0)
gen = torch.Generator().manual_seed(1)


def make_sentence():
    input_ids, label_ids = [], []
    for _ in range(int(torch.randint(2, 6, (1,), generator=gen))):
        pieces = int(torch.randint(1, 4, (1,), generator=gen))
        input_ids += torch.randint(1, 40, (pieces,), generator=gen).tolist()
        label_ids += [int(torch.randint(0, len(labels), (1,), generator=gen))]
        label_ids += [IGNORE] * (pieces - 1)
    return input_ids, label_ids


def collate(batch):
    longest = max(len(ids) for ids, _ in batch)
    input_ids = torch.full((len(batch), longest), PAD)
    label_ids = torch.full((len(batch), longest), 0)
    attention_mask = torch.zeros(len(batch), longest)
    for i, (ids, lab) in enumerate(batch):
        input_ids[i, : len(ids)] = torch.tensor(ids)
        label_ids[i, : len(lab)] = torch.tensor(lab)
        attention_mask[i, : len(ids)] = 1
    return {"input_ids": input_ids, "labels": label_ids, "attention_mask": attention_mask}


class TokenClassifier(nn.Module):
    def __init__(self, vocab=40, dim=32, num_labels=len(labels)):
        super().__init__()
        self.embeddings = nn.Embedding(vocab, dim, padding_idx=PAD)
        self.encoder = nn.LSTM(dim, dim, batch_first=True, bidirectional=True)
        self.classifier = nn.Linear(2 * dim, num_labels)

    def forward(self, input_ids):
        hidden, _ = self.encoder(self.embeddings(input_ids))
        return self.classifier(hidden)


data = [make_sentence() for _ in range(48)]
loader = torch.utils.data.DataLoader(data, batch_size=8, shuffle=False, collate_fn=collate)
model = TokenClassifier()
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
for step, batch in enumerate(loader):
    logits = model(batch["input_ids"])
    loss = F.cross_entropy(
        logits.view(-1, logits.size(-1)),
        batch["labels"].view(-1),
        ignore_index=IGNORE,
        reduction="none",
    )
    active = batch["attention_mask"].view(-1)
    loss = (loss * active).sum() / active.sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    print(f"step {step} loss {loss.item():.4f}")
