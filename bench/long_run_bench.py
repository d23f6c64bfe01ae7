"""Long runs: `tvis run --from-step` and `--watch` against plain `python`, side by side.

    python bench/long_run_bench.py fast-forward --rounds 3 --steps 1000
    python bench/long_run_bench.py watch --rounds 3 --steps 2000
    python bench/long_run_bench.py anomaly
    python bench/long_run_bench.py per-step

``fast-forward``: whole process (wall and CPU time) of ``python train.py --steps N`` against
``tvis run --from-step N --steps 1 train.py --steps N``: the script ends at step N, so the
tvis side is the fast-forward plus installing the recorder, nothing recorded. ``watch``: the
whole process of ``tvis run --watch`` over a run without anomaly against plain. Each round
runs both sides back to back in alternating order; the ratio is the median of the rounds'
ratios (this 2-core VM is shared; a slow spell spoils one round, not one side).
``anomaly``: the example whose loss goes NaN at step 2295: plain to that step, the watch run,
the re-run that records it. ``per-step``: the watch's own work per step (its hooks called on
a model with gradients in place), for models of 10 k to 10 M parameters.
All on examples/sensor_nan (a plain step ≈ 6–12 ms here), with ``OMP_NUM_THREADS=1``.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "sensor_nan"
TVIS = str(Path(sys.executable).with_name("tvis"))
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _timed(command: list[str]) -> tuple[float, float]:
    """Wall and CPU seconds of one process (children's CPU included)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        command, cwd=EXAMPLE, env=ENV, check=True, stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _side_by_side(plain: list[str], tvis: list[str], rounds: int) -> None:
    rows = []
    for r in range(rounds):
        order = [("plain", plain), ("tvis", tvis)]
        if r % 2:
            order.reverse()
        got = {name: _timed(cmd) for name, cmd in order}
        rows.append(got)
        print(
            f"round {r}: plain {got['plain'][0]:.2f} s wall {got['plain'][1]:.2f} s cpu · "
            f"tvis {got['tvis'][0]:.2f} s wall {got['tvis'][1]:.2f} s cpu · "
            f"ratio wall {got['tvis'][0] / got['plain'][0]:.3f} cpu "
            f"{got['tvis'][1] / got['plain'][1]:.3f}",
            flush=True,
        )
    for i, what in ((0, "wall"), (1, "cpu")):
        ratios = [g["tvis"][i] / g["plain"][i] for g in rows]
        print(
            f"median {what} ratio {statistics.median(ratios):.3f} "
            f"(range {min(ratios):.3f}–{max(ratios):.3f})"
        )


def fast_forward(rounds: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as out:
        plain = [sys.executable, "train.py", "--steps", str(steps)]
        tvis = [TVIS, "run", "--out", out, "--from-step", str(steps), "--steps", "1"]
        _side_by_side(plain, [*tvis, "train.py", "--steps", str(steps)], rounds)


def watch(rounds: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as out:
        plain = [sys.executable, "train.py", "--steps", str(steps)]
        tvis = [TVIS, "run", "--out", out, "--watch", "train.py", "--steps", str(steps)]
        _side_by_side(plain, tvis, rounds)


def anomaly() -> None:
    with tempfile.TemporaryDirectory() as out:
        plain = _timed([sys.executable, "train.py", "--steps", "2295"])
        start = time.perf_counter()
        done = subprocess.run(
            [TVIS, "run", "--out", out, "--watch", "train.py"],
            cwd=EXAMPLE, env=ENV, capture_output=True, text=True,
        )  # fmt: skip
        whole = time.perf_counter() - start
    said = [line for line in done.stderr.splitlines() if "watched" in line or "re-run took" in line]
    print(f"plain to step 2295: {plain[0]:.1f} s")
    print(f"tvis run --watch, whole: {whole:.1f} s ({whole / plain[0]:.2f}× plain)")
    print("\n".join(said))


def per_step() -> None:
    import torch

    from tvis.record.late import LateStart
    from tvis.record.watch import Watch

    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.0)
    late = LateStart(None, 10**9)
    times = []
    for _ in range(20_000):
        start = time.perf_counter()
        late._pre(opt, (), {})
        late._post(opt, (), {})
        times.append(time.perf_counter() - start)
    print(f"--from-step fast-forward: {statistics.median(times) * 1e6:.1f} µs per step")

    for params, tensors in ((10_000, 4), (100_000, 8), (1_000_000, 16), (10_000_000, 32)):
        width = int((params / tensors) ** 0.5)
        layers = [torch.nn.Linear(width, width, bias=False) for _ in range(tensors)]
        model = torch.nn.Sequential(*layers)
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        for p in model.parameters():
            p.grad = torch.randn_like(p)
        loss = torch.tensor(1.0)
        w = Watch(None, ["nan", "spike"])
        w.primary = id(opt)
        rounds = 200 if params <= 1_000_000 else 30
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            w._losses.append((loss, 1.0))
            w.step_pre(opt, (), {})
            w.step_post(opt, (), {})
            times.append(time.perf_counter() - start)
        n = sum(p.numel() for p in model.parameters())
        print(
            f"{n:>10,} params in {tensors:>2} tensors: "
            f"{statistics.median(times) * 1e6:8.0f} µs per step (median of {rounds})"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("what", choices=["fast-forward", "watch", "anomaly", "per-step"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    if args.what == "fast-forward":
        fast_forward(args.rounds, args.steps)
    elif args.what == "watch":
        watch(args.rounds, args.steps)
    elif args.what == "anomaly":
        anomaly()
    else:
        torch_threads = os.environ.get("OMP_NUM_THREADS")
        if torch_threads is None:
            os.environ["OMP_NUM_THREADS"] = "1"
        per_step()


if __name__ == "__main__":
    main()
