"""A plain training script with wide layers (about 1.5 MB of parameter records per step).

Prints each loss exactly; exits with code 3 so a test can tell the script's own exit code
from tvis's.
"""

import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Dropout(0.1), nn.Linear(256, 256))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
for _ in range(steps):
    x = torch.randn(64, 256)
    loss = F.mse_loss(model(x), x)
    opt.zero_grad()
    loss.backward()
    opt.step()
    print(f"loss {loss.item()!r}", flush=True)
sys.exit(3)
