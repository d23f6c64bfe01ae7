"""`tvis run --from-step N`: unobserved to step N, then steps N … N+K−1 recorded exactly."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from helpers import HERE
from support import run_tvis
from training import setup, train

from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader, find_runs


def _late(tmp_path, first: int, steps: int):
    model, opt, loader = setup()
    log: list = []
    outcome = record(
        lambda: train(model, opt, loader, 100, log),
        Settings(steps=steps),
        HERE,
        tmp_path / "run",
        from_step=first,
    )
    return model, log, outcome


def test_recorded_steps_bit_identical_to_plain_in_process(tmp_path):
    plain_model, plain_opt, plain_loader = setup()
    plain_log: list = []
    weights = []

    def keep_weights(opt, args, kwargs):
        weights.append({n: p.detach().clone() for n, p in plain_model.named_parameters()})

    handle = plain_opt.register_step_pre_hook(keep_weights)
    train(plain_model, plain_opt, plain_loader, 7, plain_log)
    handle.remove()

    model, log, outcome = _late(tmp_path, 5, 2)
    assert outcome.status == "complete" and outcome.steps == 2
    assert len(log) == 7  # stopped after step 6, the last recorded
    for (a, _), (b, _) in zip(plain_log, log, strict=True):
        assert torch.equal(a, b)
    run = RunReader(outcome.run_dir)
    steps = run.index()["steps"]
    assert [s["index"] for s in steps] == [5, 6]
    for s in steps:
        assert s["loss"] == float(plain_log[s["index"]][0])
        chunk = run.step(s["index"])
        for param in chunk.record["params"]:
            weight = torch.from_numpy(np.array(chunk.array(param["weight"])))
            assert torch.equal(weight, weights[s["index"]][param["name"]]), param["name"]
    assert run.meta["settings"]["steps"] == 2


def test_only_the_recorded_steps_have_batches(tmp_path):
    _, _, outcome = _late(tmp_path, 4, 1)
    index = RunReader(outcome.run_dir).index()
    train_batches = [b for b in index["batches"] if not b["light"]]
    assert len(train_batches) == 1 and train_batches[0]["step"] == 4
    assert train_batches[0]["n_calls"] > 0  # modules recorded from a late start


def test_loader_workers_started_before_the_start_are_named_once(tmp_path):
    plain_log: list = []
    model, opt, loader = setup(workers=2)
    train(model, opt, loader, 4, plain_log)
    model, opt, loader = setup(workers=2)
    log: list = []
    outcome = record(
        lambda: train(model, opt, loader, 100, log),
        Settings(steps=1),
        HERE,
        tmp_path / "run",
        from_step=3,
    )
    assert [torch.equal(a, b) for (a, _), (b, _) in zip(plain_log, log, strict=True)] == [True] * 4
    started = [n for n in outcome.notices if "worker process(es)" in n]
    assert len(started) == 1 and "recording started at step 3" in started[0]


def test_script_with_fewer_steps_says_nothing_was_recorded(tmp_path):
    model, opt, loader = setup()
    outcome = record(
        lambda: train(model, opt, loader, 3, []),
        Settings(steps=2),
        HERE,
        tmp_path / "run",
        from_step=10,
    )
    assert outcome.steps == 0
    assert any("fewer than --from-step 10" in n for n in outcome.notices)


SCRIPT = """
import sys, torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
x, y = torch.randn(64, 8), torch.randn(64, 1)
for step in range(int(sys.argv[1])):
    i = torch.randint(0, 64, (16,))
    loss = torch.nn.functional.mse_loss(model(x[i]), y[i])
    opt.zero_grad()
    loss.backward()
    print(step, loss.item().hex(), flush=True)
    opt.step()
"""


def test_from_step_subprocess_matches_plain_python(tmp_path):
    import subprocess

    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    plain = subprocess.run(
        [sys.executable, str(script), "40"], capture_output=True, text=True, check=True
    )
    losses = dict(line.split() for line in plain.stdout.splitlines())
    result = run_tvis("run", "--from-step", "30", "--steps", "3", str(script), "40", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    printed = [line.split() for line in result.stdout.splitlines()]
    assert [int(s) for s, _ in printed] == list(range(33))  # stopped after step 32
    assert all(losses[s] == h for s, h in printed)
    (run_dir,) = find_runs(tmp_path / "tvis_runs")
    run = RunReader(Path(run_dir))
    assert run.meta["from_step"] == 30
    steps = run.index()["steps"]
    assert [s["index"] for s in steps] == [30, 31, 32]
    assert all(s["loss"].hex() == losses[str(s["index"])] for s in steps)
    assert "recorded 3 step(s)" in result.stderr
