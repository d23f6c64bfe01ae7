"""Recording in-process for tests."""

from __future__ import annotations

from pathlib import Path

from tvis.record.builder import Settings
from tvis.record.runner import Outcome, record

HERE = Path(__file__).resolve().parent
SCRIPTS = HERE / "scripts"  # plain scripts written the way real training code is


def record_here(fn, tmp_path: Path, **settings) -> Outcome:
    """Record ``fn()`` with the test tree as the project."""
    return record(fn, Settings(**settings), HERE, tmp_path / "run")
