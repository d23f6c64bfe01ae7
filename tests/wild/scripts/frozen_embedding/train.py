"""Text classification over frozen pretrained word vectors: nn.Embedding.from_pretrained
(freeze=True, requires_grad=False) and the optimizer handed model.parameters() whole,
as many tutorials do."""

import torch
import torch.nn as nn
import torch.nn.functional as F

word_dict = {w: i for i, w in enumerate("<pad> good great fine bad awful poor movie plot".split())}
pretrained = torch.randn(len(word_dict), 24)


class TextCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding.from_pretrained(pretrained, freeze=True, padding_idx=0)
        self.conv = nn.Conv1d(24, 16, kernel_size=3, padding=1)
        self.fc = nn.Linear(16, 2)

    def forward(self, x):
        e = self.embedding(x).transpose(1, 2)
        return self.fc(F.relu(self.conv(e)).max(dim=2).values)


def batch(n=16, length=6):
    ids = torch.randint(1, len(word_dict), (n, length))
    labels = (ids <= 3).sum(1).gt(length // 2).long()
    return ids, labels


torch.manual_seed(0)
model = TextCNN()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
for _ in range(30):
    inputs, labels = batch()
    loss = F.cross_entropy(model(inputs), labels)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
