"""Helpers shared by the tests of every room (import as `from support import ...`)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from tvis.store.format import COMPLETE
from tvis.store.writer import RunWriter

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


def record_example(
    folder: Path, example: str, *tvis_args: str, script_args: tuple[str, ...] = ()
) -> Path:
    """``examples/EXAMPLE/train.py SCRIPT_ARGS`` recorded by `tvis run TVIS_ARGS` into
    ``folder``, as a user runs it; the run's folder."""
    script = EXAMPLES / example / "train.py"
    # --project: the example's own folder, as a user's script folder outside any repository
    # (inside this one, files would be named from the repository root).
    project = ["--project", str(script.parent)]
    command = ["run", *tvis_args, "--out", str(folder), *project, str(script), *script_args]
    result = run_tvis(*command, cwd=folder)
    assert result.returncode == 0, result.stderr
    (run,) = [p for p in folder.iterdir() if p.is_dir()]
    return run


def record_script(folder: Path, source: str, *tvis_args: str, exit_code: int = 0) -> Path:
    """``source`` written as ``folder/train.py`` and recorded by `tvis run TVIS_ARGS` in a
    subprocess (the run goes to ``folder/runs``); the run's folder."""
    script = folder / "train.py"
    script.write_text(source)
    result = run_tvis("run", *tvis_args, "--out", str(folder / "runs"), str(script), cwd=folder)
    assert result.returncode == exit_code, result.stderr
    (run,) = [p for p in (folder / "runs").iterdir() if p.is_dir()]
    return run


def record_plain_and_tvis(script: Path, root: Path) -> tuple[str, Path | str]:
    """``script`` (``scripts/NAME/train.py``) run plainly, then under `tvis run --steps 2`,
    each in a fresh folder under ``root`` (its data made anew): ``(NAME, the runs folder)``
    with each side's stdout kept beside it, or ``(NAME, what went wrong)``."""
    name = script.parent.name
    plain_dir, work = root / "plain" / name, root / "tvis" / name
    plain_dir.mkdir(parents=True)
    work.mkdir(parents=True)
    plain = _run_in([sys.executable, str(script)], plain_dir)
    result = _run_in([TVIS, "run", "--steps", "2", "--out", "runs", str(script)], work)
    if plain.returncode != 0 or result.returncode != 0 or "tvis failed" in result.stderr:
        return name, plain.stderr + result.stderr
    (work / "plain.txt").write_text(plain.stdout)
    (work / "tvis.txt").write_text(result.stdout)
    (work / "plain_stderr.txt").write_text(plain.stderr)
    (work / "tvis_stderr.txt").write_text(result.stderr)
    return name, work / "runs"


def record_scripts(folder: Path, names: Iterable[str], root: Path) -> dict[str, Path | str]:
    """Each ``folder/NAME/train.py`` recorded by ``record_plain_and_tvis``, three at a time:
    NAME → its runs folder, or what went wrong."""
    with ThreadPoolExecutor(3) as pool:
        return dict(pool.map(lambda n: record_plain_and_tvis(folder / n / "train.py", root), names))


def printed_under_tvis(runs: Path) -> tuple[list[str], list[str]]:
    """What a recorded script printed plainly and under tvis (tvis's own lines left out),
    non-empty lines: the same losses in the same order when observing changed nothing."""
    plain = [line for line in (runs.parent / "plain.txt").read_text().splitlines() if line]
    lines = (runs.parent / "tvis.txt").read_text().splitlines()
    return plain, [line for line in lines if line and not line.startswith("tvis:")]


class FirstBatch:
    """A recorded run's first training batch, seen through the agent: its loss detail and
    sample table."""

    def __init__(self, client: Any) -> None:
        (row,) = client.call("runs")
        self.client, self.name = client, row["run"]
        self.info = client.call("run", run=self.name)
        first = next(b for b in self.info["batches"] if not b.get("light"))
        self.index, self.size = first["index"], first.get("batch_size")
        self.detail = self.call("loss_detail", batch=self.index)
        self.rows = self.call("sample_table", batch=self.index)["rows"]

    def call(self, method: str, **params):
        return self.client.call(method, run=self.name, **params)


def _run_in(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        command, cwd=cwd, capture_output=True, text=True, timeout=300, env=os.environ.copy()
    )


# Stands in for an ssh session that dies: relays the agent's first argv[2] bytes, then
# ends (the agent is killed, and the client's stream ends wherever that cut falls).
_CUT_RELAY = """
import os, subprocess, sys
agent = subprocess.Popen(
    [sys.executable, "-m", "tvis.cli", "agent", "--stdio", "--root", sys.argv[1]],
    stdout=subprocess.PIPE,
)
left = int(sys.argv[2])
while left > 0 and (data := os.read(agent.stdout.fileno(), min(left, 1 << 16))):
    os.write(1, data)
    left -= len(data)
agent.kill()
"""


def cut_agent_argv(root: Path, after_bytes: int) -> list[str]:
    """A `tvis agent --stdio` for ``root`` whose output stops after ``after_bytes``."""
    return [sys.executable, "-c", _CUT_RELAY, str(root), str(after_bytes)]


# 64 MiB: big enough to take many chunks in flight through ssh, small enough for the
# 2-core machine the suite runs on (the benchmark moves 196 MiB).
LARGE_SHAPE = (16, 64, 128, 128)


def write_large_run(root: Path) -> tuple[Path, np.ndarray]:
    """A run whose batch 0 has one call, ``encoder``, with a 64 MiB float32 output."""
    values = np.random.default_rng(1).standard_normal(LARGE_SHAPE, dtype=np.float32)
    entry = {
        "id": 0,
        "shape": list(LARGE_SHAPE),
        "dtype": "float32",
        "device": "cpu",
        "stats": {"numel": values.size},
        "batch_dim": 0,
        "batch_dim_inferred": False,
        "grad": None,
        "of": None,
    }
    call = {
        "id": 0,
        "parent": -1,
        "depth": 0,
        "kind": "module",
        "name": "encoder",
        "cls": "Conv2d",
        "phase": "forward",
        "inputs": [],
        "outputs": [{"name": "out", "tensor": 0}],
        "flags": [],
    }
    batch = {"index": 0, "step": 0, "micro": 0, "batch_size": 16, "n_calls": 1, "phase_ms": {}}
    path = root / "tvis_runs" / "20260101-000000_big_000000"
    writer = RunWriter(path, {"script": "big.py"})
    writer.write_batch(0, {"batch": batch, "calls": [call], "tensors": [entry]}, {0: values})
    writer.write_index({"batches": [batch], "steps": [], "params": [], "notices": [], "data": {}})
    writer.write_meta(status=COMPLETE)
    return path, values
