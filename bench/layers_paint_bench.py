"""Explore's `y` on a big run: from the key to the first frame that holds the layers table's
rows, in a headless app whose agent is idle, and where the viewer's time goes.

    .venv/bin/python bench/layers_paint_bench.py RUN [--rounds 3] [--at-once] [--profile OUT.prof]

The viewer runs headless at 120×40 (Explore's medium layout: the tree and one pane) with
its agent in a process of its own, as `tvis tui` runs it. Each round opens the run, lets
Replay settle and the agent go idle (so that what is timed is the viewer), presses `2`,
waits for Explore, then presses `y`. Printed per round: ms from `y` to the frame written
with the table's rows, the viewer's process CPU in that time, how many lines the call tree
and the layers table rendered for it, then the ms to draw the tree's and the table's screen
of lines again as a focus change does (their line caches emptied; best of 7). ``--at-once``
presses `y` as soon as Explore is the screen (the agent still answering Explore's first
requests, as ``keys_bench.py --cold-layers`` does in a terminal). ``--profile`` keeps a
cProfile of the last round's `y`.

Run it from outside the worktree with ``PYTHONPATH`` naming the sources to measure.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "tui")]


def redraw_ms(widget, cache) -> float:
    best = float("inf")
    for _ in range(7):
        cache.clear()
        if hasattr(widget, "_pseudo_class_state"):
            widget._pseudo_class_state = widget.get_pseudo_class_state()
        t0 = time.perf_counter()
        for y in range(widget.size.height):
            widget.render_line(y)
        best = min(best, time.perf_counter() - t0)
    return 1000 * best


async def one_round(run: Path, profile: str | None, at_once: bool) -> tuple:
    from viewer_support import make_app

    from tvis.tui.widgets.call_tree import CallTree
    from tvis.tui.widgets.layers_table import HEADER, LayersTable

    counts = {"tree": 0, "rows": 0}
    drawn: dict[str, float] = {}
    table_line, tree_line = LayersTable.render_line, CallTree.render_line

    def counted_table_line(self, y: int):
        if y >= HEADER and self.row_count:
            counts["rows"] += 1
        return table_line(self, y)

    def counted_tree_line(self, y: int):
        counts["tree"] += 1
        return tree_line(self, y)

    LayersTable.render_line = counted_table_line  # type: ignore[method-assign]
    CallTree.render_line = counted_tree_line  # type: ignore[method-assign]
    app = make_app(run.parent)
    display = app._display

    def timed_display(screen, renderable) -> None:
        display(screen, renderable)
        if counts["rows"] and "rows" not in drawn:
            drawn["rows"] = time.perf_counter()

    app._display = timed_display  # type: ignore[method-assign]
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            deadline = time.monotonic() + 120
            while not (
                app.current_mode == "replay"
                and getattr(app.screen, "recording", None)
                and app.screen.current_event()
            ):
                if time.monotonic() > deadline:
                    raise SystemExit("Replay never showed its first event")
                await asyncio.sleep(0.01)
            await pilot.pause(4.0)  # the rest of Replay's list is built; the agent is idle
            await pilot.press("2")
            while app.current_mode != "explore":
                await asyncio.sleep(0.005)
            if not at_once:
                await pilot.pause(1.0)  # Explore's tree and inspector are drawn
            counts.update(tree=0, rows=0)
            prof = cProfile.Profile() if profile else None
            cpu0, t0 = time.process_time(), time.perf_counter()
            if prof:
                prof.enable()
            await pilot.press("y")
            while "rows" not in drawn:
                if time.perf_counter() - t0 > 30:
                    raise SystemExit("the layers table never drew its rows")
                await asyncio.sleep(0.002)
            if prof:
                prof.disable()
                prof.dump_stats(profile)
            cpu = time.process_time() - cpu0
            lines = (counts["tree"], counts["rows"])
            await pilot.pause(1.0)
            table, tree = app.screen.query_one(LayersTable), app.screen.query_one(CallTree)
            again = (redraw_ms(tree, tree._line_cache), redraw_ms(table, table._lines))
            ms = 1000 * (drawn["rows"] - t0)
            return ms, 1000 * cpu, *lines, *again
    finally:
        LayersTable.render_line, CallTree.render_line = table_line, tree_line


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", default=None)
    parser.add_argument("--at-once", action="store_true")
    args = parser.parse_args()
    import tvis.tui

    print(f"sources: {Path(tvis.tui.__file__).parent}")
    for i in range(args.rounds):
        last = i == args.rounds - 1
        profile = args.profile if last else None
        ms, cpu, tree, rows, tree_again, table_again = asyncio.run(
            one_round(args.run, profile, args.at_once)
        )
        print(
            f"y to the rows drawn: {ms:6.0f} ms  viewer CPU {cpu:6.0f} ms  "
            f"tree lines rendered {tree:4d}  table row lines rendered {rows:4d}  "
            f"drawn again: tree {tree_again:5.1f} ms, table {table_again:5.1f} ms"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
