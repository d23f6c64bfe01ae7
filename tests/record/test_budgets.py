"""What a run stores scales with what a person can look at (issue: recording cost)."""

from __future__ import annotations

import torch
import torch.nn as nn
from helpers import SCRIPTS, record_here
from support import run_tvis

from tvis.record.tensors import keep
from tvis.store.reader import RunReader, find_runs


def test_values_keep_first_samples_along_the_batch_dim():
    x = torch.arange(5 * 8 * 3.0).reshape(5, 8, 3)  # sequence-first [T, B, D]
    values, how = keep(x, batch_dim=1, samples=2, max_elems=10**6)
    assert values.shape == (5, 2, 3) and how["kept"] == "samples"
    assert torch.equal(torch.from_numpy(values), x[:, :2])


def test_merged_batch_keeps_whole_samples():
    x = torch.randn(4 * 7, 11)  # [B*T, V] with T = 7
    values, _ = keep(x, batch_dim=0, samples=2, max_elems=10**6, span=7)
    assert values.shape == (14, 11)


def test_tensor_without_batch_dim_keeps_leading_rows_within_max_elems():
    values, how = keep(torch.randn(100, 10), batch_dim=None, samples=4, max_elems=250)
    assert values.shape == (25, 10) and how == {"kept": "rows", "count": 25}


def test_no_grad_forwards_between_steps_never_count_toward_max_batches(tmp_path):
    out = tmp_path / "runs"
    result = run_tvis(
        "run",
        "--steps",
        "3",
        "--max-batches",
        "4",
        "--out",
        str(out),
        str(SCRIPTS / "eval_between_steps.py"),
        "--steps",
        "6",
        cwd=SCRIPTS,
    )
    assert result.returncode == 0, result.stderr
    index = RunReader(find_runs(out)[0]).index()
    assert len(index["steps"]) == 3
    light = [b for b in index["batches"] if b["light"]]
    train = [b for b in index["batches"] if not b["light"]]
    assert len(train) == 3 and light  # evaluation grouped light, not 100 batches each
    run = RunReader(find_runs(out)[0])
    group = run.batch(light[0]["index"]).record
    assert group["calls"] and all(t["value"] is None or t.get("derived") for t in group["tensors"])


def test_lbfgs_closure_records_first_pass_fully_and_the_rest_light(tmp_path):
    out = tmp_path / "runs"
    result = run_tvis(
        "run", "--steps", "2", "--out", str(out), str(SCRIPTS / "lbfgs_closure.py"), cwd=SCRIPTS
    )
    assert result.returncode == 0, result.stderr
    index = RunReader(find_runs(out)[0]).index()
    assert len(index["steps"]) == 2
    assert [len(s["batches"]) for s in index["steps"]] == [1, 1]
    assert any(b["light"] for b in index["batches"])


class Maps(nn.Module):
    """Few parameters, large activations: the values that a budget has to cut."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Conv2d(4, 4, 3, padding=1) for _ in range(4)])

    def forward(self, x):
        return self.layers(x)


def test_byte_budget_degrades_to_one_sample_then_stats_only(tmp_path):
    torch.manual_seed(0)
    model = Maps()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def train():
        for _ in range(20):
            loss = model(torch.randn(64, 4, 64, 64)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    budget = 12 * 2**20  # two whole batches, compressed, pass half of it
    outcome = record_here(train, tmp_path, steps=8, max_bytes=budget, samples=8)
    assert outcome.status == "complete" and outcome.steps == 8
    run = RunReader(outcome.run_dir)
    assert run.size_bytes() <= budget
    notices = [n["text"] for n in run.index()["notices"]]
    one = next(i for i, n in enumerate(notices) if "keep the values of one sample" in n)
    none = next(i for i, n in enumerate(notices) if "statistics only" in n)
    assert one < none
    first = run.batch(0).tensor(run.batch(0).record["calls"][1]["outputs"][0]["tensor"])
    last_batch = run.batch(run.batch_ids()[-1])
    last = last_batch.tensor(last_batch.record["calls"][1]["outputs"][0]["tensor"])
    assert first["value"]["shape"][0] == 8 and last["value"] is None
    assert last["stats"]["numel"] == 64 * 4 * 64 * 64  # statistics still describe the whole tensor
