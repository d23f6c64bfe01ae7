# A small MLP regression with the loss written inline, as many tutorials do.
import torch
import torch.nn as nn

torch.manual_seed(0)
X = torch.randn(256, 4)
true_w = torch.tensor([[1.5], [-2.0], [0.5], [3.0]])
Y = X @ true_w + 0.1 * torch.randn(256, 1)

net = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
opt = torch.optim.SGD(net.parameters(), lr=0.05)

for epoch in range(3):
    perm = torch.randperm(X.shape[0])
    for start in range(0, X.shape[0], 32):
        idx = perm[start : start + 32]
        x, y = X[idx], Y[idx]
        pred = net(x)
        loss = (pred - y).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch} loss {loss.item():.4f}")
