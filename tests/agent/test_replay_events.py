"""Replay's methods: the event list of a recording, and the per-layer views (on_image,
neurons, thumbs) over the image-classifier recording and variants of the synthetic run
(light batches, a batch that stopped before its loss, no kept samples, a run still being
written)."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from synthetic_run import SyntheticRun

from tvis.agent import layer_views as lv
from tvis.agent import views
from tvis.agent.api import AgentAPI
from tvis.agent.client import LocalClient
from tvis.agent.protocol import AgentError, encode
from tvis.agent.replay import crash_note
from tvis.record.builder import Settings
from tvis.record.runner import record
from tvis.store.format import COMPLETE, RUNNING
from tvis.store.reader import RunReader
from tvis.store.writer import RunWriter

FRAME_BUDGET = 32 << 10


@pytest.fixture(scope="module")
def recorded(recorded_run):
    with LocalClient(recorded_run.parent) as client:
        yield client, recorded_run.name, RunReader(recorded_run)


def all_events(client, name, **params) -> list[dict]:
    first = client.call("replay", run=name, limit=2000, **params)
    assert len(first["events"]) == first["total"]
    return first["events"]


def first_batch(events: list[dict]) -> list[dict]:
    return [e for e in events if e["batch"] == events[0]["batch"]]


# -- the event list ----------------------------------------------------------------------


def test_replay_events_follow_a_training_step_in_order(recorded):
    client, name, _ = recorded
    events = first_batch(all_events(client, name))
    phases = [e["phase"] for e in events]
    order = ["data", "forward", "loss", "backward", "optimizer"]
    assert sorted(phases, key=order.index) == phases
    assert events[0]["kind"] == "batch" and set(phases) == set(order)
    assert [e["seq"] for e in events] == list(range(len(events)))


def test_replay_layers_are_leaves_and_project_functions(recorded):
    client, name, _ = recorded
    forward = [e for e in first_batch(all_events(client, name)) if e["phase"] == "forward"]
    names = [e["name"] for e in forward]
    assert names[0] == "features.0.0" and names[-1] == "head"
    assert "flatten_features" in names  # a project function
    assert "features" not in names and "ShapesCNN" not in names  # containers only with "call"
    every = [e["name"] for e in first_batch(all_events(client, name, detail="call"))]
    assert "features.0" in every and "ShapesCNN" in every
    assert every.index("features.0.3") < every.index("features.0")  # in the order they returned


def test_replay_backward_follows_gradient_arrival(recorded):
    client, name, _ = recorded
    events = first_batch(all_events(client, name))
    forward = [e["call"] for e in events if e["phase"] == "forward"]
    backward = [e for e in events if e["phase"] == "backward"]
    # A sequential CNN's gradients arrive from the head back to the first conv.
    assert [e["call"] for e in backward] == forward[::-1]
    assert all(e["grad"] is not None and e["grad_norm"] > 0 for e in backward)


def test_replay_update_lists_the_parameters_that_moved_most(recorded):
    client, name, _ = recorded
    events = all_events(client, name)
    update = next(e for e in events if e["kind"] == "update")
    params = client.call("step", run=name, step=update["step"])["params"]
    ratios = sorted((p["norms"]["ratio"] or -1.0 for p in params), reverse=True)
    assert [t["ratio"] for t in update["top"]] == ratios[: len(update["top"])]
    assert update["lr"] > 0 and update["n_params"] == len(params)


def test_replay_pages_and_outline_cover_the_whole_recording(recorded):
    client, name, _ = recorded
    events = all_events(client, name)
    page = client.call("replay", run=name, offset=10, limit=7)
    assert page["events"] == events[10:17]
    outline = page["outline"]
    assert sum(r["count"] for r in outline) == page["total"]
    assert [r["start"] for r in outline] == [
        sum(r["count"] for r in outline[:i]) for i in range(len(outline))
    ]
    assert [b["batch"] for b in page["batches"]] == [0, 1] and page["missing"] == []


def test_replay_follows_the_asked_sample_through_its_pipeline(recorded):
    client, name, _ = recorded
    stages = [e for e in first_batch(all_events(client, name, sample=1)) if e["kind"] == "stage"]
    pipeline = client.call("pipeline", run=name, batch=0, sample=1)
    assert [e["call"] for e in stages] == [s["call"] for s in pipeline["stages"]]


def make_batch(rng: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The batch of a script without a DataLoader, built by project code."""
    x = torch.randn(8, 4, generator=rng)
    return x, (x.sum(1) > 0).long()


