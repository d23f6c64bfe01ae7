"""Replay's event list is built a piece at a time: the first page of a big run goes out
before its gradients are read, the rest when asked for, and a page already built is
answered while the rest is still being built."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tvis.agent import replay as replay_module
from tvis.agent import store as store_module
from tvis.agent.api import AgentAPI
from tvis.agent.store import RunStore
from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store import reader, schema, validate

HERE = Path(__file__).resolve().parent
PAIRS = 150  # Linear/ReLU pairs: 300 layers, 600 events
PAGE = 100


def _train() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(PAIRS) for m in (nn.Linear(4, 4), nn.ReLU())])
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(2, 4), torch.randn(2, 4)
    for _ in range(2):
        loss = F.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


@pytest.fixture(scope="module")
def deep(tmp_path_factory) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("paging") / "runs"
    outcome = record(_train, Settings(steps=1), HERE, out / "20300101-000000_deep_000000")
    return out, outcome.run_dir.name


@pytest.fixture
def eager_none(monkeypatch):
    """A run of a few hundred calls built as a big one is: no calls beyond the page."""
    monkeypatch.setattr(replay_module, "EAGER_CALLS", 0)


class Reads:
    """How many tensor entries and calls were checked (each is checked when first read)."""

    def __init__(self, monkeypatch) -> None:
        self.entries = self.calls = 0
        real = validate.problem

        def counted(value, kind, what, at=""):
            if kind is schema.TensorEntry:
                self.entries += 1
            elif kind is schema.Call:
                self.calls += 1
            return real(value, kind, what, at=at)

        monkeypatch.setattr(reader.validate, "problem", counted)


def test_the_first_page_of_a_big_run_reads_the_page_not_every_call(deep, eager_none, monkeypatch):
    root, run = deep
    whole = AgentAPI(root).replay(run, offset=0, limit=PAGE)  # another agent: nothing shared
    layers = sum(1 for e in whole["events"] if e["kind"] in ("layer", "grad"))
    assert whole["complete"] and whole["total"] == 1 + 2 * 2 * PAIRS + 2  # + loss, update
    reads = Reads(monkeypatch)
    api = AgentAPI(root)
    first = api.replay(run, offset=0, limit=PAGE, whole=False)
    assert not first["complete"]
    # The page is the whole list's first page, to its tensors' fields.
    assert first["events"] == whole["events"]
    # Its batch's forward events are built; the gradients' order is not read yet.
    assert first["total"] == 1 + 2 * PAIRS + 1
    assert [r["phase"] for r in first["outline"]] == ["data", "forward", "loss"]
    assert first["batches"][0]["count"] == first["total"]
    # Read: the page's outputs and gradients, not every layer's (600 calls, 1,200 entries).
    assert reads.entries <= 2 * layers + 4, reads.entries
    assert reads.calls <= layers + 4, reads.calls
    rest = api.replay(run, offset=0, limit=PAGE, whole=True)
    assert rest == whole


def test_a_page_past_what_is_built_builds_on_to_it(deep, eager_none):
    root, run = deep
    whole = AgentAPI(root).replay(run, offset=0, limit=1000)["events"]
    api = AgentAPI(root)
    assert not api.replay(run, offset=0, limit=PAGE, whole=False)["complete"]
    last = len(whole) - PAGE
    page = api.replay(run, offset=last, limit=PAGE, whole=False)
    assert page["events"] == whole[last:] and page["total"] == len(whole)


def test_a_built_page_is_answered_while_the_rest_is_being_built(deep, eager_none, monkeypatch):
    root, run = deep
    api = AgentAPI(root)
    building, release = threading.Event(), threading.Event()
    calls = []

    def held() -> None:
        """The long build stopped where it gives way to short requests: once before the
        batch is read, then in its gradients' piece (held there)."""
        calls.append(1)
        if len(calls) == 2:
            building.set()
            release.wait(30)

    done: list[dict] = []
    try:
        monkeypatch.setattr(api.traffic, "give_way", held)
        long = threading.Thread(target=lambda: done.append(api.replay(run, limit=PAGE)))
        long.start()
        assert building.wait(30)
        answered = threading.Event()
        got: list[dict] = []

        def page() -> None:
            got.append(api.replay(run, offset=0, limit=PAGE, whole=False))
            answered.set()

        threading.Thread(target=page, daemon=True).start()
        assert answered.wait(10), "the built page waited for the whole list"
        assert not done and not got[0]["complete"] and len(got[0]["events"]) == PAGE
    finally:
        release.set()
    long.join(30)
    assert done and done[0]["complete"] and done[0]["total"] > got[0]["total"]


def test_a_small_run_comes_whole_in_its_first_answer(deep):
    root, run = deep
    first = AgentAPI(root).replay(run, offset=0, limit=PAGE, whole=False)
    assert first["complete"] and first["total"] == 1 + 2 * 2 * PAIRS + 2


def test_requests_opening_one_batch_at_once_read_it_once(deep, monkeypatch):
    """The session's first requests (Replay's events, the tree's roots, the layers table)
    open the first batch together: one of them reads it, the others wait for that."""
    root, run = deep
    reads, started = [], threading.Barrier(4)
    real = store_module._read_now

    def counted(chunk):
        reads.append(chunk.path)
        time.sleep(0.2)  # a big batch's read: long enough for the others to ask meanwhile
        return real(chunk)

    monkeypatch.setattr(store_module, "_read_now", counted)
    store = RunStore(root)
    got: list = []

    def ask() -> None:
        started.wait(10)
        got.append(store.chunk(run, "batch", 0))

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(got) == 4 and all(c is got[0] for c in got)
    assert len(reads) == 1, reads
    assert store.chunk(run, "batch", 0) is got[0] and len(reads) == 1


def test_a_build_that_broke_is_built_again_by_the_next_request(deep, eager_none, monkeypatch):
    root, run = deep
    whole = AgentAPI(root).replay(run, offset=0, limit=PAGE)
    api = AgentAPI(root)
    assert not api.replay(run, offset=0, limit=PAGE, whole=False)["complete"]
    real = replay_module.batch_backward

    def broken(*args, **kwargs):
        raise RuntimeError("the gradients' piece broke")

    monkeypatch.setattr(replay_module, "batch_backward", broken)
    with pytest.raises(RuntimeError):
        api.replay(run, offset=0, limit=PAGE)
    monkeypatch.setattr(replay_module, "batch_backward", real)
    assert api.replay(run, offset=0, limit=PAGE) == whole
