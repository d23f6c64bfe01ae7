"""Repeated forwards of a light group (a generate() loop, an LBFGS closure's extra passes):
the first ones from a line are recorded in full, the rest are counted, and training is
exactly what it is without tvis."""

from __future__ import annotations

import numpy as np
import torch
from helpers import record_here
from torch import nn

from tvis.agent.api import AgentAPI
from tvis.agent.replies import ReplayEvent
from tvis.record.builder import LIGHT_REPEATS
from tvis.store.reader import RunReader
from tvis.tui.pages.replay import counted_note
from tvis.tui.widgets.call_tree import dropped_label


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.Tanh()
        self.fc2 = nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


def _sample(model: nn.Module, x: torch.Tensor, n: int) -> list[torch.Tensor]:
    """A generate()-style loop: one no-grad forward per new token."""
    out = []
    with torch.no_grad():
        for _ in range(n):
            x = model(x)  # SAMPLE LINE
            out.append(x)
    return out


def _root_calls(record: dict, name: str) -> list[dict]:
    """The root forwards of module ``name``: at the top, or inside a function only."""
    calls = record["calls"]
    return [
        c
        for c in calls
        if c["name"] == name
        and c["kind"] == "module"
        and (c["parent"] == -1 or calls[c["parent"]]["kind"] == "function")
    ]


def _light_groups(run: RunReader) -> list[dict]:
    return [b for b in run.index()["batches"] if b["light"]]


