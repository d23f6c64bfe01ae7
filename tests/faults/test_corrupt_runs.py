"""Corrupt runs, one record type at a time: `tvis ls` and the agent list the bad run as
unreadable with a sentence, answer 400/404 sentences (never a 500), and the rest stays usable."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
import torch
import torch.nn.functional as F
from support import TVIS
from torch import nn

from tvis.agent.api import AgentAPI
from tvis.agent.dispatch import handle
from tvis.record.builder import Settings
from tvis.record.runner import record

HERE = Path(__file__).resolve().parent


def _train() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = F.cross_entropy(model(torch.randn(6, 4)), torch.randint(0, 2, (6,)))
        opt.zero_grad()
        loss.backward()
        opt.step()


def _edit_msgpack(path: Path, change: Callable[[dict], None]) -> None:
    data = msgpack.unpackb(path.read_bytes(), strict_map_key=False)
    change(data)
    path.write_bytes(msgpack.packb(data, use_bin_type=True))


def _edit_json(path: Path, change: Callable[[dict], None]) -> None:
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


# name -> (how the run is broken, is the whole run unreadable)
CORRUPTIONS: dict[str, tuple[Callable[[Path], None], bool]] = {
    "meta_status_list": (
        lambda r: _edit_json(r / "meta.json", lambda m: m.update(status=["x"])),
        True,
    ),
    "meta_not_a_map": (lambda r: (r / "meta.json").write_text("[1, 2]"), True),
    "meta_not_json": (lambda r: (r / "meta.json").write_text("{nope"), True),
    "meta_started_text": (
        lambda r: _edit_json(r / "meta.json", lambda m: m.update(started="yesterday")),
        True,
    ),
    "index_batches_text": (
        lambda r: _edit_msgpack(r / "run.msgpack", lambda i: i.update(batches="nope")),
        True,
    ),
    "index_batch_loss_text": (
        lambda r: _edit_msgpack(r / "run.msgpack", lambda i: i["batches"][0].update(loss="x")),
        True,
    ),
    "index_notice_map": (
        lambda r: _edit_msgpack(r / "run.msgpack", lambda i: i.update(notices=[{"text": 3}])),
        True,
    ),
    "index_garbage": (lambda r: (r / "run.msgpack").write_bytes(b"\xc1\xc1"), True),
    "batch_call_name_number": (
        lambda r: _edit_msgpack(
            r / "batches" / "000000" / "index.msgpack", lambda b: b["calls"][0].update(name=5)
        ),
        False,
    ),
    "batch_tensors_map": (
        lambda r: _edit_msgpack(
            r / "batches" / "000000" / "index.msgpack", lambda b: b.update(tensors={"a": 1})
        ),
        False,
    ),
    "batch_tensor_shape_text": (
        lambda r: _edit_msgpack(
            r / "batches" / "000000" / "index.msgpack",
            lambda b: b["tensors"][0].update(shape="x"),
        ),
        False,
    ),
    "step_tensor_stats_list": (
        lambda r: _edit_msgpack(
            r / "steps" / "000000" / "index.msgpack", lambda s: s["tensors"][-1].update(stats=[1])
        ),
        False,
    ),
    "batch_garbage": (
        lambda r: (r / "batches" / "000000" / "index.msgpack").write_bytes(b"\x93\x01"),
        False,
    ),
    "step_weight_text": (
        lambda r: _edit_msgpack(
            r / "steps" / "000000" / "index.msgpack", lambda s: s["params"][0].update(weight="w")
        ),
        False,
    ),
    "blob_truncated": (
        lambda r: (r / "batches" / "000000" / "blob.bin").write_bytes(b""),
        False,
    ),
}


@pytest.fixture(scope="module")
def good_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("good")
    outcome = record(_train, Settings(steps=2), HERE, out / "20300101-000000_good_000000")
    assert outcome.status == "complete"
    return outcome.run_dir


@pytest.fixture(scope="module")
def root(good_run: Path, tmp_path_factory) -> Path:
    """The good run beside one broken copy per corruption."""
    root = tmp_path_factory.mktemp("runs")
    shutil.copytree(good_run, root / good_run.name)
    for name, (corrupt, _) in CORRUPTIONS.items():
        copy = root / f"20200101-000000_{name}"
        shutil.copytree(good_run, copy)
        corrupt(copy)
    return root


def test_tvis_ls_lists_bad_runs_as_unreadable_with_a_sentence(root):
    done = subprocess.run([TVIS, "ls", "--json", str(root)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    rows = {row["run_id"]: row for row in map(json.loads, done.stdout.splitlines())}
    assert rows["20300101-000000_good_000000"]["status"] == "complete"
    for name, (_, whole) in CORRUPTIONS.items():
        row = rows[f"20200101-000000_{name}"]
        if whole:
            assert row["status"] == "unreadable", name
            assert row["error"].endswith(".") and "Traceback" not in row["error"], name
        else:
            assert row["status"] == "complete", name
    plain = subprocess.run([TVIS, "ls", str(root)], capture_output=True, text=True)
    assert plain.returncode == 0 and "unreadable" in plain.stdout


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_agent_answers_every_method_on_a_corrupt_run_with_a_sentence(root, name):
    api = AgentAPI(root)
    run = f"20200101-000000_{name}"
    listed = handle(api, {"id": 1, "method": "runs", "params": {}})["result"]
    assert {r["run"] for r in listed} >= {run, "20300101-000000_good_000000"}
    requests = [
        ("run", {"run": run}),
        ("calls", {"run": run, "batch": 0}),
        ("layers", {"run": run, "batch": 0}),
        ("timeline", {"run": run, "batch": 0}),
        ("find", {"run": run, "batch": 0, "query": "Linear"}),
        ("samples", {"run": run, "batch": 0}),
        ("step", {"run": run, "step": 0}),
        ("tensor", {"run": run, "batch": 0, "tensor": 0}),
        ("array", {"run": run, "batch": 0, "tensor": 0}),
    ]
    for method, params in requests:
        reply = handle(api, {"id": 2, "method": method, "params": params})
        if "error" in reply:
            assert reply["status"] in (400, 404), (method, reply)
            assert "Error" not in reply["error"], (method, reply)
    good = handle(
        api,
        {"id": 3, "method": "calls", "params": {"run": "20300101-000000_good_000000", "batch": 0}},
    )
    assert "result" in good


def test_a_corrupt_call_is_named_by_the_request_that_reads_it_and_no_other(tmp_path):
    """Calls are checked as they are read: the tree's roots and the layers table's first
    page still answer; asking for the corrupt call answers a sentence naming it."""
    out = tmp_path / "runs"
    outcome = record(_train, Settings(steps=1), HERE, out / "20300101-000000_deep_000000")
    path = outcome.run_dir / "batches" / "000000" / "index.msgpack"
    calls = msgpack.unpackb(path.read_bytes(), strict_map_key=False)["calls"]
    victim = max(i for i, c in enumerate(calls) if c.get("parent", -1) != -1)  # not a root
    _edit_msgpack(path, lambda b: b["calls"][victim].update(outputs=7))
    api = AgentAPI(out)
    run = outcome.run_dir.name

    def ask(method: str, **params):
        return handle(api, {"id": 1, "method": method, "params": {"run": run, **params}})

    roots = ask("calls", batch=0, parent=-1)
    assert "result" in roots, roots
    first = ask("layers", batch=0, offset=0, limit=victim)  # the rows before it
    assert len(first["result"]["rows"]) == sum(
        1 for c in calls[:victim] if c.get("kind") in ("module", "function", "loss")
    )
    replay = ask("replay", sample=0)  # reads every call: the batch is named, not the run lost
    assert any(f"calls[{victim}].outputs is 7" in m for m in replay["result"]["missing"]), replay
    named = ask("call", batch=0, call=calls[victim]["id"])
    assert named["status"] in (400, 404), named
    assert f"calls[{victim}].outputs is 7, not a list" in named["error"]
    assert named["error"].endswith(".") and "Traceback" not in named["error"]


def _train_with_momentum() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, nesterov=True)
    for _ in range(3):
        loss = F.cross_entropy(model(torch.randn(6, 4)), torch.randint(0, 2, (6,)))
        opt.zero_grad()
        loss.backward()
        opt.step()


def _predicted(run: Path, change: Callable[[dict], None]) -> None:
    """Change the prediction map of step 1's first Δw."""

    def edit(step: dict) -> None:
        change(step["tensors"][step["params"][0]["update"]]["value"]["predict"])

    _edit_msgpack(run / "steps" / "000001" / "index.msgpack", edit)


