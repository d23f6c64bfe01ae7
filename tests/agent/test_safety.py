"""The agent never reads outside its root, and damaged or vanishing runs are errors, not crashes."""

from __future__ import annotations

import json
import os
import shutil
import sys
import threading
from pathlib import Path

import pytest
from synthetic_run import build_run

from tvis.agent.api import AgentAPI
from tvis.agent.client import AgentError, LocalClient
from tvis.agent.protocol import PROTOCOL_VERSION
from tvis.store.format import BATCHES, BLOB, INDEX, META


class _Opened:
    """Paths the process opens or lists while ``watching`` is set (an audit hook cannot be
    removed, so it is installed once and switched on and off)."""

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.watching = threading.Event()
        sys.addaudithook(self._hook)

    def _hook(self, event: str, args: tuple) -> None:
        if self.watching.is_set() and event in ("open", "os.listdir", "os.scandir"):
            if args and isinstance(args[0], (str, bytes, os.PathLike)):
                self.paths.append(os.path.realpath(os.fsdecode(args[0])))


_OPENED = _Opened()


@pytest.fixture
def opened():
    _OPENED.paths.clear()
    _OPENED.watching.set()
    yield _OPENED.paths
    _OPENED.watching.clear()


@pytest.fixture
def world(tmp_path):
    """A root with a run inside, and a run and a secret file outside it."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    inside = build_run(root)
    stranger = build_run(outside, name="tvis_runs/20250101-000000_secret_000000")
    (outside / "secret.txt").write_text("secret")
    return root, outside, inside, stranger


def _call(api: AgentAPI, method: str, **params):
    with LocalClient(api.store.root) as client:
        return client.call(method, **params)


@pytest.mark.parametrize(
    "name",
    [
        "../outside/tvis_runs/20250101-000000_secret_000000",
        "/etc",
        "tvis_runs/../../outside",
        "",
        "a\0b",
    ],
    ids=["dotdot", "absolute", "inner-dotdot", "empty", "nul"],
)
def test_run_names_leading_outside_are_refused(world, opened, name):
    root, outside, *_ = world
    with pytest.raises(AgentError) as e:
        _call(AgentAPI(root), "run", run=name)
    assert e.value.status == 400
    assert not [p for p in opened if p.startswith(str(outside))]


def test_a_symlink_to_a_run_outside_is_neither_listed_nor_readable(world, opened):
    root, outside, inside, stranger = world
    (root / "tvis_runs" / "escape").symlink_to(stranger.path)
    api = AgentAPI(root)
    assert [r["run"] for r in _call(api, "runs")] == [inside.name]
    with pytest.raises(AgentError) as e:
        _call(api, "calls", run="tvis_runs/escape", batch=0)
    assert e.value.status == 400
    assert not [p for p in opened if p.startswith(str(outside))]


def test_a_symlinked_batch_leading_outside_is_refused(world, opened):
    root, outside, inside, stranger = world
    batch = inside.path / BATCHES / "000001"
    shutil.rmtree(batch)
    batch.symlink_to(stranger.path / BATCHES / "000001")
    with pytest.raises(AgentError) as e:
        _call(AgentAPI(root), "view", run=inside.name, batch=1, tensor=inside.conv)
    assert e.value.status == 400
    assert not [p for p in opened if p.startswith(str(outside))]


def test_a_symlinked_meta_leading_outside_is_refused(world, opened):
    root, outside, inside, _ = world
    meta = inside.path / META
    meta.unlink()
    meta.symlink_to(outside / "secret.txt")
    with pytest.raises(AgentError):
        _call(AgentAPI(root), "run", run=inside.name)
    assert not [p for p in opened if p.startswith(str(outside))]


def test_a_symlink_that_stays_inside_the_root_is_followed(world):
    root, _, inside, _ = world
    (root / "alias").symlink_to(inside.path)
    assert _call(AgentAPI(root), "run", run="alias")["run_id"] == inside.path.name


def test_a_run_deleted_while_served_is_404_and_the_agent_goes_on(world):
    root, _, inside, _ = world
    api = AgentAPI(root)
    assert _call(api, "calls", run=inside.name, batch=0)["total"] == 2
    shutil.rmtree(inside.path)
    with pytest.raises(AgentError) as e:
        _call(api, "calls", run=inside.name, batch=0)
    assert e.value.status == 404
    assert _call(api, "hello", protocol=PROTOCOL_VERSION)["runs"] == 0


def test_a_corrupt_batch_index_is_a_sentence(world):
    root, _, inside, _ = world
    (inside.path / BATCHES / "000000" / INDEX).write_bytes(b"\xc1 not msgpack")
    with pytest.raises(AgentError) as e:
        _call(AgentAPI(root), "calls", run=inside.name, batch=0)
    assert e.value.status == 404 and "corrupt" in e.value.message


def test_a_truncated_blob_is_a_sentence(world):
    root, _, inside, _ = world
    blob = inside.path / BATCHES / "000000" / BLOB
    blob.write_bytes(blob.read_bytes()[:100])
    with pytest.raises(AgentError) as e:
        _call(AgentAPI(root), "view", run=inside.name, batch=0, tensor=inside.conv)
    assert e.value.status == 404 and "truncated" in e.value.message


def test_a_run_still_starting_has_no_batches_yet(world):
    root, _, inside, _ = world
    starting = root / "tvis_runs" / "20990101-000000_new_ffffff"
    (starting / BATCHES).mkdir(parents=True)
    (starting / ".000000.tmp").mkdir()
    (starting / META).write_text(
        json.dumps({"format": 1, "status": "running", "host": "elsewhere"})
    )
    api = AgentAPI(root)
    info = _call(api, "run", run="tvis_runs/20990101-000000_new_ffffff")
    assert info["batches"] == [] and info["status"] == "running"
    with pytest.raises(AgentError) as e:
        _call(api, "calls", run="tvis_runs/20990101-000000_new_ffffff", batch=0)
    assert e.value.status == 404 and "(yet)" in e.value.message


def test_a_batch_written_after_the_first_read_is_seen(world):
    root, _, inside, _ = world
    api = AgentAPI(root)
    with pytest.raises(AgentError):
        _call(api, "calls", run=inside.name, batch=2)
    build_run(root / "scratch", batches=3)
    shutil.copytree(
        root / "scratch" / inside.name / BATCHES / "000002", inside.path / BATCHES / "000002"
    )
    assert _call(api, "calls", run=inside.name, batch=2)["total"] == 2


def test_a_run_from_a_newer_tvis_is_listed_with_its_problem(world):
    root, _, inside, _ = world
    meta = json.loads((inside.path / META).read_text())
    (inside.path / META).write_text(json.dumps({**meta, "format": 99}))
    (row,) = _call(AgentAPI(root), "runs")
    assert row["status"] == "unreadable" and "upgrade tvis" in row["error"]


def test_the_root_itself_may_be_a_run(world):
    _, _, inside, _ = world
    api = AgentAPI(inside.path)
    (row,) = _call(api, "runs")
    assert row["run"] == "."
    assert _call(api, "calls", run=".", batch=0)["total"] == 2


def test_files_outside_the_root_are_never_opened_by_any_method(world, opened):
    root, outside, inside, _ = world
    api = AgentAPI(root)
    for method, params in [
        ("runs", {}),
        ("run", {"run": inside.name}),
        ("calls", {"run": inside.name, "batch": 0}),
        ("view", {"run": inside.name, "batch": 0, "tensor": inside.conv}),
        ("source", {"run": inside.name, "file": "model.py"}),
        ("step", {"run": inside.name, "step": 0}),
    ]:
        _call(api, method, **params)
    assert [p for p in opened if p.startswith(str(Path(root).resolve()))]
    assert not [p for p in opened if p.startswith(str(outside))]
