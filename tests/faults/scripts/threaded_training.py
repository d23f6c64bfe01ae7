"""A plain training script whose loop runs on a worker thread; the main thread waits.

Prints each loss exactly, and "after training" once the thread is joined.
"""

import threading

import torch
import torch.nn.functional as F
from torch import nn


def helper_scale(x: torch.Tensor) -> torch.Tensor:
    return x * 0.5


def train() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 12), nn.ReLU(), nn.Dropout(0.2), nn.Linear(12, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(8):
        x, y = torch.randn(16, 6), torch.randint(0, 2, (16,))
        loss = F.cross_entropy(model(helper_scale(x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        print(f"loss {loss.item()!r}", flush=True)


worker = threading.Thread(target=train, name="trainer")
worker.start()
worker.join()
print("after training", flush=True)
