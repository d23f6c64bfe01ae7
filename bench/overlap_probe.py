"""How much two threads of tensor work overlap on this machine: the ceiling on what the
recorder's writer thread can take off a training step.

The same work (dot products, one intra-op thread, the interpreter lock released inside each
op) runs on one thread, then twice over on two threads at once, for ops of several sizes.
Overlap 1.0: two threads take as long as one (two free cores); 0.0: twice as long (no
parallelism); below 0: worse than taking turns (each short op hands the interpreter lock
back and forth).

    python bench/overlap_probe.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time

import torch

# (elements per op, ops per thread): about the same work per row.
SIZES = ((1 << 14, 20000), (1 << 16, 5000), (1 << 18, 1200), (1 << 21, 150))


def _seconds(threads: int, x: torch.Tensor, ops: int) -> float:
    def work() -> None:
        for _ in range(ops):
            x.dot(x)

    workers = [threading.Thread(target=work) for _ in range(threads)]
    start = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    print(f"{'op size':>10} {'one thread':>11} {'two threads':>12} {'overlap':>8}")
    for numel, ops in SIZES:
        x = torch.randn(numel)
        _seconds(1, x, ops)  # warm the pages and the kernels
        one, two = [], []
        for _ in range(opts.rounds):  # alternated, so drift hits both alike
            one.append(_seconds(1, x, ops))
            two.append(_seconds(2, x, ops))
        t1, t2 = statistics.median(one), statistics.median(two)
        print(
            f"{numel * 4 >> 10:>7} KB {t1 * 1e3:>8.1f} ms {t2 * 1e3:>9.1f} ms {2 - t2 / t1:>8.2f}"
        )


if __name__ == "__main__":
    main()
