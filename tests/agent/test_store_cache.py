"""The agent's run store: big batches kept out of the cyclic collector, values derived once."""

from __future__ import annotations

import gc
import threading
import time
from pathlib import Path

import pytest

from tvis.agent.api import AgentAPI
from tvis.agent.store import FREEZE_CALLS, collector_paused
from tvis.store.format import COMPLETE
from tvis.store.reader import StoreError
from tvis.store.writer import RunWriter


def _write_run(root: Path, n_calls: int, corrupt_tensor: int | None = None) -> str:
    calls = [
        {
            "id": i,
            "parent": -1,
            "depth": 0,
            "kind": "module",
            "name": f"l{i}",
            "cls": "Linear",
            "phase": "forward",
            "inputs": [],
            "outputs": [{"name": "out", "tensor": i}],
            "flags": [],
        }
        for i in range(n_calls)
    ]
    tensors = [
        {
            "id": i,
            "shape": [2],
            "dtype": "float32",
            "stats": {"numel": 2, "std": float(i)},
            "value": None,
        }
        for i in range(n_calls)
    ]
    if corrupt_tensor is not None:
        tensors[corrupt_tensor]["stats"]["std"] = "high"
    batch = {"index": 0, "step": 0, "batch_size": 2, "n_calls": n_calls}
    name = f"20260101-000000_calls{n_calls}_000000"
    writer = RunWriter(root / name, {"script": "train.py"})
    writer.write_batch(0, {"batch": batch, "calls": calls, "tensors": tensors}, {})
    writer.write_index({"batches": [batch], "steps": []})
    writer.write_meta(status=COMPLETE)
    return name


@pytest.fixture
def unfrozen():
    gc.unfreeze()
    yield
    gc.unfreeze()


@pytest.mark.parametrize("n_calls, frozen", [(FREEZE_CALLS, True), (50, False)])
def test_a_big_batch_and_its_tree_leave_the_cyclic_collector(tmp_path, unfrozen, n_calls, frozen):
    api = AgentAPI(tmp_path)
    name = _write_run(tmp_path, n_calls)
    rows = api.layers(name, 0, sort="std", desc=True, limit=3)["rows"]
    assert [r["std"] for r in rows] == [n_calls - 1, n_calls - 2, n_calls - 3]
    tree = api._tree(name, 0)
    young = {id(o) for o in gc.get_objects()}  # every object the collector still scans
    assert (id(tree.children) not in young) is frozen
    assert (id(api.store.chunk(name, "batch", 0).record["calls"]) not in young) is frozen


def test_a_value_asked_for_by_two_threads_at_once_is_derived_once(tmp_path):
    api = AgentAPI(tmp_path)
    chunk = api.store.chunk(_write_run(tmp_path, 3), "batch", 0)
    built = []

    def slow():
        built.append(1)
        time.sleep(0.2)
        return object()

    got = []
    threads = [
        threading.Thread(target=lambda: got.append(api.store.derived(chunk, "v", slow)))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and got[0] is got[1] is got[2]


def test_a_failed_derivation_is_tried_again(tmp_path):
    api = AgentAPI(tmp_path)
    chunk = api.store.chunk(_write_run(tmp_path, 3), "batch", 0)

    def fails():
        raise ValueError("no")

    with pytest.raises(ValueError):
        api.store.derived(chunk, "v", fails)
    assert api.store.derived(chunk, "v", lambda: 7) == 7


def test_the_collector_is_off_while_a_value_is_derived_and_back_on_after(tmp_path):
    """A big record decoded with the collector on spent most of its time in collections
    rescanning the new objects (bench/README.md, the viewer's section)."""
    api = AgentAPI(tmp_path)
    chunk = api.store.chunk(_write_run(tmp_path, 3), "batch", 0)
    assert api.store.derived(chunk, "v", gc.isenabled) is False
    assert gc.isenabled()
    with pytest.raises(ValueError):
        api.store.derived(chunk, "w", lambda: int("no"))
    assert gc.isenabled()


def test_threads_pausing_the_collector_together_leave_it_as_it_was():
    inside, release = threading.Barrier(3), threading.Event()

    def paused():
        with collector_paused():
            inside.wait()
            release.wait()

    threads = [threading.Thread(target=paused) for _ in range(2)]
    for t in threads:
        t.start()
    inside.wait()
    assert not gc.isenabled()
    release.set()
    for t in threads:
        t.join()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # it was off: a read does not switch it on
    finally:
        gc.enable()


def test_a_sort_reads_only_the_entries_its_column_needs(tmp_path):
    """A sort by name builds no row beyond the page shown: a corrupt entry elsewhere is
    not reached (and costs no decoding); a sort by σ reaches it and names it."""
    api = AgentAPI(tmp_path)
    name = _write_run(tmp_path, 3, corrupt_tensor=2)
    rows = api.layers(name, 0, sort="name", limit=2)["rows"]
    assert [r["name"] for r in rows] == ["l0", "l1"]
    with pytest.raises(StoreError, match=r"tensors\[2\]\.stats\.std is 'high'"):
        api.layers(name, 0, sort="std", limit=2)
