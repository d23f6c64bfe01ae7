"""`tvis ls`: runs found where the agent finds them, and quiet in a pipeline."""

from __future__ import annotations

import subprocess

from support import TVIS, run_tvis

from tvis.store.writer import RunWriter


def _run(path) -> None:
    RunWriter(path, {"script": "train.py", "pid": -1, "host": "elsewhere"})


def test_ls_finds_runs_in_project_subfolders(tmp_path):
    _run(tmp_path / "examples" / "mnist" / "tvis_runs" / "20260101-000000_train_aaaaaa")
    _run(tmp_path / "examples" / "gpt" / "tvis_runs" / "20260102-000000_train_bbbbbb")
    _run(tmp_path / "examples" / "gpt" / ".venv" / "tvis_runs" / "20260103-000000_hidden")
    result = run_tvis("ls", str(tmp_path / "examples"))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[1:]] == [
        "20260102-000000_train_bbbbbb",
        "20260101-000000_train_aaaaaa",
    ]


def test_ls_into_head_ends_quietly_when_head_stops_reading(tmp_path):
    for i in range(800):  # far more than a pipe buffer of output
        _run(tmp_path / "tvis_runs" / f"20260101-{i:06d}_train")
    done = subprocess.run(
        f"{TVIS} ls {tmp_path / 'tvis_runs'} | head -3",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert len(done.stdout.splitlines()) == 3
    assert done.stderr == ""


def test_ls_prints_sizes_in_the_units_it_names(tmp_path):
    """A run of 2,500,000 bytes is "2.5 MB" (10^6 bytes), not 2.4 (MiB labelled MB)."""
    run = tmp_path / "tvis_runs" / "20260101-000000_train_aaaaaa"
    _run(run)
    header = sum(f.stat().st_size for f in run.rglob("*") if f.is_file())
    (run / "padding.bin").write_bytes(b"\0" * (2_500_000 - header))
    result = run_tvis("ls", str(tmp_path / "tvis_runs"))
    assert result.returncode == 0, result.stderr
    assert "2.5 MB" in result.stdout.splitlines()[1], result.stdout


def test_sizes_are_printed_in_powers_of_1000():
    from tvis.store.printable import human_bytes

    assert [human_bytes(n) for n in (999, 1000, 1_500, 101_623_851, 2_000_000_000)] == [
        "999 B",
        "1.0 kB",
        "1.5 kB",
        "101.6 MB",
        "2.0 GB",
    ]
