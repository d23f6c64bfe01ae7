"""A batch's values never lie in memory twice: large copies of tvis's own live in mappings
outside the malloc heap, the writer rounds them in place when the batch is handed over,
and each value is let go as soon as it is written."""

from __future__ import annotations

import weakref

import numpy as np

from tvis.store import chunks, host_memory, rounding
from tvis.store.reader import RunReader
from tvis.store.writer import RunWriter

BITS = rounding.MANTISSA_BITS
MB = 1 << 20


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"<u{a.dtype.itemsize}")


def test_a_large_array_is_a_mapping_of_its_own_and_a_small_one_is_not():
    large = host_memory.empty((3, MB // 4), np.float32)
    small = host_memory.empty((16,), np.float32)
    assert host_memory.mapping(large) is not None and host_memory.mapping(large[1:]) is not None
    assert host_memory.mapping(small) is None and host_memory.mapping(np.ones(MB)) is None
    assert large.flags.c_contiguous and large.flags.writeable and large.shape == (3, MB // 4)
    large[...] = 7.0
    assert float(large.sum()) == 7.0 * large.size


def test_rounding_in_place_gives_the_bits_of_rounding_a_copy():
    x = np.random.default_rng(0).standard_normal(300_001).astype(np.float32)
    x[::11] = np.inf
    x[5], x[9], x[13] = np.nan, 1e-42, np.finfo(np.float32).max
    expected = rounding.round_mantissa(x, BITS)
    same = rounding.round_mantissa(x, BITS, in_place=True)
    assert same is x and np.array_equal(_bits(x), _bits(expected))


def _batch(n: int):
    """A record of ``n`` activations of 2 MB each (rounded when stored) and an input
    (exact), all in mappings as the recorder's kept copies are."""
    rng = np.random.default_rng(1)
    arrays = {}
    for i in range(n + 1):
        a = host_memory.empty((MB // 2,), np.float32)
        a[...] = rng.standard_normal(a.size)
        arrays[i] = a
    entries = [
        {"id": i, "shape": [MB // 2], "dtype": "float32", "value": {"kept": "all"}} for i in arrays
    ]
    calls = [
        {
            "seq": i,
            "depth": 0,
            "kind": "module",
            "name": f"layer{i}",
            "cls": None,
            "phase": "forward",
            "inputs": [{"name": "x", "tensor": i - 1}],
            "outputs": [{"name": "return", "tensor": i}],
        }
        for i in range(1, n + 1)
    ]
    record = {
        "batch": {"index": 0, "step": 0, "micro": 0, "n_calls": n, "phase_ms": {}},
        "calls": calls,
        "tensors": entries,
        "data": {"batch": [{"name": "x", "tensor": 0}]},
    }
    return record, arrays


def test_a_handed_over_batch_is_rounded_in_place_and_let_go_as_it_is_written(tmp_path, monkeypatch):
    n = 6
    record, arrays = _batch(n)
    exact = {i: a.copy() for i, a in arrays.items()}
    refs = [weakref.ref(a) for a in arrays.values()]
    made, alive = [], []
    empty, compress = host_memory.empty, chunks.compress

    def count_empty(shape, dtype):
        made.append(shape)
        return empty(shape, dtype)

    def count_alive(array, rounded):
        alive.append(sum(r() is not None for r in refs))
        return compress(array, rounded)

    monkeypatch.setattr(host_memory, "empty", count_empty)
    monkeypatch.setattr(chunks, "compress", count_alive)
    batch = _write(tmp_path / "run", record, arrays, handed_over=True).batch(0)

    assert made == []  # no second copy of any value: rounded where it lay
    assert alive == list(range(n + 1, 0, -1))  # each value goes once it is written
    assert arrays == {} and all(r() is None for r in refs)
    assert np.array_equal(_bits(np.asarray(batch.array(0))), _bits(exact[0]))
    for i in range(1, n + 1):
        stored = np.asarray(batch.array(i))
        assert np.array_equal(_bits(stored), _bits(rounding.round_mantissa(exact[i], BITS)))


def _write(path, record, arrays, **how) -> RunReader:
    writer = RunWriter(path, {"script": "t.py"}, mantissa_bits=BITS)
    writer.write_batch(0, record, arrays, **how)
    writer.write_index({"batches": [record["batch"]], "steps": [], "params": [], "notices": []})
    return RunReader(path)


def test_values_not_handed_over_are_left_as_they_were(tmp_path):
    """A caller that keeps its arrays (a copied run, a test) gets them back untouched."""
    record, arrays = _batch(2)
    exact = {i: a.copy() for i, a in arrays.items()}
    _write(tmp_path / "run", record, arrays)
    assert sorted(arrays) == [0, 1, 2]
    assert all(np.array_equal(_bits(arrays[i]), _bits(exact[i])) for i in arrays)


def test_an_array_shared_by_an_exact_and_a_rounded_entry_is_rounded_as_a_copy(tmp_path):
    record, arrays = _batch(2)
    arrays[2] = arrays[0]  # the input again, under an activation's id
    shared, exact = arrays[0], arrays[0].copy()
    batch = _write(tmp_path / "run", record, arrays, handed_over=True).batch(0)
    assert np.array_equal(_bits(shared), _bits(exact))
    assert np.array_equal(_bits(np.asarray(batch.array(0))), _bits(exact))
    stored = np.asarray(batch.array(2))
    assert np.array_equal(_bits(stored), _bits(rounding.round_mantissa(exact, BITS)))