def _train_and_sample(samples: list, steps: int = 3, n: int = 40):
    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for _ in range(steps):
            loss = model(torch.randn(8, 4)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            samples.append(_sample(model, torch.randn(2, 4), n))

    return model, train


def test_generate_loop_records_the_first_forwards_in_full_and_counts_the_rest(tmp_path):
    samples: list = []
    model, train = _train_and_sample(samples)
    outcome = record_here(train, tmp_path, steps=3)
    assert outcome.status == "complete", outcome.notices
    run = RunReader(outcome.run_dir)
    groups = _light_groups(run)
    assert len(groups) == 2  # the third step ends the recording before its sampling
    for group in groups:
        record = run.batch(group["index"]).record
        roots = _root_calls(record, "_Net")
        assert len(roots) == LIGHT_REPEATS
        for root in roots:  # recorded in full: every layer inside, with statistics
            inner = [c for c in record["calls"] if c["parent"] == root["id"]]
            assert [c["name"] for c in inner] == ["fc1", "act", "fc2"]
            out = record["tensors"][root["outputs"][0]["tensor"]]
            assert out["shape"] == [2, 4] and "mean" in out["stats"]
        (site,) = record["dropped_sites"]
        assert site["why"] == "repeat" and site["recorded"] == LIGHT_REPEATS
        assert (site["name"], site["cls"]) == ("_Net", "_Net")
        assert site["count"] == group["repeats"] == group["dropped_calls"] == 40 - LIGHT_REPEATS
        # The sampling function, begun before its first forward, is the group's root
        # call; nothing is recorded inside the counted forwards.
        (sample,) = [c for c in record["calls"] if c["depth"] == 0]
        assert (sample["kind"], sample["name"]) == ("function", "_sample")
        assert all(root["parent"] == sample["id"] for root in roots)
        assert group["n_calls"] == 1 + 4 * LIGHT_REPEATS
        # The calling line still counts every forward, and the group's time includes them.
        (line,) = [ln for ln in record["lines"] if ln["op"] == "_Net"]
        assert line["count"] == 40 and group["phase_ms"]["forward"] > 0


def test_sampling_under_tvis_is_bit_identical(tmp_path):
    plain: list = []
    plain_model, train = _train_and_sample(plain)
    train()
    recorded: list = []
    model, train = _train_and_sample(recorded)
    outcome = record_here(train, tmp_path, steps=3)
    assert outcome.status == "complete"
    assert len(recorded) == 2  # stopped at the third step, before its sampling
    for a, b in zip(plain, recorded, strict=False):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    # The last step is recorded, so the model stopped where the plain one did.
    for p, q in zip(plain_model.parameters(), model.parameters(), strict=True):
        assert torch.equal(p, q)


def test_each_calling_line_keeps_its_own_first_forwards(tmp_path):
    torch.manual_seed(0)
    model = _Net()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def train():
        for _ in range(2):
            model(torch.randn(8, 4)).sum().backward()
            opt.step()
            with torch.no_grad():
                for _ in range(10):
                    model(torch.randn(5, 4))  # an evaluation loop
                for _ in range(10):
                    model(torch.randn(1, 4))  # then sampling, from another line

    outcome = record_here(train, tmp_path, steps=2)
    run = RunReader(outcome.run_dir)
    record = run.batch(_light_groups(run)[0]["index"]).record
    tensors = record["tensors"]
    rows = [tensors[c["outputs"][0]["tensor"]]["shape"][0] for c in _root_calls(record, "_Net")]
    assert rows == [5] * LIGHT_REPEATS + [1] * LIGHT_REPEATS
    assert sum(s["count"] for s in record["dropped_sites"]) == 2 * (10 - LIGHT_REPEATS)


class _Recursive(nn.Module):
    """A module that calls itself: its nested calls are not the end of a counted one."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor, depth: int = 2) -> torch.Tensor:
        x = self.fc(x)
        return x if depth == 0 else self(x, depth - 1)


class _Fails(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] == 3:
            raise ValueError("no batches of three")
        return self.fc(x)


def test_counted_forwards_that_recurse_or_raise_end_where_they_end(tmp_path):
    torch.manual_seed(0)
    model, failing = _Recursive(), _Fails()
    opt = torch.optim.SGD([*model.parameters(), *failing.parameters()], lr=0.1)
    raised = []

    def train():
        for _ in range(3):
            (model(torch.randn(8, 4)).sum() + failing(torch.randn(8, 4)).sum()).backward()
            opt.step()
            with torch.no_grad():
                for _ in range(6):
                    model(torch.randn(2, 4))
                for n in (2, 2, 2, 3, 3):
                    try:
                        failing(torch.randn(n, 4))
                    except ValueError:
                        raised.append(n)

    outcome = record_here(train, tmp_path, steps=3)
    assert outcome.status == "complete" and len(raised) == 4
    assert not [n for n in outcome.notices if "failed" in n], outcome.notices
    run = RunReader(outcome.run_dir)
    for batch in [b for b in run.index()["batches"] if not b["light"]]:
        # Every training forward after the counted ones is recorded whole.
        record = run.batch(batch["index"]).record
        names = [c["name"] for c in record["calls"] if c["kind"] == "module"]
        assert names == ["_Recursive", "fc"] * 3 + ["_Fails", "_Fails.fc"]
    group = run.batch(_light_groups(run)[0]["index"]).record
    sites = {s["name"]: s["count"] for s in group["dropped_sites"]}
    assert sites == {"_Recursive": 6 - LIGHT_REPEATS, "_Fails": 2}


def test_lbfgs_records_the_first_evaluations_counts_the_rest_and_steps_exactly(tmp_path):
    x = torch.linspace(-2, 2, 64).unsqueeze(1)
    y = torch.sin(3 * x)

    def setup():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Linear(1, 16), nn.Tanh(), nn.Linear(16, 1))
        opt = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=20, tolerance_change=0)
        return model, opt

    def run_steps(model, opt, losses, steps):
        for _ in range(steps):
            losses.append([])

            def closure():
                opt.zero_grad()
                loss = nn.functional.mse_loss(model(x), y)
                loss.backward()
                losses[-1].append(loss.item())
                return loss

            opt.step(closure)

    plain_model, plain_opt = setup()
    plain_losses: list = []
    run_steps(plain_model, plain_opt, plain_losses, 1)

    model, opt = setup()
    before = [p.detach().clone() for p in model.parameters()]
    losses: list = []
    outcome = record_here(lambda: run_steps(model, opt, losses, 5), tmp_path, steps=1)
    assert outcome.status == "complete"
    assert losses == plain_losses  # every evaluation's loss, bit for bit
    evaluations = losses[0]
    assert len(evaluations) > LIGHT_REPEATS + 2

    run = RunReader(outcome.run_dir)
    step = run.step(0)
    assert step.record["step"]["loss"] == evaluations[0]  # what step() returns
    params = step.record["params"]
    pairs = zip(params, model.parameters(), before, plain_model.parameters(), strict=True)
    for record, p, b, q in pairs:
        assert torch.equal(p, q)  # the step itself as without tvis
        assert np.array_equal(step.array(record["weight"]), b.numpy())
        assert np.array_equal(step.array(record["update"]), (p - b).detach().numpy())

    (group,) = _light_groups(run)
    assert group["loss"] == evaluations[-1]  # the last evaluation's loss
    record = run.batch(group["index"]).record
    roots = _root_calls(record, "Sequential")
    assert len(roots) == LIGHT_REPEATS  # evaluations 2, 3 and 4 in full, layers and all
    assert all(len([c for c in record["calls"] if c["parent"] == r["id"]]) == 3 for r in roots)
    closures = [
        c for c in record["calls"] if c["kind"] == "function" and c["name"].endswith("closure")
    ]
    assert len(closures) == len(evaluations) - 1  # every extra evaluation, with its loss
    counted = [s for s in record["dropped_sites"] if s.get("why") == "repeat"]
    assert sum(s["count"] for s in counted) == len(evaluations) - 1 - LIGHT_REPEATS
    assert group["repeats"] == len(evaluations) - 1 - LIGHT_REPEATS


def test_call_tree_and_replay_say_how_many_forwards_were_counted(tmp_path):
    samples: list = []
    _, train = _train_and_sample(samples, n=12)
    outcome = record_here(train, tmp_path, steps=3)
    api, name = AgentAPI(outcome.run_dir.parent), outcome.run_dir.name
    group = _light_groups(RunReader(outcome.run_dir))[0]
    (sample,) = api.calls(name, group["index"])["calls"]  # the sampling function
    assert sample["name"] == "_sample"
    (site,) = api.calls(name, group["index"], parent=sample["id"])["dropped"]
    assert dropped_label(site) == (
        f"×{12 - LIGHT_REPEATS} more _Net (repeated forward: the first {LIGHT_REPEATS} from "
        "its line recorded in full, these counted, not recorded)"
    )
    events = [e for e in api.replay(name, limit=5000)["events"] if e["kind"] == "light"]
    assert [e["repeats"] for e in events] == [12 - LIGHT_REPEATS] * 2
    assert all(e["n_calls"] == 1 + 4 * LIGHT_REPEATS and e["dropped"] == 0 for e in events)
    note = f" · {12 - LIGHT_REPEATS} repeated forwards counted, not recorded"
    assert counted_note(ReplayEvent.decode(events[0])) == note
