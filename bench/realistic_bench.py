"""What recording costs per step on realistic models, under each Python, side by side.

ResNet-18 at 224×224, batch 32 (bench/scripts/resnet18_224.py) and a 12-layer GPT at
sequence length 256 (bench/scripts/gpt12_256.py), each timed per optimizer step from inside
the process by bench/step_times.py, plainly and under the recorder at default settings
(Grad-CAM on). Every round runs plain and recorded back to back, in alternating order, for
each model and each interpreter, so a slow spell on a shared machine spoils one round rather
than one side; ratios are medians of the rounds' own ratios. Peak resident memory is each
process's VmHWM (ru_maxrss).

    .venv/bin/python bench/realistic_bench.py --rounds 3 \
        --pythons .venv/bin/python .venv313/bin/python
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = {"resnet18_224": [], "gpt12_256": []}

# The child's own peak RSS, read after it ends (RUSAGE_CHILDREN of a process with one child).
_MEASURE = """
import resource, subprocess, sys
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
if done.returncode:
    sys.exit(done.stderr[-2000:])
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(done.stdout.strip().splitlines()[-1], peak)
"""

# One intra-op thread on both sides: on a shared 2-core machine torch's default thread pool
# turns ops into waits for a descheduled thread, which swamps what is measured.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_once(python: str, model: str, steps: int, record: bool) -> dict:
    """Median wall and CPU ms per step, and peak RSS (MB), of one fresh process."""
    cmd = [python, str(ROOT / "bench" / "step_times.py"), "--steps", str(steps)]
    cmd += ["--record"] if record else []
    cmd += [str(ROOT / "bench" / "scripts" / f"{model}.py"), "--steps", "100000"]
    cmd += MODELS[model]
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *cmd],
        cwd=ROOT / "bench" / "scripts",
        check=True,
        capture_output=True,
        text=True,
        env=ENV,
    )
    line, _, peak = done.stdout.strip().rpartition(" ")
    return {**json.loads(line), "peak_mb": float(peak)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=5, help="optimizer steps per run")
    parser.add_argument("--pythons", nargs="+", default=[sys.executable])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    args = parser.parse_args()
    # Absolute, not resolved: a venv's python is a link whose own path selects the venv.
    args.pythons = [os.path.abspath(p) for p in args.pythons]
    results: dict[tuple[str, str], dict[bool, list[dict]]] = {}
    for round_ in range(args.rounds):
        for python in args.pythons:
            for model in args.models:
                sides = [False, True] if round_ % 2 == 0 else [True, False]
                got = results.setdefault((python, model), {False: [], True: []})
                for record in sides:
                    got[record].append(run_once(python, model, args.steps, record))
                p, r = got[False][-1], got[True][-1]
                print(
                    f"round {round_ + 1} {Path(python).parent.parent.name}/{Path(python).name}"
                    f" {model}: plain {p['median_ms']:.0f} ms ({p['cpu_ms']:.0f} CPU), tvis "
                    f"{r['median_ms']:.0f} ms ({r['cpu_ms']:.0f} CPU), load "
                    f"{os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    print(
        f"\n{'python':24} {'model':14} {'plain ms':>9} {'tvis ms':>8} {'ratio':>6} "
        f"{'range':>11} {'CPU ratio':>9} {'RSS plain':>9} {'RSS tvis':>8} {'RSS ratio':>9}"
    )
    for (python, model), got in results.items():
        plain, rec = got[False], got[True]
        wall = [r["median_ms"] / p["median_ms"] for p, r in zip(plain, rec, strict=True)]
        cpu = [r["cpu_ms"] / p["cpu_ms"] for p, r in zip(plain, rec, strict=True)]
        mem = [r["peak_mb"] / p["peak_mb"] for p, r in zip(plain, rec, strict=True)]
        version = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
        ).stdout.strip()
        print(
            f"{'Python ' + version:24} {model:14} "
            f"{statistics.median(p['median_ms'] for p in plain):9.0f} "
            f"{statistics.median(r['median_ms'] for r in rec):8.0f} "
            f"{statistics.median(wall):6.2f} {f'{min(wall):.2f}-{max(wall):.2f}':>11} "
            f"{statistics.median(cpu):9.2f} "
            f"{statistics.median(p['peak_mb'] for p in plain):7.0f}MB "
            f"{statistics.median(r['peak_mb'] for r in rec):6.0f}MB "
            f"{statistics.median(mem):9.2f}"
        )
    print(f"load average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")


if __name__ == "__main__":
    main()
