"""Explore's pane keys in the app itself (headless), the main thread's CPU per key and the
part of it in Textual's phases.

    .venv/bin/python bench/explore_pane_keys.py RUN [--size 120x40] [--settle 8] KEY...

Opens RUN's Explore page as `tvis tui` does (the import-time objects frozen out of the
collector's reach, `ahead.freezes`), waits ``--settle`` seconds (every page built ahead),
then presses each KEY in turn, 0.6 s after the last, and prints per key: the main thread's
CPU (``time.thread_time``) from the key to 0.4 s after it, and the part spent in layout
(``Compositor.reflow``), painting (``Compositor.render_update``, the widgets' own
``render_lines`` inside it), styling (``Stylesheet.update_nodes``) and the cyclic
collector by generation (``gc.callbacks``); with ``--profile N``, each key's N costliest
functions under cProfile (cumulative; its clock is the wall's, idle waits included, and
the profile slows the key ≈ 1.5×). Keys of other pages work too (`3 u`: Loss, its loss
call). Thread time is what a loaded machine stretches
least; work on other threads (the agent's, fetches) is not counted.

Run it from outside the worktree with ``PYTHONPATH`` naming the sources to measure, once
per tree, alternated (see bench/README.md "Explore's pane keys … explorepanes").
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import cProfile
import functools
import gc
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

spent: collections.Counter[str] = collections.Counter()


def timed(owner: type, name: str, label: str) -> None:
    """Add the thread CPU of ``owner.name`` (outermost calls only) to ``spent[label]``."""
    function = getattr(owner, name)
    depth = [0]

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        depth[0] += 1
        start = time.thread_time()
        try:
            return function(*args, **kwargs)
        finally:
            depth[0] -= 1
            if depth[0] == 0:
                spent[label] += time.thread_time() - start

    setattr(owner, name, wrapper)


def collections_timed() -> None:
    started: dict[str, float] = {}

    def callback(phase: str, info: dict) -> None:
        if phase == "start":
            started["t"] = time.thread_time()
        elif "t" in started:
            spent[f"gc{info['generation']}"] += time.thread_time() - started.pop("t")

    gc.callbacks.append(callback)


async def measure(
    run: str, size: tuple[int, int], settle: float, keys: list[str], profile: int = 0
) -> None:
    sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "tui")]
    from textual import _compositor, widget
    from textual.css import stylesheet
    from viewer_support import make_app, open_explore

    timed(_compositor.Compositor, "reflow", "layout")
    timed(_compositor.Compositor, "render_update", "paint")
    timed(widget.Widget, "render_lines", "render_lines")
    timed(stylesheet.Stylesheet, "update_nodes", "styles")
    collections_timed()
    gc.freeze()  # as `tvis tui` does before its app runs
    app = make_app(Path(run).parent)
    app.ahead.freezes = True
    async with app.run_test(size=size) as pilot:
        await open_explore(pilot)
        await pilot.pause(settle)
        for key in keys:
            await pilot.pause(0.6)
            spent.clear()
            profiler = cProfile.Profile() if profile else None
            start = time.thread_time()
            if profiler is not None:
                profiler.enable()
            await pilot.press(key)
            await pilot.pause(0.4)
            if profiler is not None:
                profiler.disable()
            total = (time.thread_time() - start) * 1000
            parts = " ".join(f"{k}={v * 1000:.0f}" for k, v in spent.most_common())
            print(f"{key:8} {total:5.0f} ms  {parts}", flush=True)
            if profiler is not None:
                pstats.Stats(profiler).sort_stats("cumulative").print_stats(profile)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a recorded run")
    parser.add_argument("keys", nargs="+", help="keys to press in turn (Textual's names)")
    parser.add_argument("--size", default="120x40", help="COLSxROWS (default 120x40)")
    parser.add_argument("--settle", type=float, default=8.0, help="seconds before the keys")
    parser.add_argument(
        "--profile",
        type=int,
        default=0,
        metavar="N",
        help="also print each key's N costliest functions under cProfile (cumulative, wall)",
    )
    args = parser.parse_args()
    try:
        cols, rows = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size must be COLSxROWS, e.g. 120x40, not {args.size!r}")
    asyncio.run(measure(args.run, (cols, rows), args.settle, args.keys, args.profile))


if __name__ == "__main__":
    main()
