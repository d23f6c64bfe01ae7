# Label distribution learning (as in DLDL age estimation): each face's age is a Gaussian
# over the age bins, not one class, and the network is trained with the KL divergence
# from that distribution alone: F.kl_div(log_softmax(logits), q, reduction="batchmean").
import math

import torch
import torch.nn as nn
import torch.nn.functional as F

AGES = torch.arange(0, 20, dtype=torch.float32)  # age bins
SIGMA = 2.0


def label_distribution(age):
    q = torch.exp(-((AGES[None, :] - age[:, None]) ** 2) / (2 * SIGMA**2))
    return q / q.sum(1, keepdim=True)


class AgeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.fc = nn.Linear(32, len(AGES))

    def forward(self, x):
        return self.fc(self.features(x))


torch.manual_seed(0)
ages = torch.randint(0, 20, (60,)).float()
faces = torch.randn(60, 16) + ages[:, None] / 10
loader = torch.utils.data.DataLoader(
    torch.utils.data.TensorDataset(faces, ages), batch_size=12, shuffle=False
)
model = AgeNet()
optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
for _epoch in range(1):
    for i, (x, age) in enumerate(loader):
        q = label_distribution(age)
        log_p = F.log_softmax(model(x), dim=1)
        loss = F.kl_div(log_p, q, reduction="batchmean")
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        expected = (F.softmax(log_p, 1) * AGES).sum(1)
        mae = (expected - age).abs().mean()
        print(f"iter {i} kl {loss.item():.4f} mae {mae.item():.2f} ln20 {math.log(20):.2f}")
