"""The examples recorded by `tvis run` in a subprocess, compared with plain `python`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import EXAMPLES, run_tvis

from tvis.store.reader import RunReader, find_runs

CASES = {
    "image_classifier": ["--workers", "0"],
    "image_classifier@workers": ["--workers", "2"],  # real workers vs tvis's emulated ones
    "text_lm": ["--workers", "0"],
    "vit": ["--workers", "0"],
}


def _losses(log) -> list[float]:
    return [json.loads(line)["loss"] for line in log.read_text().splitlines()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_losses_bit_identical_across_processes(name, tmp_path):
    folder = EXAMPLES / name.split("@")[0]
    extra = CASES[name]
    plain_log, tvis_log = tmp_path / "plain.jsonl", tmp_path / "tvis.jsonl"
    subprocess.run(
        [sys.executable, str(folder / "train.py"), "--steps", "4", "--log", str(plain_log), *extra],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=300,
    )
    result = run_tvis(
        "run",
        "--steps",
        "3",
        "--out",
        str(tmp_path / "runs"),
        str(folder / "train.py"),
        "--steps",
        "4",
        "--log",
        str(tvis_log),
        *extra,
        cwd=folder,
    )
    assert result.returncode == 0, result.stderr
    plain, recorded = _losses(plain_log), _losses(tvis_log)
    assert len(recorded) >= 2
    assert recorded == plain[: len(recorded)]  # exact float equality
    run = RunReader(find_runs(tmp_path / "runs")[0])
    index = run.index()
    assert len(index["steps"]) == 3
    train = [b for b in index["batches"] if not b["light"]]
    assert [b["loss"] for b in train][: len(recorded)] == recorded
    assert not [n for n in index["notices"] if "tvis failed" in n["text"]]


def test_image_classifier_records_what_its_views_need(recorded_run):
    run = RunReader(recorded_run)
    index = run.index()
    assert index["data"]["classes"] == ["circle", "square", "triangle", "cross", "star"]
    assert index["data"]["normalize"]["mean"] == [0.35, 0.35, 0.35]
    batch = run.batch(run.batch_ids()[0]).record
    names = {c["name"] for c in batch["calls"]}
    assert {"features.0.0", "classifier"} <= names or any(n.startswith("features") for n in names)
    assert any(c["kind"] == "function" and c["phase"] == "data" for c in batch["calls"])
    assert batch["loss"]["fn"] == "cross_entropy" and len(batch["loss"]["per_sample"]) == 32
    assert batch["gradcam"] and batch["repr"] and batch["lines"]
    assert any(t.get("raw_image") for t in batch["tensors"])  # the PIL image before ToTensor
    assert any(Path(f).name == "train.py" for f in run.sources())


def test_ls_lists_the_run(recorded_run):
    result = run_tvis("ls", str(recorded_run.parent), "--json")
    assert result.returncode == 0
    (row,) = [json.loads(line) for line in result.stdout.splitlines()]
    assert row["run_id"] == recorded_run.name and row["status"] == "complete"
    assert row["steps"] == 2 and row["batches"] == 2 and row["bytes"] > 0
    text = run_tvis("ls", str(recorded_run.parent)).stdout
    assert recorded_run.name in text and "complete" in text
