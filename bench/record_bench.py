"""What recording costs: `tvis run` against plain `python`, side by side in one run.

Two measurements:

* examples — per-step time ratio with process start-up excluded: bench/step_times.py
  times every optimizer step from inside the process (plainly, or under the recorder) and
  reports the median interval; plus the run's bytes per step.
* scripts — the real-script set (bench/scripts/): whole-process wall time of
  `tvis run --steps 3` over the plain script stopped at the same step, the run's size, and
  the peak resident memory of each side (wide_mlp.py: a ~38M-parameter MLP with Adam).

Runs alternate plain / recorded so drift on a shared machine hits both sides alike.

    .venv/bin/python bench/record_bench.py [--set examples|scripts|all] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
TVIS = str(Path(sys.executable).with_name("tvis"))
EXAMPLES = {
    "image_classifier": ["--workers", "0"],
    "text_lm": [],
    "vit": ["--workers", "0"],
}
WALL = False  # set by --wall
SCRIPTS = [
    "gpt_sample.py",
    "char_gpt.py",
    "lstm_lm.py",
    "lbfgs_fit.py",
    "recommender_sparse.py",
    "wide_mlp.py",
]

# Runs a command and prints its CPU seconds, wall seconds and peak RSS (MB): measured in
# a process of its own, so each figure belongs to one run.
_MEASURE = """
import os, resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
u = resource.getrusage(resource.RUSAGE_CHILDREN)
print(u.ru_utime + u.ru_stime, time.perf_counter() - start, u.ru_maxrss / 1024)
"""


# One intra-op thread on both sides: on a shared 2-core machine torch's default thread pool
# turns small ops into waits for a descheduled thread, which swamps what is measured.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _measure(cmd: list[str], cwd: Path) -> tuple[float, float]:
    """Seconds the command took — CPU time (user + sys) by default, which a busy shared
    machine disturbs far less than wall time; wall time with --wall — and its peak RSS
    in MB."""
    done = subprocess.run(
        [PYTHON, "-c", _MEASURE, *cmd], cwd=cwd, check=True, capture_output=True, text=True, env=ENV
    )
    cpu, wall, peak = (float(v) for v in done.stdout.split())
    return (wall if WALL else cpu), peak


def _run_size(out: Path) -> int:
    return sum(f.stat().st_size for f in out.rglob("*") if f.is_file())


def _step_ms(folder: Path, extra: list[str], steps: int, record: bool) -> tuple[float, int]:
    """Median per-step time (ms) and run bytes, timed inside the process by step_times.py."""
    cmd = [PYTHON, str(ROOT / "bench" / "step_times.py"), "--steps", str(steps)]
    cmd += ["--record"] if record else []
    cmd += [str(folder / "train.py"), "--steps", "100000", *extra]
    done = subprocess.run(cmd, cwd=folder, check=True, capture_output=True, text=True, env=ENV)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return result["median_ms"], result["bytes"]


def bench_example(name: str, extra: list[str], rounds: int, steps: int) -> dict:
    """Each round times a plain and a recorded run back to back (in alternating order);
    the ratio is the median of the rounds' own ratios, so a slow spell on a shared machine
    spoils one round rather than one side."""
    folder = ROOT / "examples" / name
    plain, recorded, ratios, size = [], [], [], 0
    for round_ in range(rounds):
        sides = [False, True] if round_ % 2 == 0 else [True, False]
        times = {}
        for record in sides:
            times[record], got = _step_ms(folder, extra, steps, record)
            size = got or size
        plain.append(times[False])
        recorded.append(times[True])
        ratios.append(times[True] / times[False])
    return {
        "name": name,
        "plain_ms": statistics.median(plain),
        "tvis_ms": statistics.median(recorded),
        "ratio": statistics.median(ratios),
        "spread": (min(ratios), max(ratios)),
        "bytes_per_step": size / steps,
    }


def bench_script(name: str, rounds: int, steps: int = 3) -> dict:
    folder = ROOT / "bench" / "scripts"
    script = str(folder / name)
    plain, recorded, plain_mb, tvis_mb, size = [], [], [], [], 0
    for _ in range(rounds):
        seconds, peak = _measure([PYTHON, script, "--steps", str(steps)], folder)
        plain.append(seconds)
        plain_mb.append(peak)
        out = Path(tempfile.mkdtemp())
        cmd = [TVIS, "run", "--steps", str(steps), "--out", str(out), script]
        seconds, peak = _measure(cmd, folder)
        recorded.append(seconds)
        tvis_mb.append(peak)
        size = _run_size(out)
        shutil.rmtree(out)
    p, r = statistics.median(plain), statistics.median(recorded)
    return {
        "name": name,
        "plain_s": p,
        "tvis_s": r,
        "ratio": r / p,
        "bytes": size,
        "plain_mb": statistics.median(plain_mb),
        "tvis_mb": statistics.median(tvis_mb),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=["examples", "scripts", "all"], default="all")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20, help="steps per example run")
    parser.add_argument("--wall", action="store_true", help="wall time instead of CPU time")
    parser.add_argument("--scripts", nargs="*", help=f"a subset of {', '.join(SCRIPTS)}")
    args = parser.parse_args()
    global WALL
    WALL = args.wall
    clock = "wall" if WALL else "CPU"
    if args.set in ("examples", "all"):
        print(
            f"examples: median per-step wall time over {args.steps} steps; ratio = median of "
            f"{args.rounds} rounds' ratios (range in brackets)"
        )
        print(
            f"{'example':18} {'plain ms':>9} {'tvis ms':>9} {'ratio':>6} {'range':>13} "
            f"{'MB/step':>8}"
        )
        for name, extra in EXAMPLES.items():
            r = bench_example(name, extra, args.rounds, args.steps)
            low, high = r["spread"]
            print(
                f"{r['name']:18} {r['plain_ms']:9.1f} {r['tvis_ms']:9.1f} {r['ratio']:6.2f} "
                f"{f'[{low:.2f}-{high:.2f}]':>13} {r['bytes_per_step'] / 2**20:8.2f}"
            )
    if args.set in ("scripts", "all"):
        print(f"\nreal scripts: whole-process {clock} time, --steps 3, median of {args.rounds}")
        print(
            f"{'script':24} {'plain s':>8} {'tvis s':>8} {'ratio':>6} {'run MB':>7} "
            f"{'RSS plain':>10} {'RSS tvis':>9} {'RSS ratio':>9}"
        )
        rows = [bench_script(name, args.rounds) for name in args.scripts or SCRIPTS]
        for r in rows:
            print(
                f"{r['name']:24} {r['plain_s']:8.2f} {r['tvis_s']:8.2f} {r['ratio']:6.2f} "
                f"{r['bytes'] / 2**20:7.1f} {r['plain_mb']:8.0f}MB {r['tvis_mb']:7.0f}MB "
                f"{r['tvis_mb'] / r['plain_mb']:9.2f}"
            )
        ratios = sorted(r["ratio"] for r in rows)
        print(f"median ratio {statistics.median(ratios):.2f}, worst {ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
