"""Fixtures and helpers for the viewer's tests: the app over a real local agent process and a
run recorded from the image-classifier example (the session fixture ``recorded_run``)."""

from __future__ import annotations

import io
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sshd import ssh_lab  # noqa: E402, F401  (a fixture: pytest finds it by name)
from support import record_example, record_script  # noqa: E402

from tvis.agent.target import Target  # noqa: E402
from tvis.tui.app import TvisApp  # noqa: E402
from tvis.tui.command import Dialer  # noqa: E402

SETTLE_TIMEOUT_S = 20.0
"""Generous: the suite shares two cores with other rooms' tests."""


def make_app(root: Path, image_mode: str = "halfcell", **kwargs) -> TvisApp:
    """The viewer over ``root`` exactly as `tvis tui ROOT` builds it."""
    target = Target(path=str(root))
    dialer = Dialer(target)
    dialer.start()
    return TvisApp(dialer, target.describe(), image_mode, **kwargs)


async def wait_for(
    pilot, predicate: Callable[[], object], what: str, timeout: float = SETTLE_TIMEOUT_S
):
    """Let the app run until ``predicate()`` is truthy; fail with ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = predicate()
        except Exception:
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}\n{screen_text(pilot.app)}")
        await pilot.pause(0.02)


def screen_text(app) -> str:
    """The screen as plain text, one line per row (what a user reads)."""
    console = Console(
        width=app.size.width,
        height=app.size.height,
        file=io.StringIO(),
        force_terminal=True,
        color_system=None,
        record=True,
        legacy_windows=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text()


def render_text(renderable, width: int = 120) -> str:
    """A Rich renderable as plain text."""
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    console.print(renderable)
    return console.export_text()


def explore(app):
    return app.explore_page()


async def open_explore(pilot):
    """Wait for the first complete Explore screen: tree roots, a selected call, its cards."""
    app = pilot.app
    await goto_page(pilot, "explore")
    page = await wait_for(pilot, app.explore_page, "the Explore page")
    await wait_for(
        pilot,
        lambda: (
            page.inspector.shown is not None
            and page.inspector.cards
            and all(c.ref for c in page.inspector.cards)
        ),
        "the inspector's tensor cards",
    )
    return page


async def goto_page(pilot, page_id: str) -> None:
    """Switch to page ``page_id`` once the run is open (the app opens on Replay)."""
    app = pilot.app
    ids = await wait_for(
        pilot,
        lambda: app.run_name and app.current_mode != "_default" and [p.id for p in app.pages()],
        "the run's first page",
    )
    if app.current_mode != page_id:
        await app.action_page(ids.index(page_id) + 1)
    await wait_for(pilot, lambda: app.current_mode == page_id, f"the {page_id} page")


def node_named(page, name: str):
    """The loaded tree row of the call named ``name``."""
    for node in page.calls.call_tree.call_nodes():
        if node.data.row.get("name") == name:
            return node
    return None


@pytest.fixture
def no_torch(tmp_path: Path) -> Path:
    """A folder that, first on PYTHONPATH, makes `import torch` fail."""
    blocker = tmp_path / "no_torch"
    (blocker / "torch").mkdir(parents=True)
    (blocker / "torch" / "__init__.py").write_text(
        'raise ImportError("the viewer must not import torch")\n'
    )
    return blocker


@pytest.fixture(scope="session")
def run_dir(recorded_run: Path) -> Path:
    return recorded_run


@pytest.fixture(scope="session")
def vit_run(tmp_path_factory) -> Path:
    """One step of the ViT example."""
    return record_example(tmp_path_factory.mktemp("vit"), "vit", "--steps", "1")


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory) -> Path:
    """One step of the text language-model example."""
    return record_example(tmp_path_factory.mktemp("text_lm"), "text_lm", "--steps", "1")


EVAL_BETWEEN_STEPS = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(16, 4), torch.randint(0, 2, (16,))


@torch.no_grad()
def estimate_loss():
    model.eval()
    losses = [nn.functional.cross_entropy(model(torch.randn(16, 4)), target) for _ in range(3)]
    model.train()
    return sum(losses) / len(losses)


@torch.no_grad()
def sample():
    return model(torch.randn(1, 4)).argmax(-1)


for step in range(3):
    estimate_loss()  # evaluation between steps: light groups, and gaps between batch indices
    sample()
    loss = nn.functional.cross_entropy(model(data), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.fixture(scope="session")
def gapped_run(tmp_path_factory) -> Path:
    """A run whose batch indices have gaps: evaluation under no_grad between the steps."""
    return record_script(tmp_path_factory.mktemp("gapped"), EVAL_BETWEEN_STEPS, "--steps", "3")


@pytest.fixture(scope="session")
def two_runs(recorded_run: Path, tmp_path_factory) -> Path:
    """A runs folder holding the recorded run twice (an older copy), for the run picker."""
    root = tmp_path_factory.mktemp("two runs")
    shutil.copytree(recorded_run, root / recorded_run.name)
    shutil.copytree(recorded_run, root / "20000101-000000_train_000000")
    return root
