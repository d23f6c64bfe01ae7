"""Every protocol method, through the local client (so results have the wire's types)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from synthetic_run import BATCH, CLASSES, MEAN, PER_SAMPLE, STD, SyntheticRun

from tvis.agent.client import AgentError, LocalClient, connect
from tvis.agent.protocol import PROTOCOL_VERSION, encode
from tvis.agent.target import Target
from tvis.store.reader import RunReader


@pytest.fixture
def client(runs_root):
    with LocalClient(runs_root) as c:
        yield c


def stored(run: SyntheticRun, tensor: int, batch: int = 0) -> np.ndarray:
    return np.array(RunReader(run.path).batch(batch).array(tensor))


def test_hello_names_protocol_version_and_counts_runs(client, runs_root):
    info = client.call("hello", protocol=PROTOCOL_VERSION, version="test")
    assert info["protocol"] == PROTOCOL_VERSION and info["runs"] == 1
    assert info["root"] == str(runs_root.resolve())


def test_hello_with_another_protocol_is_one_sentence_naming_both_versions(client):
    with pytest.raises(AgentError) as e:
        client.call("hello", protocol=PROTOCOL_VERSION + 1, version="9.9.9")
    assert e.value.status == 409
    assert "9.9.9" in e.value.message and "upgrade one of them" in e.value.message


def test_runs_lists_the_run_by_its_path_under_the_root(client, run):
    (row,) = client.call("runs")
    assert row["run"] == run.name and row["status"] == "complete"
    assert (row["steps"], row["batches"], row["script"]) == (1, 2, "train.py")
    assert row["calls"] == 14 and row["bytes"] > 0


def test_run_holds_meta_index_and_the_normalization(client, run):
    info = client.call("run", run=run.name)
    assert info["status"] == "complete" and info["meta"]["script"] == "train.py"
    assert len(info["batches"]) == 2 and len(info["steps"]) == 1
    assert info["data"]["normalize"] == {"mean": MEAN, "std": STD}
    assert info["data"]["classes"] == CLASSES and info["notices"]


def test_calls_pages_the_children_of_a_call(client, run):
    roots = client.call("calls", run=run.name, batch=0)
    assert roots["total"] == 2 and [c["cls"] for c in roots["calls"]] == ["Net", "CrossEntropyLoss"]
    page = client.call("calls", run=run.name, batch=0, parent=run.model_call, offset=1, limit=2)
    assert page["total"] == 4 and [c["name"] for c in page["calls"]] == [
        "features.1",
        "model.helper",
    ]


def test_call_rows_carry_output_summary_and_no_arguments(client, run):
    (conv,) = client.call("calls", run=run.name, batch=0, parent=run.model_call, limit=1)["calls"]
    assert "inputs" not in conv and "outputs" not in conv
    assert conv["out_shape"] == [BATCH, 8, 16, 16] and conv["n_children"] == 0
    assert conv["grad_norm"] == pytest.approx(
        np.linalg.norm(stored(run, run.conv) * 0.01), rel=1e-5
    )


def test_call_inlines_tensor_entries_with_their_gradient_and_the_path(client, run):
    call = client.call("call", run=run.name, batch=0, call=run.conv_call)
    assert call["path"] == [run.model_call]
    out = call["outputs"][0]["entry"]
    assert out["id"] == run.conv and out["grad_entry"]["of"] == run.conv
    assert call["inputs"][1] == {"name": "dim", "repr": "1"}


def test_call_that_does_not_exist_is_404(client, run):
    with pytest.raises(AgentError) as e:
        client.call("call", run=run.name, batch=0, call=999)
    assert e.value.status == 404


def test_find_matches_name_or_class_in_any_case(client, run):
    found = client.call("find", run=run.name, batch=0, query="CONV")
    assert [f["name"] for f in found] == ["features.0"] and found[0]["path"] == [run.model_call]
    assert len(client.call("find", run=run.name, batch=0, query="model.")) == 2


def test_find_by_kind_lists_every_call_of_that_kind_in_call_order(client, run):
    """The Explore filter's question: the agent picks the kind, so a deep model's loss call
    is found wherever it is, and only the hits cross the link."""
    every = client.call("layers", run=run.name, batch=0, limit=5000)["rows"]
    for kind in ("module", "function", "loss"):
        found = client.call("find", run=run.name, batch=0, query="", kind=kind, limit=5000)
        assert [f["id"] for f in found] == [r["id"] for r in every if r["kind"] == kind]
        assert found and all(f["kind"] == kind and "path" in f for f in found)
    (first,) = client.call("find", run=run.name, batch=0, query="", kind="module", limit=1)
    assert first["id"] == next(r["id"] for r in every if r["kind"] == "module")


def test_layers_sort_by_a_column_with_missing_values_last(client, run):
    rows = client.call("layers", run=run.name, batch=0, sort="bwd_ms", desc=True)["rows"]
    values = [r["bwd_ms"] for r in rows]
    assert values[:4] == [8.0, 3.0, 2.0, 0.4] and values[-2:] == [None, None]
    assert {r["kind"] for r in rows} == {"module", "function", "loss"}


def test_layers_pages_are_slices_of_one_order_and_locate_finds_a_row(client, run):
    whole = client.call("layers", run=run.name, batch=0, sort="std", desc=True)["rows"]
    first = client.call("layers", run=run.name, batch=0, sort="std", desc=True, limit=2)
    rest = client.call("layers", run=run.name, batch=0, sort="std", desc=True, offset=2)
    assert first["rows"] + rest["rows"] == whole and first["total"] == len(whole)
    assert sorted(r["layer"] for r in whole) == list(range(1, len(whole) + 1))
    target = whole[3]["id"]
    found = client.call("layers", run=run.name, batch=0, sort="std", desc=True, locate=target)
    assert found["located"] == 3
    assert client.call("layers", run=run.name, batch=0, locate=10**6)["located"] is None


def test_layers_refuse_an_unknown_sort_key(client, run):
    with pytest.raises(AgentError) as e:
        client.call("layers", run=run.name, batch=0, sort="bogus")
    assert e.value.status == 400


def test_timeline_has_sequential_phases_and_approximate_backward_bars(client, run):
    tl = client.call("timeline", run=run.name, batch=0)
    phases = tl["phases"]
    assert [p["phase"] for p in phases] == ["data", "forward", "loss", "backward", "optimizer"]
    assert all(a["t1"] == b["t0"] for a, b in zip(phases, phases[1:], strict=False))
    backward = [b for b in tl["bars"] if b["lane"] == "backward"]
    assert backward and all(b["approx"] for b in backward)
    assert min(b["t0"] for b in backward) == phases[3]["t0"]
    assert not any(b["approx"] for b in tl["bars"] if b["lane"] == "forward")


def test_tensor_returns_the_entry_with_its_gradient(client, run):
    entry = client.call("tensor", run=run.name, batch=0, tensor=run.conv)
    assert entry["shape"] == [BATCH, 8, 16, 16] and entry["grad_entry"]["shape"] == entry["shape"]


def test_view_is_the_block_mean_of_the_followed_sample(client, run):
    view = client.call(
        "view", run=run.name, batch=0, tensor=run.conv, sample=2, index=[5], width=4, height=8
    )
    plane = stored(run, run.conv)[2, 5].astype(np.float64)
    expected = plane.reshape(8, 2, 4, 4).mean(axis=(1, 3))
    np.testing.assert_allclose(view["array"], expected, rtol=1e-5, atol=1e-6)
    assert view["shape"] == [16, 16] and view["downsampled"] and view["sample"] == 2


def test_view_of_the_gradient_reads_the_gradient(client, run):
    view = client.call(
        "view", run=run.name, batch=0, tensor=run.conv, grad=True, sample=0, width=16, height=16
    )
    np.testing.assert_allclose(view["array"], stored(run, run.conv)[0, 0] * 0.01, rtol=1e-6)


def test_view_follows_the_sample_of_a_sequence_first_tensor(client, run):
    view = client.call("view", run=run.name, batch=0, tensor=run.seq, sample=3)
    np.testing.assert_array_equal(view["array"], stored(run, run.seq)[:, 3, :])


def test_view_with_nan_and_inf_gives_finite_bounds(client, run):
    view = client.call(
        "view", run=run.name, batch=0, tensor=run.relu, sample=0, width=16, height=16
    )
    assert np.isnan(view["array"][0, 0]) and np.isinf(view["array"][0, 1])
    assert np.isfinite([view["lo"], view["hi"]]).all()


def test_view_of_a_sample_that_was_not_kept_is_404(client, run):
    assert (
        client.call("view", run=run.name, batch=0, tensor=run.capped, sample=1)["kept"] == "samples"
    )
    with pytest.raises(AgentError) as e:
        client.call("view", run=run.name, batch=0, tensor=run.capped, sample=3)
    assert e.value.status == 404 and "first 2" in e.value.message


def test_view_of_a_stats_only_tensor_is_404(client, run):
    with pytest.raises(AgentError) as e:
        client.call("view", run=run.name, batch=0, tensor=run.stats_only)
    assert e.value.status == 404 and "stats only" in e.value.message


def test_view_of_a_screenful_is_a_few_kilobytes(client, run):
    view = client.call(
        "view", run=run.name, batch=0, tensor=run.conv, sample=0, width=120, height=40
    )
    assert len(encode(view)) < 4096


def test_image_is_the_sample_un_normalized(client, run):
    image = client.call(
        "image", run=run.name, batch=0, tensor=run.image, sample=1, width=64, height=64
    )
    assert image["normalized"] and image["array"].dtype == np.uint8
    expected = np.round(run.pixels[1].transpose(1, 2, 0) * 255)
    np.testing.assert_allclose(image["array"], expected, atol=1)


def test_array_is_bounded_and_says_so(client, run):
    whole = client.call("array", run=run.name, batch=0, tensor=run.logits)
    np.testing.assert_array_equal(whole["array"], stored(run, run.logits))
    assert not whole["truncated"]
    part = client.call("array", run=run.name, batch=0, tensor=run.conv, max_elems=3000)
    assert part["truncated"] and part["array"].shape == (1, 8, 16, 16)
    assert part["shape"] == [BATCH, 8, 16, 16]


def test_step_and_param_views(client, run):
    step = client.call("step", run=run.name, step=0)
    names = [p["name"] for p in step["params"]]
    assert names == ["features.0.weight", "head.weight"] and step["step"]["batches"] == [0, 1]
    update = client.call(
        "param", run=run.name, step=0, name="head.weight", which="update", width=64, height=10
    )
    assert (
        update["array"].shape == (10, 64)
        and update["shape"] == [10, 2048]
        and update["which"] == "update"
    )
    with pytest.raises(AgentError):
        client.call("param", run=run.name, step=0, name="nope")


def test_array_of_a_step_tensor(client, run):
    record = client.call("step", run=run.name, step=0)["params"][0]
    out = client.call("array", run=run.name, step=0, tensor=record["update"])
    assert out["array"].shape == (8, 3, 3, 3)


def test_source_merges_line_annotations_over_batches(client, run):
    assert client.call("sources", run=run.name) == ["model.py", "train.py"]
    source = client.call("source", run=run.name, file="model.py")
    assert source["text"].startswith("line 1\n")
    (conv,) = source["lines"][12]
    assert conv["count"] == 2 and conv["batches"] == [0, 1] and conv["op"] == "conv2d"
    one = client.call("source", run=run.name, file="model.py", batch=1)
    assert one["lines"][12][0]["count"] == 1


def test_source_of_a_file_not_in_the_snapshot_is_404(client, run):
    with pytest.raises(AgentError) as e:
        client.call("source", run=run.name, file="/etc/passwd")
    assert e.value.status == 404


def test_samples_list_input_target_prediction_and_loss(client, run):
    samples = client.call("samples", run=run.name, batch=0)
    assert samples["batch_size"] == BATCH and len(samples["rows"]) == BATCH
    row = samples["rows"][2]
    assert row["input"] == {"kind": "image", "tensor": run.image}
    assert (row["target"], row["target_name"], row["loss"]) == (9, CLASSES[9], PER_SAMPLE[2])
    assert row["pred_name"] == CLASSES[row["pred"]] and row["p_target"] == 0.25


@pytest.mark.parametrize(
    "params",
    [
        {"batch": "0", "tensor": 1},
        {"batch": True, "tensor": 1},
        {"batch": 0, "tensor": 1.5},
        {"batch": 0, "tensor": 1, "index": ["a"]},
        {"batch": 0, "tensor": 1, "colour": "red"},
        {"batch": 0},
        {"batch": 0, "step": 0, "tensor": 1},
    ],
    ids=[
        "str",
        "bool-for-int",
        "float-for-int",
        "list-of-str",
        "unknown",
        "missing",
        "batch-and-step",
    ],
)
def test_bad_parameters_are_400(client, run, params):
    with pytest.raises(AgentError) as e:
        client.call("view", run=run.name, **params)
    assert e.value.status == 400


def test_unknown_method_is_400_and_lists_the_methods(client):
    with pytest.raises(AgentError) as e:
        client.call("drop_tables")
    assert e.value.status == 400 and "view" in e.value.message


def test_local_results_have_wire_types(client, run):
    view = client.call("view", run=run.name, batch=0, tensor=run.conv, sample=0)
    assert isinstance(view["array"], np.ndarray) and not view["array"].flags.writeable
    assert isinstance(view["shape"], list) and isinstance(view["lo"], float)


def test_twenty_threads_each_get_their_own_reply(client, run):
    def ask(i: int) -> tuple[int, np.ndarray]:
        out = client.call(
            "view", run=run.name, batch=i % 2, tensor=run.conv, sample=i % BATCH, index=[i % 8]
        )
        return i, out["array"]

    with ThreadPoolExecutor(20) as pool:
        results = list(pool.map(ask, range(20)))
    for i, array in results:
        np.testing.assert_allclose(array, stored(run, run.conv, i % 2)[i % BATCH, i % 8], rtol=1e-6)


def test_connect_refuses_a_local_folder_without_runs(tmp_path):
    with pytest.raises(AgentError) as e:
        connect(Target(path=str(tmp_path)))
    assert "no tvis runs" in e.value.message
    assert connect(Target(path=str(tmp_path)), allow_empty=True).info["runs"] == 0
