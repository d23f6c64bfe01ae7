"""What a key costs the terminal, frame by frame: the writes a `tvis tui` makes for it.

    .venv/bin/python bench/frames_bench.py RUN KEY... [--settle 5] [--read 0] [--timeline]

Drives a real `tvis tui RUN` on a pseudo-terminal (`tui_bench.PtyViewer`, 120×40) with
`bench/frames_trace` first on its PYTHONPATH, whose ``sitecustomize`` has the viewer note
each key it reads, each layout (``Compositor.reflow``) and paint (``render_update``) with
its CPU, and each write to the terminal. Presses each KEY in turn (Textual's names:
``full_stop``, ``comma``, ``enter``…), after ``--settle`` seconds on the first page and then
0.6 s of silence each, and prints per key: the time to a settled screen (the last write
before 150 ms of silence), the writes (frames) and bytes up to then, and the layouts and
paints; ``--timeline`` adds each event's time after the key (a paint's with the widgets it
draws); ``--read S`` waits S seconds more after each page key (`1`–`9`), a user reading
the page before the next key (Explore draws its panes ahead only then). A key drawn in
one frame has one write; each frame after the first is a screen update (20–40 ms) later.

Run it from outside the worktree with ``PYTHONPATH`` naming the sources to measure (the
tracer's folder is put in front), once per tree, alternated.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import tui_bench  # noqa: E402
from keys_bench import KEYS  # noqa: E402


def wait_quiet(viewer: tui_bench.PtyViewer, seconds: float) -> None:
    """Until the viewer has written nothing for ``seconds``."""
    while (idle := time.perf_counter() - viewer.chunks[-1][0]) < seconds:
        time.sleep(seconds - idle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a recorded run")
    parser.add_argument("keys", nargs="+", help="keys to press in turn (Textual's names)")
    parser.add_argument("--settle", type=float, default=5.0, help="seconds on the first page")
    parser.add_argument("--read", type=float, default=0.0, help="seconds after a page key")
    parser.add_argument("--timeline", action="store_true", help="each event's time too")
    args = parser.parse_args()
    log = Path(tempfile.mkdtemp()) / "frames.tsv"
    path = [str(HERE / "frames_trace"), *filter(None, [os.environ.get("PYTHONPATH")])]
    viewer = tui_bench.PtyViewer(
        args.run, env={"TVIS_FRAMES": str(log), "PYTHONPATH": os.pathsep.join(path)}
    )
    viewer.wait_for("Replay", time.perf_counter())
    time.sleep(args.settle)
    pressed = []
    for key in args.keys:
        wait_quiet(viewer, 0.6)
        start = viewer.press(KEYS.get(key, key))
        pressed.append((key, start, viewer.wait_settled(start)))
        if key.isdigit():
            time.sleep(args.read)
    viewer.close()
    events = []
    for line in log.read_text().splitlines():
        at, kind, cpu, detail = line.split("\t")
        events.append((float(at), kind, float(cpu), detail))
    print(f"{'key':10} {'settled':>8} {'writes':>6} {'KiB':>6} {'layouts':>7} {'paints':>6}")
    for key, start, settled in pressed:
        span = [e for e in events if start <= e[0] <= start + settled + 0.001]
        writes = [e for e in span if e[1] == "write"]
        kib = sum(int(e[3]) for e in writes) / 1024
        layouts = sum(e[1] == "layout" for e in span)
        paints = sum(e[1] == "paint" for e in span)
        print(f"{key:10} {1000 * settled:6.0f}ms {len(writes):6} {kib:6.1f} {layouts:7} {paints:6}")
        if args.timeline:
            for at, kind, cpu, detail in span:
                print(f"    {1000 * (at - start):7.1f} ms  {kind:6} cpu {cpu:5.1f} ms  {detail}")


if __name__ == "__main__":
    main()
