"""The agent over a run recorded from the image-classifier example (``recorded_run``)."""

from __future__ import annotations

import numpy as np
import pytest

from tvis.agent.client import LocalClient, connect
from tvis.agent.target import Target
from tvis.store.reader import RunReader


@pytest.fixture(scope="module")
def recorded(recorded_run):
    """(client over the run's folder, run name, reader)."""
    with LocalClient(recorded_run.parent) as client:
        yield client, recorded_run.name, RunReader(recorded_run)


def first_conv(client, name):
    conv = client.call("find", run=name, batch=0, query="conv2d")[0]
    return client.call("call", run=name, batch=0, call=conv["id"])["outputs"][0]["entry"]


def test_a_recorded_run_is_listed_complete(recorded):
    client, name, _ = recorded
    (row,) = client.call("runs")
    assert row["run"] == name and row["status"] == "complete" and row["calls"] > 0


def test_a_recorded_conv_activation_is_viewed_for_the_followed_sample(recorded):
    client, name, reader = recorded
    out = first_conv(client, name)
    view = client.call(
        "view", run=name, batch=0, tensor=out["id"], sample=1, index=[2], width=256, height=256
    )
    stored = np.asarray(reader.batch(0).array(out["id"]))
    np.testing.assert_array_equal(view["array"], stored[1, 2])
    grad = client.call("view", run=name, batch=0, tensor=out["id"], grad=True, sample=1)
    assert grad["array"].shape == view["array"].shape


def test_the_recorded_input_is_shown_un_normalized(recorded):
    client, name, reader = recorded
    row = client.call("samples", run=name, batch=0)["rows"][0]
    assert row["input"]["kind"] == "image"
    image = client.call(
        "image", run=name, batch=0, tensor=row["input"]["tensor"], sample=0, width=64, height=64
    )
    assert image["normalized"] and image["array"].dtype == np.uint8
    normalize = client.call("run", run=name)["data"]["normalize"]
    stored = np.asarray(reader.batch(0).array(row["input"]["tensor"]))[0].astype(np.float64)
    mean, std = (np.array(normalize[k])[:, None, None] for k in ("mean", "std"))
    expected = np.clip((stored * std + mean) * 255, 0, 255).round().transpose(1, 2, 0)
    np.testing.assert_allclose(image["array"], expected, atol=1)


def test_recorded_samples_carry_loss_target_and_prediction(recorded):
    client, name, _ = recorded
    classes = client.call("run", run=name)["data"]["classes"]
    rows = client.call("samples", run=name, batch=0)["rows"]
    assert all(r["target_name"] in classes and r["pred_name"] in classes for r in rows)
    assert all(r["loss"] > 0 and 0 <= r["p_target"] <= 1 for r in rows)


def test_recorded_source_lines_are_annotated(recorded):
    client, name, _ = recorded
    files = client.call("sources", run=name)
    annotated = [f for f in files if client.call("source", run=name, file=f)["lines"]]
    assert annotated


def test_recorded_parameter_updates_are_viewed(recorded):
    client, name, reader = recorded
    record = client.call("step", run=name, step=0)["params"][0]
    update = client.call("param", run=name, step=0, name=record["name"], which="update")
    stored = np.asarray(reader.step(0).array(record["update"]))
    plane = stored.reshape(-1, *stored.shape[-2:])[0] if stored.ndim > 1 else stored[None]
    np.testing.assert_array_equal(update["array"], plane)


def test_a_recorded_run_over_ssh_equals_local(recorded, ssh_lab):
    client, name, _ = recorded
    out = first_conv(client, name)
    params = dict(run=name, batch=0, tensor=out["id"], sample=0, width=8, height=8)
    target = Target(path=client.root, host="tvis-test", remote_tvis=ssh_lab.remote_tvis)
    with connect(target, ssh_command=ssh_lab.ssh_command, control_dir=ssh_lab.control_dir()) as far:
        np.testing.assert_array_equal(
            far.call("view", **params)["array"], client.call("view", **params)["array"]
        )


def test_layers_leave_the_data_pipeline_out_and_number_the_layers_from_1(recorded):
    client, name, _ = recorded
    every = client.call("layers", run=name, batch=0, limit=5000)
    layers = client.call("layers", run=name, batch=0, limit=5000, skip_data=True)
    data_calls = [r for r in every["rows"] if r["phase"] == "data"]
    assert data_calls and layers["hidden"] == len(data_calls)
    assert layers["total"] == every["total"] - len(data_calls)
    assert [r["layer"] for r in layers["rows"]] == list(range(1, layers["total"] + 1))
    assert all(r["phase"] != "data" for r in layers["rows"])
