"""What recording a 2-rank DDP job costs: `torchrun ... -m tvis run` against plain `torchrun`.

Whole-process time of the launch (torchrun, both ranks, start-up included) for the same
number of optimizer steps, plainly and recorded with the default (rank 0 full, rank 1
light) and with `--ranks all`; and the bytes each rank's run folder holds. Launches
alternate so drift on a shared machine hits every side alike. Reports wall time and the
CPU time (user + sys) of the launch and its workers, which a busy machine disturbs less.

    .venv/bin/python bench/ddp_bench.py [--rounds 3] [--steps 3] [--batch 64]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "scripts" / "ddp_convnet.py"
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
# One intra-op thread per rank, as torchrun itself defaults to: two ranks on a small
# machine would otherwise oversubscribe its cores and measure the scheduler.
ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def _port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def _launch(tvis: list[str] | None, script_args: list[str], cwd: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one torchrun launch of both ranks."""
    head = [TORCHRUN, "--nproc-per-node", "2", "--master-port", _port()]
    command = [*head, str(SCRIPT)] if tvis is None else [*head, "-m", "tvis", "run", *tvis]
    if tvis is not None:
        command += [str(SCRIPT)]
    command += script_args
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        command, cwd=cwd, env=ENV, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _rank_bytes(out: Path) -> list[int]:
    (group,) = [p for p in out.iterdir() if p.is_dir()]
    sizes = []
    for rank in sorted(group.glob("rank*")):
        sizes.append(sum(f.stat().st_size for f in rank.rglob("*") if f.is_file()))
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--batch", type=int, default=64)
    args = parser.parse_args()
    script_args = ["--steps", str(args.steps), "--batch", str(args.batch)]
    sides = {"plain": None, "default": [], "all ranks full": ["--ranks", "all"]}
    times: dict[str, list[tuple[float, float]]] = {side: [] for side in sides}
    sizes: dict[str, list[int]] = {}
    work = Path(tempfile.mkdtemp(prefix="tvis-ddp-bench-"))
    try:
        for _ in range(args.rounds):
            for side, extra in sides.items():
                out = work / "runs"
                tvis = None if extra is None else ["--steps", str(args.steps), "--out", str(out)]
                times[side].append(
                    _launch(None if tvis is None else tvis + extra, script_args, work)
                )
                if extra is not None:
                    sizes[side] = _rank_bytes(out)
                    shutil.rmtree(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    plain_wall = statistics.median(t[0] for t in times["plain"])
    plain_cpu = statistics.median(t[1] for t in times["plain"])
    print(f"2-rank DDP convnet, {args.steps} steps, batch {args.batch} per rank, gloo on CPU")
    print(f"median of {args.rounds} launches; whole process (torchrun start-up included)\n")
    print(f"{'':16} {'wall s':>8} {'ratio':>6} {'cpu s':>8} {'ratio':>6}  bytes per rank")
    for side in sides:
        wall = statistics.median(t[0] for t in times[side])
        cpu = statistics.median(t[1] for t in times[side])
        per_rank = ", ".join(f"r{i} {n / 2**20:.2f} MB" for i, n in enumerate(sizes.get(side, [])))
        print(
            f"{side:16} {wall:8.2f} {wall / plain_wall:6.2f} {cpu:8.2f} {cpu / plain_cpu:6.2f}  "
            f"{per_rank}"
        )


if __name__ == "__main__":
    main()
