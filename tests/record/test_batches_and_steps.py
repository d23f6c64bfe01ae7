"""How a recording is cut into batches and steps, on real patterns of training code."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import SCRIPTS, record_here
from support import run_tvis

from tvis.store.reader import RunReader, find_runs


@pytest.fixture
def record(tmp_path):
    def record(script: str, *args: str, steps: int = 2) -> RunReader:
        out = tmp_path / script
        result = run_tvis(
            "run",
            "--steps",
            str(steps),
            "--out",
            str(out),
            str(SCRIPTS / script),
            *args,
            cwd=SCRIPTS,
        )
        assert result.returncode == 0, result.stderr
        return RunReader(find_runs(out)[0])

    return record


def _train_batches(run: RunReader) -> list[dict]:
    return [b for b in run.index()["batches"] if not b["light"]]


def test_gradient_accumulation_groups_batches_into_one_step(record):
    run = record("grad_accumulation.py", "--accum", "4")
    steps = run.index()["steps"]
    assert [len(s["batches"]) for s in steps] == [4, 4]
    assert [b["micro"] for b in _train_batches(run)] == [0, 1, 2, 3] * 2


def test_two_forwards_before_one_backward_share_a_batch(record):
    run = record("siamese.py")
    batches = _train_batches(run)
    assert len(batches) == 2
    roots = [
        c
        for c in run.batch(batches[0]["index"]).record["calls"]
        if c["depth"] == 0 and c["kind"] == "module"
    ]
    assert len(roots) >= 2


def test_two_optimizers_each_step_counts(record):
    run = record("gan_two_optimizers.py")
    steps = run.index()["steps"]
    assert sorted({s["optimizers"][0]["index"] for s in steps}) == [0, 1]
    assert len(steps) == 4  # both optimizers stepped twice


def test_manual_updates_without_optimizer_are_steps_with_exact_update(record):
    run = record("manual_sgd.py")
    index = run.index()
    assert len(index["steps"]) == 2
    assert any("no torch.optim optimizer" in n["text"] for n in index["notices"])
    step = run.step(0)
    for p in step.record["params"]:
        update = step.array(p["update"])
        assert np.abs(update).sum() > 0, p["name"]


def test_no_grad_forward_is_flagged(record):
    run = record("eval_between_steps.py", "--steps", "4")
    light = [b for b in run.index()["batches"] if b["light"]]
    calls = run.batch(light[0]["index"]).record["calls"]
    assert calls and all(c["no_grad"] for c in calls if c["kind"] == "module")


def test_keyword_arguments_to_forward_are_captured(tmp_path):
    script = tmp_path / "kw.py"
    script.write_text(
        "import torch\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.l = torch.nn.Linear(3, 3)\n"
        "    def forward(self, x, *, mask=None):\n"
        "        return self.l(x) * mask\n"
        "m = M(); opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "for _ in range(3):\n"
        "    m(torch.randn(2, 3), mask=torch.ones(2, 3)).sum().backward(); opt.step()\n"
    )
    result = run_tvis("run", "--steps", "1", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run = RunReader(find_runs(tmp_path / "tvis_runs")[0])
    root = run.batch(0).record["calls"][0]
    assert [a["name"] for a in root["inputs"]] == ["x", "mask"]
    assert root["name"] == "m" and root["def"] == ["kw.py", 5]


def test_evaluation_under_inference_mode_is_a_light_group(tmp_path):
    def train() -> None:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            loss = model(torch.randn(16, 8)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            with torch.inference_mode():  # tensors without a version counter
                model(torch.randn(64, 8)).argmax(1)

    outcome = record_here(train, tmp_path, steps=3)
    assert not [n for n in outcome.notices if "failed" in n], outcome.notices
    run = RunReader(outcome.run_dir)
    batches = run.index()["batches"]
    light = [b for b in batches if b["light"]]
    assert len([b for b in batches if not b["light"]]) == 3 and light
    record = run.batch(light[0]["index"]).record
    out = record["tensors"][record["calls"][-1]["outputs"][0]["tensor"]]
    assert out["shape"] == [64, 2] and out["stats"]["numel"] == 128 and "mean" in out["stats"]


def test_a_step_that_raises_and_is_caught_leaves_the_next_batches_whole(record):
    """An out-of-memory skip: the step of batch 1 raises and the loop goes on. The next
    batch is a training batch of its own step, not an LBFGS closure pass of a step that
    never ended, and batch 1 belongs to no step."""
    run = record("failed_step_skipped.py", steps=3)
    index = run.index()
    batches = index["batches"]
    assert [(b["index"], b["light"], b.get("step")) for b in batches] == [
        (0, False, 0),
        (1, False, None),
        (2, False, 1),
        (3, False, 2),
    ]
    assert [s["batches"] for s in index["steps"]] == [[0], [2], [3]]
    assert any("raised an error that the script caught" in n["text"] for n in index["notices"])

    def phases(i: int) -> list[tuple[str, str]]:
        return [(c["name"], c["phase"]) for c in run.batch(i).record["calls"]]

    assert phases(2) == phases(0)
