"""What issue 28's defaults cost per step, side by side (see README "Issue 28").

- ``project``: a script in ``projects/exp/`` of a git repository with hundreds of modules,
  whose model calls helpers from the repository's package in every block. Arms: plain
  python; the old default project (the script's folder: the helpers run untraced); the new
  default (the work tree plus imported user code: every helper call is recorded).
- ``attention``: a nanoGPT-style GPT whose attention runs in
  ``F.scaled_dot_product_attention``. Arms: plain; recorded with ``--no-attention``;
  recorded with the weights recomputed from q·k for the kept samples.

Each round runs every arm once in a fresh process (``bench/step_times.py``, median step
interval after warm-up), in rotating order; the figure is each arm's median over rounds and
its ratio to plain per round, medianed.

    .venv/bin/python bench/wild_bench.py --rounds 5 [--only project|attention]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}

# A repository of MODULES helper modules; the model's BLOCKS blocks each call two of them.
MODULES = 300
BLOCKS = 12

HELPER = """
import torch


def scale_{i}(x):
    return x * {scale}


def gate_{i}(x):
    return torch.sigmoid(x) * x
"""

REPO_MODEL = """
import importlib

import torch.nn as nn

HELPERS = [importlib.import_module(f"corelib.ops.h{{i}}") for i in range({modules})]


class Block(nn.Module):
    def __init__(self, i, dim):
        super().__init__()
        self.fc = nn.Linear(dim, dim)
        self.h = HELPERS[(i * 37) % len(HELPERS)]
        self.i = (i * 37) % len(HELPERS)

    def forward(self, x):
        y = getattr(self.h, f"scale_{{self.i}}")(self.fc(x))
        return x + getattr(self.h, f"gate_{{self.i}}")(y)


class Net(nn.Module):
    def __init__(self, dim=64, blocks={blocks}):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(i, dim) for i in range(blocks)])
        self.head = nn.Linear(dim, 10)

    def forward(self, x):
        return self.head(self.blocks(x))
"""

REPO_SCRIPT = """
import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
import torch
import torch.nn.functional as F
from corelib.model import Net

torch.manual_seed(0)
model = Net()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
for step in range(1000):
    x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
    loss = F.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""

GPT_SCRIPT = """
import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
V, T, C, H, L, B = 65, 128, 128, 4, 4, 16


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn, self.c_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (z.view(b, t, H, c // H).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(C), Attention(), nn.LayerNorm(C)
        self.mlp = nn.Sequential(nn.Linear(C, 4 * C), nn.GELU(), nn.Linear(4 * C, C))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.Sequential(*[Block() for _ in range(L)])
        self.ln_f, self.lm_head = nn.LayerNorm(C), nn.Linear(C, V, bias=False)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        return self.lm_head(self.ln_f(self.blocks(x)))


model = GPT()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.randint(0, V, (10000,))
for step in range(1000):
    ix = torch.randint(len(data) - T - 1, (B,))
    x = torch.stack([data[i : i + T] for i in ix])
    y = torch.stack([data[i + 1 : i + T + 1] for i in ix])
    loss = F.cross_entropy(model(x).view(-1, V), y.view(-1))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
"""


def _make_repo(root: Path) -> Path:
    (root / ".git").mkdir(parents=True)
    ops = root / "corelib" / "ops"
    ops.mkdir(parents=True)
    (root / "corelib" / "__init__.py").write_text("")
    (ops / "__init__.py").write_text("")
    for i in range(MODULES):
        (ops / f"h{i}.py").write_text(HELPER.format(i=i, scale=1 + i / 1000))
    (root / "corelib" / "model.py").write_text(REPO_MODEL.format(modules=MODULES, blocks=BLOCKS))
    script = root / "projects" / "exp" / "train.py"
    script.parent.mkdir(parents=True)
    script.write_text(REPO_SCRIPT)
    return script


def _step_ms(args: list[str], steps: int) -> float:
    cmd = [sys.executable, str(HERE / "step_times.py"), "--steps", str(steps), *args]
    done = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=900)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])["median_ms"]


def _compare(title: str, arms: dict[str, list[str]], rounds: int, steps: int) -> None:
    times: dict[str, list[float]] = {name: [] for name in arms}
    names = list(arms)
    for r in range(rounds):
        for name in names[r % len(names) :] + names[: r % len(names)]:
            times[name].append(_step_ms(arms[name], steps))
    plain = times[names[0]]
    print(f"\n{title}\n| arm | ms/step (median) | ratio to plain (median of rounds) |")
    print("|---|---:|---:|")
    for name in names:
        ratio = statistics.median(t / p for t, p in zip(times[name], plain, strict=True))
        print(f"| {name} | {statistics.median(times[name]):.1f} | {ratio:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--only", choices=["project", "attention"])
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvis-wild-bench-") as tmp:
        if opts.only in (None, "project"):
            script = str(_make_repo(Path(tmp) / "repo"))
            root = str(Path(tmp) / "repo")
            arms = {
                "plain": [script],
                "old default (script folder)": ["--record", script],
                "new default (work tree + user code)": ["--record", "--project-root", root, script],
            }
            title = f"project tracing: {MODULES} modules, {BLOCKS} blocks × 2 helper calls"
            _compare(title, arms, opts.rounds, opts.steps)
        if opts.only in (None, "attention"):
            gpt = Path(tmp) / "gpt" / "train.py"
            gpt.parent.mkdir()
            gpt.write_text(GPT_SCRIPT)
            arms = {
                "plain": [str(gpt)],
                "recorded, --no-attention": ["--without", "attention", "--record", str(gpt)],
                "recorded, attention recomputed": ["--record", str(gpt)],
            }
            _compare("SDPA attention recomputation (GPT, 4 layers)", arms, opts.rounds, opts.steps)


if __name__ == "__main__":
    main()
