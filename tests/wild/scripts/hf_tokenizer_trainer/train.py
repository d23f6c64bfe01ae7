# A Hugging Face-style setup: a `tokenizers` BPE tokenizer trained on the corpus, the
# corpus tokenized once into a cache, and a Trainer-like class that holds the tokenizer
# (`processing_class`) while its data arrives as ids already.
import os
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from tokenizers import Tokenizer, models, pre_tokenizers, trainers
from torch.utils.data import DataLoader

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a journey of a thousand miles begins with a single step",
    "all that glitters is not gold",
    "the early bird catches the worm",
] * 8
CACHE = os.path.join("cache", "tokenized.pt")
MAX_LEN = 12


def build_tokenizer():
    tokenizer = Tokenizer(models.BPE(unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(
        vocab_size=120, special_tokens=["[PAD]", "[UNK]"], show_progress=False
    )
    tokenizer.train_from_iterator(CORPUS, trainer=trainer)
    tokenizer.enable_padding(pad_id=0, pad_token="[PAD]", length=MAX_LEN)
    tokenizer.enable_truncation(MAX_LEN)
    return tokenizer


def load_dataset(tokenizer):
    if not os.path.exists(CACHE):
        os.makedirs("cache", exist_ok=True)
        ids = [e.ids for e in tokenizer.encode_batch(CORPUS)]
        torch.save(torch.tensor(ids), CACHE)
    ids = torch.load(CACHE)
    return [{"input_ids": row, "labels": row.clone()} for row in ids]


@dataclass
class CausalLMOutput:
    loss: torch.Tensor
    logits: torch.Tensor


class TinyCausalLM(nn.Module):
    def __init__(self, vocab_size, hidden=32, pad_id=0):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, hidden)
        self.rnn = nn.GRU(hidden, hidden, batch_first=True)
        self.lm_head = nn.Linear(hidden, vocab_size)
        self.pad_id = pad_id

    def forward(self, input_ids, labels=None):
        h, _ = self.rnn(self.embed(input_ids))
        logits = self.lm_head(h)
        shift_logits = logits[:, :-1].contiguous()
        shift_labels = labels[:, 1:].masked_fill(labels[:, 1:] == self.pad_id, -100)
        loss = F.cross_entropy(
            shift_logits.view(-1, shift_logits.size(-1)), shift_labels.reshape(-1)
        )
        return CausalLMOutput(loss=loss, logits=logits)


def collate(features):
    return {k: torch.stack([f[k] for f in features]) for k in features[0]}


class Trainer:
    def __init__(self, model, train_dataset, processing_class=None, max_steps=3, batch_size=4):
        self.model = model
        self.train_dataset = train_dataset
        self.processing_class = processing_class
        self.max_steps = max_steps
        self.batch_size = batch_size

    def compute_loss(self, model, inputs):
        return model(**inputs).loss

    def train(self):
        optimizer = torch.optim.AdamW(self.model.parameters(), lr=3e-3)
        loader = DataLoader(
            self.train_dataset, batch_size=self.batch_size, shuffle=True, collate_fn=collate
        )
        step = 0
        for inputs in loader:
            loss = self.compute_loss(self.model, inputs)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            print(f"step {step} loss {loss.item():.4f}")
            step += 1
            if step >= self.max_steps:
                break


if __name__ == "__main__":
    torch.manual_seed(42)
    tokenizer = build_tokenizer()
    dataset = load_dataset(tokenizer)
    model = TinyCausalLM(tokenizer.get_vocab_size())
    Trainer(model, dataset, processing_class=tokenizer).train()
