"""Named text snapshots of whole screens (80×24 and 120×40, half-block images) from the
recorded example run, compared after masking what changes between recordings: paths, run
ids, durations and time bars. ``TVIS_UPDATE_SNAPSHOTS=1`` rewrites them after a deliberate
change of the screen."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from viewer_support import make_app, open_explore, screen_text, wait_for

SNAPSHOTS = Path(__file__).parent / "snapshots"

_DURATION = re.compile(r"≈?\d+(?:\.\d+)?(?:e[+-]?\d+)?\s?(?:ms|µs)")
_TIME_BLOCKS = re.compile(r"[▏▎▍▌▋▊▉█]+")
_CALL_COUNT = re.compile(r"\d+ calls")


def normalize(text: str) -> str:
    """The screen with what differs between two recordings of the same script masked."""
    lines = text.rstrip("\n").split("\n")
    status = lines[-1]
    if " · batch" in status:
        lines[-1] = "<target · run>" + status[status.index(" · batch") :]
    out = []
    for line in lines:
        line = _DURATION.sub("<t>", line)
        line = _TIME_BLOCKS.sub("▮", line)
        line = _CALL_COUNT.sub("<n> calls", line)
        out.append(" ".join(line.split()))
    return "\n".join(out) + "\n"


async def _still(pilot) -> None:
    """Until the screen stops changing and nothing on it is still on its way."""
    seen = [screen_text(pilot.app)]
    waiting = ("loading", "asking the agent", "computing", "opening")
    while len(seen) < 3 or len(set(seen[-3:])) > 1 or any(w in seen[-1] for w in waiting):
        await pilot.pause(0.1)
        seen.append(screen_text(pilot.app))
        assert len(seen) < 300, "the screen never settled"


async def _settled(pilot, page) -> None:
    # A hidden inspector (the tree alone at 80 columns) asks its pictures once shown.
    await wait_for(
        pilot,
        lambda: (
            "inspector" not in page.visible_panes() or all(c.has_data for c in page.inspector.cards)
        ),
        "every card's heatmap",
    )
    # Then until nothing more changes (a scrollbar's thumb follows its cards a frame later).
    seen = [screen_text(pilot.app)]
    while len(seen) < 3 or len(set(seen[-3:])) > 1:
        await pilot.pause(0.1)
        seen.append(screen_text(pilot.app))
        assert len(seen) < 50, "the screen never settled"


@pytest.mark.parametrize(
    ("name", "size", "keys"),
    [
        ("explore_120x40", (120, 40), []),
        ("explore_80x24", (80, 24), []),
        ("inspector_80x24", (80, 24), ["enter"]),
    ],
)
async def test_screen_matches_its_snapshot(run_dir: Path, name: str, size, keys):
    app = make_app(run_dir)
    async with app.run_test(size=size) as pilot:
        page = await open_explore(pilot)
        await _settled(pilot, page)
        if keys:
            await pilot.press(*keys)
            await _settled(pilot, page)
        got = normalize(screen_text(app))
    _compare(name, got)


@pytest.mark.parametrize("page_id", ["replay", "loss", "weights", "insights"])
async def test_page_at_80x24_matches_its_snapshot(run_dir: Path, page_id: str):
    app = make_app(run_dir)
    async with app.run_test(size=(80, 24)) as pilot:
        ids = await wait_for(
            pilot, lambda: app.current_mode == "replay" and [p.id for p in app.pages()], "Replay"
        )
        if page_id != "replay":
            await pilot.press(str(ids.index(page_id) + 1))
            await wait_for(pilot, lambda: app.current_mode == page_id, f"the {page_id} page")
        await _still(pilot)
        got = normalize(screen_text(app))
    _compare(f"{page_id}_80x24", got)


def _compare(name: str, got: str) -> None:
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("TVIS_UPDATE_SNAPSHOTS"):
        SNAPSHOTS.mkdir(exist_ok=True)
        path.write_text(got)
    assert path.exists(), f"no snapshot {path.name}; TVIS_UPDATE_SNAPSHOTS=1 records it"
    assert got == path.read_text(), (
        f"{name} changed; TVIS_UPDATE_SNAPSHOTS=1 accepts the new screen"
    )
