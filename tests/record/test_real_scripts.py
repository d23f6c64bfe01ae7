"""`tvis run` on scripts written the way real training code is, compared with plain python.

Each script in scripts/ exercises one pattern (see scripts/README.md). Under tvis it must
exit as it does plainly, log bit-identical losses for everything it got to log, leave a
readable run, and hit no failure inside tvis's own instrumentation.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import SCRIPTS
from support import run_tvis

from tvis.store.reader import RunReader, find_runs

HELPERS = {"helpers_mod.py", "config_exec.py"}  # imported or exec'd by other scripts
ALL = sorted(p.name for p in SCRIPTS.glob("*.py") if p.name not in HELPERS)


def _start_plain(script: Path, log: Path) -> subprocess.Popen:
    """The script run plainly, started beside its recording (two processes, two cores)."""
    return subprocess.Popen(
        [sys.executable, str(script), "--steps", "6", "--log", str(log)],
        cwd=script.parent,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("name", ALL)
def test_real_script_records_without_changing_it(name, tmp_path):
    script = SCRIPTS / name
    plain_log, tvis_log = tmp_path / "plain.jsonl", tmp_path / "tvis.jsonl"
    plain = _start_plain(script, plain_log)
    out = tmp_path / "runs"
    recorded = run_tvis(
        "run",
        "--steps",
        "3",
        "--out",
        str(out),
        str(script),
        "--steps",
        "6",
        "--log",
        str(tvis_log),
        cwd=script.parent,
    )
    plain.wait(timeout=300)
    assert "Traceback" not in recorded.stderr or plain.returncode != 0, recorded.stderr
    assert recorded.returncode == plain.returncode, recorded.stderr
    plain_lines = plain_log.read_text().splitlines() if plain_log.exists() else []
    tvis_lines = tvis_log.read_text().splitlines() if tvis_log.exists() else []
    assert tvis_lines == plain_lines[: len(tvis_lines)]  # bit-identical losses, same order
    (run_path,) = find_runs(out)
    run = RunReader(run_path)
    index = run.index()
    problems = [n["text"] for n in index.get("notices", []) if "tvis failed" in n["text"]]
    assert not problems
    if tvis_lines:  # a script that trained (launcher-only ones fail alike under both) left batches
        assert run.batch_ids(), f"{name} logged {len(tvis_lines)} batches but none was recorded"
    for i in run.batch_ids():
        batch = run.batch(i)
        for entry in batch.record["tensors"]:
            batch.array(entry["id"])
