"""Raw tensors, no nn.Module, no optimizer, with torch.distributed imported (it holds the
deprecated ``reduce_op``, which warns when any attribute of it is read)."""

import torch
import torch.distributed  # noqa: F401

torch.manual_seed(0)
w = torch.randn(4, 1, requires_grad=True)
for _ in range(3):
    loss = (torch.randn(8, 4) @ w).square().mean()
    loss.backward()
    with torch.no_grad():
        w -= 0.1 * w.grad
    w.grad = None
