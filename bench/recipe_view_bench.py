"""What a recipe costs a view: one-channel views of values stored in one run and rebuilt
from recipes in another run of the same script, side by side.

    .venv/bin/python bench/recipe_view_bench.py <run stored> <run with recipes> [--rounds 3]

For each recipe op, the biggest value (of a gradient-holding activation or a gradient,
viewed as the Explore page does: one sample, one channel, 120×40) stored in the first run
and rebuilt in the second is viewed in both, calls alternating between the runs; a value
stored in both is the control. Each round opens both runs afresh through the agent's API
in this process (no ssh: what the recipe adds, not the link) and walks the channels in
order, so consecutive calls read neighbouring channels as a scrolling user does. Prints
median and p90 per run and the ratio of medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from tvis.agent.api import AgentAPI
from tvis.store.reader import RunReader

REPEAT = 40
SCREEN = {"width": 120, "height": 40}


def _cases(stored: RunReader, rebuilt: RunReader) -> list[tuple[str, int, bool, int]]:
    """(label, tensor id, as its gradient, channels) of the values to view."""
    a, b = stored.batch(0), rebuilt.batch(0)
    ta, tb = a.record["tensors"], b.record["tensors"]
    best: dict[str, tuple[int, dict]] = {}
    for i in range(len(tb)):
        entry, old = tb[i], ta[i]
        value, before = entry.get("value") or {}, old.get("value") or {}
        if len(value.get("shape") or []) != 4 or not before:
            continue
        op = value["derive"]["op"] if "derive" in value else None
        label = f"recipe {op} (stored before)" if op and "derive" not in before else None
        if op is None and "derive" not in before and entry.get("of") is None:
            label = "stored in both (control)"
        if label is None:
            continue
        size = before.get("nbytes", 0)
        if label not in best or size > best[label][0]:
            best[label] = (size, entry)
    cases = []
    for label, (_, entry) in sorted(best.items()):
        of = entry.get("of")
        grad = isinstance(of, int)
        cases.append((label, of if grad else entry["id"], grad, int(entry["shape"][1])))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("stored", type=Path)
    parser.add_argument("rebuilt", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = {"stored": args.stored.resolve(), "rebuilt": args.rebuilt.resolve()}
    cases = _cases(RunReader(runs["stored"]), RunReader(runs["rebuilt"]))
    batches = min(len(RunReader(path).batch_ids()) for path in runs.values())
    times: dict[tuple[str, str], list[float]] = {}
    for rnd in range(args.rounds):
        apis = {which: AgentAPI(path.parent) for which, path in runs.items()}
        for rep in range(REPEAT):
            order = ("stored", "rebuilt") if rep % 2 == 0 else ("rebuilt", "stored")
            for label, tensor, grad, channels in cases:
                for which in order:
                    start = time.perf_counter()
                    apis[which].view(
                        runs[which].name,
                        tensor,
                        batch=rnd % batches,
                        grad=grad,
                        sample=0,
                        index=[rep % channels],
                        **SCREEN,
                    )
                    times.setdefault((label, which), []).append(time.perf_counter() - start)
    print("| value | stored: median / p90 | rebuilt: median / p90 | ratio |\n|---|---|---|---|")
    for label, *_ in cases:
        s, r = times[(label, "stored")], times[(label, "rebuilt")]

        def figures(x: list[float]) -> str:
            return f"{statistics.median(x) * 1e3:.2f} / {statistics.quantiles(x, n=10)[8] * 1e3:.2f} ms"

        ratio = statistics.median(r) / statistics.median(s)
        print(f"| {label} | {figures(s)} | {figures(r)} | {ratio:.2f}× |")


if __name__ == "__main__":
    main()
