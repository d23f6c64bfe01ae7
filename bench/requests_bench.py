"""What the viewer asks its agent for, counted (not timed): Replay stepped 6 times while
paused (its pictures asked in the foreground and in the background), and Explore at 80×24,
its inspector hidden, moved 3 rows (the widths the cards' pictures are asked at).

    python bench/requests_bench.py RUNS_FOLDER   (PYTHONPATH=<main laid out> for main's)
"""

import asyncio
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path[:0] = [str(TESTS / "tui"), str(TESTS)]

from viewer_support import count_requests, make_app, open_explore, wait_for  # noqa: E402

import tvis  # noqa: E402

run = Path(sys.argv[1])


async def rest(pilot, app):
    await pilot.pause(0.6)
    await wait_for(pilot, lambda: all(w.is_finished for w in app.workers), "rest")


async def replay():
    app = make_app(run)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(
            pilot, lambda: app.current_mode == "replay" and app.screen.current_event(), "replay"
        )
        page = app.screen
        page.seek(5)
        await rest(pilot, app)
        asked = count_requests(app)
        for _ in range(6):
            await pilot.press("l")
            await rest(pilot, app)
        fg = [a for a in asked if a["method"] == "on_image" and not a.get("background")]
        bg = [a for a in asked if a["method"] == "on_image" and a.get("background")]
        print(f"replay paused, 6 steps: on_image foreground {len(fg)}, background {len(bg)}")


async def explore():
    app = make_app(run)
    async with app.run_test(size=(80, 24)) as pilot:
        await open_explore(pilot)
        await rest(pilot, app)
        asked = count_requests(app)
        for _ in range(3):
            await pilot.press("j")
            await rest(pilot, app)
        widths = [a["width"] for a in asked if a["method"] == "view"]
        print(f"explore 80x24, 3 moves: view requests {len(widths)}, widths {sorted(set(widths))}")


print(tvis.__file__)
asyncio.run(replay())
asyncio.run(explore())
