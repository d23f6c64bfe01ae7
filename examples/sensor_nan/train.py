"""Classify sensor recordings by their dominant frequency band, for a few thousand steps.

The recordings are synthesised (sines in four bands, with drift and noise), so nothing is
downloaded. Like real sensor data, a few of them are glitched:

    python train.py                 # 3,000 steps
    python train.py --steps 300 --print-every 50
"""

import argparse
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

BANDS = [(1.0, 3.0), (4.0, 7.0), (8.0, 13.0), (14.0, 30.0)]


class Recordings(Dataset):
    """``length`` one-second recordings at 256 Hz; the label is the frequency band."""

    classes = ["delta", "theta", "alpha", "beta"]

    def __init__(self, length: int, seed: int, glitches: int = 2) -> None:
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, len(BANDS), (length,), generator=g)
        lo = torch.tensor([b[0] for b in BANDS])[self.labels]
        hi = torch.tensor([b[1] for b in BANDS])[self.labels]
        self.freq = lo + (hi - lo) * torch.rand(length, generator=g)
        self.phase = 2 * math.pi * torch.rand(length, generator=g)
        self.gain = 0.5 + torch.rand(length, generator=g)
        self.noise_seed = torch.randint(0, 2**31 - 1, (length,), generator=g)
        # A stuck sensor reports the same value for a whole recording.
        self.stuck = set(torch.randint(0, length, (glitches,), generator=g).tolist())

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, i: int):
        t = torch.arange(256) / 256.0
        if i in self.stuck:
            return torch.full((1, 256), 0.73), self.labels[i]
        noise = torch.randn(256, generator=torch.Generator().manual_seed(int(self.noise_seed[i])))
        wave = self.gain[i] * torch.sin(2 * math.pi * self.freq[i] * t + self.phase[i])
        drift = 0.3 * t * self.gain[i]
        return (wave + drift + 0.2 * noise).unsqueeze(0), self.labels[i]


def standardize(x: torch.Tensor) -> torch.Tensor:
    """Zero mean, unit variance per recording (sensors differ in gain and offset)."""
    centred = x - x.mean(dim=-1, keepdim=True)
    return centred / centred.std(dim=-1, keepdim=True)


class BandNet(nn.Module):
    def __init__(self, classes: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv1d(1, 8, 9, padding=4)
        self.conv2 = nn.Conv1d(8, 16, 7, stride=2, padding=3)
        self.conv3 = nn.Conv1d(16, 16, 5, stride=2, padding=2)
        self.head = nn.Linear(16, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = standardize(x)
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.relu(self.conv3(x))
        return self.head(x.mean(dim=-1))


def schedule(step: int, warmup: int, total: int) -> float:
    if step < warmup:
        return (step + 1) / warmup
    return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=27)
    parser.add_argument("--print-every", type=int, default=250)
    args = parser.parse_args()
    torch.manual_seed(args.seed)

    data = Recordings(length=100_000, seed=args.seed)
    loader = DataLoader(data, batch_size=args.batch_size, shuffle=True)
    model = BandNet(len(data.classes))
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: schedule(s, warmup=200, total=args.steps)
    )

    step, start = 0, time.perf_counter()
    while step < args.steps:
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            step += 1
            if step % args.print_every == 0:
                rate = (time.perf_counter() - start) / step * 1e3
                print(f"step {step:5d}  loss {loss.item():.4f}  {rate:.1f} ms/step", flush=True)
            if step == args.steps:
                break
    print(f"done: {step} steps in {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
