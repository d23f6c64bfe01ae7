"""How Replay plays, as a user sees it.

    .venv/bin/python bench/replay_bench.py [RUN_DIR] [--images halfcell|sixel] [--no-ssh]

The viewer runs in-process (Textual's headless driver, 120×40) over the real agent client:
locally, and over a loopback sshd (tests/sshd.py) as `tvis tui host:RUN` does.

- first frame: from the run opening (its index answered) until Replay's first frame is
  complete — transport, scrubber, layer stack, the input card's picture;
- frames per second: stepping through every event of the recording, each frame counted once
  it is complete on screen (for a layer: its On-image map painted, or the sentence saying
  why there is none) and one screen update drawn (what changed); "full" composes the whole
  screen every frame instead (an upper bound of a repaint); prefetch runs as when playing;
- bytes per frame: agent replies (msgpack-encoded, as they cross the wire) while stepping,
  divided by the frames, and the largest single reply.

Without RUN_DIR it records the image-classifier example first (2 steps).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import support  # noqa: E402  (tests/support.py: records the example as the tests do)

from tvis.agent.client import connect  # noqa: E402
from tvis.agent.protocol import encode  # noqa: E402
from tvis.agent.target import Target  # noqa: E402
from tvis.tui.app import TvisApp  # noqa: E402
from tvis.tui.picture import Picture  # noqa: E402
from tvis.tui.widgets.layer_views import OnImageView  # noqa: E402
from tvis.tui.widgets.replay_cards import InputCard  # noqa: E402

POLL_S = 0.002
"""How often the app is let run while waiting for a frame: figures are good to a few ms."""

FRAME_BUDGET = 32 << 10
"""The issue's target: at most 32 KiB fetched per frame."""


class CountingClient:
    """An agent client that notes the encoded size of every reply it returns."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.sizes: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def call(self, method: str, **params: Any) -> Any:
        result = self.client.call(method, **params)
        size = len(encode(result))
        with self._lock:
            self.sizes.append((method, size))
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)  # the rest of the client (describe, silence, …)


def record_example(folder: Path) -> Path:
    """Two steps of the image-classifier example, its data loaded in-process."""
    return support.record_example(
        folder, "image_classifier", "--steps", "2", script_args=("--workers", "0")
    )


async def _until(pilot, predicate, timeout: float = 60.0) -> None:
    # A plain sleep, not pilot.pause(): that forces a whole-screen update on every poll,
    # which would measure the polling. The app refreshes on its own timer meanwhile.
    deadline = time.perf_counter() + timeout
    while not predicate():
        if time.perf_counter() > deadline:
            raise TimeoutError("the viewer did not get there in time")
        await asyncio.sleep(POLL_S)


def _compose(app) -> None:
    """Compose the whole screen, as a terminal refresh does."""
    app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)


def _frame_done(page) -> bool:
    event = page.current_event()
    if event is None:
        return False
    if event.kind not in ("layer", "grad"):
        return True
    views = page.query(OnImageView)  # mounted when a layer first plays
    drawn = views.first().drawn if views else None
    return (
        drawn is not None
        and drawn.call == event.call
        and drawn.batch == event.batch
        and drawn.grad == (event.kind == "grad")
    )


async def play(connector, image_mode: str, repaint: bool) -> dict[str, Any]:
    """First-frame time, frames per second and bytes per frame over one connection."""
    holder: dict[str, CountingClient] = {}

    def counted():
        holder["client"] = CountingClient(connector())
        return holder["client"]

    app = TvisApp(counted, "bench", image_mode)
    async with app.run_test(size=(120, 40)) as pilot:
        await _until(pilot, lambda: app.run_name is not None)
        opened = time.perf_counter()
        await _until(pilot, lambda: app.current_mode == "replay")
        page = app.screen
        await _until(pilot, lambda: page.query(InputCard))
        card = page.query_one(InputCard)
        await _until(
            pilot, lambda: page.recording and page.current_event() and card.pipeline is not None
        )
        await _until(pilot, lambda: card.query_one(Picture).has_data)
        _compose(app)
        first = time.perf_counter() - opened

        client = holder["client"]
        client.sizes.clear()
        total = page.recording.total
        start = time.perf_counter()
        for seq in range(total):
            page.seek(seq)
            await _until(pilot, lambda: _frame_done(page))
            if repaint:
                _compose(app)
            else:
                page._on_timer_update()  # one screen update per frame: what changed is drawn
        elapsed = time.perf_counter() - start
        sizes = [s for m, s in client.sizes if m != "replay"]
        events = sum(s for m, s in client.sizes if m == "replay")
        return {
            "first_s": first,
            "frames": total,
            "fps": total / elapsed,
            "bytes_per_frame": (sum(sizes) + events) / total,
            "largest_reply": max(sizes, default=0),
            "internal_errors": list(app.internal_errors),
        }


def ssh_connector(run: Path, lab) -> Any:
    import os

    os.environ["TVIS_SSH_COMMAND"] = f"ssh -F {lab.config}"
    target = Target(path=str(run), host="tvis-test", remote_tvis=lab.remote_tvis)
    return lambda: connect(target, echo_stderr=False)


def report(where: str, rounds: list[dict[str, Any]]) -> None:
    med = {
        k: statistics.median(r[k] for r in rounds) for k in ("first_s", "fps", "bytes_per_frame")
    }
    largest = max(r["largest_reply"] for r in rounds)
    print(
        f"{where:<16} first frame {med['first_s'] * 1000:6.0f} ms   "
        f"{med['fps']:5.1f} frames/s over {rounds[0]['frames']} frames   "
        f"{med['bytes_per_frame'] / 1024:5.1f} KiB/frame (largest reply {largest / 1024:.1f} KiB)"
    )
    errors = [e for r in rounds for e in r["internal_errors"]]
    if errors:
        print(f"  internal errors: {errors[:3]}")
    if largest > FRAME_BUDGET:
        print(f"  a reply above the {FRAME_BUDGET >> 10} KiB frame budget")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", nargs="?", type=Path)
    parser.add_argument("--images", default="halfcell", choices=("halfcell", "sixel"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-ssh", action="store_true", help="skip the loopback sshd figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvis-replay-bench-") as folder:
        run = args.run or record_example(Path(folder))
        local = Target(path=str(run))
        for repaint in (False, True):
            rounds = [
                asyncio.run(play(lambda: connect(local, echo_stderr=False), args.images, repaint))
                for _ in range(args.rounds)
            ]
            report(f"local {args.images}{' full' if repaint else ''}", rounds)
        if not args.no_ssh:
            from sshd import start_lab

            with tempfile.TemporaryDirectory(prefix="tvis-replay-ssh-") as lab_folder:
                lab = start_lab(Path(lab_folder))
                try:
                    connector = ssh_connector(run, lab)
                    rounds = [
                        asyncio.run(play(connector, args.images, False)) for _ in range(args.rounds)
                    ]
                    report(f"ssh {args.images}", rounds)
                finally:
                    lab.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
