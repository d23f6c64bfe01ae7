"""A plain training script that builds a broadcast mask far larger than memory (as
attention masks are built with ``expand``) and hands it to a function of its own."""

import torch
from torch import nn

HUGE = 1 << 20  # 4 TB of float32 if it were ever materialised


def add_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x + mask[: x.shape[0], : x.shape[1]]


class Broadcast(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        mask = torch.ones(1).expand(HUGE, HUGE)
        return add_mask(x * self.scale, mask)


model = Broadcast()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    loss = model(torch.ones(2, 3)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
