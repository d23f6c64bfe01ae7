"""First paint and bytes fetched of the Loss and Weights pages' views.

    .venv/bin/python bench/loss_weights_bench.py [--repeat 3] [--no-ssh]

Records the image-classifier, text-LM and ViT examples (2 steps each) and a model with a
50,000-token embedding table, then opens each view in the viewer (Textual's headless
driver, 120×40, half-block pictures) and reports, per view:

- first paint: from pressing the page's key (or choosing the parameter) until the view's
  content is on the screen (median of ``--repeat``);
- bytes: the msgpack size of every agent reply the view asked for (their sum, and the
  largest single reply), against the 64 KiB-per-view target.

Locally the agent runs in-process (``LocalClient``); with sshd installed the same views are
opened through ``tvis agent --stdio`` over a loopback OpenSSH server (tests/sshd.py).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TVIS = str(Path(sys.executable).with_name("tvis"))
sys.path.insert(0, str(ROOT / "tests"))

from tvis.agent.client import connect  # noqa: E402
from tvis.agent.protocol import encode  # noqa: E402
from tvis.agent.target import Target  # noqa: E402
from tvis.tui.app import TvisApp  # noqa: E402

VIEW_BYTES = 64 << 10
SETTLE_S = 60.0

BIG_VOCAB = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F

    class Words:
        itos = [f"w{i}" for i in range(50000)]

    class Tokens(torch.utils.data.Dataset):
        tokenizer = Words()

        def __len__(self):
            return 16

        def __getitem__(self, i):
            return torch.arange(i, i + 9) * 997 % 50000

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(50000, 64), torch.nn.Linear(64, 50000))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for ids in torch.utils.data.DataLoader(Tokens(), batch_size=4):
        loss = F.cross_entropy(model(ids[:, :-1]).transpose(1, 2), ids[:, 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    """
)


class Counting:
    """A client that remembers the encoded size of every reply, by method."""

    def __init__(self, client) -> None:
        self.client = client
        self.replies: list[tuple[str, int]] = []

    def call(self, method: str, **params):
        result = self.client.call(method, **params)
        self.replies.append((method, len(encode(result))))
        return result

    def __getattr__(self, name: str):
        return getattr(self.client, name)  # the rest of the client (describe, silence, …)


def record(folder: Path, script: Path) -> Path:
    out = folder / script.parent.name
    subprocess.run(
        [TVIS, "run", "--steps", "2", "--out", str(out), str(script)],
        cwd=script.parent,
        check=True,
        capture_output=True,
        timeout=600,
    )
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run


async def wait(pilot, predicate: Callable[[], object]) -> None:
    deadline = time.monotonic() + SETTLE_S
    while not _safe(predicate):
        if time.monotonic() > deadline:
            raise TimeoutError("the view never finished")
        await pilot.pause(0.005)


def _safe(predicate) -> object:
    try:
        return predicate()
    except Exception:
        return None


async def open_view(target: Target, view: str, env: dict[str, str]) -> tuple[float, list]:
    """(seconds to the finished view, [(method, bytes)] it fetched)."""
    from tvis.tui.pages.loss import LossView
    from tvis.tui.pages.weights import LayerView, ParamList

    os.environ.update(env)
    box: dict[str, Counting] = {}

    def connector():
        box["client"] = Counting(connect(target, echo_stderr=False))
        return box["client"]

    app = TvisApp(connector, target.describe(), "halfcell")
    async with app.run_test(size=(120, 40)) as pilot:
        await wait(pilot, lambda: app.run_name and app.current_mode == "replay")
        await pilot.pause(2.0)  # Replay's own pictures finish loading: not this view's bytes
        key = {p.id: str(i + 1) for i, p in enumerate(app.pages())}
        page, _, param = view.partition(":")
        counting = box["client"]
        counting.replies.clear()
        t0 = time.perf_counter()
        if page == "loss":
            await pilot.press(key["loss"])
            await wait(pilot, lambda: app.current_mode == "loss")
            loss = app.screen.query_one(LossView)
            await wait(pilot, lambda: loss.detail and (loss.tokens or loss.samples))
        else:
            await pilot.press(key["weights"])
            await wait(pilot, lambda: app.current_mode == "weights")
            table = app.screen.query_one(ParamList)
            layer = app.screen.query_one(LayerView)
            await wait(pilot, lambda: table.row_count and layer.shown)
            if param and layer.shown.get("name") != param:
                counting.replies.clear()
                t0 = time.perf_counter()
                names = [p["name"] for p in table.params]
                table.move_cursor(row=names.index(param))
                await wait(pilot, lambda: (layer.shown or {}).get("name") == param)
        await pilot.pause(0)  # the frame with the view on it
        elapsed = time.perf_counter() - t0
        return elapsed, list(counting.replies)


