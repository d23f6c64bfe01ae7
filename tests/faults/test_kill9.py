"""`kill -9` at chosen moments: every step the script saw finish is on disk with its
batch, every listed batch and step is readable, and `tvis ls` cleans what the killed
writer left."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from support import TVIS

from tvis.store.reader import RunReader

SCRIPT = Path(__file__).resolve().parent / "scripts" / "steady_steps.py"


def _kill_when(tmp_path: Path, marker: str, delay: float, pause_at: str = "") -> tuple:
    """Run the script under `tvis run`, SIGKILL it ``delay`` s after it prints ``marker``;
    return the run folder and the steps the script saw finish."""
    out = tmp_path / "runs"
    proc = subprocess.Popen(
        [TVIS, "run", "--steps", "30", "--out", str(out), str(SCRIPT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PAUSE_AT": pause_at, "PYTHONUNBUFFERED": "1"},
    )
    seen: list[str] = []
    deadline = time.monotonic() + 120
    try:
        for line in proc.stdout:
            seen.append(line.strip())
            if line.strip() == marker or time.monotonic() > deadline:
                break
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        rest, _ = proc.communicate(timeout=60)
    # Output printed before the kill landed also counts as seen by the script.
    seen += [line.strip() for line in rest.splitlines()]
    assert marker in seen, seen
    finished = sum(line.startswith("stepped ") for line in seen)
    (run,) = [p for p in out.iterdir() if p.is_dir()]
    return run, finished


def _check_run(run: Path, finished: int) -> None:
    listed = subprocess.run([TVIS, "ls", "--json", str(run)], capture_output=True, text=True)
    row = json.loads(listed.stdout)
    assert row["status"] == "incomplete"
    assert row["steps"] >= finished  # nothing the script saw finish is lost
    assert row["batches"] >= finished  # nor the batch each of those steps used
    assert [p for p in run.rglob("*") if p.name.endswith(".tmp")] == []
    reader = RunReader(run)
    index = reader.index()
    for step in index["steps"]:
        chunk = reader.step(step["index"])
        for param in chunk.record["params"]:
            chunk.array(param["update"])  # raises StoreError if torn
            chunk.tensor(param["weight"])
    for batch in index["batches"]:
        assert reader.batch(batch["index"]).record["calls"]


@pytest.mark.parametrize(
    ("marker", "delay", "pause_at"),
    [
        ("in forward 2", 0.0, "forward:2"),  # in a forward, two steps finished
        ("stepped 1", 0.0, "stepped:1"),  # between steps
        ("stepping 2", 0.005, ""),  # during the step's parameter capture and write
        ("stepped 0", 0.05, ""),
        ("stepped 0", 0.2, ""),
        ("stepped 0", 0.45, ""),
    ],
)
def test_kill9_keeps_every_finished_step(tmp_path, marker, delay, pause_at):
    run, finished = _kill_when(tmp_path, marker, delay, pause_at)
    _check_run(run, finished)
