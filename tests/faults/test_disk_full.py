"""A disk that fills up during `tvis run`: one sentence, the script's exit code, a
finalized run without temp folders, training untouched.

The disk is a real 4 MB tmpfs mounted in a private mount namespace (``unshare``).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import TVIS

SCRIPT = Path(__file__).resolve().parent / "scripts" / "wide_mlp.py"


def _can_mount_tmpfs(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = f"mount -t tmpfs -o size=64k tmpfs {where}"
    done = subprocess.run(["unshare", "-rm", "sh", "-c", probe], capture_output=True)
    return done.returncode == 0


def _run_on_small_disk(tmp_path: Path, size: str, *tvis_args: str):
    disk, kept = tmp_path / "disk", tmp_path / "kept"
    disk.mkdir()
    kept.mkdir()
    if not _can_mount_tmpfs(disk):
        pytest.skip("needs `unshare -rm` and tmpfs mounts to make a small disk")
    shell = (
        f"mount -t tmpfs -o size={size} tmpfs {disk} && "
        f"{TVIS} run --out {disk} {' '.join(tvis_args)}; code=$?; "
        f"cp -a {disk}/. {kept}/; exit $code"
    )
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", shell],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    (run,) = [p for p in kept.iterdir() if p.is_dir()]
    return done, run


def test_disk_full_keeps_exit_code_and_finalizes_run(tmp_path):
    plain = subprocess.run(
        [sys.executable, str(SCRIPT), "8"], capture_output=True, text=True, timeout=120
    )
    done, run = _run_on_small_disk(tmp_path, "4m", "--steps", "20", str(SCRIPT), "8")
    assert done.returncode == 3, done.stderr  # the script's own exit code
    assert "Traceback" not in done.stderr
    assert "tvis: disk full at" in done.stderr
    assert done.stdout == plain.stdout  # training untouched: same losses, bit for bit
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["exit_code"] == 3
    leftovers = [p for p in run.rglob("*") if p.name.endswith(".tmp")]
    assert leftovers == []
    listed = subprocess.run([TVIS, "ls", "--json", str(run)], capture_output=True, text=True)
    row = json.loads(listed.stdout)
    assert row["status"] == "failed"
    # The index lists exactly what reached the disk; what did not is counted as lost.
    assert row["batches"] == len(list((run / "batches").iterdir())) >= 1
    assert row["steps"] == len(list((run / "steps").iterdir())) < 8
    # The sentence says what happened: what was kept, and that the rest was not written.
    sentence = next(line for line in done.stderr.splitlines() if "disk full at" in line)
    assert f"kept {row['batches']} batch(es) and {row['steps']} step(s);" in sentence
    assert "could not be written and are not in the run" in sentence


def test_disk_nearly_full_from_the_start_still_finalizes(tmp_path):
    done, run = _run_on_small_disk(tmp_path, "40k", "--steps", "5", str(SCRIPT), "3")
    assert "Traceback" not in done.stderr
    assert done.returncode == 3
    assert "tvis: disk full at" in done.stderr
    meta = json.loads((run / "meta.json").read_text())
    assert meta["status"] == "failed" and meta["exit_code"] == 3
    assert [p for p in run.rglob("*") if p.name.endswith(".tmp")] == []
