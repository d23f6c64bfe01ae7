"""Every reply the viewer reads matches its declaration in ``tvis.agent.replies``.

Real recordings (the image classifier, the ViT and the text language model) are asked every
method the viewer uses, and each reply is walked against its ``TypedDict``: a required key
missing or a key the declaration does not name fails, so the agent cannot grow or rename a
key without the declaration (and the viewer's types) following.
"""

from __future__ import annotations

import inspect
import json
import math
import types
import typing
from pathlib import Path
from typing import Any

import pytest
from support import record_example, record_script

from tvis.agent.client import LocalClient
from tvis.agent.protocol import PROTOCOL_VERSION
from tvis.agent.replay import ReplayAPI
from tvis.agent.replies import REPLAY_DETAILS, REPLIES, ReplayEvent, ReplayQuery, fields
from tvis.store import watch as series_store


def problems(value: Any, hint: Any, where: str) -> list[str]:
    """Where ``value`` breaks ``hint``: keys missing or undeclared, in nested maps too."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        options = [h for h in typing.get_args(hint) if h is not type(None)]
        if value is None:
            return [] if len(options) < len(typing.get_args(hint)) else [f"{where}: None"]
        found = [problems(value, h, where) for h in options]
        return [] if any(not f for f in found) else found[0]
    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            return [f"{where}: a {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in problems(v, item, f"{where}[{i}]")]
    if typing.is_typeddict(hint):
        if not isinstance(value, dict):
            return [f"{where}: a {type(value).__name__}, not a map"]
        declared = fields(hint)
        found = [
            f"{where}: {k!r} not declared in {hint.__name__}" for k in value if k not in declared
        ]
        found += [
            f"{where}: {k!r} required by {hint.__name__} but missing"
            for k in hint.__required_keys__
            if k not in value
        ]
        for key, field in declared.items():
            if key in value:
                found += problems(value[key], field, f"{where}.{key}")
        return found
    return []


def _run_folder(root: Path) -> Path:
    (run,) = [p for p in root.iterdir() if p.is_dir()]
    return run


EVALUATES_BETWEEN_STEPS = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
data, target = torch.randn(16, 4), torch.randint(0, 2, (16,))
for step in range(2):
    with torch.no_grad():
        model(torch.randn(16, 4))
    loss = nn.functional.cross_entropy(model(data), target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
"""


@pytest.fixture(scope="module")
def runs(recorded_run, tmp_path_factory) -> list[Path]:
    """The image classifier (2 steps), a ViT and a text language model (1 step each), and
    a script that evaluates between steps (light groups, opened and closed)."""
    vit = record_example(tmp_path_factory.mktemp("vit"), "vit", "--steps", "1")
    lm = record_example(tmp_path_factory.mktemp("text_lm"), "text_lm", "--steps", "1")
    light = record_script(tmp_path_factory.mktemp("light"), EVALUATES_BETWEEN_STEPS)
    return [recorded_run, vit, lm, light]


def _ask_everything(client: LocalClient, name: str) -> list[tuple[str, dict[str, Any], Any]]:
    """Every method the viewer uses, with the parameters its pages send."""
    asked: list[tuple[str, dict[str, Any], Any]] = []

    def ask(method: str, **params: Any) -> Any:
        try:
            reply = client.call(method, **params)
        except Exception as e:  # a view this run cannot show answers one sentence
            if type(e).__name__ != "AgentError":
                raise
            return None
        asked.append((method, params, reply))
        return reply

    info = ask("run", run=name)
    ask("runs")
    ask("hello", protocol=PROTOCOL_VERSION)
    found = ask("insights", run=name)
    ask("embeddings", run=name)
    for table in (found or {}).get("tables", [])[:1]:  # an embedding table's own rows
        ask("embeddings", run=name, table=table["param"])
    ask("loss_curve", run=name)
    ask("watch_series", run=name)
    for b in [row["index"] for row in info["batches"]][:2]:
        roots = ask("calls", run=name, batch=b, parent=-1)["calls"]
        ask("calls", run=name, batch=b, parent=roots[0]["id"])
        found = [*ask("find", run=name, batch=b, query="linear"), *roots]
        found += ask("find", run=name, batch=b, query="conv")
        for row in found[:8]:
            call = ask("call", run=name, batch=b, call=row["id"])
            ask("counterpart", run=name, batch=b, call=row["id"], other=info["batches"][0]["index"])
            ask("on_image", run=name, batch=b, call=row["id"])
            ask("on_image", run=name, batch=b, call=row["id"], picture=True)
            ask("neurons", run=name, batch=b, call=row["id"])
            for out in call["outputs"][:1]:
                if "entry" in out:
                    tensor = out["entry"]["id"]
                    ask("tensor", run=name, batch=b, tensor=tensor)
                    ask("view", run=name, batch=b, tensor=tensor, sample=0)
                    ask("view", run=name, batch=b, tensor=tensor, sample=0, grad=True)
                    ask("array", run=name, batch=b, tensor=tensor)
        ask("thumbs", run=name, batch=b, calls=[r["id"] for r in found[:8]])
        ask("layers", run=name, batch=b)
        ask("layers", run=name, batch=b, sort="std", desc=True, locate=found[0]["id"])
        ask("timeline", run=name, batch=b)
        for row in ask("samples", run=name, batch=b)["rows"][:1]:
            ask("image", run=name, batch=b, tensor=row["input"]["tensor"])
        ask("sample_table", run=name, batch=b)
        ask("sample_table", run=name, batch=b, sample=0)
        ask("loss_detail", run=name, batch=b)
        ask("pipeline", run=name, batch=b)
        ask("gradcam", run=name, batch=b)
        ask("gradcam", run=name, batch=b, which="target")
        ask("gradcam_grid", run=name, batch=b, limit=8)
        ask("attention", run=name, batch=b)
        ask("attention", run=name, batch=b, rollout=True)
        ask("attention", run=name, batch=b, head=0)
        ask("attention_heads", run=name, batch=b)
        ask("attention_overlay", run=name, batch=b)
    for file in ask("sources", run=name):
        ask("source", run=name, file=file)
        ask("source", run=name, file=file, batch=info["batches"][0]["index"])
    for step in [s["index"] for s in info["steps"]]:
        for record in ask("step", run=name, step=step)["params"][:4]:
            ask("param", run=name, step=step, name=record["name"])
            ask("param", run=name, step=step, name=record["name"], which="update")
            ask("param", run=name, step=step, name=record["name"], which="grad")
            ask("kernel_grid", run=name, step=step, name=record["name"])
            ask("matrix", run=name, step=step, name=record["name"])
    light = [b["index"] for b in info["batches"] if b.get("light") or b.get("no_grad")]
    for detail in REPLAY_DETAILS:
        ask("replay", run=name, detail=detail, limit=5000)
        ask("replay", run=name, detail=detail, limit=5000, expand=light[:1])
    return asked


