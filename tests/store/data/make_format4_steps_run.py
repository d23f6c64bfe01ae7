"""How format4_steps_run and format4_steps_expected.npz were made, with tvis at format 4
(main at bf01181): a Linear trained 3 steps by SGD with momentum, recorded with every bit
kept, and the values torch had (each step's weight before it and Δw) beside it.

    python make_format4_steps_run.py OUT    # then OUT/run and OUT/expected.npz
"""

import sys
from pathlib import Path

import numpy as np
import torch
from torch import nn

from tvis.record.builder import Settings
from tvis.record.runner import record

out = Path(sys.argv[1])
torch.manual_seed(0)
model = nn.Linear(6, 4)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-3)
seen = {}
before = {}


def pre(optimizer, args, kwargs):
    before.update({n: p.detach().clone() for n, p in model.named_parameters()})


def post(optimizer, args, kwargs):
    i = len(seen) // 4
    for n, p in model.named_parameters():
        seen[f"{i}/{n}/weight"] = before[n].numpy()
        seen[f"{i}/{n}/update"] = (p.detach() - before[n]).numpy()


opt.register_step_pre_hook(pre)
opt.register_step_post_hook(post)


def train():
    torch.manual_seed(1)
    for _ in range(10):
        opt.zero_grad()
        nn.functional.mse_loss(model(torch.randn(5, 6)), torch.randn(5, 4)).backward()
        opt.step()


outcome = record(train, Settings(steps=3, mantissa_bits=None), Path.cwd(), out / "run")
print(outcome.status, outcome.run_dir)
np.savez(out / "expected.npz", **{k: v for k, v in seen.items() if int(k.split("/")[0]) < 3})
