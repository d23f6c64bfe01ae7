"""A forward that calls softmax without ``dim``: torch warns at the user's line."""

import torch
from torch import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return torch.nn.functional.softmax(self.fc(x))  # UserWarning: implicit dim


torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(3, 4)).sum().backward()
    opt.step()
