"""The viewer's local agent runs as a process of its own, whatever folder it is started in."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tvis.agent.client import LocalProcessClient


@pytest.mark.skipif(sys.version_info < (3, 11), reason="python -P needs Python 3.11")
def test_a_local_agent_ignores_modules_in_the_working_folder(
    tmp_path: Path, monkeypatch, runs_root: Path
):
    project = tmp_path / "project"
    project.mkdir()
    for shadow in ("msgpack.py", "numpy.py", "queue.py"):
        (project / shadow).write_text("raise SystemExit('a project module was imported')\n")
    monkeypatch.chdir(project)
    client = LocalProcessClient(runs_root, echo_stderr=False)
    try:
        info = client.handshake()
        assert info["runs"]
    finally:
        client.close()