def test_every_reply_the_viewer_reads_is_declared(runs):
    seen: set[str] = set()
    broken: list[str] = []
    for run in runs:
        with LocalClient(run.parent) as client:
            for method, params, reply in _ask_everything(client, run.name):
                seen.add(method)
                where = f"{run.name[-6:]} {method}({', '.join(f'{k}={v}' for k, v in params.items() if k != 'run')})"
                broken += problems(reply, REPLIES[method], where)
    assert not broken, "\n".join(sorted(set(broken))[:60])
    # Each declared method was answered at least once by some run (a view no example can
    # show would leave its declaration unchecked).
    # Multi-rank and watched runs: the two tests below.
    unchecked = set(REPLIES) - seen - {"ranks", "rank_params", "watch_series"}
    assert not unchecked, f"never answered: {sorted(unchecked)}"


SEGMENTS = """
import torch
from torch import nn

torch.manual_seed(0)
model = nn.Conv2d(3, 4, 3, padding=1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
x, y = torch.randn(2, 3, 8, 8), torch.randint(0, 4, (2, 8, 8))
y[:, 0] = 255
loss = nn.functional.cross_entropy(model(x), y, ignore_index=255)
optimizer.zero_grad()
loss.backward()
optimizer.step()
"""


def test_a_segmentation_losss_replies_are_declared(tmp_path):
    run = record_script(tmp_path, SEGMENTS, "--steps", "1")
    with LocalClient(run.parent) as client:
        pixels = client.call("sample_table", run=run.name, batch=0, sample=1)
        rows = client.call("sample_table", run=run.name, batch=0)
        detail = client.call("loss_detail", run=run.name, batch=0)
    broken = problems(pixels, REPLIES["sample_table"], "sample_table(sample=1)")
    broken += problems(rows, REPLIES["sample_table"], "sample_table")
    broken += problems(detail, REPLIES["loss_detail"], "loss_detail")
    assert pixels["kind"] == "pixels" and detail["iou"]["run"] and not broken, broken


def test_rank_replies_are_declared(ddp_recording):
    with LocalClient(ddp_recording.group.parent) as client:
        first = client.call("runs")[0]
        ranks = client.call("ranks", run=first["run"])
        params = client.call("rank_params", run=first["run"], step=0)
    broken = problems(ranks, REPLIES["ranks"], "ranks")
    broken += problems(params, REPLIES["rank_params"], "rank_params")
    assert ranks["ranks"] and params["rows"] and not broken, broken


def test_a_watched_runs_series_is_declared(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "meta.json").write_text(json.dumps({"format": 2, "status": "complete"}))
    series = series_store.Series()
    for i in range(50):
        series.loss.append(math.nan if i == 30 else 2.0 / (1 + i))
        series.grad_norm.append(1.0)
        series.lr.append(1e-3)
        series.ms.append(5.0)
    series.anomaly = {"step": 30, "kind": "loss_nonfinite", "text": "loss became nan"}
    series_store.write(run, series)
    with LocalClient(tmp_path) as client:
        reply = client.call("watch_series", run="run", width=20)
    assert reply["columns"] and not problems(reply, REPLIES["watch_series"], "watch_series")


def test_a_renamed_key_is_caught():
    reply = {"calls": [{"id": 1, "name": "fc", "n_kids": 3}], "total": 1}
    found = problems(reply, REPLIES["calls"], "calls")
    assert "calls.calls[0]: 'n_kids' not declared in CallRow" in found
    assert "calls: 'dropped' required by CallsReply but missing" in found


def test_the_replay_paging_keywords_are_the_agents_parameters():
    agent = set(inspect.signature(ReplayAPI.replay).parameters) - {"self"}
    assert agent == set(ReplayQuery.__annotations__)


def test_replay_events_decode_into_read_only_records(runs):
    with LocalClient(runs[0].parent) as client:
        events = client.call("replay", run=runs[0].name, limit=5000)["events"]
    decoded = [ReplayEvent.decode(e) for e in events]
    assert [e.seq for e in decoded] == list(range(len(events)))
    layer = next(e for e in decoded if e.kind == "layer")
    assert layer.call == layer.raw["call"] and layer.shape == tuple(layer.raw["shape"])
    with pytest.raises(AttributeError):
        setattr(layer, "kind", "grad")  # noqa: B010 (the assignment a frozen record refuses)
