"""What SGD's prediction costs the Weights page: a parameter's weight and Δw viewed in a
run whose Δw is XOR-ed against the weight (format 4, read by that tvis) and in one whose
Δw is XOR-ed against SGD's prediction (format 5, read by this one), side by side.

    .venv/bin/python bench/param_view_bench.py <run before> <run after> \\
        --before-code <checkout of the tvis before> [--rounds 3]

Both runs are of the same script. For the biggest kept parameter and a middling one, at
the last step, the Weights page's request (``kernel_grid`` of 16 × 16 kernels, or
``matrix``) is timed cold — a fresh agent API, so every XOR chain is decoded from the
blob: the weight back through earlier steps, the Δw through its prediction — then warm
(the same request again), and for the weights page's step-by-step walk: each step's Δw
in turn, through one API. Each round runs one process per side (the before side with
``--before-code`` first on its path), sides alternating. Prints medians per side and
their ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPEAT = 10


def _params(run, step: int) -> list[tuple[str, int]]:
    """(name, dims) of the biggest kept parameter and a middling one."""
    chunk = run.step(step)
    params = [p for p in chunk.record["params"] if p.get("kept")]
    by_size = sorted(params, key=lambda p: chunk.tensor(p["update"])["value"]["nbytes"])
    return [(p["name"], len(p["shape"])) for p in (by_size[-1], by_size[len(by_size) // 2])]


def _ask(api, run: str, step: int, name: str, dims: int, which: str) -> None:
    if dims == 4:
        api.kernel_grid(run, step, name, which=which, filters=16, channels=16)
    else:
        api.matrix(run, step, name, which=which, width=120, height=40)


def measure(path: Path, params: list[tuple[str, int]]) -> dict[str, list[float]]:
    """Seconds per request of each case, read by the tvis this process imports."""
    from tvis.agent.api import AgentAPI
    from tvis.store.reader import RunReader

    steps = RunReader(path).step_ids()
    times: dict[str, list[float]] = {}
    for _ in range(REPEAT):
        for name, dims in params:
            for which in ("weight", "update"):
                api = AgentAPI(path.parent)
                for temp in ("cold", "warm"):
                    start = time.perf_counter()
                    _ask(api, path.name, steps[-1], name, dims, which)
                    key = f"{name}|{which}|{temp}"
                    times.setdefault(key, []).append(time.perf_counter() - start)
            api = AgentAPI(path.parent)
            start = time.perf_counter()
            for step in steps:
                _ask(api, path.name, step, name, dims, "update")
            times.setdefault(f"{name}|update|walk", []).append(time.perf_counter() - start)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--before-code", type=Path, help="a checkout of the tvis before")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--one", help=argparse.SUPPRESS)  # a child: the params as JSON
    args = parser.parse_args()
    if args.one:  # a child: measure the run given as "before"
        print(json.dumps(measure(args.before.resolve(), json.loads(args.one))))
        return
    from tvis.store.reader import RunReader

    after = RunReader(args.after.resolve())
    params = json.dumps(_params(after, after.step_ids()[-1]))
    sides = {"before": (args.before.resolve(), args.before_code), "after": (args.after, None)}
    times: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    for rnd in range(args.rounds):
        order = ("before", "after") if rnd % 2 == 0 else ("after", "before")
        for side in order:
            path, code = sides[side]
            env = dict(os.environ)
            if code is not None:
                env["PYTHONPATH"] = os.pathsep.join(
                    [str(code.resolve()), env.get("PYTHONPATH", "")]
                )
            done = subprocess.run(
                [sys.executable, __file__, str(Path(path).resolve()), str(path), "--one", params],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            for key, got in json.loads(done.stdout).items():
                times[side].setdefault(key, []).extend(got)
    print(f"{args.rounds} rounds of {REPEAT} calls, one process per side and round, ms")
    print("| parameter | value | request | before: median | after: median | ratio |")
    print("|---|---|---|---|---|---|")
    for key in times["after"]:
        name, which, temp = key.split("|")
        before = statistics.median(times["before"][key]) * 1e3
        after = statistics.median(times["after"][key]) * 1e3
        label = "Δw" if which == "update" else which
        temp = "each step in turn" if temp == "walk" else temp
        print(
            f"| `{name}` | {label} | {temp} | {before:.1f} | {after:.1f} | {after / before:.2f}× |"
        )


if __name__ == "__main__":
    main()
