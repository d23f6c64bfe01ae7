"""Observing never changes training, and what is recorded is exact."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import record_here
from torch import nn
from training import setup, train

from tvis.store.reader import RunReader
from tvis.store.rounding import MANTISSA_BITS, round_mantissa


def _plain(steps: int, workers: int = 0):
    model, opt, loader = setup(workers=workers)
    log: list = []
    train(model, opt, loader, steps, log)
    return model, log, torch.get_rng_state()


def _recorded(tmp_path, steps: int, workers: int = 0, **settings):
    model, opt, loader = setup(workers=workers)
    log: list = []
    outcome = record_here(
        lambda: train(model, opt, loader, 100, log), tmp_path, steps=steps, **settings
    )
    return model, log, torch.get_rng_state(), outcome


def test_losses_and_parameters_bit_identical_in_process(tmp_path):
    plain_model, plain_log, plain_rng = _plain(3)
    model, log, rng, outcome = _recorded(tmp_path, 3)
    assert outcome.steps == 3 and outcome.status == "complete"
    assert len(log) == len(plain_log) == 3
    for (a, ya), (b, yb) in zip(plain_log, log, strict=True):
        assert torch.equal(a, b)
        assert torch.equal(ya, yb)  # shuffled data order unchanged
    for (name, p), q in zip(
        plain_model.state_dict().items(), model.state_dict().values(), strict=True
    ):
        assert torch.equal(p, q), name
    assert torch.equal(plain_rng, rng)  # dropout and shuffling consumed the same randomness


def test_data_order_unchanged_when_workers_move_in_process(tmp_path):
    _, plain_log, _ = _plain(2, workers=2)
    _, log, _, outcome = _recorded(tmp_path, 2, workers=2)
    assert [y.tolist() for _, y in plain_log] == [y.tolist() for _, y in log]
    assert any("workers run in the main process" in n for n in outcome.notices)


def test_update_equals_parameter_difference_exactly(tmp_path):
    model, opt, loader = setup()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    outcome = record_here(lambda: train(model, opt, loader, 100, []), tmp_path, steps=1)
    run = RunReader(outcome.run_dir)
    step = run.step(0)
    by_name = {p["name"]: p for p in step.record["params"]}
    assert set(by_name) == set(before)
    for name, p in model.named_parameters():
        record = by_name[name]
        update = torch.from_numpy(np.array(step.array(record["update"])))
        assert torch.equal(update, p.detach() - before[name]), name
        weight = torch.from_numpy(np.array(step.array(record["weight"])))
        assert torch.equal(weight, before[name]), name


def test_activation_gradients_equal_autograds(tmp_path):
    model, opt, loader = setup()
    x, y = next(iter(loader))
    reference = {}

    def keep(module, args, out):
        out.retain_grad()
        reference[module] = out

    handles = [m.register_forward_hook(keep) for m in (model.conv, model.bn, model.head)]
    torch.manual_seed(5)
    torch.nn.functional.cross_entropy(model(x), y).backward()
    for h in handles:
        h.remove()
    model.zero_grad()

    def one_batch():
        torch.manual_seed(5)
        torch.nn.functional.cross_entropy(model(x), y).backward()

    # --exact: every bit; by default: autograd's gradient rounded to 10 mantissa bits.
    for bits, folder in ((None, "exact"), (MANTISSA_BITS, "rounded")):
        outcome = record_here(one_batch, tmp_path / folder, steps=1, samples=16, mantissa_bits=bits)
        batch = RunReader(outcome.run_dir).batch(0)
        calls = {c["name"]: c for c in batch.record["calls"]}
        for name, module in (("conv", model.conv), ("bn", model.bn), ("head", model.head)):
            out_id = calls[name]["outputs"][0]["tensor"]
            grad_id = batch.tensor(out_id)["grad"]
            assert grad_id is not None, name
            recorded = torch.from_numpy(np.array(batch.array(grad_id)))
            expected = round_mantissa(reference[module].grad.numpy(), bits)
            torch.testing.assert_close(recorded, torch.from_numpy(expected), rtol=0, atol=0)


def test_instrumentation_failure_becomes_notice(tmp_path, monkeypatch):
    from tvis.record import tensors

    def broken(x):
        raise RuntimeError("stats exploded")

    monkeypatch.setattr(tensors, "stats", broken)
    plain_model, plain_log, _ = _plain(2)
    model, log, _, outcome = _recorded(tmp_path, 2)
    assert outcome.status == "complete"
    assert [float(a) for a, _ in plain_log] == [float(a) for a, _ in log]
    assert any("stats exploded" in n and "training was not affected" in n for n in outcome.notices)


class _Nan(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * float("nan")


class _InPlaceAfterCapture(nn.Module):
    """A BatchNorm output (big enough for its statistics to be computed later, off the
    training thread) changed in place by ReLU, a layer whose output is all zeros and one
    whose output is NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(64)
        self.relu = nn.ReLU(inplace=True)
        self.dead = nn.Linear(64, 8)
        self.dead.weight.data.zero_()
        self.dead.bias.data.zero_()
        self.nan = _Nan()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(x)
        self.reference = y.detach().clone()  # what BatchNorm returned, before ReLU
        return self.dead(self.relu(y)).sum() + self.nan(x[:2]).sum()


def test_deferred_statistics_describe_the_tensor_before_a_later_in_place_change(tmp_path):
    torch.manual_seed(0)
    model = _InPlaceAfterCapture()
    x = torch.randn(1024, 64)
    outcome = record_here(lambda: model(x).backward(), tmp_path, steps=1)
    batch = RunReader(outcome.run_dir).batch(0).record
    calls = {c["name"]: c for c in batch["calls"]}
    entry = batch["tensors"][calls["bn"]["outputs"][0]["tensor"]]
    ref = model.reference.double()
    assert entry["stats"]["numel"] == 1024 * 64
    assert entry["stats"]["min"] == pytest.approx(float(ref.min()))  # negative: pre-ReLU
    assert entry["stats"]["mean"] == pytest.approx(float(ref.mean()), abs=1e-6)
    assert entry["stats"]["zeros"] == 0.0
    assert "dead" in calls["dead"]["flags"] and "dead" not in calls["bn"]["flags"]
    assert "nonfinite" in calls["nan"]["flags"] and "nonfinite" not in calls["bn"]["flags"]
