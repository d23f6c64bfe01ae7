"""Writes a project whose model file is as long as real ones (≈1,500 lines): 60 residual
blocks, each with a docstring, a comment and helpers, and a `train.py` that trains it for
4 batches. For the Source pane's keys on long files (`keys_bench.py --first-keys`).

    python bench/scripts/long_model.py OUT_DIR
    cd OUT_DIR && tvis run --steps 2 --out runs train.py
"""

from __future__ import annotations

import sys
from pathlib import Path

BLOCKS = 60

BLOCK = '''
class Block{i}(nn.Module):
    """Block {i}: a linear layer with a residual, a norm and a gate.

    Long docstrings, comments and helpers are what make real model files long.
    """

    def __init__(self, width: int = 32) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)
        self.scale = {scale}

    def gate(self, x: torch.Tensor) -> torch.Tensor:
        # a gate that is nearly the identity
        return torch.sigmoid(x) * 2.0

    def extra_repr(self) -> str:
        return f"scale={{self.scale}}"

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(self.norm(x))
        y = y * self.gate(y) * self.scale
        return x + 0.1 * y

'''

NET = f"""
class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = nn.Linear(16, 32)
        self.blocks = nn.Sequential(*[globals()[f"Block{{i}}"]() for i in range({BLOCKS})])
        self.out = nn.Linear(32, 4)

    def forward(self, x):
        return self.out(self.blocks(F.relu(self.inp(x))))
"""

TRAIN = """import torch
import torch.nn.functional as F
from model import Net

torch.manual_seed(0)
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.01)
data = [(torch.randn(8, 16), torch.randint(0, 4, (8,))) for _ in range(4)]
for x, y in data:
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    head = '"""A long model file, as real projects have."""\n'
    head += "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"
    blocks = "".join(BLOCK.format(i=i, scale=round(1.0 + i / 100, 2)) for i in range(BLOCKS))
    (out / "model.py").write_text(head + blocks + NET)
    (out / "train.py").write_text(TRAIN)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
