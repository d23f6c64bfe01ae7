"""How fast the layers table is on a model with 20,000 layer calls.

    .venv/bin/python bench/layers_bench.py [--layers 20000] [--repeat 3]

Records a generated script (an `nn.Sequential` of Linear/ReLU pairs, one optimizer step),
then, in the app itself (headless, 120×40, local agent):

- first paint: from pressing `y` (the Layers pane) on a settled Explore screen until the
  table's first screen of rows is there and the whole screen has been drawn once more;
- sort: from pressing `o` (next column; each column's order is computed the first time it
  is asked for) until the new order's first screen is drawn;
- and in a real `tvis tui` on a pseudo-terminal: from writing `y` until the viewer has
  written everything it writes for it (Pilot's `press` itself waits for the app to be idle,
  so the headless figure above is an upper bound).

The viewer asks the agent for one page of rows at a time (`layers` with offset/limit), and
the agent sorts each order once per batch; nothing here is cached by the viewer between
repeats (each repeat starts a fresh app and agent).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from textual.worker import WorkerState

ROOT = Path(__file__).resolve().parents[1]
TVIS = str(Path(sys.executable).with_name("tvis"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "tui"))
sys.path.insert(0, str(ROOT / "bench"))

SCRIPT = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(*[m for _ in range({pairs}) for m in (nn.Linear(4, 4), nn.ReLU())])
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
x, y = torch.randn(2, 4), torch.randn(2, 4)
for _ in range(2):
    loss = nn.functional.mse_loss(model(x), y)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


def record(folder: Path, layers: int) -> Path:
    script = folder / "deep.py"
    script.write_text(textwrap.dedent(SCRIPT.format(pairs=layers // 2)))
    subprocess.run(
        [
            TVIS,
            "run",
            "--steps",
            "1",
            "--out",
            str(folder / "runs"),
            "--no-functions",
            "--no-ops",
            str(script),
        ],
        check=True,
        capture_output=True,
        cwd=folder,
    )
    (run,) = (folder / "runs").iterdir()
    return run


async def _until(predicate, timeout: float = 120.0) -> None:
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise RuntimeError("timed out")
        await asyncio.sleep(0.0005)


def _screen_full(table) -> bool:
    shown = max(1, table.size.height - 1)
    return table.row_count > 0 and all(
        table.row(i) is not None for i in range(min(shown, table.row_count))
    )


async def _settle(pilot) -> None:
    """Until the app has had nothing to ask for 0.3 s: the screen a user presses `y` on,
    not the start-up still reading the batch for the other panes."""
    quiet = 0
    while quiet < 3:
        await pilot.pause(0.1)
        busy = any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in pilot.app.workers)
        quiet = 0 if busy else quiet + 1


async def measure(run: Path) -> tuple[float, list[float], int]:
    from viewer_support import make_app, open_explore

    from tvis.tui.widgets.layers_table import SORTABLE, LayersTable

    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        page = await open_explore(pilot)
        await _settle(pilot)
        t0 = time.perf_counter()
        await pilot.press("y")
        table = page.query_one(LayersTable)
        await _until(lambda: _screen_full(table))
        app.export_screenshot()  # a whole-screen draw: an upper bound of the repaint
        first = time.perf_counter() - t0
        sorts = []
        for _ in SORTABLE[1:]:
            before = table.sort_column
            t0 = time.perf_counter()
            await pilot.press("o")
            await _until(lambda before=before: table.sort_column is not before)
            await _until(lambda: _screen_full(table))
            app.export_screenshot()
            sorts.append(time.perf_counter() - t0)
        return first, sorts, table.row_count


def in_a_terminal(run: Path) -> tuple[float, float]:
    """`tvis tui RUN` on a pseudo-terminal (tui_bench.PtyViewer, 120×40): from writing `y`
    on the settled Explore page to (a) the table's header written and (b) the screen
    settled, i.e. the last byte the viewer writes for it."""
    from tui_bench import PtyViewer

    viewer = PtyViewer(str(run))
    try:
        viewer.wait_for("1 Replay", 0.0, timeout=60)
        viewer.press("2")
        viewer.wait_for("Sequential", 0.0, timeout=60)
        viewer.wait_settled(time.perf_counter() - 0.001, timeout=60)
        time.sleep(0.5)
        t0 = viewer.press("y")
        return viewer.wait_for("name", t0), viewer.wait_settled(t0)
    finally:
        viewer.close()


def summary(values: list[float]) -> str:
    ms = sorted(v * 1000 for v in values)
    return f"median {statistics.median(ms):.0f} ms (min {ms[0]:.0f}, max {ms[-1]:.0f}, n={len(ms)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--layers", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvis-layers-bench-") as tmp:
        run = record(Path(tmp), args.layers)
        firsts, sorts, rows = [], [], 0
        for _ in range(args.repeat):
            first, sort_times, rows = asyncio.run(measure(run))
            firsts.append(first)
            sorts += sort_times
        print(f"layers table, {rows:,} rows")
        print(f"first paint (y to a full screen of rows): {summary(firsts)}   (target ≤ 200 ms)")
        print(f"sort (o to the new order on screen):      {summary(sorts)}   (target ≤ 200 ms)")
        header, settled = zip(*(in_a_terminal(run) for _ in range(args.repeat)), strict=True)
        print(f"in a terminal, y to the table's header:   {summary(header)}")
        print(f"in a terminal, y to the screen settled:   {summary(settled)}   (target ≤ 200 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
