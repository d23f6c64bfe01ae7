"""Batch values compressed in chunks (format 3): exact, smaller, read a chunk at a time, and
old raw runs (format 2) still read the same."""

from __future__ import annotations

import numpy as np
import pytest

from tvis.agent.api import AgentAPI
from tvis.store import chunks
from tvis.store.reader import RunReader, StoreError
from tvis.store.writer import RunWriter

RNG = np.random.default_rng(0)
# An NCHW activation after a ReLU: half zeros, the rest floats with noisy mantissas.
ACTIVATION = np.maximum(RNG.standard_normal((4, 32, 56, 56)), 0).astype(np.float32)
ARRAYS = {
    0: ACTIVATION,
    1: RNG.standard_normal((300, 700)).astype(">f8"),  # big-endian: stored little-endian
    2: np.arange(30, dtype=np.int64).reshape(5, 6),
    3: np.array([True, False, True]),
    4: RNG.integers(0, 255, (2, 3, 8, 8), dtype=np.uint8),
    5: np.zeros((0, 3), np.float32),
    6: (RNG.standard_normal(5) + 1j * RNG.standard_normal(5)).astype(np.complex64),
}


def _write(tmp_path, name="run", chunked=True):
    writer = RunWriter(tmp_path / name, {"script": "train.py"}, chunked=chunked)
    entries = [
        {"id": i, "shape": list(a.shape), "dtype": str(a.dtype), "stats": {}, "batch_dim": 0}
        for i, a in ARRAYS.items()
    ]
    batch = {"index": 0, "step": 0, "micro": 0, "n_calls": 0, "phase_ms": {}}
    writer.write_batch(0, {"batch": batch, "calls": [], "tensors": entries}, ARRAYS)
    writer.write_index({"batches": [batch], "steps": [], "params": [], "notices": []})
    return writer.path


@pytest.fixture
def run(tmp_path):
    return _write(tmp_path)


def test_values_round_trip_exactly_and_take_less_room(run):
    batch = RunReader(run).batch(0)
    for tid, array in ARRAYS.items():
        np.testing.assert_array_equal(np.asarray(batch.array(tid)), array)
        assert np.asarray(batch.array(tid)).dtype == array.dtype.newbyteorder("=")
    value = batch.tensor(0)["value"]
    assert value["codec"] == chunks.CODEC
    assert value["nbytes"] < 0.6 * ACTIVATION.nbytes  # zeros and sign/exponent bytes shrink


def test_a_chunk_is_whole_channels():
    assert chunks.CHUNK_BYTES == 64 << 10
    assert chunks.chunk_elems((4, 32, 56, 56), 4) == 5 * 56 * 56  # 5 channels of 56×56
    assert chunks.chunk_elems((64, 112, 112), 4) == 112 * 112
    assert chunks.chunk_elems((4096, 4096), 4) == 4 * 4096  # a block of 4 rows
    assert chunks.chunk_elems((10_000_000,), 4) == chunks.CHUNK_BYTES // 4  # runs of elements


KEYS = [
    (1, 5),
    (slice(None), 3),
    2,
    -1,
    (slice(1, 3), slice(None, None, -1), 7),
    (-1, -1, slice(50, 2, -3)),
    (0, 0, 0, 0),
    (slice(5, 2),),  # nothing
    (slice(None), slice(None), slice(None), 3),
    Ellipsis,
    (None, 1),
    (np.array([0, 2]),),
    (ACTIVATION > 1,),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_indexing_gives_what_numpy_gives(run, key):
    values = RunReader(run).batch(0).array(0)
    np.testing.assert_array_equal(values[key], ACTIVATION[key])


def test_a_channel_is_read_from_its_chunk_alone(run):
    """Every chunk but the one holding sample 1's channel 25 is overwritten with garbage:
    that channel still reads exactly; one of the other channels is a StoreError."""
    batch = RunReader(run).batch(0)
    value = batch.tensor(0)["value"]
    per_chunk = value["chunk"]
    wanted = (1 * 32 + 25) * 56 * 56 // per_chunk
    blob = bytearray((run / "batches/000000/blob.bin").read_bytes())
    start = value["offset"]
    for i, size in enumerate(value["sizes"]):
        if i != wanted:
            blob[start + 16 : start + size] = b"\xff" * (size - 16)  # past Blosc's header
        start += size
    (run / "batches/000000/blob.bin").write_bytes(bytes(blob))

    values = RunReader(run).batch(0).array(0)
    np.testing.assert_array_equal(values[1, 25], ACTIVATION[1, 25])
    with pytest.raises(StoreError, match="tensor 0 of batch 0 are corrupt .*re-record the run"):
        values[0, 0]
    # The agent's view of that channel (the sample and the channel taken in one index).
    view = AgentAPI(run.parent).view(
        run="run", batch=0, tensor=0, sample=1, index=[25], width=56, height=56
    )
    np.testing.assert_array_equal(view["array"], ACTIVATION[1, 25])


def test_byte_ranges_are_the_raw_bytes(run):
    values = RunReader(run).batch(0).array(1)
    raw = ARRAYS[1].astype("<f8").tobytes()
    for offset, length in [(0, 10), (5, 1000), (len(raw) - 3, 100), (123_457, 1 << 24)]:
        assert values.byte_range(offset, length).tobytes() == raw[offset : offset + length]


def test_old_raw_runs_read_and_view_the_same(tmp_path, run):
    raw = _write(tmp_path, "raw", chunked=False)
    old = RunReader(raw)
    assert old.meta["format"] == 2 and "codec" not in old.batch(0).tensor(0)["value"]
    api = AgentAPI(tmp_path)
    for tid in ARRAYS:
        np.testing.assert_array_equal(old.batch(0).array(tid), ARRAYS[tid])
    for params in [
        {"tensor": 0, "sample": 2, "index": [17]},
        {"tensor": 1},
        {"tensor": 4, "sample": 1, "index": [2]},
    ]:
        new_view = api.view(run="run", batch=0, width=40, height=20, **params)
        old_view = api.view(run="raw", batch=0, width=40, height=20, **params)
        np.testing.assert_array_equal(new_view.pop("array"), old_view.pop("array"))
        assert new_view == old_view
    for offset in (0, 4096, ACTIVATION.nbytes - 10):
        new = api.read(run="run", batch=0, tensor=0, offset=offset, length=1 << 20)
        old = api.read(run="raw", batch=0, tensor=0, offset=offset, length=1 << 20)
        assert bytes(new.data) == bytes(old.data)


def test_a_corrupt_chunk_table_is_a_store_error(run):
    import msgpack

    path = run / "batches/000000/index.msgpack"
    record = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
    record["tensors"][0]["value"]["sizes"].pop()
    path.write_bytes(msgpack.packb(record))
    with pytest.raises(StoreError, match="tensor 0 of batch 0 has a corrupt entry"):
        RunReader(run).batch(0).array(0)
