"""Fixtures for the agent tests: a runs root with a synthetic run, the real sshd lab, and a
real `tvis agent --stdio` subprocess.

The synthetic run holds the edge cases a recording may not (NaN/Inf, sequence-first
tensors, stats-only values); test_recorded.py runs the same methods over the example run
recorded by ``recorded_run`` (tests/conftest.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# tests/sshd.py is shared by every test folder; tests/ is not a package, so put it on the
# path to import the module (tests/tui can do the same).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agent_process import AgentProcess  # noqa: E402
from sshd import ssh_lab  # noqa: E402, F401  (a fixture: pytest finds it by name)
from synthetic_run import SyntheticRun, build_run  # noqa: E402

from tvis.agent.api import AgentAPI  # noqa: E402


@pytest.fixture(scope="session")
def run(tmp_path_factory: pytest.TempPathFactory) -> SyntheticRun:
    """One complete run under a root whose name has a space (tests only read it)."""
    return build_run(tmp_path_factory.mktemp("runs root"))


@pytest.fixture(scope="session")
def runs_root(run: SyntheticRun) -> Path:
    return run.root


@pytest.fixture
def api(runs_root: Path) -> AgentAPI:
    return AgentAPI(runs_root)


@pytest.fixture
def agent_process(runs_root: Path):
    agent = AgentProcess(runs_root)
    yield agent
    agent.kill()
