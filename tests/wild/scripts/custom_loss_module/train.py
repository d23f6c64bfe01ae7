# Classification with a focal loss module of the script's own (nn.Module, not nn.*Loss),
# built on F.cross_entropy(reduction="none") as most focal-loss snippets are.
import torch
import torch.nn as nn
import torch.nn.functional as F


class FocalLoss(nn.Module):
    def __init__(self, gamma=2.0):
        super().__init__()
        self.gamma = gamma

    def forward(self, logits, targets):
        ce = F.cross_entropy(logits, targets, reduction="none")
        pt = torch.exp(-ce)
        return ((1 - pt) ** self.gamma * ce).mean()


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 3)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


torch.manual_seed(0)
features = torch.randn(96, 10)
classes = (features[:, 0] > 0).long() + (features[:, 1] > 1).long()
model = MLP()
criterion = FocalLoss(gamma=2.0)
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for i in range(3):
    x, y = features[i * 32 : (i + 1) * 32], classes[i * 32 : (i + 1) * 32]
    optimizer.zero_grad()
    loss = criterion(model(x), y)
    loss.backward()
    optimizer.step()
    print(f"iter {i} focal loss {loss.item():.4f}")
