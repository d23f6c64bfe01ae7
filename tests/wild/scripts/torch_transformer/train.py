"""Sequence classification with torch's own nn.TransformerEncoder (its self-attention is
nn.MultiheadAttention called with need_weights=False) and a padding mask, sequence-first."""

import math

import torch
import torch.nn as nn

NTOKEN, D_MODEL, NHEAD, SEQ, BATCH, CLASSES, PAD = 50, 32, 4, 12, 8, 3, 0


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=64):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return x + self.pe[: x.size(0)]


class TransformerClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(NTOKEN, D_MODEL, padding_idx=PAD)
        self.pos_encoder = PositionalEncoding(D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, NHEAD, 64, dropout=0.1)
        self.transformer_encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.classifier = nn.Linear(D_MODEL, CLASSES)

    def forward(self, src, padding_mask):
        x = self.pos_encoder(self.embedding(src) * math.sqrt(D_MODEL))
        x = self.transformer_encoder(x, src_key_padding_mask=padding_mask)
        keep = (~padding_mask).T.unsqueeze(-1).float()
        return self.classifier((x * keep).sum(0) / keep.sum(0))


def make_batch():
    lengths = torch.randint(4, SEQ + 1, (BATCH,))
    src = torch.randint(1, NTOKEN, (SEQ, BATCH))
    padding_mask = torch.arange(SEQ)[None, :] >= lengths[:, None]
    src = src.masked_fill(padding_mask.T, PAD)
    labels = src.sum(0) % CLASSES
    return src, padding_mask, labels


torch.manual_seed(0)
model = TransformerClassifier()
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
for _ in range(30):
    src, mask, labels = make_batch()
    output = model(src, mask)
    loss = criterion(output, labels)
    optimizer.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 0.5)
    optimizer.step()
