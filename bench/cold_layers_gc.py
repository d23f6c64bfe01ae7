"""The cyclic collector's passes inside the cold layers table's `y`, per start.

    TVIS_GC_LOG=DIR PYTHONPATH=bench/gc_log[:SOURCES] python bench/cold_layers_gc.py RUN [N]

What `keys_bench.py --cold-layers` times (`2` after Replay settled, `y` at Explore's first
write, to the table's caption filled), in N fresh viewers, and the collections the viewer
(`tvis tui`, not its agent) ran from `y` to the rows: their generations and milliseconds,
from the log `bench/gc_log/sitecustomize.py` writes into DIR (emptied before each start).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from keys_bench import main_thread_s, press  # noqa: E402
from tui_bench import PtyViewer  # noqa: E402


def collections(log_dir: Path, start: float, end: float) -> list[tuple[int, float]]:
    """(generation, ms) of the viewer's collections that ended between ``start`` and ``end``."""
    found = []
    for log in log_dir.glob("*.txt"):
        for line in log.read_text().splitlines():
            at, generation, ms, program, first = (line.split() + [""])[:5]
            if program == "tvis" and first == "tui" and start <= float(at) <= end:
                found.append((int(generation), float(ms)))
    return found


def one_start(run: str, log_dir: Path) -> str:
    for log in log_dir.glob("*.txt"):
        log.unlink()
    viewer = PtyViewer(run)
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=120)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=120)
        t_page = press(viewer, "2")
        viewer.wait_for("Explore", t_page, timeout=60)
        ran0, _ = main_thread_s(viewer.pid)
        t0 = viewer.press("y")
        rows = viewer.wait_for("layers · call order", t0, timeout=120)
        ran, _ = main_thread_s(viewer.pid)
        time.sleep(0.3)  # the last lines of the log
    finally:
        viewer.close()
    passes = collections(log_dir, t0, t0 + rows)
    full = [round(ms) for generation, ms in passes if generation == 2]
    return (
        f"y to the rows {rows * 1000:.0f} ms (from 2: {(t0 + rows - t_page) * 1000:.0f}), "
        f"main thread on a CPU {(ran - ran0) * 1000:.0f} ms; collections meanwhile "
        f"{sum(ms for _, ms in passes):.0f} ms, full ones {full or 'none'}"
    )


def main() -> None:
    log_dir = Path(os.environ.get("TVIS_GC_LOG") or "")
    if not os.environ.get("TVIS_GC_LOG") or not log_dir.is_dir():
        sys.exit("cold_layers_gc: set TVIS_GC_LOG to an existing folder (see the docstring).")
    run = sys.argv[1]
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 3):
        print(one_start(run, log_dir), flush=True)
    load = os.getloadavg()[0]
    print(f"load average {load:.1f}")


if __name__ == "__main__":
    main()
