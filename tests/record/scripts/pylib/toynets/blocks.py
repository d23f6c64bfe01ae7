import torch
from torch import nn


def rms_norm(x, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(dim=-1, keepdim=True) + eps)


class ResidualBlock(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)

    def forward(self, x):
        return x + torch.relu(self.fc(rms_norm(x)))


class ResidualMLP(nn.Module):
    def __init__(self, dim_in, dim, dim_out, depth=2):
        super().__init__()
        self.inp = nn.Linear(dim_in, dim)
        self.blocks = nn.Sequential(*[ResidualBlock(dim) for _ in range(depth)])
        self.out = nn.Linear(dim, dim_out)

    def forward(self, x):
        return self.out(self.blocks(self.inp(x)))
