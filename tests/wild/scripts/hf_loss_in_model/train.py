# The Hugging Face pattern without the library: a word-level tokenizer class of the
# script's own (vocab dict, `__call__` returning input_ids, `decode`), a causal LM
# whose forward takes `labels`, shifts them inside and returns a ModelOutput-like dict
# with `loss` and `logits`; the loop only calls `outputs.loss.backward()`.
from collections import OrderedDict

import torch
import torch.nn as nn
from torch.nn import CrossEntropyLoss

TEXTS = [
    "the cat sat on the mat",
    "a dog ran in the park",
    "the bird sang a song",
    "my cat likes warm milk",
    "the sun is bright today",
    "a small dog barked loudly",
    "we walked to the river",
    "the old tree fell down",
]


class WordTokenizer:
    def __init__(self, texts):
        words = sorted({w for t in texts for w in t.split()})
        self.vocab = {"[PAD]": 0, "[BOS]": 1, "[EOS]": 2}
        for w in words:
            self.vocab[w] = len(self.vocab)
        self.ids_to_tokens = {i: w for w, i in self.vocab.items()}
        self.pad_token_id = 0

    def __call__(self, texts, max_length):
        batch = []
        for t in texts:
            ids = [1] + [self.vocab[w] for w in t.split()] + [2]
            batch.append(ids + [self.pad_token_id] * (max_length - len(ids)))
        input_ids = torch.tensor(batch)
        return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long()}

    def decode(self, ids):
        return " ".join(self.ids_to_tokens[int(i)] for i in ids if int(i) != self.pad_token_id)


class ModelOutput(OrderedDict):
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(name) from e


class TinyLMHeadModel(nn.Module):
    def __init__(self, vocab_size, n_embd=32):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(16, n_embd)
        layer = nn.TransformerEncoderLayer(n_embd, 4, 64, dropout=0.0, batch_first=True)
        self.h = nn.TransformerEncoder(layer, 1)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)

    def forward(self, input_ids, attention_mask=None, labels=None):
        t = input_ids.size(1)
        x = self.wte(input_ids) + self.wpe(torch.arange(t))
        causal = nn.Transformer.generate_square_subsequent_mask(t)
        hidden = self.h(x, mask=causal, is_causal=True)
        logits = self.lm_head(hidden)
        loss = None
        if labels is not None:
            shift_logits = logits[..., :-1, :].contiguous()
            shift_labels = labels[..., 1:].contiguous()
            loss_fct = CrossEntropyLoss()  # ignore_index=-100 by default
            loss = loss_fct(shift_logits.view(-1, shift_logits.size(-1)), shift_labels.view(-1))
        return ModelOutput(loss=loss, logits=logits)


if __name__ == "__main__":
    torch.manual_seed(0)
    tokenizer = WordTokenizer(TEXTS)
    model = TinyLMHeadModel(len(tokenizer.vocab))
    optimizer = torch.optim.AdamW(model.parameters(), lr=5e-3)
    model.train()
    for step in range(4):
        texts = [TEXTS[(2 * step + i) % len(TEXTS)] for i in range(4)]
        batch = tokenizer(texts, max_length=9)
        labels = batch["input_ids"].clone()
        labels[batch["attention_mask"] == 0] = -100
        outputs = model(**batch, labels=labels)
        outputs.loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        print(f"step {step} loss {outputs.loss.item():.4f}")
