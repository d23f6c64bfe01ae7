"""Helpers shared by the tests of every room (import as `from support import ...`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
TVIS = str(Path(sys.executable).with_name("tvis"))


def run_tvis(*args: str, cwd: Path | None = None, timeout: float = 300, env=None):
    """`tvis ARGS` in a subprocess, as a user runs it."""
    return subprocess.run(
        [TVIS, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )
