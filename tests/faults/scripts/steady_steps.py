"""A plain training script that says where it is, for kill -9 tests.

Prints ``stepping K`` before each optimizer step and ``stepped K`` after it; with
``PAUSE_AT=forward:K`` or ``PAUSE_AT=stepped:K`` it stops there (sleeping) so a test can
kill it at that exact moment.
"""

import os
import time

import torch
import torch.nn.functional as F
from torch import nn

pause_at = os.environ.get("PAUSE_AT", "")


class Wide(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(384, 384)
        self.b = nn.Linear(384, 384)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if pause_at == f"forward:{step}":
            print(f"in forward {step}", flush=True)
            time.sleep(60)
        return self.b(torch.relu(self.a(x)))


torch.manual_seed(0)
model = Wide()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
for step in range(40):
    x = torch.randn(32, 384)
    loss = F.mse_loss(model(x), x)
    opt.zero_grad()
    loss.backward()
    print(f"stepping {step}", flush=True)
    opt.step()
    print(f"stepped {step}", flush=True)
    if pause_at == f"stepped:{step}":
        time.sleep(60)
    time.sleep(0.02)
