"""'Attention is all you need' the tutorial way: ScaledDotProductAttention holding an
nn.Softmax(dim=-1) module, masked_fill for padding, a translation-style copy task."""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

src_vocab = {"P": 0, "ich": 1, "mochte": 2, "ein": 3, "bier": 4, "cola": 5}
tgt_vocab = {"P": 0, "i": 1, "want": 2, "a": 3, "beer": 4, "coke": 5, "S": 6, "E": 7}
d_model, d_k, n_heads = 32, 8, 4


class ScaledDotProductAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.softmax = nn.Softmax(dim=-1)

    def forward(self, Q, K, V, attn_mask):
        scores = torch.matmul(Q, K.transpose(-1, -2)) / np.sqrt(d_k)
        scores.masked_fill_(attn_mask, -1e9)
        attn = self.softmax(scores)
        return torch.matmul(attn, V), attn


class MultiHeadAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.W_Q = nn.Linear(d_model, d_k * n_heads)
        self.W_K = nn.Linear(d_model, d_k * n_heads)
        self.W_V = nn.Linear(d_model, d_k * n_heads)
        self.attention = ScaledDotProductAttention()
        self.fc = nn.Linear(n_heads * d_k, d_model)
        self.norm = nn.LayerNorm(d_model)

    def forward(self, Q, K, V, attn_mask):
        residual, batch_size = Q, Q.size(0)
        q_s = self.W_Q(Q).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        k_s = self.W_K(K).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        v_s = self.W_V(V).view(batch_size, -1, n_heads, d_k).transpose(1, 2)
        attn_mask = attn_mask.unsqueeze(1).repeat(1, n_heads, 1, 1)
        context, attn = self.attention(q_s, k_s, v_s, attn_mask)
        context = context.transpose(1, 2).contiguous().view(batch_size, -1, n_heads * d_k)
        return self.norm(self.fc(context) + residual), attn


def get_attn_pad_mask(seq_q, seq_k):
    batch_size, len_q = seq_q.size()
    pad_attn_mask = seq_k.data.eq(0).unsqueeze(1)
    return pad_attn_mask.expand(batch_size, len_q, seq_k.size(1))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_emb = nn.Embedding(len(src_vocab), d_model)
        self.layers = nn.ModuleList([MultiHeadAttention() for _ in range(2)])
        self.projection = nn.Linear(d_model, len(tgt_vocab), bias=False)

    def forward(self, enc_inputs):
        out = self.src_emb(enc_inputs)
        mask = get_attn_pad_mask(enc_inputs, enc_inputs)
        attns = []
        for layer in self.layers:
            out, attn = layer(out, out, out, mask)
            attns.append(attn)
        return self.projection(out), attns


torch.manual_seed(0)
enc_inputs = torch.LongTensor([[1, 2, 3, 4, 0], [1, 2, 3, 5, 0]])
targets = torch.LongTensor([[1, 2, 3, 4, 0], [1, 2, 3, 5, 0]])
model = Encoder()
criterion = nn.CrossEntropyLoss(ignore_index=0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for epoch in range(20):
    optimizer.zero_grad()
    outputs, enc_self_attns = model(enc_inputs)
    loss = criterion(outputs.view(-1, outputs.size(-1)), targets.view(-1))
    loss.backward()
    optimizer.step()
    print(f"Epoch: {epoch + 1:04d} cost = {F.softplus(loss).item():.6f}")
