"""The per-batch call caps count what they leave out, name it in one notice and where it
ran: past 20,000 calls no more project helpers, past 20,000 calls of one module no more of
that module; every other module and the loss are always recorded, and Replay never claims
a batch with a loss stopped before it."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from tvis.agent.api import AgentAPI
from tvis.record.builder import CALL_CAP, MODULE_REPEATS, Settings
from tvis.record.runner import record
from tvis.store.reader import RunReader
from tvis.tui.widgets.call_tree import dropped_label

HERE = Path(__file__).resolve().parent

# The caps, a tenth of the defaults (20,000) so the test records in seconds, and cell
# steps per forward past them by a margin, as an RNN cell and its helper over a long
# sequence would be.
CAPS = Settings(steps=1, ops=False, call_cap=CALL_CAP // 10, module_repeats=MODULE_REPEATS // 10)
STEPS = CAPS.module_repeats + 500


def gate(h: torch.Tensor) -> torch.Tensor:
    """A project helper, called in a Python loop."""
    return h * 0.999


class Recurrent(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.cell = nn.Tanh()
        self.head = nn.Linear(4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.body(x)
        for _ in range(STEPS):
            h = gate(self.cell(h))
        return self.head(h)


def _train(losses: list) -> None:
    torch.manual_seed(0)
    model = Recurrent()
    criterion = nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(2, 4), torch.tensor([0, 2])
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    losses.append(loss.detach())
    opt.step()


def test_call_cap_keeps_modules_and_loss_and_counts_helpers_where_they_ran(tmp_path):
    plain: list = []
    _train(plain)
    losses: list = []
    outcome = record(lambda: _train(losses), CAPS, HERE, tmp_path / "run")
    assert outcome.status == "complete" and torch.equal(losses[0], plain[0])
    run = RunReader(outcome.run_dir)
    (info,) = run.index()["batches"]
    batch = run.batch(info["index"]).record
    by_name = {c["name"]: c for c in batch["calls"] if c["kind"] != "function"}
    assert {"body", "head"} <= set(by_name)  # the model's head after the helpers
    assert any(c["kind"] == "loss" for c in batch["calls"]) and isinstance(batch["loss"], dict)
    assert sum(c["name"] == "cell" for c in batch["calls"]) == CAPS.module_repeats
    recorded = sum(c["name"] == "gate" for c in batch["calls"])
    root = next(c for c in batch["calls"] if c["cls"] == "Recurrent")
    sites = {s["name"]: s for s in batch["dropped_sites"]}
    assert {s["parent"] for s in sites.values()} == {root["id"]}  # where they ran
    assert sites["cell"]["count"] == STEPS - CAPS.module_repeats
    assert sites["gate"]["count"] == STEPS - recorded > 0
    assert info["dropped_calls"] == sites["cell"]["count"] + sites["gate"]["count"]
    capped = [n for n in outcome.notices if "instead of recording them" in n]
    assert len(capped) == 1 and f"gate ×{sites['gate']['count']:,}" in capped[0]
    api = AgentAPI(outcome.run_dir.parent)
    name = outcome.run_dir.name
    dropped = api.calls(name, info["index"], parent=root["id"])["dropped"]
    assert sorted(dropped, key=lambda s: s["name"]) == [sites["cell"], sites["gate"]]
    assert api.calls(name, info["index"])["dropped"] == []
    assert dropped_label(sites["gate"]).startswith(f"×{sites['gate']['count']:,} more gate")
    replay = api.replay(name, limit=50)
    assert not any("stopped before its loss" in m for m in replay["missing"])


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def _train_without_loss_module() -> None:
    torch.manual_seed(0)
    model = Plain()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = model(torch.randn(3, 4)).pow(2).mean()  # no loss function: a plain mean
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_replay_finds_a_loss_computed_without_a_loss_function(tmp_path):
    outcome = record(_train_without_loss_module, Settings(steps=2), HERE, tmp_path / "run")
    assert outcome.status == "complete"
    index = RunReader(outcome.run_dir).index()
    assert all(b["loss"] is not None for b in index["batches"])
    replay = AgentAPI(outcome.run_dir.parent).replay(outcome.run_dir.name, limit=200)
    assert not any("stopped before its loss" in m for m in replay["missing"])
