"""The run directory: written atomically, read lazily, problems reported in a sentence."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tvis.listing import summarize
from tvis.store.format import FORMAT_VERSION
from tvis.store.reader import RunReader, StoreError, find_runs
from tvis.store.writer import RunWriter


def _entry(i: int) -> dict:
    return {"id": i, "shape": [2, 3], "dtype": "float32", "stats": {}, "value": None}


@pytest.fixture
def run(tmp_path):
    writer = RunWriter(tmp_path / "runs" / "r1", {"script": "train.py", "pid": -1, "host": "x"})
    arrays = {0: np.arange(6, dtype=np.float32).reshape(2, 3), 1: np.array([True, False])}
    writer.write_batch(
        0,
        {"batch": {"index": 0}, "calls": [], "tensors": [_entry(0), _entry(1), _entry(2)]},
        arrays,
    )
    writer.write_index({"batches": [{"index": 0, "n_calls": 0}], "steps": []})
    return writer


def test_arrays_round_trip_at_their_offsets(run):
    reader = RunReader(run.path)
    batch = reader.batch(0)
    np.testing.assert_array_equal(batch.array(0), np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal(batch.array(1), [True, False])
    assert batch.array(2) is None  # not kept
    assert batch.tensor(0)["value"]["offset"] % 64 == 0


def test_tensor_entries_are_decoded_one_by_one_as_asked_for(run):
    import msgpack

    path = run.path / "batches" / "000000" / "index.msgpack"
    whole = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
    entries = RunReader(run.path).batch(0).record["tensors"]
    assert len(entries) == 3 and entries._entries == [None, None, None]  # nothing decoded yet
    assert entries[1] == whole["tensors"][1] and entries._entries[0] is None
    assert list(entries) == whole["tensors"]


def test_tensor_entries_numbered_out_of_order_are_found_by_id(tmp_path):
    writer = RunWriter(tmp_path / "r", {"script": "train.py", "pid": -1, "host": "x"})
    writer.write_batch(0, {"batch": {"index": 0}, "tensors": [_entry(7), _entry(0)]}, {})
    batch = RunReader(writer.path).batch(0)
    assert batch.tensor(0)["id"] == 0 and batch.tensor(7)["id"] == 7
    with pytest.raises(StoreError, match="has no tensor 3"):
        batch.tensor(3)


def test_a_corrupt_tensor_entry_is_named_when_it_is_read(run):
    import msgpack

    path = run.path / "batches" / "000000" / "index.msgpack"
    record = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
    record["tensors"][2]["shape"] = "2x3"
    path.write_bytes(msgpack.packb(record))
    batch = RunReader(run.path).batch(0)
    assert batch.tensor(0)["shape"] == [2, 3]  # the other entries still read
    with pytest.raises(StoreError, match=r"tensors\[2\]\.shape is '2x3', not a list"):
        batch.tensor(2)


def test_a_corrupt_call_is_named_when_it_is_read_and_the_others_still_read(tmp_path):
    writer = RunWriter(tmp_path / "r", {"script": "train.py", "pid": -1, "host": "x"})
    calls = [{"id": i, "name": f"layer{i}", "kind": "module", "parent": -1} for i in range(3)]
    calls[2]["name"] = 5
    writer.write_batch(0, {"batch": {"index": 0}, "calls": calls, "tensors": []}, {})
    record = RunReader(writer.path).batch(0).record  # opens: calls are checked as read
    assert record["calls"][0]["name"] == "layer0" and record["calls"][1]["name"] == "layer1"
    with pytest.raises(StoreError, match=r"calls\[2\]\.name is 5, not text"):
        record["calls"][2]
    with pytest.raises(StoreError, match=r"calls\[2\]\.name"):
        list(record["calls"])  # a reader of every call meets it too


def test_unfinished_batch_folder_is_invisible(run):
    (run.path / "batches" / ".000001.tmp").mkdir()
    assert RunReader(run.path).batch_ids() == [0]


def test_running_run_of_a_dead_process_reads_incomplete(run):
    assert RunReader(run.path).status == "running"  # other host: trusted as written
    meta = json.loads((run.path / "meta.json").read_text())
    import socket

    meta.update(host=socket.gethostname(), pid=2**22 + 7)
    (run.path / "meta.json").write_text(json.dumps(meta))
    assert RunReader(run.path).status == "incomplete"


def test_newer_format_says_upgrade(run):
    meta = json.loads((run.path / "meta.json").read_text())
    meta["format"] = FORMAT_VERSION + 1
    (run.path / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(StoreError, match="upgrade tvis"):
        RunReader(run.path)


@pytest.mark.parametrize("victim", ["index.msgpack", "blob.bin"])
def test_corrupt_or_truncated_batch_is_a_store_error(run, victim):
    path = run.path / "batches" / "000000" / victim
    path.write_bytes(path.read_bytes()[:10])
    batch = RunReader(run.path).batch(0)
    with pytest.raises(StoreError):
        batch.array(0)


def test_corrupt_meta_is_listed_with_its_problem(run):
    (run.path / "meta.json").write_text("{not json")
    row = summarize(run.path)
    assert row["status"] == "unreadable" and "corrupt" in row["error"]


def test_find_runs_looks_below_the_folder_given(run, tmp_path):
    assert find_runs(tmp_path) == [run.path]
    assert find_runs(tmp_path / "runs") == [run.path]
    assert find_runs(run.path) == [run.path]
