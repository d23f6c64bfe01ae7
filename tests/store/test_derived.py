"""Values that follow exactly from a stored neighbour (a ReLU's output and its input's
gradient, an identity's output) are stored as recipes and read back bit for bit, by any
index and byte range; values that only nearly follow are stored."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tvis.agent.api import AgentAPI
from tvis.store import derived
from tvis.store.reader import RunReader
from tvis.store.rounding import round_mantissa
from tvis.store.writer import RunWriter


def _bits(a) -> np.ndarray:
    a = np.ascontiguousarray(np.asarray(a))
    return a.view(f"<u{a.dtype.itemsize}")


def _relu_pair(seed: int = 0) -> dict[int, np.ndarray]:
    """BatchNorm-like output x, ReLU(inplace=True)'s output and both gradients, as torch
    computes them (NaN, -0.0 and Inf included)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(3, 8, 20, 20, generator=g)
    x[0, 0, 0, :4] = torch.tensor([float("nan"), -0.0, float("inf"), float("-inf")])
    leaf = x.clone().requires_grad_(True)
    y = leaf * 1.0
    y_before = y.detach().clone()
    y.relu_()  # in place, as ResNet's ReLU(inplace=True)
    gy = torch.randn(y.shape, generator=g)
    gy[0, 0, 0, 4] = float("nan")
    (gx,) = torch.autograd.grad(y, leaf, gy)
    return {0: y_before.numpy(), 1: y.detach().numpy(), 2: gy.numpy(), 3: gx.numpy()}


def _record(arrays: dict[int, np.ndarray], grads: bool = True) -> dict:
    entries = [
        {"id": i, "shape": list(a.shape), "dtype": str(a.dtype), "stats": {}, "batch_dim": 0}
        for i, a in arrays.items()
    ]
    if grads:
        entries[0]["grad"], entries[3]["of"] = 3, 0
        entries[1]["grad"], entries[2]["of"] = 2, 1
    call = {
        "id": 0,
        "parent": -1,
        "depth": 0,
        "kind": "module",
        "name": "relu",
        "cls": "ReLU",
        "phase": "forward",
        "inputs": [{"name": "input", "tensor": 0}],
        "outputs": [{"name": "return", "tensor": 1}],
    }
    batch = {"index": 0, "step": 0, "micro": 0, "n_calls": 1, "phase_ms": {}}
    return {"batch": batch, "calls": [call], "tensors": entries}


def _write(path, arrays, bits=None, grads=True) -> RunReader:
    record = _record(arrays, grads)
    writer = RunWriter(path, {"script": "train.py"}, mantissa_bits=bits)
    writer.write_batch(0, record, dict(arrays))
    writer.write_index({"batches": [record["batch"]], "steps": [], "params": [], "notices": []})
    return RunReader(path)


@pytest.mark.parametrize("bits", [None, 10])
def test_relu_output_and_input_gradient_are_rebuilt_bit_for_bit(tmp_path, bits):
    arrays = _relu_pair()
    run = _write(tmp_path / "run", arrays, bits)
    batch = run.batch(0)
    values = {tid: batch.tensor(tid)["value"] for tid in arrays}
    assert values[1]["derive"] == {"op": "relu", "of": 0}
    assert values[3]["derive"] == {"op": "relu_grad", "grad": 2, "by": 1}
    assert "derive" not in values[0] and "derive" not in values[2]
    # what the blob would have held for them: exact, or the rounded values
    for tid, array in arrays.items():
        expected = round_mantissa(array, bits)
        got = batch.array(tid)
        assert np.array_equal(_bits(got), _bits(expected))
        for key in [(1, 5), (0, 0, 0), (slice(None), 3, slice(2, 9), -1), (2,), -1]:
            assert np.array_equal(_bits(got[key]), _bits(expected[key]))


def test_derived_values_read_through_the_agent_as_stored_ones(tmp_path):
    arrays = _relu_pair()
    run = _write(tmp_path / "runs" / "run", arrays)
    api = AgentAPI(tmp_path / "runs")
    for tid in (1, 3):
        raw = bytes(api.read("run", tid, batch=0, offset=4 * 101, length=4 * 997).data)
        assert raw == arrays[tid].tobytes()[4 * 101 : 4 * 1098]
    assert run.batch(0).tensor(1)["value"]["derive"]["op"] == "relu"


def test_values_that_only_nearly_follow_are_stored(tmp_path):
    arrays = _relu_pair()
    leaky = arrays[0].copy()
    leaky[leaky < 0] *= 0.01  # LeakyReLU: not max(x, 0)
    arrays[1] = leaky
    arrays[3] = arrays[3].copy()
    arrays[3].reshape(-1)[-1] = np.nextafter(arrays[3].reshape(-1)[-1], np.float32(9))  # 1 ulp
    run = _write(tmp_path / "run", arrays)
    batch = run.batch(0)
    for tid, array in arrays.items():
        assert "derive" not in batch.tensor(tid)["value"]
        assert np.array_equal(_bits(batch.array(tid)), _bits(array))


def test_an_identity_output_is_its_input(tmp_path):
    x = np.random.default_rng(0).standard_normal((4, 64, 7, 7)).astype(np.float32)
    run = _write(tmp_path / "run", {0: x, 1: x.copy()}, grads=False)
    batch = run.batch(0)
    assert batch.tensor(1)["value"]["derive"] == {"op": "same", "of": 0}
    assert np.array_equal(_bits(batch.array(1)), _bits(x))


