"""The Insights page as a user meets it: first paint and bytes per view, locally and over ssh.

    .venv/bin/python bench/insights_bench.py [--repeat 3] [--no-ssh] [--view NAME ...]

Records the three examples (1 step each: image_classifier, text_lm, vit), then for each
view the run feeds (Attention, its heads grid, Grad-CAM, its grid of samples, Embeddings):

- bytes: the msgpack reply bodies the view's first screen asks for, as they cross the wire
  (computed by the agent's own encoder, the same bytes ssh carries);
- first paint: in a headless 120×40 viewer, from pressing the view's key on the Insights
  page to the view drawn from its reply; locally (the agent in-process) and over the test
  suite's real loopback sshd (`tests/sshd.py`, one shared ControlMaster connection).

Prints a Markdown table (median of ``--repeat`` openings; targets: ≤ 1 s, ≤ 64 KiB).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TVIS = str(Path(sys.executable).with_name("tvis"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "tui"))

from sshd import start_lab  # noqa: E402
from viewer_support import open_explore  # noqa: E402  (tests/tui: the complete Explore screen)

from tvis.agent.api import AgentAPI  # noqa: E402
from tvis.agent.client import connect  # noqa: E402
from tvis.agent.dispatch import handle  # noqa: E402
from tvis.agent.protocol import reply_body  # noqa: E402
from tvis.agent.target import Target  # noqa: E402
from tvis.tui.app import TvisApp  # noqa: E402

EXAMPLES = ("image_classifier", "text_lm", "vit")
VIEWS = {  # view: (key on the page, keys after it, what its first screen has drawn)
    "attention": ("a", (), lambda page: _attention_drawn(page)),
    "attention heads": ("a", ("w",), lambda page: _heads_drawn(page)),
    "gradcam": ("c", (), lambda page: page.query_one("#gradcam-overlay").has_data),
    "gradcam samples": ("c", ("m",), lambda page: page.query("#gradcam-grid .thumb Picture")),
    "embeddings": ("e", (), lambda page: len(page.query_one("#embeddings-scatter").points)),
}
NEEDS = {"attention": "attention", "gradcam": "gradcam", "embeddings": "embeddings"}


def _heads_drawn(page) -> bool:
    return page.query_one("#attention-heads-picture").has_data


def _attention_drawn(page) -> bool:
    view = page.current_view()
    drawn = view is not None and view.reply and page.query_one("#attention-picture").has_data
    if drawn and view.reply.get("grid"):
        return page.query_one("#attention-overlay").has_data
    return bool(drawn)


def record(folder: Path, example: str) -> Path:
    out = folder / example
    script = ROOT / "examples" / example / "train.py"
    subprocess.run(
        [TVIS, "run", "--steps", "1", "--out", str(out), str(script)],
        check=True,
        capture_output=True,
        cwd=folder,
    )
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


def first_screen_requests(api: AgentAPI, run: str, view: str) -> list[tuple[str, dict]]:
    """The requests the view's first screen makes, with the parameters the page uses."""
    info = api.run(run)
    found = api.insights(run)
    batch = info["batches"][0]["index"]
    at = {"run": run, "batch": batch}
    if view == "attention":
        calls = [("attention", {**at, "layer": 0, "sample": 0, "width": 128, "height": 128})]
        reply = api.attention(**calls[0][1])
        if reply.get("grid"):
            calls.append(("attention_overlay", {**at, "sample": 0, "width": 64, "height": 64}))
        return calls
    if view == "attention heads":
        return [("attention_heads", {**at, "layer": 0, "sample": 0, "side": 16})]
    if view == "gradcam":
        layer = found["gradcam_layers"][-1]
        return [("gradcam", {**at, "layer": layer, "sample": 0, "width": 64, "height": 64})]
    if view == "gradcam samples":
        layer = found["gradcam_layers"][-1]
        params = {**at, "layer": layer, "width": 24, "height": 24, "limit": 16}
        return [("gradcam_grid", params)]
    return [("embeddings", {"run": run, "max_points": 2000})]


def reply_bytes(api: AgentAPI, calls: list[tuple[str, dict]]) -> int:
    total = 0
    for i, (method, params) in enumerate(calls):
        reply = handle(api, {"id": i, "method": method, "params": params})
        assert "error" not in reply, reply
        total += len(reply_body(reply))
    return total


async def first_paint(connector: Callable, view: str) -> float:
    """Seconds from pressing the view's key to the view drawn, in a fresh viewer."""
    key, then, drawn = VIEWS[view]
    app = TvisApp(connector, "bench", "halfcell")
    async with app.run_test(size=(120, 40)) as pilot:
        await open_explore(pilot)
        await pilot.press(str([p.id for p in app.pages()].index("insights") + 1))
        await _until(pilot, lambda: app.current_mode == "insights" and app.screen.found, 60)
        page = app.screen
        if then:  # open the view first, then time the key that switches its mode
            await pilot.press(key)
            await _until(pilot, lambda: page.current_view() and page.current_view().reply, 60)
            start = time.perf_counter()
            await pilot.press(*then)
        else:
            start = time.perf_counter()
            await pilot.press(key)
        await _until(pilot, lambda: drawn(page), 60)
        return time.perf_counter() - start


async def _until(pilot, predicate, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not _safe(predicate):
        if time.monotonic() > deadline:
            raise TimeoutError("the viewer never got there")
        await pilot.pause(0.005)


def _safe(predicate) -> bool:
    try:
        return bool(predicate())
    except Exception:
        return False


def median_paint(connector: Callable, view: str, repeat: int) -> float:
    return statistics.median(asyncio.run(first_paint(connector, view)) for _ in range(repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ssh", action="store_true")
    parser.add_argument("--view", action="append", choices=list(VIEWS), help="only these views")
    args = parser.parse_args()
    views = args.view or list(VIEWS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        runs = {name: record(folder, name) for name in EXAMPLES}
        (folder / "lab").mkdir()
        lab = None if args.no_ssh else start_lab(folder / "lab")
        rows = []
        try:
            for name, run in runs.items():
                api = AgentAPI(run)
                found = api.insights(".")
                local = Target(path=str(run))
                for view in views:
                    if not found[NEEDS[view.split()[0]]]:
                        continue
                    size = reply_bytes(api, first_screen_requests(api, ".", view))
                    here = median_paint(
                        lambda t=local: connect(t, echo_stderr=False), view, args.repeat
                    )
                    over = None
                    if lab is not None:
                        remote = Target(
                            path=str(run), host="tvis-test", remote_tvis=lab.remote_tvis
                        )
                        control = lab.control_dir()

                        def ssh(t=remote, c=control):
                            return connect(
                                t, ssh_command=lab.ssh_command, control_dir=c, echo_stderr=False
                            )

                        over = median_paint(ssh, view, args.repeat)
                    rows.append((name, view, size, here, over))
        finally:
            if lab is not None:
                lab.close()
    print("| run | view | bytes (first screen) | first paint, local | first paint, ssh |")
    print("|---|---|---|---|---|")
    for name, view, size, here, over in rows:
        ssh_text = f"{over * 1000:.0f} ms" if over is not None else "—"
        print(f"| {name} | {view} | {size / 1024:.1f} KiB | {here * 1000:.0f} ms | {ssh_text} |")


if __name__ == "__main__":
    main()
