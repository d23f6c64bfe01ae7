"""Where a recorded step's time goes: py-spy's raw samples of a recorded run, by part of tvis.

Each sample is attributed to the innermost tvis frame on its stack (frames that only pass
the call on to torch — the op mode's ``func(*args)``, the patched ``backward`` — count as
the script's own work), and that frame's file to a part: hooks, tracing, copies, Grad-CAM,
attention, statistics, writer. Only samples inside the script's training loop (its lines
START-END) and the writer thread's count, so start-up does not.

    py-spy record -r 50 -f raw --threads -o /tmp/prof.txt -- \\
        .venv/bin/python bench/step_times.py --record --steps 5 bench/scripts/gpt12_256.py
    .venv/bin/python bench/cost_breakdown.py /tmp/prof.txt --loop gpt12_256.py:138-150 --steps 5
"""

from __future__ import annotations

import argparse
import re
from collections import Counter

# Frames that hand the work to torch: their time is the script's.
PASS_THROUGH = {
    "ops.py:86",
    "ops.py:90",
    "ops.py:97",
    "ops.py:99",
    "steps.py:53",
    "attention.py:166",
    "loss.py:82",
    "session.py:218",
}
PARTS = {
    "gradcam.py": "Grad-CAM",
    "attention.py": "attention maps",
    "tensors.py": "statistics",
    "representations.py": "statistics",
    "insights.py": "statistics",
    "params.py": "parameter copies",
    "call_hook.py": "tracing",
    "functions.py": "tracing",
    "project.py": "tracing",
    "ops.py": "tracing",
    "anomalies.py": "tracing",
    "writer_thread.py": "writer",
    "writer.py": "writer",
    "chunks.py": "writer",
    "codec.py": "writer",
}
COPIES = {"keep", "to_numpy"}  # functions of tensors.py that copy values, not statistics


def part_of(frame: str) -> str:
    name, _, where = frame.partition(" (")
    file = where.split(":")[0].rsplit("/", 1)[-1]
    if file == "tensors.py" and name in COPIES:
        return "copies"
    if file == "builder.py" and "_statistics" in name:
        return "copies"  # the private copy of a large tensor, for the writer thread
    return PARTS.get(file, "hooks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("profile", help="py-spy record -f raw --threads output")
    parser.add_argument("--loop", required=True, help="SCRIPT:START-END, the training loop")
    parser.add_argument("--steps", type=int, required=True, help="steps the loop ran")
    parser.add_argument("--rate", type=float, default=50.0, help="py-spy's samples per second")
    args = parser.parse_args()
    script, _, span = args.loop.partition(":")
    start, end = (int(v) for v in span.split("-"))
    in_loop = re.compile(rf"\({re.escape(script)}:(\d+)\)")
    parts: Counter[str] = Counter()
    for line in open(args.profile):
        stack, _, count = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        writer = "tvis-writer" in frames[0]
        lines = [int(m) for m in in_loop.findall(stack)]
        if not writer and not any(start <= n <= end for n in lines):
            continue
        ours = [f for f in frames[1:] if "tvis/" in f and "runner.py" not in f]
        part = "script (plain work)"
        if ours:
            innermost = ours[-1]
            where = re.search(r"\(tvis/\w+/(\S+)\)", innermost)
            if not (where and where.group(1) in PASS_THROUGH):
                part = part_of(innermost)
        if writer:
            part = f"{part} (writer thread)" if part != "writer" else part
        parts[part] += int(count)
    ms = 1e3 / args.rate / args.steps
    plain = parts.get("script (plain work)", 0)
    print(f"{'part':34} {'ms/step':>8} {'of plain':>9}")
    for part, n in parts.most_common():
        print(f"{part:34} {n * ms:8.0f} {n / plain:9.1%}")


if __name__ == "__main__":
    main()