def test_a_recipe_naming_a_later_or_unknown_entry_is_refused(tmp_path):
    from tvis.store.reader import StoreError

    arrays = _relu_pair()
    run = _write(tmp_path / "run", arrays)
    batch = run.batch(0)
    batch.tensor(1)["value"]["derive"] = {"op": "relu", "of": 3}
    with pytest.raises(StoreError, match="corrupt entry"):
        batch.array(1)
    batch.tensor(1)["value"]["derive"] = {"op": "sigmoid", "of": 0}
    with pytest.raises(StoreError, match="corrupt entry"):
        batch.array(1)
    with pytest.raises(ValueError):
        derived.sources({"op": "relu"})


def _write_record(path, arrays, calls, links=()) -> RunReader:
    """A batch of ``arrays`` (id -> values) with ``calls`` (name, input ids, output ids)
    and gradient ``links`` (tensor id, gradient id), written with default rounding."""
    entries = {
        i: {"id": i, "shape": list(a.shape), "dtype": str(a.dtype), "stats": {}, "batch_dim": 0}
        for i, a in arrays.items()
    }
    for of, grad in links:
        entries[of]["grad"], entries[grad]["of"] = grad, of
    record = {
        "batch": {"index": 0, "step": 0, "micro": 0, "n_calls": len(calls), "phase_ms": {}},
        "calls": [
            {
                "id": n,
                "parent": -1,
                "depth": 0,
                "kind": "module",
                "name": name,
                "cls": name,
                "phase": "forward",
                "inputs": [{"name": "input", "tensor": i} for i in inputs],
                "outputs": [{"name": "return", "tensor": o} for o in outputs],
            }
            for n, (name, inputs, outputs) in enumerate(calls)
        ],
        "tensors": list(entries.values()),
    }
    writer = RunWriter(path, {"script": "train.py"}, mantissa_bits=10)
    writer.write_batch(0, record, dict(arrays))
    writer.write_index({"batches": [record["batch"]], "steps": [], "params": [], "notices": []})
    return RunReader(path)


def test_gradients_through_an_unrecorded_residual_add_follow_from_the_relu(tmp_path):
    """relu(out + identity): the add is no call, so the ReLU's input has no gradient entry;
    the gradients of ``out`` and ``identity`` are what the add passed on, relu_grad of the
    block output's gradient."""
    g = torch.Generator().manual_seed(3)
    out = torch.randn(2, 8, 12, 12, generator=g).requires_grad_(True)
    identity = torch.randn(2, 8, 12, 12, generator=g).requires_grad_(True)
    summed = out * 1.0 + identity
    added = summed.detach().clone()
    y = summed.relu_()
    gy = torch.randn(y.shape, generator=g)
    g_out, g_identity = torch.autograd.grad(y, (out, identity), gy)
    arrays = {
        0: out.detach().numpy(),
        1: identity.detach().numpy(),
        2: added.numpy(),
        3: y.detach().numpy(),
        4: gy.numpy(),
        5: g_out.numpy(),
        6: g_identity.numpy(),
    }
    run = _write_record(tmp_path / "run", arrays, [("relu", [2], [3])], [(3, 4), (0, 5), (1, 6)])
    batch = run.batch(0)
    assert batch.tensor(3)["value"]["derive"] == {"op": "relu", "of": 2}
    for tid in (5, 6):
        assert batch.tensor(tid)["value"]["derive"] == {"op": "relu_grad", "grad": 4, "by": 3}
        expected = round_mantissa(arrays[tid], 10)
        assert np.array_equal(_bits(batch.array(tid)), _bits(expected))
        assert np.array_equal(_bits(batch.array(tid)[1, 3]), _bits(expected[1, 3]))
    # a gradient that is not what the add passed on stays stored
    arrays[6] = arrays[6] * np.float32(2)
    other = _write_record(
        tmp_path / "other", arrays, [("relu", [2], [3])], [(3, 4), (0, 5), (1, 6)]
    )
    assert "derive" not in other.batch(0).tensor(6)["value"]


def test_copies_of_an_earlier_entry_are_stored_once_whatever_their_shape(tmp_path):
    rng = np.random.default_rng(0)
    item = rng.standard_normal((3, 40, 40)).astype(np.float32)
    pooled = rng.standard_normal((4, 16, 1, 1)).astype(np.float32)
    # agrees with ``long`` in its first and last 2048 elements and in every 4th (the
    # elements sampled before a whole comparison), not in one of the others
    long = rng.standard_normal(10_000).astype(np.float32)
    near = long.copy()
    near[5001] = -near[5001]
    arrays = {
        0: item,
        1: item[None].copy(),  # the collated batch's first sample
        2: pooled,
        3: pooled.reshape(4, 16).copy(),  # its flattened view
        4: pooled.reshape(4, 16).copy(),  # the same module output pooled again
        5: long,
        6: near,
        7: np.arange(64, dtype=np.int64),
        8: np.arange(64, dtype=np.int64).reshape(8, 8),
    }
    run = _write_record(tmp_path / "run", arrays, [])
    batch = run.batch(0)
    derives = {tid: batch.tensor(tid)["value"].get("derive") for tid in arrays}
    assert derives == {
        0: None,
        1: {"op": "same", "of": 0},
        2: None,
        3: {"op": "same", "of": 2},
        4: {"op": "same", "of": 2},
        5: None,
        6: None,
        7: None,
        8: {"op": "same", "of": 7},
    }
    for tid, array in arrays.items():
        expected = array if array.dtype.kind != "f" else round_mantissa(array, 10)
        got = batch.array(tid)
        assert got.shape == array.shape
        assert np.array_equal(_bits(got), _bits(expected)), tid
    assert np.array_equal(_bits(batch.array(1)[0, 2, 5:9]), _bits(round_mantissa(item, 10)[2, 5:9]))
    # a recipe whose source has another number of elements is refused
    from tvis.store.reader import StoreError

    batch.tensor(3)["value"]["derive"] = {"op": "same", "of": 0}
    with pytest.raises(StoreError, match="corrupt entry"):
        batch.array(3)