def smoothed_nll(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """A loss written by hand: a project function of the forward, not a torch loss."""
    soft = torch.nn.functional.one_hot(target, 2) * 0.9 + 0.05
    return -(soft * logits.log_softmax(-1)).sum(-1).mean()


def test_replay_leaves_out_project_code_that_only_builds_the_batch(tmp_path: Path):
    def train() -> None:
        rng = torch.Generator().manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(3):
            x, y = make_batch(rng)
            loss = smoothed_nll(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    record(train, Settings(steps=3), Path(__file__).parent, tmp_path / "run")
    with LocalClient(tmp_path) as client:
        events = all_events(client, "run")
        roots = client.call("calls", run="run", batch=1)["calls"]
    assert roots[0]["name"] == "make_batch"  # Explore's tree still has it, where it ran
    for batch in (1, 2):
        names = [e["name"] for e in events if e["batch"] == batch and e["phase"] == "forward"]
        assert names == ["0", "1", "2"]
        # The script's own loss function is what backward ran on: it plays as the loss.
        loss = [e["name"] for e in events if e["batch"] == batch and e["phase"] == "loss"]
        assert loss == ["smoothed_nll"]


class Wrapped(torch.nn.Module):
    """A timm-style model: a method of its own (a project function) runs a container, then
    a layer of its own, as a ViT's ``forward_features`` runs its blocks, then its norm."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU())
        self.norm = torch.nn.LayerNorm(8)
        self.head = torch.nn.Linear(8, 2)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.blocks(x))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def test_replay_plays_the_layers_under_a_project_function_before_it_returns(tmp_path: Path):
    """The blocks, reached through a container the layer list leaves out, returned before
    the norm and the function around them: they play first (the norm and the function
    played before the first block, in every ViT written this way)."""

    def train() -> None:
        torch.manual_seed(0)
        model = Wrapped()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            loss = model(torch.randn(5, 4)).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    record(train, Settings(steps=2), Path(__file__).parent, tmp_path / "run")
    with LocalClient(tmp_path) as client:
        events = first_batch(all_events(client, "run"))
        calls = first_batch(all_events(client, "run", detail="call"))
    forward = [e["name"] for e in events if e["phase"] == "forward"]
    assert forward == ["blocks.0", "blocks.1", "norm", "Wrapped.features", "head"]
    every = [e["name"] for e in calls if e["phase"] == "forward"]
    assert every == [
        "blocks.0",
        "blocks.1",
        "blocks",
        "norm",
        "Wrapped.features",
        "head",
        "Wrapped",
    ]


class Reverser(torch.nn.Module):
    """An encoder-decoder whose encoder is reached through its final state alone."""

    def __init__(self) -> None:
        super().__init__()
        self.encoder = torch.nn.GRU(4, 8, batch_first=True)
        self.decoder = torch.nn.GRU(4, 8, batch_first=True)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        _, h = self.encoder(src)  # the sequence output goes unused
        out, _ = self.decoder(tgt, h)
        return self.head(out)


def test_a_layer_reached_only_through_a_later_output_shows_that_gradient(tmp_path: Path):
    def train() -> None:
        torch.manual_seed(0)
        model = Reverser()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            src, tgt = torch.randn(5, 6, 4), torch.randn(5, 6, 4)
            logits = model(src, tgt)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, 3), torch.zeros(30).long())
            opt.zero_grad()
            loss.backward()
            opt.step()

    record(train, Settings(steps=2), Path(__file__).parent, tmp_path / "run")
    with LocalClient(tmp_path) as client:
        events = first_batch(all_events(client, "run"))
        layers = {row["name"]: row for row in client.call("layers", run="run", batch=0)["rows"]}
        units = client.call("neurons", run="run", batch=0, call=layers["encoder"]["id"], grad=True)
    backward = [e["name"] for e in events if e["phase"] == "backward"]
    assert backward == ["head", "decoder", "encoder"]  # the encoder learns, through h_n
    encoder = next(e for e in events if e["phase"] == "backward" and e["name"] == "encoder")
    assert encoder["grad_norm"] > 0 and layers["encoder"]["grad_norm"] == encoder["grad_norm"]
    assert units["shape"] == [1, 8]  # dL/d h_n of the followed sample


def test_replay_refuses_an_unknown_detail(api: AgentAPI, run: SyntheticRun):
    with pytest.raises(AgentError, match="detail must be one of"):
        api.replay(run.name, detail="pixel")


# -- recordings that lack something --------------------------------------------------------


def rewrite(
    run: SyntheticRun,
    root: Path,
    edit: Callable[[int, dict, dict], None] = lambda b, record, arrays: None,
    status: str = COMPLETE,
) -> str:
    """A copy of the synthetic run under ``root`` with each batch passed through ``edit``
    (batch index, record, arrays) and the meta ``status``."""
    source = RunReader(run.path)
    index = source.index()
    writer = RunWriter(
        root / run.name, {"script": "train.py", "host": socket.gethostname(), "pid": os.getpid()}
    )
    for b in source.batch_ids():
        chunk = source.batch(b)
        record = {
            **chunk.record,
            "tensors": list(chunk.record["tensors"]),
            "calls": list(chunk.record["calls"]),
        }
        arrays = {t["id"]: np.array(chunk.array(t["id"])) for t in record["tensors"] if t["value"]}
        edit(b, record, arrays)
        writer.write_batch(b, record, arrays)
        index["batches"][b] = record["batch"]
    step = source.step(0)
    entries = list(step.record["tensors"])
    writer.write_step(
        0,
        {**step.record, "tensors": entries},
        {t["id"]: np.array(step.array(t["id"])) for t in entries},
    )
    writer.write_index(index)
    writer.write_meta(status=status)
    return run.name


def test_replay_collapses_light_batches_into_one_event(run: SyntheticRun, tmp_path: Path):
    def light(b, record, arrays):
        record["batch"] = {**record["batch"], "index": b, "light": b == 1}

    api = AgentAPI(tmp_path)
    name = rewrite(run, tmp_path, light)
    result = api.replay(name, limit=2000)
    (event,) = [e for e in result["events"] if e["kind"] == "light"]
    assert event["batches"] == [1] and "statistics only" in event["name"]
    assert [b["light"] for b in result["batches"]] == [False, True]


def test_replay_expands_a_light_group_into_its_forward_calls(run: SyntheticRun, tmp_path: Path):
    def light(b, record, arrays):
        record["batch"] = {**record["batch"], "index": b, "light": b == 1}

    api = AgentAPI(tmp_path)
    name = rewrite(run, tmp_path, light)
    closed = api.replay(name, limit=2000)
    opened = api.replay(name, limit=2000, expand=[1])
    (group,) = [e for e in opened["events"] if e["kind"] == "light"]
    assert group["open"] and group["group"] == 1 and group["n_calls"] > 0
    members = [e for e in opened["events"] if e.get("group") == 1 and e["kind"] == "layer"]
    assert members and all(e["phase"] == "forward" and e["batch"] == 1 for e in members)
    assert [e["seq"] for e in opened["events"]] == list(range(opened["total"]))
    assert opened["total"] == closed["total"] + len(members)
    row = next(b for b in opened["batches"] if b["batch"] == 1)
    assert (row["start"], row["count"]) == (group["seq"], len(members) + 1)
    assert sum(r["count"] for r in opened["outline"]) == opened["total"]


def test_replay_refuses_to_expand_too_many_groups(api: AgentAPI, run: SyntheticRun):
    with pytest.raises(AgentError, match="expand at most"):
        api.replay(run.name, expand=list(range(100)))


def test_replay_says_a_batch_stopped_before_its_loss(run: SyntheticRun, tmp_path: Path):
    def crash(b, record, arrays):
        if b == 1:  # a crash mid-forward: no loss call, no loss in the batch map
            record.pop("loss")
            record["calls"] = [c for c in record["calls"] if c["kind"] != "loss"]
            record["batch"] = {**record["batch"], "loss": None}

    api = AgentAPI(tmp_path)
    result = api.replay(rewrite(run, tmp_path, crash), limit=2000)
    assert any("batch 1 stopped before its loss" in m for m in result["missing"])
    second = [e["phase"] for e in result["events"] if e["batch"] == 1]
    assert "forward" in second and "loss" not in second


def test_replay_says_when_no_sample_values_were_kept(run: SyntheticRun, tmp_path: Path):
    def stats_only(b, record, arrays):
        record["tensors"] = [{**t, "value": None} for t in record["tensors"]]
        arrays.clear()

    api = AgentAPI(tmp_path)
    name = rewrite(run, tmp_path, stats_only)
    result = api.replay(name)
    assert any("no sample values were kept" in m for m in result["missing"])
    thumbs = api.thumbs(name, batch=0, calls=[run.conv_call])["thumbs"]
    assert thumbs[0]["array"] is None and "statistics only" in thumbs[0]["why"]


def test_replay_plays_a_run_still_being_written(run: SyntheticRun, tmp_path: Path):
    api = AgentAPI(tmp_path)
    name = rewrite(run, tmp_path, status=RUNNING)
    result = api.replay(name)
    assert result["status"] == RUNNING
    assert result["missing"][0] == "the run is running: replaying the 2 batch(es) recorded so far."


# -- per-layer views -----------------------------------------------------------------------


def conv_event(client, name, layer="features.0.0") -> dict:
    return next(e for e in all_events(client, name) if e["name"] == layer)


def test_on_image_paints_mean_abs_of_a_conv_map_over_the_picture(recorded):
    client, name, reader = recorded
    event = conv_event(client, name)
    view = client.call(
        "on_image", run=name, batch=0, call=event["call"], sample=1, picture=True, width=64
    )
    assert view["applies"] and view["kind"] == "conv"
    stored = np.asarray(reader.batch(0).array(event["tensor"]))[1]
    strength = np.abs(stored).mean(axis=0)
    assert view["map_shape"] == list(strength.shape)
    assert view["peak"] == pytest.approx(strength.max(), rel=1e-5)
    assert view["map"].shape == view["image"].shape[:2]
    assert view["map"].min() >= 0 and view["map"].max() == pytest.approx(1.0)


def test_on_image_location_lists_every_channel_there(recorded):
    client, name, reader = recorded
    event = conv_event(client, name)
    view = client.call("on_image", run=name, batch=0, call=event["call"], sample=2, at=[3, 5])
    stored = np.asarray(reader.batch(0).array(event["tensor"]))[2]
    np.testing.assert_array_equal(view["location"]["values"], stored[:, 3, 5])


def test_on_image_of_the_gradient_uses_dl_d_output(recorded):
    client, name, reader = recorded
    event = conv_event(client, name, "features.1.0")
    view = client.call("on_image", run=name, batch=0, call=event["call"], sample=0, grad=True)
    stored = np.asarray(reader.batch(0).array(event["grad"]))[0]
    assert view["tensor"] == event["grad"]
    assert view["peak"] == pytest.approx(np.abs(stored).mean(axis=0).max(), rel=1e-5)


def test_on_image_does_not_apply_to_a_vector_and_says_why(recorded):
    client, name, _ = recorded
    head = conv_event(client, name, "head")
    view = client.call("on_image", run=name, batch=0, call=head["call"])
    assert not view["applies"] and "has no place on the picture" in view["why"]


def test_neurons_of_a_conv_map_come_most_active_first(recorded):
    client, name, reader = recorded
    event = conv_event(client, name, "features.1.0")
    page = client.call("neurons", run=name, batch=0, call=event["call"], sample=0, limit=8)
    stored = np.asarray(reader.batch(0).array(event["tensor"]))[0]
    activity = np.abs(stored).reshape(stored.shape[0], -1).mean(axis=1)
    assert page["kind"] == "maps" and page["total"] == stored.shape[0]
    assert page["units"] == list(np.argsort(-activity, kind="stable")[:8])
    top = stored[page["units"][0]]
    np.testing.assert_allclose(page["maps"][0], views.block_mean(top, 12, 12), rtol=1e-6)
    rest = client.call("neurons", run=name, batch=0, call=event["call"], offset=8, limit=8)
    assert not set(rest["units"]) & set(page["units"])


def test_neurons_of_logits_are_bars_labelled_with_class_names(recorded):
    client, name, reader = recorded
    head = conv_event(client, name, "head")
    bars = client.call("neurons", run=name, batch=0, call=head["call"], sample=0)
    classes = client.call("run", run=name)["data"]["classes"]
    logits = np.asarray(reader.batch(0).array(head["tensor"]))[0]
    assert bars["kind"] == "bars" and bars["values"] == sorted(bars["values"], reverse=True)
    assert bars["labels"][0] == classes[int(logits.argmax())]


def test_thumbs_give_one_small_map_per_layer(recorded):
    client, name, _ = recorded
    calls = [e["call"] for e in first_batch(all_events(client, name)) if e["phase"] == "forward"]
    thumbs = client.call("thumbs", run=name, batch=0, calls=calls, grad=True)["thumbs"]
    assert [t["call"] for t in thumbs] == calls
    assert all(t["array"].shape[0] <= 4 and t["array"].shape[1] <= 8 for t in thumbs)


def test_every_view_reply_fits_a_frame_budget(recorded):
    client, name, _ = recorded
    events = first_batch(all_events(client, name))
    calls = [e["call"] for e in events if e["phase"] == "forward"]
    for call in calls:
        for method, params in (
            ("on_image", {"picture": True, "at": [0, 0]}),
            ("neurons", {"limit": 64}),
        ):
            try:
                reply = client.call(method, run=name, batch=0, call=call, **params)
            except AgentError:
                continue  # a location on a vector: refused, which is its own test
            assert len(encode(reply)) <= FRAME_BUDGET, (method, call)
    assert len(encode(client.call("thumbs", run=name, batch=0, calls=calls))) <= FRAME_BUDGET


# -- layouts over a vision transformer's tokens and attention ------------------------------


def test_layout_of_vit_tokens_and_attention_uses_the_patch_grid():
    tokens = lv.layout([65, 32], picture=True)
    assert tokens.kind == "tokens" and tokens.grid == {"h": 8, "w": 8, "offset": 1}
    attention = lv.layout([4, 65, 65], picture=True, attention=True)
    assert attention.kind == "attention"
    assert lv.layout([16, 16, 16], picture=True).kind == "conv"  # a square conv map stays one
    assert "not a picture" in (lv.layout([16, 16, 16], picture=False).why or "")


def test_attention_on_image_shows_where_the_query_token_looks():
    weights = np.zeros((2, 5, 5), np.float32)
    weights[:, 0, 4] = 1.0  # [CLS] looks at the last of 2 × 2 patches
    how = lv.layout(weights.shape, picture=True, attention=True)
    view = lv.on_image(weights, how, (4, 4))
    assert view["map_shape"] == [2, 2] and view["peak"] == 1.0
    assert view["map"][-1, -1] == 1.0 and view["map"][0, 0] == 0.0


def test_neurons_of_token_features_are_strips_without_a_picture():
    x = np.arange(6 * 3, dtype=np.float32).reshape(6, 3)  # T=6, D=3
    page = lv.neurons(
        x, grid=None, labels=None, position=None, offset=0, limit=8, width=4, height=4
    )
    assert page["kind"] == "strips" and page["units"] == [2, 1, 0]
    np.testing.assert_array_equal(page["maps"][0], x[:, 2][None, :])


def test_crash_note_names_the_users_line_before_the_message():
    meta = {
        "status": "failed",
        "project": "/proj",
        "error": 'Traceback (most recent call last):\n  File "/proj/train.py", line 7, in <module>\n'
        '  File "/lib/torch/nn/modules/module.py", line 1, in _call_impl\n'
        "ValueError: label out of range",
    }
    index = {"batches": [{"index": 0}, {"index": 1}]}
    assert crash_note(meta, index, None) == (
        "train.py:7 raised ValueError; replaying the 2 batch(es) recorded before it"
        " — label out of range"
    )
    stopped = crash_note(meta, index, {"batch": 1, "last": None})
    assert stopped.startswith("train.py:7 raised ValueError in batch 1's forward, before any layer")
    assert crash_note({**meta, "status": "complete"}, index, None) is None
