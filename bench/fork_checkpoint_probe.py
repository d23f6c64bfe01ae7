"""What an in-process rewind would cost: a ``fork()`` checkpoint of a training process.

The rejected alternative to `--watch`'s re-run (README "Long runs"): fork the training
process every few steps and keep the latest child parked, so the anomalous step could be
replayed from it. This trains examples/sensor_nan for a while, then times, alternately,
steps with no checkpoint and steps right after a fork (the parent pays the fork and then the
copy-on-write faults of every page it writes), with the process's resident size.

    OMP_NUM_THREADS=1 python bench/fork_checkpoint_probe.py --steps 60
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import statistics
import sys
import time
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sensor_nan"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    sys.path.insert(0, str(EXAMPLE))
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader
    from train import BandNet, Recordings

    torch.manual_seed(0)
    data = Recordings(length=100_000, seed=27)
    loader = iter(DataLoader(data, batch_size=32, shuffle=True))
    model = BandNet(4)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

    def step() -> float:
        start = time.perf_counter()
        x, y = next(loader)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return time.perf_counter() - start

    for _ in range(20):
        step()
    plain, forked, fork_calls = [], [], []
    parked = None
    for i in range(args.steps):
        if i % 2:
            plain.append(step())
            continue
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:  # the checkpoint: parked until killed
            signal.pause()
            os._exit(0)
        fork_calls.append(time.perf_counter() - start)
        if parked is not None:
            os.kill(parked, signal.SIGKILL)
            os.waitpid(parked, 0)
        parked = pid
        forked.append(step() + fork_calls[-1])
    os.kill(parked, signal.SIGKILL)
    os.waitpid(parked, 0)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"resident size {rss:.0f} MB")
    print(f"plain step {statistics.median(plain) * 1e3:.2f} ms (median of {len(plain)})")
    print(f"fork() itself {statistics.median(fork_calls) * 1e3:.2f} ms")
    print(f"step with a fork before it {statistics.median(forked) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
