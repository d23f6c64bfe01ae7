"""Replay's first page of a big run, and what a batch switch on Explore costs.

    .venv/bin/python bench/replay_pages_bench.py agent RUN     # the agent alone, in process
    .venv/bin/python bench/replay_pages_bench.py first RUN     # headless app to Replay's event
    .venv/bin/python bench/replay_pages_bench.py switch RUN [--switches 6]

- agent: a fresh agent's `replay` first page as the viewer asks for it (offset 0, a page of
  ``REPLAY_PAGE``, ``whole`` false where the agent knows it), wall and process CPU, then the
  whole list (``whole`` true) after it;
- first: the viewer headless (120×40) with its agent in a process of its own, as `tvis tui`
  runs it: from the app's start to Replay's first event on screen;
- switch: Explore `.` and `,` alternately, each followed by 0.6 s idle: the agent requests
  sent per switch and the viewer's CPU per switch (the idle included).

Run it from outside the worktree with ``PYTHONPATH`` naming the sources to measure (an
older tree without ``whole`` is asked as it was: its first answer is the whole list).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import inspect
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "tests" / "tui")]


def agent(run: Path) -> str:
    from tvis.agent.api import AgentAPI
    from tvis.agent.dispatch import handle
    from tvis.agent.replay import ReplayAPI

    api = AgentAPI(run.parent)
    params = {"run": run.name, "sample": 0, "detail": "layer", "offset": 0, "limit": 500}
    parts = "whole" in inspect.signature(ReplayAPI.replay).parameters
    t0, c0 = time.perf_counter(), time.process_time()
    first = handle(
        api,
        {"id": 1, "method": "replay", "params": {**params, "whole": False}}
        if parts
        else {"id": 1, "method": "replay", "params": params},
    )["result"]
    t1, c1 = time.perf_counter(), time.process_time()
    whole = handle(
        api,
        {"id": 2, "method": "replay", "params": {**params, "whole": True}}
        if parts
        else {"id": 2, "method": "replay", "params": params},
    )["result"]
    t2 = time.perf_counter()
    return (
        f"first page {1e3 * (t1 - t0):.0f} ms wall, {1e3 * (c1 - c0):.0f} ms CPU (total "
        f"{first['total']}, complete {first.get('complete', True)}); whole list "
        f"{1e3 * (t2 - t0):.0f} ms (total {whole['total']})"
    )


async def first(run: Path) -> str:
    from viewer_support import make_app

    t0 = time.perf_counter()
    app = make_app(run.parent)
    async with app.run_test(size=(120, 40)):
        while not (
            app.current_mode == "replay"
            and getattr(app.screen, "recording", None)
            and app.screen.current_event()
        ):
            await asyncio.sleep(0.005)
        return f"Replay's first event {1e3 * (time.perf_counter() - t0):.0f} ms after the start"


async def switch(run: Path, n: int) -> str:
    from viewer_support import make_app, open_explore

    app = make_app(run.parent)
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.pause(1.5)
        client = app.data.client
        asked: collections.Counter[str] = collections.Counter()
        real = client.call

        def counted(method, **params):
            asked[method] += 1
            return real(method, **params)

        client.call = counted
        cpu = 0.0
        for i in range(n):
            c = time.process_time()
            await pilot.press("." if i % 2 == 0 else ",")
            await pilot.pause(0.6)
            cpu += time.process_time() - c
        return (
            f"{sum(asked.values()) / n:.1f} requests per switch {dict(asked)}; "
            f"viewer CPU {1e3 * cpu / n:.0f} ms per switch"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("agent", "first", "switch"))
    parser.add_argument("run", type=Path, help="a recorded run's folder")
    parser.add_argument("--switches", type=int, default=6)
    args = parser.parse_args()
    run = args.run.resolve()
    if args.what == "agent":
        print(agent(run))
    elif args.what == "first":
        print(asyncio.run(first(run)))
    else:
        print(asyncio.run(switch(run, args.switches)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
