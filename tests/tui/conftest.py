"""Fixtures for the viewer's tests: runs recorded from the examples (the session fixture
``recorded_run`` and those below). Helpers live in ``viewer_support``: nothing imports
``conftest`` by name, so any subset of test files collects."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sshd import ssh_lab  # noqa: E402, F401  (a fixture: pytest finds it by name)
from support import record_example, record_script  # noqa: E402


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
