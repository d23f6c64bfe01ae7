"""A forward that raises, caught by the script, leaves the rest of the run recorded right."""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader

HERE = Path(__file__).resolve().parent


class Flaky(nn.Module):
    """Raises on its second call, as an OOM or a bad batch would."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 3)
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        y = self.lin(x)
        if self.calls == 2:
            raise RuntimeError("bad batch")
        return y


def _train(log: list) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(Flaky(), nn.Dropout(0.2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(5):
        x, y = torch.randn(8, 4), torch.randint(0, 3, (8,))
        try:
            loss = F.cross_entropy(model(x), y)
        except RuntimeError:
            continue  # skip the bad batch, as training loops do
        opt.zero_grad()
        loss.backward()
        opt.step()
        log.append(loss.detach())
    return model


def test_later_batches_recorded_at_top_level_when_a_forward_raised(tmp_path):
    plain: list = []
    _train(plain)
    log: list = []
    outcome = record(lambda: _train(log), Settings(steps=10), HERE, tmp_path / "run")
    assert outcome.status == "complete"
    assert [float(v) for v in log] == [float(v) for v in plain]
    assert outcome.steps == 4 and outcome.batches == 4
    run = RunReader(outcome.run_dir)
    index = run.index()
    trained = [b for b in index["batches"] if not b["light"]]
    assert [b["step"] for b in trained] == [0, 1, 2, 3]
    assert [b["loss"] for b in trained] == [float(v) for v in plain]
    raised = []
    for b in index["batches"]:
        calls = run.batch(b["index"]).record["calls"]
        roots = [c for c in calls if c["parent"] == -1]
        assert all(c["kind"] in ("module", "loss", "function") for c in roots)
        assert sum(c["name"] == "model" or c["cls"] == "Sequential" for c in roots) <= 2
        raised += [c for c in calls if "raised" in c["flags"]]
    assert {c["cls"] for c in raised} == {"Sequential", "Flaky"}
    assert all(c["outputs"] == [] for c in raised)
    assert any("raised RuntimeError" in n for n in outcome.notices)