def measure(target: Target, views: list[str], repeat: int, env: dict[str, str]) -> list[dict]:
    rows = []
    for view in views:
        times, replies = [], []
        for _ in range(repeat):
            elapsed, replies = asyncio.run(open_view(target, view, env))
            times.append(elapsed)
        sizes = [b for _, b in replies]
        rows.append(
            {
                "view": view,
                "paint_s": statistics.median(times),
                "bytes": sum(sizes),
                "largest": max(sizes, default=0),
                "methods": sorted({m for m, _ in replies}),
            }
        )
    return rows


def show(title: str, rows: list[dict]) -> None:
    print(f"\n{title}")
    print(f"{'view':<48} {'first paint':>11} {'bytes':>9} {'largest':>9}  ≤64 KiB")
    for r in rows:
        ok = "yes" if r["bytes"] <= VIEW_BYTES else "NO"
        print(
            f"{r['view']:<48} {r['paint_s'] * 1000:>9.0f}ms {r['bytes']:>9} {r['largest']:>9}  {ok}"
            f"   ({', '.join(r['methods'])})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-ssh", action="store_true", help="skip the loopback sshd figures")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tvis-lw-bench-") as tmp:
        folder = Path(tmp)
        big = folder / "big_vocab" / "train.py"
        big.parent.mkdir()
        big.write_text(BIG_VOCAB)
        runs = {
            "classifier": record(folder, ROOT / "examples" / "image_classifier" / "train.py"),
            "text_lm": record(folder, ROOT / "examples" / "text_lm" / "train.py"),
            "vit": record(folder, ROOT / "examples" / "vit" / "train.py"),
            "big_vocab": record(folder, big),
        }
        table_bytes = 50000 * 64 * 4
        plan = [
            ("classifier", "loss"),
            ("text_lm", "loss"),
            ("classifier", "weights"),
            ("vit", "weights:patch_embed.proj.weight"),
            ("big_vocab", "weights:0.weight"),
            ("big_vocab", "weights:1.weight"),
        ]
        local = []
        for name, view in plan:
            row = measure(Target(path=str(runs[name])), [view], args.repeat, {})[0]
            row["view"] = f"{name} {view}"
            local.append(row)
        show("local (in-process agent)", local)
        print(f"(the 50,000×64 embedding table is {table_bytes} bytes of float32)")
        if args.no_ssh:
            return
        from sshd import sshd_available, start_lab

        if not sshd_available():
            print("\nsshd not installed: no loopback figures")
            return
        (folder / "ssh").mkdir()
        lab = start_lab(folder / "ssh")
        try:
            env = {"TVIS_SSH_COMMAND": f"ssh -F {lab.config}"}
            remote = []
            for name, view in plan:
                target = Target(path=str(runs[name]), host="tvis-test", remote_tvis=lab.remote_tvis)
                row = measure(target, [view], args.repeat, env)[0]
                row["view"] = f"{name} {view}"
                remote.append(row)
            show("over the loopback sshd (tvis agent --stdio)", remote)
        finally:
            lab.close()


if __name__ == "__main__":
    main()
