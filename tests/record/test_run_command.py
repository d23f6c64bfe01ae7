"""`tvis run` as a user runs it: a subprocess on real scripts, good and bad."""

from __future__ import annotations

import json
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest
from support import TVIS, run_tvis

from tvis.store.format import folder_name
from tvis.store.reader import RunReader, find_runs

TRAIN = """
import sys, time, torch, torch.nn as nn
torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(16, 4), torch.randn(16, 1)
for step in range(int(sys.argv[1]) if len(sys.argv) > 1 else 10):
    {before}
    loss = ((model(x) - y) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("after the loop")
"""


def _script(tmp_path: Path, body: str = TRAIN, before: str = "pass", name="train.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body.replace("{before}", before)))
    return path


def _only_run(tmp_path: Path) -> RunReader:
    (run,) = find_runs(tmp_path / "tvis_runs")
    return RunReader(run)


def test_records_steps_and_stops_the_script(tmp_path):
    script = _script(tmp_path)
    result = run_tvis("run", "--steps", "2", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "after the loop" not in result.stdout
    run = _only_run(tmp_path)
    assert run.status == "complete"
    assert len(run.index()["steps"]) == 2
    assert f"tvis tui {run.path}" in result.stderr
    assert f":{run.path}" in result.stderr  # the host:path form for a laptop


def test_script_that_ends_early_keeps_what_it_recorded(tmp_path):
    script = _script(tmp_path)
    result = run_tvis("run", "--steps", "5", str(script), "2", cwd=tmp_path)
    assert result.returncode == 0
    assert "after the loop" in result.stdout
    assert len(_only_run(tmp_path).index()["steps"]) == 2


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "does not exist"),
        (["."], "is a directory"),
        (["--steps", "0", "train.py"], "--steps must be at least 1"),
        (["--steps", "x", "train.py"], "invalid int value"),
        (["--out", "/proc/forbidden", "train.py"], "cannot write runs"),
    ],
)
def test_bad_command_line_is_one_sentence_and_exit_2(tmp_path, args, message):
    _script(tmp_path)
    result = run_tvis("run", *args, cwd=tmp_path)
    assert result.returncode == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_crash_keeps_the_run_and_its_traceback(tmp_path):
    script = _script(tmp_path, before="if step == 1: raise ValueError('bad batch')")
    result = run_tvis("run", "--steps", "3", str(script), cwd=tmp_path)
    assert result.returncode == 1
    assert "ValueError: bad batch" in result.stderr
    assert "tvis/record" not in result.stderr.split("ValueError")[0]  # no tvis frames
    run = _only_run(tmp_path)
    assert run.status == "failed"
    assert "ValueError: bad batch" in run.meta["error"]
    assert len(run.index()["steps"]) == 1
    assert run.batch(run.batch_ids()[0]).record["calls"]


def test_sys_exit_code_passes_through(tmp_path):
    script = _script(tmp_path, before="if step == 1: sys.exit(3)")
    result = run_tvis("run", str(script), cwd=tmp_path)
    assert result.returncode == 3
    run = _only_run(tmp_path)
    assert run.meta["exit_code"] == 3 and len(run.index()["steps"]) == 1


WITH_ARGPARSE = """
import argparse, torch, torch.nn as nn
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=10)
steps = parser.parse_args().steps
model = nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(steps):
    loss = model(torch.randn(8, 4)).pow(2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


def test_tvis_options_after_the_script_are_pointed_out_when_the_script_refuses_them(tmp_path):
    script = _script(tmp_path, WITH_ARGPARSE)
    result = run_tvis("run", str(script), "--out", str(tmp_path / "runs"), cwd=tmp_path)
    assert result.returncode == 2  # the script's argparse said no
    assert "unrecognized arguments: --out" in result.stderr
    assert f"tvis: --out came after {script}, so the script got it" in result.stderr
    assert "tvis run --out …" in result.stderr and "Traceback" not in result.stderr


def test_a_script_that_takes_an_option_tvis_also_has_is_left_alone(tmp_path):
    script = _script(tmp_path, WITH_ARGPARSE)
    result = run_tvis("run", str(script), "--steps", "2", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "came after" not in result.stderr


def test_bare_except_cannot_swallow_the_stop(tmp_path):
    body = TRAIN.replace(
        "    loss = ", "    try:\n        pass\n    except:\n        pass\n    loss = "
    )
    body = body.replace(
        "    opt.step()\n",
        "    try:\n        opt.step()\n    except BaseException:\n        pass\n",
    )
    script = _script(tmp_path, body=body)
    result = run_tvis("run", "--steps", "2", str(script), "1000", cwd=tmp_path, timeout=60)
    assert result.returncode == 0
    assert "after the loop" not in result.stdout
    run = _only_run(tmp_path)
    assert len(run.index()["steps"]) >= 2
    assert any("caught tvis's stop signal" in n["text"] for n in run.index()["notices"])


def test_script_that_never_steps_stops_at_max_batches(tmp_path):
    body = """
    import torch
    model = torch.nn.Linear(3, 1)
    while True:
        model(torch.randn(2, 3)).sum().backward()
    """
    script = _script(tmp_path, body=body)
    result = run_tvis(
        "run", "--steps", "1000", "--max-batches", "5", str(script), cwd=tmp_path, timeout=60
    )
    assert result.returncode == 0, result.stderr
    run = _only_run(tmp_path)
    assert len([b for b in run.index()["batches"] if not b["light"]]) == 5


def test_script_without_backward_stops_at_max_batches(tmp_path):
    body = """
    import torch
    model = torch.nn.Linear(3, 1)
    for _ in range(1000):
        loss = model(torch.randn(2, 3)).sum()
    """
    script = _script(tmp_path, body=body)
    result = run_tvis("run", "--max-batches", "4", str(script), cwd=tmp_path, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "--max-batches" in result.stderr


def _start_slow(tmp_path: Path) -> tuple[subprocess.Popen, Path]:
    script = _script(tmp_path, before="time.sleep(0.05)")
    proc = subprocess.Popen(
        [TVIS, "run", "--steps", "100000", str(script), "100000"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        # Ctrl-C reaches Python even when this suite runs in the background of a shell
        # without job control, which starts it with SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while time.time() < deadline:
        runs = find_runs(tmp_path / "tvis_runs") if (tmp_path / "tvis_runs").exists() else []
        if runs and len(RunReader(runs[0]).batch_ids()) >= 3:
            return proc, runs[0]
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("the recording never wrote three batches")


def test_ctrl_c_exits_130_with_a_readable_run(tmp_path):
    proc, run_path = _start_slow(tmp_path)
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    run = RunReader(run_path)
    assert run.status == "interrupted"
    assert run.batch(run.batch_ids()[0]).record["calls"]


def test_sigkill_leaves_finished_batches_readable_and_run_incomplete(tmp_path):
    proc, run_path = _start_slow(tmp_path)
    proc.kill()
    proc.communicate(timeout=30)
    run = RunReader(run_path)
    assert run.status == "incomplete"
    for i in run.batch_ids():
        batch = run.batch(i)
        assert batch.record["calls"]
        for entry in batch.record["tensors"]:
            batch.array(entry["id"])  # every stored value is readable
    # A batch being written when the kill came stays a temp folder: never listed as a batch.
    temp = [p.name for p in (run_path / "batches").iterdir() if not p.name.isdigit()]
    assert all(name.startswith(".") for name in temp)
    assert [folder_name(i) for i in run.batch_ids()] == sorted(
        p.name for p in (run_path / "batches").iterdir() if p.name.isdigit()
    )
    assert json.loads((run_path / "meta.json").read_text())["status"] == "running"
