"""What a recording stores of its values: activations and gradients rounded by default with
statistics from the exact values, every bit with --exact, the data exact, and fewer kept
samples when samples are huge."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from helpers import record_here
from support import run_tvis
from torch import nn
from training import setup, train

from tvis.record import sample_cap
from tvis.store.reader import RunReader
from tvis.store.rounding import MANTISSA_BITS, round_mantissa


def _record(tmp_path, name: str, **settings) -> RunReader:
    model, opt, loader = setup()
    outcome = record_here(lambda: train(model, opt, loader, 2, []), tmp_path / name, **settings)
    assert outcome.status == "complete"
    return RunReader(outcome.run_dir)


def _entries(chunk) -> list[dict]:
    tensors = chunk.record["tensors"]
    return [tensors[i] for i in range(len(tensors))]


def _bits(a) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(f"<u{a.dtype.itemsize}")


def test_rounded_values_keep_exact_statistics_and_exact_data(tmp_path):
    exact = _record(tmp_path, "exact", mantissa_bits=None)
    rounded = _record(tmp_path, "rounded")
    assert rounded.meta["values"] == {"mantissa_bits": MANTISSA_BITS}
    assert "values" not in exact.meta
    assert rounded.batch_ids() == exact.batch_ids()
    n_rounded = 0
    for b in exact.batch_ids():
        e_batch, r_batch = exact.batch(b), rounded.batch(b)
        for e, r in zip(_entries(e_batch), _entries(r_batch), strict=True):
            assert e["stats"] == r["stats"] and e["hist"] == r["hist"], e["id"]
            if not e.get("value"):
                continue
            assert "bits" not in e["value"]  # --exact: nothing rounded
            whole, stored = np.asarray(e_batch.array(e["id"])), r_batch.array(e["id"])
            if r["value"].get("bits"):
                n_rounded += 1
                expected = round_mantissa(np.ascontiguousarray(whole), MANTISSA_BITS)
                assert np.array_equal(_bits(stored), _bits(expected)), e["id"]
            else:
                assert np.array_equal(_bits(stored), _bits(whole)), e["id"]
        # the batch's inputs and labels, and the loss, are stored exactly
        for arg in r_batch.record["data"]["batch"]:
            assert "bits" not in (r_batch.tensor(arg["tensor"]).get("value") or {})
        assert r_batch.record["batch"]["loss"] == e_batch.record["batch"]["loss"]
    assert n_rounded > 10


def test_an_in_place_relu_output_is_stored_once(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Conv2d(3, 8, 3), nn.BatchNorm2d(8), nn.ReLU(inplace=True), nn.Flatten(), nn.LazyLinear(3)
    )
    x, y = torch.randn(8, 3, 10, 10), torch.randint(0, 3, (8,))
    model(x)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)

    def step():
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()

    run = RunReader(record_here(step, tmp_path, steps=1).run_dir)
    batch = run.batch(0)
    relu = next(c for c in batch.record["calls"] if c["cls"] == "ReLU")
    bn_out, relu_out = relu["inputs"][0]["tensor"], relu["outputs"][0]["tensor"]
    value = batch.tensor(relu_out)["value"]
    assert value["derive"] == {"op": "relu", "of": bn_out}
    assert "offset" not in value  # not in the blob
    grad = batch.tensor(bn_out)["value"] and batch.tensor(batch.tensor(bn_out)["grad"])
    assert grad["value"]["derive"]["op"] == "relu_grad"
    bn = np.asarray(batch.array(bn_out))
    assert np.array_equal(_bits(batch.array(relu_out)), _bits(np.where(bn < 0, np.float32(0), bn)))
    assert np.array_equal(batch.array(relu_out)[1, 2, 3:5], np.maximum(bn[1, 2, 3:5], 0))


def test_huge_samples_keep_one(tmp_path, monkeypatch):
    exact = _record(tmp_path, "three", mantissa_bits=None, samples=3)
    monkeypatch.setattr(sample_cap, "BATCH_VALUES_BYTES", 20_000)  # a sample here: ~11 KB
    one = _record(tmp_path, "one", mantissa_bits=None, samples=3)
    assert any("keep the values of 1 sample" in n["text"] for n in one.index()["notices"])
    e_batch, o_batch = exact.batch(0), one.batch(0)
    cut = 0
    for e, o in zip(_entries(e_batch), _entries(o_batch), strict=True):
        assert e["stats"] == o["stats"]
        if (o.get("value") or {}).get("kept") != "samples" or e.get("batch_dim") is None:
            continue
        whole, kept = np.asarray(e_batch.array(e["id"])), np.asarray(o_batch.array(e["id"]))
        if whole.shape[e["batch_dim"]] > 1:
            cut += 1
            assert kept.shape[e["batch_dim"]] == 1 and o["value"]["count"] == 1
            assert np.array_equal(_bits(kept), _bits(np.take(whole, [0], e["batch_dim"])))
    assert cut > 5


def test_huge_samples_are_cut_as_they_are_captured(tmp_path, monkeypatch):
    """The batch never holds all its samples' values, to cut them only when it closes:
    from the capture that passes the cap on, it keeps fewer (its peak memory is the
    cap's, not ``--samples`` times a sample)."""
    from tvis.record.builder import BatchBuilder

    cap = 20_000  # a sample here: ~11 KB, three ~33 KB
    monkeypatch.setattr(sample_cap, "BATCH_VALUES_BYTES", cap)
    held: list[tuple[int, int]] = []  # (bytes of values kept per sample, largest of them)
    gradient = BatchBuilder.gradient

    def spy(self, of, g):
        entry_id = gradient(self, of, g)
        sizes = [
            a.nbytes
            for e in self.entries
            if (a := self.arrays.get(e["id"])) is not None
            and (e.get("value") or {}).get("kept") == "samples"
        ]
        held.append((sum(sizes), max(sizes, default=0)))
        return entry_id

    monkeypatch.setattr(BatchBuilder, "gradient", spy)
    one = _record(tmp_path, "one", mantissa_bits=None, samples=3)
    assert any("keep the values of 1 sample" in n["text"] for n in one.index()["notices"])
    assert held and max(total for total, _ in held) > 0
    assert all(total <= cap + largest for total, largest in held), max(held)


def test_exact_is_in_the_help():
    result = run_tvis("run", "--help")
    assert result.returncode == 0 and "--exact" in result.stdout


class _Block(nn.Module):
    """torchvision's BasicBlock with a downsample: relu(bn2(conv2(...)) + downsample(x)),
    the add an op no call records."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.relu = nn.ReLU(inplace=True)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8)
        self.downsample = nn.Sequential(nn.Conv2d(3, 8, 1, bias=False), nn.BatchNorm2d(8))

    def forward(self, x):
        out = self.bn2(self.conv2(self.relu(self.bn1(self.conv1(x)))))
        return self.relu(out + self.downsample(x))


class _ResNetLike(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = _Block()
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(torch.flatten(self.pool(self.block(x)), 1))


def _residual_run(tmp_path, name: str, **settings) -> RunReader:
    from torch.utils.data import DataLoader
    from training import Blobs

    torch.manual_seed(0)
    model = _ResNetLike()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loader = DataLoader(Blobs(), batch_size=8, shuffle=False)

    def steps():
        for step, (x, y) in enumerate(loader):
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            if step == 1:
                return

    # one kept sample, as a batch of pictures at 224x224 keeps
    return RunReader(record_here(steps, tmp_path / name, steps=2, samples=1, **settings).run_dir)


def test_a_residual_block_stores_each_value_once(tmp_path):
    """The gradients an unrecorded residual add passed on to both branches follow from the
    block's ReLU; a dataset item is the batch's one kept sample; a module output pooled
    for its block and its last ReLU is pooled once. Each is read back as stored before."""
    exact = _residual_run(tmp_path, "exact", mantissa_bits=None)
    rounded = _residual_run(tmp_path, "rounded")
    for run in (exact, rounded):
        batch = run.batch(0)
        record = batch.record
        calls = {c["name"]: c for c in record["calls"]}
        through_add = [
            batch.tensor(batch.tensor(calls[name]["outputs"][0]["tensor"])["grad"])
            for name in ("block.bn2", "block.downsample")
        ]
        relu_out = calls["block"]["outputs"][0]["tensor"]
        for grad in through_add:
            recipe = grad["value"]["derive"]
            assert recipe == {
                "op": "relu_grad",
                "grad": batch.tensor(relu_out)["grad"],
                "by": relu_out,
            }
        item = record["data"]["items"][0]
        made = [c for c in record["calls"] if item["calls"][0] <= c["id"] < item["calls"][1]]
        picture = made[0]["outputs"][0]["tensor"]
        first_sample = record["data"]["batch"][0]["tensor"]
        assert batch.tensor(first_sample)["value"]["derive"] == {"op": "same", "of": picture}
        by_id = {c["id"]: c for c in record["calls"]}
        pooled = {  # the block's output, pooled for the block and for its last ReLU call
            r["tensor"]
            for r in record["repr"]
            if relu_out in [a.get("tensor") for a in by_id[r["call"]]["outputs"]]
        }
        assert len(pooled) == 2
        assert sum("derive" in batch.tensor(t)["value"] for t in pooled) == 1
    # every value reads back as the exact run's, rounded where the entry says so
    e_batch, r_batch = exact.batch(0), rounded.batch(0)
    for e, r in zip(_entries(e_batch), _entries(r_batch), strict=True):
        if not e.get("value"):
            continue
        whole = np.ascontiguousarray(np.asarray(e_batch.array(e["id"])))
        stored = np.asarray(r_batch.array(e["id"]))
        bits = r["value"].get("bits")
        expected = round_mantissa(whole, bits) if bits else whole
        assert stored.shape == whole.shape and np.array_equal(_bits(stored), _bits(expected))