PREDICTION_CORRUPTIONS: dict[str, Callable[[Path], None]] = {
    "grad_text": lambda r: _predicted(r, lambda p: p.update(grad="g")),
    "grad_circular": lambda r: _predicted(r, lambda p: p.update(grad=1)),
    "lr_changed": lambda r: _predicted(r, lambda p: p.update(lr=p["lr"] * 2)),
    "rule_unknown": lambda r: _predicted(r, lambda p: p.update(rule="adam")),
    "prev_param_renamed": lambda r: _predicted(r, lambda p: p["prev"].update(param="nope")),
    "prev_step_gone": lambda r: shutil.rmtree(r / "steps" / "000000"),
    "prev_grad_gone": lambda r: _edit_msgpack(
        r / "steps" / "000000" / "index.msgpack", lambda s: s["params"][0].update(grad=None)
    ),
}


@pytest.mark.parametrize("name", sorted(PREDICTION_CORRUPTIONS))
def test_a_dw_whose_prediction_cannot_be_redone_is_named_in_a_sentence(tmp_path, name):
    """Format 5: a Δw XOR-ed against SGD's prediction needs its step's weight and gradient
    and the step before's; with one gone or changed, reading it answers one sentence (never
    a traceback or wrong values), and the step's other values still read."""
    out = tmp_path / "runs"
    outcome = record(_train_with_momentum, Settings(steps=3), HERE, out / "20300101-000000_a")
    step = msgpack.unpackb(
        (outcome.run_dir / "steps" / "000001" / "index.msgpack").read_bytes(),
        strict_map_key=False,
    )
    first = step["params"][0]
    assert "prev" in step["tensors"][first["update"]]["value"]["predict"]
    PREDICTION_CORRUPTIONS[name](outcome.run_dir)
    api = AgentAPI(out)

    def array(tensor: int) -> dict:
        params = {"run": outcome.run_dir.name, "step": 1, "tensor": tensor}
        return handle(api, {"id": 1, "method": "array", "params": params})

    reply = array(first["update"])
    assert "error" in reply and reply["status"] in (400, 404), reply
    assert reply["error"].endswith(".") and "Error" not in reply["error"], reply
    assert "Traceback" not in reply["error"]
    if name != "prev_step_gone":  # every weight's base is that step's after
        assert "result" in array(first["weight"])
        assert "result" in array(step["params"][1]["update"])
